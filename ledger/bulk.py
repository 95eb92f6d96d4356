"""Bulk inserts of plain tuples below SQLAlchemy's statement layer, on SQLite and PostgreSQL.

SQLAlchemy's ``insert(table)`` with a list of dicts processes every parameter of every row in Python (about
as long as SQLite's own ``executemany`` for the 10^5-row transactions of a large bake-off). The rows the ledger
appends are already plain ``str``/``int`` tuples in column order, so ``exec_driver_sql`` hands them to the
driver's ``executemany`` in the connection's open transaction (errors still come wrapped as SQLAlchemy's),
``sqlite3`` with ``?`` placeholders. psycopg 3's ``executemany`` still does per-row Python work in its pipeline,
so with psycopg the rows go through ``COPY ... FROM STDIN`` instead (recording a run of 10^5 decisions: 2.5 s
instead of 6.1 s).

No page cache is raised for a large insert: since schema 5 (``certa.ledger.schema``) every index of ``entries`` takes one
run's keys at one place (the unique indexes of random hashes, whose pages a large insert touched all over and
SQLite's default 2 MB cache evicted, are gone), so a run of 10^6 decisions records as fast with the default cache as
with 256 MB.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.exc import DBAPIError

__all__ = ["insert_rows"]


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
    driver: Any = conn.connection.driver_connection  # the DB-API connection (None only once closed)
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            deque(map(copy.write_row, rows), maxlen=0)  # the rows written by a C-level loop (itertools' "consume")
    except conn.dialect.loaded_dbapi.Error as error:
        raise DBAPIError.instance(statement, None, error, conn.dialect.loaded_dbapi.Error) from None

