"""Confidence-sequence kernels (certa.engine.core.stats.confseq): published and hand-computed values, independent
reference implementations, and the properties the decision layer relies on."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

from certa.engine.core.stats.confseq.methods import CSSettings, confidence_sequence, null_p_value
from certa.engine.core.stats.confseq.asymptotic import asymptotic_cs, asymptotic_p_value, mixture_rho2
from certa.engine.core.stats.confseq.betting import anytime_p_value, hedged_betting_unit, hedged_log_evalue
from certa.engine.core.stats.confseq.common import exact_grid_values, float_grid_values, prefix_mean_variance, to_unit_interval
from certa.engine.core.stats.confseq.eb import prpl_eb_unit
from certa.engine.core.stats.confseq.fixed_n import (eb_fixed_n, eb_fixed_n_p_value, student_t_quantile, t_fixed_n,
                                          t_fixed_n_p_value)
from certa.engine.core.stats.confseq.stitched import poly_stitching_boundary, stitched_eb_unit

# ------------------------------------------------------------------------------------------- stitched


def test_stitched_boundary_reproduces_confseq_reference_values() -> None:
    # confseq's C++ unit test (gostevehoward/confseq):
    # poly_stitching_bound(v=100, alpha=0.05, v_min=10, c, s=1.4, eta=2)
    assert poly_stitching_boundary(100.0, 0.05, 10.0, 3.0) == pytest.approx(64.48755, abs=1e-5)
    assert poly_stitching_boundary(100.0, 0.05, 10.0, -1.0) == pytest.approx(28.99389, abs=1e-5)


def test_stitched_boundary_is_flat_below_m_and_grows_like_sqrt_v_log_log_v() -> None:
    u = poly_stitching_boundary(np.array([0.1, 5.0, 10.0, 1e4, 1e6]), 0.05, 10.0)
    assert u[0] == u[1] == u[2]                            # v~ = max(v, m)
    assert 1.0 < u[4] / u[3] / math.sqrt(100) < 1.1        # sqrt(v) times a slowly growing log log term


def test_stitched_cs_matches_a_direct_evaluation_of_the_formula() -> None:
    y = np.array([0.2, 0.9, 0.4, 0.4, 0.7, 0.1])
    lo, hi = stitched_eb_unit(y, 0.1, 0.5)
    for t in range(1, y.size + 1):                         # one prefix at a time, straight from the docstring
        mean = y[:t].mean()
        predicted = [0.5] + [y[:i].mean() for i in range(1, t)]
        v = sum((y[i] - predicted[i]) ** 2 for i in range(t))
        radius = poly_stitching_boundary(v, 0.05, 0.5, 1.0) / t
        assert lo[t - 1] == pytest.approx(max(mean - radius, 0.0), abs=1e-12)
        assert hi[t - 1] == pytest.approx(min(mean + radius, 1.0), abs=1e-12)


# ---------------------------------------------------------------------------------------------- eb_cs


def _prpl_eb_loop(y: list[float], alpha: float, c: float) -> list[tuple[float, float]]:
    """Waudby-Smith & Ramdas (2023) Thm 2, written observation by observation."""
    out, mu_prev, sig2_prev = [], 0.5, 0.25
    sum_y = sum_sq = sum_lam = sum_lam_y = sum_vpsi = 0.0
    for t, yt in enumerate(y, start=1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (sig2_prev * t * math.log(1 + t))), c)
        sum_lam += lam
        sum_lam_y += lam * yt
        sum_vpsi += (yt - mu_prev) ** 2 * (-math.log(1 - lam) - lam)
        centre, radius = sum_lam_y / sum_lam, (math.log(2 / alpha) + sum_vpsi) / sum_lam
        out.append((max(centre - radius, 0.0), min(centre + radius, 1.0)))
        sum_y += yt
        mu = (0.5 + sum_y) / (t + 1)
        sum_sq += (yt - mu) ** 2
        sig2_prev = (0.25 + sum_sq) / (t + 1)
        mu_prev = mu
    return out


def test_eb_cs_matches_an_observation_by_observation_reference() -> None:
    y = np.random.default_rng(3).beta(2.0, 5.0, size=60)
    lo, hi = prpl_eb_unit(y, 0.05, 0.5)
    ref = np.array(_prpl_eb_loop(y.tolist(), 0.05, 0.5))
    np.testing.assert_allclose(lo, ref[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, ref[:, 1], rtol=0, atol=1e-12)


def test_eb_cs_first_step_by_hand() -> None:
    # t = 1, y = 1: lambda = min(sqrt(2 ln 40 / (0.25 ln 2)), 1/2) = 1/2, psi(1/2) = ln 2 - 1/2, w = 1/4
    lo, hi = prpl_eb_unit(np.array([1.0]), 0.05, 0.5)
    radius = (math.log(40) + 0.25 * (math.log(2) - 0.5)) / 0.5
    assert lo[0] == max(1.0 - radius, 0.0) == 0.0 and hi[0] == 1.0


def test_kernels_are_vectorised_over_leading_axes() -> None:
    y = np.random.default_rng(4).uniform(size=(3, 80))
    for kernel in (lambda a: prpl_eb_unit(a, 0.1), lambda a: stitched_eb_unit(a, 0.1, 1.0),
                   lambda a: hedged_betting_unit(a, 0.1, grid_size=100)):
        lo2, hi2 = kernel(y)
        for s in range(3):
            lo1, hi1 = kernel(y[s])
            np.testing.assert_array_equal(lo2[s], lo1)
            np.testing.assert_array_equal(hi2[s], hi1)


# -------------------------------------------------------------------------------------------- betting


def _betting_full_grid(y: np.ndarray, alpha: float, g: int, c: float = 0.5, theta: float = 0.5):
    """The hedged CS on the whole grid at every t, no window trimming (an independent reference)."""
    from certa.engine.core.stats.confseq.common import prpl_lambda
    lam = prpl_lambda(y, alpha)[:, None]
    m = np.arange(g + 1) / g
    with np.errstate(divide="ignore"):
        lam_p, lam_m = np.minimum(lam, c / m), np.minimum(lam, c / (1 - m))
    k_plus = np.maximum.accumulate(np.cumsum(np.log1p(lam_p * (y[:, None] - m)), axis=0), axis=0)
    k_minus = np.maximum.accumulate(np.cumsum(np.log1p(-lam_m * (y[:, None] - m)), axis=0), axis=0)
    kept = (k_plus < np.log(1 / (theta * alpha))) & (k_minus < np.log(1 / ((1 - theta) * alpha)))
    lower = np.array([m[max(np.argmax(row) - 1, 0)] if row.any() else np.nan for row in kept])
    upper = np.array([m[min(g - np.argmax(row[::-1]) + 1, g)] if row.any() else np.nan for row in kept])
    return lower, upper


@pytest.mark.parametrize("shape", ["beta", "bernoulli", "near_zero"])
def test_betting_window_trimming_equals_the_full_grid_computation(shape: str) -> None:
    rng = np.random.default_rng(11)
    y = {"beta": rng.beta(0.7, 2.0, 400), "bernoulli": rng.binomial(1, 0.3, 400).astype(float),
         "near_zero": np.clip(rng.normal(0.01, 0.005, 400), 0, 1)}[shape]
    ref_lo, ref_hi = _betting_full_grid(y, 0.05, 200)
    for chunk in (1 << 20, 300, 7):                        # chunking must not change the path
        lo, hi = hedged_betting_unit(y, 0.05, grid_size=200, chunk_elements=chunk)
        np.testing.assert_array_equal(lo, ref_lo)
        np.testing.assert_array_equal(hi, ref_hi)


def test_betting_cs_is_nested_and_contains_the_sample_mean_region() -> None:
    y = np.random.default_rng(5).beta(2, 2, 2000)
    lo, hi = hedged_betting_unit(y, 0.05, grid_size=1000)
    assert np.all(np.diff(lo) >= 0) and np.all(np.diff(hi) <= 0)      # running intersection
    assert lo[-1] < 0.5 < hi[-1] and hi[-1] - lo[-1] < 0.05


def test_betting_p_value_is_at_most_alpha_whenever_the_cs_excludes_a_grid_point() -> None:
    # max(theta K+, (1-theta) K-) >= 1/alpha implies theta K+ + (1-theta) K- >= 1/alpha
    rng = np.random.default_rng(6)
    y = rng.beta(2, 5, size=(50, 300))
    lo, hi = hedged_betting_unit(y, 0.1, grid_size=100)
    m0 = 0.3                                                # a grid point near the true mean 2/7
    p = anytime_p_value(hedged_log_evalue(y, m0, 0.1))
    excluded = (lo > m0) | (hi < m0)
    assert excluded.any()
    assert np.all(p[excluded] <= 0.1)


def test_anytime_p_value_is_a_running_minimum_in_unit_interval() -> None:
    y = np.random.default_rng(8).uniform(size=500)
    p = anytime_p_value(hedged_log_evalue(y, 0.5, 0.05))
    assert np.all((p > 0) & (p <= 1)) and np.all(np.diff(p) <= 0)
    p_far = anytime_p_value(hedged_log_evalue(np.full(200, 0.9), 0.1, 0.05))
    assert p_far[-1] < 1e-10                               # a wrong null is rejected decisively


# ----------------------------------------------------------------------------------------- asymptotic


def test_asymptotic_cs_matches_the_formula_by_hand() -> None:
    x = np.array([1.0, 2.0, 4.0, 3.0, 5.0])
    cs = asymptotic_cs(x, 0.05, t_opt=10)
    rho2 = (2 * math.log(20) + math.log(1 + 2 * math.log(20))) / 10
    assert mixture_rho2(0.05, 10) == pytest.approx(rho2, rel=1e-15)
    t = 4
    sd = float(np.std(x[:t], ddof=1))
    radius = sd * math.sqrt(2 * (t * rho2 + 1) / (t * t * rho2) * math.log(math.sqrt(t * rho2 + 1) / 0.05))
    assert cs.lower[t - 1] == pytest.approx(2.5 - radius, rel=1e-12)
    assert cs.upper[t - 1] == pytest.approx(2.5 + radius, rel=1e-12)
    assert cs.lower[0] == -np.inf and cs.validity == "asymptotic anytime-valid"


def test_asymptotic_cs_is_wide_while_all_scores_are_equal() -> None:
    cs = asymptotic_cs(np.array([0.3, 0.3, 0.3, 0.3, 0.5]), 0.05, t_opt=10)
    assert np.all(np.isinf(cs.lower[:4])) and np.isfinite(cs.lower[4])


def test_asymptotic_p_value_crosses_alpha_exactly_when_the_cs_excludes_m0() -> None:
    x = np.random.default_rng(9).normal(0.15, 1.0, size=(40, 400))
    cs = asymptotic_cs(x, 0.05, t_opt=200)
    p = asymptotic_p_value(x, 0.0, 0.05, t_opt=200)
    ever_excluded = np.logical_or.accumulate((cs.lower > 0) | (cs.upper < 0), axis=1)
    assert ever_excluded.any() and (~ever_excluded).any()
    np.testing.assert_array_equal(ever_excluded, p < 0.05)


# -------------------------------------------------------------------------------------------- fixed n


def test_t_fixed_n_uses_the_student_t_quantile_at_the_configured_alpha() -> None:
    x = np.random.default_rng(10).normal(size=50)
    for alpha in (0.01, 0.1):
        cs = t_fixed_n(x, alpha)
        for n in (2, 3, 10, 50):
            lo, hi = stats.t.interval(1 - alpha, n - 1, loc=x[:n].mean(), scale=stats.sem(x[:n]))
            assert cs.lower[n - 1] == pytest.approx(lo, rel=1e-10)
            assert cs.upper[n - 1] == pytest.approx(hi, rel=1e-10)
    # the seed's table says 4.604 for every n in 2..4 at 99 %; the real quantile at df = 1 is 63.66
    assert student_t_quantile(0.995, np.array([1.0]))[0] == pytest.approx(63.657, abs=1e-3)


def test_student_t_quantile_expansion_agrees_with_scipy_for_large_df() -> None:
    df = np.unique(np.geomspace(2000, 1e7, 400).round())
    for p in (0.975, 0.995, 0.9995):
        np.testing.assert_allclose(student_t_quantile(p, df), special.stdtrit(df, p), rtol=0, atol=1e-12)


def test_t_fixed_n_p_value_matches_scipy_ttest() -> None:
    x = np.random.default_rng(12).normal(0.2, 1.0, 30)
    p = t_fixed_n_p_value(x, 0.0)
    for n in (2, 5, 30):
        assert p[n - 1] == pytest.approx(stats.ttest_1samp(x[:n], 0.0).pvalue, rel=1e-9)


def test_eb_fixed_n_is_the_seed_formula_centred_on_the_clipped_mean() -> None:
    x = np.array([0.05, 0.1, 0.3, 0.02, 0.07, 0.12])        # 0.3 is clipped to 0.2
    cs = eb_fixed_n(x, 0.01, 0.0, 0.2)
    y = np.clip(x, 0, 0.2) / 0.2
    n, big_l = 6, math.log(3 / 0.01)
    h = math.sqrt(2 * np.var(y, ddof=1) * big_l / n) + 3 * big_l / (n - 1)
    assert cs.lower[-1] == pytest.approx(0.2 * (y.mean() - h), rel=1e-12)
    assert cs.upper[-1] == pytest.approx(0.2 * (y.mean() + h), rel=1e-12)
    assert cs.validity == "not valid under optional stopping"


def test_eb_fixed_n_p_value_inverts_the_interval() -> None:
    x = np.random.default_rng(13).uniform(0.02, 0.12, 400)
    p = eb_fixed_n_p_value(x, 0.0, 0.0, 0.2)
    for n in (50, 150, 400):
        at_p = eb_fixed_n(x[:n], float(p[n - 1]), 0.0, 0.2)
        assert at_p.lower[-1] == pytest.approx(0.0, abs=1e-12)  # the interval at level p just touches m0


# ----------------------------------------------------------------------------------------- dispatcher


def test_clip_counts_and_unit_mapping() -> None:
    unit = to_unit_interval(np.array([[-1.0, 0.0, 0.1, 0.3]]), 0.0, 0.2)
    np.testing.assert_allclose(unit.y, [[0.0, 0.0, 0.5, 1.0]])
    assert unit.n_clipped.tolist() == [2]
    with pytest.raises(ValueError, match="finite low < high"):
        to_unit_interval(np.zeros(3), 0.2, 0.2)


def test_prefix_variance_is_accurate_with_a_large_offset() -> None:
    x = 1e8 + np.random.default_rng(14).normal(size=1000)
    mean, var = prefix_mean_variance(x)
    assert var[-1] == pytest.approx(np.var(x, ddof=1), rel=1e-9)
    assert mean[99] == pytest.approx(x[:100].mean(), rel=1e-15) and np.isnan(var[0])


@pytest.mark.parametrize("method", ["betting", "eb_cs", "stitched", "asymptotic_cs", "eb_fixed_n", "t_fixed_n"])
def test_every_method_returns_ordered_paths_in_score_units(method: str) -> None:
    x = np.random.default_rng(15).normal(0.05, 0.01, 300)
    cs = confidence_sequence(x, method, 0.05, 0.0, 0.2, CSSettings(t_opt=300))
    assert cs.lower.shape == cs.upper.shape == (300,)
    assert np.all(cs.lower[5:] <= cs.upper[5:])
    assert cs.lower[-1] < 0.05 < cs.upper[-1]
    p = null_p_value(x, method, 0.0, 0.05, 0.0, 0.2, CSSettings(t_opt=300))
    assert p.p.shape == (300,) and p.p[-1] < 0.05


def test_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown method 'eb'"):
        confidence_sequence(np.zeros(3), "eb", 0.05, 0.0, 1.0)


def test_asymptotic_p_value_counts_from_start() -> None:
    x = np.array([0.0, 1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0])
    early = asymptotic_p_value(x, 0.0, 0.05, t_opt=10)
    late = asymptotic_p_value(x, 0.0, 0.05, t_opt=10, start=6)
    assert np.all(late[:5] == 1.0) and late[-1] >= early[-1]
    assert late[-1] < 1.0


def test_exact_grid_values_are_the_decimal_grid_points_rounded_once() -> None:
    j = np.arange(1001)
    for low, high in ((-0.2, 0.2), (0.1, 0.3), (-0.123456789012345, 0.2)):   # the last beyond 2^53: Fraction
        lo, hi = Fraction(str(low)), Fraction(str(high))
        assert exact_grid_values(j, 1000, low, high).tolist() == [float(lo + (hi - lo) * k / 1000) for k in j.tolist()]
    assert exact_grid_values(np.array([[525]]), 1000, -0.2, 0.2).tolist() == [[0.01]]
    assert float_grid_values(np.array([525]), 1000, -0.2, 0.2).tolist() == [0.010000000000000009]   # 1.x
