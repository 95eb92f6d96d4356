"""What a run recorded, in words for people: the certificate as a Markdown report for governance reviewers
(``certa show``), a run's decisions one line each (``certa decisions``), failed profile rules, field changes
(``certa diff``, ``certa replay``).

Formatting of stored records (the report: identity (run, hashes, seed, profile), inputs, each stage's own
Markdown (``certa.engine.services.presentation.stages.markdown_of``), the gates and the library versions), and two readers that stream a
run's recorded decisions from the ledger. Nothing is recomputed. Values are written by the one formatter,
``certa.engine.core.value_text.format_value``, in JSON's words (``null``, ``true``, ``false``).

Every recorded string is shown through ``certa.engine.services.presentation.display_text``: the Markdown report escapes it for Markdown
and HTML, the one-line texts (decisions, changes, failed rules) lose control and bidi characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from certa.engine.foundation.canonical import to_jsonable
from certa.engine.core.certificate import results_sha256
from certa.engine.services.presentation.input_notes import endpoint_note, model_files, override_note, unread_note
from certa.engine.services.presentation.registration_note import registration_note
from certa.engine.services.presentation.display_text import markdown_code, markdown_strings, markdown_text, plain_text
from certa.engine.services.presentation.explain import how_to_read
from certa.engine.services.presentation.stages import markdown_of
from certa.engine.core.gate_family import stated_family
from certa.engine.core.gates import FAIL, INCONCLUSIVE, PASS, gate_display, gate_outcome, inconclusive_note
from certa.engine.foundation.jsondiff import ArrayChange, FieldChange
from certa.engine.core.stages import Decision
from certa.engine.core.value_text import format_value

if TYPE_CHECKING:
    from certa.ledger.rows import EntryRow, RunReads

__all__ = ["certificate_markdown", "failed_rules", "rule_text", "recorded_warnings", "warnings_of",
           "recorded_decisions", "recorded_abort", "decision_line", "change_text", "array_change_text"]


OUTCOME_WORDS = {PASS: "PASS", FAIL: "**FAIL**", INCONCLUSIVE: "_**INCONCLUSIVE**_"}
"""A gate's outcome in a Markdown table: FAIL in bold, INCONCLUSIVE in bold italics (Markdown has no colour)."""


def failed_rules(decisions: Iterable[Decision]) -> tuple[dict[str, Any], ...]:
    """The profile rules among ``decisions`` that stopped the run (``profile_rule`` decisions whose outcome is
    ``abort``): ``{"rule", "value", "required", "profile"}`` each, as plain JSON values (a stage's decision may
    hold numpy scalars until the ledger encodes it)."""
    return tuple(to_jsonable({key: d.detail.get(key) for key in ("rule", "value", "required", "profile")})
                 for d in decisions if d.kind == "profile_rule" and d.detail.get("outcome") == "abort")


def rule_text(rule: Mapping[str, Any]) -> str:
    """``rule = value, required required`` for a failed rule of ``failed_rules``."""
    return plain_text(f"{rule['rule']} = {format_value(rule['value'])}, required {format_value(rule['required'])}")


