"""The example certificates do not depend on the CPU's optional SIMD features (measured by bench/simd.py).

numpy picks many ufunc loops (exp, log, log1p, power, add, ...) and its sorts by CPU at run time, Numba
compiles the bake-off kernels for the host CPU, and glibc's libm picks FMA/AVX variants of exp, log, pow, ...
through ifuncs. The test runs every example spec (``specs/*/spec.yaml``; the model examples need the ``models`` extra) in two child processes, one
with the environment as it is and one with

* ``NPY_DISABLE_CPU_FEATURES`` = every optional feature numpy reports as found on this machine (its
  dispatch targets the CPU has, e.g. ``X86_V3 X86_V4 AVX512_ICL`` with numpy 2.4 on an AVX-512 machine),
* ``NUMBA_CPU_NAME=generic`` (Numba then also enables no extra CPU features), and
* ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F`` (libm's SSE2 variants; x86-64 only),

and compares the RFC 8785 canonical JSON of each certificate's ``content`` minus ``versions``, and of the
ledger decisions each run makes (``sequential_check`` rows with their p-values, bake-off decision rows,
...). Nothing is exempt: every byte must agree. Each child reports what really took effect, and the test
fails when a setting did not (numpy's runtime flags and the target of every traced ufunc loop, Numba's
code-generation target, glibc's active CPU feature bits), so it cannot pass vacuously. It is skipped only
on a machine where numpy has no optional feature to disable.

History: ``sequential.diff`` 1.0.0 computes exp, log, log1p and logaddexp with numpy's ufuncs, whose
AVX-512F kernels round differently from the libm loops numpy uses without them (by 1 ulp, for about 1 % of
log1p and 5 % of exp arguments). On an AVX-512 machine its ``results.p_value`` and ``results.e_value`` of
the example's ``finetune`` stage (and the p-values of its ``sequential_check`` decisions) moved by 8 and
16 ulp with numpy's X86_V4 loops disabled. Version 1.1.0, which the examples run, takes those functions
from libm in compiled loops (``engine/core/stats/kernels/libm.py``) and does not move. To show the comparison is not
vacuous, each child also runs the example's ``finetune`` stage pinned to 1.0.0: on a machine with numpy's
X86_V4 loops that run must move, and the test says so if it does not.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, RUNNABLE_EXAMPLES

SPECS = [ROOT / "specs" / example / "spec.yaml" for example in RUNNABLE_EXAMPLES]
GLIBC_TUNABLE = "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F"

# The child: proofs first (numpy is imported with ImportWarning as an error, so a feature name numpy
# ignores fails the import), then every spec; prints one JSON object.
CHILD = r"""
import ctypes, json, os, re, sys, warnings
root, specs = sys.argv[1], sys.argv[2:]
sys.path.insert(0, root)
os.chdir(root)
warnings.simplefilter("error", ImportWarning)
from numpy._core import _multiarray_umath as umath
warnings.resetwarnings()
loops = [t["current"] for signatures in umath.__cpu_targets_info__.values() for t in signatures.values()]
info = {"targets": {t: bool(umath.__cpu_features__.get(t)) for t in umath.__cpu_dispatch__},
        "loops": len(loops), "baseline_loops": sum(t.startswith("baseline") for t in loops)}
try:  # glibc's active x86 feature bits (what libm's ifunc resolvers test): FMA = CPUID 1 ECX 12, AVX2 = 7 EBX 5
    leaf = ctypes.CDLL(None).__x86_get_cpuid_feature_leaf
    leaf.restype = ctypes.POINTER(ctypes.c_uint * 8)
    info["glibc"] = {name: {"present": bool(leaf(i).contents[r] >> b & 1),
                            "active": bool(leaf(i).contents[4 + r] >> b & 1)}
                     for name, (i, r, b) in {"FMA": (0, 2, 12), "AVX2": (1, 1, 5)}.items()}
except (AttributeError, OSError):
    info["glibc"] = None
from certa import engine
from certa.engine.foundation.canonical import canonical_bytes


def outcome(result):
    content = dict(result.certificate["content"])
    content.pop("versions", None)
    decisions = [{"stage": d.stage, "kind": d.decision.kind, "detail": d.decision.detail} for d in result.decisions]
    return {"content": canonical_bytes(content).decode("utf-8"), "decisions": canonical_bytes(decisions).decode("utf-8")}
contents = {os.path.basename(os.path.dirname(spec)): outcome(engine.run(spec)) for spec in specs}
# the example's first stage (table input) alone, pinned to sequential.diff 1.0.0 (numpy's ufuncs)
folder = os.path.join(root, "specs", "sequential-diff")
text = open(os.path.join(folder, "spec.yaml"), encoding="utf-8").read().split("  - id: quantized")[0]
text = text.replace("use: sequential.diff\n", "use: sequential.diff@1.0.0\n")
text = re.sub(r"range: \[-0\.2, 0\.2\].*\n", "clip_low: 0.0\n      clip_high: 0.2\n", text)  # 1.x's knobs
assert "clip_high" in text
paths = {name: os.path.join(folder, "data", name + suffix) for name, suffix in
         (("finetune", "_scores.csv"), ("reference", "_logprobs.csv"), ("quantized", "_logprobs.csv"))}
