"""One run read from a SQLite ledger file through the standard library's ``sqlite3`` (``certa show``): the reading
methods of ``certa.ledger.store.Ledger`` that showing a run calls (``run``, ``resolve_run_id``, ``runs``, ``entries``
of a run, ``certificate``, ``policies``), with the same results and errors, without importing SQLAlchemy (about
0.15 s of a fresh process; ``bench/cli_startup.py``).

``reading(ledger)`` opens a SQLite file at this certa's schema read-only (``sqlite_read.read_only_snapshot``:
``mode=ro``, one read transaction for everything shown, so one consistent snapshot) after the checks
``Ledger.open(..., read_only=True)`` applies (another program's database refused, the schema version and revision
checked); anything else (a database URL, a missing file or one that is not a regular file, an empty file, an older
schema) is opened by ``Ledger.open`` itself, so its handling and messages stay the store's. The queries are the
store's (``Ledger.entries``: a run's decisions by the seqs of its record, each other kind by the partial index's own
condition, ``run_record.KINDS_BUT_DECISIONS``), tested against it (tests/ledger/test_sqlite_reader.py).
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.engine.foundation.errors import LedgerError
from certa.ledger.location import plain_sqlite_path
from certa.ledger.rows import (ENTRY_FIELDS, LATEST, RUN_FIELDS, SCHEMA_VERSION, EntryRow, RunRow, checked_schema_version,
                               checked_span, found_run_id, rows_as, run_id_prefix, run_rows)
from certa.ledger.run_record import ABOUT_NO_RUN, KINDS_BUT_DECISIONS
from certa.ledger.sqlite_read import read_only_snapshot, refuse_unkeyed_runs_in, schema_state

if TYPE_CHECKING:
    from certa.ledger.store import Ledger

__all__ = ["SqliteReader", "reading"]

_ENTRIES = f"SELECT {', '.join(ENTRY_FIELDS)} FROM entries"
_RUNS = f"SELECT {', '.join(RUN_FIELDS)} FROM runs"
_CONTAINING = " AND payload LIKE '%' || ? || '%' ESCAPE '/'"  # as SQLAlchemy's contains(..., autoescape=True)


def _like_escaped(text: str) -> str:
    """``text`` matched literally by ``_CONTAINING``'s LIKE (its escape character '/')."""
    return text.replace("/", "//").replace("%", "/%").replace("_", "/_")


class SqliteReader:
    """A run's reads from the SQLite ledger file open in ``conn`` (one read transaction), located at ``location``
    (the path as given, as ``Ledger.location``)."""

    def __init__(self, conn: sqlite3.Connection, location: str) -> None:
        self._conn = conn
        self.location = location

    def resolve_run_id(self, prefix: str) -> str:
        """``Ledger.resolve_run_id``: the full run id of a unique prefix, or of ``latest``."""
        prefix = run_id_prefix(prefix)
        if prefix == LATEST:
            found = [row.run_id for row in self.runs(limit=1)]
        else:  # a range of the primary key, as the store reads it
            refuse_unkeyed_runs_in(self._conn, self.location)
            found = [run_id for (run_id,) in self._conn.execute(
                "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? AND run_id LIKE ? || '%' ESCAPE '/' "
                "LIMIT 2", (prefix, prefix + "g", _like_escaped(prefix)))]
        return found_run_id(prefix, found, self.location)

    def run(self, run_id: str) -> RunRow:
        """``Ledger.run``: the index row of a run (``run_id`` may be a unique prefix)."""
        full = self.resolve_run_id(run_id)
        return run_rows(self._conn.execute(f"{_RUNS} WHERE run_id = ?", (full,)).fetchall(), self.location)[0]

    def runs(self, *, limit: int) -> list[RunRow]:
        """``Ledger.runs``: the ``limit`` newest runs, newest first."""
        refuse_unkeyed_runs_in(self._conn, self.location)
        query = f"{_RUNS} ORDER BY first_seq DESC LIMIT ?"
        return run_rows(self._conn.execute(query, (limit,)).fetchall(), self.location)

    def entries(self, *, run_id: str, kinds: Sequence[str], after: int = 0,
                containing: str | None = None) -> Iterator[EntryRow]:
        """``Ledger.entries`` of one run: its entries of ``kinds`` after seq ``after`` (whose payload text contains
        ``containing``, when given), in chain order."""
        wanted = list(dict.fromkeys(kinds))
        yield from heapq.merge(*(self._entries_of(run_id, kind, after, containing) for kind in wanted),
                               key=attrgetter("seq"))

    def _entries_of(self, run_id: str, kind: str, after: int, containing: str | None) -> Iterator[EntryRow]:
        last, stop = after, None
        if kind == "decision":
            found = self._conn.execute("SELECT first_seq, last_seq FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            span = checked_span(run_id, found, self.location)
            if span is None:
                return
            last, stop = max(after, span[0] - 1), span[1]
        query = f"{_ENTRIES} WHERE seq > ?"
        values: list[Any] = [last]
        if stop is not None:
            query += " AND seq <= ?"
            values.append(stop)
        query += " AND run_id = ? AND kind = ?" + ("" if kind == "decision" else f" AND {KINDS_BUT_DECISIONS}")
        values += [run_id, kind]
        if containing is not None:
            query += _CONTAINING
            values.append(_like_escaped(containing))
        yield from map(EntryRow._make, self._conn.execute(query + " ORDER BY seq", values))

    def certificate(self, run_id: str) -> dict[str, Any]:
        """``Ledger.certificate``: the stored certificate of a run (``run_id`` may be a unique prefix)."""
        full = self.resolve_run_id(run_id)
        found = [e.data() for e in self.entries(run_id=full, kinds=["certificate"])]
        if not found:
            raise LedgerError(f"run {full} has no certificate (status: {self.run(full).status})")
        result: dict[str, Any] = found[-1]
        return result

    def policies(self, policy_id: str) -> list[EntryRow]:
        """``Ledger.policies``: the ``policy`` entries of ``policy_id``, newest first."""
        query = f"{_ENTRIES} WHERE {ABOUT_NO_RUN} AND kind = 'policy' AND run_id = ? ORDER BY seq DESC"
        return rows_as(EntryRow, self._conn.execute(query, (policy_id,)).fetchall())


def _regular_sqlite_file(ledger_url: str) -> Path | None:
    """The SQLite file of ``ledger_url`` when it is one and a regular file (else None: ``Ledger.open`` says why)."""
    path = plain_sqlite_path(ledger_url)
    return path if path is not None and path.is_file() else None


@contextmanager
def reading(ledger_url: str) -> Iterator[SqliteReader | Ledger]:
    """The ledger at ``ledger_url`` opened read-only for showing a run: a ``SqliteReader`` on a SQLite file of this
    certa's schema, else ``Ledger.open(..., create=False, read_only=True)`` (module docstring)."""
    path = _regular_sqlite_file(ledger_url)
    with ExitStack() as stack:
        if path is not None:
            conn = stack.enter_context(read_only_snapshot(path))
            state = schema_state(conn, str(path))
            if state.schema_version == SCHEMA_VERSION:
                checked_schema_version(state, str(path))
                yield SqliteReader(conn, str(path))
                return
            stack.close()
        from certa.ledger.store import Ledger  # SQLAlchemy: a database URL, or what the store alone handles
        yield stack.enter_context(Ledger.open(ledger_url, create=False, read_only=True))
