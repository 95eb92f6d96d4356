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
from certa.engine.services.attestation import (PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE, TEST_RESULT_TYPE,
                                               attest_certificate, certificate_statement, certificate_test_result,
                                               verify_attestation)
from certa.engine.services.eval_result import EVAL_RESULT_TYPE, certificate_eval_result
from certa.engine.foundation.canonical import canonical_bytes, canonical_sha256
from certa.engine.core.certificate import results_sha256
from certa.engine.foundation.errors import AttestationError, SignatureVerificationError
from certa.engine.foundation.signing import (generate_key_pair, key_id, load_private_key, load_public_key,
                                            seal_envelope)


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
    # the Test Result shape names the same files, and in-toto's bindings and securesystemslib read it
    statement = _independent_statement(attest_certificate(certificate, [keys[0]], "test-result"), keys[1])
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == subjects
    # the eval-result's model is the subject model folder, its dataset the one data input beside it (text)
    inputs = {item["name"]: item for item in certificate["content"]["inputs"]}
    predicate = _independent_statement(attest_certificate(certificate, [keys[0]], "eval-result"), keys[1])["predicate"]
    assert (predicate["model"], predicate["dataset"], predicate["sampleSize"]) == (
        {"name": "input:subject", "digest": {"sha256": inputs["subject"]["sha256"]}},
        {"name": "input:text", "digest": {"sha256": inputs["text"]["sha256"]}}, inputs["text"]["rows"])


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A PASS certificate of the small spec (one gate, no-regression)."""
    from tests.conftest import small_spec_folder
    return run(small_spec_folder(tmp_path_factory.mktemp("attested"))).certificate


def _independent_statement(envelope: dict, public) -> dict:
    """The statement of ``envelope`` as securesystemslib's DSSE verifier and in-toto's own Statement bindings read
    it: neither is certa's code."""
    from google.protobuf import json_format
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    read = Envelope.from_dict(json.loads(json.dumps(envelope)))  # from_dict edits the dict it reads
    assert list(read.verify([SSlibKey.from_crypto(public, keyid=key_id(public))], 1)) == [key_id(public)]
    statement = json.loads(read.payload)
    Statement.copy_from_pb(json_format.ParseDict(statement, statement_pb2.Statement())).validate()
    return statement


def test_a_test_result_attestation_is_read_by_in_toto_and_securesystemslib(certificate, keys):
    """Why: certa's predicate type was private; a policy engine read nothing it knew. in-toto's Test Result
    predicate, checked by in-toto's own protobuf bindings (unknown fields refused) and securesystemslib's DSSE."""
    from google.protobuf import json_format
    from in_toto_attestation.predicates.test_result.v0.test_result_pb2 import TestResult
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    private, public = keys
    envelope = attest_certificate(certificate, [private], "test-result")
    statement = _independent_statement(envelope, public)
    assert statement["predicateType"] == TEST_RESULT_TYPE == "https://in-toto.io/attestation/test-result/v0.1"
    assert statement["subject"] == certificate_statement(certificate)["subject"]
    result = json_format.ParseDict(statement["predicate"], TestResult())
    run_id = certificate["issued"]["run_id"]
    assert (result.result, list(result.passed_tests), list(result.warned_tests), list(result.failed_tests)) == (
        "PASSED", ["no-regression"], [], [])
    assert [(c.name, c.uri, dict(c.digest)) for c in result.configuration] == [
        ("spec:small-paired", "", {"sha256": certificate["content"]["spec"]["sha256"]}),
        (f"certificate:{run_id}", f"urn:certa:run:{run_id}", {"sha256": certificate["content_sha256"]})]
    other = load_public_key(generate_key_pair()[1])
    with pytest.raises(VerificationError):
        Envelope.from_dict(json.loads(json.dumps(envelope))).verify([SSlibKey.from_crypto(other, keyid=key_id(other))], 1)
    # the certificate predicate is an in-toto Statement v1 too
    assert _independent_statement(attest_certificate(certificate, [private]), public)["predicate"] == certificate


