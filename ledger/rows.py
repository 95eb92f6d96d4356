"""The rows a ledger hands out (named tuples) and its schema-version rules: no database library here,
so that a read-only path through the standard library's ``sqlite3`` (``certa.ledger.sqlite_read``) shares them
with the SQLAlchemy store (``certa.ledger.store``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from certa.engine.foundation.errors import LedgerError, LedgerIntegrityError
from certa.ledger.location import command_hint

__all__ = ["SCHEMA_VERSION", "REVISIONS", "HEAD_REVISION", "EntryRow", "RunRow", "SchemaState", "ENTRY_FIELDS",
           "RUN_FIELDS", "rows_as", "run_rows", "checked_schema_version", "refuse_unkeyed_runs", "LATEST",
           "run_id_prefix", "found_run_id", "checked_span", "RunReads"]

SCHEMA_VERSION = "7"
#: The Alembic revision that brings a ledger to each schema version; the newest is the head.
REVISIONS = {"1": "0001", "2": "0002", "3": "0003", "4": "0004", "5": "0005", "6": "0006", "7": "0007"}
HEAD_REVISION = REVISIONS[SCHEMA_VERSION]

_Row = TypeVar("_Row", "EntryRow", "RunRow")
_RUN_ID_PREFIX = re.compile(r"[0-9a-f]{4,32}")
LATEST = "latest"
"""The run id that names the newest run."""


class EntryRow(NamedTuple):
    seq: int
    run_id: str
    kind: str
    recorded_at: str
    payload: str
    payload_sha256: str
    prev_hash: str
    entry_hash: str

    def data(self) -> Any:
        """The payload's values (``certa.engine.foundation.json_read.parse_json``: RFC 8785's number model; json loads
        here, not at ``certa list``)."""
        from certa.engine.foundation.json_read import parse_json
        return parse_json(self.payload)


class RunRow(NamedTuple):
    run_id: str
    name: str
    status: str
    verdict: str | None
    profile: str
    seed: str
    knobs_hash: str
    spec_sha256: str
    certificate_sha256: str | None
    recorded_at: str
    first_seq: int
    last_seq: int


ENTRY_FIELDS = EntryRow._fields
RUN_FIELDS = RunRow._fields


def rows_as(cls: type[_Row], rows: Iterable[Sequence[Any]]) -> list[_Row]:
    """``cls`` (a row type of this module) of each result row, whose columns are ``cls``'s fields in order."""
    return list(map(cls._make, rows))  # type: ignore[attr-defined]


_RUN_TYPES = {name: (int,) if name in ("first_seq", "last_seq") else
              (str, type(None)) if name in ("verdict", "certificate_sha256") else (str,) for name in RUN_FIELDS}


def run_rows(rows: Iterable[Sequence[Any]], location: str) -> list[RunRow]:
    """``RunRow``s of index rows, each cell checked to be of the type certa writes: a cell stored as another
    type (a blob, a number for text) is ``LedgerIntegrityError`` naming the row and column, never a crash in
    whatever prints it (``verify`` reports the same cell as tampering)."""
    out = rows_as(RunRow, rows)
    for row in out:
        for (name, types), value in zip(_RUN_TYPES.items(), row):
            if not isinstance(value, types) or isinstance(value, bool):
                shown = row.run_id if isinstance(row.run_id, str) else repr(row.run_id)
                raise LedgerIntegrityError(f"ledger {location}: run {shown}: runs.{name} is stored as "
                                           f"{type(value).__name__}, not as certa writes it (the ledger was "
                                           "edited); run 'certa verify' for every problem")
    return out


def refuse_unkeyed_runs(declared_key: Sequence[str], location: str) -> None:
    """``LedgerIntegrityError`` unless the ``runs`` table's declared primary key is ``run_id``. Without it the table
    can hold a forged twin of a run's row (another verdict) that a listing would show as sound; ``verify`` names
    the duplicates. Read from the catalogue: no row is read."""
    if tuple(declared_key) != ("run_id",):
        raise LedgerIntegrityError(f"ledger {location}: the runs index has lost its primary key on run_id (it was "
                                   "altered outside certa), so a run may appear in it twice with different verdicts; "
                                   "nothing is shown from it: run 'certa verify' for every problem")


