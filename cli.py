"""The ``certa`` command: a thin shell over ``engine`` and ``ledger``.

Exit codes: 0 success / PASS / intact / reproduced; 1 FAIL / tampered / diverged; 2 invalid spec, input or
usage (nothing recorded), or a file that cannot be written (nothing partial is left); 3 aborted by a profile
rule (the attempt is recorded, no certificate); 4 ``certa run`` recorded the run but could not write its
``-o`` / ``--junit`` file (the message names the run and ``certa export RUN -o FILE``; do not run it again).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from engine.services.presentation.display_text import json_display, plain_text
from engine.foundation.errors import BundleError, CertaError, OutputError, ProfileAbort, RecordedOutputError
from ledger import DEFAULT_LEDGER_FILE

if TYPE_CHECKING:  # the command starts at once: numpy, scipy, numba, SQLAlchemy and cryptography load per command
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from engine.services.audit import ReplayResult
    from ledger import Ledger, RunRow

EXIT_OK, EXIT_FAIL, EXIT_INVALID, EXIT_ABORTED = 0, 1, 2, 3


def _emit_json(data: Any) -> None:
    click.echo(json_display(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)))


def _error_json(error: CertaError) -> dict[str, Any]:
    return {"ok": False, "error": {"type": type(error).__name__, "message": str(error), "exit_code": error.exit_code}}


def _fail(ctx_json: bool, error: CertaError) -> None:
    if ctx_json:
        _emit_json(_error_json(error))
    click.echo(f"error: {plain_text(error)}", err=True)
    sys.exit(error.exit_code)


def _warn(lines: tuple[str, ...]) -> None:
    for line in lines:
        click.echo(f"warning: {plain_text(line)}", err=True)


def certa_command(func: Callable[..., int | None]) -> Callable[..., None]:
    """Add --json and --ledger, map CertaError to its exit code, and exit with the command's code."""

    @click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
    @click.option("--ledger", "ledger_url", envvar="CERTA_LEDGER", default=DEFAULT_LEDGER_FILE, show_default=True,
                  help="Ledger: a SQLite file path or a SQLAlchemy URL (postgresql+psycopg://...). Env: CERTA_LEDGER.")
    @functools.wraps(func)
    def wrapper(*args: Any, as_json: bool, ledger_url: str, **kwargs: Any) -> None:
        try:
            code = func(*args, as_json=as_json, ledger_url=ledger_url, **kwargs)
        except CertaError as error:
            _fail(as_json, error)
        sys.exit(code or 0)

    return wrapper


def _open(ledger_url: str, *, write: bool = False) -> Ledger:
    """An existing ledger, opened read-only (it may sit on read-only media) unless the command ``write``s to it."""
    from ledger import Ledger
    return Ledger.open(ledger_url, create=False, read_only=not write)


def _newest_runs(ledger_url: str, limit: int) -> list[RunRow]:
    """The newest runs: a SQLite file through the standard library's sqlite3 (no SQLAlchemy import, so
    ``certa list`` answers in about 0.1 s), a database URL through the ledger store."""
    from ledger.location import plain_sqlite_path
    path = plain_sqlite_path(ledger_url)
    if path is not None:
        from ledger.sqlite_read import newest_runs
        return newest_runs(path, limit)
    with _open(ledger_url) as ledger:
        return ledger.runs(limit=limit)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="certa")
def main() -> None:
    """certa: YAML run specs in, statistical certificates out, every run in a tamper-evident ledger.

    \b
    Quick start:
      certa validate specs/paired-ratio/spec.yaml
      certa run specs/paired-ratio/spec.yaml
      certa list
      certa verify
      certa replay RUN_ID
    """


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@certa_command
def validate(spec: Path, as_json: bool, ledger_url: str) -> int:
    """Validate SPEC against the schemas without running it. Exit 0 valid, 2 invalid.

    \b
    Example:
      certa validate specs/paired-ratio/spec.yaml
    """
    from engine import load_plan
    plan = load_plan(spec)
    if as_json:
        _emit_json({"ok": True, "name": plan.name, "knobs_hash": plan.knobs_hash, "spec_sha256": plan.spec_sha256,
                    "stages": [{"id": s.id, "use": s.use, "version": s.version} for s in plan.stages]})
    else:
        click.echo(f"{spec}: valid ({len(plan.stages)} stage(s), {len(plan.gates)} gate(s)); "
                   f"knobs_hash {plan.knobs_hash}")
    return EXIT_OK


def _parse_input_overrides(values: tuple[str, ...]) -> dict[str, Path]:
    overrides = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"expected NAME=PATH, got {value!r}", param_hint="--input")
        overrides[name] = Path(path).expanduser().resolve()
    return overrides


@main.command("run")
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--input", "input_overrides", multiple=True, metavar="NAME=PATH",
              help="Read input NAME from PATH instead of the spec's path (may be outside the spec's folder).")
@click.option("--no-record", is_flag=True, help="Run without writing to the ledger (the run id is not kept).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the certificate JSON to this file.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a JUnit XML report to this file for CI test reporters (one test case per gate, per "
                   "profile rule that aborted the run, or an error case for a refused spec or input), also when "
                   "the run fails or aborts. Example: certa run spec.yaml --junit reports/certa.xml")
