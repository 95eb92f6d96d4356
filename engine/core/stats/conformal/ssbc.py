"""Small-sample beta correction (SSBC) of the split-conformal miscoverage level, per class.

In split conformal prediction with n exchangeable calibration scores, the threshold is the k-th
smallest score and, for continuous scores, the coverage of that threshold on a new point is
distributed Beta(k, n+1-k) (Vovk 2012, "Conditional validity of inductive conformal predictors";
ties only raise it). SSBC (seed 003, §2) writes k = n+1-u and picks the largest u (the most
permissive threshold) such that

    P( Beta(n+1-u, u) >= 1 - alpha ) >= 1 - delta,        1 <= u <= floor(alpha (n+1)),

so that with probability at least 1-delta over the calibration draw the class-conditional coverage is
at least 1-alpha. The corrected miscoverage is alpha' = u*/(n+1) and k = n+1-u*.

Computation. For integer a, b, P(Beta(a, b) <= x) = P(Binomial(a+b-1, x) >= a); with a = n+1-u,
b = u and x = 1-alpha the failure probability is P(Binomial(n, alpha) <= u-1), so the rule is
``binom.cdf(u-1, n, alpha) <= delta`` (the small tail, evaluated accurately). The tail probability
increases in u, so u* is found by binary search (~log2 n evaluations). u_max is floor(alpha (n+1))
in exact rational arithmetic on alpha's decimal value, and k = n+1-u* is an integer. When no u
qualifies (alpha < 1/(n+1), or n too small for delta), the class is *always included*: threshold +inf,
coverage 1 with certainty.

``mode="beta-binomial"`` guards a finite window of m test points instead: the number of covered
points is BetaBinomial(m, n+1-u, u) and the rule is P(X >= ceil((1-alpha) m)) >= 1-delta.

``upstream_compat=True`` reproduces the reference implementation (phzwart/ssbc 1.4.0, ``ssbc_correct`` in
``core_pkg/core.py``; bugs B1-B4 in docs/conformal.md): float u_max, a guess-and-bracket search capped at
±100, u*=0 clamped to the largest score instead of +inf, and k = ceil((n+1)(1-u/(n+1))) in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from certa.engine.core.stats.kernels.lazy_scipy import stats

__all__ = ["SSBCResult", "ssbc_correct", "coverage_risk", "exact_fraction"]

MODES = ("beta", "beta-binomial")
UPSTREAM_MIN_N = 10


@dataclass(frozen=True)
class SSBCResult:
    """The SSBC correction for one class.

    ``k`` is the order-statistic index of the deployed threshold (1-based). ``always_include`` is
    True when no u qualifies: then ``k = n+1`` and the threshold is +inf (exact mode). In upstream
    compatibility mode ``k`` is upstream's float-computed index, and the deployed threshold uses
    ``min(k, n)`` (so ``always_include`` is always False there: that is bug B1).
    ``satisfied_mass`` is the acceptance probability at u* (1.0 when the class is always included
    exactly; upstream also reports 1.0 when u*=0 although its clamped threshold does not attain it).
    """

    alpha_target: float
    delta: float
    n: int
    mode: str
    m: int | None
    u_max: int
    u_star: int
    k: int
    always_include: bool
    alpha_corrected: float
    satisfied_mass: float
    search: str
    evaluations: int
    upstream_compat: bool


def exact_fraction(x: float) -> Fraction:
    """``x`` as the exact rational of its shortest decimal representation (0.29 -> 29/100)."""
    return Fraction(repr(float(x)))


def _iv(alpha: float, n: int, delta: float, mode: str, m: int | None, upstream_compat: bool) -> int | None:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"'n' must be an integer >= 1 (got {n!r})")
    for name, value in (("alpha", alpha), ("delta", delta)):
        if not (0.0 < float(value) < 1.0):
            raise ValueError(f"'{name}' must lie strictly between 0 and 1 (got {value!r})")
    if mode not in MODES:
        raise ValueError(f"'mode' must be one of {', '.join(MODES)} (got {mode!r})")
    if upstream_compat and n < UPSTREAM_MIN_N:
        raise ValueError(f"upstream_compat reproduces the reference implementation, which needs n >= "
                         f"{UPSTREAM_MIN_N} per class (got n = {n})")
    if mode == "beta":
        return None
    m_eff = int(n) if m is None else m
    if not isinstance(m_eff, (int, np.integer)) or isinstance(m_eff, bool) or m_eff < 1:
        raise ValueError(f"'m' must be an integer >= 1 or None (got {m!r})")
    return int(m_eff)


def _failure_mass(u: np.ndarray, n: int, alpha: float, mode: str, m: int | None,
                  alpha_frac: Fraction) -> np.ndarray:
    """1 - acceptance probability of u (vectorised over u). Smaller is better; accept iff <= delta."""
    u = np.asarray(u, dtype=np.int64)
    if mode == "beta":
        # P(Beta(n+1-u, u) < 1-alpha) = P(Binomial(n, alpha) <= u-1)
        return stats.binom.cdf(u - 1, n, alpha)
    assert m is not None
    k_thr = math.ceil((1 - alpha_frac) * m)
    # covered count X ~ BetaBinomial(m, n+1-u, u); failure = P(X <= k_thr - 1)
    return stats.betabinom.cdf(k_thr - 1, m, n + 1 - u, u)


def _binary_search(n: int, u_max: int, alpha: float, delta: float, mode: str, m: int | None,
                   alpha_frac: Fraction) -> tuple[int, int]:
    """Largest u in [1, u_max] with failure mass <= delta (0 if none); the tail is monotone in u."""
    evaluations = 0
    lo, hi = 0, u_max  # invariant: u <= lo passes (lo=0 is the sentinel), u > hi fails
    while lo < hi:
        mid = (lo + hi + 1) // 2
        evaluations += 1
        if _failure_mass(np.array([mid]), n, alpha, mode, m, alpha_frac)[0] <= delta:
            lo = mid
        else:
            hi = mid - 1
    return lo, evaluations


def _upstream_search(n: int, u_max: int, alpha: float, delta: float, mode: str, m: int | None,
                     alpha_frac: Fraction) -> tuple[int, int]:
    """The reference implementation's guess-and-bracket search (B4: can stop short of u*)."""

    def passes(us: np.ndarray) -> np.ndarray:
        if mode == "beta":
            return stats.beta.sf(1 - alpha, n + 1 - us, us) >= 1 - delta
        return _failure_mass(us, n, alpha, mode, m, alpha_frac) <= delta

    u_t = (n + 1) * alpha
    z = stats.norm.ppf(1 - delta)
    u0 = min(max(1, math.floor(u_t - z * math.sqrt(u_t))), u_max)
    w = min(100, max(5, min(int(2 * z * math.sqrt(u_t)), n // 10)))
    lo, top = max(1, u0 - w), min(u_max, u0 + w)
    bracket = np.arange(lo, top + 1)
    ok = passes(bracket)
    evaluations = bracket.size
    if ok.any():
        return int(bracket[ok].max()), evaluations
    below = np.arange(1, u0 - w)  # downward scan from u0-w-1, first pass = largest passing
    if below.size:
        ok_below = passes(below)
        evaluations += below.size
        if ok_below.any():
            return int(below[ok_below].max()), evaluations
    if top < u_max:  # upward scan, stop at first failure
        above = np.arange(top + 1, u_max + 1)
        ok_above = passes(above)
        evaluations += above.size
        first_fail = int(np.argmin(ok_above)) if not ok_above.all() else above.size
        if first_fail > 0:
            return int(above[first_fail - 1]), evaluations
    return 0, evaluations


def ssbc_correct(alpha: float, n: int, delta: float, *, mode: str = "beta", m: int | None = None,
                 upstream_compat: bool = False) -> SSBCResult:
    """SSBC for one class of ``n`` calibration points (see the module docstring for the rule).

    Returns u*, the integer k = n+1-u*, alpha' = u*/(n+1), and whether the class must always be
    included (no u qualifies). ``upstream_compat`` reproduces the reference implementation's float
    arithmetic and bracket search, including its bugs B1-B4.
    """
    m_eff = _iv(alpha, n, delta, mode, m, upstream_compat)
    n = int(n)
    alpha, delta = float(alpha), float(delta)
    alpha_frac = exact_fraction(alpha)
    if upstream_compat:
        u_max = min(n, int(np.floor(alpha * (n + 1))))
        if u_max == 0:
            u_star, evaluations = 0, 0
        else:
            u_star, evaluations = _upstream_search(n, u_max, alpha, delta, mode, m_eff, alpha_frac)
        k = int(np.ceil((n + 1) * (1 - u_star / (n + 1))))
        search = "upstream_bracket"
        always_include = False
    else:
        u_max = min(n, math.floor(alpha_frac * (n + 1)))
        u_star, evaluations = _binary_search(n, u_max, alpha, delta, mode, m_eff, alpha_frac)
        k = n + 1 - u_star
        search = "binary"
        always_include = u_star == 0
    if u_star == 0:
        satisfied = 1.0
    else:
        satisfied = float(1.0 - _failure_mass(np.array([u_star]), n, alpha, mode, m_eff, alpha_frac)[0])
    return SSBCResult(
        alpha_target=alpha, delta=delta, n=n, mode=mode, m=m_eff, u_max=int(u_max), u_star=int(u_star),
        k=int(k), always_include=always_include, alpha_corrected=u_star / (n + 1),
        satisfied_mass=satisfied, search=search, evaluations=int(evaluations),
        upstream_compat=bool(upstream_compat),
    )


def coverage_risk(alpha: float, n: int, k: int, *, mode: str = "beta", m: int | None = None) -> float:
    """Probability that the deployed threshold (k-th smallest of n continuous scores) misses the target.

    ``beta``: P(Beta(k, n+1-k) < 1-alpha) = P(Binomial(n, alpha) <= n-k); ``beta-binomial``: P(fewer than
    ceil((1-alpha) m) of m test points covered). k > n (always include) gives 0. For the exact SSBC this is
    at most delta; for upstream's clamped u*=0 threshold (k = n) it is (1-alpha)^n (bug B1).
    """
    if k > n:
        return 0.0
    u = n + 1 - k
    m_eff = None if mode == "beta" else (n if m is None else m)
    return float(_failure_mass(np.array([u]), n, float(alpha), mode, m_eff, exact_fraction(alpha))[0])
