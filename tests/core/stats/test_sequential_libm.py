"""The elementary functions of sequential.diff 1.1.0 (``certa.engine.core.stats.kernels.libm.LIBM``): libm's bits, numpy's edges.

``LIBM.exp``/``log``/``log1p`` must equal Python's ``math.exp``/``math.log``/``math.log1p`` (the C library)
element by element, bit for bit, on arrays and scalars; follow IEEE 754/numpy off the real domain instead of
raising; honour ``out=`` like the ufuncs; and ``logaddexp`` must be accurate against mpmath. The stage
registers 1.0.0 on numpy's ufuncs and 1.1.0 on LIBM, and a thread running one version never sees the other's.
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import mpmath
import numpy as np
import pytest

from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.sequential_diff import KERNELS, analyse_scores
from certa.engine.core.stats.kernels import libm
from certa.engine.core.stats.confseq.methods import CSSettings, confidence_sequence, null_p_value
from certa.engine.core.stats.kernels.libm import LIBM, NUMPY_UFUNCS, PORTABLE

UNARY = {"exp": math.exp, "log": math.log, "log1p": math.log1p}


def _bits(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.int64)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, except that a NaN's sign and payload are not compared (canonical JSON writes "NaN")."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    nan = np.isnan(a)
    return a.shape == b.shape and np.array_equal(nan, np.isnan(b)) and np.array_equal(_bits(a[~nan]), _bits(b[~nan]))


def _sample(name: str, n: int = 60_000) -> np.ndarray:
    """Seeded arguments over the whole real domain of ``name`` (tiny, subnormal, huge and ordinary)."""
    rng = np.random.default_rng({"exp": 1, "log": 2, "log1p": 3}[name])
    if name == "exp":
        return np.concatenate([rng.uniform(-745.0, 709.7, n), rng.normal(0.0, 1.0, n), rng.normal(0.0, 1e-9, n),
                               np.array([-745.1, -708.4, 709.78, 1e-300, -1e-300, 5e-324])])
    magnitudes = np.exp2(rng.uniform(-1074.0, 1023.0, n))
    if name == "log":
        return np.concatenate([magnitudes, rng.uniform(0.5, 2.0, n), 1.0 + rng.normal(0.0, 1e-12, n),
                               np.array([5e-324, 2.2250738585072014e-308, 1.7976931348623157e308])])
    return np.concatenate([magnitudes, -np.exp2(rng.uniform(-1074.0, -1e-9, n)), rng.uniform(-1.0, 3.0, n),
                           np.array([np.nextafter(-1.0, 0.0), 1e-300, -1e-300, 1.7976931348623157e308])])


# ------------------------------------------------------------------------------------------- bit-exact


@pytest.mark.parametrize("name", sorted(UNARY))
def test_arrays_and_scalars_equal_the_c_librarys_functions_bit_for_bit(name: str) -> None:
    x = _sample(name)
    x = x[(x > -1.0) if name == "log1p" else (x > 0.0) if name == "log" else (x < 709.78)]   # math's domain
    expected = np.array([UNARY[name](v) for v in x.tolist()])
    got = getattr(LIBM, name)(x)
    assert got.dtype == np.float64 and got.shape == x.shape
    assert np.array_equal(_bits(got), _bits(expected))
    for v in x[:: 997].tolist():                                  # the scalar path: math.* itself
        value = getattr(LIBM, name)(v)
        assert type(value) is float and _bits(value) == _bits(UNARY[name](v))
    # shapes and strides do not matter
    grid = x[: 40_000].reshape(200, 200)
    assert np.array_equal(_bits(getattr(LIBM, name)(grid)), _bits(expected[: 40_000].reshape(200, 200)))
    assert np.array_equal(_bits(getattr(LIBM, name)(grid[:, ::3])), _bits(expected[: 40_000].reshape(200, 200)[:, ::3]))


def test_without_the_compiled_loops_the_same_bits_come_from_math(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where Numba would vectorise with Intel SVML (not libm), the arrays go through math.* per element."""
    x = np.concatenate([_sample("log1p", 2000), [-1.0, -2.0, 0.0, -0.0, np.inf, np.nan]])
    y = x[::-1].copy()
    compiled = [LIBM.exp(x), LIBM.log(x), LIBM.log1p(x), LIBM.logaddexp(x, y)]
    monkeypatch.setattr(libm, "_svml", True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fallback = [LIBM.exp(x), LIBM.log(x), LIBM.log1p(x), LIBM.logaddexp(x, y)]
    for a, b in zip(compiled, fallback):
        assert _same(a, b)


# --------------------------------------------------------------------------------------------- edges


NAN = float("nan")
INF = float("inf")
EDGES = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (710.0, INF), (1e308, INF),
            (-746.0, 0.0), (-1e308, 0.0), (5e-324, 1.0), (-744.0, math.exp(-744.0))],
    "log": [(0.0, -INF), (-0.0, -INF), (1.0, 0.0), (INF, INF), (-INF, NAN), (-1.0, NAN), (NAN, NAN),
            (5e-324, math.log(5e-324)), (1.7976931348623157e308, math.log(1.7976931348623157e308))],
    "log1p": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -INF), (-2.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN),
              (1e-300, 1e-300), (-1e-300, -1e-300), (5e-324, 5e-324), (1e308, math.log(1e308)),
              (-0.9999999999999999, math.log1p(-0.9999999999999999))],
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_special_values_follow_ieee_and_numpy_without_raising_or_warning(name: str) -> None:
    args = np.array([a for a, _ in EDGES[name]])
    expected = np.array([e for _, e in EDGES[name]])
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        got = getattr(LIBM, name)(args)
        scalars = np.array([getattr(LIBM, name)(float(a)) for a in args])
    for values in (got, scalars):
        assert _same(values, expected), (name, args, values)                     # log1p(-0) = -0, exp(-inf) = +0
    with np.errstate(all="ignore"):
        assert np.array_equal(getattr(np, name)(args), expected, equal_nan=True)  # the same edges as numpy


