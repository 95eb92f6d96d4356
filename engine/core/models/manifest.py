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

**The weights are the files the checkpoint declares**, where ``transformers``' ``from_pretrained`` finds them in a
local folder: ``model.safetensors`` at the top of the folder, else the shards ``model.safetensors.index.json``
lists in its ``weight_map`` (paths relative to the folder). Never a glob: another ``*.safetensors`` file anywhere in
the folder (a stale copy in ``zz_old/``, the shards of an index that ``model.safetensors`` overrides, an adapter)
is not loaded. Such files are still listed in ``files`` (every file is part of the identity) and, because the rule
then matters, the manifest states it (format 2)::

    {"format": "certa-model-manifest/2", "files": [...],
     "unused_weights": ["zz_old/model.safetensors"], "weights": ["model.safetensors"],
     "weights_rule": "model.safetensors, else the shards model.safetensors.index.json lists; no other file"}

A folder whose ``*.safetensors`` files are exactly its weights keeps format 1: every ``*.safetensors`` file is
then a weight file, the two rules agree, and an identity taken before this rule is unchanged. Whether a profile
accepts unused weight files is ``certa.engine.core.inputs``' rule: ci and release refuse the folder, naming them;
dev records an ``unused_weights`` decision and warns.

What is listed: every regular file under the folder, recursively, except paths with a component starting with
``.`` (``.git``, ``.cache``: a VCS or a download cache is not the model) and a ``model-signing`` signature
(``model.sig``: it signs the manifest, it is not part of it). Refused, with a message naming the file:

* pickle-based weights or objects (``.bin``, ``.pt``, ``.pth``, ``.ckpt``, ``.pkl``, ``.pickle``, ``.joblib``,
  ``.npy``/``.npz`` may hold pickles too): loading a pickle runs code, so certa never loads one and does not
  accept a folder holding one (convert the weights with ``safetensors`` and remove the file);
* a folder with no ``config.json``, or with neither ``model.safetensors`` nor ``model.safetensors.index.json`` (no
  weights a checkpoint declares), or whose index is not a ``weight_map`` of ``*.safetensors`` files in the folder;
* a symbolic link that leaves the folder or cannot be followed (a loop, a missing target), or any entry that is not
  a regular file or folder (FIFO, device). A link to a file inside the folder is listed under its own path and
  hashed as the file it points to (what a loader reading that path reads).

Files are hashed in 1 MiB blocks (memory bounded whatever the weights' size), ``HASH_THREADS`` files at a time; the
folder is read within the input limits (``InputLimits.model_bytes``, checked on the files' sizes before any is
read). With ``keep_weights`` (the model a run will load: ``certa.engine.core.inputs``) the weight files are instead
mapped under a read lease where one can be had (``certa.engine.core.models.lease``), else read into private
memory, and hashed there (``read_hashed``), and those bytes are held for the loader
(``ModelManifest.held``, ``HeldWeights``), which then builds the model on them: the weights are read and hashed
once, and what is evaluated is what was hashed. While the files hash, the calling thread may do other work
(``meanwhile``: for the model it keeps, ``certa.engine.core.inputs`` imports the model libraries there).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import stat
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certa.engine.foundation.canonical import canonical_bytes, sha256_hex
from certa.engine.foundation.json_read import parse_document
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.lease import FileLease, leased_map, leases_possible

if TYPE_CHECKING:  # numpy loads when a manifest becomes a table, not when a spec names a model format
    import numpy as np

__all__ = ["MODEL_FORMAT", "MANIFEST_FORMAT", "MANIFEST_FORMATS", "SIGNATURE_FILE", "PICKLE_SUFFIXES",
           "WEIGHTS_FILE", "WEIGHTS_INDEX", "WEIGHTS_RULE", "HASH_THREADS", "HeldWeights", "Kept", "ModelFile",
           "ModelManifest", "folder_manifest", "read_manifest", "read_hashed", "index_shards"]

MODEL_FORMAT = "hf-model"
"""The ``format`` of a model input in the certificate and the ledger (its bytes are the manifest)."""
MANIFEST_FORMAT = "certa-model-manifest/1"
"""The manifest of a folder whose ``*.safetensors`` files are all its weights."""
MANIFEST_FORMATS = (MANIFEST_FORMAT, "certa-model-manifest/2")
"""Format 2 adds ``weights``, ``unused_weights`` and ``weights_rule`` (module docstring)."""
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
WEIGHTS_RULE = f"{WEIGHTS_FILE}, else the shards {WEIGHTS_INDEX} lists; no other file"
"""Which files are a model's weights, as a format 2 manifest states it."""
MAX_INDEX_BYTES = 64 << 20
"""The longest ``model.safetensors.index.json`` read: an index lists one line per tensor, a few MB for the largest
models."""
SIGNATURE_FILE = "model.sig"
"""The file name ``model-signing`` writes a signature to by default; left out of the manifest."""
PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".npy", ".npz"})
"""Suffixes of files that are (or may be) Python pickles: loading them runs code."""
_BLOCK = 1 << 20
_KEPT_BLOCK = 64 << 20
"""Bytes read (then hashed) at once into kept memory: few enough hand-overs of the GIL that a thread running
Python meanwhile (``folder_manifest(meanwhile=...)``) delays the hashing little."""
HASH_THREADS = 2
"""Files hashed at once: ``hashlib`` releases the GIL, so a sharded checkpoint is hashed on two cores (and its
files are read two at a time; a refusal names the first file, in path order, that is refused)."""


