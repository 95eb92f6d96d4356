"""Profile rules shared by the paired stages: a rule's recorded decision, the ``items_paired`` rule on the pairing
of two evaluator exports (``certa.engine.core.evidence.pairing``), and the text a refusal gives.

A rule passes, or fails: then ``dev`` records it with the outcome ``warn`` (``certa run`` prints its message) and
goes on with what paired, while ``ci`` and ``release`` (``strict``) record it with the outcome ``abort`` and the
stage raises ``ProfileAbort`` with ``failed_rules_text``, which names each failed rule's numbers. Nothing left out
of an estimate goes unrecorded (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from certa.engine.core.evidence.pairing import PairingReport, unpaired_text
from certa.engine.core.stages.base import Decision
from certa.engine.core.value_text import format_value

__all__ = ["ITEMS_PAIRED_REQUIRED", "failed_rules_text", "items_paired_rule", "profile_rule"]

ITEMS_PAIRED_REQUIRED = "every item of both sides paired, with equal identity digests"


def profile_rule(name: str, ok: bool, value: Any, required: Any, profile: str, strict: bool,
                 message: str | None = None) -> Decision:
    """The decision of profile rule ``name``: ``pass`` when ``ok``, else ``abort`` in a ``strict`` profile and
    ``warn`` in the others. ``message`` says in words what failed and what was done; when the rule fails in a
    profile that lets it through, the decision's message says so."""
    outcome = "pass" if ok else ("abort" if strict else "warn")
    detail = {"rule": name, "value": value, "required": required, "outcome": outcome, "profile": profile}
    if not ok and message is not None:
        detail["message"] = message + ("" if strict else f" (profile {profile} lets it through; ci and release refuse)")
    return Decision("profile_rule", detail)


def items_paired_rule(report: PairingReport, profile: str, strict: bool, *, message: bool = True) -> Decision:
    """The ``items_paired`` rule: every item of both exports paired by its key with equal identity digests
    (lm-eval: ``doc_id`` with ``doc_hash``, ``prompt_hash`` and ``target_hash``). Its value counts the items read,
    paired and left out by kind; its message (``message``: ``paired.metric_delta`` 1.0.0 and 1.1.0 recorded none)
    names them and the first of them (``unpaired_text``)."""
    value = {"baseline_items": report.n_baseline, "subject_items": report.n_subject, "paired": report.n_paired,
             "unmatched_baseline": len(report.unmatched_baseline), "unmatched_subject": len(report.unmatched_subject),
             "identity_mismatched": len(report.mismatched_keys)}
    text = (unpaired_text("item", report.key_fields, report.unmatched_baseline, report.unmatched_subject,
                          report.mismatched_keys, report.n_paired) if message else None)
    return profile_rule("items_paired", report.complete, value, ITEMS_PAIRED_REQUIRED, profile, strict, text)


def failed_rules_text(rules: Sequence[Decision]) -> str:
    """Each aborted rule of ``rules`` with its numbers: its message, or ``<rule>: <value>, required <required>``."""
    return "; ".join(d.detail.get("message") or (f"{d.detail['rule']}: {format_value(d.detail['value'])}, required "
                                                 f"{format_value(d.detail['required'])}")
                     for d in rules if d.detail["outcome"] == "abort")
