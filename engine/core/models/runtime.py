"""Loading a model input for evaluation: the bytes hashed are the bytes loaded, safetensors only, offline.

``load_causal_lm(table)`` takes a model input (``certa.engine.core.models.manifest``: a ``Table`` of format
``hf-model`` whose ``origin`` is the folder) and builds a causal language model from it:

1. every file the model needs (``config.json``, its weights, ``tokenizer.json`` when present) is read once into
   memory and its SHA-256 compared with the manifest recorded for the input, so a file changed after the manifest
   was taken is refused, and the weights evaluated are exactly the bytes the certificate names (no second read
   from disk by a library). The weights are the files the checkpoint declares (``ModelManifest.weights``:
   ``model.safetensors``, else the shards of ``model.safetensors.index.json``), never every ``*.safetensors``
   file of the folder;
2. the configuration and the weights' headers are checked against each other before anything is built
   (``certa.engine.core.models.architecture``: no ``auto_map``, since certa never runs code a model ships; a causal
   LM architecture; layers, heads, vocabulary and hidden size bounded by the tensors the weights hold), so a
   hostile ``config.json`` costs milliseconds;
3. the model is built from that configuration on the ``meta`` device (``AutoModelForCausalLM.from_config``,
   float32) and every stored tensor matched with it (``match_tensors``: the name ``from_pretrained`` reads it as,
   shape, floating-point dtype; a missing one allowed only where the architecture ties it to a loaded one, a stored
   one left unloaded only where ``from_pretrained`` leaves it because the model computes it), and the buffers the
   model computes bounded (``check_buffers``);
4. the model is built again to be loaded (``materialise``): its parameters on ``meta`` and its computed buffers
   (rotary frequencies, causal masks) computed by the architecture's constructor, as ``from_pretrained`` computes
   them, in the compute ``dtype`` (``float32``, the default, ``bfloat16`` or ``float16``); the weights loaded from
   the safetensors bytes (``safetensors.torch.load``: a safetensors file is a JSON header and raw tensors, it cannot
   run code), each converted to the dtype of the parameter it becomes, tied parameters given one tensor (two stored
   copies that differ are refused: transformers would silently use one), and nothing left on ``meta``. Its logits
   are ``from_pretrained(folder, dtype=...)``'s on the same files, bit for bit (tested for every architecture of
   ``certa.engine.core.models.tiny.ARCHITECTURES``);
5. the tokenizer is ``tokenizers.Tokenizer`` built from ``tokenizer.json``'s bytes (None without one), with the
   special tokens its post-processor adds (``certa.engine.core.models.tokenizer``).

Every problem with the folder's files is an ``InputError`` naming the input, the file and what is wrong (never a
library's traceback): ``certa`` prints it on one line and exits 2.

Nothing is fetched: no function here takes a hub name, and ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` are set
before transformers is imported. torch, transformers, safetensors and tokenizers are imported on first use
(the ``models`` extra: ``pip install 'certa[models]' torch==2.13.0``); without them a ``StageError`` says what to
install.

Determinism (``deterministic_torch``): a fixed number of intra-op threads, ``torch.use_deterministic_algorithms``,
evaluation mode and no autograd: on one machine the same inputs give bit-identical logits.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.foundation.library_errors import error_line
from certa.engine.foundation.extras import install_command, missing_extra
from certa.engine.core.models.architecture import (COMPUTE_DTYPES, build_architecture, check_buffers, check_limits,
                                                   config_document, match_tensors, materialise,
                                                   weight_headers)
from certa.engine.core.models.manifest import (MODEL_FORMAT, WEIGHTS_FILE, WEIGHTS_INDEX, ModelFile, index_shards,
                                               read_manifest)
from certa.engine.core.models.tokenizer import SpecialTokens, read_tokenizer
from certa.engine.core.tables import Table

__all__ = ["LoadedModel", "load_causal_lm", "deterministic_torch", "model_libraries", "require_model_libraries",
           "model_forward"]

_LIBRARIES = ("torch", "transformers", "safetensors", "tokenizers")


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


def deterministic_torch(threads: int) -> None:
    """Fix torch's intra-op threads to ``threads`` and ask for deterministic kernels."""
    torch = require_model_libraries()["torch"]
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


def model_forward(model: Any, **inputs: Any) -> Any:
    """``model(**inputs)``; an exception the model's own code raises (an architecture that builds but cannot run
    here, memory exhausted on a GPU) is a ``StageError`` naming the architecture and what it said, on one line."""
    try:
        return model(**inputs)
    except Exception as exc:  # noqa: BLE001 - a model's forward raises whatever its kernels raise
        raise StageError(f"the '{model.config.model_type}' model's forward pass failed ({error_line(exc)})") from None


