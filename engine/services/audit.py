"""Audit operations over a ledger: ``verify`` (integrity plus method identities), ``verify_bundle`` (one
certificate, offline, against a signed checkpoint) and ``replay``.

``verify`` re-checks the hash chain, the stored inputs and the runs index (``certa.ledger.verify``), and every
certificate's schema, digests and the method identities its stage types declare (for example
``display_ci == exp(ci)`` for paired ratios). ``replay`` re-executes a stored run from the ledger alone
(spec text, stored input bytes, captured tables, seed) with the stage versions the run recorded, and
compares the results (``certa.engine.core.certificate.results_of``: the content without its environment stamp) byte
for byte; library versions that differ are reported as information. Every replay is itself recorded, unless
asked not to (``record=False``: a ledger opened read-only, e.g. on read-only media, is replayed that way).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certa.ledger import EntryRow, Ledger, Problem, VerifyReport, verify_ledger
from certa.ledger.checkpoint import Checkpoint, open_checkpoint
from certa.ledger.verify import verify_since
from certa.ledger.verify_record import record_verification
from certa.ledger.location import command_hint

from certa.engine.core.certificate import (CONTENT_FORMAT, ENVIRONMENT_KEYS, certificate_problems, computing_platform,
                                           library_versions, results_of, results_sha256)
from certa.engine.core.progress import Notify, throttled_progress
from certa.engine.core.stages.catalogue import AUDITS, shown_version
from certa.engine.foundation.errors import BundleError, CertaError, LedgerError, LedgerIntegrityError
from certa.engine.foundation.json_read import parse_document
from certa.engine.foundation.jsondiff import FieldChange, json_diff
from certa.engine.foundation.signing import key_id
from certa.engine.services.presentation.display_text import plain_text
from certa.engine.services.policy_record import RunPolicy, record_policy, run_policies
from certa.engine.services.registration_check import registration_problems
from certa.engine.services.reviews import (MissingApproval, ReviewRecord, certificate_digests, checked_reviews,
                                           ledger_reviews, policy_approvals, review_json, review_problems,
                                           unapproved_runs)
from certa.engine.core.approvals import ApprovalDecision, RunFacts, evaluate_approval, review_signer
from certa.engine.core.trust_policy import TrustPolicy

if TYPE_CHECKING:  # replay's and bundles' modules load where they are used: verifying a ledger needs none of them
    from certa.engine.core.interpreter import Execution
    from certa.ledger.bundle import BundleReport

__all__ = ["check_certificate", "verify", "audit_ledger", "LedgerAudit", "verify_bundle", "verify_bundle_file", "read_bundle",
           "BundleVerification", "reexecute", "replay",
           "replay_all", "replay_runs", "replayable_runs", "newest_replay", "ReplayResult", "Replays", "REPRODUCED", "DIVERGED",
           "CANNOT_REPLAY", "REPLAY_SIDES"]

REPRODUCED, DIVERGED, CANNOT_REPLAY = "REPRODUCED", "DIVERGED", "CANNOT REPLAY"
REPLAY_SIDES = ("recorded", "replayed")
"""The names of a replay change's two values, in its ledger record and its JSON form."""


def check_certificate(certificate: Mapping[str, Any]) -> list[str]:
    """Problems with one stored certificate: schema, hash, and each stage type's method identities (those of
    ``certa.engine.core.stages.catalogue.AUDITS`` without importing the stage modules; the others' from
    ``REGISTRY``, built when a certificate first needs it)."""
    problems = certificate_problems(certificate)
    if problems:  # the method checks below read the structure the schema guarantees
        return problems
    content = certificate["content"]
    stage_uses = {str(s.get("id")): (str(s.get("use")), str(s.get("version")))
                  for s in content["knobs"].get("stages", []) if isinstance(s, Mapping)}
    for stage_id, outputs in content["stages"].items():
        use, version = stage_uses.get(stage_id, ("?", "?"))
        known, audit_checks = _audit_checks(use, version)
        if not known:
            problems.append(f"stage '{stage_id}' uses {use}@{version}, a stage type or version this certa does not have")
        elif audit_checks is not None:
            try:
                problems.extend(f"stage '{stage_id}': {p}" for p in audit_checks(outputs))
            except (AttributeError, KeyError, TypeError, ValueError, IndexError) as error:
                problems.append(f"stage '{stage_id}': outputs are malformed ({type(error).__name__}: {error})")
    return problems