@pytest.mark.parametrize(("outcomes", "result"), [(("PASS", "INCONCLUSIVE"), "WARNED"),
                                                   (("FAIL", "INCONCLUSIVE"), "FAILED"), (("PASS", "PASS"), "PASSED")])
def test_the_test_result_maps_the_verdict_and_lists_each_gate_under_its_outcome(certificate, outcomes, result):
    edited = json.loads(json.dumps(certificate))
    gate = edited["content"]["gates"][0]
    edited["content"]["gates"] = [{**gate, "id": f"g{i}", "outcome": o} for i, o in enumerate(outcomes)]
    edited["content"]["verdict"] = {"WARNED": "INCONCLUSIVE", "FAILED": "FAIL", "PASSED": "PASS"}[result]
    predicate = certificate_test_result(edited)
    assert predicate["result"] == result
    assert {key: predicate[key] for key in ("passedTests", "warnedTests", "failedTests")} == {
        key: [f"g{i}" for i, o in enumerate(outcomes) if o == outcome]
        for key, outcome in (("passedTests", "PASS"), ("warnedTests", "INCONCLUSIVE"), ("failedTests", "FAIL"))}


def test_certa_verifies_a_test_result_attestation_and_refuses_another_predicate(certificate, keys):
    private, public = keys
    text = json.dumps(attest_certificate(certificate, [private], "test-result"))
    spec_bytes = json.dumps(certificate["content"]["spec"]).encode()  # not the spec file: refused by digest
    assert "none of the attested subjects" in verify_attestation(text, [public], files={"s": spec_bytes}).problems[0]
    report = verify_attestation(text, [public])
    assert (report.verified, report.verdict, report.run_id, report.content_sha256) == (
        True, "PASS", certificate["issued"]["run_id"], certificate["content_sha256"])
    assert report.as_json()["predicate_type"] == TEST_RESULT_TYPE
    statement = certificate_statement(certificate, "test-result")
    for broken in ({"result": "MAYBE"}, {"configuration": []}, {"failedTests": "g1"}):
        forged = json.dumps(seal_envelope(PAYLOAD_TYPE, canonical_bytes(
            {**statement, "predicate": {**statement["predicate"], **broken}}), [private]))
        with pytest.raises(AttestationError, match="not a Test Result"):
            verify_attestation(forged, [public])
    other_type = json.dumps(seal_envelope(PAYLOAD_TYPE, canonical_bytes(
        {**statement, "predicateType": "https://slsa.dev/provenance/v1"}), [private]))
    with pytest.raises(AttestationError, match="not an in-toto statement"):
        verify_attestation(other_type, [public])


def test_cli_attest_test_result_and_its_verification_says_the_certificate_is_only_named(small_spec: Path,
                                                                                         tmp_path: Path):
    runner = CliRunner()
    db = str(tmp_path / "l.db")
    made = json.loads(runner.invoke(main, ["keygen", "--out-dir", str(tmp_path / "k"), "--json"]).stdout)
    assert runner.invoke(main, ["run", str(small_spec), "--ledger", db]).exit_code == 0
    out = tmp_path / "run.test-result.json"
    signed = runner.invoke(main, ["attest", "latest", "--key", made["private_key"], "--predicate", "test-result",
                                  "-o", str(out), "--ledger", db])
    assert signed.exit_code == 0, signed.output
    checked = runner.invoke(main, ["verify-attestation", str(out), "--public-key", made["public_key"], "--file",
                                   str(small_spec)])
    assert checked.exit_code == 0 and checked.output.startswith("VERIFIED: certificate ")
    assert "names the certificate by this digest but does not carry it" in checked.output
    assert "is spec:small-paired" in checked.output
    refused = runner.invoke(main, ["attest", "latest", "--key", made["private_key"], "--predicate", "eval",
                                   "--ledger", db])
    assert refused.exit_code == 2 and "Traceback" not in refused.output


