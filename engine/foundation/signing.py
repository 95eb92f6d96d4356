"""Ed25519 keys and DSSE v1 envelopes: signing and verifying bytes, no database.

A DSSE envelope (https://github.com/secure-systems-lab/dsse, v1.0; the format of in-toto attestations) is

    {"payloadType": TYPE, "payload": base64(BODY), "signatures": [{"keyid": ID, "sig": base64(SIG)}, …]}

where each SIG signs the pre-authentication encoding PAE(TYPE, BODY) = "DSSEv1" SP len(TYPE) SP TYPE SP
len(BODY) SP BODY (lengths in ASCII decimal), so a signature covers the payload type and the exact payload
bytes and never depends on how the JSON around them is formatted. Keys are Ed25519 (RFC 8032) through the
``cryptography`` package; a key id is the SHA-256 (hex) of the 32 raw public-key bytes. An envelope may
carry several signatures, and verification can require every one of several keys.

Errors are this module's own (``certa.engine.foundation.errors``): ``SigningError`` (exit 2) for a key that cannot be
read or is not Ed25519, an encrypted private key without its passphrase or with a wrong one, and a text that is not
an envelope; its subclass ``SignatureVerificationError`` (exit 1) for an envelope that is not signed, as required, by
each given key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.errors import SignatureVerificationError, SigningError
from certa.engine.foundation.json_read import parse_document

__all__ = [
    "generate_key_pair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "pre_authentication_encoding",
    "seal_envelope",
    "add_signature",
    "open_envelope",
    "envelope_payload_unverified",
]


def pre_authentication_encoding(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 PAE: ``DSSEv1 SP len(type) SP type SP len(body) SP body``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def key_id(public_key: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the 32 raw public-key bytes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_key_pair(passphrase: bytes | None = None) -> tuple[bytes, bytes]:
    """A new Ed25519 key pair as (private key PKCS#8 PEM, public key SubjectPublicKeyInfo PEM). With
    ``passphrase`` the private key is encrypted (``cryptography``'s ``BestAvailableEncryption``: a PKCS#8
    EncryptedPrivateKeyInfo, RFC 5958, with PBES2, RFC 8018: PBKDF2-HMAC-SHA256 and AES-256-CBC); it is then as
    strong as the passphrase."""
    if passphrase == b"":
        raise SigningError("an empty passphrase encrypts nothing: give a passphrase")
    private = Ed25519PrivateKey.generate()
    encryption = (serialization.BestAvailableEncryption(passphrase) if passphrase is not None
                  else serialization.NoEncryption())
    private_pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return private_pem, public_pem


def load_private_key(pem: bytes, *, passphrase: bytes | None = None, what: str = "the signing key",
                     passphrase_name: str = "the passphrase") -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM. An encrypted key is opened with ``passphrase``; a key that is not
    encrypted is read without it (a passphrase set for other keys is not an error). Messages name the key as
    ``what`` and the passphrase as ``passphrase_name`` (where it comes from), never its value: an encrypted key
    without a passphrase, or one the passphrase does not open, is a ``SigningError``."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:  # cryptography: "Password was not given but private key is encrypted"
        key = _decrypt_private_key(pem, passphrase, what, passphrase_name)
    except ValueError as error:
        raise SigningError(f"cannot read {what}: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{what} is not an Ed25519 key (create one with 'certa keygen')")
    return key


def _decrypt_private_key(pem: bytes, passphrase: bytes | None, what: str, passphrase_name: str) -> Any:
    """The encrypted private key in ``pem`` opened with ``passphrase`` (any key type: the caller checks it)."""
    if not passphrase:
        raise SigningError(f"cannot read {what}: it is encrypted and {passphrase_name} is not set (set it to the "
                           "key's passphrase)")
    try:
        return serialization.load_pem_private_key(pem, password=passphrase)
    except (ValueError, TypeError):
        raise SigningError(f"cannot read {what}: {passphrase_name} does not open the encrypted key (a wrong "
                           "passphrase, or a damaged key file)") from None


def load_public_key(pem: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM."""
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as error:
        raise SigningError(f"cannot read the public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError("the public key is not an Ed25519 key (create one with 'certa keygen')")
    return key


def seal_envelope(payload_type: str, payload: bytes, private_keys: Sequence[Ed25519PrivateKey]) -> dict[str, Any]:
    """An envelope of ``payload`` signed by each of ``private_keys``."""
    envelope: dict[str, Any] = {"payloadType": payload_type, "payload": base64.b64encode(payload).decode("ascii"),
                                "signatures": []}
    for private_key in private_keys:
        envelope = add_signature(envelope, private_key, payload_type)
    return envelope


def _parts(envelope_text: str | bytes, payload_type: str) -> tuple[bytes, list[dict[str, str]]]:
    """(payload bytes, signatures) of an envelope, its shape checked exactly (``parse_document``'s bounds; string
    members; signatures a list of ``{"keyid": str, "sig": str}``, ``keyid`` optional as in DSSE); another shape
    is a ``SigningError``, another payload type a ``SignatureVerificationError``."""
    try:
        envelope = parse_document(envelope_text, "the envelope")
    except ValueError as error:
        raise SigningError(f"not a DSSE envelope ({error})") from None
    if type(envelope) is not dict:
        raise SigningError(f"not a DSSE envelope (a JSON {type(envelope).__name__}, not an object)")
    found_type, encoded, signatures = envelope.get("payloadType"), envelope.get("payload"), envelope.get("signatures")
    for name, value in (("payloadType", found_type), ("payload", encoded)):
        if type(value) is not str:
            raise SigningError(f"not a DSSE envelope ({name} is {_json_kind(value)}, not a string)")
    if type(signatures) is not list or not all(type(entry) is dict and type(entry.get("keyid", "")) is str
                                               and type(entry.get("sig")) is str for entry in signatures):
        raise SigningError("not a DSSE envelope (signatures is not a list of objects with a string sig and keyid)")
    try:
        payload = base64.b64decode(str(encoded), validate=True)  # a str: checked above
    except (ValueError, binascii.Error) as error:
        raise SigningError(f"not a DSSE envelope (payload is not base64: {error})") from None
    if found_type != payload_type:
        raise SignatureVerificationError(f"the envelope's payload type is {found_type!r}, expected {payload_type!r}")
    return payload, signatures


def _json_kind(value: Any) -> str:
    """What a parsed JSON value is, for a message: ``missing`` for None (an absent member or ``null``)."""
    return "missing" if value is None else f"a JSON {type(value).__name__}"


def add_signature(envelope: Mapping[str, Any], private_key: Ed25519PrivateKey, payload_type: str) -> dict[str, Any]:
    """A copy of ``envelope`` with one more signature (a co-signer's) over the same payload."""
    payload, signatures = _parts(json.dumps(dict(envelope)), payload_type)
    signer = key_id(private_key.public_key())
    if any(entry.get("keyid") == signer for entry in signatures):
        raise SigningError(f"the envelope is already signed by key {signer[:16]}…")
    signature = private_key.sign(pre_authentication_encoding(payload_type, payload))
    return {**envelope, "signatures": [*signatures, {"keyid": signer,
                                                     "sig": base64.b64encode(signature).decode("ascii")}]}


def envelope_payload_unverified(envelope_text: str | bytes, payload_type: str) -> bytes:
    """The payload, WITHOUT checking any signature (to compare it with something before co-signing)."""
    return _parts(envelope_text, payload_type)[0]


def open_envelope(envelope_text: str | bytes, payload_type: str, public_keys: Sequence[Ed25519PublicKey], *,
                  every_signature: bool = False) -> tuple[bytes, tuple[str, ...]]:
    """(payload, key ids) once each of ``public_keys`` has a signature over it that verifies; with
    ``every_signature``, also each signature the envelope carries is by one of ``public_keys`` and verifies (before
    adding one: a co-signature must not vouch for a signature nobody checked).

    Raises ``SignatureVerificationError`` (exit 1) for another payload type, a key without a signature or a
    signature that does not verify, and ``SigningError`` for text that is not an envelope or no key.
    """
    if not public_keys:
        raise SigningError("give at least one public key")
    payload, signatures = _parts(envelope_text, payload_type)
    message = pre_authentication_encoding(payload_type, payload)
    by_id = {key_id(public_key): public_key for public_key in public_keys}
    for wanted, public_key in by_id.items():
        entry = next((e for e in signatures if e.get("keyid") == wanted), None)
        if entry is None:
            raise SignatureVerificationError(f"no signature by key {wanted[:16]}…")
        _check_signature(public_key, wanted, entry["sig"], message)
    if every_signature:
        for entry in signatures:
            signer = entry.get("keyid", "")
            if signer not in by_id:
                raise SignatureVerificationError(f"the signature by key {signer[:16]}… is by none of the public "
                                                 "keys given: it cannot be checked")
            _check_signature(by_id[signer], signer, entry["sig"], message)
    return payload, tuple(by_id)


def _check_signature(public_key: Ed25519PublicKey, signer: str, sig: str, message: bytes) -> None:
    """Raise ``SignatureVerificationError`` unless ``sig`` (base64) is ``public_key``'s signature of ``message``."""
    try:
        public_key.verify(base64.b64decode(sig, validate=True), message)
    except (InvalidSignature, binascii.Error, ValueError):
        raise SignatureVerificationError(f"the signature by key {signer[:16]}… does not verify: the payload was "
                                         "altered or signed by another key") from None
