"""One entry point over the confidence-sequence methods of ``sequential.diff``, and the p-value for mean = m0.

| method           | module           | bounds used            | validity                          |
|------------------|------------------|------------------------|-----------------------------------|
| ``betting``      | ``betting``      | clip range [low, high] | anytime-valid                     |
| ``eb_cs``        | ``eb``           | clip range             | anytime-valid                     |
| ``stitched``     | ``stitched``     | clip range             | anytime-valid                     |
| ``asymptotic_cs``| ``asymptotic``   | none (raw scores)      | asymptotic anytime-valid          |
| ``eb_fixed_n``   | ``fixed_n``      | clip range             | not valid under optional stopping |
| ``t_fixed_n``    | ``fixed_n``      | none (raw scores)      | not valid under optional stopping |

The p-value for H0: mean = m0 that goes with each method: for the bounded anytime methods, the hedged
betting e-process at m0 (``betting``; anytime-valid whatever CS is used for the decision);
for ``asymptotic_cs`` the normal-mixture martingale (asymptotic); for the fixed-n methods their own
fixed-n p-value (labelled as such).

Both entry points take the elementary functions (exp, log, log1p, logaddexp) as the keyword argument
``elementary`` (``certa.engine.core.stats.kernels.libm``; default ``NUMPY_UFUNCS``) and hand it down to every method, so the
caller (a stage version) fixes which functions all its numbers come from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from certa.engine.core.stats.confseq.asymptotic import asymptotic_cs, asymptotic_p_value
from certa.engine.core.stats.confseq.betting import anytime_p_value, betting_cs, hedged_log_evalue
from certa.engine.core.stats.confseq.common import ConfidenceSequence, GridValues, float_grid_values, to_unit_interval
from certa.engine.core.stats.confseq.eb import eb_cs
from certa.engine.core.stats.confseq.fixed_n import eb_fixed_n, eb_fixed_n_p_value, t_fixed_n, t_fixed_n_p_value
from certa.engine.core.stats.confseq.stitched import stitched_cs
from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = ["METHODS", "BOUNDED_METHODS", "VALIDITY", "CSSettings", "PValuePath", "confidence_sequence",
           "null_p_value"]

VALIDITY: dict[str, str] = {
    "betting": "anytime-valid",
    "eb_cs": "anytime-valid",
    "stitched": "anytime-valid",
    "asymptotic_cs": "asymptotic anytime-valid",
    "eb_fixed_n": "not valid under optional stopping",
    "t_fixed_n": "not valid under optional stopping",
}
METHODS: tuple[str, ...] = tuple(VALIDITY)
BOUNDED_METHODS: frozenset[str] = frozenset({"betting", "eb_cs", "stitched", "eb_fixed_n"})


@dataclass(frozen=True)
class CSSettings:
    """Tuning constants of the methods (each method reads its own)."""

    grid_size: int = 1000        # betting: G + 1 candidate means j / G
    truncation: float = 0.5      # betting, eb_cs: bet cap c
    theta: float = 0.5           # betting: hedge weight
    stitch_m: float = 1.0        # stitched: intrinsic time where the boundary is tightest ([0, 1] units)
    stitch_s: float = 1.4
    stitch_eta: float = 2.0
    t_opt: float = 200.0         # asymptotic_cs: sample size where the boundary is tightest
    grid_values: GridValues = float_grid_values   # betting: score value of a grid index (exact in 2.0.0)


@dataclass(frozen=True)
class PValuePath:
    """p-value for H0: mean = m0 at every prefix; ``kind`` says what it is valid for."""

    p: np.ndarray
    kind: str
    log_evalue: np.ndarray | None = None


def confidence_sequence(scores: np.ndarray, method: str, alpha: float, low: float, high: float,
                        settings: CSSettings = CSSettings(), *,
                        elementary: ElementaryFunctions = NUMPY_UFUNCS) -> ConfidenceSequence:
    """The (1 - alpha) sequence of ``method`` for every prefix of ``scores`` (last axis = time)."""
    if method == "betting":
        return betting_cs(scores, alpha, low, high, grid_size=settings.grid_size, truncation=settings.truncation,
                          theta=settings.theta, elementary=elementary, grid_values=settings.grid_values)
    if method == "eb_cs":
        return eb_cs(scores, alpha, low, high, truncation=settings.truncation, elementary=elementary)
    if method == "stitched":
        return stitched_cs(scores, alpha, low, high, m=settings.stitch_m, s=settings.stitch_s, eta=settings.stitch_eta,
                           elementary=elementary)
    if method == "asymptotic_cs":
        return asymptotic_cs(scores, alpha, t_opt=settings.t_opt, elementary=elementary)
    if method == "eb_fixed_n":
        return eb_fixed_n(scores, alpha, low, high, elementary=elementary)
    if method == "t_fixed_n":
        return t_fixed_n(scores, alpha)
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def null_p_value(scores: np.ndarray, method: str, m0: float, alpha: float, low: float, high: float,
                 settings: CSSettings = CSSettings(), *, start: int = 1,
                 elementary: ElementaryFunctions = NUMPY_UFUNCS) -> PValuePath:
    """p-value path for H0: mean = m0 that goes with ``method`` (module docstring).

    ``start`` (asymptotic_cs only): the first t whose martingale value enters the running maximum.
    For bounded methods with m0 outside [low, high] the clipped mean cannot equal m0: p = 0 throughout.
    """
    if method in ("betting", "eb_cs", "stitched"):
        x = np.asarray(scores, dtype=np.float64)
        if not low <= m0 <= high:
            return PValuePath(np.zeros(x.shape), "anytime-valid (m0 outside the clip range)")
        unit = to_unit_interval(x, low, high)
        log_e = hedged_log_evalue(unit.y, (m0 - low) / (high - low), alpha, truncation=settings.truncation,
                                  theta=settings.theta, elementary=elementary)
        return PValuePath(anytime_p_value(log_e, elementary=elementary), "anytime-valid (hedged betting e-process)",
                          log_e)
    if method == "asymptotic_cs":
        return PValuePath(asymptotic_p_value(scores, m0, alpha, t_opt=settings.t_opt, start=start,
                                             elementary=elementary),
                          "asymptotic anytime-valid (normal mixture)")
    if method == "eb_fixed_n":
        return PValuePath(eb_fixed_n_p_value(scores, m0, low, high, elementary=elementary),
                          "fixed-n, not valid under optional stopping")
    if method == "t_fixed_n":
        return PValuePath(t_fixed_n_p_value(scores, m0), "fixed-n, not valid under optional stopping")
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