def recorded_decisions(ledger: RunReads, run_id: str, *, kind: str | None = None,
                       after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
    """A recorded run's decisions in order, streamed from the ledger (a run may hold 10^6 per-row decisions):
    ``(seq, {"stage", "index", "kind", "detail"})``, only those of ``kind`` when given (filtered by the
    database first), only entries after seq ``after`` (for paging)."""
    containing = None if kind is None else f'"kind":{json.dumps(kind, ensure_ascii=False)}'
    for entry in ledger.entries(run_id=run_id, kinds=["decision"], after=after, containing=containing):
        payload = entry.data()
        if kind is None or payload.get("kind") == kind:
            yield entry.seq, payload


def recorded_warnings(ledger: RunReads, run_id: str) -> tuple[str, ...]:
    """The warnings a recorded run printed when it ran, read back from its decisions (``warnings_of``): the
    database filters the entries' text first, so a run with 10^6 per-row decisions is not read whole."""
    from certa.engine.services.presentation.warnings import WARNING_MARK
    return warnings_of(ledger.entries(run_id=run_id, kinds=["decision"], containing=WARNING_MARK)).get(run_id, ())


def warnings_of(entries: Iterable[EntryRow]) -> dict[str, tuple[str, ...]]:
    """Run id -> the warning lines (``certa.engine.core.interpreter.warning_line``) of those of ``entries`` (decision
    entries, in chain order) whose outcome is ``warn``."""
    from certa.engine.services.presentation.warnings import warning_line
    found: dict[str, list[str]] = {}
    for entry in entries:
        payload = entry.data()
        line = warning_line(payload.get("stage"), Decision(payload.get("kind", "?"), payload.get("detail") or {}))
        if line is not None:
            found.setdefault(entry.run_id, []).append(line)
    return {run_id: tuple(lines) for run_id, lines in found.items()}


def recorded_abort(ledger: RunReads, run_id: str) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    """An aborted run's ``abort`` entry (reason, rule, stage) and the profile rules that stopped it
    (``failed_rules`` of its recorded decisions)."""
    abort = next(e.data() for e in ledger.entries(run_id=run_id, kinds=["abort"]))
    rules = failed_rules(Decision(p["kind"], p["detail"])
                         for _, p in recorded_decisions(ledger, run_id, kind="profile_rule"))
    return abort, rules


def decision_line(seq: int, payload: Mapping[str, Any]) -> str:
    """One decision on one line: seq, stage (``gates`` for a gate), kind and its detail as compact JSON
    (``plain_text``: no control or bidi characters)."""
    detail = json.dumps(payload.get("detail"), sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    return plain_text(f"{seq:>8}  {payload.get('stage') or 'gates':<16} {payload.get('kind', '?'):<20} {detail}")


def array_change_text(change: ArrayChange) -> str:
    """How an array changed, in words: ``N elements differ, the largest by X at [i]``."""
    if change.largest is None:
        return f"{len(change.changes)} elements differ"
    return f"{len(change.changes)} elements differ, the largest by {format_value(change.largest)} at [{change.largest_at}]"


def change_text(change: FieldChange | ArrayChange, *, sides: tuple[str, str] = ("", "")) -> str:
    """A change on one line: ``path: A -> B`` (``sides`` name them: ``path: recorded A -> replayed B``), or
    ``path: N elements differ, the largest by X at [i]`` for an ``ArrayChange`` (``plain_text``: no control
    or bidi characters)."""
    if isinstance(change, ArrayChange):
        return plain_text(f"{change.path}: {array_change_text(change)}")
    before, after = (f"{side} " if side else "" for side in sides)
    return plain_text(f"{change.path}: {before}{format_value(change.before)} -> {after}{format_value(change.after)}")


def _generic_outputs(outputs: Mapping[str, Any]) -> list[str]:
    rows = ["| output | value |", "|---|---|"]
    rows += [f"| {markdown_code(key)} | {markdown_text(format_value(value))} |" for key, value in outputs.items()]
    return rows


def certificate_markdown(certificate: Mapping[str, Any], *, explain: bool = False,
                         warnings: Sequence[str] = ()) -> str:
    """The whole certificate as one Markdown document; with ``explain``, each stage's section opens with the
    plain-language paragraphs of ``certa.engine.services.presentation.explain.how_to_read`` (what was tested, what the verdict means and
    does not mean, the assumptions). ``warnings`` (``recorded_warnings``) are listed below the identity table:
    what the run warned about when it ran (a profile rule ``dev`` let through, a column left unused, ...)."""
    content = certificate["content"]
    issued = certificate["issued"]
    spec = content["spec"]
    text, code = markdown_text, markdown_code  # every recorded string is shown escaped (certa.engine.services.presentation.display_text)
    lines = [
        f"# {text(spec['name'])}: {text(content['verdict'])}",
        "",
        text(spec["description"].strip(), newlines=True) if spec["description"] else "",
        "",
        *([f"**{text(note)}**", ""] if (note := override_note(content["inputs"])) else []),
        *([f"> {text(undecided)}", ""] if (undecided := inconclusive_note(content["gates"])) else []),
        "| | |",
        "|---|---|",
        f"| run | {code(issued['run_id'])} |",
        f"| issued | {text(issued['time_utc'])} by {text(issued['user'])} on {text(issued['host'])} |",
        f"| content_sha256 | {code(certificate['content_sha256'])} |",
        f"| results_sha256 | {code(results_sha256(content))} |",
        f"| knobs_hash | {code(content['knobs_hash'])} |",
        *([f"| registration | {text(note)} |"] if (note := registration_note(content)) else []),
        f"| spec sha256 | {code(spec['sha256'])} |",
        f"| profile | {text(spec['profile'])} |",
        f"| seed | {text(content['seed']['root'])} |",
        "",
        *([f"## Warnings ({len(warnings)})", "", *(f"- {text(line)}" for line in warnings), ""] if warnings else []),
        "## Inputs",
        "",
        "| input | rows | format | sha256 |",
        "|---|---:|---|---|",
    ]
    lines += [f"| {text(i['name'])} | {text(i['rows'])} | {text(i['format'])} | {code(i['sha256'])} |"
              for i in content["inputs"]]
    for item in content.get("captured", []):
        lines.append(f"| {text(item['name'])} (captured by stage {text(item['stage'])}) | {text(item['rows'])} | csv "
                     f"| {code(item['sha256'])} |")
    for item in content["inputs"]:
        for note in (unread_note(item), endpoint_note(item)):
            if note is not None:
                lines += ["", text(note)]
    for item in content["inputs"]:
        files = model_files(item)
        if files:
            lines += ["", f"Files of model input {code(item['name'])} (their manifest's SHA-256 is the input's; each "
                          "line is what `sha256sum` prints for the file):", "",
                      "| file | bytes | sha256 | loaded as |", "|---|---:|---|---|"]
            lines += [f"| {code(path)} | {size} | {code(sha)} | {text(role)} |" for path, size, sha, role in files]
    stage_uses = {s["id"]: (s["use"], s["version"]) for s in content["knobs"]["stages"]}
    for stage_id, outputs in content["stages"].items():
        use, version = stage_uses.get(stage_id, ("?", "?"))
        render = markdown_of(use, version)
        lines += ["", f"## Stage {code(stage_id)} ({text(use)} v{text(version)})", ""]
        shown = markdown_strings(outputs)  # the stages' renderers place output strings into Markdown as they are
        if explain:
            for paragraph in how_to_read(use, shown):
                lines += [paragraph, ""]
        if render is not None:
            lines += plain_text(render(shown), newlines=True).splitlines()
        else:
            lines += _generic_outputs(outputs)
    lines += ["", "## Gates", ""]
    family = stated_family(content)
    lines += [f"_What the gates claim together ({text(family['claim'])}):_ {text(family['statement'])}", ""]
    if family.get("members"):
        lines += ["| family member | p-value | adjusted p-value | differs |", "|---|---|---|---|"]
        lines += [f"| {text(m['gate'])} | {text(m['p_value'])} | {text(m['adjusted_p_value'])} | "
                  f"{'yes' if m['differs'] else 'not shown'} |" for m in family["members"]]
        lines.append("")
    if content["gates"]:
        lines += ["| gate | metric | value | threshold | result |", "|---|---|---|---|---|"]
        for gate in content["gates"]:
            shown_gate = gate_display(gate)
            lines.append(f"| {text(gate['id'])} | {code(gate['metric'])} | {text(shown_gate['value'])} | "
                         f"{text(shown_gate['threshold'])} | {OUTCOME_WORDS[gate_outcome(gate)]}: "
                         f"{text(shown_gate['reason'])} |")
    else:
        lines.append("No gates: the verdict is PASS by default.")
    versions = ", ".join(f"{k} {v}" for k, v in sorted(content["versions"].items()))
    lines += ["", f"_Library versions: {text(versions)}._", ""]
    return "\n".join(lines)
