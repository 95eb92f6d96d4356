"""The run record: the entries a run leaves in the ledger, written and read back here and nowhere else.

A run is recorded in one transaction, in this order (each payload is RFC 8785 canonical JSON; the payloads'
JSON Schema is ``schemas/ledger-entries.schema.json``, entry format ``ENTRY_FORMAT``, one ``$defs`` member per
kind, so an auditor can check a ledger without certa's code):

    run          {"run_id", "name", "spec_text", "spec_sha256", "knobs_hash", "knobs", "seed", "profile", "source"}
    input        {"name", "sha256", "format", "rows"}            one per input (its bytes stored as a blob)
    decision     {"stage", "index", "kind", "detail"}            one per decision, index 0, 1, ... in order
    captured     {"stage", "name", "sha256", "format", "rows"}   one per table a stage captured (completed runs)
    certificate  the certificate                                 a completed run
    abort        {"reason", "rule", "stage"}                     a run a profile rule stopped

Later entries about the run are notes: ``replay`` and ``review``. A ``registration`` (``certa register``, since schema
7) is about no run: its own id (32 hex digits, as a run id) is its entry's ``run_id``, and it has no ``runs`` row. The ``runs`` table is an index derived from
these payloads (``runs_row``): written with them, and checked against them by ``certa.ledger.verify``.

What the record needs of a plan, a table and the decisions is declared as protocols (``RecordedPlan``,
``RecordedTable``, ``DecisionGroup``): the ledger imports nothing of the engine's core; the core's ``Plan``,
``Table`` and ``StageDecisions`` satisfy them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from certa.engine.foundation.canonical import RecordColumns, canonical_records
from certa.engine.foundation.errors import LedgerIntegrityError
from certa.engine.foundation.schema_check import compile_schema

from certa.ledger.chain import EncodedEntries, NewEntry

__all__ = ["ENTRY_FORMAT", "RECORD_KINDS", "NOTE_KINDS", "LEDGER_KINDS", "RUN_KINDS",
           "BATCH_DECISION", "KINDS_BUT_DECISIONS", "ABOUT_NO_RUN", "RecordedPlan", "RecordedTable", "DecisionGroup",
           "RunRecord", "completed_run", "aborted_run", "runs_row", "StoredRun", "read_stored_run",
           "payload_problems", "RUN_FIELDS"]

ENTRY_FORMAT = 1
"""Version of the entry payloads' layout (``schemas/ledger-entries.schema.json``); a change is a new format."""

RECORD_KINDS = ("run", "input", "captured", "decision", "certificate", "abort")
"""Entry kinds written with the run, in one transaction."""
NOTE_KINDS = ("replay", "review")
"""Entry kinds appended later about a recorded run."""
RUN_KINDS = RECORD_KINDS + NOTE_KINDS
"""Entry kinds about a run."""
LEDGER_KINDS = ("registration", "policy")
"""Entry kinds about no run (since schema 7), each one entry whose ``run_id`` is its own id: a spec registered
before its evidence (``certa register``), and a trust policy approvals were evaluated against (``certa verify
--policy FILE --record``; its id the first 32 hex digits of the policy's SHA-256)."""
BATCH_DECISION = "batch"
"""Kind of the decision that ties a run to its ``certa batch``: ``{"batch_id", "idempotency_key"}`` (stage None,
the run's last decision; ``Ledger.batch_runs`` finds a batch's runs by it)."""
KINDS_BUT_DECISIONS = f"kind IN ({', '.join(repr(kind) for kind in RUN_KINDS if kind != 'decision')})"
"""The entries ``ix_entries_run_id_kind_but_decisions`` (``certa.ledger.schema``) holds: every kind of a run's but
``decision``, the bulk of a ledger (a bake-off records 10^6), which a run records in one transaction between its
``runs.first_seq`` and ``last_seq``. ``Ledger.entries`` and ``certa.ledger.sqlite_reader`` read a run's entries of
another kind with this very condition (SQLite serves a query from a partial index when the query's condition
contains the index's, written the same). No database library here: the plain ``sqlite3`` reader shares it."""

ABOUT_NO_RUN = "kind IN ('registration', 'policy')"
"""The entries ``ix_entries_about_no_run`` holds (since 7), which ``Ledger.registrations`` and ``Ledger.policies``
(and ``certa.ledger.sqlite_reader``) read with this very condition (and their kind)."""


class RecordedPlan(Protocol):
    """What the run entry records of a validated plan (``certa.engine.core.spec.Plan``)."""

    @property
    def name(self) -> str: ...
    @property
    def spec_text(self) -> str: ...
    @property
    def spec_sha256(self) -> str: ...
    @property
    def knobs_hash(self) -> str: ...
    @property
    def knobs(self) -> Mapping[str, Any]: ...
    @property
    def seed(self) -> int: ...
    @property
    def profile(self) -> str: ...
    @property
    def source(self) -> str | None: ...


