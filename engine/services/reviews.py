"""Signed reviews of a run's certificate: building, signing and checking review entries (no I/O except
``reviews_of`` / ``review_problems`` / ``unapproved_runs``, which read a ledger).

A review is one ``review`` entry of the ledger, appended after the run (runs are never edited). Its payload::

    {"reviewer": NAME, "decision": "approved" | "rejected" | "comment", "note": TEXT,
     "certificate": {"run_id": ID, "content_sha256": HEX, "results_sha256": HEX},   # certa 0.4.0 and later
     "signature": DSSE envelope,                       # only when signed
     "public_keys": {KEY_ID: base64(raw Ed25519 public key), ...}}   # only when signed

``certificate`` names the certificate reviewed (``results_sha256`` is computed from the content for format-1
certificates, which do not store it); a review of an aborted run has none and cannot be signed. The
envelope (``certa.engine.foundation.signing``, payload type ``PAYLOAD_TYPE``) signs the RFC 8785 canonical JSON of::

    {"certa_review": 1, "run_id": ID, "content_sha256": HEX, "results_sha256": HEX,
     "reviewer": NAME, "decision": DECISION, "note": TEXT, "signed_at": "YYYY-MM-DDTHH:MM:SS.ffffffZ"}

with one signature per key (several keys may sign one review). A DSSE signature carries only a key id, so
the signers' public keys travel next to the envelope in ``public_keys``: anyone can check that the
signatures verify (a key id is the SHA-256 of the raw key, so a swapped key is detected too). Whether a
signer is *trusted* is a separate question, answered by key id against public keys held outside the ledger
(``certa verify --require-approval KEY``). Reviews written before 0.4.0 (``reviewer``, ``decision``, ``note``
only) and reviews recorded without ``--key`` are valid unsigned reviews.

``check_review`` finds a signed review valid when every signature verifies against its embedded key and the
signed statement names exactly the entry's reviewer, decision and note and the certificate digests of the
run the entry belongs to (a signed review copied to another run, or an edited note, is refused).

The chain order of a run's signed reviews must agree with their signing order, per key: a valid review
signed *before* an earlier entry of the same run by one of its keys (``ReviewRecord.out_of_order``) is a
problem naming both entries, and while a key has such a review on a run it approves nothing there
(``approval_by``). Whoever writes the database without the keys cannot reorder, or copy forward, signed
reviews (e.g. an approval after a later rejection) unnoticed; deleting a review needs a checkpoint to expose.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.ledger.rows import EntryRow, RunRow

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.core.approvals import ApprovalDecision, RunFacts, approval_by, evaluate_approval, key_gap
from certa.engine.core.trust_policy import TrustPolicy, load_policy
from certa.engine.core.certificate import results_sha256
from certa.engine.foundation.errors import CertaError, LedgerError
from certa.engine.services.policy_record import RunPolicy

if TYPE_CHECKING:  # cryptography loads when a review is signed or a signature checked, not to read a ledger
    from certa.ledger import Ledger, Problem
    from certa.ledger.rows import RunReads
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from certa.ledger.checkpoint import Checkpoint
from certa.engine.foundation.json_read import parse_document

__all__ = ["PAYLOAD_TYPE", "DECISIONS", "ReviewCheck", "ReviewRecord", "RecordedReview", "MissingApproval",
           "certificate_digests", "record_review",
           "review_payload", "check_review", "checked_reviews", "review_json", "reviews_of", "ledger_reviews",
           "review_problems", "approval_by", "unapproved_runs", "read_policy", "run_approval", "policy_approvals"]

PAYLOAD_TYPE = "application/vnd.certa.review+json; version=1"
DECISIONS = ("approved", "rejected", "comment")


def certificate_digests(certificate: Mapping[str, Any]) -> dict[str, str]:
    """``{"run_id", "content_sha256", "results_sha256"}`` of a stored certificate (``results_sha256``
    computed from its content, so format-1 certificates have one too)."""
    content = certificate["content"]
    if not isinstance(content, Mapping):
        raise ValueError("the certificate's content is not an object")
    return {"run_id": str(certificate["issued"]["run_id"]), "content_sha256": str(certificate["content_sha256"]),
            "results_sha256": results_sha256(content)}


def _raw_public_key(public_key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def review_payload(*, reviewer: str, decision: str, note: str, certificate: Mapping[str, Any] | None,
                   private_keys: Sequence[Ed25519PrivateKey] = (), signed_at: datetime | None = None) -> dict[str, Any]:
    """The payload of a review entry (see module docstring), signed by each of ``private_keys`` (none:
    unsigned). ``certificate`` is the run's stored certificate (None for an aborted run: unsigned only)."""
    from certa.engine.foundation.signing import key_id, seal_envelope
    if decision not in DECISIONS:
        raise CertaError(f"'decision' must be one of {', '.join(DECISIONS)} (got {decision!r})")
    payload: dict[str, Any] = {"reviewer": reviewer, "decision": decision, "note": note}
    if certificate is None:
        if private_keys:
            raise LedgerError("the run has no certificate (it was aborted): a signed review signs a certificate "
                              "digest; record an unsigned review instead (without --key)")
        return payload
    digests = certificate_digests(certificate)
    payload["certificate"] = digests
    if private_keys:
        when = (signed_at or datetime.now(UTC)).astimezone(UTC)
        statement = {"certa_review": 1, **digests, "reviewer": reviewer, "decision": decision, "note": note,
                     "signed_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        payload["signature"] = seal_envelope(PAYLOAD_TYPE, canonical_bytes(statement), private_keys)
        payload["public_keys"] = {key_id(k.public_key()): _raw_public_key(k.public_key()) for k in private_keys}
    return payload


@dataclass(frozen=True)
class RecordedReview:
    """A review appended to the ledger as entry ``seq``: its run and its ``payload`` (signed when ``key_ids``)."""

    run_id: str
    seq: int
    payload: dict[str, Any]

    @property
    def key_ids(self) -> list[str]:
        """The ids of the keys that signed the review (none: unsigned)."""
        return [sig["keyid"] for sig in self.payload.get("signature", {}).get("signatures", [])]

    def as_json(self) -> dict[str, Any]:
        """The run, the entry, the signers and the certificate digests the review is about."""
        return {"ok": True, "run_id": self.run_id, "entry": self.seq, "seq": self.seq, "signed": bool(self.key_ids),
                "key_ids": self.key_ids, "certificate": self.payload.get("certificate")}

    def text(self) -> str:
        """Which run, which entry, signed by which keys (or unsigned)."""
        if self.key_ids:
            return f"recorded review of {self.run_id} as entry {self.seq}, signed by key(s) {', '.join(self.key_ids)}"
        return f"recorded review of {self.run_id} as entry {self.seq} (unsigned)"


def record_review(ledger: Ledger, run_id: str, *, reviewer: str, decision: str, note: str,
                  private_keys: Sequence[Ed25519PrivateKey]) -> RecordedReview:
    """Append a review of ``run_id`` (``review_payload``: about its certificate when it completed, signed by
    each of ``private_keys``) to ``ledger``, opened for writing."""
    full = ledger.resolve_run_id(run_id)
    certificate = ledger.certificate(full) if ledger.run(full).status == "completed" else None
    payload = review_payload(reviewer=reviewer, decision=decision, note=note, certificate=certificate,
                             private_keys=private_keys)
    return RecordedReview(run_id=full, seq=ledger.record_note(full, "review", payload), payload=payload)


@dataclass(frozen=True)
class ReviewCheck:
    """The outcome of ``check_review``. ``signatures_valid`` (every signature verifies against its embedded
    key) and ``statement_matches`` (the signed statement is this entry's and this run's certificate's) are
    None for an unsigned review; ``valid`` is True only when both hold, None when unsigned. ``key_ids`` are
    the signers' key ids as the envelope names them; ``problems`` says what is wrong (empty when sound)."""

    signed: bool
    signatures_valid: bool | None
    statement_matches: bool | None
    key_ids: tuple[str, ...]
    signed_at: str | None
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool | None:
        return None if not self.signed else bool(self.signatures_valid and self.statement_matches)


def _signatures(envelope: Any, public_keys: Any) -> tuple[tuple[str, ...], bytes | None, list[str]]:
    """(key ids named, the verified payload or None, problems) of a review envelope."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from certa.engine.foundation.signing import key_id, open_envelope
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("signatures"), list):
        return (), None, ["the signature is not a DSSE envelope"]
    ids = tuple(str(s.get("keyid")) for s in envelope["signatures"] if isinstance(s, Mapping))
    if not ids:
        return ids, None, ["the review's envelope carries no signature"]
    if not isinstance(public_keys, Mapping):
        return ids, None, ["the review carries no public keys of its signers"]
    keys = []
    for kid in ids:
        try:
            raw = base64.b64decode(str(public_keys.get(kid, "")), validate=True)
            key = Ed25519PublicKey.from_public_bytes(raw)
        except (binascii.Error, ValueError):
            return ids, None, [f"the public key of signer {kid[:16]}… is missing or not an Ed25519 key"]
        if key_id(key) != kid:
            return ids, None, [f"the public key given for signer {kid[:16]}… has another key id"]
        keys.append(key)
    try:
        payload, _ = open_envelope(json.dumps(dict(envelope)), PAYLOAD_TYPE, keys)
    except CertaError as error:
        return ids, None, [f"signature: {error}"]
    except RecursionError:  # json.dumps of a stored envelope nested too deeply to be one
        return ids, None, ["the signature is not a DSSE envelope (nested too deeply)"]
    return ids, payload, []


def check_review(payload: Mapping[str, Any], certificate: Mapping[str, Any] | None) -> ReviewCheck:
    """Check one review entry's payload against the stored certificate of the run it belongs to (None: the
    run has none). See the module docstring for what a valid signed review is."""
    problems: list[str] = []
    digests = None
    if certificate is not None:
        try:
            digests = certificate_digests(certificate)
        except (KeyError, TypeError, ValueError):
            problems.append("the run's certificate is malformed: the review cannot be checked against it")
    named = payload.get("certificate")
    if named is not None and digests is not None and named != digests:
        problems.append("the review names another certificate than its run's "
                        f"(content_sha256 {str(named.get('content_sha256') if isinstance(named, Mapping) else named)[:16]}…)")
    if "signature" not in payload:
        return ReviewCheck(signed=False, signatures_valid=None, statement_matches=None, key_ids=(), signed_at=None,
                           problems=tuple(problems))
    from certa.engine.foundation.signing import envelope_payload_unverified
    ids, verified, signature_problems = _signatures(payload.get("signature"), payload.get("public_keys"))
    problems += signature_problems
    body: Any = None
    try:  # read the statement even when a signature fails, to say what else differs
        body = parse_document(verified if verified is not None else
                              envelope_payload_unverified(json.dumps(payload.get("signature")), PAYLOAD_TYPE),
                              "the signed review statement")
    except (CertaError, ValueError, TypeError, RecursionError):
        pass
    matches = False
    signed_at = None
    if not isinstance(body, Mapping) or body.get("certa_review") != 1:
        problems.append("the signed statement is not a certa review (format 1)")
    else:
        signed_at = str(body.get("signed_at"))
        expected = {"reviewer": payload.get("reviewer"), "decision": payload.get("decision"),
                    "note": payload.get("note"), **(digests or {})}
        differing = [name for name, value in expected.items() if body.get(name) != value]
        if digests is None and certificate is None:
            differing.append("run_id (the run has no certificate)")
        matches = not differing
        if differing:
            problems.append(f"the signed statement differs from the entry in: {', '.join(differing)}")
    return ReviewCheck(signed=True, signatures_valid=verified is not None, statement_matches=matches, key_ids=ids,
                       signed_at=signed_at, problems=tuple(problems))


@dataclass(frozen=True)
class ReviewRecord:
    """One review of a run, as a report shows it. ``signature_valid`` is ``ReviewCheck.valid`` (None when
    unsigned): the signatures verify against the keys embedded in the review AND the signed statement is
    this entry's and this run's certificate's; it says nothing about whether a signer is trusted (compare
    ``key_ids`` with keys you hold). ``key_id`` is the first signer's; ``problem`` joins the problems.
    ``signed_at`` is the signed statement's time (None when unsigned). ``out_of_order`` is the seq of an
    earlier review of the same run, valid and signed by one of this review's keys, that was signed *after*
    this one: the chain order contradicts the signing order, as when two signed reviews
    are swapped and the chain recomputed; such a review is a problem, and its keys approve nothing on that
    run (``approval_by``)."""

    seq: int
    recorded_at: str
    reviewer: str
    decision: str
    note: str
    signed: bool
    signature_valid: bool | None
    key_id: str | None
    key_ids: tuple[str, ...]
    problem: str | None
    signed_at: str | None = None
    out_of_order: int | None = None


def review_json(record: ReviewRecord) -> dict[str, Any]:
    """One checked review as ``certa verify --json`` and ``certa verify-bundle --json`` list it."""
    return {"seq": record.seq, "recorded_at": record.recorded_at, "reviewer": record.reviewer,
            "decision": record.decision, "note": record.note, "signed": record.signed,
            "signature_valid": record.signature_valid, "key_ids": list(record.key_ids), "signed_at": record.signed_at,
            "out_of_order": record.out_of_order, "problem": record.problem}


def _run_certificate(ledger: RunReads, run_id: str) -> Mapping[str, Any] | None:
    try:
        certificate = ledger.certificate(run_id)
    except (LedgerError, ValueError):  # none (aborted), or an unreadable entry 'verify' reports by itself
        return None
    return certificate if isinstance(certificate, Mapping) else None


def _signing_time(signed_at: str | None) -> datetime | None:
    """A signed statement's ``signed_at`` as an aware UTC time (None when absent or not a time)."""
    text = str(signed_at)
    try:  # Python 3.10's fromisoformat does not read a trailing 'Z'
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


