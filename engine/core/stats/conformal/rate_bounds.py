"""Prediction bounds for the rate of an event on a future test set, from a calibration count.

Setting (seed 003, §6): an event (e.g. "the prediction set is a singleton") occurred ``count`` times
in ``n`` calibration trials (here: leave-one-out outcomes). A future test set of ``test_size`` = N
points will show the event Y times. Each method returns [L, U] (as rates Y/N) meant to satisfy
P(L <= Y/N <= U) >= ``level`` jointly over the calibration count and the test draw, treating the count
as Binomial(n, p) and Y as Binomial(N, p) with the same unknown p. All functions are vectorised over
``count``, ``n`` and ``test_size``; alpha = 1 - level. An optional inflation factor f >= 1 shrinks
the calibration sample to n/f (for dependent LOO outcomes; 1 = none).

The risk alpha. Each method takes the ``level`` it states and, optionally, its ``risk`` alpha: a caller that
derives both from a decimal knob in rational arithmetic (``conformal.pac_report`` 1.1.0: alpha = 1 - 0.95 is
0.05, not the 0.050000000000000044 of ``1.0 - 0.95``) passes the correctly rounded alpha; without it alpha is
``1.0 - level`` in floating point (``conformal.pac_report`` 1.0.0). ``RateBounds.risk`` records the alpha used.

* ``exact``: Clopper-Pearson limits p_L, p_U for p at alpha/4 per side, then the binomial test
  quantiles at p_L and p_U at alpha/4 per side (union bound over four tails: level >= 1 - alpha).
* ``beta_binomial``: the exact conditional prediction limits of Thatcher (1964, Technometrics 6:
  "Relationships between Bayesian and confidence limits for predictions"): lower limit the alpha/2
  quantile of BetaBinomial(N, count, n-count+1), upper limit the 1-alpha/2 quantile of
  BetaBinomial(N, count+1, n-count), quantiles taken as the smallest y with CDF(y) >= q. These are
  guaranteed conservative. The seed's uniform-prior predictive BetaBinomial(N, count+1, n-count+1)
  is kept as ``seed_beta_binomial_bounds`` for comparison: it is not (at n=10, N=1000 and level 0.9
  its coverage falls to 0.002 for p near 0 or 1).
* ``simple``: p_hat ± z_{1-alpha/2} sqrt(p_hat(1-p_hat)(f/n + 1/N)) (normal approximation).
* ``analytical``: p_hat ± c sqrt(f p_hat(1-p_hat)/(n-1) + p_hat(1-p_hat)/N), c = t_{1-alpha/2, n-1}
  (z when n <= 2): the reference implementation's formula; approximate, can undercover.
* ``hoeffding``: p_hat ± (sqrt(f ln(4/alpha)/(2n)) + sqrt(ln(4/alpha)/(2N))), distribution-free.

Zero (or full) counts: ``exact``, ``beta_binomial`` and ``hoeffding`` give a one-sided, non-degenerate
bound [0, U] (or [L, 1]) by construction. The normal methods would collapse to [0, 0]; there they
fall back to the ``exact`` bound and say so (``fallback``). With n = 0 the bound is [0, 1].

``clopper_pearson`` is the two-sided equal-tailed exact interval for a calibration proportion
(Clopper & Pearson 1934). ``bonferroni_level`` gives the per-bound level 1 - (1-level)/M.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import numpy as np

from certa.engine.core.stats.kernels.lazy_scipy import special, stats

__all__ = [
    "METHODS",
    "RateBounds",
    "bonferroni_level",
    "clopper_pearson",
    "exact_bounds",
    "beta_binomial_bounds",
    "betabinom_quantile",
    "seed_beta_binomial_bounds",
    "simple_bounds",
    "analytical_bounds",
    "hoeffding_bounds",
    "prediction_bounds",
    "resolve_method",
    "bound_envelope",
]

METHODS = ("exact", "beta_binomial", "simple", "analytical", "hoeffding")
AUTO_METHOD = "beta_binomial"

Real = TypeVar("Real", float, Fraction)


@dataclass(frozen=True)
class RateBounds:
    """Bounds on a future test rate (arrays broadcast from the inputs).

    ``fallback`` marks entries where a normal-approximation method met a zero or full count and the
    ``exact`` bound was used instead; ``vacuous`` marks n = 0 (bound [0, 1]). ``risk`` is the alpha the bounds
    were computed at (``1.0 - level`` unless the caller gave it; see the module docstring).
    """

    method: str
    level: float
    lower: np.ndarray
    upper: np.ndarray
    fallback: np.ndarray
    vacuous: np.ndarray
    risk: float


def bonferroni_level(level: Real, m: int) -> Real:
    """Per-bound confidence so that M bounds hold jointly at ``level``: 1 - (1 - level)/M (Bonferroni).

    In floating point for a float ``level``; exact for a ``Fraction`` (e.g. ``Fraction("0.95")``: 239/240 for
    M = 12), which the caller rounds once.
    """
    if m < 1:
        raise ValueError(f"'m' must be >= 1 (got {m})")
    return 1 - (1 - level) / m


def _alpha(level: float, risk: float | None) -> float:
    """The risk alpha of a bound at ``level``: ``risk`` when the caller computed it, else ``1.0 - level``."""
    return 1.0 - level if risk is None else risk


def _arrays(count, n, test_size=None):
    count = np.asarray(count, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    if np.any(count < 0) or np.any(count > n):
        raise ValueError("'count' must lie in [0, n]")
    if test_size is None:
        return count, n
    test_size = np.asarray(test_size, dtype=np.int64)
    if np.any(test_size < 1):
        raise ValueError("'test_size' must be >= 1")
    return np.broadcast_arrays(count, n, test_size)


def _effective(count: np.ndarray, n: np.ndarray, inflation_factor: float) -> tuple[np.ndarray, np.ndarray]:
    """Effective sample (round(count/f), round(n/f)) for an inflation factor f >= 1 (identity at f=1)."""
    if inflation_factor < 1.0:
        raise ValueError(f"'inflation_factor' must be >= 1 (got {inflation_factor})")
    if inflation_factor == 1.0:
        return count, n
    n_e = np.maximum(np.rint(n / inflation_factor).astype(np.int64), np.minimum(n, 1))
    k_e = np.minimum(np.rint(count / inflation_factor).astype(np.int64), n_e)
    return k_e, n_e


def clopper_pearson(count, n, level: float, *, risk: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided equal-tailed Clopper-Pearson interval for a proportion count/n (level in (0,1)).

    lower = Beta^-1(alpha/2; x, n-x+1) (0 if x=0), upper = Beta^-1(1-alpha/2; x+1, n-x) (1 if x=n);
    n = 0 gives [0, 1]. alpha is ``risk`` if given, else 1.0 - level.
    """
    count, n = _arrays(count, n)
    count, n = np.broadcast_arrays(count, n)
    alpha = _alpha(level, risk)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(count > 0, stats.beta.ppf(alpha / 2, np.maximum(count, 1), n - count + 1), 0.0)
        upper = np.where(count < n, stats.beta.ppf(1 - alpha / 2, count + 1, np.maximum(n - count, 1)), 1.0)
    return lower.astype(np.float64), upper.astype(np.float64)


