"""Tests of engine/core/stats/bootstrap/weighted_mean.py (the compiled kernel of ``paired.ppl_ratio`` 1.1.0) and of the frozen
engine/core/stats/bootstrap/weighted_mean_v1_0_0.py (1.0.0).

1.1.0: the drawn indices equal numpy's own SFC64 draws bit for bit (Lemire integers for ``uniform``, the alias
method on ``Generator(SFC64).random()`` for ``token_weighted``); the replicates equal the documented statistic
on those indices bit for bit; sampling frequencies match the weights (chi-square); the result does not depend
on the thread count; memory is O(n + B); a two-window case checkable by hand; agreement with scipy to Monte
Carlo error; calibration by seeded coverage simulations. 1.0.0: still scipy's index stream and arithmetic
(the golden corpus, tests/services/test_golden.py, pins its certificates byte for byte).
"""

from __future__ import annotations

import dataclasses
import math
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from certa.engine.core.stats.bootstrap import weighted_mean as bs
from certa.engine.core.stats.bootstrap import weighted_mean_v1_0_0 as v1
from certa.engine.core.stats.bootstrap.weighted_mean import (
    REPLICATE_BLOCK,
    BootstrapCI,
    alias_table,
    jackknife_acceleration,
    resample_indices,
    token_weighted_mean,
    weighted_mean_bootstrap_ci,
    weighted_mean_replicates,
)


def _weighted_mean(d, t, axis=-1):
    """The statistic as a scipy user would write it."""
    return (t * d).sum(axis) / t.sum(axis)


def _windows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Skewed per-window Δ log-loss, correlated with heterogeneous token counts."""
    g = np.random.default_rng(seed)
    t = g.integers(32, 2048, n).astype(np.float64)
    d = g.normal(0.02, 0.1, n) + g.exponential(0.05, n) + 0.03 * (t < 256)
    return d, t


def _scipy(d, t, statistic, *, method, replicates, seed, batch, level=0.95):
    data = (d,) if t is None else (d, t)
    return stats.bootstrap(data, statistic, paired=True, vectorized=True, method=method,
                           n_resamples=replicates, batch=batch, confidence_level=level,
                           rng=np.random.default_rng(seed))


def _block_generators(seed: int, replicates: int) -> list[tuple[np.random.Generator, int]]:
    """The documented streams, built by numpy itself: (Generator(SFC64(child j)), rows of block j)."""
    blocks = -(-replicates // REPLICATE_BLOCK)
    children = np.random.default_rng(seed).bit_generator.seed_seq.spawn(blocks)
    return [(np.random.Generator(np.random.SFC64(child)), min(REPLICATE_BLOCK, replicates - j * REPLICATE_BLOCK))
            for j, child in enumerate(children)]


def _numpy_indices(t: np.ndarray, seed: int, replicates: int, scheme: str) -> np.ndarray:
    """The documented index stream drawn by numpy: Lemire uint32 integers, or the alias method on random()."""
    n = t.size
    blocks = []
    for generator, rows in _block_generators(seed, replicates):
        if scheme == "uniform":
            blocks.append(generator.integers(0, n, size=(rows, n), dtype=np.uint32))
        else:
            prob, alias = alias_table(t)
            v = generator.random(size=(rows, n)) * n
            column = v.astype(np.int64)
            blocks.append(np.where(v - column < prob[column], column, alias[column]).astype(np.uint32))
    return np.vstack(blocks)


def _interleaved_sums(x: np.ndarray) -> np.ndarray:
    """Row sums as the kernel forms them: even draws and odd draws summed left to right, then added."""
    even = np.zeros(x.shape[0])
    odd = np.zeros(x.shape[0])
    for k in range(x.shape[1]):
        if k % 2:
            odd += x[:, k]
        else:
            even += x[:, k]
    return even + odd


# --------------------------------------------------------------------------------------------------
# point estimate


def test_point_estimate_reproduces_the_seed_counter_example():
    """Seed 001: weights [512, 256], preview ppl [40, 220], final [38, 260] → 1.0217…, not 1.12."""
    tokens = np.array([512.0, 256.0])
    preview, final = np.array([40.0, 220.0]), np.array([38.0, 260.0])
    ratio = math.exp(token_weighted_mean(np.log(final) - np.log(preview), tokens))
    # by hand: (512 ln(38/40) + 256 ln(260/220)) / 768 = 0.0214892…, exp → 1.0217218…
    assert round(ratio, 6) == 1.021722
    ratio_of_means = np.sum(tokens * final) / np.sum(tokens * preview)
    assert round(float(ratio_of_means), 2) == 1.12
    assert abs(ratio - ratio_of_means) > 0.09


def test_point_estimate_rejects_overflow_and_bad_tokens():
    with pytest.raises(ValueError, match="not finite"):
        token_weighted_mean(np.array([1e308, 1e308]), np.array([4.0, 4.0]))
    with pytest.raises(ValueError, match="'tokens' must be finite and > 0"):
        token_weighted_mean(np.array([0.1]), np.array([0.0]))
    assert token_weighted_mean(np.array([0.25]), np.array([3.0])) == 0.25     # one window is enough here


def test_point_estimate_is_the_token_weighted_not_the_plain_mean():
    d, t = np.array([0.1, 0.4, -0.2]), np.array([100.0, 300.0, 600.0])
    assert token_weighted_mean(d, t) == pytest.approx((10 + 120 - 120) / 1000, abs=1e-15)
    ci = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(0), replicates=200)
    assert ci.estimate == token_weighted_mean(d, t)


# --------------------------------------------------------------------------------------------------
# 1.1.0 streams: numpy's own SFC64 draws, bit for bit


@pytest.mark.parametrize("n, replicates", [(2, 300), (37, 700), (300, 256), (1001, 513)])
def test_uniform_indices_are_numpys_sfc64_lemire_integers(n, replicates):
    """Block j: Generator(SFC64(child j of seed_seq.spawn(⌈B/256⌉))).integers(0, n, dtype=uint32), in order;
    odd n leaves half an SFC64 output for the next replicate, as numpy's buffered draws do."""
    t = np.random.default_rng(n).integers(1, 3000, n).astype(float)
    got = resample_indices(t, rng=np.random.default_rng(5), replicates=replicates)
    assert got.dtype == np.uint32 and got.shape == (replicates, n)
    assert np.array_equal(got, _numpy_indices(t, 5, replicates, "uniform"))


