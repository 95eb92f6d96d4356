"""A run's or a batch's verdict as GitHub-flavoured Markdown, for a CI job summary or a pull-request comment
(``certa run --summary FILE``, ``certa batch --summary FILE``).

GitHub Actions shows the Markdown a step appends to the file ``$GITHUB_STEP_SUMMARY`` names on the run's
summary page ("Adding a job summary", docs.github.com/actions: workflow commands); GitLab and other CI systems
show the same Markdown as a merge-request note. A run's summary holds, in this order:

- the verdict in words (PASS, FAIL, INCONCLUSIVE, ABORTED by a profile rule, REFUSED: nothing recorded) with
  the sentence that says what it means;
- the gates, one table row each: gate, value, threshold, outcome with its recorded reason (as ``certa show``
  writes them, ``certa.engine.core.gates.gate_display``), or the profile rules that stopped an aborted run;
- each stage's one-line reading (its presentation module's ``reading``, the report section's summary);
- the run id and the digests (content, results, knobs, spec), and where the full report is: a link when
  ``--report-link`` gives one, else the command that writes it.

A batch's summary is one table row per spec (its name, run id, verdict or status, gates passed) and a totals
row. Every recorded string (a spec or gate name, a reason, a stage's reading) goes through
``certa.engine.services.presentation.display_text.markdown_text``: a ``|`` cannot break a table cell and a
``<script>`` is text, not HTML (GitHub strips most raw HTML, other renderers may not). Nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from certa.engine.core.gates import FAIL, INCONCLUSIVE, PASS, gate_display, gate_outcome, inconclusive_note
from certa.engine.services.presentation.display_text import markdown_code, markdown_text
from certa.engine.services.presentation.markdown import OUTCOME_WORDS, rule_text
from certa.engine.services.presentation.stages import presentation_of
from certa.ledger.location import command_hint

if TYPE_CHECKING:
    from certa.engine.services.batch import BatchRow

__all__ = ["ABORTED", "REFUSED", "run_summary", "batch_summary", "report_link", "REPORT_LINK_SCHEMES"]

ABORTED, REFUSED = "ABORTED", "REFUSED"
"""The two outcomes that are not a certificate's verdict: a profile rule stopped the run (recorded, exit 3), or
certa refused the spec or an input (nothing recorded, exit 2 or 5)."""

HEADLINES = {PASS: "✅ **PASS**", FAIL: "❌ **FAIL**", INCONCLUSIVE: "⚠️ **INCONCLUSIVE**",
             ABORTED: "⛔ **ABORTED**", REFUSED: "⛔ **REFUSED**"}
"""Each outcome as the summary's headline shows it: a sign for the eye, the word for everyone (a screen reader,
a plain-text mail, a colour-blind reader)."""

REPORT_LINK_SCHEMES = ("http://", "https://")
"""What a ``--report-link`` may start with besides a relative path: no ``javascript:`` or ``data:`` link."""

_URL_SAFE = ":/?#[]@!$&'*+,;=%~-._{}"
"""Characters a link keeps as given; every other one (a space, a parenthesis, ``<``, ``>``, ``|``, a backtick)
is percent-encoded, so that the link cannot end early or open markup."""


def report_link(template: str, run_id: str) -> str:
    """``template`` with ``{run_id}`` replaced by ``run_id`` and percent-encoded (``_URL_SAFE``): the URL or
    relative path of the run's report a summary links to."""
    return quote(template.replace("{run_id}", run_id), safe=_URL_SAFE)


def _report_line(run_id: str | None, ledger: str | None, link: str | None) -> str:
    """Where the full report is: the link, else the commands that write it (None: not recorded)."""
    if run_id is None:
        return "Not recorded (`--no-record`): no report can be written from the ledger."
    if link is not None:
        return f"Full report: [{markdown_text(run_id[:12])}]({report_link(link, run_id)})"
    return (f"Full report: `{command_hint('report', run_id[:12], '-o', f'{run_id[:12]}.html', ledger=ledger)}` "
            f"(HTML) or `{command_hint('show', run_id[:12], ledger=ledger)}` (Markdown).")


def _verdict_sentence(verdict: str, gates: Sequence[Mapping[str, Any]]) -> str:
    failed = sum(gate_outcome(gate) == FAIL for gate in gates)
    if verdict == PASS:
        return (f"Every gate passed ({len(gates)} of {len(gates)})." if gates else
                "No gates: the verdict is PASS by default.")
    if verdict == INCONCLUSIVE:
        return inconclusive_note(gates) or "No gate failed, but the evidence could not decide every gate."
    return f"{failed} of {len(gates)} gate(s) failed."