def test_logaddexp_edges() -> None:
    cases = [((INF, INF), INF), ((-INF, -INF), -INF), ((INF, -INF), INF), ((-INF, INF), INF), ((NAN, 1.0), NAN),
             ((1.0, NAN), NAN), ((-INF, 3.0), 3.0), ((3.0, -INF), 3.0), ((0.0, 0.0), math.log(2.0)),
             ((-0.0, 0.0), math.log(2.0)), ((1000.0, 1000.0), 1000.0 + math.log(2.0)), ((1000.0, 0.0), 1000.0),
             ((-1000.0, -1000.0), -1000.0 + math.log(2.0)), ((1e308, 1e308), 1e308)]
    x, y = (np.array(v) for v in zip(*(pair for pair, _ in cases)))
    expected = np.array([e for _, e in cases])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _same(LIBM.logaddexp(x, y), expected)
        assert _same([LIBM.logaddexp(float(a), float(b)) for a, b in zip(x, y)], expected)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(np.logaddexp(x, y), expected, equal_nan=True)


def test_logaddexp_is_within_2_ulp_of_mpmath_and_symmetric() -> None:
    """Seeded pairs: within 2 ulp of the exact result wherever the sum does not cancel (max(x, y) >= 0, or
    the result at most max(x, y) / 2), and everywhere within 2 ulp of max(|x|, |y|, ln 2) in absolute terms
    (the result near 0 after cancellation inherits the absolute error of log1p's term: numpy's formula too)."""
    rng = np.random.default_rng(2024)
    n = 1500
    x = np.concatenate([rng.uniform(-40.0, 40.0, n), rng.normal(0.0, 1.0, n), -np.abs(rng.normal(0.0, 1.0, n)),
                        rng.uniform(-700.0, 700.0, n), rng.normal(0.0, 1e-6, n)])
    y = np.concatenate([rng.uniform(-40.0, 40.0, n), rng.normal(0.0, 1.0, n), -np.abs(rng.normal(0.0, 1.0, n)),
                        x[3 * n: 4 * n] + rng.normal(0.0, 3.0, n), rng.normal(0.0, 1e-6, n)])
    got = LIBM.logaddexp(x, y)
    assert np.array_equal(_bits(got), _bits(LIBM.logaddexp(y, x)))
    mpmath.mp.prec = 160
    top = np.maximum(x, y)
    for a, b, value, high in zip(x.tolist(), y.tolist(), got.tolist(), top.tolist()):
        exact = mpmath.log(mpmath.exp(mpmath.mpf(a)) + mpmath.exp(mpmath.mpf(b)))
        error = abs(mpmath.mpf(value) - exact)
        assert error <= 2 * math.ulp(max(abs(a), abs(b), math.log(2.0))), (a, b, value)
        if high >= 0 or value <= high / 2:
            assert error <= 2 * math.ulp(float(exact)), (a, b, value, float(exact))


# ----------------------------------------------------------------------------------------------- out=


