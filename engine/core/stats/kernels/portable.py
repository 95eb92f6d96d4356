"""exp, ln and ln(1 + x) from IEEE 754 basic operations alone: the same bits on every machine.

The C library's ``exp``/``log``/``log1p`` are not correctly rounded, and glibc picks a variant per CPU through
ifuncs (an FMA build on CPUs with FMA and AVX2, an SSE2 build otherwise; another C library, macOS's or musl's,
has its own code): a result can differ in the last bit from one machine to the next. The loops here use only
addition, subtraction, multiplication and division (correctly rounded on every IEEE 754 machine), comparisons,
``floor`` and the exact scalings ``frexp``/``ldexp``, in a fixed order: compiled without fast-math, nothing is
reassociated or contracted into fused multiply-adds, so the compiled loop gives the bits the same source gives
run by the Python interpreter (tested), whatever the CPU, its SIMD features or the C library. The price is
accuracy: within 1 ulp of the exact value (measured against mpmath in the tests) rather than libm's ~0.5.

**exp** (Cody & Waite 1980, *Software Manual for the Elementary Functions*, ch. 6; the rational form of
Tang 1989 and of Sun's fdlibm): x = k ln 2 + r with k = floor(x / ln 2 + 1/2), |r| <= ln 2 / 2, computed as
r = hi - lo with hi = x - k·LN2_HI (exact: LN2_HI has 42 significant bits and |k| <= 1075) and lo = k·LN2_LO.
With R(r) = r·coth(r/2) = 2 + Σ_{n>=1} 2·B_2n·r^2n/(2n)! (B_2n the Bernoulli numbers: 2 + r²/6 - r⁴/360 + ...,
seven terms, truncation below 10^-22 for r² <= 0.121) and c = r - (R(r) - 2), e^r = 1 + 2r/(R - r) =
1 + r + r·c/(2 - c), evaluated as 1 - ((lo - r·c/(2 - c)) - hi); then e^x = 2^k · e^r by ``ldexp`` (one rounding,
only when the result is subnormal). e^x = inf above X_MAX (the largest double whose e^x is finite), 0 below
X_MIN (e^x <= 2^-1075 rounds to 0); nan stays nan.

**ln** (the same sources, ch. 5): x = 2^e·m with m in [√2/2, √2) (``frexp``, then one doubling), f = m - 1 (exact),
s = f / (2 + f), so ln(1 + f) = 2 atanh(s) = 2s + s·R with R = Σ_{k=1..11} 2 s^2k / (2k + 1) (truncation below
2^-60 relative, |s| <= 3 - 2√2). Since 2s = f - (f²/2 - s·f²/2), ln(1 + f) = f - (h - s·(h + R)) with h = f²/2, so
the leading term f is exact and every rounding falls on a correction about f² in size; ln x = e·LN2_HI +
(ln(1 + f) + e·LN2_LO), grouped as e·LN2_HI - ((h - (s·(h + R) + e·LN2_LO)) - f). ln(±0) = -inf, ln(x < 0) = nan,
ln(inf) = inf.

**ln(1 + x)**: for 1 + x in [√2/2, √2) the same series with f = x exactly (e = 0: no cancellation near 0, and
ln(1 + (-0)) = -0); otherwise u = 1 + x (rounded), ln(1 + x) = ln u + ln(1 + (x - (u - 1))/u), the second term taken
as c = (x - (u - 1))/u (u - 1 and x - (u - 1) are exact; c = 0 once u >= 2^53, where 1 is below x's half-ulp and
1/x below ln x's). ln(1 + -1) = -inf, below -1 nan, inf stays inf.

Each loop reads ``x`` and writes ``out`` element by element (float64, one-dimensional); the array wrappers with
numpy's calling conventions are ``certa.engine.core.stats.kernels.libm.PORTABLE``.
"""

from __future__ import annotations

import math

__all__ = ["LN2_HI", "LN2_LO", "INV_LN2", "X_MAX", "X_MIN", "SQRT2", "SQRT_HALF", "TWO_53", "EXP_SERIES", "LOG_SERIES",
           "exp_loop", "logarithm_loop"]

