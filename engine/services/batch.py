"""``certa batch``: many run specs computed on Dask workers, recorded by one client in one ledger.

Data flow (one writer, so SQLite works as well as PostgreSQL)::

    client: discover specs ─▶ load_plan (validate) + read_inputs (read and hash every input)
            ─▶ idempotency key per spec ─▶ skip keys already recorded (resume)
            ─▶ submit compute_run(plan, input bytes, ledger snapshot) ──▶ Dask worker: execute()
            ◀─ WorkerResult (content, decisions, captured tables) as each completes
            ─▶ certa.engine.services.run.record_execution / record_abort (+ a ``batch`` decision) ─▶ table

* **Content-addressed inputs.** A worker never reads a file: it gets the bytes the client hashed (inline
  when small, else scattered once per distinct SHA-256) and checks their SHA-256 before parsing, so it
  computes on exactly the bytes the ledger stores.
* **Idempotency.** run id = first 32 hex digits of SHA-256(JCS{batch_id, spec_sha256, input SHA-256s,
  seed}) (``certa.engine.services.batch_ledger``). The runs table's primary key makes a second record of the same key
  impossible; a re-run of the same command skips the keys already recorded ("already recorded").
  The default batch id is derived from the sorted (spec SHA-256, input SHA-256s) of the valid specs.
* **Faults.** A worker that dies mid-run: Dask reschedules its tasks on the others (``retries`` more
  attempts on errors); the client records each key once, when its one future completes. A task that
  still fails (e.g. every attempt lost its worker) is reported as an error, nothing recorded: re-run to
  resume. A spec that is invalid (``SpecError``/``InputError``) or whose stage fails (``StageError``) is an
  error row (exit 2), a profile abort is recorded as by ``certa run`` (exit 3); the others go on.
* **Ledger reads.** Stages that read recorded runs (``conformal.monitor``'s ``report_run``,
  ``bakeoff.merge``'s ``shard_runs``/``shard_batch``) get a ``LedgerSnapshot`` of the certificates the
  client fetched for them. A spec whose merge names this batch (``shard_batch: <batch id>``) waits until
  every other spec of the batch is recorded.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.ledger.location import masked_ledger
from certa.ledger.run_record import BATCH_DECISION

from certa.engine.services.batch_ledger import LedgerSnapshot, idempotency_key, ledger_references, run_id_for_key
from certa.engine.services.batch_worker import WorkerResult, compute_run
from certa.engine.services.registrations import find_registration, registration_record
from certa.engine.foundation.canonical import canonical_sha256, sha256_hex
from certa.engine.foundation.errors import CertaError, LedgerError, SpecError
from certa.engine.foundation.library_errors import error_line
from certa.engine.foundation.extras import require_extra
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.inputs import InputSource, check_pin, read_source
from certa.engine.core.interpreter import Execution, RunDecisions
from certa.engine.services.presentation.warnings import run_warnings
from certa.engine.foundation.atomic_files import append_atomically, check_writable
from certa.engine.services.run import LedgerLocation, ledger_for_run, record_abort, record_execution
from certa.engine.services.policy_record import pinned_policy, record_policy
from certa.engine.services.run_report import after_recording, verdict_exit_code
from certa.engine.services.presentation.ci_summary import batch_summary, run_summary
from certa.engine.services.presentation.junit import JUnitSuite, run_suite, utc_timestamp, write_junit
from certa.engine.services.presentation.markdown import failed_rules, recorded_abort
from certa.engine.core.spec import Plan, load_plan, why_not_a_spec
from certa.engine.core.stages import Decision
from certa.engine.core.stages.base import DecisionColumns
from certa.engine.core.trust_policy import TrustPolicy

if TYPE_CHECKING:
    from certa.ledger import Ledger

__all__ = ["BatchSpec", "BatchRow", "BatchReport", "SkippedFile", "discover_specs", "prepare_batch", "default_batch_id",
           "run_batch", "record_batch", "EXIT_ORDER", "worst_exit_code"]

Notify = Callable[[str], None]

EXIT_ORDER = (2, 5, 3, 1, 6, 0)
"""Severity of exit codes, worst first: 2 invalid/error (not recorded) > 5 a served model's endpoint failed (not
recorded) > 3 aborted (recorded) > 1 FAIL > 6 INCONCLUSIVE > 0 PASS (the verdict rule's order). A code not listed
ranks worst."""

INLINE_BYTES = 4 << 20
"""Inputs up to this size travel inside the task (a rescheduled task carries them along); larger ones are
scattered once per distinct SHA-256 and their futures passed to the tasks."""

# row statuses
RECORDED, ALREADY, ABORTED, ERROR = "recorded", "already recorded", "aborted", "error"


def worst_exit_code(codes: Iterable[int]) -> int:
    """The worst exit code by ``EXIT_ORDER`` (0 for none)."""
    codes = list(codes)
    unknown = [code for code in codes if code not in EXIT_ORDER]
    if unknown:
        return unknown[0]
    for code in EXIT_ORDER:
        if code in codes:
            return code
    return 0


@dataclass(frozen=True)
class RecordedInput:
    """An input as the client records it: the fields of ``Table`` the ledger stores, with the worker's row
    count (the client never parses an input)."""

    name: str
    fmt: str
    sha256: str
    raw: bytes = field(repr=False)
    n_rows: int = 0


def read_inputs(plan: Plan, input_paths: Mapping[str, Path] | None = None) -> dict[str, InputSource]:
    """Read and hash every declared input of ``plan``, from ``input_paths[name]`` where given (``certa batch
    --input``) or the spec's path, as ``certa run`` reads it (``read_source``: a file within the limits, a
    model folder's manifest); a pinned SHA-256 is checked here. The workers read the bytes by their format."""
    inputs = {}
    limits = InputLimits.from_env()
    for name, declared in plan.inputs.items():
        path = (input_paths or {}).get(name)
        source = read_source(declared, path=path, profile=plan.profile, limits=limits)
        sha = sha256_hex(source.raw)
        check_pin(declared, sha)
        inputs[name] = replace(source, sha256=sha)
    return inputs


@dataclass
class BatchSpec:
    """One spec of a batch as the client prepared it (``error`` set when it cannot run: no plan)."""

    path: Path
    plan: Plan | None = None
    inputs: Mapping[str, InputSource] = field(default_factory=dict)
    key: str | None = None
    error: CertaError | None = None
    policy: TrustPolicy | None = None
    """The trust policy the spec names (``pinned_policy``), recorded with its run."""

    @property
    def run_id(self) -> str | None:
        return run_id_for_key(self.key) if self.key else None


@dataclass(frozen=True)
class BatchRow:
    """One row of the final table. ``name`` is the spec's name (None when it could not be read); ``gates`` the
    certificate's gates, ``failed_rules`` the profile rules that stopped an aborted run
    (``certa.engine.services.presentation.markdown.failed_rules``), ``warnings`` the run's warning lines (``run_warnings``; none for a run
    recorded before)."""

    spec: str
    run_id: str | None
    status: str
    verdict: str | None
    exit_code: int
    error: str | None = None
    worker: str | None = None
    name: str | None = None
    gates: tuple[Mapping[str, Any], ...] = ()
    failed_rules: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def already_recorded(self) -> bool:
        """The spec's run was recorded by an earlier run of the same batch, and skipped."""
        return self.status == ALREADY

    def as_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "name": self.name, "run_id": self.run_id, "status": self.status,
                "verdict": self.verdict, "exit_code": self.exit_code, "error": self.error, "worker": self.worker,
                "failed_rules": [dict(rule) for rule in self.failed_rules], "warnings": list(self.warnings)}

    def junit_suite(self, timestamp: str) -> JUnitSuite:
        """The row as a JUnit test suite (``certa.engine.services.presentation.junit.run_suite``): its gates, the profile rules that aborted
        it, or an error case; ``timestamp`` is when the batch started."""
        aborted = self.exit_code == 3
        return run_suite(name=self.name or self.spec, timestamp=timestamp, run_id=self.run_id, spec=self.spec,
                         verdict=self.verdict, gates=self.gates, failed_rules=self.failed_rules,
                         abort_reason=(self.error or "profile abort") if aborted else "",
                         error=(self.error or "error") if self.status == ERROR else "")


