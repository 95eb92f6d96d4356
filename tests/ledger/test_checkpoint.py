"""Signed checkpoints of the chain head (certa.ledger.checkpoint, ``certa keygen / checkpoint / verify --checkpoint``):
DSSE encoding, signature checks, and detection of a chain rewritten behind a signed head."""

from __future__ import annotations

import base64
import json
import sqlite3
from datetime import datetime, UTC
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from certa.cli import main
from certa.engine import run
from certa.engine.services.audit import verify, verify_bundle
from certa.engine.services.reviews import record_review
from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.core.certificate import results_sha256
from certa.engine.foundation.errors import (BundleError, LedgerError, LedgerIntegrityError, SignatureVerificationError,
                                      SigningError)
from certa.ledger import Ledger, merkle
from certa.ledger.bundle import build_bundle
from certa.ledger.checkpoint import PAYLOAD_TYPE, cosign_checkpoint, open_checkpoint, sign_checkpoint
from certa.engine.foundation.signing import (add_signature, generate_key_pair, key_id, load_private_key, load_public_key,
                         pre_authentication_encoding)
from certa.ledger.chain import encode_payload, entry_hash

from tests.conftest import rebuild_merkle_nodes

HEAD_HASH = "ab" * 32
ROOT_HASH = "cd" * 32


@pytest.fixture(scope="module")
def keys():
    private_pem, public_pem = generate_key_pair()
    return load_private_key(private_pem), load_public_key(public_pem)


def _signed_head(ledger: Ledger, private) -> str:
    """A checkpoint of the ledger's current head, as 'certa checkpoint' makes it."""
    seq, digest = ledger.head()
    root = merkle.root_hash(merkle.entry_leaves(ledger.entry_hashes(seq)))
    return json.dumps(sign_checkpoint([private], seq, digest, root.hex()))


