"""Signed reviews (certa.engine.services.reviews, ``certa review --key``, ``certa verify [--require-approval KEY]``): a signed
review verifies, any edit of it or its move to another run is detected, unsigned and pre-0.4.0 reviews stay
valid, and the approval policy takes the newest decision of each required key."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime, UTC
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization

from certa.cli import main
from certa.engine import run
from certa.engine.services.audit import verify
from certa.engine.foundation.errors import LedgerError
from certa.engine.services.reviews import (PAYLOAD_TYPE, approval_by, check_review, ledger_reviews, review_payload, reviews_of,
                            unapproved_runs)
from certa.ledger import Ledger
from certa.ledger.chain import encode_payload, entry_hash
from certa.engine.foundation.signing import generate_key_pair, key_id, load_private_key, load_public_key

from tests.conftest import rebuild_merkle_nodes

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.fixture(scope="module")
def alice():
    private_pem, public_pem = generate_key_pair()
    return load_private_key(private_pem), load_public_key(public_pem)


@pytest.fixture(scope="module")
def mallory():
    private_pem, public_pem = generate_key_pair()
    return load_private_key(private_pem), load_public_key(public_pem)


def _certa(*args: str, ledger: Path | None = None, env: dict[str, str] | None = None):
    extra = ["--ledger", str(ledger)] if ledger is not None else []
    return CliRunner().invoke(main, [*args, *extra], env=env)


def _keygen(tmp_path: Path, name: str) -> dict:
    made = _certa("keygen", "--out-dir", str(tmp_path / "keys"), "--name", name, "--json")
    assert made.exit_code == 0, made.output
    return json.loads(made.stdout)


def _rewrite_entry(db: Path, seq: int, payload: dict) -> None:
    """Replace entry ``seq``'s payload and recompute every hash from there to the head (an editor who keeps
    the chain and its Merkle nodes self-consistent), so that only the review check can notice."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, run_id, kind, recorded_at, payload, payload_sha256, prev_hash FROM entries "
                            "WHERE seq >= ? ORDER BY seq", (seq - 1,)).fetchall()
        prev = conn.execute("SELECT entry_hash FROM entries WHERE seq = ?", (seq - 1,)).fetchone()[0]
        for number, run_id, kind, recorded_at, text, sha, _ in rows[1:]:
            if number == seq:
                text, sha = encode_payload(payload)
            digest = entry_hash(seq=number, run_id=run_id, kind=kind, recorded_at=recorded_at, payload_sha256=sha,
                                prev_hash=prev)
            conn.execute("UPDATE entries SET payload = ?, payload_sha256 = ?, prev_hash = ?, entry_hash = ? "
                         "WHERE seq = ?", (text, sha, prev, digest, number))
            prev = digest
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head'", (f"{rows[-1][0]}:{prev}",))
        rebuild_merkle_nodes(conn)


def _certificate(db: Path, run_id: str) -> dict:
    with Ledger.open(db) as ledger:
        return ledger.certificate(run_id)


def _payload(db: Path, seq: int) -> dict:
    with sqlite3.connect(db) as conn:
        return json.loads(conn.execute("SELECT payload FROM entries WHERE seq = ?", (seq,)).fetchone()[0])


@pytest.fixture
def two_runs(small_spec: Path, tmp_path: Path):
    """A ledger with two PASS runs of the small spec: (db path, first run id, second run id)."""
    db = tmp_path / "reviews.db"
    with Ledger.open(db) as ledger:
        first = run(small_spec, ledger=ledger)
        second = run(small_spec, ledger=ledger)
    assert first.certificate["content"]["verdict"] == second.certificate["content"]["verdict"] == "PASS"
    return db, first.run_id, second.run_id


def _review(ledger: Ledger, run_id: str, decision: str, keys=(), *, reviewer: str = "alice", note: str = "") -> int:
    payload = review_payload(reviewer=reviewer, decision=decision, note=note, certificate=ledger.certificate(run_id),
                             private_keys=list(keys))
    return ledger.record_note(run_id, "review", payload)


