"""Do the example certificates depend on the CPU's optional SIMD features? Run each one with them disabled.

Usage: python bench/simd.py [--isolated] [--spec NAME ...] [--config NAME ...] [--max-diffs 10] [--json OUT]

numpy chooses many ufunc loops (exp, log, power, add, ...) and its sorts by CPU at run time; the compiled
Numba kernels are compiled for the host CPU; glibc's libm picks FMA/AVX variants of exp, log, pow, sin, ...
through ifuncs. Each configuration below runs every example spec (``specs/*/spec.yaml``, but a served model's,
which needs its server) in a child process with ``engine.run(path)`` and no ledger, and compares the RFC 8785
canonical JSON of the certificate's ``content`` minus ``versions`` with the default environment's, byte for byte:

- ``default``: the environment as it is.
- ``numpy-all``: ``NPY_DISABLE_CPU_FEATURES`` = every optional feature numpy reports as found on this
  machine (its dispatch targets that the CPU has; on numpy 2.4 / x86-64 the grouped names ``X86_V3``,
  ``X86_V4``, ``AVX512_ICL``, ...: the individual names ``AVX2``, ``FMA3``, ``AVX512F`` are not dispatch
  targets any more and numpy ignores them with an ``ImportWarning``; the baseline ``X86_V2`` is a
  ``RuntimeError`` at import).
- ``numpy-<FEATURE>``: each found feature alone.
- ``numba-generic``: ``NUMBA_CPU_NAME=generic`` alone (Numba then also uses no extra CPU features).
- ``glibc``: ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F`` alone (libm's SSE2
  variants), when this glibc honours it (x86-64, glibc >= 2.33 names; probed first).
- ``numpy-all+numba-generic`` and ``numpy-all+numba-generic+glibc``: everything at once.

The child proves that each setting took effect and the bench refuses a configuration where it did not:
numpy's runtime flags of its dispatch targets (``numpy._core._multiarray_umath.__cpu_features__``) and
the target each traced ufunc loop runs (``__cpu_targets_info__``, what ``numpy.lib.introspect.
opt_func_info`` shows), Numba's code-generation target (``codegen.magic_tuple()``: CPU name and features),
and glibc's "active" CPU feature bits (``__x86_get_cpuid_feature_leaf``, what libm's ifunc resolvers read).

Compiled Numba code is cached in ``<tmp>/certa-simd-numba-cache`` (``NUMBA_CACHE_DIR``), keyed by target
CPU and features, so this bench writes nothing inside the repository; the first run compiles the kernels
once per target (a few seconds each).

The table gives, per spec and configuration, ``identical`` or the number of JSON leaves that differ, then
the differing paths with both values (and their distance in units in the last place for floats).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import OFFLINE_EXAMPLES  # noqa: E402

SPECS = [ROOT / "specs" / name / "spec.yaml" for name in OFFLINE_EXAMPLES]  # a served example needs its server
GLIBC_TUNABLE = "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F"
NUMBA_CACHE = Path(tempfile.gettempdir()) / "certa-simd-numba-cache"

# What the child reports about glibc: the x86 feature bits libm's ifunc resolvers test. Index into
# ``__x86_get_cpuid_feature_leaf``: (leaf, register, bit) as in <bits/platform/x86.h>
# (leaf 0 = CPUID 1, leaf 1 = CPUID 7; registers eax, ebx, ecx, edx).
GLIBC_BITS = {"AVX": (0, 2, 28), "FMA": (0, 2, 12), "AVX2": (1, 1, 5), "AVX512F": (1, 1, 16)}

CHILD = r"""
import ctypes, json, os, sys, time
root, specs = sys.argv[1], sys.argv[2:]
sys.path.insert(0, root)
os.chdir(root)
GLIBC_BITS = %(glibc_bits)r

from numpy._core import _multiarray_umath as umath
loops = {}
for func, signatures in umath.__cpu_targets_info__.items():
    for signature, target in signatures.items():
        loops[func + ":" + signature] = target["current"]
