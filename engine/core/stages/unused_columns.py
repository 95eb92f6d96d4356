"""Columns a stage recognises but its knobs leave unused: recorded, never silently ignored.

A certificate says only what the data support. An input column that a stage knows how to use (a weight, a
phase, a token count, a latency, a cost) but that the spec's knobs leave unused changes nothing in the
numbers, yet a reviewer must be told: using it could change the verdict. Each such column is one
``unused_column`` decision (outcome ``warn``) that names the input, the column and the knob that would use
it; ``certa.engine.core.interpreter.run_warnings`` turns it into a warning line, and ``certa run`` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping

from certa.engine.core.tables import Table
from certa.engine.core.stages.base import Decision

__all__ = ["UNUSED_COLUMN", "unused_column_decisions"]

UNUSED_COLUMN = "unused_column"
"""The decision kind."""


def unused_column_decisions(table: Table, unused: Mapping[str, str]) -> tuple[Decision, ...]:
    """One ``unused_column`` decision for each column of ``unused`` that ``table`` has.

    ``unused`` maps a column name the stage recognises but will not read under the current knobs to how the
    spec would make it read it: a knob setting or a short hint (e.g. ``{"w": "weights: column"}``). Columns the table lacks are
    skipped, so a stage passes every recognised-but-unused column and only the present ones are recorded.
    """
    return tuple(
        Decision(UNUSED_COLUMN, {
            "input": table.name, "column": column, "use_with": knob, "outcome": "warn",
            "message": f"input '{table.name}' has a column '{column}' that this stage recognises but the knobs leave "
                       f"unused; it was ignored (to use it: {knob})",
        })
        for column, knob in unused.items() if table.has(column)
    )
