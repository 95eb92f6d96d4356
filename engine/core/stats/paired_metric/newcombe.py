"""Newcombe's (1998) hybrid score interval for the paired difference Δ = p_subject − p_baseline (method 10).

Newcombe, R. G. (1998). Improved confidence intervals for the difference between binomial proportions
based on paired data. Statistics in Medicine 17, 2635–2650, method 10. With p1 = p_subject, p2 = p_baseline
and their Wilson (1927) score intervals [l1, u1], [l2, u2] at the same level,

    low  = Δ̂ − sqrt( (p1 − l1)² − 2φ (p1 − l1)(u2 − p2) + (u2 − p2)² )
    high = Δ̂ + sqrt( (u1 − p1)² − 2φ (u1 − p1)(p2 − l2) + (p2 − l2)² )

where φ estimates the correlation of the two outcomes from the margins e = n11 + n10, f = n01 + n00,
g = n11 + n01, h = n10 + n00 and A = n11 n00 − n10 n01, corrected towards 0 as Newcombe specifies:

    φ = (A − n/2) / sqrt(efgh)   if A > n/2,
    φ = 0                        if 0 ≤ A ≤ n/2,
    φ = A / sqrt(efgh)           if A < 0,
    φ = 0                        if any of e, f, g, h is 0 (the zero denominator).

The Wilson interval for x of n at z = z_{1−α/2}: (x + z²/2 ± z sqrt(x (n − x)/n + z²/4)) / (n + z²), with
its bound exactly 0 at x = 0 and 1 at x = n. The result lies in [−1, 1] without clipping (|φ| ≤ 1).
"""

from __future__ import annotations

import numpy as np

from . import _shared
from .project_kernels import special
from .table import CountTable
from .tango import DifferenceInterval

__all__ = ["newcombe_interval", "newcombe_phi", "wilson_interval"]


def wilson_interval(successes: np.ndarray, n: np.ndarray,
                    confidence_level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's (1927) score interval (low, high) for a proportion x / n, elementwise (module docstring)."""
    z = float(special.ndtri(0.5 + _shared.open_unit("confidence_level", confidence_level) / 2.0))
    return _wilson(np.asarray(successes, dtype=np.float64), np.asarray(n, dtype=np.float64), z)


def newcombe_phi(table: CountTable) -> np.ndarray:
    """Newcombe's corrected correlation estimate φ (module docstring), elementwise."""
    n11, n10, n01, n00 = (np.asarray(x, dtype=np.float64) for x in (table.n11, table.n10, table.n01, table.n00))
    n = n11 + n10 + n01 + n00
    margins = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    a = n11 * n00 - n10 * n01
    numerator = np.where(a > n / 2.0, a - n / 2.0, np.minimum(a, 0.0))
    root = np.sqrt(margins)
    return np.where(margins > 0.0, numerator / np.where(margins > 0.0, root, 1.0), 0.0)


def newcombe_interval(table: CountTable, confidence_level: float = 0.95) -> DifferenceInterval:
    """Newcombe's (1998) method-10 hybrid score interval for Δ (module docstring), elementwise."""
    level = _shared.open_unit("confidence_level", confidence_level)
    z = float(special.ndtri(0.5 + level / 2.0))
    n = np.asarray(table.n, dtype=np.float64)
    x1 = np.asarray(table.n11 + table.n10, dtype=np.float64)
    x2 = np.asarray(table.n11 + table.n01, dtype=np.float64)
    p1, p2 = x1 / n, x2 / n
    l1, u1 = _wilson(x1, n, z)
    l2, u2 = _wilson(x2, n, z)
    phi = newcombe_phi(table)
    estimate = p1 - p2
    low = estimate - _combined(p1 - l1, u2 - p2, phi)
    high = estimate + _combined(u1 - p1, p2 - l2, phi)
    return DifferenceInterval(_shared.scalar_or_array(estimate), _shared.scalar_or_array(low),
                              _shared.scalar_or_array(high), level, "newcombe_hybrid_score")


def _combined(first: np.ndarray, second: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """sqrt(x² − 2φxy + y²), clipped at 0 against rounding (it is ≥ (x − y)² ≥ 0 exactly)."""
    return np.sqrt(np.maximum(first * first - 2.0 * phi * first * second + second * second, 0.0))


def _wilson(x: np.ndarray, n: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    z2 = z * z
    centre = (x + z2 / 2.0) / (n + z2)
    half = z * np.sqrt(x * (n - x) / n + z2 / 4.0) / (n + z2)
    return np.where(x == 0, 0.0, centre - half), np.where(x == n, 1.0, centre + half)