def _finish(method: str, level: float, alpha: float, lower, upper, n, fallback=None) -> RateBounds:
    vacuous = np.asarray(n) == 0
    lower = np.where(vacuous, 0.0, np.clip(lower, 0.0, 1.0)).astype(np.float64)
    upper = np.where(vacuous, 1.0, np.clip(upper, 0.0, 1.0)).astype(np.float64)
    if fallback is None:
        fallback = np.zeros(lower.shape, dtype=bool)
    return RateBounds(method=method, level=float(level), lower=lower, upper=upper,
                      fallback=np.asarray(fallback, dtype=bool) & ~vacuous, vacuous=vacuous, risk=float(alpha))


def exact_bounds(count, n, test_size, level: float, inflation_factor: float = 1.0, *,
                 risk: float | None = None) -> RateBounds:
    """Clopper-Pearson for p at alpha/4 per side, then binomial test quantiles at alpha/4 per side."""
    count, n, test_size = _arrays(count, n, test_size)
    k, m = _effective(count, n, inflation_factor)
    alpha = _alpha(level, risk)
    q = alpha / 4
    with np.errstate(invalid="ignore", divide="ignore"):
        p_lo = np.where(k > 0, stats.beta.ppf(q, np.maximum(k, 1), m - k + 1), 0.0)
        p_hi = np.where(k < m, stats.beta.ppf(1 - q, k + 1, np.maximum(m - k, 1)), 1.0)
        y_lo = np.where(p_lo > 0, stats.binom.ppf(q, test_size, p_lo), 0.0)
        y_hi = np.where(p_hi < 1, stats.binom.ppf(1 - q, test_size, p_hi), test_size)
    return _finish("exact", level, alpha, y_lo / test_size, y_hi / test_size, n)


