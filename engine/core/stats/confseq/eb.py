"""Predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB), closed form.

Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by betting", JRSS-B,
Theorem 2 (``predmix_empbern_cs`` of the confseq package). For y_i in [0, 1] with constant conditional
mean mu:

    lambda_t = min( sqrt(2 ln(2/alpha) / (sigma2_{t-1} t ln(1+t))), c )          (c = truncation)
    w_t      = (y_t - mu_{t-1})^2                       (regularised means, ``common``)
    psi(l)   = -ln(1 - l) - l
    centre_t = sum lambda_i y_i / sum lambda_i
    radius_t = ( ln(2/alpha) + sum w_i psi(lambda_i) ) / sum lambda_i
    C_t      = [centre_t - radius_t, centre_t + radius_t] ∩ [0, 1]

P(mu not in C_t for some t >= 1) <= alpha (two-sided; each side is a Ville bound at alpha/2). Every
quantity is a prefix sum, so the whole path costs O(n). ln and log1p come from the ``elementary`` record
(``common`` module docstring).
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.confseq.common import (ConfidenceSequence, from_unit_interval, prpl_parts, running_intersection,
                             to_unit_interval)
from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = ["prpl_eb_unit", "eb_cs"]


def prpl_eb_unit(y: np.ndarray, alpha: float, truncation: float = 0.5, *,
                 elementary: ElementaryFunctions = NUMPY_UFUNCS) -> tuple[np.ndarray, np.ndarray]:
    """PrPl-EB bounds (lower, upper) in [0, 1] for every prefix of ``y`` (shape ``(..., n)``)."""
    y = np.asarray(y, dtype=np.float64)
    mu_prev, lam = prpl_parts(y, alpha, elementary=elementary)
    np.minimum(lam, truncation, out=lam)
    psi = np.negative(lam)
    elementary.log1p(psi, out=psi)
    psi += lam
    np.negative(psi, out=psi)                               # psi = -ln(1 - lam) - lam
    mu_prev -= y
    mu_prev *= mu_prev                                      # w = (y - mu_{t-1})^2
    mu_prev *= psi
    radius = np.cumsum(mu_prev, axis=-1)
    radius += elementary.log(2.0 / alpha)
    sum_lam = np.cumsum(lam, axis=-1)
    lam *= y
    centre = np.cumsum(lam, axis=-1)
    centre /= sum_lam
    radius /= sum_lam
    lower = centre - radius
    centre += radius
    return np.maximum(lower, 0.0, out=lower), np.minimum(centre, 1.0, out=centre)


def eb_cs(scores: np.ndarray, alpha: float, low: float, high: float, *, truncation: float = 0.5,
          intersect: bool = True, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> ConfidenceSequence:
    """PrPl-EB confidence sequence for the mean of the scores clipped to [low, high] (score units)."""
    unit = to_unit_interval(scores, low, high)
    lo, hi = prpl_eb_unit(unit.y, alpha, truncation, elementary=elementary)
    if intersect:
        lo, hi = running_intersection(lo, hi)
    return ConfidenceSequence(
        method="eb_cs", alpha=alpha, lower=from_unit_interval(lo, low, high), upper=from_unit_interval(hi, low, high),
        validity="anytime-valid",
        parameters={"truncation": truncation, "running_intersection": intersect,
                    "lambda": "predictable plug-in, ln(2/alpha)", "source": "Waudby-Smith & Ramdas (2023) Thm 2"},
    )
