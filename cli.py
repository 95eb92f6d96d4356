"""The ``certa`` command: a thin shell over ``engine`` and ``ledger``.

Exit codes: 0 success / PASS / intact / reproduced; 1 FAIL / tampered / diverged; 2 invalid spec, input or
usage (nothing recorded), or a file that cannot be written (nothing partial is left); 3 aborted by a profile
rule (the attempt is recorded, no certificate); 4 ``certa run`` recorded the run but could not write its
``-o`` / ``--junit`` file (the message names the run and ``certa export RUN -o FILE``; do not run it again);
5 a served model's endpoint failed or answered what certa cannot use (nothing recorded); 6 INCONCLUSIVE: no
gate failed but the evidence could not decide one at its declared precision (recorded).
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

from certa.engine.foundation.errors import CertaError, InternalError, SigningError
from certa.ledger import DEFAULT_LEDGER_FILE

# The command starts at once: numpy, scipy, numba, SQLAlchemy and cryptography load per command, json and the
# display helpers when first used (``certa list`` pays only for what it needs: bench/ledger_reads.py).
if TYPE_CHECKING:
    from certa.ledger import Ledger

EXIT_OK, EXIT_FAIL = 0, 1


def _emit_json(data: Any) -> None:
    import json

    from certa.engine.services.presentation.display_text import json_display
    click.echo(json_display(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)))


def _fail(ctx_json: bool, error: CertaError) -> None:
    if ctx_json:
        _emit_json(error.as_json())
    from certa.engine.services.presentation.display_text import plain_text
    click.echo(f"error: {plain_text(error)}", err=True)
    sys.exit(error.exit_code)


def _run_command(func: Callable[..., int | None], *args: Any, **kwargs: Any) -> int | None:
    """Run a command; an exception that is neither certa's, click's nor a missing module is a bug, raised as an
    ``InternalError`` (one line; the traceback only with ``CERTA_TRACEBACK=1``)."""
    try:
        return func(*args, **kwargs)
    except (CertaError, click.ClickException, click.exceptions.Exit, click.Abort, ModuleNotFoundError):
        raise
    except Exception as error:
        if os.environ.get("CERTA_TRACEBACK") == "1":
            traceback.print_exc()
        raise InternalError(f"internal error, a bug in certa ({type(error).__name__}: {error}); please report it "
                            "with the command you ran (CERTA_TRACEBACK=1 prints where it happened)") from None


def _exit_with_code(func: Callable[..., int | None], *args: Any, as_json: bool, **kwargs: Any) -> None:
    """Run a command; map a ``CertaError`` to its exit code (and its JSON form with ``--json``), else exit with
    the command's code."""
    try:
        code = _run_command(func, *args, as_json=as_json, **kwargs)
    except CertaError as error:
        _fail(as_json, error)
    except ModuleNotFoundError as error:  # a module of an optional extra, imported where no require_extra ran first
        from certa.engine.foundation.extras import missing_extra
        missing = missing_extra(error, click.get_current_context().command_path)
        if missing is None:
            raise
        _fail(as_json, missing)
    sys.exit(code or 0)


_json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")


def certa_command(func: Callable[..., int | None]) -> Callable[..., None]:
    """Add --json and --ledger, map CertaError to its exit code, and exit with the command's code."""

    @_json_option
    @click.option("--ledger", "ledger_url", envvar="CERTA_LEDGER", default=DEFAULT_LEDGER_FILE, show_default=True,
                  help="Ledger: a SQLite file path or a SQLAlchemy URL (postgresql+psycopg://...). Env: CERTA_LEDGER.")
    @functools.wraps(func)
    def wrapper(*args: Any, as_json: bool, ledger_url: str, **kwargs: Any) -> None:
        _exit_with_code(func, *args, as_json=as_json, ledger_url=ledger_url, **kwargs)

    return wrapper


def ledgerless_command(func: Callable[..., int | None]) -> Callable[..., None]:
    """``certa_command`` for a command that reads no ledger: --json only, the same exit codes."""

    @_json_option
    @functools.wraps(func)
    def wrapper(*args: Any, as_json: bool, **kwargs: Any) -> None:
        _exit_with_code(func, *args, as_json=as_json, **kwargs)

    return wrapper


def _no_policy_for_bundle(policy_file: Path | None) -> None:
    """``--policy`` with a bundle file: its approval is decided by ``certa verify-bundle --policy``."""
    if policy_file is not None:
        raise click.UsageError("a bundle's approval under a policy is decided by 'certa verify-bundle BUNDLE "
                               "--public-key PUB --policy FILE'")


_bundle_key_option = click.option(
    "--public-key", "public_key_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With a bundle file: verify it first, as 'certa verify-bundle' does, with this Ed25519 public key (PEM) that "
         "must have signed its checkpoint; repeatable.")
"""``--public-key`` of ``show`` and ``report``, which render a bundle file as well as a run."""


def _policy_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--policy FILE``: the trust policy approvals are evaluated against (``what`` it does in this command)."""
    return click.option("--policy", "policy_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        help="A trust policy (YAML: keys -> people and roles, which roles must approve which runs; "
                             "see docs/ledger.md, 'Who may approve'). " + what + " Without it, approval is 'not checked' and no "
                             "review's claimed name is shown as an approval.")


def _open(ledger_url: str, *, write: bool = False) -> Ledger:
    """An existing ledger, opened read-only (it may sit on read-only media) unless the command ``write``s to it."""
    from certa.ledger import Ledger
    return Ledger.open(ledger_url, create=False, read_only=not write)


class _Printable(Protocol):
    """A service's result: its own JSON form (and, for a result that formats itself, ``text()``)."""

    def as_json(self) -> Any: ...


def _print(result: _Printable, as_json: bool, text: Callable[[Any], str] | None = None, *, stderr: str = "") -> None:
    """Print a service's result on stdout: ``--json`` its JSON form, else ``text(result)`` (a function of
    ``certa.engine.services.presentation.terminal``; None: the result's own ``text()``) after ``stderr``, its
    warnings and diagnostics, on stderr."""
    if as_json:
        _emit_json(result.as_json())
        return
    if stderr:
        click.echo(stderr, err=True)
    click.echo(text(result) if text is not None else result.text())  # type: ignore[attr-defined]


def _progress(quiet: bool) -> Callable[[str], None] | None:
    """Where a long command's progress lines go: stderr, or nowhere when ``quiet`` (``--json``)."""
    return None if quiet else (lambda message: click.echo(message, err=True))


