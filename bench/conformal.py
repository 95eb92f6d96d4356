"""Speed of ``conformal.pac_report`` (issue 5): full report at n = 10^4, 10^5, 10^6 and LOO vs brute force.

Run: ``cd /work/main && PYTHONPATH=. python3 bench/conformal.py``

Prints, for each n: the stage's wall time on an already-parsed table (typed columns from text,
validation, SSBC, thresholds, in-sample summaries, both O(n log n) LOO passes, 12 bounds x 5 methods
with prediction_method=all), the kernel-only time (arrays in), the time of one LOO pass, and at
n = 10^4 the ratio of a brute-force O(n^2 log n) LOO (re-sort per held-out point, as the reference
implementation does) to the O(n log n) LOO. Goal: full report at 10^6 < 3 s. CSV parsing is the
engine's and is not included.
"""

from __future__ import annotations

import time

import numpy as np

from certa.engine.core.stages.base import StageContext
from certa.engine.core.stages.conformal import STAGE, loo_bound_rows, loo_envelope_bounds
from certa.engine.core.stats.conformal.loo import loo_prediction_sets
from certa.engine.core.stats.conformal.mondrian import class_threshold, nonconformity_scores, prediction_sets, summarise_sets
from certa.engine.core.stats.conformal.rate_bounds import METHODS
from certa.engine.core.stats.conformal.ssbc import ssbc_correct
from certa.engine.core.tables import table_from_columns

KNOBS = {"input": "cal", "alpha": 0.1, "delta": 0.1, "test_size": 10_000, "confidence_level": 0.95,
         "prediction_method": "all", "use_union_bound": True, "mode": "beta", "m": None,
         "loo_inflation_factor": None, "upstream_compat": False,
         "columns": {"label": "label", "p0": "p0", "p1": "p1"}}


def synthetic(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(np.int64)
    p1 = np.round(np.where(labels == 1, rng.beta(4, 2, n), rng.beta(2, 4, n)), 6)
    return labels, p1


def kernels(labels: np.ndarray, p1: np.ndarray, test_size: int) -> None:
    """The report's numerical work on arrays: SSBC, thresholds, in-sample sets, both LOO passes, 12 x 5 bounds."""
    s0, s1 = nonconformity_scores(1.0 - p1, p1)
    ks, qs = [], []
    for c, s in ((0, s0), (1, s1)):
        own = np.sort(s[labels == c])
        r = ssbc_correct(0.1, own.size, 0.1)
        ks.append(r.k)
        qs.append(class_threshold(own, r.k))
    summarise_sets(labels, *prediction_sets(s0, s1, qs[0], qs[1]))
    rows = loo_bound_rows(labels, s0, s1, ks[0], ks[1], test_size)[2]
    for method in METHODS:
        loo_envelope_bounds(rows, 1 - 0.05 / 12, method, 1.0)


def brute_force_loo(labels: np.ndarray, s0: np.ndarray, s1: np.ndarray, k0: int,
                    k1: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference O(n^2 log n) LOO: drop point i, re-sort its class, take the k-th smallest (+inf if k > n_c - 1)."""
    include0 = np.empty(labels.size, dtype=bool)
    include1 = np.empty(labels.size, dtype=bool)
    full = {0: np.sort(s0[labels == 0]), 1: np.sort(s1[labels == 1])}
    for i in range(labels.size):
        for c, s, k, inc in ((0, s0, k0, include0), (1, s1, k1, include1)):
            if labels[i] == c:
                mask = labels == c
                mask[i] = False
                rest = np.sort(s[mask])
            else:
                rest = full[c]
            inc[i] = s[i] <= (rest[k - 1] if k <= rest.size else np.inf)
    return include0, include1


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print("test_size N = 10^4, prediction_method = all (5 methods x 12 rates x 2 LOO variants)")
    print(f"{'n':>9} {'stage (s)':>10} {'kernels (s)':>12} {'LOO (s)':>9}")
    for n in (10_000, 100_000, 1_000_000):
        labels, p1 = synthetic(n)
        table = table_from_columns("cal", {"label": labels, "p1": p1})
        ctx = StageContext(stage_id="pac", knobs=KNOBS, tables={"cal": table}, rng=np.random.default_rng(0),
                           profile="dev", upstream={}, seed={})
        repeats = 3 if n < 1_000_000 else 2
        t_stage = best_of(lambda: STAGE.run(ctx), repeats)
        t_kernel = best_of(lambda: kernels(labels, p1, 10_000), repeats)
        s0, s1 = nonconformity_scores(1.0 - p1, p1)
        k0 = ssbc_correct(0.1, int((labels == 0).sum()), 0.1).k
        k1 = ssbc_correct(0.1, int((labels == 1).sum()), 0.1).k
        t_loo = best_of(lambda: loo_prediction_sets(labels, s0, s1, k0, k1), repeats)
        print(f"{n:>9} {t_stage:>10.3f} {t_kernel:>12.3f} {t_loo:>9.4f}")
        if n == 10_000:
            t0 = time.perf_counter()
            brute = brute_force_loo(labels, s0, s1, k0, k1)
            t_brute = time.perf_counter() - t0
            fast = loo_prediction_sets(labels, s0, s1, k0, k1)
            same = np.array_equal(brute[0], fast[0]) and np.array_equal(brute[1], fast[1])
            print(f"          brute-force LOO at n=10^4: {t_brute:.2f} s; O(n log n) LOO {t_loo * 1e3:.2f} ms; "
                  f"ratio {t_brute / t_loo:,.0f}x; identical sets: {same}")
    labels, p1 = synthetic(1_000_000)
    table = table_from_columns("cal", {"label": labels, "p1": p1})
    ctx = StageContext(stage_id="pac", knobs={**KNOBS, "test_size": None}, tables={"cal": table},
                       rng=np.random.default_rng(0), profile="dev", upstream={}, seed={})
    print(f"n = 10^6 with test_size = n (the default): stage {best_of(lambda: STAGE.run(ctx), 2):.3f} s")
    print("goal: stage at n = 10^6 under 3 s")


if __name__ == "__main__":
    main()
