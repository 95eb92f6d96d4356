"""A model folder's identity: the manifest of every file's SHA-256, as RFC 8785 canonical JSON.

An input declared ``model: models/base`` is a local folder in Hugging Face layout (``config.json``,
``*.safetensors`` weights, tokenizer files). Its bytes, for certa, are its **manifest**::

    {"format": "certa-model-manifest/1",
     "files": [{"path": "config.json", "sha256": "<hex>", "size": 611}, ...]}

with ``files`` sorted by ``path`` (POSIX, relative to the folder), serialised as RFC 8785 canonical JSON
(``certa.engine.foundation.canonical``). The input's SHA-256 is the SHA-256 of those bytes, so pinning it in the spec
(``sha256:``) pins every file; the ledger stores the manifest as the input's bytes and a replay reads it back
without the folder. Each file entry names the same (path, SHA-256) pairs as the ``resources`` of an OpenSSF
``model-signing`` v1.0 manifest (``predicate.resources[].name / digest``, algorithm ``sha256``, file
serialisation), so a signed model's manifest can be compared with it entry by entry
(``certa.engine.core.models.signature``).

What is listed: every regular file under the folder, recursively, except paths with a component starting with
``.`` (``.git``, ``.cache``: a VCS or a download cache is not the model) and a ``model-signing`` signature
(``model.sig``: it signs the manifest, it is not part of it). Refused, with a message naming the file:

* pickle-based weights or objects (``.bin``, ``.pt``, ``.pth``, ``.ckpt``, ``.pkl``, ``.pickle``, ``.joblib``,
  ``.npy``/``.npz`` may hold pickles too): loading a pickle runs code, so certa never loads one and does not
  accept a folder holding one (convert the weights with ``safetensors`` and remove the file);
* a folder with no ``*.safetensors`` file or no ``config.json``;
* a symbolic link that leaves the folder, or any entry that is not a regular file or folder (FIFO, device).

Files are hashed in 1 MiB blocks (memory bounded whatever the weights' size); the folder is read within the
input limits (``InputLimits.model_bytes``, checked on the files' sizes before any is read).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from certa.engine.foundation.canonical import canonical_bytes, sha256_hex
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits

__all__ = ["MODEL_FORMAT", "MANIFEST_FORMAT", "SIGNATURE_FILE", "PICKLE_SUFFIXES", "ModelFile", "ModelManifest",
           "folder_manifest", "read_manifest"]

MODEL_FORMAT = "hf-model"
"""The ``format`` of a model input in the certificate and the ledger (its bytes are the manifest)."""
MANIFEST_FORMAT = "certa-model-manifest/1"
SIGNATURE_FILE = "model.sig"
"""The file name ``model-signing`` writes a signature to by default; left out of the manifest."""
PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".npy", ".npz"})
"""Suffixes of files that are (or may be) Python pickles: loading them runs code."""
_BLOCK = 1 << 20


@dataclass(frozen=True)
class ModelFile:
    """One file of a model folder."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class ModelManifest:
    """A model folder's files (sorted by path) and the canonical bytes that are the input's bytes."""

    files: tuple[ModelFile, ...]
    raw: bytes

    @property
    def sha256(self) -> str:
        """The model's identity: SHA-256 of the canonical manifest."""
        return sha256_hex(self.raw)

    def digest_of(self, path: str) -> str | None:
        """The SHA-256 of the file at ``path`` (relative, POSIX), or None if the manifest does not list it."""
        return next((f.sha256 for f in self.files if f.path == path), None)

    def columns(self) -> dict[str, np.ndarray]:
        """The manifest as table columns ``path``, ``sha256`` (text) and ``size`` (number)."""
        return {"path": np.array([f.path for f in self.files], dtype=object),
                "sha256": np.array([f.sha256 for f in self.files], dtype=object),
                "size": np.array([float(f.size) for f in self.files], dtype=np.float64)}