def test_a_signed_review_round_trips_and_verifies(two_runs, alice, mallory):
    db, first, _ = two_runs
    with Ledger.open(db) as ledger:
        seq = _review(ledger, first, "approved", [alice[0], mallory[0]], note="matches the model card")
        records = reviews_of(ledger, first[:8])
        assert verify(ledger).intact
    assert len(records) == 1
    record = records[0]
    assert (record.seq, record.reviewer, record.decision, record.note) == (seq, "alice", "approved",
                                                                          "matches the model card")
    assert record.signed and record.signature_valid is True and record.problem is None
    assert record.key_id == key_id(alice[1]) and record.key_ids == (key_id(alice[1]), key_id(mallory[1]))
    payload = _payload(db, seq)
    assert payload["signature"]["payloadType"] == PAYLOAD_TYPE
    assert set(payload["certificate"]) == {"run_id", "content_sha256", "results_sha256"}


def _edit_note(payload: dict, db: Path, seq: int, other_seq: int) -> tuple[int, dict]:
    return seq, {**payload, "note": "edited afterwards"}


def _edit_decision(payload: dict, db: Path, seq: int, other_seq: int) -> tuple[int, dict]:
    return seq, {**payload, "decision": "rejected"}


def _tamper_signature(payload: dict, db: Path, seq: int, other_seq: int) -> tuple[int, dict]:
    envelope = payload["signature"]
    sig = envelope["signatures"][0]["sig"]
    flipped = ("A" if sig[0] != "A" else "B") + sig[1:]
    return seq, {**payload, "signature": {**envelope, "signatures": [{**envelope["signatures"][0], "sig": flipped}]}}


def _move_to_other_run(payload: dict, db: Path, seq: int, other_seq: int) -> tuple[int, dict]:
    return other_seq, dict(payload)  # the signed approval copied over the other run's (unsigned) review


def _move_and_fix_the_certificate_block(payload: dict, db: Path, seq: int, other_seq: int) -> tuple[int, dict]:
    other = _payload(db, other_seq)  # an editor who also copies the other run's certificate digests
    return other_seq, {**payload, "certificate": other["certificate"]}


@pytest.mark.parametrize("edit", [_edit_note, _edit_decision, _tamper_signature, _move_to_other_run,
                                  _move_and_fix_the_certificate_block])
def test_an_edited_or_moved_signed_review_is_detected(two_runs, alice, edit):
    db, first, second = two_runs
    with Ledger.open(db) as ledger:
        seq = _review(ledger, first, "approved", [alice[0]])
        other_seq = _review(ledger, second, "comment")
        assert verify(ledger).intact
    target, payload = edit(_payload(db, seq), db, seq, other_seq)
    _rewrite_entry(db, target, payload)
    with Ledger.open(db) as ledger:
        target_run = first if target == seq else second
        assert verify(ledger, check_reviews=False).intact  # the chain itself was kept consistent
        assert check_review(payload, ledger.certificate(target_run)).valid is False
        report = verify(ledger)
        record = next(r for r in reviews_of(ledger, target_run) if r.seq == target)
        gaps = unapproved_runs(ledger, [alice[1]], run_id=target_run)[1]
    assert not report.intact
    assert [p.seq for p in report.problems] == [target]
    assert report.first_broken.message.startswith("review: ") and f"entry {target}" in report.first_broken.where
    assert record.signed and record.signature_valid is False and record.problem
    assert gaps and gaps[0].run_id == target_run  # an invalid approval approves nothing
    verified = _certa("verify", ledger=db)
    assert verified.exit_code == 1 and "TAMPERED" in verified.output and f"entry {target}" in verified.output