def _parse_head(ctx: click.Context, param: click.Parameter, text: str | None) -> tuple[int, str] | None:
    """``--expect-head``: SEQ:HASH as ``certa head`` prints it."""
    if text is None:
        return None
    seq, sep, digest = text.partition(":")
    if not sep or not seq.isdigit() or len(digest) != 64:
        raise click.BadParameter("expected SEQ:HASH as printed by 'certa head'", param_hint="--expect-head")
    return int(seq), digest


def _parse_iso_time(ctx: click.Context, param: click.Parameter, text: str | None) -> str | None:
    """``--since``: an ISO 8601 date or time, kept as given."""
    from datetime import datetime

    if text is not None:
        try:
            datetime.fromisoformat(text.removesuffix("Z"))
        except ValueError:
            raise click.UsageError(f"--since {text!r} is not an ISO 8601 date or time (e.g. 2026-01-31 or "
                                   "2026-01-31T12:00)") from None
    return text


def _parse_report_link(ctx: click.Context, param: click.Parameter, text: str | None) -> str | None:
    """``--report-link``: an http(s) URL or a relative path, ``{run_id}`` standing for each run's id."""
    if text is None:
        return None
    from certa.engine.services.presentation.ci_summary import REPORT_LINK_SCHEMES
    scheme, colon, _ = text.partition(":")
    if colon and "/" not in scheme and not text.lower().startswith(REPORT_LINK_SCHEMES):
        raise click.BadParameter("expected an http:// or https:// URL or a relative path, e.g. "
                                 "https://ci.example.org/reports/{run_id}.html", param_hint="--report-link")
    return text


_summary_options = (
    click.option("--summary", "summary_file", type=click.Path(dir_okay=False, path_type=Path),
                 help="Also append the verdict as GitHub-flavoured Markdown to this file (created if absent), for a "
                      "CI job summary or a pull-request comment: the verdict in words, the gates, each stage's "
                      "reading, the run ids and digests. Example: --summary \"$GITHUB_STEP_SUMMARY\""),
    click.option("--report-link", metavar="URL", callback=_parse_report_link,
                 help="With --summary: link each run to its report at this URL or relative path ({run_id} stands "
                      "for the run's id), e.g. where a later CI step publishes 'certa report'."),
)


def summary_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--summary FILE`` and ``--report-link URL`` (``certa run``, ``certa batch``)."""
    for option in reversed(_summary_options):
        func = option(func)
    return func


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
@ledgerless_command
def validate(spec: Path, as_json: bool) -> int:
    """Validate SPEC against the schemas without running it. Exit 0 valid, 2 invalid.

    \b
    Example:
      certa validate specs/paired-ratio/spec.yaml
    """
    from certa.engine.services.specs import validate_spec
    _print(validate_spec(spec), as_json)
    return EXIT_OK


def _parse_input_overrides(values: tuple[str, ...]) -> dict[str, Path | str]:
    from certa.engine.services.run import input_location

    overrides: dict[str, Path | str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"expected NAME=PATH, got {value!r}", param_hint="--input")
        overrides[name] = input_location(path)
    return overrides


@main.command("run")
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--input", "input_overrides", multiple=True, metavar="NAME=PATH",
              help="Read input NAME from PATH instead of the spec's path (may be outside the spec's folder); for an "
                   "endpoint input, NAME=URL replaces its URL.")
@click.option("--no-record", is_flag=True, help="Run without writing to the ledger (the run id is not kept).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the certificate JSON to this file.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a JUnit XML report to this file for CI test reporters (one test case per gate, per "
                   "profile rule that aborted the run, or an error case for a refused spec or input), also when "
                   "the run fails or aborts. Example: certa run spec.yaml --junit reports/certa.xml")
@click.option("--registration", "registration_id", metavar="ID",
              help="Match the run to this registration ('certa register'; an id or its first digits) instead of "
                   "the newest registration of the spec's name.")
@click.option("--registration-checkpoint", "registration_checkpoint", metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A checkpoint signed over the registration ('certa register --key KEY --out FILE'): its signature "
                   "is checked with --public-key and the registration's inclusion in it proven; the certificate "
                   "then names it.")
@click.option("--public-key", "public_key_files", multiple=True, metavar="PUB",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed --registration-checkpoint; repeatable.")
@summary_options
@certa_command
def run_command(spec: Path, input_overrides: tuple[str, ...], no_record: bool, output: Path | None,
                junit_file: Path | None, registration_id: str | None, registration_checkpoint: Path | None,
                public_key_files: tuple[Path, ...], summary_file: Path | None, report_link: str | None,
                as_json: bool, ledger_url: str) -> int:
    """Run SPEC, record it in the ledger and print the verdict, the run id and the run's warnings (on
    stderr, 'warning: ...'). An aborted run prints its run id and each failed profile rule with its value and
    requirement. The certificate says whether the spec was registered before the run ('certa register') and
    how its knobs and gates differ from the registration; ci and release refuse (exit 3, recorded) a run that
    differs, dev records it with a warning.

    Exit 0 PASS, 1 FAIL, 2 invalid spec or input (nothing recorded), 3 aborted by a profile rule
    (the attempt and its reason are recorded, no certificate), 4 recorded but the -o, --junit or --summary file
    could not be written, 5 a served model's endpoint failed or answered what certa cannot use (nothing recorded),
    6 INCONCLUSIVE (recorded): no gate failed, but an interval gate's interval straddles its bound or a decided
    gate's stage stopped UNDECIDED; the evidence cannot decide at the declared precision (docs/gates.md).

    \b
    Examples:
      certa run specs/paired-ratio/spec.yaml
      certa run spec.yaml --input subject=/data/eval/subject.csv --json
      certa run spec.yaml --ledger ../ledger.db --junit reports/certa.xml
      certa run spec.yaml --summary "$GITHUB_STEP_SUMMARY" --report-link 'reports/{run_id}.html'
      certa run spec.yaml --registration 9b1d4e07
      certa run spec.yaml --registration-checkpoint audit/registered.checkpoint --public-key audit/certa.pub
    """
    from certa.engine.services.presentation.terminal import run_report_diagnostics, run_report_text
    from certa.engine.services.run_report import run_spec_file
    from certa.engine.services.keys import public_keys
    if no_record and (registration_id or registration_checkpoint):
        raise click.UsageError("--registration and --registration-checkpoint need the ledger: give them without "
                               "--no-record")
    if (registration_checkpoint is None) != (not public_key_files):
        raise click.UsageError("--registration-checkpoint and --public-key go together")
    if report_link is not None and summary_file is None:
        raise click.UsageError("--report-link goes into the --summary file: give --summary FILE too")
    report = run_spec_file(spec, input_paths=_parse_input_overrides(input_overrides),
                           ledger=None if no_record else ledger_url, output=output, junit_file=junit_file,
                           notify=_progress(as_json), registration_id=registration_id,
                           registration_checkpoint=registration_checkpoint.read_bytes() if registration_checkpoint
                           else None, public_keys=public_keys(public_key_files), summary_file=summary_file,
                           report_link=report_link)
    _print(report, as_json, run_report_text, stderr=run_report_diagnostics(report))
    return report.exit_code


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--key", "key_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Also sign a checkpoint of the ledger's head, the registration included, with this Ed25519 "
                   "private key (PEM) from 'certa keygen'; repeat it to sign with several keys. CERTA_KEY_PASSPHRASE "
                   "opens an encrypted key.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="With --key: the new file (never overwritten) the checkpoint is written to.")
@certa_command
def register(spec: Path, key_files: tuple[Path, ...], out_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Register SPEC before its evidence exists: record its text, knobs_hash, gates and planned sample sizes
    (n_min, n_max, replicates, test_size) in the ledger. No input is read. A later 'certa run' of a spec of the
    same name names the registration in its certificate ('registered on DATE, before the evidence'), and
    ci and release refuse a run whose knobs or gates differ from it. Exit 0 registered, 2 invalid spec.

    \b
    Examples:
      certa register specs/paired-ratio/spec.yaml
      certa register spec.yaml --key ~/.certa/certa.key --out audit/registered.checkpoint --json
    """
    from certa.engine.services.keys import private_keys
    from certa.engine.services.registrations import register_spec_file
    if (out_file is None) != (not key_files):
        raise click.UsageError("--key and --out go together: --out is where the signed checkpoint goes")
    _print(register_spec_file(spec, ledger_url, private_keys(key_files), out_file), as_json)
    return EXIT_OK


