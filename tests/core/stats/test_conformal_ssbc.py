"""SSBC (certa.engine.core.stats.conformal.ssbc): reference values, exact arithmetic, the always-include case, upstream parity,
and PAC validity by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from certa.engine.core.stats.conformal.mondrian import class_threshold
from certa.engine.core.stats.conformal.ssbc import coverage_risk, exact_fraction, ssbc_correct

REFERENCE = [  # (alpha, n, delta) -> u*, of the reference implementation (phzwart/ssbc 1.4.0's ssbc_correct)
    (0.1, 25, 0.1, 1),
    (0.1, 30, 0.1, 1),
    (0.1, 60, 0.1, 3),
    (0.1, 200, 0.1, 15),
    (0.1, 1000, 0.1, 88),
    (0.2, 500, 0.01, 80),
    (0.5, 100_000, 0.001, 49_511),
]


@pytest.mark.parametrize("alpha, n, delta, u_star", REFERENCE)
def test_reference_u_star(alpha, n, delta, u_star):
    result = ssbc_correct(alpha, n, delta)
    assert result.u_star == u_star
    assert result.k == n + 1 - u_star
    assert result.alpha_corrected == u_star / (n + 1)
    assert not result.always_include
    assert 1 - result.satisfied_mass <= delta


def test_upstream_bracket_search_stops_short_of_optimum():
    """B4: the bracket is capped at ±100 around the guess, so upstream returns 49409, not 49511."""
    assert ssbc_correct(0.5, 100_000, 0.001, upstream_compat=True).u_star == 49_409
    assert ssbc_correct(0.5, 100_000, 0.001).u_star == 49_511


@pytest.mark.parametrize("alpha, n, delta, u_star", REFERENCE[:-1])
def test_upstream_compat_matches_reference_where_bracket_suffices(alpha, n, delta, u_star):
    assert ssbc_correct(alpha, n, delta, upstream_compat=True).u_star == u_star


def test_beta_binomial_mode_reference_values():
    assert ssbc_correct(0.1, 100, 0.1, mode="beta-binomial").u_star == 6
    assert ssbc_correct(0.1, 100, 0.1, mode="beta-binomial", m=50).u_star == 5


def _exhaustive_u_star(alpha: float, n: int, delta: float) -> int:
    u_max = math.floor(exact_fraction(alpha) * (n + 1))
    us = np.arange(1, u_max + 1)
    ok = stats.beta.sf(1 - alpha, n + 1 - us, us) >= 1 - delta
    return int(us[ok].max()) if ok.any() else 0


def test_binary_search_equals_exhaustive_scan():
    rng = np.random.default_rng(5)
    for _ in range(150):
        alpha = float(np.round(rng.uniform(0.01, 0.5), 3))
        delta = float(np.round(rng.uniform(0.001, 0.3), 3))
        n = int(rng.integers(1, 3000))
        assert ssbc_correct(alpha, n, delta).u_star == _exhaustive_u_star(alpha, n, delta), (alpha, n, delta)


def test_acceptance_is_the_beta_tail_rule():
    """u* passes P(Beta(n+1-u, u) >= 1-alpha) >= 1-delta and u*+1 does not (or is beyond u_max)."""
    for alpha, n, delta, u in REFERENCE[:-1]:
        assert stats.beta.sf(1 - alpha, n + 1 - u, u) >= 1 - delta
        if u + 1 <= math.floor(alpha * (n + 1)):
            assert stats.beta.sf(1 - alpha, n - u, u + 1) < 1 - delta


def test_k_is_exact_integer_where_upstream_float_is_off_by_one():
    """B2: upstream's ceil((n+1)(1-u/(n+1))) gives 461 for n=500, u=41; the exact k is 460."""
    n, u = 500, 41
    assert math.ceil((n + 1) * (1 - u / (n + 1))) == 461  # the float artefact itself
    # find (alpha, delta) with u* = 41 at n = 500, then compare k
    alpha, delta = 0.1, 0.1
    result = ssbc_correct(alpha, n, delta)
    assert result.u_star == 41
    assert result.k == 460
    assert ssbc_correct(alpha, n, delta, upstream_compat=True).k == 461


