"""Registrations: a run's decisions fixed in the ledger before its evidence exists (``certa register``), and the
match of a run to one (``certa run``).

A registration is one ``registration`` entry (``certa.ledger.run_record.LEDGER_KINDS``) whose ``run_id`` column is
the registration's own id (32 hex digits, like a run id; no run has it). Its payload::

    {"name", "spec_text", "spec_sha256", "knobs_hash", "knobs", "seed", "profile", "source",
     "planned_sizes": [{"stage": ID, "knob": "n_max", "value": 400}, ...]}

``knobs`` are the spec's resolved knobs (profile, every stage's type, version and filled ``with:``, the gates and
their family: ``certa.engine.core.spec``), ``knobs_hash`` their SHA-256; the planned sample sizes are the knobs
that fix how much evidence a stage gathers (``SIZE_KNOBS``: a sequential test's ``n_min`` and ``n_max``, a
bootstrap's ``replicates``, a PAC report's ``test_size``), listed apart so that a reader sees them without
reading the knobs. Registering validates the spec (its schema, its knobs, its gates' paths) and reads no input:
the evidence need not exist yet.

A run matches the newest registration of its spec's name, or the one ``certa run --registration ID`` names. Its
certificate (content format 3) records ``registration``: the registration's id, entry seq, time, knobs hash and
``differences``, each knob or gate whose resolved value differs (``certa.engine.foundation.jsondiff.json_diff`` of
the two ``knobs``: a path with the registered and the run's value); or null, not registered. Input paths are not
knobs and are not compared. "Before the evidence" is what the ledger's order proves: the registration's entry
precedes every entry of the run (its seq is smaller). A checkpoint signed after registering (``certa register
--key``) and given to the run (``certa run --registration-checkpoint FILE --public-key PUB``) is checked: its
signature, then the registration entry's inclusion in its signed Merkle root (``checkpoint_proof``); the
certificate then records it (``registration.checkpoint``: its seq, root, time and signers).

A run whose knobs differ from its registration's is refused by the profiles ci and release
(a ``ProfileAbort`` of rule ``registration``, before any stage runs: recorded as an aborted run, exit 3, as a
profile rule stops a run)
and let through by dev with a ``registration`` decision (outcome ``warn``) naming the differences.

Pre-registration is the standard answer to "the analysis was chosen after the data were seen" (Nosek et al.,
"The preregistration revolution", PNAS 115(11), 2018); the EU AI Act (Regulation (EU) 2024/1689) Annex IV(2)(g)
asks for test reports "including with regard to pre-determined changes".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.engine.core.interpreter import AbortedExecution, Execution, Notify, RunDecisions, execute
from certa.engine.core.spec import Plan, load_plan
from certa.engine.core.stages.base import Decision, LedgerReader
from certa.engine.core.tables import Table
from certa.engine.foundation.atomic_files import check_writable
from certa.engine.foundation.errors import LedgerError, ProfileAbort
from certa.engine.foundation.jsondiff import json_diff
from certa.engine.services.presentation.registration_note import differences_text
from certa.engine.services.run import ledger_for_run, new_run_id

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from certa.engine.services.checkpoints import SignedHead
    from certa.ledger import Ledger
    from certa.ledger.checkpoint import Checkpoint
    from certa.ledger.rows import EntryRow

__all__ = ["SIZE_KNOBS", "RULE", "Registration", "planned_sizes", "registration_payload", "register",
           "register_spec_file", "find_registration", "checkpoint_proof", "registration_record", "execute_registered",
           "registration_decision"]

SIZE_KNOBS = ("n_min", "n_max", "replicates", "test_size")
"""Knob names that fix a planned sample size, wherever they sit in a stage's ``with:``."""
RULE = "registration"
"""The rule a run breaks when its knobs differ from its registration's (an abort's or a decision's ``rule``)."""


