"""Adjusted p-values across slices (categories) of one comparison, and the per-slice results that carry them.

With m p-values sorted p(1) ≤ … ≤ p(m) (along the last axis; leading axes are independent families):

``holm`` (Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scand. J. Statist. 6,
65–70): p̃(i) = max_{j ≤ i} min(1, (m − j + 1) p(j)). Rejecting every p̃ ≤ α controls the familywise error
rate at α under any dependence.

``benjamini_hochberg`` (Benjamini, Y. & Hochberg, Y. (1995). Controlling the false discovery rate. JRSS-B
57, 289–300): p̃(i) = min_{j ≥ i} min(1, m p(j) / j). Rejecting every p̃ ≤ α controls the false discovery
rate at m0 α / m ≤ α for independent (or positively regression dependent) p-values.

Ties keep their input order (a stable sort), which does not change the adjusted values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["ADJUSTMENTS", "SliceResult", "SliceResults", "adjust_p_values", "adjusted_slices",
           "benjamini_hochberg_adjust", "holm_adjust"]


def holm_adjust(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values along the last axis (module docstring)."""
    p, order = _sorted_iv(p_values)
    m = p.shape[-1]
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p), axis=-1)
    return _unsorted(adjusted, order)


def benjamini_hochberg_adjust(p_values: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values along the last axis (module docstring)."""
    p, order = _sorted_iv(p_values)
    m = p.shape[-1]
    scaled = np.minimum(1.0, p * (m / np.arange(1, m + 1)))  # m/k ≥ 1 exactly, so each scaled value ≥ its p
    adjusted = np.minimum.accumulate(scaled[..., ::-1], axis=-1)[..., ::-1]
    return _unsorted(adjusted, order)


ADJUSTMENTS = {"holm": holm_adjust, "benjamini_hochberg": benjamini_hochberg_adjust}


def adjust_p_values(p_values: np.ndarray, adjustment: str) -> np.ndarray:
    """``holm`` or ``benjamini_hochberg`` adjusted p-values along the last axis."""
    if adjustment not in ADJUSTMENTS:
        raise ValueError(f"'adjustment' must be one of {tuple(ADJUSTMENTS)} (got {adjustment!r})")
    return ADJUSTMENTS[adjustment](p_values)


@dataclass(frozen=True)
class SliceResult:
    """One slice: its estimate, two-sided interval [low, high], p-value and p-value adjusted across slices."""

    name: object
    estimate: float
    low: float
    high: float
    p_value: float
    adjusted_p_value: float


@dataclass(frozen=True)
class SliceResults:
    """Every slice of one comparison, adjusted together by ``adjustment``."""

    adjustment: str
    slices: tuple[SliceResult, ...]

    def rejected(self, alpha: float) -> tuple[object, ...]:
        """Names of the slices whose adjusted p-value is ≤ ``alpha``."""
        return tuple(s.name for s in self.slices if s.adjusted_p_value <= alpha)


def adjusted_slices(names: Sequence[object], estimates: np.ndarray | float, lows: np.ndarray | float,
                    highs: np.ndarray | float, p_values: np.ndarray | float, *,
                    adjustment: str = "holm") -> SliceResults:
    """Per-slice results with p-values adjusted across the slices by ``adjustment``."""
    columns = _adjusted_slices_iv(names, estimates, lows, highs, p_values)
    adjusted = adjust_p_values(columns[-1], adjustment)
    rows = zip(names, *(c.tolist() for c in columns), adjusted.tolist())
    return SliceResults(adjustment, tuple(SliceResult(*row) for row in rows))


def _sorted_iv(p_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError(f"'p_values' must have at least one p-value along the last axis (got shape {p.shape})")
    bad = ~((p >= 0.0) & (p <= 1.0))
    if bad.any():
        raise ValueError(f"'p_values' must lie in [0, 1] (got {p[bad].flat[0].item()!r})")
    order = np.argsort(p, axis=-1, kind="stable")
    return np.take_along_axis(p, order, axis=-1), order


def _unsorted(sorted_values: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(sorted_values)
    np.put_along_axis(out, order, sorted_values, axis=-1)
    return out


def _adjusted_slices_iv(names: Sequence[object], *columns: np.ndarray | float) -> tuple[np.ndarray, ...]:
    arrays = tuple(np.atleast_1d(np.asarray(c, dtype=np.float64)) for c in columns)
    if len(set(names)) != len(names):
        raise ValueError(f"'names' must be distinct slice names (got {list(names)!r})")
    for field, array in zip(("estimates", "lows", "highs", "p_values"), arrays):
        if array.shape != (len(names),):
            raise ValueError(f"'{field}' must hold one value per slice ({len(names)}) (got shape {array.shape})")
    return arrays