@main.command()
@click.argument("run_id", required=False)
@click.option("--expect-head", metavar="SEQ:HASH", callback=_parse_head,
              help="A head printed earlier by 'certa head' and kept outside the database; verify that the "
                   "ledger still contains it unchanged (detects truncation and a rewritten chain).")
@click.option("--checkpoint", "checkpoint_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A signed checkpoint written by 'certa checkpoint': check its signature with --public-key, "
                   "then that the ledger still contains its head unchanged.")
@click.option("--public-key", "public_key_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed --checkpoint; repeat it to require "
                   "several signers.")
@click.option("--since-checkpoint", is_flag=True,
              help="With --checkpoint: check its signature, its entry and Merkle root against the ledger (O(log n) "
                   "stored nodes), then only the entries after it (and the runs and blobs they record).")
@click.option("--record", is_flag=True,
              help="Once the ledger verifies intact, record how far this verification reached in the ledger's "
                   "metadata (never in the chain), shown by 'certa checkpoint' and the site's chain page, and with "
                   "--policy the trust policy as a ledger entry (its text and the keys it trusted; once per policy); "
                   "a ledger that cannot be written records nothing and says why.")
@click.option("--require-approval", "approval_key_files", multiple=True, metavar="PUBKEY",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM): every completed PASS run (or RUN_ID only) must have a valid "
                   "'approved' review signed by it, not followed by a 'rejected' one by the same key, its "
                   "reviews recorded in the order they were signed; repeat it to require several approvers.")
@_policy_option("Every completed PASS run (or RUN_ID only) must be APPROVED under it; each run's approval is listed.")
@click.option("--workers", type=click.IntRange(min=0), default=None, metavar="N",
              help="Processes checking entries beside the one reading the ledger (default: one per CPU for 50,000 "
                   "entries or more, none below; 0: none). The report is the same whatever their number.")
@certa_command
def verify(run_id: str | None, expect_head: tuple[int, str] | None, checkpoint_file: Path | None,
           public_key_files: tuple[Path, ...], since_checkpoint: bool, record: bool,
           approval_key_files: tuple[Path, ...], policy_file: Path | None, workers: int | None, as_json: bool,
           ledger_url: str) -> int:
    """Re-check the ledger: hash chain, certificates, stored inputs, method identities, signed reviews.

    Exit 0 intact, 1 tampered (the first broken entry is named, or the checkpoint signature fails) or, with
    --require-approval, a PASS run lacks an approval signed by a required key (the runs are named), or, with
    --policy, a PASS run is NOT APPROVED under the trust policy (what is missing is named), or, without --policy,
    a PASS run whose spec names a trust policy (approval: in the spec) is NOT APPROVED under the policy recorded
    with it.

    \b
    Examples:
      certa verify
      certa verify 3f2a9c01 --json
      certa verify --expect-head 1042:9b1f...e0
      certa verify --checkpoint audit/2026-11-22.checkpoint --public-key audit/certa.pub
      certa verify --checkpoint audit/2026-11-22.checkpoint --public-key audit/certa.pub --since-checkpoint --record
      certa verify --require-approval audit/alice.pub
      certa verify --policy audit/approvers.yaml
      certa verify 3f2a9c01 --policy audit/approvers.yaml --json
      certa verify --workers 0
    """
    from certa.engine.services.audit import audit_ledger
    from certa.engine.services.presentation.terminal import ledger_audit_text
    from certa.engine.services.reviews import read_policy
    from certa.engine.services.keys import public_keys
    if expect_head and checkpoint_file:
        raise click.UsageError("give either --expect-head or --checkpoint, not both")
    if (checkpoint_file is None) != (not public_key_files):
        raise click.UsageError("--checkpoint and --public-key go together")
    if since_checkpoint and checkpoint_file is None:
        raise click.UsageError("--since-checkpoint needs --checkpoint and --public-key")
    checkpoint_keys, approvers = public_keys(public_key_files), public_keys(approval_key_files)
    with _open(ledger_url) as ledger:
        audit = audit_ledger(ledger, run_id=run_id, expect_head=expect_head,
                             checkpoint=checkpoint_file.read_bytes() if checkpoint_file else None,
                             checkpoint_keys=checkpoint_keys, approvers=approvers, notify=_progress(as_json),
                             since_checkpoint=since_checkpoint, record=record, workers=workers,
                             policy=read_policy(policy_file))
    _print(audit, as_json, ledger_audit_text)
    return EXIT_OK if audit.ok else EXIT_FAIL