def _audit_checks(use: str, version: str) -> tuple[bool, Callable[[Mapping[str, Any]], list[str]] | None]:
    """Whether this certa has stage type ``use`` at ``version``, and its method-identity check (None: it has none)."""
    if use in AUDITS and shown_version(use, version) is not None:
        return True, AUDITS[use]
    from certa.engine.core.stages import REGISTRY  # every stage module: built when a certificate first needs it

    stage_type = REGISTRY.find(use, version)
    return stage_type is not None, None if stage_type is None else stage_type.audit_checks


def verify(ledger: Ledger, *, run_id: str | None = None, expect_head: tuple[int, str] | None = None,
           expect_root: str | None = None, notify: Notify | None = None, check_reviews: bool = True,
           since: Checkpoint | None = None, workers: int | None = None) -> VerifyReport:
    """Verify the whole ledger (see module docstring); ``notify`` gets progress lines about once a second.

    ``since``: a checkpoint whose signature the caller verified; only what follows it is checked
    (``certa.ledger.verify.verify_since``: its entry and Merkle root against the ledger, then the entries after it).

    With ``check_reviews`` (the default) every signed review (of ``run_id`` only, if given) is checked too
    (``certa.engine.services.reviews.check_review``): a signature that does not verify, or a signed statement that is not
    its entry's or its run's certificate's, is a problem at that review's entry. Unsigned reviews pass. Every
    registration (when no ``run_id`` is given) must state what it fixes (``registration_problems``: its knobs hash
    and spec digest recomputed).

    ``workers``: processes checking entries beside this one (``certa.ledger.verify_pool``; None: one per CPU for a
    large ledger); the report does not depend on it.
    """
    full = ledger.resolve_run_id(run_id) if run_id else None
    progress = None
    if notify is not None:
        report = throttled_progress(notify, "verify: ")
        progress = lambda done, total: report(done, total, "entries")  # noqa: E731 - verify's progress callback
    if since is not None:
        verified = verify_since(ledger, since.seq, since.entry_hash, since.root_hash,
                                check_certificate=check_certificate, run_id=full, progress=progress, workers=workers)
    else:
        verified = verify_ledger(ledger, check_certificate=check_certificate, expect_head=expect_head,
                                 expect_root=expect_root, run_id=full, progress=progress, workers=workers)
    if not check_reviews:
        return verified
    after = since.seq if since else 0
    problems = [*verified.problems, *review_problems(ledger, run_id=full, after=after),
                *(registration_problems(ledger, after=after) if full is None else [])]
    problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
    return replace(verified, problems=tuple(problems))


