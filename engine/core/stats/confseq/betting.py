"""Hedged-capital betting confidence sequence and the anytime-valid p-value (e-process) for a null mean.

Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by betting", JRSS-B,
Theorem 3 with the predictable plug-in bets of §5.3 (``hedged_cs`` of the confseq package). For y_i in
[0, 1] and a candidate mean m:

    lambda+_t(m) = min(lambda_t, c / m),   lambda-_t(m) = min(lambda_t, c / (1 - m))   (c = truncation)
    K+_t(m) = prod_{i<=t} (1 + lambda+_i(m) (y_i - m)),   K-_t(m) = prod_{i<=t} (1 - lambda-_i(m) (y_i - m))

with lambda_t the predictable plug-in of ``common.prpl_lambda``. theta K+ + (1 - theta) K- is a
nonnegative martingale with initial value 1 at the true mean, so by Ville's inequality

    C_t = { m : max_{s<=t} theta K+_s(m) < 1/alpha  and  max_{s<=t} (1 - theta) K-_s(m) < 1/alpha }

covers the mean at all t simultaneously with probability >= 1 - alpha (the running maximum is the
running intersection). K+_t(m) is non-increasing and K-_t(m) non-decreasing in m, so the set of m
rejected by K+ is an interval [0, ·) and that rejected by K- an interval (·, 1]: C_t is an interval.

Grid: the capital is evaluated on m_j = j / G (j = 0..G). Reporting L_t = m_{A-1}, U_t = m_{B+1}, with
A the first grid point not rejected by K+ and B the last not rejected by K-, is conservative (the true
boundary lies between two grid points). A grid point once rejected stays rejected, so only the window
[A, B] of each stream is carried forward: the work per observation falls with the width of C_t, and the
path is identical to the full-grid computation. Memory is bounded by processing time in chunks.

The same martingale at m0 is an e-process; p_t = min(1, 1 / max_{s<=t} (theta K+_s(m0) + (1 - theta) K-_s(m0)))
is an anytime-valid p-value for H0: mean = m0 (P(exists t: p_t <= a) <= a for every a).

exp, log, log1p and logaddexp come from the ``elementary`` record (``common`` module docstring).
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.confseq.common import (ConfidenceSequence, GridValues, float_grid_values, prpl_lambda,
                                              to_unit_interval)
from certa.engine.core.stats.kernels.libm import NUMPY_UFUNCS, ElementaryFunctions

__all__ = ["hedged_betting_grid", "hedged_betting_unit", "betting_cs", "hedged_log_evalue", "anytime_p_value"]

_CHUNK_ELEMENTS = 1 << 21
_LOG_RANGE = 600.0          # |ln| of an in-chunk capital product stays below this (float64: ~709)


def _check(alpha: float, truncation: float, theta: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1) (got {alpha})")
    if not 0.0 < truncation < 1.0:
        raise ValueError(f"truncation must be in (0, 1) (got {truncation})")
    if not 0.0 < theta < 1.0:
        raise ValueError(f"theta must be in (0, 1) (got {theta})")


def hedged_betting_unit(y: np.ndarray, alpha: float, *, grid_size: int = 1000, truncation: float = 0.5,
                        theta: float = 0.5, chunk_elements: int = _CHUNK_ELEMENTS,
                        elementary: ElementaryFunctions = NUMPY_UFUNCS) -> tuple[np.ndarray, np.ndarray]:
    """Hedged betting CS (lower, upper) in [0, 1] for every prefix of ``y`` (shape ``(..., n)``), with the
    running intersection (module docstring): the grid indices of ``hedged_betting_grid`` divided by G."""
    lower, upper = hedged_betting_grid(y, alpha, grid_size=grid_size, truncation=truncation, theta=theta,
                                       chunk_elements=chunk_elements, elementary=elementary)
    return lower / grid_size, upper / grid_size


def hedged_betting_grid(y: np.ndarray, alpha: float, *, grid_size: int = 1000, truncation: float = 0.5,
                        theta: float = 0.5, chunk_elements: int = _CHUNK_ELEMENTS,
                        elementary: ElementaryFunctions = NUMPY_UFUNCS) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices (j_lower, j_upper) of the hedged betting CS for every prefix of ``y`` (shape ``(..., n)``):
    the CS is [j_lower / G, j_upper / G] in [0, 1], widened outwards to the grid, with the running
    intersection (module docstring). ``grid_size`` G gives G + 1 candidate means j / G."""
    _check(alpha, truncation, theta)
    if grid_size < 2:
        raise ValueError(f"grid_size must be >= 2 (got {grid_size})")
    y = np.asarray(y, dtype=np.float64)
    lead_shape, n = y.shape[:-1], y.shape[-1]
    y2 = y.reshape(-1, n)
    streams = y2.shape[0]
    g = int(grid_size)
    width = 2 * (g + 1)                           # padded: window indices never need clipping
    grid = np.ones(width)
    grid[: g + 1] = np.arange(g + 1) / g
    with np.errstate(divide="ignore"):
        cap_plus = truncation / grid              # c / m   (inf at m = 0)
        cap_minus = truncation / (1.0 - grid)     # c / (1 - m)   (inf at m = 1)
    cap_minus[g + 1:] = truncation
    threshold_plus = elementary.log(1.0 / (theta * alpha))
    threshold_minus = elementary.log(1.0 / ((1.0 - theta) * alpha))
    y_time = np.ascontiguousarray(y2.T)           # (n, S): time on the slow axis for fast accumulation
    lam_time = np.ascontiguousarray(prpl_lambda(y2, alpha, elementary=elementary).T)
    # every factor lies in [1 - min(c, lam), 1 + lam]: bound the chunk so its products stay in float range
    lam_ahead = np.maximum.accumulate(lam_time.max(axis=1)[::-1])[::-1]
    log_step = np.maximum(-elementary.log1p(-np.minimum(truncation, lam_ahead)), elementary.log1p(lam_ahead))
    max_steps = np.maximum((_LOG_RANGE / log_step).astype(np.int64), 1)
    log_plus = np.zeros((streams, width))         # ln K+ so far, per stream and grid index
    log_minus = np.zeros((streams, width))        # ln K- so far
    first = np.zeros(streams, dtype=np.int64)     # A: first grid index not rejected by K+
    last = np.full(streams, g, dtype=np.int64)    # B: last grid index not rejected by K-
    first_path = np.empty((n, streams), dtype=np.int64)
    last_path = np.empty((n, streams), dtype=np.int64)
    rows = np.arange(streams)[:, None]

    t0 = 0
    while t0 < n:
        w = int(max(np.max(last - first + 1), 1))
        steps = int(min(max(chunk_elements // (streams * w), 1), n - t0, max_steps[t0]))
        t1 = t0 + steps
        idx = first[:, None] + np.arange(w)[None, :]                      # (S, W)
        valid = idx <= last[:, None]
        excess = y_time[t0:t1, :, None] - grid[idx]                        # (T, S, W)
        bet = lam_time[t0:t1, :, None]
        # K+ relative to the chunk start: a product of factors in [1 - c, 1 + bet], no log needed inside
        work = np.minimum(bet, cap_plus[idx])
        work *= excess
        work += 1.0
        np.cumprod(work, axis=0, out=work)
        open_now = work < elementary.exp(threshold_plus - log_plus[rows, idx])
        open_now |= ~valid                                                  # outside the window: open
        first_now = np.where(open_now.any(axis=2), np.argmax(open_now, axis=2), w)
        a_path = np.maximum(first, first + np.maximum.accumulate(first_now, axis=0))
        with np.errstate(divide="ignore"):
            log_plus[rows, idx] += elementary.log(work[-1])

        np.minimum(bet, cap_minus[idx], out=work)
        work *= excess
        np.subtract(1.0, work, out=work)
        np.cumprod(work, axis=0, out=work)
        np.less(work, elementary.exp(threshold_minus - log_minus[rows, idx]), out=open_now)
        open_now &= valid                                                   # outside the window: rejected
        reverse = open_now[:, :, ::-1]
        last_now = np.where(reverse.any(axis=2), w - 1 - np.argmax(reverse, axis=2), -1)
        b_path = np.minimum(last, first + np.minimum.accumulate(last_now, axis=0))
        with np.errstate(divide="ignore"):
            log_minus[rows, idx] += elementary.log(work[-1])
        first_path[t0:t1] = a_path
        last_path[t0:t1] = b_path
        first, last = a_path[-1].copy(), b_path[-1].copy()
        t0 = t1
    first_path, last_path = first_path.T, last_path.T
    lower = np.maximum(first_path - 1, 0)
    upper = np.minimum(last_path + 1, g)
    return lower.reshape(lead_shape + (n,)), upper.reshape(lead_shape + (n,))


def betting_cs(scores: np.ndarray, alpha: float, low: float, high: float, *, grid_size: int = 1000,
               truncation: float = 0.5, theta: float = 0.5, elementary: ElementaryFunctions = NUMPY_UFUNCS,
               grid_values: GridValues = float_grid_values) -> ConfidenceSequence:
    """Hedged betting confidence sequence for the mean of the scores clipped to [low, high] (score units);
    ``grid_values`` maps the grid indices of the bounds to score values (``common``)."""
    unit = to_unit_interval(scores, low, high)
    lo, hi = hedged_betting_grid(unit.y, alpha, grid_size=grid_size, truncation=truncation, theta=theta,
                                 elementary=elementary)
    return ConfidenceSequence(
        method="betting", alpha=alpha, lower=grid_values(lo, grid_size, low, high),
        upper=grid_values(hi, grid_size, low, high),
        validity="anytime-valid",
        parameters={"grid_size": grid_size, "grid_step": (high - low) / grid_size, "truncation": truncation,
                    "theta": theta, "running_intersection": True, "lambda": "predictable plug-in, ln(2/alpha)",
                    "source": "Waudby-Smith & Ramdas (2023) Thm 3, hedged capital"},
    )


def hedged_log_evalue(y: np.ndarray, m0: float, alpha: float, *, truncation: float = 0.5,
                      theta: float = 0.5, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """ln(theta K+_t(m0) + (1 - theta) K-_t(m0)) for every prefix of ``y`` in [0, 1] (module docstring)."""
    _check(alpha, truncation, theta)
    if not 0.0 <= m0 <= 1.0:
        raise ValueError(f"the null mean must lie in [0, 1] after scaling (got {m0})")
    y = np.asarray(y, dtype=np.float64)
    lam = prpl_lambda(y, alpha, elementary=elementary)
    cap_plus = truncation / m0 if m0 > 0 else np.inf
    cap_minus = truncation / (1.0 - m0) if m0 < 1 else np.inf
    excess = y - m0
    log_plus = np.minimum(lam, cap_plus)
    log_plus *= excess
    elementary.log1p(log_plus, out=log_plus)
    np.cumsum(log_plus, axis=-1, out=log_plus)
    log_plus += elementary.log(theta)
    log_minus = np.minimum(lam, cap_minus, out=lam)
    log_minus *= excess
    np.negative(log_minus, out=log_minus)
    elementary.log1p(log_minus, out=log_minus)
    np.cumsum(log_minus, axis=-1, out=log_minus)
    log_minus += elementary.log(1.0 - theta)
    return elementary.logaddexp(log_plus, log_minus, out=log_plus)


def anytime_p_value(log_evalue: np.ndarray, *, elementary: ElementaryFunctions = NUMPY_UFUNCS) -> np.ndarray:
    """p_t = min(1, 1 / max_{s<=t} E_s) from a log e-process path (last axis is time)."""
    return np.minimum(1.0, elementary.exp(-np.maximum.accumulate(log_evalue, axis=-1)))
