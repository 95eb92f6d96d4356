"""The ledger store: SQLite by default (embedded, zero set-up), PostgreSQL by URL, through SQLAlchemy 2.

Writes are append-only and each run is written in one transaction, so a crash leaves no partial run.
SQLite runs in WAL mode with ``synchronous=FULL`` and ``foreign_keys=ON``, and every write transaction
starts with ``BEGIN IMMEDIATE`` (one writer at a time, no lock upgrade deadlocks). On PostgreSQL the
chain head row is locked with ``SELECT ... FOR UPDATE`` so concurrent writers queue instead of forking
the chain. Entries are written at ``seq`` = head + 1, the primary key, so a writer holding a stale head could
not fork it either: its run is refused whole (the chain needs no unique index on the hashes, ``certa.ledger.schema``).

Opening checks the schema version (``certa.ledger.schema``): a new ledger is created at the newest schema; an
older one can be read but not written until ``certa migrate`` (``Ledger.migrate``) upgrades it; a newer
one is refused, and so is a database that holds tables but no ledger (certa never adds its tables beside
another program's). ``Ledger.open(..., read_only=True)`` creates, initialises and changes nothing: a SQLite
file is opened through ``sqlite_read.connect_read_only`` (``mode=ro``, ``immutable=1`` on read-only media,
the journal mode left as it is), so a ledger on a read-only mount can be verified, listed and shown; opening a
SQLite file for writing that cannot be written is refused in one line, before SQLite is asked.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, UTC
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, create_engine, event, func, insert, inspect, select, text, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import LedgerError, LedgerIntegrityError
from certa.engine.foundation.extras import missing_extra
from certa.engine.foundation.json_read import parse_json

from certa.ledger import DEFAULT_LEDGER_FILE
from certa.ledger.bulk import insert_rows
from certa.ledger.chain import GENESIS, EncodedEntries, NewEntry, chain_hashes, payload_digests
from certa.ledger.location import (command_hint, ledger_argument, masked_ledger, plain_sqlite_path, refuse_foreign_database,
                       sqlite_write_refusal)
from certa.ledger.merkle import (NodeKey, completed_levels, entry_leaves, frontier_nodes, leaf_hash, node_seq,
                           numbered_nodes)
from certa.ledger.rows import (ENTRY_FIELDS, HEAD_REVISION, RUN_FIELDS, SCHEMA_VERSION, EntryRow, RunRow, SchemaState,
                   checked_schema_version, refuse_unkeyed_runs, rows_as, run_rows, LATEST, run_id_prefix,
                   found_run_id, checked_span)
from certa.ledger.run_record import BATCH_DECISION, RUN_KINDS
from certa.ledger.schema import (BATCH_DECISIONS, KINDS_BUT_DECISIONS, ABOUT_NO_RUN, alembic_version, blobs, entries,
                           ledger_meta, merkle_nodes, metadata, read_schema_state, runs)
from certa.ledger.sqlite_read import connect_read_only, edited_text_hint, sqlite_ledger_state, sqlite_read_problem

if TYPE_CHECKING:
    from certa.ledger.migrate import Migration
    from certa.ledger.run_record import RunRecord

__all__ = ["Ledger", "EntryRow", "RunRow", "SchemaState", "resolve_ledger_url",
           "DEFAULT_LEDGER_FILE"]

_ENTRY_COLUMNS = [entries.c[name] for name in ENTRY_FIELDS]
_RUN_COLUMNS = [runs.c[name] for name in RUN_FIELDS]
_URL_FORM = "a file path, or DIALECT[+DRIVER]://USER[:PASSWORD]@HOST[:PORT]/DATABASE"


def resolve_ledger_url(ledger: str | os.PathLike[str] | None) -> str:
    """A SQLAlchemy URL from ``--ledger``/``CERTA_LEDGER``: a plain path means a SQLite file. A URL SQLAlchemy
    cannot parse (``postgresql+psycopg://:::``, a port that is not a number) is a ``LedgerError`` that shows it
    with its password masked and echoes none of its parts."""
    path = plain_sqlite_path(ledger)
    if path is not None:
        return f"sqlite:///{path}"
    value = ledger_argument(ledger)
    try:
        url = make_url(value)
    except ArgumentError:
        raise LedgerError(f"not a valid ledger URL: {masked_ledger(value)} (expected {_URL_FORM})") from None
    except ValueError:  # SQLAlchemy converts the port with int()
        raise LedgerError(f"not a valid ledger URL: {masked_ledger(value)} (its HOST:PORT cannot be read, the port "
                          f"must be a number; expected {_URL_FORM})") from None
    if url.port is not None and not 0 < url.port < 65536:
        raise LedgerError(f"not a valid ledger URL: {masked_ledger(value)} (port {url.port} is not between 1 and "
                          "65535)")
    return value


def database_message(error: SQLAlchemyError) -> str:
    """The database's own message, on one line: SQLAlchemy adds the statement, its parameters (which may be
    whole payloads) and a link on further lines; an error line a user reads should not carry them."""
    original = getattr(error, "orig", None)
    return edited_text_hint(" ".join(str(original if original is not None else error).split()) or type(error).__name__)


def _ledger_state(conn: Connection, location: str) -> SchemaState:
    """``read_schema_state``, refusing a database that holds tables but no ledger (on PostgreSQL, the tables of
    its default schema), also one whose own ``ledger_meta`` table is not certa's."""
    inspector = inspect(conn)
    tables = inspector.get_table_names()
    ours = (ledger_meta.name in tables
            and {"key", "value"} <= {column["name"] for column in inspector.get_columns(ledger_meta.name)})
    state = read_schema_state(conn) if ours else SchemaState(None, None)
    refuse_foreign_database(state.schema_version, tables, location)
    return state


