"""Holm and Benjamini–Hochberg adjustments against their textbook definitions, and per-slice results."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from certa.engine.core.stats.paired_metric import (PairedTable, adjusted_slices, benjamini_hochberg_adjust, binary_slices,
                                             holm_adjust, mcnemar_exact_test, newcombe_interval, tango_interval,
                                             tango_noninferiority_test)
from certa.engine.core.stats.paired_metric.multiplicity import adjust_p_values

p_vectors = arrays(np.float64, st.integers(1, 12), elements=st.floats(0.0, 1.0))


def holm_by_definition(p: np.ndarray) -> np.ndarray:
    """Holm (1979): the adjusted p of hypothesis i is the largest (m − j + 1) p(j), capped at 1, over the
    hypotheses j ranked at or before it."""
    m = p.size
    rank = np.argsort(p, kind="stable")
    out = np.empty(m)
    for position, i in enumerate(rank):
        out[i] = min(1.0, max((m - j) * p[rank[j]] for j in range(position + 1)))
    return out


def bh_by_definition(p: np.ndarray) -> np.ndarray:
    """Benjamini & Hochberg (1995): the smallest m p(j) / j, capped at 1, over the ranks j at or after it."""
    m = p.size
    rank = np.argsort(p, kind="stable")
    out = np.empty(m)
    for position, i in enumerate(rank):
        out[i] = min(1.0, min(m * p[rank[j]] / (j + 1) for j in range(position, m)))
    return out


@given(p_vectors)
def test_holm_equals_its_definition(p):
    np.testing.assert_allclose(holm_adjust(p), holm_by_definition(p), rtol=1e-12)


@given(p_vectors)
def test_benjamini_hochberg_equals_its_definition(p):
    np.testing.assert_allclose(benjamini_hochberg_adjust(p), bh_by_definition(p), rtol=1e-12)


@given(p_vectors)
@example(
    p=np.array([0.93626177, 0.93626177, 0.93626177, 0.93626177, 0.93626177]),
).via('discovered failure')
def test_adjusted_p_values_dominate_the_raw_ones_and_keep_their_order(p):
    for adjusted in (holm_adjust(p), benjamini_hochberg_adjust(p)):
        assert np.all(adjusted >= p) and np.all(adjusted <= 1)
        order = np.argsort(p, kind="stable")
        assert np.all(np.diff(adjusted[order]) >= 0)
    assert np.all(benjamini_hochberg_adjust(p) <= holm_adjust(p) + 1e-15)


def test_adjustment_runs_along_the_last_axis_of_many_families():
    rng = np.random.default_rng(1)
    p = rng.random((50, 7))
    np.testing.assert_array_equal(holm_adjust(p)[17], holm_adjust(p[17]))
    np.testing.assert_array_equal(benjamini_hochberg_adjust(p)[3], benjamini_hochberg_adjust(p[3]))


def own_table(subject: np.ndarray, baseline: np.ndarray) -> PairedTable:
    return PairedTable(np.sum(subject & baseline), np.sum(subject & ~baseline), np.sum(~subject & baseline),
                       np.sum(~subject & ~baseline))


def test_binary_slices_equal_the_per_slice_computations():
    rng = np.random.default_rng(2)
    n = 3000
    labels = rng.choice(np.array(["arith", "code", "prose", "qa"]), n)
    baseline = rng.random(n) < 0.7
    subject = np.where(rng.random(n) < 0.06, ~baseline, baseline)
    result = binary_slices(subject, baseline, labels, margin=0.02, adjustment="holm", interval="newcombe")
    raw = []
    for row in result.slices:
        own = own_table(subject[labels == row.name], baseline[labels == row.name])
        ci = newcombe_interval(own)
        assert (row.estimate, row.low, row.high) == pytest.approx((ci.estimate, ci.low, ci.high))
        assert row.p_value == pytest.approx(tango_noninferiority_test(own, 0.02).p_value)
        raw.append(row.p_value)
    assert [row.adjusted_p_value for row in result.slices] == pytest.approx(list(holm_adjust(np.array(raw))))
    first = binary_slices(subject, baseline, labels).slices[0]
    own = own_table(subject[labels == first.name], baseline[labels == first.name])
    assert first.p_value == pytest.approx(mcnemar_exact_test(own).p_value)
    assert first.low == pytest.approx(tango_interval(own).low)


def test_rejected_names_the_slices_at_or_below_alpha():
    result = adjusted_slices(["a", "b", "c"], [0.1, 0.0, -0.1], [0.0, -0.1, -0.2], [0.2, 0.1, 0.0],
                             [0.001, 0.5, 0.02], adjustment="benjamini_hochberg")
    assert result.rejected(0.05) == ("a", "c")


@pytest.mark.parametrize("call, message", [
    (lambda: adjust_p_values([0.1, 1.2], "holm"), "'p_values' must lie in [0, 1] (got 1.2)"),
    (lambda: adjust_p_values([0.1], "bonferroni"), "'adjustment' must be one of"),
    (lambda: adjusted_slices(["a", "a"], [0, 0], [0, 0], [0, 0], [0.1, 0.2]), "'names' must be distinct"),
    (lambda: adjusted_slices(["a", "b"], [0, 0], [0], [0, 0], [0.1, 0.2]), "'lows' must hold one value per slice"),
    (lambda: binary_slices([1, 0], [1, 1], ["x", "y"], interval="wald"), "'interval' must be one of"),
])
def test_invalid_input_names_the_field_the_expectation_and_the_value(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value)
