"""Loading a model input for evaluation: the bytes hashed are the bytes loaded, safetensors only, offline.

``load_causal_lm(table)`` takes a model input (``certa.engine.core.models.manifest``: a ``Table`` of format
``hf-model`` whose ``origin`` is the folder) and builds a causal language model from it, in two steps:
``prepare_causal_lm`` checks everything but the weights' values (cheap: ``model.windows`` prepares both models
before it loads either), ``PreparedModel.load`` reads the weights and builds the model.

1. ``config.json``, ``model.safetensors.index.json`` and ``tokenizer.json`` are read once into memory and their
   SHA-256 compared with the manifest recorded for the input (a file changed after the manifest was taken is
   refused); of each weight file only the header is read: its 8-byte length and JSON. The weights are the files
   the checkpoint declares (``ModelManifest.weights``: ``model.safetensors``, else the shards of
   ``model.safetensors.index.json``), never every ``*.safetensors`` file of the folder;
2. the configuration and the weights' headers are checked against each other before anything is built
   (``certa.engine.core.models.architecture``: no ``auto_map``, since certa never runs code a model ships; a causal
   LM architecture; layers, heads, vocabulary and hidden size bounded by the tensors the weights hold), so a
   hostile ``config.json`` costs milliseconds (when a check fails, the weight files are hashed first, so that a
   header read from a file changed since the manifest is reported as that change);
3. the model is built from that configuration on the ``meta`` device (``AutoModelForCausalLM.from_config``,
   float32) and every stored tensor matched with it (``match_tensors``: the name ``from_pretrained`` reads it as,
   shape, floating-point dtype; a missing one allowed only where the architecture ties it to a loaded one, a stored
   one left unloaded only where ``from_pretrained`` leaves it because the model computes it), the buffers the
   model computes bounded (``check_buffers``), and the compute dtype checked (``check_dtype``);
4. the tokenizer is ``tokenizers.Tokenizer`` built from ``tokenizer.json``'s bytes (None without one), with the
   special tokens its post-processor adds (``certa.engine.core.models.tokenizer``);
5. ``load``: each weight file's bytes are in private anonymous memory (``mmap.MAP_PRIVATE``: nothing outside this
   process can change them), or, where a read lease can be had (``certa.engine.core.models.lease``: Linux, a local
   file system, the main thread), a copy-on-write map of the file under that lease (``LoadedModel.leases``, checked
   by ``LoadedModel.check_unchanged`` once scoring is done); either kept from when the input's folder was hashed
   (``Table.weights``, ``certa.engine.core.models.manifest.HeldWeights``: read and hashed once in the run) or read
   now, hashed block by block as they arrive (``read_hashed``) and compared with the manifest's SHA-256; their
   header must be the one checked in step 2. Each tensor is a view of those bytes where its header puts it
   (``torch.frombuffer`` at ``TensorHeader.begin``; a copy only when its bytes are not aligned for its dtype or the
   machine is big-endian: safetensors is little-endian), checked finite (``aminmax``, which propagates NaN: one
   pass, nothing allocated) and converted to the dtype of the parameter it becomes, which is no copy when the
   stored dtype is the compute dtype (for the bytes kept when the folder was hashed, the finiteness counts were
   taken then, in the hashing threads, while the model libraries were imported: ``examine_weights``, so the
   loader reads no weight again). Two files (``HASH_THREADS``) are read, hashed and checked at a time while
   the model is built again to be loaded (``materialise``): its parameters on ``meta`` and its computed buffers
   (rotary frequencies, causal masks) computed by the architecture's constructor, as ``from_pretrained`` computes
   them, in the compute ``dtype`` (``float32``, the default, ``bfloat16`` or ``float16``). Tied parameters are given
   one tensor (two stored copies that differ are refused: transformers would silently use one), and nothing is
   left on ``meta``. Its logits are ``from_pretrained(folder, dtype=...)``'s on the same files, bit for bit (tested
   for every architecture of ``certa.engine.core.models.tiny.ARCHITECTURES``).

Memory: a model computed in its stored dtype holds its weights' bytes once (the parameters are those bytes); in
another dtype, the converted parameters and at most two files' bytes at a time. Nothing is read by a library:
safetensors' own loader is not used (it would copy every tensor), but its format rules are checked (step 2).

Every problem with the folder's files is an ``InputError`` naming the input, the file and what is wrong (never a
library's traceback): ``certa`` prints it on one line and exits 2.

Nothing is fetched: no function here takes a hub name, and ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` are set
before transformers is imported. torch, transformers, safetensors and tokenizers are imported on first use
(the ``models`` extra: ``pip install 'certa[models]' torch==2.13.0``); without them a ``StageError`` says what to
install. ``warm_model_libraries`` does those imports ahead (and the architecture's module), while the folder of
the model a run loads is hashed.

Determinism (``deterministic_torch``): a fixed number of intra-op threads, deterministic kernels (the flag
``torch.use_deterministic_algorithms`` sets), evaluation mode and no autograd: on one machine the same inputs give bit-identical logits.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import stat
import sys
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, MissingExtraError, StageError
from certa.engine.foundation.library_errors import error_line
from certa.engine.foundation.extras import install_command, missing_extra
from certa.engine.core.models.architecture import (COMPUTE_DTYPES, DTYPE_BYTES, MAX_HEADER_BYTES, TORCH_DTYPES,
                                                   TensorHeader, TensorPlan, build_architecture, check_buffers,
                                                   check_dtype, check_limits, config_document, match_tensors,
                                                   materialise, read_header, weight_headers)
from certa.engine.core.models.lease import FileLease, leases_possible, unmap_resident
from certa.engine.core.models.manifest import (HASH_THREADS, MODEL_FORMAT, WEIGHTS_FILE, WEIGHTS_INDEX, HeldWeights,
                                               Kept, ModelFile, index_shards, read_hashed, read_manifest)
from certa.engine.core.models.tokenizer import SpecialTokens, read_tokenizer
from certa.engine.core.tables import Table

__all__ = ["LoadedModel", "PreparedModel", "load_causal_lm", "prepare_causal_lm", "deterministic_torch",
           "model_libraries", "require_model_libraries", "warm_model_libraries", "examine_weights", "model_forward",
           "return_freed_memory"]

_LIBRARIES = ("torch", "transformers", "safetensors", "tokenizers")
_CONFIG_PEEK_BYTES = 1 << 20
"""The most of ``config.json`` ``warm_model_libraries`` reads (a configuration is a few KB)."""


def require_model_libraries() -> dict[str, Any]:
    """The modules torch, transformers, safetensors.torch and tokenizers, imported now (offline); a
    ``StageError`` naming the missing one and the install command otherwise."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    modules: dict[str, Any] = {}
    try:
        import torch
        import transformers
        import tokenizers
        import safetensors.torch as safetensors_torch
    except ImportError as exc:
        missing = missing_extra(exc, "evaluating a model")
        if missing is not None:
            raise missing from None
        raise StageError(f"evaluating a model needs {', '.join(_LIBRARIES)} ({exc}): {install_command('models')}") from None
    transformers.logging.set_verbosity_error()  # certa reports what matters itself, on one line
    transformers.utils.logging.disable_progress_bar()
    modules.update(torch=torch, transformers=transformers, tokenizers=tokenizers, safetensors=safetensors_torch)
    return modules


