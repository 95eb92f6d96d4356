"""The reads of ``certa.ledger.verify``: one snapshot of the ledger, streamed in bounded batches.

Everything is read in one read transaction, so the chain and the tables derived from it are one consistent
state however writers append meanwhile (SQLite: a deferred ``BEGIN`` is a snapshot from its first read, WAL
keeps it; PostgreSQL: the transaction is set to ``REPEATABLE READ``, one snapshot for all its statements).

Entries come ordered by ``seq`` (the primary key) in batches of ``BATCH`` rows by keyset pagination
(``WHERE seq > last ORDER BY seq LIMIT BATCH``), as columns (a tuple per column), each with the ``merkle_nodes``
rows the batch's leaves complete: leaves ``start`` .. ``end`` − 1 (0-based, in chain order, entries ``start`` + 1
.. ``end``) complete the nodes numbered ``node_seq_range(start, end)``: one primary-key range ordered by
``node_seq`` (schema 6 and later, ``certa.ledger.merkle.node_seq``); at schema 3 to 5, keyed by (level, position), the nodes
(level l, position p) with ``start >> l <= p < end >> l`` (``certa.ledger.merkle.completed_nodes``), a range per level
ordered by (level, position). Then the small tables: ``runs``, ``blobs`` (each content hashed as it
streams by: hashlib releases the GIL for large buffers), ``ledger_meta`` and ``alembic_version``; and the
number of ``merkle_nodes`` rows, with the rows outside every range read (only when that count differs from the
rows the ranges gave, and only for a walk from the first entry).

The reads run in the caller's thread, a batch when the caller asks for the next: memory is bounded by the
batches the caller holds (``certa.ledger.verify_pool``), whatever the ledger's size. (A reader thread reading ahead
was slower: the driver releases the GIL and takes it back at every row, and the two threads contended for it;
10^6 entries in one process took 16 to 18 s with it, 13.5 s without.)
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import contextmanager
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, inspect, select, text

from certa.ledger.merkle import node_seq_range
from certa.ledger.schema import alembic_version, blobs, entries, ledger_meta, merkle_nodes, runs
from certa.ledger.store import Ledger
from certa.ledger.verify_merkle import StoredNode

__all__ = ["BATCH", "ENTRIES_READ", "EntryBatch", "KeyCheck", "NotUtf8Text", "Tables", "BlobRow", "read_snapshot",
           "node_ranges", "in_ranges", "stored_type"]

BATCH = 2_048
"""Entries per batch."""
ENTRIES_READ = "entries read"
"""What ``read_snapshot`` yields after the last batch, before it asks which tables to read."""
MAX_OUTSIDE_ROWS = 10_000
"""``merkle_nodes`` rows outside every range kept for the report (the rest are counted)."""
MAX_DUPLICATES = 20
"""Duplicated key values of a table without its primary key named in the report (the rest are counted)."""

_ENTRY_NAMES = ", ".join(entries.c[name].name for name in ("seq", "run_id", "kind", "recorded_at", "payload",
                                                           "payload_sha256", "prev_hash", "entry_hash"))

class NotUtf8Text(bytes):
    """A SQLite TEXT cell whose bytes are not UTF-8 (SQLite stores the bytes it is given), read as those bytes so
    that ``verify`` names the cell as edited instead of failing to read the ledger."""


_SQL_TYPES = {type(None): "NULL", int: "an integer", float: "a real number", str: "text", bytes: "a blob",
              NotUtf8Text: "text that is not UTF-8"}


def _text_or_bytes(raw: bytes) -> str | bytes:
    """A TEXT cell's value: its UTF-8 text, or ``NotUtf8Text`` of its bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return NotUtf8Text(raw)


@contextmanager
def _text_read_tolerantly(conn: Connection) -> Iterator[None]:
    """Within the block, a SQLite TEXT cell that is not UTF-8 is read as ``NotUtf8Text`` (the driver raises
    otherwise); other databases check their text encoding on write."""
    driver: Any = conn.connection.driver_connection
    if conn.dialect.name != "sqlite" or driver is None:
        yield
        return
    before = driver.text_factory
    driver.text_factory = _text_or_bytes
    try:
        yield
    finally:
        driver.text_factory = before


def stored_type(value: Any) -> str:
    """A cell's storage type and value, for a problem: ``a blob (b'15')``."""
    shown = repr(value)
    return f"{_SQL_TYPES.get(type(value), type(value).__name__)} ({shown[:40]}{'…' if len(shown) > 40 else ''})"