class RecordedTable(Protocol):
    """What an input or captured entry records of a table (``certa.engine.core.tables.Table``): its bytes are a blob."""

    @property
    def name(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def fmt(self) -> str: ...
    @property
    def n_rows(self) -> int: ...
    @property
    def raw(self) -> bytes: ...


class DecisionGroup(Protocol):
    """Consecutive decisions of one stage (``certa.engine.core.interpreter.StageDecisions``), held as columns."""

    @property
    def stage(self) -> str | None: ...
    def __len__(self) -> int: ...
    def record(self) -> RecordColumns: ...


@dataclass(frozen=True)
class RunRecord:
    """Everything one run writes, built before the transaction that writes it (``Ledger.append_run``)."""

    run_id: str
    entries: Sequence[NewEntry | EncodedEntries]
    blobs: Sequence[tuple[str, bytes]]
    """(SHA-256, bytes) of every input and captured table; a blob already stored is not stored twice."""
    row: Mapping[str, Any]
    """The ``runs`` columns the payloads determine (``runs_row``); the transaction adds the time and seqs."""


def _run_payload(run_id: str, plan: RecordedPlan) -> dict[str, Any]:
    return {"run_id": run_id, "name": plan.name, "spec_text": plan.spec_text, "spec_sha256": plan.spec_sha256,
            "knobs_hash": plan.knobs_hash, "knobs": plan.knobs, "seed": str(plan.seed), "profile": plan.profile,
            "source": plan.source}


def _table_payload(table: RecordedTable) -> dict[str, Any]:
    return {"name": table.name, "sha256": table.sha256, "format": table.fmt, "rows": table.n_rows}


def _decision_entries(groups: Iterable[DecisionGroup]) -> Iterator[EncodedEntries]:
    """One ``decision`` entry per decision, ``index`` counting across groups, encoded group by group with
    ``canonical_records`` so columnar decisions (a million per-row ones) are never built one by one."""
    index = 0
    for group in groups:
        record = group.record()
        payloads = RecordColumns({**record.columns, "index": range(index, index + len(group))},
                                 {**record.constants, "stage": group.stage})
        yield EncodedEntries("decision", canonical_records(payloads))
        index += len(group)


def _opening(run_id: str, plan: RecordedPlan, tables: Mapping[str, RecordedTable],
             decisions: Iterable[DecisionGroup]) -> list[NewEntry | EncodedEntries]:
    return [NewEntry("run", _run_payload(run_id, plan)),
            *(NewEntry("input", _table_payload(t)) for t in tables.values()),
            *_decision_entries(decisions)]


RUN_FIELDS = ("run_id", "name", "profile", "seed", "knobs_hash", "spec_sha256")
"""The members of a run entry that ``runs_row`` reads (``certa.ledger.verify`` keeps only these of each run)."""


def runs_row(run: Mapping[str, Any], *, certificate: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``runs`` index columns that a run's payloads determine: from its run entry, and from its certificate
    (a completed run) or its absence (an aborted run). ``certa.ledger.verify`` compares the stored row with this."""
    content = certificate.get("content") if certificate is not None else None
    return {"run_id": run.get("run_id"), "name": run.get("name"),
            "status": "completed" if certificate is not None else "aborted",
            "verdict": content.get("verdict") if isinstance(content, Mapping) else None,
            "profile": run.get("profile"), "seed": run.get("seed"), "knobs_hash": run.get("knobs_hash"),
            "spec_sha256": run.get("spec_sha256"),
            "certificate_sha256": certificate.get("content_sha256") if certificate is not None else None}


def completed_run(run_id: str, plan: RecordedPlan, tables: Mapping[str, RecordedTable],
                  decisions: Iterable[DecisionGroup], captured: Mapping[str, Mapping[str, RecordedTable]],
                  certificate: Mapping[str, Any]) -> RunRecord:
    """The record of a completed run: run, inputs, decisions, captured tables (by stage id), certificate."""
    kept = [(stage, t) for stage, group in captured.items() for t in group.values()]
    entries = [*_opening(run_id, plan, tables, decisions),
               *(NewEntry("captured", {"stage": stage, **_table_payload(t)}) for stage, t in kept),
               NewEntry("certificate", certificate)]
    blobs = [(t.sha256, t.raw) for t in tables.values()] + [(t.sha256, t.raw) for _, t in kept]
    return RunRecord(run_id, entries, blobs, runs_row(_run_payload(run_id, plan), certificate=certificate))


def aborted_run(run_id: str, plan: RecordedPlan, tables: Mapping[str, RecordedTable],
                decisions: Iterable[DecisionGroup], *, reason: str, rule: str, stage_id: str | None) -> RunRecord:
    """The record of a run a profile rule stopped: run, inputs, the decisions so far, and the reason."""
    entries = [*_opening(run_id, plan, tables, decisions),
               NewEntry("abort", {"reason": reason, "rule": rule, "stage": stage_id})]
    return RunRecord(run_id, entries, [(t.sha256, t.raw) for t in tables.values()],
                     runs_row(_run_payload(run_id, plan), certificate=None))


class EntrySource(Protocol):
    """What reading a run back needs of a ledger (``ledger.Ledger``)."""

    def entries(self, *, run_id: str | None = None, kinds: Sequence[str] | None = None) -> Iterable[Any]: ...


@dataclass(frozen=True)
class StoredRun:
    """A recorded run's run entry and the entries that name its tables (read back by ``read_stored_run``)."""

    run_id: str
    run: Mapping[str, Any]
    inputs: tuple[Mapping[str, Any], ...]
    captured: tuple[Mapping[str, Any], ...]

    @property
    def spec_text(self) -> str:
        """The spec exactly as recorded (what a replay validates and runs again)."""
        text = self.run.get("spec_text")
        if not isinstance(text, str):
            raise LedgerIntegrityError(f"run {self.run_id}: its recorded run entry holds no spec text "
                                       f"(spec_text is {type(text).__name__}); run 'certa verify'")
        return text


def read_stored_run(ledger: EntrySource, run_id: str) -> StoredRun:
    """The run entry and the input and captured entries of ``run_id`` (a full id), in chain order. Each payload
    is checked against its kind's schema: a malformed one is a ``LedgerIntegrityError`` naming the entry."""
    run: Mapping[str, Any] | None = None
    inputs: list[Mapping[str, Any]] = []
    captured: list[Mapping[str, Any]] = []
    for entry in ledger.entries(run_id=run_id, kinds=["run", "input", "captured"]):
        data = entry.data()
        problems = payload_problems(entry.kind, data)
        if problems:
            raise LedgerIntegrityError(f"run {run_id}: its {entry.kind} entry {entry.seq} is malformed "
                                       f"({problems[0]}); run 'certa verify'")
        if entry.kind == "run":
            run = data
        else:
            (inputs if entry.kind == "input" else captured).append(data)
    if run is None:
        raise LedgerIntegrityError(f"run {run_id}: no run entry in the ledger; run 'certa verify'")
    return StoredRun(run_id, run, tuple(inputs), tuple(captured))


def _kind_schema(kind: str) -> dict[str, Any]:
    from certa.schemas import read_schema

    return {"$ref": f"#/$defs/{kind}", "$defs": read_schema("ledger-entries.schema.json")["$defs"]}


@cache
def _validator(kind: str) -> Any:
    from certa.engine.foundation.schema_validator import Draft202012Validator  # loads on first use: not at --help

    return Draft202012Validator(_kind_schema(kind))


@cache
def _compiled(kind: str) -> Callable[[Any], bool]:
    """``jsonschema``'s yes or no for ``kind``'s payloads, compiled once (``certa.engine.foundation.schema_check``)."""
    return compile_schema(_kind_schema(kind))


def payload_problems(kind: str, payload: Any) -> list[str]:
    """What makes ``payload`` invalid for an entry of ``kind`` (its ``$defs`` member in
    ``schemas/ledger-entries.schema.json``), in the validator's words with the path; [] when valid or when the
    kind is not certa's (``certa.ledger.verify`` names unknown kinds itself).

    A ledger holds up to millions of ``decision`` entries, and their schema constrains only each member's
    presence and JSON type and the sign of ``index``: a decision payload is validated once per
    ``_decision_shape`` found valid (``tests/ledger/test_run_record.py`` checks that this keeps the answer exact).
    Every payload validated is decided by its kind's schema compiled once (``_compiled``), as exact and tens of
    times faster than ``jsonschema``, which is imported and asked only for the messages of a payload that fails."""
    if kind not in RUN_KINDS + LEDGER_KINDS:
        return []
    shape = _decision_shape(payload) if kind == "decision" and isinstance(payload, dict) else None
    if shape is not None and shape in _VALID_DECISION_SHAPES:
        return []
    if _compiled(kind)(payload):
        if shape is not None and len(_VALID_DECISION_SHAPES) < 4096:
            _VALID_DECISION_SHAPES.add(shape)
        return []
    return _problems(kind, payload)


_VALID_DECISION_SHAPES: set[tuple[Any, ...]] = set()
"""Shapes (``_decision_shape``) of decision payloads found valid in this process."""


def _problems(kind: str, payload: Any) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path)) or '(payload)'}: {error.message}"
            for error in _validator(kind).iter_errors(payload)]


def _decision_shape(payload: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the decision schema's answer depends on: the member names, each member's Python type, and for a
    numeric ``index`` its sign and integrality."""
    index = payload.get("index")
    members = tuple(sorted((key, type(value).__name__) for key, value in payload.items()))
    if type(index) is int:
        return members, index >= 0
    if type(index) is float:
        return members, index >= 0, math.isfinite(index) and index.is_integer()
    return (members,)
