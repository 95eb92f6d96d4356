"""The example certificates do not depend on the CPU's optional SIMD features (measured by bench/simd.py).

numpy picks many ufunc loops (exp, log, log1p, power, add, ...) and its sorts by CPU at run time, Numba
compiles the bake-off kernels for the host CPU, and glibc's libm picks FMA/AVX variants of exp, log, pow, ...
through ifuncs. The test runs the four example specs (``specs/*/spec.yaml``) in two child processes, one
with the environment as it is and one with

* ``NPY_DISABLE_CPU_FEATURES`` = every optional feature numpy reports as found on this machine (its
  dispatch targets the CPU has, e.g. ``X86_V3 X86_V4 AVX512_ICL`` with numpy 2.4 on an AVX-512 machine),
* ``NUMBA_CPU_NAME=generic`` (Numba then also enables no extra CPU features), and
* ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F`` (libm's SSE2 variants; x86-64 only),

and compares the RFC 8785 canonical JSON of each certificate's ``content`` minus ``versions``. Each child
reports what really took effect, and the test fails when a setting did not (numpy's runtime flags and the
target of every traced ufunc loop, Numba's code-generation target, glibc's active CPU feature bits), so it
cannot pass vacuously. It is skipped only on a machine where numpy has no optional feature to disable.

Fields that move (``MOVING``; exempt from the byte comparison, checked to agree within 1e-12 relative):

* ``sequential-diff``: ``stages.finetune.results.p_value`` and ``stages.finetune.results.e_value`` move by
  8 and 16 ulp on an AVX-512 machine (numpy's X86_V4 loops disabled by ``X86_V3`` or ``X86_V4``). Cause:
  numpy's AVX-512F kernels of ``np.log1p`` / ``np.exp`` / ``np.log`` round differently from the libm
  loops numpy uses without them (by 1 ulp, for about 1 % of log1p and 5 % of exp arguments). They enter
  the hedged-betting e-process of stage ``sequential.diff`` (method ``betting``): the bet's time factor
  ``t * np.log1p(t)`` (``engine/stats/confseq_common.py``, ``_bet_time_factor``), ``np.log1p`` of the
  capital factors in ``hedged_log_evalue`` and ``np.exp`` in ``anytime_p_value``
  (``engine/stats/confseq_betting.py``), then ``np.exp`` of the e-value (``engine/stages/
  sequential_diff.py``, ``_outputs``). The ledger's ``sequential_check`` decisions of that stage (their
  ``p_value``) move with them. The confidence sequence of the same stage calls ``np.exp``/``np.log`` too
  (its bounds sit on a grid and did not move here). The quantized stage's fields did not move.

Everything else in the four certificates is byte-identical. When a new stage version evaluates those
functions without numpy's CPU-dispatched loops, drop its entry from ``MOVING``: the test then requires
byte identity for those fields too (a MOVING field that no longer moves is allowed, since on a CPU
without AVX-512 it never moves).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from engine.canonical import canonical_bytes

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(ROOT.glob("specs/*/spec.yaml"))
GLIBC_TUNABLE = "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F"
MOVING = {
    "sequential-diff": ("stages.finetune.results.p_value", "stages.finetune.results.e_value"),
}

# The child: proofs first (numpy is imported with ImportWarning as an error, so a feature name numpy
# ignores fails the import), then every spec; prints one JSON object.
CHILD = r"""
import ctypes, json, os, sys, warnings
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
import engine
from engine.canonical import canonical_bytes
contents = {}
for spec in specs:
    content = dict(engine.run(spec).certificate["content"])
    content.pop("versions", None)
    contents[os.path.basename(os.path.dirname(spec))] = canonical_bytes(content).decode("utf-8")
from numba.core.registry import cpu_target
_, cpu, features = cpu_target.target_context.codegen().magic_tuple()
info["numba"] = {"cpu": cpu, "features": [f for f in features.split(",") if f.startswith("+")]}
print(json.dumps({"info": info, "contents": contents}))
"""


def _found_features() -> list[str]:
    from numpy._core import _multiarray_umath as umath
    return [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]


def _run_child(settings: dict[str, str], numba_cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES", "NUMBA_CPU_NAME",
                        "NUMBA_CPU_FEATURES", "GLIBC_TUNABLES")}
    env |= {"NUMBA_CACHE_DIR": str(numba_cache), **settings}
    done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), *map(str, SPECS)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, f"child failed with {settings}:\n{done.stderr}"
    return json.loads(done.stdout.splitlines()[-1])


def _without(canonical: str, paths: tuple[str, ...]) -> tuple[bytes, dict[str, float]]:
    """The canonical bytes of ``canonical`` minus ``paths`` (dotted keys), and the removed values."""
    content = json.loads(canonical)
    removed = {}
    for path in paths:
        *parents, leaf = path.split(".")
        node = content
        for key in parents:
            node = node[key]
        assert leaf in node, f"{path} is not in the certificate any more: update MOVING"
        removed[path] = node.pop(leaf)
    return canonical_bytes(content), removed


@pytest.mark.slow
def test_examples_do_not_depend_on_optional_simd_features(tmp_path_factory):
    features = _found_features()
    if not features:
        pytest.skip("numpy reports no optional SIMD feature on this machine: nothing to disable")
    assert len(SPECS) == 4, [s.parent.name for s in SPECS]
    numba_cache = tmp_path_factory.mktemp("numba-cache")
    disabled = {"NPY_DISABLE_CPU_FEATURES": " ".join(features), "NUMBA_CPU_NAME": "generic"}
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        disabled["GLIBC_TUNABLES"] = GLIBC_TUNABLE

    default = _run_child({}, numba_cache)
    plain = _run_child(disabled, numba_cache)

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

    assert set(default["contents"]) == set(plain["contents"]) == {s.parent.name for s in SPECS}
    for spec, canonical in default["contents"].items():
        other = plain["contents"][spec]
        moving = MOVING.get(spec, ())
        mine, mine_moving = _without(canonical, moving)
        theirs, theirs_moving = _without(other, moving)
        assert mine == theirs, (f"{spec}: certificate content (minus versions and {list(moving)}) differs with "
                                f"{disabled}; run python bench/simd.py for the differing fields")
        for path, value in mine_moving.items():
            assert math.isclose(value, theirs_moving[path], rel_tol=1e-12), (spec, path, value, theirs_moving[path])
