"""The elementary functions a stage version computes with: numpy's ufuncs, libm in compiled loops, or portable
loops from IEEE 754 basic operations alone (``PORTABLE``).

numpy evaluates ``exp``, ``log`` and ``log1p`` of float64 arrays with kernels it picks by CPU at run time
(AVX-512F variants on a machine that has it, libm's loops otherwise), and these round differently in the
last bit for a small share of arguments. A number computed from them therefore depends on the machine's
optional SIMD features (measured in ``bench/simd.py``). This module makes that choice explicit and
per-version: an ``ElementaryFunctions`` record names the four functions a stage version uses, and every
kernel that needs them takes the record as a keyword argument (no global state, so threads running
different versions never see each other's choice).

``NUMPY_UFUNCS``
    ``np.exp``, ``np.log``, ``np.log1p``, ``np.logaddexp``: what ``sequential.diff`` 1.0.0 computed with
    (frozen; its numbers depend on numpy's run-time SIMD choice).

``LIBM``
    Every element through the C library's scalar ``exp``/``log``/``log1p``, the functions Python's ``math``
    module calls: compiled Numba loops for arrays (scalar calls, no vectorisation, no fast-math) and
    ``math.exp``/``math.log``/``math.log1p`` for scalars, so an array element and the same scalar give the
    same bits. Results do not depend on numpy's SIMD choice nor on the Numba target CPU. Off the real
    domain they follow IEEE 754 and numpy rather than raising or warning: exp overflows to inf,
    log(±0) = -inf, log(x < 0) = nan, log1p(-1) = -inf, log1p(x < -1) = nan, log1p(-0) = -0, and nan
    propagates (a NaN's sign is the C library's on arrays and positive on scalars).

    ``logaddexp(x, y) = ln(e^x + e^y)`` is written from libm's exp and log1p the way numpy writes its own
    (``npy_logaddexp``), which never overflows: x + ln 2 when x == y (this also covers two infinities of
    the same sign); otherwise, with d = x − y, x + log1p(exp(−d)) if d > 0 and y + log1p(exp(d)) if
    d <= 0, so exp's argument is never positive; nan if either argument is nan. It is within 2 ulp of the
    exact result wherever the sum does not cancel (max(x, y) >= 0, or the result <= max(x, y) / 2); where
    it does (both arguments negative, the result near 0) the absolute error stays within 2 ulp of
    max(|x|, |y|, ln 2), as with numpy's formula (pinned against mpmath in ``tests/core/stats/test_sequential_libm.py``).

``PORTABLE``
    ``certa.engine.core.stats.kernels.portable``'s loops (exp, and ln / ln(1 + x) in one loop), within 1 ulp, the
    same bits on every IEEE 754 machine whatever its CPU features or C library; for scalars the same loop on one
    element; ``logaddexp`` by the formula above from them, in numpy array operations (basic operations only).

The limit of ``LIBM``: libm itself is not correctly rounded, so another C library, or glibc's variants for
another CPU family (an FMA build and an SSE2 build of ``exp``), may still round a result differently in the last
bit; ``PORTABLE`` has no such limit. The certificate's ``issued.platform``
records the machine. Numba compiles ``math.exp``/``math.log`` to LLVM intrinsics that call libm; with
Intel's SVML installed (package ``icc_rt``) Numba lets LLVM vectorise such loops into SVML calls, which
would not be libm: ``compiled_with_svml()`` tells, and then the arrays go through ``math.*`` one element
at a time instead (the same bits, about 10 times slower; ``NUMBA_DISABLE_INTEL_SVML=1`` avoids it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.core.stats.kernels.compiled import kernel
from certa.engine.core.stats.kernels.portable import exp_loop, logarithm_loop

__all__ = ["ElementaryFunctions", "NUMPY_UFUNCS", "LIBM", "PORTABLE", "exp", "log", "log1p", "logaddexp",
           "compiled_with_svml"]

_LN2 = 0.6931471805599453            # ln 2 rounded to float64 (numpy's NPY_LOGE2)


@dataclass(frozen=True)
class ElementaryFunctions:
    """The transcendental functions one stage version computes with (each called like the numpy ufunc:
    ``f(x)``, ``f(x, out=array)``; ``logaddexp(x, y, out=...)``)."""

    name: str
    exp: Callable[..., Any]
    log: Callable[..., Any]
    log1p: Callable[..., Any]
    logaddexp: Callable[..., Any]

    def __repr__(self) -> str:
        return f"ElementaryFunctions({self.name})"


# --------------------------------------------------------------------------- scalars: math.*


def _exp_scalar(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log_scalar(x: float) -> float:
    if x > 0.0:
        return math.log(x)
    if x == 0.0:
        return -math.inf
    return math.nan


def _log1p_scalar(x: float) -> float:
    if x > -1.0:
        return math.log1p(x)
    if x == -1.0:
        return -math.inf
    return math.nan


def _logaddexp_scalar(x: float, y: float) -> float:
    if x == y:
        return x + _LN2
    d = x - y
    if d > 0.0:
        return x + math.log1p(math.exp(-d))
    if d <= 0.0:
        return y + math.log1p(math.exp(d))
    return d                                                 # nan


# --------------------------------------------------------------------------- arrays: compiled loops over libm


def _exp_loop(x, out):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        out[i] = math.exp(x[i])


def _log_loop(x, out):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        out[i] = math.log(x[i])


def _log1p_loop(x, out):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        out[i] = math.log1p(x[i])


def _logaddexp_loop(a, b, out):  # pragma: no cover - compiled
    for i in range(a.shape[0]):
        x = a[i]
        y = b[i]
        if x == y:
            out[i] = x + _LN2
        else:
            d = x - y
            if d > 0.0:
                out[i] = x + math.log1p(math.exp(-d))
            elif d <= 0.0:
                out[i] = y + math.log1p(math.exp(d))
            else:
                out[i] = d


_EXP, _LOG, _LOG1P, _LOGADDEXP = (kernel(f) for f in (_exp_loop, _log_loop, _log1p_loop, _logaddexp_loop))
_PORTABLE_EXP, _PORTABLE_LOGARITHM = kernel(exp_loop), kernel(logarithm_loop)


def compiled_with_svml() -> bool:
    """Whether Numba would let LLVM vectorise the loops into Intel SVML calls (then they are not libm)."""
    import numba.core.config

    return bool(numba.core.config.USING_SVML)  # type: ignore[attr-defined]  # set at import from the environment


_SCALAR_OF: dict[Any, Callable[..., float]] = {_EXP: _exp_scalar, _LOG: _log_scalar, _LOG1P: _log1p_scalar,
                                               _LOGADDEXP: _logaddexp_scalar}
_svml: bool | None = None


def _fill(loop: Any, result: np.ndarray, *args: np.ndarray, extra: tuple[Any, ...] = ()) -> np.ndarray:
    """``loop`` over the flattened C-contiguous ``args`` (float64, shaped like ``result``) into ``result``
    (``loop(*args, out, *extra)``)."""
    global _svml
    target = result if result.flags.c_contiguous else np.empty(result.shape)
    # an argument that is ``target`` itself is read in place (element i before out[i] is written); one that
    # only overlaps it is copied first
    flat = [np.ascontiguousarray(a, dtype=np.float64).reshape(-1) for a in args]
    flat = [a.copy() if np.may_share_memory(a, target) and a.ctypes.data != target.ctypes.data else a for a in flat]
    out = target.reshape(-1)                                  # a view: C-contiguous
    n = out.size
    if _svml is None:
        _svml = compiled_with_svml()
    if _svml and loop in _SCALAR_OF:                          # the loops would not call libm: math.* per element
        out[...] = np.fromiter(map(_SCALAR_OF[loop], *(a.tolist() for a in flat)), dtype=np.float64, count=n)
    else:
        loop(*flat, out, *extra)
    if target is not result:
        result[...] = target
    return result


def _output(out: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if out is None:
        return np.empty(shape)
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if not isinstance(out, np.ndarray) or out.dtype != np.float64:
        raise TypeError("out must be a float64 numpy array")
    return out


def _unary(loop: Any, scalar: Callable[[float], float], x: Any, out: np.ndarray | None) -> Any:
    if out is None and np.ndim(x) == 0:
        return scalar(float(x))
    x = np.asarray(x, dtype=np.float64)
    result = _output(out, x.shape)
    return _fill(loop, result, np.broadcast_to(x, result.shape))


def exp(x: Any, out: np.ndarray | None = None) -> Any:
    """e^x by libm, elementwise (a float for a scalar argument; ``out`` like the ufunc's)."""
    return _unary(_EXP, _exp_scalar, x, out)


def log(x: Any, out: np.ndarray | None = None) -> Any:
    """ln x by libm, elementwise (-inf at ±0, nan below 0)."""
    return _unary(_LOG, _log_scalar, x, out)


def log1p(x: Any, out: np.ndarray | None = None) -> Any:
    """ln(1 + x) by libm, elementwise (-inf at -1, nan below -1; -0 stays -0)."""
    return _unary(_LOG1P, _log1p_scalar, x, out)


def logaddexp(x: Any, y: Any, out: np.ndarray | None = None) -> Any:
    """ln(e^x + e^y) from libm's exp and log1p (module docstring), elementwise with broadcasting."""
    if out is None and np.ndim(x) == 0 and np.ndim(y) == 0:
        return _logaddexp_scalar(float(x), float(y))
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    result = _output(out, np.broadcast_shapes(x.shape, y.shape))
    return _fill(_LOGADDEXP, result, np.broadcast_to(x, result.shape), np.broadcast_to(y, result.shape))


NUMPY_UFUNCS = ElementaryFunctions(name="numpy ufuncs", exp=np.exp, log=np.log, log1p=np.log1p,
                                   logaddexp=np.logaddexp)
"""numpy's ufuncs (CPU-dispatched at run time): ``sequential.diff`` 1.0.0."""

LIBM = ElementaryFunctions(name="libm", exp=exp, log=log, log1p=log1p, logaddexp=logaddexp)
"""The C library's scalar functions, in compiled loops for arrays: ``sequential.diff`` 1.1.0 to 3.1.0."""


# --------------------------------------------------------------------------- portable: basic operations only


def _portable(loop: Any, x: Any, out: np.ndarray | None, *extra: Any) -> Any:
    """``loop`` over ``x`` (any shape; a float for a scalar and no ``out``)."""
    x = np.asarray(x, dtype=np.float64)
    result = _fill(loop, _output(out, x.shape), np.broadcast_to(x, x.shape if out is None else out.shape),
                   extra=extra)
    return float(result) if out is None and result.ndim == 0 else result


def portable_exp(x: Any, out: np.ndarray | None = None) -> Any:
    """e^x from basic operations (``certa.engine.core.stats.kernels.portable``), elementwise."""
    return _portable(_PORTABLE_EXP, x, out)


def portable_log(x: Any, out: np.ndarray | None = None) -> Any:
    """ln x from basic operations, elementwise (-inf at ±0, nan below 0)."""
    return _portable(_PORTABLE_LOGARITHM, x, out, False)


def portable_log1p(x: Any, out: np.ndarray | None = None) -> Any:
    """ln(1 + x) from basic operations, elementwise (-inf at -1, nan below -1; -0 stays -0)."""
    return _portable(_PORTABLE_LOGARITHM, x, out, True)


def portable_logaddexp(x: Any, y: Any, out: np.ndarray | None = None) -> Any:
    """ln(e^x + e^y) by the formula of ``logaddexp`` (module docstring) from ``portable_exp`` and
    ``portable_log1p``: max(x, y) + ln(1 + e^-|x - y|), x + ln 2 where x == y, nan where either is nan."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        d = x - y                                             # nan for a nan or for two equal infinities
        larger = np.where(d > 0.0, x, y)
        tail = portable_log1p(portable_exp(-np.abs(d)))
        combined = np.where(x == y, x + _LN2, larger + tail)
    if out is None:
        return float(combined) if combined.ndim == 0 else combined
    out[...] = combined
    return out


PORTABLE = ElementaryFunctions(name="portable", exp=portable_exp, log=portable_log, log1p=portable_log1p,
                               logaddexp=portable_logaddexp)
"""The functions of ``certa.engine.core.stats.kernels.portable``: the same bits on every IEEE 754 machine, whatever
its CPU features or C library (``sequential.diff`` 3.2.0 on)."""