@pytest.mark.parametrize("profile", ["uniform_ints", "small_ints", "lognormal", "one_giant", "equal"])
def test_token_weighted_indices_are_the_alias_method_on_numpys_sfc64_doubles(profile):
    g = np.random.default_rng(len(profile))
    n = 301
    t = {
        "uniform_ints": g.integers(64, 2048, n).astype(float),
        "small_ints": g.integers(1, 5, n).astype(float),
        "lognormal": np.exp(g.normal(0.0, 3.0, n)),
        "one_giant": np.r_[np.ones(n - 1), 1e9],
        "equal": np.full(n, 512.0),
    }[profile]
    got = resample_indices(t, rng=np.random.default_rng(3), replicates=600, scheme="token_weighted")
    assert np.array_equal(got, _numpy_indices(t, 3, 600, "token_weighted"))


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_replicates_are_the_documented_statistic_on_those_indices(scheme):
    """θ* = interleaved Σ(t·d) / interleaved Σt (uniform) or interleaved Σd / n (token_weighted), bit for bit."""
    d, t = _windows(301, seed=21)
    idx = _numpy_indices(t, 9, 1000, scheme).astype(np.intp)
    if scheme == "uniform":
        expected = _interleaved_sums((t * d)[idx]) / _interleaved_sums(t[idx])
    else:
        expected = _interleaved_sums(d[idx]) / d.size
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(9), replicates=1000, scheme=scheme)
    assert np.array_equal(theta, expected)


def test_alias_table_by_hand():
    """t = (1, 3): q = (0.5, 1.5); column 0 keeps 0.5 and aliases to 1; q_1 = (1.5 + 0.5) − 1 = 1."""
    prob, alias = alias_table(np.array([1.0, 3.0]))
    assert prob.tolist() == [0.5, 1.0] and alias.tolist() == [1, 1]
    # P(0) = 0.5 / 2 = 1/4, P(1) = (1 + 0.5) / 2 = 3/4 = t / Σt


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alias_table_probabilities_equal_the_token_shares(seed):
    g = np.random.default_rng(seed)
    t = np.r_[g.integers(1, 10**6, 997).astype(float), np.exp(g.normal(0.0, 4.0, 1000))]
    prob, alias = alias_table(t)
    implied = (prob + np.bincount(alias, weights=1.0 - prob, minlength=t.size)) / t.size
    np.testing.assert_allclose(implied, t / t.sum(), rtol=1e-10, atol=1e-18)   # measured ≤ 2e-12
    assert np.all((prob > 0) & (prob <= 1))


