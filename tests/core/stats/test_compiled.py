"""Compiled kernels (engine.core.stats.kernels.compiled): compiled on first call, and still compiled without a cache."""

from __future__ import annotations

import sys

import numba
import numpy as np
import pytest

from engine.core.stats.kernels.compiled import kernel


def _weighted_total(values, weights):
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i] * weights[i]
    return total


def test_a_kernel_compiles_on_first_call_and_keeps_the_python_function():
    compiled = kernel(_weighted_total)
    assert compiled.__wrapped__ is _weighted_total and compiled.__name__ == "_weighted_total"
    values, weights = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 2.0])
    assert compiled(values, weights) == _weighted_total(values, weights) == 7.0


def test_without_a_writable_cache_the_kernel_is_compiled_uncached(monkeypatch: pytest.MonkeyPatch):
    calls = []
    real_njit = numba.njit

    def njit(**options):
        calls.append(options["cache"])
        if options["cache"]:
            raise RuntimeError("cannot cache function: no locator available")
        return real_njit(**options)

    monkeypatch.setattr(sys.modules["numba"], "njit", njit)
    compiled = kernel(_weighted_total)
    assert compiled(np.array([2.0]), np.array([3.0])) == 6.0
    assert calls == [True, False]