@dataclass(frozen=True)
class BatchReport:
    """A batch's outcome: one row per spec, in the order given, how long it took, and the files of the folders
    given that were not run specs."""

    batch_id: str
    rows: tuple[BatchRow, ...]
    seconds: float
    skipped: tuple[SkippedFile, ...] = ()

    @property
    def exit_code(self) -> int:
        return worst_exit_code(row.exit_code for row in self.rows)

    def as_json(self) -> dict[str, Any]:
        """The batch id, its exit code, the time and every row (``ok``: no run was refused or aborted)."""
        return {"ok": self.exit_code in (0, 1, 6), "batch_id": self.batch_id, "exit_code": self.exit_code,
                "seconds": round(self.seconds, 3), "runs": [row.as_json() for row in self.rows],
                "skipped": [file.as_json() for file in self.skipped]}


# --------------------------------------------------------------------------------------------- preparing


@dataclass(frozen=True)
class SkippedFile:
    """A file under a folder given to ``certa batch`` that is not a run spec, and why (``why_not_a_spec``)."""

    path: str
    reason: str

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


def discover_specs(paths: Sequence[str | Path]) -> tuple[list[Path], tuple[SkippedFile, ...]]:
    """(spec files, skipped files): each path given, taken as a spec whatever it holds, and for a folder every
    ``*.yaml``/``*.yml`` below it, sorted, that is a run spec (a top-level ``certa:`` key); the folder's other
    YAML files (an evaluator's task files, a CI workflow) are skipped, each with its reason."""
    found: list[Path] = []
    skipped: list[SkippedFile] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            found.append(path)
            continue
        for candidate in sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()):
            reason = why_not_a_spec(candidate)
            if reason is None:
                found.append(candidate)
            else:
                skipped.append(SkippedFile(str(candidate), reason))
    seen: set[Path] = set()
    unique = []
    for path in found:
        resolved = path.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(path)
    skipped = [file for file in skipped if Path(file.path).resolve() not in seen]  # named on its own: a spec
    if not unique:
        listed = "".join(f"\n  skipped {f.path}: {f.reason}" for f in skipped[:20])
        more = f"\n  ... and {len(skipped) - 20} more" if len(skipped) > 20 else ""
        raise SpecError("no run specs found (a folder is searched for *.yaml and *.yml files with a top-level "
                        "certa: key)" + listed + more, file=", ".join(map(str, paths)))
    return unique, tuple(skipped)


