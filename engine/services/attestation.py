"""in-toto attestations of certificates: a signed statement that names the spec and data a certificate is
about, so that supply-chain tooling (and ``certa verify-attestation``) can check it without certa's ledger.

An attestation is an in-toto Statement v1 (https://github.com/in-toto/attestation, spec/v1/statement.md)

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "spec:<spec name>", "digest": {"sha256": <spec SHA-256>}},
                 {"name": "input:<input name>", "digest": {"sha256": <input file SHA-256>}}, …,
                 {"name": "input:<model input>/<file>", "digest": {"sha256": <the file's SHA-256>}}, …],
     "predicateType": "urn:certa:predicate:certificate:1",
     "predicate": <the certificate, exactly as recorded>}

serialised as RFC 8785 canonical JSON and signed in a DSSE v1 envelope of payload type
``application/vnd.in-toto+json`` (``certa.engine.foundation.signing``; in-toto's envelope convention). The subjects are the
digests the certificate itself records (``content.spec.sha256``, ``content.inputs[].sha256``, and for a model
folder each file of ``content.inputs[].files``, content format 3), so whoever holds a data file or a model's
``model.safetensors`` can check that it is one the certificate is about. Verification checks every required
signature, the statement's shape, the certificate (schema, ``content_sha256``, method identities), that
the subjects are exactly the certificate's digests, and optionally local files against the subjects.

``predicate="test-result"`` (``certa attest --predicate test-result``) signs the same subjects with in-toto's vetted
Test Result predicate (https://github.com/in-toto/attestation, spec/predicates/test-result.md; predicate type
``https://in-toto.io/attestation/test-result/v0.1``), which policy engines read without knowing certa::

    {"result": "PASSED" | "WARNED" | "FAILED",            # the verdict PASS | INCONCLUSIVE | FAIL
     "configuration": [{"name": "spec:<spec name>", "digest": {"sha256": <spec SHA-256>}},
                       {"name": "certificate:<run id>", "uri": "urn:certa:run:<run id>",
                        "digest": {"sha256": <content_sha256>}}],
     "passedTests": [<id of each PASS gate>], "warnedTests": [<INCONCLUSIVE>], "failedTests": [<FAIL>]}

It carries no certificate, only the certificate's ``content_sha256``: verifying it checks every signature, the
statement's and predicate's shape, and local files against the subjects; the certificate itself is checked with
``certa verify-bundle`` (or ``certa verify``) and matched by that digest.

``predicate="eval-result"`` (``certa attest --predicate eval-result``) signs the same subjects with the proposed,
unmerged in-toto eval-result predicate (``certa.engine.services.eval_result``: the gates as threshold claims, the
sample size, the model and dataset inputs, the replay status); it too names the certificate by its digest only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.core.gates import FAIL, INCONCLUSIVE, OUTCOMES, PASS
from certa.engine.foundation.signing import open_envelope, seal_envelope
from certa.engine.services.audit import check_certificate, newest_replay
from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import AttestationError
from certa.engine.foundation.json_read import parse_document
from certa.engine.services.documents import document_text, save_document
from certa.engine.services.eval_result import (EVAL_RESULT_TYPE, certificate_eval_result, certificate_reference,
                                               eval_result_fields, named_certificate)

if TYPE_CHECKING:
    from certa.ledger import EntryRow, Ledger

__all__ = ["STATEMENT_TYPE", "PREDICATE_TYPE", "TEST_RESULT_TYPE", "PREDICATES", "PAYLOAD_TYPE", "AttestationReport",
           "RunAttestation", "certificate_test_result",
           "certificate_statement", "attest_certificate", "attest_run", "verify_attestation"]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:certa:predicate:certificate:1"
TEST_RESULT_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATES = {"certificate": PREDICATE_TYPE, "test-result": TEST_RESULT_TYPE, "eval-result": EVAL_RESULT_TYPE}
"""The predicate shapes ``certa attest --predicate`` chooses from (default ``certificate``) -> predicate type."""
_TEST_RESULTS = {PASS: "PASSED", INCONCLUSIVE: "WARNED", FAIL: "FAILED"}
"""A verdict -> in-toto Test Result ``result``; the keys of a gate's outcome list (``passedTests`` ...)."""
_TEST_LISTS = {PASS: "passedTests", INCONCLUSIVE: "warnedTests", FAIL: "failedTests"}


def certificate_test_result(certificate: Mapping[str, Any]) -> dict[str, Any]:
    """in-toto's Test Result predicate of a certificate (module docstring): the verdict as ``result``, the spec and
    the certificate's ``content_sha256`` as ``configuration``, each gate id under its outcome's list."""
    content = certificate["content"]
    configuration = [{"name": f"spec:{content['spec']['name']}", "digest": {"sha256": content["spec"]["sha256"]}},
                     certificate_reference(certificate)]
    tests = {_TEST_LISTS[outcome]: [g["id"] for g in content["gates"] if g["outcome"] == outcome]
             for outcome in OUTCOMES}
    return {"result": _TEST_RESULTS[content["verdict"]], "configuration": configuration, **tests}


