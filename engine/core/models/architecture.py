"""A model's architecture, checked against its weights before anything is built.

``config.json`` is a few hundred bytes that say how large a model is; the weights are what it is. A hostile (or
mistaken) configuration must not cost more than its weights can justify: ``n_layer: 20000`` next to the weights of
a 2-layer model took 112 s and 1.3 GB to build (module objects, even on the ``meta`` device) before the mismatch
was found, and ``num_labels: 10000000`` takes 22 s inside ``transformers``' configuration class alone. So, in this
order, each step refusing with an ``InputError`` that names the file and the problem:

1. **The weights' headers** (``read_header``). A safetensors file is an 8-byte little-endian header length N, N
   bytes of JSON ``{tensor name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`` and the
   tensors' bytes (https://github.com/huggingface/safetensors, "Format"). The header is read without loading a
   tensor: N within the file and at most 100 MB (the format's own limit), every entry a known dtype, a shape of
   non-negative integers, offsets inside the data and exactly ``prod(shape) x dtype size`` bytes long; no tensor
   named twice (in one header, or in two shards: JSON parsers keep the last of two equal keys, so "the last one
   wins" is refused, never chosen). With an index, every tensor must be in the shard the index names for it.
2. **The configuration's document** (``config_document``): a JSON object (``NaN``/``Infinity`` refused) with a
   string ``model_type``, no ``auto_map`` (certa never runs code a model ships), a ``model_type`` that
   ``AutoModelForCausalLM`` builds, a known activation (``activation_function``/``hidden_act``).
3. **Its limits against the headers** (``check_limits``), before ``transformers`` sees the configuration. Each
   size below must be a whole number (not a boolean) and is held to a bound the weights set, a bound every model
   whose weights match its configuration meets:

   * layers (``num_hidden_layers``, whatever the architecture calls it: GPT-2's ``n_layer``) and experts
     (``num_local_experts``, ``num_experts``, ``n_routed_experts``): at most the number of consecutive indices
     0, 1, 2, ... that the tensor names carry (a module list's entries are named ``...h.0...``, ``...h.1...``);
   * hidden size (``n_embd``, ``hidden_size``) and vocabulary (``vocab_size``): a dimension of some tensor
     (the token embedding is vocabulary x hidden size);
   * attention heads (``n_head``, ``num_attention_heads``, ``num_key_value_heads``) and labels (``num_labels``):
     at least 1 and at most the largest tensor dimension (a head count divides a projection's width).

   Nested configurations (``text_config``, ``vision_config``) are held to the same bounds by the standard names.
   The cost of building is then bounded by the weights' header (a layer needs tensors named for it), never by a
   number in ``config.json`` alone.
4. **The build** (``build_architecture``): ``AutoConfig.for_model`` and ``AutoModelForCausalLM.from_config`` on the
   ``meta`` device (no memory for the tensors); an exception either raises (a head count that does not divide
   the hidden size, ...) is refused naming ``config.json`` and what ``transformers`` said.
5. **Every tensor against the built architecture** (``check_tensors``): none it lacks, none missing (except those it
   ties to a loaded one, as GPT-2's output embedding), each of the shape it has and floating-point where its
   parameter is, all before a tensor is loaded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from certa.engine.foundation.errors import InputError

__all__ = ["TensorHeader", "read_header", "weight_headers", "config_document", "check_limits",
           "build_architecture", "check_tensors", "MAX_HEADER_BYTES"]

MAX_HEADER_BYTES = 100_000_000
"""The longest safetensors header the format allows (``safetensors``' ``MAX_HEADER_SIZE``)."""

DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E4M3FNUZ": 1, "F8_E5M2": 1, "F8_E5M2FNUZ": 1,
               "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
"""Bytes per element of each safetensors dtype certa loads."""
FLOATING = frozenset({"F8_E4M3", "F8_E4M3FNUZ", "F8_E5M2", "F8_E5M2FNUZ", "F16", "BF16", "F32", "F64"})

LAYER_COUNTS = ("num_hidden_layers", "num_local_experts", "num_experts", "n_routed_experts")
"""Configuration sizes that count modules (layers, experts): bounded by the indices the tensor names carry."""
DIMENSIONS = ("hidden_size", "vocab_size")
"""Configuration sizes that are the dimension of a tensor (the token embedding's)."""
COUNTS = ("num_attention_heads", "num_key_value_heads", "num_labels")
"""Configuration sizes from 1 to the largest tensor dimension."""
ACTIVATIONS = ("activation_function", "hidden_act")
_INDEX = re.compile(r"(?:^|\.)(\d+)(?=\.|$)")


@dataclass(frozen=True)
class TensorHeader:
    """One tensor as a safetensors header states it: the file holding it, its dtype and its shape."""

    file: str
    dtype: str
    shape: tuple[int, ...]


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        twice = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"it names {', '.join(repr(k) for k in twice[:3])} twice")
    return dict(pairs)


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