@main.command()
@click.argument("run_id", required=False)
@click.option("--all", "replay_every", is_flag=True, help="Replay every completed run (oldest first), or those the "
              "filters keep, and print one table.")
@click.option("--since", metavar="DATE", callback=_parse_iso_time, help="With --all: runs recorded at or after this UTC date or time "
              "(ISO 8601, e.g. 2026-01-31 or 2026-01-31T12:00).")
@click.option("--name", "name_pattern", metavar="NAME", help="With --all: runs whose spec name matches (shell "
              "wildcards allowed, e.g. 'vendor-*').")
@click.option("--no-record", is_flag=True, help="Replay and compare without recording the replay: the ledger is "
              "opened read-only, so this works on read-only media (e.g. an auditor's copy).")
@click.option("--recompute-evidence", is_flag=True, help="Re-run the run's models (model inputs) and compare the "
              "tables its stages captured, bit for bit or by the largest deviation per column; nothing is recorded. "
              "Model folders: --input NAME=FOLDER, else the spec's model: paths relative to the current directory; "
              "a folder whose manifest is not the recorded one is refused. A served model is queried again at the "
              "recorded URL (or --input NAME=URL); its spread is reported, its transcripts listed apart.")
@click.option("--input", "input_overrides", multiple=True, metavar="NAME=FOLDER",
              help="With --recompute-evidence: read model input NAME from FOLDER (a served model: NAME=URL).")