def test_pae_matches_the_dsse_v1_definition():
    # DSSE v1 protocol: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal
    assert pre_authentication_encoding("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pre_authentication_encoding("", b"") == b"DSSEv1 0  0 "


def test_a_checkpoint_round_trips_and_names_its_key(keys):
    private, public = keys
    when = datetime(2026, 11, 22, 1, 2, 3, 456789, tzinfo=UTC)
    envelope = sign_checkpoint([private], 42, HEAD_HASH, ROOT_HASH, signed_at=when)
    assert envelope["payloadType"] == PAYLOAD_TYPE and envelope["signatures"][0]["keyid"] == key_id(public)
    payload = base64.b64decode(envelope["payload"])
    assert payload == (b'{"certa_checkpoint":1,"entry_hash":"' + HEAD_HASH.encode() + b'","root_hash":"'
                       + ROOT_HASH.encode() + b'","seq":42,"signed_at":"2026-11-22T01:02:03.456789Z"}')  # JCS order
    opened = open_checkpoint(json.dumps(envelope), [public])
    assert (opened.seq, opened.entry_hash, opened.root_hash, opened.signed_at) == \
        (42, HEAD_HASH, ROOT_HASH, "2026-11-22T01:02:03.456789Z")


def _with_payload(envelope: dict, **changes) -> dict:
    body = json.loads(base64.b64decode(envelope["payload"]))
    body.update(changes)
    return {**envelope, "payload": base64.b64encode(json.dumps(body).encode()).decode()}


def test_an_altered_payload_type_or_signature_or_another_key_is_refused(keys):
    private, public = keys
    envelope = sign_checkpoint([private], 7, HEAD_HASH, ROOT_HASH)
    with pytest.raises(SignatureVerificationError, match="does not verify"):
        open_checkpoint(json.dumps(_with_payload(envelope, seq=8)), [public])  # moved to another head
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 1
    forged = {**envelope, "signatures": [{**envelope["signatures"][0], "sig": base64.b64encode(sig).decode()}]}
    with pytest.raises(SignatureVerificationError, match="does not verify"):
        open_checkpoint(json.dumps(forged), [public])
    with pytest.raises(SignatureVerificationError, match="payload type"):
        open_checkpoint(json.dumps({**envelope, "payloadType": "application/json"}), [public])
    _, other_public = generate_key_pair()
    with pytest.raises(SignatureVerificationError, match="no signature by key"):
        open_checkpoint(json.dumps(envelope), [load_public_key(other_public)])
    with pytest.raises(SigningError, match="not a DSSE envelope"):
        open_checkpoint("{not json", [public])
    ec_public = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(SigningError, match="not an Ed25519"):
        load_public_key(ec_public)
    with pytest.raises(SigningError, match="cannot read the public key"):
        load_public_key(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")


def test_a_chain_rewritten_behind_a_signed_checkpoint_is_detected(small_spec: Path, tmp_path: Path, keys):
    """The attacker deletes the last run and recomputes every later hash: the database is self-consistent,
    the signed head is not in it."""
    private, public = keys
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run(small_spec, ledger=ledger)
        second = run(small_spec, ledger=ledger).run_id
        envelope = _signed_head(ledger, private)
        first_seq = ledger.run(second).first_seq
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM entries WHERE seq >= ?", (first_seq,))
        conn.execute("DELETE FROM runs WHERE run_id = ?", (second,))
        seq, digest = conn.execute("SELECT seq, entry_hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head'", (f"{seq}:{digest}",))
        rebuild_merkle_nodes(conn)  # the derived Merkle nodes too
    signed = open_checkpoint(envelope, [public])
    with Ledger.open(db) as ledger:
        assert verify(ledger).intact
        report = verify(ledger, expect_head=(signed.seq, signed.entry_hash))
    assert not report.intact and "removed" in report.first_broken.message


def test_a_rewritten_entry_with_recomputed_hashes_is_detected_at_the_signed_seq(small_spec, tmp_path, keys):
    private, public = keys
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run(small_spec, ledger=ledger)
        signed = open_checkpoint(_signed_head(ledger, private), [public])
    with sqlite3.connect(db) as conn:  # rewrite the last entry's payload and recompute its hashes
        row = conn.execute("SELECT seq, run_id, kind, recorded_at, payload, prev_hash FROM entries "
                           "ORDER BY seq DESC LIMIT 1").fetchone()
        seq, run_id, kind, recorded_at, payload, prev = row
        data = json.loads(payload)
        data["tampered"] = True
        text, sha = encode_payload(data)
        digest = entry_hash(seq=seq, run_id=run_id, kind=kind, recorded_at=recorded_at, payload_sha256=sha,
                            prev_hash=prev)
        conn.execute("UPDATE entries SET payload = ?, payload_sha256 = ?, entry_hash = ? WHERE seq = ?",
                     (text, sha, digest, seq))
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head'", (f"{seq}:{digest}",))
    with Ledger.open(db) as ledger:
        report = verify(ledger, expect_head=(signed.seq, signed.entry_hash))
    assert not report.intact
    assert any("rewritten" in p.message for p in report.problems)


def test_cli_keygen_checkpoint_and_verify(small_spec: Path, tmp_path: Path, monkeypatch):
    runner = CliRunner()
    db = str(tmp_path / "l.db")
    made = json.loads(runner.invoke(main, ["keygen", "--out-dir", str(tmp_path / "k"), "--json"]).stdout)
    assert (Path(made["private_key"]).stat().st_mode & 0o777) == 0o600
    assert runner.invoke(main, ["keygen", "--out-dir", str(tmp_path / "k")]).exit_code != 0  # never overwrites
    assert runner.invoke(main, ["run", str(small_spec), "--ledger", db]).exit_code == 0
    out = tmp_path / "head.checkpoint"
    signed = runner.invoke(main, ["checkpoint", "--key", made["private_key"], "--out", str(out), "--json",
                                  "--ledger", db])
    assert signed.exit_code == 0, signed.output
    assert json.loads(signed.stdout)["key_ids"] == [made["key_id"]]
    assert runner.invoke(main, ["checkpoint", "--key", made["private_key"], "--out", str(out),
                                "--ledger", db]).exit_code != 0  # an existing checkpoint is never overwritten
    ok = runner.invoke(main, ["verify", "--checkpoint", str(out), "--public-key", made["public_key"], "--json",
                              "--ledger", db])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["intact"] is True
    other = json.loads(runner.invoke(main, ["keygen", "--out-dir", str(tmp_path / "o"), "--json"]).stdout)
    bad = runner.invoke(main, ["verify", "--checkpoint", str(out), "--public-key", other["public_key"], "--json",
                               "--ledger", db])
    assert bad.exit_code == 1 and "no signature by key" in json.loads(bad.stdout)["error"]["message"]
    assert runner.invoke(main, ["verify", "--checkpoint", str(out), "--ledger", db]).exit_code == 2
    bundle_file = tmp_path / "run.bundle.json"
    proved = runner.invoke(main, ["prove", "latest", "--checkpoint", str(out), "-o", str(bundle_file), "--ledger", db])
    assert proved.exit_code == 0, proved.output
    checked = runner.invoke(main, ["verify-bundle", str(bundle_file), "--public-key", made["public_key"], "--json"])
    assert checked.exit_code == 0 and json.loads(checked.stdout)["verified"] is True
    assert "VERIFIED" in runner.invoke(main, ["verify-bundle", str(bundle_file), "--public-key",
                                              made["public_key"]]).output
    edited = json.loads(bundle_file.read_text())
    edited["entry"]["seq"] += 1
    bundle_file.write_text(json.dumps(edited))
    refused = runner.invoke(main, ["verify-bundle", str(bundle_file), "--public-key", made["public_key"]])
    assert refused.exit_code == 1 and refused.output.startswith("NOT VERIFIED")
    wrong_key = runner.invoke(main, ["verify-bundle", str(bundle_file), "--public-key", other["public_key"], "--json"])
    assert wrong_key.exit_code == 1 and json.loads(wrong_key.stdout)["ok"] is False
    bundle_file.write_text("{not json")
    assert runner.invoke(main, ["verify-bundle", str(bundle_file), "--public-key", made["public_key"]]).exit_code == 2
    # two-person rule: a co-signer checks the checkpoint against the ledger and adds a signature
    cosigned = tmp_path / "head.cosigned"
    added = runner.invoke(main, ["cosign", str(out), "--public-key", made["public_key"], "--key", other["private_key"],
                                 "--out", str(cosigned), "--json", "--ledger", db])
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["key_ids"] == [made["key_id"], other["key_id"]]
    both = ["--public-key", made["public_key"], "--public-key", other["public_key"]]
    assert runner.invoke(main, ["verify", "--checkpoint", str(cosigned), *both, "--ledger", db]).exit_code == 0
    assert runner.invoke(main, ["verify", "--checkpoint", str(out), *both, "--ledger", db]).exit_code == 1
    assert runner.invoke(main, ["cosign", str(cosigned), *both, "--key", other["private_key"], "--out",
                                str(tmp_path / "again"), "--ledger", db]).exit_code == 2  # already signed by it
    assert runner.invoke(main, ["cosign", str(out), "--public-key", made["public_key"], "--key", other["private_key"],
                                "--out", str(tmp_path / "x"), "--ledger", str(tmp_path / "other.db")]
                         ).exit_code == 2  # not this ledger's head
    unchecked = runner.invoke(main, ["cosign", str(out), "--public-key", other["public_key"], "--key",
                                     other["private_key"], "--out", str(tmp_path / "y"), "--ledger", db])
    assert unchecked.exit_code == 1 and not (tmp_path / "y").exists()  # its signature is not by the key given
    monkeypatch.setenv("CERTA_KEY_PASSPHRASE", "")
    assert runner.invoke(main, ["checkpoint", "--key", made["private_key"], "--ledger", db]).exit_code == 0


def test_verify_checks_the_signed_merkle_root_too(small_spec: Path, tmp_path: Path, keys):
    private, public = keys
    with Ledger.open(tmp_path / "l.db") as ledger:
        run(small_spec, ledger=ledger)
        signed = open_checkpoint(_signed_head(ledger, private), [public])
        assert verify(ledger, expect_head=(signed.seq, signed.entry_hash), expect_root=signed.root_hash).intact
        report = verify(ledger, expect_head=(signed.seq, signed.entry_hash), expect_root="00" * 32)
    assert not report.intact and "Merkle root of entries 1.." in report.first_broken.message


def test_a_bundle_proves_one_certificate_offline_and_any_edit_fails(small_spec: Path, tmp_path: Path, keys):
    private, public = keys
    with Ledger.open(tmp_path / "l.db") as ledger:
        first = run(small_spec, ledger=ledger).run_id
        second = run(small_spec, ledger=ledger).run_id
        envelope = _signed_head(ledger, private)
        bundle = json.loads(json.dumps(build_bundle(ledger, first[:8], envelope)))  # as written to a file
        later = run(small_spec, ledger=ledger).run_id
        with pytest.raises(LedgerError, match="after the checkpoint's head"):
            build_bundle(ledger, later, envelope)
        assert verify_bundle(build_bundle(ledger, second, envelope), [public]).verified
    report = verify_bundle(bundle, [public])
    assert report.verified, report.problems
    assert report.run_id == first and report.seq == bundle["entry"]["seq"] and len(bundle["inclusion"]["path"]) >= 1

    def edited(change) -> list[str]:
        copy = json.loads(json.dumps(bundle))
        change(copy)
        return list(verify_bundle(copy, [public]).problems)

    def flip_verdict(b):
        b["certificate"]["content"]["verdict"] = "FAIL"

    def reseal_the_edit(b):  # an editor who also recomputes both digests
        b["certificate"]["content"]["verdict"] = "FAIL"
        b["certificate"]["content_sha256"] = canonical_sha256(b["certificate"]["content"])
        b["certificate"]["results_sha256"] = results_sha256(b["certificate"]["content"])

    def move_in_time(b):
        b["entry"]["recorded_at"] = "2020-01-01T00:00:00.000000Z"

    def other_sibling(b):
        b["inclusion"]["path"][0] = "00" * 32

    def claim_another_run(b):
        b["entry"]["run_id"] = second

    assert any("content_sha256" in p for p in edited(flip_verdict))
    assert edited(reseal_the_edit) == ["the certificate is not the one recorded in the entry (its canonical SHA-256 "
                                       "differs)"]
    assert any("does not lead to the signed Merkle root" in p for p in edited(move_in_time))
    assert any("does not lead to the signed Merkle root" in p for p in edited(other_sibling))
    assert any("not the certificate of run" in p for p in edited(claim_another_run))
    other_private, other_public = generate_key_pair()
    with pytest.raises(SignatureVerificationError, match="no signature by key"):
        verify_bundle(bundle, [load_public_key(other_public)])
    with pytest.raises(BundleError, match="not a certa bundle"):
        verify_bundle({"certificate": {}}, [public])


def test_a_checkpoint_of_another_ledger_cannot_prove_anything(small_spec: Path, tmp_path: Path, keys):
    private, _ = keys
    with Ledger.open(tmp_path / "a.db") as a, Ledger.open(tmp_path / "b.db") as b:
        run(small_spec, ledger=a)
        run(small_spec, ledger=a)
        envelope = _signed_head(a, private)
        run_b = run(small_spec, ledger=b).run_id
        with pytest.raises(LedgerError, match="another ledger"):
            build_bundle(b, run_b, envelope)


def test_prove_reads_the_merkle_nodes_and_refuses_edited_ones(small_spec: Path, tmp_path: Path, keys):
    """``build_bundle`` takes the root and path from ``merkle_nodes``: the same bundle as from every entry
    hashed, and an edited or deleted node on the path (or under the root) is refused, naming what to run."""
    from certa.ledger.bundle import _levels_matching

    private, public = keys
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        first = run(small_spec, ledger=ledger).run_id
        run(small_spec, ledger=ledger)
        envelope = _signed_head(ledger, private)
        bundle = build_bundle(ledger, first, envelope)
        entry = bundle["entry"]["seq"]
        claimed = open_checkpoint(envelope, [public])
        levels = _levels_matching(ledger, claimed)  # the whole tree, as for a ledger without merkle_nodes
        assert bundle["inclusion"]["path"] == [node.hex() for node in merkle.path_from_levels(entry - 1, levels)]
        assert verify_bundle(bundle, [public]).verified
    leaf_seq = ((entry - 1) ^ 1) + 1  # the path's first node is this entry's leaf (schema 6 stores no leaves)
    sibling = (1, ((entry - 1) >> 1) ^ 1)  # the path's second node, a stored one
    assert sibling in merkle.path_nodes(entry - 1, claimed.seq)
    root_part = merkle.frontier_nodes(claimed.seq)[0]  # the largest node under the root
    edits = [("UPDATE merkle_nodes SET hash = ? WHERE level = ? AND position = ?", ("ab" * 32, *sibling),
              LedgerIntegrityError, "does not lead to the checkpoint's root"),
             ("UPDATE merkle_nodes SET hash = ? WHERE level = ? AND position = ?", ("ab" * 32, *root_part),
              LedgerIntegrityError, "merkle_nodes was edited"),
             ("DELETE FROM merkle_nodes WHERE level = ? AND position = ?", sibling,
              LedgerIntegrityError, f"merkle_nodes has no row \\(level 1, position {sibling[1]}\\)"),
             ("UPDATE entries SET entry_hash = ? WHERE seq = ?", ("ab" * 32, leaf_seq),
              LedgerIntegrityError, "does not lead to the checkpoint's root"),
             ("UPDATE entries SET entry_hash = ? WHERE seq = ?", ("not hex", leaf_seq),
              LedgerIntegrityError, f"entry {leaf_seq}'s entry_hash is no SHA-256 hex digest"),
             ("DELETE FROM entries WHERE seq = ?", (leaf_seq,),
              LedgerIntegrityError, f"the ledger has no entry {leaf_seq} although its head is entry")]
    for number, (statement, params, error, message) in enumerate(edits):
        copy = tmp_path / f"edited-{number}.db"  # a fresh name: no -wal file of an earlier copy applies
        copy.write_bytes(db.read_bytes())
        with sqlite3.connect(copy) as conn:
            conn.execute(statement, params)
        with Ledger.open(copy) as ledger, pytest.raises(error, match=message):
            build_bundle(ledger, first, envelope)


def test_a_checkpoint_signed_by_two_keys_needs_both_when_both_are_required(keys):
    private, public = keys
    other_private_pem, other_public_pem = generate_key_pair()
    other_private, other_public = load_private_key(other_private_pem), load_public_key(other_public_pem)
    one = sign_checkpoint([private], 3, HEAD_HASH, ROOT_HASH)
    two = add_signature(one, other_private, PAYLOAD_TYPE)
    assert open_checkpoint(json.dumps(two), [public, other_public]).key_ids == (key_id(public), key_id(other_public))
    assert open_checkpoint(json.dumps(two), [other_public]).seq == 3
    with pytest.raises(SignatureVerificationError, match="no signature by key"):
        open_checkpoint(json.dumps(one), [public, other_public])
    with pytest.raises(SigningError, match="already signed"):
        add_signature(two, private, PAYLOAD_TYPE)
    swapped = {**two, "signatures": [two["signatures"][0], {**two["signatures"][1], "sig": two["signatures"][0]["sig"]}]}
    with pytest.raises(SignatureVerificationError, match="does not verify"):
        open_checkpoint(json.dumps(swapped), [public, other_public])
    with pytest.raises(SigningError, match="at least one public key"):
        open_checkpoint(json.dumps(two), [])



def test_cosigning_needs_every_existing_signature_to_verify(keys):
    """``cosign_checkpoint`` adds a signature only to a checkpoint whose every signature verifies against the
    signers' public keys it is given: never to a forged, altered or unattributable one (exit 1, one line)."""
    private, public = keys
    officer_private_pem, officer_public_pem = generate_key_pair()
    officer, officer_public = load_private_key(officer_private_pem), load_public_key(officer_public_pem)
    signed = sign_checkpoint([private], 3, HEAD_HASH, ROOT_HASH)
    cosigned = cosign_checkpoint(json.dumps(signed), [officer], [public])
    assert open_checkpoint(json.dumps(cosigned), [public, officer_public]).key_ids == (key_id(public),
                                                                                      key_id(officer_public))
    other = sign_checkpoint([private], 4, HEAD_HASH, ROOT_HASH)
    forged = {**signed, "signatures": [{**signed["signatures"][0], "sig": other["signatures"][0]["sig"]}]}
    altered = {**signed, "payload": other["payload"]}
    unsigned = {**signed, "signatures": []}
    for envelope, refusal in ((forged, "does not verify"), (altered, "does not verify"),
                              (unsigned, "no signature by key")):
        with pytest.raises(SignatureVerificationError, match=refusal) as refused:
            cosign_checkpoint(json.dumps(envelope), [officer], [public])
        assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    # a valid signature next to one nobody can check (or a second, forged one under the same key id)
    stranger = add_signature(signed, load_private_key(generate_key_pair()[0]), PAYLOAD_TYPE)
    duplicated = {**signed, "signatures": [*signed["signatures"], forged["signatures"][0]]}
    for envelope, refusal in ((stranger, "by none of the public keys given"), (duplicated, "does not verify")):
        with pytest.raises(SignatureVerificationError, match=refusal):
            cosign_checkpoint(json.dumps(envelope), [officer], [public])
    with pytest.raises(SigningError, match="at least one public key"):
        cosign_checkpoint(json.dumps(signed), [officer], [])


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                           | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3),
                           max_leaves=6)


