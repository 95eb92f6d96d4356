"""Categories of the adversarial sweep on PostgreSQL (marker ``postgres``; run when ``CERTA_TEST_POSTGRES_URL`` is
set, as ``.ci/run`` does, skipped otherwise):

- a read-only role: ``verify``, ``list``, ``show``, ``head``, ``replay --no-record`` work; ``run``, ``review`` and
  ``replay`` are refused in one line (exit 2) and record nothing;
- a database whose default schema holds another program's tables: refused (exit 2), unless the URL names a
  schema for certa (``?options=-csearch_path%3Dcerta``), where the ledger is created beside them untouched;
- bad URLs on a real server: a closed port, an unknown database or role, a bad ``sslmode``: one line, exit 2;
- ledger cells changed by SQL ``UPDATE`` (every column of ``entries``, ``blobs`` and ``runs``, the chain head in
  ``ledger_meta``, a Merkle node): ``verify`` reports tampering (exit 1) without a traceback.

Every case works on its own copy of one recorded ledger (``CREATE DATABASE ... TEMPLATE``), dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from tests.conftest import POSTGRES_SERVER, fresh_postgres_databases, require_postgres
from .conftest import World, assert_ledger_kept, check, invoke

pytestmark = [pytest.mark.adversarial, pytest.mark.postgres]


@dataclass(frozen=True)
class PgWorld:
    """A database holding the world's two runs recorded anew (``template``, never used directly) and a factory of
    copies; ``reader``: a role that may only read (connect, select)."""

    template: str
    copy: Callable[[], str]
    reader: str


def _sql(url: str, *statements: str) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def pg_world(world: World) -> Iterator[PgWorld]:
    reader = f"certa_reader_{uuid.uuid4().hex[:8]}"
    try:
        with fresh_postgres_databases("adversarial sweep") as new_database:
            url = new_database()
            for seed in (8, 7):  # the world's two runs, recorded on PostgreSQL
                spec = world.folder / f"pg-spec-{seed}.yaml"
                spec.write_text(world.spec.read_text().replace("seed: 7", f"seed: {seed}"), encoding="utf-8")
                assert invoke("run", spec, "--ledger", url).exit_code == 0
            database = make_url(url).database
            _sql(url, f'CREATE ROLE "{reader}" LOGIN', f'GRANT USAGE ON SCHEMA public TO "{reader}"',
                 f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{reader}"')  # copies keep these grants
            yield PgWorld(database, lambda: new_database(database), reader)
    finally:  # after the databases where it had rights
        if POSTGRES_SERVER:
            _sql(POSTGRES_SERVER, f'DROP ROLE IF EXISTS "{reader}"')


# ------------------------------------------------------------------------------------------- a read-only role

READER_COMMANDS = {  # name: (arguments, allowed exit codes)
    "verify": (("verify",), {0}),
    "list": (("list",), {0}),
    "show": (("show", "latest"), {0}),
    "head": (("head",), {0}),
    "replay-no-record": (("replay", "latest", "--no-record"), {0}),
    "run": (("run", "{spec}"), {2}),
    "review": (("review", "latest", "--by", "kim", "--decision", "approved"), {2}),
    "replay": (("replay", "latest"), {2}),
}


@pytest.mark.parametrize("command", list(READER_COMMANDS))
def test_pg_read_only_role(command: str, pg_world: PgWorld, world: World) -> None:
    url = pg_world.copy()
    as_reader = make_url(url).set(username=pg_world.reader, password=None).render_as_string(hide_password=False)
    args, allowed = READER_COMMANDS[command]
    result = invoke(*(a.format(spec=world.spec) for a in args), "--ledger", as_reader)
    check(f"{command} as a read-only role", result, allowed=allowed)
    assert_ledger_kept(f"{command} as a read-only role", url, world.runs)
    entries = create_engine(url)
    try:
        with entries.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM entries WHERE kind IN ('review', 'replay')")).scalar() == 0
    finally:
        entries.dispose()


# ---------------------------------------------------------------------------------------- another program's data

FOREIGN_COMMANDS = {"run": ("run", "{spec}"), "list": ("list",), "verify": ("verify",), "head": ("head",),
                    "migrate": ("migrate",), "show": ("show", "latest")}


@pytest.fixture
def foreign_database() -> Iterator[str]:
    """A database whose public schema holds another program's table (one row), and an empty schema ``certa``."""
    with fresh_postgres_databases("adversarial sweep") as new_database:
        url = new_database()
        _sql(url, "CREATE TABLE invoices (id integer PRIMARY KEY, total numeric)",
             "INSERT INTO invoices VALUES (1, 99.5)", "CREATE SCHEMA certa")
        yield url