baseline_loops = [k for k, v in loops.items() if v.startswith("baseline")]
info = {
    "NPY_DISABLE_CPU_FEATURES": os.environ.get("NPY_DISABLE_CPU_FEATURES"),
    "numpy_dispatch_targets": {t: bool(umath.__cpu_features__.get(t)) for t in umath.__cpu_dispatch__},
    "numpy_loops": len(loops),
    "numpy_loops_baseline": len(baseline_loops),
    "numpy_loops_sample": {k: loops[k] for k in ("exp:dd", "log:dd", "power:ddd", "add:ddd", "multiply:ddd",
                                                  "expm1:dd", "log1p:dd") if k in loops},
}
try:
    libc = ctypes.CDLL(None)
    leaf = libc.__x86_get_cpuid_feature_leaf
    leaf.restype = ctypes.POINTER(ctypes.c_uint * 8)
    libc.gnu_get_libc_version.restype = ctypes.c_char_p
    glibc = {"version": libc.gnu_get_libc_version().decode(), "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES")}
    for name, (index, register, bit) in GLIBC_BITS.items():
        words = leaf(index).contents
        glibc[name] = {"present": bool(words[register] >> bit & 1), "active": bool(words[4 + register] >> bit & 1)}
except (AttributeError, OSError) as exc:
    glibc = {"unavailable": repr(exc)}
info["glibc"] = glibc

from certa import engine
from certa.engine.foundation.canonical import canonical_bytes
results = {}
for spec in specs:
    t0 = time.perf_counter()
    result = engine.run(spec)
    content = dict(result.certificate["content"])
    content.pop("versions", None)
    decisions = [{"stage": d.stage, "kind": d.decision.kind, "detail": d.decision.detail}
                 for d in getattr(result, "decisions", ())]
    results[spec] = {"canonical": canonical_bytes(content).decode("utf-8"),
                     "decisions": canonical_bytes(decisions).decode("utf-8"), "seconds": time.perf_counter() - t0}

import numba.core.config
from numba.core.registry import cpu_target
triple, cpu, features = cpu_target.target_context.codegen().magic_tuple()
info["numba"] = {"NUMBA_CPU_NAME": numba.core.config.CPU_NAME, "cpu": cpu,
                 "features_enabled": sorted(f[1:] for f in features.split(",") if f.startswith("+")),
                 "svml": bool(numba.core.config.USING_SVML)}
