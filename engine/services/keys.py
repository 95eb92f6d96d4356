"""Ed25519 keys for the command line: a new key pair written to files (``certa keygen``), and the key files
a command is given read (``--key``: private, opened with ``CERTA_KEY_PASSPHRASE`` when encrypted;
``--public-key``: public)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.atomic_files import make_folders, write_atomically
from certa.engine.foundation.errors import OutputError
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

    def as_json(self) -> dict[str, Any]:
        """The files and the key id."""
        return {"ok": True, "private_key": str(self.private_key), "public_key": str(self.public_key),
                "key_id": self.key_id}

    def text(self) -> str:
        """Where each key is, and the key id shortened."""
        return (f"private key: {self.private_key} (keep it secret)\npublic key:  {self.public_key} "
                f"(key id {self.key_id[:16]}…)")


def create_key_pair(out_dir: Path, name: str) -> KeyPair:
    """Write a new Ed25519 key pair as ``out_dir/name.key`` (private, mode 0600) and ``out_dir/name.pub``;
    ``OutputError`` if either exists (nothing is overwritten) or cannot be written (no half pair is left)."""
    private_pem, public_pem = generate_key_pair()
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
    return KeyPair(private_key=private_path, public_key=public_path, key_id=key_id(load_public_key(public_pem)))


def private_keys(key_files: Iterable[Path]) -> list[Ed25519PrivateKey]:
    """The private keys in ``key_files`` (PEM), an encrypted one opened with ``CERTA_KEY_PASSPHRASE``."""
    passphrase = os.environ.get(PASSPHRASE_VARIABLE)
    return [load_private_key(path.read_bytes(), passphrase=passphrase.encode() if passphrase else None)
            for path in key_files]


def public_keys(key_files: Iterable[Path]) -> list[Ed25519PublicKey]:
    """The public keys in ``key_files`` (PEM)."""
    return [load_public_key(path.read_bytes()) for path in key_files]