@dataclass(frozen=True)
class LedgerAudit:
    """What ``certa verify`` reports: the ledger's integrity (``report``), every review (of one run, if asked)
    with its signature status, and, when approval keys are required (``required_key_ids``), how many PASS runs
    were checked and the approvals ``missing``."""

    report: VerifyReport
    reviews: tuple[tuple[str, ReviewRecord], ...]
    required_key_ids: tuple[str, ...]
    runs_checked: int
    missing: tuple[MissingApproval, ...]
    checkpoint: Checkpoint | None = None
    """The signed checkpoint verified against (None: none given)."""
    recorded: str = ""
    """Whether the verification was recorded in the ledger (``certa.ledger.verify_record``), or why not; "" when not
    asked."""
    policy: TrustPolicy | None = None
    """The trust policy approvals were evaluated against (``--policy``; None: none given)."""
    decisions: tuple[ApprovalDecision, ...] = ()
    """The approval of every completed PASS run checked under ``policy``, or, without one, of those whose spec names
    a policy (``policy_approvals``; ``run_policies``)."""
    policies: Mapping[str, RunPolicy] = field(default_factory=dict)
    """Run id -> the policy deciding its approval (``certa.engine.services.policy_record.run_policies``)."""

    def signer_policy(self, run_id: str) -> TrustPolicy | None:
        """The policy a review of ``run_id`` is shown under (``review_signer``)."""
        decides = self.policies.get(run_id)
        return self.policy if decides is None else decides.policy

    @property
    def approved(self) -> bool:
        """Every required approval is there, and every run checked against the policy is APPROVED (true when
        nothing is required)."""
        return not self.missing and all(d.approved for d in self.decisions)

    @property
    def approvals_read_from(self) -> str:
        """Where the approval check read the runs, their verdicts and their reviews, and why it trusts them."""
        if self.report.scope is None:
            return "the runs index and the review entries, which this full verification checked against the chain"
        return (f"the chain's certificate and review entries, not the runs index (an incremental verification does "
                f"not check it); each entry at or before the checkpoint's entry {self.report.scope.vouched} proven "
                "included in its signed root, those after it verified here. A review entry removed before the "
                "checkpoint is found only by a full verification")

    def checkpoint_checks(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(what was checked, what was not) about the signed checkpoint verified against, in words (both empty
        without one). Its signatures always verified (``audit_ledger`` raises otherwise); its head and root are
        said to match when the ledger verified intact. What an incremental verification left out is
        ``report.scope.not_checked``, beside these."""
        signed, report = self.checkpoint, self.report
        if signed is None:
            return (), ()
        held = "matches this ledger" if report.intact else "checked against this ledger (see the problems)"
        checked = [f"the signature of each given key on it, signed at {signed.signed_at}: key id(s) "
                   f"{', '.join(signed.key_ids)}",
                   f"its head: entry {signed.seq}, entry hash {signed.entry_hash}: {held}",
                   f"its RFC 6962 Merkle root of entries 1..{signed.seq} (tree size {signed.seq}), {signed.root_hash}: "
                   f"{held}"]
        head = report.head[0]
        if report.scope is None:
            checked.append(f"every entry 1..{head} verified in full, the {max(head - signed.seq, 0)} after the "
                           "checkpoint included")
        else:
            checked.append(f"entries {report.scope.first}..{report.scope.last}, after the checkpoint, verified; the "
                           f"entries 1..{signed.seq} before it only through its signed root")
        not_checked = ["who holds the signing key(s): a key id names a key, not a person or a role (compare it with "
                       "a public key obtained from its holder by other means)"]
        if head > signed.seq:
            after = f"entry {head} is" if head == signed.seq + 1 else f"entries {signed.seq + 1}..{head} are"
            not_checked.append(f"{after} after the checkpoint, under no signature: "
                               "whoever can write the database could have rewritten them consistently (sign a newer "
                               "checkpoint to cover them)")
        return tuple(checked), tuple(not_checked)

    @property
    def ok(self) -> bool:
        """Intact and approved: ``certa verify`` exits 0."""
        return self.report.intact and self.approved

    def as_json(self) -> dict[str, Any]:
        """The audit as ``certa verify --json`` prints it."""
        report = self.report
        scope = report.scope.as_json() if report.scope is not None else {
            "mode": "full", "vouched_by_checkpoint": 0, "verified_from": 1, "verified_through": report.head[0],
            "not_checked": []}
        checked, not_checked = self.checkpoint_checks()
        checkpoint = None if self.checkpoint is None else {
            "seq": self.checkpoint.seq, "entry_hash": self.checkpoint.entry_hash,
            "root_hash": self.checkpoint.root_hash, "signed_at": self.checkpoint.signed_at,
            "key_ids": list(self.checkpoint.key_ids), "tree_size": self.checkpoint.seq,
            "checked": list(checked), "not_checked": list(not_checked)}
        return {"ok": self.ok, "intact": report.intact, "entries_checked": report.entries_checked,
                "scope": scope, "checkpoint": checkpoint, "recorded": self.recorded,
                "certificates_checked": report.certificates_checked, "blobs_checked": report.blobs_checked,
                "head": f"{report.head[0]}:{report.head[1]}",
                "problems": [{"where": p.where, "message": p.message, "seq": p.seq, "run_id": p.run_id,
                              "column": p.column} for p in report.problems],
                "reviews": [{**review_json(r), "run_id": rid, "signer": review_signer(r, self.signer_policy(rid)).as_json()}
                            for rid, r in self.reviews],
                "policy": None if self.policy is None and not self.decisions else {
                    "file": None if self.policy is None else self.policy.source,
                    "sha256": None if self.policy is None else self.policy.sha256, "approved": self.approved,
                    "runs_checked": len(self.decisions), "runs": [d.as_json() for d in self.decisions]},
                "approval": None if not self.required_key_ids else {
                    "approved": self.approved, "required_key_ids": list(self.required_key_ids),
                    "runs_checked": self.runs_checked, "read_from": self.approvals_read_from,
                    "missing": [{"run_id": m.run_id, "name": m.name, "key_id": m.key_id, "reason": m.reason}
                                for m in self.missing]}}


def audit_ledger(ledger: Ledger, *, run_id: str | None = None, expect_head: tuple[int, str] | None = None,
                 checkpoint: bytes | None = None, checkpoint_keys: Sequence[Ed25519PublicKey] = (),
                 approvers: Sequence[Ed25519PublicKey] = (), notify: Notify | None = None,
                 since_checkpoint: bool = False, record: bool = False, workers: int | None = None,
                 policy: TrustPolicy | None = None) -> LedgerAudit:
    """``verify`` the ledger (or one run), list its reviews, and check that every completed PASS run has an
    approval signed by each of ``approvers`` (``certa.engine.services.reviews.unapproved_runs``).

    ``checkpoint``: a signed checkpoint's bytes; its signatures must verify with every one of
    ``checkpoint_keys`` (``SignatureVerificationError`` otherwise), and the ledger must still hold its head and
    Merkle root. ``expect_head``: a head ``(seq, entry_hash)`` kept outside the database.

    ``since_checkpoint``: check only what follows the checkpoint (``verify(since=...)``). ``record``: once the
    ledger verified intact, record how far this verification reached (``certa.ledger.verify_record``) in its own
    transaction, through a connection opened for writing, and with a ``policy`` that policy as a ``policy`` entry
    (``certa.engine.services.policy_record.record_policy``: once per policy); a ledger that cannot be written
    (read-only media, a role without write access, an older schema) records nothing and ``LedgerAudit.recorded``
    says why.

    ``policy``: evaluate every completed PASS run's approval against it (``policy_approvals``, read from the runs
    index: a full verification only, ``LedgerError`` with ``since_checkpoint``). Without one, a full verification
    that finds the ledger intact evaluates the PASS runs whose spec names a policy under that policy, as the ledger
    recorded it
    (``certa.engine.services.policy_record.run_policies``; NOT CHECKED, and so not approved, when the ledger does
    not hold it).
    """
    if since_checkpoint and checkpoint is None:
        raise LedgerError("an incremental verification needs a signed checkpoint (--checkpoint FILE --public-key KEY)")
    if since_checkpoint and policy is not None:
        raise LedgerError("--policy reads the runs index, which an incremental verification does not check: "
                          "verify with --policy without --since-checkpoint")
    root, signed = None, None
    if checkpoint is not None:
        signed = open_checkpoint(checkpoint, list(checkpoint_keys))
        expect_head, root = (signed.seq, signed.entry_hash), signed.root_hash
    full = ledger.resolve_run_id(run_id) if run_id else None
    report = verify(ledger, run_id=full, expect_head=expect_head, expect_root=root, notify=notify,
                    since=signed if since_checkpoint else None, workers=workers)
    reviews = ledger_reviews(ledger, run_id=full, after=signed.seq if since_checkpoint and signed else 0)
    runs_checked, missing = unapproved_runs(ledger, approvers, run_id=full,
                                            checkpoint=signed if since_checkpoint else None) if approvers else (0, [])
    unproven = dict.fromkeys((gap.run_id, gap.unproven) for gap in missing if gap.unproven)
    if unproven:  # entries before the checkpoint the approval check read, and that its signed root does not prove
        report = replace(report, problems=report.problems + tuple(
            Problem(f"run {rid}", f"not proven by the checkpoint: {why}", run_id=rid) for rid, why in unproven))
    decisions: tuple[ApprovalDecision, ...] = ()
    policies: dict[str, RunPolicy] = {}
    # completed PASS runs, oldest first, from the runs index this verification checked; without --policy only when
    # it checked out: approval is moot on a ledger that does not verify, and a damaged runs index cannot be read
    if not since_checkpoint and (policy is not None or report.intact):
        rows = [ledger.run(full)] if full is not None else list(reversed(ledger.runs()))
        policies = run_policies(ledger, rows, policy)
        passed = [r for r in rows if r.verdict == "PASS"
                  if policy is not None or policies[r.run_id].policy is not None or policies[r.run_id].basis]
        decisions = tuple(policy_approvals(passed, reviews, policies).values())
    recorded = _record(ledger, report, policy) if record else ""
    return LedgerAudit(report=report, reviews=tuple(reviews), required_key_ids=tuple(key_id(k) for k in approvers),
                       runs_checked=runs_checked, missing=tuple(missing), checkpoint=signed, recorded=recorded,
                       policy=policy, decisions=decisions, policies=policies)


def _record(ledger: Ledger, report: VerifyReport, policy: TrustPolicy | None) -> str:
    """Record an intact verification of ``ledger`` (``certa.ledger.verify_record``) and the trust policy its
    approvals were evaluated against (``certa.engine.services.policy_record``: an entry, unless that policy is
    recorded already); what happened, in words."""
    if not report.intact:
        return "not recorded (the ledger does not verify)"
    scope = report.scope
    try:
        with Ledger.open(ledger.url, create=False) as writable:
            done = record_verification(writable, full=scope is None, seq=report.head[0], entry_hash=report.head[1],
                                       first=1 if scope is None else scope.first)
            kept = None if policy is None else record_policy(writable, policy)
    except LedgerError as error:
        return f"not recorded: {error}"
    return f"recorded in the ledger ({done.key} = entry {done.seq})" + ("" if kept is None else f"; {kept.text()}")


def verify_bundle(bundle: Mapping[str, Any], public_keys: Sequence[Ed25519PublicKey]) -> BundleVerification:
    """Verify a certificate bundle offline (``certa.ledger.bundle``), with the engine's certificate checks; the
    checkpoint must be signed by every one of ``public_keys``. Each review the bundle proves included is then
    checked as ``certa verify`` checks a review (``certa.engine.services.reviews.checked_reviews``: its signatures
    against its embedded keys, and that its signed statement names this certificate); one that fails is a
    problem, as it is for ``certa verify``."""
    from certa.ledger.bundle import check_bundle

    report = check_bundle(bundle, public_keys, check_certificate=check_certificate)
    reviews = checked_reviews(report.reviews, bundle["certificate"])
    problems = [f"review entry {r.seq}: {r.problem}" for r in reviews if r.problem is not None]
    return BundleVerification(report=replace(report, problems=report.problems + tuple(problems)),
                              certificate=bundle["certificate"], reviews=tuple(reviews))


@dataclass(frozen=True)
class BundleVerification:
    """``verify_bundle``'s outcome, with its JSON and text forms (``certa verify-bundle``): the ledger-level
    ``report`` (its problems include the reviews'), the ``certificate`` it carries and its ``reviews`` as the
    same checked records the ledger path gives (``certa.engine.services.reviews.ReviewRecord``: ``reviews_of``),
    each proven included in the signed ledger. A format-1 bundle carries no reviews."""

    report: BundleReport
    certificate: Mapping[str, Any]
    reviews: tuple[ReviewRecord, ...] = ()
    approval: ApprovalDecision | None = None
    """The approval under a trust policy (``bundle_approval``; ``certa verify-bundle --policy``), None: not asked."""

    @property
    def verified(self) -> bool:
        return self.report.verified

    @property
    def problems(self) -> tuple[str, ...]:
        return self.report.problems

    @property
    def run_id(self) -> str:
        return self.report.run_id

    @property
    def seq(self) -> int:
        return self.report.seq

    def as_json(self) -> dict[str, Any]:
        """The outcome, the certificate, its entry and the checkpoint it is proven against, then (format 2) each
        review with its signature status ("reviews": null for a format-1 bundle, which carries none)."""
        report, checkpoint = self.report, self.report.checkpoint
        return {"ok": report.verified, "verified": report.verified, "run_id": report.run_id,
                "content_sha256": report.content_sha256, "entry_seq": report.seq,
                "checkpoint": {"seq": checkpoint.seq, "root_hash": checkpoint.root_hash,
                               "signed_at": checkpoint.signed_at, "key_ids": list(checkpoint.key_ids)},
                "problems": list(report.problems), "format": report.format,
                "reviews": None if report.format == 1 else [review_json(r) for r in self.reviews],
                **({} if self.approval is None else {"approval": self.approval.as_json()})}


def bundle_approval(verification: BundleVerification, policy: TrustPolicy) -> BundleVerification:
    """``verification`` (verified, of a bundle that carries reviews: format 2) with its run's approval under
    ``policy`` (``certa.engine.core.approvals.evaluate_approval`` on the bundle's proven reviews, the run's spec
    name and profile read from its certificate); ``BundleError`` for a format-1 bundle, which carries no review."""
    if verification.report.format == 1:
        raise BundleError("this bundle (format 1) carries no reviews, so its approval cannot be decided from it: "
                          "make a new bundle ('certa prove'), which carries the run's reviews")
    certificate = verification.certificate
    spec = certificate["content"]["spec"]
    digests = certificate_digests(certificate)
    facts = RunFacts(run_id=digests["run_id"], name=str(spec["name"]), profile=str(spec.get("profile", "")),
                     content_sha256=digests["content_sha256"], results_sha256=digests["results_sha256"])
    return replace(verification, approval=evaluate_approval(policy, facts, verification.reviews))


def verify_bundle_file(path: Path, public_keys: Sequence[Ed25519PublicKey]) -> BundleVerification:
    """``verify_bundle`` the bundle in the file at ``path``; ``BundleError`` if it is not JSON."""
    return verify_bundle(read_bundle(path), public_keys)


def read_bundle(path: Path) -> Any:
    """The JSON document in the bundle file at ``path`` (its shape is ``check_bundle``'s to check); ``BundleError``
    if it is not JSON."""
    try:
        return parse_document(path.read_bytes(), "the bundle")
    except ValueError as error:
        raise BundleError(f"{path} is not JSON: {error}") from None


@dataclass(frozen=True)
class ReplayResult:
    """One replay: ``outcome`` is REPRODUCED (results byte-identical), DIVERGED (``changes`` names the result
    fields that differ) or CANNOT REPLAY (``note`` says why). ``environment`` lists the environment stamp's
    differences (library versions), as information. ``recorded_sha256``/``replayed_sha256`` are results
    digests (``results_sha256``)."""

    run_id: str
    name: str
    outcome: str
    recorded_sha256: str | None
    replayed_sha256: str | None
    changes: tuple[FieldChange, ...]
    environment: tuple[FieldChange, ...]
    note: str
    entry_seq: int | None
    """The ledger entry that records this replay (None: not recorded, by request or because the run failed an
    integrity check)."""

    @property
    def reproduced(self) -> bool:
        return self.outcome == REPRODUCED

    def as_json(self) -> dict[str, Any]:
        """The replay as ``certa replay --json`` lists it (every changed field)."""
        return {"run_id": self.run_id, "name": self.name, "outcome": self.outcome,
                "recorded_results_sha256": self.recorded_sha256, "replayed_results_sha256": self.replayed_sha256,
                "note": self.note, "entry_seq": self.entry_seq,
                "changes": [c.as_json(REPLAY_SIDES) for c in self.changes],
                "environment": [c.as_json(REPLAY_SIDES) for c in self.environment]}


@dataclass(frozen=True)
class Replays:
    """The replays of one ``certa replay``: one run, or (``every``) every run its filters kept, oldest first."""

    results: tuple[ReplayResult, ...]
    every: bool

    @property
    def reproduced(self) -> bool:
        """Every replayed run is REPRODUCED (``certa replay`` exits 0)."""
        return all(r.reproduced for r in self.results)

    def counts(self) -> dict[str, int]:
        """How many runs had each outcome, REPRODUCED, DIVERGED then CANNOT REPLAY."""
        return {outcome: sum(r.outcome == outcome for r in self.results)
                for outcome in (REPRODUCED, DIVERGED, CANNOT_REPLAY)}

    def as_json(self) -> dict[str, Any]:
        """One run's replay with ``ok``, or (``every``) ``ok``, the runs and the counts."""
        if not self.every:
            return {"ok": self.reproduced, **self.results[0].as_json()}
        return {"ok": self.reproduced, "runs": [r.as_json() for r in self.results], "counts": self.counts()}


def _divergence_hint(recorded: Mapping[str, Any]) -> str:
    """Why a replay may differ: other library versions, or another machine (numpy's SIMD targets)."""
    installed = library_versions()
    hints = [f"{name} {then} -> {installed[name]}" for name, then in
             sorted(recorded.get("content", {}).get("versions", {}).items())
             if name in installed and installed[name] != then]
    then = recorded.get("issued", {}).get("platform")
    now = computing_platform()
    if then and then != now:
        hints.append(f"recorded on {then.get('machine')} {'/'.join(then.get('numpy_simd', []))}, replayed on "
                     f"{now['machine']} {'/'.join(now['numpy_simd'])}")
    return f"; recorded with other versions or on another machine: {'; '.join(hints)}" if hints else ""


def _recorded_versions(content: Mapping[str, Any]) -> dict[str, str]:
    """Stage id -> the stage version the run recorded (``content.knobs.stages[].version``)."""
    return {str(s["id"]): str(s["version"]) for s in content["knobs"]["stages"]}


def reexecute(ledger: Ledger, run_id: str, recorded: Mapping[str, Any], notify: Notify | None = None) -> Execution:
    """Re-execute the stored run ``run_id`` (its certificate ``recorded``) from the ledger alone, with the stage
    versions it recorded: its spec, its stored inputs and captured tables.

    Raises ``CertaError`` (the run cannot be replayed: the reason is the message) or ``AbortedExecution``.
    """
    from certa.engine.core.input_limits import InputLimits
    from certa.engine.core.inputs import load_tables
    from certa.engine.core.interpreter import execute
    from certa.engine.core.spec import load_plan
    from certa.engine.core.tables import Table
    from certa.engine.services.stored_inputs import stored_source, stored_table
    from certa.ledger.run_record import read_stored_run

    stored = read_stored_run(ledger, run_id)
    try:
        versions = _recorded_versions(recorded["content"])
    except (KeyError, TypeError) as error:
        raise LedgerIntegrityError(f"run {run_id}: its certificate's knobs.stages are malformed "
                                   f"({type(error).__name__}: {error}); "
                                   f"run '{command_hint('verify', ledger=ledger.location)}'") from None
    plan = load_plan(stored.spec_text, stage_versions=versions)
    overridden = _recorded_overrides(recorded["content"])
    tables = {record["name"]: replace(stored_source(ledger, record), overridden=record["name"] in overridden)
              for record in stored.inputs}
    captured: dict[str, dict[str, Table]] = {}
    limits = InputLimits.from_env()
    for record in stored.captured:
        captured.setdefault(record["stage"], {})[record["name"]] = stored_table(ledger, record, limits)
    return execute(plan, load_tables(plan, inputs=tables), ledger=ledger, captured=captured,
                   notify=notify, content_format=_recorded_format(recorded["content"]),
                   registration=recorded["content"].get("registration"))


def _recorded_overrides(content: Mapping[str, Any]) -> frozenset[str]:
    """The inputs a run read from a path given instead of its spec's (``inputs[].overridden``, content format 3):
    how the run was given its inputs, which its replay, reading them from the ledger, restates as recorded."""
    inputs = content.get("inputs")
    return frozenset(str(i.get("name")) for i in inputs if isinstance(i, Mapping) and i.get("overridden") is True) \
        if isinstance(inputs, list) else frozenset()


def _recorded_format(content: Mapping[str, Any]) -> int:
    """The content format the run recorded (1 when it names none; a value certa never wrote replays as the
    newest, and the replay then reports what differs)."""
    recorded = content.get("certa_format", 1)
    known = isinstance(recorded, int) and not isinstance(recorded, bool) and 1 <= recorded <= CONTENT_FORMAT
    return recorded if known else CONTENT_FORMAT


def replay(ledger: Ledger, run_id: str, *, notify: Notify | None = None, record: bool = True) -> ReplayResult:
    """Re-execute a stored run from the ledger alone and compare its results; records the replay unless
    ``record`` is false (then nothing is written, ``entry_seq`` is None, and the ledger may be read-only or
    at an older schema).

    REPRODUCED when ``results_sha256`` of the new content equals the recorded one (computed from the
    recorded content for format-1 certificates, which carry no ``results_sha256``). A run this certa
    cannot re-execute (a stage version it does not have, a spec its schemas refuse, a missing blob) is
    CANNOT REPLAY, with the reason; that is recorded too. ``LedgerError`` only if the run is unknown or
    has no certificate.
    """
    from certa.engine.core.interpreter import AbortedExecution

    full = ledger.resolve_run_id(run_id)
    if record:
        ledger.require_writable()  # the replay is recorded: an old-schema ledger needs 'certa migrate' first
    row = ledger.run(full)
    if row.status != "completed":
        raise LedgerError(f"run {full} was {row.status}: it has no certificate to reproduce")
    recorded = ledger.certificate(full)
    if certificate_problems(recorded):
        raise LedgerIntegrityError(f"run {full}: its stored certificate fails its own checks; run "
                                   f"'{command_hint('verify', ledger=ledger.location)}'")
    recorded_results = results_sha256(recorded["content"])
    replayed_sha: str | None = None
    changes: tuple[FieldChange, ...] = ()
    environment: tuple[FieldChange, ...] = ()
    try:
        content = reexecute(ledger, full, recorded, notify).content
    except AbortedExecution as aborted:
        outcome, note = DIVERGED, f"the replay was aborted by a profile rule: {aborted.abort}"
    except LedgerIntegrityError:
        raise
    except CertaError as error:
        outcome, note = CANNOT_REPLAY, str(error)
    else:
        replayed_sha = results_sha256(content)
        environment = tuple(json_diff({k: recorded["content"].get(k) for k in ENVIRONMENT_KEYS},
                                      {k: content.get(k) for k in ENVIRONMENT_KEYS}))
        if replayed_sha == recorded_results:
            outcome = REPRODUCED
            note = "same results" + (f" (environment differs: {_environment_text(environment)})" if environment else "")
        else:
            outcome = DIVERGED
            changes = tuple(json_diff(results_of(recorded["content"]), results_of(content)))
            note = f"{len(changes)} result field(s) differ" + _divergence_hint(recorded)
    seq = None if not record else ledger.record_note(full, "replay", {
        "outcome": outcome, "recorded_sha256": recorded_results, "replayed_sha256": replayed_sha,
        "compared": "results_sha256", "note": note, "platform": computing_platform(),
        "changes": [c.as_json(REPLAY_SIDES) for c in changes[:200]],
        "environment": [c.as_json(REPLAY_SIDES) for c in environment],
    })
    return ReplayResult(run_id=full, name=row.name, outcome=outcome, recorded_sha256=recorded_results,
                        replayed_sha256=replayed_sha, changes=changes, environment=environment, note=note,
                        entry_seq=seq)


def newest_replay(ledger: Ledger, run_id: str) -> EntryRow | None:
    """The run's newest ``replay`` entry (what ``replay`` recorded), None when it was never replayed."""
    newest = None
    for entry in ledger.entries(run_id=run_id, kinds=["replay"]):
        newest = entry
    return newest


def _environment_text(environment: Sequence[FieldChange]) -> str:
    return ", ".join(f"{c.path.split('.', 1)[-1]} {c.before} -> {c.after}" for c in environment)


def replayable_runs(ledger: Ledger, *, since: str | None = None, name: str | None = None) -> list[str]:
    """Run ids of every completed run, oldest first; ``since`` keeps runs recorded at or after an ISO 8601
    date or time (UTC), ``name`` those whose spec name matches (shell-style wildcards allowed)."""
    rows = [r for r in reversed(ledger.runs()) if r.status == "completed"]
    if since is not None:
        rows = [r for r in rows if r.recorded_at >= since]
    if name is not None:
        rows = [r for r in rows if fnmatch.fnmatchcase(r.name, name)]
    return [r.run_id for r in rows]


def replay_all(ledger: Ledger, run_ids: Sequence[str], *,
               progress: Callable[[int, int, ReplayResult], None] | None = None,
               record: bool = True) -> Iterator[ReplayResult]:
    """Replay each run in ``run_ids`` (recording each replay, unless ``record`` is false), yielding results as
    they complete; ``progress(done, total, result)`` after each. A run whose stored records fail an integrity
    check is CANNOT REPLAY (not recorded), and the batch goes on."""
    if record:
        ledger.require_writable()
    for done, run_id in enumerate(run_ids, start=1):
        try:
            result = replay(ledger, run_id, record=record)
        except LedgerIntegrityError as error:
            result = ReplayResult(run_id=run_id, name=ledger.run(run_id).name, outcome=CANNOT_REPLAY,
                                  recorded_sha256=None, replayed_sha256=None, changes=(), environment=(),
                                  note=str(error), entry_seq=None)
        if progress is not None:
            progress(done, len(run_ids), result)
        yield result


def replay_runs(ledger: Ledger, run_id: str | None = None, *, since: str | None = None, name: str | None = None,
                record: bool = True, notify: Notify | None = None) -> Replays:
    """``replay`` one run, or (``run_id`` None) ``replay_all`` the ``replayable_runs`` that ``since`` and
    ``name`` keep; ``notify`` gets the progress lines (one per run of many, "replay 3/40: ...")."""
    if run_id is not None:
        return Replays(results=(replay(ledger, run_id, notify=notify, record=record),), every=False)

    def progress(done: int, total: int, result: ReplayResult) -> None:
        if notify is not None:
            notify(plain_text(f"replay {done}/{total}: {result.run_id[:12]} {result.name}: {result.outcome}"))

    run_ids = replayable_runs(ledger, since=since, name=name)
    return Replays(results=tuple(replay_all(ledger, run_ids, progress=progress, record=record)), every=True)
