"""Warning lines: the decisions a run let through with a warning, as ``certa run`` prints them and ``certa show``
and the HTML report list them again from the ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

from certa.engine.core.stages.base import Decision, DecisionColumns
from certa.engine.core.value_text import format_value

if TYPE_CHECKING:  # the interpreter (every stage module) is not needed to list recorded warnings ('certa show')
    from certa.engine.core.interpreter import RunDecisions

__all__ = ["run_warnings", "warning_line", "WARNING_MARK"]

def run_warnings(decisions: RunDecisions) -> tuple[str, ...]:
    """A line for each decision whose ``outcome`` is ``warn`` (a profile rule ``dev`` lets through, an unused
    input column, data outside a declared range, ...), by ``warning_line``. Per-row decisions held as columns
    (``DecisionColumns``) are never warnings and are not read."""
    lines = (warning_line(part.stage, decision) for part in decisions.parts
             if not isinstance(part.decisions, DecisionColumns) for decision in part.decisions)
    return tuple(line for line in lines if line is not None)


WARNING_MARK = '"outcome":"warn"'
"""How a warning decision reads in the ledger's RFC 8785 payload text: what a database filter looks for."""


def warning_line(stage: str | None, decision: Decision) -> str | None:
    """``stage 'ID': MESSAGE`` for a decision whose ``outcome`` is ``warn`` (``inputs: MESSAGE`` for one an input
    calls for, recorded with no stage: ``certa.engine.core.interpreter.input_decisions``), else None. The message is
    the decision's own ``message`` when it has one, else its rule, value and requirement."""
    detail = decision.detail
    if detail.get("outcome") != "warn":
        return None
    message = detail.get("message") or (
        f"{detail.get('rule', decision.kind)} = {format_value(detail.get('value'))}, required "
        f"{format_value(detail.get('required'))} (profile {detail.get('profile', '?')} lets it through)")
    where = f"stage {stage!r}" if stage is not None else (
        "inputs" if "input" in detail else "registration" if "registration" in detail else "gates")
    return f"{where}: {message}"
