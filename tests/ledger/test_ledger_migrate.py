"""Schema migrations of the ledger (Alembic, ``certa migrate``).

An older ledger is upgraded in place with every hashed byte unchanged (so checkpoints signed before still
verify), in one transaction; until then it can be read but not written; a ledger of a newer certa is
refused. Every test runs on SQLite, and on PostgreSQL when CERTA_TEST_POSTGRES_URL is set (a fresh
database per ledger, dropped afterwards).
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, OperationalError

from certa.cli import main
from certa.engine import LedgerError, run
from certa.engine.core.spec import load_plan
from certa.engine.services.audit import verify
from certa.engine.services.registrations import register
from certa.ledger import Ledger, merkle
from certa.ledger.schema import HEAD_REVISION, REVISIONS, SCHEMA_VERSION, blobs, entries, ledger_meta, merkle_nodes, runs
from certa.ledger.schema import read_schema_state
from certa.ledger.store import SchemaState

from tests.conftest import fresh_postgres_databases, interval_spec

ROOT = Path(__file__).resolve().parents[2]
NEW_INDEXES = {"ix_entries_run_id_kind", "ix_runs_name", "ix_runs_recorded_at"}  # schema 2's
HEAD_INDEXES = {"ix_entries_run_id_kind_but_decisions", "ix_runs_name", "ix_runs_recorded_at", "ix_runs_first_seq",
                "ix_entries_batch_decisions"}  # the newest schema's (6 replaced ix_entries_run_id_kind)
SCHEMA_4_INDEXES = {"ix_runs_first_seq", "ix_entries_batch_decisions"}
POSTGRESQL_4_INDEXES = {"ix_entries_run_id_kind_seq"}  # on PostgreSQL only

NewDatabase = Callable[[], str]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NewDatabase]:
    """A factory of fresh, empty databases (URLs): SQLite files, or PostgreSQL databases dropped afterwards."""
    if request.param == "sqlite":
        numbers = itertools.count()
        yield lambda: f"sqlite:///{tmp_path / f'ledger-{next(numbers)}.db'}"
        return
    with fresh_postgres_databases("migration tests") as new_database:
        yield new_database


def _sql(url: str, *statements: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


def _alembic(url: str, direction: str, revision: str) -> None:
    """Alembic's ``upgrade`` or ``downgrade`` (``direction``) to ``revision`` on the database at ``url``."""
    from alembic import command

    from certa.ledger.migrate import alembic_config

    engine = create_engine(url)
    with engine.begin() as conn:
        getattr(command, direction)(alembic_config(conn), revision)
    engine.dispose()


def _downgrade(url: str, revision: str) -> None:
    """Turn a ledger of this certa into one at ``revision`` by the downgrades of the revisions after it."""
    _alembic(url, "downgrade", revision)


def _make_schema_4(url: str) -> None:
    """Turn a ledger of this certa into one at schema 4 (revision 0004): revision 0006's downgrade (merkle_nodes keyed
    by (level, position) again), 0005's (on SQLite a copy of ``entries`` declared with its unique constraints)."""
    _downgrade(url, "0004")


def _drop_schema_4_indexes(url: str) -> None:
    _make_schema_4(url)
    _sql(url, *(f"DROP INDEX IF EXISTS {name}" for name in sorted(SCHEMA_4_INDEXES | POSTGRESQL_4_INDEXES)))


def _make_schema_1(url: str) -> None:
    """Turn a ledger of this certa into one as certa 0.1.0/0.2.0 left it: no new indexes, no merkle_nodes, no
    alembic_version, schema_version '1' (``test_revision_0001_is_the_schema_of_certa_0_2_0`` pins that this is
    exact)."""
    _drop_schema_4_indexes(url)
    _sql(url, *(f"DROP INDEX {name}" for name in sorted(NEW_INDEXES)), "DROP TABLE merkle_nodes",
         "DROP TABLE alembic_version", "UPDATE ledger_meta SET value = '1' WHERE key = 'schema_version'")


def _make_schema_2(url: str) -> None:
    """Turn a ledger of this certa into one as certa 0.3.0 left it: no merkle_nodes, schema 2, revision 0002."""
    _drop_schema_4_indexes(url)
    _sql(url, "DROP TABLE merkle_nodes", "UPDATE alembic_version SET version_num = '0002'",
         "UPDATE ledger_meta SET value = '2' WHERE key = 'schema_version'")


def _make_schema_3(url: str) -> None:
    """Turn a ledger of this certa into one as certa 0.4.0 to 0.7.0 left it: schema 3, revision 0003."""
    _drop_schema_4_indexes(url)
    _sql(url, "UPDATE alembic_version SET version_num = '0003'",
         "UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'")


