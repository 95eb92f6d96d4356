"""The check ``certa verify`` makes of every registration entry (``certa.engine.services.registrations``): that it
states what it fixes. A module of its own so that verifying a ledger does not import what registering and running
a spec need (the interpreter, the statistics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from certa.engine.foundation.canonical import canonical_sha256, sha256_hex

if TYPE_CHECKING:
    from certa.ledger import Ledger, Problem

__all__ = ["registration_problems"]


def registration_problems(ledger: Ledger, *, after: int = 0) -> list[Problem]:
    """A ``Problem`` for every registration entry (after entry ``after``) that does not state what it fixes: its
    ``knobs_hash`` is not the SHA-256 of its recorded ``knobs`` (RFC 8785), or its ``spec_sha256`` not that of its
    ``spec_text``. The hash chain proves an entry unchanged since it was written; this proves that what was written
    agrees with itself (``certa verify``), as a run's certificate digests are recomputed."""
    from certa.ledger import Problem  # the ledger's report type; imported here as the ledger itself is

    problems = []
    for entry in ledger.registrations():
        if entry.seq <= after:
            continue
        payload = entry.data()
        found = []
        knobs, text = payload.get("knobs"), payload.get("spec_text")
        if not isinstance(knobs, Mapping) or canonical_sha256(knobs) != payload.get("knobs_hash"):
            found.append(f"knobs_hash {payload.get('knobs_hash')!r} is not the SHA-256 of the recorded knobs")
        if not isinstance(text, str) or sha256_hex(text.encode("utf-8")) != payload.get("spec_sha256"):
            found.append(f"spec_sha256 {payload.get('spec_sha256')!r} is not the SHA-256 of the recorded spec text")
        problems += [Problem(f"entry {entry.seq} (registration {entry.run_id})", f"registration: {message}", entry.seq,
                             entry.run_id) for message in found]
    return sorted(problems, key=lambda p: p.seq or 0)