class _SigningOrder:
    """The signing order of a ledger's valid signed reviews, fed in chain order: per run and key, the review
    signed latest so far. A review signed before such an earlier entry by one of its keys is out of order."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], tuple[datetime, ReviewRecord]] = {}

    def place(self, run_id: str, record: ReviewRecord) -> ReviewRecord:
        """``record`` (the next review of ``run_id`` in chain order), with ``out_of_order`` and a problem
        when an earlier entry of the run by one of its keys was signed after it."""
        when = _signing_time(record.signed_at)
        if not record.signature_valid or when is None:
            return record
        contradicted: tuple[str, ReviewRecord] | None = None
        for kid in record.key_ids:
            seen = self._latest.get((run_id, kid))
            if seen is None or when >= seen[0]:
                self._latest[(run_id, kid)] = (when, record)
            elif contradicted is None:
                contradicted = kid, seen[1]
        if contradicted is None:
            return record
        kid, later = contradicted
        message = (f"signed at {record.signed_at} by key {kid[:16]}…, before entry {later.seq} (signed at "
                   f"{later.signed_at} by the same key), which precedes it in the chain: the chain order "
                   "contradicts the signing order (reviews reordered or copied?)")
        return replace(record, out_of_order=later.seq,
                       problem="; ".join(p for p in (record.problem, message) if p))


def _records(entries: Iterable[Any], certificate_of: Any) -> Iterable[tuple[Any, ReviewRecord]]:
    """Each review entry (in chain order) with its checked ``ReviewRecord``, its signing order included."""
    order = _SigningOrder()
    for entry, record in _checked_records(entries, certificate_of):
        yield entry, order.place(entry.run_id, record)


def _checked_records(entries: Iterable[Any], certificate_of: Any) -> Iterable[tuple[Any, ReviewRecord]]:
    for entry in entries:
        try:
            payload = entry.data()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            yield entry, ReviewRecord(seq=entry.seq, recorded_at=entry.recorded_at, reviewer="", decision="",
                                      note="", signed=False, signature_valid=None, key_id=None, key_ids=(),
                                      problem="the review payload is not a JSON object")
            continue
        check = check_review(payload, certificate_of(entry.run_id))
        yield entry, ReviewRecord(seq=entry.seq, recorded_at=entry.recorded_at,
                                  reviewer=str(payload.get("reviewer", "")), decision=str(payload.get("decision", "")),
                                  note=str(payload.get("note", "")), signed=check.signed,
                                  signature_valid=check.valid, key_id=check.key_ids[0] if check.key_ids else None,
                                  key_ids=check.key_ids, problem="; ".join(check.problems) or None,
                                  signed_at=check.signed_at)


def checked_reviews(entries: Iterable[EntryRow], certificate: Mapping[str, Any] | None) -> list[ReviewRecord]:
    """The ``ReviewRecord`` of each review entry of one run (in chain order), checked against the run's stored
    ``certificate`` (None: it has none) and placed in its signing order: what a report shows of the run's
    reviews, whether the entries come from a ledger or from a bundle (``certa.ledger.bundle.check_bundle`` proves
    them included first)."""
    return [record for _, record in _records(entries, lambda _: certificate)]


def reviews_of(ledger: RunReads, run_id: str) -> list[ReviewRecord]:
    """Every review of a run (``run_id`` may be a unique prefix or ``latest``), oldest first, each checked."""
    full = ledger.resolve_run_id(run_id)
    return checked_reviews(ledger.entries(run_id=full, kinds=["review"]), _run_certificate(ledger, full))


def ledger_reviews(ledger: Ledger, *, run_id: str | None = None, after: int = 0) -> list[tuple[str, ReviewRecord]]:
    """(run id, review) of every review in the ledger (or of the full ``run_id``; only those after entry
    ``after``), in chain order, each checked against its own run's certificate."""
    return [(entry.run_id, record) for entry, record in _all_records(ledger, run_id, after)]


