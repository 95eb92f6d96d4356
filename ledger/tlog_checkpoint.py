"""Checkpoints in the transparency-log format: C2SP ``tlog-checkpoint`` signed notes, pure functions over bytes.

Beside certa's own checkpoint (``certa.ledger.checkpoint``: a DSSE envelope that also names the head's entry hash
and the signing time), a ledger head can be signed as a tlog checkpoint (https://c2sp.org/tlog-checkpoint), the
signed tree head that transparency logs (Go's checksum database, Sigstore's Rekor, ...) publish and witnesses
co-sign. Its text is three lines::

    <origin>                          the log's name, e.g. ``example.org/certa/models``
    <tree size>                       ASCII decimal, no leading zero: entries 1..N of the ledger
    <base64(RFC 6962 root)>           MTH of the N leaves of ``certa.ledger.merkle`` (32 bytes)

and it is a signed note (``certa.ledger.signed_note``): a blank line, then one signature line per key. The root is
the same Merkle root certa's own checkpoint signs, so inclusion proofs (``certa prove``) and consistency proofs
(``certa.ledger.merkle_consistency``) hold against either. Optional extension lines after the root, which the
format allows, are read and ignored; certa writes none.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.errors import LedgerIntegrityError
from certa.ledger.signed_note import open_note, sign_note, split_note

__all__ = ["TreeHead", "checkpoint_text", "sign_tlog_checkpoint", "read_tlog_checkpoint_unverified",
           "open_tlog_checkpoint"]

_SIZE = re.compile(r"^(0|[1-9][0-9]{0,19})$")


@dataclass(frozen=True)
class TreeHead:
    """A tlog checkpoint's head: the log ``origin``, its ``tree_size`` and RFC 6962 ``root_hash`` (hex), and the
    verifier keys (``<name>+<hash>+<key>``) whose signatures were checked (none when read unverified)."""

    origin: str
    tree_size: int
    root_hash: str
    verified_by: tuple[str, ...] = ()


def checkpoint_text(origin: str, tree_size: int, root_hash: str) -> str:
    """The checkpoint text ``origin\\ntree_size\\nbase64(root)\\n`` of a tree of ``tree_size`` leaves with RFC 6962
    root ``root_hash`` (64 hex digits)."""
    if not origin or "\n" in origin or type(tree_size) is not int or tree_size < 0:
        raise LedgerIntegrityError(f"not a tree head: origin {origin!r}, size {tree_size!r}")
    root = bytes.fromhex(root_hash)
    if len(root) != 32:
        raise LedgerIntegrityError(f"not an RFC 6962 SHA-256 root: {root_hash[:80]!r}")
    return f"{origin}\n{tree_size}\n{base64.b64encode(root).decode('ascii')}\n"


def _head(text: str, verified_by: tuple[str, ...]) -> TreeHead:
    """The head a checkpoint text states, each line checked as the format requires."""
    lines = text.split("\n")[:-1]  # the text ends in a newline (``split_note``)
    if len(lines) < 3:
        raise LedgerIntegrityError(f"not a tlog checkpoint: its text has {len(lines)} lines, not origin, size, root")
    origin, size, encoded = lines[:3]
    try:
        root = base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error):
        root = b""
    if not origin or not _SIZE.match(size) or len(root) != 32 or not all(lines[3:]):
        raise LedgerIntegrityError("not a tlog checkpoint: it needs an origin line, a decimal tree size without "
                                   "leading zeros, a base64 SHA-256 root, and no empty extension line")
    return TreeHead(origin=origin, tree_size=int(size), root_hash=root.hex(), verified_by=verified_by)


def sign_tlog_checkpoint(origin: str, tree_size: int, root_hash: str,
                         signers: Sequence[tuple[str, Ed25519PrivateKey]]) -> str:
    """The signed note of the checkpoint of ``tree_size`` leaves with root ``root_hash`` of log ``origin``, a
    signature line by each (key name, private key) of ``signers``."""
    return sign_note(checkpoint_text(origin, tree_size, root_hash), signers)


def read_tlog_checkpoint_unverified(note: str | bytes) -> TreeHead:
    """The head a tlog checkpoint claims, WITHOUT checking any signature (for building proofs against it, or
    co-signing it after comparing it with the ledger)."""
    return _head(split_note(note)[0], ())


def open_tlog_checkpoint(note: str | bytes, public_keys: Sequence[Ed25519PublicKey]) -> TreeHead:
    """The head of a tlog checkpoint that each of ``public_keys`` signed (``certa.ledger.signed_note.open_note``:
    ``SignatureVerificationError`` otherwise)."""
    text, verified_by = open_note(note, public_keys)
    return _head(text, verified_by)