LN2_HI = 0.6931471805598903        # 0x1.62e42fefa3800p-1: ln 2 truncated to 42 significant bits
LN2_LO = 5.497923018708371e-14     # 0x1.ef35793c76730p-45: ln 2 - LN2_HI rounded to float64
INV_LN2 = 1.4426950408889634       # 1 / ln 2 rounded (only chooses k: its rounding moves no result)
X_MAX = 709.782712893384           # the largest double x whose e^x is finite
X_MIN = -745.1332191019411         # the smallest double x whose e^x > 2^-1075 (rounds to 2^-1074, not 0)
SQRT2 = 1.4142135623730951         # √2 rounded up: the reduction's upper end
SQRT_HALF = 0.7071067811865476     # √2/2 rounded up: its lower end
TWO_53 = 9007199254740992.0        # 2^53

EXP_SERIES = (1.0 / 6.0, -1.0 / 360.0, 1.0 / 15120.0, -1.0 / 604800.0, 1.0 / 23950080.0,
              -691.0 / 653837184000.0, 1.0 / 37362124800.0)
"""2·B_2n/(2n)! for n = 1..7: r·coth(r/2) = 2 + Σ EXP_SERIES[n-1]·r^2n (Bernoulli numbers B_2 = 1/6, B_4 = -1/30,
B_6 = 1/42, B_8 = -1/30, B_10 = 5/66, B_12 = -691/2730, B_14 = 7/6)."""

LOG_SERIES = tuple(2.0 / (2 * k + 1) for k in range(1, 12))
"""2/(2k + 1) for k = 1..11: 2 atanh(s) = 2s + s·Σ LOG_SERIES[k-1]·s^2k."""

_P1, _P2, _P3, _P4, _P5, _P6, _P7 = EXP_SERIES
_L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8, _L9, _L10, _L11 = LOG_SERIES


def exp_loop(x, out):  # pragma: no cover - compiled (and run uncompiled by the tests)
    """out[i] = e^x[i] (module docstring)."""
    for i in range(x.shape[0]):
        v = x[i]
        if v != v:
            out[i] = v
        elif v > X_MAX:
            out[i] = math.inf
        elif v < X_MIN:
            out[i] = 0.0
        else:
            k = math.floor(v * INV_LN2 + 0.5)
            hi = v - k * LN2_HI
            lo = k * LN2_LO
            r = hi - lo
            t = r * r
            c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * (_P5 + t * (_P6 + t * _P7))))))
            y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
            out[i] = math.ldexp(y, k)


def logarithm_loop(x, out, shifted):  # pragma: no cover - compiled (and run uncompiled by the tests)
    """out[i] = ln(1 + x[i]) if ``shifted`` else ln x[i] (module docstring)."""
    bottom = -1.0 if shifted else 0.0
    for i in range(x.shape[0]):
        v = x[i]
        if v != v or v == math.inf or (shifted and v == 0.0):      # nan, inf; ln(1 + ±0) = ±0
            out[i] = v
        elif v == bottom:
            out[i] = -math.inf
        elif v < bottom:
            out[i] = math.nan
        else:
            if shifted and SQRT_HALF - 1.0 <= v < SQRT2 - 1.0:
                f = v
                e = 0
                c = 0.0
            else:
                u = 1.0 + v if shifted else v
                m, e = math.frexp(u)
                if m < SQRT_HALF:
                    m = m * 2.0
                    e = e - 1
                f = m - 1.0
                c = (v - (u - 1.0)) / u if shifted and u < TWO_53 else 0.0
            s = f / (2.0 + f)
            z = s * s
            h = 0.5 * f * f
            R = z * (_L1 + z * (_L2 + z * (_L3 + z * (_L4 + z * (_L5 + z * (_L6 + z * (_L7 + z * (
                _L8 + z * (_L9 + z * (_L10 + z * _L11))))))))))
            out[i] = e * LN2_HI - ((h - (s * (h + R) + (e * LN2_LO + c))) - f)
