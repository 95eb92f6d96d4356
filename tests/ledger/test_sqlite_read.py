"""``certa list`` on a SQLite file reads through the standard library (``certa.ledger.sqlite_read``): the same rows,
order and refusals as the SQLAlchemy store, and not one byte of the database changed."""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.foundation.errors import LedgerError
from certa.ledger import Ledger
from certa.ledger.rows import SCHEMA_VERSION
from certa.ledger.sqlite_read import newest_runs

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("limit", [1, 2, 3, 50])
def test_the_same_rows_in_the_same_order_as_the_store(three_runs: Path, limit: int) -> None:
    with Ledger.open(three_runs, create=False) as ledger:
        expected = ledger.runs(limit=limit)
    assert newest_runs(three_runs, limit) == expected
    assert len(expected) == min(limit, 3) and any(row.status == "aborted" for row in expected) == (limit >= 2)


def test_listing_changes_no_byte_of_the_database(three_runs: Path) -> None:
    before = _digest(three_runs)
    result = CliRunner().invoke(main, ["list", "--ledger", str(three_runs)])
    assert result.exit_code == 0 and result.output.count("\n") == 3
    assert _digest(three_runs) == before


@pytest.mark.parametrize("version", sorted(p.parent.name for p in GOLDEN.glob("*/ledger.db")))
def test_ledgers_of_every_release_list_as_the_store_lists_them(version: str, tmp_path: Path) -> None:
    copy = tmp_path / "golden.db"
    shutil.copyfile(GOLDEN / version / "ledger.db", copy)
    with Ledger.open(copy, create=False) as ledger:
        expected = ledger.runs(limit=50)
    assert expected and newest_runs(copy, 50) == expected


def test_an_empty_file_lists_nothing_and_stays_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = CliRunner().invoke(main, ["list", "--ledger", str(empty)])
    assert result.exit_code == 0 and result.output == "no runs recorded yet\n"
    assert empty.stat().st_size == 0


def test_a_missing_file_is_the_stores_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(LedgerError) as store:
        Ledger.open(missing, create=False)
    with pytest.raises(LedgerError) as fast:
        newest_runs(missing, 5)
    assert str(fast.value) == str(store.value)
    assert not missing.exists()


@pytest.mark.parametrize("content", [b"not a database at all\n", b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_no_ledger_is_one_line_and_exit_2(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "certa", "list", "--ledger", str(bad)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2 and done.stdout == ""
    assert re.fullmatch(rf"error: cannot read ledger {re.escape(str(bad))}: [^\n]+\n", done.stderr)
    assert bad.read_bytes() == content


def test_a_truncated_ledger_is_refused_not_half_listed(three_runs: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.db"
    with sqlite3.connect(three_runs) as conn:  # one file: fold the WAL into the database first
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cut.write_bytes(three_runs.read_bytes()[:6000])
    with pytest.raises(LedgerError, match="cannot read ledger"):
        newest_runs(cut, 50)


NEXT = int(SCHEMA_VERSION) + 1


@pytest.mark.parametrize(("statement", "message"), [
    (f"UPDATE ledger_meta SET value = '{NEXT}' WHERE key = 'schema_version'", f"(schema {NEXT}); upgrade certa to read it"),
    (f"UPDATE alembic_version SET version_num = '{NEXT:04d}'",
     f"(schema revision {NEXT:04d}, unknown to this one); upgrade certa"),
    ("UPDATE ledger_meta SET value = 'x' WHERE key = 'schema_version'", "schema version x is not supported"),
])
def test_a_schema_this_certa_cannot_read_is_refused_as_the_store_refuses_it(three_runs: Path, statement: str,
                                                                             message: str) -> None:
    with sqlite3.connect(three_runs) as conn:
        conn.execute(statement)
    with pytest.raises(LedgerError) as store:
        Ledger.open(three_runs, create=False)
    with pytest.raises(LedgerError) as fast:
        newest_runs(three_runs, 5)
    assert str(fast.value) == str(store.value) and message in str(fast.value)
