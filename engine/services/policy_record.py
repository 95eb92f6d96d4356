"""A trust policy recorded in the ledger when it was used (``certa verify --policy FILE --record``, and ``certa run``
of a spec that names one), and the policy that decides a recorded run's approval.

One ``policy`` entry per distinct policy (``certa.ledger.run_record.LEDGER_KINDS``), about no run: its ``run_id``
is the first 32 hex digits of the policy file's SHA-256 (found by ``Ledger.policies``, a search of a partial index of
the entries about no run), and a policy used again is not recorded twice. The payload::

    {"sha256", "source", "text", "keys": [{"key_id", "person", "roles"}, ...], "key_files": {FILE: KEY_ID, ...}}

holds the file's text as read and every key it trusted as resolved then: a policy names keys by file, and its
digest covers the file, not the key files, so the key ids it resolved to are recorded beside it (``key_files``: each
``public_key`` file as written -> its key id). An auditor reading the ledger later sees which policy (and which keys)
the approvals shown were decided by, and since when; ``recorded_policy`` rebuilds it from the entry alone.

A spec may name its policy (``approval: {policy: FILE, sha256: HEX}``, ``certa.engine.core.spec.PolicyPin``):
``certa run`` reads and checks it (``pinned_policy``) before the work and records it with the run. Which policy
decides a recorded run's approval (``run_policies``): a command's ``--policy`` if given (said to differ when it is
not the one the run's spec names), else the one its spec names, as the ledger recorded it; the spec's text, in the
run entry, holds the pin, and the certificate's ``content.spec.sha256`` covers that text, so a certificate names its
policy's digest without a field of its own (its content format, and every replay, unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.engine.foundation.errors import SpecError
from certa.engine.core.trust_policy import TrustPolicy, load_policy, parse_policy

if TYPE_CHECKING:
    from certa.engine.core.spec import Plan, PolicyPin
    from certa.ledger import Ledger
    from certa.ledger.rows import RunReads
    from certa.ledger.rows import EntryRow, RunRow

__all__ = ["RecordedPolicy", "RunPolicy", "policy_id", "policy_payload", "record_policy", "pinned_policy",
           "recorded_policy", "run_policies", "spec_approval_pin"]


def policy_id(policy: TrustPolicy) -> str:
    """The ``run_id`` of ``policy``'s entry: the first 32 hex digits of its SHA-256."""
    return policy.sha256[:32]


def policy_payload(policy: TrustPolicy) -> dict[str, Any]:
    """The ``policy`` entry's payload (module docstring), keys in key-id order."""
    return {"sha256": policy.sha256, "source": policy.source, "text": policy.text,
            "keys": [{"key_id": kid, "person": person.label(), "roles": list(person.roles)}
                     for kid, person in sorted(policy.people.items())],
            "key_files": dict(sorted(policy.key_files.items()))}


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


def pinned_policy(plan: Plan) -> TrustPolicy | None:
    """The trust policy ``plan``'s spec names (``approval``), read from its file and checked against the pinned
    SHA-256 (``SpecError`` naming the spec's ``approval.sha256`` when it differs); None when the spec names none."""
    pin = plan.approval
    if pin is None or pin.path is None:
        return None
    policy = load_policy(Path(pin.path))
    if policy.sha256 != pin.sha256:
        raise SpecError(f"the trust policy {pin.policy} has SHA-256 {policy.sha256}, but the spec pins {pin.sha256}: "
                        "pin the policy you mean (sha256sum FILE)", file=plan.source, path="approval.sha256")
    return policy


def _rebuilt(entry: EntryRow, sha256: str) -> TrustPolicy | None:
    """The policy of SHA-256 ``sha256`` rebuilt from ``entry`` alone, None when it cannot be (not that policy, an
    unreadable payload, which 'verify' names, or one recorded before key files were)."""
    try:
        payload = entry.data()
        if not isinstance(payload, dict) or payload.get("sha256") != sha256:
            return None
        policy = parse_policy(str(payload["text"]).encode("utf-8"),
                              f"{payload['source']} as recorded in ledger entry {entry.seq}",
                              key_files=payload.get("key_files", {}))
    except (SpecError, KeyError, TypeError, ValueError):
        return None
    return policy if policy.sha256 == sha256 else None