@dataclass(frozen=True)
class ModelFile:
    """One file of a model folder."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class ModelManifest:
    """A model folder's files (sorted by path) and the canonical bytes that are the input's bytes; ``weights``
    the files the checkpoint declares (loaded, in this order), ``unused_weights`` its other ``*.safetensors``
    files (module docstring)."""

    files: tuple[ModelFile, ...]
    raw: bytes
    weights: tuple[str, ...]
    unused_weights: tuple[str, ...] = ()
    held: HeldWeights | None = field(default=None, repr=False, compare=False)
    """The weight files' bytes, read as they were hashed (``folder_manifest(keep_weights=True)``); else None."""

    @property
    def sha256(self) -> str:
        """The model's identity: SHA-256 of the canonical manifest."""
        return sha256_hex(self.raw)

    def digest_of(self, path: str) -> str | None:
        """The SHA-256 of the file at ``path`` (relative, POSIX), or None if the manifest does not list it."""
        return next((f.sha256 for f in self.files if f.path == path), None)

    def columns(self) -> dict[str, np.ndarray]:
        """The manifest as table columns ``path``, ``sha256`` (text) and ``size`` (number)."""
        import numpy as np
        return {"path": np.array([f.path for f in self.files], dtype=object),
                "sha256": np.array([f.sha256 for f in self.files], dtype=object),
                "size": np.array([float(f.size) for f in self.files], dtype=np.float64)}


def _is_weight_file(path: str) -> bool:
    return path.endswith(".safetensors")


