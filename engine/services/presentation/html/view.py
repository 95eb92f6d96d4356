"""The view model of a report section (cells, tables, plots, the section itself, what a builder reads) and the
formatting helpers every section builder shares. Plain data: the templates escape every string."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cell", "Table", "Plot", "StageSection", "StageInput", "fmt", "table", "mapping", "threshold_values"]


def fmt(value: Any, digits: int = 6) -> str:
    """A compact human form of a JSON value (``digits`` significant digits for floats)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v, digits) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


@dataclass(frozen=True)
class Cell:
    """A table cell with a status: ``ok`` True (pass), False (fail), None (neutral)."""

    text: str
    ok: bool | None = None


@dataclass(frozen=True)
class Table:
    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str | Cell, ...], ...]
    numeric: tuple[int, ...] = ()
    """Indices of right-aligned (numeric) columns."""
    collapsed: bool = False
    """Shown folded (``<details>``): long tables a reviewer opens on demand."""
    nowrap: tuple[int, ...] = ()
    """Indices of columns whose cells never wrap (ids such as vendor names); numeric columns never wrap either."""


@dataclass(frozen=True)
class Plot:
    svg: str
    caption: str


@dataclass(frozen=True)
class StageSection:
    stage_id: str
    use: str
    version: str
    decision: str
    ok: bool | None
    summary: str
    plots: tuple[Plot, ...] = ()
    tables: tuple[Table, ...] = field(default=())
    how_to_read: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    """Short statements shown beside the decision (e.g. the estimand, clipped scores, raw mean)."""


@dataclass(frozen=True)
class StageInput:
    """What a section builder reads: the stage's outputs, the gates on them, its recorded checks
    (``sequential.diff``) and the run's vendor colours (bake-off plots)."""

    stage_id: str
    outputs: Mapping[str, Any]
    gates: Sequence[Mapping[str, Any]] = ()
    checks: Sequence[Mapping[str, Any]] = ()
    vendor_colours: Mapping[str, str] = field(default_factory=dict)


def table(caption: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = (),
          collapsed: bool = False, nowrap: Sequence[int] = ()) -> Table:
    """A ``Table`` whose cells are ``fmt``-formatted (``Cell``s kept as they are)."""
    return Table(caption, tuple(headers), tuple(tuple(c if isinstance(c, Cell) else fmt(c) for c in r) for r in rows),
                 tuple(numeric), collapsed, tuple(nowrap))


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one: outputs are read defensively."""
    return value if isinstance(value, Mapping) else {}


def threshold_values(gate: Mapping[str, Any]) -> list[float]:
    """The numeric bounds of a recorded gate (min, max, between)."""
    threshold = gate.get("threshold") or {}
    values = [threshold.get("min"), threshold.get("max"), *(threshold.get("between") or [])]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
