"""Index tables attacked as tables (issue 31, item 1): with SQL access and no key, a table recreated without its
primary key holds a forged duplicate row beside the real one. ``certa verify`` (full and incremental) reports the
lost key and the duplicated value by name; ``certa list`` never shows the forged row as a sound run.

Each case is counted in the sweep's summary (``tests/adversarial/conftest.py``)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.adversarial.conftest import World, check, invoke

pytestmark = pytest.mark.adversarial


def _without_primary_key(db: Path, table: str, forged: str) -> None:
    """Recreate ``table`` with the same columns and rows but no constraint, then run ``forged`` (SQL)."""
    conn = sqlite3.connect(db)
    try:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        names = ", ".join(columns)
        conn.executescript(f"""
            BEGIN;
            CREATE TABLE {table}_copy AS SELECT {names} FROM {table};
            DROP TABLE {table};
            ALTER TABLE {table}_copy RENAME TO {table};
            {forged};
            COMMIT;""")
    finally:
        conn.close()


def _forged_pass_row(db: Path) -> tuple[str, str]:
    """Beside the newest run's row, a twin with the other verdict (PASS for a FAIL run, FAIL for a PASS run), in a
    runs table recreated without its key; returns (run id, the forged verdict)."""
    conn = sqlite3.connect(db)
    try:
        run_id, verdict = conn.execute("SELECT run_id, verdict FROM runs ORDER BY first_seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    forged = "FAIL" if verdict == "PASS" else "PASS"
    columns = "run_id, name, status, verdict, profile, seed, knobs_hash, spec_sha256, certificate_sha256, " \
              "recorded_at, first_seq, last_seq"
    twin = columns.replace("verdict", f"'{forged}'")
    _without_primary_key(db, "runs", f"INSERT INTO runs ({columns}) SELECT {twin} FROM runs WHERE run_id = '{run_id}'")
    return run_id, forged


def test_runs_without_primary_key_and_a_forged_twin_row(world: World, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    run_id, forged = _forged_pass_row(db)
    result = invoke("verify", "--ledger", db)
    check("runs twin row: verify", result, allowed={1}, verify_command=True)
    assert "runs has lost its primary key on (run_id)" in result.stdout + result.stderr
    assert f"runs has 2 rows with run_id = '{run_id}'" in result.stdout + result.stderr
    as_json = json.loads(invoke("verify", "--ledger", db, "--json").stdout)
    assert as_json["ok"] is False and {"runs.run_id"} <= {p.get("column") for p in as_json["problems"]}

    incremental = invoke("verify", "--checkpoint", world.checkpoint, "--public-key", world.pub,
                         "--since-checkpoint", "--ledger", db)
    check("runs twin row: verify --since-checkpoint", incremental, allowed={1}, verify_command=True)
    assert f"runs has 2 rows with run_id = '{run_id}'" in incremental.stdout + incremental.stderr


@pytest.mark.parametrize(("table", "twin"), [
    ("ledger_meta", "INSERT INTO ledger_meta (key, value) SELECT key, value FROM ledger_meta WHERE key = 'head'"),
    ("blobs", "INSERT INTO blobs (sha256, size, content) SELECT sha256, size, content FROM blobs LIMIT 1"),
])
def test_other_tables_without_primary_key_and_a_twin_row(world: World, tmp_path: Path, table: str, twin: str) -> None:
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    _without_primary_key(db, table, twin)
    result = invoke("verify", "--ledger", db)
    check(f"{table} twin row: verify", result, allowed={1}, verify_command=True)
    out = result.stdout + result.stderr
    assert f"{table} has lost its primary key" in out and f"{table} has 2 rows with" in out


def test_a_table_without_its_key_but_no_duplicate_is_still_reported(world: World, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    _without_primary_key(db, "runs", "SELECT 1")
    result = invoke("verify", "--ledger", db)
    check("runs without key: verify", result, allowed={1}, verify_command=True)
    out = result.stdout + result.stderr
    assert "runs has lost its primary key on (run_id) (the database declares none)" in out
    assert "rows with run_id" not in out


def test_list_show_and_site_refuse_an_unkeyed_runs_index(world: World, tmp_path: Path) -> None:
    """Without its key the runs index may hold a forged twin (another verdict): no command shows a row of it as
    sound; each names the lost key and points to verify."""
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    run_id, _ = _forged_pass_row(db)
    for command in (["list"], ["show", run_id], ["show", "latest"], ["site", "-o", tmp_path / "site"]):
        result = invoke(*command, "--ledger", db)
        check(f"runs twin row: {command[0]}", result, allowed={1}, folders=(tmp_path,))
        assert "the runs index has lost its primary key on run_id" in result.stderr, result.stderr
        assert "PASS" not in result.stdout
    assert not (tmp_path / "site" / "index.html").exists()
