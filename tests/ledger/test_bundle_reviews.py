"""Bundles carry the run's reviews (format 2): each review entry with its payload (a signed review's DSSE envelope
and its signers' keys) and its own RFC 6962 audit path to the bundle's checkpoint; ``verify-bundle`` proves each
included, checks it as ``certa verify`` checks a review, and gives the same ``ReviewRecord``s as the ledger. A
format-1 bundle written before (``tests/data/bundle-format1``) verifies exactly as it did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.foundation.errors import BundleError
from certa.engine.foundation.signing import generate_key_pair, key_id, load_private_key, load_public_key
from certa.engine.services.audit import verify_bundle, verify_bundle_file
from certa.engine.services.reviews import record_review, review_payload, reviews_of
from certa.ledger import Ledger, merkle
from certa.ledger.bundle import build_bundle
from certa.ledger.checkpoint import sign_checkpoint

FORMAT1 = Path(__file__).resolve().parent.parent / "data" / "bundle-format1"


@pytest.fixture(scope="module")
def keys():
    """(checkpoint signer, reviewer): each a (private, public) pair."""
    pairs = [generate_key_pair() for _ in range(2)]
    return [(load_private_key(private), load_public_key(public)) for private, public in pairs]


def _signed_head(ledger: Ledger, private) -> str:
    seq, digest = ledger.head()
    return json.dumps(sign_checkpoint([private], seq, digest,
                                      merkle.root_hash(merkle.entry_leaves(ledger.entry_hashes(seq))).hex()))


@pytest.fixture
def reviewed(small_spec: Path, tmp_path: Path, keys):
    """A ledger with two runs; the first reviewed three times before a checkpoint (signed approval, unsigned
    comment, and a review signed for the second run's certificate) and once after it."""
    (signer, _), (reviewer, _) = keys
    with Ledger.open(tmp_path / "l.db") as ledger:
        first = run(small_spec, ledger=ledger).run_id
        second = run(small_spec, ledger=ledger).run_id
        record_review(ledger, first, reviewer="alice@example.org", decision="approved", note="ok",
                      private_keys=[reviewer])
        record_review(ledger, first, reviewer="bob", decision="comment", note="read it", private_keys=[])
        ledger.record_note(first, "review", review_payload(  # a review signed for another run's certificate
            reviewer="mallory", decision="approved", note="", certificate=ledger.certificate(second),
            private_keys=[reviewer]))
        envelope = _signed_head(ledger, signer)
        record_review(ledger, first, reviewer="carol", decision="rejected", note="late", private_keys=[reviewer])
        yield ledger, first, envelope


def test_a_bundle_carries_each_review_before_its_checkpoint_checked_as_the_ledger_checks_it(reviewed, keys):
    ledger, first, envelope = reviewed
    (_, signer_public), (_, reviewer_public) = keys
    bundle = json.loads(json.dumps(build_bundle(ledger, first, envelope)))  # as written to a file
    assert bundle["certa_bundle"] == 2
    assert [r["payload"]["reviewer"] for r in bundle["reviews"]] == ["alice@example.org", "bob", "mallory"]
    checked = verify_bundle(bundle, [signer_public])
    assert checked.reviews == tuple(reviews_of(ledger, first)[:3])  # the very records the ledger path gives
    alice, bob, mallory = checked.reviews
    assert alice.signature_valid and alice.key_ids == (key_id(reviewer_public),)
    assert bob.signed is False and bob.problem is None
    assert mallory.signature_valid is False and "another certificate" in mallory.problem
    assert checked.problems == (f"review entry {mallory.seq}: {mallory.problem}",)  # a bad review fails the bundle
    assert checked.as_json()["reviews"][0]["reviewer"] == "alice@example.org"


def test_an_edited_moved_or_foreign_review_is_refused_by_name(reviewed, keys, small_spec: Path):
    ledger, first, envelope = reviewed
    (signer, signer_public), _ = keys
    bundle = json.loads(json.dumps(build_bundle(ledger, first, envelope)))
    bundle["reviews"] = bundle["reviews"][:2]  # alice (signed) and bob (unsigned)
    assert verify_bundle(bundle, [signer_public]).verified
    other = run(small_spec, ledger=ledger).run_id
    record_review(ledger, other, reviewer="dave", decision="approved", note="", private_keys=[])
    foreign = build_bundle(ledger, other, _signed_head(ledger, signer))["reviews"][0]

    def problems(change) -> list[str]:
        copy = json.loads(json.dumps(bundle))
        change(copy)
        return list(verify_bundle(copy, [signer_public]).problems)

    def edit_note(b):
        b["reviews"][1]["payload"]["note"] = "approved really"

    def reseal_note(b):  # the editor also rewrites the entry's payload digest
        from certa.ledger.chain import encode_payload
        edit_note(b)
        b["reviews"][1]["entry"]["payload_sha256"] = encode_payload(b["reviews"][1]["payload"])[1]

    def change_a_signed_decision(b):
        b["reviews"][0]["payload"]["decision"] = "rejected"

    def another_path(b):
        b["reviews"][0]["inclusion"]["path"][0] = "00" * 32

    def add_foreign(b):
        b["reviews"].append(foreign)

    seq = bundle["reviews"][1]["entry"]["seq"]
    assert problems(edit_note) == [f"review entry {seq}: the review is not the one recorded in the entry (its "
                                   "canonical SHA-256 differs)"]
    assert problems(reseal_note) == [f"review entry {seq}: the inclusion proof does not lead to the signed Merkle "
                                     "root: this entry is not part of the signed ledger"]
    assert any("not the one recorded" in p for p in problems(change_a_signed_decision))
    assert any("does not lead to the signed Merkle root" in p for p in problems(another_path))
    assert any(f"'review' entry of run {other}, not a review of run {first}" in p for p in problems(add_foreign))


def test_a_review_entry_of_another_run_is_not_a_review_of_this_one(reviewed, keys):
    ledger, first, envelope = reviewed
    (_, signer_public), _ = keys
    bundle = json.loads(json.dumps(build_bundle(ledger, first, envelope)))
    certificate_entry = {"entry": bundle["entry"], "inclusion": bundle["inclusion"], "payload": bundle["certificate"]}
    bundle["reviews"].append(certificate_entry)  # a proven entry, but the certificate's, not a review's
    problems = verify_bundle(bundle, [signer_public]).problems
    assert f"review entry {bundle['entry']['seq']}: the entry is a 'certificate' entry of run {first}, not a review " \
           f"of run {first}" in problems


def test_the_formats_are_told_apart_by_their_reviews(reviewed, keys):
    ledger, first, envelope = reviewed
    (_, signer_public), _ = keys
    bundle = json.loads(json.dumps(build_bundle(ledger, first, envelope)))
    with pytest.raises(BundleError, match="reviews"):
        verify_bundle({**bundle, "certa_bundle": 1}, [signer_public])
    with pytest.raises(BundleError, match="reviews"):
        verify_bundle({k: v for k, v in bundle.items() if k != "reviews"}, [signer_public])
    bundle["reviews"][0]["entry"]["seq"] = float(bundle["reviews"][0]["entry"]["seq"])
    with pytest.raises(BundleError, match=r"reviews/0/entry/seq: \d+\.0 is not an integer"):
        verify_bundle(bundle, [signer_public])


def test_a_format_1_bundle_written_before_reviews_verifies_exactly_as_it_did():
    public = load_public_key((FORMAT1 / "fixture.pub").read_bytes())
    verification = verify_bundle_file(FORMAT1 / "format1.bundle.json", [public])
    assert verification.verified and verification.reviews == ()
    before = json.loads((FORMAT1 / "format1.verified.json").read_text())
    now = verification.as_json()
    assert {k: now[k] for k in before} == before and (now["format"], now["reviews"]) == (1, None)
    runner = CliRunner()
    args = ["verify-bundle", str(FORMAT1 / "format1.bundle.json"), "--public-key", str(FORMAT1 / "fixture.pub")]
    printed = runner.invoke(main, args)
    assert printed.exit_code == 0 and printed.output == (FORMAT1 / "format1.verified.txt").read_text()


def test_verify_bundle_says_each_review_in_words_and_what_it_cannot_show(reviewed, keys, tmp_path: Path):
    ledger, first, envelope = reviewed
    (_, signer_public), _ = keys
    bundle = build_bundle(ledger, first, envelope)
    bundle["reviews"] = bundle["reviews"][:2]
    path, pub = tmp_path / "b.json", tmp_path / "signer.pub"
    path.write_text(json.dumps(bundle))
    from cryptography.hazmat.primitives import serialization
    pub.write_bytes(signer_public.public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo))
    printed = CliRunner().invoke(main, ["verify-bundle", str(path), "--public-key", str(pub)])
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert lines[0].startswith("VERIFIED: certificate ")
    assert lines[1] == "reviews: 2, each proven included in the same signed ledger as a review of this run"
    assert "approved, reviewer named 'alice@example.org' (signed by " in lines[2] and "verifies): ok" in lines[2]
    assert "comment, reviewer named 'bob' (unsigned): read it" in lines[3]
    assert lines[4].startswith("  not checked: that the bundle carries every review of the run")


