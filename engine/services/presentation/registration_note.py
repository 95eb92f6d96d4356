"""What a certificate says of its registration (content format 3's ``registration``:
``certa.engine.services.registrations``), in words: ``certa run``, ``certa show`` and the HTML report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["differences_text", "registration_note"]


def differences_text(record: Mapping[str, Any]) -> str:
    """``path: registered X, run Y`` for each difference of a registration record, joined by ``; ``."""
    return "; ".join(f"{d['path']}: registered {d['registered']!r}, run {d['run']!r}" for d in record["differences"])


def registration_note(content: Mapping[str, Any]) -> str | None:
    """"registered on DATE (registration ID, entry SEQ), before the evidence ..." (with the checkpoint that proves it,
    when the run was given one) and whether the run's knobs and
    gates are the registered ones (each difference named); "not registered ..." when the run matched none; None for
    a certificate whose format records no registration (1 and 2)."""
    if "registration" not in content:
        return None
    record = content["registration"]
    if record is None:
        return "not registered: the spec was recorded with the run, after its evidence existed"
    proof = record.get("checkpoint")
    signed = "" if not isinstance(proof, Mapping) else (
        f"; checkpoint {proof['seq']}, signed by key(s) {', '.join(str(k)[:16] for k in proof['key_ids'])}, includes it")
    head = (f"registered on {str(record['registered_at'])[:10]} (registration {record['id']}, entry {record['seq']}), "
            f"before the evidence (its entry precedes the run's in the ledger{signed})")
    if not record["differences"]:
        return f"{head}; the run's knobs and gates are the registered ones"
    return f"{head}; the run DIFFERS from it: {differences_text(record)}"
