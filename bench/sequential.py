"""Speed and sample efficiency of ``sequential.diff`` (issue 3).

Run: ``cd /work/main && PYTHONPATH=. python3 bench/sequential.py [throughput|versions|samples]`` (default: all)

1. Throughput: observations per second of each method on one 10^6-observation stream with a check after
   every observation (confidence sequence, p-value for mean = 0, rule states and first stop: the whole
   ``analyse_scores`` path, nothing stops early). Goals: >= 10^7/s for eb_cs and the fixed-n methods,
   >= 10^5/s for betting; the seed claims 40,000/s. Reference: a streaming loop written the seed's way
   (Welford update per observation, EB recomputed over the whole history at every check, O(n^2)) timed on
   the same kind of stream at n = 2,000 and 10,000.
2. Samples used: streams decided at once (2-D arrays), alpha = 0.01.
   a. expected samples E[N] until DIFFERENT (delta* = 0) or n_max per method, against the sample size a
      fixed-n two-sided t-test needs for the same power (noncentral t; power capped at 0.999);
   b. samples to the seed's DIFFERENT criterion (relative half-width <= rel_margin_target) per method:
      the seed's fixed-n EB rule against the anytime sequences (goal: betting >= 3x fewer).
3. Versions: the cost of ``sequential.diff`` 1.1.0 (exp/log/log1p by libm in compiled loops,
   ``certa.engine.core.stats.kernels.libm.LIBM``) and of 3.2.0 (from basic operations alone, ``PORTABLE``) against
   1.0.0 (numpy's CPU-dispatched ufuncs) for ``betting`` on the same 10^6 stream: the whole stage path, the hedged
   e-process alone (``hedged_log_evalue``) and the CS alone, each timed alternately (best of 7) so that every
   version sees the same machine load. The compiled loops are compiled (or loaded from Numba's cache) before
   timing.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import stats

from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages.sequential_diff import KERNELS, Analysis, analyse_scores
from certa.engine.core.stats.confseq.methods import BOUNDED_METHODS, CSSettings, confidence_sequence
from certa.engine.core.stats.confseq.betting import hedged_log_evalue
from certa.engine.core.stats.confseq.common import prefix_mean
from certa.engine.core.stats.confseq.decision import DecisionRules, all_zero_path, first_stop, rule_states

SCHEMA = load_schema("stages/sequential.diff.schema.json")
METHODS = ("betting", "eb_cs", "stitched", "asymptotic_cs", "eb_fixed_n", "t_fixed_n")


def knobs(**overrides) -> dict:
    """Resolved knobs of the newest version, on the seed's range [0, 0.2] unless ``range`` is given."""
    return fill_defaults({"input": "scores", "range": [0.0, 0.2], **overrides}, SCHEMA)


def analyse(x: np.ndarray, k: dict, **options) -> Analysis:
    """``analyse_scores`` on the range of ``k``."""
    return analyse_scores(x, k, tuple(k["range"]), **options)


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def seed_style_loop(x: np.ndarray, alpha: float, low: float, high: float) -> int:
    """The seed's streaming EB tester, checked after every observation (reference for speed only)."""
    n, mean, m2 = 0, 0.0, 0.0
    history: list[float] = []
    span = max(high - low, 1e-12)
    log_term = math.log(3.0 / alpha)
    stopped = 0
    for value in x.tolist():
        n += 1
        delta = value - mean
        mean += delta / n
        m2 += delta * (value - mean)
        history.append(min(max(value, low), high))
        if n < 2:
            continue
        ys = [(h - low) / span for h in history]                 # recomputed over the history at every check
        ybar = sum(ys) / n
        var_y = sum((y - ybar) ** 2 for y in ys) / (n - 1)
        half = (math.sqrt(2 * var_y * log_term / n) + 3 * log_term / max(n - 1, 1)) * span
        if mean - half > 0 and half / max(abs(mean), 1e-4) <= 0.05:
            stopped = stopped or n
    return stopped


