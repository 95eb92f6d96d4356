"""Asymptotic confidence sequence for unbounded scores (Robbins normal mixture with a plug-in variance).

Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2024), "Time-uniform central limit theory and
asymptotic confidence sequences", Ann. Statist., the two-sided Robbins normal mixture (Robbins 1970;
``normal_mixture_bound`` of the confseq package) with a plug-in standard deviation:

    rho^2 = ( 2 ln(1/alpha) + ln(1 + 2 ln(1/alpha)) ) / t*          (tightest near t = t*)
    C_t   = mean_t ± sigma_t · sqrt( 2 (t rho^2 + 1) / (t^2 rho^2) · ln( sqrt(t rho^2 + 1) / alpha ) )

with sigma_t the sample standard deviation (ddof = 1) of the first t scores; C_t is the whole line
while sigma_t = 0 (t = 1, or all scores so far equal: a plug-in of 0 would collapse C_t to a point).
Its coverage is asymptotic (it holds as the start time grows), not guaranteed at small n, so the
certificate labels it "asymptotic anytime-valid". No bound on the scores is assumed and none are clipped.

The mixture martingale behind it, M_t = exp( rho^2 Z_t^2 / (2 (t rho^2 + 1)) ) / sqrt(t rho^2 + 1) with
Z_t = t (mean_t - m0) / sigma_t, gives the (asymptotic) anytime p-value p_t = min(1, 1 / max_{s<=t} M_s)
for H0: mean = m0, using the rho fixed above. exp, ln and log1p come from the ``elementary`` record
(``common`` module docstring).
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.confseq.common import ConfidenceSequence, prefix_mean_variance, running_intersection, time_index
from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = ["mixture_rho2", "asymptotic_cs", "asymptotic_p_value"]


def mixture_rho2(alpha: float, t_opt: float, *, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> float:
    """rho^2 that makes the normal-mixture boundary tightest at t = t_opt."""
    if not (0 < alpha < 1 and t_opt >= 1):
        raise ValueError(f"need 0 < alpha < 1 and t_opt >= 1 (got alpha={alpha}, t_opt={t_opt})")
    log_term = elementary.log(1.0 / alpha)
    return float((2.0 * log_term + elementary.log1p(2.0 * log_term)) / t_opt)


def asymptotic_cs(scores: np.ndarray, alpha: float, *, t_opt: float, intersect: bool = False,
                  elementary: ElementaryFunctions = NUMPY_UFUNCS) -> ConfidenceSequence:
    """Asymptotic CS for the mean of raw (unclipped) scores, every prefix (module docstring).

    No running intersection by default: the plug-in sequence is unreliable at small t (e.g. a zero sample
    variance collapses it to a point), and intersecting would carry that early failure forward forever.
    """
    x = np.asarray(scores, dtype=np.float64)
    t = time_index(x.shape[-1])
    rho2 = mixture_rho2(alpha, t_opt, elementary=elementary)
    mean, var = prefix_mean_variance(x)
    growth = t * rho2 + 1.0
    radius = np.sqrt(var) * np.sqrt(2.0 * growth / (t * t * rho2) * elementary.log(np.sqrt(growth) / alpha))
    radius[..., 0] = np.inf
    radius[var == 0.0] = np.inf          # equal scores so far: no variance estimate, no information
    lo, hi = mean - radius, mean + radius
    if intersect:
        lo, hi = running_intersection(lo, hi)
    return ConfidenceSequence(
        method="asymptotic_cs", alpha=alpha, lower=lo, upper=hi, validity="asymptotic anytime-valid",
        parameters={"t_opt": t_opt, "rho2": rho2, "variance": "sample variance, ddof=1",
                    "running_intersection": intersect,
                    "source": "Waudby-Smith et al. (2024), Robbins normal mixture, two-sided"},
    )


def asymptotic_p_value(scores: np.ndarray, m0: float, alpha: float, *, t_opt: float, start: int = 1,
                       elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """Anytime p-value path for H0: mean = m0 from the normal-mixture martingale (asymptotic).

    The running maximum starts at t = ``start`` (e.g. n_min): like the sequence, the plug-in martingale is
    not trusted at the smallest t, and a running maximum would carry an early excursion forward.
    """
    x = np.asarray(scores, dtype=np.float64)
    t = time_index(x.shape[-1])
    rho2 = mixture_rho2(alpha, t_opt, elementary=elementary)
    mean, var = prefix_mean_variance(x)
    growth = t * rho2 + 1.0
    gap = mean - m0
    with np.errstate(divide="ignore", invalid="ignore"):
        z2 = np.where((gap == 0.0) | (var == 0.0), 0.0, (t * gap) ** 2 / var)
    log_m = rho2 * z2 / (2.0 * growth) - 0.5 * elementary.log(growth)
    log_m[..., : max(start - 1, 1)] = 0.0
    log_m = np.where(np.isnan(log_m), 0.0, log_m)
    return np.minimum(1.0, elementary.exp(-np.maximum.accumulate(log_m, axis=-1)))
