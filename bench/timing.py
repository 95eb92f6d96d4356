"""Timing helpers shared by the bench scripts (run as ``python3 bench/NAME.py``: this folder is on sys.path)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_of(repeats: int, fn: Callable[[], T]) -> tuple[float, T]:
    """(the fastest of ``repeats`` wall-clock timings of ``fn()``, the last result)."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result  # type: ignore[return-value]