def _nodes(url: str) -> list[tuple]:
    """Every merkle_nodes row, in key order."""
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = [tuple(row) for row in conn.execute(select(merkle_nodes).order_by(*merkle_nodes.primary_key))]
    engine.dispose()
    return rows


def _record_two_runs_and_a_review(url: str, spec: Path) -> None:
    with Ledger.open(url) as ledger:
        first = run(spec, ledger=ledger).run_id
        run(spec, ledger=ledger)
        ledger.record_note(first, "review", {"reviewer": "alice", "decision": "approved", "note": ""})


@pytest.fixture
def old_ledger(database: NewDatabase, small_spec: Path) -> str:
    """The URL of a schema-1 ledger holding two runs and a review."""
    url = database()
    _record_two_runs_and_a_review(url, small_spec)
    _make_schema_1(url)
    return url


def _rows(url: str) -> dict[str, list[tuple]]:
    """Every row of entries, blobs and runs (all columns, in key order) and the chain head row."""
    engine = create_engine(url)
    with engine.connect() as conn:
        snapshot = {table.name: [tuple(row) for row in conn.execute(select(table).order_by(*table.primary_key))]
                    for table in (entries, blobs, runs)}
        snapshot["head"] = list(conn.execute(select(ledger_meta).where(ledger_meta.c.key == "head")))
    engine.dispose()
    return snapshot


def _schema(url: str) -> dict[str, dict]:
    """Tables with their columns, primary keys, indexes, unique and check constraints."""
    engine = create_engine(url)
    with engine.connect() as conn:
        found = inspect(conn)
        schema = {table: {
            "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(table)],
            "primary_key": found.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                              for i in found.get_indexes(table)),
            "unique": sorted((u["name"], tuple(u["column_names"])) for u in found.get_unique_constraints(table)),
            "checks": sorted(c["name"] for c in found.get_check_constraints(table)),
        } for table in found.get_table_names()}
    engine.dispose()
    return schema


def _state(url: str) -> SchemaState:
    engine = create_engine(url)
    with engine.connect() as conn:
        state = read_schema_state(conn)
    engine.dispose()
    return state


def _apply_revisions(url: str, revision: str) -> None:
    """Run the Alembic revisions up to ``revision`` on the (empty) database at ``url``."""
    _alembic(url, "upgrade", revision)


def _location(url: str) -> str:
    with Ledger.open(url) as ledger:
        return ledger.location


def invoke(*args: str, ledger: str):
    return CliRunner().invoke(main, [*args, "--ledger", ledger], catch_exceptions=False)


def test_migrate_keeps_every_row_and_a_checkpoint_signed_before(old_ledger: str, small_spec: Path,
                                                               tmp_path: Path) -> None:
    before = _rows(old_ledger)
    assert _state(old_ledger) == SchemaState("1", None)
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    checkpoint = str(tmp_path / "before.checkpoint")
    assert invoke("checkpoint", "--key", str(keys / "certa.key"), "--out", checkpoint, ledger=old_ledger).exit_code == 0
    check = ("verify", "--checkpoint", checkpoint, "--public-key", str(keys / "certa.pub"))
    assert invoke(*check, ledger=old_ledger).exit_code == 0

    result = invoke("migrate", "--json", ledger=old_ledger)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "ok": True, "ledger": _location(old_ledger), "changed": True, "stamped": True,
        "from_schema": "1", "from_revision": "0001", "to_schema": SCHEMA_VERSION, "to_revision": HEAD_REVISION}

    assert _rows(old_ledger) == before
    assert _state(old_ledger) == SchemaState(SCHEMA_VERSION, HEAD_REVISION)
    indexes = {i[0] for table in ("entries", "runs") for i in _schema(old_ledger)[table]["indexes"]}
    assert HEAD_INDEXES <= indexes
    verified = invoke(*check, ledger=old_ledger)
    assert verified.exit_code == 0 and verified.stdout.startswith("intact: ")

    again = invoke("migrate", ledger=old_ledger)
    assert again.exit_code == 0
    assert f"already at the newest schema (version {SCHEMA_VERSION}, revision {HEAD_REVISION})" in again.stdout
    assert json.loads(invoke("migrate", "--json", ledger=old_ledger).stdout)["changed"] is False
    assert _rows(old_ledger) == before and _state(old_ledger) == SchemaState(SCHEMA_VERSION, HEAD_REVISION)

    with Ledger.open(old_ledger) as ledger:  # writable now
        run(small_spec, ledger=ledger)
        assert verify(ledger).intact and len(ledger.runs()) == 3