_EVAL_RESULT_SCHEMA = {
    "$comment": "the predicate's required fields as the eval-result proposal states them (in-toto/attestation "
                "pull request #575, spec/predicates/eval-result.md v0.1), written from its text for this test",
    "type": "object",
    "required": ["evaluator", "evaluatedAt", "suite", "claims", "sampleSize", "assuranceLevel", "subjectProfile"],
    "properties": {
        "evaluator": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "format": "uri"}}},
        "evaluatedAt": {"type": "string", "format": "date-time"},
        "suite": {"type": "object", "required": ["name", "version"],
                  "properties": {"name": {"type": "string"}, "version": {"type": "string"}}},
        "claims": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["metric", "comparator", "threshold", "passed"],
            "properties": {"metric": {"type": "string"}, "comparator": {"enum": [">=", ">", "<=", "<"]},
                           "threshold": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?$"},
                           "passed": {"type": "boolean"}}}},
        "sampleSize": {"type": "integer", "minimum": 0},
        "assuranceLevel": {"enum": ["self_attested", "third_party", "reproduced", "enclave_attested"]},
        "subjectProfile": {"enum": ["receipt", "public-model", "release-gate"]},
        "harness": {"type": "object", "required": ["name", "version"]},
        "evidence": {"type": "array", "items": {"type": "object", "required": ["digest"]}},
    },
    # exactly one of commitments.model and model, and of commitments.dataset and dataset
    "allOf": [{"oneOf": [{"required": [key]}, {"required": ["commitments"],
                                                "properties": {"commitments": {"required": [key]}}}]}
              for key in ("model", "dataset")],
}


def _three_gates(certificate: dict) -> dict:
    """The certificate with a PASS (max), a FAIL (min), an INCONCLUSIVE (interval, two bounds) and an equals gate;
    the verdict FAIL."""
    edited = json.loads(json.dumps(certificate))
    metric = edited["content"]["gates"][0]["metric"]
    edited["content"]["gates"] = [
        {"id": "ratio-max", "metric": metric, "value": 1.0296, "threshold": {"max": 1.05}, "passed": True,
         "reason": "1.0296 <= 1.05", "outcome": "PASS"},
        {"id": "tiny-min", "metric": "ratio.token_perplexity.ci[0]", "value": 0.0000043,
         "threshold": {"min": 0.00001}, "passed": False, "reason": "4.3e-06 < 1e-05", "outcome": "FAIL"},
        {"id": "equivalence", "metric": "ratio.token_perplexity.display_ci", "value": [0.98, 1.03],
         "threshold": {"interval": {"min": 0.99, "max": 1.01}}, "passed": False, "reason": "straddles",
         "outcome": "INCONCLUSIVE"},
        {"id": "basis", "metric": "ratio.token_perplexity.unit", "value": "tokens", "threshold": {"equals": "tokens"},
         "passed": True, "reason": "'tokens' == 'tokens'", "outcome": "PASS"}]
    edited["content"]["verdict"] = "FAIL"
    return edited