print(json.dumps({"info": info, "results": results}))
""" % {"glibc_bits": GLIBC_BITS}


def found_features() -> list[str]:
    """numpy's dispatch targets that this CPU has (``show_config()``'s "SIMD Extensions: found")."""
    from numpy._core import _multiarray_umath as umath
    return [t for t in umath.__cpu_dispatch__ if umath.__cpu_features__.get(t)]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES", "NUMBA_CPU_NAME",
                        "NUMBA_CPU_FEATURES", "GLIBC_TUNABLES")}
    env["NUMBA_CACHE_DIR"] = str(NUMBA_CACHE)
    env["PYTHONHASHSEED"] = "0"
    return env


def glibc_tunable_works() -> bool:
    """Whether this glibc honours GLIBC_TUNABLE (FMA and AVX2 present but no longer active)."""
    code = CHILD.split("from certa import engine")[0] + "print(json.dumps(info['glibc']))"
    env = clean_env() | {"GLIBC_TUNABLES": GLIBC_TUNABLE}
    done = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return False
    glibc = json.loads(done.stdout)
    return all(glibc.get(f, {}).get("present") and not glibc[f]["active"] for f in ("FMA", "AVX2"))


def configurations(features: list[str], glibc: bool) -> dict[str, dict[str, str]]:
    every = " ".join(features)
    configs: dict[str, dict[str, str]] = {"default": {}}
    configs["numpy-all"] = {"NPY_DISABLE_CPU_FEATURES": every}
    for feature in features:
        configs[f"numpy-{feature}"] = {"NPY_DISABLE_CPU_FEATURES": feature}
    configs["numba-generic"] = {"NUMBA_CPU_NAME": "generic"}
    if glibc:
        configs["glibc"] = {"GLIBC_TUNABLES": GLIBC_TUNABLE}
    configs["numpy-all+numba-generic"] = {"NPY_DISABLE_CPU_FEATURES": every, "NUMBA_CPU_NAME": "generic"}
    if glibc:
        configs["numpy-all+numba-generic+glibc"] = configs["numpy-all+numba-generic"] | {"GLIBC_TUNABLES":
                                                                                         GLIBC_TUNABLE}
    return configs


def check_disabled(settings: dict[str, str], info: dict[str, Any], features: list[str]) -> list[str]:
    """Problems with how the child's environment took effect (empty: everything asked for is disabled)."""
    problems = []
    disabled = set((settings.get("NPY_DISABLE_CPU_FEATURES") or "").split())
    for feature in features:
        if info["numpy_dispatch_targets"].get(feature) == (feature in disabled):
            problems.append(f"numpy {feature} is {'enabled' if feature in disabled else 'disabled'}")
    if disabled >= set(features) and info["numpy_loops_baseline"] != info["numpy_loops"]:
        problems.append(f"{info['numpy_loops'] - info['numpy_loops_baseline']} numpy loops not on baseline")
    numba = info.get("numba", {})
    if "NUMBA_CPU_NAME" in settings and (numba.get("cpu") != "generic" or numba.get("features_enabled")):
        problems.append(f"numba targets {numba.get('cpu')} {numba.get('features_enabled')}")
    if "NUMBA_CPU_NAME" not in settings and numba.get("cpu") == "generic":
        problems.append("numba targets generic")
    glibc = info["glibc"]
    if "GLIBC_TUNABLES" in settings:
        for name in ("AVX", "FMA", "AVX2", "AVX512F"):
            if glibc.get(name, {}).get("active"):
                problems.append(f"glibc {name} still active")
    return problems


def run_child(specs: list[Path], settings: dict[str, str]) -> tuple[dict[str, Any], float]:
    env = clean_env() | settings
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-W", "always::ImportWarning", "-c", CHILD, str(ROOT),
                           *map(str, specs)], capture_output=True, text=True, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"child failed ({settings}):\n{done.stderr}")
    warnings = [line for line in done.stderr.splitlines() if "CPU feature" in line]
    if warnings:
        raise SystemExit(f"numpy did not accept {settings}: {done.stderr}")
    return json.loads(done.stdout.splitlines()[-1]), elapsed


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= leaves(item, f"{path}.{key}" if path else key)
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out |= leaves(item, f"{path}[{index}]")
        return out
    return {path: value}


def ulps(a: float, b: float) -> int:
    def ordered(x: float) -> int:
        bits = struct.unpack("<q", struct.pack("<d", x))[0]
        return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)
    return abs(ordered(a) - ordered(b))


def differences(reference: str, other: str) -> list[tuple[str, Any, Any]]:
    a, b = leaves(json.loads(reference)), leaves(json.loads(other))
    return [(path, a.get(path, "<missing>"), b.get(path, "<missing>")) for path in sorted(set(a) | set(b))
            if a.get(path, "<missing>") != b.get(path, "<missing>")
            or type(a.get(path)) is not type(b.get(path))]