def default_batch_id(specs: Sequence[BatchSpec]) -> str:
    """``batch-`` + 16 hex digits of SHA-256 over the sorted (spec SHA-256, input SHA-256s) of the valid specs:
    the same specs on the same data give the same id, so re-running the command resumes."""
    members = sorted([s.plan.spec_sha256, [t.sha256 for t in s.inputs.values()]] for s in specs if s.plan is not None)
    return "batch-" + canonical_sha256(members)[:16]


def prepare_batch(paths: Sequence[Path], *, batch_id: str | None = None,
                  input_paths: Mapping[str, Path] | None = None) -> tuple[str, list[BatchSpec]]:
    """Load and validate every spec and read and hash its inputs (the workers parse them); then fix the
    batch id and each key. ``input_paths`` replaces an input's path in every spec that declares it; a name no
    spec of the batch declares is a ``SpecError`` (nothing runs)."""
    specs = []
    for path in paths:
        item = BatchSpec(path=path)
        try:
            item.plan = load_plan(path)
            item.policy = pinned_policy(item.plan)
            item.inputs = read_inputs(item.plan, input_paths)
        except CertaError as error:
            item.plan, item.error = None, error
        specs.append(item)
    declared = {name for item in specs if item.plan is not None for name in item.plan.inputs}
    unknown = sorted(set(input_paths or {}) - declared)
    if unknown:
        raise SpecError(f"--input {', '.join(unknown)}: no valid spec of the batch declares "
                        f"{'this input' if len(unknown) == 1 else 'these inputs'} (declared: "
                        f"{', '.join(sorted(declared)) or 'none'})", file=", ".join(map(str, paths)))
    batch = batch_id or default_batch_id(specs)
    for item in specs:
        if item.plan is not None:
            item.key = idempotency_key(batch, item.plan.spec_sha256, [t.sha256 for t in item.inputs.values()],
                                       item.plan.seed)
    return batch, specs


