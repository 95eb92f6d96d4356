"""Report tables of what two evaluator exports hold beside their numbers, shared by the stages that read them
(``paired.metric_delta``, ``paired.ppl_ratio`` 1.5.0): how their items paired (the ``pairing`` block of the
outputs, ``certa.engine.core.evidence.pairing.PairingReport.summary``) and what each export states about its origin
(the ``sources`` block, ``certa.engine.core.evidence.records.Provenance.as_dict``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from certa.engine.services.presentation.html.view import Cell, Table, fmt, mapping, table

__all__ = ["PROVENANCE_TEXT", "SIDES", "STATED", "STATED_NAMES", "UNPAIRED", "export_facts", "keys_text", "pairing_table", "provenance_table",
           "stated", "unpaired_counts"]

STATED = ("tool", "tool_version", "task", "task_version", "task_config_sha256")
"""The provenance fields every export states (or states as not known: null)."""

STATED_NAMES = {"tool": "tool", "tool_version": "tool version", "task": "task", "task_version": "task version",
                "task_config_sha256": "task config digest (SHA-256)"}

UNPAIRED = (("only in the baseline", "unmatched_baseline"), ("only in the subject", "unmatched_subject"),
            ("with different identity digests", "identity_mismatched"))
"""The kinds of items left out of the estimate: (words, ``pairing`` count key, also its ``examples`` key)."""

SIDES = ("baseline", "subject")


def unpaired_counts(pairing: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(kind, count) of each kind of item left out of the estimate, when there are any."""
    counts = [(kind, pairing.get(key)) for kind, key in UNPAIRED]
    return [(kind, count) for kind, count in counts if isinstance(count, int) and not isinstance(count, bool)
            and count > 0]


def export_facts(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """Beside a section's decision: the items left out of the estimate (or that every item paired) and how the two
    exports' statements compare, from the outputs' ``pairing`` and ``sources`` (nothing where they are absent)."""
    facts = []
    pairing = mapping(outputs.get("pairing"))
    left_out = unpaired_counts(pairing)
    if left_out:
        facts.append("items not paired (not in the estimate): "
                     + ", ".join(f"{fmt(count)} {kind}" for kind, count in left_out))
    elif pairing:
        facts.append(f"every item paired ({fmt(pairing.get('paired'))})")
    sources = mapping(outputs.get("sources"))
    statements = [mapping(sources.get(side)) for side in SIDES]
    if all(statements):
        differ = [STATED_NAMES[field] for field in STATED if statements[0].get(field) != statements[1].get(field)]
        same = [STATED_NAMES[field] for field in STATED if statements[0].get(field) is not None]
        facts.append("the exports differ in: " + ", ".join(differ) if differ else
                     "both exports state the same " + ", ".join(same) if same else "neither export states its tool")
    return tuple(facts)


def keys_text(keys: Any) -> str:
    """Item keys (each a list of key field values) as ``a; b, c``."""
    if not isinstance(keys, Sequence) or isinstance(keys, str) or not keys:
        return "–"
    return "; ".join(", ".join(fmt(part) for part in key) if isinstance(key, Sequence) and not isinstance(key, str)
                     else fmt(key) for key in keys)


def pairing_table(pairing: Mapping[str, Any]) -> Table:
    """How the items paired: the identity used, the counts (unpaired ones flagged) and the first unpaired keys."""
    examples = mapping(pairing.get("examples"))
    counts = [(f"items not paired: {kind}", Cell(fmt(count), count == 0 if isinstance(count, int) else None))
              for kind, count in ((kind, pairing.get(key)) for kind, key in UNPAIRED)]
    shown = [(f"first keys: {kind}", keys_text(examples.get(key))) for kind, key in UNPAIRED if examples.get(key)]
    return table("Pairing of the items", ("quantity", "value"), [
        ("item identity (key fields)", ", ".join(map(str, pairing.get("key_fields") or ())) or "–"),
        ("items read: baseline", pairing.get("baseline_items")), ("items read: subject", pairing.get("subject_items")),
        ("items paired", pairing.get("paired")), *counts,
        ("identity fields that differed",
         ", ".join(map(str, pairing.get("identity_fields_mismatched") or ())) or "–"),
        *shown])


def stated(value: Any) -> str:
    """A value an export states (``not stated`` for null)."""
    return "not stated" if value is None else fmt(value)


def provenance_table(side: str, source: Mapping[str, Any]) -> Table:
    """What one side's export states: tool, version, task, task config digest, model and other fields, and every
    file read with its SHA-256."""

    def entries(key: str) -> list[Mapping[str, Any]]:
        return [e for e in source.get(key) or () if isinstance(e, Mapping)]

    rows: list[tuple[str, Any]] = [(STATED_NAMES[field], stated(source.get(field))) for field in STATED]
    rows += [(f"model: {fmt(e.get('field'))}", stated(e.get("value"))) for e in entries("models")]
    rows += [(fmt(e.get("field")), stated(e.get("value"))) for e in entries("details")]
    rows += [(f"file read as {fmt(e.get('name'))} (SHA-256)", e.get("sha256")) for e in entries("files")]
    return table(f"Provenance: {side} (as its export states it)", ("field", "value"), rows)


PROVENANCE_TEXT = ("Provenance: the tool, version, task and model of each side are what its export states about "
                   "itself, copied as written; certa records the SHA-256 of every file it read, but cannot check that "
                   "the statements are true.")
"""How to read the ``sources`` block (a "how to read this" paragraph)."""
