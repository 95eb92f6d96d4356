"""Empirical-Bernstein confidence sequence with the polynomial-stitched boundary of Howard et al.

Howard, Ramdas, McAuliffe & Sekhon (2021), "Time-uniform, nonparametric, nonasymptotic confidence
sequences", Ann. Statist., Theorem 1 (stitching) with Theorem 4 (empirical Bernstein);
``poly_stitching_bound`` of the confseq package.

Boundary (sub-gamma scale c, intrinsic time v, tightest from v = m on, stitching parameters s > 1, eta > 1):

    v~    = max(v, m)
    ell   = s ln ln(eta v~ / m) + ln( zeta(s) / (ln eta)^s ) + ln(1/alpha)
    k1    = (eta^(1/4) + eta^(-1/4)) / sqrt(2),     k2 = (sqrt(eta) + 1) / 2
    u(v)  = sqrt( k1^2 v~ ell + (k2 c ell)^2 ) + k2 c ell

For y_i in [0, 1] and a predictable y^_t in [0, 1] (here y^_1 = 1/2, y^_t = mean(y_1..y_{t-1})),
S_t = sum (y_i - mu) is sub-exponential with variance process V_t = sum (y_i - y^_i)^2 and scale c = 1,
so with alpha/2 per side

    C_t = mean(y_1..y_t) ± u(V_t; alpha/2) / t.

ln comes from the ``elementary`` record (``common`` module docstring); zeta(s) is scipy's
(``scipy.special.zeta``, one scalar per call, not a numpy ufunc loop chosen by CPU).
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.confseq.common import (ConfidenceSequence, from_unit_interval, running_intersection, time_index,
                             to_unit_interval)
from certa.engine.core.stats.kernels.lazy_scipy import special
from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = ["poly_stitching_boundary", "stitched_eb_unit", "stitched_cs"]


def poly_stitching_boundary(v: np.ndarray | float, alpha: float, m: float, c: float = 1.0, *, s: float = 1.4,
                            eta: float = 2.0, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """Howard et al. (2021) polynomial-stitched boundary u(v) (formula in the module docstring)."""
    if not (m > 0 and s > 1 and eta > 1 and 0 < alpha < 1):
        raise ValueError(f"stitching needs m > 0, s > 1, eta > 1, 0 < alpha < 1 (got m={m}, s={s}, eta={eta}, "
                         f"alpha={alpha})")
    v_tilde = np.maximum(np.asarray(v, dtype=np.float64), m)
    log = elementary.log
    ell = s * log(log(eta * v_tilde / m)) + log(special.zeta(s, 1) / log(eta) ** s) + log(1.0 / alpha)
    k1 = (eta ** 0.25 + eta ** -0.25) / np.sqrt(2.0)
    k2 = (np.sqrt(eta) + 1.0) / 2.0
    return np.sqrt(k1 ** 2 * v_tilde * ell + (k2 * c * ell) ** 2) + k2 * c * ell


def stitched_eb_unit(y: np.ndarray, alpha: float, m: float, *, s: float = 1.4, eta: float = 2.0,
                     elementary: ElementaryFunctions = NUMPY_UFUNCS) -> tuple[np.ndarray, np.ndarray]:
    """Stitched empirical-Bernstein bounds (lower, upper) in [0, 1] for every prefix of ``y``."""
    y = np.asarray(y, dtype=np.float64)
    t = time_index(y.shape[-1])
    running = np.cumsum(y, axis=-1) / t
    predicted = np.concatenate([np.full(y.shape[:-1] + (1,), 0.5), running[..., :-1]], axis=-1)
    variance_process = np.cumsum((y - predicted) ** 2, axis=-1)
    radius = poly_stitching_boundary(variance_process, alpha / 2.0, m, 1.0, s=s, eta=eta, elementary=elementary) / t
    return np.maximum(running - radius, 0.0), np.minimum(running + radius, 1.0)


def stitched_cs(scores: np.ndarray, alpha: float, low: float, high: float, *, m: float = 1.0, s: float = 1.4,
                eta: float = 2.0, intersect: bool = True,
                elementary: ElementaryFunctions = NUMPY_UFUNCS) -> ConfidenceSequence:
    """Stitched EB confidence sequence for the mean of the scores clipped to [low, high] (score units).

    ``m`` is in intrinsic time of the [0, 1]-scaled data (sum of squared prediction errors), fixed in
    advance: the boundary is tightest once V_t reaches m.
    """
    unit = to_unit_interval(scores, low, high)
    lo, hi = stitched_eb_unit(unit.y, alpha, m, s=s, eta=eta, elementary=elementary)
    if intersect:
        lo, hi = running_intersection(lo, hi)
    return ConfidenceSequence(
        method="stitched", alpha=alpha, lower=from_unit_interval(lo, low, high),
        upper=from_unit_interval(hi, low, high),
        validity="anytime-valid",
        parameters={"m": m, "s": s, "eta": eta, "scale_c": 1.0, "running_intersection": intersect,
                    "source": "Howard et al. (2021) Thm 1 + Thm 4"},
    )
