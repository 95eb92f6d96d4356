"""A database that holds tables but no certa ledger is refused, never extended: ``--ledger other-program.db``
names its tables and exits 2, and the file keeps every byte. An empty file or database is still initialised
as a new ledger."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from certa.cli import main
from certa.engine.foundation.errors import LedgerError
from certa.ledger import Ledger
from certa.ledger.sqlite_read import newest_runs

from tests.conftest import fresh_postgres_databases


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _other_program(path: Path, *tables: str) -> Path:
    with sqlite3.connect(path) as conn:
        for table in tables:
            conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, value TEXT)")
            conn.execute(f"INSERT INTO {table} (value) VALUES ('kept')")
    conn.close()
    return path


@pytest.mark.parametrize("command", [["head"], ["list"], ["verify"], ["migrate"], ["show", "latest"]])
def test_a_command_on_another_programs_database_names_its_tables_and_changes_nothing(
        command: list[str], tmp_path: Path) -> None:
    other = _other_program(tmp_path / "other-program.db", "orders", "customers", "alembic_version")
    before, listing = _digest(other), sorted(p.name for p in tmp_path.iterdir())
    result = _invoke(*command, "--ledger", str(other))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert result.stderr.startswith(f"error: {other} is not a certa ledger: it holds tables alembic_version, "
                                    "customers, orders;")
    assert _digest(other) == before and sorted(p.name for p in tmp_path.iterdir()) == listing


def test_a_run_into_another_programs_database_is_refused_before_it_records(small_spec: Path, tmp_path: Path) -> None:
    other = _other_program(tmp_path / "other-program.db", "orders")
    before = _digest(other)
    result = _invoke("run", str(small_spec), "--ledger", str(other))
    assert result.exit_code == 2 and "is not a certa ledger: it holds tables orders;" in result.stderr
    with sqlite3.connect(other) as conn:
        assert [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["orders"]
    conn.close()
    assert _digest(other) == before


@pytest.mark.parametrize("read_only", [False, True])
def test_the_api_refuses_it_too(tmp_path: Path, read_only: bool) -> None:
    other = _other_program(tmp_path / "other.db", "ledger_meta")  # a table of the same name is not a ledger
    with pytest.raises(LedgerError, match=r"other\.db is not a certa ledger: it holds tables ledger_meta;"):
        Ledger.open(other, read_only=read_only)
    with pytest.raises(LedgerError, match="is not a certa ledger"):
        newest_runs(other, 10)


def test_a_long_list_of_tables_is_cut_short(tmp_path: Path) -> None:
    other = _other_program(tmp_path / "other.db", *(f"t{i:02d}" for i in range(20)))
    with pytest.raises(LedgerError, match=r"it holds tables t00, t01, .*, t11 and 8 more;"):
        Ledger.open(other)


def test_an_empty_file_becomes_a_new_ledger_as_before(small_spec: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    assert _invoke("list", "--ledger", str(empty)).stdout == "no runs recorded yet\n"
    assert _invoke("run", str(small_spec), "--ledger", str(empty)).exit_code == 0
    assert _invoke("verify", "--ledger", str(empty)).exit_code == 0


@pytest.mark.postgres
def test_a_postgresql_database_with_other_tables_is_refused_and_an_empty_one_initialised() -> None:
    from sqlalchemy import create_engine, inspect, text

    with fresh_postgres_databases("foreign-database refusal") as new_database:
        other, empty = new_database(), new_database()
        engine = create_engine(other)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE invoices (id integer PRIMARY KEY)"))
        for read_only in (False, True):
            with pytest.raises(LedgerError, match="is not a certa ledger: it holds tables invoices;"):
                Ledger.open(other, read_only=read_only)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == ["invoices"]
        engine.dispose()
        with Ledger.open(empty) as ledger:
            assert ledger.head()[0] == 0