def certificate_statement(certificate: Mapping[str, Any], predicate: str = "certificate", *,
                          replay: EntryRow | None = None, model: str | None = None,
                          dataset: str | None = None) -> dict[str, Any]:
    """The in-toto Statement v1 of a certificate with the ``predicate`` shape of ``PREDICATES`` (module docstring);
    ``replay``, ``model`` and ``dataset`` fill an eval-result (``certificate_eval_result``)."""
    content = certificate["content"]
    subjects = [{"name": f"spec:{content['spec']['name']}", "digest": {"sha256": content["spec"]["sha256"]}}]
    subjects += [{"name": f"input:{item['name']}", "digest": {"sha256": item["sha256"]}} for item in content["inputs"]]
    subjects += [{"name": f"input:{item['name']}/{file['path']}", "digest": {"sha256": file["sha256"]}}
                 for item in content["inputs"] for file in item.get("files") or ()]  # a model's files (format 3)
    body = dict(certificate) if predicate == "certificate" else certificate_test_result(certificate) \
        if predicate == "test-result" else certificate_eval_result(certificate, replay, model=model, dataset=dataset)
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATES[predicate], "predicate": body}


def attest_certificate(certificate: Mapping[str, Any], private_keys: Sequence[Ed25519PrivateKey],
                       predicate: str = "certificate", *, replay: EntryRow | None = None, model: str | None = None,
                       dataset: str | None = None) -> dict[str, Any]:
    """The DSSE envelope of the certificate's statement (``predicate`` shape; ``certificate_statement``), signed
    by each of ``private_keys``."""
    statement = certificate_statement(certificate, predicate, replay=replay, model=model, dataset=dataset)
    return seal_envelope(PAYLOAD_TYPE, canonical_bytes(statement), private_keys)


@dataclass(frozen=True)
class RunAttestation:
    """The attestation of a run's certificate: its ``envelope``, the ``statement`` it signs, and ``file``
    where it was written (None: it is printed)."""

    run_id: str
    statement: dict[str, Any]
    envelope: dict[str, Any]
    file: Path | None

    def as_json(self) -> dict[str, Any]:
        """The run, the subjects, the file, and the envelope itself when it went to no file."""
        return {"ok": True, "run_id": self.run_id, "subjects": self.statement["subject"],
                "file": str(self.file) if self.file else None, **({} if self.file else {"envelope": self.envelope})}

    def text(self) -> str:
        """Which run went to which file, or the envelope itself."""
        if self.file is None:
            return document_text(self.envelope)
        return f"attested run {self.run_id} ({len(self.statement['subject'])} subjects) -> {self.file}"


def attest_run(ledger: Ledger, run_id: str, private_keys: Sequence[Ed25519PrivateKey],
               out_file: Path | None = None, predicate: str = "certificate", *, model: str | None = None,
               dataset: str | None = None) -> RunAttestation:
    """Attest ``run_id``'s certificate (``attest_certificate`` with the ``predicate`` shape; an eval-result reads
    the run's newest replay from ``ledger``); write it to ``out_file`` (new) when given."""
    certificate = ledger.certificate(run_id)
    full = certificate["issued"]["run_id"]
    replay = newest_replay(ledger, full) if predicate == "eval-result" else None
    statement = certificate_statement(certificate, predicate, replay=replay, model=model, dataset=dataset)
    envelope = seal_envelope(PAYLOAD_TYPE, canonical_bytes(statement), private_keys)
    if out_file is not None:
        save_document(envelope, out_file)
    return RunAttestation(run_id=full, statement=statement, envelope=envelope, file=out_file)