def test_an_eval_result_attestation_is_read_by_in_toto_securesystemslib_and_the_proposal_schema(certificate, keys):
    """Why: the issue asks for the proposed eval-result predicate (claims metric, comparator, threshold, passed:
    certa's gates). Hand-checked: a PASS, a FAIL and an INCONCLUSIVE gate become these claims; the envelope is
    checked by securesystemslib, the statement and every descriptor by in-toto's bindings, the predicate by a JSON
    schema of the proposal's fields (jsonschema)."""
    import jsonschema
    from google.protobuf import json_format
    from in_toto_attestation.v1 import resource_descriptor_pb2
    from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor

    private, public = keys
    edited = _three_gates(certificate)
    statement = _independent_statement(attest_certificate(edited, [private], "eval-result"), public)
    assert statement["predicateType"] == EVAL_RESULT_TYPE == "https://in-toto.io/attestation/eval-result/v0.1"
    assert statement["subject"] == certificate_statement(certificate)["subject"]
    predicate = statement["predicate"]
    jsonschema.validate(predicate, _EVAL_RESULT_SCHEMA, format_checker=jsonschema.FormatChecker())
    metric = certificate["content"]["gates"][0]["metric"]
    assert predicate["claims"] == [
        {"metric": metric, "comparator": "<=", "threshold": "1.05", "passed": True, "gate": "ratio-max",
         "outcome": "PASS"},
        {"metric": "ratio.token_perplexity.ci[0]", "comparator": ">=", "threshold": "0.00001", "passed": False,
         "gate": "tiny-min", "outcome": "FAIL"},
        {"metric": "ratio.token_perplexity.display_ci", "comparator": ">=", "threshold": "0.99", "passed": False,
         "gate": "equivalence", "outcome": "INCONCLUSIVE"},
        {"metric": "ratio.token_perplexity.display_ci", "comparator": "<=", "threshold": "1.01", "passed": False,
         "gate": "equivalence", "outcome": "INCONCLUSIVE"}]
    assert (predicate["verdict"], predicate["gates"]) == (
        "FAIL", {"ratio-max": "PASS", "tiny-min": "FAIL", "equivalence": "INCONCLUSIVE", "basis": "PASS"})
    subject_sha = {item["name"]: item["sha256"] for item in certificate["content"]["inputs"]}["subject"]
    assert predicate["model"] == predicate["dataset"] == {"name": "input:subject", "digest": {"sha256": subject_sha}}
    assert (predicate["sampleSize"], predicate["inputRows"]) == (60, {"baseline": 60, "subject": 60})
    assert (predicate["assuranceLevel"], predicate["subjectProfile"]) == ("self_attested", "public-model")
    run_id = certificate["issued"]["run_id"]
    assert predicate["evidence"] == [{"name": f"certificate:{run_id}", "uri": f"urn:certa:run:{run_id}",
                                      "digest": {"sha256": certificate["content_sha256"]},
                                      "mediaType": "application/json"}]
    assert predicate["suite"] == {"name": "small-paired",
                                  "version": f"sha256:{certificate['content']['spec']['sha256']}"}
    assert predicate["evaluatedAt"] == certificate["issued"]["time_utc"]
    for descriptor in (predicate["model"], predicate["dataset"], *predicate["evidence"]):
        ResourceDescriptor.copy_from_pb(json_format.ParseDict(descriptor, resource_descriptor_pb2.ResourceDescriptor())
                                        ).validate()
    # certa reads it back: the verdict and the certificate it names by digest
    report = verify_attestation(json.dumps(attest_certificate(edited, [private], "eval-result")), [public])
    assert (report.verified, report.predicate, report.verdict, report.run_id, report.content_sha256) == (
        True, "eval-result", "FAIL", run_id, certificate["content_sha256"])


def test_an_eval_result_needs_a_bounded_gate_and_inputs_it_can_name(certificate):
    edited = json.loads(json.dumps(certificate))
    edited["content"]["gates"] = [_three_gates(certificate)["content"]["gates"][-1]]  # equals only: no claim form
    with pytest.raises(AttestationError, match="no gate of this certificate has a numeric bound"):
        certificate_eval_result(edited)
    with pytest.raises(AttestationError, match=r"no input 'model' with a digest \(inputs: baseline, subject\)"):
        certificate_eval_result(certificate, model="model")
    named = certificate_eval_result(certificate, model="baseline", dataset="subject")
    assert (named["model"]["name"], named["dataset"]["name"]) == ("input:baseline", "input:subject")


def test_certa_refuses_an_eval_result_of_another_shape(certificate, keys):
    private, public = keys
    statement = certificate_statement(certificate, "eval-result")
    for broken in ({"claims": []}, {"claims": [{"metric": "m", "comparator": "==", "threshold": "1", "passed": True}]},
                   {"claims": [{"metric": "m", "comparator": ">=", "threshold": 1.05, "passed": True}]},
                   {"sampleSize": "60"}, {"model": {"name": "m"}}, {"evidence": []}, {"verdict": "MAYBE"}):
        forged = json.dumps(seal_envelope(PAYLOAD_TYPE, canonical_bytes(
            {**statement, "predicate": {**statement["predicate"], **broken}}), [private]))
        with pytest.raises(AttestationError, match="not an eval-result"):
            verify_attestation(forged, [public])


