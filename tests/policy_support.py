"""The unauthorised-key case, shared by the CLI and browser tests of trust policies: two PASS runs of the small
spec, each approved by mallory with a key no policy lists (on the first run under her own name, on the second
claiming to be alice), the first one also approved by alice with her real key; and a policy in which alice (model-risk) must approve every run.
``spec_policy_case``: the same, the policy named by the spec (``approval:``) instead, and the runs made by ``certa run``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from certa.cli import main
from certa.engine import run
from certa.engine.foundation.signing import key_id
from certa.engine.services.reviews import review_payload
from certa.ledger import Ledger

from tests.conftest import small_spec_folder

POLICY = """\
certa_policy: 1
people:
  - {name: Alice Example, email: alice@example.org, roles: [model-risk], keys: [{public_key: keys/alice.pub}]}
rules:
  - require: {model-risk: 1}
"""


EXPIRED = "2001-01-01T00:00:00Z"
"""When alice's key expired in ``expired_policy``: before any review of the case was recorded."""


def expired_policy(case: PolicyCase) -> Path:
    """The case's policy with alice's key valid until ``EXPIRED`` only, written beside it."""
    path = case.policy.with_name("approvers-expired.yaml")
    path.write_text(case.policy.read_text(encoding="utf-8").replace(
        "{public_key: keys/alice.pub}", f"{{public_key: keys/alice.pub, not_after: {EXPIRED}}}"), encoding="utf-8")
    return path


@dataclass(frozen=True)
class PolicyCase:
    """The ledger, its two runs (``approved``: alice's real approval; ``unapproved``: mallory's only), the
    policy file and the two signers' key ids."""

    db: Path
    approved: str
    unapproved: str
    policy: Path
    alice: str
    mallory: str


def _write_policy(folder: Path, alice: Ed25519PrivateKey) -> Path:
    (folder / "keys").mkdir(parents=True)
    (folder / "keys" / "alice.pub").write_bytes(alice.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    policy = folder / "approvers.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return policy


def _review(db: Path, approved: str, unapproved: str, alice: Ed25519PrivateKey, mallory: Ed25519PrivateKey) -> None:
    with Ledger.open(db) as ledger:
        for run_id, claim in ((approved, "mallory@example.org"), (unapproved, "alice@example.org")):
            ledger.record_note(run_id, "review", review_payload(
                reviewer=claim, decision="approved", note="looks good to me",
                certificate=ledger.certificate(run_id), private_keys=[mallory]))
        ledger.record_note(approved, "review", review_payload(
            reviewer="alice@example.org", decision="approved", note="matches the model card",
            certificate=ledger.certificate(approved), private_keys=[alice]))


def policy_case(folder: Path) -> PolicyCase:
    """Build the case in ``folder`` (see the module docstring)."""
    alice, mallory = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    policy = _write_policy(folder, alice)
    spec = small_spec_folder(folder / "spec")
    db = folder / "ledger.db"
    with Ledger.open(db) as ledger:
        approved, unapproved = run(spec, ledger=ledger).run_id, run(spec, ledger=ledger).run_id
    _review(db, approved, unapproved, alice, mallory)
    return PolicyCase(db=db, approved=approved, unapproved=unapproved, policy=policy,
                      alice=key_id(alice.public_key()), mallory=key_id(mallory.public_key()))


def spec_naming_policy(folder: Path, alice: Ed25519PrivateKey) -> tuple[Path, Path]:
    """The small spec in ``folder`` with ``POLICY`` beside it (alice's key in ``keys/``), named and pinned by its
    ``approval:``; returns the spec's and the policy's paths."""
    spec = small_spec_folder(folder)
    policy = _write_policy(folder, alice)
    digest = hashlib.sha256(policy.read_bytes()).hexdigest()
    spec.write_text(spec.read_text(encoding="utf-8") + f"approval: {{policy: approvers.yaml, sha256: {digest}}}\n",
                    encoding="utf-8")
    return spec, policy


def spec_policy_case(folder: Path) -> tuple[PolicyCase, Path, list[dict]]:
    """The case with the policy in the spec's folder, named and pinned by the spec (``approval:``), and both runs
    made by ``certa run --json``: the case, the spec, and the two runs' JSON outputs."""
    alice, mallory = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    spec, policy = spec_naming_policy(folder / "spec", alice)
    db = folder / "ledger.db"
    outputs = []
    for _ in range(2):
        result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(db), "--json"])
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    approved, unapproved = (out["run_id"] for out in outputs)
    _review(db, approved, unapproved, alice, mallory)
    return (PolicyCase(db=db, approved=approved, unapproved=unapproved, policy=policy,
                       alice=key_id(alice.public_key()), mallory=key_id(mallory.public_key())), spec, outputs)
