"""Trust policies (certa.engine.core.trust_policy) and approval under them (certa.engine.core.approvals): every
outcome of ``evaluate_approval`` on hand-built checked reviews, the names always the policy's, an unknown key
never named by its claim, and a policy file's errors located by file, line and key path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from certa.engine.core.approvals import (APPROVED, NOT_APPROVED, NOT_CHECKED, RunFacts, evaluate_approval,
                                         review_signer)
from certa.engine.core.trust_policy import load_policy, parse_policy
from certa.engine.foundation.errors import SpecError
from certa.engine.foundation.signing import key_id

ALICE, BOB, CAROL, MALLORY = ("a" * 64), ("b" * 64), ("c" * 64), ("d" * 64)
CAROL_SPARE = "e" * 64

POLICY = f"""\
certa_policy: 1
people:
  - name: Alice Example
    email: alice@example.org
    roles: [model-risk]
    keys: [{{key_id: {ALICE}}}]
  - name: Bob Example
    email: bob@example.org
    roles: [compliance]
    keys: [{{key_id: {BOB}}}]
  - name: Carol Example
    email: carol@example.org
    roles: [model-risk]
    keys: [{{key_id: {CAROL}}}, {{key_id: {CAROL_SPARE}}}]
rules:
  - specs: "vendor-*"
    require: {{model-risk: 1}}
  - specs: "vendor-*"
    profiles: [release]
    require: {{compliance: 1, model-risk: 2}}