def _waits_for_batch(plan: Plan, batch_id: str) -> bool:
    return batch_id in ledger_references(plan.stages).batches


def _snapshot(ledger: Ledger, plan: Plan) -> LedgerSnapshot:
    """The certificates and batch listings ``plan`` reads, fetched from the ledger (missing ones are left
    out: the stage then reports them)."""
    references = ledger_references(plan.stages)
    listings = {name: ledger.batch_runs(name) for name in references.batches}
    certificates: dict[str, Any] = {}
    for run_id in [*references.runs, *(rid for ids in listings.values() for rid in ids)]:
        try:
            certificates[run_id.strip().lower()] = ledger.certificate(run_id)
        except LedgerError:
            pass
    return LedgerSnapshot(certificates=certificates, batches=listings)


# --------------------------------------------------------------------------------------------- recording


def _batch_decision(batch_id: str, key: str) -> RunDecisions:
    return RunDecisions.of(None, (Decision(BATCH_DECISION, {"batch_id": batch_id, "idempotency_key": key}),))


def _row_for_recorded(item: BatchSpec, ledger: Ledger) -> BatchRow:
    row = ledger.run(item.run_id)
    if row.status == "aborted":
        abort, rules = recorded_abort(ledger, row.run_id)
        return BatchRow(str(item.path), row.run_id, ALREADY, None, 3, error=abort["reason"], name=row.name,
                        failed_rules=rules)
    gates = tuple(ledger.certificate(row.run_id)["content"]["gates"])
    return BatchRow(str(item.path), row.run_id, ALREADY, row.verdict, verdict_exit_code(row.verdict),
                    name=row.name, gates=gates)


def _listed_decisions(decisions: RunDecisions) -> Iterator[Decision]:
    """The decisions not held as columns (per-row decisions are never profile rules or warnings)."""
    for part in decisions.parts:
        if not isinstance(part.decisions, DecisionColumns):
            yield from part.decisions


def _record(ledger: Ledger, batch_id: str, item: BatchSpec, result: WorkerResult) -> BatchRow:
    """Seal and record one worker result (or report its error); a key recorded meanwhile is 'already recorded'."""
    assert item.plan is not None and item.key is not None
    run_id, plan = item.run_id, item.plan
    if result.status == "error":
        return BatchRow(str(item.path), None, ERROR, None, result.exit_code or 2,
                        error=f"{result.error_type}: {result.reason}", worker=result.worker, name=plan.name)
    decisions = result.decisions + _batch_decision(batch_id, item.key)
    warnings = run_warnings(decisions)
    tables = {name: RecordedInput(name, given.fmt, str(given.sha256), given.raw, result.rows[name])
              for name, given in item.inputs.items()}
    try:
        if result.status == "aborted":
            record_abort(ledger, run_id, plan, tables, decisions, reason=result.reason, rule=result.rule,
                         stage_id=result.stage_id)
            return BatchRow(str(item.path), run_id, ABORTED, None, 3, error=result.reason, worker=result.worker,
                            name=plan.name, failed_rules=failed_rules(_listed_decisions(decisions)),
                            warnings=warnings)
        execution = Execution(plan=plan, tables=tables, content=result.content, decisions=decisions,
                              captured=result.captured)
        certificate = record_execution(ledger, run_id, execution)
        if item.policy is not None:
            record_policy(ledger, item.policy)
    except LedgerError as error:
        try:
            return _row_for_recorded(item, ledger)  # another client recorded this key first
        except LedgerError:
            return BatchRow(str(item.path), None, ERROR, None, error.exit_code, error=f"LedgerError: {error}",
                            worker=result.worker)
    except CertaError as error:  # the content cannot be sealed (an input's text that is not UTF-8): this spec's error
        return BatchRow(str(item.path), None, ERROR, None, error.exit_code, error=f"{type(error).__name__}: {error}",
                        worker=result.worker, name=plan.name)
    verdict = execution.verdict
    return BatchRow(str(item.path), run_id, RECORDED, verdict, verdict_exit_code(verdict), worker=result.worker,
                    name=plan.name, gates=tuple(certificate["content"]["gates"]), warnings=warnings)


