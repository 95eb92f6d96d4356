"""Pairing evaluation windows of two arms by window id, and the overlap of token spans.

Pure functions over arrays; the ``paired.ppl_ratio`` stage turns their results into profile decisions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["WindowPairing", "canonical_keys", "canonical_order", "group_codes", "pair_windows", "overlap_fraction",
           "duplicated_ids"]


@dataclass(frozen=True)
class WindowPairing:
    """Indices of matched windows in each arm (in baseline order) and the match statistics.

    ``match_fraction`` = |matched ids| / |ids in either arm| (1.0 exactly when both arms hold the same ids).
    """

    baseline_index: np.ndarray
    subject_index: np.ndarray
    match_fraction: float
    unmatched_baseline: tuple[str, ...]
    unmatched_subject: tuple[str, ...]

    @property
    def n_pairs(self) -> int:
        return int(self.baseline_index.size)


def duplicated_ids(ids: np.ndarray) -> list[str]:
    """Window ids that occur more than once (sorted)."""
    values, counts = np.unique(ids.astype(str), return_counts=True)
    return values[counts > 1].tolist()


def pair_windows(baseline_ids: np.ndarray, subject_ids: np.ndarray) -> WindowPairing:
    """Match windows by id (ids must be unique within each arm); vectorised with ``np.intersect1d``."""
    base = baseline_ids.astype(str)
    subj = subject_ids.astype(str)
    common, base_idx, subj_idx = np.intersect1d(base, subj, assume_unique=True, return_indices=True)
    order = np.argsort(base_idx, kind="stable")
    union = np.union1d(base, subj).size
    return WindowPairing(
        baseline_index=base_idx[order],
        subject_index=subj_idx[order],
        match_fraction=float(common.size / union) if union else 0.0,
        unmatched_baseline=tuple(np.setdiff1d(base, common, assume_unique=True).tolist()),
        unmatched_subject=tuple(np.setdiff1d(subj, common, assume_unique=True).tolist()),
    )


def overlap_fraction(start: np.ndarray, end: np.ndarray) -> float:
    """Fraction of windows whose half-open token span [start, end) overlaps another window's span.

    After sorting by start, window i overlaps an earlier window iff start_i < max(end_0..end_{i-1}), and
    a later one iff end_i > start_{i+1} (the smallest later start).
    """
    n = start.size
    if n < 2:
        return 0.0
    order = np.lexsort((end, start))
    s, e = start[order], end[order]
    running_end = np.maximum.accumulate(e)
    overlaps_earlier = np.zeros(n, dtype=bool)
    overlaps_earlier[1:] = s[1:] < running_end[:-1]
    overlaps_later = np.zeros(n, dtype=bool)
    overlaps_later[:-1] = e[:-1] > s[1:]
    return float(np.count_nonzero(overlaps_earlier | overlaps_later) / n)


def canonical_order(*columns: np.ndarray) -> np.ndarray:
    """The permutation that sorts rows by their key (``columns``: one array per key field, the first field
    first), so that a computation over the sorted rows (a bootstrap's draws, a floating-point sum) gives the same
    bytes however the input was ordered.

    The order is total on distinct keys of any type a reader yields: a numeric or text array sorts by its
    values; an object array sorts numbers (by value) before other values, then by the type's name and the text
    (so int 1, float 1.0 and text "1" are distinct and ordered, and integers beyond 2⁵³ stay apart).
    Rows with equal keys keep their input order (a stable sort); paired rows have unique keys.
    """
    return np.lexsort(tuple(reversed(canonical_keys(*columns))))


def canonical_keys(*columns: np.ndarray) -> list[np.ndarray]:
    """The sort keys of ``canonical_order``, first field first: a numeric or text column as it is, an object
    column as four arrays (not a number, the number's value, the type's name, the text). Two rows have equal
    keys exactly when every array is equal at both."""
    if not columns:
        raise ValueError("canonical_order needs at least one key column")
    keys: list[np.ndarray] = []
    for column in columns:
        values = np.asarray(column)
        if values.dtype.kind in "biufUS":
            keys.append(values)
            continue
        items = values.tolist()
        numeric = np.fromiter((isinstance(v, (int, float)) and not isinstance(v, bool) for v in items),
                              dtype=bool, count=len(items))
        magnitude = np.fromiter((float(v) if is_number else 0.0 for v, is_number in zip(items, numeric)),
                                dtype=np.float64, count=len(items))
        kind = np.array([type(v).__name__ for v in items], dtype=str)
        text = np.array([str(v) for v in items], dtype=str)
        keys.extend((~numeric, magnitude, kind, text))
    return keys


def group_codes(*columns: np.ndarray) -> tuple[np.ndarray, int]:
    """(code of each row, number of distinct keys): rows with equal keys (``canonical_keys``) share a code, and
    codes 0, 1, ... follow the canonical order of the keys; one sort, no loop over rows."""
    keys = canonical_keys(*columns)
    order = np.lexsort(tuple(reversed(keys)))
    if order.size == 0:
        return order.astype(np.intp), 0
    starts = np.zeros(order.size, dtype=bool)
    starts[0] = True
    for key in keys:
        ranked = key[order]
        starts[1:] |= ranked[1:] != ranked[:-1]
    codes = np.empty(order.size, dtype=np.intp)
    codes[order] = np.cumsum(starts) - 1
    return codes, int(starts.sum())
