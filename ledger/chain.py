"""The hash chain: pure functions, no database.

Entry ``i`` stores ``payload`` (RFC 8785 canonical JSON), ``payload_sha256`` = SHA-256(payload) and

    entry_hash_i = SHA-256( JCS({seq, run_id, kind, recorded_at, payload_sha256, prev_hash}) ),
    prev_hash_i  = entry_hash_{i-1},   prev_hash_1 = 64 zeros.

Editing any field of any entry changes its hash and breaks the link to the next entry; deleting or
reordering entries breaks the ``seq`` sequence or a link. Truncating the tail is detected against a head
(``seq:entry_hash``) kept outside the database (``certa head``, ``certa verify --expect-head``), or signed
(``ledger.checkpoint``: ``certa checkpoint``, ``certa verify --checkpoint``).
"""

from __future__ import annotations

from typing import Any

from engine.canonical import canonical_bytes, canonical_sha256, sha256_hex

__all__ = ["GENESIS", "encode_payload", "entry_hash"]

GENESIS = "0" * 64


def encode_payload(payload: Any) -> tuple[str, str]:
    """(canonical JSON text, its SHA-256) of an entry payload."""
    raw = canonical_bytes(payload)
    return raw.decode("utf-8"), sha256_hex(raw)


def entry_hash(*, seq: int, run_id: str, kind: str, recorded_at: str, payload_sha256: str, prev_hash: str) -> str:
    """The chained hash of one entry (see module docstring)."""
    return canonical_sha256({"seq": seq, "run_id": run_id, "kind": kind, "recorded_at": recorded_at,
                             "payload_sha256": payload_sha256, "prev_hash": prev_hash})