@certa_command
def replay(run_id: str | None, replay_every: bool, since: str | None, name_pattern: str | None, no_record: bool,
           recompute_evidence: bool, input_overrides: tuple[str, ...], as_json: bool, ledger_url: str) -> int:
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
      cd specs/model-perplexity && certa replay latest --recompute-evidence --ledger ../../certa-ledger.db
      certa replay 3f2a9c01 --recompute-evidence --input baseline=/models/base --input subject=/models/new
    """
    from certa.engine.services.audit import replay_runs
    from certa.engine.services.presentation.terminal import replays_text
    if replay_every == (run_id is not None):
        raise click.UsageError("give a RUN_ID or --all (with optional --since and --name), not both")
    if not replay_every and (since or name_pattern):
        raise click.UsageError("--since and --name filter --all")
    if input_overrides and not recompute_evidence:
        raise click.UsageError("--input gives model folders to --recompute-evidence")
    if recompute_evidence:
        if replay_every:
            raise click.UsageError("--recompute-evidence re-runs one RUN_ID's models, not --all")
        from certa.engine.services.evidence_recompute import recompute_evidence as recompute
        with _open(ledger_url) as ledger:
            evidence = recompute(ledger, run_id or "", folders=_parse_input_overrides(input_overrides),
                                 notify=_progress(as_json))
        _print(evidence, as_json)
        return EXIT_OK if evidence.reproduced else EXIT_FAIL
    with _open(ledger_url, write=not no_record) as ledger:
        replays = replay_runs(ledger, run_id, since=since, name=name_pattern, record=not no_record,
                              notify=_progress(as_json and not replay_every))
    _print(replays, as_json, replays_text)
    return EXIT_OK if replays.reproduced else EXIT_FAIL


@main.command()
@click.argument("run_id")
@click.option("--explain", is_flag=True, help="Open each stage's section with plain-language paragraphs: what was "
              "tested, what the verdict means and does not mean, the assumptions. Example: certa show latest --explain")
@_bundle_key_option
@_policy_option("The report's Approval section says APPROVED (by whom, in which role) or NOT APPROVED (what is "
                "missing) under it.")
@certa_command
def show(run_id: str, explain: bool, public_key_files: tuple[Path, ...], policy_file: Path | None, as_json: bool,
         ledger_url: str) -> int:
    """Show a run's certificate as a Markdown report, ending with its reviews and approval (--json prints the
    whole certificate). For an aborted run: the reason and each profile rule that stopped it, with its value
    and requirement. RUN_ID may be a bundle file ('certa prove'): its certificate is shown without a ledger, under
    a note saying whether it was verified (with --public-key) and with which keys; exit 1 if it does not verify
    (a bundle's approval under a policy: 'certa verify-bundle --policy').

    \b
    Examples:
      certa show 3f2a9c01
      certa show latest --explain
      certa show latest --policy audit/approvers.yaml
      certa show 3f2a9c01.bundle.json --public-key audit/certa.pub
    """
    if Path(run_id).is_file():
        _no_policy_for_bundle(policy_file)
        from certa.engine.services.browse import open_bundle
        from certa.engine.services.keys import public_keys
        from certa.engine.services.presentation.terminal import bundle_view_text
        bundle = open_bundle(Path(run_id), public_keys(public_key_files), explain=explain)
        _print(bundle, as_json, bundle_view_text)
        return EXIT_OK if bundle.verification is None or bundle.verified else EXIT_FAIL
    if public_key_files:
        raise click.UsageError(f"--public-key verifies a bundle file, and there is no file {run_id!r}")
    from certa.engine.services.browse import show_run
    from certa.engine.services.presentation.terminal import run_view_text
    from certa.engine.services.reviews import read_policy
    from certa.ledger.sqlite_reader import reading  # a SQLite file without SQLAlchemy
    with reading(ledger_url) as ledger:
        view = show_run(ledger, run_id, explain=explain, ledger_name=ledger_url, policy=read_policy(policy_file))
    _print(view, as_json, run_view_text)
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
    from certa.engine.services.browse import list_decisions
    from certa.engine.services.presentation.terminal import decision_listing_text
    with _open(ledger_url) as ledger:
        listing = list_decisions(ledger, run_id, kind=kind, limit=limit, after=after, ledger_name=ledger_url)
        for chunk in listing.json_chunks() if as_json else decision_listing_text(listing):
            click.echo(chunk, nl=False)
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
    from certa.engine.services.run_list import newest_runs

    def text(runs: Any) -> str:  # imported for the text alone: ``certa list --json`` loads no terminal helper
        from certa.engine.services.presentation.terminal import run_list_text
        return run_list_text(runs)

    _print(newest_runs(ledger_url, limit), as_json, text)
    return EXIT_OK


@main.command()
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="File to write to (replaced atomically if it exists).")
@click.option("--format", "form", type=click.Choice(["certificate", "hf-eval-results", "cyclonedx", "in-toto"]),
              default="certificate", show_default=True,
              help="certificate: the certificate JSON. hf-eval-results: a Hugging Face .eval_results/*.yaml file "
                   "(needs --hf-dataset). cyclonedx: a CycloneDX 1.6 ML-BOM whose model card carries each estimate "
                   "with its confidence interval. in-toto: use 'certa attest'.")
@click.option("--hf-dataset", metavar="ID", help="hf-eval-results: the Hub benchmark dataset the run measured "
              "(e.g. cais/hle).")
@click.option("--hf-task", metavar="ID", default="default", show_default=True,
              help="hf-eval-results: the benchmark's task id (its eval.yaml).")
@click.option("--source-url", metavar="URL", help="hf-eval-results: where the certificate or its bundle ('certa "
              "prove') is published; each result's source links to it.")
@certa_command
def export(run_id: str, output: Path, form: str, hf_dataset: str | None, hf_task: str, source_url: str | None,
           as_json: bool, ledger_url: str) -> int:
    """Write a run's certificate to a file: the certificate JSON (the default), or the same evidence in a
    format other tools read: Hugging Face evaluation results or a CycloneDX model card. See docs/exports.md.

    \b
    Examples:
      certa export 3f2a9c01 -o cert.json
      certa export 3f2a9c01 --format cyclonedx -o model-bom.cdx.json
      certa export 3f2a9c01 --format hf-eval-results --hf-dataset Idavidrein/gpqa --hf-task gpqa_diamond \\
          --source-url https://example.org/audit/3f2a9c01.bundle.json -o .eval_results/gpqa.yaml
    """
    if form == "in-toto":
        raise click.UsageError("--format in-toto: a signed in-toto Statement is written by 'certa attest RUN --key "
                               "KEY -o FILE' (checked by 'certa verify-attestation'); export writes none")
    if (form == "hf-eval-results") != (hf_dataset is not None):
        raise click.UsageError("--format hf-eval-results and --hf-dataset go together: name the Hub benchmark "
                               "dataset the run measured")
    if form != "hf-eval-results" and (source_url is not None or hf_task != "default"):
        raise click.UsageError("--hf-task and --source-url are for --format hf-eval-results")
    from certa.engine.services.browse import export_certificate
    with _open(ledger_url) as ledger:
        exported = export_certificate(ledger, run_id, output, form=form, hf_dataset=hf_dataset or "",
                                      hf_task=hf_task, source_url=source_url)
    _print(exported, as_json)
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
    from certa.engine.services.browse import diff_runs
    from certa.engine.services.presentation.terminal import run_diff_text
    with _open(ledger_url) as ledger:
        compared = diff_runs(ledger, run_a, run_b, every_element=every_element, only_changed=only_changed)
    _print(compared, as_json, run_diff_text)
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
    from certa.engine.services.browse import ledger_head
    with _open(ledger_url) as ledger:
        _print(ledger_head(ledger), as_json)
    return EXIT_OK


@main.command()
@click.option("--key", "key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 private key (PEM) from 'certa keygen'; repeat it to sign with several keys. An "
                   "encrypted key is opened with the passphrase in the environment variable CERTA_KEY_PASSPHRASE.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the checkpoint to this new file (never overwritten) instead of standard output.")
@click.option("--format", "checkpoint_format", type=click.Choice(["dsse", "tlog"]), default="dsse", show_default=True,
              help="dsse: certa's checkpoint (a DSSE envelope: head, entry hash, Merkle root, time). tlog: a C2SP "
                   "tlog-checkpoint signed note (origin, size, Merkle root) that transparency-log tools and "
                   "witnesses read; needs --origin.")
@click.option("--origin", metavar="NAME",
              help="With --format tlog: the log's name on the note's first line, e.g. example.org/certa/models.")
@click.option("--key-name", metavar="NAME",
              help="With --format tlog: the name on the signature line(s) (no spaces, no '+'; default: --origin).")
@certa_command
def checkpoint(key_files: tuple[Path, ...], out_file: Path | None, checkpoint_format: str, origin: str | None,
               key_name: str | None, as_json: bool, ledger_url: str) -> int:
    """Sign the ledger's current head (a DSSE envelope, Ed25519). Keep checkpoints outside the database;
    'certa verify --checkpoint FILE --public-key KEY' then detects a truncated or rewritten chain even if
    every hash in the database was recomputed, and '... --since-checkpoint' verifies only what follows it.
    It also says how far the last full and incremental 'certa verify' reached (on standard error when the
    envelope goes to standard output). With --format tlog the head is a C2SP tlog checkpoint instead: witnesses
    add their lines with 'certa cosign', and 'certa prove --consistency OLD NEW' proves two checkpoints consistent.

    \b
    Examples:
      certa checkpoint --key ~/.certa/certa.key --out audit/$(date +%F).checkpoint
      certa checkpoint --key ~/.certa/certa.key --json
      certa checkpoint --key ~/.certa/certa.key --format tlog --origin example.org/certa/models \\
          --out audit/$(date +%F).note
    """
    from certa.engine.services.keys import private_keys
    if checkpoint_format == "dsse" and (origin or key_name):
        raise click.UsageError("--origin and --key-name go with --format tlog")
    if checkpoint_format == "tlog" and not origin:
        raise click.UsageError("--format tlog needs --origin (the log's name, e.g. example.org/certa/models)")
    signing_keys = private_keys(key_files)
    with _open(ledger_url) as ledger:
        if origin:
            from certa.engine.services.tlog import sign_head_note
            note = sign_head_note(ledger, [(key_name or origin, key) for key in signing_keys], origin, out_file)
            _print(note, as_json)
            return EXIT_OK
        from certa.engine.services.checkpoints import sign_head
        signed = sign_head(ledger, signing_keys, out_file)
    _print(signed, as_json, stderr="" if out_file else signed.verification_text())
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
                   "signature must verify before yours is added (a tlog checkpoint: each key given must have "
                   "signed it; lines of other keys are kept unchecked).")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The new checkpoint file with the added signature(s) (never overwritten).")
@click.option("--key-name", metavar="NAME",
              help="For a tlog checkpoint (a signed note): the name on your signature line, e.g. your witness's "
                   "name (no spaces, no '+'). Required for a note, refused for certa's own checkpoint.")
@certa_command
def cosign(checkpoint_file: Path, key_files: tuple[Path, ...], public_key_files: tuple[Path, ...], out_file: Path,
           key_name: str | None, as_json: bool, ledger_url: str) -> int:
    """Add your signature to a checkpoint after checking its existing signatures and that this ledger has
    exactly its head and Merkle root (a second pair of eyes: verification can then require both keys). A tlog
    checkpoint ('certa checkpoint --format tlog') gets a signature line, as a witness co-signs a log's note.

    \b
    Examples:
      certa cosign audit/2026-11-22.checkpoint --public-key certa.pub --key ~/.certa/officer.key \\
          --out audit/2026-11-22.cosigned
      certa cosign audit/2026-11-22.note --public-key certa.pub --key ~/.certa/witness.key \\
          --key-name witness.example.org --out audit/2026-11-22.witnessed.note
    """
    from certa.engine.services.keys import private_keys, public_keys
    from certa.ledger.signed_note import is_signed_note
    checkpoint_bytes = checkpoint_file.read_bytes()
    note = is_signed_note(checkpoint_bytes)
    if note and key_name is None:
        raise SigningError(f"{checkpoint_file} is not certa's own (JSON) checkpoint; if it is a tlog checkpoint (a "
                           "signed note), give --key-name, the name on your signature line")
    if not note and key_name is not None:
        raise SigningError(f"{checkpoint_file} is certa's own (JSON) checkpoint: --key-name is only for a tlog "
                           "checkpoint (a signed note)")
    signing_keys, signer_keys = private_keys(key_files), public_keys(public_key_files)
    with _open(ledger_url) as ledger:
        if key_name is not None:
            from certa.engine.services.tlog import cosign_note
            _print(cosign_note(ledger, checkpoint_bytes, [(key_name, key) for key in signing_keys], signer_keys,
                               out_file), as_json)
            return EXIT_OK
        from certa.engine.services.checkpoints import cosign as cosign_checkpoint
        cosigned = cosign_checkpoint(ledger, checkpoint_bytes, signing_keys, signer_keys, out_file)
    _print(cosigned, as_json)
    return EXIT_OK


@main.command()
@click.argument("run_id", required=False)
@click.option("--checkpoint", "checkpoint_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A signed checkpoint of this ledger taken after the run ('certa checkpoint').")
@click.option("--consistency", "consistency_files", nargs=2, metavar="OLD NEW",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Instead of a run: an RFC 6962 consistency proof that the ledger signed at checkpoint OLD is the "
                   "beginning of the one signed at NEW (either format; no RUN_ID, no --checkpoint).")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the bundle or proof to this new file (never overwritten) instead of standard output.")
@certa_command
def prove(run_id: str | None, checkpoint_file: Path | None, consistency_files: tuple[Path, Path] | None,
          out_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Bundle a run's certificate with a Merkle inclusion proof against a signed checkpoint, so that anyone
    can check it offline with 'certa verify-bundle' (no ledger needed, only the signer's public key); or, with
    --consistency OLD NEW, prove that nothing signed at an older checkpoint was changed by a newer one.

    \b
    Examples:
      certa prove 3f2a9c01 --checkpoint audit/2026-11-22.checkpoint -o 3f2a9c01.bundle.json
      certa prove --consistency audit/2026-11-01.note audit/2026-11-22.note -o audit/nov.consistency.json
    """
    if consistency_files:
        if run_id or checkpoint_file:
            raise click.UsageError("--consistency OLD NEW takes no RUN_ID and no --checkpoint")
        from certa.engine.services.tlog import prove_consistency
        old, new = consistency_files
        with _open(ledger_url) as ledger:
            _print(prove_consistency(ledger, old.read_bytes(), new.read_bytes(), out_file), as_json)
        return EXIT_OK
    if not run_id or checkpoint_file is None:
        raise click.UsageError("give RUN_ID and --checkpoint FILE, or --consistency OLD NEW")
    from certa.engine.services.checkpoints import prove_run
    with _open(ledger_url) as ledger:
        proof = prove_run(ledger, run_id, checkpoint_file.read_bytes(), out_file)
    _print(proof, as_json)
    return EXIT_OK


@main.command()
@click.argument("run_id")
@click.option("--key", "key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 private key (PEM); repeat it to sign with several keys. CERTA_KEY_PASSPHRASE opens "
                   "an encrypted key.")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the attestation to this new file (never overwritten) instead of standard output.")
@click.option("--predicate", type=click.Choice(["certificate", "test-result", "eval-result"]),
              default="certificate", show_default=True,
              help="The predicate: the whole certificate (certa's own type); in-toto's Test Result "
                   "(https://in-toto.io/attestation/test-result/v0.1: the verdict as PASSED/WARNED/FAILED, each gate "
                   "by its outcome, the certificate by its digest); or the proposed, unmerged eval-result "
                   "(https://in-toto.io/attestation/eval-result/v0.1: each gate bound as a claim metric, comparator, "
                   "threshold, passed; the sample size; the replay status).")
@click.option("--model", "model_input", metavar="INPUT",
              help="eval-result: the input that is the evaluated model [default: subject].")
@click.option("--dataset", "dataset_input", metavar="INPUT",
              help="eval-result: the input holding the evaluated samples [default: the one data input beside a "
                   "model folder, else the model input itself].")
@certa_command
def attest(run_id: str, key_files: tuple[Path, ...], out_file: Path | None, predicate: str,
           model_input: str | None, dataset_input: str | None, as_json: bool, ledger_url: str) -> int:
    """Sign a run's certificate as an in-toto Statement v1 (DSSE envelope): its subjects are the SHA-256 of
    the spec, of every input and of each file of a model folder (input:NAME/PATH); its predicate the
    certificate, in-toto's Test Result with --predicate test-result, or the proposed eval-result with
    --predicate eval-result. Check it with 'certa verify-attestation'.

    \b
    Examples:
      certa attest 3f2a9c01 --key ~/.certa/certa.key -o 3f2a9c01.intoto.json
      certa attest 3f2a9c01 --key ~/.certa/certa.key --predicate test-result -o 3f2a9c01.test-result.json
      certa attest 3f2a9c01 --key ~/.certa/certa.key --predicate eval-result --dataset text -o 3f2a9c01.eval.json
    """
    from certa.engine.services.attestation import attest_run
    from certa.engine.services.keys import private_keys
    if predicate != "eval-result" and (model_input or dataset_input):
        raise click.UsageError("--model and --dataset name the inputs of an eval-result: give --predicate eval-result")
    signing_keys = private_keys(key_files)
    with _open(ledger_url) as ledger:
        attestation = attest_run(ledger, run_id, signing_keys, out_file, predicate, model=model_input,
                                 dataset=dataset_input)
    _print(attestation, as_json)
    return EXIT_OK


@main.command("verify-attestation")
@click.argument("attestation_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--public-key", "public_key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed the attestation; repeatable.")
@click.option("--file", "data_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A local file (spec or data) that must be one of the attested subjects; repeatable.")
@ledgerless_command
def verify_attestation_command(attestation_file: Path, public_key_files: tuple[Path, ...],
                               data_files: tuple[Path, ...], as_json: bool) -> int:
    """Check an in-toto attestation of a certificate offline: every signature, the certificate's schema,
    hash and method identities, that the subjects are the digests it records, and that each --file is one
    of them. A Test Result or eval-result attestation carries no certificate: its signatures, shape and files
    are checked, and it names the certificate by its digest (check that with 'certa verify-bundle'). Needs no
    ledger.

    Exit 0 verified, 1 not (each failed check is named), 2 not an attestation or key.

    \b
    Example:
      certa verify-attestation 3f2a9c01.intoto.json --public-key certa.pub --file data/decisions.csv
    """
    from certa.engine.services.attestation import verify_attestation
    from certa.engine.services.presentation.terminal import attestation_report_text
    from certa.engine.services.keys import public_keys
    report = verify_attestation(attestation_file.read_bytes(), public_keys(public_key_files),
                                files={str(path): path.read_bytes() for path in data_files})
    _print(report, as_json, attestation_report_text)
    return EXIT_OK if report.verified else EXIT_FAIL


@main.command("verify-bundle")
@click.argument("bundle_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--public-key", "public_key_files", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="An Ed25519 public key (PEM) that must have signed the bundle's checkpoint; repeatable.")
@_policy_option("The run's approval is decided from the reviews the bundle proves (a format-2 bundle), and the "
                "command exits 1 when it is NOT APPROVED.")
@ledgerless_command
def verify_bundle_command(bundle_file: Path, public_key_files: tuple[Path, ...], policy_file: Path | None,
                          as_json: bool) -> int:
    """Check a certificate bundle offline: the checkpoint signature, the certificate's own hash and schema,
    the Merkle path from its ledger entry to the signed root, and each review it carries. Needs no ledger.
    With --policy, the run's approval is decided from the bundle's reviews.

    Exit 0 verified (and, with --policy, approved), 1 not (each failed check is named, or what the approval
    lacks), 2 not a bundle, key or policy.

    \b
    Examples:
      certa verify-bundle 3f2a9c01.bundle.json --public-key audit/certa.pub
      certa verify-bundle 3f2a9c01.bundle.json --public-key audit/certa.pub --policy audit/approvers.yaml
    """
    from certa.engine.services.audit import bundle_approval, verify_bundle_file
    from certa.engine.services.presentation.terminal import bundle_report_text
    from certa.engine.services.keys import public_keys
    from certa.engine.services.reviews import read_policy
    policy = read_policy(policy_file)
    verification = verify_bundle_file(bundle_file, public_keys(public_key_files))
    if verification.verified and policy is not None:
        verification = bundle_approval(verification, policy)
    _print(verification, as_json, bundle_report_text)
    approved = verification.approval is None or verification.approval.approved
    return EXIT_OK if verification.verified and approved else EXIT_FAIL


@main.command()
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="Where to write certa.key (private, mode 0600) and certa.pub.")
@click.option("--name", default="certa", show_default=True, help="File name stem of the two key files.")
@click.option("--passphrase-env", "passphrase_variable", metavar="VAR",
              help="Encrypt the private key with the passphrase in the environment variable VAR (never on the "
                   "command line). Commands given the key with --key open it with the passphrase in "
                   "CERTA_KEY_PASSPHRASE.")
