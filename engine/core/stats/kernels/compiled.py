"""Compiled inner loops (Numba), imported and compiled on first use.

A few kernels cannot reach their speed goals as numpy array expressions: numpy's generator costs about
3 ns per bounded random integer before any arithmetic, and a fused loop that draws, gathers and adds
costs less than that in total. Those kernels are written as plain loops over scalars and compiled with
Numba (``nopython``, ``nogil`` so that callers can run them on threads, no fast-math: floating-point
operations are evaluated in source order without reassociation or fused multiply-add contraction, so a
compiled kernel gives the same bits on every IEEE-754 machine for the same inputs).

``kernel`` defers ``import numba`` (about 0.2 s) and compilation to the first call, so commands that
never run such a kernel do not pay for it. Compiled code is cached on disk in a per-user folder
(``numba_cache_folder``), never next to the module: an installed certa writes nothing into site-packages, which
may be read-only, shared by users, or replaced by the next ``pip install``. Where that folder cannot be written,
kernels compile for the process alone (slower to start, the same bits).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["THREADS", "kernel", "numba_cache_folder", "on_chunks"]

THREADS = max(1, min(os.cpu_count() or 1, 8))
"""Default number of worker threads for compiled kernels (the CPU count, at most 8)."""

_T = TypeVar("_T")


def numba_cache_folder() -> str | None:
    """The folder compiled kernels are cached in, or ``None`` when it cannot be written (then nothing is cached).

    ``NUMBA_CACHE_DIR`` when set (Numba's own setting); else ``certa/numba`` under ``XDG_CACHE_HOME``, or under
    ``~/.cache`` (the XDG Base Directory Specification's default). Numba names a subfolder per source file
    (folder name and a hash of its full path), so several installs of certa share the folder without mixing.
    The folder is written to once here (a temporary file, removed) to know whether it can be.
    """
    folder = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "certa", "numba")
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return None
    return folder


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

                options: dict[str, Any] = {"nogil": True, "error_model": "numpy"}
                folder = numba_cache_folder()
                if folder is None:
                    self._compiled = numba.njit(cache=False, **options)(self._function)
                else:
                    # Numba picks the cache's location when the dispatcher is made: its configured folder if it
                    # can write there, else next to the source file, which is never wanted here (see above).
                    config: Any = numba.config  # its settings are set at import from the environment
                    configured = config.CACHE_DIR
                    config.CACHE_DIR = folder
                    try:
                        self._compiled = numba.njit(cache=True, **options)(self._function)
                    finally:
                        config.CACHE_DIR = configured
        return self._compiled

    def __call__(self, *args: Any) -> Any:
        compiled = self._compiled if self._compiled is not None else self._compile()
        return compiled(*args)


def kernel(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``function`` as a compiled kernel (compiled on first call; see module docstring).

    A kernel may call only numpy/math functions that Numba supports, not other kernels.
    """
    return _LazyKernel(function)



def on_chunks(work: Callable[[slice], _T], n: int, *, min_rows: int = 1, max_rows: int | None = None,
              threads: int | None = None, name: str = "certa-kernel") -> list[_T]:
    """``work(rows)`` for contiguous slices that cover rows 0..n−1 in order, one slice per thread.

    Up to ``threads`` (default ``THREADS``) slices of at least ``min_rows`` rows each (fewer when n is
    small), and more slices when one would exceed ``max_rows``. Compiled kernels release the GIL, so the
    slices run in parallel. Callers make the result independent of the slicing: each slice writes only its
    own rows of the outputs, or returns partial results that are combined exactly.
    """
    workers = max(1, THREADS if threads is None else threads)
    count = max(1, min(workers, n // max(1, min_rows)))
    if max_rows is not None:
        count = max(count, -(-n // max_rows))
    bounds = [n * i // count for i in range(count + 1)]
    chunks = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    if count == 1 or workers == 1:
        return [work(chunk) for chunk in chunks]
    with ThreadPoolExecutor(max_workers=min(count, workers), thread_name_prefix=name) as pool:
        return list(pool.map(work, chunks))