def cs_and_decisions(x: np.ndarray, method: str, k: dict) -> None:
    """Confidence sequence + prefix means + rule states + first stop: the decision path without the p-value."""
    low, high = k["range"]
    cs = confidence_sequence(x, method, k["alpha"], low, high, CSSettings(t_opt=float(k["n_max"])))
    estimand = np.clip(x, low, high) if method in BOUNDED_METHODS else x
    mean = prefix_mean(estimand)
    rules = DecisionRules(n_min=k["n_min"], n_max=k["n_max"], rel_margin_target=k["rel_margin_target"])
    first_stop(rule_states(cs.lower, cs.upper, mean, all_zero_path(x), rules), rules)


def throughput() -> None:
    n = 1_000_000
    x = np.random.default_rng(1).normal(0.05, 0.02, n)
    print(f"1. throughput on one stream of {n:,} observations, check after every observation "
          "(best of 5 for CS + decisions, best of 3 for the stage path)")
    print(f"   {'method':<14} {'CS + decisions':>16} {'+ p-value (stage path)':>24}   goal (CS + decisions)")
    goals = {"betting": 1e5, "eb_cs": 1e7, "eb_fixed_n": 1e7, "t_fixed_n": 1e7}
    for method in METHODS:
        k = knobs(method=method, n_max=n, n_min=10)
        core = best_of(5, lambda: cs_and_decisions(x, method, k))
        full = best_of(3, lambda: analyse(x, k))
        goal = goals.get(method)
        flag = "" if goal is None else f">= {goal:.0e}/s: {'met' if n / core >= goal else 'NOT met'}"
        print(f"   {method:<14} {n / core:12,.0f}/s {n / full:20,.0f}/s   {flag}")
    for size in (2_000, 10_000):
        seconds = best_of(1, lambda: seed_style_loop(x[:size], 0.01, 0.0, 0.2))
        print(f"   seed-style EB loop, n = {size:>6,}: {size / seconds:10,.0f} obs/s "
              "(quadratic: the rate falls with n; the seed claims 40,000/s)")


def fixed_n_t_test_size(effect: float, power: float, alpha: float) -> int:
    """Smallest n with power >= ``power`` for a two-sided one-sample t-test at standardised effect ``effect``."""
    def power_at(n: int) -> float:
        crit = stats.t.ppf(1 - alpha / 2, n - 1)
        nc = effect * math.sqrt(n)
        return float(stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc))
    lo, hi = 2, 2
    while power_at(hi) < power:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if power_at(mid) < power else (lo, mid)
    return lo


def samples_to_different() -> None:
    alpha, streams = 0.01, 300
    scenarios = [("N(0.05, 0.01), [0, 0.2]", 0.05, 0.01, 0.0, 0.2, 200),
                 ("N(0.01, 0.02), [-0.1, 0.1]", 0.01, 0.02, -0.1, 0.1, 200),
                 ("N(0.01, 0.02), [-0.1, 0.1]", 0.01, 0.02, -0.1, 0.1, 1000)]
    print(f"\n2a. samples to DIFFERENT (delta* = 0), alpha = {alpha}, {streams} streams, check every sample, "
          "n_min = 10 (seed default)")
    print("    E[N] = mean samples used over all streams (stopped at DIFFERENT or at n_max); fixed-n t = sample size")
    print("    of a two-sided one-sample t-test at the same alpha with the same power")
    print(f"   {'scenario':<28} {'n_max':>5} {'method':<14} {'power':>6} {'E[N]':>7} {'median N':>9} "
          f"{'fixed-n t':>10} {'E[N]/fixed':>10}")
    for label, mu, sd, low, high, n_max in scenarios:
        x = np.random.default_rng(2).normal(mu, sd, size=(streams, n_max))
        for method in ("betting", "eb_cs", "stitched", "asymptotic_cs", "eb_fixed_n"):
            k = knobs(method=method, alpha=alpha, n_min=10, n_max=n_max, range=[low, high], rel_margin_target=None)
            a = analyse(x, k)
            power = float(np.mean(a.stop.decisions() == "DIFFERENT"))
            used = a.stop.n_used
            if power > 0:
                fixed = fixed_n_t_test_size(mu / sd, min(power, 0.999), alpha)
                tail = f"{fixed:10d} {used.mean() / fixed:10.2f}"
            else:
                tail = f"{'-':>10} {'-':>10}"
            print(f"   {label:<28} {n_max:5d} {method:<14} {power:6.3f} {used.mean():7.1f} "
                  f"{np.median(used):9.0f} {tail}")