# --------------------------------------------------------------------------------------------- running


_SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_SCHEDULER_ADDRESS = re.compile(r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/@\[\]]+)"
                                r":(?P<port>[0-9]{1,5})/?")


def _check_scheduler_address(address: str) -> None:
    """Raise ``CertaError`` (one line) unless ``address`` is a Dask scheduler address, ``[SCHEME://]HOST:PORT``
    with a scheme Dask connects over (tcp when none is given) and a port from 1 to 65535; checked before any
    work, so that a typo is not a traceback from deep inside Dask."""
    found = _SCHEDULER_ADDRESS.fullmatch(address.strip())
    scheme = (found and found["scheme"] or "tcp").lower()
    if found is None or scheme not in _SCHEDULER_SCHEMES or not 0 < int(found["port"]) < 65536:
        raise CertaError(f"--scheduler {masked_ledger(address)!r} is not a Dask scheduler address: give "
                         f"tcp://HOST:PORT (or {', '.join(f'{s}://' for s in _SCHEDULER_SCHEMES[1:])}), e.g. "
                         "tcp://10.0.0.5:8786")


WORKER_WAIT_SECONDS = 60.0
"""How long ``certa batch --scheduler`` waits for the scheduler's first worker before it refuses."""


def _open_client(scheduler: str | None, workers: int, memory_limit: str | None) -> tuple[Any, Any]:
    """A ``distributed.Client`` on ``scheduler`` (with at least one worker within ``WORKER_WAIT_SECONDS``), or on
    a new ``LocalCluster`` of ``workers`` processes."""
    from distributed import Client, LocalCluster
    if scheduler:
        try:
            client = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise CertaError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_SECONDS)
        except TimeoutError:
            client.close()
            raise CertaError(f"the Dask scheduler at {scheduler} has no worker (waited {WORKER_WAIT_SECONDS:g} s): "
                             f"start one with 'dask worker {scheduler}', or run without --scheduler") from None
        return client, None
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               memory_limit=memory_limit or "auto", silence_logs=logging.CRITICAL)
    except Exception as exc:  # noqa: BLE001 - distributed raises RuntimeError, OSError or TimeoutError as it fails
        raise CertaError(f"the local Dask cluster of {workers} worker process(es) could not start "
                         f"({error_line(exc)}); nothing was run: run the batch again, with fewer --workers or with "
                         "--scheduler ADDRESS") from None
    return Client(cluster), cluster


