"""Bulk inserts of plain tuples below SQLAlchemy's statement layer, on SQLite and PostgreSQL.

SQLAlchemy's ``insert(table)`` with a list of dicts processes every parameter of every row in Python (about
as long as SQLite's own ``executemany`` for the 10^5-row transactions of a large bake-off). The rows the ledger
appends are already plain ``str``/``int`` tuples in column order, so ``exec_driver_sql`` hands them to the
driver's ``executemany`` in the connection's open transaction (errors still come wrapped as SQLAlchemy's),
``sqlite3`` with ``?`` placeholders. psycopg 3's ``executemany`` still does per-row Python work in its pipeline,
so with psycopg the rows go through ``COPY ... FROM STDIN`` instead (recording a run of 10^5 decisions: 2.5 s
instead of 6.1 s).

On SQLite the entries' two unique indexes of random hashes make a large insert touch pages all over them;
with SQLite's default 2 MB page cache they are evicted and re-read (10^6 entries: 26 s in ``executemany``, 13 s
with a 256 MB cache). ``bulk_cache`` raises the cache for one append and restores it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.exc import DBAPIError

__all__ = ["insert_rows", "bulk_cache"]

BULK_CACHE_KIB = 262144
"""SQLite page cache during an append, in KiB (a maximum: pages are allocated as the insert touches them)."""


def insert_rows(conn: Connection, table: Table, rows: list[Sequence[Any]]) -> None:
    """Insert ``rows`` (tuples with one value per column of ``table``, in its column order) in ``conn``'s
    transaction."""
    if not rows:
        return
    names = ", ".join(column.name for column in table.columns)
    if conn.dialect.driver == "psycopg":
        _copy_rows(conn, f"COPY {table.name} ({names}) FROM STDIN", rows)
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({names}) VALUES ({', '.join([mark] * len(table.columns))})", rows)


def _copy_rows(conn: Connection, statement: str, rows: list[Sequence[Any]]) -> None:
    """psycopg 3's ``COPY ... FROM STDIN``, in the transaction SQLAlchemy holds on the connection; a driver error
    is raised as SQLAlchemy's (``DBAPIError`` and its subclasses), as ``exec_driver_sql`` would."""
    driver = conn.connection.driver_connection
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            deque(map(copy.write_row, rows), maxlen=0)  # the rows written by a C-level loop (itertools' "consume")
    except conn.dialect.loaded_dbapi.Error as error:
        raise DBAPIError.instance(statement, None, error, conn.dialect.loaded_dbapi.Error) from None


@contextmanager
def bulk_cache(conn: Connection) -> Iterator[None]:
    """On SQLite, a page cache of ``BULK_CACHE_KIB`` for the duration (the connection's own size restored after);
    elsewhere nothing."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")