def _manifest(files: list[ModelFile], weights: tuple[str, ...] | None = None) -> ModelManifest:
    """The manifest of ``files`` whose weights are ``weights`` (None: every ``*.safetensors`` file, format 1)."""
    files.sort(key=lambda f: f.path)
    every = tuple(f.path for f in files if _is_weight_file(f.path))
    weights = every if weights is None else tuple(sorted(weights))
    unused = tuple(path for path in every if path not in weights)
    document: dict[str, Any] = {"format": MANIFEST_FORMATS[1 if unused else 0],
                                "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files]}
    if unused:
        document.update(weights=list(weights), unused_weights=list(unused), weights_rule=WEIGHTS_RULE)
    return ModelManifest(files=tuple(files), raw=canonical_bytes(document), weights=weights, unused_weights=unused)


def index_shards(name: str, raw: bytes) -> dict[str, str]:
    """The ``weight_map`` (tensor name -> shard path, relative to the folder) of ``model.safetensors.index.json``'s
    bytes ``raw``, or an ``InputError`` naming the problem: not JSON, no ``weight_map`` object, a shard that is not
    a ``*.safetensors`` path inside the folder."""
    where = f"input '{name}': {WEIGHTS_INDEX}"
    if len(raw) > MAX_INDEX_BYTES:
        raise InputError(f"{where} is {len(raw):,} bytes, longer than any index ({MAX_INDEX_BYTES:,})")
    try:
        document = parse_document(raw, WEIGHTS_INDEX)
    except ValueError as exc:
        raise InputError(f"{where} is not JSON ({exc})") from None
    weight_map = document.get("weight_map") if isinstance(document, Mapping) else None
    if not isinstance(weight_map, Mapping) or not weight_map:
        raise InputError(f"{where} has no weight_map (tensor name -> shard file) to say which files are the weights")
    for tensor, shard in weight_map.items():
        parts = shard.split("/") if isinstance(shard, str) else []
        if not (parts and _is_weight_file(shard) and all(p not in ("", ".", "..") for p in parts)):
            raise InputError(f"{where} maps tensor {tensor!r} to {shard!r}, which is not a *.safetensors file inside "
                             "the model folder")
    return {str(tensor): str(shard) for tensor, shard in weight_map.items()}


def _declared_weights(name: str, folder: Path, files: list[ModelFile], index_path: Path) -> tuple[str, ...]:
    """The files the checkpoint declares (module docstring), given the hashed ``files``."""
    listed = {f.path: f for f in files}
    if WEIGHTS_FILE in listed:
        return (WEIGHTS_FILE,)
    index = listed[WEIGHTS_INDEX]
    try:
        with open(index_path, "rb") as file:
            raw = file.read(MAX_INDEX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {WEIGHTS_INDEX}: {exc.strerror}") from None
    if sha256_hex(raw) != index.sha256:
        raise InputError(f"input '{name}': model file {WEIGHTS_INDEX} changed while it was read; copy the model to "
                         "a folder that nothing writes to")
    shards = sorted(set(index_shards(name, raw).values()))
    absent = [shard for shard in shards if shard not in listed]
    if absent:
        raise InputError(f"input '{name}': {WEIGHTS_INDEX} lists shard(s) the folder {folder} does not hold: "
                         f"{', '.join(absent[:5])}")
    return tuple(shards)


def read_hashed(opened: Any, size: int, *, keep: bool,
                lease: bool = False) -> tuple[Any, int, bytes, mmap.mmap | None, FileLease | None]:
    """``(sha256, count, extra, buffer, lease)``: the SHA-256 (a ``hashlib`` object) of the first ``size`` bytes of
    the unbuffered file ``opened``, how many there were (fewer only if the file is shorter), up to one byte found
    after them (empty unless the file is longer) and, with ``keep``, those bytes in private anonymous memory
    (``mmap.MAP_PRIVATE``, length at least 1): each block is read there, then hashed from there, so the bytes kept
    are the bytes hashed and nothing outside this process can change them (a file-backed map could). Without
    ``keep`` the file streams through one 1 MiB block. (Transparent huge pages for the kept memory were tried:
    slower on a shared machine, where the kernel compacts memory to find them.)

    With ``keep`` and ``lease`` (``certa.engine.core.models.lease.leases_possible()``, asked in the calling
    thread), the file is first offered to ``leased_map``: where it takes a read lease and maps the file
    copy-on-write, the bytes kept are that map, hashed from there (no copy), and the lease is returned, to be
    checked once the bytes are scored (``FileLease.held``); else (None) they are read as above. (Letting go of
    each block's pages once hashed lowers the peak only while no model is loaded, and the loader's checks then
    map them all again: 0.2 s more CPU for a 1.9 GB checkpoint; the loader lets go of them once, after its
    checks.)"""
    digest = hashlib.sha256()
    leased = leased_map(opened.fileno(), size) if keep and lease else None
    if leased is not None:
        with memoryview(leased[0]) as view:
            for start in range(0, size, _KEPT_BLOCK):
                digest.update(view[start: start + _KEPT_BLOCK])
        return digest, size, b"", *leased
    buffer: mmap.mmap | bytearray = bytearray(_BLOCK)
    if keep:
        buffer = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE)
    block = _KEPT_BLOCK if keep else _BLOCK
    done = 0
    with memoryview(buffer) as view:
        while done < size:
            start = done if keep else 0
            part = view[start: start + min(block, size - done)]
            count = opened.readinto(part)
            if not count:
                break
            digest.update(part[:count])
            done += count
    extra = opened.read(1) if done == size else b""
    return digest, done, extra, buffer if isinstance(buffer, mmap.mmap) else None, None


def _hash_file(name: str, path: Path, relative: str, expected: int, keep: bool, lease: bool,
               examine: Callable[[ModelFile, Kept], object] | None = None) -> tuple[ModelFile, Kept | None]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {relative}: {exc.strerror}") from None
    with open(fd, "rb", buffering=0) as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"input '{name}': model file {relative} is not a regular file")
        digest, size, extra, buffer, held = read_hashed(file, expected, keep=keep, lease=lease)
    if extra:
        raise InputError(f"input '{name}': model file {relative} grew while it was read (its size was "
                         f"{expected:,} bytes); copy the model to a folder that nothing writes to")
    file_entry = ModelFile(path=relative, sha256=digest.hexdigest(), size=size)
    if buffer is None:
        return file_entry, None
    kept = Kept(file_entry.sha256, buffer, held)
    return file_entry, (kept if examine is None else replace(kept, examined=examine(file_entry, kept)))