def _strict_json(raw: bytes) -> Any:
    """JSON without NaN/Infinity and without a key given twice; ``ValueError`` otherwise (UTF-8 errors too)."""
    return json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)


def read_header(name: str, relative: str, raw: bytes) -> dict[str, TensorHeader]:
    """The tensors the safetensors bytes ``raw`` (the model file ``relative`` of input ``name``) hold, read from
    the header alone and checked (module docstring, step 1)."""
    where = f"input '{name}': {relative} is not a valid safetensors file"
    if len(raw) < 8:
        raise InputError(f"{where} ({len(raw)} bytes, shorter than the 8-byte header length)")
    size = int.from_bytes(raw[:8], "little")
    if size > min(len(raw) - 8, MAX_HEADER_BYTES):
        raise InputError(f"{where} (its header length {size:,} exceeds the file's {len(raw) - 8:,} bytes or the "
                         f"format's {MAX_HEADER_BYTES:,})")
    try:
        document = _strict_json(raw[8: 8 + size])
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where} (its header is not JSON: {exc})") from None
    if not isinstance(document, dict):
        raise InputError(f"{where} (its header is not a JSON object)")
    data = len(raw) - 8 - size
    tensors: dict[str, TensorHeader] = {}
    for tensor, entry in document.items():
        if tensor == "__metadata__":
            continue
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if dtype not in DTYPE_BYTES:
            raise InputError(f"{where} (tensor {tensor!r} has dtype {dtype!r}; certa loads "
                             f"{', '.join(sorted(DTYPE_BYTES))})")
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
            raise InputError(f"{where} (tensor {tensor!r} has shape {shape!r}, not a list of whole numbers)")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)
                and 0 <= offsets[0] <= offsets[1] <= data
                and offsets[1] - offsets[0] == math.prod(shape) * DTYPE_BYTES[dtype]):
            raise InputError(f"{where} (tensor {tensor!r} of {dtype} {_shape_text(tuple(shape))} has data offsets "
                             f"{offsets!r}, not {math.prod(shape) * DTYPE_BYTES[dtype]:,} bytes inside the "
                             f"file's {data:,} bytes of data)")
        tensors[tensor] = TensorHeader(relative, dtype, tuple(shape))
    return tensors


def weight_headers(name: str, weights: Mapping[str, bytes],
                   index: Mapping[str, str] | None = None) -> dict[str, TensorHeader]:
    """Every tensor of the weight files ``weights`` (path -> bytes), no tensor in two files, and with an ``index``
    (``model.safetensors.index.json``'s weight map) each tensor in the file it names and none it names absent."""
    tensors: dict[str, TensorHeader] = {}
    for relative, raw in weights.items():
        for tensor, header in read_header(name, relative, raw).items():
            if tensor in tensors:
                raise InputError(f"input '{name}': tensor {tensor!r} is in both {tensors[tensor].file} and "
                                 f"{relative}; a model's weights hold each tensor once")
            tensors[tensor] = header
    if index is not None:
        moved = sorted(t for t, h in tensors.items() if index.get(t) != h.file)
        absent = sorted(set(index) - set(tensors))
        if moved or absent:
            first = moved[0] if moved else absent[0]
            found = f"is in {tensors[first].file}" if first in tensors else "is in no shard"
            raise InputError(f"input '{name}': model.safetensors.index.json maps tensor {first!r} to "
                             f"{index.get(first)!r}, but it {found} ({len(moved) + len(absent)} such tensor(s))")
    return tensors


def config_document(name: str, raw: bytes, transformers: Any) -> dict[str, Any]:
    """``config.json``'s bytes as a JSON object, checked (module docstring, step 2)."""
    try:
        document = _strict_json(raw)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"input '{name}': config.json is not JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("model_type"), str):
        raise InputError(f"input '{name}': config.json names no model_type")
    if "auto_map" in document:
        raise InputError(f"input '{name}': config.json asks for the model's own code (auto_map); certa never runs "
                         "code a model ships: use an architecture built into transformers")
    model_type = document["model_type"]
    version = f"transformers {transformers.__version__}"
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type not in transformers.CONFIG_MAPPING:
        raise InputError(f"input '{name}': config.json's model_type {model_type!r} is not an architecture {version} "
                         "knows")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise InputError(f"input '{name}': config.json's model_type {model_type!r} is not a causal language model "
                         f"({version}'s AutoModelForCausalLM builds none); certa scores next-token predictions")
    from transformers.activations import ACT2FN

    for key in ACTIVATIONS:
        value = document.get(key)
        if value is not None and (not isinstance(value, str) or value not in ACT2FN):
            known = ", ".join(sorted(ACT2FN)[:8])
            raise InputError(f"input '{name}': config.json's {key} {value!r} is not an activation {version} knows "
                             f"({known}, ...)")
    return document