def run_batch(paths: Sequence[str | Path], *, ledger: Ledger, scheduler: str | None = None, workers: int = 2,
              batch_id: str | None = None, retries: int = 2, client: Any = None, memory_limit: str | None = None,
              input_paths: Mapping[str, Path] | None = None, notify: Notify | None = None,
              on_recorded: Callable[[BatchRow], None] | None = None) -> BatchReport:
    """Run every spec under ``paths`` on Dask and record each in ``ledger`` as it completes.

    ``client`` (a ``distributed.Client``) overrides ``scheduler``/``workers``. ``input_paths`` reads an input
    from another file in every spec that declares it (``prepare_batch``). ``on_recorded`` is called after
    each row (tests use it to kill a worker, or the client, mid-batch).
    """
    started = time.monotonic()
    say = notify or (lambda message: None)
    if client is None:
        require_extra("dask", "certa batch")  # before anything is read or recorded
    if scheduler and client is None:
        _check_scheduler_address(scheduler)
    ledger.require_writable()
    found, skipped = discover_specs(paths)
    batch, specs = prepare_batch(found, batch_id=batch_id, input_paths=input_paths)
    say(f"batch {batch}: {len(specs)} spec(s)" + (f", {len(skipped)} file(s) skipped" if skipped else ""))
    rows: dict[int, BatchRow] = {}
    todo: list[int] = []
    seen_keys: dict[str, int] = {}
    for index, item in enumerate(specs):
        if item.plan is None:
            rows[index] = BatchRow(str(item.path), None, ERROR, None, item.error.exit_code if item.error else 2,
                                   error=f"{type(item.error).__name__}: {item.error}")
            say(f"error (not run, nothing recorded): {rows[index].error}")
        elif item.key in seen_keys:
            first = specs[seen_keys[item.key]].path
            rows[index] = BatchRow(str(item.path), item.run_id, ERROR, None, 2,
                                   error=f"same spec, inputs and seed as {first} (one run per key)")
        else:
            seen_keys[item.key] = index
            todo.append(index)
    recorded = ledger.recorded_run_ids(specs[index].run_id for index in todo)
    for index in list(todo):
        if specs[index].run_id in recorded:
            rows[index] = _row_for_recorded(specs[index], ledger)
            todo.remove(index)
    if len(todo) < len(seen_keys):
        say(f"resuming: {len(seen_keys) - len(todo)} run(s) of this batch already recorded")
    first_wave = [i for i in todo if not _waits_for_batch(specs[i].plan, batch)]
    second_wave = [i for i in todo if i not in first_wave]

    def done(index: int, row: BatchRow) -> None:
        rows[index] = row
        label = row.verdict or row.status
        say(f"[{len(rows)}/{len(specs)}] {row.spec}: {label}" + (f" (run {row.run_id})" if row.run_id else "")
            + (f": {row.error}" if row.error and row.status == ERROR else ""))
        if on_recorded is not None:
            on_recorded(row)

    if todo:
        own_client = client is None
        cluster = None
        if own_client:
            client, cluster = _open_client(scheduler, workers, memory_limit)
        try:
            if first_wave:
                _run_wave(client, ledger, batch, specs, first_wave, retries=retries, done=done)
            failed = [rows[i].spec for i in rows if rows[i].status in (ERROR, ABORTED) and i not in second_wave]
            if failed and second_wave:
                for index in second_wave:
                    done(index, BatchRow(str(specs[index].path), None, ERROR, None, 2,
                                         error=f"not run: it merges batch {batch}, and {len(failed)} of its spec(s) "
                                               f"did not complete ({', '.join(failed[:3])}); fix them and re-run "
                                               "the same command to resume"))
            elif second_wave:
                _run_wave(client, ledger, batch, specs, second_wave, retries=retries, done=done)
        finally:
            if own_client:
                client.close()
                if cluster is not None:
                    cluster.close()
    ordered = tuple(rows[i] for i in range(len(specs)))
    return BatchReport(batch_id=batch, rows=ordered, seconds=time.monotonic() - started, skipped=skipped)


