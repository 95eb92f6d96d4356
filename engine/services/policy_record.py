"""A trust policy recorded in the ledger when it was used (``certa verify --policy FILE --record``).

One ``policy`` entry per distinct policy (``certa.ledger.run_record.LEDGER_KINDS``), about no run: its ``run_id``
is the first 32 hex digits of the policy file's SHA-256 (found by ``Ledger.policies``, a search of a partial index of
the entries about no run), and a policy used again is not recorded twice. The payload::

    {"sha256", "source", "text", "keys": [{"key_id", "person", "roles"}, ...]}

holds the file's text as read and every key it trusted as resolved then: a policy names keys by file, and its
digest covers the file, not the key files, so the key ids it resolved to are recorded beside it. An auditor reading
the ledger later sees which policy (and which keys) the approvals shown were decided by, and since when.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certa.engine.core.trust_policy import TrustPolicy

if TYPE_CHECKING:
    from certa.ledger import Ledger

__all__ = ["RecordedPolicy", "policy_id", "policy_payload", "record_policy"]


def policy_id(policy: TrustPolicy) -> str:
    """The ``run_id`` of ``policy``'s entry: the first 32 hex digits of its SHA-256."""
    return policy.sha256[:32]


def policy_payload(policy: TrustPolicy) -> dict[str, Any]:
    """The ``policy`` entry's payload (module docstring), keys in key-id order."""
    return {"sha256": policy.sha256, "source": policy.source, "text": policy.text,
            "keys": [{"key_id": kid, "person": person.label(), "roles": list(person.roles)}
                     for kid, person in sorted(policy.people.items())]}


@dataclass(frozen=True)
class RecordedPolicy:
    """The policy's entry: its ``seq`` and whether this call appended it (``new``) or found it recorded."""

    sha256: str
    seq: int
    new: bool

    def as_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "entry_seq": self.seq, "new": self.new}

    def text(self) -> str:
        return (f"policy {self.sha256} {'recorded as' if self.new else 'already recorded in'} entry {self.seq}")


def record_policy(ledger: Ledger, policy: TrustPolicy) -> RecordedPolicy:
    """Append ``policy``'s entry to ``ledger`` (opened for writing) unless an entry of the same policy (SHA-256 and
    resolved keys) is recorded already; a policy file whose key files now resolve to other keys is recorded again."""
    payload = policy_payload(policy)
    for entry in ledger.policies(policy_id(policy)):
        if entry.data() == payload:
            return RecordedPolicy(policy.sha256, entry.seq, new=False)
    return RecordedPolicy(policy.sha256, ledger.record_policy(policy_id(policy), payload), new=True)