def _gate_rows(gates: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = ["| gate | value | threshold | outcome |", "|---|---|---|---|"]
    for gate in gates:
        shown = gate_display(gate)
        rows.append(f"| {markdown_text(gate.get('id'))} | {markdown_text(shown['value'])} | "
                    f"{markdown_text(shown['threshold'])} | {OUTCOME_WORDS[gate_outcome(gate)]}: "
                    f"{markdown_text(shown['reason'])} |")
    return rows


def _stage_lines(content: Mapping[str, Any]) -> list[str]:
    """Each stage's one-line reading (``reading`` of its presentation module); a stage type this certa has no
    presentation for is named only."""
    uses = {s["id"]: (s["use"], s["version"]) for s in content["knobs"]["stages"]}
    lines = []
    for stage_id, outputs in content["stages"].items():
        use, version = uses.get(stage_id, ("?", "?"))
        presentation = presentation_of(use)
        reading = presentation.reading(outputs if isinstance(outputs, Mapping) else {}) if presentation else ""
        lines.append(f"- {markdown_code(stage_id)} ({markdown_text(use)} v{markdown_text(version)})"
                     + (f": {markdown_text(reading)}" if reading else ""))
    return lines


def run_summary(*, name: str, certificate: Mapping[str, Any] | None = None, run_id: str | None = None,
                failed_rules: Sequence[Mapping[str, Any]] = (), abort_reason: str = "", error: str = "",
                ledger: str | None = None, link: str | None = None) -> str:
    """One run's summary (see the module docstring). ``certificate`` for a completed run; ``abort_reason`` and
    ``failed_rules`` (``certa.engine.services.presentation.markdown.failed_rules``) for a run a profile rule
    stopped; ``error`` for a spec or input certa refused. ``run_id`` is the recorded run's id (None: not
    recorded), ``ledger`` the ledger as the user named it (for the commands shown; a password is masked),
    ``link`` a ``--report-link`` template."""
    title = f"### certa run: {markdown_text(name)}"
    if error:
        return "\n".join([title, "", f"{HEADLINES[REFUSED]}: certa refused the spec or an input; nothing was "
                          "recorded.", "", f"> {markdown_text(error)}", ""])
    if certificate is None:
        recorded = "the attempt is recorded" if run_id is not None else "not recorded (`--no-record`)"
        lines = [title, "", f"{HEADLINES[ABORTED]}: a profile rule stopped the run before a certificate was issued; "
                 f"{recorded}.", ""]
        if abort_reason:
            lines += [f"> {markdown_text(abort_reason)}", ""]
        if failed_rules:
            lines += ["| profile rule | value, requirement |", "|---|---|"]
            lines += [f"| {markdown_text(rule['rule'])} | {markdown_text(rule_text(rule))} |" for rule in failed_rules]
            lines.append("")
        if run_id is not None:
            lines += [f"Run `{run_id}`; its decisions: "
                      f"`{command_hint('decisions', run_id[:12], '--kind', 'profile_rule', ledger=ledger)}`", ""]
        return "\n".join(lines)
    content = certificate["content"]
    verdict = str(content["verdict"])
    lines = [title, "", f"{HEADLINES.get(verdict, markdown_text(verdict))}: "
             f"{markdown_text(_verdict_sentence(verdict, content['gates']))}", ""]
    if content["gates"]:
        lines += [*_gate_rows(content["gates"]), ""]
    lines += ["**Stages**", "", *_stage_lines(content), ""]
    lines += ["| | |", "|---|---|",
              *([f"| run | {markdown_code(run_id)} |"] if run_id is not None else []),
              f"| spec | {markdown_text(content['spec']['name'])}, profile {markdown_text(content['spec']['profile'])}"
              " |",
              f"| content_sha256 | {markdown_code(certificate['content_sha256'])} |",
              f"| results_sha256 | {markdown_code(certificate['results_sha256'])} |",
              f"| knobs_hash | {markdown_code(content['knobs_hash'])} |",
              f"| spec sha256 | {markdown_code(content['spec']['sha256'])} |", ""]
    lines += [_report_line(run_id, ledger, link), ""]
    return "\n".join(lines)


def _row_outcome(row: BatchRow) -> str:
    if row.verdict is not None:
        return str(row.verdict)
    return ABORTED if row.exit_code == 3 else REFUSED


def batch_summary(batch_id: str, rows: Sequence[BatchRow], seconds: float, *, exit_code: int,
                  ledger: str | None = None, link: str | None = None) -> str:
    """A batch's summary: the batch's outcome (the worst of its rows, as its ``exit_code`` says), one table row
    per spec (the file, its name, the run id, the verdict or status, the gates passed, an error or abort reason;
    the run id links to ``link`` when given) and a totals row."""
    outcomes = [_row_outcome(row) for row in rows]
    worst = {0: PASS, 1: FAIL, 6: INCONCLUSIVE, 3: ABORTED}.get(exit_code, REFUSED)
    counts = {outcome: outcomes.count(outcome) for outcome in (PASS, FAIL, INCONCLUSIVE, ABORTED, REFUSED)}
    counted = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n)
    already = sum(row.already_recorded for row in rows)
    lines = [f"### certa batch: {markdown_text(batch_id)}", "",
             f"{HEADLINES[worst]}: {len(rows)} spec(s) in {seconds:.1f} s: {counted}"
             + (f" ({already} already recorded by this batch before)." if already else "."), "",
             "| spec | name | run | outcome | gates passed | note |", "|---|---|---|---|---:|---|"]
    passed_total = gates_total = 0
    for row, outcome in zip(rows, outcomes):
        passed = sum(gate_outcome(gate) == PASS for gate in row.gates)
        passed_total, gates_total = passed_total + passed, gates_total + len(row.gates)
        run = ("–" if row.run_id is None else
               f"[{markdown_text(row.run_id[:12])}]({report_link(link, row.run_id)})" if link is not None else
               markdown_code(row.run_id[:12]))
        note = "; ".join([*([row.error] if row.error else []), *(rule_text(rule) for rule in row.failed_rules)])
        lines.append(f"| {markdown_text(row.spec)} | {markdown_text(row.name or '–')} | {run} | "
                     f"{HEADLINES.get(outcome, markdown_text(outcome))} | {passed} of {len(row.gates)} | "
                     f"{markdown_text(note)} |")
    lines += [f"| **total** | | {sum(row.run_id is not None for row in rows)} run(s) | {markdown_text(counted)} | "
              f"{passed_total} of {gates_total} | |", ""]
    if link is None and any(row.run_id for row in rows):
        lines += [f"A run's full report: `{command_hint('report', 'RUN', '-o', 'RUN.html', ledger=ledger)}`.", ""]
    return "\n".join(lines)
