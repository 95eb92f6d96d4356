"""A ledger as a transparency log (certa.engine.services.tlog; ``certa checkpoint --format tlog``, ``certa cosign`` of a
note, ``certa prove --consistency``): notes of the ledger's head, a witness's line added only after the log's line
and the ledger check out, consistency proofs between checkpoints of either format, and what is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.foundation.signing import load_public_key
from certa.engine.services.tlog import prove_consistency
from certa.ledger import Ledger
from certa.ledger.merkle_consistency import verify_consistency
from certa.ledger.tlog_checkpoint import open_tlog_checkpoint

from tests.conftest import key_pair_files

ORIGIN = "example.org/certa/test"


def _grow(db: Path, count: int) -> None:
    """Append ``count`` registration entries (the cheapest entries a ledger records)."""
    with Ledger.open(db) as ledger:
        start = ledger.head()[0]
        for number in range(start, start + count):
            ledger.record_registration(f"reg-{number}", {"number": number})


def _key(folder: Path, name: str) -> tuple[str, str]:
    key, pub = key_pair_files(folder, name)
    return str(key), str(pub)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout


@pytest.fixture
def log(tmp_path: Path) -> dict[str, str]:
    """A ledger of 6 entries with a tlog checkpoint of them (``old``), then 5 more entries."""
    db = tmp_path / "ledger.db"
    _grow(db, 6)
    key, pub = _key(tmp_path, "log")
    old = tmp_path / "old.note"
    code, _ = _cli("checkpoint", "--key", key, "--format", "tlog", "--origin", ORIGIN, "--out", str(old),
                   "--ledger", str(db))
    assert code == 0
    _grow(db, 5)
    return {"db": str(db), "key": key, "pub": pub, "old": str(old), "dir": str(tmp_path)}


def test_a_note_is_signed_cosigned_and_proven_consistent(log):
    db, folder = log["db"], Path(log["dir"])
    code, out = _cli("checkpoint", "--key", log["key"], "--format", "tlog", "--origin", ORIGIN, "--json",
                     "--ledger", db)
    made = json.loads(out)
    assert code == 0 and made["tree_size"] == 11 and made["file"] is None
    log_key = load_public_key(Path(log["pub"]).read_bytes())
    assert open_tlog_checkpoint(made["note"], [log_key]).root_hash == made["root_hash"]
    code, printed = _cli("checkpoint", "--key", log["key"], "--format", "tlog", "--origin", ORIGIN, "--ledger", db)
    assert code == 0 and printed == made["note"]  # the note itself on standard output, byte for byte
    new = folder / "new.note"
    new.write_text(made["note"])
    witness_key, witness_pub = _key(folder, "witness")
    witnessed = folder / "witnessed.note"
    code, out = _cli("cosign", str(new), "--public-key", log["pub"], "--key", witness_key, "--key-name",
                     "witness.example", "--out", str(witnessed), "--json", "--ledger", db)
    assert code == 0, out
    assert [signer.split("+")[0] for signer in json.loads(out)["signers"]] == [ORIGIN, "witness.example"]
    both = [log_key, load_public_key(Path(witness_pub).read_bytes())]
    assert open_tlog_checkpoint(witnessed.read_text(), both).tree_size == 11
    code, out = _cli("prove", "--consistency", log["old"], str(witnessed), "--json", "--ledger", db)
    proof = json.loads(out)
    assert code == 0 and (proof["old"]["tree_size"], proof["new"]["tree_size"]) == (6, 11)
    assert verify_consistency(6, 11, bytes.fromhex(proof["old"]["root_hash"]), bytes.fromhex(proof["new"]["root_hash"]),
                              [bytes.fromhex(node) for node in proof["proof"]])
    dsse = folder / "new.checkpoint"  # certa's own checkpoint of the same head: the same root, the same proof
    assert _cli("checkpoint", "--key", log["key"], "--out", str(dsse), "--ledger", db)[0] == 0
    code, out = _cli("prove", "--consistency", log["old"], str(dsse), "--json", "--ledger", db)
    assert code == 0 and json.loads(out)["proof"] == proof["proof"]
    written = folder / "proof.json"
    code, out = _cli("prove", "--consistency", log["old"], str(dsse), "-o", str(written), "--ledger", db)
    assert code == 0 and "entries 1..6 are the first 6 of entries 1..11" in out
    assert json.loads(written.read_text())["proof"] == proof["proof"]
    assert _cli("prove", "--consistency", log["old"], str(dsse), "-o", str(written), "--ledger", db)[0] == 2


def test_what_a_witness_and_a_prover_refuse(log, tmp_path):
    db, old = log["db"], log["old"]
    witness_key, witness_pub = _key(tmp_path, "w")
    out = str(tmp_path / "x.note")
    cosign = ["cosign", old, "--key", witness_key, "--out", out, "--ledger", db]
    assert _cli(*cosign, "--public-key", witness_pub, "--key-name", "w")[0] == 1  # the log's key did not sign it
    assert _cli(*cosign, "--public-key", log["pub"])[0] == 2  # no --key-name for a note
    assert _cli(*cosign, "--public-key", log["pub"], "--key-name", "a witness")[0] == 2  # not a key name
    assert _cli("prove", "--consistency", old, old, "--ledger", db)[0] == 0  # a checkpoint is consistent with itself
    newer = tmp_path / "newer.note"
    assert _cli("checkpoint", "--key", log["key"], "--format", "tlog", "--origin", ORIGIN, "--out", str(newer),
                "--ledger", db)[0] == 0
    assert _cli("prove", "--consistency", str(newer), old, "--ledger", db)[0] == 2  # the older one first
    other = tmp_path / "other.db"  # another ledger: shorter than the checkpoint, then as long but other entries
    _grow(other, 3)
    code, out = _cli("prove", "--consistency", old, str(newer), "--json", "--ledger", str(other))
    assert code == 2 and "has 3" in json.loads(out)["error"]["message"]
    _grow(other, 9)
    code, out = _cli("prove", "--consistency", old, str(newer), "--json", "--ledger", str(other))
    assert code == 1 and "do not have the checkpoint's Merkle root" in json.loads(out)["error"]["message"]
    assert _cli(*cosign[:-2], "--public-key", log["pub"], "--key-name", "w", "--ledger", str(other))[0] == 1
    for usage in (["checkpoint", "--key", log["key"], "--format", "tlog"],  # no --origin
                  ["checkpoint", "--key", log["key"], "--origin", ORIGIN],  # --origin without --format tlog
                  ["prove", "latest", "--consistency", old, old],
                  ["prove", "latest"]):
        assert _cli(*usage, "--ledger", db)[0] == 2


def test_an_edited_merkle_node_is_found_and_an_old_ledger_proves_from_its_entries(log, tmp_path, monkeypatch):
    db, old = log["db"], Path(log["old"]).read_bytes()
    new = tmp_path / "new.note"
    assert _cli("checkpoint", "--key", log["key"], "--format", "tlog", "--origin", ORIGIN, "--out", str(new),
                "--ledger", db)[0] == 0
    with Ledger.open(db, read_only=True) as ledger:
        stored = prove_consistency(ledger, old, new.read_bytes()).document
    monkeypatch.setattr(Ledger, "has_merkle_nodes", property(lambda self: False))  # a ledger before schema 3
    with Ledger.open(db, read_only=True) as ledger:
        assert prove_consistency(ledger, old, new.read_bytes()).document == stored
    monkeypatch.undo()
    # entries 7..8 (node (1, 3)) are in the proof of 6 -> 11 and in neither root's frontier nodes
    with sqlite3.connect(db) as conn:
        assert conn.execute("UPDATE merkle_nodes SET hash = ? WHERE level = 1 AND position = 3",
                            ("0" * 64,)).rowcount == 1
    code, out = _cli("prove", "--consistency", log["old"], str(new), "--json", "--ledger", db)
    assert code == 1 and "merkle_nodes was edited" in json.loads(out)["error"]["message"]