def record_batch(paths: Sequence[str | Path], *, ledger: LedgerLocation, junit_file: Path | None = None,
                 scheduler: str | None = None, workers: int = 2, batch_id: str | None = None, retries: int = 2,
                 input_paths: Mapping[str, Path] | None = None, notify: Notify | None = None,
                 summary_file: Path | None = None, report_link: str | None = None) -> BatchReport:
    """``certa batch`` as one call, as ``certa.engine.services.run_report.run_spec_file`` is ``certa run``:
    ``run_batch`` recording in the ledger at ``ledger`` (created if absent; a refused batch leaves no new ledger
    file), and a JUnit report to ``junit_file`` when given (one suite per spec, ``BatchRow.junit_suite``); the
    batch's Markdown summary (``certa.engine.services.presentation.ci_summary.batch_summary``, each run id linking
    to ``report_link``) is appended to ``summary_file`` when given (``append_atomically``).

    Both files are checked writable before anything is recorded. A batch refused as a whole raises its
    ``CertaError`` after writing a report of one error suite (the summary: its refusal); a file that cannot be
    written once runs are recorded is a ``RecordedOutputError`` (exit 4) naming the batch and its runs."""
    timestamp = utc_timestamp()
    for path, what in ((junit_file, "the JUnit report"), (summary_file, "the summary")):
        if path is not None:  # refused before anything is recorded
            check_writable(path, what=what)
    try:
        with ledger_for_run(ledger) as opened:
            report = run_batch(paths, ledger=opened, scheduler=scheduler, workers=workers, batch_id=batch_id,
                               retries=retries, input_paths=input_paths, notify=notify)
    except CertaError as error:  # the whole batch refused: the report says so
        if junit_file is not None:
            write_junit(junit_file, [run_suite(name="certa batch", timestamp=timestamp, error=str(error),
                                               error_type=type(error).__name__)])
        if summary_file is not None:
            append_atomically(summary_file, run_summary(name="certa batch", error=str(error)).encode() + b"\n",
                              what="the summary")
        raise
    recorded = [row.run_id for row in report.rows if row.run_id and row.status != ERROR]
    with after_recording(f"batch {report.batch_id} (runs {', '.join(recorded)})" if recorded else None):
        if junit_file is not None:
            write_junit(junit_file, [row.junit_suite(timestamp) for row in report.rows])
        if summary_file is not None:
            summary = batch_summary(report.batch_id, report.rows, report.seconds, exit_code=report.exit_code,
                                    ledger=str(ledger), link=report_link)
            append_atomically(summary_file, summary.encode() + b"\n", what="the summary")
    return report


def _submit(client: Any, ledger: Ledger, item: BatchSpec, scattered: dict[str, Any], retries: int,
            attempt: int = 0) -> Any:
    """Submit one spec: inputs up to ``INLINE_BYTES`` inside the task, larger ones scattered once per SHA-256
    and passed as extra arguments (their sources travel without bytes, named in ``far``), with the record of the
    newest registration of its name (``certa.engine.services.registrations``; its run refused in ci and release,
    marked in dev, when it differs)."""
    sources, far, extra = [], [], []
    for source in item.inputs.values():
        if len(source.raw) <= INLINE_BYTES:
            sources.append(source)
        else:
            if source.sha256 not in scattered:
                scattered[source.sha256] = client.scatter(source.raw, hash=False)
            sources.append(replace(source, raw=b""))
            far.append(source.name)
            extra.append(scattered[source.sha256])
    registration = registration_record(find_registration(ledger, item.plan.name), item.plan)
    return client.submit(compute_run, item.plan, sources, _snapshot(ledger, item.plan), tuple(far), registration,
                         *extra, key=f"certa-{item.key[:32]}-{attempt}", retries=retries, pure=False)


def _run_wave(client: Any, ledger: Ledger, batch: str, specs: list[BatchSpec], wave: list[int], *, retries: int,
              done: Callable[[int, BatchRow], None]) -> None:
    """Submit ``wave``, record each result as it completes; a task failing outright (its workers lost, its
    scattered inputs gone) is submitted again once with fresh inputs, then reported as an error."""
    from distributed import as_completed

    scattered: dict[str, Any] = {}
    futures = {}
    for index in wave:
        futures[_submit(client, ledger, specs[index], scattered, retries)] = index
    attempts = dict.fromkeys(wave, 0)
    pending = as_completed(list(futures))
    for future in pending:
        index = futures.pop(future)
        item = specs[index]
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - a lost worker or a bug on the worker: reported, not recorded
            future.release()
            if attempts[index] < 1:
                attempts[index] += 1
                scattered.clear()
                again = _submit(client, ledger, item, scattered, retries, attempt=attempts[index])
                futures[again] = index
                pending.add(again)
                continue
            done(index, BatchRow(str(item.path), None, ERROR, None, 2,
                                 error=f"{type(exc).__name__} on the cluster, nothing recorded: {exc} "
                                       "(re-run the same command to resume)"))
            continue
        future.release()
        done(index, _record(ledger, batch, item, result))