def _consecutive_indices(tensors: Mapping[str, TensorHeader]) -> int:
    """The number k of consecutive indices 0 .. k-1 that occur as a component of the tensor names."""
    seen = {int(i) for tensor in tensors for i in _INDEX.findall(tensor) if len(i) < 10}
    k = 0
    while k in seen:
        k += 1
    return k


def check_limits(name: str, document: Mapping[str, Any], tensors: Mapping[str, TensorHeader],
                 attribute_map: Mapping[str, str], *, prefix: str = "") -> None:
    """The configuration's sizes against the weights' headers (module docstring, step 3), and those of every
    nested configuration (``text_config``, ``vision_config``: a key ending in ``_config``, by the standard names).
    ``attribute_map`` is the configuration class's (``GPT2Config.attribute_map``: standard name -> the
    architecture's own key)."""
    for key, nested in document.items():
        if key.endswith("_config") and isinstance(nested, Mapping):
            check_limits(name, nested, tensors, {}, prefix=f"{prefix}{key}.")
    dimensions = sorted({n for header in tensors.values() for n in header.shape})
    largest = dimensions[-1] if dimensions else 0
    files = sorted({header.file for header in tensors.values()})
    weights = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    for standard in (*LAYER_COUNTS, *DIMENSIONS, *COUNTS):
        for key in dict.fromkeys((attribute_map.get(standard, standard), standard)):
            if key not in document:
                continue
            value = document[key]
            where = f"input '{name}': config.json's {prefix}{key}"
            if type(value) is not int or value < 0:
                raise InputError(f"{where} is {value!r}, not a count (a whole number, 0 or more)")
            if standard in LAYER_COUNTS:
                held = _consecutive_indices(tensors)
                if value > held:
                    numbered = f"are numbered 0 to {held - 1}" if held else "carry no index"
                    raise InputError(f"{where} is {value:,}, but the weights ({weights}) hold only {held} (their "
                                     f"tensor names {numbered}): a configuration cannot ask for more than its "
                                     "weights hold")
            elif standard in DIMENSIONS:
                if value not in dimensions:
                    shown = ", ".join(str(n) for n in dimensions[:12]) + (", ..." if len(dimensions) > 12 else "")
                    raise InputError(f"{where} is {value:,}, which is no dimension of any tensor of the weights "
                                     f"({weights}: {shown}); the configuration does not describe these weights")
            elif not 1 <= value <= max(largest, 1):
                raise InputError(f"{where} is {value:,}, outside 1 to {largest:,} (the largest dimension of a tensor "
                                 f"of the weights, {weights}); the configuration does not describe these weights")


def build_architecture(name: str, document: Mapping[str, Any], transformers: Any, torch: Any) -> tuple[Any, Any]:
    """``(configuration, model)``: the architecture ``document`` describes, built on the ``meta`` device in float32
    (module docstring, step 4); call after ``check_limits``."""
    settings = {k: v for k, v in document.items() if k not in ("model_type", "transformers_version")}
    version = f"transformers {transformers.__version__}"
    try:
        config = transformers.AutoConfig.for_model(document["model_type"], **settings)
    except Exception as exc:  # noqa: BLE001 - transformers raises ValueError, TypeError, its own validation errors
        raise InputError(f"input '{name}': {version} cannot read config.json as a '{document['model_type']}' "
                         f"configuration ({_first_line(exc)})") from None
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001 - an architecture's constructor raises whatever its checks raise
        raise InputError(f"input '{name}': {version} cannot build the '{config.model_type}' architecture config.json "
                         f"describes ({_first_line(exc)})") from None
    return config, model


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}{'...' if len(text) > 300 else ''}"


def check_tensors(name: str, model: Any, tensors: Mapping[str, TensorHeader]) -> None:
    """Every tensor of the weights against the built (meta) ``model`` (module docstring, step 5)."""
    model_type = model.config.model_type
    expected = model.state_dict()
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise InputError(f"input '{name}': the weights hold tensors the '{model_type}' architecture does not have: "
                         f"{', '.join(unexpected[:5])}")
    tied = getattr(model, "_tied_weights_keys", None) or {}
    tied_to = dict(tied) if isinstance(tied, Mapping) else {}
    missing = sorted(key for key in set(expected) - set(tensors) if tied_to.get(key) not in tensors)
    if missing:
        raise InputError(f"input '{name}': the weights lack {len(missing)} tensor(s) of the '{model_type}' "
                         f"architecture: {', '.join(missing[:5])}")
    for tensor, header in sorted(tensors.items()):
        wanted = tuple(expected[tensor].shape)
        if header.shape != wanted:
            raise InputError(f"input '{name}': tensor {tensor} is {_shape_text(header.shape)} in {header.file}, but "
                             f"the '{model_type}' architecture config.json describes has it {_shape_text(wanted)}")
        if expected[tensor].is_floating_point() and header.dtype not in FLOATING:
            raise InputError(f"input '{name}': tensor {tensor} in {header.file} holds {header.dtype} numbers, not "
                             "the floating-point weights of the architecture")