def betabinom_quantile(q, n_trials, a, b, *, width: float = 12.0, block: int = 1 << 22) -> np.ndarray:
    """Smallest y in [0, n_trials] with P(Y <= y) >= q for Y ~ BetaBinomial(n_trials, a, b), vectorised.

    a, b must be integers >= 1. The CDF is summed over a window of ``width`` standard deviations
    around the mean, with the pmf from its exact value at the window's left end and the ratio
    recurrence pmf(y+1)/pmf(y) = (N-y)(y+a)/((y+1)(N-y-1+b)); the mass left of the window is added
    exactly through the identity
    P(Y <= y) = P(H >= a), H ~ Hypergeometric(a+b-1+n_trials, a+b-1, a+y), which follows from writing
    Beta(a, b) and the binomial tail as uniform order statistics. Work is O(window) per entry, in blocks
    of at most ``block`` cells; entries whose quantile falls outside their window use scipy's generic
    ``betabinom.ppf``. (scipy's own ``betabinom.ppf`` sums the pmf from 0 on every call: O(n_trials)
    per CDF evaluation, far too slow for vectorised use.)
    """
    q, n_trials, a, b = (np.asarray(x) for x in np.broadcast_arrays(q, n_trials, a, b))
    shape = q.shape
    q, n_trials = q.ravel().astype(np.float64), n_trials.ravel().astype(np.int64)
    a, b = a.ravel().astype(np.int64), b.ravel().astype(np.int64)
    if np.any(a < 1) or np.any(b < 1):
        raise ValueError("beta-binomial parameters must be integers >= 1")
    mean = a / (a + b)
    sd = np.sqrt(n_trials * mean * (1 - mean) * (a + b + n_trials) / (a + b + 1))
    lo = np.clip(np.floor(n_trials * mean - width * sd) - 1, 0, n_trials).astype(np.int64)
    hi = np.clip(np.ceil(n_trials * mean + width * sd) + 1, 0, n_trials).astype(np.int64)
    left = np.where(lo > 0, stats.hypergeom.sf(a - 1, a + b - 1 + n_trials, a + b - 1, a + lo - 1), 0.0)
    out = np.full(q.size, -1, dtype=np.int64)
    span = hi - lo + 1
    order = np.argsort(span, kind="stable")
    start = 0
    while start < order.size:
        length = int(span[order[start]])
        stop = start + 1
        while stop < order.size and int(span[order[stop]]) * (stop + 1 - start) <= max(block, length):
            stop += 1
        idx = order[start:stop]
        width_cols = int(span[idx].max())
        y = lo[idx, None] + np.arange(width_cols)[None, :]
        valid = y <= hi[idx, None]
        y = np.minimum(y, n_trials[idx, None])
        nt, aa, bb = n_trials[idx, None], a[idx, None], b[idx, None]
        y0 = lo[idx, None]
        log_pmf0 = (special.gammaln(nt + 1) - special.gammaln(y0 + 1) - special.gammaln(nt - y0 + 1)
                    + special.betaln(y0 + aa, nt - y0 + bb) - special.betaln(aa, bb))
        # pmf(y+1)/pmf(y) = (N-y)(y+a) / ((y+1)(N-y-1+b)), accumulated in log space from pmf(lo)
        yy = y[:, :-1].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.log((nt - yy) * (yy + aa) / ((yy + 1) * (nt - yy - 1 + bb)))
        log_pmf = log_pmf0 + np.concatenate([np.zeros((idx.size, 1)), np.cumsum(step, axis=1)], axis=1)
        cdf = left[idx, None] + np.cumsum(np.where(valid, np.exp(log_pmf), 0.0), axis=1)
        hit = (cdf >= q[idx, None]) & valid
        found = hit.any(axis=1) & (left[idx] < q[idx])
        out[idx[found]] = lo[idx[found]] + np.argmax(hit[found], axis=1)
        start = stop
    missing = np.flatnonzero(out < 0)
    if missing.size:
        out[missing] = stats.betabinom.ppf(q[missing], n_trials[missing], a[missing], b[missing]).astype(np.int64)
    return out.reshape(shape)


