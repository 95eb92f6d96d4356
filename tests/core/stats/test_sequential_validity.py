"""Seeded simulations of sequential.diff under continuous monitoring: error rates on null streams and power.

Each simulation decides 1000 streams of 1000 observations at once (2-D arrays through the same
``analyse_scores`` the stage uses), checking the rules after every observation from n = 1 on.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages.sequential_diff import Analysis, analyse_scores

STREAMS, HORIZON = 1000, 1000


def _knobs(**overrides) -> dict:
    """2.0.0 knobs, with the range [0, 0.2] of the seed's streams unless given."""
    return fill_defaults({"input": "scores", "range": [0.0, 0.2], **overrides},
                         load_schema("stages/sequential.diff.schema.json"))


def _analyse(x: np.ndarray, knobs: dict) -> Analysis:
    """``analyse_scores`` on the declared range of ``knobs``."""
    return analyse_scores(x, knobs, tuple(knobs["range"]))


def _slack(alpha: float, streams: int = STREAMS) -> float:
    """Three binomial standard errors."""
    return 3.0 * math.sqrt(alpha * (1.0 - alpha) / streams)


@functools.cache
def _null_streams(shape: str) -> tuple[np.ndarray, float, float]:
    """(scores with mean exactly 0, range low, range high) for STREAMS x HORIZON observations."""
    seeds = {"rademacher": 101, "uniform": 102, "bernoulli": 103, "beta": 104, "normal": 105}
    rng = np.random.default_rng(seeds[shape])
    size = (STREAMS, HORIZON)
    if shape == "rademacher":
        return rng.choice([-0.5, 0.5], size=size), -1.0, 1.0
    if shape == "uniform":
        return rng.uniform(-1.0, 1.0, size=size), -1.0, 1.0
    if shape == "bernoulli":                     # skewed: the null sits at 0.1 of the range
        return rng.binomial(1, 0.1, size=size) - 0.1, -0.1, 0.9
    if shape == "beta":
        return rng.beta(2.0, 5.0, size=size) - 2.0 / 7.0, -2.0 / 7.0, 5.0 / 7.0
    return rng.normal(0.0, 1.0, size=size), -1.0, 1.0


def _different_rate(shape: str, method: str, alpha: float, **knobs) -> tuple[float, float]:
    x, low, high = _null_streams(shape)
    settings = {"method": method, "alpha": alpha, "range": [low, high], "n_min": 1, "n_max": HORIZON,
                "rel_margin_target": None, "check_every": "sample", "betting": {"grid_size": 200}, **knobs}
    analysis = _analyse(x, _knobs(**settings))
    different = analysis.stop.decisions() == "DIFFERENT"
    p_hit = np.min(analysis.p_value.p, axis=-1) <= alpha
    return float(np.mean(different)), float(np.mean(p_hit))


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.05, 0.2])
@pytest.mark.parametrize("shape", ["rademacher", "uniform", "bernoulli", "beta"])
@pytest.mark.parametrize("method", ["betting", "eb_cs", "stitched"])
def test_anytime_methods_keep_the_error_rate_under_continuous_monitoring(method: str, shape: str, alpha: float) -> None:
    rate, p_rate = _different_rate(shape, method, alpha)
    assert rate <= alpha + _slack(alpha), f"{method}/{shape}: DIFFERENT on {rate:.3f} of null streams"
    # the anytime p-value for mean = 0 (hedged betting e-process) is valid under the same monitoring
    assert p_rate <= alpha + _slack(alpha), f"{method}/{shape}: p <= alpha on {p_rate:.3f} of null streams"


@pytest.mark.slow
def test_betting_error_rate_is_not_trivially_zero() -> None:
    # the guarantee is used, not wasted: at alpha = 0.2 betting errs on a visible share of null streams
    rate, _ = _different_rate("uniform", "betting", 0.2)
    assert 0.03 < rate <= 0.2 + _slack(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["normal", "uniform", "beta"])
def test_asymptotic_cs_keeps_alpha_from_a_moderate_n_min(shape: str) -> None:
    rate, p_rate = _different_rate(shape, "asymptotic_cs", 0.05, n_min=20)
    assert rate <= 0.05 + _slack(0.05) and p_rate <= 0.05 + _slack(0.05)


@pytest.mark.slow
def test_t_fixed_n_exceeds_alpha_under_the_same_monitoring() -> None:
    # the seed's t interval (with the correct quantile) is fine at one fixed n, not when checked every sample
    alpha = 0.05
    rate, _ = _different_rate("normal", "t_fixed_n", alpha, n_min=10)
    assert rate > 3 * alpha, f"t_fixed_n: DIFFERENT on only {rate:.3f} of null streams"
    x, _, _ = _null_streams("normal")
    fixed = _analyse(x, _knobs(method="t_fixed_n", alpha=alpha, n_min=HORIZON, n_max=HORIZON,
                                     rel_margin_target=None))
    fixed_rate = float(np.mean(fixed.stop.decisions() == "DIFFERENT"))
    assert abs(fixed_rate - alpha) <= _slack(alpha)


# --------------------------------------------------------------------------------------------- power


@pytest.mark.slow
def test_default_method_says_different_for_mean_0_05_sd_0_01() -> None:
    x = np.random.default_rng(201).normal(0.05, 0.01, size=(500, 200))
    analysis = _analyse(x, _knobs())                               # betting, alpha 0.01, range [0, 0.2]
    assert np.all(analysis.stop.decisions() == "DIFFERENT")
    assert np.all(analysis.stop.n_used == 10)                           # decided at the first check, n_min


@pytest.mark.slow
def test_default_method_says_same_for_mean_0_002_sd_0_001_band_0_01() -> None:
    x = np.random.default_rng(202).normal(0.002, 0.001, size=(500, 1000))
    # the seed's clip range [0, 0.2] is 20x the band: the O(range / n) term needs a few hundred prompts
    wide = _analyse(x, _knobs(equivalence_band=0.01, n_max=1000))
    assert np.all(wide.stop.decisions() == "SAME")
    assert 200 < np.median(wide.stop.n_used) < 400
    # a clip range matched to the scores decides within the seed's default n_max = 200
    tight = _analyse(x[:, :200], _knobs(equivalence_band=0.01, range=[-0.02, 0.02]))
    assert np.all(tight.stop.decisions() == "SAME")
    assert np.median(tight.stop.n_used) < 40


@pytest.mark.slow
def test_min_effect_keeps_small_real_differences_from_being_called_different() -> None:
    # mean 0.004 is a real but immaterial difference for delta* = 0.01: never DIFFERENT
    x = np.random.default_rng(203).normal(0.004, 0.002, size=(500, 1000))
    analysis = _analyse(x, _knobs(min_effect=0.01, n_max=1000, rel_margin_target=None))
    assert not np.any(analysis.stop.decisions() == "DIFFERENT")
    plain = _analyse(x[:, :200], _knobs())
    assert np.all(plain.stop.decisions() == "DIFFERENT")                # delta* = 0: any nonzero mean