def _all_records(ledger: Ledger, run_id: str | None, after: int = 0) -> Iterable[tuple[Any, ReviewRecord]]:
    cache: dict[str, Mapping[str, Any] | None] = {}

    def certificate_of(rid: str) -> Mapping[str, Any] | None:
        if rid not in cache:
            cache[rid] = _run_certificate(ledger, rid)
        return cache[rid]

    return _records(ledger.entries(run_id=run_id, kinds=["review"], after=after), certificate_of)


def review_problems(ledger: Ledger, *, run_id: str | None = None, after: int = 0) -> list[Problem]:
    """A ``Problem`` for every review (of ``run_id``, or of every run) that fails ``check_review``: a signature
    that does not verify, a signed statement that is not the entry's or its run's, a malformed payload; or
    that is recorded out of its signing order (``ReviewRecord.out_of_order``, the message names both
    entries). Unsigned reviews are not problems. ``after``: only the reviews after that entry (an incremental
    verification)."""
    from certa.ledger import Problem  # certa.ledger.verify_batch: only 'certa verify' asks
    return [Problem(f"entry {entry.seq} (review, run {entry.run_id})", f"review: {record.problem}", entry.seq,
                    entry.run_id)
            for entry, record in _all_records(ledger, run_id, after) if record.problem is not None]