contents["sequential-diff@1.0.0"] = outcome(engine.run(text, input_paths=paths))
from numba.core.registry import cpu_target
_, cpu, features = cpu_target.target_context.codegen().magic_tuple()
info["numba"] = {"cpu": cpu, "features": [f for f in features.split(",") if f.startswith("+")]}
print(json.dumps({"info": info, "contents": contents}))
"""


def _found_features() -> list[str]:
    from numpy._core import _multiarray_umath as umath
    return [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]


def _start_child(settings: dict[str, str], numba_cache: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES", "NUMBA_CPU_NAME",
                        "NUMBA_CPU_FEATURES", "GLIBC_TUNABLES")}
    env |= {"NUMBA_CACHE_DIR": str(numba_cache), **settings}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(ROOT), *map(str, SPECS)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _run_children(*settings: dict[str, str], numba_cache: Path) -> list[dict]:
    """One child per ``settings``, all started at once (they are independent: on a two-core CI machine the two run
    side by side), each with its own Numba cache folder; their JSON reports in order."""
    children = [_start_child(one, numba_cache / str(i)) for i, one in enumerate(settings)]
    reports = []
    try:
        for one, child in zip(settings, children):
            out, err = child.communicate(timeout=300)
            assert child.returncode == 0, f"child failed with {one}:\n{err}"
            reports.append(json.loads(out.splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    return reports


@pytest.mark.slow
def test_examples_do_not_depend_on_optional_simd_features(tmp_path_factory):
    features = _found_features()
    if not features:
        pytest.skip("numpy reports no optional SIMD feature on this machine: nothing to disable")
    assert {s.parent.name for s in SPECS} >= {"paired-ratio", "sequential-diff", "vendor-bakeoff", "conformal-pac",
                                              "lm-eval-accuracy", "lm-eval-perplexity", "inspect-accuracy"}, SPECS
    numba_cache = tmp_path_factory.mktemp("numba-cache")
    disabled = {"NPY_DISABLE_CPU_FEATURES": " ".join(features), "NUMBA_CPU_NAME": "generic"}
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        disabled["GLIBC_TUNABLES"] = GLIBC_TUNABLE

    default, plain = _run_children({}, disabled, numba_cache=numba_cache)

    # the settings really took effect (and the default really used the features)
    assert all(default["info"]["targets"][t] for t in features), default["info"]["targets"]
    assert default["info"]["baseline_loops"] < default["info"]["loops"], "default child dispatched no SIMD loop"
    assert not any(plain["info"]["targets"][t] for t in features), plain["info"]["targets"]
    assert plain["info"]["baseline_loops"] == plain["info"]["loops"] > 0, plain["info"]
    assert default["info"]["numba"]["cpu"] != "generic" and default["info"]["numba"]["features"]
    assert plain["info"]["numba"] == {"cpu": "generic", "features": []}, plain["info"]["numba"]
    glibc = plain["info"]["glibc"]
    if "GLIBC_TUNABLES" in disabled and glibc is not None:
        for name, bits in glibc.items():
            assert not bits["active"], f"GLIBC_TUNABLES did not disable {name}: {glibc}"

    names = {s.parent.name for s in SPECS}
    assert set(default["contents"]) == set(plain["contents"]) == names | {"sequential-diff@1.0.0"}
    for spec in sorted(names):
        for part in ("content", "decisions"):
            what = "certificate content" if part == "content" else "ledger decisions"
            assert default["contents"][spec][part] == plain["contents"][spec][part], (
                f"{spec}: {what} differ with {disabled}; run python bench/simd.py for the fields")
    example = json.loads(default["contents"]["sequential-diff"]["content"])
    assert {s["version"] for s in example["knobs"]["stages"]} == {"3.2.0"}, example["knobs"]["stages"]

    # not vacuous: the same run at sequential.diff 1.0.0 (numpy's ufuncs) does move with numpy's AVX-512 loops
    old_default, old_plain = (json.loads(c["sequential-diff@1.0.0"]["content"]) for c in (default["contents"],
                                                                                          plain["contents"]))
    assert old_default["knobs"]["stages"][0]["version"] == "1.0.0", old_default["knobs"]["stages"]
    moved = {k for k in ("p_value", "e_value") if old_default["stages"]["finetune"]["results"][k]
             != old_plain["stages"]["finetune"]["results"][k]}
    if "X86_V4" in features:
        message = ("sequential.diff 1.0.0 no longer moves with numpy's X86_V4 loops disabled: this test may not "
                   "exercise them any more")
        assert moved == {"p_value", "e_value"}, (message, moved)
