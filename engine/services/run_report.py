"""``certa run`` as one call: run a spec file, record it (unless asked not to), write the certificate
(``-o``), a JUnit report (``--junit``) and a Markdown summary (``--summary``, appended) also when the run fails,
aborts or is refused, and report the outcome with its text and JSON forms.

Files are checked writable before anything is recorded (or the ledger file created), and the spec and its
inputs before the ledger is opened. A file that cannot be written after the run was recorded is a
``RecordedOutputError`` (exit 4) naming the run and the command that writes it again, so that a scheduler does
not run and record it twice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.engine.core.gates import FAIL, INCONCLUSIVE, PASS
from certa.engine.core.inputs import load_tables
from certa.engine.core.interpreter import Notify, RunDecisions, check_data_keys
from certa.engine.core.spec import load_plan
from certa.engine.foundation.atomic_files import append_atomically, check_writable
from certa.engine.foundation.errors import CertaError, OutputError, ProfileAbort, RecordedOutputError
from certa.engine.services.documents import write_certificate
from certa.engine.services.presentation.ci_summary import run_summary
from certa.engine.services.presentation.junit import run_suite, utc_timestamp, write_junit
from certa.engine.services.presentation.markdown import failed_rules
from certa.engine.services.presentation.warnings import run_warnings
from certa.engine.services.run import RunResult, ledger_for_run, run_plan
from certa.ledger.checkpoint import open_checkpoint
from certa.ledger.location import command_hint

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["RunReport", "run_spec_file", "after_recording", "VERDICT_EXIT_CODES", "verdict_exit_code"]


VERDICT_EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 6}
"""The exit code of ``certa run`` (and of a spec's row in ``certa batch``) for each verdict: 6 for INCONCLUSIVE,
the evidence could not decide at the declared precision (``certa.engine.core.gates``); no error class uses 6."""


def verdict_exit_code(verdict: str | None) -> int:
    """``VERDICT_EXIT_CODES[verdict]``; 1 (FAIL) for anything else (fail-closed)."""
    return VERDICT_EXIT_CODES.get(str(verdict), 1)


@dataclass(frozen=True)
class RunReport:
    """One ``certa run``: a completed run (``result``) or one a profile rule stopped (``abort``, with its
    failed ``rules``), its ``warnings``, and ``ledger`` as the user named it (None: not recorded)."""

    result: RunResult | None
    abort: ProfileAbort | None
    rules: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...]
    ledger: str | None

    @property
    def run_id(self) -> str | None:
        """The recorded run's id (None: not recorded)."""
        if self.abort is not None:
            return self.abort.run_id
        return self.result.run_id if self.result is not None and self.ledger is not None else None

    @property
    def exit_code(self) -> int:
        """0 PASS, 1 FAIL, 6 INCONCLUSIVE (``verdict_exit_code``), 3 aborted by a profile rule."""
        if self.abort is not None:
            return self.abort.exit_code
        return verdict_exit_code(self.result.verdict if self.result is not None else None)

    def as_json(self) -> dict[str, Any]:
        """The run id, verdict and digests; for an aborted run the error, the rule, the stage and the failed
        rules."""
        if self.abort is not None:
            return {**self.abort.as_json(), "run_id": self.abort.run_id, "rule": self.abort.rule,
                    "stage": self.abort.stage_id, "failed_rules": list(self.rules), "warnings": list(self.warnings)}
        assert self.result is not None
        return {"ok": True, "run_id": self.run_id, "verdict": self.result.verdict,
                "certificate_sha256": self.result.content_sha256, "results_sha256": self.result.results_sha256,
                "knobs_hash": self.result.knobs_hash, "warnings": list(self.warnings),
                "policy": None if self.result.policy is None else self.result.policy.as_json()}


@contextlib.contextmanager
def after_recording(recorded: str | None, *, retry: str | None = None) -> Iterator[None]:
    """Around a write after ``recorded`` ("run ID (PASS)"; None: nothing was recorded): an ``OutputError``
    becomes a ``RecordedOutputError`` (exit 4) naming the run and the ``retry`` command."""
    try:
        yield
    except OutputError as error:
        if recorded is None:
            raise
        raise RecordedOutputError(f"{recorded} is recorded, but {error}"
                                  + (f"; write it with: {retry}" if retry else "")) from None


def run_spec_file(spec: Path, *, input_paths: Mapping[str, Path] | None = None, ledger: str | None = None,
                  output: Path | None = None, junit_file: Path | None = None,
                  notify: Notify | None = None, registration_id: str | None = None,
                  registration_checkpoint: bytes | None = None,
                  public_keys: Sequence[Ed25519PublicKey] = (), summary_file: Path | None = None,
                  report_link: str | None = None) -> RunReport:
    """Run the spec at ``spec`` (inputs read from ``input_paths`` instead of the spec's paths), record it in
    ``ledger`` (None: not recorded), and write the certificate to ``output`` and a JUnit report to
    ``junit_file`` when given; the run matches the registration ``registration_id`` names (else the newest of
    its name: ``run_plan``), proven by ``registration_checkpoint`` (a checkpoint file's bytes, which each of
    ``public_keys`` must have signed) when given. ``summary_file``: the run's Markdown summary
    (``certa.engine.services.presentation.ci_summary.run_summary``, linking to ``report_link``) is appended to it
    (``append_atomically``: a CI job's summary file collects every step's). A refused spec or input raises its
    ``CertaError`` (its JUnit report and summary written first); a run a profile rule stopped is a ``RunReport``
    with ``abort``."""
    started, timestamp = time.monotonic(), utc_timestamp()
    name = str(spec)  # the spec's name once it loads: the JUnit report's suite and classname

    def reports(certificate: Mapping[str, Any] | None = None, **outcome: Any) -> None:
        """The JUnit report and the summary of the run's ``outcome`` (and ``certificate``, which the summary reads)."""
        if junit_file is not None:
            write_junit(junit_file, [run_suite(name=name, timestamp=timestamp, seconds=time.monotonic() - started,
                                               spec=str(spec), **outcome)])
        if summary_file is not None:
            text = run_summary(name=name, run_id=outcome.get("run_id"), failed_rules=outcome.get("failed_rules", ()),
                               abort_reason=outcome.get("abort_reason", ""), error=outcome.get("error", ""),
                               ledger=ledger, link=report_link, certificate=certificate)
            append_atomically(summary_file, text.encode() + b"\n", what="the summary")

    try:
        for path, what in ((output, "the certificate"), (junit_file, "the JUnit report"),
                           (summary_file, "the summary")):
            if path is not None:  # refused before anything is recorded (or the ledger file created)
                check_writable(path, what=what)
        checkpoint = None if registration_checkpoint is None else open_checkpoint(registration_checkpoint,
                                                                                  public_keys)
        plan = load_plan(spec)  # the spec and its inputs are checked before the ledger is opened (or created)
        name = plan.name
        tables = load_tables(plan, input_paths=input_paths)
        check_data_keys(plan, tables)  # a gate's bucket or vendor the data lack: refused before the ledger opens
        if ledger is None:
            result = run_plan(plan, tables, notify=notify)
        else:
            with ledger_for_run(ledger) as opened:
                result = run_plan(plan, tables, ledger=opened, notify=notify, registration_id=registration_id,
                                  registration_checkpoint=checkpoint)
    except ProfileAbort as abort:
        rules = failed_rules(abort.decisions)
        with after_recording(abort.run_id and f"aborted run {abort.run_id}"):
            reports(run_id=abort.run_id, failed_rules=rules, abort_reason=str(abort))
        return RunReport(result=None, abort=abort, rules=rules,
                         warnings=run_warnings(RunDecisions.of(abort.stage_id, abort.decisions)), ledger=ledger)
    except CertaError as error:
        reports(error=str(error), error_type=type(error).__name__)
        raise
    recorded = None if ledger is None else f"run {result.run_id} ({result.verdict})"
    if output is not None:
        retry = command_hint("export", result.run_id[:12], "-o", str(output), ledger=ledger)
        with after_recording(recorded, retry=retry):
            write_certificate(result.certificate, output)
    with after_recording(recorded):
        reports(result.certificate, run_id=None if ledger is None else result.run_id, verdict=result.verdict,
                gates=result.certificate["content"]["gates"])
    return RunReport(result=result, abort=None, rules=(), warnings=result.warnings, ledger=ledger)
