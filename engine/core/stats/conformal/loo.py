"""Leave-one-out (LOO) prediction sets of a Mondrian conformal predictor with k held fixed, in O(n log n).

For each calibration point i of class y_i, LOO rebuilds the class-y_i threshold from the other
n_{y_i} - 1 points of that class, keeping the order-statistic index k_{y_i} fixed (seed 003, §5); the
other class's threshold is the deployed one (point i is not in its calibration set). The naive
computation re-sorts for every i (O(n^2 log n)).

Rank shortcut (the reference implementation, phzwart/ssbc 1.4.0 ``metrics/loo_uncertainty.py``, re-masks and
re-sorts for every fold instead): sort each class once, S ascending. For the point at
0-based sorted position r and j = k, the k-th smallest of the remaining points is

    S[j-1]  if r >= j      (the removed point lies above the first j)
    S[j]    if r <  j      (one of the first j was removed, the next one moves in)

and +inf when k > n_c - 1 (fewer than k points remain: always include, the conformal convention). With
ties it does not matter which tied copy is removed, since equal scores give equal thresholds. The
reference implementation clamps j = min(k, n_c - 1) instead of using +inf; ``clamp=True`` reproduces it.
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.conformal.mondrian import SetSummary, class_threshold, summarise_sets

__all__ = ["loo_own_class_thresholds", "loo_prediction_sets", "loo_summary"]


def loo_own_class_thresholds(sorted_scores: np.ndarray, k: int, *, clamp: bool = False) -> np.ndarray:
    """LOO threshold of the point at each sorted position (last axis, ascending), batched.

    Returns an array shaped like ``sorted_scores``: entry r is the k-th smallest of the other points
    (+inf if k exceeds their number; -inf for k = 0, i.e. never included).
    """
    scores = np.asarray(sorted_scores, dtype=np.float64)
    n = scores.shape[-1]
    if k < 0:
        raise ValueError(f"'k' must be >= 0 (got {k})")
    j = min(k, n - 1) if clamp else k
    if clamp and n < 2:
        raise ValueError("the clamped (upstream) LOO needs at least 2 points per class")
    if j > n - 1:
        return np.full(scores.shape, np.inf)
    if j == 0:
        return np.full(scores.shape, -np.inf)
    positions = np.arange(n)
    return np.where(positions >= j, scores[..., j - 1:j], scores[..., j:j + 1])


def loo_prediction_sets(labels: np.ndarray, s0: np.ndarray, s1: np.ndarray, k0: int, k1: int, *,
                        clamp: bool = False, own_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """LOO membership of labels 0 and 1 for every calibration point (k_0, k_1 held fixed).

    ``labels`` are 0/1, ``s0``/``s1`` the class scores of every point; each class needs >= 1 point.
    """
    labels = np.asarray(labels)
    s0, s1 = np.asarray(s0, dtype=np.float64), np.asarray(s1, dtype=np.float64)
    include0 = np.empty(labels.size, dtype=bool)
    include1 = np.empty(labels.size, dtype=bool)
    for c, scores, k, include in ((0, s0, k0, include0), (1, s1, k1, include1)):
        own = labels == c
        if not own.any():
            raise ValueError(f"class {c} has no calibration points")
        own_scores = scores[own]
        order = np.argsort(own_scores, kind="stable")
        ordered = own_scores[order]
        include[~own] = scores[~own] <= class_threshold(ordered, k, clamp=clamp)
        own_included = np.empty(ordered.size, dtype=bool)
        own_included[order] = ordered <= loo_own_class_thresholds(ordered, k - own_offset, clamp=clamp)
        include[own] = own_included
    return include0, include1


def loo_summary(labels: np.ndarray, s0: np.ndarray, s1: np.ndarray, k0: int, k1: int, *,
                clamp: bool = False, own_offset: int = 0) -> SetSummary:
    """Counts of LOO set outcomes (singleton, doublet, abstention, singleton errors), marginal and per class."""
    include0, include1 = loo_prediction_sets(labels, s0, s1, k0, k1, clamp=clamp, own_offset=own_offset)
    return summarise_sets(labels, include0, include1)