def model_libraries() -> dict[str, str]:
    """Versions of the model libraries, for the certificate (call after ``require_model_libraries``)."""
    from importlib.metadata import version

    return {name: version(name) for name in _LIBRARIES}


def warm_model_libraries(folder: Path) -> None:
    """Do now what loading the model in ``folder`` does first whatever its weights: import the model libraries
    (``require_model_libraries``) and ``transformers``' module of the causal-LM class that ``config.json``'s
    ``model_type`` names (transformers imports those on first use: about 0.7 s of Python for a Llama), and build
    transformers 5's table of checkpoint renamings (``architecture.match_tensors`` reads it; 0.2 s the first
    time), so that it runs while the folder is hashed (``certa.engine.core.inputs``:
    ``folder_manifest(meanwhile=...)``).
    ``config.json`` is read here unverified, as a regular file of at most ``_CONFIG_PEEK_BYTES``, only to choose
    which of transformers' own modules to import: nothing of the folder runs (``auto_map`` is not read), no
    number depends on it, and whatever fails here (no model libraries, no such file, not JSON, an unknown
    ``model_type``) is skipped silently, for ``prepare_causal_lm`` to report on the verified bytes."""
    try:
        transformers = require_model_libraries()["transformers"]
        with _open_regular("", folder / "config.json", "config.json") as opened:
            document = json.loads(_read_exactly(opened, _CONFIG_PEEK_BYTES))
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[document["model_type"]])
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping  # transformers 5

        get_checkpoint_conversion_mapping(document["model_type"])
    except (StageError, InputError, MissingExtraError, OSError, ValueError, LookupError, TypeError, ImportError,
            AttributeError, RuntimeError):  # RuntimeError: a deep JSON's RecursionError, transformers' failed lazy import
        return