@dataclass(frozen=True)
class LoadedModel:
    """A model built from a model input: ``model`` (a ``transformers`` causal LM in eval mode), ``tokenizer``
    (a ``tokenizers.Tokenizer`` or None), and the digests that identify them."""

    name: str
    manifest_sha256: str
    model: Any
    tokenizer: Any
    tokenizer_sha256: str | None
    model_type: str
    parameters: int
    device: str
    vocabulary: int
    """Rows of the input embedding: token ids 0 .. vocabulary - 1 have one."""
    dtype: str = "float32"
    """The compute dtype the parameters were loaded in (``COMPUTE_DTYPES``)."""
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


def _verified_bytes(name: str, folder: Path, file: ModelFile | None, relative: str) -> bytes:
    """The bytes of the model file ``relative``, read once (a regular file, at most the size the manifest
    recorded plus one byte, never blocking on a FIFO put in its place) and checked against the manifest's digest."""
    path = folder / relative
    if file is None:
        raise InputError(f"input '{name}': the model manifest lists no {relative}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as opened:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(f"input '{name}': model file {relative} is no longer a regular file: the folder "
                                 "changed during the run")
            raw = opened.read(file.size + 1)
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {path}: {exc.strerror}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != file.sha256:
        raise InputError(f"input '{name}': model file {relative} has SHA-256 {digest}, not the {file.sha256} of the "
                         "manifest taken when the input was read: the folder changed during the run")
    return raw


def load_causal_lm(table: Table, *, device: str = "cpu", dtype: str = "float32") -> LoadedModel:
    """The causal language model of the model input ``table``, computed in ``dtype`` on ``device`` (module
    docstring)."""
    if table.fmt != MODEL_FORMAT:
        raise StageError(f"input '{table.name}' is a {table.fmt} table, not a model folder (declare it with model:)")
    if table.origin is None:
        raise StageError(f"input '{table.name}' was read back from a ledger: the model folder is not available "
                         "here (give it with --input NAME=FOLDER)")
    if dtype not in COMPUTE_DTYPES:
        raise StageError(f"dtype {dtype!r} is not one certa computes a model in ({', '.join(COMPUTE_DTYPES)})")
    libs = require_model_libraries()
    torch, transformers, safetensors = libs["torch"], libs["transformers"], libs["safetensors"]
    name, manifest = table.name, read_manifest(table.name, table.raw)
    folder = Path(table.origin)

    listed = {file.path: file for file in manifest.files}

    def verified(relative: str) -> bytes:
        return _verified_bytes(name, folder, listed.get(relative), relative)

    document = config_document(name, verified("config.json"), transformers)
    weights = {relative: verified(relative) for relative in manifest.weights}
    index = (index_shards(name, verified(WEIGHTS_INDEX))
             if WEIGHTS_FILE not in manifest.weights and manifest.digest_of(WEIGHTS_INDEX) else None)
    tensors = weight_headers(name, weights, index)
    check_limits(name, document, tensors, transformers.CONFIG_MAPPING[document["model_type"]].attribute_map)
    config, skeleton = build_architecture(name, document, transformers, torch)
    plan = match_tensors(name, skeleton, tensors)
    check_buffers(name, skeleton, tensors)
    model = materialise(name, skeleton, transformers, torch, dtype)
    del skeleton
    wanted = {key: value.dtype for key, value in model.state_dict().items()}
    state: dict[str, Any] = {}
    for relative, raw in weights.items():
        try:
            stored = safetensors.load(raw)
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for a malformed file
            raise InputError(f"input '{name}': {relative} is not a valid safetensors file ({exc})") from None
        for tensor, values in sorted(stored.items()):
            if tensor not in plan.names:
                continue
            if values.is_floating_point() and not bool(torch.isfinite(values).all()):
                count = int((~torch.isfinite(values)).sum())
                raise InputError(f"input '{name}': tensor {tensor} in {relative} holds {count} NaN or infinite "
                                 "value(s); a model's weights are finite numbers")
            state[plan.names[tensor]] = values.to(wanted[plan.names[tensor]])
        del stored
    _tie(name, plan.tied, state, torch)
    model.load_state_dict(state, strict=False, assign=True)
    del state
    model.tie_weights()
    empty = [key for key, value in (*model.named_parameters(), *model.named_buffers()) if value.device.type == "meta"]
    if empty:
        raise StageError(f"input '{name}': the '{config.model_type}' architecture still has {len(empty)} tensor(s) "
                         f"without values after loading ({', '.join(empty[:3])}); certa cannot load it")
    model.to(device)
    model.eval()
    tokenizer, special, tokenizer_sha256 = None, None, manifest.digest_of("tokenizer.json")
    if tokenizer_sha256 is not None:
        tokenizer, special = read_tokenizer(name, verified("tokenizer.json"), libs["tokenizers"])
    return LoadedModel(name=name, manifest_sha256=manifest.sha256, model=model, tokenizer=tokenizer,
                       tokenizer_sha256=tokenizer_sha256, model_type=str(config.model_type),
                       parameters=int(sum(p.numel() for p in model.parameters())), device=device,
                       vocabulary=int(model.get_input_embeddings().weight.shape[0]), dtype=dtype,
                       special_tokens=special, ignored=plan.ignored)


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
