"""``verify`` checks every column of every ledger table against the chain: editing any one of them, alone,
is reported, and the report names the table, the column and the row.

The cases are checked against the SQLAlchemy ``Table`` objects (``certa.ledger.schema``), so a column added
later without a mutation case here fails ``test_every_column_of_every_table_has_a_mutation_case``.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from certa.engine import ProfileAbort, run
from certa.engine.services.audit import verify
from certa.engine.foundation.errors import LedgerError, LedgerIntegrityError
from certa.ledger import Ledger
from certa.ledger.schema import HEAD_REVISION, REVISIONS, SCHEMA_VERSION, alembic_version, metadata

from tests.conftest import fresh_postgres_databases

TABLES = [*metadata.sorted_tables, alembic_version]


@dataclass(frozen=True)
class Recorded:
    """What the test ledger holds: a completed run, an aborted one, a blob, and the seq of one decision."""

    completed: str
    aborted: str
    blob: str
    decision_seq: int


@dataclass(frozen=True)
class Mutation:
    """``UPDATE table SET column = value WHERE key = row`` (``value`` computed from the row's current value);
    ``names`` is what a problem must mention to identify the row. A composite ``key`` (a tuple of columns)
    takes a tuple ``row``."""

    table: str
    column: str
    key: str | tuple[str, ...]
    row: Callable[[Recorded], Any]
    value: Callable[[Any], Any]
    names: Callable[[Recorded], str]

    @property
    def id(self) -> str:
        return f"{self.table}.{self.column}[{','.join(self.keys)}]"

    @property
    def keys(self) -> tuple[str, ...]:
        return self.key if isinstance(self.key, tuple) else (self.key,)

    def where(self, row: Any, placeholder: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
        """The WHERE clause selecting ``row`` and its parameters (``placeholder(name)``: ``:name`` or ``?``)."""
        values = row if isinstance(self.key, tuple) else (row,)
        return (" AND ".join(f"{key} = {placeholder(key)}" for key in self.keys), dict(zip(self.keys, values)))

    def moved(self, row: Any, value: Any) -> Any:
        """The key of ``row`` after its ``column`` was set to ``value``."""
        if not isinstance(self.key, tuple):
            return value if self.column == self.key else row
        return tuple(value if key == self.column else part for key, part in zip(self.key, row))


def _other(a: str, b: str) -> Callable[[Any], str]:
    return lambda current: b if current == a else a


def _runs(column: str, value: Callable[[Any], Any], *, aborted: bool = False) -> Mutation:
    row = (lambda r: r.aborted) if aborted else (lambda r: r.completed)
    return Mutation("runs", column, "run_id", row, value, row)


def _blob(column: str, value: Callable[[Any], Any]) -> Mutation:
    return Mutation("blobs", column, "sha256", lambda r: r.blob, value, lambda r: r.blob[:12])


def _flip_last_byte(content: bytes) -> bytes:
    return content[:-1] + bytes([content[-1] ^ 1])


def _entry(column: str, value: Callable[[Any], Any]) -> Mutation:
    return Mutation("entries", column, "seq", lambda r: r.decision_seq, value, lambda r: f"entry {r.decision_seq}")


def _node(column: str, value: Callable[[Any], Any]) -> Mutation:
    """Merkle node (level 1, position 0, node_seq 1): the hash of entries 1 and 2."""
    return Mutation("merkle_nodes", column, ("level", "position"), lambda _: (1, 0), value,
                    lambda _: "level 1, position 0")


FAKE_SHA = "ab" * 32
MUTATIONS = [
    _runs("run_id", lambda _: "f" * 32),
    _runs("name", lambda _: "renamed-by-hand"),
    _runs("status", _other("completed", "aborted")),
    _runs("status", _other("completed", "aborted"), aborted=True),
    _runs("verdict", _other("PASS", "FAIL")),
    _runs("verdict", lambda _: "PASS", aborted=True),
    _runs("profile", _other("dev", "release")),
    _runs("seed", lambda seed: str(int(seed) + 1)),
    _runs("knobs_hash", lambda _: FAKE_SHA),
    _runs("spec_sha256", lambda _: FAKE_SHA),
    _runs("certificate_sha256", lambda _: FAKE_SHA),
    _runs("certificate_sha256", lambda _: FAKE_SHA, aborted=True),
    _runs("recorded_at", lambda _: "2020-01-01T00:00:00.000000Z"),
    _runs("first_seq", lambda seq: seq + 1),
    _runs("last_seq", lambda seq: seq - 1),
    _runs("last_seq", lambda seq: seq - 1, aborted=True),
    _blob("sha256", lambda _: FAKE_SHA),
    _blob("size", lambda size: size + 1),
    _blob("content", _flip_last_byte),
    Mutation("ledger_meta", "key", "key", lambda _: "head", lambda _: "head_backup", lambda _: "head"),
    Mutation("ledger_meta", "value", "key", lambda _: "head", lambda head: f"1:{head.split(':')[1]}", lambda _: "head"),
    Mutation("ledger_meta", "value", "key", lambda _: "schema_version", lambda _: "1", lambda _: "schema_version"),
    Mutation("alembic_version", "version_num", "version_num", lambda _: HEAD_REVISION,
             lambda _: REVISIONS[str(int(SCHEMA_VERSION) - 1)], lambda _: "alembic_version"),
    _node("level", lambda _: 20),
    _node("position", lambda _: 10_000),
    _node("hash", lambda _: FAKE_SHA),
    _node("node_seq", lambda _: 10_000),  # beyond the entries' nodes (all others are taken): found by counting rows
    _node("node_seq", lambda _: 0),  # before them
    # entries are covered byte by byte in test_ledger.py; here only: every column, the entry is named
    _entry("seq", lambda seq: seq + 10_000),
    _entry("run_id", lambda _: "0" * 32),
    _entry("kind", lambda _: "review"),
    _entry("recorded_at", lambda _: "2020-01-01T00:00:00.000000Z"),
    _entry("payload", lambda _: '{"edited":true}'),
    _entry("payload_sha256", lambda _: FAKE_SHA),
    _entry("prev_hash", lambda _: FAKE_SHA),
    _entry("entry_hash", lambda _: FAKE_SHA),
]


def test_every_column_of_every_table_has_a_mutation_case() -> None:
    columns = {(table.name, column.name) for table in TABLES for column in table.columns}
    covered = {(m.table, m.column) for m in MUTATIONS}
    assert columns - covered == set(), "add a mutation case (and a verify check) for these columns"
    assert covered - columns == set()


@pytest.fixture(scope="module")
def recorded_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Recorded]:
    """A ledger with a completed dev-profile run and a ci-profile run aborted by a floor (60 windows)."""
    from tests.conftest import SMALL_SPEC, window_columns
    from certa.engine.core.tables import columns_to_csv_bytes

    folder = tmp_path_factory.mktemp("verify-columns")
    base, subj = window_columns(60, seed=3)
    (folder / "data").mkdir()
    (folder / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(base))
    (folder / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subj))
    completed_spec = folder / "spec.yaml"
    completed_spec.write_text(SMALL_SPEC, encoding="utf-8")
    aborted_spec = folder / "aborting.yaml"
    aborted_spec.write_text(SMALL_SPEC.replace("profile: dev", "profile: ci"), encoding="utf-8")
    db = folder / "pristine.db"
    with Ledger.open(db) as ledger:
        completed = run(completed_spec, ledger=ledger).run_id
        with pytest.raises(ProfileAbort) as info:
            run(aborted_spec, ledger=ledger)
        aborted = info.value.run_id
        decision_seq = next(ledger.entries(run_id=completed, kinds=["decision"])).seq
        blob = next(sha for sha, _ in ledger.blob_shas())
        report = verify(ledger)
        assert report.intact, report.problems
        assert ledger.run(aborted).status == "aborted"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # copies of the file alone are then complete
    return db, Recorded(completed, aborted, blob, decision_seq)


def _copy(db: Path) -> Path:
    target = db.with_name(f"copy-{uuid.uuid4().hex}.db")
    shutil.copy(db, target)
    return target


def _assert_named(report: Any, mutation: Mutation, recorded: Recorded, value: Any) -> None:
    assert not report.intact, f"{mutation.id}: verify found nothing"
    row_name = mutation.names(recorded)
    if mutation.table == "entries":
        assert any(row_name in p.where + p.message for p in report.problems), report.problems
        return
    column = f"{mutation.table}.{mutation.column}"
    # a schema version that disagrees with the Alembic revision is one problem naming both (either was edited)
    columns = {column} | ({"ledger_meta.value"} if column == "alembic_version.version_num" else set())
    named = [p for p in report.problems if p.column in columns and mutation.column in p.message]
    assert named, f"{mutation.id}: no problem names {column}: {report.problems}"
    assert any(row_name in p.where + p.message for p in named), f"{mutation.id}: no problem names {row_name}: {named}"
    if mutation.table == "runs":  # found (and expected) values
        assert any(str(value) in p.message for p in named), named


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_editing_one_column_alone_is_reported_naming_it(recorded_ledger: tuple[Path, Recorded],
                                                        mutation: Mutation) -> None:
    pristine, recorded = recorded_ledger
    db = _copy(pristine)
    where, params = mutation.where(mutation.row(recorded), lambda key: f":{key}")
    with sqlite3.connect(db) as conn:
        current = conn.execute(f"SELECT {mutation.column} FROM {mutation.table} WHERE {where}", params).fetchone()[0]
        value = mutation.value(current)
        assert value != current
        conn.execute(f"UPDATE {mutation.table} SET {mutation.column} = :new_value WHERE {where}",
                     {**params, "new_value": value})
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    db.unlink()
    _assert_named(report, mutation, recorded, value)


def _edit_and_verify(pristine: Path, *statements: tuple[str, tuple[Any, ...]]) -> Any:
    db = _copy(pristine)
    with sqlite3.connect(db) as conn:
        for statement, params in statements:
            conn.execute(statement, params)
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    db.unlink()
    assert not report.intact
    return report


def test_a_runs_row_deleted_or_added_is_reported(recorded_ledger: tuple[Path, Recorded]) -> None:
    pristine, recorded = recorded_ledger
    report = _edit_and_verify(pristine, ("DELETE FROM runs WHERE run_id = ?", (recorded.aborted,)))
    assert report.first_broken.message.startswith("run is in the chain but missing from the runs index")
    # a run id differing in its first digit (a run id starting with 'e' would collide with itself)
    report = _edit_and_verify(pristine, ("INSERT INTO runs SELECT CASE substr(run_id, 1, 1) WHEN 'e' THEN 'f' ELSE 'e' "
                                         "END || substr(run_id, 2), name, status, verdict, "
                                         "profile, seed, knobs_hash, spec_sha256, certificate_sha256, recorded_at, "
                                         "first_seq, last_seq FROM runs WHERE run_id = ?", (recorded.completed,)))
    assert "in the runs index but has no entries in the chain" in report.first_broken.message


def test_runs_problems_come_in_the_chains_order_whatever_the_tables_row_order(
        recorded_ledger: tuple[Path, Recorded]) -> None:
    """The runs rows stream in the table's order and are checked one by one; the problems still come run by run in
    chain order, as when every row was read first: the completed run's row moved to the table's end (deleted and
    inserted again), both runs' rows edited."""
    pristine, recorded = recorded_ledger
    columns = "run_id, name, status, verdict, profile, seed, knobs_hash, spec_sha256, certificate_sha256, " \
              "recorded_at, first_seq, last_seq"
    report = _edit_and_verify(pristine,
                              ("CREATE TEMP TABLE moved AS SELECT * FROM runs WHERE run_id = ?", (recorded.completed,)),
                              ("DELETE FROM runs WHERE run_id = ?", (recorded.completed,)),
                              (f"INSERT INTO runs ({columns}) SELECT {columns} FROM moved", ()),
                              ("UPDATE runs SET name = 'edited', seed = '0'", ()))
    assert [(p.run_id, p.column) for p in report.problems if (p.column or "").startswith("runs.")] == [
        (recorded.completed, "runs.name"), (recorded.completed, "runs.seed"),
        (recorded.aborted, "runs.name"), (recorded.aborted, "runs.seed")]


def test_an_unreferenced_or_deleted_blob_is_reported(recorded_ledger: tuple[Path, Recorded]) -> None:
    pristine, recorded = recorded_ledger
    extra = b"window_id,tokens\nw0,1\n"
    sha = hashlib.sha256(extra).hexdigest()
    report = _edit_and_verify(pristine, ("INSERT INTO blobs VALUES (?, ?, ?)", (sha, len(extra), extra)))
    assert [p.message for p in report.problems] == [
        f"blob {sha} (blobs.sha256) is stored but no input or captured entry names it (a blob was added)"]
    report = _edit_and_verify(pristine, ("DELETE FROM blobs WHERE sha256 = ?", (recorded.blob,)))
    assert "has no stored copy" in report.first_broken.message and recorded.blob in report.first_broken.message


def test_a_merkle_node_deleted_or_added_is_reported(recorded_ledger: tuple[Path, Recorded]) -> None:
    pristine, _ = recorded_ledger
    report = _edit_and_verify(pristine, ("DELETE FROM merkle_nodes WHERE level = 2 AND position = 1", ()))
    assert [(p.where, p.message, p.column) for p in report.problems] == [
        ("merkle node (level 2, position 1: entries 5..8)",
         ("merkle_nodes has no row (level 2, position 1) for this complete subtree (the row was deleted, or its level, "
          "position or node_seq edited)"), "merkle_nodes.position")]
    report = _edit_and_verify(pristine, ("INSERT INTO merkle_nodes VALUES (?, ?, ?, ?)", (100_000, 1, 50_000, FAKE_SHA)))
    assert len(report.problems) == 1 and report.first_broken.column == "merkle_nodes.position"
    assert report.first_broken.message.startswith("merkle_nodes has a row (level 1, position 50000, node_seq 100000) "
                                                  "that is no complete subtree of two or more of entries 1..")
    # a leaf, even with its right hash: schema 6 stores no leaves (a leaf is its entry's)
    with sqlite3.connect(pristine) as conn:
        third = conn.execute("SELECT entry_hash FROM entries WHERE seq = 3").fetchone()[0]
    leaf = hashlib.sha256(b"\x00" + bytes.fromhex(third)).hexdigest()
    report = _edit_and_verify(pristine, ("INSERT INTO merkle_nodes VALUES (?, ?, ?, ?)", (19, 0, 2, leaf)))
    assert [p.message for p in report.problems] == [
        "merkle_nodes has a row (level 0, position 2, node_seq 19) that is no complete subtree of two or more of "
        "entries 1..21 (a row was added, or its level, position or node_seq edited)"]
    # two rows' node_seq swapped: each is read where the other is expected
    report = _edit_and_verify(pristine, ("UPDATE merkle_nodes SET node_seq = -node_seq WHERE node_seq IN (1, 2)", ()),
                              ("UPDATE merkle_nodes SET node_seq = 3 + node_seq WHERE node_seq IN (-1, -2)", ()))
    assert {(p.where, p.column) for p in report.problems} == {
        ("merkle node (level 1, position 0: entries 1..2)", "merkle_nodes.node_seq"),
        ("merkle node (level 1, position 1: entries 3..4)", "merkle_nodes.node_seq")}
    report = _edit_and_verify(pristine, ("DROP TABLE merkle_nodes", ()))
    assert "no merkle_nodes table" in report.first_broken.message


def test_a_ledger_whose_merkle_nodes_lost_node_seq_is_reported(recorded_ledger: tuple[Path, Recorded]) -> None:
    """The table replaced by one of schema 5's layout (its nodes still there) while the ledger says the newest schema
    (6 or later): read as schema 5's, whose leaves it then lacks."""
    pristine, _ = recorded_ledger
    report = _edit_and_verify(pristine, ("CREATE TABLE old_nodes AS SELECT level, position, hash FROM merkle_nodes", ()),
                              ("DROP TABLE merkle_nodes", ()), ("ALTER TABLE old_nodes RENAME TO merkle_nodes", ()))
    assert (report.problems[0].message, report.problems[0].column) == (
        f"ledger_meta value of key 'schema_version' is '{SCHEMA_VERSION}' but merkle_nodes has no column node_seq "
        "(the table was replaced)", "merkle_nodes.node_seq")
    assert all(p.message.startswith(("merkle_nodes has no row (level 0, ", "... and ")) for p in report.problems[1:])
    assert len(report.problems) > 2


def test_ledger_meta_keys_and_the_alembic_revision_are_checked(recorded_ledger: tuple[Path, Recorded]) -> None:
    pristine, _ = recorded_ledger
    report = _edit_and_verify(pristine, ("INSERT INTO ledger_meta VALUES ('owner', 'mallory')", ()))
    assert [p.message for p in report.problems] == [
        "ledger_meta has an unknown key 'owner' (value 'mallory'); it holds only schema_version, head"]
    report = _edit_and_verify(pristine, ("DROP TABLE alembic_version", ()))
    assert "no alembic_version table" in report.first_broken.message
    report = _edit_and_verify(pristine, ("INSERT INTO alembic_version VALUES ('0001')", ()))
    assert "alembic_version holds 2 rows" in report.first_broken.message


# ------------------------------------------------------------------------------------------ storage types

STORAGE_TYPES = ("null", "integer", "real", "text", "blob")
STORED_AS = {  # SQL giving the cell's current value (``{c}``) in another SQLite storage type
    "null": "NULL",
    "integer": "length(CAST({c} AS BLOB)) + 900000",
    "real": "length(CAST({c} AS BLOB)) + 0.5",
    "text": "CASE typeof({c}) WHEN 'blob' THEN CAST({c} AS TEXT) ELSE CAST({c} AS TEXT) || 'x' END",
    "blob": "CAST(CAST({c} AS TEXT) AS BLOB)",
}
TYPE_CASES = [(m, kind) for m in MUTATIONS if m.table != "alembic_version" for kind in STORAGE_TYPES]
"""Every column of the ledger's own tables (the rows of ``MUTATIONS``, one per column and row) in every storage
type; ``alembic_version`` is Alembic's table, read by the schema check before ``verify``."""


@pytest.mark.parametrize(("mutation", "storage"), TYPE_CASES, ids=[f"{m.id}-{t}" for m, t in TYPE_CASES])
def test_a_cell_stored_as_another_type_is_reported_naming_its_row(recorded_ledger: tuple[Path, Recorded],
                                                                   mutation: Mutation, storage: str) -> None:
    """SQLite stores any type in any column (type affinity converts only what it can losslessly, NOT NULL and
    CHECK constraints refuse some); ``verify`` reports every cell whose type is not the one certa writes as
    tampering of its row, and never crashes."""
    pristine, recorded = recorded_ledger
    db = _copy(pristine)
    where, params = mutation.where(mutation.row(recorded), lambda key: f":{key}")
    try:
        with sqlite3.connect(db) as conn:
            before = conn.execute(f"SELECT typeof({mutation.column}) FROM {mutation.table} WHERE {where}",
                                  params).fetchone()[0]
            if before == storage:
                pytest.skip(f"{mutation.id} is stored as {storage} already (value edits: the test above)")
            # the row is found again by its other columns (merkle_nodes is WITHOUT ROWID since schema 6)
            others = [c.name for c in metadata.tables[mutation.table].columns if c.name != mutation.column]
            same = " AND ".join(f"{name} IS :{name}" for name in others)
            values = dict(zip(others, conn.execute(f"SELECT {', '.join(others)} FROM {mutation.table} WHERE {where}",
                                                   params).fetchone()))
            try:
                conn.execute(f"UPDATE {mutation.table} SET {mutation.column} = "
                             f"{STORED_AS[storage].format(c=mutation.column)} WHERE {same}", values)
            except sqlite3.IntegrityError as refused:  # NOT NULL, CHECK, primary key: the database refuses it
                pytest.skip(f"SQLite refuses {storage} in {mutation.id}: {refused}")
            after = conn.execute(f"SELECT typeof({mutation.column}) FROM {mutation.table} WHERE {same}",
                                 values).fetchone()[0]
        if after != storage:
            pytest.skip(f"SQLite's type affinity stores {storage} in {mutation.id} as {after}")
        try:
            with Ledger.open(db) as ledger:
                report = verify(ledger)
        except LedgerError as refused:  # opening reads schema_version first: a one-line refusal
            assert mutation.row(recorded) == "schema_version", refused
            if storage in ("integer", "real", "blob"):  # not text as certa writes it: tampering, exit 1
                assert isinstance(refused, LedgerIntegrityError) and "stored as" in str(refused), refused
            else:
                assert "schema version" in str(refused), refused
            return
    finally:
        db.unlink()
    assert not report.intact, f"{mutation.id} as {storage}: verify found nothing"
    row_name = mutation.names(recorded)
    assert any(row_name in p.where + p.message for p in report.problems), report.problems


def test_the_command_reports_a_blob_stored_as_text_naming_it(recorded_ledger: tuple[Path, Recorded]) -> None:
    """The reported case, through ``certa verify``: exit 1 through ``sys.exit``, the blob and column named."""
    from click.testing import CliRunner

    from certa.cli import main

    pristine, recorded = recorded_ledger
    db = _copy(pristine)
    try:
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE blobs SET content = X'00' || substr(content, 2) WHERE sha256 = ?", (recorded.blob,))
            assert conn.execute("SELECT typeof(content) FROM blobs WHERE sha256 = ?", (recorded.blob,)).fetchone() \
                == ("text",)
        result = CliRunner().invoke(main, ["verify", "--ledger", str(db)])
    finally:
        db.unlink()
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    assert f"blob {recorded.blob[:12]}" in result.output and "blobs.content is text" in result.output, result.output


# ------------------------------------------------------------------------------------------ PostgreSQL

PG_MUTATIONS = [m for m in MUTATIONS if m.table != "entries" and m.column not in ("content",)]


@pytest.fixture(scope="module")
def pg_recorded(recorded_ledger: tuple[Path, Recorded]):
    """The SQLite test ledger's rows copied into a fresh PostgreSQL database (one per module)."""
    from sqlalchemy import create_engine, insert, select

    pristine, recorded = recorded_ledger
    with fresh_postgres_databases("column checks") as new_database:
        url = new_database()
        Ledger.open(url).close()  # the schema, stamped
        source, target = create_engine(f"sqlite:///{pristine}"), create_engine(url)
        with source.connect() as src, target.begin() as dst:
            for table in (*metadata.sorted_tables,):
                rows = [dict(row._mapping) for row in src.execute(select(table))]
                dst.execute(table.delete())
                if rows:
                    dst.execute(insert(table), rows)
        source.dispose()
        with Ledger.open(url) as ledger:
            assert verify(ledger).intact
        yield target, recorded
        target.dispose()


@contextmanager
def edited_on_postgresql(engine: Any, mutation: Mutation, recorded: Recorded) -> Iterator[Any]:
    """Apply ``mutation`` to the module's shared PostgreSQL database, yield the value written, then undo it."""
    from sqlalchemy import text

    row = mutation.row(recorded)
    where, params = mutation.where(row, lambda key: f":{key}")
    with engine.begin() as conn:
        current = conn.execute(text(f"SELECT {mutation.column} FROM {mutation.table} WHERE {where}"),
                               params).scalar_one()
        value = mutation.value(current)
        conn.execute(text(f"UPDATE {mutation.table} SET {mutation.column} = :new_value WHERE {where}"),
                     {**params, "new_value": value})
    try:
        yield value
    finally:
        where, params = mutation.where(mutation.moved(row, value), lambda key: f":{key}")
        with engine.begin() as conn:
            conn.execute(text(f"UPDATE {mutation.table} SET {mutation.column} = :old_value WHERE {where}"),
                         {**params, "old_value": current})


@pytest.mark.parametrize("mutation", PG_MUTATIONS, ids=[m.id for m in PG_MUTATIONS])
def test_editing_one_column_alone_is_reported_on_postgresql(pg_recorded, mutation: Mutation) -> None:
    engine, recorded = pg_recorded
    with edited_on_postgresql(engine, mutation, recorded) as value:
        with Ledger.open(engine.url.render_as_string(hide_password=False)) as ledger:
            report = verify(ledger)
    _assert_named(report, mutation, recorded, value)


# ------------------------------------------------------------------------------------------ the fast entry hash

def test_verify_s_entry_hash_equals_the_chain_s_for_any_fields() -> None:
    """``verify`` recomputes entry hashes with a template for plain ASCII fields; it must agree with
    ``certa.ledger.chain.entry_hash`` (RFC 8785) on every input, plain or not."""
    from hypothesis import given
    from hypothesis import strategies as st

    from certa.ledger.chain import entry_hash
    from certa.ledger.store import EntryRow
    from certa.ledger.verify import _entry_hash

    text = st.one_of(st.text(max_size=12), st.text(alphabet="0123456789abcdef:TZ.-", max_size=64))

    @given(st.integers(-(2**60), 2**60), text, text, text, text, text)
    def check(seq: int, run_id: str, kind: str, recorded_at: str, payload_sha256: str, prev_hash: str) -> None:
        row = EntryRow(seq, run_id, kind, recorded_at, "{}", payload_sha256, prev_hash, "")
        assert _entry_hash(row) == entry_hash(seq=seq, run_id=run_id, kind=kind, recorded_at=recorded_at,
                                              payload_sha256=payload_sha256, prev_hash=prev_hash)

    check()