def test_a_review_signed_by_a_swapped_in_key_verifies_but_is_not_the_trusted_approval(two_runs, alice, mallory):
    """Whoever can write the database can re-sign a review with their own key and embed it: the review is
    internally consistent, but it is not signed by the key the policy trusts."""
    db, first, _ = two_runs
    with Ledger.open(db) as ledger:
        seq = _review(ledger, first, "approved", [alice[0]])
        forged = review_payload(reviewer="alice", decision="approved", note="", certificate=ledger.certificate(first),
                                private_keys=[mallory[0]])
    _rewrite_entry(db, seq, forged)
    with Ledger.open(db) as ledger:
        assert verify(ledger).intact
        assert reviews_of(ledger, first)[0].key_id == key_id(mallory[1])
        assert unapproved_runs(ledger, [alice[1]], run_id=first)[1][0].reason == "no review signed by this key"
    # an embedded public key that is not the signer's (alice's key under mallory's key id) is refused
    alice_raw = review_payload(reviewer="a", decision="comment", note="", certificate=_certificate(db, first),
                               private_keys=[alice[0]])["public_keys"][key_id(alice[1])]
    swapped = dict(forged, public_keys={key_id(mallory[1]): alice_raw})
    with Ledger.open(db) as ledger:
        assert check_review(swapped, ledger.certificate(first)).signatures_valid is False


def test_unsigned_reviews_still_work_and_are_shown_unsigned(two_runs):
    db, first, _ = two_runs
    made = _certa("review", first, "--by", "bob", "--decision", "comment", "--note", "looks fine", "--json", ledger=db)
    assert made.exit_code == 0, made.output
    out = json.loads(made.stdout)
    assert out["signed"] is False and out["key_ids"] == [] and out["seq"] == out["entry"]
    text = _certa("review", first, "--by", "bob", "--decision", "approved", ledger=db)
    assert text.exit_code == 0 and "(unsigned)" in text.output
    with Ledger.open(db) as ledger:
        records = reviews_of(ledger, first)
        assert verify(ledger).intact
    assert [(r.signed, r.signature_valid, r.key_id, r.problem) for r in records] == [(False, None, None, None)] * 2
    verified = _certa("verify", ledger=db)
    assert verified.exit_code == 0 and "2 unsigned" in verified.output
    assert f"approved run {first} (unsigned); signer: unsigned, claims to be 'bob'" in verified.output


def test_cli_signs_a_review_and_verify_reports_it(two_runs, tmp_path):
    db, first, _ = two_runs
    keys = _keygen(tmp_path, "alice")
    signed = _certa("review", first[:8], "--by", "alice", "--decision", "approved", "--key", keys["private_key"],
                    ledger=db)
    assert signed.exit_code == 0, signed.output
    assert "signed by key(s) " + keys["key_id"] in signed.output
    as_json = json.loads(_certa("review", first, "--by", "alice", "--decision", "comment", "--key",
                                keys["private_key"], "--json", ledger=db).stdout)
    assert as_json["signed"] is True and as_json["key_ids"] == [keys["key_id"]] and isinstance(as_json["seq"], int)
    report = _certa("verify", "--json", ledger=db)
    assert report.exit_code == 0, report.output
    reviews = json.loads(report.stdout)["reviews"]
    assert [(r["decision"], r["signed"], r["signature_valid"], r["key_ids"]) for r in reviews] == \
        [("approved", True, True, [keys["key_id"]]), ("comment", True, True, [keys["key_id"]])]
    assert "verifies" in _certa("verify", ledger=db).output


def test_require_approval_needs_the_newest_decision_of_each_key_to_approve(two_runs, tmp_path):
    db, first, second = two_runs
    alice_keys, bob_keys = _keygen(tmp_path, "alice"), _keygen(tmp_path, "bob")

    def review(run_id: str, decision: str, *key: str) -> None:
        args = [a for k in key for a in ("--key", k)]
        assert _certa("review", run_id, "--by", "alice", "--decision", decision, *args, ledger=db).exit_code == 0

    def policy(*args: str, keys=(alice_keys,)) -> tuple[int, dict]:
        required = [a for k in keys for a in ("--require-approval", k["public_key"])]
        result = _certa("verify", *args, *required, "--json", ledger=db)
        return result.exit_code, json.loads(result.stdout)

    code, out = policy()
    assert code == 1 and out["intact"] is True and out["ok"] is False
    assert {m["run_id"] for m in out["approval"]["missing"]} == {first, second}
    review(first, "approved")  # unsigned: does not count
    review(first, "approved", alice_keys["private_key"])
    code, out = policy()
    assert code == 1 and [m["run_id"] for m in out["approval"]["missing"]] == [second]
    assert policy(first)[0] == 0  # with RUN_ID only that run is checked
    text = _certa("verify", "--require-approval", alice_keys["public_key"], ledger=db)
    assert text.exit_code == 1 and f"NOT APPROVED: run {second}" in text.output and first not in \
        text.output.split("NOT APPROVED")[1]
    review(second, "approved", alice_keys["private_key"])
    code, out = policy()
    assert code == 0 and out["approval"] == {"approved": True, "required_key_ids": [alice_keys["key_id"]],
                                             "runs_checked": 2, "missing": [],
                                             "read_from": "the runs index and the review entries, which this full "
                                                          "verification checked against the chain"}
    assert policy(keys=(alice_keys, bob_keys))[0] == 1  # a key that never signed
    review(first, "rejected", alice_keys["private_key"])  # a later rejection by the same key withdraws it
    review(first, "comment", alice_keys["private_key"])  # a comment is no decision
    code, out = policy()
    assert code == 1 and [(m["run_id"], m["reason"]) for m in out["approval"]["missing"]] == \
        [(first, "its newest signed decision by this key is 'rejected'")]
    review(first, "approved", alice_keys["private_key"])
    assert policy()[0] == 0