def beta_binomial_bounds(count, n, test_size, level: float, inflation_factor: float = 1.0, *,
                         risk: float | None = None) -> RateBounds:
    """Thatcher's exact prediction limits (see module docstring), alpha/2 per side."""
    count, n, test_size = _arrays(count, n, test_size)
    k, m = _effective(count, n, inflation_factor)
    alpha = _alpha(level, risk)
    q = alpha / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        y_lo = np.where(k > 0, betabinom_quantile(q, test_size, np.maximum(k, 1), np.maximum(m - k + 1, 1)), 0.0)
        y_hi = np.where(k < m, betabinom_quantile(1 - q, test_size, k + 1, np.maximum(m - k, 1)), test_size)
    return _finish("beta_binomial", level, alpha, y_lo / test_size, y_hi / test_size, n)


def seed_beta_binomial_bounds(count, n, test_size, level: float) -> RateBounds:
    """The seed's uniform-prior predictive, BetaBinomial(N, count+1, n-count+1), equal-tailed.

    Kept for comparison only: it is a Bayesian predictive interval without a frequentist guarantee.
    """
    count, n, test_size = _arrays(count, n, test_size)
    alpha = 1.0 - level
    q = alpha / 2
    y_lo = stats.betabinom.ppf(q, test_size, count + 1, n - count + 1)
    y_hi = stats.betabinom.ppf(1 - q, test_size, count + 1, n - count + 1)
    return _finish("seed_beta_binomial", level, alpha, y_lo / test_size, y_hi / test_size, n)


def _degenerate(count: np.ndarray, n: np.ndarray) -> np.ndarray:
    return (count == 0) | (count == n)