class SchemaState(NamedTuple):
    """What a database says about its ledger schema: ``ledger_meta``'s schema version and the Alembic
    revision in ``alembic_version`` (None where missing: no ledger yet, or a ledger of certa <= 0.2.0)."""

    schema_version: str | None
    revision: str | None


def checked_schema_version(state: SchemaState, location: str) -> str:
    """The schema version of a ledger this certa can read: its own or an older one it can migrate (read-only
    until then). A newer schema or revision, or anything else, is a ``LedgerError`` naming what to do; a version
    stored as another type than text is ``LedgerIntegrityError`` (tampering)."""
    version = state.schema_version or ""
    if not isinstance(version, str):  # certa writes it as text: another storage type is an edit
        raise LedgerIntegrityError(f"ledger {location}: ledger_meta.schema_version is stored as "
                                   f"{type(version).__name__}, not as certa writes it (the ledger was edited)")
    if version.isdigit() and int(version) > int(SCHEMA_VERSION):
        raise LedgerError(f"ledger {location} was written by a newer certa (schema {version}); "
                          "upgrade certa to read it")
    if state.revision is not None and state.revision not in REVISIONS.values():
        raise LedgerError(f"ledger {location} was written by a newer certa (schema revision "
                          f"{state.revision}, unknown to this one); upgrade certa to read it")
    if version not in REVISIONS:
        raise LedgerError(f"ledger schema version {version or '(none)'} is not supported by this certa "
                          f"(expects {SCHEMA_VERSION}); use a matching certa version")
    return version


def run_id_prefix(given: str) -> str:
    """``given`` (a run id, a unique prefix of one, or ``latest``), stripped and lowercased, to be searched;
    ``LedgerError`` when it is none of them (4 to 32 hex digits, matched literally)."""
    prefix = given.strip().lower()
    if prefix != LATEST and not _RUN_ID_PREFIX.fullmatch(prefix):
        raise LedgerError(f"{given.strip()!r} is not a run id: a run id is 32 hex digits (0-9, a-f); give at least the "
                          "first 4 of them, or 'latest'")
    return prefix


def found_run_id(prefix: str, found: Sequence[str], location: str) -> str:
    """The one run id ``found`` for ``prefix`` (``run_id_prefix``; for ``latest``, the newest run), or a
    ``LedgerError`` saying that none is recorded or that the prefix is ambiguous (two found)."""
    if not found:
        if prefix == LATEST:
            raise LedgerError(f"no runs recorded in {location} yet")
        raise LedgerError(f"no run with id {prefix!r} in {location}; '{command_hint('list', ledger=location)}' shows "
                          "the runs")
    if len(found) > 1:
        raise LedgerError(f"run id prefix {prefix!r} is ambiguous; give more characters")
    return found[0]


def checked_span(run_id: str, span: Sequence[Any] | None, location: str) -> tuple[int, int] | None:
    """(first seq, last seq) of ``run_id``'s record from its ``runs`` row's ``span`` (None without a row);
    ``LedgerIntegrityError`` when they are not seqs (the row was edited)."""
    if span is None:
        return None
    if not all(type(seq) is int for seq in span):
        raise LedgerIntegrityError(f"the runs row of run {run_id} has first_seq {span[0]!r} and last_seq {span[1]!r}, "
                                   f"not seqs (it was edited): run '{command_hint('verify', ledger=location)}'")
    return span[0], span[1]


class RunReads(Protocol):
    """What showing a run reads of a ledger: ``certa.ledger.store.Ledger``, or on a SQLite file
    ``certa.ledger.sqlite_reader.SqliteReader`` (no database library)."""

    @property
    def location(self) -> str: ...

    def resolve_run_id(self, prefix: str) -> str: ...

    def run(self, run_id: str) -> RunRow: ...

    def entries(self, *, run_id: str, kinds: Sequence[str], after: int = 0,
                containing: str | None = None) -> Iterator[EntryRow]: ...

    def certificate(self, run_id: str) -> dict[str, Any]: ...

    def policies(self, policy_id: str) -> list[EntryRow]: ...
