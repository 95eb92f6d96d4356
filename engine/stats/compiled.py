"""Compiled inner loops (Numba), imported and compiled on first use.

A few kernels cannot reach their speed goals as numpy array expressions: numpy's generator costs about
3 ns per bounded random integer before any arithmetic, and a fused loop that draws, gathers and adds
costs less than that in total. Those kernels are written as plain loops over scalars and compiled with
Numba (``nopython``, ``nogil`` so that callers can run them on threads, no fast-math: floating-point
operations are evaluated in source order without reassociation or fused multiply-add contraction, so a
compiled kernel gives the same bits on every IEEE-754 machine for the same inputs).

``kernel`` defers ``import numba`` (about 0.2 s) and compilation to the first call, so commands that
never run such a kernel do not pay for it. Compiled code is cached on disk next to the module (or in
Numba's user cache directory when that is read-only).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["kernel"]


class _LazyKernel:
    """A Python function that is compiled by ``numba.njit`` on its first call."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function
        self._compiled: Callable[..., Any] | None = None
        self._lock = threading.Lock()
        self.__name__ = function.__name__
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def _compile(self) -> Callable[..., Any]:
        with self._lock:
            if self._compiled is None:
                import numba

                options = {"nogil": True, "error_model": "numpy"}
                try:
                    self._compiled = numba.njit(cache=True, **options)(self._function)
                except RuntimeError:  # no writable cache location (e.g. a read-only container): compile anyway
                    self._compiled = numba.njit(cache=False, **options)(self._function)
        return self._compiled

    def __call__(self, *args: Any) -> Any:
        compiled = self._compiled if self._compiled is not None else self._compile()
        return compiled(*args)


def kernel(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``function`` as a compiled kernel (compiled on first call; see module docstring).

    A kernel may call only numpy/math functions that Numba supports, not other kernels.
    """
    return _LazyKernel(function)