@pytest.fixture(scope="module")
def sample_bundle(tmp_path_factory, keys):
    from tests.conftest import SMALL_SPEC, columns_to_csv_bytes, window_columns
    folder = tmp_path_factory.mktemp("bundle")
    base, subj = window_columns(60, seed=3)
    (folder / "data").mkdir()
    (folder / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(base))
    (folder / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subj))
    (folder / "spec.yaml").write_text(SMALL_SPEC, encoding="utf-8")
    with Ledger.open(folder / "l.db") as ledger:
        run_id = run(folder / "spec.yaml", ledger=ledger).run_id
        record_review(ledger, run_id, reviewer="r", decision="approved", note="n", private_keys=[keys[0]])
        return json.loads(json.dumps(build_bundle(ledger, run_id, _signed_head(ledger, keys[0]))))


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


BUNDLE_INTEGERS = {("certa_bundle",), ("entry", "seq"), ("inclusion", "leaf_index"), ("inclusion", "tree_size")}


def _integer_member(path: tuple) -> bool:
    """One of the bundle's own integer members: the certificate's part's, or a review's (reviews/N/...)."""
    return path in BUNDLE_INTEGERS or (path[:1] == ("reviews",) and path[2:] in BUNDLE_INTEGERS)


@pytest.mark.slow  # a 300-example fuzz, about 1 s; tests/foundation/test_hostile_documents.py covers bundles in the unit tier
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_verify_bundle_never_crashes_on_a_mangled_bundle(sample_bundle, keys, data):
    """Any value anywhere replaced by arbitrary JSON: a report (not verified unless nothing changed) or a
    BundleError or a SigningError, never another exception."""
    bundle = json.loads(json.dumps(sample_bundle))
    paths = list(_paths(bundle))[1:]
    path = data.draw(st.sampled_from(paths))
    replacement = data.draw(JSON_VALUES)
    target = bundle
    for key in path[:-1]:
        target = target[key]
    try:  # the same canonical JSON (e.g. 34 and 34.0) is the same bundle, except in its own integer members
        unchanged = canonical_sha256(target[path[-1]]) == canonical_sha256(replacement) \
            and (not _integer_member(path) or type(replacement) is int)
    except ValueError:
        unchanged = False
    target[path[-1]] = replacement
    try:
        report = verify_bundle(bundle, [keys[1]])
    except (BundleError, SigningError):
        assert not unchanged
        return
    assert report.verified == unchanged, (path, replacement, report.problems)


def test_the_root_a_checkpoint_signs_is_read_from_stored_nodes_and_equals_the_whole_trees(small_spec: Path,
                                                                                           tmp_path: Path) -> None:
    from certa.ledger.bundle import ledger_root

    with Ledger.open(tmp_path / "l.db") as ledger:
        for _ in range(5):
            run(small_spec, ledger=ledger)
        hashes = ledger.entry_hashes(ledger.head()[0])
        assert ledger.has_merkle_nodes and len(hashes) > 50  # trees of every shape up to 2^5 leaves and beyond
        for seq in range(len(hashes) + 1):
            assert ledger_root(ledger, seq) == merkle.root_hash(merkle.entry_leaves(hashes[:seq])), seq
