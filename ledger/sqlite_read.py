"""Read-only access to a SQLite ledger file through the standard library's ``sqlite3``: the connection every
read-only open uses (``connect_read_only``, also ``certa.ledger.store``'s for ``Ledger.open(read_only=True)``), and
the listing of ``certa list``.

Importing SQLAlchemy alone takes about 0.15 s, most of what a ``certa list`` on a small ledger would cost
through ``certa.ledger.store``; a listing needs one ``SELECT``, so this path answers it without SQLAlchemy. The file
is opened read-only (``location.sqlite_read_only_uri``: ``mode=ro``, and ``immutable=1`` on read-only media),
so it initialises and changes nothing, not even the journal mode. The listing checks the schema version by
the rules ``certa.ledger.store`` applies (``rows.checked_schema_version``; a database holding other tables is
refused, ``location.refuse_foreign_database``), and returns the same ``RunRow`` values in the same order as
``Ledger.runs`` (tested against it). Any other ledger (a URL) goes through ``certa.ledger.store``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from certa.engine.foundation.errors import LedgerError

from certa.ledger.location import refuse_foreign_database, sqlite_read_only_uri
from certa.ledger.rows import RUN_FIELDS, RunRow, SchemaState, checked_schema_version, refuse_unkeyed_runs, run_rows

__all__ = ["connect_read_only", "sqlite_read_problem", "edited_text_hint", "read_only_snapshot", "schema_state",
           "refuse_unkeyed_runs_in", "sqlite_ledger_state", "newest_runs"]

_BUSY_TIMEOUT_SECONDS = 30.0  # as certa.ledger.store's busy_timeout: wait for a writer's commit, do not fail
_NEWEST_RUNS = f"SELECT {', '.join(RUN_FIELDS)} FROM runs ORDER BY first_seq DESC LIMIT ?"
_TABLES = r"SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'"


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to the existing ledger file ``path``, in autocommit mode (the caller issues
    ``BEGIN``): it can change no byte of the file, nor create one beside it on read-only media."""
    if not path.exists():
        raise LedgerError(f"no ledger at {path}; run 'certa run SPEC' first or pass --ledger")
    if path.is_dir():
        raise LedgerError(f"no ledger at {path}: it is a folder; give --ledger the ledger file in it")
    return sqlite3.connect(sqlite_read_only_uri(path), uri=True, timeout=_BUSY_TIMEOUT_SECONDS,
                           isolation_level=None, check_same_thread=False)


def sqlite_read_problem(path: Path, error: BaseException) -> str:
    """``error`` reading the ledger file ``path`` read-only, on one line, with what to do when it is the one
    case read-only media cannot serve: a WAL database whose ``-wal`` file (commits not yet in the file) is
    beside it but whose ``-shm`` file is not, and cannot be created there."""
    message = edited_text_hint(" ".join(str(error).split()))
    if Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists():
        message += (f" ({path.name}-wal holds commits that SQLite reads only with a {path.name}-shm file it cannot "
                    "create here: copy the ledger with its -wal file to a writable folder and read the copy)")
    return message


def edited_text_hint(message: str) -> str:
    """A database's one-line ``message`` with what it means when SQLite could not decode a text cell: SQLite
    stores any bytes as TEXT, so only an edit outside certa makes one that is not UTF-8."""
    if message.startswith("Could not decode to UTF-8"):
        message += " (a text cell was edited outside certa: 'certa verify' names it)"
    return message


@contextmanager
def read_only_snapshot(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the ledger file ``path``, in one read transaction; sqlite3's errors become
    ``LedgerError``s that name the file."""
    try:
        with closing(connect_read_only(path)) as conn:
            conn.execute("BEGIN")  # one snapshot for the schema check and the query
            yield conn
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {path}: {sqlite_read_problem(path, exc)}") from None


def schema_state(conn: sqlite3.Connection, location: str) -> SchemaState:
    """The ledger schema state of the file; a file holding tables but no ledger is refused."""
    tables = {name for (name,) in conn.execute(_TABLES)}
    version = revision = None
    meta_columns = {row[1] for row in conn.execute("PRAGMA table_info(ledger_meta)")}  # none without the table
    if {"key", "value"} <= meta_columns:
        found = conn.execute("SELECT value FROM ledger_meta WHERE key = 'schema_version'").fetchone()
        version = found and found[0]
    refuse_foreign_database(version, tables, location)
    if "alembic_version" in tables:
        found = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        revision = found and found[0]
    return SchemaState(version, revision)


def refuse_unkeyed_runs_in(conn: sqlite3.Connection, location: str) -> None:
    """``rows.refuse_unkeyed_runs`` from the file's catalogue (the ``runs`` table's primary-key columns, in order)."""
    refuse_unkeyed_runs([row[1] for row in sorted(conn.execute("PRAGMA table_info(runs)"), key=lambda r: r[5])
                         if row[5]], location)


def sqlite_ledger_state(path: Path) -> SchemaState:
    """The ledger schema state of the existing SQLite file ``path``, read without changing it (not even its
    journal mode): ``certa.ledger.store`` asks before it opens a file for writing, so that another program's
    database is refused (``LedgerError``) as it was found. An empty file has no schema version."""
    with read_only_snapshot(path) as conn:
        return schema_state(conn, str(path))


def newest_runs(path: Path, limit: int) -> list[RunRow]:
    """The ``limit`` newest runs of the SQLite ledger at ``path``, newest first (``Ledger.runs(limit=...)``; read from
    the end of the index ``ix_runs_first_seq`` of schema 4, so as fast on 10^5 runs as on one).
    A file with no tables yet (empty) lists no runs and stays as it is; a path that is not a regular file (a
    device such as /dev/null, a FIFO) is no ledger."""
    if path.exists() and not path.is_file():
        raise LedgerError(f"no ledger at {path}: it is not a regular file")
    with read_only_snapshot(path) as conn:
        state = schema_state(conn, str(path))
        if state.schema_version is None:
            return []
        checked_schema_version(state, str(path))
        refuse_unkeyed_runs_in(conn, str(path))
        return run_rows(conn.execute(_NEWEST_RUNS, (limit,)).fetchall(), str(path))