def _manifest(files: list[ModelFile]) -> ModelManifest:
    files.sort(key=lambda f: f.path)
    document = {"format": MANIFEST_FORMAT,
                "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files]}
    return ModelManifest(files=tuple(files), raw=canonical_bytes(document))


def _hash_file(name: str, path: Path, relative: str, expected: int) -> ModelFile:
    digest = hashlib.sha256()
    size = 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {relative}: {exc.strerror}") from None
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"input '{name}': model file {relative} is not a regular file")
        while block := file.read(_BLOCK):
            digest.update(block)
            size += len(block)
            if size > expected:
                raise InputError(f"input '{name}': model file {relative} grew while it was read (its size was "
                                 f"{expected:,} bytes); copy the model to a folder that nothing writes to")
    return ModelFile(path=relative, sha256=digest.hexdigest(), size=size)


def folder_manifest(name: str, folder: Path, limits: InputLimits, *,
                    progress: Callable[[int, int, str], None] | None = None) -> ModelManifest:
    """The manifest of the model folder ``folder`` (module docstring), or an ``InputError`` naming the
    file that makes it unusable (pickle-based weights, a link leaving the folder, a missing config or
    safetensors file, a size over ``limits.model_bytes``)."""
    try:
        root = folder.resolve(strict=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"input '{name}': model folder {folder} cannot be read: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    if not root.is_dir():
        raise InputError(f"input '{name}': {folder} is not a folder; a model input is a folder in Hugging Face "
                         "layout (config.json, *.safetensors weights, tokenizer files)")
    found: list[tuple[str, Path]] = []
    for directory, subdirs, names in os.walk(root, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for entry in sorted(names + [d for d in subdirs if (Path(directory) / d).is_symlink()]):
            path = Path(directory) / entry
            relative = path.relative_to(root).as_posix()
            if entry.startswith(".") or relative == SIGNATURE_FILE:
                continue
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    raise InputError(f"input '{name}': model file {relative} is a link to {target}, outside the "
                                     "model folder; copy the file into the folder")
                if target.is_dir():
                    raise InputError(f"input '{name}': {relative} is a link to a folder; copy it into the folder")
            if path.suffix.lower() in PICKLE_SUFFIXES:
                raise InputError(f"input '{name}': model file {relative} is pickle-based ({path.suffix}); loading a "
                                 "pickle runs code, so certa never loads one: convert the weights to safetensors and "
                                 "remove the file from the folder")
            found.append((relative, path))
    relatives = {relative for relative, _ in found}
    if "config.json" not in relatives:
        raise InputError(f"input '{name}': model folder {folder} has no config.json")
    if not any(relative.endswith(".safetensors") for relative in relatives):
        raise InputError(f"input '{name}': model folder {folder} has no *.safetensors weights (certa loads "
                         "safetensors only)")
    sizes = [path.stat().st_size for _, path in found]
    limits.check(f"input '{name}'", "model_bytes", sum(sizes), "the model folder's size in bytes")
    files: list[ModelFile] = []
    for i, ((relative, path), size) in enumerate(zip(found, sizes), start=1):
        files.append(_hash_file(name, path, relative, size))
        if progress:
            progress(i, len(found), f"hashing {relative}")
    return _manifest(files)


def read_manifest(name: str, raw: bytes) -> ModelManifest:
    """The manifest stored as an input's bytes (a replay), checked to be one certa wrote: valid JSON of the
    manifest format, files sorted and unique, and canonical (re-encoding gives the same bytes)."""
    try:
        document: Any = json.loads(raw)
        if not isinstance(document, Mapping) or document.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"not a {MANIFEST_FORMAT} document")
        files = [ModelFile(path=str(f["path"]), sha256=str(f["sha256"]), size=int(f["size"]))
                 for f in document["files"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"input '{name}': the stored model manifest cannot be read ({exc})") from None
    manifest = _manifest(list(files))
    if manifest.raw != raw:
        raise InputError(f"input '{name}': the stored model manifest is not in canonical form")
    return manifest
