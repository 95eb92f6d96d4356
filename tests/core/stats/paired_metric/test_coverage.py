"""Seeded simulations: interval coverage, test sizes, the detectable difference's power, and the error rates
of the multiplicity adjustments. Every simulation draws many tables (or streams) at once.

Tolerances: R draws of a rate with nominal value q have standard error sqrt(q (1 − q) / R). Tango's and
Newcombe's intervals and Tango's test are asymptotic, so their coverage is asserted ≥ nominal − 0.02 and
the test size ≤ α + 0.01; exact or anytime-valid guarantees are asserted within three standard errors.
The figures measured with these seeds are in docs/paired_metric.md.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from certa.engine.core.stats.paired_metric import (PairedTable, anytime_mean_difference, bca_mean_difference,
                                             benjamini_hochberg_adjust, holm_adjust, mcnemar_exact_test,
                                             minimum_detectable_difference, newcombe_interval, tango_interval,
                                             tango_noninferiority_test, tango_score_test)

ALPHA = 0.05

SETTINGS = [  # n, (p11, p10, p01, p00): small n, moderate, and the accuracy-like regime (rare discordance)
    (30, (0.50, 0.10, 0.20, 0.20)),
    (50, (0.90, 0.02, 0.02, 0.06)),
    (100, (0.80, 0.03, 0.08, 0.09)),
    (500, (0.70, 0.01, 0.03, 0.26)),
    (2000, (0.85, 0.005, 0.012, 0.133)),
]


def three_se(q: float, draws: int) -> float:
    return 3.0 * np.sqrt(q * (1.0 - q) / draws)


def simulated_tables(n: int, probabilities: tuple[float, ...], draws: int, seed: int) -> PairedTable:
    counts = np.random.default_rng(seed).multinomial(n, probabilities, size=draws).T
    return PairedTable(*counts)


@pytest.mark.parametrize("interval", [tango_interval, newcombe_interval])
@pytest.mark.parametrize("n, probabilities", SETTINGS)
def test_paired_difference_interval_covers_near_its_level(interval, n, probabilities):
    tables = simulated_tables(n, probabilities, 5000, seed=2026)
    delta = probabilities[1] - probabilities[2]
    ci = interval(tables, 0.95)
    coverage = np.mean((ci.low <= delta) & (delta <= ci.high))
    assert coverage >= 0.95 - 0.02, coverage


@pytest.mark.parametrize("n, discordance", [(30, 0.2), (100, 0.1), (500, 0.04)])
def test_exact_mcnemar_and_mid_p_hold_their_size(n, discordance):
    draws = 20_000
    tables = simulated_tables(n, (1 - discordance, discordance / 2, discordance / 2, 0.0), draws, seed=7)
    exact = np.mean(mcnemar_exact_test(tables).p_value <= ALPHA)
    mid = np.mean(mcnemar_exact_test(tables, mid_p=True).p_value <= ALPHA)
    assert exact <= ALPHA + three_se(ALPHA, draws), exact
    assert exact <= mid <= ALPHA + three_se(ALPHA, draws), mid


@pytest.mark.parametrize("n, discordance, margin", [(100, 0.3, 0.1), (200, 0.2, 0.05), (1000, 0.06, 0.01),
                                                    (5000, 0.05, 0.01)])
def test_noninferiority_test_size_at_the_margin(n, discordance, margin):
    """True Δ = −margin exactly (the boundary of H0, where the size is largest)."""
    draws = 20_000
    cells = (1 - discordance, (discordance - margin) / 2, (discordance + margin) / 2, 0.0)
    size = np.mean(tango_noninferiority_test(simulated_tables(n, cells, draws, seed=8), margin).p_value <= ALPHA)
    assert size <= ALPHA + 0.01, size


@pytest.mark.parametrize("n, discordance", [(500, 0.2), (2000, 0.05), (10_000, 0.03)])
def test_minimum_detectable_difference_is_detected_with_the_stated_power(n, discordance):
    """At Δ = Δ_min the asymptotic McNemar test (Tango's score test at 0) rejects with probability ≈ 0.8."""
    half = int(discordance * n) // 2
    design = PairedTable(n - 2 * half, half, half, 0)
    delta = minimum_detectable_difference(design, alpha=ALPHA, power=0.8).difference
    draws = 20_000
    cells = (1 - discordance, (discordance + delta) / 2, (discordance - delta) / 2, 0.0)
    power = np.mean(tango_score_test(simulated_tables(n, cells, draws, seed=9), 0.0).p_value <= ALPHA)
    assert abs(power - 0.8) <= 0.02, power


def bounded_pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """F1-like scores in [0, 1]: subject ~ Beta(5, 2); the baseline repeats it with probability 0.6, else
    draws Beta(2, 2). E[s − b] = 0.4 (5/7 − 1/2) = 3/35."""
    subject = rng.beta(5, 2, shape)
    baseline = np.where(rng.random(shape) < 0.6, subject, rng.beta(2, 2, shape))
    return subject, baseline


BOUNDED_TRUTH = 3 / 35


@pytest.mark.slow
@pytest.mark.parametrize("n", [100, 300])
def test_bca_interval_covers_a_bounded_mean_difference(n):
    rng = np.random.default_rng(11)
    datasets = 800
    hits = 0
    for _ in range(datasets):                      # one dataset per call; the replicates are compiled
        subject, baseline = bounded_pairs(rng, (n,))
        ci = bca_mean_difference(subject, baseline, rng=rng, replicates=999)
        hits += ci.low <= BOUNDED_TRUTH <= ci.high
    assert hits / datasets >= 0.95 - 0.025, hits / datasets


def test_empirical_bernstein_sequence_covers_at_every_look():
    """Six looks at the same streams (n = 10 … 500): the sequence must cover at all of them at once."""
    rng = np.random.default_rng(12)
    streams = 2000
    subject, baseline = bounded_pairs(rng, (streams, 500))
    missed = np.zeros(streams, dtype=bool)
    for looked in (10, 20, 50, 100, 200, 500):
        ci = anytime_mean_difference(subject[:, :looked], baseline[:, :looked])
        missed |= ~((ci.low <= BOUNDED_TRUTH) & (BOUNDED_TRUTH <= ci.high))
    assert 1 - missed.mean() >= 0.95 - three_se(0.05, streams)


@pytest.mark.slow
def test_betting_sequence_covers_at_every_look():
    rng = np.random.default_rng(14)
    streams = 300
    subject, baseline = bounded_pairs(rng, (streams, 200))
    missed = np.zeros(streams, dtype=bool)
    for looked in (20, 50, 100, 200):
        ci = anytime_mean_difference(subject[:, :looked], baseline[:, :looked], method="betting", grid_size=1000)
        missed |= ~((ci.low <= BOUNDED_TRUTH) & (BOUNDED_TRUTH <= ci.high))
    assert 1 - missed.mean() >= 0.95 - three_se(0.05, streams)


def slice_p_values(rng: np.random.Generator, families: int, correlation: float) -> np.ndarray:
    """10 slices, the first 6 true nulls: one-sided normal p-values with equicorrelated statistics; the false
    nulls have mean shift 2.5."""
    shared = rng.standard_normal((families, 1))
    z = np.sqrt(correlation) * shared + np.sqrt(1 - correlation) * rng.standard_normal((families, 10))
    z[:, 6:] += 2.5
    return special.ndtr(-z)


@pytest.mark.parametrize("correlation", [0.0, 0.5])
def test_holm_controls_the_familywise_error_rate(correlation):
    families = 20_000
    adjusted = holm_adjust(slice_p_values(np.random.default_rng(13), families, correlation))
    fwer = np.mean((adjusted[:, :6] <= ALPHA).any(axis=1))
    assert fwer <= ALPHA + three_se(ALPHA, families), fwer


@pytest.mark.parametrize("correlation", [0.0, 0.5])
def test_benjamini_hochberg_controls_the_false_discovery_rate(correlation):
    """FDR ≤ (m0 / m) α = 0.03 for independent and positively dependent statistics."""
    families = 20_000
    rejected = benjamini_hochberg_adjust(slice_p_values(np.random.default_rng(15), families, correlation)) <= ALPHA
    false = rejected[:, :6].sum(axis=1)
    fdr = np.mean(false / np.maximum(rejected.sum(axis=1), 1))
    assert fdr <= 0.03 + three_se(0.03, families), fdr
