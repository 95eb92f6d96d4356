"""C2SP signed notes with Ed25519 signatures: pure functions over bytes, no database.

A signed note (https://c2sp.org/signed-note; the format of Go's ``golang.org/x/mod/sumdb/note`` and of the
checkpoints transparency logs and their witnesses exchange) is a UTF-8 text ending in a newline, a blank line, and
one or more signature lines::

    <text, each line ending in \\n>
    \\n
    — <key name> <base64(key hash ‖ signature)>\\n

(an em dash U+2014 and a space first). A key name is non-empty and holds no Unicode space and no ``+``; the note
holds no ASCII control character but the newline. For an Ed25519 key (signature type 0x01) the signature is the
RFC 8032 signature of the text, final newline included and the blank line excluded, and the key hash is the first
4 bytes of SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ the 32-byte public key), big-endian; a verifier key is written
``<name>+<key hash, 8 hex digits>+<base64(0x01 ‖ public key)>``. Anyone may add a signature line, a witness its
co-signature among them: the lines of keys a verifier does not know are kept and ignored, as Go's ``note.Open``
does.

Errors: ``SigningError`` (exit 2) for a text that is not a signed note or a key name that is not valid;
``SignatureVerificationError`` (exit 1) when a required key did not sign the note or its signature does not verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.errors import SignatureVerificationError, SigningError

__all__ = ["NoteSignature", "note_key_hash", "verifier_key", "valid_key_name", "is_signed_note", "split_note",
           "sign_note", "add_note_signatures", "open_note"]

ED25519 = b"\x01"
_SIGNATURE_PREFIX = "\u2014 "
_MAX_SIGNATURES = 100  # Go's note.Open refuses more


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: the key name, the 4-byte key hash and the signature bytes after it."""

    name: str
    key_hash: bytes
    signature: bytes

    def line(self) -> str:
        """The line as the note carries it, newline included."""
        encoded = base64.b64encode(self.key_hash + self.signature).decode("ascii")
        return f"{_SIGNATURE_PREFIX}{self.name} {encoded}\n"


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def valid_key_name(name: str) -> bool:
    """A key name is non-empty and holds no Unicode space (``str.isspace``) and no ``+``."""
    return bool(name) and "+" not in name and not any(char.isspace() for char in name)


def _checked_name(name: str) -> str:
    if not valid_key_name(name):
        raise SigningError(f"{name!r} is not a signed-note key name (non-empty, no spaces, no '+')")
    return name


def note_key_hash(name: str, public_key: Ed25519PublicKey) -> bytes:
    """The first 4 bytes of SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key): the key hash of an Ed25519 note key."""
    return hashlib.sha256(_checked_name(name).encode("utf-8") + b"\n" + ED25519 + _raw(public_key)).digest()[:4]


def verifier_key(name: str, public_key: Ed25519PublicKey) -> str:
    """``<name>+<key hash in hex>+<base64(0x01 ‖ public key)>``: the key as Go's ``note.NewVerifier`` reads it."""
    encoded = base64.b64encode(ED25519 + _raw(public_key)).decode("ascii")
    return f"{name}+{note_key_hash(name, public_key).hex()}+{encoded}"


def is_signed_note(data: str | bytes) -> bool:
    """Whether ``data`` looks like a signed note rather than a JSON document: it does not start with ``{``."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return not text.lstrip().startswith("{")


def _text(data: str | bytes) -> str:
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise SigningError("not a signed note (not UTF-8)") from None
    if any(char < " " and char != "\n" for char in text):
        raise SigningError("not a signed note (it holds a control character other than the newline)")
    return text


def split_note(data: str | bytes) -> tuple[str, list[NoteSignature]]:
    """(text, signature lines) of a signed note, its shape checked as the format requires; the signatures are NOT
    verified (``open_note`` does)."""
    note = _text(data)
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise SigningError("not a signed note (no blank line before its signature lines, or no final newline)")
    text, lines = note[:split + 1], note[split + 2:].splitlines()
    if not lines or len(lines) > _MAX_SIGNATURES:
        raise SigningError(f"not a signed note ({len(lines)} signature lines; 1 to {_MAX_SIGNATURES} expected)")
    return text, [_signature(line) for line in lines]


def _signature(line: str) -> NoteSignature:
    name, _, encoded = line.removeprefix(_SIGNATURE_PREFIX).partition(" ")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error):
        raw = b""
    if not line.startswith(_SIGNATURE_PREFIX) or not valid_key_name(name) or len(raw) < 5:
        raise SigningError(f"not a signed note: {line[:80]!r} is no signature line ('— <name> <base64>')")
    return NoteSignature(name=name, key_hash=raw[:4], signature=raw[4:])


def _sign(text: str, name: str, private_key: Ed25519PrivateKey) -> NoteSignature:
    return NoteSignature(name=name, key_hash=note_key_hash(name, private_key.public_key()),
                         signature=private_key.sign(text.encode("utf-8")))


def sign_note(text: str, signers: Sequence[tuple[str, Ed25519PrivateKey]]) -> str:
    """The signed note of ``text`` (which ends in a newline and holds no blank line, so that the signature lines
    are found after the last one) with a signature line by each (key name, private key) of ``signers``, in order."""
    _text(text)
    if not text.endswith("\n") or "\n\n" in text or not signers:
        raise SigningError("a note text ends in a newline, holds no blank line, and is signed by at least one key")
    return text + "\n" + "".join(_sign(text, name, key).line() for name, key in signers)


def add_note_signatures(note: str | bytes, signers: Sequence[tuple[str, Ed25519PrivateKey]]) -> str:
    """``note`` with a signature line by each (key name, private key) of ``signers`` added after its own; a line of
    the same key (name and key hash) it already carries is replaced, as Go's ``note.Sign`` does."""
    text, signatures = split_note(note)
    added = [_sign(text, name, key) for name, key in signers]
    replaced = {(signature.name, signature.key_hash) for signature in added}
    kept = [signature for signature in signatures if (signature.name, signature.key_hash) not in replaced]
    return text + "\n" + "".join(signature.line() for signature in [*kept, *added])


def open_note(note: str | bytes, public_keys: Sequence[Ed25519PublicKey]) -> tuple[str, tuple[str, ...]]:
    """(text, the verifier keys that signed it): every one of ``public_keys`` must have a signature line (a line
    whose key hash is that of the line's name and the key) that verifies, else ``SignatureVerificationError``;
    lines of other keys are ignored. Each key is looked up under every name the note's lines carry."""
    text, signatures = split_note(note)
    if not public_keys:
        raise SignatureVerificationError("no public key given to verify the note with")
    signed: list[str] = []
    for public_key in public_keys:
        lines = [line for line in signatures if line.key_hash == note_key_hash(line.name, public_key)]
        if not lines:
            raise SignatureVerificationError(f"the note carries no signature by the key "
                                             f"{base64.b64encode(_raw(public_key)).decode('ascii')}")
        for line in lines:
            try:
                public_key.verify(line.signature, text.encode("utf-8"))
            except InvalidSignature:
                raise SignatureVerificationError(f"the signature of {line.name} on the note does not verify (the "
                                                 "note was changed after it was signed, or it is forged)") from None
            signed.append(verifier_key(line.name, public_key))
    return text, tuple(signed)