def return_freed_memory() -> None:
    """Give back to the system the memory models freed once they are scored: collect the reference cycles that
    still hold their objects (a module refers to its parent's hooks and configuration) and, where the C library
    has it (glibc), ``malloc_trim(0)``: glibc's arenas keep freed blocks for the process to reuse, so what a
    later stage allocates (Numba and LLVM for a bootstrap) would otherwise be added to them at the run's peak.
    Nothing computed depends on it."""
    import ctypes
    import gc

    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        return
    trim(0)


def deterministic_torch(threads: int) -> None:
    """Fix torch's intra-op threads to ``threads`` and ask for deterministic kernels: an operation that has only
    a nondeterministic kernel raises instead of running.

    ``torch.set_deterministic_debug_mode("error")`` sets the one flag of ATen that
    ``torch.use_deterministic_algorithms(True)`` sets (``torch._C._set_deterministic_algorithms(True,
    warn_only=False)``: torch 2.13's ``torch/__init__.py``), without the other thing that call does: importing
    ``torch._inductor.config`` to set TorchInductor's own ``deterministic`` option, which only code compiled by
    ``torch.compile`` reads (certa compiles nothing) and whose import loads 828 modules (about 1 s of CPU) when
    nothing imported ``torch._dynamo`` before."""
    torch = require_model_libraries()["torch"]
    torch.set_num_threads(threads)
    torch.set_deterministic_debug_mode("error")


def model_forward(model: Any, **inputs: Any) -> Any:
    """``model(**inputs)``; an exception the model's own code raises (an architecture that builds but cannot run
    here, memory exhausted on a GPU) is a ``StageError`` naming the architecture and what it said, on one line."""
    try:
        return model(**inputs)
    except Exception as exc:  # noqa: BLE001 - a model's forward raises whatever its kernels raise
        raise StageError(f"the '{model.config.model_type}' model's forward pass failed ({error_line(exc)})") from None