def test_token_weighted_frequencies_match_the_weights_chi_square():
    """200 000 seeded draws over 40 windows with shares from 1/820 to 40/820: χ² goodness of fit."""
    t = np.arange(1.0, 41.0)
    idx = resample_indices(t, rng=np.random.default_rng(2026), replicates=5000, scheme="token_weighted")
    counts = np.bincount(idx.ravel(), minlength=t.size)
    expected = idx.size * t / t.sum()
    result = stats.chisquare(counts, expected)
    assert result.pvalue > 1e-3, result                     # measured p = 0.080
    uniform = resample_indices(t, rng=np.random.default_rng(2026), replicates=5000)
    assert stats.chisquare(np.bincount(uniform.ravel(), minlength=t.size)).pvalue > 1e-3     # equal shares: p = 0.84
    assert stats.chisquare(np.bincount(uniform.ravel(), minlength=t.size), expected).pvalue < 1e-100


def test_tiny_case_checkable_by_hand():
    """d = (0, 1), t = (1, 3), θ̂ = 3/4. uniform: pairs (0,0), (0,1), (1,0), (1,1) give θ* = 0, 3/4, 3/4, 1 with
    probabilities 1/4, 1/2, 1/4; token_weighted (P(1) = 3/4): θ* = 0, 1/2, 1 with probabilities 1/16, 6/16, 9/16."""
    d, t = np.array([0.0, 1.0]), np.array([1.0, 3.0])
    replicates = 40_000
    for scheme, support, probs in (("uniform", [0.0, 0.75, 1.0], [0.25, 0.5, 0.25]),
                                   ("token_weighted", [0.0, 0.5, 1.0], [1 / 16, 6 / 16, 9 / 16])):
        theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(1), replicates=replicates, scheme=scheme)
        assert set(np.unique(theta).tolist()) == set(support)
        for value, p in zip(support, probs):
            assert np.mean(theta == value) == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / replicates))
    first = resample_indices(t, rng=np.random.default_rng(1), replicates=3)
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(1), replicates=3)
    assert theta.tolist() == [[0.0, 0.75, 0.75, 1.0][2 * int(i) + int(j)] for i, j in first]


# --------------------------------------------------------------------------------------------------
# determinism, threads, memory


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_result_is_independent_of_the_thread_count(scheme):
    d, t = _windows(3000, seed=6)         # 3000 replicates: 12 blocks; enough draws to start threads
    kw = {"replicates": 3000, "scheme": scheme}
    base = weighted_mean_replicates(d, t, rng=np.random.default_rng(17), **kw)
    for threads in (1, 2, 3, 8):
        assert np.array_equal(base, weighted_mean_replicates(d, t, rng=np.random.default_rng(17), threads=threads,
                                                             **kw)), threads
    a = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(17), **kw)
    b = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(17), threads=1, **kw)
    assert a == b and a.index_streams == 12
    c = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(18), **kw)
    assert (c.low, c.high) != (a.low, a.high)


def test_a_block_depends_only_on_its_own_stream():
    """Replicates 0..255 are block 0 whatever B is, given the same number of spawned streams' first child."""
    d, t = _windows(100, seed=3)
    short = weighted_mean_replicates(d, t, rng=np.random.default_rng(4), replicates=200)
    long = weighted_mean_replicates(d, t, rng=np.random.default_rng(4), replicates=1000)
    assert np.array_equal(short, long[:200])      # child 0 of spawn(k) is the same seed for every k


