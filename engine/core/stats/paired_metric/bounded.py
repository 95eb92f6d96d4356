"""Mean paired difference of a bounded continuous per-item metric (F1, ROUGE, a graded score in [a, b]).

For items i = 1..n with subject and baseline scores s_i, b_i in the metric's range [a, b], the estimand is
the mean difference Δ = E[s − b], estimated by Δ̂ = (1/n) Σ d_i, d_i = s_i − b_i ∈ [−(b − a), b − a].
Two intervals:

``bca_mean_difference``
    The BCa bootstrap interval (Efron, B. (1987). Better bootstrap confidence intervals. JASA 82, 171–185;
    Efron & Tibshirani 1993, §14.3): [Q(α₁), Q(α₂)] of the B bootstrap means, α_k = Φ(z0 + (z0 + z_k) /
    (1 − a (z0 + z_k))), z0 = Φ⁻¹(share of replicates below Δ̂, ties one half), and
    a = Σ U_i³ / (6 (Σ U_i²)^{3/2}) from the jackknife deviations U_i = d_i − Δ̂ (up to a factor that
    cancels). The replicates come from the project's compiled kernel (``project_kernels``): SFC64 streams
    spawned from ``rng`` in blocks of 256 replicates, Lemire's bounded integers, no Python loop over
    replicates; the result depends on the seed and never on the number of threads. Fixed-n validity,
    asymptotic (second-order accurate).

``anytime_mean_difference``
    A confidence sequence for the mean of d_i (Waudby-Smith, I. & Ramdas, A. (2023). Estimating means of
    bounded random variables by betting. JRSS-B 86, 1–27): ``empirical_bernstein`` (Theorem 2, predictable
    plug-in, closed form) or ``betting`` (Theorem 3, hedged capital on a grid of ``grid_size`` + 1 means),
    with the running intersection. P(Δ ∉ C_t for some t ≥ 1) ≤ α when the d_i are independent with mean Δ,
    so the interval stays valid however often the data are looked at and whenever the evaluation stops.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

import numpy as np

from . import _shared
from .project_kernels import CONFIDENCE_SEQUENCES, bca_bootstrap_of_mean, confidence_sequence_at_end

__all__ = ["AnytimeMeanDifference", "BootstrapMeanDifference", "anytime_mean_difference", "bca_mean_difference"]


@dataclass(frozen=True)
class BootstrapMeanDifference:
    """The BCa interval [low, high] for Δ = E[s − b] (``method`` "percentile" when BCa was undefined, with
    ``fallback`` saying why; ``replicates`` 0 and low = high = estimate when all differences are equal)."""

    estimate: float
    low: float
    high: float
    confidence_level: float
    method: str
    replicates: int
    z0: float | None
    acceleration: float | None
    fallback: str | None


@dataclass(frozen=True)
class AnytimeMeanDifference:
    """The confidence sequence's interval [low, high] for Δ after the last item (arrays over leading axes)."""

    estimate: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    confidence_level: float
    method: str
    metric_range: tuple[float, float]
    validity: str = "anytime-valid"


def bca_mean_difference(subject: np.ndarray, baseline: np.ndarray, *, rng: np.random.Generator,
                        replicates: int = 2000, confidence_level: float = 0.95,
                        metric_range: tuple[float, float] = (0.0, 1.0)) -> BootstrapMeanDifference:
    """BCa bootstrap interval for the mean paired difference (module docstring). ``subject`` and
    ``baseline`` are 1-D, paired by position, n ≥ 2, within ``metric_range``."""
    d, level = _bca_mean_difference_iv(subject, baseline, rng, replicates, confidence_level, metric_range)
    ci = bca_bootstrap_of_mean(d, rng=rng, replicates=int(replicates), confidence_level=level)
    return BootstrapMeanDifference(ci.estimate, ci.low, ci.high, level, ci.method, ci.replicates, ci.z0,
                                   ci.acceleration, ci.fallback)


def anytime_mean_difference(subject: np.ndarray, baseline: np.ndarray, *, confidence_level: float = 0.95,
                            metric_range: tuple[float, float] = (0.0, 1.0), method: str = "empirical_bernstein",
                            grid_size: int = 10_000) -> AnytimeMeanDifference:
    """Anytime-valid interval for the mean paired difference (module docstring). The last axis of
    ``subject`` and ``baseline`` is the item order; leading axes are independent comparisons."""
    d, level, (low, high) = _anytime_mean_difference_iv(subject, baseline, confidence_level, metric_range, method,
                                                        grid_size)
    span = high - low
    lower, upper = confidence_sequence_at_end(d, alpha=1.0 - level, low=-span, high=span, method=method,
                                              grid_size=grid_size)
    return AnytimeMeanDifference(_shared.scalar_or_array(d.mean(axis=-1)), _shared.scalar_or_array(lower),
                                 _shared.scalar_or_array(upper), level, method, (low, high))


def _differences_iv(subject: object, baseline: object, metric_range: Any) -> tuple[np.ndarray, tuple[float, float]]:
    try:
        low, high = (float(v) for v in metric_range)
    except (TypeError, ValueError):
        raise ValueError(f"'metric_range' must be a pair (low, high) of numbers (got {metric_range!r})") from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"'metric_range' must be finite with low < high (got {metric_range!r})")
    s = np.asarray(subject, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if s.shape != b.shape or s.ndim == 0:
        raise ValueError(f"'subject' and 'baseline' must pair item by item (got shapes {s.shape} and {b.shape})")
    for name, x in (("subject", s), ("baseline", b)):
        bad = ~((x >= low) & (x <= high))
        if bad.any():
            i = np.unravel_index(int(np.flatnonzero(bad)[0]), x.shape)
            raise ValueError(f"'{name}' must lie in the metric range [{low}, {high}] (item {i[-1]} is {x[i].item()!r})")
    return s - b, (low, high)


def _bca_mean_difference_iv(subject: object, baseline: object, rng: object, replicates: object,
                            confidence_level: Any, metric_range: Any) -> tuple[np.ndarray, float]:
    d, _ = _differences_iv(subject, baseline, metric_range)
    if d.ndim != 1 or d.size < 2:
        raise ValueError(f"'subject' and 'baseline' must be 1-D with at least 2 items (got shape {d.shape})")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"'rng' must be a numpy.random.Generator (got {type(rng).__name__})")
    if isinstance(replicates, bool) or not isinstance(replicates, (int, np.integer)) or replicates < 100:
        raise ValueError(f"'replicates' must be an integer >= 100 (got {replicates!r})")
    return d, _shared.open_unit("confidence_level", confidence_level)


def _anytime_mean_difference_iv(subject: object, baseline: object, confidence_level: Any, metric_range: Any,
                                method: object, grid_size: object) -> tuple[np.ndarray, float, tuple[float, float]]:
    d, bounds = _differences_iv(subject, baseline, metric_range)
    if method not in CONFIDENCE_SEQUENCES:
        raise ValueError(f"'method' must be one of {CONFIDENCE_SEQUENCES} (got {method!r})")
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)) or grid_size < 2:
        raise ValueError(f"'grid_size' must be an integer >= 2 (got {grid_size!r})")
    return d, _shared.open_unit("confidence_level", confidence_level), bounds