def describe(path: str, a: Any, b: Any) -> str:
    text = f"    {path}: {a!r} -> {b!r}"
    if isinstance(a, float) and isinstance(b, float) and math.isfinite(a) and math.isfinite(b):
        text += f"  ({ulps(a, b)} ulp)"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--isolated", action="store_true", help="one child process per spec (default: one "
                        "child per configuration runs all specs)")
    parser.add_argument("--spec", action="append", help="only specs whose folder name is this")
    parser.add_argument("--config", action="append", help="only these configurations (default is always run)")
    parser.add_argument("--max-diffs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write all results and child reports here")
    args = parser.parse_args()

    specs = [s for s in SPECS if not args.spec or s.parent.name in args.spec]
    features = found_features()
    glibc = glibc_tunable_works()
    configs = configurations(features, glibc)
    if args.config:
        configs = {k: v for k, v in configs.items() if k == "default" or k in args.config}
    import numpy
    print(f"numpy {numpy.__version__}; found optional SIMD features: {' '.join(features) or '(none)'}; "
          f"glibc tunable {GLIBC_TUNABLE!r}: {'honoured' if glibc else 'NOT honoured (skipped)'}")

    started = time.perf_counter()
    outcome: dict[str, dict[str, Any]] = {}
    for name, settings in configs.items():
        batches = [[s] for s in specs] if args.isolated else [specs]
        results: dict[str, Any] = {}
        infos, elapsed = [], 0.0
        for batch in batches:
            report, seconds = run_child(batch, settings)
            results |= report["results"]
            infos.append(report["info"])
            elapsed += seconds
        problems = sorted({p for info in infos for p in check_disabled(settings, info, features)})
        info = infos[0]
        print(f"\n[{name}] {' '.join(f'{k}={v!r}' for k, v in settings.items()) or '(environment as is)'}"
              f"  child {elapsed:.1f} s")
        print(f"  numpy dispatch targets {info['numpy_dispatch_targets']}; loops on baseline "
              f"{info['numpy_loops_baseline']}/{info['numpy_loops']}; {info['numpy_loops_sample']}")
        numba = info.get("numba", {})
        print(f"  numba cpu {numba.get('cpu')} with {len(numba.get('features_enabled', []))} features "
              f"(avx2 {'avx2' in numba.get('features_enabled', [])}, fma {'fma' in numba.get('features_enabled', [])}"
              f", avx512f {'avx512f' in numba.get('features_enabled', [])}); svml {numba.get('svml')}")
        print(f"  glibc {info['glibc']}")
        if problems:
            raise SystemExit(f"configuration {name} did not take effect: {problems}")
        outcome[name] = {"settings": settings, "info": infos, "results": results, "seconds": elapsed}
    total = time.perf_counter() - started

    reference = outcome["default"]["results"]
    names = [n for n in configs if n != "default"]
    width = max(len(s.parent.name) for s in specs) + 2
    for part, title in (("canonical", "certificate content minus versions"),
                        ("decisions", "ledger decisions (what a ledger would record besides the certificate)")):
        print(f"\n{title}, against default:\n" + "spec".ljust(width) + " | ".join(names))
        details = []
        for spec in specs:
            cells = []
            for name in names:
                mine, theirs = reference[str(spec)][part], outcome[name]["results"][str(spec)][part]
                diffs = differences(mine, theirs)
                if part == "decisions":  # name each decision: [index stage/kind]
                    labels = [f"[{i} {d['stage']}/{d['kind']}]" for i, d in enumerate(json.loads(mine))]
                    diffs = [(labels[int(q[1:q.index("]")])] + q[q.index("]") + 1:]
                              if q.startswith("[") and int(q[1:q.index("]")]) < len(labels) else q, a, b)
                             for q, a, b in diffs]
                same = mine == theirs
                cells.append("identical".center(len(name)) if same and not diffs
                             else f"{len(diffs)} fields differ".center(len(name)))
                if diffs or not same:
                    details.append((spec.parent.name, name, diffs))
            print(spec.parent.name.ljust(width) + " | ".join(cells))
        for spec_name, name, diffs in details:
            print(f"\n{spec_name} under {name}: {len(diffs)} differing {part} fields (default -> {name})")
            for path, a, b in diffs[:args.max_diffs]:
                print(describe(path, a, b))
            if len(diffs) > args.max_diffs:
                print(f"    ... and {len(diffs) - args.max_diffs} more")
    print(f"\n{len(configs)} configurations x {len(specs)} specs in {total:.1f} s"
          f"{' (one child per spec)' if args.isolated else ' (one child per configuration)'}")
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=1))


if __name__ == "__main__":
    main()
