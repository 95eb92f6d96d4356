"""Incremental verification (``certa verify --checkpoint FILE --public-key PUB --since-checkpoint``,
``certa.ledger.verify.verify_since``) and the verification records it and a full ``verify`` leave in ``ledger_meta``
(``certa.ledger.verify_record``): tampering after the checkpoint is found by the incremental check, tampering before
it by a full verify and, where it touches the checkpointed entries' hashes, by the incremental root check; a
wrong key or signature is refused."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.foundation.signing import generate_key_pair, load_private_key
from certa.engine.services.audit import verify
from certa.engine.services.checkpoints import sign_head
from certa.ledger import Ledger
from certa.ledger.checkpoint import read_checkpoint_unverified
from certa.ledger.verify_record import VERIFIED_FULL, VERIFIED_INCREMENTAL, read_verifications

from tests.conftest import read_only_folder, rebuild_merkle_nodes, rechain, small_spec_folder


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A ledger of two runs, a checkpoint of it signed by ``certa.key``, then a third run; another key pair."""
    folder = tmp_path_factory.mktemp("incremental")
    db = folder / "ledger.db"
    keys = {}
    for name in ("certa", "other"):
        private_pem, public_pem = generate_key_pair()
        (folder / f"{name}.key").write_bytes(private_pem)
        (folder / f"{name}.pub").write_bytes(public_pem)
        keys[name] = load_private_key(private_pem)
    with Ledger.open(db) as ledger:
        for seed in (8, 7):
            run(small_spec_folder(folder / f"spec{seed}", seed=seed), ledger=ledger)
        sign_head(ledger, [keys["certa"]], folder / "head.checkpoint")
        run(small_spec_folder(folder / "spec9", seed=9), ledger=ledger)
    return {"folder": folder, "db": db, "checkpoint": folder / "head.checkpoint", "pub": folder / "certa.pub",
            "other": folder / "other.pub"}


def _copy(base: dict[str, Path], tmp_path: Path) -> Path:
    db = tmp_path / "ledger.db"
    shutil.copyfile(base["db"], db)
    return db


def _verify(base: dict[str, Path], db: Path, *extra: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["verify", "--ledger", str(db), "--json", *extra])
    return result.exit_code, (json.loads(result.output) if result.output.startswith("{") else {"output": result.output})


def _incremental(base: dict[str, Path], db: Path, *extra: str) -> tuple[int, dict]:
    return _verify(base, db, "--checkpoint", str(base["checkpoint"]), "--public-key", str(base["pub"]),
                   "--since-checkpoint", *extra)


def _checkpoint_seq(base: dict[str, Path]) -> int:
    return read_checkpoint_unverified(base["checkpoint"].read_bytes()).seq


def test_an_untouched_ledger_verifies_incrementally_and_says_what_it_checked(base, tmp_path):
    db = _copy(base, tmp_path)
    seq = _checkpoint_seq(base)
    code, report = _incremental(base, db)
    assert code == 0 and report["intact"], report
    with Ledger.open(db, read_only=True) as ledger:
        head = ledger.head()[0]
    assert report["scope"] == {**report["scope"], "mode": "incremental", "vouched_by_checkpoint": seq,
                               "verified_from": seq + 1, "verified_through": head}
    assert report["entries_checked"] == head - seq and report["scope"]["not_checked"]
    assert report["checkpoint"]["seq"] == seq


def test_tampering_after_the_checkpoint_is_found_incrementally(base, tmp_path):
    db = _copy(base, tmp_path)
    seq = _checkpoint_seq(base)
    with sqlite3.connect(db) as conn:  # the second decision of the run after the checkpoint
        conn.execute("UPDATE entries SET payload = replace(payload, '\"index\":1', '\"index\":2') "
                     "WHERE seq = ?", (seq + 5,))
        assert conn.execute("SELECT kind FROM entries WHERE seq = ?", (seq + 5,)).fetchone()[0] == "decision"
    code, report = _incremental(base, db)
    assert code == 1 and not report["intact"]
    assert [(p["seq"], p["message"]) for p in report["problems"]] == [
        (seq + 5, "payload edited: its SHA-256 no longer matches")]


def test_entries_removed_after_the_checkpoint_are_found_incrementally(base, tmp_path):
    db = _copy(base, tmp_path)
    seq = _checkpoint_seq(base)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM entries WHERE seq = ?", (seq + 3,))
    code, report = _incremental(base, db)
    assert code == 1 and any("sequence gap" in p["message"] for p in report["problems"]), report["problems"]


def test_a_runs_row_edited_after_the_checkpoint_is_found_incrementally(base, tmp_path):
    db = _copy(base, tmp_path)
    seq = _checkpoint_seq(base)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET seed = '99' WHERE first_seq > ?", (seq,))
    code, report = _incremental(base, db)
    assert code == 1 and [p["column"] for p in report["problems"]] == ["runs.seed"]


def test_tampering_before_the_checkpoint_is_found_by_a_full_verify_and_by_the_incremental_root(base, tmp_path):
    db = _copy(base, tmp_path)
    with sqlite3.connect(db) as conn:  # the first decision rewritten, every later hash and node recomputed
        first = conn.execute("SELECT min(seq) FROM entries WHERE kind = 'decision'").fetchone()[0]
        conn.execute("UPDATE entries SET payload = replace(payload, '\"index\":0', '\"index\":5') WHERE seq = ?",
                     (first,))
    rechain(db, first)
    with sqlite3.connect(db) as conn:
        rebuild_merkle_nodes(conn)
    with Ledger.open(db, read_only=True) as ledger:
        assert verify(ledger).intact  # the database alone cannot tell: it was rewritten consistently
    code, report = _verify(base, db, "--checkpoint", str(base["checkpoint"]), "--public-key", str(base["pub"]))
    assert code == 1 and any(p["where"] == "expected head" for p in report["problems"])
    code, report = _incremental(base, db)
    assert code == 1 and any(p["where"] == "expected head" for p in report["problems"]), report["problems"]