def test_an_old_schema_ledger_is_readable_but_writing_is_refused_and_changes_nothing(
        old_ledger: str, small_spec: Path, tmp_path: Path) -> None:
    before, schema = _rows(old_ledger), _schema(old_ledger)
    reads = (["list"], ["show", "latest"], ["head"], ["verify"], ["export", "latest", "-o", str(tmp_path / "c.json")])
    for command in reads:
        assert invoke(*command, ledger=old_ledger).exit_code == 0, command
    where = _location(old_ledger)
    message = (f"ledger {where} has schema version 1, older than this certa's {SCHEMA_VERSION}: run 'certa migrate "
               f"--ledger {where}' (it keeps every entry byte-identical)")
    with Ledger.open(old_ledger) as ledger:
        first = ledger.runs()[-1].run_id
        with pytest.raises(LedgerError, match=re.escape(message)):
            run(small_spec, ledger=ledger)
        with pytest.raises(LedgerError, match=re.escape(message)):
            ledger.record_note(first, "replay", {"outcome": "REPRODUCED"})
    refused = invoke("review", first, "--by", "bob", "--decision", "approved", ledger=old_ledger)
    assert refused.exit_code == 2 and message in refused.stderr
    assert _rows(old_ledger) == before and _schema(old_ledger) == schema
    assert _state(old_ledger) == SchemaState("1", None)


NEXT_SCHEMA = str(int(SCHEMA_VERSION) + 1)


@pytest.mark.parametrize(("statement", "message"), [
    (f"UPDATE ledger_meta SET value = '{NEXT_SCHEMA}' WHERE key = 'schema_version'",
     f"(schema {NEXT_SCHEMA}); upgrade certa to read it"),
    (f"UPDATE alembic_version SET version_num = '{int(NEXT_SCHEMA):04d}'",
     f"(schema revision {int(NEXT_SCHEMA):04d}, unknown to this one); upgrade certa"),
])
def test_a_ledger_of_a_newer_certa_is_refused_for_reading_and_writing(database: NewDatabase, small_spec: Path,
                                                                       statement: str, message: str) -> None:
    url = database()
    with Ledger.open(url) as ledger:
        run(small_spec, ledger=ledger)
        where = ledger.location
    _sql(url, statement)
    before, state = _rows(url), _state(url)
    with pytest.raises(LedgerError, match=re.escape(f"ledger {where} was written by a newer certa {message}")):
        Ledger.open(url)
    for command in (["list"], ["verify"], ["migrate"]):
        result = invoke(*command, ledger=url)
        assert result.exit_code == 2 and "was written by a newer certa" in result.stderr
    assert _rows(url) == before and _state(url) == state