def test_generator_seed_sequence_advances_between_calls():
    """Consecutive calls on one generator spawn new children (a stage that draws twice gets new draws)."""
    d, t = _windows(80, seed=1)
    rng = np.random.default_rng(4)
    first = weighted_mean_replicates(d, t, rng=rng, replicates=300)
    second = weighted_mean_replicates(d, t, rng=rng, replicates=300)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_memory_is_bounded_by_o_of_n_plus_b(scheme):
    """n = B = 10⁴ (10⁸ draws): no index array; Python-side peak under 2 MiB (measured 0.39 / 0.61 MiB;
    1.0.0 needed 5.7 / 22.8 MiB for its index blocks)."""
    d, t = _windows(10_000, seed=4)
    weighted_mean_bootstrap_ci(d[:100], t[:100], rng=np.random.default_rng(0), replicates=100, scheme=scheme)
    tracemalloc.start()
    try:
        weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(0), replicates=10_000, scheme=scheme)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20, peak


# --------------------------------------------------------------------------------------------------
# intervals


def test_bca_agrees_with_scipy_to_monte_carlo_error():
    """Different random streams, same bootstrap: the BCa endpoints agree within their Monte Carlo error.

    A bootstrap quantile from B replicates has standard error ≈ sd(θ*)·sqrt(p(1−p)/B)/φ(z_p); the
    difference of two independent runs is within 4·sqrt(2) of that (p = 0.025, B = 20 000).
    """
    d, t = _windows(200, seed=31)
    replicates = 20_000
    ours = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1), replicates=replicates)
    ref = _scipy(d, t, _weighted_mean, method="BCa", replicates=replicates, seed=2, batch=2000)
    spread = float(np.std(ref.bootstrap_distribution))
    p = 0.025
    se = spread * math.sqrt(p * (1 - p) / replicates) / stats.norm.pdf(stats.norm.ppf(p))
    assert abs(ours.low - ref.confidence_interval.low) < 4 * math.sqrt(2) * se
    assert abs(ours.high - ref.confidence_interval.high) < 4 * math.sqrt(2) * se
    assert 4 * math.sqrt(2) * se < 0.1 * (ref.confidence_interval.high - ref.confidence_interval.low)


def test_bca_interval_is_the_textbook_formula_on_its_replicates():
    """Given its replicates, the interval is Efron & Tibshirani's BCa: z0 from the replicates (ties count one
    half), a from the brute-force jackknife (O(n^2) here, O(n) in certa), levels Φ(z0 + (z0 + z)/(1 − a(z0 + z)))."""
    d, t = _windows(150, seed=2)
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(3), replicates=2000)
    ci = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(3), replicates=2000)
    z0 = stats.norm.ppf((np.sum(theta < ci.estimate) + np.sum(theta <= ci.estimate)) / (2 * theta.size))
    assert ci.z0 == pytest.approx(z0, rel=1e-14)
    leave_one_out = np.array([(np.sum(t * d) - t[i] * d[i]) / (np.sum(t) - t[i]) for i in range(d.size)])
    u = leave_one_out.mean() - leave_one_out
    a = np.sum(u ** 3) / (6 * np.sum(u ** 2) ** 1.5)
    assert ci.acceleration == pytest.approx(a, rel=1e-9)
    z = stats.norm.ppf([0.025, 0.975])
    levels = stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(theta, levels, method="linear")), rel=1e-12)


@pytest.mark.parametrize("deltas, tokens", [([0.0, 1.0], [4.0, 4.0]), ([0.0, 1.0, 1.0], [2.0, 1.0, 1.0])])
def test_ties_with_the_estimate_count_one_half_in_z0(deltas, tokens):
    """With n = 2 or 3 about half the replicates equal θ̂ exactly; z0 = Φ⁻¹((#< + #≤) / 2B) ≈ 0 (scipy's rule),
    whereas a strict-"<" rule (InvarLock) would give z0 ≈ Φ⁻¹(1/4) = −0.67."""
    d, t = np.array(deltas), np.array(tokens)
    ci = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(3), replicates=4000)
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(3), replicates=4000)
    assert np.mean(theta == ci.estimate) > 0.3
    assert abs(ci.z0) < 0.1 and ci.method == "bca"


def test_bca_differs_from_percentile_on_skewed_data():
    """Guards against a BCa that silently degenerates to the percentile interval."""
    g = np.random.default_rng(3)
    d, t = 0.05 * np.exp(g.normal(0.0, 1.0, 60)), g.integers(32, 2048, 60).astype(float)   # right-skewed
    kw = {"replicates": 4000}
    bca = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(9), method="bca", **kw)
    pct = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(9), method="percentile", **kw)
    assert bca.method == "bca" and bca.acceleration > 0.05     # measured 0.068
    assert bca.low - pct.low > 0.001 and bca.high - pct.high > 0.004


