"""The view model of a report section (cells, tables, plots, the section itself, what a builder reads) and the
formatting helpers every section builder shares, with the vendors of a run (one colour each in every bake-off plot).
Plain data: the templates escape every string."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certa.engine.core.gates import FAIL, INCONCLUSIVE, gate_outcome
from certa.engine.core.value_text import READER_STYLE, format_value

__all__ = ["Cell", "Table", "Plot", "StageSection", "StageInput", "fmt", "gates_state", "table", "mapping",
           "threshold_values",
           "run_vendors"]


def fmt(value: Any, digits: int = 6) -> str:
    """``value`` as the report writes it: ``certa.engine.core.value_text.format_value`` in words (``–`` for a missing
    value, ``yes``/``no`` for booleans), floats with ``digits`` significant digits."""
    return format_value(value, digits=digits, style=READER_STYLE)


@dataclass(frozen=True)
class Cell:
    """A table cell with a status: ``ok`` True (pass), False (fail), None (neutral), ``INCONCLUSIVE_STATE``
    (amber)."""

    text: str
    ok: bool | str | None = None


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
    ok: bool | str | None
    """The decision badge's colour: True green, False red, None neutral, ``INCONCLUSIVE_STATE`` amber."""
    summary: str
    plots: tuple[Plot, ...] = ()
    tables: tuple[Table, ...] = field(default=())
    how_to_read: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    """Short statements shown beside the decision (e.g. the estimand, clipped scores, raw mean)."""


@dataclass(frozen=True)
class StageInput:
    """What a section builder reads: the stage's outputs, the gates on them, its recorded decisions a section shows
    (``sequential.diff``'s ``sequential_check`` and ``scorer_usage`` details, their kind in ``decision_kind``) and
    the run's vendor colours (bake-off plots)."""

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
    """The numeric bounds of a recorded gate (min, max, between, and an interval gate's min and max)."""
    threshold = gate.get("threshold") or {}
    interval = threshold.get("interval") if isinstance(threshold.get("interval"), Mapping) else {}
    values = [threshold.get("min"), threshold.get("max"), *(threshold.get("between") or []), interval.get("min"),
              interval.get("max")]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def run_vendors(stages: Mapping[str, Any]) -> list[str]:
    """Every vendor id of a run's bake-off stages (``input.vendors`` and ``buckets.<id>.vendors``), sorted: the
    colour order."""
    found = {str(vendor) for outputs in stages.values() if isinstance(outputs, Mapping)
             for bucket in mapping(outputs.get("buckets")).values() if isinstance(bucket, Mapping)
             for vendor in mapping(bucket.get("vendors"))}
    found.update(str(vendor) for outputs in stages.values() if isinstance(outputs, Mapping)
                 for vendor in mapping(outputs.get("input")).get("vendors") or () if "buckets" in outputs)
    return sorted(found)


INCONCLUSIVE_STATE = "inconclusive"
"""A badge state (``StageSection.ok``) that is neither pass nor fail: amber."""


def gates_state(gates: Sequence[Mapping[str, Any]], otherwise: bool | str | None) -> bool | str | None:
    """A stage's badge state from its gates' outcomes (``gate_outcome``): False if any FAILed, else
    ``INCONCLUSIVE_STATE`` if any was inconclusive, else True; ``otherwise`` for a stage without gates."""
    if not gates:
        return otherwise
    outcomes = {gate_outcome(gate) for gate in gates}
    return False if FAIL in outcomes else INCONCLUSIVE_STATE if INCONCLUSIVE in outcomes else True
