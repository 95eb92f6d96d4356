"""Mondrian thresholds, prediction sets and summaries (certa.engine.core.stats.conformal.mondrian) and the O(n log n)
leave-one-out sets (certa.engine.core.stats.conformal.loo) against a brute-force LOO."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certa.engine.core.stats.conformal.loo import loo_own_class_thresholds, loo_prediction_sets, loo_summary
from certa.engine.core.stats.conformal.mondrian import class_threshold, nonconformity_scores, prediction_sets, summarise_sets


def test_class_threshold_is_kth_smallest_or_infinite():
    s = np.array([0.1, 0.2, 0.2, 0.7])
    assert class_threshold(s, 1) == 0.1
    assert class_threshold(s, 3) == 0.2
    assert class_threshold(s, 4) == 0.7
    assert class_threshold(s, 5) == np.inf  # k = n+1: always include
    assert class_threshold(s, 5, clamp=True) == 0.7  # upstream B1: largest score
    batch = np.sort(np.random.default_rng(0).random((3, 6)), axis=1)
    np.testing.assert_array_equal(class_threshold(batch, 2), batch[:, 1])


def test_prediction_sets_by_hand():
    """q0 = 0.4, q1 = 0.5: label c is in the set iff 1 - p_c <= q_c (inclusive)."""
    p1 = np.array([0.9, 0.55, 0.5, 0.3, 0.6])
    p0 = 1 - p1
    s0, s1 = nonconformity_scores(p0, p1)
    inc0, inc1 = prediction_sets(s0, s1, 0.4, 0.5)
    # p1=0.9: s0=0.9>0.4, s1=0.1<=0.5 -> {1}; p1=0.55: s0=.55, s1=.45 -> {1}; p1=0.5: s1=0.5 -> {1} (tie included)
    # p1=0.3: s0=0.3 -> {0}, s1=0.7 -> not 1; p1=0.6: s0=0.6 no, s1=0.4 yes -> {1}
    np.testing.assert_array_equal(inc0, [False, False, False, True, False])
    np.testing.assert_array_equal(inc1, [True, True, True, False, True])
    inc0, inc1 = prediction_sets(s0, s1, 0.4, 0.2)  # s1 <= 0.2 only for p1 = 0.9
    np.testing.assert_array_equal(inc0 & inc1, [False] * 5)
    np.testing.assert_array_equal(~inc0 & ~inc1, [False, True, True, False, True])  # abstentions
    inc0, inc1 = prediction_sets(s0, s1, 0.6, 0.5)
    np.testing.assert_array_equal(inc0 & inc1, [False, True, True, False, True])  # doublets


def test_summaries_use_the_deployed_mondrian_sets():
    """Per-class counts come from the same sets as the marginal ones (B7: upstream used one threshold)."""
    labels = np.array([0, 0, 0, 1, 1, 1])
    inc0 = np.array([True, True, False, True, False, True])
    inc1 = np.array([False, True, True, True, True, False])
    summary = summarise_sets(labels, inc0, inc1)
    c0, c1, m = summary.class_0, summary.class_1, summary.marginal
    # class 0 rows: {0}, {0,1}, {1} -> 2 singletons (1 correct, 1 error), 1 doublet, 2 covered
    assert (c0.n, c0.singleton, c0.doublet, c0.abstention, c0.singleton_correct, c0.singleton_error, c0.covered) == \
        (3, 2, 1, 0, 1, 1, 2)
    # class 1 rows: {0,1}, {1}, {0} -> 2 singletons (1 correct, 1 error), 1 doublet, 2 covered
    assert (c1.n, c1.singleton, c1.doublet, c1.singleton_correct, c1.singleton_error, c1.covered) == (3, 2, 1, 1, 1, 2)
    assert (m.n, m.singleton, m.doublet, m.abstention, m.singleton_error) == (6, 4, 2, 0, 2)
    assert (m.singleton_pred_0, m.singleton_pred_1) == (2, 2)
    for field in ("singleton", "doublet", "abstention", "singleton_error", "covered"):
        assert getattr(m, field) == getattr(c0, field) + getattr(c1, field)


def brute_force_loo(labels, s0, s1, k0, k1, *, clamp=False, own_offset=0):
    """Drop point i, re-sort its class, take the (k - own_offset)-th smallest of the rest."""
    n = labels.size
    include0, include1 = np.empty(n, bool), np.empty(n, bool)
    for i in range(n):
        keep = np.arange(n) != i
        for c, s, k, include in ((0, s0, k0, include0), (1, s1, k1, include1)):
            own = labels[i] == c
            rest = np.sort(s[keep & (labels == c)])
            j = k - own_offset if own else k
            if clamp:
                j = min(j, rest.size)
            threshold = -np.inf if j == 0 else (rest[j - 1] if j <= rest.size else np.inf)
            include[i] = s[i] <= threshold
    return include0, include1


def _tie_heavy_dataset(rng, n):
    labels = rng.integers(0, 2, n)
    labels[:2] = [0, 1]
    grid = rng.choice([2, 4, 10])
    p1 = np.round(rng.random(n) * grid) / grid  # few distinct values: many ties
    s0, s1 = nonconformity_scores(1 - p1, p1)
    return labels, s0, s1


def test_fast_loo_equals_brute_force_on_tie_heavy_data():
    rng = np.random.default_rng(11)
    for _ in range(400):
        n = int(rng.integers(2, 40))
        labels, s0, s1 = _tie_heavy_dataset(rng, n)
        n0, n1 = int((labels == 0).sum()), int((labels == 1).sum())
        k0, k1 = int(rng.integers(1, n0 + 2)), int(rng.integers(1, n1 + 2))
        for offset in (0, 1):
            fast = loo_prediction_sets(labels, s0, s1, k0, k1, own_offset=offset)
            slow = brute_force_loo(labels, s0, s1, k0, k1, own_offset=offset)
            np.testing.assert_array_equal(fast[0], slow[0])
            np.testing.assert_array_equal(fast[1], slow[1])


def test_fast_loo_equals_brute_force_upstream_clamp():
    rng = np.random.default_rng(12)
    for _ in range(200):
        n = int(rng.integers(4, 40))
        labels, s0, s1 = _tie_heavy_dataset(rng, n)
        labels[:4] = [0, 0, 1, 1]
        k0 = int(rng.integers(1, (labels == 0).sum() + 2))
        k1 = int(rng.integers(1, (labels == 1).sum() + 2))
        fast = loo_prediction_sets(labels, s0, s1, k0, k1, clamp=True)
        slow = brute_force_loo(labels, s0, s1, k0, k1, clamp=True)
        np.testing.assert_array_equal(fast[0], slow[0])
        np.testing.assert_array_equal(fast[1], slow[1])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=2, max_size=30),
       st.integers(1, 40), st.integers(1, 40))
def test_fast_loo_equals_brute_force_property(points, k0_raw, k1_raw):
    labels = np.array([p[0] for p in points])
    if labels.min() == labels.max():
        labels[0] = 1 - labels[0]
    p1 = np.array([p[1] for p in points]) / 5.0
    s0, s1 = nonconformity_scores(1 - p1, p1)
    k0 = 1 + (k0_raw - 1) % ((labels == 0).sum() + 1)
    k1 = 1 + (k1_raw - 1) % ((labels == 1).sum() + 1)
    fast = loo_prediction_sets(labels, s0, s1, k0, k1)
    slow = brute_force_loo(labels, s0, s1, k0, k1)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])


def test_loo_coverage_count_is_k_without_ties():
    """Without ties a held-out point is covered iff its rank in its class is <= k (k <= n_c - 1)."""
    rng = np.random.default_rng(3)
    labels = np.r_[np.zeros(30, int), np.ones(20, int)]
    p1 = rng.random(50)
    s0, s1 = nonconformity_scores(1 - p1, p1)
    for k0, k1 in ((5, 7), (29, 19), (30, 20), (31, 21)):
        summary = loo_summary(labels, s0, s1, k0, k1)
        assert summary.class_0.covered == min(k0, 30)
        assert summary.class_1.covered == min(k1, 20)
        shifted = loo_summary(labels, s0, s1, k0, k1, own_offset=1)
        assert shifted.class_0.covered == min(k0 - 1, 29) + (k0 > 30)  # k0-1 > 29 others: always included


def test_batched_loo_thresholds():
    s = np.array([[0.1, 0.2, 0.3, 0.4], [1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_array_equal(loo_own_class_thresholds(s, 2), [[0.3, 0.3, 0.2, 0.2], [3.0, 3.0, 2.0, 2.0]])
    assert np.all(loo_own_class_thresholds(s, 4) == np.inf)
    assert np.all(loo_own_class_thresholds(s, 0) == -np.inf)
    with pytest.raises(ValueError):
        loo_own_class_thresholds(s, -1)