def test_acceleration_equals_the_brute_force_jackknife():
    """O(n) leave-one-out vs the explicit n × (n−1) jackknife and scipy's formula (E&T eq. 14.15)."""
    g = np.random.default_rng(4)
    d, t = 0.05 * np.exp(g.normal(0.0, 1.0, 60)), g.integers(32, 2048, 60).astype(float)   # right-skewed
    n = d.size
    keep = ~np.eye(n, dtype=bool)
    loo = (np.where(keep, t * d, 0.0).sum(1)) / (np.where(keep, t, 0.0).sum(1))
    u = (n - 1) * (loo.mean() - loo)                   # scipy's U_i
    expected = (np.sum(u**3) / n**3) / 6 / (np.sum(u**2) / n**2) ** 1.5
    assert jackknife_acceleration(d, t) == pytest.approx(expected, rel=1e-9)
    assert jackknife_acceleration(d, t) > 0.03            # skewed data: a clearly non-zero


def test_acceleration_is_scale_free_and_survives_tiny_deltas():
    d, t = _windows(40, seed=8)
    a = jackknife_acceleration(d, t)
    assert jackknife_acceleration(d * 1e-200, t) == pytest.approx(a, rel=1e-12)
    assert jackknife_acceleration(d, t * 7.0) == pytest.approx(a, rel=1e-12)
    assert jackknife_acceleration(np.full(5, 0.3), np.arange(1.0, 6.0)) is None   # zero jackknife variance


def test_token_weighted_replicates_have_the_resampling_moments():
    """p ∝ t resampling: E*[θ*] = Σp_i d_i = θ̂ and Var*[θ*] = Σp_i (d_i − θ̂)² / n, within MC error."""
    d, t = _windows(120, seed=21)
    n, replicates = d.size, 40_000
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(3), replicates=replicates,
                                     scheme="token_weighted")
    p = t / t.sum()
    mean = float(np.sum(p * d))
    var = float(np.sum(p * (d - mean) ** 2) / n)
    se_mean = math.sqrt(var / replicates)
    assert abs(theta.mean() - mean) < 4 * se_mean
    assert abs(np.mean(d) - mean) > 20 * se_mean                 # the test can tell the schemes apart
    assert theta.var(ddof=1) / var == pytest.approx(1.0, abs=0.03)   # SE of the ratio ≈ √(2/B) ≈ 0.007


# --------------------------------------------------------------------------------------------------
# degenerate data, fallbacks, input validation


def _untouched(rng: np.random.Generator) -> tuple:
    return rng.bit_generator.state, rng.bit_generator.seed_seq.n_children_spawned


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_degenerate_deltas_collapse_ci_to_point_without_rng(scheme, method):
    d, t = np.full(50, 0.0375), np.arange(10.0, 60.0)
    rng = np.random.default_rng(123)
    before = _untouched(rng)
    ci = weighted_mean_bootstrap_ci(d, t, rng=rng, replicates=1000, method=method, scheme=scheme)
    assert _untouched(rng) == before
    assert ci.degenerate and ci.degenerate_reason == "all deltas equal"
    assert ci.low == ci.high == ci.estimate == pytest.approx(0.0375, rel=1e-15)
    assert ci.replicates == 0 and ci.z0 is None and ci.acceleration is None and ci.fallback is None
    assert ci.method == method and ci.scheme == scheme and ci.index_streams == 0


def test_bca_falls_back_to_percentile_when_bias_correction_is_infinite():
    """n = 2, B = 3, seed 8: all three replicates draw window 1 twice (θ* = 1 > θ̂ = 0.75), so z0 = −∞."""
    d, t = np.array([0.0, 1.0]), np.array([1.0, 3.0])
    ci = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(8), replicates=3)
    pct = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(8), replicates=3, method="percentile")
    assert ci.method == "percentile" and ci.fallback.startswith("percentile: BCa bias correction undefined")
    assert ci.z0 is None and ci.acceleration == 0.0
    assert (ci.low, ci.high) == (pct.low, pct.high) == (1.0, 1.0)