def test_verify_checkpoint_says_what_it_checked_and_what_it_did_not(small_spec: Path, tmp_path: Path, keys):
    from certa.engine.services.audit import audit_ledger
    from certa.engine.services.presentation.terminal import ledger_audit_text
    (signer, signer_public), _ = keys
    with Ledger.open(tmp_path / "l.db") as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
        envelope = _signed_head(ledger, signer)
        signed_seq = ledger.head()[0]
        record_review(ledger, run_id, reviewer="bob", decision="comment", note="", private_keys=[])
        for incremental in (False, True):
            audit = audit_ledger(ledger, checkpoint=envelope.encode(), checkpoint_keys=[signer_public],
                                 since_checkpoint=incremental)
            printed = ledger_audit_text(audit)
            assert audit.ok and printed.splitlines()[1] == "checkpoint:"
            assert f"  checked: the signature of each given key on it, signed at {audit.checkpoint.signed_at}: key id(s) " \
                   f"{key_id(signer_public)}" in printed
            assert f"  checked: its head: entry {signed_seq}, entry hash {audit.checkpoint.entry_hash}: matches this " \
                   "ledger" in printed
            assert f"(tree size {signed_seq}), {audit.checkpoint.root_hash}: matches this ledger" in printed
            assert "  not checked: who holds the signing key(s)" in printed
            assert f"  not checked: entry {signed_seq + 1} is after the checkpoint, under no signature" in printed
            assert ("only through its signed root" in printed) is incremental
            checkpoint = audit.as_json()["checkpoint"]
            assert checkpoint["tree_size"] == signed_seq and len(checkpoint["checked"]) == 4
            assert checkpoint["not_checked"] == list(audit.checkpoint_checks()[1])
        assert audit_ledger(ledger).checkpoint_checks() == ((), ())


