"""Speed of the paired per-item metric core (``certa.engine.core.stats.paired_metric``) on 10⁵ paired items, against a
straightforward reference, in one run.

    PYTHONPATH=. python3 bench/paired_metric.py                      # n = 100 000 items, B = 2 000
    PYTHONPATH=. python3 bench/paired_metric.py --items 20000 --repeats 3

Data (seed 20261124): 8 slices; a binary metric (baseline correct with probability 0.7, the subject's outcome
flipped on 5 % of the items, more often from correct to wrong) and an F1-like score in [0, 1] (subject
Beta(4, 2), baseline = subject − N(0.005, 0.1) clipped).

The components, everything the certificate needs: the 2×2 table, Tango's and Newcombe's intervals, the exact
McNemar test, Tango's non-inferiority test at a 1-point margin, the minimum detectable difference, the same
per slice with Holm's adjustment, the BCa interval of the F1 difference (B replicates) and its empirical-
Bernstein confidence sequence. Each is timed in-process after a warm-up (best of ``--repeats``, wall and
process CPU time over all threads; CPU is the figure a loaded shared machine disturbs least), and all of them
together in a fresh interpreter, from process start to exit (imports, the compiled bootstrap loaded from
Numba's on-disk cache, data, computation; goal < 2 s).

Reference, timed once per component: the same quantities the plain way: the table and the slices counted
with ``collections.Counter`` over the items, each Tango bound by ``scipy.optimize.brentq`` on T(Δ0) = ±z one
table at a time, the exact McNemar test by ``scipy.stats.binomtest``, Holm's adjustment by a loop, and the BCa
interval by ``scipy.stats.bootstrap`` (vectorised, batches of 100 replicates; its jackknife is O(n²)). Newcombe's
interval, the detectable difference and the confidence sequence have no such reference (the same call is
counted on both sides).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SEED = 20261124
MARGIN = 0.01
PIPELINE_GOAL_S = 2.0


def make_data(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    baseline = rng.random(n) < 0.7
    flip = rng.random(n) < np.where(baseline, 0.06, 0.03)
    f1_subject = rng.beta(4, 2, n)
    return {
        "subject": baseline ^ flip,
        "baseline": baseline,
        "labels": rng.integers(0, 8, n),
        "f1_subject": f1_subject,
        "f1_baseline": np.clip(f1_subject - rng.normal(0.005, 0.1, n), 0.0, 1.0),
    }


def certa_components(data: dict[str, np.ndarray], replicates: int) -> dict[str, Callable[[], object]]:
    from certa.engine.core.stats import paired_metric as pm

    table = pm.paired_table_from_outcomes(data["subject"], data["baseline"])
    return {
        "table": lambda: pm.paired_table_from_outcomes(data["subject"], data["baseline"]),
        "Tango interval": lambda: pm.tango_interval(table),
        "Newcombe interval": lambda: pm.newcombe_interval(table),
        "exact McNemar": lambda: pm.mcnemar_exact_test(table),
        "non-inferiority": lambda: pm.tango_noninferiority_test(table, MARGIN),
        "detectable diff.": lambda: pm.minimum_detectable_difference(table),
        "8 slices + Holm": lambda: pm.binary_slices(data["subject"], data["baseline"], data["labels"], margin=MARGIN),
        "BCa bootstrap": lambda: pm.bca_mean_difference(data["f1_subject"], data["f1_baseline"],
                                                        rng=np.random.default_rng(SEED), replicates=replicates),
        "conf. sequence": lambda: pm.anytime_mean_difference(data["f1_subject"], data["f1_baseline"]),
    }


def reference_components(data: dict[str, np.ndarray], replicates: int) -> dict[str, Callable[[], object]]:
    from scipy import optimize, stats

    z = stats.norm.ppf(0.975)

    def statistic(delta0: float, n10: int, n01: int, n: int) -> float:
        w = -n10 - n01 + (2 * n - n10 + n01) * delta0
        p01 = (math.sqrt(max(w * w + 8 * n * n01 * delta0 * (1 - delta0), 0.0)) - w) / (4 * n)
        return (n10 - n01 - n * delta0) / math.sqrt(max(n * (2 * p01 + delta0 * (1 - delta0)), 1e-300))

    def cells(counter: collections.Counter) -> tuple[int, int, int]:
        n10, n01 = counter[(True, False)], counter[(False, True)]
        return n10, n01, sum(counter.values())

    def tango(n10: int, n01: int, n: int) -> tuple[float, float]:
        estimate = (n10 - n01) / n
        return (optimize.brentq(lambda d: statistic(d, n10, n01, n) - z, -1 + 1e-12, estimate),
                optimize.brentq(lambda d: statistic(d, n10, n01, n) + z, estimate, 1 - 1e-12))

    def table() -> collections.Counter:
        return collections.Counter(zip(data["subject"].tolist(), data["baseline"].tolist()))

    def slices() -> list[tuple[object, ...]]:
        by_slice: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        for label, s, b in zip(data["labels"].tolist(), data["subject"].tolist(), data["baseline"].tolist()):
            by_slice[label][(s, b)] += 1
        rows = [cells(by_slice[label]) for label in sorted(by_slice)]
        p = [stats.norm.sf(statistic(-MARGIN, *row)) for row in rows]
        order = sorted(range(len(p)), key=p.__getitem__)
        holm, running = [0.0] * len(p), 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (len(p) - rank) * p[i]))
            holm[i] = running
        return [tango(*row) for row in rows] + holm

    overall = cells(table())
    d = data["f1_subject"] - data["f1_baseline"]
    return {
        "table": table,
        "Tango interval": lambda: tango(*overall),
        "exact McNemar": lambda: stats.binomtest(overall[0], overall[0] + overall[1], 0.5).pvalue,
        "non-inferiority": lambda: stats.norm.sf(statistic(-MARGIN, *overall)),
        "8 slices + Holm": slices,
        "BCa bootstrap": lambda: stats.bootstrap((d,), np.mean, n_resamples=replicates, method="BCa", batch=100,
                                                 vectorized=True, random_state=np.random.default_rng(SEED)),
    }


def best_times(repeats: int, fn: Callable[[], object]) -> tuple[float, float]:
    """(best wall time, best process CPU time, all threads) of ``repeats`` calls of ``fn``."""
    wall = cpu = math.inf
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - start_wall)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def fresh_interpreter_times(items: int, replicates: int) -> tuple[float, float]:
    """(wall, CPU) of ``--pipeline-only`` in a new process: interpreter start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--pipeline-only", "--items", str(items),
                    "--replicates", str(replicates)], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pipeline-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    data = make_data(args.items)
    if args.pipeline_only:
        for component in certa_components(data, args.replicates).values():
            component()
        return

    fresh = min(fresh_interpreter_times(args.items, args.replicates) for _ in range(3))
    ours = certa_components(data, args.replicates)
    for component in ours.values():                          # warm-up: imports, the Numba cache
        component()
    reference = reference_components(data, args.replicates)
    print(f"paired per-item metrics: n = {args.items:,} items, 8 slices, B = {args.replicates:,}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'':18s} {'certa wall':>11s} {'certa CPU':>10s} {'ref. wall':>10s} {'ref. CPU':>9s} {'CPU ratio':>9s}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for name, component in ours.items():
        wall, cpu = best_times(args.repeats, component)
        ref_wall, ref_cpu = best_times(1, reference[name]) if name in reference else (wall, cpu)
        for i, value in enumerate((wall, cpu, ref_wall, ref_cpu)):
            totals[i] += value
        ratio = f"{ref_cpu / cpu:8.1f}x" if name in reference else "    (same)"
        print(f"{name:18s} {wall:10.4f}s {cpu:9.4f}s {ref_wall:9.4f}s {ref_cpu:8.4f}s {ratio}")
    print(f"{'all (kernel)':18s} {totals[0]:10.4f}s {totals[1]:9.4f}s {totals[2]:9.4f}s {totals[3]:8.4f}s "
          f"{totals[3] / totals[1]:8.1f}x")
    verdict = "met" if fresh[0] < PIPELINE_GOAL_S else "NOT met"
    print(f"fresh interpreter, imports + data + all of the above: {fresh[0]:.3f} s wall, {fresh[1]:.3f} s CPU "
          f"(goal < {PIPELINE_GOAL_S:.0f} s wall: {verdict})")


if __name__ == "__main__":
    main()