class _RecordedPolicies:
    """A ledger's ``policy`` entries, read once per policy and rebuilt once per entry (``recorded_policy``)."""

    def __init__(self, ledger: RunReads) -> None:
        self._ledger = ledger
        self._entries: dict[str, list[EntryRow]] = {}
        self._rebuilt: dict[int, TrustPolicy | None] = {}

    def find(self, sha256: str, through: int | None) -> tuple[TrustPolicy, int] | None:
        if sha256 not in self._entries:
            self._entries[sha256] = self._ledger.policies(sha256[:32])
        for entry in self._entries[sha256]:  # newest first
            if through is not None and entry.seq > through:
                continue
            if entry.seq not in self._rebuilt:
                self._rebuilt[entry.seq] = _rebuilt(entry, sha256)
            policy = self._rebuilt[entry.seq]
            if policy is not None:
                return policy, entry.seq
        return None


def recorded_policy(ledger: RunReads, sha256: str, *, through: int | None = None) -> tuple[TrustPolicy, int] | None:
    """The policy of SHA-256 ``sha256`` as the ledger's newest ``policy`` entry of it (at or before entry ``through``,
    when given) recorded it (its text, its key files resolved to the recorded key ids: no file is read), and that
    entry's seq; None when no entry of it can rebuild it (none recorded, or one recorded before key files were)."""
    return _RecordedPolicies(ledger).find(sha256, through)


@dataclass(frozen=True)
class RunPolicy:
    """The policy that decides a run's approval (None: not checked) and ``basis``, which one it is in words when
    that is not simply the ``--policy`` given ("" then, and when no policy is named at all)."""

    policy: TrustPolicy | None
    basis: str = ""


def _short(sha256: str) -> str:
    return f"sha256 {sha256[:16]}…"


def _decide(recorded: _RecordedPolicies, pin: PolicyPin | None, given: TrustPolicy | None, through: int) -> RunPolicy:
    if given is not None:
        if pin is None or pin.sha256 == given.sha256:
            return RunPolicy(given)
        return RunPolicy(given, f"under --policy {given.source} ({_short(given.sha256)}), which differs from the "
                                f"policy the run's spec names, {pin.policy} ({_short(pin.sha256)})")
    if pin is None:
        return RunPolicy(None)
    found = recorded.find(pin.sha256, through)
    if found is None:
        return RunPolicy(None, f"the run's spec names the policy {pin.policy} ({_short(pin.sha256)}), which the "
                               "ledger does not hold: give it with --policy FILE")
    policy, seq = found
    return RunPolicy(policy, f"under the policy the run's spec names, {pin.policy} ({_short(pin.sha256)}, recorded "
                             f"in ledger entry {seq})")


def spec_approval_pin(spec_text: str, source: str) -> PolicyPin | None:
    """``certa.engine.core.spec.approval_pin`` of a recorded spec's text, or None at once (without importing the spec
    reader and YAML, about 35 ms of ``certa show``) when the text cannot name ``approval``: a YAML key is the text
    ``approval`` as written (plain, quoted, anchored or tagged) unless a double-quoted key spells it with an escape,
    which needs a backslash; so a text holding neither ``approval`` nor a backslash names none."""
    if "approval" not in spec_text and "\\" not in spec_text:
        return None
    from certa.engine.core.spec import approval_pin  # the spec's reader: when a run's spec may pin a policy

    return approval_pin(spec_text, source)


def run_policies(ledger: RunReads, rows: Iterable[RunRow], given: TrustPolicy | None) -> dict[str, RunPolicy]:
    """Run id -> the policy deciding its approval (module docstring) for each of ``rows``: the run entry's spec
    text read once per distinct spec (``spec_sha256``). The policy a spec names is the one recorded with the run: the
    newest entry of it at or before the entry after the run's record (``certa run`` appends it there, or finds it
    recorded before), so a policy recorded again later, its key files resolving to other keys, does not change an
    earlier run's decision."""
    pins: dict[str, PolicyPin | None] = {}
    recorded = _RecordedPolicies(ledger)
    runs: dict[str, RunPolicy] = {}
    for row in rows:
        if row.spec_sha256 not in pins:
            run_entry = next(ledger.entries(run_id=row.run_id, kinds=["run"]), None)
            try:
                pins[row.spec_sha256] = None if run_entry is None else spec_approval_pin(
                    str(run_entry.data()["spec_text"]), f"run {row.run_id}'s spec")
            except (SpecError, KeyError, TypeError, ValueError):  # an unreadable run entry: 'verify' names it
                pins[row.spec_sha256] = None
        runs[row.run_id] = _decide(recorded, pins[row.spec_sha256], given, row.last_seq + 1)
    return runs
