"""Signed checkpoints of the chain head: pure functions over bytes, no database.

A hash chain proves nothing against whoever can rewrite the whole database: they can recompute every
hash. What they cannot do is forge a head that was exported earlier and signed with a key they do not
hold. A checkpoint is the head (``seq``, ``entry_hash``), the RFC 6962 Merkle root of entries 1..seq
(``ledger.merkle``: it lets one certificate be proven part of the ledger offline) and the time it was
signed, as RFC 8785 canonical JSON, in a DSSE v1 envelope (the format of in-toto attestations)::

    {"payloadType": "application/vnd.certa.checkpoint+json; version=1",
     "payload": base64(JCS({"certa_checkpoint": 1, "seq": N, "entry_hash": "…", "root_hash": "…",
                            "signed_at": "…"})),
     "signatures": [{"keyid": sha256(raw public key) hex, "sig": base64(Ed25519(PAE(type, payload)))}]}

with DSSE's pre-authentication encoding PAE(type, body) = "DSSEv1" SP len(type) SP type SP len(body) SP body
(lengths in ASCII decimal), so the signature covers the payload type and the exact payload bytes.
``certa verify --checkpoint FILE --public-key KEY`` checks the signature first, then that the ledger still
holds entry ``seq`` with that ``entry_hash`` and root: truncation or a rewritten chain behind a signed
checkpoint is detected even by someone who trusts nothing stored in the database. A checkpoint may carry
several signatures (DSSE allows it): a co-signer who has compared it with the ledger adds theirs
(``certa cosign``), and verification can require every one of several keys — a two-person rule for the
heads an audit relies on. Keys are Ed25519 (RFC 8032) through the ``cryptography`` package.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from engine.canonical import canonical_bytes
from engine.errors import LedgerError, LedgerIntegrityError

__all__ = [
    "PAYLOAD_TYPE",
    "Checkpoint",
    "generate_key_pair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "pre_authentication_encoding",
    "sign_checkpoint",
    "add_signature",
    "open_checkpoint",
    "read_checkpoint_unverified",
]

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


def pre_authentication_encoding(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 PAE: ``DSSEv1 SP len(type) SP type SP len(body) SP body``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def key_id(public_key: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the 32 raw public-key bytes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_key_pair() -> tuple[bytes, bytes]:
    """A new Ed25519 key pair as (private key PKCS#8 PEM, public key SubjectPublicKeyInfo PEM)."""
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return private_pem, public_pem


def load_private_key(pem: bytes, *, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (optionally encrypted with ``passphrase``)."""
    try:
        key = serialization.load_pem_private_key(pem, password=passphrase)
    except (ValueError, TypeError) as error:
        raise LedgerError(f"cannot read the signing key: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise LedgerError("the signing key is not an Ed25519 key (create one with 'certa keygen')")
    return key


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM."""
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as error:
        raise LedgerError(f"cannot read the public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise LedgerError("the public key is not an Ed25519 key (create one with 'certa keygen')")
    return key


def sign_checkpoint(private_keys: Sequence[Ed25519PrivateKey], seq: int, entry_hash: str, root_hash: str, *,
                    signed_at: datetime | None = None) -> dict[str, Any]:
    """The DSSE envelope of a checkpoint of head ``seq:entry_hash`` with Merkle root ``root_hash`` of
    entries 1..seq, signed by each of ``private_keys`` (see module docstring)."""
    if seq < 0 or not _HEX64.match(entry_hash) or not _HEX64.match(root_hash):
        raise LedgerError(f"not a chain head: {seq}:{entry_hash} (root {root_hash})")
    when = (signed_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    payload = canonical_bytes({"certa_checkpoint": 1, "seq": seq, "entry_hash": entry_hash, "root_hash": root_hash,
                               "signed_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
    envelope: dict[str, Any] = {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode("ascii"),
                                "signatures": []}
    for private_key in private_keys:
        envelope = add_signature(envelope, private_key)
    return envelope


def add_signature(envelope: Mapping[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """A copy of a checkpoint envelope with one more signature (a co-signer's), over the same payload."""
    payload_type, payload, signatures = _envelope(json.dumps(dict(envelope)))
    if payload_type != PAYLOAD_TYPE:
        raise LedgerError(f"checkpoint payload type is {payload_type!r}, expected {PAYLOAD_TYPE!r}")
    signer = key_id(private_key.public_key())
    if any(isinstance(entry, dict) and entry.get("keyid") == signer for entry in signatures):
        raise LedgerError(f"the checkpoint is already signed by key {signer[:16]}…")
    signature = private_key.sign(pre_authentication_encoding(payload_type, payload))
    return {**envelope, "signatures": [*signatures, {"keyid": signer,
                                                     "sig": base64.b64encode(signature).decode("ascii")}]}


def _envelope(envelope_text: str | bytes) -> tuple[str, bytes, list[Any]]:
    try:
        envelope = json.loads(envelope_text)
        return envelope["payloadType"], base64.b64decode(envelope["payload"], validate=True), \
            list(envelope["signatures"])
    except (ValueError, KeyError, TypeError, binascii.Error) as error:
        raise LedgerError(f"not a certa checkpoint envelope ({type(error).__name__}: {error})") from None


def _payload(payload: bytes, keys: tuple[str, ...]) -> Checkpoint:
    try:
        body = json.loads(payload)
        fields = (body["seq"], body["entry_hash"], body["root_hash"], body["signed_at"])
    except (ValueError, KeyError, TypeError) as error:
        raise LedgerIntegrityError(f"the checkpoint payload is malformed ({error})") from None
    seq, entry_hash, root_hash, signed_at = fields
    if body.get("certa_checkpoint") != 1 or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 \
            or not _HEX64.match(str(entry_hash)) or not _HEX64.match(str(root_hash)):
        raise LedgerIntegrityError("the checkpoint payload is not a certa checkpoint (format 1)")
    return Checkpoint(seq=seq, entry_hash=entry_hash, root_hash=root_hash, signed_at=str(signed_at), key_ids=keys)


def read_checkpoint_unverified(envelope_text: str | bytes) -> Checkpoint:
    """The head a checkpoint claims, WITHOUT checking any signature (``key_ids`` is empty).

    For building proofs against it or co-signing it (after comparing it with the ledger); whoever relies
    on it verifies it with ``open_checkpoint``.
    """
    payload_type, payload, _ = _envelope(envelope_text)
    if payload_type != PAYLOAD_TYPE:
        raise LedgerError(f"checkpoint payload type is {payload_type!r}, expected {PAYLOAD_TYPE!r}")
    return _payload(payload, ())


def open_checkpoint(envelope_text: str | bytes, public_keys: Sequence[Ed25519PublicKey]) -> Checkpoint:
    """Verify that each of ``public_keys`` signed the checkpoint, and return its head.

    Raises ``LedgerIntegrityError`` (exit 1) when a key has no signature that verifies or the payload is
    not a certa checkpoint, and ``LedgerError`` when the file is not an envelope at all or no key is given.
    """
    if not public_keys:
        raise LedgerError("give at least one public key to verify a checkpoint")
    payload_type, payload, signatures = _envelope(envelope_text)
    if payload_type != PAYLOAD_TYPE:
        raise LedgerIntegrityError(f"checkpoint payload type is {payload_type!r}, expected {PAYLOAD_TYPE!r}")
    message = pre_authentication_encoding(payload_type, payload)
    verified = []
    for public_key in public_keys:
        wanted = key_id(public_key)
        entry = next((e for e in signatures if isinstance(e, dict) and e.get("keyid") == wanted), None)
        if entry is None:
            raise LedgerIntegrityError(f"the checkpoint carries no signature by key {wanted[:16]}…")
        try:
            public_key.verify(base64.b64decode(entry.get("sig", ""), validate=True), message)
        except (InvalidSignature, binascii.Error, ValueError):
            raise LedgerIntegrityError(f"the signature by key {wanted[:16]}… does not verify: the checkpoint was "
                                       "altered or signed by another key") from None
        verified.append(wanted)
    return _payload(payload, tuple(verified))
