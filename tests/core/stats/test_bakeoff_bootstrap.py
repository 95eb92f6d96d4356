"""Bootstrap significance of the vendor bake-off (certa.engine.core.stats.bakeoff.pairwise_bootstrap): hand-computed p-values
and Holm adjustment, the index stream, and seeded simulations of coverage and p-value calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certa.engine.core.stages.bakeoff import KERNELS
from certa.engine.core.stats.bakeoff.pairwise_bootstrap import (bootstrap_p_values, holm_adjust, pairwise_bootstrap,
                                            percentile_interval, resampled_weighted_means)


def test_holm_adjustment_matches_a_hand_computation():
    # sorted: 0.005·4 = 0.02; 0.01·3 = 0.03; 0.03·2 = 0.06; 0.04·1 = 0.04 -> running max 0.06
    np.testing.assert_allclose(holm_adjust([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02], rtol=0, atol=1e-15)
    np.testing.assert_allclose(holm_adjust([0.2, 0.5, 0.4]), [0.6, 0.8, 0.8], atol=1e-15)
    np.testing.assert_allclose(holm_adjust([0.6, 0.3]), [0.6, 0.6], atol=1e-15)  # 0.3·2 = 0.6; max(0.6, 0.6)
    np.testing.assert_allclose(holm_adjust([0.6, 0.55]), [1.0, 1.0], atol=1e-15)  # 0.55·2 capped at 1
    assert holm_adjust([0.037]).tolist() == [0.037]  # one pair: unadjusted
    assert holm_adjust([]).size == 0


def test_holm_ties_keep_monotone_adjusted_values():
    adjusted = holm_adjust([0.01, 0.01, 0.02])
    np.testing.assert_allclose(adjusted, [0.03, 0.03, 0.03], atol=1e-15)


def test_p_values_count_replicates_on_each_side_of_zero():
    p_min, p_two = bootstrap_p_values(np.array([-1.0, 0.0, 1.0, 2.0]))
    assert p_min == 0.5 and p_two == 1.0  # #(d<=0) = 2, #(d>=0) = 3
    p_min, p_two = bootstrap_p_values(np.array([[0.1, 0.2, 0.3, -0.1], [1.0, 2.0, 3.0, 4.0]]))
    assert p_min.tolist() == [0.25, 0.0] and p_two.tolist() == [0.5, 0.0]


def test_percentile_interval_uses_type_7_quantiles():
    reps = np.arange(1.0, 101.0)
    low, high = percentile_interval(reps, 0.90)
    assert low == pytest.approx(1 + 0.05 * 99) and high == pytest.approx(1 + 0.95 * 99)


def _numpy_indices(seed: int, n: int, replicates: int) -> np.ndarray:
    """The documented index stream, drawn by numpy itself: SFC64 on the first spawned child, Lemire uint32."""
    child = np.random.default_rng(seed).bit_generator.seed_seq.spawn(1)[0]
    return np.random.Generator(np.random.SFC64(child)).integers(0, n, size=(replicates, n), dtype=np.uint32)


def _interleaved_sums(gathered: np.ndarray) -> np.ndarray:
    """Σ over a row in the kernel's order: draws 0, 2, 4, … and 1, 3, 5, … left to right, then added."""
    odd = np.cumsum(gathered[:, 1::2], axis=1)[:, -1] if gathered.shape[1] > 1 else 0.0
    return np.cumsum(gathered[:, 0::2], axis=1)[:, -1] + odd


def test_replicates_are_the_weighted_means_of_the_drawn_indices():
    rng_data = np.random.default_rng(0)
    u, w = rng_data.normal(size=37), rng_data.uniform(0.1, 3.0, 37)
    got = resampled_weighted_means(u, w, 50, np.random.default_rng(9))
    expected = [(w[i] * u[i]).sum() / w[i].sum() for i in _numpy_indices(9, 37, 50)]  # one replicate at a time
    np.testing.assert_allclose(got, expected, rtol=1e-13)


@pytest.mark.parametrize("n", [1, 2, 3, 64, 1001])
def test_compiled_resampling_equals_numpy_sfc64_indices_bit_for_bit(n):
    """Odd n leaves half an SFC64 output for the next replicate, as numpy's buffered uint32 draws do."""
    rng_data = np.random.default_rng(n)
    u, w = rng_data.normal(size=n), rng_data.uniform(0.1, 3.0, n)
    index = _numpy_indices(5, n, 41)
    plain = resampled_weighted_means(u, None, 41, np.random.default_rng(5))
    np.testing.assert_array_equal(plain, _interleaved_sums(u[index]) / n)
    weighted = resampled_weighted_means(u, w, 41, np.random.default_rng(5))
    np.testing.assert_array_equal(weighted, _interleaved_sums((w * u)[index]) / _interleaved_sums(w[index]))