def test_bca_falls_back_to_percentile_when_adjustment_is_undefined():
    """One outlier gives a ≈ 1/6 (its maximum); at level 1 − 1e-9, |z| = 6.1 and 1 − a(z0 + z) < 0."""
    g = np.random.default_rng(0)
    d = np.r_[1.0, g.normal(0.0, 1e-3, 99)]
    t = np.full(100, 10.0)
    assert jackknife_acceleration(d, t) == pytest.approx(0.164, abs=1e-3)
    ok = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1), replicates=2000)
    assert ok.method == "bca" and ok.fallback is None
    ci = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1), replicates=2000,
                                    confidence_level=1 - 1e-9)
    pct = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1), replicates=2000,
                                     confidence_level=1 - 1e-9, method="percentile")
    assert ci.method == "percentile" and "1 - a(z0 + z) <= 0" in ci.fallback
    assert (ci.low, ci.high) == (pct.low, pct.high)
    assert ci.z0 is not None and ci.acceleration == pytest.approx(0.164, abs=1e-3)


@pytest.mark.parametrize("deltas, tokens, kwargs, message", [
    ([0.1], [5.0], {}, "at least 2 paired windows"),
    ([], [], {}, "at least 2 paired windows"),
    ([0.1, 0.2], [5.0], {}, "same length"),
    ([[0.1, 0.2]], [[5.0, 6.0]], {}, "1-D"),
    ([0.1, np.nan], [5.0, 6.0], {}, "'deltas' must be finite (window 1"),
    ([0.1, np.inf], [5.0, 6.0], {}, "'deltas' must be finite"),
    ([0.1, 0.2], [5.0, -1.0], {}, "'tokens' must be finite and > 0 (window 1 has -1.0)"),
    ([0.1, 0.2], [0.0, 3.0], {}, "'tokens' must be finite and > 0 (window 0"),
    ([0.1, 0.2], [np.inf, 3.0], {}, "'tokens' must be finite and > 0"),
    ([0.1, 0.2], [np.nan, 3.0], {}, "'tokens' must be finite and > 0"),
    ([1e308, 1e308], [4.0, 4.0], {}, "not finite"),
    ([0.1, 0.2], [1.0, 2.0], {"replicates": 0}, "'replicates' must be a positive integer"),
    ([0.1, 0.2], [1.0, 2.0], {"replicates": 10.5}, "'replicates' must be a positive integer"),
    ([0.1, 0.2], [1.0, 2.0], {"confidence_level": 1.0}, "'confidence_level' must be in (0, 1)"),
    ([0.1, 0.2], [1.0, 2.0], {"confidence_level": 0.0}, "'confidence_level' must be in (0, 1)"),
    ([0.1, 0.2], [1.0, 2.0], {"method": "BCa"}, "'method' must be one of"),
    ([0.1, 0.2], [1.0, 2.0], {"scheme": "weighted"}, "'scheme' must be one of"),
    ([0.1, 0.2], [1.0, 2.0], {"threads": 0}, "'threads' must be a positive integer or None"),
])
def test_invalid_input_raises_value_error_naming_the_problem(deltas, tokens, kwargs, message):
    rng = np.random.default_rng(0)
    before = _untouched(rng)
    with pytest.raises(ValueError) as err:
        weighted_mean_bootstrap_ci(np.asarray(deltas, dtype=float), np.asarray(tokens, dtype=float),
                                   rng=rng, **kwargs)
    assert message in str(err.value)
    assert _untouched(rng) == before


def test_rng_must_be_a_generator():
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        weighted_mean_bootstrap_ci(np.array([0.1, 0.2]), np.array([1.0, 2.0]), rng=42)  # type: ignore[arg-type]