@dataclass(frozen=True)
class MissingApproval:
    """A completed PASS run with no standing approval signed by ``key_id``."""

    run_id: str
    name: str
    key_id: str
    reason: str
    unproven: str | None = None
    """An entry before the checkpoint that the check read and that is not proven by it (a rewritten ledger)."""


def unapproved_runs(ledger: Ledger, trusted_keys: Sequence[Ed25519PublicKey], *,
                    run_id: str | None = None, checkpoint: Checkpoint | None = None) -> tuple[int, list[MissingApproval]]:
    """(runs checked, gaps): every completed run with verdict PASS (only ``run_id`` if given) must have a
    standing approval (``approval_by``) signed by each of ``trusted_keys``.

    The runs and their verdicts come from the runs index, which a full ``verify`` checks against the chain. With
    ``checkpoint`` (an incremental verification, which does not check the index or the entries before the
    checkpoint) they come from the chain's certificate entries instead, and every entry at or before the
    checkpoint that is read (a certificate, a review) must be proven included in its signed root
    (``certa.ledger.bundle.entry_proof_problem``): an unproven certificate is a gap naming why, an unproven
    review is left out and named in the run's gap."""
    from certa.engine.foundation.signing import key_id
    wanted = [key_id(k) for k in trusted_keys]
    if checkpoint is not None:
        return _unapproved_in_chain(ledger, wanted, run_id, checkpoint)
    rows = [ledger.run(run_id)] if run_id is not None else list(reversed(ledger.runs()))
    rows = [row for row in rows if row.status == "completed" and row.verdict == "PASS"]
    gaps = [MissingApproval(run_id=row.run_id, name=row.name, key_id=kid, reason=reason)
            for row in rows for kid, reason in _gaps(reviews_of(ledger, row.run_id), wanted)]
    return len(rows), gaps