@certa_command
def run_command(spec: Path, input_overrides: tuple[str, ...], no_record: bool, output: Path | None,
                junit_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Run SPEC, record it in the ledger and print the verdict, the run id and the run's warnings (on
    stderr, 'warning: ...'). An aborted run prints its run id and each failed profile rule with its value and
    requirement.

    Exit 0 PASS, 1 FAIL, 2 invalid spec or input (nothing recorded), 3 aborted by a profile rule
    (the attempt and its reason are recorded, no certificate).

    \b
    Examples:
      certa run specs/paired-ratio/spec.yaml
      certa run spec.yaml --input subject=/data/eval/subject.csv --json
      certa run spec.yaml --ledger ../ledger.db --junit reports/certa.xml
    """
    import time

    from engine import load_plan
    from engine.core.interpreter import check_data_keys, load_tables
    from engine.services.run import ledger_for_run, run_plan
    from engine.services.presentation.junit import run_suite, utc_timestamp, write_junit
    from engine.foundation.atomic_files import check_writable
    from ledger.location import command_hint
    started, timestamp = time.monotonic(), utc_timestamp()
    name = str(spec)  # the spec's name once it loads: the JUnit report's suite and classname

    def junit(**outcome: Any) -> None:
        if junit_file is not None:
            write_junit(junit_file, [run_suite(name=name, timestamp=timestamp, seconds=time.monotonic() - started,
                                               spec=str(spec), **outcome)])

    overrides = _parse_input_overrides(input_overrides)
    try:
        for path, what in ((output, "the certificate"), (junit_file, "the JUnit report")):
            if path is not None:  # refused before anything is recorded (or the ledger file created)
                check_writable(path, what=what)
        plan = load_plan(spec)  # the spec and its inputs are checked before the ledger is opened (or created)
        name = plan.name
        tables = load_tables(plan, input_paths=overrides)
        check_data_keys(plan, tables)  # a gate's bucket or vendor the data lack: refused before the ledger opens
        notify = None if as_json else (lambda message: click.echo(message, err=True))
        if no_record:
            result = run_plan(plan, tables, notify=notify)
        else:
            with ledger_for_run(ledger_url) as ledger:
                result = run_plan(plan, tables, ledger=ledger, notify=notify)
    except ProfileAbort as abort:
        from engine.core.interpreter import RunDecisions
        from engine.services.presentation.warnings import run_warnings
        from engine.services.presentation.markdown import failed_rules
        rules = failed_rules(abort.decisions)
        with _after_recording(abort.run_id and f"aborted run {abort.run_id}"):
            junit(run_id=abort.run_id, failed_rules=rules, abort_reason=str(abort))
        _echo_abort(abort, rules, run_warnings(RunDecisions.of(abort.stage_id, abort.decisions)), as_json=as_json,
                    ledger_url=ledger_url)
        return EXIT_ABORTED
    except CertaError as error:
        junit(error=str(error), error_type=type(error).__name__)
        raise
    recorded = None if no_record else f"run {result.run_id} ({result.verdict})"
    if output is not None:
        retry = command_hint("export", result.run_id[:12], "-o", str(output), ledger=ledger_url)
        with _after_recording(recorded, retry=retry):
            _write_certificate(result.certificate, output)
    with _after_recording(recorded):
        junit(run_id=None if no_record else result.run_id, verdict=result.verdict,
              gates=result.certificate["content"]["gates"])
    if as_json:
        _emit_json({"ok": True, "run_id": None if no_record else result.run_id, "verdict": result.verdict,
                    "certificate_sha256": result.content_sha256,
                    "results_sha256": result.results_sha256, "knobs_hash": result.knobs_hash,
                    "warnings": list(result.warnings)})
    else:
        _warn(result.warnings)
        click.echo(_summary(result.certificate))
        if not no_record:
            from ledger.location import masked_ledger
            click.echo(f"recorded run {result.run_id} in {masked_ledger(ledger_url)}; the full report: "
                       f"{command_hint('show', result.run_id[:12], ledger=ledger_url)}")
    return EXIT_OK if result.verdict == "PASS" else EXIT_FAIL


@contextlib.contextmanager
def _after_recording(recorded: str | None, *, retry: str | None = None) -> Iterator[None]:
    """Around a write of ``certa run`` or ``certa batch`` after ``recorded`` ("run ID (PASS)", "batch B (runs
    ID, ...)"; None: nothing was recorded): an ``OutputError`` becomes a ``RecordedOutputError`` (exit 4) naming
    the runs and the ``retry`` command, so that a scheduler does not run and record them again."""
    try:
        yield
    except OutputError as error:
        if recorded is None:
            raise
        raise RecordedOutputError(f"{recorded} is recorded, but {error}"
                                  + (f"; write it with: {retry}" if retry else "")) from None


def _write_certificate(certificate: Mapping[str, Any], output: Path) -> None:
    """The certificate as indented JSON in ``output``, written atomically (``run -o``, ``export -o``)."""
    from engine.foundation.atomic_files import write_atomically
    write_atomically(output, (json.dumps(certificate, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                     what="the certificate")


def _echo_abort(abort: ProfileAbort, rules: tuple[dict[str, Any], ...], warnings: tuple[str, ...], *, as_json: bool,
                ledger_url: str) -> None:
    """What ``certa run`` prints for a run a profile rule stopped: the reason, each failed rule with its value
    and requirement, the run id and where to read its decisions."""
    from engine.services.presentation.markdown import rule_text
    from ledger.location import command_hint, masked_ledger
    if as_json:
        _emit_json({**_error_json(abort), "run_id": abort.run_id, "rule": abort.rule, "stage": abort.stage_id,
                    "failed_rules": list(rules), "warnings": list(warnings)})
        return
    _warn(warnings)
    click.echo(f"error: {abort}", err=True)
    for rule in rules:
        click.echo(f"  failed: {rule_text(rule)}", err=True)
    if abort.run_id is None:
        click.echo("aborted run not recorded (--no-record)")
    else:
        click.echo(f"recorded aborted run {abort.run_id} in {masked_ledger(ledger_url)}; its decisions: "
                   f"{command_hint('decisions', abort.run_id[:12], '--kind', 'profile_rule', ledger=ledger_url)}")


def _summary(certificate: Mapping[str, Any]) -> str:
    """A few lines for the terminal after a run: verdict, identity, gates ('certa show' has the report)."""
    from engine.core.gates import gate_display
    content = certificate["content"]
    lines = [
        f"{content['spec']['name']}: {content['verdict']}",
        f"  run {certificate['issued']['run_id']}  profile {content['spec']['profile']}",
        f"  content_sha256 {certificate['content_sha256']}",
        f"  results_sha256 {certificate['results_sha256']}",
        f"  knobs_hash     {content['knobs_hash']}",
    ]
    for gate in content["gates"]:
        mark = "PASS" if gate["passed"] else "FAIL"
        shown = gate_display(gate)
        lines.append(f"  gate {gate['id']}: {mark}  {gate['metric']} = {shown['value']}, {shown['threshold']}  "
                     f"({shown['reason']})")
    if not content["gates"]:
        lines.append("  (no gates: the verdict is PASS by default)")
    return "\n".join(plain_text(line) for line in lines)


@main.command()
@click.argument("run_id", required=False)
@click.option("--expect-head", metavar="SEQ:HASH",
              help="A head printed earlier by 'certa head' and kept outside the database; verify that the "
                   "ledger still contains it unchanged (detects truncation and a rewritten chain).")
@click.option("--checkpoint", "checkpoint_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A signed checkpoint written by 'certa checkpoint': check its signature with --public-key, "
                   "then that the ledger still contains its head unchanged.")
@click.option("--public-key", "public_key_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed --checkpoint; repeat it to require "
                   "several signers.")
@click.option("--require-approval", "approval_key_files", multiple=True, metavar="PUBKEY",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM): every completed PASS run (or RUN_ID only) must have a valid "
                   "'approved' review signed by it, not followed by a 'rejected' one by the same key, its "
                   "reviews recorded in the order they were signed; repeat it to require several approvers.")
@certa_command
def verify(run_id: str | None, expect_head: str | None, checkpoint_file: Path | None,
           public_key_files: tuple[Path, ...], approval_key_files: tuple[Path, ...], as_json: bool,
           ledger_url: str) -> int:
    """Re-check the ledger: hash chain, certificates, stored inputs, method identities, signed reviews.

    Exit 0 intact, 1 tampered (the first broken entry is named, or the checkpoint signature fails) or, with
    --require-approval, a PASS run lacks an approval signed by a required key (the runs are named).

    \b
    Examples:
      certa verify
      certa verify 3f2a9c01 --json
      certa verify --expect-head 1042:9b1f...e0
      certa verify --checkpoint audit/2026-11-22.checkpoint --public-key audit/certa.pub
      certa verify --require-approval audit/alice.pub
    """
    from engine.services.audit import verify as verify_ledger
    from ledger.checkpoint import open_checkpoint
    from engine.foundation.signing import key_id
    from engine.services.reviews import ledger_reviews, unapproved_runs

    head = None
    if expect_head and checkpoint_file:
        raise click.UsageError("give either --expect-head or --checkpoint, not both")
    if expect_head:
        seq, sep, digest = expect_head.partition(":")
        if not sep or not seq.isdigit() or len(digest) != 64:
            raise click.BadParameter("expected SEQ:HASH as printed by 'certa head'", param_hint="--expect-head")
        head = (int(seq), digest)
    if (checkpoint_file is None) != (not public_key_files):
        raise click.UsageError("--checkpoint and --public-key go together")
    root = None
    if checkpoint_file is not None:
        signed = open_checkpoint(checkpoint_file.read_bytes(), _public_keys(public_key_files))
        head, root = (signed.seq, signed.entry_hash), signed.root_hash
    approvers = _public_keys(approval_key_files)
    with _open(ledger_url) as ledger:
        full = ledger.resolve_run_id(run_id) if run_id else None
        report = verify_ledger(ledger, run_id=full, expect_head=head, expect_root=root,
                               notify=None if as_json else (lambda message: click.echo(message, err=True)))
        reviews = ledger_reviews(ledger, run_id=full)
        runs_checked, missing = unapproved_runs(ledger, approvers, run_id=full) if approvers else (0, [])
    approved = not missing
    if as_json:
        _emit_json({"ok": report.intact and approved, "intact": report.intact,
                    "entries_checked": report.entries_checked,
                    "certificates_checked": report.certificates_checked, "blobs_checked": report.blobs_checked,
                    "head": f"{report.head[0]}:{report.head[1]}",
                    "problems": [{"where": p.where, "message": p.message, "seq": p.seq, "run_id": p.run_id,
                                  "column": p.column}
                                 for p in report.problems],
                    "reviews": [{"seq": r.seq, "run_id": rid, "recorded_at": r.recorded_at, "reviewer": r.reviewer,
                                 "decision": r.decision, "note": r.note, "signed": r.signed,
                                 "signature_valid": r.signature_valid, "key_ids": list(r.key_ids),
                                 "signed_at": r.signed_at, "out_of_order": r.out_of_order,
                                 "problem": r.problem} for rid, r in reviews],
                    "approval": None if not approvers else {
                        "approved": approved, "required_key_ids": [key_id(k) for k in approvers],
                        "runs_checked": runs_checked,
                        "missing": [{"run_id": m.run_id, "name": m.name, "key_id": m.key_id, "reason": m.reason}
                                    for m in missing]}})
    elif report.intact:
        click.echo(f"intact: {report.entries_checked} entries, {report.certificates_checked} certificate(s), "
                   f"{report.blobs_checked} stored input(s) checked; head {report.head[0]}:{report.head[1]}")
    else:
        first = report.first_broken
        click.echo(plain_text(f"TAMPERED: first broken: {first.where}: {first.message}"))
        for problem in report.problems[1:20]:
            click.echo(plain_text(f"  also: {problem.where}: {problem.message}"))
        if len(report.problems) > 20:
            click.echo(f"  ... and {len(report.problems) - 20} more")
    if not as_json and reviews:
        signed = [r for _, r in reviews if r.signed]
        failing = sum(1 for r in signed if not r.signature_valid)
        click.echo(f"reviews: {len(reviews)} ({len(signed)} signed, "
                   f"{'all verify' if not failing else f'{failing} do not verify'}; "
                   f"{len(reviews) - len(signed)} unsigned){'; the newest 20:' if len(reviews) > 20 else ''}")
        for rid, r in reviews[-20:]:
            status = ("unsigned" if not r.signed else
                      f"signed by {', '.join(k[:16] + '…' for k in r.key_ids)}: "
                      + ("verifies" if r.signature_valid else "DOES NOT VERIFY")
                      + (f", but recorded after entry {r.out_of_order}, which one of its keys signed later"
                         if r.out_of_order is not None else ""))
            click.echo(plain_text(f"  entry {r.seq}: {r.reviewer} {r.decision} run {rid} ({status})"))
    if not as_json and approvers:
        if approved:
            click.echo(f"approved: {runs_checked} PASS run(s), each approved by all {len(approvers)} required key(s)")
        for gap in missing:
            click.echo(plain_text(f"NOT APPROVED: run {gap.run_id} ({gap.name}) by key {gap.key_id[:16]}…: "
                                  f"{gap.reason}"))
    return EXIT_OK if report.intact and approved else EXIT_FAIL


@main.command()
@click.argument("run_id", required=False)
@click.option("--all", "replay_every", is_flag=True, help="Replay every completed run (oldest first), or those the "
              "filters keep, and print one table.")
@click.option("--since", metavar="DATE", help="With --all: runs recorded at or after this UTC date or time "
              "(ISO 8601, e.g. 2026-01-31 or 2026-01-31T12:00).")
@click.option("--name", "name_pattern", metavar="NAME", help="With --all: runs whose spec name matches (shell "
              "wildcards allowed, e.g. 'vendor-*').")
@click.option("--no-record", is_flag=True, help="Replay and compare without recording the replay: the ledger is "
              "opened read-only, so this works on read-only media (e.g. an auditor's copy).")
@certa_command
def replay(run_id: str | None, replay_every: bool, since: str | None, name_pattern: str | None, no_record: bool,
           as_json: bool, ledger_url: str) -> int:
    """Re-execute recorded runs from the ledger alone and compare their results.

    A run is replayed with the stage versions it recorded, and is REPRODUCED when its results (the
    certificate's content without the library-version stamp, RFC 8785) are byte-identical; library versions
    that differ are shown as information. DIVERGED lists the result fields that differ; CANNOT REPLAY says why
    (e.g. a stage version this certa does not have). Every replay is recorded in the ledger, unless
    --no-record.

    Exit 0 when every replayed run is REPRODUCED, 1 otherwise.

    \b
    Examples:
      certa replay 3f2a9c01
      certa replay --all                      # the auditor's batch job: every run, one table
      certa replay --all --name 'vendor-*' --since 2026-01-01 --json
      certa replay latest --no-record --ledger /media/audit/certa-ledger.db
    """
    from engine.services.audit import replay as replay_run, replay_all, replayable_runs
    if replay_every == (run_id is not None):
        raise click.UsageError("give a RUN_ID or --all (with optional --since and --name), not both")
    if not replay_every and (since or name_pattern):
        raise click.UsageError("--since and --name filter --all")
    if since is not None:
        _check_iso_time(since)
    with _open(ledger_url, write=not no_record) as ledger:
        if not replay_every:
            notify = None if as_json else (lambda message: click.echo(message, err=True))
            results = [replay_run(ledger, str(run_id), notify=notify, record=not no_record)]
        else:
            run_ids = replayable_runs(ledger, since=since, name=name_pattern)

            def progress(done: int, total: int, result: ReplayResult) -> None:
                click.echo(plain_text(f"replay {done}/{total}: {result.run_id[:12]} {result.name}: {result.outcome}"),
                           err=True)

            results = list(replay_all(ledger, run_ids, progress=progress, record=not no_record))
    reproduced = all(r.reproduced for r in results)
    if as_json:
        rows = [_replay_json(r) for r in results]
        _emit_json({"ok": reproduced, **rows[0]} if not replay_every else
                   {"ok": reproduced, "runs": rows, "counts": _replay_counts(results)})
    elif not replay_every:
        _echo_replay(results[0])
    else:
        _echo_replay_table(results)
    return EXIT_OK if reproduced else EXIT_FAIL


def _check_iso_time(text: str) -> None:
    from datetime import datetime

    try:
        datetime.fromisoformat(text.removesuffix("Z"))
    except ValueError:
        raise click.UsageError(f"--since {text!r} is not an ISO 8601 date or time (e.g. 2026-01-31 or "
                         "2026-01-31T12:00)") from None


def _replay_json(result: ReplayResult) -> dict[str, Any]:
    return {"run_id": result.run_id, "name": result.name, "outcome": result.outcome,
            "recorded_results_sha256": result.recorded_sha256, "replayed_results_sha256": result.replayed_sha256,
            "note": result.note, "entry_seq": result.entry_seq,
            "changes": [{"path": c.path, "recorded": c.before, "replayed": c.after} for c in result.changes],
            "environment": [{"path": c.path, "recorded": c.before, "replayed": c.after} for c in result.environment]}


def _replay_counts(results: list[ReplayResult]) -> dict[str, int]:
    from engine.services.audit import CANNOT_REPLAY, DIVERGED, REPRODUCED
    return {outcome: sum(r.outcome == outcome for r in results) for outcome in (REPRODUCED, DIVERGED, CANNOT_REPLAY)}


def _echo_replay(result: ReplayResult) -> None:
    from engine.services.jsondiff import summarised
    from engine.services.presentation.markdown import change_text
    click.echo(plain_text(f"{result.outcome}: run {result.run_id}: {result.note}"))
    lines = summarised(result.changes)
    for change in lines[:50]:
        click.echo(f"  {change_text(change, sides=('recorded', 'replayed'))}")
    if len(lines) > 50:
        click.echo(f"  ... and {len(lines) - 50} more (--json lists them all)")


def _echo_replay_table(results: list[ReplayResult]) -> None:
    from engine.services.audit import CANNOT_REPLAY, DIVERGED
    from engine.services.jsondiff import summarised
    if not results:
        click.echo("no completed runs match")
        return
    click.echo(f"{'run':<12}  {'name':<28} {'outcome':<13} detail")
    for r in results:
        if r.outcome == DIVERGED:
            fields = [c.path for c in summarised(r.changes)]  # most material first, a long array once
            detail = ", ".join(fields[:5]) + (f" (+{len(fields) - 5} more)" if len(fields) > 5 else "")
            detail = detail or r.note
        elif r.outcome == CANNOT_REPLAY:
            detail = r.note
        else:
            detail = f"environment differs: {', '.join(c.path for c in r.environment)}" if r.environment else ""
        click.echo(plain_text(f"{r.run_id[:12]}  {r.name[:28]:<28} {r.outcome:<13} {detail}".rstrip()))
    counts = _replay_counts(results)
    click.echo(f"{len(results)} run(s): " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()))


@main.command()
@click.argument("run_id")
@click.option("--explain", is_flag=True, help="Open each stage's section with plain-language paragraphs: what was "
              "tested, what the verdict means and does not mean, the assumptions. Example: certa show latest --explain")
@certa_command
def show(run_id: str, explain: bool, as_json: bool, ledger_url: str) -> int:
    """Show a run's certificate as a Markdown report (--json prints the whole certificate). For an aborted
    run: the reason and each profile rule that stopped it, with its value and requirement.

    \b
    Examples:
      certa show 3f2a9c01
      certa show latest --explain
    """
    from engine.services.presentation.markdown import certificate_markdown, recorded_warnings
    with _open(ledger_url) as ledger:
        row = ledger.run(run_id)
        if row.status == "aborted":
            from engine.services.presentation.markdown import recorded_abort, rule_text
            from ledger.location import command_hint
            abort, rules = recorded_abort(ledger, row.run_id)
            if as_json:
                _emit_json({"run_id": row.run_id, "status": "aborted", "abort": abort, "failed_rules": list(rules)})
            else:
                click.echo(plain_text(f"{row.name}: ABORTED (profile {row.profile}) run {row.run_id}"))
                click.echo(f"  {plain_text(abort['reason'])}")
                for rule in rules:
                    click.echo(f"  failed: {rule_text(rule)}")
                click.echo(f"its decisions: {command_hint('decisions', row.run_id[:12], ledger=ledger_url)}")
            return EXIT_OK
        certificate = ledger.certificate(row.run_id)
        warnings = () if as_json else recorded_warnings(ledger, row.run_id)
    if as_json:
        _emit_json(certificate)
    else:
        click.echo(certificate_markdown(certificate, explain=explain, warnings=warnings))
    return EXIT_OK


@main.command()
@click.argument("run_id")
@click.option("--kind", metavar="KIND", help="Only decisions of this kind (pairing, profile_rule, gate, ...).")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True,
              help="At most this many decisions (0: all of them, streamed).")
@click.option("--after", type=click.IntRange(min=0), default=0, metavar="SEQ",
              help="Only decisions recorded after ledger entry SEQ: the next page, as the previous one says.")
@certa_command
def decisions(run_id: str, kind: str | None, limit: int, after: int, as_json: bool, ledger_url: str) -> int:
    """List a run's recorded decisions in order, one line each: ledger seq, stage ('gates' for a gate), kind and
    the decision's detail. Read from the ledger as they are printed, so a run with 10^6 per-row decisions pages
    (--limit, --after) or streams (--limit 0) without loading them all.

    \b
    Examples:
      certa decisions 3f2a9c01
      certa decisions latest --kind profile_rule
      certa decisions 3f2a9c01 --limit 50 --after 1042
      certa decisions 3f2a9c01 --kind pairing --limit 0 --json
    """
    import itertools

    from engine.services.presentation.markdown import decision_line, recorded_decisions
    from ledger.location import command_hint
    with _open(ledger_url) as ledger:
        full = ledger.resolve_run_id(run_id)
        found = recorded_decisions(ledger, full, kind=kind, after=after)
        page = found if not limit else itertools.islice(found, limit)
        last = None
        if as_json:
            click.echo(f'{{"run_id": {json.dumps(full)}, "kind": {json.dumps(kind)}, "decisions": [', nl=False)
        for seq, payload in page:
            if as_json:
                item = json_display(json.dumps({"seq": seq, **payload}, sort_keys=True, ensure_ascii=False))
                click.echo(("\n  " if last is None else ",\n  ") + item, nl=False)
            else:
                click.echo(decision_line(seq, payload))
            last = seq
        more = bool(limit) and last is not None and next(found, None) is not None
    following = ["decisions", full[:12], *(["--kind", kind] if kind else []), "--limit", str(limit),
                 "--after", str(last)]
    if as_json:
        click.echo(f'\n], "next_after": {json.dumps(last if more else None)}}}')
    elif last is None:
        click.echo(f"no {'decisions' if kind is None else f'{kind} decisions'} recorded for run {full}"
                   + (f" after entry {after}" if after else ""))
    elif more:
        click.echo(f"... more: {command_hint(*following, ledger=ledger_url)}")
    return EXIT_OK


@main.command("list")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Newest runs to show.")
@certa_command
def list_command(limit: int, as_json: bool, ledger_url: str) -> int:
    """List recorded runs, newest first.

    \b
    Example:
      certa list --limit 10
    """
    rows = _newest_runs(ledger_url, limit)
    if as_json:
        _emit_json([{"run_id": r.run_id, "name": r.name, "status": r.status, "verdict": r.verdict,
                     "profile": r.profile, "recorded_at": r.recorded_at, "knobs_hash": r.knobs_hash,
                     "certificate_sha256": r.certificate_sha256} for r in rows])
        return EXIT_OK
    if not rows:
        click.echo("no runs recorded yet")
    for r in rows:
        click.echo(plain_text(f"{r.run_id[:12]}  {r.recorded_at[:19]}  {(r.verdict or r.status.upper()):<8} "
                              f"{r.profile:<8} {r.name}"))
    return EXIT_OK


@main.command()
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="File to write the certificate JSON to.")
@certa_command
def export(run_id: str, output: Path, as_json: bool, ledger_url: str) -> int:
    """Write a run's certificate to a JSON file.

    \b
    Example:
      certa export 3f2a9c01 -o cert.json
    """
    with _open(ledger_url) as ledger:
        certificate = ledger.certificate(run_id)
    _write_certificate(certificate, output)
    if as_json:
        _emit_json({"ok": True, "run_id": certificate["issued"]["run_id"], "path": str(output),
                    "certificate_sha256": certificate["content_sha256"]})
    else:
        click.echo(f"wrote {output} (content_sha256 {certificate['content_sha256']})")
    return EXIT_OK


@main.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--only-changed", is_flag=True, help="List only the fields that differ (default shows a count of equal ones too).")
@click.option("--all", "every_element", is_flag=True, help="List every changed element of long numeric arrays "
              "(bootstrap quantiles, sequences) instead of one summary line per array. Example: certa diff A B --all")
@certa_command
def diff(run_a: str, run_b: str, only_changed: bool, every_element: bool, as_json: bool, ledger_url: str) -> int:
    """Compare two runs' certificates field by field, most material first: the verdict, the gates, each
    stage's estimates and intervals, its decisions, the rest of its outputs, then spec, knobs, seeds, inputs
    and versions. An array with more than 8 changed numbers is one line (how many changed, the largest change
    and where) unless --all; --json lists every change ("changes") and the lines ("summary").

    \b
    Examples:
      certa diff 3f2a9c01 77b0e4d2 --only-changed
      certa diff 3f2a9c01 77b0e4d2 --all --json
    """
    from engine.services.jsondiff import ArrayChange, flatten, json_diff, summarised
    from engine.services.presentation.markdown import change_text
    with _open(ledger_url) as ledger:
        a, b = ledger.certificate(run_a), ledger.certificate(run_b)
    changes = json_diff(a["content"], b["content"])
    lines = changes if every_element else summarised(changes)
    if as_json:
        _emit_json({"run_a": a["issued"]["run_id"], "run_b": b["issued"]["run_id"],
                    "same_content": a["content_sha256"] == b["content_sha256"],
                    "changes": [{"path": c.path, "a": c.before, "b": c.after} for c in changes],
                    "summary": [c.as_json() if isinstance(c, ArrayChange) else {"path": c.path, "a": c.before,
                                                                                   "b": c.after} for c in lines]})
        return EXIT_OK
    click.echo(f"{a['issued']['run_id'][:12]} vs {b['issued']['run_id'][:12]}: "
               f"{'identical content' if not changes else f'{len(changes)} field(s) differ'}")
    for change in lines:
        click.echo(f"  {change_text(change)}")
    if not only_changed and changes:
        click.echo(f"  ({len(flatten(a['content'])) - len(changes)} field(s) equal)")
    return EXIT_OK


@main.command()
@certa_command
def head(as_json: bool, ledger_url: str) -> int:
    """Print the ledger's chain head (SEQ:HASH). Keep it outside the database; check later with
    'certa verify --expect-head SEQ:HASH'.

    \b
    Example:
      certa head >> audit/heads.txt
    """
    with _open(ledger_url) as ledger:
        seq, digest = ledger.head()
    if as_json:
        _emit_json({"seq": seq, "entry_hash": digest, "head": f"{seq}:{digest}"})
    else:
        click.echo(f"{seq}:{digest}")
    return EXIT_OK


@main.command()
@click.option("--key", "key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 private key (PEM) from 'certa keygen'; repeat it to sign with several keys. An "
                   "encrypted key is opened with the passphrase in the environment variable CERTA_KEY_PASSPHRASE.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the checkpoint to this new file (never overwritten) instead of standard output.")
@certa_command
def checkpoint(key_files: tuple[Path, ...], out_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Sign the ledger's current head (a DSSE envelope, Ed25519). Keep checkpoints outside the database;
    'certa verify --checkpoint FILE --public-key KEY' then detects a truncated or rewritten chain even if
    every hash in the database was recomputed.

    \b
    Examples:
      certa checkpoint --key ~/.certa/certa.key --out audit/$(date +%F).checkpoint
      certa checkpoint --key ~/.certa/certa.key --json
    """
    from ledger.bundle import ledger_root
    from ledger.checkpoint import sign_checkpoint
    private_keys = _private_keys(key_files)
    with _open(ledger_url) as ledger:
        seq, digest = ledger.head()
        root = ledger_root(ledger, seq)
    envelope = sign_checkpoint(private_keys, seq, digest, root.hex())
    text = _save_json(envelope, out_file)
    if as_json:
        _emit_json({"ok": True, "seq": seq, "entry_hash": digest, "root_hash": root.hex(),
                    "key_ids": [sig["keyid"] for sig in envelope["signatures"]],
                    "file": str(out_file) if out_file else None, "envelope": envelope})
    elif out_file is not None:
        click.echo(f"signed head {seq}:{digest} -> {out_file}")
    else:
        click.echo(text, nl=False)
    return EXIT_OK


@main.command()
@click.argument("checkpoint_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", "key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The co-signer's Ed25519 private key (PEM); repeatable. CERTA_KEY_PASSPHRASE opens an "
                   "encrypted key.")
@click.option("--public-key", "public_key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The public key of each signer the checkpoint already carries (repeatable): every existing "
                   "signature must verify before yours is added.")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The new checkpoint file with the added signature(s) (never overwritten).")
@certa_command
def cosign(checkpoint_file: Path, key_files: tuple[Path, ...], public_key_files: tuple[Path, ...], out_file: Path,
           as_json: bool, ledger_url: str) -> int:
    """Add your signature to a checkpoint after checking its existing signatures and that this ledger has
    exactly its head and Merkle root (a second pair of eyes: verification can then require both keys).

    \b
    Example:
      certa cosign audit/2026-11-22.checkpoint --public-key certa.pub --key ~/.certa/officer.key \\
          --out audit/2026-11-22.cosigned
    """
    from ledger.bundle import ledger_root_matching
    from ledger.checkpoint import cosign_checkpoint, read_checkpoint_unverified
    text = checkpoint_file.read_bytes()
    claimed = read_checkpoint_unverified(text)
    with _open(ledger_url) as ledger:
        ledger_root_matching(ledger, claimed)
    envelope = cosign_checkpoint(text, _private_keys(key_files), _public_keys(public_key_files))
    _save_json(envelope, out_file)
    key_ids = [sig["keyid"] for sig in envelope["signatures"]]
    if as_json:
        _emit_json({"ok": True, "seq": claimed.seq, "key_ids": key_ids, "file": str(out_file)})
    else:
        click.echo(f"head {claimed.seq}:{claimed.entry_hash} matches this ledger; {len(key_ids)} signature(s) "
                   f"-> {out_file}")
    return EXIT_OK


def _private_keys(key_files: tuple[Path, ...]) -> list[Ed25519PrivateKey]:
    from engine.foundation.signing import load_private_key
    passphrase = os.environ.get("CERTA_KEY_PASSPHRASE")
    return [load_private_key(path.read_bytes(), passphrase=passphrase.encode() if passphrase else None)
            for path in key_files]


def _public_keys(key_files: tuple[Path, ...]) -> list[Ed25519PublicKey]:
    from engine.foundation.signing import load_public_key
    return [load_public_key(path.read_bytes()) for path in key_files]


@main.command()
@click.argument("run_id")
@click.option("--checkpoint", "checkpoint_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A signed checkpoint of this ledger taken after the run ('certa checkpoint').")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the bundle to this new file (never overwritten) instead of standard output.")
@certa_command
def prove(run_id: str, checkpoint_file: Path, out_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Bundle a run's certificate with a Merkle inclusion proof against a signed checkpoint, so that anyone
    can check it offline with 'certa verify-bundle' (no ledger needed, only the signer's public key).

    \b
    Example:
      certa prove 3f2a9c01 --checkpoint audit/2026-11-22.checkpoint -o 3f2a9c01.bundle.json
    """
    from ledger.bundle import build_bundle
    with _open(ledger_url) as ledger:
        bundle = build_bundle(ledger, run_id, checkpoint_file.read_bytes())
    text = _save_json(bundle, out_file)
    run = bundle["entry"]["run_id"]
    if as_json:
        _emit_json({"ok": True, "run_id": run, "entry_seq": bundle["entry"]["seq"],
                    "tree_size": bundle["inclusion"]["tree_size"], "file": str(out_file) if out_file else None,
                    **({} if out_file else {"bundle": bundle})})
    elif out_file is not None:
        click.echo(f"certificate of run {run} (entry {bundle['entry']['seq']} of {bundle['inclusion']['tree_size']}) "
                   f"-> {out_file}")
    else:
        click.echo(text, nl=False)
    return EXIT_OK


@main.command()
@click.argument("run_id")
@click.option("--key", "key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 private key (PEM); repeat it to sign with several keys. CERTA_KEY_PASSPHRASE opens "
                   "an encrypted key.")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the attestation to this new file (never overwritten) instead of standard output.")
@certa_command
def attest(run_id: str, key_files: tuple[Path, ...], out_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Sign a run's certificate as an in-toto Statement v1 (DSSE envelope): its subjects are the SHA-256 of
    the spec and of every input, its predicate the certificate. Check it with 'certa verify-attestation'.

    \b
    Example:
      certa attest 3f2a9c01 --key ~/.certa/certa.key -o 3f2a9c01.intoto.json
    """
    from engine.services.attestation import attest_certificate, certificate_statement
    private_keys = _private_keys(key_files)
    with _open(ledger_url) as ledger:
        certificate = ledger.certificate(run_id)
    envelope = attest_certificate(certificate, private_keys)
    text = _save_json(envelope, out_file)
    statement = certificate_statement(certificate)
    if as_json:
        _emit_json({"ok": True, "run_id": certificate["issued"]["run_id"], "subjects": statement["subject"],
                    "file": str(out_file) if out_file else None, **({} if out_file else {"envelope": envelope})})
    elif out_file is not None:
        click.echo(f"attested run {certificate['issued']['run_id']} ({len(statement['subject'])} subjects) -> {out_file}")
    else:
        click.echo(text, nl=False)
    return EXIT_OK


@main.command("verify-attestation")
@click.argument("attestation_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--public-key", "public_key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed the attestation; repeatable.")
@click.option("--file", "data_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A local file (spec or data) that must be one of the attested subjects; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def verify_attestation_command(attestation_file: Path, public_key_files: tuple[Path, ...],
                               data_files: tuple[Path, ...], as_json: bool) -> None:
    """Check an in-toto attestation of a certificate offline: every signature, the certificate's schema,
    hash and method identities, that the subjects are the digests it records, and that each --file is one
    of them. Needs no ledger.

    Exit 0 verified, 1 not (each failed check is named), 2 not an attestation or key.

    \b
    Example:
      certa verify-attestation 3f2a9c01.intoto.json --public-key certa.pub --file data/decisions.csv
    """
    from engine.services.attestation import verify_attestation
    try:
        report = verify_attestation(attestation_file.read_bytes(), _public_keys(public_key_files),
                                    files={str(path): path.read_bytes() for path in data_files})
    except CertaError as error:
        _fail(as_json, error)
    if as_json:
        _emit_json({"ok": report.verified, "verified": report.verified, "run_id": report.run_id,
                    "content_sha256": report.content_sha256, "verdict": report.verdict, "key_ids": list(report.key_ids),
                    "subjects": [{"name": n, "sha256": d} for n, d in report.subjects],
                    "files": [{"file": f, "subject": n} for f, n in report.files], "problems": list(report.problems)})
    elif report.verified:
        click.echo(f"VERIFIED: certificate {report.content_sha256} of run {report.run_id} ({report.verdict}), "
                   f"signed by {', '.join(k[:16] + '…' for k in report.key_ids)}")
        for label, subject in report.files:
            click.echo(f"  {label} is {subject}")
    else:
        _echo_not_verified(report.problems)
    sys.exit(EXIT_OK if report.verified else EXIT_FAIL)


@main.command("verify-bundle")
@click.argument("bundle_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--public-key", "public_key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed the bundle's checkpoint; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def verify_bundle_command(bundle_file: Path, public_key_files: tuple[Path, ...], as_json: bool) -> None:
    """Check a certificate bundle offline: the checkpoint signature, the certificate's own hash and schema,
    and the Merkle path from its ledger entry to the signed root. Needs no ledger.

    Exit 0 verified, 1 not (each failed check is named), 2 not a bundle or key.

    \b
    Example:
      certa verify-bundle 3f2a9c01.bundle.json --public-key audit/certa.pub
    """
    from engine.services.audit import verify_bundle
    from engine.foundation.json_read import parse_document
    try:
        try:
            bundle = parse_document(bundle_file.read_bytes(), "the bundle")
        except ValueError as error:
            raise BundleError(f"{bundle_file} is not JSON: {error}") from None
        report = verify_bundle(bundle, _public_keys(public_key_files))
    except CertaError as error:
        _fail(as_json, error)
    if as_json:
        _emit_json({"ok": report.verified, "verified": report.verified, "run_id": report.run_id,
                    "content_sha256": report.content_sha256, "entry_seq": report.seq,
                    "checkpoint": {"seq": report.checkpoint.seq, "root_hash": report.checkpoint.root_hash,
                                   "signed_at": report.checkpoint.signed_at, "key_ids": list(report.checkpoint.key_ids)},
                    "problems": list(report.problems)})
    elif report.verified:
        click.echo(f"VERIFIED: certificate {report.content_sha256} of run {report.run_id} is entry {report.seq} of "
                   f"the ledger whose first {report.checkpoint.seq} entries key(s) "
                   f"{', '.join(k[:16] + '…' for k in report.checkpoint.key_ids)} "
                   f"signed at {report.checkpoint.signed_at}")
    else:
        _echo_not_verified(report.problems)
    sys.exit(EXIT_OK if report.verified else EXIT_FAIL)


@main.command()
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="Where to write certa.key (private, mode 0600) and certa.pub.")
@click.option("--name", default="certa", show_default=True, help="File name stem of the two key files.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")
def keygen(out_dir: Path, name: str, as_json: bool) -> None:
    """Create an Ed25519 key pair for signing checkpoints. Existing files are never overwritten.

    \b
    Example:
      certa keygen --out-dir ~/.certa && certa checkpoint --key ~/.certa/certa.key
    """
    from engine.foundation.atomic_files import make_folders, write_atomically
    from engine.foundation.signing import generate_key_pair, key_id, load_public_key
    private_pem, public_pem = generate_key_pair()
    private_path, public_path = out_dir / f"{name}.key", out_dir / f"{name}.pub"
    try:
        for path in (private_path, public_path):
            if path.exists():
                raise OutputError(f"{path} exists; choose another --out-dir or --name")
        make_folders(out_dir)
        write_atomically(private_path, private_pem, private=True, overwrite=False, what="the private key")
        try:
            write_atomically(public_path, public_pem, overwrite=False, what="the public key")
        except OutputError:
            with contextlib.suppress(OSError):
                private_path.unlink()  # written a moment ago: no half pair is left
            raise
    except CertaError as error:
        _fail(as_json, error)
    fingerprint = key_id(load_public_key(public_pem))
    if as_json:
        _emit_json({"ok": True, "private_key": str(private_path), "public_key": str(public_path),
                    "key_id": fingerprint})
    else:
        click.echo(f"private key: {private_path} (keep it secret)\npublic key:  {public_path} "
                   f"(key id {fingerprint[:16]}…)")


def _echo_not_verified(problems: tuple[str, ...]) -> None:
    click.echo(f"NOT VERIFIED: {plain_text(problems[0])}")
    for problem in problems[1:]:
        click.echo(f"  also: {plain_text(problem)}")


def _save_json(document: Any, out_file: Path | None) -> str:
    """``document`` as indented JSON text, also written to ``out_file`` (a new file) when given."""
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if out_file is not None:
        from engine.foundation.atomic_files import write_atomically
        write_atomically(out_file, text.encode("utf-8"), overwrite=False)
    return text


@main.command("batch")
@click.argument("specs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--scheduler", metavar="tcp://HOST:PORT", help="An existing Dask scheduler; without it a LocalCluster "
              "is started on this machine.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Worker processes of the LocalCluster (ignored with --scheduler).")
@click.option("--batch-id", metavar="NAME", help="Name of the batch (part of every run id); default: derived from "
              "the specs and inputs, so re-running the same command resumes.")
@click.option("--retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="Dask retries of a run whose worker failed.")
@click.option("--input", "input_overrides", multiple=True, metavar="NAME=PATH",
              help="Read input NAME from PATH in every spec that declares it (repeatable); a name no spec declares "
                   "is an error and nothing runs.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a JUnit XML report for CI test reporters: one test suite per spec, one test case per "
                   "gate, per profile rule that aborted a run, or an error case for a spec certa refused. Example: "
                   "certa batch specs/ --junit reports/certa.xml")
@certa_command
def batch_command(specs: tuple[Path, ...], scheduler: str | None, workers: int, batch_id: str | None, retries: int,
                  input_overrides: tuple[str, ...], junit_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Run many specs on Dask workers and record each in the ledger as it completes.

    A folder means every *.yaml spec below it, sorted. Each run is computed on a worker from the bytes
    the client read and hashed; the client seals and records (the only ledger writer). Runs already
    recorded by the same batch are skipped ("already recorded"), so re-running resumes. Exit code: the
    worst of the batch, 2 (invalid spec/input or error, not recorded) > 3 (aborted, recorded) > 1 (FAIL)
    > 0 (PASS); 4 when runs were recorded but the --junit file could not be written (the message names them).
    Each run's warnings are printed on stderr ('warning: ...') and listed in --json. See docs/batch.md.

    \b
    Examples:
      certa batch specs/
      certa batch specs/ --scheduler tcp://10.0.0.5:8786 --ledger postgresql+psycopg://certa@db/certa
      certa batch shards/ merge.yaml --batch-id bakeoff-2026-11 --json
      certa batch candidates/ --input baseline=/data/eval/baseline-2026-11.csv
      certa batch specs/ --junit reports/certa.xml
    """
    from engine.foundation.atomic_files import check_writable
    from engine.services.batch import ERROR, run_batch  # imports Dask only on this path
    from engine.services.presentation.junit import run_suite, utc_timestamp, write_junit
    from engine.services.presentation.markdown import rule_text
    from engine.services.run import ledger_for_run

    overrides = _parse_input_overrides(input_overrides)
    notify = lambda message: click.echo(message, err=True)  # noqa: E731 - progress on stderr
    timestamp = utc_timestamp()
    if junit_file is not None:  # refused before anything is recorded
        check_writable(junit_file, what="the JUnit report")
    try:
        with ledger_for_run(ledger_url) as ledger:  # a refused batch leaves no new ledger file
            report = run_batch(specs, ledger=ledger, scheduler=scheduler, workers=workers, batch_id=batch_id,
                               retries=retries, input_paths=overrides, notify=None if as_json else notify)
    except CertaError as error:  # the whole batch refused: the report says so
        if junit_file is not None:
            write_junit(junit_file, [run_suite(name="certa batch", timestamp=timestamp, error=str(error),
                                               error_type=type(error).__name__)])
        raise
    if junit_file is not None:
        recorded = [row.run_id for row in report.rows if row.run_id and row.status != ERROR]
        with _after_recording(f"batch {report.batch_id} (runs {', '.join(recorded)})" if recorded else None):
            write_junit(junit_file, [row.junit_suite(timestamp) for row in report.rows])
    if as_json:
        _emit_json({"ok": report.exit_code in (0, 1), "batch_id": report.batch_id, "exit_code": report.exit_code,
                    "seconds": round(report.seconds, 3), "runs": [row.as_json() for row in report.rows]})
    else:
        width = max(len(row.spec) for row in report.rows)
        for row in report.rows:
            _warn(tuple(f"{row.name}: {line}" for line in row.warnings))
        click.echo(f"batch {report.batch_id}: {len(report.rows)} spec(s) in {report.seconds:.1f} s")
        for row in report.rows:
            outcome = row.verdict or row.status.upper()
            note = f"  {row.error}" if row.error else ("  already recorded" if row.status == "already recorded" else "")
            click.echo(plain_text(f"  {row.spec:<{width}}  {row.run_id or '-':<32}  {outcome:<7}{note}"))
            for rule in row.failed_rules:
                click.echo(f"  {'':<{width}}  failed: {rule_text(rule)}")
    return report.exit_code


@main.command()
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="HTML file to write (one self-contained page: inline CSS and SVG plots, nothing fetched).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists (by default it is never overwritten).")
@certa_command
def report(run_id: str, output: Path, force: bool, as_json: bool, ledger_url: str) -> int:
    """Write a run's report as one self-contained HTML page for reviewers: the verdict, the gates, each
    stage's decision plotted with its numbers, identity and hashes, the verification status (chain and
    newest replay, as of now) and every review. The same ledger gives the same bytes; it prints to PDF.

    \b
    Example:
      certa report 3f2a9c01 -o run.html
    """
    import hashlib

    try:
        from engine.services.presentation.html import gather_report, render_report  # matplotlib and Jinja2: only for this command
    except ImportError as error:
        raise CertaError(f"'certa report' needs the report extra ({error.name} is missing): "
                         "python3 -m pip install 'certa[report]'") from None

    if output.exists() and not force:
        raise OutputError(f"{output} exists; pass --force to overwrite it")
    with _open(ledger_url) as ledger:
        data = gather_report(ledger, run_id)
    body = render_report(data).encode("utf-8")
    from engine.foundation.atomic_files import write_atomically
    write_atomically(output, body, overwrite=force, what="the report")
    digest = hashlib.sha256(body).hexdigest()
    if as_json:
        _emit_json({"ok": True, "file": str(output), "sha256": digest, "run_id": data.run_id})
    else:
        click.echo(f"wrote {output} ({data.name}: {data.verdict}; sha256 {digest})")
    return EXIT_OK


@main.command()
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder of the site (created if needed). Re-running updates only the pages whose inputs changed.")
@click.option("--checkpoint", "checkpoint_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A signed checkpoint ('certa checkpoint') to show on the chain page with whether it matches this "
                   "ledger; repeatable.")
@click.option("--public-key", "public_key_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed each --checkpoint; repeatable.")
@click.option("--jobs", type=click.IntRange(min=1), default=os.cpu_count() or 1, show_default="CPU count",
              help="Processes rendering run pages (the plots dominate the time).")
@certa_command
def site(out_dir: Path, checkpoint_files: tuple[Path, ...], public_key_files: tuple[Path, ...], jobs: int,
         as_json: bool, ledger_url: str) -> int:
    """Write a static site of the whole ledger that opens from file:// with no server: an index of runs
    (sortable, filterable), each run's report, the changes between consecutive runs of a spec, and the
    chain head with each signed checkpoint. The ledger is verified once; a re-run rewrites only the pages
    whose inputs changed (DIR/.certa-site.json) and never touches files certa did not write.

    \b
    Example:
      certa site -o audit-site --checkpoint audit/2026-11-22.checkpoint --public-key audit/certa.pub
    """
    try:
        from engine.services.presentation.html.site import build_site  # matplotlib and Jinja2: only for this command
    except ImportError as error:
        raise CertaError(f"'certa site' needs the report extra ({error.name} is missing): "
                         "python3 -m pip install 'certa[report]'") from None
    from engine.core.interpreter import throttled_progress

    def notify(line: str) -> None:
        click.echo(line, err=True)

    report_pages = throttled_progress(notify, "site: ")

    def progress(done: int, total: int) -> None:
        report_pages(done, total, "pages")

    with _open(ledger_url) as ledger:
        result = build_site(ledger, out_dir, checkpoints=checkpoint_files, public_keys=_public_keys(public_key_files),
                            jobs=jobs, progress=progress, notify=notify)
    if as_json:
        _emit_json({"ok": True, "dir": result.directory, "pages_written": result.pages_written,
                    "pages_unchanged": result.pages_unchanged})
    else:
        click.echo(f"wrote {result.pages_written} page(s), {result.pages_unchanged} unchanged, in {result.directory} "
                   f"({result.runs} runs; chain {'intact' if result.intact else 'BROKEN'}); open "
                   f"{(result.directory and Path(result.directory) / 'index.html')}")
    return EXIT_OK


@main.command()
@click.argument("run_id")
@click.option("--by", "reviewer", required=True, help="Who reviews (name or e-mail).")
@click.option("--decision", type=click.Choice(["approved", "rejected", "comment"]), required=True,
              help="The review decision.")
@click.option("--note", default="", help="Free-text comment.")
@click.option("--key", "key_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Sign the review with this Ed25519 private key (PEM) from 'certa keygen'; repeat it to sign with "
                   "several keys. An encrypted key is opened with the passphrase in CERTA_KEY_PASSPHRASE. Without "
                   "--key the review is recorded unsigned.")
@certa_command
def review(run_id: str, reviewer: str, decision: str, note: str, key_files: tuple[Path, ...], as_json: bool,
           ledger_url: str) -> int:
    """Append a review of a run to the ledger (runs are never edited; reviews are added).

    With --key the review is signed (DSSE, Ed25519) over the run's certificate digests and the reviewer,
    decision and note; 'certa verify' checks every signature, and 'certa verify --require-approval KEY'
    requires an approval signed by KEY for every PASS run.

    \b
    Examples:
      certa review 3f2a9c01 --by alice@example.org --decision approved --note "matches the model card"
      certa review 3f2a9c01 --by alice@example.org --decision approved --key ~/.certa/alice.key
    """
    from engine.services.reviews import review_payload

    private_keys = _private_keys(key_files)
    with _open(ledger_url, write=True) as ledger:
        full = ledger.resolve_run_id(run_id)
        certificate = ledger.certificate(full) if ledger.run(full).status == "completed" else None
        payload = review_payload(reviewer=reviewer, decision=decision, note=note, certificate=certificate,
                                 private_keys=private_keys)
        seq = ledger.record_note(full, "review", payload)
    key_ids = [sig["keyid"] for sig in payload.get("signature", {}).get("signatures", [])]
    if as_json:
        _emit_json({"ok": True, "run_id": full, "entry": seq, "seq": seq, "signed": bool(key_ids),
                    "key_ids": key_ids, "certificate": payload.get("certificate")})
    elif key_ids:
        click.echo(f"recorded review of {full} as entry {seq}, signed by key(s) {', '.join(key_ids)}")
    else:
        click.echo(f"recorded review of {full} as entry {seq} (unsigned)")
    return EXIT_OK


@main.command()
@certa_command
def migrate(as_json: bool, ledger_url: str) -> int:
    """Upgrade the ledger's schema in place to this certa's, in one transaction. No entry, stored input or
    run is rewritten: 'certa verify' and checkpoints signed before still hold. Running it again does
    nothing. Back up a shared ledger first and run this once, while no writer runs.

    \b
    Examples:
      certa migrate
      certa migrate --ledger postgresql+psycopg://certa@db.example.org/ledger --json
    """
    with _open(ledger_url, write=True) as ledger:
        done = ledger.migrate()
        where = ledger.location
    if as_json:
        _emit_json({"ok": True, "ledger": where, "changed": done.changed, "stamped": done.stamped,
                    "from_schema": done.from_schema, "from_revision": done.from_revision,
                    "to_schema": done.to_schema, "to_revision": done.to_revision})
    elif not done.changed:
        click.echo(f"{where}: already at the newest schema (version {done.to_schema}, revision {done.to_revision}); "
                   "nothing to do")
    else:
        stamp = ", stamped: it had no alembic_version table" if done.stamped else ""
        click.echo(f"migrated {where} from schema version {done.from_schema} (revision {done.from_revision}{stamp}) "
                   f"to version {done.to_schema} (revision {done.to_revision}); no entry was rewritten")
    return EXIT_OK


@main.command()
@certa_command
def stages(as_json: bool, ledger_url: str) -> int:
    """List the registered stage types, every version of each.

    A spec runs the newest version unless it pins one (use: bakeoff.compare@1.0.0); older versions are kept,
    frozen, so that every certificate they issued replays bit for bit ('certa replay' uses the version a
    run recorded).

    \b
    Example:
      certa stages
      certa stages --json
    """
    from engine.core.stages import REGISTRY
    rows = [{"name": s.name, "version": s.version, "ref": s.ref, "newest": REGISTRY.is_newest(s),
             "status": "newest" if REGISTRY.is_newest(s) else "kept for replay", "inputs": list(s.input_knobs),
             "summary": s.summary, "changes": s.changes} for s in REGISTRY]
    if as_json:
        _emit_json(rows)
        return EXIT_OK
    for name in REGISTRY.names():
        versions = [row for row in rows if row["name"] == name]
        click.echo(f"{name:<22} {versions[-1]['summary']}")
        for row in reversed(versions):
            note = f": {row['changes']}" if row["changes"] else ""
            click.echo(f"  {row['version']:<8} {row['status']}{note}")
    return EXIT_OK


if __name__ == "__main__":
    main()
