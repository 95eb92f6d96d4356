"""Speed and peak memory of certa's paired token-weighted BCa bootstrap against scipy, in one run.

Each case runs in its own subprocess (fresh interpreter), so its peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is an honest per-case figure; "baseline" is the same
process doing everything except the bootstrap call (interpreter + numpy + scipy + data).

    PYTHONPATH=. python3 bench/paired_bootstrap.py                 # n = 10 000 windows, B = 10 000
    PYTHONPATH=. python3 bench/paired_bootstrap.py --n 2000 --replicates 2000 --repeats 5

Data: d_i ~ N(0.01, 0.1) + Exp(0.02) (per-window Δ log-loss), t_i ~ U{64..2047} tokens, seed 20261121.
Timing: the median (and minimum) wall time of ``--repeats`` calls inside the subprocess, each with a
fresh ``np.random.default_rng(1)``, and the median process CPU time (user + system, all threads: the
second stream's thread is counted, so CPU s ≥ wall s when they overlap). The scipy reference is
``scipy.stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True, method='BCa', batch=500)``;
"scipy-sameblocks" uses ``batch=resample_block_rows(n)`` and so draws the index stream of certa's
``streams=1`` case in the same calls (their CIs must be equal). certa's default draws two independent
index streams (``rng.spawn(2)``), one per thread; "certa-1thread" computes the same two streams on one
thread (its CI must equal "certa"'s).
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
    "baseline": "imports, data, no bootstrap",
    "certa": "certa uniform BCa (default: 2 index streams, 2 threads)",
    "certa-1thread": "certa uniform BCa, 2 index streams on 1 thread",
    "certa-1stream": "certa uniform BCa, streams=1 (scipy's index stream)",
    "certa-token-weighted": "certa token_weighted BCa (InvarLock scheme)",
    "scipy-batch500": "scipy.stats.bootstrap BCa, batch=500",
    "scipy-sameblocks": "scipy.stats.bootstrap BCa, batch=resample_block_rows(n)",
}


def _data(n: int):
    import numpy as np

    g = np.random.default_rng(20261121)
    d = g.normal(0.01, 0.1, n) + g.exponential(0.02, n)
    t = g.integers(64, 2048, n).astype(np.float64)
    return d, t


def run_case(case: str, n: int, replicates: int, repeats: int) -> dict:
    """Run one case in this process and return its figures (called in the subprocess)."""
    import resource

    import numpy as np
    from scipy import stats

    from engine.stats.bootstrap import resample_block_rows, weighted_mean_bootstrap_ci

    d, t = _data(n)

    def weighted_mean(d, t, axis=-1):
        return (t * d).sum(axis) / t.sum(axis)

    def call():
        rng = np.random.default_rng(1)
        if case == "baseline":
            return None
        if case.startswith("certa"):
            ci = weighted_mean_bootstrap_ci(
                d, t, rng=rng, replicates=replicates,
                scheme="token_weighted" if case == "certa-token-weighted" else "uniform",
                streams=1 if case == "certa-1stream" else 2, threads=1 if case == "certa-1thread" else None)
            return ci.low, ci.high
        batch = 500 if case == "scipy-batch500" else resample_block_rows(n)
        res = stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True, method="BCa",
                              n_resamples=replicates, batch=batch, rng=rng)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    times, cpu, ci = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        ci = call()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)   # all threads of the process, user + system
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"case": case, "seconds": statistics.median(times), "min_seconds": min(times),
            "cpu_seconds": statistics.median(cpu), "peak_rss_mib": peak_kib / 1024.0, "ci": ci}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="paired windows")
    parser.add_argument("--replicates", type=int, default=10_000, help="bootstrap replicates B")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case (median reported)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES))
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case and print JSON
    args = parser.parse_args()

    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.replicates, args.repeats)))
        return

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load_before = f"{os.getloadavg()[0]:.2f}"
    results = {}
    for case in args.cases.split(","):
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", case, "--n", str(args.n),
                               "--replicates", str(args.replicates), "--repeats", str(args.repeats)],
                              capture_output=True, text=True, env=env, check=True)
        results[case] = json.loads(proc.stdout.strip().splitlines()[-1])

    print(f"paired token-weighted BCa bootstrap: n = {args.n} windows, B = {args.replicates} replicates, "
          f"median of {args.repeats} calls, one subprocess per case ({os.cpu_count()} CPUs)")
    print(f"load average before the run: {load_before}; after: {os.getloadavg()[0]:.2f} "
          "(other processes on the machine inflate wall times; CPU seconds are less affected)")
    print(f"{'case':<22} {'wall s':>8} {'min wall':>9} {'CPU s':>7} {'peak RSS MiB':>13}  CI")
    for case, r in results.items():
        ci = "" if r["ci"] is None else f"[{r['ci'][0]:.8f}, {r['ci'][1]:.8f}]"
        print(f"{case:<22} {r['seconds']:8.3f} {r['min_seconds']:9.3f} {r['cpu_seconds']:7.3f} "
              f"{r['peak_rss_mib']:13.1f}  {ci}   ({CASES[case]})")
    ref = results.get("scipy-batch500")
    if ref:
        for case in ("certa", "certa-1thread", "certa-1stream", "certa-token-weighted"):
            if case in results:
                r = results[case]
                print(f"speed-up {case} vs scipy batch=500: wall {ref['seconds'] / r['seconds']:.1f}x "
                      f"(best of runs {ref['min_seconds'] / r['min_seconds']:.1f}x), "
                      f"CPU {ref['cpu_seconds'] / r['cpu_seconds']:.1f}x")
    for left, right, what in (("certa-1stream", "scipy-sameblocks", "certa streams=1 vs scipy, same index blocks"),
                              ("certa", "certa-1thread", "certa on 2 threads vs 1 thread")):
        if left in results and right in results:
            a, b = results[left]["ci"], results[right]["ci"]
            print(f"{what}: max |CI difference| = {max(abs(a[0] - b[0]), abs(a[1] - b[1])):.3g}")


if __name__ == "__main__":
    main()