@dataclass(frozen=True)
class EntryBatch:
    """Consecutive entries in chain order as columns, with the stored Merkle nodes their leaves complete."""

    rows: list[tuple[Any, ...]]
    start: int
    """The leaf index of the first entry (entries read before it in this walk, plus the walk's first leaf)."""
    nodes: list[StoredNode] | None
    """The stored rows of the nodes the batch's leaves complete (``_nodes_in``), in key order; None: the ledger
    has no ``merkle_nodes`` table (schema 1 and 2)."""
    schema_6_nodes: bool
    """Whether ``nodes`` are rows of schema 6 and later: (level, position, hash, node_seq), no leaves among them."""


@dataclass(frozen=True)
class BlobRow:
    sha256: Any
    size: Any
    content_sha256: str | None
    """None: ``content`` is not a blob (``content_size`` then says what it is, as ``stored_type``)."""
    content_size: int | str


@dataclass(frozen=True)
class Tables:
    """The tables derived from the chain, read after the entries in the same snapshot."""

    runs: Iterator[dict[str, Any]]
    """The ``runs`` rows (those the filter asked for) as dicts by column name, streamed from the snapshot: read once,
    before asking ``read_snapshot`` for its next item (which ends the snapshot), so that no run's row is held
    beyond its check."""
    blobs: list[BlobRow]
    meta: dict[Any, Any]
    revisions: list[Any] | None
    """``alembic_version`` rows; None: no such table."""
    node_count: int | None
    """Rows in ``merkle_nodes``; None: no such table (schema 1 and 2)."""
    outside: list[StoredNode]
    """``merkle_nodes`` rows in no range the walk read (at most ``MAX_OUTSIDE_ROWS``)."""
    outside_count: int
    missing_node_seq: bool
    """The ledger says schema 6 or later but its ``merkle_nodes`` has no ``node_seq`` column."""
    keys: tuple[KeyCheck, ...] = ()
    """Each table's primary key as the database declares it, against the one certa creates."""


@dataclass(frozen=True)
class KeyCheck:
    """One table's primary key: the columns certa creates it on, those the database declares (empty: none), and,
    when they differ, the key values held by more than one row (at most ``MAX_DUPLICATES``) and how many there are."""

    table: str
    expected: tuple[str, ...]
    declared: tuple[str, ...]
    duplicates: tuple[tuple[Any, int], ...] = ()
    duplicated_keys: int = 0


def node_ranges(start: int, end: int) -> list[tuple[int, int, int]]:
    """(level, first position, end position) of the perfect nodes leaves ``start`` .. ``end`` − 1 complete."""
    found, level = [], 0
    while end >> level:
        first, stop = start >> level, end >> level
        if stop > first:
            found.append((level, first, stop))
        level += 1
    return found


def in_ranges(row: StoredNode, start: int, end: int) -> bool:
    """Whether a stored row is among those ``_nodes_in(start, end)`` reads, as the database compares: schema 6 and
    later a ``node_seq`` number in ``node_seq_range(start, end)``; before, a number of any type equal to an integer
    level, a position within ``node_ranges(start, end)``'s range of its level."""
    if len(row) > 3:
        after, through = node_seq_range(start, end)
        return type(row[3]) in (int, float) and after < row[3] <= through
    level, position = row[:2]
    if type(level) not in (int, float) or type(position) not in (int, float) or level != int(level) or level < 0:
        return False
    level = int(level)
    return level < end.bit_length() and (start >> level) <= position < (end >> level)


def _snapshot(conn: Connection) -> None:
    """Make ``conn``'s transaction one snapshot (PostgreSQL; a SQLite read transaction is one already)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))


def _driver_rows(conn: Connection, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (its values ints written into it) as the driver's plain tuples, in the transaction; read
    again with ``_text_read_tolerantly`` when a SQLite TEXT cell is not UTF-8 (the fast path stays the driver's)."""
    try:
        return _fetched(conn, sql)
    except sqlite3.OperationalError as error:
        if "decode" not in str(error):
            raise
    with _text_read_tolerantly(conn):
        return _fetched(conn, sql)


def _fetched(conn: Connection, sql: str) -> list[tuple[Any, ...]]:
    driver: Any = conn.connection.driver_connection  # the DB-API connection (None only once closed)
    cursor = driver.cursor()
    try:
        cursor.execute(sql)
        rows = cursor.fetchall()
        return rows if not rows or type(rows[0]) is tuple else [tuple(row) for row in rows]
    finally:
        cursor.close()


