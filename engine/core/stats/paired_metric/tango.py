"""Tango's (1998) score test and score interval for the paired difference Δ = p_subject − p_baseline.

Tango, T. (1998). Equivalence test and confidence interval for the difference in proportions for the
paired-sample design. Statistics in Medicine 17, 891–908. With the counts of ``table`` (n10: subject
correct only, n01: baseline correct only) and the cell probabilities p10 − p01 = Δ, the score statistic for
H0: Δ = Δ0 is

    T(Δ0) = (n10 − n01 − n Δ0) / sqrt( n (2 p̃01 + Δ0 (1 − Δ0)) ),

where p̃01 is the maximum-likelihood estimate of p01 under the constraint p10 = p01 + Δ0, the positive
root of 2n p² + W p − n01 Δ0 (1 − Δ0) = 0:

    p̃01 = ( sqrt(W² + 8 n n01 Δ0 (1 − Δ0)) − W ) / (4n),    W = −n10 − n01 + (2n − n10 + n01) Δ0.

At Δ0 = 0, T is McNemar's (n10 − n01) / sqrt(n10 + n01). T is decreasing in Δ0 (pinned over every table up
to n = 20 by a test), so the (1 − α) interval {Δ0 : |T(Δ0)| < z_{1−α/2}} has one bound on each side of Δ̂,
found by bisection of both brackets of every table at once (``BISECTIONS`` = 60 halvings) on

    S(Δ0) = T / sqrt(1 + T²) = num / sqrt(num² + n·var) ∈ [−1, 1],

the same equation T = ±z written as S = ±z / sqrt(1 + z²). S stays finite where T is infinite (Δ0 = ±1)
and is set to 0 where num and var both vanish (at Δ0 = Δ̂ when all pairs are concordant or all discordant
one way), so the brackets [−1, Δ̂] and [Δ̂, 1] always hold exactly one root; when Δ̂ = −1 (n01 = n) the
lower bound is −1 exactly, and when Δ̂ = 1 (n10 = n) the upper bound is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _shared
from .project_kernels import special
from .table import CountTable

__all__ = ["BISECTIONS", "DifferenceInterval", "EquivalenceTest", "ScoreTest", "tango_equivalence_test",
           "tango_interval", "tango_noninferiority_test", "tango_score_statistic", "tango_score_test"]

BISECTIONS = 60
"""Halvings of each bound's bracket (width ≤ 2): the bound is within 2⁻⁵⁹ ≈ 1.7e-18 of the exact root."""


@dataclass(frozen=True)
class DifferenceInterval:
    """A two-sided confidence interval [low, high] for Δ = p_subject − p_baseline around Δ̂ = ``estimate``
    (floats for one table, arrays for many)."""

    estimate: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    confidence_level: float
    method: str


@dataclass(frozen=True)
class ScoreTest:
    """Tango's score test of H0: Δ = ``null_difference`` (one-sided nulls Δ ≤ Δ0 or Δ ≥ Δ0 take the same
    boundary value) against ``alternative``; ``statistic`` is T(Δ0)."""

    statistic: float | np.ndarray
    p_value: float | np.ndarray
    null_difference: float
    alternative: str


@dataclass(frozen=True)
class EquivalenceTest:
    """Two one-sided Tango tests of H0: |Δ| ≥ margin: ``p_value`` = max of the two (equivalent when small)."""

    p_value: float | np.ndarray
    margin: float
    lower: ScoreTest
    upper: ScoreTest


def tango_score_statistic(table: CountTable, null_difference: float | np.ndarray) -> np.ndarray:
    """T(Δ0) of the module docstring, elementwise (±inf where the null variance is 0 and the numerator is
    not; 0 where both are 0). ``null_difference`` must lie in [−1, 1] and broadcast with the table."""
    delta0 = _null_difference_iv(null_difference)
    numerator, n_variance = _score_parts(table.n10, table.n01, table.n, delta0)
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = numerator / np.sqrt(n_variance)
    return np.where(numerator == 0.0, 0.0, statistic)


def tango_score_test(table: CountTable, null_difference: float = 0.0,
                     alternative: str = "two-sided") -> ScoreTest:
    """Tango's asymptotic score test: p = Φ(−T) (``greater``: H1 Δ > Δ0), Φ(T) (``less``) or 2Φ(−|T|)."""
    delta0, alternative = _tango_score_test_iv(null_difference, alternative)
    statistic = tango_score_statistic(table, delta0)
    if alternative == "greater":
        p = special.ndtr(-statistic)
    elif alternative == "less":
        p = special.ndtr(statistic)
    else:
        p = 2.0 * special.ndtr(-np.abs(statistic))
    return ScoreTest(_shared.scalar_or_array(statistic), _shared.scalar_or_array(p), delta0, alternative)


def tango_noninferiority_test(table: CountTable, margin: float) -> ScoreTest:
    """Tango's score test of H0: Δ ≤ −margin against H1: Δ > −margin (the subject is at most ``margin``
    worse): p = Φ(−T(−margin)). It rejects at level α exactly when the lower bound of the two-sided
    (1 − 2α) ``tango_interval`` exceeds −margin (Tango 1998, §3)."""
    return tango_score_test(table, -_shared.margin(margin, allow_zero=True), "greater")


