"""The paired 2×2 table of a binary per-item metric (correct / wrong) scored for a subject and a baseline.

Items i = 1..n carry a subject outcome s_i and a baseline outcome b_i in {0, 1} (1 = correct). The table
counts the four outcome pairs, subject first:

                   baseline 1   baseline 0
    subject 1         n11          n10
    subject 0         n01          n00

p_subject = (n11 + n10) / n, p_baseline = (n11 + n01) / n, and every function of this package is about

    Δ = p_subject − p_baseline = (n10 − n01) / n,

negative when the subject is worse ("the quantized model loses at most one point": Δ ≥ −0.01). The counts
may be arrays of one shape (many tables at once: slices, simulations); every function is elementwise.

``EffectiveTable`` holds the same four cells as non-negative real numbers: the table of repeated trials after
the design-effect adjustment of ``clustered`` (Rao & Scott 1992), whose counts are effective numbers of
independent rows. Tango's and Newcombe's intervals, the score tests and the minimum detectable difference read
either (``CountTable``); the exact McNemar test needs whole counts (``PairedTable``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CountTable", "EffectiveTable", "PairedTable", "paired_table_from_outcomes", "paired_tables_by_slice"]


class _Cells:
    """The cells of a paired 2×2 table (n11, n10, n01, n00; arrays of one shape), their total and Δ̂."""

    n11: np.ndarray
    n10: np.ndarray
    n01: np.ndarray
    n00: np.ndarray

    @property
    def n(self) -> np.ndarray:
        """Items per table (for an ``EffectiveTable``, the effective number of rows)."""
        return self.n11 + self.n10 + self.n01 + self.n00

    @property
    def difference(self) -> np.ndarray:
        """Δ̂ = (n10 − n01) / n."""
        return (self.n10 - self.n01) / self.n


@dataclass(frozen=True)
class PairedTable(_Cells):
    """Counts n11, n10, n01, n00 (module docstring), as int64 arrays of one shape (0-d for one table).

    Raises ``ValueError`` when a count is not a non-negative integer or a table has no item.
    """

    n11: np.ndarray
    n10: np.ndarray
    n01: np.ndarray
    n00: np.ndarray

    def __post_init__(self) -> None:
        for name, value in zip(("n11", "n10", "n01", "n00"), _paired_table_iv(self.n11, self.n10, self.n01, self.n00)):
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class EffectiveTable(_Cells):
    """Cells n11, n10, n01, n00 as float64 arrays of one shape: finite, ≥ 0, and n > 0 in every table (the
    design-effect-adjusted table of ``clustered``; the module docstring).

    Raises ``ValueError`` when a cell is negative or not finite, or a table has no weight.
    """

    n11: np.ndarray
    n10: np.ndarray
    n01: np.ndarray
    n00: np.ndarray

    def __post_init__(self) -> None:
        for name, value in zip(("n11", "n10", "n01", "n00"),
                               _effective_table_iv(self.n11, self.n10, self.n01, self.n00)):
            object.__setattr__(self, name, value)


CountTable = PairedTable | EffectiveTable
"""A paired 2×2 table of whole counts or of effective (real) counts: what the intervals and score tests read."""


def _effective_table_iv(*cells: object) -> tuple[np.ndarray, ...]:
    arrays = []
    for name, cell in zip(("n11", "n10", "n01", "n00"), cells):
        raw = np.asarray(cell)
        if raw.dtype == bool or not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
            raise ValueError(f"'{name}' must be a non-negative number (got {cell!r})")
        value = raw.astype(np.float64)
        bad = ~(np.isfinite(value) & (value >= 0))
        if bad.any():
            raise ValueError(f"'{name}' must be a finite non-negative number (got {value[bad].flat[0].item()!r})")
        arrays.append(value)
    try:
        shaped = np.broadcast_arrays(*arrays)
    except ValueError:
        raise ValueError("'n11', 'n10', 'n01' and 'n00' must have one shape "
                         f"(got {[a.shape for a in arrays]})") from None
    if (np.asarray(sum(shaped)) <= 0).any():
        raise ValueError("an effective table must hold a positive weight (n11 + n10 + n01 + n00 > 0)")
    return tuple(np.array(a) for a in shaped)


def _paired_table_iv(*counts: object) -> tuple[np.ndarray, ...]:
    names = ("n11", "n10", "n01", "n00")
    arrays = []
    for name, count in zip(names, counts):
        raw = np.asarray(count)
        if raw.dtype == bool or not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
            raise ValueError(f"'{name}' must be a non-negative integer count (got {count!r})")
        value = raw.astype(np.float64)
        bad = ~(np.isfinite(value) & (value >= 0) & (value == np.floor(value)))
        if bad.any():
            raise ValueError(f"'{name}' must be a non-negative integer count (got {value[bad].flat[0].item()!r})")
        arrays.append(raw.astype(np.int64))
    try:
        shaped = np.broadcast_arrays(*arrays)
    except ValueError:
        raise ValueError("'n11', 'n10', 'n01' and 'n00' must have one shape "
                         f"(got {[a.shape for a in arrays]})") from None
    empty = np.asarray(sum(shaped)) == 0
    if empty.any():
        raise ValueError("a paired table must hold at least one item (n11 + n10 + n01 + n00 = 0)")
    return tuple(np.array(a) for a in shaped)


def _outcomes_iv(subject: object, baseline: object, labels: object = None) -> tuple[np.ndarray, ...]:
    s = np.asarray(subject)
    b = np.asarray(baseline)
    for name, x in (("subject", s), ("baseline", b)):
        if x.ndim != 1 or x.size == 0:
            raise ValueError(f"'{name}' must be a non-empty 1-D array of 0/1 outcomes (got shape {x.shape})")
        if x.dtype != bool:
            bad = ~np.isin(x, (0, 1))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"'{name}' must hold 0/1 outcomes (item {i} is {x[i].item()!r})")
    if s.size != b.size:
        raise ValueError(f"'subject' and 'baseline' must pair item by item (got {s.size} and {b.size} items)")
    out = [s.astype(bool), b.astype(bool)]
    if labels is not None:
        lab = np.asarray(labels)
        if lab.shape != s.shape:
            raise ValueError(f"'labels' must give one slice per item (got shape {lab.shape} for {s.size} items)")
        out.append(lab)
    return tuple(out)


def paired_table_from_outcomes(subject: np.ndarray, baseline: np.ndarray) -> PairedTable:
    """The table of 0/1 (or boolean) outcome arrays paired by position."""
    s, b = _outcomes_iv(subject, baseline)
    return _table_of_codes(2 * s + b, minlength=1, codes=None)


def paired_tables_by_slice(subject: np.ndarray, baseline: np.ndarray,
                           labels: np.ndarray) -> tuple[tuple[object, ...], PairedTable]:
    """(slice names in sorted order, one table per slice as arrays of that length) from per-item labels."""
    s, b, lab = _outcomes_iv(subject, baseline, labels)
    names, codes = np.unique(lab, return_inverse=True)
    return tuple(names.tolist()), _table_of_codes(2 * s + b, minlength=names.size, codes=codes.ravel())


def _table_of_codes(cell: np.ndarray, *, minlength: int, codes: np.ndarray | None) -> PairedTable:
    """Counts of cell = 2 s + b (3: n11, 2: n10, 1: n01, 0: n00) per slice code, by one ``bincount``."""
    key = cell if codes is None else codes * 4 + cell
    counts = np.bincount(key, minlength=4 * minlength).reshape(-1, 4)
    if codes is None:
        counts = counts[0]
    return PairedTable(counts[..., 3], counts[..., 2], counts[..., 1], counts[..., 0])
