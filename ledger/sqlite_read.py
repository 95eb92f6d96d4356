"""Read-only listing of a SQLite ledger through the standard library's ``sqlite3``, for ``certa list``.

Importing SQLAlchemy alone takes about 0.15 s, most of what a ``certa list`` on a small ledger would cost
through ``ledger.store``; a listing needs one ``SELECT``, so this path answers it without SQLAlchemy. It
opens the file read-only (``mode=ro``: it initialises and changes nothing, not even the journal mode;
SQLite may create the ``-wal``/``-shm`` files beside a WAL database it reads), checks the schema version by the rules ``ledger.store`` applies (``rows.checked_schema_version``),
and returns the same ``RunRow`` values in the same order as ``Ledger.runs`` (tested against it). Any other
ledger (a URL) goes through ``ledger.store``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from engine.errors import LedgerError

from .rows import RUN_FIELDS, RunRow, SchemaState, checked_schema_version, rows_as

__all__ = ["newest_runs"]

_BUSY_TIMEOUT_SECONDS = 30.0  # as ledger.store's busy_timeout: wait for a writer's commit, do not fail
_NEWEST_RUNS = f"SELECT {', '.join(RUN_FIELDS)} FROM runs ORDER BY first_seq DESC LIMIT ?"


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the ledger file ``path``, in one read transaction; sqlite3's errors become
    ``LedgerError``s that name the file."""
    if not path.exists():
        raise LedgerError(f"no ledger at {path}; run 'certa run SPEC' first or pass --ledger")
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_SECONDS,
                                     isolation_level=None)) as conn:
            conn.execute("BEGIN")  # one snapshot for the schema check and the query
            yield conn
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {path}: {exc}") from None


def _schema_state(conn: sqlite3.Connection) -> SchemaState:
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "ledger_meta" not in tables:
        return SchemaState(None, None)
    version = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
    revision = conn.execute("SELECT version_num FROM alembic_version").fetchone() if "alembic_version" in tables else None
    return SchemaState(version and version[0], revision and revision[0])


def newest_runs(path: Path, limit: int) -> list[RunRow]:
    """The ``limit`` newest runs of the SQLite ledger at ``path``, newest first (``Ledger.runs(limit=...)``).
    A file with no ledger tables yet (empty) lists no runs and stays as it is."""
    with _read_only(path) as conn:
        state = _schema_state(conn)
        if state.schema_version is None:
            return []
        checked_schema_version(state, str(path))
        return rows_as(RunRow, RUN_FIELDS, conn.execute(_NEWEST_RUNS, (limit,)).fetchall())