def _nodes_in(conn: Connection, start: int, end: int, schema_6_nodes: bool) -> list[StoredNode]:
    """The stored rows of the nodes leaves ``start`` .. ``end`` − 1 complete, in key order: schema 6 and later
    one primary-key range, ``node_seq_range(start, end)``; before, one per level of ``node_ranges(start, end)``."""
    if schema_6_nodes:
        after, through = node_seq_range(start, end)
        return _driver_rows(conn, f"SELECT level, position, hash, node_seq FROM {merkle_nodes.name} WHERE node_seq > "
                                  f"{int(after)} AND node_seq <= {int(through)} ORDER BY node_seq")
    found: list[StoredNode] = []
    for level, first, stop in node_ranges(start, end):
        found += _driver_rows(conn, f"SELECT level, position, hash FROM {merkle_nodes.name} WHERE level = {level} "
                                    f"AND position >= {first} AND position < {stop} ORDER BY position")
    return found


def _batches(conn: Connection, after: int, first_leaf: int, with_nodes: bool,
             schema_6_nodes: bool) -> Iterator[EntryBatch]:
    last, leaf = after, first_leaf
    while True:
        # plain tuples from the driver (no result-row objects for 10^7 rows) and no statement compiled per batch
        # (a compiled statement holds reference cycles, kept while verify pauses the cyclic collector)
        rows = _driver_rows(conn, f"SELECT {_ENTRY_NAMES} FROM {entries.name} WHERE seq > {int(last)} ORDER BY seq "
                                  f"LIMIT {int(BATCH)}")
        if not rows:
            return
        nodes = _nodes_in(conn, leaf, leaf + len(rows), schema_6_nodes) if with_nodes else None
        yield EntryBatch(rows, leaf, nodes, schema_6_nodes)
        leaf += len(rows)
        if len(rows) < BATCH:
            return
        last = rows[-1][0]


def _key_checks(conn: Connection, has_nodes: bool, schema_6_nodes: bool) -> tuple[KeyCheck, ...]:
    """Each table's declared primary key against certa's (``merkle_nodes``: ``node_seq`` from schema 6, ``(level,
    position)`` before; not checked when ``has_nodes`` is false, which a schema 6 table without ``node_seq`` passes:
    that is reported on its own), from the catalogue (no rows read); where one differs (a table recreated without its key,
    a key dropped), the key values more than one row holds, found by grouping the rows on certa's key. Every
    check ``verify`` makes of a derived table assumes its key: a duplicate row would otherwise hide behind the
    first."""
    inspector = inspect(conn)
    expected = [(table, tuple(c.name for c in table.primary_key.columns)) for table in (entries, runs, blobs,
                                                                                        ledger_meta)]
    if inspector.has_table(alembic_version.name):
        expected.append((alembic_version, ("version_num",)))
    if has_nodes:
        expected.append((merkle_nodes, ("node_seq",) if schema_6_nodes else ("level", "position")))
    checks = []
    for table, key in expected:
        declared = tuple(inspector.get_pk_constraint(table.name).get("constrained_columns") or ())
        if declared == key:
            checks.append(KeyCheck(table.name, key, declared))
            continue
        columns = [table.c[name] for name in key]
        grouped = select(*columns, func.count().label("n")).group_by(*columns).having(func.count() > 1)
        found = [(row[0] if len(key) == 1 else tuple(row[:-1]), int(row[-1])) for row in conn.execute(grouped)]
        checks.append(KeyCheck(table.name, key, declared, tuple(sorted(found, key=repr)[:MAX_DUPLICATES]),
                               len(found)))
    return tuple(checks)


def _run_rows(conn: Connection, query: Any) -> Iterator[dict[str, Any]]:
    """The rows of ``query`` on ``runs`` as dicts by column name, fetched in chunks when first asked for."""
    names = list(runs.c.keys())
    for row in conn.execute(query.execution_options(yield_per=1024)):
        yield dict(zip(names, row))


