"""Input columns that enter no number: recorded, never silently ignored.

A certificate says only what the data support. An input column that a stage knows how to use (a weight, a
phase, a token count, a latency, a cost) but that the spec's knobs leave unused changes nothing in the
numbers, yet a reviewer must be told: using it could change the verdict. Each such column is one
``unused_column`` decision (outcome ``warn``) that names the input, the column and the knob that would use
it; ``certa.engine.core.interpreter.run_warnings`` turns it into a warning line, and ``certa run`` prints it.

More generally, a column of a plain input table (CSV, JSON Lines, Parquet) that no stage read at all (a stage
reads a column through ``Table.text``, ``factorize`` or ``numeric``; ``Table.columns_read``) is listed in the
certificate as the input's ``unread_columns`` (content format 3) and warned about in one ``unread_columns``
decision per input, recorded with no stage: a column the author expected to matter (a second score, a weight
under another name) cannot look as if it had been used. A column an ``unused_column`` decision already names is
listed but not warned about twice. Evaluator exports and model folders are read as records and files, not as
columns (what a stage leaves unused there is said by ``StageType.unused_parts`` and the model manifest), and an
input named in the knobs of a stage that captures tables (a live scorer's prompts and log-prob tables,
``model.windows``' text) has no list: such a stage reads it outside the tables in a run but not in the run's
replay, which reads the captured tables instead, so the list could not be reproduced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from certa.engine.core.endpoint_input import ENDPOINT_FORMAT
from certa.engine.core.models.manifest import MODEL_FORMAT
from certa.engine.core.tables import Table
from certa.engine.core.stages.base import Decision

__all__ = ["UNUSED_COLUMN", "UNREAD_COLUMNS", "unused_column_decisions", "unread_columns", "unread_column_decisions"]

UNUSED_COLUMN = "unused_column"
"""The decision kind."""
UNREAD_COLUMNS = "unread_columns"
"""The decision kind for an input's columns no stage read."""


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


def unread_columns(table: Table) -> list[str] | None:
    """The columns of ``table`` that nothing read (``Table.columns_read``), in the table's order; None for a table
    that is not read by column (an evaluator export, a model folder, a served model)."""
    if table.evidence is not None or table.fmt in (MODEL_FORMAT, ENDPOINT_FORMAT):
        return None
    return [column for column in table.columns if column not in table.columns_read]


def unread_column_decisions(unread: Mapping[str, Sequence[str] | None],
                            earlier: Iterable[Decision]) -> tuple[Decision, ...]:
    """One ``unread_columns`` decision (outcome ``warn``) per input of ``unread`` (input name -> its unread
    columns, as ``unread_columns`` gives them) with a column no ``unused_column`` decision of ``earlier`` names."""
    named = {(d.detail.get("input"), d.detail.get("column")) for d in earlier if d.kind == UNUSED_COLUMN}
    out = []
    for name, columns in unread.items():
        left = [column for column in columns or () if (name, column) not in named]
        if left:
            listed = ", ".join(f"'{column}'" for column in left)
            out.append(Decision(UNREAD_COLUMNS, {
                "input": name, "columns": left, "outcome": "warn",
                "message": f"input '{name}' has {len(left)} column(s) no stage read: {listed}; they enter no number "
                           "of this certificate (remove them from the input, or name them in a stage's with:)",
            }))
    return tuple(out)
