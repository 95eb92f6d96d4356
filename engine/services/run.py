"""Run and record: the service behind ``certa run``, ``certa batch`` and the Python API ``engine.run``.

    spec ──load_plan──▶ Plan ──load_tables──▶ tables ──execute_registered──▶ Execution
         ──seal──▶ certificate ──certa.ledger.run_record.completed_run──▶ Ledger.append_run   (one transaction)

A profile rule that stops the run is recorded as an aborted run (``certa.ledger.run_record.aborted_run``) and
re-raised as ``ProfileAbort`` naming it. Sealing and recording are written once, here (``record_execution``,
``record_abort``), for ``run`` and ``batch`` alike. A spec that names its trust policy (``approval:``) has it read
and its SHA-256 checked before the work (``certa.engine.services.policy_record.pinned_policy``), and recorded after
a completed run (``record_policy``: once per policy and keys). A run that records nothing leaves nothing behind: a SQLite
ledger file that ``ledger_for_run`` created for it is removed again (the Python API keeps this promise as the
command line does).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.engine.core.certificate import seal
from certa.engine.core.endpoint_input import is_url
from certa.engine.core.inputs import Columns, load_tables
from certa.engine.core.interpreter import AbortedExecution, Execution, Notify, RunDecisions, StageDecision
from certa.engine.core.spec import Plan, load_plan
from certa.engine.core.tables import Table
from certa.engine.foundation.canonical import TextNotUTF8
from certa.engine.foundation.errors import InputError
from certa.engine.services.presentation.warnings import run_warnings
from certa.engine.services.policy_record import RecordedPolicy, pinned_policy, record_policy

if TYPE_CHECKING:
    from certa.ledger import Ledger
    from certa.ledger.checkpoint import Checkpoint

__all__ = ["run", "run_plan", "RunResult", "new_run_id", "ledger_for_run", "record_execution", "record_abort",
           "input_location"]

LedgerLocation = str | os.PathLike[str]


@dataclass(frozen=True)
class RunResult:
    """The outcome of ``engine.run``: ``run_id``, ``verdict`` (PASS, FAIL or INCONCLUSIVE) and the ``certificate``
    dict."""

    run_id: str
    verdict: str
    certificate: dict[str, Any]
    decisions: Sequence[StageDecision] = field(repr=False, default=())
    warnings: tuple[str, ...] = ()
    """One line per decision whose outcome is ``warn`` (``run_warnings``): what ``certa run`` prints."""
    policy: RecordedPolicy | None = None
    """The trust policy the spec names, as recorded with the run (None: it names none, or nothing was recorded)."""

    @property
    def content_sha256(self) -> str:
        return str(self.certificate["content_sha256"])

    @property
    def results_sha256(self) -> str:
        return str(self.certificate["results_sha256"])

    @property
    def knobs_hash(self) -> str:
        return str(self.certificate["content"]["knobs_hash"])


def new_run_id() -> str:
    """A fresh run id: 32 lower-case hex digits (a random UUID)."""
    return uuid.uuid4().hex


@contextlib.contextmanager
def ledger_for_run(location: LedgerLocation | None) -> Iterator[Ledger]:
    """Open (creating if needed) the ledger at ``location`` for runs; a SQLite file opened here that holds no
    entry when an error ends the block (an input or stage error found while running, or a bug) is removed again,
    with its WAL and journal: a refused run leaves no file behind."""
    from certa.ledger import Ledger
    from certa.ledger.store import sqlite_file

    path = sqlite_file(location)
    created = path is not None and not path.exists()
    ledger = Ledger.open(location, create=True)
    try:
        yield ledger
    except Exception:  # a CertaError, or a bug reported as an internal error: neither leaves an empty ledger
        if created and path is not None and ledger.entry_count() == 0:
            ledger.close()
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
                leftover.unlink(missing_ok=True)
        raise
    finally:
        ledger.close()


def record_execution(ledger: Ledger, run_id: str, execution: Execution) -> dict[str, Any]:
    """Seal ``execution``'s content as run ``run_id`` and record the completed run in one transaction; returns
    the certificate."""
    from certa.ledger.run_record import completed_run

    certificate = seal(execution.content, run_id)
    with _text_refused(run_id):
        ledger.append_run(completed_run(run_id, execution.plan, execution.tables, execution.decisions.parts,
                                        execution.captured, certificate))
    return certificate


def record_abort(ledger: Ledger, run_id: str, plan: Plan, tables: Mapping[str, Table], decisions: RunDecisions,
                 *, reason: str, rule: str, stage_id: str | None) -> None:
    """Record a run a profile rule stopped: its spec, inputs, the decisions so far and the reason."""
    from certa.ledger.run_record import aborted_run

    with _text_refused(run_id):
        ledger.append_run(aborted_run(run_id, plan, tables, decisions.parts, reason=reason, rule=rule,
                                      stage_id=stage_id))


@contextlib.contextmanager
def _text_refused(run_id: str) -> Iterator[None]:
    """A decision whose canonical JSON would hold text that is not UTF-8 (an item id with a lone surrogate, which a
    JSON Lines input's escape can hold, listed as unmatched) is an ``InputError`` naming the text; the ledger's
    transaction is rolled back, nothing is recorded."""
    try:
        yield
    except TextNotUTF8 as error:
        raise InputError(f"run {run_id} cannot be recorded: a decision would hold text that is not UTF-8, "
                         f"{ascii(error.text)[:80]}: it holds a lone surrogate (a \\ud800-\\udfff escape with no "
                         "pair), which an input's JSON put there and no ledger entry can record; fix that text in "
                         "the input") from None


def run_plan(plan: Plan, tables: Mapping[str, Table], *, ledger: Ledger | None = None,
             notify: Notify | None = None, registration_id: str | None = None,
             registration_checkpoint: Checkpoint | None = None) -> RunResult:
    """``run`` after the spec is validated and the inputs are loaded (``load_plan``, ``load_tables``): the
    command line does those two first, so a bad spec or input never opens, let alone creates, a ledger.

    With a ledger, the run matches its registration (``certa.engine.services.registrations``: the one
    ``registration_id`` names, else the newest of the spec's name): a run whose knobs differ from it is recorded
    as aborted in ci and release (a ``ProfileAbort`` of rule ``registration``), and carries a ``registration`` warning in dev.
    ``registration_checkpoint`` (its signature verified) must prove the registration (``checkpoint_proof``: a
    ``LedgerError`` otherwise, nothing recorded); the certificate then names it."""
    from certa.engine.services.registrations import (  # it imports this module
        checkpoint_proof, execute_registered, find_registration, registration_record)

    if ledger is not None:
        ledger.require_writable()  # an old-schema ledger is refused before the work, not after it
    policy = pinned_policy(plan)  # a policy that differs from its pin is refused before the work
    run_id = new_run_id()
    registration = None
    if ledger is not None:
        found = find_registration(ledger, plan.name, registration_id)
        proof = None if registration_checkpoint is None else checkpoint_proof(ledger, found, registration_checkpoint)
        registration = registration_record(found, plan, proof)
    try:
        execution = execute_registered(plan, tables, registration, ledger=ledger, notify=notify)
    except AbortedExecution as aborted:
        abort = aborted.abort
        if ledger is not None:
            record_abort(ledger, run_id, plan, tables, aborted.decisions, reason=str(abort), rule=abort.rule,
                         stage_id=abort.stage_id)
        abort.run_id = run_id if ledger is not None else None
        raise abort from None
    if ledger is None:
        certificate = seal(execution.content, run_id)
    else:
        if notify:
            notify(f"recording run {run_id}: {len(execution.decisions)} decision(s), {len(tables)} input(s)")
        certificate = record_execution(ledger, run_id, execution)
    recorded = None if ledger is None or policy is None else record_policy(ledger, policy)
    return RunResult(run_id=run_id, verdict=execution.verdict, certificate=certificate,
                     decisions=execution.decisions, warnings=run_warnings(execution.decisions), policy=recorded)


def run(spec: str | Path | Mapping[str, Any], *, inputs: Mapping[str, Columns | Table] | None = None,
        ledger: Ledger | LedgerLocation | None = None, input_paths: Mapping[str, str | Path] | None = None,
        notify: Notify | None = None, registration_id: str | None = None) -> RunResult:
    """Validate and run ``spec`` (a path, YAML text or dict); record it when ``ledger`` is given.

    ``inputs`` maps input names to in-memory tables (dicts of column arrays) replacing the spec's paths;
    their SHA-256 is that of their canonical CSV bytes. ``ledger`` is an open ``ledger.Ledger``, or a location
    (a SQLite path or a database URL, opened and closed here: a run refused there leaves no new file), or None
    to run without recording (notebooks, simulations). ``registration_id`` names the registration the run must
    match (``run_plan``; default: the newest of the spec's name).

    Raises ``SpecError``/``InputError``/``StageError`` (nothing recorded) or ``ProfileAbort`` (the
    attempt and its reason are recorded; ``abort.run_id`` names it).

    **Usage**::

        from certa.engine import run
        result = run("specs/paired-ratio/spec.yaml", ledger="certa-ledger.db")
        result.verdict, result.certificate["content_sha256"]
    """
    plan = load_plan(spec)
    tables = load_tables(plan, inputs=inputs, input_paths=input_paths)
    if ledger is None or not isinstance(ledger, (str, os.PathLike)):
        return run_plan(plan, tables, ledger=ledger, notify=notify, registration_id=registration_id)
    with ledger_for_run(ledger) as opened:
        return run_plan(plan, tables, ledger=opened, notify=notify, registration_id=registration_id)


def input_location(value: str) -> Path | str:
    """Where ``--input NAME=VALUE`` reads input NAME from: a URL as given (an endpoint input's), else the path,
    ``~`` expanded and made absolute."""
    return value if is_url(value) else Path(value).expanduser().resolve()