def test_an_encrypted_key_is_opened_with_certa_key_passphrase(two_runs, tmp_path):
    db, first, _ = two_runs
    private_pem, _ = generate_key_pair()
    private = load_private_key(private_pem)
    encrypted = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(b"s3cret"))
    key_file = tmp_path / "enc.key"
    key_file.write_bytes(encrypted)
    args = ("review", first, "--by", "alice", "--decision", "approved", "--key", str(key_file), "--json")
    assert _certa(*args, ledger=db, env={"CERTA_KEY_PASSPHRASE": ""}).exit_code == 2
    assert _certa(*args, ledger=db, env={"CERTA_KEY_PASSPHRASE": "wrong"}).exit_code == 2
    made = _certa(*args, ledger=db, env={"CERTA_KEY_PASSPHRASE": "s3cret"})
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["key_ids"] == [key_id(private.public_key())]
    with Ledger.open(db) as ledger:
        assert [r.signature_valid for r in reviews_of(ledger, first)] == [True]  # the refused attempts left nothing


def test_a_signed_review_needs_a_certificate():
    private = load_private_key(generate_key_pair()[0])
    with pytest.raises(LedgerError, match="no certificate"):
        review_payload(reviewer="a", decision="approved", note="", certificate=None, private_keys=[private])
    assert review_payload(reviewer="a", decision="comment", note="", certificate=None) == \
        {"reviewer": "a", "decision": "comment", "note": ""}


@pytest.mark.parametrize("version", ["0.1.0", "0.2.0", "0.3.0"])
def test_old_review_entries_of_the_golden_ledgers_are_unsigned_and_verify(version: str, tmp_path: Path):
    copy = tmp_path / "ledger.db"
    shutil.copyfile(GOLDEN / version / "ledger.db", copy)
    assert _certa("migrate", ledger=copy).exit_code == 0
    with Ledger.open(copy) as ledger:
        found = ledger_reviews(ledger)
        assert verify(ledger).intact
        newest = ledger.runs(limit=1)[0].run_id
        assert [r.seq for r in reviews_of(ledger, newest)] == [found[0][1].seq]
    assert len(found) == 1
    run_id, record = found[0]
    assert run_id == newest
    assert (record.reviewer, record.decision, record.note) == ("golden-corpus", "comment", "golden corpus")
    assert (record.signed, record.signature_valid, record.key_ids, record.problem) == (False, None, (), None)
    assert _certa("verify", ledger=copy).exit_code == 0


# ------------------------------------------------------------------------------- signing order vs chain order

def _signed(ledger: Ledger, run_id: str, decision: str, keys, minute: int, *, reviewer: str = "alice") -> int:
    """Record a review signed at 10:MM on 2026-11-22 (``review_payload(signed_at=...)``)."""
    when = datetime(2026, 11, 22, 10, minute, tzinfo=UTC)
    payload = review_payload(reviewer=reviewer, decision=decision, note="", certificate=ledger.certificate(run_id),
                             private_keys=list(keys), signed_at=when)
    return ledger.record_note(run_id, "review", payload)