def test_lemire_rejections_draw_the_next_word_like_numpy():
    """n = 10^6: 2^32 mod n = 967,296 low products are rejected (p = 2.3e-4, ~2,300 of 10^7 draws)."""
    n = 10**6
    u = np.random.default_rng(1).normal(size=n)
    got = resampled_weighted_means(u, None, 10, np.random.default_rng(4))
    np.testing.assert_array_equal(got, _interleaved_sums(u[_numpy_indices(4, n, 10)]) / n)


def test_samples_of_a_call_use_their_own_spawned_streams_and_threads_do_not_matter():
    u = np.random.default_rng(2).normal(size=(5, 30))
    together = resampled_weighted_means(u, None, 20, np.random.default_rng(3))
    assert np.array_equal(together, resampled_weighted_means(u, None, 20, np.random.default_rng(3), threads=1))
    children = np.random.default_rng(3).bit_generator.seed_seq.spawn(5)
    for s, child in enumerate(children):
        index = np.random.Generator(np.random.SFC64(child)).integers(0, 30, size=(20, 30), dtype=np.uint32)
        np.testing.assert_array_equal(together[s], _interleaved_sums(u[s][index]) / 30)


def test_equal_weights_take_the_fast_path_with_the_same_result():
    u = np.random.default_rng(1).normal(size=64)
    plain = resampled_weighted_means(u, None, 200, np.random.default_rng(5))
    equal = resampled_weighted_means(u, np.full(64, 2.5), 200, np.random.default_rng(5))
    np.testing.assert_allclose(plain, equal, rtol=0, atol=1e-15)


def test_zero_total_weight_in_a_replicate_gives_zero_not_nan():
    reps = resampled_weighted_means(np.array([0.5, 0.7]), np.array([0.0, 0.0]), 20, np.random.default_rng(2))
    assert np.all(reps == 0.0)


def test_bootstrap_is_deterministic_given_the_generator_whatever_the_threads():
    samples = [(np.linspace(-0.5, 0.9, 40), None), (np.linspace(-0.3, 0.8, 55), None),
               (np.linspace(-0.1, 0.4, 30), np.linspace(1.0, 2.0, 30))]
    kw = {"replicates": 300, "confidence_level": 0.95}
    one = pairwise_bootstrap(samples, [(0, 1), (1, 2)], rng=np.random.default_rng(3), **kw)
    two = pairwise_bootstrap(samples, [(0, 1), (1, 2)], rng=np.random.default_rng(3), threads=1, **kw)
    assert one == two
    assert pairwise_bootstrap(samples, [(0, 1)], rng=np.random.default_rng(4), **kw) != one


def test_each_vendor_resamples_from_its_own_spawned_stream():
    samples = [(np.linspace(-0.5, 0.9, 40), None), (np.linspace(-0.1, 0.4, 30), np.linspace(1.0, 2.0, 30))]
    result = pairwise_bootstrap(samples, [(0, 1)], replicates=500, confidence_level=0.9, rng=np.random.default_rng(8))
    children = np.random.default_rng(8).spawn(2)
    means = [resampled_weighted_means(u, w, 500, children[v]) for v, (u, w) in enumerate(samples)]
    low, high = percentile_interval(means[0] - means[1], 0.9)
    assert result.pairs[0].ci_u == (float(low), float(high))


def test_e5_bootstrap_is_far_from_significant():
    """The seed's E8 claims p ≈ 0.03 for E5; 3 decisions per vendor cannot support it
    (docs/bakeoff.md: p_min ≈ 0.2)."""
    u_a = np.arctanh(0.8 * np.array([0.604368, 0.291313, 0.910425]))
    u_b = np.arctanh(0.8 * np.array([0.691069, 0.462117, 0.291313]))
    result = pairwise_bootstrap([(u_a, None), (u_b, None)], [(0, 1)], replicates=10_000, confidence_level=0.95,
                                rng=np.random.default_rng(0))
    pair = result.pairs[0]
    assert pair.diff_u == pytest.approx(u_a.mean() - u_b.mean(), abs=1e-15)
    assert 0.15 < pair.p_min < 0.30 and pair.p_two_sided == min(1.0, 2 * pair.p_min)
    assert pair.ci_u[0] < 0 < pair.ci_u[1]
    assert pair.ci_tanh == (math.tanh(pair.ci_u[0]), math.tanh(pair.ci_u[1]))