def _gaps(records: Sequence[ReviewRecord], wanted: Sequence[str]) -> list[tuple[str, str]]:
    """(key id, reason) for each of ``wanted`` without a standing approval among ``records``."""
    return [(kid, reason) for kid in wanted if (reason := key_gap(records, kid)) is not None]


def _unapproved_in_chain(ledger: Ledger, wanted: Sequence[str], run_id: str | None,
                         checkpoint: Checkpoint) -> tuple[int, list[MissingApproval]]:
    """``unapproved_runs`` from the chain's certificate entries, each entry at or before ``checkpoint`` proven."""
    from certa.ledger.bundle import entry_proof_problem  # cryptography: only with a checkpoint
    full = ledger.resolve_run_id(run_id) if run_id is not None else None
    checked, gaps = 0, []
    for entry in ledger.entries(run_id=full, kinds=["certificate"]):
        problem = entry_proof_problem(ledger, entry, checkpoint) if entry.seq <= checkpoint.seq else None
        certificate: Any = None
        if problem is None:
            try:
                certificate = entry.data()
                content = certificate["content"]
                verdict, name = content["verdict"], str(content["spec"]["name"])
            except (ValueError, KeyError, TypeError):
                problem = f"entry {entry.seq}: its certificate is not readable"
        if problem is None and verdict != "PASS":
            continue
        checked += 1
        if problem is not None:
            gaps += [MissingApproval(entry.run_id, "?", kid, "its certificate's entry is not proven by the "
                                                             f"checkpoint: {problem}", problem) for kid in wanted]
            continue
        proven, unproven = [], []
        for review in ledger.entries(run_id=entry.run_id, kinds=["review"]):
            why = entry_proof_problem(ledger, review, checkpoint) if review.seq <= checkpoint.seq else None
            (unproven if why else proven).append(why or review)
        records = checked_reviews(proven, certificate)
        left_out = f" ({len(unproven)} review entr{'y' if len(unproven) == 1 else 'ies'} before the checkpoint left " \
                   f"out, not proven by it: {unproven[0]})" if unproven else ""
        gaps += [MissingApproval(entry.run_id, name, kid, reason + left_out, unproven[0] if unproven else None)
                 for kid, reason in _gaps(records, wanted)]
    return checked, gaps