@dataclass(frozen=True)
class AttestationReport:
    """Outcome of ``verify_attestation``: ``verified`` when ``problems`` is empty."""

    run_id: str
    content_sha256: str
    verdict: str
    subjects: tuple[tuple[str, str], ...]
    """(name, sha256) of each subject."""
    files: tuple[tuple[str, str], ...]
    """(file label, the subject it matched) of each local file checked."""
    key_ids: tuple[str, ...]
    problems: tuple[str, ...]
    predicate: str = "certificate"
    """The predicate shape (a key of ``PREDICATES``): ``test-result`` and ``eval-result`` name the certificate by
    its digest only."""

    @property
    def verified(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        """The outcome as ``certa verify-attestation --json`` prints it."""
        return {"ok": self.verified, "verified": self.verified, "predicate": self.predicate,
                "predicate_type": PREDICATES[self.predicate], "run_id": self.run_id,
                "content_sha256": self.content_sha256, "verdict": self.verdict, "key_ids": list(self.key_ids),
                "subjects": [{"name": n, "sha256": d} for n, d in self.subjects],
                "files": [{"file": f, "subject": n} for f, n in self.files], "problems": list(self.problems)}


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _subjects(found: Any) -> list[tuple[str, str]]:
    """(name, sha256) of each subject of a statement, which must be a list of ``{"name": str, "digest": {"sha256":
    64 lowercase hex}}``; another shape raises ``AttestationError``."""
    subjects = []
    for subject in found if type(found) is list else [None]:
        digest = subject.get("digest") if type(subject) is dict else None
        name, sha = (subject.get("name"), digest.get("sha256")) if type(digest) is dict else (None, None)
        if type(name) is not str or type(sha) is not str or not _SHA256.fullmatch(sha):
            raise AttestationError("the statement's subject is not a list of {name, digest: {sha256}} with "
                                   "string names and SHA-256 digests (64 lowercase hex digits)")
        subjects.append((name, sha))
    return subjects


def _descriptors(found: Any) -> list[tuple[str, str]]:
    """(name, sha256) of a predicate's list of descriptors (``_subjects``'s shape); ``[]`` for another shape."""
    try:
        return _subjects(found)
    except AttestationError:
        return []


def _certificate_checks(certificate: dict[str, Any], subjects: list[tuple[str, str]]) -> tuple[str, str, str, list[str]]:
    """(run id, content_sha256, verdict, problems) of a ``certificate`` predicate: the certificate's own checks
    and that ``subjects`` are exactly the digests it records."""
    problems = [f"certificate: {message}" for message in check_certificate(certificate)]
    if not problems:
        expected = [(s["name"], s["digest"]["sha256"]) for s in certificate_statement(certificate)["subject"]]
        if sorted(subjects) != sorted(expected):
            problems.append("the statement's subjects are not the spec and inputs its certificate records")
    content = certificate.get("content") if isinstance(certificate.get("content"), dict) else {}
    issued = certificate.get("issued") if isinstance(certificate.get("issued"), dict) else {}
    return (str(issued.get("run_id", "")), str(certificate.get("content_sha256")), str(content.get("verdict")),
            problems)


def _test_result_fields(predicate: dict[str, Any]) -> tuple[str, str, str]:
    """(run id, content_sha256, verdict) named by a Test Result predicate (module docstring); another shape raises
    ``AttestationError``."""
    verdicts = {result: verdict for verdict, result in _TEST_RESULTS.items()}
    lists = [predicate.get(key, []) for key in _TEST_LISTS.values()]
    named = named_certificate(_descriptors(predicate.get("configuration")))
    if predicate.get("result") not in verdicts or named is None \
            or not all(type(tests) is list and all(type(t) is str for t in tests) for tests in lists):
        raise AttestationError(f"the statement's predicate is not a Test Result ({TEST_RESULT_TYPE}) of a certa "
                               "certificate: result PASSED, WARNED or FAILED, one configuration entry "
                               "certificate:<run id> with a sha256 digest, and lists of gate ids")
    return named[0], named[1], verdicts[predicate["result"]]


def verify_attestation(envelope_text: str | bytes, public_keys: Sequence[Ed25519PublicKey], *,
                       files: Mapping[str, bytes] | None = None) -> AttestationReport:
    """Verify an attestation of either predicate shape (see module docstring); ``files`` maps a label to bytes
    that must each be one of the subjects. Signature failures raise ``SignatureVerificationError``, a signed
    payload that is not a statement of a certificate ``AttestationError`` (both exit 1); the rest is listed in
    ``problems``."""
    payload, key_ids = open_envelope(envelope_text, PAYLOAD_TYPE, public_keys)
    try:
        statement = parse_document(payload, "the signed statement")
    except ValueError as error:
        raise AttestationError(f"the signed payload is not an in-toto statement ({error})") from None
    shapes = {predicate_type: name for name, predicate_type in PREDICATES.items()}
    if type(statement) is not dict or statement.get("_type") != STATEMENT_TYPE \
            or type(statement.get("predicateType")) is not str or statement["predicateType"] not in shapes \
            or type(statement.get("predicate")) is not dict:
        raise AttestationError(f"the signed payload is not an in-toto statement ({STATEMENT_TYPE}) of predicate "
                               f"type {' or '.join(PREDICATES.values())} with an object as its predicate")
    predicate = shapes[statement["predicateType"]]
    subjects = _subjects(statement.get("subject"))
    if predicate == "certificate":
        run_id, content_sha256, verdict, problems = _certificate_checks(statement["predicate"], subjects)
    elif predicate == "test-result":
        (run_id, content_sha256, verdict), problems = _test_result_fields(statement["predicate"]), []
    else:
        evidence = _descriptors(statement["predicate"].get("evidence"))
        (run_id, content_sha256, verdict), problems = eval_result_fields(statement["predicate"], evidence), []
    digests = {sha: name for name, sha in subjects}
    matched = []
    for label, data in (files or {}).items():
        sha = hashlib.sha256(data).hexdigest()
        if sha in digests:
            matched.append((label, digests[sha]))
        else:
            problems.append(f"{label} (sha256 {sha[:16]}…) is none of the attested subjects")
    return AttestationReport(run_id=run_id, content_sha256=content_sha256, verdict=verdict, subjects=tuple(subjects),
                             files=tuple(matched), key_ids=key_ids, problems=tuple(problems), predicate=predicate)