"""


@dataclass(frozen=True)
class Review:
    """A checked review (``certa.engine.core.approvals.CheckedReview``)."""

    seq: int
    decision: str
    key_ids: tuple[str, ...] = ()
    reviewer: str = "someone"
    recorded_at: str = "2026-06-01T12:00:00.000000Z"
    signed: bool = True
    signature_valid: bool | None = True
    out_of_order: int | None = None


def _policy():
    return parse_policy(POLICY.encode(), "approvers.yaml")


def _facts(profile: str = "ci", name: str = "vendor-a") -> RunFacts:
    return RunFacts(run_id="r" * 32, name=name, profile=profile)


def test_no_policy_is_not_checked_whatever_the_reviews_claim() -> None:
    decision = evaluate_approval(None, _facts(), [Review(1, "approved", (MALLORY,), reviewer="alice@example.org")])
    assert decision.status == NOT_CHECKED and not decision.approved
    assert decision.text() == "approval not checked (no policy)" and "alice" not in decision.text()
    signer = review_signer(Review(1, "approved", (MALLORY,), reviewer="alice@example.org"), None)
    assert signer.kind == "unchecked"
    assert signer.text == "signed by key dddddddd…, claims to be 'alice@example.org' — not checked against a policy"


def test_an_approval_names_the_person_and_role_from_the_policy_not_the_review() -> None:
    decision = evaluate_approval(_policy(), _facts(), [Review(7, "approved", (ALICE,), reviewer="mallory")])
    assert decision.status == APPROVED
    assert [(a.person.name, a.person.email, a.roles, a.seq) for a in decision.approvers] == \
        [("Alice Example", "alice@example.org", ("model-risk",), 7)]
    assert decision.text() == "APPROVED by Alice Example <alice@example.org> (model-risk)"
    assert "mallory" not in decision.text()
    assert review_signer(Review(7, "approved", (ALICE,), reviewer="mallory"), _policy()).text == \
        "Alice Example <alice@example.org> (model-risk)"


def test_an_unknown_key_claiming_an_approvers_name_counts_for_nothing_and_is_shown_by_id() -> None:
    reviews = [Review(5, "approved", (MALLORY,), reviewer="Alice Example <alice@example.org>")]
    decision = evaluate_approval(_policy(), _facts(), reviews)
    assert decision.status == NOT_APPROVED and decision.unknown_keys == (MALLORY,)
    assert decision.missing == ("role model-risk needs 1 approval(s) by distinct people, has 0 (specs 'vendor-*') "
                                "(Alice Example <alice@example.org>: no review signed by their key; Carol Example "
                                "<carol@example.org>: no review signed by their key)",)
    assert decision.text().endswith("; not counted: review(s) signed by unknown key dddddddd…")
    signer = review_signer(reviews[0], _policy())
    assert (signer.kind, signer.text) == ("unknown", "unknown key dddddddd…")
    # with the authorised approver's real approval beside it, the run is approved by her alone
    decision = evaluate_approval(_policy(), _facts(), [*reviews, Review(6, "approved", (ALICE,))])
    assert decision.status == APPROVED and [a.person.name for a in decision.approvers] == ["Alice Example"]
    assert decision.unknown_keys == (MALLORY,)


def test_the_wrong_role_does_not_approve() -> None:
    decision = evaluate_approval(_policy(), _facts(), [Review(3, "approved", (BOB,))])  # compliance, not model-risk
    assert decision.status == NOT_APPROVED and decision.approvers == ()
    assert decision.missing[0].startswith("role model-risk needs 1 approval(s) by distinct people, has 0")


def test_release_runs_need_every_role_and_distinct_people() -> None:
    policy = _policy()
    both_carol_keys = [Review(1, "approved", (CAROL,)), Review(2, "approved", (CAROL_SPARE,)),
                       Review(3, "approved", (BOB,))]
    decision = evaluate_approval(policy, _facts("release"), both_carol_keys)
    assert decision.status == NOT_APPROVED  # one person with two keys is one approver
    assert decision.missing == ("role model-risk needs 2 approval(s) by distinct people, has 1 (specs 'vendor-*', "
                                "profile release) (Alice Example <alice@example.org>: no review signed by their key)",)
    decision = evaluate_approval(policy, _facts("release"), [*both_carol_keys, Review(4, "approved", (ALICE,))])
    assert decision.status == APPROVED
    assert [(a.person.name, a.roles) for a in decision.approvers] == \
        [("Carol Example", ("model-risk",)), ("Bob Example", ("compliance",)), ("Alice Example", ("model-risk",))]
    # the same reviews under ci: only the first rule applies
    assert evaluate_approval(policy, _facts("ci"), [Review(1, "approved", (CAROL,))]).status == APPROVED


def test_a_newer_rejection_withdraws_an_approval_and_says_so() -> None:
    reviews = [Review(1, "approved", (ALICE,)), Review(2, "comment", (ALICE,)), Review(3, "rejected", (ALICE,))]
    decision = evaluate_approval(_policy(), _facts(), reviews)
    assert decision.status == NOT_APPROVED
    assert "Alice Example <alice@example.org>: its newest signed decision by their key is 'rejected'" in \
        decision.missing[0]
    assert evaluate_approval(_policy(), _facts(), [*reviews, Review(4, "approved", (ALICE,))]).status == APPROVED


def test_reviews_out_of_signing_order_approve_nothing() -> None:
    reviews = [Review(1, "rejected", (ALICE,)), Review(2, "approved", (ALICE,), out_of_order=1)]
    decision = evaluate_approval(_policy(), _facts(), reviews)
    assert decision.status == NOT_APPROVED
    assert "recorded out of signing order (entry 2 after entry 1" in decision.missing[0]


def test_unsigned_and_invalid_reviews_count_for_nothing() -> None:
    reviews = [Review(1, "approved", (), reviewer="Alice Example", signed=False, signature_valid=None),
               Review(2, "approved", (ALICE,), signature_valid=False)]
    decision = evaluate_approval(_policy(), _facts(), reviews)
    assert decision.status == NOT_APPROVED and decision.unknown_keys == ()
    assert "the reviews signed by this key do not verify".replace("this key", "their key") in decision.missing[0]
    assert [review_signer(r, _policy()).kind for r in reviews] == ["unsigned", "invalid"]


def test_a_run_no_rule_covers_is_not_approved() -> None:
    decision = evaluate_approval(_policy(), _facts(name="other"), [Review(1, "approved", (ALICE,))])
    assert decision.status == NOT_APPROVED and decision.approvers == ()
    assert decision.missing == ("the policy has no rule for spec 'other' under profile ci: it does not say who may "
                                "approve this run",)


def test_json_names_the_policy_digest_and_the_approvers() -> None:
    policy = _policy()
    out = evaluate_approval(policy, _facts(), [Review(9, "approved", (ALICE,)), Review(10, "approved", (MALLORY,))]).as_json()
    assert out == {"status": "APPROVED", "approved": True, "run_id": "r" * 32, "missing": [],
                   "approvers": [{"name": "Alice Example", "email": "alice@example.org", "roles": ["model-risk"],
                                  "key_id": ALICE, "entry": 9}],
                   "unknown_keys": [MALLORY], "policy_sha256": policy.sha256, "basis": ""}


def test_a_policy_reads_pem_keys_relative_to_its_file(tmp_path: Path) -> None:
    public = Ed25519PrivateKey.generate().public_key()
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "dana.pub").write_bytes(
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    path = tmp_path / "policy.yaml"
    path.write_text("certa_policy: 1\npeople:\n  - {name: Dana, email: dana@example.org, roles: [qa], "
                    "keys: [{public_key: keys/dana.pub}]}\nrules:\n  - require: {qa: 1}\n", encoding="utf-8")
    policy = load_policy(path)
    assert list(policy.people) == [key_id(public)] and policy.rules[0].specs == "*"
    assert policy.rules[0].profiles is None


@pytest.mark.parametrize(("text", "where"), [
    (POLICY.replace("roles: [compliance]", "role: [compliance]"), "approvers.yaml:7:5: people[1]: missing required key: 'roles'"),
    (POLICY.replace("model-risk: 1}", "model-risk: 0}"), "approvers.yaml:17:27: rules[0].require.model-risk: 0 is less than the minimum of 1"),
    (POLICY.replace(f"key_id: {BOB}", "key_id: 1234"), "approvers.yaml:10:21: people[1].keys[0].key_id: expected string (got int 1234)"),
    (POLICY.replace("certa_policy: 1", "certa_policy: 2"), "approvers.yaml:1:15: certa_policy: expected 1"),
    (POLICY + "rules: []\n", "approvers.yaml:21:1: duplicate key 'rules' (first given on line 15)"),
])
def test_policy_errors_name_file_line_and_field(text: str, where: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_policy(text.encode(), "approvers.yaml")
    assert str(error.value).startswith(where), str(error.value)


def test_one_key_for_two_people_and_an_unreadable_key_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"people\[1\]\.keys: key aaaaaaaaaaaaaaaa… is listed for Alice Example"):
        parse_policy(POLICY.replace(f"key_id: {BOB}", f"key_id: {ALICE}").encode(), "approvers.yaml")
    with pytest.raises(SpecError, match=r"people\[0\]\.keys\[0\]\.public_key: cannot read the public key file"):
        parse_policy(b"certa_policy: 1\npeople:\n  - {name: A, email: a@b.c, roles: [x], keys: [{public_key: no.pub}]}"
                     b"\nrules: [{require: {x: 1}}]\n", "p.yaml", base_dir=tmp_path)


# Alice's key until the end of June 2026 (+02:00: 21:59:59Z), Carol's spare key from July 2026 (unquoted: a YAML
# timestamp, read as its text)
PERIODS = POLICY.replace(f"keys: [{{key_id: {ALICE}}}]",
                         f"keys: [{{key_id: {ALICE}, not_after: '2026-06-30T23:59:59+02:00'}}]").replace(
    f"{{key_id: {CAROL_SPARE}}}", f"{{key_id: {CAROL_SPARE}, not_before: 2026-07-01T00:00:00Z}}")


def test_a_review_counts_only_if_the_ledger_recorded_it_inside_the_keys_period() -> None:
    policy = parse_policy(PERIODS.encode(), "approvers.yaml")
    assert policy.periods[ALICE].text() == "until 2026-06-30T23:59:59+02:00"
    assert policy.periods[CAROL_SPARE].not_before == "2026-07-01T00:00:00Z" and CAROL not in policy.periods
    inside = Review(4, "approved", (ALICE,), recorded_at="2026-06-30T21:59:59.000000Z")  # the last second, included
    assert evaluate_approval(policy, _facts(), [inside]).status == APPROVED
    late = Review(5, "approved", (ALICE,), reviewer="Alice Example", recorded_at="2026-06-30T22:00:00.000001Z")
    decision = evaluate_approval(policy, _facts(), [late])
    assert decision.status == NOT_APPROVED and decision.approvers == () and decision.unknown_keys == ()
    assert ("Alice Example <alice@example.org>: key expired on 2026-06-30T23:59:59+02:00 (review entry 5 recorded "
            "at 2026-06-30T22:00:00.000001Z)") in decision.missing[0]
    signer = review_signer(late, policy)
    assert (signer.kind, signer.text) == ("expired", "key expired on 2026-06-30T23:59:59+02:00 (aaaaaaaa…, listed "
                                                     "for Alice Example <alice@example.org>): counts for no approval")
    early = Review(6, "approved", (CAROL_SPARE,), recorded_at="2026-06-30T23:59:59.999999Z")
    assert evaluate_approval(policy, _facts(), [early]).status == NOT_APPROVED
    assert review_signer(early, policy).text.startswith("key not valid before 2026-07-01T00:00:00Z (eeeeeeee…")
    assert evaluate_approval(policy, _facts(), [Review(7, "approved", (CAROL_SPARE,),
                                                       recorded_at="2026-07-01T00:00:00.000000Z")]).status == APPROVED


def test_a_rejection_outside_the_period_does_not_withdraw_an_approval_inside_it() -> None:
    policy = parse_policy(PERIODS.encode(), "approvers.yaml")
    reviews = [Review(1, "approved", (ALICE,)), Review(2, "rejected", (ALICE,), recorded_at="2027-01-01T00:00:00Z")]
    decision = evaluate_approval(policy, _facts(), reviews)
    assert decision.status == APPROVED and [a.seq for a in decision.approvers] == [1]
    assert [review_signer(r, policy).kind for r in reviews] == ["known", "expired"]


@pytest.mark.parametrize(("key", "message"), [
    ("not_after: '2026-13-01T00:00:00Z'", r"people\[0\]\.keys\[0\]: not an RFC 3339 date-time"),
    ("not_after: '2026-01-01T00:00:00'", r"people\[0\]\.keys\[0\]\.not_after: .* does not match"),
    ("not_after: 2026-01-01", r"people\[0\]\.keys\[0\]\.not_after: .* does not match"),
    ("not_before: 2026-02-01T00:00:00Z, not_after: 2026-01-01T00:00:00Z",
     r"people\[0\]\.keys\[0\]: not_before 2026-02-01T00:00:00Z is after not_after 2026-01-01T00:00:00Z"),
])
def test_a_key_period_must_be_rfc_3339_times_in_order(key: str, message: str) -> None:
    text = POLICY.replace(f"keys: [{{key_id: {ALICE}}}]", f"keys: [{{key_id: {ALICE}, {key}}}]")
    with pytest.raises(SpecError, match=message):
        parse_policy(text.encode(), "approvers.yaml")


def test_one_key_listed_twice_with_two_periods_is_refused() -> None:
    text = POLICY.replace(f"keys: [{{key_id: {ALICE}}}]",
                          f"keys: [{{key_id: {ALICE}}}, {{key_id: {ALICE}, not_after: 2026-01-01T00:00:00Z}}]")
    with pytest.raises(SpecError, match=r"people\[0\]\.keys\[1\]: key aaaaaaaaaaaaaaaa… is listed twice"):
        parse_policy(text.encode(), "approvers.yaml")
