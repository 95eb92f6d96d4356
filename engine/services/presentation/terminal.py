"""What the ``certa`` commands print on a terminal: the text form of each service's result.

Each function takes a result object (``LedgerAudit``, ``Replays``, ...) and returns the lines the command
prints, joined by newlines, with user strings passed through ``plain_text`` (no control or bidi characters).
``cli.py`` calls them; a service never does (its results hold data, not text: ``tests/test_layers.py``).
The JSON form of the same results is their own ``as_json()``; nothing here is recorded. This module loads
only the display helpers and ``certa.ledger.location`` (``certa list`` starts at once); the functions that need the
Markdown helpers (changes, rules, decisions, reports), the JSON diff or the stage registry load them when
called.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from certa.engine.services.presentation.display_text import plain_text
from certa.ledger.location import command_hint, masked_ledger

if TYPE_CHECKING:
    from certa.engine.services.attestation import AttestationReport
    from certa.engine.services.audit import BundleVerification, LedgerAudit, ReplayResult, Replays
    from certa.engine.services.batch import BatchReport
    from certa.engine.services.browse import BundleView, DecisionListing, RunDiff, RunView
    from certa.engine.services.run_list import RunList
    from certa.engine.services.run_report import RunReport
    from certa.engine.services.specs import StageCatalog
    from certa.engine.services.reviews import ReviewRecord

__all__ = ["ledger_audit_text", "replay_text", "replays_text", "key_ids_text", "run_list_text", "stage_catalog_text",
           "attestation_report_text", "bundle_report_text", "bundle_view_text", "review_status_text", "run_view_text", "decision_listing_text", "run_diff_text",
           "warning_lines", "run_report_diagnostics", "run_report_text", "run_summary_text",
           "batch_report_text", "batch_report_diagnostics"]

SHOWN_PROBLEMS = 20
"""``certa verify`` names at most this many integrity problems, and the newest this many reviews."""

SHOWN_CHANGES = 50
"""``certa replay RUN`` lists at most this many changed result fields (``--json`` lists them all)."""


def key_ids_text(key_ids: tuple[str, ...] | list[str]) -> str:
    """Key ids shortened for a line: the first 16 hex digits of each, comma-separated."""
    return ", ".join(k[:16] + "…" for k in key_ids)


def ledger_audit_text(audit: LedgerAudit) -> str:
    """``certa verify``: intact (with counts and head) or TAMPERED (the first problem, then up to 19 more),
    the reviews with their signature status and signer (``certa.engine.core.approvals.review_signer``: a claimed
    name is never shown as who signed), the approval result when keys were required, and each PASS run's
    approval under the trust policy when one was given."""
    from certa.engine.core.approvals import review_signer
    report = audit.report
    scope = report.scope
    if report.intact:
        lines = [f"intact: {report.entries_checked} entries, {report.certificates_checked} certificate(s), "
                 f"{report.blobs_checked} stored input(s) checked; head {report.head[0]}:{report.head[1]}"]
    else:
        first = report.problems[0]
        lines = [plain_text(f"TAMPERED: first broken: {first.where}: {first.message}")]
        lines += [plain_text(f"  also: {p.where}: {p.message}") for p in report.problems[1:SHOWN_PROBLEMS]]
        if len(report.problems) > SHOWN_PROBLEMS:
            lines.append(f"  ... and {len(report.problems) - SHOWN_PROBLEMS} more")
    checked, not_checked = audit.checkpoint_checks()
    if checked:
        lines.append("checkpoint:")
        lines += [f"  checked: {what}" for what in checked]
        lines += [f"  not checked: {what}" for what in not_checked]
    if scope is not None and audit.checkpoint is not None:
        signed = audit.checkpoint
        lines.append(f"incremental: entries 1..{scope.vouched} vouched for by the checkpoint signed by "
                     f"{key_ids_text(signed.key_ids)} at {signed.signed_at} (its entry and Merkle root checked "
                     f"against the ledger); entries {scope.first}..{scope.last} verified")
        lines += [f"  not checked: {what}" for what in scope.not_checked]
    if audit.recorded:
        lines.append(f"verification {audit.recorded}")
    if audit.reviews:
        signed = [r for _, r in audit.reviews if r.signed]
        failing = sum(1 for r in signed if not r.signature_valid)
        lines.append(f"reviews: {len(audit.reviews)} ({len(signed)} signed, "
                     f"{'all verify' if not failing else f'{failing} do not verify'}; "
                     f"{len(audit.reviews) - len(signed)} unsigned)"
                     f"{f'; the newest {SHOWN_PROBLEMS}:' if len(audit.reviews) > SHOWN_PROBLEMS else ''}")
        lines += [plain_text(f"  entry {r.seq}: {r.decision} run {rid} ({review_status_text(r)}); signer: "
                             f"{review_signer(r, audit.signer_policy(rid)).text}")
                  for rid, r in audit.reviews[-SHOWN_PROBLEMS:]]
    if audit.required_key_ids:
        if audit.approved:
            lines.append(f"approved: {audit.runs_checked} PASS run(s), each approved by all "
                         f"{len(audit.required_key_ids)} required key(s)")
        lines += [plain_text(f"NOT APPROVED: run {gap.run_id} ({gap.name}) by key {gap.key_id[:16]}…: {gap.reason}")
                  for gap in audit.missing]
        lines.append(f"  approvals read from {audit.approvals_read_from}")
    if audit.policy is not None or audit.decisions:
        approved = sum(d.approved for d in audit.decisions)
        under = (f"policy {audit.policy.source} (sha256 {audit.policy.sha256[:16]}…)" if audit.policy is not None
                 else "the policies the runs' specs name")
        lines.append(plain_text(f"{under}: {approved} of {len(audit.decisions)} PASS run(s) APPROVED"))
        lines += [plain_text(f"  run {d.run_id}: {d.text()}") for d in audit.decisions]
    return "\n".join(lines)


def review_status_text(record: ReviewRecord) -> str:
    """"unsigned", or the signers and whether the review verifies (and is in its signing order)."""
    if not record.signed:
        return "unsigned"
    return (f"signed by {key_ids_text(record.key_ids)}: " + ("verifies" if record.signature_valid else "DOES NOT VERIFY")
            + (f", but recorded after entry {record.out_of_order}, which one of its keys signed later"
               if record.out_of_order is not None else ""))


def replay_text(result: ReplayResult) -> str:
    """``certa replay RUN``: the outcome and note, then the changed result fields (at most 50)."""
    from certa.engine.foundation.jsondiff import summarised
    from certa.engine.services.presentation.markdown import change_text
    lines = [plain_text(f"{result.outcome}: run {result.run_id}: {result.note}")]
    changes = summarised(result.changes)
    lines += [f"  {change_text(change, sides=('recorded', 'replayed'))}" for change in changes[:SHOWN_CHANGES]]
    if len(changes) > SHOWN_CHANGES:
        lines.append(f"  ... and {len(changes) - SHOWN_CHANGES} more (--json lists them all)")
    return "\n".join(lines)


def _replay_detail(result: ReplayResult) -> str:
    """The table's detail column: the changed fields (most material first, a long array once) or the note of
    a run not reproduced; the environment differences of one reproduced."""
    if not result.reproduced:
        from certa.engine.foundation.jsondiff import summarised
        fields = [c.path for c in summarised(result.changes)]
        return ", ".join(fields[:5]) + (f" (+{len(fields) - 5} more)" if len(fields) > 5 else "") or result.note
    return f"environment differs: {', '.join(c.path for c in result.environment)}" if result.environment else ""


def replays_text(replays: Replays) -> str:
    """``certa replay RUN`` (one run) or ``certa replay --all`` (one row per run, then the counts)."""
    if not replays.every:
        return replay_text(replays.results[0])
    if not replays.results:
        return "no completed runs match"
    lines = [f"{'run':<12}  {'name':<28} {'outcome':<13} detail"]
    lines += [plain_text(f"{r.run_id[:12]}  {r.name[:28]:<28} {r.outcome:<13} {_replay_detail(r)}".rstrip())
              for r in replays.results]
    lines.append(f"{len(replays.results)} run(s): "
                 + ", ".join(f"{n} {outcome}" for outcome, n in replays.counts().items()))
    return "\n".join(lines)


def run_list_text(runs: RunList) -> str:
    """``certa list``: one line per run (id, time, verdict or status, profile, name)."""
    rows = runs.rows
    if not rows:
        return "no runs recorded yet"
    return "\n".join(plain_text(f"{r.run_id[:12]}  {r.recorded_at[:19]}  {(r.verdict or r.status.upper()):<8} "
                                f"{r.profile:<8} {r.name}") for r in rows)


def stage_catalog_text(catalog: StageCatalog) -> str:
    """``certa stages``: each stage type and its summary, then its versions, newest first, with their status
    and what changed."""
    lines = []
    for name in catalog.names:
        versions = [v for v in catalog.versions if v.name == name]
        lines.append(f"{name:<22} {versions[-1].summary}")
        lines += [f"  {v.version:<8} {v.status}{f': {v.changes}' if v.changes else ''}" for v in reversed(versions)]
    return "\n".join(lines)


def _not_verified_text(problems: tuple[str, ...]) -> str:
    """NOT VERIFIED with the first problem, then each other one."""
    return "\n".join([f"NOT VERIFIED: {plain_text(problems[0])}", *(f"  also: {plain_text(p)}" for p in problems[1:])])


def attestation_report_text(report: AttestationReport) -> str:
    """``certa verify-attestation``: VERIFIED (certificate, run, verdict, signers, then each file's subject; for
    a Test Result or eval-result, that the certificate is named by digest, not checked) or NOT VERIFIED."""
    if not report.verified:
        return _not_verified_text(report.problems)
    named_only = [f"  this {report.predicate} attestation names the certificate by this digest but does not carry it: "
                  "check the certificate itself with 'certa verify-bundle'"] if report.predicate != "certificate" else []
    return "\n".join([f"VERIFIED: certificate {report.content_sha256} of run {report.run_id} ({report.verdict}), "
                      f"signed by {key_ids_text(report.key_ids)}", *named_only,
                      *(f"  {label} is {subject}" for label, subject in report.files)])


def bundle_report_text(verification: BundleVerification) -> str:
    """``certa verify-bundle``: VERIFIED (the certificate is entry N of the ledger whose first M entries the
    checkpoint's keys signed) or NOT VERIFIED; then, for a bundle that carries reviews (format 2), each review
    in words and what the bundle cannot show."""
    report = verification.report
    if not report.verified:
        return _not_verified_text(report.problems)
    lines = [f"VERIFIED: certificate {report.content_sha256} of run {report.run_id} is entry {report.seq} of the "
             f"ledger whose first {report.checkpoint.seq} entries key(s) {key_ids_text(report.checkpoint.key_ids)} "
             f"signed at {report.checkpoint.signed_at}"]
    if report.format == 1:
        return lines[0]
    reviews = verification.reviews
    lines.append(f"reviews: {len(reviews)}, each proven included in the same signed ledger as a review of this run"
                 if reviews else f"reviews: none recorded at or before entry {report.checkpoint.seq}")
    lines += [plain_text(f"  entry {r.seq} ({r.recorded_at}): {r.decision}, reviewer named '{r.reviewer}' "
                         f"({review_status_text(r)}){f': {r.note}' if r.note else ''}") for r in reviews]
    lines.append("  not checked: that the bundle carries every review of the run (one left out shows only in the "
                 "ledger); who holds the signing keys (a key id is not a person: compare it with keys you obtained "
                 "separately)" if verification.approval is None else
                 "  not checked: that the bundle carries every review of the run (one left out shows only in the "
                 "ledger)")
    if verification.approval is not None:
        lines.append(plain_text(f"approval under the policy: {verification.approval.text()}"))
    return "\n".join(lines)


def bundle_view_text(view: BundleView) -> str:
    """``certa show BUNDLE_FILE``: the note of where the certificate came from and what was verified (a Markdown
    quote), then the certificate's Markdown as ``certa show RUN`` prints it; NOT VERIFIED and each problem when
    the bundle failed a check with the keys given."""
    if view.verification is not None and not view.verification.verified:
        return bundle_report_text(view.verification)
    from certa.engine.services.presentation.bundle_note import bundle_source_lines
    from certa.engine.services.presentation.display_text import markdown_text
    from certa.engine.services.presentation.markdown import certificate_markdown
    reviews = [f"review entry {r.seq}: {r.decision}, reviewer named '{r.reviewer}' ({review_status_text(r)})"
               for r in view.verification.reviews] if view.verification is not None else []
    note = "\n>\n".join(f"> {markdown_text(line)}" for line in [*bundle_source_lines(view), *reviews])
    return f"{note}\n\n{certificate_markdown(view.certificate, explain=view.explain)}"


def run_view_text(view: RunView) -> str:
    """``certa show``: a completed run's certificate as a Markdown report with its approval section, or an
    aborted run's reason, each failed rule and where to read its decisions."""
    from certa.engine.services.presentation.approval_text import approval_markdown
    from certa.engine.services.presentation.markdown import certificate_markdown, rule_text
    if view.certificate is not None:
        approval = [] if view.approval is None else ["", *approval_markdown(view.approval, view.reviews, view.policy)]
        return "\n".join([certificate_markdown(view.certificate, explain=view.explain, warnings=view.warnings),
                          *approval])
    row, abort = view.row, view.abort or {}
    return "\n".join([plain_text(f"{row.name}: ABORTED (profile {row.profile}) run {row.run_id}"),
                      f"  {plain_text(abort['reason'])}", *(f"  failed: {rule_text(rule)}" for rule in view.rules),
                      f"its decisions: {command_hint('decisions', row.run_id[:12], ledger=view.ledger)}"])


def decision_listing_text(listing: DecisionListing) -> Iterator[str]:
    """``certa decisions``, streamed: one line per decision, then the command for the next page (or that
    there are none)."""
    from certa.engine.services.presentation.markdown import decision_line
    for seq, payload in listing.decisions():
        yield decision_line(seq, payload) + "\n"
    if listing.last is None:
        kind = "decisions" if listing.kind is None else f"{listing.kind} decisions"
        yield (f"no {kind} recorded for run {listing.run_id}"
               + (f" after entry {listing.after}" if listing.after else "") + "\n")
    elif listing.more:
        following = ["decisions", listing.run_id[:12], *(["--kind", listing.kind] if listing.kind else []),
                     "--limit", str(listing.limit), "--after", str(listing.last)]
        yield f"... more: {command_hint(*following, ledger=listing.ledger)}\n"


def run_diff_text(diff: RunDiff) -> str:
    """``certa diff``: how many fields differ, one line per change, then how many are equal."""
    from certa.engine.services.presentation.markdown import change_text
    lines = [f"{diff.run_a[:12]} vs {diff.run_b[:12]}: "
             f"{'identical content' if not diff.changes else f'{len(diff.changes)} field(s) differ'}"]
    lines += [f"  {change_text(change)}" for change in diff.lines]
    if not diff.only_changed and diff.changes:
        lines.append(f"  ({diff.equal} field(s) equal)")
    return "\n".join(lines)


def warning_lines(warnings: Sequence[str]) -> list[str]:
    """Each warning as a ``warning: ...`` line for stderr."""
    return [f"warning: {plain_text(line)}" for line in warnings]


def run_report_diagnostics(report: RunReport) -> str:
    """``certa run`` on stderr: each warning, and for an aborted run the reason and each failed rule with its
    value and requirement (empty when there is nothing to say)."""
    lines = warning_lines(report.warnings)
    if report.abort is not None:
        from certa.engine.services.presentation.markdown import rule_text
        lines += [f"error: {report.abort}", *(f"  failed: {rule_text(rule)}" for rule in report.rules)]
    return "\n".join(lines)


def run_summary_text(certificate: Mapping[str, Any]) -> str:
    """A few lines for the terminal after a run: verdict, identity, gates ('certa show' has the report)."""
    from certa.engine.core.gate_family import stated_family
    from certa.engine.core.gates import gate_display, gate_outcome, inconclusive_note
    from certa.engine.services.presentation.registration_note import registration_note
    content = certificate["content"]
    lines = [
        f"{content['spec']['name']}: {content['verdict']}",
        f"  run {certificate['issued']['run_id']}  profile {content['spec']['profile']}",
        f"  content_sha256 {certificate['content_sha256']}",
        f"  results_sha256 {certificate['results_sha256']}",
        f"  knobs_hash     {content['knobs_hash']}",
        *([f"  {note}"] if (note := registration_note(content)) else []),
    ]
    for gate in content["gates"]:
        shown = gate_display(gate)
        lines.append(f"  gate {gate['id']}: {gate_outcome(gate)}  {gate['metric']} = "
                     f"{shown['value']}, {shown['threshold']}  ({shown['reason']})")
    if not content["gates"]:
        lines.append("  (no gates: the verdict is PASS by default)")
    note = inconclusive_note(content["gates"])
    if note:
        lines.append(f"  {note}")
    family = stated_family(content)
    if family.get("members") is not None:
        differing = sum(bool(m["differs"]) for m in family["members"])
        lines.append(f"  family {family['claim']} ({family['correction']}, alpha {family['alpha']!r}): "
                     f"{differing} of {len(family['members'])} member(s) differ")
    elif len(content["gates"]) > 1:
        lines.append("  family all: every gate must pass, each at its own level (no correction)")
    return "\n".join(plain_text(line) for line in lines)


def run_report_text(report: RunReport) -> str:
    """``certa run`` on stdout: the summary and where the run is recorded; for an aborted run where its
    decisions are."""
    run_id, ledger = report.run_id, report.ledger
    if report.abort is not None:
        if run_id is None:
            return "aborted run not recorded (--no-record)"
        if report.abort.rule == "registration":  # refused before any stage: no decision, the reason says it all
            return (f"recorded aborted run {run_id} in {masked_ledger(ledger or '')} (its spec differs from its "
                    "registration)")
        return (f"recorded aborted run {run_id} in {masked_ledger(ledger or '')}; its decisions: "
                f"{command_hint('decisions', run_id[:12], '--kind', 'profile_rule', ledger=ledger)}")
    assert report.result is not None
    summary = run_summary_text(report.result.certificate)
    if run_id is None:
        return summary
    policy = report.result.policy
    approval = "" if policy is None else f"\napproval policy named by the spec: {policy.text()}"
    return (f"{summary}\nrecorded run {run_id} in {masked_ledger(ledger or '')}; the full report: "
            f"{command_hint('show', run_id[:12], ledger=ledger)}{approval}")


def batch_report_text(report: BatchReport) -> str:
    """``certa batch``: the batch, then one line per spec (run id, verdict or status, error or "already
    recorded") with each profile rule that stopped its run."""
    from certa.engine.services.presentation.markdown import rule_text
    width = max(len(row.spec) for row in report.rows)
    lines = [f"batch {report.batch_id}: {len(report.rows)} spec(s) in {report.seconds:.1f} s"]
    for row in report.rows:
        outcome = row.verdict or row.status.upper()
        note = f"  {row.error}" if row.error else ("  already recorded" if row.already_recorded else "")
        lines.append(plain_text(f"  {row.spec:<{width}}  {row.run_id or '-':<32}  {outcome:<7}{note}"))
        lines += [f"  {'':<{width}}  failed: {rule_text(rule)}" for rule in row.failed_rules]
    lines += [plain_text(f"  skipped {file.path}: {file.reason}") for file in report.skipped]
    return "\n".join(lines)


def batch_report_diagnostics(report: BatchReport) -> str:
    """``certa batch`` on stderr: each run's warnings, named by the run's spec name."""
    return "\n".join(warning_lines([f"{row.name}: {line}" for row in report.rows for line in row.warnings]))
