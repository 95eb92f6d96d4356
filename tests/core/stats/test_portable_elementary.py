"""The portable elementary functions of sequential.diff 3.2.0 (``certa.engine.core.stats.kernels.portable`` and
``libm.PORTABLE``): within 1 ulp of the exact values (mpmath), the published values, IEEE 754's edges, and the
same bits compiled as interpreted (so no fused multiply-add or reassociation entered the compiled loops: a
machine without FMA, or the Python interpreter, computes the same numbers).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from certa.engine.core.scorers.divergences import log_normalised, sym_kl_positions
from certa.engine.core.scorers.logprob_tables import LogprobTablesScorer
from certa.engine.core.stats.kernels import portable
from certa.engine.core.stats.kernels.libm import PORTABLE
from certa.engine.core.tables import table_from_columns

mpmath.mp.prec = 160
EXACT = {"exp": mpmath.exp, "log": mpmath.log, "log1p": mpmath.log1p}


def _sample(name: str, n: int = 4000) -> np.ndarray:
    """Seeded arguments over the function's whole finite domain: wide, ordinary, near the reduction's seams."""
    rng = np.random.default_rng({"exp": 11, "log": 12, "log1p": 13}[name])
    if name == "exp":
        return np.concatenate([rng.uniform(portable.X_MIN, portable.X_MAX, n), rng.normal(0.0, 1.0, n),
                               rng.normal(0.0, 1e-8, n // 4), (np.arange(-40, 41) + 0.5) * math.log(2),
                               [portable.X_MIN, portable.X_MAX, -708.5, 1e-300, -1e-300]])
    magnitudes = np.exp2(rng.uniform(-1074.0, 1023.9, n))
    if name == "log":
        return np.concatenate([magnitudes, rng.uniform(0.5, 2.0, n), 1.0 + rng.normal(0.0, 1e-10, n // 4),
                               [portable.SQRT_HALF, portable.SQRT2, 5e-324, 2.2250738585072014e-308,
                                1.7976931348623157e308]])
    return np.concatenate([magnitudes, -np.exp2(rng.uniform(-1074.0, -1e-9, n)), rng.uniform(-1.0, 3.0, n),
                           rng.normal(0.0, 1e-8, n // 4), [portable.SQRT_HALF - 1.0, portable.SQRT2 - 1.0,
                                                          np.nextafter(-1.0, 0.0), 1e-300, 1.7976931348623157e308]])


def _ulp_errors(got: np.ndarray, x: np.ndarray, exact) -> np.ndarray:
    """|got - exact| in units in the last place of the correctly rounded result."""
    errors = []
    for value, argument in zip(got.tolist(), x.tolist()):
        truth = exact(mpmath.mpf(argument))
        nearest = float(truth)
        unit = math.ulp(nearest) if nearest else 5e-324
        errors.append(float(abs(mpmath.mpf(value) - truth) / unit))
    return np.asarray(errors)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_within_one_ulp_of_the_exact_value(name: str) -> None:
    x = _sample(name)
    got = getattr(PORTABLE, name)(x)
    errors = _ulp_errors(got, x, EXACT[name])
    worst = int(np.argmax(errors))
    assert errors[worst] < 1.0, f"{name}({x[worst]!r}) = {got[worst]!r}: {errors[worst]:.3f} ulp"
    # and mostly correctly rounded, like libm: the errors are a rounding's, not an approximation's
    assert np.mean(errors <= 0.5) > 0.9, np.mean(errors <= 0.5)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_the_compiled_loops_give_the_bits_the_interpreter_gives(name: str) -> None:
    """The same source run by Python (IEEE 754 double arithmetic, nothing fused or reordered) and compiled."""
    x = _sample(name, n=1500)
    interpreted = np.empty_like(x)
    if name == "exp":
        portable.exp_loop(x, interpreted)
    else:
        portable.logarithm_loop(x, interpreted, name == "log1p")
    compiled = getattr(PORTABLE, name)(x)
    assert np.array_equal(compiled.view(np.int64), interpreted.view(np.int64))


def test_published_values() -> None:
    """e, ln 2 and ln 10 (Abramowitz & Stegun, Table 4.1 / 1.1), correctly rounded or within 1 ulp."""
    e = mpmath.mpf("2.718281828459045235360287471352662497757")
    assert abs(mpmath.mpf(PORTABLE.exp(1.0)) - e) < math.ulp(math.e)
    assert PORTABLE.log(2.0) == 0.6931471805599453 == math.log(2.0)             # LN2_HI + LN2_LO, rounded
    assert abs(mpmath.mpf(PORTABLE.log(10.0)) - mpmath.mpf("2.302585092994045684017991454684364")) < \
        math.ulp(2.302585092994046)
    assert PORTABLE.exp(0.0) == 1.0 and PORTABLE.log(1.0) == 0.0 and PORTABLE.log1p(1.0) == math.log(2.0)
    assert [PORTABLE.exp(float(k) * math.log(2)) for k in (0,)] == [1.0]
    assert PORTABLE.log(8.0) == 3 * portable.LN2_HI + 3 * portable.LN2_LO


def test_the_constants_are_what_they_claim() -> None:
    ln2 = mpmath.log(2)
    hi = mpmath.mpf(portable.LN2_HI)
    assert hi * 2**42 == mpmath.floor(hi * 2**42)                                # 42 significant bits
    assert abs(hi + mpmath.mpf(portable.LN2_LO) - ln2) < mpmath.mpf(2) ** -100
    assert portable.INV_LN2 == float(1 / ln2)
    assert portable.SQRT2 == float(mpmath.sqrt(2)) and portable.SQRT_HALF == float(mpmath.sqrt(2) / 2)
    for n, coefficient in enumerate(portable.EXP_SERIES, start=1):               # r coth(r/2) = 2 + sum ...
        exact = 2 * mpmath.bernoulli(2 * n) / mpmath.factorial(2 * n)
        assert coefficient == float(exact), (n, coefficient, exact)
    assert portable.LOG_SERIES == tuple(2.0 / (2 * k + 1) for k in range(1, 12))
    overflow = mpmath.mpf(2) ** 1024 * (1 - mpmath.mpf(2) ** -54)                 # where rounding reaches inf
    assert mpmath.exp(portable.X_MAX) < overflow <= mpmath.exp(np.nextafter(portable.X_MAX, np.inf))
    assert mpmath.exp(portable.X_MIN) > mpmath.mpf(2) ** -1075 >= mpmath.exp(np.nextafter(portable.X_MIN, -np.inf))
    assert PORTABLE.exp(portable.X_MIN) == 5e-324 and PORTABLE.exp(np.nextafter(portable.X_MIN, -np.inf)) == 0.0


def test_ieee_edges_follow_numpy() -> None:
    special = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, -2.0, portable.X_MAX,
                        np.nextafter(portable.X_MAX, math.inf), portable.X_MIN, np.nextafter(portable.X_MIN, -math.inf),
                        5e-324, -5e-324])
    with np.errstate(all="ignore"):
        for name in EXACT:
            got = getattr(PORTABLE, name)(special)
            expected = getattr(np, name)(special)
            finite = np.isfinite(expected) & (expected != 0)
            assert np.array_equal(np.isnan(got), np.isnan(expected)), name
            same_edges = ~finite & ~np.isnan(expected)
            assert np.array_equal(got[same_edges].view(np.int64), expected[same_edges].view(np.int64)), (
                name, special[same_edges], got[same_edges], expected[same_edges])
    assert math.copysign(1.0, PORTABLE.log1p(-0.0)) == -1.0 and PORTABLE.exp(-math.inf) == 0.0
    assert PORTABLE.exp(-730.0) == pytest.approx(math.exp(-730.0), rel=1e-6)      # a subnormal result


def test_arrays_scalars_and_out_like_the_ufuncs() -> None:
    x = np.random.default_rng(5).normal(0.0, 3.0, (3, 7))
    for name in EXACT:
        f = getattr(PORTABLE, name)
        argument = np.abs(x) if name != "exp" else x
        whole = f(argument)
        assert whole.shape == x.shape
        assert all(f(float(v)) == w for v, w in zip(argument.ravel().tolist(), whole.ravel().tolist()))
        assert isinstance(f(np.float64(0.5)), float)
        target = np.empty((7, 3)).T                                              # not C-contiguous
        assert f(argument, out=target) is target and np.array_equal(target, whole)
        assert np.array_equal(f(argument[:, ::2]), whole[:, ::2])
    in_place = np.abs(x.copy())
    expected = PORTABLE.log(in_place)
    assert PORTABLE.log(in_place, out=in_place) is in_place and np.array_equal(in_place, expected)


def test_logaddexp_is_accurate_broadcasts_and_handles_the_edges() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.normal(0.0, 30.0, (40, 1)), rng.normal(0.0, 30.0, (1, 50))
    got = PORTABLE.logaddexp(a, b)
    exact = np.array([[float(mpmath.log(mpmath.exp(p) + mpmath.exp(q))) for q in b[0]] for p in a[:, 0]])
    large = exact >= 1.0                                  # the larger argument dominates: 2 ulp of the result
    assert large.sum() > 500 and np.all(np.abs(got - exact)[large] <= 2 * np.spacing(exact[large]))
    assert np.all(np.abs(got - exact) <= 2 * np.spacing(np.maximum(np.maximum(np.abs(a), np.abs(b)), math.log(2))))
    assert PORTABLE.logaddexp(1.0, 1.0) == 1.0 + math.log(2.0)
    assert PORTABLE.logaddexp(math.inf, math.inf) == math.inf and PORTABLE.logaddexp(-math.inf, -math.inf) == -math.inf
    assert PORTABLE.logaddexp(math.inf, -math.inf) == math.inf and math.isnan(PORTABLE.logaddexp(math.nan, 0.0))
    out = np.empty((40, 50))
    assert PORTABLE.logaddexp(a, b, out=out) is out and np.array_equal(out, got)


def test_the_sym_kl_of_3_2_0s_scorers_uses_the_portable_functions() -> None:
    """logprob_tables given PORTABLE (as sequential.diff 3.2.0 gives it) re-normalises and exponentiates with it;
    without it (before 3.2.0) it keeps scipy's and numpy's, within float rounding of each other."""
    rng = np.random.default_rng(3)
    logits = rng.normal(0.0, 2.0, (2, 12, 5))
    tables = [table_from_columns(name, {"prompt_id": np.repeat(np.arange(4), 3), "position": np.tile(np.arange(3), 4),
                                        **{f"logp_{v}": logits[i, :, v] for v in range(5)}})
              for i, name in enumerate(("reference", "candidate"))]
    new = LogprobTablesScorer(metric="sym_kl", elementary=PORTABLE).score_batch(*tables, ["0", "1", "2", "3"], 3)
    old = LogprobTablesScorer(metric="sym_kl").score_batch(*tables, ["0", "1", "2", "3"], 3)
    log_p, log_q = (log_normalised(logits[i], PORTABLE.exp, PORTABLE.log) for i in (0, 1))
    by_hand = sym_kl_positions(log_p, log_q, exp=PORTABLE.exp).reshape(4, 3).mean(axis=1)
    assert np.array_equal(new, by_hand) and np.allclose(new, old, rtol=1e-12, atol=0)
    assert np.allclose(np.exp(log_p).sum(axis=1), 1.0, rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_monotone_on_adjacent_arguments(name: str) -> None:
    """x < y gives f(x) <= f(y) for 10^6 seeded pairs of adjacent doubles (sym_kl's terms (p - q)(ln p - ln q) are
    >= 0 only with a monotone exp; a correctly rounded function is monotone, one within 1 ulp need not be)."""
    rng = np.random.default_rng({"exp": 21, "log": 22, "log1p": 23}[name])
    low, high = {"exp": (-40.0, 5.0), "log": (1e-6, 10.0), "log1p": (-0.99, 3.0)}[name]
    x = np.concatenate([rng.uniform(low, high, 500_000), rng.uniform(-1.0, 1.0, 500_000) if name != "log"
                        else rng.uniform(0.5, 2.0, 500_000)])
    f = getattr(PORTABLE, name)
    assert np.all(f(np.nextafter(x, np.inf)) >= f(x))