def read_policy(policy_file: Path | None) -> TrustPolicy | None:
    """The trust policy a command is given (``--policy FILE``: ``certa.engine.core.trust_policy.load_policy``;
    ``SpecError`` naming the file, line and key when it is not one), None when none is given."""
    return None if policy_file is None else load_policy(policy_file)


def run_approval(ledger: RunReads, run_id: str, policy: RunPolicy,
                 records: Sequence[ReviewRecord] | None = None) -> ApprovalDecision:
    """The approval of ``run_id`` (a full id) under ``policy`` (``certa.engine.core.approvals.evaluate_approval``;
    ``certa.engine.services.policy_record.run_policies`` says which policy and why): its spec name and profile from
    the runs index, its certificate digests, and its checked reviews (``records``, else ``reviews_of``)."""
    row = ledger.run(run_id)
    certificate = _run_certificate(ledger, run_id)
    digests: Mapping[str, str] = {}
    if certificate is not None:
        try:
            digests = certificate_digests(certificate)
        except (KeyError, TypeError, ValueError):  # a malformed certificate: 'verify' names it
            digests = {}
    facts = RunFacts(run_id=row.run_id, name=row.name, profile=row.profile,
                     content_sha256=digests.get("content_sha256"), results_sha256=digests.get("results_sha256"))
    decision = evaluate_approval(policy.policy, facts, reviews_of(ledger, run_id) if records is None else records)
    return replace(decision, basis=policy.basis)


def policy_approvals(rows: Iterable[RunRow], reviews: Iterable[tuple[str, ReviewRecord]],
                     policies: Mapping[str, RunPolicy]) -> dict[str, ApprovalDecision]:
    """Run id -> the approval under its policy (``policies``, from ``run_policies``; ``evaluate_approval``, NOT
    CHECKED without one) of each completed run of ``rows`` (runs index rows: spec name and profile), from
    ``reviews`` ((run id, checked review) in chain order, as ``ledger_reviews`` gives them): one pass, no read per
    run (``certa verify``, ``certa site``)."""
    by_run: dict[str, list[ReviewRecord]] = {}
    for rid, record in reviews:
        by_run.setdefault(rid, []).append(record)
    unchecked = RunPolicy(None)
    return {row.run_id: replace(evaluate_approval(
        policies.get(row.run_id, unchecked).policy, RunFacts(run_id=row.run_id, name=row.name, profile=row.profile),
        by_run.get(row.run_id, [])), basis=policies.get(row.run_id, unchecked).basis)
            for row in rows if row.status == "completed"}