def _tables(conn: Connection, leaves: tuple[int, int], run_filter: Any | None, blob_filter: list[str] | None,
            has_nodes: bool, schema_6_nodes: bool, nodes_read: int) -> Tables:
    query = select(*runs.c) if run_filter is None else select(*runs.c).where(run_filter)
    blob_query = select(blobs.c.sha256, blobs.c.size, blobs.c.content)
    blob_rows = []
    for chunk in ([None] if blob_filter is None else [blob_filter[i:i + 500] for i in range(0, len(blob_filter), 500)]):
        if chunk is not None and not chunk:
            continue
        found = blob_query if chunk is None else blob_query.where(blobs.c.sha256.in_(chunk))
        for sha, size, content in conn.execute(found.execution_options(yield_per=64)):
            if isinstance(content, (bytes, bytearray, memoryview)):
                raw = bytes(content)
                blob_rows.append(BlobRow(sha, size, hashlib.sha256(raw).hexdigest(), len(raw)))
            else:  # stored by hand as another SQLite type
                blob_rows.append(BlobRow(sha, size, None, stored_type(content)))
    outside: list[Any] = []
    node_count, outside_count = None, 0
    start, end = leaves
    if has_nodes and start > 0:  # a walk from a checkpoint: the rows before it are not counted (O(n)), the rows
        node_count = nodes_read  # beyond the head are (a primary-key range at schema 6, a scan before)
        columns = ["level", "position", "hash", "node_seq"][:4 if schema_6_nodes else 3]
        beyond = (f"node_seq > {int(end - end.bit_count())}" if schema_6_nodes else
                  f"((position + 1) << level) > {int(end)}")
        rows = _driver_rows(conn, f"SELECT {', '.join(columns)} FROM {merkle_nodes.name} WHERE {beyond} "
                                  f"ORDER BY {', '.join(columns[:2])} LIMIT {MAX_OUTSIDE_ROWS + 1}")
        outside, outside_count = [tuple(row) for row in rows[:MAX_OUTSIDE_ROWS]], len(rows)
    elif has_nodes:
        node_count = int(conn.execute(select(func.count()).select_from(merkle_nodes)).scalar_one())
        if node_count != nodes_read:  # rows outside every range read: find them
            columns = ["level", "position", "hash", "node_seq"][:4 if schema_6_nodes else 3]
            scan = select(*(merkle_nodes.c[name] for name in columns))
            for row in conn.execute(scan.execution_options(yield_per=4096)):
                if not in_ranges(tuple(row), start, end):
                    outside_count += 1
                    if len(outside) < MAX_OUTSIDE_ROWS:
                        outside.append(tuple(row))
    meta = {key: value for key, value in conn.execute(select(ledger_meta.c.key, ledger_meta.c.value))}
    revisions = None
    if inspect(conn).has_table(alembic_version.name):
        revisions = list(conn.execute(select(alembic_version.c.version_num)).scalars())
    version = str(meta.get("schema_version", ""))
    missing_node_seq = has_nodes and not schema_6_nodes and version.isdigit() and int(version) >= 6
    return Tables(_run_rows(conn, query), blob_rows, meta, revisions, node_count, outside, outside_count, missing_node_seq,
                  _key_checks(conn, has_nodes and not missing_node_seq, schema_6_nodes))


def read_snapshot(ledger: Ledger, *, after: int = 0, tables: Callable[[], tuple[Any | None, list[str] | None]]
                  ) -> Iterator[EntryBatch | str | Tables]:
    """The entries after seq ``after`` (leaf ``after`` onwards) as ``EntryBatch``es, then ``ENTRIES_READ``, then
    ``Tables``, from one snapshot, each read when the caller asks for it. ``tables()`` is called when the caller
    asks for the item after ``ENTRIES_READ``, once it has checked every batch: (a ``runs`` filter or None for
    every row, the blob names to read or None for every blob)."""
    with ledger.read_transaction() as conn:
        _snapshot(conn)
        has_nodes = inspect(conn).has_table(merkle_nodes.name)
        schema_6_nodes = has_nodes and any(column["name"] == merkle_nodes.c.node_seq.name
                                           for column in inspect(conn).get_columns(merkle_nodes.name))
        leaf, nodes_read = after, 0
        for batch in _batches(conn, after, after, has_nodes, schema_6_nodes):
            yield batch
            leaf, nodes_read = batch.start + len(batch.rows), nodes_read + len(batch.nodes or ())
        yield ENTRIES_READ
        run_filter, blob_filter = tables()
        with _text_read_tolerantly(conn):  # small tables: an edited cell is named, never a failed read
            yield _tables(conn, (after, leaf), run_filter, blob_filter, has_nodes, schema_6_nodes, nodes_read)
