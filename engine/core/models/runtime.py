"""Loading a model input for evaluation: the bytes hashed are the bytes loaded, safetensors only, offline.

``load_causal_lm(table)`` takes a model input (``certa.engine.core.models.manifest``: a ``Table`` of format
``hf-model`` whose ``origin`` is the folder) and builds a causal language model from it:

1. every file the model needs (``config.json``, each ``*.safetensors`` file, ``tokenizer.json`` when present) is
   read once into memory and its SHA-256 compared with the manifest recorded for the input, so a file changed
   after the manifest was taken is refused, and the weights evaluated are exactly the bytes the certificate
   names (no second read from disk by a library);
2. the configuration is built from ``config.json``'s bytes (``transformers.AutoConfig.for_model``); a
   configuration that asks for code from the folder or a hub (``auto_map``) is refused: certa never runs code a
   model ships;
3. the model is built from that configuration (``AutoModelForCausalLM.from_config``, float32) and its weights
   loaded from the safetensors bytes (``safetensors.torch.load``: a safetensors file is a JSON header and raw
   tensors, it cannot run code); an unexpected tensor is refused, and a missing one is allowed only where the
   architecture ties it to a loaded one (GPT-2's ``lm_head.weight`` to ``transformer.wte.weight``);
4. the tokenizer is ``tokenizers.Tokenizer`` built from ``tokenizer.json``'s bytes (None without one).

Nothing is fetched: no function here takes a hub name, and ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` are set
before transformers is imported. torch, transformers, safetensors and tokenizers are imported on first use
(the ``models`` extra: ``pip install 'certa[models]' torch==2.13.0``); without them a ``StageError`` says what to
install.

Determinism (``deterministic_torch``): a fixed number of intra-op threads, ``torch.use_deterministic_algorithms``,
evaluation mode and no autograd: on one machine the same inputs give bit-identical logits.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.foundation.extras import install_command, missing_extra
from certa.engine.core.models.manifest import MODEL_FORMAT, read_manifest
from certa.engine.core.tables import Table

__all__ = ["LoadedModel", "load_causal_lm", "deterministic_torch", "model_libraries", "require_model_libraries"]

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


def _verified_bytes(name: str, folder: Path, relative: str, expected: str) -> bytes:
    path = folder / relative
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read model file {path}: {exc.strerror}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected:
        raise InputError(f"input '{name}': model file {relative} has SHA-256 {digest}, not the {expected} of the "
                         "manifest taken when the input was read: the folder changed during the run")
    return raw


def _config(name: str, raw: bytes, transformers: Any) -> Any:
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise InputError(f"input '{name}': config.json is not JSON ({exc})") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("model_type"), str):
        raise InputError(f"input '{name}': config.json names no model_type")
    if "auto_map" in document:
        raise InputError(f"input '{name}': config.json asks for the model's own code (auto_map); certa never runs "
                         "code a model ships: use an architecture built into transformers")
    settings = {k: v for k, v in document.items() if k not in ("model_type", "transformers_version")}
    try:
        return transformers.AutoConfig.for_model(document["model_type"], **settings)
    except (ValueError, KeyError) as exc:
        raise InputError(f"input '{name}': transformers {transformers.__version__} cannot build a "
                         f"'{document['model_type']}' model ({exc})") from None


def load_causal_lm(table: Table, *, device: str = "cpu") -> LoadedModel:
    """The causal language model of the model input ``table`` (module docstring)."""
    if table.fmt != MODEL_FORMAT:
        raise StageError(f"input '{table.name}' is a {table.fmt} table, not a model folder (declare it with model:)")
    if table.origin is None:
        raise StageError(f"input '{table.name}' was read back from a ledger: the model folder is not available "
                         "here (give it with --input NAME=FOLDER)")
    libs = require_model_libraries()
    torch, transformers, safetensors = libs["torch"], libs["transformers"], libs["safetensors"]
    manifest = read_manifest(table.name, table.raw)
    folder = Path(table.origin)
    config = _config(table.name, _verified_bytes(table.name, folder, "config.json",
                                                 manifest.digest_of("config.json") or ""), transformers)
    state: dict[str, Any] = {}
    for file in manifest.files:
        if file.path.endswith(".safetensors"):
            raw = _verified_bytes(table.name, folder, file.path, file.sha256)
            try:
                state.update(safetensors.load(raw))
            except Exception as exc:  # safetensors raises its own error types for a malformed header
                raise InputError(f"input '{table.name}': {file.path} is not a valid safetensors file ({exc})") from None
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    expected = set(model.state_dict())
    unexpected = sorted(set(state) - expected)
    if unexpected:
        raise InputError(f"input '{table.name}': the weights hold tensors the '{config.model_type}' architecture "
                         f"does not have: {', '.join(unexpected[:5])}")
    tied = getattr(model, "_tied_weights_keys", None) or {}
    tied_to = dict(tied) if isinstance(tied, Mapping) else {}
    missing = sorted(key for key in expected - set(state) if tied_to.get(key) not in state)
    if missing:
        raise InputError(f"input '{table.name}': the weights lack {len(missing)} tensor(s) of the "
                         f"'{config.model_type}' architecture: {', '.join(missing[:5])}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=False, assign=True)
    model.tie_weights()
    model.to(device)
    model.eval()
    tokenizer, tokenizer_sha256 = None, manifest.digest_of("tokenizer.json")
    if tokenizer_sha256 is not None:
        text = _verified_bytes(table.name, folder, "tokenizer.json", tokenizer_sha256).decode("utf-8")
        tokenizer = libs["tokenizers"].Tokenizer.from_str(text)
    return LoadedModel(name=table.name, manifest_sha256=manifest.sha256, model=model, tokenizer=tokenizer,
                       tokenizer_sha256=tokenizer_sha256, model_type=str(config.model_type),
                       parameters=int(sum(p.numel() for p in model.parameters())), device=device)
