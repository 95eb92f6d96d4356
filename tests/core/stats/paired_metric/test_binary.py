"""Paired binary metrics: exact boundaries, invariants over every small table, independent implementations,
and the validation messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from certa.engine.core.stats.paired_metric import (PairedTable, mcnemar_exact_test, minimum_detectable_difference,
                                             newcombe_interval, newcombe_phi, paired_table_from_outcomes,
                                             paired_tables_by_slice, tango_equivalence_test, tango_interval,
                                             tango_noninferiority_test, tango_score_statistic, tango_score_test,
                                             wilson_interval)
from certa.engine.core.stats.paired_metric.tango import _score_parts

Z95 = stats.norm.ppf(0.975)


def every_table(max_n: int) -> PairedTable:
    """Every table with 1 ≤ n ≤ max_n, as arrays."""
    cells = [(a, b, c, n - a - b - c) for n in range(1, max_n + 1) for a in range(n + 1)
             for b in range(n + 1 - a) for c in range(n + 1 - a - b)]
    return PairedTable(*np.array(cells).T)


def test_table_counts_outcome_pairs_subject_first():
    subject = np.array([1, 1, 0, 0, 1, 0, 1])
    baseline = np.array([1, 0, 1, 0, 0, 0, 1])
    table = paired_table_from_outcomes(subject, baseline)
    assert (int(table.n11), int(table.n10), int(table.n01), int(table.n00)) == (2, 2, 1, 2)
    assert table.difference == pytest.approx(subject.mean() - baseline.mean())


def test_tables_by_slice_equal_the_tables_of_each_slice():
    rng = np.random.default_rng(5)
    subject, baseline = rng.random(500) < 0.6, rng.random(500) < 0.5
    labels = rng.choice(np.array(["code", "math", "prose"]), 500)
    names, tables = paired_tables_by_slice(subject, baseline, labels)
    assert names == ("code", "math", "prose")
    for i, name in enumerate(names):
        own = paired_table_from_outcomes(subject[labels == name], baseline[labels == name])
        assert [int(x) for x in (own.n11, own.n10, own.n01, own.n00)] == \
            [int(x[i]) for x in (tables.n11, tables.n10, tables.n01, tables.n00)]


def test_restricted_mle_closed_form_maximises_the_constrained_likelihood():
    """Tango's quadratic root against a numerical maximisation of the multinomial likelihood under
    p10 = p01 + Δ0 (an independent computation of p̃01)."""
    for counts in [(1, 1, 7, 12), (4, 9, 3, 16), (0, 5, 0, 3), (10, 0, 4, 0), (2, 3, 3, 2)]:
        t = PairedTable(*counts)
        n10, n01, n = int(t.n10), int(t.n01), int(t.n)
        for delta0 in (-0.6, -0.2, -0.01, 0.0, 0.15, 0.5):
            def negative_log_likelihood(p, d=delta0, n10=n10, n01=n01, n=n):
                terms = [(n10, p + d), (n01, p), (n - n10 - n01, 1 - 2 * p - d)]
                return -sum(k * math.log(q) for k, q in terms if k > 0)
            low, high = max(0.0, -delta0), (1.0 - delta0) / 2.0
            numeric = optimize.minimize_scalar(negative_log_likelihood, bounds=(low + 1e-12, high - 1e-12),
                                               method="bounded", options={"xatol": 1e-12}).x
            _, n_variance = _score_parts(n10, n01, n, delta0)
            closed = (n_variance / n - delta0 * (1 - delta0)) / 2.0
            assert closed == pytest.approx(numeric, abs=1e-6), (counts, delta0)


def test_score_statistic_at_zero_is_mcnemars():
    t = PairedTable(10, 14, 5, 30)
    assert tango_score_statistic(t, 0.0) == pytest.approx((14 - 5) / math.sqrt(14 + 5))


def test_score_statistic_decreases_in_the_null_difference_for_every_table_up_to_n_20():
    """The bracketing root-finder relies on one crossing per side: T(Δ0) is non-increasing on [−1, 1]
    (checked on S = T / sqrt(1 + T²), which is finite at ±1)."""
    tables = every_table(20)
    grid = np.linspace(-1.0, 1.0, 201)[:, None]
    numerator, n_variance = _score_parts(tables.n10, tables.n01, tables.n, grid)
    with np.errstate(invalid="ignore"):
        bounded = np.where(numerator == 0, 0.0, numerator / np.sqrt(numerator ** 2 + n_variance))
    assert np.all(np.diff(bounded, axis=0) <= 1e-12)


@pytest.mark.parametrize("interval", [tango_interval, newcombe_interval])
def test_intervals_hold_the_estimate_stay_in_range_and_mirror_when_arms_swap(interval):
    tables = every_table(20)
    ci = interval(tables)
    swapped = interval(PairedTable(tables.n11, tables.n01, tables.n10, tables.n00))
    assert np.all((-1 <= ci.low) & (ci.low <= ci.estimate) & (ci.estimate <= ci.high) & (ci.high <= 1))
    np.testing.assert_allclose(swapped.low, -ci.high, atol=1e-12)
    np.testing.assert_allclose(swapped.high, -ci.low, atol=1e-12)


def test_tango_bounds_are_roots_of_the_score_equation():
    tables = every_table(15)
    ci = tango_interval(tables)
    for bound, z in ((ci.low, Z95), (ci.high, -Z95)):
        inner = np.abs(bound) < 1
        t = PairedTable(tables.n11[inner], tables.n10[inner], tables.n01[inner], tables.n00[inner])
        np.testing.assert_allclose(tango_score_statistic(t, bound[inner]), z, atol=1e-8)


def test_tango_boundaries_are_exact():
    concordant = tango_interval(PairedTable(7, 0, 0, 3))
    assert (concordant.low, concordant.high) == pytest.approx((-Z95 ** 2 / (10 + Z95 ** 2), Z95 ** 2 / (10 + Z95 ** 2)))
    assert tango_interval(PairedTable(0, 0, 5, 0)).low == -1.0
    assert tango_interval(PairedTable(0, 5, 0, 0)).high == 1.0
    one_way = tango_interval(PairedTable(0, 3, 0, 0))          # solved by hand: (1 − Δ)/(1 + Δ) = z²/3
    assert one_way.low == pytest.approx((1 - Z95 ** 2 / 3) / (1 + Z95 ** 2 / 3))


def test_newcombe_phi_follows_newcombes_cases():
    assert float(newcombe_phi(PairedTable(5, 0, 0, 5))) == pytest.approx((25 - 5) / 25)     # A > n/2
    assert float(newcombe_phi(PairedTable(3, 2, 2, 3))) == 0.0                              # 0 ≤ A ≤ n/2
    assert float(newcombe_phi(PairedTable(1, 4, 3, 1))) == pytest.approx(-11 / math.sqrt(5 * 4 * 4 * 5))  # A < 0
    assert float(newcombe_phi(PairedTable(4, 3, 0, 0))) == 0.0                              # a zero margin


def test_wilson_interval_matches_its_closed_form_and_ends_exactly():
    low, high = wilson_interval(np.array([0, 3, 10]), np.array([10, 10, 10]))
    centre, half = (3 + Z95 ** 2 / 2) / (10 + Z95 ** 2), Z95 * math.sqrt(3 * 7 / 10 + Z95 ** 2 / 4) / (10 + Z95 ** 2)
    assert (low[0], high[2]) == (0.0, 1.0)
    assert (low[1], high[1]) == pytest.approx((centre - half, centre + half))


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_exact_mcnemar_equals_scipy_binomtest(alternative):
    k, m = np.array([(k, m) for m in range(25) for k in range(m + 1)]).T
    ours = mcnemar_exact_test(PairedTable(3, k, m - k, 2), alternative).p_value
    reference = [stats.binomtest(int(x), int(y), 0.5, alternative=alternative).pvalue if y else 1.0
                 for x, y in zip(k, m)]
    np.testing.assert_allclose(ours, reference, rtol=1e-10)


def test_mid_p_is_the_exact_p_less_the_observed_probability():
    t = PairedTable(3, 9, 2, 6)
    point = stats.binom.pmf(9, 11, 0.5)
    assert mcnemar_exact_test(t, mid_p=True).p_value == pytest.approx(mcnemar_exact_test(t).p_value - point)
    assert mcnemar_exact_test(t, "greater", mid_p=True).p_value == pytest.approx(stats.binom.sf(8, 11, 0.5) - point / 2)
    assert mcnemar_exact_test(PairedTable(4, 0, 0, 4), mid_p=True).p_value == 1.0


def test_noninferiority_rejects_exactly_when_the_interval_clears_the_margin():
    """Tango (1998): the one-sided level-α score test and the two-sided (1 − 2α) interval agree."""
    tables = every_table(25)
    margin = 0.1
    rejects = tango_noninferiority_test(tables, margin).p_value < 0.05
    clears = tango_interval(tables, 0.90).low > -margin
    assert np.array_equal(rejects, clears)


def test_equivalence_takes_the_larger_one_sided_p_value():
    t = PairedTable(400, 12, 15, 80)
    both = tango_equivalence_test(t, 0.05)
    assert both.p_value == max(tango_score_test(t, -0.05, "greater").p_value, tango_score_test(t, 0.05, "less").p_value)
    assert both.p_value < 0.05


def test_minimum_detectable_difference_solves_connors_power_equation():
    t = PairedTable(800, 60, 40, 100)
    mdd = minimum_detectable_difference(t, alpha=0.05, power=0.8)
    za, zb, psi, n = stats.norm.ppf(0.975), stats.norm.ppf(0.8), 0.1, 1000
    power_equation = za * math.sqrt(psi) + zb * math.sqrt(psi - mdd.difference ** 2)
    assert math.sqrt(n) * mdd.difference == pytest.approx(power_equation)
    assert mdd.attainable and mdd.discordance == pytest.approx(0.1)
    assert minimum_detectable_difference(PairedTable(3, 1, 1, 1), discordance=0.05).attainable is False


@pytest.mark.parametrize("call, message", [
    (lambda: PairedTable(1, -1, 0, 0), "'n10' must be a non-negative integer count (got -1.0)"),
    (lambda: PairedTable(1, 0.5, 0, 0), "'n10' must be a non-negative integer count (got 0.5)"),
    (lambda: PairedTable(0, 0, 0, 0), "at least one item"),
    (lambda: PairedTable([1, 2], [1, 2, 3], 0, 0), "must have one shape"),
    (lambda: paired_table_from_outcomes([1, 0, 2], [1, 0, 1]), "'subject' must hold 0/1 outcomes (item 2 is 2)"),
    (lambda: paired_table_from_outcomes([1, 0], [1, 0, 1]), "must pair item by item (got 2 and 3 items)"),
    (lambda: tango_interval(PairedTable(1, 2, 3, 4), 1.5), "'confidence_level' must be a number in (0, 1) (got 1.5)"),
    (lambda: tango_noninferiority_test(PairedTable(1, 2, 3, 4), -0.1),
     "'margin' must be a number in [0, 1) (got -0.1)"),
    (lambda: tango_equivalence_test(PairedTable(1, 2, 3, 4), 0), "'margin' must be a number in (0, 1) (got 0)"),
    (lambda: tango_score_test(PairedTable(1, 2, 3, 4), 0.0, "worse"), "'alternative' must be one of"),
    (lambda: minimum_detectable_difference(PairedTable(1, 2, 3, 4), power=0.4), "'power' must be in (0.5, 1)"),
])
def test_invalid_input_names_the_field_the_expectation_and_the_value(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value)


def test_a_mid_p_flag_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match=r"'mid_p' must be True or False \(got 1\)"):
        mcnemar_exact_test(PairedTable(1, 2, 3, 4), mid_p=1)