def test_public_api_is_pinned():
    assert bs.__all__ == ["REPLICATE_BLOCK", "RESAMPLING", "BootstrapCI", "DISTRIBUTION_PROBABILITIES", "alias_table",
                          "checked_windows", "interval_from_replicates", "jackknife_acceleration",
                          "resample_indices", "token_weighted_mean", "weighted_mean_bootstrap_ci",
                          "weighted_mean_replicates"]
    assert REPLICATE_BLOCK == 256 and set(bs.RESAMPLING) == {"uniform", "token_weighted"}
    assert [f.name for f in dataclasses.fields(BootstrapCI)] == [
        "estimate", "low", "high", "method", "scheme", "replicates", "confidence_level", "z0",
        "acceleration", "degenerate", "degenerate_reason", "fallback", "index_streams", "distribution"]
    ci = weighted_mean_bootstrap_ci(*_windows(30, seed=2), rng=np.random.default_rng(0), replicates=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ci.low = 0.0  # type: ignore[misc]
    assert all(type(v) in (float, int, str, bool, type(None)) for v in dataclasses.astuple(ci)[:-1])
    assert all(type(q) is float for q in ci.distribution)  # plain floats: JSON-able as they are


# --------------------------------------------------------------------------------------------------
# 1.0.0, frozen (engine/core/stats/bootstrap/weighted_mean_v1_0_0.py): still scipy's index stream and arithmetic


@pytest.mark.parametrize("n, replicates", [(37, 999), (1000, 3000)])
@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_v1_0_0_with_one_stream_reproduces_scipy_bootstrap(n, replicates, method):
    d, t = _windows(n, seed=n)
    ref = _scipy(d, t, _weighted_mean, method=method, replicates=replicates, seed=5,
                 batch=v1.resample_block_rows(n))
    theta = v1.weighted_mean_replicates(d, t, rng=np.random.default_rng(5), replicates=replicates, streams=1)
    assert np.array_equal(theta, ref.bootstrap_distribution)
    ci = v1.weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(5), replicates=replicates, method=method,
                                       streams=1)
    assert ci.low == pytest.approx(ref.confidence_interval.low, rel=1e-12, abs=1e-15)
    assert ci.high == pytest.approx(ref.confidence_interval.high, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_v1_0_0_two_streams_compute_the_plain_statistic_on_the_spawned_streams(scheme):
    d, t = _windows(300, seed=21)
    n, rows, replicates = d.size, v1.resample_block_rows(300), 1000
    children = np.random.default_rng(9).spawn(2)
    cumulative = np.cumsum(t)
    expected = []
    for j, start in enumerate(range(0, replicates, rows)):
        size = (min(rows, replicates - start), n)
        generator = children[j % 2]
        if scheme == "uniform":
            idx = generator.integers(0, n, size=size)
            expected.append((t[idx] * d[idx]).sum(axis=1) / t[idx].sum(axis=1))
        else:
            idx = np.searchsorted(cumulative, generator.random(size) * cumulative[-1], side="right")
            expected.append(d[idx].sum(axis=1) / n)
    theta = v1.weighted_mean_replicates(d, t, rng=np.random.default_rng(9), replicates=replicates, scheme=scheme)
    assert np.array_equal(theta, np.concatenate(expected))
    for batch_size, threads in [(None, 1), (7, 2)]:
        assert np.array_equal(theta, v1.weighted_mean_replicates(d, t, rng=np.random.default_rng(9),
                                                                 replicates=replicates, scheme=scheme,
                                                                 batch_size=batch_size, threads=threads))


# --------------------------------------------------------------------------------------------------
# coverage simulations (seeded)

N_SIMS, N_WINDOWS, REPLICATES, POP_SIZE = 1000, 200, 1000, 20_000


def _population(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A finite population of windows: t ~ U{32..1024} tokens (CV² ≈ 0.30), Δ ~ N(0.02, 0.08²).

    ``independent``: Δ unrelated to t. ``dependent``: windows under 256 tokens have Δ larger by 0.12
    (short windows degrade more), so the token-weighted and plain means differ. ``per_token``: Var(Δ_i) ∝ 1/t_i
    (independent per-token noise), the one case where the ``token_weighted`` scheme is calibrated too.
    """
    g = np.random.default_rng(7)
    t = g.integers(32, 1025, POP_SIZE).astype(np.float64)
    d = g.normal(0.02, 0.08, POP_SIZE)
    if kind == "dependent":
        d = d + 0.12 * (t < 256)
    if kind == "per_token":
        d = 0.02 + (d - 0.02) * np.sqrt(t.mean() / t)
    return d, t


_COVERAGE_CACHE: dict[tuple[str, str], tuple[float, float]] = {}


def _coverage(kind: str, scheme: str) -> tuple[float, float]:
    """(coverage, mean width) of the 95% BCa interval for Σ T Δ / Σ T of the population.

    Each simulation samples n windows with replacement from the population (so the target is
    E[tΔ]/E[t] of that discrete distribution exactly) and calls the kernel once; sample indices and
    bootstrap seeds are shared across schemes, so the scheme comparison is paired.
    """
    key = (kind, scheme)
    if key not in _COVERAGE_CACHE:
        d, t = _population(kind)
        target = float(np.sum(t * d) / np.sum(t))
        picks = np.random.default_rng(11).integers(0, POP_SIZE, (N_SIMS, N_WINDOWS))
        lows, highs = np.empty(N_SIMS), np.empty(N_SIMS)
        for k in range(N_SIMS):       # one kernel call per simulated data set; the kernel is vectorised
            ci = weighted_mean_bootstrap_ci(d[picks[k]], t[picks[k]], rng=np.random.default_rng(1000 + k),
                                            replicates=REPLICATES, scheme=scheme)
            lows[k], highs[k] = ci.low, ci.high
        covered = (lows <= target) & (target <= highs)
        _COVERAGE_CACHE[key] = (float(covered.mean()), float(np.mean(highs - lows)))
    return _COVERAGE_CACHE[key]


@pytest.mark.slow
def test_uniform_bca_covers_at_nominal_rate_when_delta_is_unrelated_to_tokens():
    """Measured 0.946 with the 1.1.0 streams (1000 sims; binomial SE ≈ 0.007; 1.0.0's streams gave 0.941)."""
    coverage, _ = _coverage("independent", "uniform")
    assert 0.93 <= coverage <= 0.97, coverage


@pytest.mark.slow
def test_token_weighted_scheme_under_covers_when_delta_is_unrelated_to_tokens():
    """InvarLock's p ∝ t scheme: width ≈ √(n_eff/n) = 1/√(1 + CV²(t)) ≈ 0.88 of the correct one.

    Measured coverage 0.914 against 0.946 for ``uniform`` on the same samples and seeds (width ratio 0.880).
    """
    uniform, uniform_width = _coverage("independent", "uniform")
    weighted, weighted_width = _coverage("independent", "token_weighted")
    assert weighted <= 0.93, weighted
    assert uniform - weighted >= 0.02, (uniform, weighted)
    _, t = _population("independent")
    predicted = 1.0 / math.sqrt(1.0 + t.var() / t.mean() ** 2)
    assert weighted_width / uniform_width == pytest.approx(predicted, abs=0.03)


@pytest.mark.slow
def test_uniform_bca_covers_the_token_weighted_target_when_delta_depends_on_tokens():
    """Here the plain mean of Δ is a different quantity, so a kernel that ignored weights would fail (measured
    0.947)."""
    d, t = _population("dependent")
    weighted_target, plain_target = np.sum(t * d) / np.sum(t), np.mean(d)
    coverage, width = _coverage("dependent", "uniform")
    assert abs(weighted_target - plain_target) > width / 2     # far outside a typical half-width
    assert 0.93 <= coverage <= 0.97, coverage


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_both_schemes_cover_when_noise_is_per_token(scheme):
    """Var(Δ_i) ∝ 1/t_i: the alias-method sampler is then calibrated as well (binomial tolerance ±0.02)."""
    coverage, _ = _coverage("per_token", scheme)
    assert 0.93 <= coverage <= 0.97, coverage


def test_the_interval_records_the_quantiles_of_its_own_replicates():
    """``distribution`` is what a report draws: the type-7 quantiles of exactly the replicates the interval uses."""
    d, t = _windows(80, seed=5)
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(9), replicates=1000)
    ci = weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(9), replicates=1000)
    assert ci.distribution == tuple(np.quantile(theta, bs.DISTRIBUTION_PROBABILITIES, method="linear"))
    assert ci.distribution[0] == theta.min() and ci.distribution[-1] == theta.max()
    assert ci.distribution[0] <= ci.low <= ci.high <= ci.distribution[-1]
    flat = weighted_mean_bootstrap_ci(np.zeros(5), np.ones(5), rng=np.random.default_rng(0))
    assert flat.degenerate and flat.distribution is None