@dataclass(frozen=True)
class Kept:
    """A weight file's bytes as ``read_hashed`` kept them: their SHA-256, the buffer, and the read lease that
    keeps them the file's when the buffer is a map of the file (None: private memory)."""

    sha256: str
    buffer: mmap.mmap
    lease: FileLease | None = None
    examined: object = None
    """What ``folder_manifest(examine=...)`` found in these bytes once they were hashed (None: not examined)."""


class HeldWeights:
    """A model's weight files as ``folder_manifest(keep_weights=True)`` read them: path -> ``Kept`` (the bytes in
    private memory, or mapped under a read lease). The loader ``take``s each once, so the weights are read and
    hashed once in a run; whatever is not taken is freed with this object. Never copied into a pickle (a batch
    worker reads the folder itself)."""

    def __init__(self, kept: Mapping[str, Kept] | None = None) -> None:
        self._kept = dict(kept or {})

    def __bool__(self) -> bool:
        return bool(self._kept)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return HeldWeights, ()

    def peek(self, path: str, sha256: str) -> Kept | None:
        """The held bytes of ``path`` if they are the bytes of digest ``sha256``, else None; still held."""
        held = self._kept.get(path)
        return held if held is not None and held.sha256 == sha256 else None

    def take(self, path: str, sha256: str) -> Kept | None:
        """``peek``, and no longer held: the caller owns the bytes (and their lease)."""
        held = self.peek(path, sha256)
        if held is not None:
            del self._kept[path]
        return held

    def release(self) -> None:
        """Hold nothing (the bytes are freed unless a caller took them)."""
        self._kept.clear()


def _index_shards_guess(path: Path) -> set[str]:
    """The shards ``model.safetensors.index.json`` at ``path`` lists, read before the folder is hashed to know
    which files to keep; empty on any problem (``_declared_weights`` checks the index once hashed)."""
    try:
        with open(path, "rb") as file:
            return set(index_shards("", file.read(MAX_INDEX_BYTES + 1)).values())
    except (OSError, InputError):
        return set()