def test_holm_is_applied_across_all_pairs_of_a_family():
    rng = np.random.default_rng(6)
    samples = [(rng.normal(mu, 0.5, 60), None) for mu in (0.0, 0.15, 0.3, 0.3)]
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    result = pairwise_bootstrap(samples, pairs, replicates=2000, confidence_level=0.95, rng=rng)
    raw = [p.p_two_sided for p in result.pairs]
    np.testing.assert_array_equal([p.p_holm for p in result.pairs], holm_adjust(raw))
    assert all(p.p_holm >= p.p_two_sided for p in result.pairs)


# --------------------------------------------------------------------------- seeded simulations

SIMULATIONS = 1000

NEWEST = KERNELS[-1]
"""The simulations draw with the resampler of the newest ``bakeoff.compare`` (1.2.0 shares 1.1.0's)."""


def test_the_simulations_cover_the_newest_version_s_resampler():
    assert NEWEST.version == "1.2.0" and NEWEST.resample is resampled_weighted_means


def _skewed_rapidities(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return np.arctanh(np.clip(np.tanh(rng.gamma(2.0, 0.3, shape) - 0.3), -0.99, 0.99))


@pytest.mark.slow
def test_two_sided_p_is_calibrated_under_identical_vendors_and_the_seed_p_is_not():
    """Identical (skewed) vendor distributions, weighted decisions, 1000 seeded simulations vectorised:
    P(p ≤ 0.05) ≈ 0.05 for p = min(1, 2 p_min); the seed's p_min read as two-sided rejects about twice
    as often."""
    rng = np.random.default_rng(20261121)
    n_a, n_b, b = 100, 150, 1000
    u_a, u_b = _skewed_rapidities(rng, (SIMULATIONS, n_a)), _skewed_rapidities(rng, (SIMULATIONS, n_b))
    w_a, w_b = rng.uniform(0.5, 2.0, (SIMULATIONS, n_a)), rng.uniform(0.5, 2.0, (SIMULATIONS, n_b))
    d = NEWEST.resample(u_a, w_a, b, rng) - NEWEST.resample(u_b, w_b, b, rng)
    p_min, p_two = bootstrap_p_values(d)
    rejection = float(np.mean(p_two <= 0.05))
    assert 0.03 <= rejection <= 0.075, rejection  # binomial sd at 0.05 with 1000 runs: 0.0069
    assert float(np.mean(p_min <= 0.05)) >= 0.08  # the one-tailed count is not a two-sided p


@pytest.mark.slow
def test_difference_interval_covers_the_weighted_mean_difference():
    """Coverage of the 95% percentile interval of m_A − m_B, m = Σwu/Σw, with weights correlated with u.

    u = μ + 0.2 (w − 1.25) + ε, w ~ U(0.5, 2): the estimand E[wu]/E[w] = μ + 0.2 (E[w²] − 1.25 E[w]) / E[w]
    = μ + 0.03 (E[w] = 1.25, E[w²] = 1.75)."""
    rng = np.random.default_rng(7)
    n, b = 150, 1000

    def vendor(mu: float) -> tuple[np.ndarray, np.ndarray]:
        w = rng.uniform(0.5, 2.0, (SIMULATIONS, n))
        return mu + 0.2 * (w - 1.25) + rng.laplace(0.0, 0.35, (SIMULATIONS, n)), w

    (u_a, w_a), (u_b, w_b) = vendor(0.40), vendor(0.25)
    m_a, m_b = NEWEST.resample(u_a, w_a, b, rng), NEWEST.resample(u_b, w_b, b, rng)
    low, high = percentile_interval(m_a - m_b, 0.95)
    truth = (0.40 + 0.03) - (0.25 + 0.03)
    coverage = float(np.mean((low <= truth) & (truth <= high)))
    assert 0.925 <= coverage <= 0.97, coverage
    # each vendor's own interval (the per-vendor CI of the report) covers its pooled rapidity too
    low_a, high_a = percentile_interval(m_a, 0.95)
    coverage_a = float(np.mean((low_a <= 0.43) & (0.43 <= high_a)))
    assert 0.925 <= coverage_a <= 0.97, coverage_a
    # a deliberately wrong interval (the seed's order statistics at half the tail) would fail the same check
    narrow_low, narrow_high = percentile_interval(m_a - m_b, 0.80)
    assert float(np.mean((narrow_low <= truth) & (truth <= narrow_high))) < 0.9