@dataclass(frozen=True, kw_only=True)
class _Described:
    """What is known of a model input before and after its weights are loaded."""

    name: str
    manifest_sha256: str
    tokenizer: Any
    tokenizer_sha256: str | None
    model_type: str
    parameters: int
    device: str
    vocabulary: int
    """Rows of the input embedding: token ids 0 .. vocabulary - 1 have one."""
    config: Any = field(default=None, repr=False)
    """The ``transformers`` configuration the model is built from."""
    dtype: str = "float32"
    """The compute dtype the parameters are loaded in (``COMPUTE_DTYPES``)."""
    special_tokens: SpecialTokens | None = None
    """What the tokenizer's post-processor adds around a text (None without a tokenizer)."""
    ignored: tuple[str, ...] = ()
    """Stored tensors not loaded because the model computes them (``TensorPlan.ignored``)."""

    def check_token_ids(self, ids: Any, text: str) -> None:
        """An ``InputError`` when a token id of ``ids`` (an integer array, ``text`` saying what was tokenized) has no
        embedding in the model (its tokenizer has more tokens than its weights)."""
        ids = np.asarray(ids)
        if ids.size and (int(ids.max()) >= self.vocabulary or int(ids.min()) < 0):
            bad = int(ids.max()) if int(ids.max()) >= self.vocabulary else int(ids.min())
            raise InputError(f"input '{self.name}': tokenizer.json gives {text} the token id {bad}, but the model's "
                             f"weights embed {self.vocabulary} tokens (ids 0 to {self.vocabulary - 1}): the tokenizer "
                             "and the weights are not one model")

    def check_finite(self, values: Any, what: str, units: str) -> None:
        """An ``InputError`` when ``values`` (one number the model computed for each of ``units``, ``what`` saying
        which) are not all finite: never reported later as a missing value of a table."""
        values = np.asarray(values, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise InputError(f"input '{self.name}': the model computes a non-finite {what} "
                             f"({float(values[bad[0]])}) for {bad.size} of {values.size} {units} (the first is number "
                             f"{int(bad[0]) + 1}): its arithmetic overflows float32 with these weights and config.json "
                             "(no value is substituted)")


@dataclass(frozen=True, kw_only=True)
class LoadedModel(_Described):
    """A model built from a model input: ``model`` (a ``transformers`` causal LM in eval mode), ``tokenizer``
    (a ``tokenizers.Tokenizer`` or None), and the digests that identify them."""

    model: Any
    leases: Mapping[str, FileLease] = field(default_factory=dict, repr=False)
    """The read leases of the weight files whose bytes the model's tensors are a map of (path -> lease;
    ``certa.engine.core.models.lease``), held as long as this object."""

    def check_unchanged(self) -> None:
        """An ``InputError`` naming the first weight file whose read lease was broken (a process opened it for
        writing, or truncated it, while the model was loaded): the bytes scored may not be the bytes hashed, so
        the run is refused. Called once scoring is done, before the certificate is built
        (``certa.engine.core.runtimes.hf.OpenHfRuntime.close``); nothing to check for bytes copied."""
        broken = [relative for relative, held in sorted(self.leases.items()) if not held.held()]
        if broken:
            raise InputError(f"input '{self.name}': model file {broken[0]} was opened for writing while certa scored "
                             "it; copy the model to a folder nothing writes to")


def _open_regular(name: str, path: Path, relative: str) -> Any:
    """The model file at ``path`` opened for reading without a buffer (never blocking on a FIFO put in its place),
    refused unless it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {path}: {exc.strerror}") from None
    opened = open(fd, "rb", buffering=0)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        opened.close()
        raise InputError(f"input '{name}': model file {relative} is no longer a regular file: the folder changed "
                         "during the run")
    return opened


def _changed(name: str, relative: str, digest: str, file: ModelFile) -> InputError:
    return InputError(f"input '{name}': model file {relative} has SHA-256 {digest}, not the {file.sha256} of the "
                      "manifest taken when the input was read: the folder changed during the run")


def _verified_bytes(name: str, folder: Path, file: ModelFile | None, relative: str) -> bytes:
    """The bytes of the model file ``relative``, read once (a regular file, at most the size the manifest
    recorded plus one byte) and checked against the manifest's digest."""
    if file is None:
        raise InputError(f"input '{name}': the model manifest lists no {relative}")
    try:
        with _open_regular(name, folder / relative, relative) as opened:
            raw = _read_exactly(opened, file.size + 1)
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {folder / relative}: {exc.strerror}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != file.sha256:
        raise _changed(name, relative, digest, file)
    return raw


def _read_exactly(opened: Any, size: int) -> bytes:
    """Up to ``size`` bytes of the unbuffered file ``opened`` (fewer only at its end)."""
    parts, left = [], size
    while left > 0 and (part := opened.read(left)):
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _verified_buffer(name: str, folder: Path, file: ModelFile, relative: str, *, lease: bool = False) -> Kept:
    """The bytes of the weight file ``relative`` in private anonymous memory, or with ``lease`` mapped under a read
    lease where one can be had (``read_hashed``: hashed as they are read), checked against the manifest's digest:
    the buffer the tensors are built on."""
    try:
        with _open_regular(name, folder / relative, relative) as opened:
            digest, _, extra, buffer, held = read_hashed(opened, file.size, keep=True, lease=lease)
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {folder / relative}: {exc.strerror}") from None
    digest.update(extra)  # a file that grew hashes differently
    if digest.hexdigest() != file.sha256:
        raise _changed(name, relative, digest.hexdigest(), file)
    return Kept(file.sha256, buffer, held)


def _head(read: Any, size: int) -> bytes:
    """The first bytes of a weight file of ``size`` bytes, taken with ``read(n)``: its 8-byte header length and,
    when that length is one the file can hold, the header."""
    head = read(8)
    length = int.from_bytes(head, "little")
    if len(head) == 8 and length <= min(size - 8, MAX_HEADER_BYTES):
        head += read(length)
    return head


def _buffer_head(buffer: mmap.mmap, size: int) -> bytes:
    """The head (``_head``) of a weight file of ``size`` bytes held in ``buffer``."""
    position = 0

    def read(count: int) -> bytes:
        nonlocal position
        part = buffer[position: min(position + count, size)]
        position += len(part)
        return part

    return _head(read, size)


def examine_weights(file: ModelFile, kept: Kept) -> dict[str, int] | None:
    """The loader's finiteness check of a weight file's bytes, done where they are hashed: ``folder_manifest``
    calls it (``examine``) in a hashing thread with each kept weight file once hashed, while the calling thread
    imports the model libraries (``warm_model_libraries``). For each floating-point tensor of the header the bytes
    hold (``read_header``), how many of its values are NaN or infinite (``_non_finite``, on the tensor
    ``_stored_tensor`` makes: the one the loader builds); then, for bytes mapped under a read lease, their pages
    are let go of (``unmap_resident``). ``PreparedModel.load`` takes these counts for the same bytes, so it reads
    no weight again, and refuses a non-finite tensor as before, at the same point. None when torch cannot be
    imported or the header cannot be read: the loader then checks itself (and reports the header's problem when
    the model is prepared). Nothing here is scored, and the bytes are the ones hashed whatever the examination
    finds."""
    try:
        import torch

        tensors = read_header("", file.path, _buffer_head(kept.buffer, file.size), size=file.size)
        counts: dict[str, int] = {}
        for stored, header in tensors.items():
            tensor = _stored_tensor(torch, kept.buffer, header)
            if tensor.is_floating_point():
                counts[stored] = _non_finite(torch, tensor)
    except (ImportError, InputError, RuntimeError, ValueError, TypeError):  # the loader checks and reports
        return None
    if kept.lease is not None:  # checked: pages the model never touches need not stay resident
        unmap_resident(kept.buffer)
    return counts


def _weight_head(name: str, folder: Path, file: ModelFile | None, relative: str, held: HeldWeights | None) -> bytes:
    """The head (``_head``) of the weight file ``relative``: from its bytes held since it was hashed, else read
    from the file (checked later against the bytes the loader hashes)."""
    if file is None:
        raise InputError(f"input '{name}': the model manifest lists no {relative}")
    kept = held.peek(relative, file.sha256) if held is not None else None
    if kept is not None:
        return _buffer_head(kept.buffer, file.size)
    try:
        with _open_regular(name, folder / relative, relative) as opened:
            head = _head(lambda count: _read_exactly(opened, count), file.size)
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {folder / relative}: {exc.strerror}") from None
    length = int.from_bytes(head[:8], "little")
    if len(head) < min(file.size, 8) or (len(head) >= 8 and length <= min(file.size - 8, MAX_HEADER_BYTES)
                                         and len(head) != 8 + length):
        raise InputError(f"input '{name}': model file {relative} is shorter than the {file.size:,} bytes of the "
                         "manifest taken when the input was read: the folder changed during the run")
    return head


def _stored_tensor(torch: Any, buffer: mmap.mmap, header: TensorHeader) -> Any:
    """The tensor ``header`` describes, on the bytes of ``buffer`` (its weight file): a view of the buffer when its
    bytes are aligned for its dtype and the machine is little-endian (safetensors' byte order), else a copy."""
    dtype = getattr(torch, TORCH_DTYPES[header.dtype])
    size = DTYPE_BYTES[header.dtype]
    count = math.prod(header.shape)
    if count == 0:
        return torch.empty(header.shape, dtype=dtype)
    if sys.byteorder == "little" and header.begin % size == 0:
        return torch.frombuffer(buffer, dtype=dtype, count=count, offset=header.begin).view(header.shape)
    stored = np.frombuffer(buffer, dtype=np.dtype(f"<u{size}"), count=count, offset=header.begin)
    return torch.from_numpy(stored.astype(stored.dtype.newbyteorder("="))).view(dtype).view(header.shape)


def _non_finite(torch: Any, values: Any) -> int:
    """How many of the floating-point ``values`` are NaN or infinite: 0 when their minimum and maximum are finite
    (``aminmax`` propagates NaN; one pass, nothing allocated), else counted."""
    if values.numel() == 0:
        return 0
    if values.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        low, high = torch.aminmax(values)
        if bool(torch.isfinite(low)) and bool(torch.isfinite(high)):
            return 0
    else:  # float8: no aminmax or isfinite kernel
        values = values.to(torch.float32)
    return int((~torch.isfinite(values)).sum())


@dataclass(frozen=True, kw_only=True)
class PreparedModel(_Described):
    """A model input whose files were checked and whose architecture was built on ``meta``, matched with its
    weights' headers (``prepare_causal_lm``), ready to ``load``: everything about it but its weights' values."""

    folder: Path = field(repr=False)
    files: Mapping[str, ModelFile] = field(repr=False)
    weights: tuple[str, ...]
    heads: Mapping[str, bytes] = field(repr=False)
    tensors: Mapping[str, TensorHeader] = field(repr=False)
    plan: TensorPlan = field(repr=False)
    skeleton: Any = field(repr=False)
    held: HeldWeights | None = field(default=None, repr=False)
    """The weight files' bytes read when the input was hashed (``Table.weights``), taken by ``load``."""

    def load(self) -> LoadedModel:
        """The model with its weights (module docstring, step 5)."""
        libs = require_model_libraries()
        torch, transformers = libs["torch"], libs["transformers"]
        name, plan = self.name, self.plan
        dtypes: Future[dict[str, Any]] = Future()
        by_file: dict[str, list[tuple[str, TensorHeader]]] = {relative: [] for relative in self.weights}
        for stored in sorted(plan.names):
            by_file[self.tensors[stored].file].append((stored, self.tensors[stored]))

        def shard(relative: str) -> tuple[dict[str, Any], FileLease | None]:
            file = self.files[relative]
            kept = self.held.take(relative, file.sha256) if self.held is not None else None
            if kept is None:
                kept = _verified_buffer(name, self.folder, file, relative, lease=lease)
            buffer, head = kept.buffer, self.heads[relative]
            if buffer[: len(head)] != head:
                raise InputError(f"input '{name}': model file {relative}'s header is not the one read before its "
                                 "bytes were hashed: the folder changed during the run")
            examined = kept.examined if isinstance(kept.examined, dict) else {}  # examine_weights' counts
            values = {}
            for stored, header in by_file[relative]:
                tensor = _stored_tensor(torch, buffer, header)
                count = 0
                if tensor.is_floating_point():
                    count = examined[stored] if stored in examined else _non_finite(torch, tensor)
                if count:
                    raise InputError(f"input '{name}': tensor {stored} in {relative} holds {count} NaN or infinite "
                                     "value(s); a model's weights are finite numbers")
                values[stored] = tensor
            if kept.lease is not None:  # checked: pages the model never touches need not stay resident
                unmap_resident(buffer)
            del buffer  # the tensors keep what they view
            wanted = dtypes.result()
            return ({plan.names[stored]: tensor.to(wanted[plan.names[stored]]) for stored, tensor in values.items()},
                    kept.lease)

        lease = leases_possible()
        state: dict[str, Any] = {}
        leases: dict[str, FileLease] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(HASH_THREADS, len(self.weights)))) as pool:
            shards = [pool.submit(shard, relative) for relative in self.weights]
            try:
                model = materialise(name, self.skeleton, transformers, torch, self.dtype)
                dtypes.set_result({key: value.dtype for key, value in model.state_dict().items()})
                for relative, future in zip(self.weights, shards):
                    values, held = future.result()
                    state.update(values)
                    if held is not None:
                        leases[relative] = held
            except BaseException as exc:
                if not dtypes.done():
                    dtypes.set_exception(exc)
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        _tie(name, plan.tied, state, torch)
        model.load_state_dict(state, strict=False, assign=True)
        del state
        model.tie_weights()
        empty = [key for key, value in (*model.named_parameters(), *model.named_buffers())
                 if value.device.type == "meta"]
        if empty:
            raise StageError(f"input '{name}': the '{self.model_type}' architecture still has {len(empty)} tensor(s) "
                             f"without values after loading ({', '.join(empty[:3])}); certa cannot load it")
        model.to(self.device)
        model.eval()
        described = {f.name: getattr(self, f.name) for f in fields(_Described)}
        return LoadedModel(**{**described, "parameters": int(sum(p.numel() for p in model.parameters()))},
                           model=model, leases=leases)


