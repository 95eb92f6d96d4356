"""``certa show`` on a SQLite file reads through the standard library (``certa.ledger.sqlite_reader``): the same
rows, entries, certificates, errors and report as through the SQLAlchemy store, and not one byte of the file
changed; what it cannot read is opened by the store."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.foundation.errors import LedgerError
from certa.engine.services.browse import show_run
from certa.ledger import Ledger
from certa.ledger.run_record import RUN_KINDS
from certa.ledger.sqlite_reader import SqliteReader, reading


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_read_of_a_run_is_the_stores(three_runs: Path) -> None:
    with Ledger.open(three_runs, create=False, read_only=True) as ledger, reading(str(three_runs)) as reader:
        assert isinstance(reader, SqliteReader) and reader.location == ledger.location
        rows = ledger.runs(limit=3)
        assert reader.runs(limit=3) == rows
        for row in rows:
            for given in (row.run_id, row.run_id[:6].upper(), f" {row.run_id[:8]} "):
                assert reader.resolve_run_id(given) == ledger.resolve_run_id(given) == row.run_id
            assert reader.run(row.run_id[:8]) == ledger.run(row.run_id[:8]) == row
            for kinds in ([kind] for kind in RUN_KINDS):
                assert list(reader.entries(run_id=row.run_id, kinds=kinds)) == \
                    list(ledger.entries(run_id=row.run_id, kinds=kinds))
            both = ["decision", "run", "certificate"]
            merged = list(reader.entries(run_id=row.run_id, kinds=both, after=row.first_seq + 1))
            assert merged == list(ledger.entries(run_id=row.run_id, kinds=both, after=row.first_seq + 1))
            assert [e.seq for e in merged] == sorted(e.seq for e in merged) and merged
            for text in ('"outcome":"', "pairing", "100%_/", "nowhere in any payload"):
                assert list(reader.entries(run_id=row.run_id, kinds=["decision"], containing=text)) == \
                    list(ledger.entries(run_id=row.run_id, kinds=["decision"], containing=text))
            if row.status == "completed":
                assert reader.certificate(row.run_id) == ledger.certificate(row.run_id)
            else:
                with pytest.raises(LedgerError) as light:
                    reader.certificate(row.run_id)
                with pytest.raises(LedgerError) as store:
                    ledger.certificate(row.run_id)
                assert str(light.value) == str(store.value) and "no certificate" in str(light.value)
            assert show_run(reader, row.run_id, ledger_name="L") == show_run(ledger, row.run_id, ledger_name="L")
        assert reader.policies("0" * 32) == ledger.policies("0" * 32) == []


@pytest.mark.parametrize("given", ["latest", "zzzz", "abc", "0000", "a" * 33])
def test_the_same_run_id_errors(three_runs: Path, given: str) -> None:
    with Ledger.open(three_runs, create=False, read_only=True) as ledger, reading(str(three_runs)) as reader:
        try:
            expected: str = ledger.resolve_run_id(given)
        except LedgerError as error:
            expected = str(error)
        try:
            found = reader.resolve_run_id(given)
        except LedgerError as error:
            found = str(error)
    assert found == expected


def test_showing_changes_no_byte_of_the_database(three_runs: Path) -> None:
    before = _digest(three_runs)
    for args in (["latest"], ["latest", "--json"], ["latest", "--explain"]):
        result = CliRunner().invoke(main, ["show", *args, "--ledger", str(three_runs)])
        assert result.exit_code == 0 and result.output
    assert _digest(three_runs) == before


def test_what_the_reader_cannot_read_is_opened_by_the_store(tmp_path: Path, three_runs: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(LedgerError, match="holds no tables"), reading(str(empty)):
        pass
    with pytest.raises(LedgerError, match="no ledger at"), reading(str(tmp_path / "missing.db")):
        pass
    older = tmp_path / "older.db"
    older.write_bytes(three_runs.read_bytes())
    with sqlite3.connect(older) as conn:
        conn.execute("UPDATE ledger_meta SET value = '6' WHERE key = 'schema_version'")
    with reading(str(older)) as ledger:
        assert isinstance(ledger, Ledger) and ledger.schema_version == "6"


def test_another_programs_database_is_refused_as_the_store_refuses_it(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    with pytest.raises(LedgerError) as store:
        Ledger.open(foreign, create=False, read_only=True)
    with pytest.raises(LedgerError) as light, reading(str(foreign)):
        pass
    assert str(light.value) == str(store.value)
