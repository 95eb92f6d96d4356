"""Per-slice analysis of a binary per-item metric: one table per slice, all slices computed at once.

For items labelled by a category (task, language, difficulty), each slice gets its paired table, the
interval for Δ (``tango`` or ``newcombe``) and a p-value, and the p-values are adjusted across the slices
(``multiplicity``). The p-value is Tango's non-inferiority p-value for H0: Δ ≤ −margin when a margin is
given, else the two-sided exact McNemar p-value for H0: Δ = 0. Every step is elementwise over the slices.
"""

from __future__ import annotations

import numpy as np

from . import _shared
from .mcnemar import mcnemar_exact_test
from .multiplicity import SliceResults, adjusted_slices
from .newcombe import newcombe_interval
from .table import paired_tables_by_slice
from .tango import tango_interval, tango_noninferiority_test

__all__ = ["INTERVALS", "binary_slices"]

INTERVALS = {"tango": tango_interval, "newcombe": newcombe_interval}


def binary_slices(subject: np.ndarray, baseline: np.ndarray, labels: np.ndarray, *, margin: float | None = None,
                  confidence_level: float = 0.95, interval: str = "tango",
                  adjustment: str = "holm") -> SliceResults:
    """Per-slice estimate, interval and (adjusted) p-value of Δ = p_subject − p_baseline (module docstring)."""
    margin = _binary_slices_iv(margin, interval)
    names, tables = paired_tables_by_slice(subject, baseline, labels)
    ci = INTERVALS[interval](tables, confidence_level)
    if margin is None:
        p = mcnemar_exact_test(tables).p_value
    else:
        p = tango_noninferiority_test(tables, margin).p_value
    return adjusted_slices(names, ci.estimate, ci.low, ci.high, p, adjustment=adjustment)


def _binary_slices_iv(margin: float | None, interval: str) -> float | None:
    if interval not in INTERVALS:
        raise ValueError(f"'interval' must be one of {tuple(INTERVALS)} (got {interval!r})")
    return None if margin is None else _shared.margin(margin, allow_zero=True)
