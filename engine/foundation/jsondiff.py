"""Field-by-field differences between two JSON documents (``certa diff``, ``certa replay``, the site's diff pages).

Pure functions, no I/O. ``json_diff`` lists every leaf that differs, most material first (``materiality``) and
in natural path order within a rank (array indices as numbers: ``[2]`` before ``[10]``); ``summarised`` folds
the changed elements of a numeric array into one ``ArrayChange`` when more than ``LONG_ARRAY`` of them differ
(bootstrap quantiles, a sequence).

Materiality of a path in certificate content (lower ranks first), decided by the path's keys, not by a list of
fields per stage type:

0. ``verdict``;
1. ``gates`` (each gate's value, threshold, pass/fail and reason);
2. a stage's estimates and intervals: a path under ``stages.<id>`` through a key that stages use for their
   headline numbers (``primary_metric``, ``results``, ``estimate``, a ``<unit>_perplexity``) or through a key
   one of whose ``_``-separated words is ``ci``, ``bound``, ``bounds`` or ``interval`` (``ci``, ``display_ci``,
   ``rate_bounds``, ``pac_bounds_marginal``, ...);
3. a stage's decisions: a path under ``stages.<id>`` through a key ``decision``, ``decisions``, ``outcome`` or
   ``passed``;
4. the rest of the stage outputs;
5. everything else (spec, knobs, seeds, inputs, library versions).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FieldChange", "ArrayChange", "PathPart", "flatten", "json_diff", "materiality", "summarised",
           "LONG_ARRAY"]

_ABSENT = object()

PathPart = str | int
"""One step of a path: a key (str) or an array index (int)."""

LONG_ARRAY = 8
"""``summarised`` folds an array's changes into one line when more than this many of its numbers differ."""

_ESTIMATE_KEYS = frozenset({"primary_metric", "results", "estimate",
                            "token_perplexity", "byte_perplexity", "word_perplexity"})
_INTERVAL_WORDS = frozenset({"ci", "bound", "bounds", "interval"})
_DECISION_KEYS = frozenset({"decision", "decisions", "outcome", "passed"})


@dataclass(frozen=True)
class FieldChange:
    """One leaf that differs: its ``path`` (``a.b[0]``), its value before and after (None when missing)."""

    path: str
    before: Any
    after: Any
    parts: tuple[PathPart, ...] = field(default=(), compare=False, repr=False)
    """The path as keys and indices (what ``path`` spells)."""

    def as_json(self, sides: tuple[str, str]) -> dict[str, Any]:
        """The change as JSON, its two values under the names ``sides`` (``("recorded", "replayed")`` for a
        replay, ``("a", "b")`` for ``certa diff``)."""
        return {"path": self.path, sides[0]: self.before, sides[1]: self.after}


@dataclass(frozen=True)
class ArrayChange:
    """The changed elements of one array of numbers, as one line: how many differ, and the largest absolute
    change (``largest``, at index ``largest_at``; None when no element is a number on both sides).
    ``changes`` keeps every element's change."""

    path: str
    changes: tuple[FieldChange, ...]
    largest: float | None
    largest_at: int | None

    def as_json(self) -> dict[str, Any]:
        """The summary as JSON (without the element changes)."""
        return {"path": self.path, "changed": len(self.changes), "largest_abs_change": self.largest,
                "largest_at": self.largest_at}


def _path_text(parts: Sequence[PathPart]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(root)"


def _leaves(value: Any, parts: tuple[PathPart, ...]) -> Iterator[tuple[tuple[PathPart, ...], Any]]:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from _leaves(item, (*parts, str(key)))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, (*parts, index))
    else:
        yield parts, value


def flatten(value: Any) -> dict[str, Any]:
    """``{"a.b[0]": leaf, ...}`` for every leaf (empty containers are leaves)."""
    return {_path_text(parts): leaf for parts, leaf in _leaves(value, ())}


def materiality(parts: Sequence[PathPart]) -> int:
    """The rank of a path in certificate content, 0 (the verdict) to 5 (identity and environment): see the
    module's docstring."""
    if not parts or not isinstance(parts[0], str):
        return 5
    if parts[0] == "verdict":
        return 0
    if parts[0] == "gates":
        return 1
    if parts[0] != "stages":
        return 5
    keys = [p for p in parts[2:] if isinstance(p, str)]
    if any(k in _ESTIMATE_KEYS or not _INTERVAL_WORDS.isdisjoint(k.split("_")) for k in keys):
        return 2
    if any(k in _DECISION_KEYS for k in keys):
        return 3
    return 4


def _natural(parts: Sequence[PathPart]) -> tuple[tuple[int, Any], ...]:
    """A sort key in which indices compare as numbers (and never against keys)."""
    return tuple((0, p) if isinstance(p, int) else (1, p) for p in parts)


def _differs(a: Any, b: Any) -> bool:
    return a is _ABSENT or b is _ABSENT or a != b or isinstance(a, bool) != isinstance(b, bool)


def json_diff(before: Any, after: Any) -> list[FieldChange]:
    """Every leaf path whose value differs (missing on one side is shown as None), most material first
    (``materiality``), then in natural path order.

    Numbers compare by value (JSON does not distinguish 1 from 1.0); booleans never equal numbers.
    """
    left, right = dict(_leaves(before, ())), dict(_leaves(after, ()))
    changed = [parts for parts in {**left, **right} if _differs(left.get(parts, _ABSENT), right.get(parts, _ABSENT))]
    changed.sort(key=lambda parts: (materiality(parts), _natural(parts)))
    return [FieldChange(_path_text(parts), left.get(parts), right.get(parts), parts) for parts in changed]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numeric_element(change: FieldChange) -> bool:
    """Whether ``change`` is of an array element that is a number (or missing) on each side."""
    return (bool(change.parts) and isinstance(change.parts[-1], int)
            and all(v is None or _is_number(v) for v in (change.before, change.after)))


def _array_change(parts: tuple[PathPart, ...], changes: list[FieldChange]) -> ArrayChange:
    largest: float | None = None
    largest_at: int | None = None
    for change in changes:
        if _is_number(change.before) and _is_number(change.after):
            size = abs(float(change.after) - float(change.before))
            if not math.isnan(size) and (largest is None or size > largest):
                largest, largest_at = size, int(change.parts[-1])
    return ArrayChange(_path_text(parts), tuple(changes), largest, largest_at)


def summarised(changes: Sequence[FieldChange], *, limit: int = LONG_ARRAY) -> list[FieldChange | ArrayChange]:
    """``changes`` (of ``json_diff``) with the changed numeric elements of each array folded into one
    ``ArrayChange`` where more than ``limit`` of them differ (bootstrap quantiles, a sequence), placed where
    its first element was; fewer stay listed one by one."""
    groups: dict[tuple[PathPart, ...], list[FieldChange]] = {}
    for change in changes:
        if _numeric_element(change):
            groups.setdefault(change.parts[:-1], []).append(change)
    folded = {parent for parent, members in groups.items() if len(members) > limit}
    out: list[FieldChange | ArrayChange] = []
    for change in changes:
        parent = change.parts[:-1]
        if not _numeric_element(change) or parent not in folded:
            out.append(change)
        elif groups[parent][0] is change:
            out.append(_array_change(parent, groups[parent]))
    return out