@ledgerless_command
def keygen(out_dir: Path, name: str, passphrase_variable: str | None, as_json: bool) -> int:
    """Create an Ed25519 key pair for signing checkpoints, reviews and attestations. Existing files are never
    overwritten; the private key is written with mode 0600, encrypted with --passphrase-env.

    \b
    Examples:
      certa keygen --out-dir ~/.certa && certa checkpoint --key ~/.certa/certa.key
      read -rs CERTA_KEY_PASSPHRASE && export CERTA_KEY_PASSPHRASE
      certa keygen --out-dir ~/.certa --name alice --passphrase-env CERTA_KEY_PASSPHRASE
      certa review 3f2a9c01 --by alice@example.org --decision approved --key ~/.certa/alice.key
    """
    from certa.engine.services.keys import create_key_pair
    _print(create_key_pair(out_dir, name, passphrase_variable), as_json)
    return EXIT_OK


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
@summary_options
@certa_command
def batch_command(specs: tuple[Path, ...], scheduler: str | None, workers: int, batch_id: str | None, retries: int,
                  input_overrides: tuple[str, ...], junit_file: Path | None, summary_file: Path | None,
                  report_link: str | None, as_json: bool, ledger_url: str) -> int:
    """Run many specs on Dask workers and record each in the ledger as it completes.

    A folder means every *.yaml/*.yml file below it that is a run spec (a top-level certa: key), sorted;
    its other YAML files (an evaluator's task files, say) are listed as skipped, each with its reason, in the
    final table and in --json. Every input format certa run reads works here. Each run is computed on a worker from the bytes
    the client read and hashed; the client seals and records (the only ledger writer). Runs already
    recorded by the same batch are skipped ("already recorded"), so re-running resumes. Exit code: the
    worst of the batch, 2 (invalid spec/input or error, not recorded) > 3 (aborted, recorded) > 1 (FAIL)
    > 6 (INCONCLUSIVE) > 0 (PASS); 4 when runs were recorded but the --junit or --summary file could not be
    written (the message names them). --summary appends one Markdown table: a row per spec and the totals.
    Each run's warnings are printed on stderr ('warning: ...') and listed in --json. See docs/batch.md.

    \b
    Examples:
      certa batch specs/
      certa batch specs/ --scheduler tcp://10.0.0.5:8786 --ledger postgresql+psycopg://certa@db/certa
      certa batch shards/ merge.yaml --batch-id bakeoff-2026-11 --json
      certa batch candidates/ --input baseline=/data/eval/baseline-2026-11.csv
      certa batch specs/ --junit reports/certa.xml
      certa batch specs/ --summary "$GITHUB_STEP_SUMMARY"
    """
    from certa.engine.services.batch import record_batch  # imports Dask only on this path
    from certa.engine.services.presentation.terminal import batch_report_diagnostics, batch_report_text
    if report_link is not None and summary_file is None:
        raise click.UsageError("--report-link goes into the --summary file: give --summary FILE too")
    report = record_batch(specs, ledger=ledger_url, junit_file=junit_file, scheduler=scheduler, workers=workers,
                          batch_id=batch_id, retries=retries, input_paths=_parse_input_overrides(input_overrides),
                          notify=_progress(as_json), summary_file=summary_file, report_link=report_link)
    _print(report, as_json, batch_report_text, stderr=batch_report_diagnostics(report))
    return report.exit_code