def _pem(public) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_show_renders_a_bundle_without_a_ledger_and_says_what_was_verified(reviewed, keys, tmp_path: Path):
    ledger, first, envelope = reviewed
    (_, signer_public), (_, reviewer_public) = keys
    bundle = build_bundle(ledger, first, envelope)
    bundle["reviews"] = bundle["reviews"][:1]  # alice's signed approval
    path, signer, other = tmp_path / "b.json", tmp_path / "signer.pub", tmp_path / "other.pub"
    path.write_text(json.dumps(bundle))
    signer.write_bytes(_pem(signer_public))
    other.write_bytes(_pem(reviewer_public))
    runner = CliRunner()
    plain = runner.invoke(main, ["show", str(path), "--ledger", str(tmp_path / "none.db")])
    assert plain.exit_code == 0 and not (tmp_path / "none.db").exists()  # no ledger read, none created
    assert plain.output.startswith(f"> Rendered from the bundle {path}, not from a ledger.\n>\n> NOT VERIFIED: no public "
                                   "key was given")
    assert "alice" not in plain.output  # an unproven review is not shown
    from_ledger = runner.invoke(main, ["show", first, "--ledger", str(ledger.url)]).output
    markdown, approval = from_ledger.split("## Approval\n", 1)  # the ledger's show ends with the run's approval
    verified = runner.invoke(main, ["show", str(path), "--public-key", str(signer)])
    assert verified.exit_code == 0 and verified.output.rstrip().endswith(markdown.rstrip())  # the same certificate
    assert "## Approval" not in verified.output and "not checked" in approval
    assert f"> Verified with key(s) {key_id(signer_public)}: the checkpoint they signed at " in verified.output
    assert f"> review entry {bundle['reviews'][0]['entry']['seq']}: approved, reviewer named 'alice@example.org' " \
           f"(signed by {key_id(reviewer_public)[:16]}…: verifies)" in verified.output
    as_json = json.loads(runner.invoke(main, ["show", str(path), "--public-key", str(signer), "--json"]).output)
    assert as_json["certificate"] == bundle["certificate"] and as_json["source"]["verified"] is True
    assert runner.invoke(main, ["show", str(path), "--public-key", str(other)]).exit_code == 1  # not its signer
    bundle["reviews"][0]["payload"]["note"] = "edited"
    path.write_text(json.dumps(bundle))
    refused = runner.invoke(main, ["show", str(path), "--public-key", str(signer)])
    assert refused.exit_code == 1 and refused.output.startswith("NOT VERIFIED: review entry ")
    report = runner.invoke(main, ["report", str(path), "--public-key", str(signer), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 1 and not (tmp_path / "r.html").exists()
    misused = runner.invoke(main, ["show", first, "--public-key", str(signer), "--ledger", str(ledger.url)])
    assert misused.exit_code == 2 and "--public-key verifies a bundle file" in misused.output