@pytest.mark.parametrize("name", sorted(UNARY))
def test_out_is_written_in_place_like_the_ufuncs(name: str) -> None:
    f = getattr(LIBM, name)
    x = np.random.default_rng(5).uniform(0.1, 3.0, (40, 30))
    expected = f(x)
    out = np.full_like(x, -7.0)
    assert f(x, out=out) is out and np.array_equal(out, expected)
    inplace = x.copy()
    assert f(inplace, out=inplace) is inplace and np.array_equal(inplace, expected)
    strided = np.zeros((40, 60))
    view = strided[:, ::2]                                             # a non-contiguous out
    assert f(x, out=view) is view and np.array_equal(strided[:, ::2], expected) and not strided[:, 1::2].any()
    assert f(x, (out,)) is out                                         # the ufuncs' tuple form
    broadcast = np.empty((3, 30))
    f(x[0], out=broadcast)                                             # the argument broadcasts to out
    assert np.array_equal(broadcast, np.broadcast_to(expected[0], (3, 30)))
    shifted = np.concatenate([[1.0], x.ravel()])                       # out overlaps the argument, shifted by one
    f(shifted[:-1], out=shifted[1:])
    assert np.array_equal(shifted[1:], f(np.concatenate([[1.0], x.ravel()[:-1]])))
    with pytest.raises(TypeError, match="float64"):
        f(x, out=np.empty(x.shape, dtype=np.float32))


def test_logaddexp_out_and_broadcasting() -> None:
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(50, 20)), rng.normal(size=(50, 20))
    expected = LIBM.logaddexp(a, b)
    target = a.copy()
    assert LIBM.logaddexp(target, b, out=target) is target and np.array_equal(target, expected)
    row = LIBM.logaddexp(a, b[0])
    assert np.array_equal(row, np.array([[LIBM.logaddexp(p, q) for p, q in zip(r, b[0])] for r in a]))
    assert LIBM.logaddexp(np.float64(1.0), 2.0) == libm._logaddexp_scalar(1.0, 2.0)


# ---------------------------------------------------------------------------------------------- versions


def test_the_stage_registers_1_0_0_on_numpy_1_1_0_to_3_1_0_on_libm_and_3_2_0_on_portable_functions() -> None:
    assert [(k.version, k.elementary, k.scorer_elementary) for k in KERNELS] == [
        ("1.0.0", NUMPY_UFUNCS, None), ("1.1.0", LIBM, None), ("2.0.0", LIBM, None), ("3.0.0", LIBM, None),
        ("3.1.0", LIBM, None), ("3.2.0", PORTABLE, PORTABLE)]
    assert NUMPY_UFUNCS.exp is np.exp and NUMPY_UFUNCS.log is np.log and NUMPY_UFUNCS.log1p is np.log1p
    assert NUMPY_UFUNCS.logaddexp is np.logaddexp
    stages = REGISTRY.versions("sequential.diff")
    assert [s.version for s in stages] == ["1.0.0", "1.1.0", "2.0.0", "3.0.0", "3.1.0", "3.2.0"]
    assert REGISTRY["sequential.diff"].version == "3.2.0"
    assert "basic operations" in stages[-1].changes
    assert stages[0].changes == "first version (certa 0.1.0)"
    assert "libm" in stages[1].changes and "SIMD" in stages[1].changes


def _knobs(**overrides) -> dict:
    return fill_defaults({"input": "scores", **overrides}, load_schema("stages/sequential.diff.schema.json"))


@pytest.mark.parametrize("method", ["betting", "eb_cs", "stitched", "asymptotic_cs", "eb_fixed_n", "t_fixed_n"])
def test_every_method_differs_between_the_versions_only_in_the_last_bits(method: str) -> None:
    x = np.random.default_rng(7).normal(0.03, 0.05, 3000)
    args = (x, method, 0.05, -0.2, 0.3, CSSettings(grid_size=200, t_opt=3000.0))
    old, new = (confidence_sequence(*args, elementary=e) for e in (NUMPY_UFUNCS, LIBM))
    p_old, p_new = (null_p_value(*args[:2], 0.0, *args[2:], start=10, elementary=e) for e in (NUMPY_UFUNCS, LIBM))
    for a, b in ((old.lower, new.lower), (old.upper, new.upper), (p_old.p, p_new.p)):
        assert np.allclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True)
    assert old.parameters == new.parameters and old.validity == new.validity and p_old.kind == p_new.kind


def test_threads_running_both_versions_each_compute_their_own_numbers() -> None:
    """No global state: the functions travel with the call, so concurrent versions never mix."""
    x = np.random.default_rng(8).normal(0.04, 0.05, (4, 2000))
    k = _knobs(method="betting", n_max=2000, range=[-0.2, 0.3], alpha=0.01)
    serial = {e.name: analyse_scores(x, k, (-0.2, 0.3), elementary=e) for e in (NUMPY_UFUNCS, LIBM)}
    jobs = [NUMPY_UFUNCS, LIBM] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda e: (e.name, analyse_scores(x, k, (-0.2, 0.3), elementary=e)), jobs))
    for name, result in results:
        reference = serial[name]
        assert np.array_equal(result.p_value.log_evalue, reference.p_value.log_evalue)
        assert np.array_equal(result.cs.lower, reference.cs.lower)
        assert np.array_equal(result.stop.index, reference.stop.index)