def test_u_max_uses_exact_decimal_alpha():
    """B3: floor(0.29 * 100) is 28 in float64; the exact value is 29."""
    assert ssbc_correct(0.29, 99, 0.4).u_max == 29
    assert ssbc_correct(0.29, 99, 0.4, upstream_compat=True).u_max == 28


def test_no_qualifying_u_means_always_include():
    for n in (1, 2, 5, 10, 21):
        result = ssbc_correct(0.1, n, 0.1)
        assert result.u_star == 0 and result.always_include and result.k == n + 1
        assert result.satisfied_mass == 1.0
        assert coverage_risk(0.1, n, result.k) == 0.0
    assert not ssbc_correct(0.1, 22, 0.1).always_include  # first n where u = 1 qualifies at alpha = delta = 0.1


def test_upstream_clamped_threshold_breaks_the_guarantee():
    """B1: at n=10, alpha=delta=0.1 upstream uses the largest score; its miss probability is 0.9^10 = 0.349."""
    result = ssbc_correct(0.1, 10, 0.1, upstream_compat=True)
    assert result.u_star == 0 and not result.always_include and result.k == 11
    assert coverage_risk(0.1, 10, min(result.k, 10)) == pytest.approx(0.9 ** 10, rel=1e-12)


def test_invalid_arguments_are_named():
    with pytest.raises(ValueError, match="'alpha'"):
        ssbc_correct(1.5, 10, 0.1)
    with pytest.raises(ValueError, match="'delta'"):
        ssbc_correct(0.1, 10, 0.0)
    with pytest.raises(ValueError, match="'n'"):
        ssbc_correct(0.1, 0, 0.1)
    with pytest.raises(ValueError, match="'mode'"):
        ssbc_correct(0.1, 10, 0.1, mode="gamma")
    with pytest.raises(ValueError, match="n >= 10"):
        ssbc_correct(0.1, 9, 0.1, upstream_compat=True)


def _coverage_draws(n: int, k: int, draws: int, rng: np.random.Generator, clamp: bool = False) -> np.ndarray:
    """True coverage of the k-th smallest of n Uniform(0,1) scores (F(t) = t), for many calibration draws."""
    scores = np.sort(rng.random((draws, n)), axis=1)
    return np.minimum(class_threshold(scores, k, clamp=clamp), 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 15, 25, 60, 200])
def test_pac_validity_by_simulation(n):
    """Over 4000 calibration draws the class coverage is >= 1-alpha in at least 1-delta of draws (minus 3 SE)."""
    alpha, delta, draws = 0.1, 0.1, 4000
    rng = np.random.default_rng(1000 + n)
    result = ssbc_correct(alpha, n, delta)
    coverage = _coverage_draws(n, result.k, draws, rng)
    hit = np.mean(coverage >= 1 - alpha)
    slack = 3 * math.sqrt(delta * (1 - delta) / draws)
    assert hit >= 1 - delta - slack
    # and it matches the exact acceptance probability of the chosen k
    assert hit == pytest.approx(1 - coverage_risk(alpha, n, result.k), abs=4 * math.sqrt(0.25 / draws))


@pytest.mark.slow
@pytest.mark.parametrize("n", [10, 15])
def test_upstream_compat_fails_pac_validity_for_small_classes(n):
    """The same simulation with upstream's clamped threshold: hit rate 1-(1-alpha)^n (0.65 at n=10) < 0.9."""
    alpha, delta, draws = 0.1, 0.1, 4000
    rng = np.random.default_rng(2000 + n)
    result = ssbc_correct(alpha, n, delta, upstream_compat=True)
    hit = np.mean(_coverage_draws(n, result.k, draws, rng, clamp=True) >= 1 - alpha)
    assert hit < 1 - delta - 3 * math.sqrt(delta * (1 - delta) / draws)
    assert hit == pytest.approx(1 - (1 - alpha) ** n, abs=4 * math.sqrt(0.25 / draws))
