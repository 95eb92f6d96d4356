"""Adjusted p-values across slices (categories) of one comparison, and the per-slice results that carry them.

``holm`` and ``benjamini_hochberg`` are ``certa.engine.core.stats.multiplicity``'s (formulas and sources there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from certa.engine.core.stats.multiplicity import benjamini_hochberg_adjust, holm_adjust

__all__ = ["ADJUSTMENTS", "SliceResult", "SliceResults", "adjust_p_values", "adjusted_slices",
           "benjamini_hochberg_adjust", "holm_adjust"]


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


def _adjusted_slices_iv(names: Sequence[object], *columns: np.ndarray | float) -> tuple[np.ndarray, ...]:
    arrays = tuple(np.atleast_1d(np.asarray(c, dtype=np.float64)) for c in columns)
    if len(set(names)) != len(names):
        raise ValueError(f"'names' must be distinct slice names (got {list(names)!r})")
    for field, array in zip(("estimates", "lows", "highs", "p_values"), arrays):
        if array.shape != (len(names),):
            raise ValueError(f"'{field}' must hold one value per slice ({len(names)}) (got shape {array.shape})")
    return arrays