def test_a_failure_in_the_middle_of_the_migration_leaves_the_ledger_unchanged(
        old_ledger: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from alembic.operations import Operations

    before, schema = _rows(old_ledger), _schema(old_ledger)
    real_create_index = Operations.create_index
    calls: list[str] = []

    def create_then_fail(self: Operations, name: str, *args: object, **kwargs: object) -> object:
        calls.append(name)
        if len(calls) == 2:  # after the stamp and the first new index
            raise OperationalError(f"CREATE INDEX {name}", {}, Exception("disk full (simulated)"))
        return real_create_index(self, name, *args, **kwargs)

    monkeypatch.setattr(Operations, "create_index", create_then_fail)
    result = invoke("migrate", ledger=old_ledger)
    assert result.exit_code == 2 and "failed, it is unchanged" in result.stderr
    assert len(calls) == 2
    assert _rows(old_ledger) == before and _schema(old_ledger) == schema
    assert _state(old_ledger) == SchemaState("1", None)  # not even the stamp stayed

    monkeypatch.undo()
    assert invoke("migrate", ledger=old_ledger).exit_code == 0
    assert _rows(old_ledger) == before and _state(old_ledger) == SchemaState(SCHEMA_VERSION, HEAD_REVISION)


def _writer_could_lock(url: str) -> bool:
    """Whether another writer could take the ledger's write lock right now (without waiting)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        conn = sqlite3.connect(parsed.database, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(select(ledger_meta).where(ledger_meta.c.key == "head").with_for_update(nowait=True))
        return True
    except OperationalError:
        return False
    finally:
        engine.dispose()


def test_the_migration_holds_the_write_lock_from_its_first_read(old_ledger: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import certa.ledger.migrate

    real_read = certa.ledger.migrate.read_schema_state
    could_lock: list[bool] = []

    def read_while_a_writer_tries(conn: object) -> SchemaState:
        could_lock.append(_writer_could_lock(old_ledger))
        return real_read(conn)

    monkeypatch.setattr(certa.ledger.migrate, "read_schema_state", read_while_a_writer_tries)
    assert invoke("migrate", ledger=old_ledger).exit_code == 0
    assert could_lock == [False, False]  # before the stamp, and after the upgrade
    assert _writer_could_lock(old_ledger)  # released at commit


def test_a_new_ledger_is_created_at_the_head_revision_as_the_migrations_build_it(database: NewDatabase) -> None:
    from certa.ledger.migrate import script_head

    assert HEAD_REVISION == REVISIONS[SCHEMA_VERSION] == script_head()
    created, migrated = database(), database()
    Ledger.open(created).close()
    _apply_revisions(migrated, "head")
    assert _state(created) == _state(migrated) == SchemaState(SCHEMA_VERSION, HEAD_REVISION)
    assert _schema(created) == _schema(migrated)
    assert HEAD_INDEXES <= {i[0] for table in ("entries", "runs")
                                              for i in _schema(created)[table]["indexes"]}
    result = invoke("migrate", ledger=created)
    assert result.exit_code == 0 and "already at the newest schema" in result.output


def test_revision_0001_is_the_schema_of_certa_0_2_0(database: NewDatabase, old_ledger: str) -> None:
    url = database()
    _apply_revisions(url, "0001")
    assert _state(url) == SchemaState("1", "0001")
    assert _rows(url) == {"entries": [], "blobs": [], "runs": [], "head": [("head", "0:" + "0" * 64)]}
    applied = _schema(url)
    del applied["alembic_version"]
    assert applied == _schema(old_ledger)


GOLDEN = sorted((ROOT / "tests" / "golden").glob("*/ledger.db"))


@pytest.mark.skipif(not GOLDEN, reason="no golden ledgers recorded (tests/golden/VERSION/ledger.db)")
# The oldest golden ledger (it migrates through every revision) in the unit tier; the others under ``slow``.
@pytest.mark.parametrize("golden", [pytest.param(g, marks=[] if g == GOLDEN[0] else [pytest.mark.slow])
                                    for g in GOLDEN], ids=lambda path: path.parent.name)
def test_a_golden_ledger_of_a_released_certa_migrates_byte_identically(golden: Path, tmp_path: Path) -> None:
    """A released ledger has exactly the schema of its revision (0001 for certa 0.1.0/0.2.0, unstamped; the
    newest for later releases) and migrates to the newest without changing a row."""
    manifest = json.loads((golden.parent / "MANIFEST.json").read_text())
    db = tmp_path / f"{golden.parent.name}.db"
    shutil.copyfile(golden, db)  # never open a golden ledger in place
    url = f"sqlite:///{db}"
    released = _state(url)
    revision = released.revision or "0001"  # certa <= 0.2.0 wrote no alembic_version: schema 1 is revision 0001
    reference = tmp_path / f"revision-{revision}.db"
    _apply_revisions(f"sqlite:///{reference}", revision)

    def ddl(path: Path) -> set[tuple]:
        """Each object's SQL, a table's name unquoted: SQLite quotes it in the statement when a table is renamed
        (revision 0005 copies ``entries`` and renames the copy), a ledger created at 5 has it bare."""
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE '%alembic%'")
            return {(kind, name, sql.replace(f'CREATE TABLE "{name}"', f"CREATE TABLE {name}", 1) if sql else sql)
                    for kind, name, sql in rows}

    assert ddl(db) == ddl(reference)  # the released schema is exactly its revision's
    before = _rows(url)
    with Ledger.open(url) as ledger:
        assert f"{ledger.head()[0]}:{ledger.head()[1]}" == manifest["head"]
        assert verify(ledger).intact
        done = ledger.migrate()
        assert (done.from_revision, done.to_revision, done.stamped) == (revision, HEAD_REVISION,
                                                                         released.revision is None)
        assert verify(ledger).intact
    assert _rows(url) == before and _state(url) == SchemaState(SCHEMA_VERSION, HEAD_REVISION)
    head = tmp_path / "head.db"
    _apply_revisions(f"sqlite:///{head}", "head")
    assert ddl(db) == ddl(head)  # and the migrated schema is exactly the newest (runs.verdict VARCHAR(16) since 7)
    entries_count = int(manifest["head"].split(":")[0])
    # one per complete perfect subtree of two or more leaves (schema 6 stores no leaves)
    assert len(_nodes(url)) == entries_count - entries_count.bit_count()


def test_alembic_is_imported_only_by_migrate(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from certa.cli import main\n"
        "from certa.ledger import Ledger\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
        f"Ledger.open({str(tmp_path / 'l.db')!r}).close()\n"
        "assert CliRunner().invoke(main, ['list', '--ledger', " f"{str(tmp_path / 'l.db')!r}]).exit_code == 0\n"
        "print(sorted(name for name in sys.modules if name.startswith(('alembic', 'ledger.migrat'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_revision_0003_backfills_the_merkle_nodes_the_writes_keep(database: NewDatabase, small_spec: Path,
                                                                  tmp_path: Path) -> None:
    """A schema 2 ledger (certa 0.3.0) migrated to 3 gets exactly the merkle_nodes rows that writing its entries
    at schema 3 gave; a checkpoint signed before the migration still verifies, and ``prove`` gives the same
    bundle from the old ledger (every entry hashed) and the migrated one (the nodes)."""
    url = database()
    with Ledger.open(url) as ledger:
        first = run(small_spec, ledger=ledger).run_id
        run(small_spec, ledger=ledger)
        ledger.record_note(first, "review", {"reviewer": "alice", "decision": "approved", "note": ""})
        n = ledger.head()[0]
    written = _nodes(url)
    assert len(written) == n - n.bit_count()  # one per complete perfect subtree of two or more leaves
    _make_schema_2(url)
    before = _rows(url)
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    checkpoint = str(tmp_path / "before.checkpoint")
    assert invoke("checkpoint", "--key", str(keys / "certa.key"), "--out", checkpoint, ledger=url).exit_code == 0
    proved = invoke("prove", first, "--checkpoint", checkpoint, "--json", ledger=url)
    assert proved.exit_code == 0, proved.output

    result = invoke("migrate", "--json", ledger=url)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) | {"ledger": None} == {
        "ok": True, "ledger": None, "changed": True, "stamped": False,
        "from_schema": "2", "from_revision": "0002", "to_schema": SCHEMA_VERSION, "to_revision": HEAD_REVISION}
    assert _rows(url) == before and _nodes(url) == written
    assert invoke("verify", "--checkpoint", checkpoint, "--public-key", str(keys / "certa.pub"),
                  ledger=url).exit_code == 0
    again = invoke("prove", first, "--checkpoint", checkpoint, "--json", ledger=url)
    assert again.exit_code == 0 and json.loads(again.stdout) == json.loads(proved.stdout)


def _table_digests(url: str) -> dict[str, str]:
    """SHA-256 of every row of entries, blobs, runs, merkle_nodes and ledger_meta (all columns, in key order; of
    merkle_nodes the nodes of two or more leaves, which every schema since 3 stores, with the columns they all have,
    level, position and hash, in (level, position) order)."""
    import hashlib

    engine = create_engine(url)
    with engine.connect() as conn:
        digests = {}
        nodes = select(merkle_nodes.c.level, merkle_nodes.c.position, merkle_nodes.c.hash).where(
            merkle_nodes.c.level > 0).order_by(merkle_nodes.c.level, merkle_nodes.c.position)
        for table in (entries, blobs, runs, merkle_nodes, ledger_meta):
            query = nodes if table is merkle_nodes else select(table).order_by(*table.primary_key)
            rows = conn.execute(query).fetchall()
            digests[table.name] = hashlib.sha256(repr([tuple(row) for row in rows]).encode()).hexdigest()
    engine.dispose()
    return digests


def _migrate_changing_no_row(url: str, from_schema: str, reference: str) -> None:
    """``certa migrate --json`` from ``from_schema`` to the newest: it says so, no row of any table changes but
    ledger_meta's schema version (the head stays), and the schema is then exactly that of ``reference``, a ledger
    created at the newest schema."""
    before, head = _table_digests(url), _rows(url)["head"]
    result = invoke("migrate", "--json", ledger=url)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) | {"ledger": None} == {
        "ok": True, "ledger": None, "changed": True, "stamped": False, "from_schema": from_schema,
        "from_revision": REVISIONS[from_schema], "to_schema": SCHEMA_VERSION, "to_revision": HEAD_REVISION}
    after = _table_digests(url)
    assert after.pop("ledger_meta") != before.pop("ledger_meta")  # its schema version; the head stays:
    assert after == before and _rows(url)["head"] == head
    assert _state(url) == SchemaState(SCHEMA_VERSION, HEAD_REVISION)
    assert _schema(url) == _schema(reference)


def test_revision_0004_adds_the_indexes_and_changes_no_row(database: NewDatabase, small_spec: Path) -> None:
    """A schema 3 ledger (certa 0.4.0 to 0.7.0) migrated to 4 gets the read indexes, and exactly the schema of a
    ledger created at 4; no row of any table changes but ledger_meta's schema version; it verifies intact, the
    batch decisions are found through the partial index, and it can be written."""
    url, reference = database(), database()
    Ledger.open(reference).close()
    _record_two_runs_and_a_review(url, small_spec)
    _make_schema_3(url)
    indexes = {i[0] for table in ("entries", "runs") for i in _schema(url)[table]["indexes"]}
    assert not indexes & (SCHEMA_4_INDEXES | POSTGRESQL_4_INDEXES)

    _migrate_changing_no_row(url, "3", reference)
    indexes = {i[0] for table in ("entries", "runs") for i in _schema(url)[table]["indexes"]}
    dialect = make_url(url).get_backend_name()
    # at the newest schema: PostgreSQL's index of a run's entries in seq order is that of every kind but decision
    assert SCHEMA_4_INDEXES <= indexes
    assert ("ix_entries_run_id_kind_seq_but_decisions" in indexes) == (dialect == "postgresql")
    with Ledger.open(url) as ledger:
        assert verify(ledger).intact
        run(small_spec, ledger=ledger)
        assert verify(ledger).intact and len(ledger.runs()) == 3


SCHEMA_5_DROPPED = {"ix_entries_run_id", "uq_entries_entry_hash", "uq_entries_prev_hash"}


def _entries_index_names(url: str) -> set[str]:
    schema = _schema(url)["entries"]
    return {index[0] for index in schema["indexes"]} | {unique[0] for unique in schema["unique"]}


def test_revision_0005_drops_the_unused_indexes_and_changes_no_row(database: NewDatabase, small_spec: Path,
                                                                   tmp_path: Path) -> None:
    """A schema 4 ledger migrated to 5 loses ``ix_entries_run_id`` and the unique constraints on ``prev_hash`` and
    ``entry_hash`` (on SQLite by copying ``entries``), and has exactly the schema of a ledger created at 5; no row of
    any table changes but ledger_meta's schema version (every value as stored, with its storage type), a
    checkpoint signed before still verifies, and it can be written."""
    url, reference = database(), database()
    Ledger.open(reference).close()
    _record_two_runs_and_a_review(url, small_spec)
    _make_schema_4(url)
    assert _state(url) == SchemaState("4", "0004") and SCHEMA_5_DROPPED <= _entries_index_names(url)
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    checkpoint = str(tmp_path / "before.checkpoint")
    assert invoke("checkpoint", "--key", str(keys / "certa.key"), "--out", checkpoint, ledger=url).exit_code == 0
    if make_url(url).get_backend_name() == "sqlite":
        with sqlite3.connect(make_url(url).database) as conn:
            stored = conn.execute("SELECT seq, typeof(run_id), typeof(payload), typeof(entry_hash) FROM entries "
                                  "ORDER BY seq").fetchall()

    _migrate_changing_no_row(url, "4", reference)
    assert not SCHEMA_5_DROPPED & _entries_index_names(url)
    if make_url(url).get_backend_name() == "sqlite":
        with sqlite3.connect(make_url(url).database) as conn:
            assert conn.execute("SELECT seq, typeof(run_id), typeof(payload), typeof(entry_hash) FROM entries "
                                "ORDER BY seq").fetchall() == stored
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert invoke("verify", "--checkpoint", checkpoint, "--public-key", str(keys / "certa.pub"),
                  ledger=url).exit_code == 0
    with Ledger.open(url) as ledger:
        run(small_spec, ledger=ledger)
        assert verify(ledger).intact and len(ledger.runs()) == 3


def test_revision_0006_keys_the_merkle_nodes_by_node_seq_and_changes_no_value(database: NewDatabase, small_spec: Path,
                                                                              tmp_path: Path) -> None:
    """A schema 5 ledger (certa 0.8.0) migrated to 6: every merkle_nodes row above the leaves gets its ``node_seq``,
    the new key (on SQLite the rowid), the leaves go, and the schema is exactly that of a ledger created at 6; no
    other value changes (each with its storage type); before it, the schema 5 ledger is read by (level, position):
    ``verify`` is intact and ``prove`` gives the same bundle as after; a checkpoint signed before still verifies;
    and the downgrade gives schema 5's rows back, leaves included."""
    url, reference = database(), database()
    Ledger.open(reference).close()
    _record_two_runs_and_a_review(url, small_spec)
    written = _nodes(url)
    _downgrade(url, "0005")
    assert _state(url) == SchemaState("5", "0005") and "node_seq" not in {c[0] for c in _schema(url)["merkle_nodes"]["columns"]}
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    checkpoint = str(tmp_path / "before.checkpoint")
    assert invoke("checkpoint", "--key", str(keys / "certa.key"), "--out", checkpoint, ledger=url).exit_code == 0
    with Ledger.open(url) as ledger:
        first = ledger.runs()[-1].run_id
        assert verify(ledger).intact
    proved = invoke("prove", first, "--checkpoint", checkpoint, "--json", ledger=url)
    assert proved.exit_code == 0, proved.output
    sqlite = make_url(url).get_backend_name() == "sqlite"
    if sqlite:
        with sqlite3.connect(make_url(url).database) as conn:
            stored = conn.execute("SELECT level, position, typeof(level), typeof(position), typeof(hash) FROM "
                                  "merkle_nodes WHERE level > 0 ORDER BY level, position").fetchall()
            leaves = conn.execute("SELECT position, hash FROM merkle_nodes WHERE level = 0 ORDER BY position").fetchall()
            hashes = conn.execute("SELECT entry_hash FROM entries ORDER BY seq").fetchall()
        assert leaves == [(seq, merkle.leaf_hash(bytes.fromhex(digest)).hex()) for seq, (digest,) in enumerate(hashes)]

    _migrate_changing_no_row(url, "5", reference)
    assert _nodes(url) == written and written  # the rows a ledger written at 6 has, node_seq included, no leaves
    assert [row[0] for row in written] == list(range(1, len(written) + 1))  # 1, 2, 3, ... in completion order
    assert all(number == merkle.node_seq(level, position) for number, level, position, _ in written)
    assert _schema(url)["merkle_nodes"]["primary_key"] == ["node_seq"]
    if sqlite:
        with sqlite3.connect(make_url(url).database) as conn:
            assert conn.execute("SELECT level, position, typeof(level), typeof(position), typeof(hash) FROM "
                                "merkle_nodes ORDER BY level, position").fetchall() == stored
            assert conn.execute("SELECT count(*) FROM merkle_nodes WHERE rowid <> node_seq").fetchone() == (0,)
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert invoke("verify", "--checkpoint", checkpoint, "--public-key", str(keys / "certa.pub"),
                  ledger=url).exit_code == 0
    again = invoke("prove", first, "--checkpoint", checkpoint, "--json", ledger=url)
    assert again.exit_code == 0 and json.loads(again.stdout) == json.loads(proved.stdout)
    with Ledger.open(url) as ledger:
        run(small_spec, ledger=ledger)
        assert verify(ledger).intact and len(ledger.runs()) == 3
    _downgrade(url, "0005")  # and back: schema 5's rows, the leaves computed again from the (now three runs') entries
    assert _state(url) == SchemaState("5", "0005") and _schema(url)["merkle_nodes"]["primary_key"] == ["level", "position"]
    with Ledger.open(url) as ledger:
        assert verify(ledger).intact


def _verdict_type(url: str) -> str:
    return dict((name, kind) for name, kind, _ in _schema(url)["runs"]["columns"])["verdict"]


def _kinds_check(url: str) -> str:
    """The text of ``entries``' check ``ck_entries_kind``, spaces removed."""
    engine = create_engine(url)
    with engine.connect() as conn:
        found = {c["name"]: c["sqltext"] for c in inspect(conn).get_check_constraints("entries")}
    engine.dispose()
    return re.sub(r"\s|\(|\)|::[a-z ]+|ARRAY|\[|\]|=ANY", "", str(found["ck_entries_kind"]))


def test_revision_0007_widens_the_verdict_so_that_an_inconclusive_run_is_recorded(
        database: NewDatabase, small_spec: Path, tmp_path: Path) -> None:
    """A schema 6 ledger (certa 0.9.0) migrated to 7: ``runs.verdict`` is VARCHAR(16) instead of 8 (on SQLite by
    copying ``runs``), the entry kind ``registration`` is admitted (on SQLite the check rewritten in place, no row
    copied) and indexed, and the schema is exactly that of a ledger created at 7; no row of any table changes but
    ledger_meta's schema version (on SQLite each value with its storage type and rowid); a checkpoint signed before
    still verifies; a run of verdict INCONCLUSIVE, which PostgreSQL refuses at 6, is recorded and verifies; the
    downgrade gives schema 6's column back, which PostgreSQL refuses while a run is INCONCLUSIVE; a registration
    is recorded and verifies, and the downgrade is then refused, the ledger left at 7."""
    url, reference = database(), database()
    Ledger.open(reference).close()
    _record_two_runs_and_a_review(url, small_spec)
    _downgrade(url, "0006")
    assert _state(url) == SchemaState("6", "0006") and _verdict_type(url) == "VARCHAR(8)"
    schema_6, rows_6, kinds_6 = _schema(url), _rows(url), _kinds_check(url)
    assert "registration" not in kinds_6 and "ix_entries_about_no_run" not in str(schema_6["entries"])
    sqlite = make_url(url).get_backend_name() == "sqlite"
    if not sqlite:  # what schema 7 is for: SQLite never enforces a declared length
        with pytest.raises(DataError, match=re.escape("value too long for type character varying(8)")):
            _sql(url, "UPDATE runs SET verdict = 'INCONCLUSIVE'")
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    checkpoint = str(tmp_path / "before.checkpoint")
    assert invoke("checkpoint", "--key", str(keys / "certa.key"), "--out", checkpoint, ledger=url).exit_code == 0
    stored = "SELECT rowid, run_id, typeof(verdict), typeof(first_seq), typeof(certificate_sha256) FROM runs"
    if sqlite:
        with closing(sqlite3.connect(make_url(url).database)) as conn:
            before = conn.execute(f"{stored} ORDER BY rowid").fetchall()

    _migrate_changing_no_row(url, "6", reference)
    assert _verdict_type(url) == "VARCHAR(16)"
    assert _kinds_check(url) == _kinds_check(reference) and "'review','registration'" in _kinds_check(url)
    if sqlite:
        with closing(sqlite3.connect(make_url(url).database)) as conn:
            assert conn.execute(f"{stored} ORDER BY rowid").fetchall() == before and len(before) == 2
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert invoke("verify", "--checkpoint", checkpoint, "--public-key", str(keys / "certa.pub"),
                  ledger=url).exit_code == 0
    _downgrade(url, "0006")
    assert _schema(url) == schema_6 and _rows(url) == rows_6 and _state(url) == SchemaState("6", "0006")
    assert _kinds_check(url) == kinds_6
    _alembic(url, "upgrade", "head")

    with Ledger.open(url) as ledger:
        inconclusive = run(interval_spec(small_spec, "1.02"), ledger=ledger).run_id
        assert {row.run_id: row.verdict for row in ledger.runs()}[inconclusive] == "INCONCLUSIVE"
        assert verify(ledger).intact
    assert json.loads(invoke("list", "--json", ledger=url).stdout)[0]["verdict"] == "INCONCLUSIVE"
    recorded = _rows(url)
    if sqlite:
        _downgrade(url, "0006")  # SQLite keeps the value in the narrower column
        assert _verdict_type(url) == "VARCHAR(8)" and _rows(url) == recorded
    else:
        with pytest.raises(DataError, match=re.escape("value too long for type character varying(8)")):
            _downgrade(url, "0006")
        assert _state(url) == SchemaState(SCHEMA_VERSION, HEAD_REVISION) and _rows(url) == recorded
    if sqlite:
        _alembic(url, "upgrade", "head")
    with Ledger.open(url) as ledger:
        registered = register(ledger, load_plan(small_spec))
        assert [e.seq for e in ledger.registrations()] == [registered.seq] and verify(ledger).intact
    with pytest.raises(RuntimeError, match="1 registration or policy entry, which schema 6 cannot hold"):
        _downgrade(url, "0006")
    assert _state(url) == SchemaState(SCHEMA_VERSION, HEAD_REVISION) and "registration" in _kinds_check(url)


def test_vacuum_after_a_migration_gives_the_free_pages_back_and_changes_no_row(small_spec: Path,
                                                                               tmp_path: Path) -> None:
    """docs/ledger.md advises ``sqlite3 LEDGER VACUUM`` after migrating a big ledger from schema 4 (revision 0005
    copies ``entries`` and leaves the old table's pages free): it shrinks the file, every row and node keeps its
    key and value, ``verify`` holds and so does a checkpoint signed before the migration."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    with Ledger.open(url) as ledger:
        for _ in range(6):
            run(small_spec, ledger=ledger)
    _make_schema_4(url)
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    checkpoint = str(tmp_path / "before.checkpoint")
    assert invoke("checkpoint", "--key", str(keys / "certa.key"), "--out", checkpoint, ledger=url).exit_code == 0
    assert invoke("migrate", ledger=url).exit_code == 0
    before, nodes = _rows(url), _nodes(url)
    with closing(sqlite3.connect(path)) as conn:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    assert free > 0  # the entries table 0005 copied from

    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("VACUUM")
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert path.stat().st_size < size
    assert _rows(url) == before and _nodes(url) == nodes
    verified = invoke("verify", "--checkpoint", checkpoint, "--public-key", str(keys / "certa.pub"), ledger=url)
    assert verified.exit_code == 0 and verified.stdout.startswith("intact: "), verified.output