def test_an_edited_node_under_the_checkpoint_frontier_is_found_by_the_incremental_root(base, tmp_path):
    db = _copy(base, tmp_path)
    seq = _checkpoint_seq(base)
    level = (seq - 1).bit_length() - 1  # the largest frontier node of entries 1..seq-1
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE merkle_nodes SET hash = ? WHERE level = ? AND position = 0", ("0" * 64, level))
    code, report = _incremental(base, db)
    assert code == 1 and any("Merkle root" in p["message"] for p in report["problems"]), report["problems"]


def test_an_edit_before_the_checkpoint_that_no_hash_covers_is_left_to_the_full_verify(base, tmp_path):
    db = _copy(base, tmp_path)
    with sqlite3.connect(db) as conn:  # the first run's runs row: derived data of a run before the checkpoint
        conn.execute("UPDATE runs SET seed = '99' WHERE first_seq = 1")
    code, report = _incremental(base, db)
    assert code == 0 and any("runs rows" in what for what in report["scope"]["not_checked"])
    code, report = _verify(base, db)
    assert code == 1 and [p["column"] for p in report["problems"]] == ["runs.seed"]


def test_a_wrong_key_or_signature_is_refused(base, tmp_path):
    db = _copy(base, tmp_path)
    result = CliRunner().invoke(main, ["verify", "--ledger", str(db), "--checkpoint", str(base["checkpoint"]),
                                       "--public-key", str(base["other"]), "--since-checkpoint"])
    assert result.exit_code == 1 and "error" in result.output.lower(), result.output
    envelope = json.loads(base["checkpoint"].read_text())
    envelope["signatures"][0]["sig"] = envelope["signatures"][0]["sig"][::-1]
    forged = tmp_path / "forged.checkpoint"
    forged.write_text(json.dumps(envelope))
    result = CliRunner().invoke(main, ["verify", "--ledger", str(db), "--checkpoint", str(forged), "--public-key",
                                       str(base["pub"]), "--since-checkpoint"])
    assert result.exit_code == 1, result.output
    result = CliRunner().invoke(main, ["verify", "--ledger", str(db), "--since-checkpoint"])
    assert result.exit_code == 2


def test_verifications_are_recorded_outside_the_chain_and_verify_accepts_them(base, tmp_path):
    db = _copy(base, tmp_path)
    with Ledger.open(db, read_only=True) as ledger:
        head = ledger.head()
    assert _verify(base, db)[0] == 0
    with Ledger.open(db, read_only=True) as ledger:
        assert read_verifications(ledger) == {}  # a plain verify is a read command: it writes nothing
    assert _verify(base, db, "--record")[0] == 0
    assert _incremental(base, db, "--record")[0] == 0
    with Ledger.open(db, read_only=True) as ledger:
        records = read_verifications(ledger)
        assert ledger.head() == head  # nothing appended to the chain
        report = verify(ledger)
    assert report.intact, report.problems
    assert records[VERIFIED_FULL].seq == head[0] and records[VERIFIED_FULL].entry_hash == head[1]
    assert records[VERIFIED_INCREMENTAL].first == _checkpoint_seq(base) + 1
    code, report = _verify(base, db)
    assert code == 0 and report["recorded"] == ""
    result = CliRunner().invoke(main, ["checkpoint", "--key", str(base["folder"] / "certa.key"), "--ledger", str(db),
                                       "--out", str(tmp_path / "new.checkpoint")])
    assert result.exit_code == 0
    assert f"last full verification (an unsigned note in the ledger): entries 1..{head[0]}" in result.output, result.output
    with sqlite3.connect(db) as conn:  # an edited record is reported, naming the column
        conn.execute("UPDATE ledger_meta SET value = 'x' WHERE key = ?", (VERIFIED_FULL,))
    with Ledger.open(db, read_only=True) as ledger:
        report = verify(ledger)
    assert [p.column for p in report.problems] == ["ledger_meta.value"]


def test_a_read_only_ledger_verifies_but_records_nothing(base, tmp_path, monkeypatch):
    media = tmp_path / "media"
    media.mkdir()
    db = _copy(base, media)
    before = db.read_bytes()
    with read_only_folder(media, monkeypatch):
        code, report = _verify(base, db, "--record")
    monkeypatch.undo()
    assert db.read_bytes() == before and sorted(p.name for p in media.iterdir()) == ["ledger.db"]
    assert code == 0 and report["recorded"].startswith("not recorded"), report
    with Ledger.open(db, read_only=True) as ledger:
        assert read_verifications(ledger) == {}


def test_the_site_chain_page_says_how_far_the_recorded_verifications_reached(base, tmp_path):
    db = _copy(base, tmp_path)
    assert _verify(base, db, "--record")[0] == 0
    with Ledger.open(db, read_only=True) as ledger:
        head = ledger.head()[0]
    result = CliRunner().invoke(main, ["site", "-o", str(tmp_path / "site"), "--ledger", str(db)])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "chain.html").read_text(encoding="utf-8")
    assert f"last full verification (an unsigned note in the ledger): entries 1..{head} intact at" in page
    assert "last incremental verification: none recorded" in page