@main.command()
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="HTML file to write (one self-contained page: inline CSS and SVG plots, nothing fetched).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists (by default it is never overwritten).")
@_bundle_key_option
@_policy_option("The verdict box says APPROVED (by whom, in which role) or NOT APPROVED (what is missing) under it, "
                "and the reviews table names each signer from it.")
@certa_command
def report(run_id: str, output: Path, force: bool, public_key_files: tuple[Path, ...], policy_file: Path | None,
           as_json: bool, ledger_url: str) -> int:
    """Write a run's report as one self-contained HTML page for reviewers: the verdict, the gates, each
    stage's decision plotted with its numbers, identity and hashes, the verification status (chain and
    newest replay, as of now), the approval under the trust policy and every review. The same ledger (and
    policy) gives the same bytes; it prints to PDF. RUN_ID may be a bundle file ('certa prove'): its certificate
    is reported without a ledger, the page saying whether it was verified (with --public-key) and with which keys;
    nothing is written if it does not verify (exit 1).

    \b
    Examples:
      certa report 3f2a9c01 -o run.html
      certa report 3f2a9c01 -o run.html --policy audit/approvers.yaml
      certa report 3f2a9c01.bundle.json --public-key audit/certa.pub -o run.html
    """
    from certa.engine.foundation.extras import require_extra
    require_extra("report", "certa report")  # matplotlib and Jinja2: only for this command
    if Path(run_id).is_file():
        _no_policy_for_bundle(policy_file)
        from certa.engine.services.browse import open_bundle
        from certa.engine.services.keys import public_keys
        bundle = open_bundle(Path(run_id), public_keys(public_key_files))
        if bundle.verification is not None and not bundle.verified:
            from certa.engine.services.presentation.terminal import bundle_report_text
            _print(bundle.verification, as_json, bundle_report_text)
            return EXIT_FAIL
        from certa.engine.services.reports import write_bundle_report
        _print(write_bundle_report(bundle, output, force=force), as_json)
        return EXIT_OK
    if public_key_files:
        raise click.UsageError(f"--public-key verifies a bundle file, and there is no file {run_id!r}")
    from certa.engine.services.reports import write_report
    from certa.engine.services.reviews import read_policy
    with _open(ledger_url) as ledger:
        written = write_report(ledger, run_id, output, force=force, policy=read_policy(policy_file))
    _print(written, as_json)
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
@_policy_option("The index's approval column and each run page say APPROVED (by whom, in which role) or NOT "
                "APPROVED (what is missing) under it.")