def tango_equivalence_test(table: CountTable, margin: float) -> EquivalenceTest:
    """H0: Δ ≤ −margin or Δ ≥ margin against |Δ| < margin by two one-sided score tests (Tango 1998, §3):
    p = max(Φ(−T(−margin)), Φ(T(margin)))."""
    delta = _shared.margin(margin, allow_zero=False)
    lower = tango_score_test(table, -delta, "greater")
    upper = tango_score_test(table, delta, "less")
    return EquivalenceTest(_shared.scalar_or_array(np.maximum(lower.p_value, upper.p_value)), delta, lower, upper)


def tango_interval(table: CountTable, confidence_level: float = 0.95) -> DifferenceInterval:
    """Tango's (1998) score interval for Δ at ``confidence_level`` (module docstring), elementwise."""
    level = _shared.open_unit("confidence_level", confidence_level)
    z = float(special.ndtri(0.5 + level / 2.0))
    target = z / np.sqrt(1.0 + z * z)
    n10, n01, n = (np.asarray(x, dtype=np.float64) for x in (table.n10, table.n01, table.n))
    estimate = (n10 - n01) / n
    low, high = _bisected_bounds(n10, n01, n, estimate, target)
    return DifferenceInterval(_shared.scalar_or_array(estimate), _shared.scalar_or_array(low),
                              _shared.scalar_or_array(high), level, "tango_score")


def _bisected_bounds(n10: np.ndarray, n01: np.ndarray, n: np.ndarray, estimate: np.ndarray,
                     target: float) -> tuple[np.ndarray, np.ndarray]:
    """Both roots, S(Δ0) = target in [−1, Δ̂] and S(Δ0) = −target in [Δ̂, 1], by ``BISECTIONS`` halvings of
    every bracket at once. S − (±target) is positive at each bracket's left end and ≤ 0 at its right end; the
    outer end of the final bracket is returned (within 2⁻⁵⁹ of the root, never inside the exact interval), so
    Δ̂ = −1 gives the lower bound −1 and Δ̂ = 1 the upper bound 1 exactly."""
    left = np.stack(np.broadcast_arrays(-1.0, estimate))
    right = np.stack(np.broadcast_arrays(estimate, 1.0))
    signed_target = np.array([target, -target]).reshape((2,) + (1,) * estimate.ndim)
    for _ in range(BISECTIONS):
        middle = 0.5 * (left + right)
        above = _bounded_score_minus(middle, n10, n01, n, signed_target) > 0.0
        left = np.where(above, middle, left)
        right = np.where(above, right, middle)
    return left[0], right[1]


def _bounded_score_minus(delta0: np.ndarray, n10: np.ndarray, n01: np.ndarray, n: np.ndarray,
                         target: float | np.ndarray) -> np.ndarray:
    """S(Δ0) − target with S = num / sqrt(num² + n·var) (module docstring; 0 where num = var = 0)."""
    numerator, n_variance = _score_parts(n10, n01, n, delta0)
    scale = np.sqrt(numerator * numerator + n_variance)
    with np.errstate(invalid="ignore"):
        bounded = np.where(scale > 0.0, numerator / np.where(scale > 0.0, scale, 1.0), 0.0)
    return bounded - target


def _score_parts(n10: np.ndarray, n01: np.ndarray, n: np.ndarray,
                 delta0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n10 − n01 − n Δ0, n (2 p̃01 + Δ0 (1 − Δ0))) with the restricted MLE p̃01; the variance is clipped
    at 0 (it is ≥ 0 exactly; rounding can push it a few ulp below at Δ0 = ±1)."""
    n10, n01, n = (np.asarray(x, dtype=np.float64) for x in (n10, n01, n))
    spread = delta0 * (1.0 - delta0)
    w = -n10 - n01 + (2.0 * n - n10 + n01) * delta0
    root = np.sqrt(np.maximum(w * w + 8.0 * n * n01 * spread, 0.0))
    p01 = (root - w) / (4.0 * n)
    n_variance = np.maximum(n * (2.0 * p01 + spread), 0.0)
    return n10 - n01 - n * delta0, n_variance


def _null_difference_iv(null_difference: float | np.ndarray) -> np.ndarray:
    delta0 = np.asarray(null_difference, dtype=np.float64)
    if not np.all((delta0 >= -1.0) & (delta0 <= 1.0)):
        raise ValueError(f"'null_difference' must lie in [-1, 1] (got {null_difference!r})")
    return delta0


def _tango_score_test_iv(null_difference: float, alternative: str) -> tuple[float, str]:
    if isinstance(null_difference, bool) or not isinstance(null_difference, (int, float)) \
            or not -1.0 <= float(null_difference) <= 1.0:
        raise ValueError(f"'null_difference' must be a number in [-1, 1] (got {null_difference!r})")
    return float(null_difference), _shared.alternative(alternative)