@pytest.mark.parametrize(("outcome", "level"), [("REPRODUCED", "reproduced"), ("DIVERGED", "self_attested"),
                                                ("CANNOT REPLAY", "self_attested")])
def test_the_newest_replay_sets_the_assurance_level_and_is_evidence(certificate, outcome, level):
    from certa.ledger import EntryRow

    replay = EntryRow(seq=9, run_id=certificate["issued"]["run_id"], kind="replay", recorded_at="2026-11-29T10:00:00Z",
                      payload=json.dumps({"outcome": outcome}), payload_sha256="", prev_hash="", entry_hash="ab" * 32)
    predicate = certificate_eval_result(certificate, replay)
    assert predicate["assuranceLevel"] == level
    assert predicate["evidence"][1] == {"name": "replay:9", "uri": "urn:certa:ledger-entry:9",
                                        "digest": {"sha256": "ab" * 32},
                                        "annotations": {"outcome": outcome, "recordedAt": "2026-11-29T10:00:00Z"}}
    never = certificate_eval_result(certificate)
    assert never["assuranceLevel"] == "self_attested" and len(never["evidence"]) == 1


@pytest.mark.slow
def test_cli_attest_eval_result_says_reproduced_after_a_replay(small_spec: Path, tmp_path: Path):
    """Why: the predicate carries the replay status: a replay that REPRODUCED the results makes the assurance
    level ``reproduced`` and is named as evidence by its ledger entry hash (slow: it re-executes the run)."""
    from certa.ledger import Ledger

    runner = CliRunner()
    db = str(tmp_path / "l.db")
    made = json.loads(runner.invoke(main, ["keygen", "--out-dir", str(tmp_path / "k"), "--json"]).stdout)
    assert runner.invoke(main, ["run", str(small_spec), "--ledger", db]).exit_code == 0
    before = runner.invoke(main, ["attest", "latest", "--key", made["private_key"], "--predicate", "eval-result",
                                  "--json", "--ledger", db])
    assert before.exit_code == 0, before.output
    statement = json.loads(base64.b64decode(json.loads(before.stdout)["envelope"]["payload"]))
    assert statement["predicate"]["assuranceLevel"] == "self_attested" and len(statement["predicate"]["evidence"]) == 1
    assert runner.invoke(main, ["replay", "latest", "--ledger", db]).exit_code == 0
    out = tmp_path / "run.eval-result.json"
    after = runner.invoke(main, ["attest", "latest", "--key", made["private_key"], "--predicate", "eval-result",
                                 "-o", str(out), "--ledger", db])
    assert after.exit_code == 0, after.output
    predicate = json.loads(base64.b64decode(json.loads(out.read_text())["payload"]))["predicate"]
    with Ledger.open(db, create=False) as ledger:
        replay = [e for e in ledger.entries(kinds=["replay"])][-1]
    assert predicate["assuranceLevel"] == "reproduced"
    assert predicate["evidence"][1] == {"name": f"replay:{replay.seq}", "uri": f"urn:certa:ledger-entry:{replay.seq}",
                                        "digest": {"sha256": replay.entry_hash},
                                        "annotations": {"outcome": "REPRODUCED", "recordedAt": replay.recorded_at}}
    checked = runner.invoke(main, ["verify-attestation", str(out), "--public-key", made["public_key"]])
    assert checked.exit_code == 0 and "this eval-result attestation names the certificate by this digest" in checked.output
    wrong = runner.invoke(main, ["attest", "latest", "--key", made["private_key"], "--model", "subject",
                                 "--ledger", db])
    assert wrong.exit_code == 2 and "give --predicate eval-result" in wrong.output
