"""Ed25519 keys for the command line: a new key pair written to files (``certa keygen``; with
``--passphrase-env VAR`` the private key encrypted with the passphrase in the environment variable VAR), and the
key files a command is given read (``--key``: private, opened with ``CERTA_KEY_PASSPHRASE`` when encrypted;
``--public-key``: public). A passphrase is read from the environment only, never from the command line, and never
printed: messages name the variable."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.atomic_files import make_folders, write_atomically
from certa.engine.foundation.errors import OutputError, SigningError
from certa.engine.foundation.signing import generate_key_pair, key_id, load_private_key, load_public_key

__all__ = ["KeyPair", "create_key_pair", "private_keys", "public_keys", "PASSPHRASE_VARIABLE"]

PASSPHRASE_VARIABLE = "CERTA_KEY_PASSPHRASE"
"""The environment variable whose value opens an encrypted private key."""


@dataclass(frozen=True)
class KeyPair:
    """The two files of a new key pair and the public key's id."""

    private_key: Path
    public_key: Path
    key_id: str
    encrypted: bool = False

    def as_json(self) -> dict[str, Any]:
        """The files, the key id and whether the private key is encrypted."""
        return {"ok": True, "private_key": str(self.private_key), "public_key": str(self.public_key),
                "key_id": self.key_id, "encrypted": self.encrypted}

    def text(self) -> str:
        """Where each key is, and the key id shortened."""
        secret = (f"encrypted: commands open it with the passphrase in {PASSPHRASE_VARIABLE}; keep both secret"
                  if self.encrypted else "keep it secret")
        return (f"private key: {self.private_key} ({secret})\npublic key:  {self.public_key} "
                f"(key id {self.key_id[:16]}…)")


def create_key_pair(out_dir: Path, name: str, passphrase_variable: str | None = None) -> KeyPair:
    """Write a new Ed25519 key pair as ``out_dir/name.key`` (private, mode 0600) and ``out_dir/name.pub``; with
    ``passphrase_variable``, the private key encrypted with the passphrase in that environment variable
    (``SigningError`` if it is unset or empty: nothing is written). ``OutputError`` if either file exists (nothing
    is overwritten) or cannot be written (no half pair is left)."""
    passphrase = None
    if passphrase_variable is not None:
        passphrase = os.environ.get(passphrase_variable)
        if not passphrase:
            raise SigningError(f"the environment variable {passphrase_variable} (--passphrase-env) is not set or "
                               f"empty: set it to the new key's passphrase; commands then open the key with that "
                               f"passphrase in {PASSPHRASE_VARIABLE}")
    private_pem, public_pem = generate_key_pair(passphrase.encode() if passphrase is not None else None)
    private_path, public_path = out_dir / f"{name}.key", out_dir / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            raise OutputError(f"{path} exists; choose another --out-dir or --name")
    make_folders(out_dir)
    write_atomically(private_path, private_pem, private=True, overwrite=False, what="the private key")
    try:
        write_atomically(public_path, public_pem, overwrite=False, what="the public key")
    except OutputError:
        with contextlib.suppress(OSError):
            private_path.unlink()  # written a moment ago: no half pair is left
        raise
    return KeyPair(private_key=private_path, public_key=public_path, key_id=key_id(load_public_key(public_pem)),
                   encrypted=passphrase is not None)


def private_keys(key_files: Iterable[Path]) -> list[Ed25519PrivateKey]:
    """The private keys in ``key_files`` (PEM), an encrypted one opened with ``CERTA_KEY_PASSPHRASE``; a key that
    cannot be read, or an encrypted one that variable does not open, is a ``SigningError`` naming the file."""
    passphrase = os.environ.get(PASSPHRASE_VARIABLE) or None
    keys = []
    for path in key_files:
        try:
            pem = path.read_bytes()
        except OSError as error:
            raise SigningError(f"cannot read the signing key {path}: {error.strerror or error}") from None
        keys.append(load_private_key(pem, passphrase=passphrase.encode() if passphrase else None,
                                     what=f"the signing key {path}", passphrase_name=PASSPHRASE_VARIABLE))
    return keys


def public_keys(key_files: Iterable[Path]) -> list[Ed25519PublicKey]:
    """The public keys in ``key_files`` (PEM)."""
    return [load_public_key(path.read_bytes()) for path in key_files]