def prepare_causal_lm(table: Table, *, device: str = "cpu", dtype: str = "float32") -> PreparedModel:
    """The model input ``table`` checked and ready to load in ``dtype`` on ``device`` (module docstring, steps 1 to
    4): ``config.json``, the index and ``tokenizer.json`` read and verified, the weights' headers read and every
    tensor matched with the architecture, without reading the weights' values."""
    if table.fmt != MODEL_FORMAT:
        raise StageError(f"input '{table.name}' is a {table.fmt} table, not a model folder (declare it with model:)")
    if table.origin is None:
        raise StageError(f"input '{table.name}' was read back from a ledger: the model folder is not available "
                         "here (give it with --input NAME=FOLDER)")
    if dtype not in COMPUTE_DTYPES:
        raise StageError(f"dtype {dtype!r} is not one certa computes a model in ({', '.join(COMPUTE_DTYPES)})")
    libs = require_model_libraries()
    torch, transformers = libs["torch"], libs["transformers"]
    name, manifest = table.name, read_manifest(table.name, table.raw)
    folder = Path(table.origin)
    listed = {file.path: file for file in manifest.files}

    def verified(relative: str) -> bytes:
        return _verified_bytes(name, folder, listed.get(relative), relative)

    document = config_document(name, verified("config.json"), transformers)
    index = (index_shards(name, verified(WEIGHTS_INDEX))
             if WEIGHTS_FILE not in manifest.weights and manifest.digest_of(WEIGHTS_INDEX) else None)
    held = table.weights if isinstance(table.weights, HeldWeights) else None
    heads = {relative: _weight_head(name, folder, listed.get(relative), relative, held)
             for relative in manifest.weights}
    try:
        tensors = weight_headers(name, heads, index, sizes={relative: listed[relative].size for relative in heads})
        check_limits(name, document, tensors, transformers.CONFIG_MAPPING[document["model_type"]].attribute_map)
        config, skeleton = build_architecture(name, document, transformers, torch)
        plan = match_tensors(name, skeleton, tensors)
        check_buffers(name, skeleton, tensors)
        check_dtype(name, skeleton, dtype)
    except InputError:
        for relative in manifest.weights:  # a header read from a file changed since the manifest: say that
            if held is None or held.peek(relative, listed[relative].sha256) is None:
                _verified_buffer(name, folder, listed[relative], relative).buffer.close()
        raise
    tokenizer, special, tokenizer_sha256 = None, None, manifest.digest_of("tokenizer.json")
    if tokenizer_sha256 is not None:
        tokenizer, special = read_tokenizer(name, verified("tokenizer.json"), libs["tokenizers"])
    return PreparedModel(name=name, manifest_sha256=manifest.sha256, tokenizer=tokenizer,
                         tokenizer_sha256=tokenizer_sha256, model_type=str(config.model_type),
                         parameters=int(sum(p.numel() for p in skeleton.parameters())), device=device,
                         vocabulary=int(skeleton.get_input_embeddings().weight.shape[0]), dtype=dtype,
                         special_tokens=special, ignored=plan.ignored, config=config, folder=folder, files=listed,
                         weights=manifest.weights, heads=heads, tensors=tensors, plan=plan, skeleton=skeleton,
                         held=held)


def load_causal_lm(table: Table, *, device: str = "cpu", dtype: str = "float32") -> LoadedModel:
    """The causal language model of the model input ``table``, computed in ``dtype`` on ``device`` (module
    docstring): ``prepare_causal_lm`` then ``PreparedModel.load``."""
    return prepare_causal_lm(table, device=device, dtype=dtype).load()


def _tie(name: str, tied: tuple[tuple[str, ...], ...], state: dict[str, Any], torch: Any) -> None:
    """Give every member of a group of tied parameters the loaded tensor of the group, in place; two stored
    members that differ are refused (transformers would keep one and drop the other without a word)."""
    for group in tied:
        present = [key for key in group if key in state]
        if not present:
            continue
        first = state[present[0]]
        differing = [key for key in present[1:] if not torch.equal(state[key], first)]
        if differing:
            raise InputError(f"input '{name}': the architecture ties {differing[0]} to {present[0]} (one parameter, "
                             "config.json's tie_word_embeddings), but the weights hold two different tensors for "
                             "them; transformers would use one and ignore the other (set tie_word_embeddings: false "
                             "if the model has its own output embedding)")
        for key in group:
            state[key] = first
