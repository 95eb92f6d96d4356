"""Field-by-field differences between two JSON documents (for ``replay`` and ``certa diff``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldChange", "flatten", "json_diff"]

_ABSENT = object()


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b[0]": leaf, ...}`` for every leaf (empty containers are leaves)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{index}]"))
        return out
    return {prefix or "(root)": value}


def json_diff(before: Any, after: Any) -> list[FieldChange]:
    """Every leaf path whose value differs (missing on one side is shown as None), in path order.

    Numbers compare by value (JSON does not distinguish 1 from 1.0); booleans never equal numbers.
    """
    left, right = flatten(before), flatten(after)
    changes = []
    for path in sorted(set(left) | set(right)):
        a, b = left.get(path, _ABSENT), right.get(path, _ABSENT)
        if a is _ABSENT or b is _ABSENT or a != b or isinstance(a, bool) != isinstance(b, bool):
            changes.append(FieldChange(path, None if a is _ABSENT else a, None if b is _ABSENT else b))
    return changes