@certa_command
def site(out_dir: Path, checkpoint_files: tuple[Path, ...], public_key_files: tuple[Path, ...], jobs: int,
         policy_file: Path | None, as_json: bool, ledger_url: str) -> int:
    """Write a static site of the whole ledger that opens from file:// with no server: an index of runs
    (sortable, filterable), each run's report, the changes between consecutive runs of a spec, and the
    chain head with each signed checkpoint. The ledger is verified once; a re-run rewrites only the pages
    whose inputs changed (DIR/.certa-site.json) and never touches files certa did not write.

    \b
    Examples:
      certa site -o audit-site --checkpoint audit/2026-11-22.checkpoint --public-key audit/certa.pub
      certa site -o audit-site --policy audit/approvers.yaml
    """
    from certa.engine.foundation.extras import require_extra
    require_extra("report", "certa site")  # matplotlib and Jinja2: only for this command
    from certa.engine.services.reports import write_site
    from certa.engine.services.reviews import read_policy
    from certa.engine.services.keys import public_keys
    keys = public_keys(public_key_files)
    with _open(ledger_url) as ledger:
        written = write_site(ledger, out_dir, checkpoints=checkpoint_files, public_keys=keys, jobs=jobs,
                             notify=_progress(quiet=False), policy=read_policy(policy_file))
    _print(written, as_json)
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
    from certa.engine.services.keys import private_keys
    from certa.engine.services.reviews import record_review
    signing_keys = private_keys(key_files)
    with _open(ledger_url, write=True) as ledger:
        recorded = record_review(ledger, run_id, reviewer=reviewer, decision=decision, note=note,
                                 private_keys=signing_keys)
    _print(recorded, as_json)
    return EXIT_OK


@main.command()
@certa_command
def migrate(as_json: bool, ledger_url: str) -> int:
    """Upgrade the ledger's schema in place to this certa's, in one transaction. No value of any entry,
    stored input or run changes: 'certa verify' and checkpoints signed before still hold. For 10^6 entries on
    SQLite: schema 5 copies the entries table into one without the dropped constraints (about a minute, and
    the table's size again on disk); schema 6 renumbers the stored Merkle nodes and drops their leaf rows
    (about 15 s); schema 7 widens the runs table's verdict column for INCONCLUSIVE (on SQLite a copy of that
    table: a row a run) and admits 'certa register' entries (an index built, no entry copied). Running it again does nothing. Back up a shared ledger first and run this once, while no
    writer runs.

    \b
    Examples:
      certa migrate
      certa migrate --ledger postgresql+psycopg://certa@db.example.org/ledger --json
    """
    from certa.engine.services.migration import migrate_ledger
    with _open(ledger_url, write=True) as ledger:
        migrated = migrate_ledger(ledger)
    _print(migrated, as_json)
    return EXIT_OK


@main.command()
@ledgerless_command
def stages(as_json: bool) -> int:
    """List the registered stage types, every version of each.

    A spec runs the newest version unless it pins one (use: bakeoff.compare@1.0.0); older versions are kept,
    frozen, so that every certificate they issued replays bit for bit ('certa replay' uses the version a
    run recorded).

    \b
    Example:
      certa stages
      certa stages --json
    """
    from certa.engine.services.presentation.terminal import stage_catalog_text
    from certa.engine.services.specs import stage_catalog
    _print(stage_catalog(), as_json, stage_catalog_text)
    return EXIT_OK


if __name__ == "__main__":
    main()