def samples_to_relative_precision() -> None:
    alpha, streams, n_max = 0.01, 200, 6000
    rng = np.random.default_rng(3)
    scenarios = [("N(0.05, 0.01)", rng.normal(0.05, 0.01, size=(streams, n_max)), 0.1),
                 ("N(0.05, 0.01)", rng.normal(0.05, 0.01, size=(streams, n_max)), 0.05),
                 ("0.2 Beta(2, 5)", 0.2 * rng.beta(2.0, 5.0, size=(streams, n_max)), 0.1)]
    print(f"\n2b. samples to the seed's DIFFERENT criterion (rel_me <= target), alpha = {alpha}, clip [0, 0.2], "
          f"{streams} streams")
    print(f"   {'stream':<16} {'target':>6} " + " ".join(f"{m:>11}" for m in ("eb_fixed_n", "eb_cs", "stitched",
                                                                             "betting")) + "   seed EB / betting")
    for label, x, target in scenarios:
        medians = {}
        for method in ("eb_fixed_n", "eb_cs", "stitched", "betting"):
            k = knobs(method=method, alpha=alpha, n_min=2, n_max=n_max, rel_margin_target=target)
            a = analyse(x, k)
            rules = DecisionRules(n_min=2, n_max=n_max, rel_margin_target=target)
            states = rule_states(a.cs.lower, a.cs.upper, a.mean, np.zeros(x.shape, bool), rules)
            only_precision = type(states)(**{**states.__dict__, "different_higher": np.zeros(x.shape, bool),
                                             "different_lower": np.zeros(x.shape, bool)})
            stop = first_stop(only_precision, rules)
            medians[method] = float(np.median(stop.n_used))
        print(f"   {label:<16} {target:6.2f} " + " ".join(f"{medians[m]:11.0f}" for m in medians)
              + f"   {medians['eb_fixed_n'] / medians['betting']:.2f}x")


def version_cost() -> None:
    """obs/s of sequential.diff 1.0.0 and 1.1.0 (method betting) on one 10^6 stream (module docstring, 3)."""
    n = 1_000_000
    x = np.random.default_rng(1).normal(0.05, 0.02, n)
    k = knobs(method="betting", n_max=n, n_min=10)
    y = (np.clip(x, 0.0, 0.2) - 0.0) / 0.2
    parts = {
        "stage path (analyse_scores)": lambda e: analyse(x, k, elementary=e),
        "e-process (hedged_log_evalue)": lambda e: hedged_log_evalue(y, 0.0, k["alpha"], elementary=e),
        "CS (betting_cs)": lambda e: confidence_sequence(x, "betting", k["alpha"], 0.0, 0.2,
                                                         CSSettings(t_opt=float(n)), elementary=e),
    }
    versions = {kernels.version: kernels.elementary for kernels in KERNELS
                if kernels.version in ("1.0.0", "1.1.0", "3.2.0")}
    for elementary in versions.values():
        analyse(x[:1000], k, elementary=elementary)            # compile or load the compiled loops
    print(f"\n3. sequential.diff versions, method betting, one stream of {n:,} observations "
          "(best of 7, versions timed alternately)")
    print(f"   {'part':<32} " + " ".join(f"{v + ' obs/s':>16}" for v in versions)
          + "   time 1.1.0 / 1.0.0, 3.2.0 / 1.0.0")
    for label, work in parts.items():
        times: dict[str, list[float]] = {v: [] for v in versions}
        for _ in range(7):
            for version, elementary in versions.items():
                start = time.perf_counter()
                work(elementary)
                times[version].append(time.perf_counter() - start)
        best = {v: min(t) for v, t in times.items()}
        print(f"   {label:<32} " + " ".join(f"{n / best[v]:16,.0f}" for v in versions)
              + f"   {best['1.1.0'] / best['1.0.0']:.2f}x, {best['3.2.0'] / best['1.0.0']:.2f}x")


if __name__ == "__main__":
    import sys

    chosen = set(sys.argv[1:]) or {"throughput", "versions", "samples"}
    if "throughput" in chosen:
        throughput()
    if "versions" in chosen:
        version_cost()
    if "samples" in chosen:
        samples_to_different()
        samples_to_relative_precision()
