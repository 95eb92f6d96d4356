"""Signed checkpoints of the chain head: pure functions over bytes, no database.

A hash chain proves nothing against whoever can rewrite the whole database: they can recompute every
hash. What they cannot do is forge a head that was exported earlier and signed with a key they do not
hold. A checkpoint is the head (``seq``, ``entry_hash``), the RFC 6962 Merkle root of entries 1..seq
(``certa.ledger.merkle``: it lets one certificate be proven part of the ledger offline) and the time it was
signed, as RFC 8785 canonical JSON, in a DSSE v1 envelope (``certa.engine.foundation.signing``) of payload type
``application/vnd.certa.checkpoint+json; version=1``::

    JCS({"certa_checkpoint": 1, "seq": N, "entry_hash": "…", "root_hash": "…", "signed_at": "…"})

``certa verify --checkpoint FILE --public-key KEY`` checks the signature first, then that the ledger still
holds entry ``seq`` with that ``entry_hash`` and root: truncation or a rewritten chain behind a signed
checkpoint is detected even by someone who trusts nothing stored in the database. A checkpoint may carry
several signatures: a co-signer who has compared it with the ledger adds theirs (``certa cosign``), and
verification can require every one of several keys — a two-person rule for the heads an audit relies on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, UTC
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import LedgerError, LedgerIntegrityError
from certa.engine.foundation.json_read import parse_document

from certa.engine.foundation.signing import add_signature, envelope_payload_unverified, open_envelope, seal_envelope

__all__ = ["PAYLOAD_TYPE", "Checkpoint", "sign_checkpoint", "open_checkpoint", "read_checkpoint_unverified",
           "cosign_checkpoint"]

PAYLOAD_TYPE = "application/vnd.certa.checkpoint+json; version=1"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Checkpoint:
    """A head: entry ``seq`` of the chain had hash ``entry_hash``, and entries 1..seq had Merkle root
    ``root_hash``, when it was signed; ``key_ids`` are the keys whose signatures were verified (none for
    ``read_checkpoint_unverified``)."""

    seq: int
    entry_hash: str
    root_hash: str
    signed_at: str
    key_ids: tuple[str, ...]


def sign_checkpoint(private_keys: Sequence[Ed25519PrivateKey], seq: int, entry_hash: str, root_hash: str, *,
                    signed_at: datetime | None = None) -> dict[str, Any]:
    """The DSSE envelope of a checkpoint of head ``seq:entry_hash`` with Merkle root ``root_hash`` of
    entries 1..seq, signed by each of ``private_keys`` (see module docstring)."""
    if seq < 0 or not _HEX64.match(entry_hash) or not _HEX64.match(root_hash):
        raise LedgerError(f"not a chain head: {seq}:{entry_hash} (root {root_hash})")
    when = (signed_at or datetime.now(UTC)).astimezone(UTC)
    payload = canonical_bytes({"certa_checkpoint": 1, "seq": seq, "entry_hash": entry_hash, "root_hash": root_hash,
                               "signed_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
    return seal_envelope(PAYLOAD_TYPE, payload, private_keys)


def _payload(payload: bytes, keys: tuple[str, ...]) -> Checkpoint:
    """The head a checkpoint payload states, each member checked exactly (``certa_checkpoint`` and ``seq`` JSON
    integers, not ``1.0`` or ``true``; the hashes 64 lowercase hex digits; ``signed_at`` a string)."""
    try:
        body = parse_document(payload, "the checkpoint payload")
    except ValueError as error:
        raise LedgerIntegrityError(f"the checkpoint payload is malformed ({error})") from None
    wrong = _wrong_member(body)
    if wrong:
        raise LedgerIntegrityError(f"the checkpoint payload is not a certa checkpoint (format 1): {wrong}")
    return Checkpoint(seq=body["seq"], entry_hash=body["entry_hash"], root_hash=body["root_hash"],
                      signed_at=body["signed_at"], key_ids=keys)


def _wrong_member(body: Any) -> str | None:
    """What is wrong with a parsed checkpoint payload, or None."""
    if type(body) is not dict:
        return f"a JSON {type(body).__name__}, not an object"
    if type(body.get("certa_checkpoint")) is not int or body["certa_checkpoint"] != 1:
        return f"certa_checkpoint is {body.get('certa_checkpoint')!r}, not the integer 1"
    seq = body.get("seq")
    if type(seq) is not int or seq < 0:
        return f"seq is {seq!r}, not an integer >= 0"
    for name in ("entry_hash", "root_hash"):
        value = body.get(name)
        if type(value) is not str or not _HEX64.fullmatch(value):
            return f"{name} is {str(value)[:80]!r}, not 64 lowercase hex digits"
    if type(body.get("signed_at")) is not str:
        return f"signed_at is {body.get('signed_at')!r}, not a string"
    return None


def read_checkpoint_unverified(envelope_text: str | bytes) -> Checkpoint:
    """The head a checkpoint claims, WITHOUT checking any signature (``key_ids`` is empty).

    For building proofs against it or co-signing it (after comparing it with the ledger); whoever relies
    on it verifies it with ``open_checkpoint``.
    """
    return _payload(envelope_payload_unverified(envelope_text, PAYLOAD_TYPE), ())


def open_checkpoint(envelope_text: str | bytes, public_keys: Sequence[Ed25519PublicKey]) -> Checkpoint:
    """Verify that each of ``public_keys`` signed the checkpoint (``certa.engine.foundation.signing.open_envelope``) and return
    its head; a signature that is missing or does not verify raises ``SignatureVerificationError``, a payload that
    is not a certa checkpoint ``LedgerIntegrityError``."""
    payload, key_ids = open_envelope(envelope_text, PAYLOAD_TYPE, public_keys)
    return _payload(payload, key_ids)


def cosign_checkpoint(envelope_text: str | bytes, private_keys: Sequence[Ed25519PrivateKey],
                      signer_keys: Sequence[Ed25519PublicKey]) -> dict[str, Any]:
    """The checkpoint's envelope with a signature by each of ``private_keys`` added, once every signature it
    already carries verifies against ``signer_keys`` (the public keys of its signers;
    ``SignatureVerificationError`` otherwise, as ``open_checkpoint``): a co-signature never vouches for a
    signature nobody checked. The caller first compares the checkpoint with its ledger
    (``certa.ledger.bundle.ledger_root_matching``)."""
    open_envelope(envelope_text, PAYLOAD_TYPE, signer_keys, every_signature=True)
    envelope = parse_document(envelope_text, "the checkpoint")
    for private_key in private_keys:
        envelope = add_signature(envelope, private_key, PAYLOAD_TYPE)
    return envelope