def sqlite_file(ledger: str | os.PathLike[str] | None) -> Path | None:
    """The file of a SQLite ledger (a path or a ``sqlite:///`` URL), or None for another database."""
    url = make_url(resolve_ledger_url(ledger))
    in_memory = url.database in (None, "", ":memory:")
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database and not in_memory else None


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _sqlite_read_only_setup(engine: Engine) -> None:
    """Every transaction on a read-only SQLite engine is a plain (deferred) ``BEGIN``: it takes no write lock."""

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # certa issues BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")


class Ledger:
    """An open ledger. Use ``Ledger.open(url_or_path)``; close with ``close()`` or a ``with`` block."""

    def __init__(self, engine: Engine, url: str, *, read_only: bool = False) -> None:
        self._engine = engine
        self.url = url
        self.read_only = read_only
        self.schema_version = SCHEMA_VERSION  # as found by ``open``; writing needs SCHEMA_VERSION

    @property
    def location(self) -> str:
        """The ledger as a user would pass it to ``--ledger``: a SQLite file's path, else the URL without
        its password."""
        url = make_url(self.url)
        if url.get_backend_name() == "sqlite" and url.database:
            return url.database
        return url.render_as_string(hide_password=True)

    # ------------------------------------------------------------------------------------ opening

    @classmethod
    def open(cls, ledger: str | os.PathLike[str] | None = None, *, create: bool = True,
             read_only: bool = False) -> Ledger:
        """Open (and, if ``create``, initialise) the ledger at a path or SQLAlchemy URL.

        ``read_only``: open an existing ledger for reading only (``create`` is then ignored): nothing is
        created, initialised or changed, and every write is refused (``require_writable``). Without it a SQLite
        file that cannot be written (a read-only file, folder or mount) is refused here, in one line."""
        url = resolve_ledger_url(ledger)
        path = sqlite_file(url)
        if path is not None and (read_only or not create) and not path.exists():
            raise LedgerError(f"no ledger at {path}; run 'certa run SPEC' first or pass --ledger")
        if path is not None and not read_only:
            refusal = sqlite_write_refusal(path)
            if refusal is not None:
                raise LedgerError(refusal)
            if path.exists():
                sqlite_ledger_state(path)  # another program's database is refused before WAL mode is set
        shown = make_url(url).render_as_string(hide_password=True)
        if read_only and path is None and url.startswith("sqlite"):
            raise LedgerError(f"no ledger at {shown}: a new in-memory SQLite database holds none")
        try:
            if path is not None and read_only:
                engine = create_engine(url, creator=lambda: connect_read_only(path))
            else:
                engine = create_engine(url)
        except ImportError as exc:
            missing = missing_extra(exc, f"the ledger {shown}")  # psycopg: the postgres extra
            if missing is not None:
                raise missing from None
            raise LedgerError(f"cannot open ledger {shown}: its database driver is not installed ({exc}); "
                              "for PostgreSQL: python3 -m pip install 'certa[postgres]'") from None
        except NoSuchModuleError:
            raise LedgerError(f"cannot open ledger {shown}: no database driver named "
                              f"{make_url(url).drivername!r} (expected {_URL_FORM})") from None
        except ArgumentError as exc:
            raise LedgerError(f"cannot open ledger {shown}: {database_message(exc)}") from None
        if engine.dialect.name == "sqlite":
            (_sqlite_read_only_setup if read_only else _sqlite_setup)(engine)
        store = cls(engine, url, read_only=read_only)
        try:
            if read_only:
                store._check_existing(path)
            else:
                store._initialise()
        except LedgerError:
            store.close()  # a refused database keeps no connection open
            raise
        return store

    def _check_existing(self, path: Path | None) -> None:
        """Check the schema of an existing ledger opened read-only (see ``_check_schema``); a database holding
        no tables at all is no ledger yet, one holding other tables is not a certa ledger."""
        try:
            with self._engine.connect() as conn, conn.begin():
                state = _ledger_state(conn, self.location)
        except SQLAlchemyError as exc:
            problem = (database_message(exc) if path is None
                       else sqlite_read_problem(path, getattr(exc, "orig", None) or exc))
            raise LedgerError(f"cannot read ledger {self.location}: {problem}") from None
        if state.schema_version is None:
            raise LedgerError(f"no ledger in {self.location} yet (it holds no tables); run 'certa run SPEC' first "
                              "or pass --ledger")
        self._check_schema(state)

    def _initialise(self, attempts: int = 3) -> None:
        """Create a new ledger at the newest schema, stamped with its Alembic revision, in one
        transaction; or check an existing ledger's schema (see ``_check_schema``). A database that holds
        tables but no ledger is refused (``location.refuse_foreign_database``), never extended.

        Two processes opening a new PostgreSQL ledger at once can race on CREATE TABLE; the loser's
        transaction fails and is retried, and then finds the tables in place.
        """
        for attempt in range(1, attempts + 1):
            try:
                with self._engine.begin() as conn:
                    state = _ledger_state(conn, self.location)
                    if state.schema_version is None:
                        metadata.create_all(conn)
                        alembic_version.create(conn, checkfirst=True)
                        conn.execute(insert(ledger_meta), [{"key": "schema_version", "value": SCHEMA_VERSION},
                                                           {"key": "head", "value": f"0:{GENESIS}"}])
                        conn.execute(insert(alembic_version).values(version_num=HEAD_REVISION))
                        state = SchemaState(SCHEMA_VERSION, HEAD_REVISION)
                break
            except SQLAlchemyError as exc:
                if attempt == attempts:
                    raise LedgerError(f"cannot open ledger {self.location}: {database_message(exc)}") from None
        self._check_schema(state)

    def _check_schema(self, state: SchemaState) -> None:
        """Accept this certa's schema and older ones it can migrate (read-only until then); refuse a newer
        schema or revision, and anything else."""
        self.schema_version = checked_schema_version(state, self.location)

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise LedgerError(f"ledger {self.location} is open read-only: nothing can be recorded in it")

    def require_writable(self) -> None:
        """Raise ``LedgerError`` unless this ledger was opened for writing and has this certa's schema (an older
        one needs ``certa migrate``)."""
        self._refuse_if_read_only()
        if self.schema_version != SCHEMA_VERSION:
            raise LedgerError(f"ledger {self.location} has schema version {self.schema_version}, older than this "
                              f"certa's {SCHEMA_VERSION}: run '{command_hint('migrate', ledger=self.location)}' (it keeps "
                              "every entry byte-identical)")

    def migrate(self) -> Migration:
        """Upgrade this ledger in place to the newest schema, in one transaction that holds the write lock
        (SQLite ``BEGIN IMMEDIATE``, PostgreSQL the head row ``FOR UPDATE``); no entry, blob or run row is
        rewritten. A failure leaves the ledger as it was. See ``certa.ledger.migrate``."""
        from certa.ledger.migrate import upgrade_to_head  # imports Alembic: only this path needs it

        self._refuse_if_read_only()
        try:
            with self._engine.connect() as conn:
                with conn.begin():
                    conn.execute(select(ledger_meta.c.value).where(ledger_meta.c.key == "head").with_for_update())
                    done = upgrade_to_head(conn)
        except SQLAlchemyError as exc:
            raise LedgerError(f"migrating ledger {self.location} failed, it is unchanged: "
                              f"{database_message(exc)}") from None
        self.schema_version = done.to_schema
        return done

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    # ------------------------------------------------------------------------------------ writing

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        self.require_writable()
        try:
            with self._engine.connect() as conn:
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise LedgerError(f"ledger write failed, nothing was recorded: {database_message(exc)}") from None

    def _append(self, conn: Connection, run_id: str,
                new_entries: Sequence[NewEntry | EncodedEntries]) -> tuple[int, int, str]:
        """Append entries in the current transaction; returns (first seq, last seq, recorded_at). Payloads are
        encoded here unless they come encoded (``EncodedEntries``); digests and hashes are made for all at once."""
        head = conn.execute(select(ledger_meta.c.value).where(ledger_meta.c.key == "head").with_for_update()).scalar_one()
        seq_text, prev = head.split(":")
        first = int(seq_text) + 1
        recorded_at = _utc_now()
        kinds: list[str] = []
        payloads: list[str] = []
        for item in new_entries:
            encoded = (item if isinstance(item, EncodedEntries)
                       else EncodedEntries(item.kind, [canonical_bytes(item.payload).decode("utf-8")]))
            kinds += [encoded.kind] * len(encoded.payloads)
            payloads += encoded.payloads
        digests = payload_digests(payloads)
        hashes = chain_hashes(first_seq=first, run_id=run_id, kinds=kinds, recorded_at=recorded_at,
                              payload_sha256s=digests, prev_hash=prev)
        count = len(hashes)
        last = first + count - 1
        insert_rows(conn, entries, list(zip(range(first, last + 1), [run_id] * count, kinds, [recorded_at] * count,
                                            payloads, digests, [prev, *hashes[:-1]], hashes)))
        self._append_merkle_nodes(conn, first - 1, hashes, prev)
        conn.execute(update(ledger_meta).where(ledger_meta.c.key == "head").values(value=f"{last}:{hashes[-1]}"))
        return first, last, recorded_at

    def _append_merkle_nodes(self, conn: Connection, start: int, hashes: Sequence[str], prev: str) -> None:
        """Insert the Merkle nodes of two or more leaves that leaves ``start``, ``start`` + 1, ... (entries ``start``
        + 1, ...) complete, in key order; their left children from earlier transactions are the frontier of the
        first ``start`` leaves: a leaf (when ``start`` is odd) is that of the head entry, whose hash is ``prev``,
        the others are read in one statement (``_append`` holds the head lock)."""
        wanted = frontier_nodes(start)
        frontier = self._read_merkle_nodes(conn, [key for key in wanted if key[0]], schema_6_nodes=True)
        if start % 2:
            try:
                frontier[(0, start - 1)] = leaf_hash(bytes.fromhex(prev))
            except ValueError:
                hint = command_hint("verify", ledger=self.location)
                raise LedgerIntegrityError(f"the head row's hash {prev!r} is no SHA-256 hex digest (it was edited), so "
                                           f"nothing can be appended: run '{hint}'") from None
        try:
            levels = list(completed_levels(entry_leaves(hashes), start, frontier))
        except KeyError as missing:
            level, position = missing.args[0]
            raise LedgerIntegrityError(f"merkle_nodes has no row (level {level}, position {position}) for entries "
                                       f"1..{start}, so nothing can be appended: run "
                                       f"'{command_hint('verify', ledger=self.location)}'") from None
        insert_rows(conn, merkle_nodes, [(number, level, position, node.hex())  # no leaf: its entry gives it
                                         for number, level, position, node in numbered_nodes(levels, start)])

    @staticmethod
    def _read_merkle_nodes(conn: Connection, keys: Iterable[NodeKey], *,
                           schema_6_nodes: bool) -> dict[NodeKey, bytes]:
        """The hashes of the Merkle nodes ``keys`` that exist, in one statement per table.

        Schema 6 and later (``schema_6_nodes``): a leaf (level 0, position p) is SHA-256(0x00 ‖ entry_hash) of
        entry p + 1, read by its seq; another node by its primary key, ``node_seq = merkle.node_seq(L, P)`` (and
        its level and position). Schema 3 to 5: every node by ``level = L AND position = P``. The conditions are joined
        by OR, which SQLite and PostgreSQL answer with one primary-key lookup each (SQLite scans the table for the
        row-value form ``(a, b) IN (VALUES ...)``); the keys are ints, written into the statement (no statement to
        compile per call: this runs in every write). A leaf whose entry's hash is no hex digest (an edited cell)
        raises ``LedgerIntegrityError``."""
        keys = sorted({(int(level), int(position)) for level, position in keys})
        found: dict[NodeKey, bytes] = {}
        leaves = [position for level, position in keys if level == 0] if schema_6_nodes else []
        if leaves:
            rows = conn.exec_driver_sql(f"SELECT seq, entry_hash FROM entries WHERE "
                                        f"{' OR '.join(f'seq = {position + 1}' for position in leaves)}")
            for seq, digest in rows:
                try:
                    found[(0, seq - 1)] = leaf_hash(bytes.fromhex(digest))
                except (TypeError, ValueError):
                    raise LedgerIntegrityError(f"entry {seq}'s entry_hash is no SHA-256 hex digest (it was edited): "
                                               "run 'certa verify'") from None
            keys = [key for key in keys if key[0]]
        if not keys:
            return found
        where = " OR ".join(f"(node_seq = {node_seq(level, position)} AND level = {level} AND position = {position})"
                            if schema_6_nodes else f"(level = {level} AND position = {position})"
                            for level, position in keys)
        rows = conn.exec_driver_sql(f"SELECT level, position, hash FROM merkle_nodes WHERE {where}")
        found.update({(level, position): bytes.fromhex(digest) for level, position, digest in rows})
        return found

    def _store_blobs(self, conn: Connection, contents: Iterable[tuple[str, bytes]]) -> None:
        """Insert missing blobs; call only after ``_append`` holds the head lock (no insert race)."""
        wanted = dict(contents)
        if not wanted:
            return
        present = set(conn.execute(select(blobs.c.sha256).where(blobs.c.sha256.in_(list(wanted)))).scalars())
        missing = [{"sha256": sha, "size": len(raw), "content": raw} for sha, raw in wanted.items() if sha not in present]
        if missing:
            conn.execute(insert(blobs), missing)

    def append_run(self, record: RunRecord) -> None:
        """Write a run's record (``certa.ledger.run_record``: its entries, blobs and runs row) in one transaction, so a
        crash or a refusal leaves none of it."""
        self.append_runs([record])

    def append_runs(self, records: Iterable[RunRecord]) -> None:
        """Write several runs' records, one after the other in chain order, in one transaction (all or none):
        one commit for many runs, for an import or for building a large ledger (``bench/ledger_reads.py``)."""
        with self._write() as conn:
            for record in records:
                first, last, recorded_at = self._append(conn, record.run_id, record.entries)  # locks the head first
                self._store_blobs(conn, record.blobs)
                conn.execute(insert(runs).values(**record.row, recorded_at=recorded_at, first_seq=first,
                                                 last_seq=last))

    def record_note(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> int:
        """Append one ``replay`` or ``review`` entry about an existing run; returns its seq."""
        if kind not in ("replay", "review"):
            raise ValueError(f"notes are replay or review entries, not {kind!r}")
        full = self.resolve_run_id(run_id)
        with self._write() as conn:
            _, last, _ = self._append(conn, full, [NewEntry(kind, payload)])
        return last

    def record_registration(self, registration_id: str, payload: Mapping[str, Any]) -> int:
        """Append one ``registration`` entry (about no run: ``registration_id`` is its ``run_id``); returns its seq."""
        return self._record_about_no_run("registration", registration_id, payload)

    def record_policy(self, policy_id: str, payload: Mapping[str, Any]) -> int:
        """Append one ``policy`` entry (about no run: ``policy_id`` is its ``run_id``); returns its seq."""
        return self._record_about_no_run("policy", policy_id, payload)

    def _record_about_no_run(self, kind: str, entry_id: str, payload: Mapping[str, Any]) -> int:
        with self._write() as conn:
            _, last, _ = self._append(conn, entry_id, [NewEntry(kind, payload)])
        return last

    # ------------------------------------------------------------------------------------ reading

    @contextmanager
    def read_transaction(self) -> Iterator[Connection]:
        """A connection inside one read transaction (a consistent snapshot on SQLite; see ``certa.ledger.verify`` for
        the order of reads on PostgreSQL); a database error is a ``LedgerError`` naming the ledger."""
        try:
            with self._engine.connect().execution_options(sqlite_begin="DEFERRED") as conn:
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise LedgerError(f"cannot read ledger {self.location}: {database_message(exc)}") from None

    def resolve_run_id(self, prefix: str) -> str:
        """The full run id for a unique prefix (4 to 32 hex digits, matched literally), or ``latest`` for the
        newest run."""
        prefix = run_id_prefix(prefix)
        if prefix == LATEST:
            return found_run_id(prefix, [row.run_id for row in self.runs(limit=1)], self.location)
        # A range of the primary key (LIKE 'prefix%' is answered by reading every run id: SQLite does not search an
        # index for LIKE with ESCAPE, PostgreSQL not for LIKE under a non-C collation). Run ids are lowercase hex, so
        # every id that starts with the prefix sorts in [prefix, prefix + "g"); the LIKE keeps the match literal.
        where = (runs.c.run_id >= prefix, runs.c.run_id < prefix + "g",
                 runs.c.run_id.startswith(prefix, autoescape=True))
        with self.read_transaction() as conn:
            self._refuse_unkeyed_runs(conn)
            found = list(conn.execute(select(runs.c.run_id).where(*where).limit(2)).scalars())
        return found_run_id(prefix, found, self.location)

    def run(self, run_id: str) -> RunRow:
        """The index row of a run (``run_id`` may be a unique prefix)."""
        full = self.resolve_run_id(run_id)
        with self.read_transaction() as conn:
            row = conn.execute(select(*_RUN_COLUMNS).where(runs.c.run_id == full)).one()
        return run_rows([row], self.location)[0]

    def runs(self, *, limit: int | None = None) -> list[RunRow]:
        """Runs, newest first (read from the end of ``ix_runs_first_seq``: ``limit`` rows, not a sort of all)."""
        query = select(*_RUN_COLUMNS).order_by(runs.c.first_seq.desc())
        if limit:
            query = query.limit(limit)
        with self.read_transaction() as conn:
            self._refuse_unkeyed_runs(conn)
            return run_rows(conn.execute(query).fetchall(), self.location)

    def _refuse_unkeyed_runs(self, conn: Connection) -> None:
        """``rows.refuse_unkeyed_runs`` from the database's catalogue."""
        declared = inspect(conn).get_pk_constraint(runs.name).get("constrained_columns") or ()
        refuse_unkeyed_runs(declared, self.location)

    def recorded_run_ids(self, run_ids: Iterable[str]) -> set[str]:
        """Which of ``run_ids`` (full ids) are recorded: primary-key lookups, 500 ids a statement (``certa batch``
        resuming asks about its specs' runs, not about every run of the ledger)."""
        wanted = sorted(set(run_ids))
        found: set[str] = set()
        with self.read_transaction() as conn:
            for start in range(0, len(wanted), 500):
                found.update(conn.execute(select(runs.c.run_id).where(runs.c.run_id.in_(wanted[start:start + 500])))
                             .scalars())
        return found

    def entries(self, *, run_id: str | None = None, kinds: Sequence[str] | None = None,
                after: int = 0, containing: str | None = None, batch: int = 2000) -> Iterator[EntryRow]:
        """Entries in chain order (optionally one run's, some kinds, those after seq ``after``, or those whose
        payload text contains ``containing``: a filter the database applies, for finding a few entries among
        millions), in batches.

        A run's entries of several kinds are read kind by kind and merged by seq: its decisions, the bulk of a
        ledger, as the seqs of its record (``runs.first_seq`` .. ``last_seq``: a run records them in one
        transaction; a primary-key range), each other kind by an index search (``ix_entries_run_id_kind_but_decisions``).
        One statement with ``kind IN (...)`` ordered by seq would walk every entry of the run in seq order (a
        bake-off's 10^6 decisions to find its run entry). Without a run, the chain is walked (``certa site``, which
        publishes every run; no index of the kinds, which would cost every recording a page per kind at the end of
        each kind's range)."""
        wanted = list(dict.fromkeys(kinds or (RUN_KINDS if run_id is not None else ())))
        if len(wanted) > 1:
            yield from heapq.merge(*(self._entries_of(run_id, kind, after, containing, batch) for kind in wanted),
                                   key=attrgetter("seq"))
        else:
            yield from self._entries_of(run_id, wanted[0] if wanted else None, after, containing, batch)

    def _entries_of(self, run_id: str | None, kind: str | None, after: int, containing: str | None,
                    batch: int) -> Iterator[EntryRow]:
        """``entries`` of one kind (or of every kind: None, without a run), in batches of ``batch``, each in a
        read transaction."""
        last, stop = after, None
        if run_id is not None and kind == "decision":
            span = self._record_span(run_id)
            if span is None:
                return
            last, stop = max(after, span[0] - 1), span[1]
        while True:
            query = select(*_ENTRY_COLUMNS).where(entries.c.seq > last).order_by(entries.c.seq).limit(batch)
            if stop is not None:
                query = query.where(entries.c.seq <= stop)
            if run_id is not None:
                query = query.where(entries.c.run_id == run_id)
            if kind is not None:
                query = query.where(entries.c.kind == kind)
            if run_id is not None and kind != "decision":
                query = query.where(text(KINDS_BUT_DECISIONS))  # the partial index's own condition
            if containing is not None:
                query = query.where(entries.c.payload.contains(containing, autoescape=True))
            with self.read_transaction() as conn:
                chunk = rows_as(EntryRow, conn.execute(query).fetchall())
            yield from chunk
            if len(chunk) < batch:
                return
            last = chunk[-1].seq

    def registrations(self) -> list[EntryRow]:
        """Every ``registration`` entry, newest first (``ix_entries_about_no_run``: a search of that partial index,
        whose condition the query repeats as written)."""
        return self._about_no_run("registration")

    def policies(self, policy_id: str) -> list[EntryRow]:
        """The ``policy`` entries of ``policy_id`` (``certa.engine.services.policy_record``), newest first."""
        return self._about_no_run("policy", policy_id)

    def _about_no_run(self, kind: str, entry_id: str | None = None) -> list[EntryRow]:
        query = select(*_ENTRY_COLUMNS).where(text(ABOUT_NO_RUN)).where(entries.c.kind == kind)
        if entry_id is not None:
            query = query.where(entries.c.run_id == entry_id)
        with self.read_transaction() as conn:
            return rows_as(EntryRow, conn.execute(query.order_by(entries.c.seq.desc())).fetchall())

    def _record_span(self, run_id: str) -> tuple[int, int] | None:
        """(first seq, last seq) of ``run_id``'s record as its ``runs`` row gives them, or None without a row."""
        with self.read_transaction() as conn:
            row = conn.execute(select(runs.c.first_seq, runs.c.last_seq).where(runs.c.run_id == run_id)).first()
        return checked_span(run_id, row, self.location)

    def head(self) -> tuple[int, str]:
        """(seq, entry_hash) of the last entry as recorded in the head row."""
        with self.read_transaction() as conn:
            value = conn.execute(select(ledger_meta.c.value).where(ledger_meta.c.key == "head")).scalar_one()
        seq, colon, digest = value.partition(":") if isinstance(value, str) else ("", "", "")
        if not (colon and seq.isdigit()):
            raise LedgerIntegrityError(f"ledger_meta.head of {self.location} is not SEQ:HASH (it was edited): run "
                                       f"'{command_hint('verify', ledger=self.location)}'")
        return int(seq), digest

    def entry_hashes(self, upto: int) -> list[str]:
        """``entry_hash`` of entries 1..upto in chain order (fewer if the chain is shorter)."""
        # 10^5 rows for a ``prove``: read through the driver's cursor (plain tuples, no result rows), in the
        # read transaction; the bound is an int, written into the statement.
        sql = f"SELECT entry_hash FROM entries WHERE seq <= {int(upto)} ORDER BY seq"
        with self.read_transaction() as conn:
            driver: Any = conn.connection.driver_connection  # the DB-API connection (None only once closed)
            cursor = driver.cursor()
            try:
                cursor.execute(sql)
                return [row[0] for row in cursor.fetchall()]
            finally:
                cursor.close()

    @property
    def has_merkle_nodes(self) -> bool:
        """Whether this ledger keeps ``merkle_nodes`` (schema 3 and later; older ledgers until migrated)."""
        return int(self.schema_version) >= 3

    def merkle_nodes(self, keys: Iterable[NodeKey]) -> dict[NodeKey, bytes]:
        """The hashes of the Merkle nodes ``keys`` ((level, position), see ``certa.ledger.merkle``) as the ledger stores
        them (a leaf, from schema 6, as its entry gives it); a key without a row is left out. Needs
        ``has_merkle_nodes``."""
        with self.read_transaction() as conn:
            return self._read_merkle_nodes(conn, keys, schema_6_nodes=not self.merkle_leaves_stored)

    @property
    def merkle_leaves_stored(self) -> bool:
        """Whether ``merkle_nodes`` holds the leaves too (schema 3 to 5, keyed by (level, position)); from schema 6
        it holds the nodes of two or more leaves, keyed by ``node_seq``, and a leaf is read from its entry."""
        return 3 <= int(self.schema_version) < 6

    def entry_hash_at(self, seq: int) -> str | None:
        """The ``entry_hash`` of entry ``seq``, or None if there is none."""
        with self.read_transaction() as conn:
            return conn.execute(select(entries.c.entry_hash).where(entries.c.seq == seq)).scalar()

    def entry_count(self) -> int:
        with self.read_transaction() as conn:
            return int(conn.execute(select(func.count()).select_from(entries)).scalar_one())

    def certificate(self, run_id: str) -> dict[str, Any]:
        """The stored certificate of a run (``run_id`` may be a unique prefix)."""
        full = self.resolve_run_id(run_id)
        found = [e.data() for e in self.entries(run_id=full, kinds=["certificate"])]
        if not found:
            status = self.run(full).status
            raise LedgerError(f"run {full} has no certificate (status: {status})")
        return found[-1]

    def batch_runs(self, batch_id: str) -> list[str]:
        """The run ids recorded by ``certa batch`` with ``batch_id``, sorted (``LedgerReader``): the database picks,
        among the entries that may be batch decisions (``schema.BATCH_DECISIONS``, the partial index
        ``ix_entries_batch_decisions``: one entry per batch run, not the million decisions of a bake-off shard),
        those whose text holds the member ``"batch_id":NAME`` as RFC 8785 writes it, and each is read to confirm
        it is a ``decision`` entry and a ``batch`` decision (``BATCH_DECISION``) of that batch."""
        member = canonical_bytes({"batch_id": batch_id}).decode("utf-8")[1:-1]
        query = (select(entries.c.run_id, entries.c.kind, entries.c.payload)
                 .where(text(BATCH_DECISIONS), entries.c.payload.contains(member, autoescape=True)))
        with self.read_transaction() as conn:
            rows = conn.execute(query).fetchall()
        found = set()
        for run_id, kind, payload in rows:
            data = parse_json(payload) if kind == "decision" else None
            if (isinstance(data, dict) and data.get("kind") == BATCH_DECISION
                    and (data.get("detail") or {}).get("batch_id") == batch_id):
                found.add(run_id)
        return sorted(found)

    def blob(self, sha256: str) -> bytes:
        """The stored bytes with this SHA-256."""
        with self.read_transaction() as conn:
            content = conn.execute(select(blobs.c.content).where(blobs.c.sha256 == sha256)).scalar()
        if content is None:
            raise LedgerError(f"the ledger has no stored copy of blob {sha256}")
        return bytes(content)

    def blob_shas(self) -> Iterator[tuple[str, bytes]]:
        """(recorded sha256, content) of every stored blob."""
        with self.read_transaction() as conn:
            for sha, content in conn.execute(select(blobs.c.sha256, blobs.c.content).order_by(blobs.c.sha256)):
                yield sha, bytes(content)
