"""Shared pieces of the confidence-sequence (CS) kernels: the path result, the [0, 1] scaling and the
predictable plug-in quantities of Waudby-Smith & Ramdas (2023).

Every kernel takes scores shaped ``(..., n)`` (the last axis is arrival order; leading axes are
independent streams, e.g. simulation repetitions) and returns the bounds for every prefix t = 1..n.

Bounded methods work on y = (clip(x, a, b) - a) / (b - a) in [0, 1] and map back with a + (b - a)·(.);
their guarantee is about the mean of the *clipped* scores, which is the mean score difference only when
the scores lie in [a, b]. The stage decides where the range comes from and what happens to scores
outside it (``sequential.diff`` 1.x: silent clipping to a default; 2.0.0: a declared range, refused or
opt-in clipping, stated as the estimand).

Predictable plug-ins (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random variables by
betting", JRSS-B, eqs. (25)-(26)):

    mu_t     = (1/2 + sum_{i<=t} y_i) / (t + 1)                       mu_0 = 1/2
    sigma2_t = (1/4 + sum_{i<=t} (y_i - mu_i)^2) / (t + 1)            sigma2_0 = 1/4
    lambda_t = sqrt( 2 ln(2/alpha) / (sigma2_{t-1} · t · ln(1 + t)) )

lambda_t uses data up to t-1 only (predictable), which is what makes the capital processes below
martingales and the sequences valid at every stopping time.

Elementary functions: every function here and in the method modules that evaluates exp, log, log1p or
logaddexp takes them from its keyword argument ``elementary`` (an ``certa.engine.core.stats.kernels.libm.ElementaryFunctions``
record; default ``NUMPY_UFUNCS``, numpy's CPU-dispatched ufuncs), so a stage version fixes which functions
its numbers come from (``sequential.diff`` 1.0.0: numpy's; 1.1.0: libm's, see ``certa.engine.core.stats.kernels.libm``).
The other operations (+, -, *, /, sqrt, cumulative sums and products, min/max) are correctly rounded or
exact and need no such choice.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = [
    "ConfidenceSequence",
    "UnitScores",
    "to_unit_interval",
    "from_unit_interval",
    "GridValues",
    "float_grid_values",
    "exact_grid_values",
    "time_index",
    "regularised_means",
    "prpl_parts",
    "prpl_lambda",
    "prefix_mean",
    "prefix_mean_variance",
    "running_intersection",
]


@dataclass(frozen=True)
class ConfidenceSequence:
    """Lower and upper bounds for every prefix (shape ``(..., n)``, score units).

    ``validity`` is one of ``"anytime-valid"``, ``"asymptotic anytime-valid"`` or
    ``"not valid under optional stopping"``; ``parameters`` are the method's tuning constants (JSON-able).
    """

    method: str
    alpha: float
    lower: np.ndarray
    upper: np.ndarray
    validity: str
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UnitScores:
    """Scores clipped to [low, high] and mapped to [0, 1]; ``n_clipped`` counts clipped scores per stream."""

    y: np.ndarray
    low: float
    high: float
    n_clipped: np.ndarray

    @property
    def span(self) -> float:
        return self.high - self.low


def to_unit_interval(scores: np.ndarray, low: float, high: float) -> UnitScores:
    """y = (clip(x, low, high) - low) / (high - low); requires low < high and finite scores."""
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"the clip range needs finite low < high (got [{low}, {high}])")
    x = np.asarray(scores, dtype=np.float64)
    clipped = np.clip(x, low, high)
    n_clipped = np.count_nonzero(clipped != x, axis=-1)
    return UnitScores(y=(clipped - low) / (high - low), low=float(low), high=float(high), n_clipped=n_clipped)


def from_unit_interval(value: np.ndarray, low: float, high: float) -> np.ndarray:
    """Map [0, 1] values back to score units: low + (high - low)·value."""
    return low + (high - low) * np.asarray(value, dtype=np.float64)


GridValues = Callable[[np.ndarray, int, float, float], np.ndarray]
"""``grid_values(j, G, low, high)``: the score value of betting grid index j (of 0..G) on the range [low, high]."""


def float_grid_values(index: np.ndarray, grid_size: int, low: float, high: float) -> np.ndarray:
    """low + (high - low)·(j / G) in floating point (``sequential.diff`` 1.x): e.g. on [-0.2, 0.2] with
    G = 1000, j = 525 gives 0.010000000000000009."""
    return from_unit_interval(np.asarray(index) / grid_size, low, high)


def exact_grid_values(index: np.ndarray, grid_size: int, low: float, high: float) -> np.ndarray:
    """low + (high - low)·j / G computed exactly on the decimals low and high are written as
    (``Fraction(str(.))``) and rounded once (``sequential.diff`` 2.0.0): j = 525 on [-0.2, 0.2], G = 1000
    gives 0.01.

    With low = a / D and high = b / D (D their least common denominator), the value is
    (a·G + (b - a)·j) / (D·G): one IEEE division of two integers, correctly rounded and so exact-then-rounded
    when both are below 2^53. Otherwise each distinct index is computed with ``Fraction``.
    """
    lo, hi = Fraction(str(low)), Fraction(str(high))
    denominator = lo.denominator * hi.denominator // math.gcd(lo.denominator, hi.denominator)
    a, b = int(lo * denominator), int(hi * denominator)
    j = np.asarray(index, dtype=np.int64)
    scale = denominator * grid_size
    if max(abs(a) * grid_size + abs(b - a) * grid_size, scale) < 2 ** 53:
        return (a * grid_size + (b - a) * j).astype(np.float64) / float(scale)
    distinct, where = np.unique(j, return_inverse=True)
    values = np.array([float(Fraction(a * grid_size + (b - a) * int(k), scale)) for k in distinct.tolist()])
    return values[where].reshape(j.shape)


@functools.lru_cache(maxsize=8)
def time_index(n: int) -> np.ndarray:
    """t = 1..n as float64 (cached, read-only)."""
    t = np.arange(1, n + 1, dtype=np.float64)
    t.flags.writeable = False
    return t


@functools.lru_cache(maxsize=8)
def _bet_time_factor(n: int, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """t ln(1 + t) for t = 1..n (cached per n and ``elementary``, read-only)."""
    t = time_index(n)
    out = t * elementary.log1p(t)
    out.flags.writeable = False
    return out


def _shift_in(first: float, path: np.ndarray) -> np.ndarray:
    """(first, path_1, ..., path_{n-1}): the value known before each t."""
    out = np.empty_like(path)
    out[..., 0] = first
    out[..., 1:] = path[..., :-1]
    return out


def regularised_means(y: np.ndarray) -> np.ndarray:
    """mu_t = (1/2 + sum_{i<=t} y_i) / (t + 1) for t = 1..n (shape of ``y``)."""
    mu = np.cumsum(y, axis=-1)
    mu += 0.5
    mu /= time_index(y.shape[-1]) + 1.0
    return mu


def prpl_parts(y: np.ndarray, alpha: float, *,
               elementary: ElementaryFunctions = NUMPY_UFUNCS) -> tuple[np.ndarray, np.ndarray]:
    """(mu_{t-1}, untruncated bet lambda_t) for t = 1..n, sharing the prefix sums (module docstring)."""
    n = y.shape[-1]
    mu = regularised_means(y)
    dev = y - mu
    dev *= dev
    sigma2 = np.cumsum(dev, axis=-1)
    sigma2 += 0.25
    sigma2 /= time_index(n) + 1.0
    lam = _shift_in(0.25, sigma2)
    lam *= _bet_time_factor(n, elementary)
    np.divide(2.0 * elementary.log(2.0 / alpha), lam, out=lam)
    np.sqrt(lam, out=lam)
    return _shift_in(0.5, mu), lam


def prpl_lambda(y: np.ndarray, alpha: float, *, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """Untruncated predictable plug-in bet sqrt(2 ln(2/alpha) / (sigma2_{t-1} t ln(1+t))), t = 1..n."""
    return prpl_parts(y, alpha, elementary=elementary)[1]


def prefix_mean(x: np.ndarray) -> np.ndarray:
    """Sample mean of every prefix (shifted by x_1, like ``prefix_mean_variance``, whose mean it equals)."""
    x = np.asarray(x, dtype=np.float64)
    shift = x[..., :1]
    mean = np.cumsum(x - shift, axis=-1)
    mean /= time_index(x.shape[-1])
    mean += shift
    return mean


def prefix_mean_variance(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean and unbiased variance (ddof = 1) of every prefix; variance is NaN at t = 1.

    Shifted sums (x - x_1) keep the one-pass formula accurate when the mean is large against the spread.
    """
    x = np.asarray(x, dtype=np.float64)
    t = time_index(x.shape[-1])
    shift = x[..., :1]
    d = x - shift
    s1 = np.cumsum(d, axis=-1)
    d *= d
    s2 = np.cumsum(d, axis=-1)
    mean = s1 / t
    s1 *= mean                                   # s1^2 / t
    s2 -= s1
    np.maximum(s2, 0.0, out=s2)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.divide(s2, t - 1.0, out=s2)
    mean += shift
    var[..., 0] = np.nan
    return mean, var


def running_intersection(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max_{s<=t} L_s, min_{s<=t} U_s): still a CS, since the event 'mu in C_t for all t' is unchanged."""
    return np.maximum.accumulate(lower, axis=-1), np.minimum.accumulate(upper, axis=-1)
