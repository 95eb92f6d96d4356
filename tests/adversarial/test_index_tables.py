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


def _pass_runs(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [row[0] for row in conn.execute("SELECT run_id FROM runs WHERE verdict = 'PASS' ORDER BY first_seq")]
    finally:
        conn.close()


def test_an_incremental_approval_check_does_not_trust_the_runs_index(world: World, tmp_path: Path) -> None:
    """Relabelling an unapproved PASS run FAIL in the runs index, before the checkpoint, turned NOT APPROVED into
    exit 0: an incremental verification checks no runs row before its checkpoint. The verdict now comes from the
    run's certificate entry, proven included in the checkpoint's signed root."""
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    passed = _pass_runs(db)
    assert passed, "the world needs a PASS run"
    args = ("verify", "--checkpoint", world.checkpoint, "--public-key", world.pub, "--since-checkpoint",
            "--require-approval", world.pub, "--ledger", db)
    honest = invoke(*args)
    assert honest.exit_code == 1 and f"NOT APPROVED: run {passed[0]}" in honest.stdout
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET verdict = 'FAIL' WHERE verdict = 'PASS'")
    conn.close()
    result = invoke(*args)
    assert result.exit_code == 1 and (result.exception is None or isinstance(result.exception, SystemExit))
    assert f"NOT APPROVED: run {passed[0]}" in result.stdout, result.stdout
    assert "approvals read from the chain's certificate and review entries, not the runs index" in result.stdout
    payload = json.loads(invoke(*args, "--json").stdout)
    assert payload["approval"]["approved"] is False and "proven included" in payload["approval"]["read_from"]


def test_an_edited_certificate_before_the_checkpoint_is_not_proven(world: World, tmp_path: Path) -> None:
    """The certificate entry of a PASS run rewritten to FAIL, its digests and entry hash recomputed in its row (the
    chain columns stay consistent; merkle_nodes is left alone): the incremental check of the chain passes over it,
    but the approval check reads that entry, and it is not proven by the signed root."""
    from certa.ledger.chain import entry_hash

    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    run_id = _pass_runs(db)[0]
    conn = sqlite3.connect(db)
    with conn:
        seq, rid, kind, at, payload, prev = conn.execute(
            "SELECT seq, run_id, kind, recorded_at, payload, prev_hash FROM entries WHERE kind = 'certificate' AND "
            "run_id = ?", (run_id,)).fetchone()
        forged = payload.replace('"verdict":"PASS"', '"verdict":"FAIL"')
        assert forged != payload
        import hashlib
        digest = hashlib.sha256(forged.encode()).hexdigest()
        new_hash = entry_hash(seq=seq, run_id=rid, kind=kind, recorded_at=at, payload_sha256=digest, prev_hash=prev)
        conn.execute("UPDATE entries SET payload = ?, payload_sha256 = ?, entry_hash = ? WHERE seq = ?",
                     (forged, digest, new_hash, seq))
        conn.execute("UPDATE entries SET prev_hash = ? WHERE seq = ?", (new_hash, seq + 1))
    conn.close()
    result = invoke("verify", "--checkpoint", world.checkpoint, "--public-key", world.pub, "--since-checkpoint",
                    "--require-approval", world.pub, "--ledger", db)
    check("certificate rewritten before the checkpoint: verify --since-checkpoint --require-approval", result,
          allowed={1}, verify_command=True)
    assert f"NOT APPROVED: run {run_id} (?)" in result.stdout and "TAMPERED" in result.stdout + result.stderr
    assert f"run {run_id}: not proven by the checkpoint: entry " in result.stdout + result.stderr


def _set_meta(db: Path, key: str, value: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM ledger_meta WHERE key = ?", (key,))
        conn.execute("INSERT INTO ledger_meta (key, value) VALUES (?, ?)", (key, value))
    conn.close()


@pytest.mark.parametrize(("case", "record", "said"), [
    ("forged hash", lambda seq, digest: {"seq": seq, "entry_hash": "0" * 64, "verified_at": "2026-01-01T00:00:00Z"},
     "but that entry's hash is"),
    ("dated 2099", lambda seq, digest: {"seq": seq, "entry_hash": digest, "verified_at": "2099-01-01T00:00:00Z"},
     "in the future (forged)"),
])
def test_a_forged_verification_record_is_reported_and_vouches_for_nothing(world: World, tmp_path: Path, case: str,
                                                                          record, said: str) -> None:
    from certa.engine.foundation.canonical import canonical_bytes

    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    conn = sqlite3.connect(db)
    seq, digest = conn.execute("SELECT seq, entry_hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    conn.close()
    _set_meta(db, "verified_full", canonical_bytes(record(seq, digest)).decode())
    result = invoke("verify", "--ledger", db)
    check(f"verification record {case}: verify", result, allowed={1}, verify_command=True)
    assert said in result.stdout + result.stderr
    signed = invoke("checkpoint", "--key", world.key, "--out", tmp_path / "cp", "--ledger", db)
    assert signed.exit_code == 0, signed.output
    assert "last full verification: the record vouches for nothing: " in signed.output and said in signed.output
    assert "is the entry it verified" not in signed.output


def test_a_consistently_rewritten_chain_is_not_the_head_a_record_verified(world: World, tmp_path: Path) -> None:
    """After a genuine verify --record, the head entry rewritten with its hash recomputed (the record left alone):
    the record names the old hash, so certa checkpoint never says the head is the entry it verified."""
    from certa.ledger.chain import entry_hash

    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    assert invoke("verify", "--record", "--ledger", db).exit_code == 0
    honest = invoke("checkpoint", "--key", world.key, "--out", tmp_path / "cp1", "--ledger", db)
    assert "is the entry it verified" in honest.output, honest.output
    conn = sqlite3.connect(db)
    with conn:
        seq, rid, kind, at, payload_sha, prev = conn.execute(
            "SELECT seq, run_id, kind, recorded_at, payload_sha256, prev_hash FROM entries ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        moved = at.replace("20", "19", 1)
        digest = entry_hash(seq=seq, run_id=rid, kind=kind, recorded_at=moved, payload_sha256=payload_sha, prev_hash=prev)
        conn.execute("UPDATE entries SET recorded_at = ?, entry_hash = ? WHERE seq = ?", (moved, digest, seq))
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head'", (f"{seq}:{digest}",))
    conn.close()
    rewritten = invoke("checkpoint", "--key", world.key, "--out", tmp_path / "cp2", "--ledger", db)
    assert "is the entry it verified" not in rewritten.output
    assert "the record vouches for nothing" in rewritten.output and "the chain was rewritten since" in rewritten.output


@pytest.mark.parametrize(("table", "column", "where"), [
    ("entries", "payload", "seq = 3"), ("entries", "run_id", "seq = 2"), ("runs", "name", "1 = 1"),
    ("ledger_meta", "value", "key = 'head'"),
])
def test_a_text_cell_that_is_not_utf8_is_named_by_verify_and_one_line_elsewhere(world: World, tmp_path: Path,
                                                                                table: str, column: str,
                                                                                where: str) -> None:
    """SQLite stores any bytes as TEXT: a cell edited to invalid UTF-8 made verify and site crash (exit 1 with a
    traceback). verify names the cell; the other commands say in one line that a text cell was edited."""
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(f"UPDATE {table} SET {column} = CAST(x'61ff62' AS TEXT) WHERE {where}")
    conn.close()
    result = invoke("verify", "--ledger", db)
    check(f"{table}.{column} not UTF-8: verify", result, allowed={1}, verify_command=True)
    assert "text that is not UTF-8" in result.stdout + result.stderr or "b'a\\xffb'" in result.stdout + result.stderr
    for command in (["site", "-o", tmp_path / "site"], ["show", "latest"], ["list"]):
        other = invoke(*command, "--ledger", db)
        check(f"{table}.{column} not UTF-8: {command[0]}", other, allowed={0, 1, 2}, folders=(tmp_path,))


def test_an_extra_merkle_node_beyond_the_head_is_found_incrementally(world: World, tmp_path: Path) -> None:
    """A merkle_nodes row for a subtree beyond the head (an added row): a full verify reported it, an incremental
    one did not read it."""
    db = tmp_path / "ledger.db"
    shutil.copy(world.ledger, db)
    conn = sqlite3.connect(db)
    with conn:
        seq = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
        conn.execute("INSERT INTO merkle_nodes (node_seq, level, position, hash) VALUES (?, 1, ?, ?)",
                     (seq + 40, (seq + 20) // 2, "ab" * 32))
    conn.close()
    for args in ((), ("--checkpoint", world.checkpoint, "--public-key", world.pub, "--since-checkpoint")):
        result = invoke("verify", *args, "--ledger", db)
        check(f"merkle node beyond the head: verify {' '.join(map(str, args))[:20]}", result, allowed={1},
              verify_command=True)
        assert "merkle_nodes" in result.stdout + result.stderr