@pytest.mark.parametrize("command", list(FOREIGN_COMMANDS))
def test_pg_foreign_schema(command: str, foreign_database: str, world: World) -> None:
    args = [a.format(spec=world.spec) for a in FOREIGN_COMMANDS[command]]
    refused = invoke(*args, "--ledger", foreign_database)
    check(f"{command} on a schema holding another program's tables", refused, allowed={2})
    assert "is not a certa ledger: it holds tables invoices;" in refused.stderr
    named = f"{foreign_database}?options=-csearch_path%3Dcerta"
    if command == "run":
        check("run in the schema named for certa", invoke(*args, "--ledger", named), allowed={0})
        check("verify in the schema named for certa", invoke("verify", "--ledger", named), allowed={0})
    engine = create_engine(foreign_database)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT id, total FROM invoices")).all() == [(1, 99.5)]
            public = conn.execute(text("SELECT table_name FROM information_schema.tables "
                                       "WHERE table_schema = 'public'")).scalars().all()
            certa = conn.execute(text("SELECT count(*) FROM information_schema.tables "
                                      "WHERE table_schema = 'certa'")).scalar()
    finally:
        engine.dispose()
    assert public == ["invoices"]
    assert (certa > 0) == (command == "run")


# ------------------------------------------------------------------------------------------------------ bad URLs

BAD_URLS = {  # name: how to change the test server's URL
    "closed-port": {"port": 1},
    "unknown-database": {"database": "certa_no_such_database"},
    "unknown-role": {"username": "certa_no_such_role", "password": None},
    "bad-sslmode": {"query": {"sslmode": "sometimes"}},
}


@pytest.mark.parametrize("command", ["list", "verify", "run"])
@pytest.mark.parametrize("bad", list(BAD_URLS))
def test_pg_bad_url(bad: str, command: str, world: World) -> None:
    url = make_url(require_postgres("adversarial sweep")).set(**BAD_URLS[bad]).render_as_string(hide_password=False)
    args = ("run", world.spec) if command == "run" else (command,)
    check(f"{command} --ledger {bad}", invoke(*args, "--ledger", url), allowed={2}, verify_command=command == "verify")


# ------------------------------------------------------------------------------------------------ tampered cells

COLUMNS = {
    "entries": ["seq", "run_id", "kind", "recorded_at", "payload", "payload_sha256", "prev_hash", "entry_hash"],
    "blobs": ["sha256", "size", "content"],
    "runs": ["run_id", "name", "status", "verdict", "profile", "seed", "knobs_hash", "spec_sha256",
             "certificate_sha256", "recorded_at", "first_seq", "last_seq"],
    "ledger_meta": ["value"],
    "merkle_nodes": ["hash"],
}
ROW = {"entries": "seq = 5", "blobs": "sha256 = (SELECT min(sha256) FROM blobs)",
       "runs": "run_id = (SELECT run_id FROM runs ORDER BY recorded_at DESC, run_id LIMIT 1)",
       "ledger_meta": "key = 'head'", "merkle_nodes": "level = 0 AND position = 3"}
CHANGE = {  # by PostgreSQL data type: a new value of the same type (and length, for text)
    "integer": "{c} + 1000",  # past every row: no primary key clash
    "bytea": "{c} || '\\x00'::bytea",
    "text": "left({c}, -1) || CASE WHEN right({c}, 1) = '0' THEN '1' ELSE '0' END",
}
CELL_CASES = [pytest.param(t, c, id=f"{t}.{c}") for t, columns in COLUMNS.items() for c in columns]


@pytest.mark.parametrize(("table", "column"), CELL_CASES)
def test_pg_ledger_cell(table: str, column: str, pg_world: PgWorld) -> None:
    url = pg_world.copy()
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            kind = conn.execute(text("SELECT data_type FROM information_schema.columns WHERE table_name = :t "
                                     "AND column_name = :c AND table_schema = 'public'"),
                                {"t": table, "c": column}).scalar_one()
            change = CHANGE.get(kind, CHANGE["text"]).format(c=f'"{column}"')
            update = text(f'UPDATE {table} SET "{column}" = {change} WHERE {ROW[table]}')
            try:
                with conn.begin_nested():
                    changed = conn.execute(update).rowcount
            except IntegrityError:  # a constraint refused the edit itself (CHECK, UNIQUE)
                changed = 0
    finally:
        engine.dispose()
    result = invoke("verify", "--ledger", url)
    check(f"verify after UPDATE {table}.{column} ({kind})", result, allowed={1} if changed else {0},
          verify_command=True)
    if changed:
        assert "tampered" in (result.stdout + result.stderr).lower()
    check(f"list after UPDATE {table}.{column}", invoke("list", "--ledger", url), allowed={0, 1, 2})
