"""in-toto attestations of certificates (certa.engine.services.attestation, ``certa attest`` / ``verify-attestation``)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.services.attestation import (PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE, attest_certificate,
                                certificate_statement, verify_attestation)
from certa.engine.foundation.canonical import canonical_bytes, canonical_sha256
from certa.engine.core.certificate import results_sha256
from certa.engine.foundation.errors import AttestationError, SignatureVerificationError
from certa.engine.foundation.signing import generate_key_pair, load_private_key, load_public_key, seal_envelope


@pytest.fixture(scope="module")
def keys():
    private_pem, public_pem = generate_key_pair()
    return load_private_key(private_pem), load_public_key(public_pem)


def test_the_statement_is_in_toto_v1_with_the_spec_and_inputs_as_subjects(small_spec: Path, keys):
    certificate = run(small_spec).certificate
    statement = certificate_statement(certificate)
    assert statement["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == PREDICATE_TYPE and statement["predicate"] == certificate
    data = small_spec.parent / "data"
    assert statement["subject"] == [
        {"name": "spec:small-paired", "digest": {"sha256": hashlib.sha256(small_spec.read_bytes()).hexdigest()}},
        {"name": "input:baseline", "digest": {"sha256": hashlib.sha256((data / "baseline.csv").read_bytes()).hexdigest()}},
        {"name": "input:subject", "digest": {"sha256": hashlib.sha256((data / "subject.csv").read_bytes()).hexdigest()}},
    ]
    envelope = attest_certificate(certificate, [keys[0]])
    assert envelope["payloadType"] == PAYLOAD_TYPE == "application/vnd.in-toto+json"
    assert base64.b64decode(envelope["payload"]) == canonical_bytes(statement)


def test_verification_checks_signature_certificate_subjects_and_local_files(small_spec: Path, keys):
    private, public = keys
    certificate = run(small_spec).certificate
    text = json.dumps(attest_certificate(certificate, [private]))
    data = small_spec.parent / "data"
    report = verify_attestation(text, [public], files={"subject.csv": (data / "subject.csv").read_bytes(),
                                                       "spec": small_spec.read_bytes()})
    assert report.verified and report.run_id == certificate["issued"]["run_id"] and report.verdict == "PASS"
    assert report.files == (("subject.csv", "input:subject"), ("spec", "spec:small-paired"))
    edited_data = verify_attestation(text, [public], files={"subject.csv": b"window_id,value\n"})
    assert not edited_data.verified and "none of the attested subjects" in edited_data.problems[0]

    other_public = load_public_key(generate_key_pair()[1])
    with pytest.raises(SignatureVerificationError, match="no signature by key"):
        verify_attestation(text, [other_public])

    # signed by the right key but inconsistent: a subject that the certificate does not record
    statement = certificate_statement(certificate)
    statement["subject"][1]["digest"]["sha256"] = "0" * 64
    forged = json.dumps(seal_envelope(PAYLOAD_TYPE, canonical_bytes(statement), [private]))
    assert verify_attestation(forged, [public]).problems == (
        "the statement's subjects are not the spec and inputs its certificate records",)
    # a certificate edited and re-hashed: its method identities or schema still catch what they can, and
    # the content hash catches the rest
    statement = certificate_statement(certificate)
    statement["predicate"]["content"]["verdict"] = "FAIL"
    forged = json.dumps(seal_envelope(PAYLOAD_TYPE, canonical_bytes(statement), [private]))
    assert any("content_sha256" in p for p in verify_attestation(forged, [public]).problems)
    statement["predicate"]["content_sha256"] = canonical_sha256(statement["predicate"]["content"])
    statement["predicate"]["results_sha256"] = results_sha256(statement["predicate"]["content"])
    resealed = json.dumps(seal_envelope(PAYLOAD_TYPE, canonical_bytes(statement), [private]))
    assert verify_attestation(resealed, [public]).verified  # a signer can attest anything: trust is in the key
    not_a_statement = json.dumps(seal_envelope(PAYLOAD_TYPE, b'{"_type": "x"}', [private]))
    with pytest.raises(AttestationError, match="not an in-toto statement"):
        verify_attestation(not_a_statement, [public])


def test_cli_attest_and_verify_attestation(small_spec: Path, tmp_path: Path):
    runner = CliRunner()
    db = str(tmp_path / "l.db")
    made = json.loads(runner.invoke(main, ["keygen", "--out-dir", str(tmp_path / "k"), "--json"]).stdout)
    assert runner.invoke(main, ["run", str(small_spec), "--ledger", db]).exit_code == 0
    out = tmp_path / "run.intoto.json"
    signed = runner.invoke(main, ["attest", "latest", "--key", made["private_key"], "-o", str(out), "--json",
                                  "--ledger", db])
    assert signed.exit_code == 0, signed.output
    assert [s["name"] for s in json.loads(signed.stdout)["subjects"]] == ["spec:small-paired", "input:baseline",
                                                                          "input:subject"]
    checked = runner.invoke(main, ["verify-attestation", str(out), "--public-key", made["public_key"], "--file",
                                   str(small_spec.parent / "data" / "baseline.csv"), "--json"])
    assert checked.exit_code == 0 and json.loads(checked.stdout)["files"][0]["subject"] == "input:baseline"
    spec_file = runner.invoke(main, ["verify-attestation", str(out), "--public-key", made["public_key"], "--file",
                                     str(small_spec)])
    assert spec_file.exit_code == 0 and "is spec:small-paired" in spec_file.output
    refused = runner.invoke(main, ["verify-attestation", str(out), "--public-key", made["public_key"], "--file", db])
    assert refused.exit_code == 1 and refused.output.startswith("NOT VERIFIED")
    out.write_text("{}")
    assert runner.invoke(main, ["verify-attestation", str(out), "--public-key", made["public_key"]]).exit_code == 2


@pytest.mark.models
def test_a_model_runs_attestation_names_each_model_file_so_a_weights_file_verifies(example_runs, keys):
    """Why: an attestation named a model only by certa's manifest digest; whoever held ``model.safetensors``
    could not check it was the file certified."""
    from certa.ledger import Ledger

    db, runs = example_runs
    with Ledger.open(str(db), create=False) as ledger:
        certificate = ledger.certificate(runs["model-perplexity"])
    subjects = {s["name"]: s["digest"]["sha256"] for s in certificate_statement(certificate)["subject"]}
    weights = Path(__file__).resolve().parents[2] / "specs" / "model-perplexity" / "models" / "subject" / \
        "model.safetensors"
    assert subjects["input:subject/model.safetensors"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert {"input:baseline/config.json", "input:baseline/tokenizer.json"} <= set(subjects)
    report = verify_attestation(json.dumps(attest_certificate(certificate, [keys[0]])), [keys[1]],
                                files={"weights": weights.read_bytes()})
    assert report.verified and report.files == (("weights", "input:subject/model.safetensors"),)