def _sizes(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key in SIZE_KNOBS and not isinstance(inner, Mapping):
                yield ".".join((*path, key)), inner
            else:
                yield from _sizes(inner, (*path, key))


def planned_sizes(plan: Plan) -> list[dict[str, Any]]:
    """``{"stage", "knob", "value"}`` of every knob of ``SIZE_KNOBS`` in the plan's stages (a nested knob by its
    dotted path), in stage order."""
    return [{"stage": stage.id, "knob": knob, "value": value}
            for stage in plan.stages for knob, value in _sizes(stage.knobs, ())]


def registration_payload(plan: Plan) -> dict[str, Any]:
    """The payload of ``plan``'s registration entry (module docstring)."""
    return {"name": plan.name, "spec_text": plan.spec_text, "spec_sha256": plan.spec_sha256,
            "knobs_hash": plan.knobs_hash, "knobs": dict(plan.knobs), "seed": str(plan.seed),
            "profile": plan.profile, "source": plan.source, "planned_sizes": planned_sizes(plan)}


@dataclass(frozen=True)
class Registration:
    """A registration as recorded: its id, entry ``seq``, ``recorded_at`` (UTC) and payload; ``checkpoint``, the
    checkpoint ``certa register --key`` signed over it (None: none signed then)."""

    registration_id: str
    seq: int
    recorded_at: str
    payload: Mapping[str, Any]
    checkpoint: SignedHead | None = None

    @classmethod
    def of(cls, entry: EntryRow) -> Registration:
        """The registration an entry of kind ``registration`` records."""
        return cls(entry.run_id, entry.seq, entry.recorded_at, entry.data())

    def as_json(self) -> dict[str, Any]:
        """Id, entry, time, name, knobs hash and planned sizes."""
        return {"ok": True, "registration_id": self.registration_id, "seq": self.seq,
                "recorded_at": self.recorded_at, "name": self.payload.get("name"),
                "knobs_hash": self.payload.get("knobs_hash"), "planned_sizes": self.payload.get("planned_sizes"),
                "checkpoint": None if self.checkpoint is None else self.checkpoint.as_json()}

    def text(self) -> str:
        """Which spec, which entry, its knobs hash and the planned sample sizes."""
        sizes = ", ".join(f"{s['stage']}.{s['knob']} = {s['value']}" for s in self.payload.get("planned_sizes", []))
        return "\n".join([f"registered '{self.payload.get('name')}' as {self.registration_id} (entry {self.seq}, "
                          f"{self.recorded_at})", f"knobs_hash {self.payload.get('knobs_hash')}",
                          f"planned sample sizes: {sizes or 'none (no stage has a size knob)'}",
                          *([] if self.checkpoint is None else
                            [f"checkpoint {self.checkpoint.seq} signed over it -> {self.checkpoint.file}"])])


def register(ledger: Ledger, plan: Plan, private_keys: Sequence[Ed25519PrivateKey] = (),
             out_file: Path | None = None) -> Registration:
    """Append ``plan``'s registration to ``ledger`` (opened for writing; no input is read); with ``private_keys``,
    sign a checkpoint of the head it makes (``certa.engine.services.checkpoints.sign_head``, written to
    ``out_file`` when given)."""
    from certa.engine.services.checkpoints import sign_head

    ledger.require_writable()
    registration_id = new_run_id()
    seq = ledger.record_registration(registration_id, registration_payload(plan))
    entry = next(entry for entry in ledger.registrations() if entry.seq == seq)
    signed = sign_head(ledger, private_keys, out_file) if private_keys else None
    return replace(Registration.of(entry), checkpoint=signed)


def register_spec_file(spec: Path, ledger: str, private_keys: Sequence[Ed25519PrivateKey] = (),
                       out_file: Path | None = None) -> Registration:
    """``register`` the spec at ``spec`` in the ledger at ``ledger`` (created if needed): the spec, and that
    ``out_file`` can be written, are checked first, so an invalid spec never opens, let alone creates, a ledger,
    and a registration is never recorded without the checkpoint asked for."""
    plan = load_plan(spec)
    if out_file is not None:
        check_writable(out_file, what="the checkpoint", new=True)
    with ledger_for_run(ledger) as opened:
        return register(opened, plan, private_keys, out_file)


def find_registration(ledger: Ledger, name: str, registration_id: str | None = None) -> Registration | None:
    """The registration a run of spec ``name`` matches: the one whose id is or starts with ``registration_id``
    (a ``LedgerError`` when none or several are), else the newest of that name (None: not registered)."""
    entries = ledger.registrations()
    if registration_id is None:
        for entry in entries:
            registration = Registration.of(entry)
            if registration.payload.get("name") == name:
                return registration
        return None
    wanted = registration_id.strip().lower()
    found = [entry for entry in entries if len(wanted) >= 4 and entry.run_id.startswith(wanted)]
    if len(found) != 1:
        raise LedgerError(f"{'no' if not found else 'more than one'} registration with id {registration_id!r} in "
                          f"{ledger.location}" + ("; 'certa register SPEC' records one" if not found else
                                                  "; give more of its digits"))
    return Registration.of(found[0])


def checkpoint_proof(ledger: Ledger, registration: Registration | None, checkpoint: Checkpoint) -> dict[str, Any]:
    """What a certificate records of a signed checkpoint (its signature already verified: ``open_checkpoint``) that
    proves the registration's entry is entry ``seq`` of the entries it covers (RFC 6962 inclusion against its
    signed root: ``certa.ledger.bundle.entry_proof_problem``): its ``seq``, ``root_hash``, ``signed_at`` and
    signers' ``key_ids``. A ``LedgerError`` when there is no registration or the checkpoint does not prove it."""
    from certa.ledger.bundle import entry_proof_problem

    if registration is None:
        raise LedgerError("a registration checkpoint was given, but the run matches no registration: "
                          "'certa register SPEC' first, or name one with --registration ID")
    entry = next((e for e in ledger.registrations() if e.seq == registration.seq), None)
    problem = "the registration's entry is gone" if entry is None else entry_proof_problem(ledger, entry, checkpoint)
    if problem is not None:
        raise LedgerError(f"checkpoint {checkpoint.seq} does not prove registration {registration.registration_id}: "
                          f"{problem}")
    return {"seq": checkpoint.seq, "root_hash": checkpoint.root_hash, "signed_at": checkpoint.signed_at,
            "key_ids": list(checkpoint.key_ids)}


def registration_record(registration: Registration | None, plan: Plan,
                        checkpoint: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """What a certificate records of the run's registration (None: not registered): its id, entry seq, time,
    knobs hash and the ``differences`` of the run's knobs from the registered ones (``{"path", "registered",
    "run"}``, empty when they are equal); with ``checkpoint`` (``checkpoint_proof``), the signed checkpoint that
    proves it."""
    if registration is None:
        return None
    registered = registration.payload.get("knobs", {})
    differences = [] if registration.payload.get("knobs_hash") == plan.knobs_hash else [
        change.as_json(("registered", "run")) for change in json_diff(registered, dict(plan.knobs))]
    return {"id": registration.registration_id, "seq": registration.seq, "registered_at": registration.recorded_at,
            "knobs_hash": registration.payload.get("knobs_hash"), "differences": differences,
            **({"checkpoint": dict(checkpoint)} if checkpoint is not None else {})}


def execute_registered(plan: Plan, tables: Mapping[str, Table], registration: Mapping[str, Any] | None, *,
                       ledger: LedgerReader | None, notify: Notify | None = None) -> Execution:
    """``execute`` for a run whose registration record is ``registration`` (``registration_record``; None: not
    registered), which its content records: in ci and release a run that differs from it raises
    ``AbortedExecution`` (a ``ProfileAbort`` of rule ``registration``, before any stage runs); in dev its ``registration`` decision is
    the run's last (``registration_decision``). ``certa run`` and a ``certa batch`` worker both run this."""
    try:
        differs = registration_decision(registration, plan.profile)
    except ProfileAbort as abort:
        raise AbortedExecution(abort, RunDecisions(())) from None
    execution = execute(plan, tables, ledger=ledger, notify=notify, registration=registration)
    if differs is None:
        return execution
    return replace(execution, decisions=execution.decisions + RunDecisions.of(None, (differs,)))


def registration_decision(record: Mapping[str, Any] | None, profile: str) -> Decision | None:
    """None when the run matches its registration or has none; otherwise, in ci and release, a ``ProfileAbort`` of
    rule ``RULE`` naming each difference, and in dev the ``registration`` decision (outcome ``warn``) naming the differences."""
    if record is None or not record["differences"]:
        return None
    if profile != "dev":
        raise ProfileAbort(f"the spec differs from its registration {record['id']} (entry {record['seq']}, "
                           f"{record['registered_at']}): {differences_text(record)}; profile {profile} refuses a run "
                           "whose decisions changed after registration: register the new spec, or run the "
                           "registered one", rule=RULE)
    return Decision(RULE, {"registration": record["id"], "rule": RULE, "profile": profile, "outcome": "warn",
                           "differences": record["differences"],
                           "message": f"the spec differs from its registration {record['id']} (entry "
                                      f"{record['seq']}): {differences_text(record)} (profile dev lets it "
                                      "through; ci and release refuse it)"})
