"""The seed's fixed-n intervals, evaluated at every prefix, kept so users can compare.

Neither is a confidence sequence: each is a valid (1 - alpha) interval only at one sample size fixed in
advance, and checking it after every observation inflates the error rate: by the law of the iterated
logarithm a radius of order sqrt(ln(1/alpha) / n) is crossed eventually with probability one (see Howard,
Ramdas, McAuliffe & Sekhon 2021, Ann. Statist.; measured in ``tests/core/stats/test_sequential_validity.py``).
The certificate labels both "not valid under optional stopping".

``eb_fixed_n``: the fixed-n empirical-Bernstein bound of Audibert, Munos & Szepesvari (2009) as the seed
writes it (seed 000 "Empirical-Bernstein Bounds"), on y = clipped scores scaled to [0, 1]:

    L = ln(3 / alpha),   h_t = sqrt(2 v_t L / t) + 3 L / max(t - 1, 1),   v_t = unbiased variance of y_1..y_t
    C_t = a + R · (mean(y_1..y_t) ± h_t)                                   (C_1 = the whole line)

certa centres it on the clipped mean (the seed centres it on the raw mean, which covers neither mean
when scores are clipped).

``t_fixed_n``: mean_t ± t_{1 - alpha/2, t-1} · s_t / sqrt(t) on raw scores with the real Student-t
quantile at the configured alpha (the seed's step table is always 99 %, whatever alpha is).

``eb_fixed_n`` takes ln and exp from the ``elementary`` record (``common`` module docstring);
``t_fixed_n`` uses scipy's Student-t functions (``stdtr``, ``stdtrit``, ``ndtri``: scipy's own compiled
code, not numpy's CPU-dispatched loops) and only correctly rounded arithmetic besides.
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.confseq.common import ConfidenceSequence, prefix_mean_variance, time_index, to_unit_interval
from certa.engine.core.stats.kernels.lazy_scipy import special
from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = ["student_t_quantile", "eb_fixed_n", "t_fixed_n", "eb_fixed_n_p_value", "t_fixed_n_p_value"]

_EXPANSION_MIN_DF = 2000.0


def student_t_quantile(p: float, df: np.ndarray) -> np.ndarray:
    """Student-t quantile t_p(df) for an array of degrees of freedom.

    scipy's ``stdtrit`` below df = 2000; above, the Cornish-Fisher expansion in 1/df to order df^-4
    (Abramowitz & Stegun 26.7.5), whose truncation error there is below 1e-12 (pinned by a test) and
    which is ~100x faster on long paths.
    """
    df = np.asarray(df, dtype=np.float64)
    z = special.ndtri(p)
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    r = 1.0 / df
    out = r * g4                                                   # Horner in 1/df
    out += g3
    out *= r
    out += g2
    out *= r
    out += g1
    out *= r
    out += z
    small = np.flatnonzero(df < _EXPANSION_MIN_DF)
    out.flat[small] = special.stdtrit(df.flat[small], p)
    return out


def _eb_parts(scores: np.ndarray, low: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    unit = to_unit_interval(scores, low, high)
    mean, var = prefix_mean_variance(unit.y)
    return mean, var, time_index(unit.y.shape[-1])


def eb_fixed_n(scores: np.ndarray, alpha: float, low: float, high: float, *,
               elementary: ElementaryFunctions = NUMPY_UFUNCS) -> ConfidenceSequence:
    """The seed's fixed-n EB interval at every prefix (module docstring), in score units."""
    mean, var, t = _eb_parts(scores, low, high)
    log_term = elementary.log(3.0 / alpha)
    h = np.sqrt(2.0 * var * log_term / t) + 3.0 * log_term / np.maximum(t - 1.0, 1.0)
    h[..., 0] = np.inf
    span = high - low
    centre = low + span * mean
    return ConfidenceSequence(
        method="eb_fixed_n", alpha=alpha, lower=centre - span * h, upper=centre + span * h,
        validity="not valid under optional stopping",
        parameters={"log_term": "ln(3/alpha)", "range_term": "3 ln(3/alpha) / max(n-1, 1)",
                    "centre": "clipped mean", "source": "seed 000 / Audibert, Munos & Szepesvari (2009)"},
    )


def t_fixed_n(scores: np.ndarray, alpha: float) -> ConfidenceSequence:
    """Student-t interval at every prefix (module docstring), raw scores."""
    x = np.asarray(scores, dtype=np.float64)
    mean, var = prefix_mean_variance(x)
    t = time_index(x.shape[-1])
    df = np.maximum(t - 1.0, 1.0)
    var /= t
    np.sqrt(var, out=var)
    var *= student_t_quantile(1.0 - alpha / 2.0, df)
    half = var
    half[..., 0] = np.inf
    return ConfidenceSequence(
        method="t_fixed_n", alpha=alpha, lower=mean - half, upper=mean + half,
        validity="not valid under optional stopping",
        parameters={"quantile": "Student t, 1 - alpha/2, df = n - 1", "source": "seed 000, corrected quantile"},
    )


def t_fixed_n_p_value(scores: np.ndarray, m0: float) -> np.ndarray:
    """Two-sided one-sample t-test p-value for H0: mean = m0 at every prefix (fixed-n; 1 at t = 1)."""
    x = np.asarray(scores, dtype=np.float64)
    mean, var = prefix_mean_variance(x)
    t = time_index(x.shape[-1])
    gap = mean - m0
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(gap == 0.0, 0.0, np.abs(gap) / np.sqrt(var / t))
    p = 2.0 * special.stdtr(np.maximum(t - 1.0, 1.0), -stat)
    p[..., 0] = 1.0
    return np.where(np.isnan(p), 1.0, p)


def eb_fixed_n_p_value(scores: np.ndarray, m0: float, low: float, high: float, *,
                       elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """Smallest alpha at which the seed's fixed-n EB interval excludes m0, at every prefix (1 at t = 1).

    Solves sqrt(2 v L / t) + 3 L / (t - 1) = |mean_y - y0| for s = sqrt(L) (a quadratic), alpha = 3 e^(-L).
    """
    mean, var, t = _eb_parts(scores, low, high)
    y0 = (m0 - low) / (high - low)
    gap = np.abs(mean - y0)
    a = 3.0 / np.maximum(t - 1.0, 1.0)
    b = np.sqrt(2.0 * np.nan_to_num(var) / t)
    s = (-b + np.sqrt(b * b + 4.0 * a * gap)) / (2.0 * a)
    p = np.minimum(1.0, 3.0 * elementary.exp(-s * s))
    p[..., 0] = 1.0
    return p
