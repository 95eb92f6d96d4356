"""Speed and peak memory of ``paired.ppl_ratio`` through ``engine.run``, end to end, against scipy, in one run.

Each case runs in its own subprocess (fresh interpreter), so its peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is an honest per-case figure; "baseline" is the same process
doing everything except the timed call (interpreter + numpy + certa's engine and the bootstrap module, which
loads scipy.special + data); only the scipy case imports scipy.stats. "numba-floor" is a process that only
calls one trivial cached Numba function (run twice: the second reads the on-disk cache, as certa's kernels
are read), the floor of any process with a Numba kernel. "alloc MB" is the peak of what one timed call
allocates (``tracemalloc``, which numpy's buffers report to): the run's own working memory.

    PYTHONPATH=. python3 bench/paired_bootstrap.py                 # n = 10 000 windows, B = 10 000
    PYTHONPATH=. python3 bench/paired_bootstrap.py --repeats 7 --cases stage-1.1.0-uniform,scipy-batch500

Data: baseline mean NLL 2 + Gamma(4, 0.25), subject = baseline + N(0.01, 0.1) + Exp(0.02) per window, token
counts U{64..2047}, seed 20261121; both arms passed to ``engine.run`` as in-memory tables (the engine hashes
their canonical CSV bytes, pairs the windows by id, bootstraps, builds the certificate; no ledger).
The scipy reference is ``scipy.stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True,
method='BCa', batch=500)`` on the same paired deltas and token counts (the ``uniform`` scheme's statistic).

Timing: ``--repeats`` calls per case after one untimed warm-up call (which loads numba and the compiled
kernels from the on-disk cache, or compiles them: reported as "first call"); the best and the median wall
time, and the median process CPU time (all threads). Speed-ups are scipy's time over certa's, best over best
(the wall figure least disturbed by other jobs on a shared machine), median over median, and CPU over CPU
(all threads: what the work costs, whatever the load; on two idle cores certa's 2-thread wall time is about
half its kernel CPU time plus the rest of the run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "baseline": "imports, engine, data; no run",
    "stage-1.1.0-uniform": "engine.run, paired.ppl_ratio@1.1.0, scheme uniform (compiled SFC64)",
    "stage-1.1.0-token_weighted": "engine.run, paired.ppl_ratio@1.1.0, scheme token_weighted (alias method)",
    "stage-1.1.0-uniform-1thread": "as stage-1.1.0-uniform on one thread (same certificate)",
    "stage-1.0.0-uniform": "engine.run, paired.ppl_ratio@1.0.0 (numpy PCG64 blocks), reference",
    "stage-1.0.0-token_weighted": "engine.run, paired.ppl_ratio@1.0.0, scheme token_weighted, reference",
    "kernel-1.1.0-uniform": "weighted_mean_bootstrap_ci only (1.1.0, uniform)",
    "kernel-1.1.0-token_weighted": "weighted_mean_bootstrap_ci only (1.1.0, token_weighted)",
    "scipy-batch500": "scipy.stats.bootstrap BCa, batch=500",
    "numba-floor": "python + numpy + one trivial cached Numba function called: the floor of any Numba process",
}

GOALS = {"stage-1.1.0-uniform": 25.0, "stage-1.1.0-token_weighted": 10.0}
MEMORY_GOAL_MB = 150.0

SPEC = """\
certa: 1
name: bench-paired
seed: 1
profile: dev
inputs:
  baseline: {{path: baseline.csv}}
  subject: {{path: subject.csv}}
stages:
  - id: ratio
    use: paired.ppl_ratio@{version}
    with: {{baseline: baseline, subject: subject, replicates: {replicates}, scheme: {scheme}}}
"""


def _data(n: int):
    import numpy as np

    g = np.random.default_rng(20261121)
    tokens = g.integers(64, 2048, n)
    base = 2.0 + g.gamma(4.0, 0.25, n)
    subj = base + g.normal(0.01, 0.1, n) + g.exponential(0.02, n)
    ids = [f"w{i:06d}" for i in range(n)]
    inputs = {"baseline": {"window_id": ids, "tokens": tokens, "mean_nll": base},
              "subject": {"window_id": ids, "tokens": tokens, "mean_nll": subj}}
    return inputs, subj - base, tokens.astype(np.float64)


def run_case(case: str, n: int, replicates: int, repeats: int) -> dict:
    """Run one case in this process and return its figures (called in the subprocess)."""
    import resource
    import tracemalloc

    import numpy as np

    if case == "numba-floor":
        return _numba_floor()

    import engine
    from engine.core.stats.bootstrap import weighted_mean as bootstrap

    inputs, d, t = _data(n)

    def weighted_mean(d, t, axis=-1):
        return (t * d).sum(axis) / t.sum(axis)

    if case.endswith("-1thread"):
        from engine.core.stats.kernels import compiled

        compiled.THREADS = 1

    def call():
        if case == "baseline":
            return None
        if case.startswith("stage-"):
            _, version, scheme = case.removesuffix("-1thread").split("-", 2)
            spec = SPEC.format(version=version, replicates=replicates, scheme=scheme)
            ci = engine.run(spec, inputs=inputs).certificate["content"]["stages"]["ratio"]["primary_metric"]["ci"]
            return ci[0], ci[1]
        if case.startswith("kernel-"):
            ci = bootstrap.weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1), replicates=replicates,
                                                      scheme=case.split("-", 2)[2])
            return ci.low, ci.high
        from scipy import stats  # only this case imports scipy.stats (75 MB resident)

        res = stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True, method="BCa",
                              n_resamples=replicates, batch=500, rng=np.random.default_rng(1))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    start = time.perf_counter()
    call()                                             # warm-up: numba import, kernel cache load or compile
    first = time.perf_counter() - start
    times, cpu, ci = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        ci = call()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)   # all threads of the process, user + system
    tracemalloc.start()  # numpy reports its buffers to tracemalloc: the run's own allocations, at their peak
    call()
    allocated = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"case": case, "seconds": statistics.median(times), "min_seconds": min(times), "first_seconds": first,
            "cpu_seconds": statistics.median(cpu), "peak_rss_mb": peak_kib * 1024 / 1e6, "ci": ci,
            "allocated_mb": allocated / 1e6}


_FLOOR_KERNEL = """
import numba