def _swap_payloads(db: Path, a: int, b: int) -> None:
    """Exchange two entries' payloads and recompute the chain: what someone with write access but no key can do."""
    first, second = _payload(db, a), _payload(db, b)
    _rewrite_entry(db, a, second)
    _rewrite_entry(db, b, first)


def test_swapping_an_approval_and_a_later_rejection_is_detected_and_approves_nothing(two_runs, alice):
    db, first, _ = two_runs
    with Ledger.open(db) as ledger:
        approved = _signed(ledger, first, "approved", [alice[0]], 1)
        rejected = _signed(ledger, first, "rejected", [alice[0]], 2)
        assert verify(ledger).intact
        assert unapproved_runs(ledger, [alice[1]], run_id=first)[1][0].reason == \
            "its newest signed decision by this key is 'rejected'"
    _swap_payloads(db, approved, rejected)  # the rejection first, the approval (signed before it) last
    with Ledger.open(db) as ledger:
        assert verify(ledger, check_reviews=False).intact  # the chain itself was recomputed consistently
        report = verify(ledger)
        records = reviews_of(ledger, first)
        gaps = unapproved_runs(ledger, [alice[1]], run_id=first)[1]
    assert not report.intact and [p.seq for p in report.problems] == [rejected]
    problem = report.first_broken
    assert f"entry {rejected}" in problem.where and f"before entry {approved}" in problem.message
    assert "2026-11-22T10:01:00.000000Z" in problem.message and "2026-11-22T10:02:00.000000Z" in problem.message
    assert [(r.decision, r.signature_valid, r.out_of_order) for r in records] == \
        [("rejected", True, None), ("approved", True, approved)]
    assert records[1].signed_at == "2026-11-22T10:01:00.000000Z"
    assert len(gaps) == 1 and "out of signing order" in gaps[0].reason
    pub = Path(db).parent / "alice.pub"
    pub.write_bytes(alice[1].public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    text = _certa("verify", first, "--require-approval", str(pub), ledger=db)
    assert text.exit_code == 1 and "TAMPERED" in text.output and f"NOT APPROVED: run {first}" in text.output
    assert (f"entry {rejected}: approved run {first} (signed by {key_id(alice[1])[:16]}…: verifies, but "
            f"recorded after entry {approved}, which one of its keys signed later); signer: signed by key "
            f"{key_id(alice[1])[:8]}…, claims to be 'alice'") in text.output
    out = json.loads(_certa("verify", first, "--require-approval", str(pub), "--json", ledger=db).stdout)
    assert [r["out_of_order"] for r in out["reviews"]] == [None, approved] and out["ok"] is False


def test_an_old_approval_copied_after_a_rejection_is_detected(two_runs, alice):
    db, first, _ = two_runs
    with Ledger.open(db) as ledger:
        approved = _signed(ledger, first, "approved", [alice[0]], 1)
        _signed(ledger, first, "rejected", [alice[0]], 2)
        copy = ledger.record_note(first, "review", _payload(db, approved))  # appended verbatim, signature intact
        report = verify(ledger)
        assert approval_by(reviews_of(ledger, first), key_id(alice[1])) is None
    assert [p.seq for p in report.problems] == [copy]


def test_signing_order_is_per_key_and_per_run(two_runs, alice, mallory):
    """Reviews signed in order, a key reviewing again later, other keys and other runs signed at other times,
    unsigned reviews: no problem, and the newest decision stands."""
    db, first, second = two_runs
    with Ledger.open(db) as ledger:
        _signed(ledger, first, "approved", [alice[0]], 5)
        _signed(ledger, first, "approved", [mallory[0]], 1)  # another key, signed earlier: no contradiction
        _signed(ledger, second, "approved", [alice[0]], 2)  # another run, signed earlier: no contradiction
        _review(ledger, first, "comment")  # unsigned
        _signed(ledger, first, "rejected", [alice[0], mallory[0]], 6)
        last = _signed(ledger, first, "approved", [alice[0]], 6)  # the same minute: not earlier
        assert verify(ledger).intact
        records = reviews_of(ledger, first)
        assert approval_by(records, key_id(alice[1])).seq == last
        assert approval_by(records, key_id(mallory[1])) is None  # its newest decision is the rejection