def folder_manifest(name: str, folder: Path, limits: InputLimits, *,
                    progress: Callable[[int, int, str], None] | None = None,
                    keep_weights: bool = False, meanwhile: Callable[[], object] | None = None,
                    examine: Callable[[ModelFile, Kept], object] | None = None) -> ModelManifest:
    """The manifest of the model folder ``folder`` (module docstring), or an ``InputError`` naming the
    file that makes it unusable (pickle-based weights, a link leaving the folder, a missing config or
    safetensors file, a size over ``limits.model_bytes``). With ``keep_weights`` the weight files are read into
    private memory as they are hashed and held for the loader (``ModelManifest.held``). ``meanwhile`` is called
    in this thread once the files are being hashed (the hashing threads release the GIL while they read and
    hash): work its caller would do next, done alongside; what it raises is raised once the hashing has
    stopped. ``examine`` is called in the hashing thread with each kept weight file (its entry and its bytes)
    once hashed, and what it returns is kept with the bytes (``Kept.examined``): the loader's checks of the
    bytes' values, done while ``meanwhile`` runs; it must not raise (an exception it raises ends the hashing)."""
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
            source = path  # what is hashed: the file, or the file a link inside the folder points to
            if path.is_symlink():
                try:
                    target = path.resolve(strict=True)
                except (OSError, RuntimeError) as exc:  # RuntimeError: a loop, before Python 3.13
                    reason = getattr(exc, "strerror", None) or "a loop of links"
                    raise InputError(f"input '{name}': model file {relative} is a symbolic link that cannot be "
                                     f"followed ({reason}); replace it with the file") from None
                if not target.is_relative_to(root):
                    raise InputError(f"input '{name}': model file {relative} is a link to {target}, outside the "
                                     "model folder; copy the file into the folder")
                if target.is_dir():
                    raise InputError(f"input '{name}': {relative} is a link to a folder; copy it into the folder")
                source = target
            if path.suffix.lower() in PICKLE_SUFFIXES:
                raise InputError(f"input '{name}': model file {relative} is pickle-based ({path.suffix}); loading a "
                                 "pickle runs code, so certa never loads one: convert the weights to safetensors and "
                                 "remove the file from the folder")
            found.append((relative, source))
    relatives = {relative for relative, _ in found}
    if "config.json" not in relatives:
        raise InputError(f"input '{name}': model folder {folder} has no config.json")
    if WEIGHTS_FILE not in relatives and WEIGHTS_INDEX not in relatives:
        others = sorted(relative for relative in relatives if _is_weight_file(relative))
        raise InputError(f"input '{name}': model folder {folder} has neither {WEIGHTS_FILE} nor {WEIGHTS_INDEX}, the "
                         "weights a checkpoint declares (certa loads safetensors only)"
                         + (f"; it holds {', '.join(others[:5])}, which no checkpoint file names" if others else ""))
    sizes = []
    for relative, path in found:
        try:
            sizes.append(path.stat().st_size)
        except OSError as exc:
            raise InputError(f"input '{name}': cannot read model file {relative}: {exc.strerror}") from None
    limits.check(f"input '{name}'", "model_bytes", sum(sizes), "the model folder's size in bytes")
    keep = (({WEIGHTS_FILE} if WEIGHTS_FILE in relatives else _index_shards_guess(root / WEIGHTS_INDEX))
            if keep_weights else set())
    files: list[ModelFile] = []
    kept: dict[str, Kept] = {}
    lease = bool(keep) and leases_possible()
    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        hashed = [pool.submit(_hash_file, name, path, relative, size, relative in keep, lease, examine)
                  for (relative, path), size in zip(found, sizes)]
        try:
            if meanwhile is not None:
                meanwhile()
            for i, future in enumerate(hashed, start=1):
                file, kept_file = future.result()
                files.append(file)
                if kept_file is not None:
                    kept[file.path] = kept_file
                if progress:
                    progress(i, len(found), f"hashing {file.path}")
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    manifest = _manifest(files, _declared_weights(name, folder, files, root / WEIGHTS_INDEX))
    held = HeldWeights({path: kept[path] for path in manifest.weights if path in kept})
    return replace(manifest, held=held) if held else manifest


def read_manifest(name: str, raw: bytes) -> ModelManifest:
    """The manifest stored as an input's bytes (a replay), checked to be one certa wrote: valid JSON of a manifest
    format, files sorted and unique, and canonical (re-encoding gives the same bytes, so a format 2 manifest's
    weights, unused weights and rule are the ones its files give)."""
    try:
        document: Any = json.loads(raw)
        if not isinstance(document, Mapping) or document.get("format") not in MANIFEST_FORMATS:
            raise ValueError(f"not a {' or '.join(MANIFEST_FORMATS)} document")
        files = [ModelFile(path=str(f["path"]), sha256=str(f["sha256"]), size=int(f["size"]))
                 for f in document["files"]]
        weights = (None if document["format"] == MANIFEST_FORMAT
                   else tuple(str(path) for path in document["weights"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"input '{name}': the stored model manifest cannot be read ({exc})") from None
    manifest = _manifest(list(files), weights)
    if not manifest.weights or not set(manifest.weights) <= {f.path for f in manifest.files if _is_weight_file(f.path)}:
        raise InputError(f"input '{name}': the stored model manifest names weights that are not among its "
                         "*.safetensors files")
    if manifest.raw != raw:
        raise InputError(f"input '{name}': the stored model manifest is not in canonical form")
    return manifest