@numba.njit(cache=True, nogil=True)
def total(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s
"""


def _numba_floor() -> dict:
    """Peak RSS of a process that imports numpy and Numba and calls one trivial cached compiled loop: what
    any certa stage with a Numba kernel costs before its own data (the kernel module lives in a temporary
    folder, so its on-disk cache does too; the second process run reads it, as certa's kernels are read)."""
    import importlib
    import resource
    import tempfile

    import numpy as np

    folder = os.path.join(tempfile.gettempdir(), "certa-bench-numba-floor")
    os.makedirs(folder, exist_ok=True)
    source = os.path.join(folder, "floor_kernel.py")
    if not os.path.exists(source) or open(source, encoding="utf-8").read() != _FLOOR_KERNEL:
        with open(source, "w", encoding="utf-8") as handle:  # rewritten only when changed: Numba's cache
            handle.write(_FLOOR_KERNEL)                       # is keyed on the file's modification time
    sys.path.insert(0, folder)
    start = time.perf_counter()
    importlib.import_module("floor_kernel").total(np.ones(10))
    first = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"case": "numba-floor", "seconds": first, "min_seconds": first, "first_seconds": first, "cpu_seconds": 0.0,
            "peak_rss_mb": peak_kib * 1024 / 1e6, "ci": None, "allocated_mb": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="paired windows")
    parser.add_argument("--replicates", type=int, default=10_000, help="bootstrap replicates B")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per case (best and median reported)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES))
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case and print JSON
    args = parser.parse_args()

    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.replicates, args.repeats)))
        return

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results = {}
    for case in args.cases.split(","):
        for _ in range(2 if case == "numba-floor" else 1):  # numba-floor: the second run reads the cache
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", case, "--n", str(args.n),
                               "--replicates", str(args.replicates), "--repeats", str(args.repeats)],
                                  capture_output=True, text=True, env=env, check=True)
        results[case] = json.loads(proc.stdout.strip().splitlines()[-1])

    print(f"paired.ppl_ratio end to end: n = {args.n} windows, B = {args.replicates} replicates, BCa 95%, "
          f"best and median of {args.repeats} calls after a warm-up, one subprocess per case ({os.cpu_count()} CPUs)")
    print(f"load average (1, 5, 15 min) before: {load_before}; after: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg())
          + " (other jobs inflate wall times, the 2-thread cases most)")
    print(f"{'case':<28} {'best s':>7} {'median s':>9} {'CPU s':>7} {'first s':>8} {'peak RSS MB':>12} "
          f"{'alloc MB':>9}  CI")
    for case, r in results.items():
        ci = "" if r["ci"] is None else f"[{r['ci'][0]:.8f}, {r['ci'][1]:.8f}]"
        print(f"{case:<28} {r['min_seconds']:7.3f} {r['seconds']:9.3f} {r['cpu_seconds']:7.3f} "
              f"{r['first_seconds']:8.3f} {r['peak_rss_mb']:12.1f} {r['allocated_mb']:9.1f}  {ci}")
    print("alloc MB: peak of the memory one call allocates (tracemalloc, numpy buffers included); peak RSS: the "
          "whole process, libraries included")
    ref = results.get("scipy-batch500")
    if ref:
        for case, r in results.items():
            if case in ("scipy-batch500", "baseline", "numba-floor"):
                continue
            best, median = ref["min_seconds"] / r["min_seconds"], ref["seconds"] / r["seconds"]
            cpu = ref["cpu_seconds"] / r["cpu_seconds"]
            goal = GOALS.get(case)
            verdict = "" if goal is None else f"   goal >= {goal:g}x: {'met' if best >= goal else 'NOT met'} (best)"
            print(f"speed-up {case:<28} vs scipy batch=500: best {best:5.1f}x, median {median:5.1f}x, "
                  f"CPU {cpu:5.1f}x{verdict}")
    base = results.get("baseline")
    for case in GOALS:
        if case in results:
            peak = results[case]["peak_rss_mb"]
            extra = "" if base is None else f" ({peak - base['peak_rss_mb']:+.1f} MB over the baseline process)"
            print(f"peak RSS {case}: {peak:.1f} MB{extra}, of which the run allocates "
                  f"{results[case]['allocated_mb']:.1f} MB; goal <= {MEMORY_GOAL_MB:g} MB: "
                  f"{'met' if peak <= MEMORY_GOAL_MB else 'NOT met'}")
    if "numba-floor" in results:
        print(f"floor: a process that calls one trivial cached Numba function peaks at "
              f"{results['numba-floor']['peak_rss_mb']:.1f} MB (numpy, Numba, llvmlite and LLVM's code)")


if __name__ == "__main__":
    main()
