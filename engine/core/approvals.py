"""Whether a run is approved: each key's standing decision among a run's checked reviews, and a run's approval
against a trust policy (``certa.engine.core.trust_policy``). Pure: no ledger, no files.

A key's standing decision (``approval_by``) is the newest valid signed ``approved`` or ``rejected`` review it
signed (comments do not count); while any valid review it signed is recorded out of its signing order
(``out_of_order``: reviews reordered or copied, see ``certa.engine.services.reviews``) it approves nothing.

``evaluate_approval`` applies a policy to a run's facts (spec name, profile, run id, certificate digests)
and its checked reviews:

* no policy: ``approval not checked`` (a review's claimed name is never an approval);
* every rule covering the run (``TrustPolicy.rules_for``) must be met: for each role it requires, at least
  that many distinct people of the policy holding the role have a standing approval by one of their keys
  (a person with several keys counts once; a person holding two required roles counts for both);
* a run no rule covers is NOT APPROVED (the policy does not say who may approve it);
* the approvers are named from the policy (name, e-mail, role), never from the review; a valid review signed
  by a key the policy does not list is reported as ``unknown key <id>`` and counts for nothing; unsigned
  reviews and reviews whose signature does not verify count for nothing;
* a key with a validity period (``certa.engine.core.trust_policy.KeyPeriod``) counts only the reviews the ledger
  recorded inside it (``recorded_at``, the entry's time, which the hash chain fixes; never a time the reviewer
  states): the others are shown as ``key expired on DATE`` (or ``key not valid before DATE``) and count for
  nothing, neither approval nor rejection.

This is the four-eyes / separation-of-duties control of change-approval policies (e.g. NIST SP 800-53 rev. 5
CM-3 and AC-5), with signatures as the evidence of who approved (as in Sigstore's policy-controller or
in-toto layouts, where keys, not names, are trusted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from certa.engine.core.trust_policy import Person, TrustPolicy

__all__ = ["CheckedReview", "RunFacts", "Approver", "ApprovalDecision", "SignerView", "APPROVED", "NOT_APPROVED",
           "NOT_CHECKED", "approval_by", "key_gap", "evaluate_approval", "review_signer", "short_key"]

APPROVED, NOT_APPROVED, NOT_CHECKED = "APPROVED", "NOT APPROVED", "NOT CHECKED"


class CheckedReview(Protocol):
    """A review as ``certa.engine.services.reviews.ReviewRecord`` holds it once checked."""

    @property
    def seq(self) -> int: ...
    @property
    def recorded_at(self) -> str: ...
    @property
    def reviewer(self) -> str: ...
    @property
    def decision(self) -> str: ...
    @property
    def signed(self) -> bool: ...
    @property
    def signature_valid(self) -> bool | None: ...
    @property
    def key_ids(self) -> tuple[str, ...]: ...
    @property
    def out_of_order(self) -> int | None: ...


_R = TypeVar("_R", bound=CheckedReview)


def short_key(kid: str) -> str:
    """A key id as pages show it: its first 8 hex digits and an ellipsis."""
    return f"{kid[:8]}…"


def approval_by(records: Sequence[_R], trusted_key_id: str) -> _R | None:
    """The review that approves a run for ``trusted_key_id``: the newest valid signed review by that key
    whose decision is ``approved`` or ``rejected`` is the key's decision (comments do not count); it is
    returned if it approves, else None. When any valid review signed by that key is recorded out of its
    signing order (``out_of_order``: reviews reordered or copied), the chain order cannot tell its decision,
    and the key approves nothing."""
    mine = [r for r in records if r.signature_valid and trusted_key_id in r.key_ids]
    if any(r.out_of_order is not None for r in mine):
        return None
    decisions = [r for r in mine if r.decision in ("approved", "rejected")]
    if decisions and decisions[-1].decision == "approved":
        return decisions[-1]
    return None


def key_gap(records: Sequence[CheckedReview], kid: str) -> str | None:
    """Why ``kid`` has no standing approval among ``records``, in words (None when it has one)."""
    if approval_by(records, kid) is not None:
        return None
    mine = [r for r in records if kid in r.key_ids and r.decision in ("approved", "rejected")]
    disordered = [r for r in records if r.signature_valid and kid in r.key_ids and r.out_of_order is not None]
    if disordered:
        return (f"its reviews are recorded out of signing order (entry {disordered[0].seq} after entry "
                f"{disordered[0].out_of_order}, which one of its keys signed later)")
    if any(r.signature_valid for r in mine):
        return "its newest signed decision by this key is 'rejected'"
    if mine:
        return "the reviews signed by this key do not verify"
    return "no review signed by this key"


@dataclass(frozen=True)
class RunFacts:
    """What a policy decides a run's approval by: its spec name and profile; the run id and certificate
    digests name what was approved in the decision (the reviews were checked against them)."""

    run_id: str
    name: str
    profile: str
    content_sha256: str | None = None
    results_sha256: str | None = None


@dataclass(frozen=True)
class Approver:
    """A person of the policy whose key has a standing approval: the review entry, the key, the roles counted."""

    person: Person
    roles: tuple[str, ...]
    key_id: str
    seq: int

    def text(self) -> str:
        """``Alice Example <alice@example.org> (model-risk)``."""
        return f"{self.person.label()} ({', '.join(self.roles)})"

    def as_json(self) -> dict[str, Any]:
        """Name, e-mail and roles from the policy; key id and review entry."""
        return {"name": self.person.name, "email": self.person.email, "roles": list(self.roles),
                "key_id": self.key_id, "entry": self.seq}


@dataclass(frozen=True)
class ApprovalDecision:
    """A run's approval under a policy: ``status`` APPROVED, NOT APPROVED or NOT CHECKED (no policy);
    ``approvers`` from the policy; ``missing``: what is missing, in words; ``unknown_keys``: ids of keys that
    validly signed a review of the run and that the policy does not know (never named by their claim);
    ``basis``: which policy decided, in words, when it is not simply the one the command was given (the one the
    run's spec names, or a given one that differs from it; ``certa.engine.services.policy_record.RunPolicy``)."""

    status: str
    run_id: str
    approvers: tuple[Approver, ...] = ()
    missing: tuple[str, ...] = ()
    unknown_keys: tuple[str, ...] = ()
    policy_sha256: str | None = None
    basis: str = ""

    @property
    def approved(self) -> bool:
        return self.status == APPROVED

    def headline(self) -> str:
        """``APPROVED``, ``NOT APPROVED`` or ``approval not checked (no policy)``."""
        return "approval not checked (no policy)" if self.status == NOT_CHECKED else self.status

    def detail(self) -> str:
        """By whom in which role, or what is missing; unknown keys named by id; then ``basis`` (only it when not
        checked)."""
        if self.status == NOT_CHECKED:
            return self.basis
        body = (f"by {'; '.join(a.text() for a in self.approvers)}" if self.approved
                else "; ".join(self.missing))
        unknown = (f"; not counted: review(s) signed by unknown key {', '.join(map(short_key, self.unknown_keys))}"
                   if self.unknown_keys else "")
        return body + unknown + (f"; {self.basis}" if self.basis else "")

    def text(self) -> str:
        """The decision in one line: the headline, then ``detail``."""
        if self.status == NOT_CHECKED:
            return f"{self.headline()}: {self.basis}" if self.basis else self.headline()
        return f"{self.status} {self.detail()}"

    def as_json(self) -> dict[str, Any]:
        """Status, approvers, what is missing, unknown keys and the policy's SHA-256."""
        return {"status": self.status, "approved": self.approved, "run_id": self.run_id,
                "approvers": [a.as_json() for a in self.approvers], "missing": list(self.missing),
                "unknown_keys": list(self.unknown_keys), "policy_sha256": self.policy_sha256, "basis": self.basis}


def _in_period(records: Sequence[_R], policy: TrustPolicy, kid: str) -> list[_R]:
    """The reviews of ``records`` that count for ``kid`` under its validity period (all those not signed by it)."""
    return [r for r in records if kid not in r.key_ids or policy.key_problem(kid, r.recorded_at) is None]


def _policy_key_gap(records: Sequence[CheckedReview], policy: TrustPolicy, kid: str) -> str | None:
    """``key_gap`` of ``kid`` among the reviews inside its period; when it signed none there, its reviews outside
    it: ``key expired on DATE (review entry N recorded at T)``."""
    reason = key_gap(_in_period(records, policy, kid), kid)
    if reason != "no review signed by this key":
        return reason
    outside = [(r, problem) for r in records if r.signature_valid and kid in r.key_ids
               and (problem := policy.key_problem(kid, r.recorded_at)) is not None]
    if not outside:
        return reason
    record, problem = outside[-1]
    return f"{problem} (review entry {record.seq} recorded at {record.recorded_at})"


def _person_gap(records: Sequence[CheckedReview], policy: TrustPolicy, person: Person) -> str:
    kids = [kid for kid, p in policy.people.items() if p == person]
    reasons = sorted({reason for kid in kids if (reason := _policy_key_gap(records, policy, kid)) is not None})
    return f"{person.label()}: {'; '.join(reasons).replace('this key', 'their key')}"


def evaluate_approval(policy: TrustPolicy | None, facts: RunFacts,
                      records: Sequence[CheckedReview]) -> ApprovalDecision:
    """The run's approval under ``policy`` given its checked reviews (see the module docstring)."""
    if policy is None:
        return ApprovalDecision(status=NOT_CHECKED, run_id=facts.run_id)
    unknown = tuple(dict.fromkeys(kid for r in records if r.signature_valid for kid in r.key_ids
                                  if kid not in policy.people))
    approving: dict[Person, tuple[str, int]] = {}
    for kid, person in policy.people.items():
        record = approval_by(_in_period(records, policy, kid), kid)
        if record is not None and person not in approving:
            approving[person] = (kid, record.seq)
    rules = policy.rules_for(facts.name, facts.profile)
    missing: list[str] = []
    if not rules:
        missing.append(f"the policy has no rule for spec '{facts.name}' under profile {facts.profile}: "
                       "it does not say who may approve this run")
    required = {role for rule in rules for role, _ in rule.require}
    for rule in rules:
        for role, count in rule.require:
            have = [p for p in approving if role in p.roles]
            if len(have) >= count:
                continue
            holders = sorted({p for p in policy.people.values() if role in p.roles and p not in approving},
                             key=Person.label)
            why = f" ({'; '.join(_person_gap(records, policy, p) for p in holders)})" if holders else \
                " (the policy names nobody in this role)"
            missing.append(f"role {role} needs {count} approval(s) by distinct people, has {len(have)} "
                           f"({rule.text()}){why}")
    approvers = tuple(Approver(person=p, roles=tuple(r for r in p.roles if r in required), key_id=kid, seq=seq)
                      for p, (kid, seq) in approving.items() if required & set(p.roles))
    return ApprovalDecision(status=NOT_APPROVED if missing else APPROVED, run_id=facts.run_id,
                            approvers=tuple(sorted(approvers, key=lambda a: a.seq)), missing=tuple(missing),
                            unknown_keys=unknown, policy_sha256=policy.sha256)


@dataclass(frozen=True)
class SignerView:
    """Who signed one review, as a page shows it: ``kind`` is ``known`` (a person of the policy), ``expired`` (a
    key of the policy, the review recorded outside its validity period: after it or before it), ``unknown`` (a
    key the policy does not list), ``unchecked`` (signed, no policy given), ``unsigned`` or ``invalid`` (the
    signature does not verify); ``text`` says it in words, never presenting a claimed name as who signed."""

    kind: str
    text: str

    def as_json(self) -> dict[str, str]:
        """``{"kind", "text"}``."""
        return {"kind": self.kind, "text": self.text}


def review_signer(record: CheckedReview, policy: TrustPolicy | None) -> SignerView:
    """Who signed ``record``, in words, under ``policy`` (None: not checked against one)."""
    claim = f"claims to be '{record.reviewer}'"
    if not record.signed:
        return SignerView("unsigned", f"unsigned, {claim}: counts for no approval")
    if not record.signature_valid:
        return SignerView("invalid", f"signature does not verify, {claim}: counts for no approval")
    keys = ", ".join(short_key(kid) for kid in record.key_ids)
    if policy is None:
        return SignerView("unchecked", f"signed by key {keys}, {claim} — not checked against a policy")
    listed = [kid for kid in record.key_ids if kid in policy.people]
    if not listed:
        return SignerView("unknown", f"unknown key {keys}")
    known = [policy.people[kid] for kid in listed if policy.key_problem(kid, record.recorded_at) is None]
    if not known:
        outside = "; ".join(f"{policy.key_problem(kid, record.recorded_at)} ({short_key(kid)}, listed for "
                            f"{policy.people[kid].label()})" for kid in listed)
        return SignerView("expired", f"{outside}: counts for no approval")
    people = "; ".join(dict.fromkeys(f"{p.label()} ({', '.join(p.roles)})" for p in known))
    return SignerView("known", people)