def simple_bounds(count, n, test_size, level: float, inflation_factor: float = 1.0, *,
                  risk: float | None = None) -> RateBounds:
    """p_hat ± z sqrt(p_hat(1-p_hat)(f/n + 1/N)), z = z_{1-alpha/2}; zero/full counts fall back to ``exact``."""
    count, n, test_size = _arrays(count, n, test_size)
    alpha = _alpha(level, risk)
    z = stats.norm.ppf(1 - alpha / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = count / n
        half = z * np.sqrt(p * (1 - p) * (inflation_factor / n + 1.0 / test_size))
    return _with_fallback("simple", level, alpha, p - half, p + half, count, n, test_size, inflation_factor)


def analytical_bounds(count, n, test_size, level: float, inflation_factor: float = 1.0, *,
                      risk: float | None = None) -> RateBounds:
    """p_hat ± c sqrt(f p_hat(1-p_hat)/(n-1) + p_hat(1-p_hat)/N), c = t_{n-1} (z if n <= 2) at 1 - alpha/2."""
    count, n, test_size = _arrays(count, n, test_size)
    alpha = _alpha(level, risk)
    tail = 1 - alpha / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        p = count / n
        c = np.where(n > 2, stats.t.ppf(tail, np.maximum(n - 1, 1)), stats.norm.ppf(tail))
        var = inflation_factor * p * (1 - p) / np.maximum(n - 1, 1) + p * (1 - p) / test_size
        half = c * np.sqrt(var)
    return _with_fallback("analytical", level, alpha, p - half, p + half, count, n, test_size, inflation_factor)


def _with_fallback(method, level, alpha, lower, upper, count, n, test_size, inflation_factor) -> RateBounds:
    degenerate = _degenerate(count, n)
    if degenerate.any():
        ex = exact_bounds(count, n, test_size, level, inflation_factor, risk=alpha)
        lower = np.where(degenerate, ex.lower, lower)
        upper = np.where(degenerate, ex.upper, upper)
    return _finish(method, level, alpha, lower, upper, n, fallback=degenerate)


def hoeffding_bounds(count, n, test_size, level: float, inflation_factor: float = 1.0, *,
                     risk: float | None = None) -> RateBounds:
    """p_hat ± (sqrt(f ln(4/alpha)/(2n)) + sqrt(ln(4/alpha)/(2N))) (Hoeffding on both samples)."""
    count, n, test_size = _arrays(count, n, test_size)
    alpha = _alpha(level, risk)
    log_term = np.log(4.0 / alpha)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = count / n
        eps = np.sqrt(inflation_factor * log_term / (2 * n)) + np.sqrt(log_term / (2 * test_size))
    return _finish("hoeffding", level, alpha, p - eps, p + eps, n)


_KERNELS = {
    "exact": exact_bounds,
    "beta_binomial": beta_binomial_bounds,
    "simple": simple_bounds,
    "analytical": analytical_bounds,
    "hoeffding": hoeffding_bounds,
}


def resolve_method(method: str) -> str:
    """``auto`` is ``beta_binomial`` (the tightest method with a finite-sample guarantee); others map to themselves."""
    if method == "auto":
        return AUTO_METHOD
    if method not in _KERNELS:
        raise ValueError(f"unknown prediction method {method!r}; use one of {', '.join(METHODS)} or auto")
    return method


def prediction_bounds(count, n, test_size, level: float, method: str = "auto",
                      inflation_factor: float = 1.0, *, risk: float | None = None) -> RateBounds:
    """Prediction bounds by ``method`` (one of ``METHODS`` or ``auto``) at ``level`` (alpha = ``risk`` if given,
    else 1.0 - level), vectorised."""
    if not (0.0 < level < 1.0):
        raise ValueError(f"'level' must lie strictly between 0 and 1 (got {level})")
    return _KERNELS[resolve_method(method)](count, n, test_size, level, inflation_factor, risk=risk)


def bound_envelope(first: RateBounds, second: RateBounds) -> RateBounds:
    """The union [min lower, max upper] of two bounds of the same method and level (elementwise).

    Used to bracket a known bias: the stage bounds each rate from two leave-one-out counts whose
    expectations lie on either side of the deployed predictor's rate.
    """
    if first.method != second.method or first.level != second.level or first.risk != second.risk:
        raise ValueError("an envelope combines bounds of one method, level and risk")
    vacuous = first.vacuous | second.vacuous
    return RateBounds(method=first.method, level=first.level,
                      lower=np.where(vacuous, 0.0, np.minimum(first.lower, second.lower)),
                      upper=np.where(vacuous, 1.0, np.maximum(first.upper, second.upper)),
                      fallback=(first.fallback | second.fallback) & ~vacuous, vacuous=vacuous, risk=first.risk)
