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
   non-negative integers, offsets inside the data and exactly ``prod(shape) x dtype size`` bytes long, the tensors
   one after another from the data's first byte to its last (no gap, no overlap, nothing after them) and
   ``__metadata__`` an object of strings, as the ``safetensors`` library requires; no tensor named twice (in one
   header, or in two shards: JSON parsers keep the last of two equal keys, so "the last one wins" is refused, never
   chosen). With an index, every tensor must be in the shard the index names for it. The loader reads each
   tensor's bytes from where the header puts them (``TensorHeader.begin``).
2. **The configuration's document** (``config_document``): a JSON object (``NaN``/``Infinity`` refused) with a
   string ``model_type``, no ``auto_map`` (certa never runs code a model ships), a ``model_type`` that
   ``AutoModelForCausalLM`` builds, a known activation (``activation_function``/``hidden_act``).
3. **Its limits against the headers** (``check_limits``), before ``transformers`` sees the configuration. Each
   size below must be a whole number (not a boolean) and is held to a bound the weights set, a bound every model
   whose weights match its configuration meets:

   * layers (``num_hidden_layers``, whatever the architecture calls it: GPT-2's ``n_layer``) and experts
     (``num_local_experts``, ``num_experts``, ``n_routed_experts``): at most the number of consecutive indices
     0, 1, 2, ... that the tensor names carry (a module list's entries are named ``...h.0...``, ``...h.1...``),
     and at most 256 plus one per 128 KiB of the weights' bytes (``FREE_LAYERS``, ``LAYER_BUILD_BYTES``: what a
     layer costs to build in Python objects, so that a header naming 20,000 tiny layers, which the first bound
     lets through, is refused before 20,000 layers are built; every published model is within 256 layers);
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
5. **Every tensor against the built architecture** (``match_tensors``), all before a tensor is loaded. A stored
   name is the architecture's name as ``transformers``' ``from_pretrained`` reads it: renamed by the checkpoint
   renamings the installed ``transformers`` declares for the architecture (``transformers.conversion_mapping``,
   transformers 5: GPT-NeoX's ``embed_out`` is its ``lm_head``; a pure renaming, the bytes are unchanged), and
   with the base model's prefix (``transformer.``, ``model.``) added when the checkpoint was saved without it
   (GPT-2's original ``h.0.attn.c_attn.weight``). None the architecture lacks, except what ``from_pretrained``
   also leaves unloaded because the model computes it itself (a non-persistent buffer of the model, and the
   names the architecture lists in ``_keys_to_ignore_on_load_unexpected``, ``rotary_emb.inv_freq`` and
   ``position_ids``: causal masks, rotary frequencies and position indices older versions saved); a tensor
   ``transformers`` would have to merge or split (a ``WeightConverter``: Mixtral's experts in transformers 5) is
   refused, naming the architecture, since certa loads tensors as they are stored. None missing, except those the
   architecture ties to a loaded one (the parameters that are one object in the built model: GPT-2's, Gemma's or
   Qwen2's output embedding and input embedding); each of the shape it has and floating-point where its parameter
   is.
6. **The buffers the model computes** (``check_buffers``). Non-persistent buffers (rotary frequencies, causal
   masks) are not in the weights; the model computes them when it is built, at sizes ``config.json`` sets (a
   ``max_position_embeddings x max_position_embeddings`` mask per layer in some versions, a rotary table of
   ``head_dim x partial_rotary_factor``). Their bytes, known from the ``meta`` build, must stay within the weights'
   bytes plus 256 MiB before they are computed.
7. **The model that is loaded** (``materialise``): the architecture built again, its parameters on the ``meta``
   device (each is replaced by a loaded tensor: no memory, no random initialisation) and its buffers computed on
   the CPU by the architecture's own constructor, as ``from_pretrained`` computes them; under torch's default dtype
   set to the compute dtype, as ``from_pretrained(dtype=...)`` builds (so a rotary table the architecture keeps in
   float32 stays float32 in a bfloat16 model). Building on ``meta`` alone left every non-persistent buffer empty
   ("Cannot copy out of meta tensor" for Llama, Qwen2, Mistral, Gemma, GPT-NeoX, GPT-Neo, Falcon).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from certa.engine.foundation.errors import InputError
from certa.engine.foundation.library_errors import error_line

__all__ = ["TensorHeader", "TensorPlan", "read_header", "weight_headers", "config_document", "check_limits",
           "build_architecture", "match_tensors", "check_buffers", "check_dtype", "materialise", "MAX_HEADER_BYTES",
           "BUFFER_ALLOWANCE", "COMPUTE_DTYPES", "DTYPE_BYTES", "TORCH_DTYPES", "FREE_LAYERS", "LAYER_BUILD_BYTES",
           "weight_bytes"]

MAX_HEADER_BYTES = 100_000_000
"""The longest safetensors header the format allows (``safetensors``' ``MAX_HEADER_SIZE``)."""

DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E4M3FNUZ": 1, "F8_E5M2": 1, "F8_E5M2FNUZ": 1,
               "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
"""Bytes per element of each safetensors dtype certa loads."""
TORCH_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E4M3": "float8_e4m3fn",
                "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2": "float8_e5m2", "F8_E5M2FNUZ": "float8_e5m2fnuz",
                "I16": "int16", "U16": "uint16", "F16": "float16", "BF16": "bfloat16", "I32": "int32", "U32": "uint32",
                "F32": "float32", "I64": "int64", "U64": "uint64", "F64": "float64"}
"""The torch dtype (``torch.<name>``) of each safetensors dtype, as ``safetensors.torch`` maps them."""
FLOATING = frozenset({"F8_E4M3", "F8_E4M3FNUZ", "F8_E5M2", "F8_E5M2FNUZ", "F16", "BF16", "F32", "F64"})

LAYER_COUNTS = ("num_hidden_layers", "num_local_experts", "num_experts", "n_routed_experts")
"""Configuration sizes that count modules (layers, experts): bounded by the indices the tensor names carry."""
DIMENSIONS = ("hidden_size", "vocab_size")
"""Configuration sizes that are the dimension of a tensor (the token embedding's)."""
COUNTS = ("num_attention_heads", "num_key_value_heads", "num_labels")
"""Configuration sizes from 1 to the largest tensor dimension."""
ACTIVATIONS = ("activation_function", "hidden_act")
FREE_LAYERS = 256
"""Modules (layers, experts) a configuration may ask for whatever its weights' bytes (check_limits): the largest
published causal LMs have 126 layers."""
LAYER_BUILD_BYTES = 128 << 10
"""What building one layer costs in Python objects, rounded up (measured with transformers 5.24 on the ``meta``
device: about 100 KB a GPT-2 layer, 72 KB a Llama layer): each module beyond ``FREE_LAYERS`` must be paid for by
that many bytes of weights, so that 20,000 layers named by a small header are refused before they are built
(54 s and 1.3 GB before)."""
BUFFER_ALLOWANCE = 256 << 20
"""Bytes of computed (non-persistent) buffers a model may hold beyond its weights' bytes (module docstring, step 6):
a causal mask of 2,048 x 2,048 booleans per layer for 24 layers is 100 MB."""
COMPUTE_DTYPES = ("float32", "bfloat16", "float16")
"""The dtypes a model is computed in (``materialise``): its parameters are loaded into this dtype."""
IGNORED_WHEN_COMPUTED = (r"rotary_emb\.inv_freq", r"(^|\.)position_ids$")
"""Stored names ``from_pretrained`` leaves unloaded when the model holds such a buffer (transformers 5's
``_adjust_missing_and_unexpected_keys``): the model computes them itself."""
_INDEX = re.compile(r"(?:^|\.)(\d+)(?=\.|$)")


@dataclass(frozen=True)
class TensorHeader:
    """One tensor as a safetensors header states it: the file holding it, its dtype and its shape; ``begin``, where
    its bytes start in the file (8 + the header's length + its first data offset: what the loader reads it from,
    not part of what the tensor is)."""

    file: str
    dtype: str
    shape: tuple[int, ...]
    begin: int = field(default=0, compare=False)


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


def read_header(name: str, relative: str, raw: bytes, *, size: int | None = None) -> dict[str, TensorHeader]:
    """The tensors the safetensors bytes ``raw`` (the model file ``relative`` of input ``name``) hold, read from
    the header alone and checked (module docstring, step 1). ``raw`` may be the file's first 8 + header length
    bytes only, ``size`` then being the whole file's length."""
    where = f"input '{name}': {relative} is not a valid safetensors file"
    size = len(raw) if size is None else size
    if size < 8:
        raise InputError(f"{where} ({size} bytes, shorter than the 8-byte header length)")
    length = int.from_bytes(raw[:8], "little")
    if length > min(size - 8, MAX_HEADER_BYTES):
        raise InputError(f"{where} (its header length {length:,} exceeds the file's {size - 8:,} bytes or the "
                         f"format's {MAX_HEADER_BYTES:,})")
    try:
        document = _strict_json(bytes(raw[8: 8 + length]))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where} (its header is not JSON: {exc})") from None
    if not isinstance(document, dict):
        raise InputError(f"{where} (its header is not a JSON object)")
    metadata = document.get("__metadata__")
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise InputError(f"{where} (its __metadata__ is not an object of strings)")
    data = size - 8 - length
    tensors: dict[str, TensorHeader] = {}
    spans: list[tuple[int, int, str]] = []
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
        tensors[tensor] = TensorHeader(relative, dtype, tuple(shape), 8 + length + offsets[0])
        spans.append((offsets[0], offsets[1], tensor))
    covered = 0
    for begin, end, tensor in sorted(spans):
        if begin != covered:
            raise InputError(f"{where} (tensor {tensor!r} starts at byte {begin:,} of the data, but the tensors before "
                             f"it end at byte {covered:,}: a file's tensors follow one another, without gaps or "
                             "overlaps)")
        covered = end
    if covered != data:
        raise InputError(f"{where} (its tensors cover {covered:,} of its {data:,} bytes of data)")
    return tensors


def weight_headers(name: str, weights: Mapping[str, bytes], index: Mapping[str, str] | None = None, *,
                   sizes: Mapping[str, int] | None = None) -> dict[str, TensorHeader]:
    """Every tensor of the weight files ``weights`` (path -> bytes, or the first bytes holding the header when
    ``sizes`` gives each file's length), no tensor in two files, and with an ``index``
    (``model.safetensors.index.json``'s weight map) each tensor in the file it names and none it names absent."""
    tensors: dict[str, TensorHeader] = {}
    for relative, raw in weights.items():
        for tensor, header in read_header(name, relative, raw, size=(sizes or {}).get(relative)).items():
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
                payable = FREE_LAYERS + weight_bytes(tensors) // LAYER_BUILD_BYTES
                if value > payable:
                    raise InputError(f"{where} is {value:,}: building that many costs about "
                                     f"{value * LAYER_BUILD_BYTES / 2**20:,.0f} MiB in Python objects, but the weights "
                                     f"({weights}) hold {weight_bytes(tensors):,} bytes, enough for {payable:,} "
                                     f"({FREE_LAYERS} and one per {LAYER_BUILD_BYTES:,} bytes of weights): the "
                                     "weights are too small for this many layers to be a real model")
            elif standard in DIMENSIONS:
                if value not in dimensions:
                    shown = ", ".join(str(n) for n in dimensions[:12]) + (", ..." if len(dimensions) > 12 else "")
                    raise InputError(f"{where} is {value:,}, which is no dimension of any tensor of the weights "
                                     f"({weights}: {shown}); the configuration does not describe these weights")
            elif not 1 <= value <= max(largest, 1):
                raise InputError(f"{where} is {value:,}, outside 1 to {largest:,} (the largest dimension of a tensor "
                                 f"of the weights, {weights}); the configuration does not describe these weights")


def _construct(name: str, config: Any, transformers: Any, torch: Any, dtype: Any, where: Any) -> Any:
    """``AutoModelForCausalLM.from_config(config)`` in torch's default dtype ``dtype``, inside the context
    ``where``; an ``InputError`` naming config.json when the architecture's constructor refuses it."""
    version = f"transformers {transformers.__version__}"
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        with where:
            return transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - an architecture's constructor raises whatever its checks raise
        raise InputError(f"input '{name}': {version} cannot build the '{config.model_type}' architecture config.json "
                         f"describes ({error_line(exc)})") from None
    finally:
        torch.set_default_dtype(default)


def build_architecture(name: str, document: Mapping[str, Any], transformers: Any, torch: Any) -> tuple[Any, Any]:
    """``(configuration, model)``: the architecture ``document`` describes, built on the ``meta`` device in float32
    (module docstring, step 4); call after ``check_limits``."""
    settings = {k: v for k, v in document.items() if k not in ("model_type", "transformers_version")}
    version = f"transformers {transformers.__version__}"
    try:
        config = transformers.AutoConfig.for_model(document["model_type"], **settings)
    except Exception as exc:  # noqa: BLE001 - transformers raises ValueError, TypeError, its own validation errors
        raise InputError(f"input '{name}': {version} cannot read config.json as a '{document['model_type']}' "
                         f"configuration ({error_line(exc)})") from None
    return config, _construct(name, config, transformers, torch, torch.float32, torch.device("meta"))


LOADED_PARAMETER_FLAG = "_is_hf_initialized"
"""The attribute transformers (5.x) sets on a parameter ``from_pretrained`` loaded, which its weight initialisation
skips (transformers' own flag, not certa's; transformers 4.x reads it on modules only and ignores it here)."""


@contextmanager
def _parameters_on_meta(torch: Any) -> Iterator[None]:
    """While open, every parameter a module registers is replaced by an empty one on the ``meta`` device
    (``torch.nn.Module.register_parameter`` wrapped; buffers and everything else are created as usual). The idea
    of accelerate's ``init_empty_weights(include_buffers=False)``: a model whose weights are loaded next needs no
    memory or random initialisation for them, but its computed buffers must hold their values. And ``torch.empty``
    makes its tensors on ``meta`` (the storage of ``nn.Linear``'s and ``nn.Embedding``'s parameters): with
    deterministic algorithms torch fills every new empty tensor with NaN, so each parameter was written whole
    before it was replaced (0.2 s and, left fragmented in the heap, a gigabyte of resident memory for a 1B-parameter
    model). A buffer made by ``torch.empty`` is then left on ``meta``, and the loader refuses the model (never
    computed on memory nobody wrote). Each such parameter is marked initialised (``_is_hf_initialized``, the flag
    ``from_pretrained`` puts on a loaded parameter): transformers 5's weight initialisation at the end of the
    constructor (``post_init``) skips it, as ``from_pretrained`` skips what it loads, and still computes the
    buffers it computes (rotary frequencies). Drawing random values into an empty ``meta`` tensor writes nothing,
    but goes through torch's Python decompositions: 0.24 s for a 16-layer Llama. Not thread-safe (the method is
    patched on the class while the model is built)."""
    from torch.overrides import TorchFunctionMode

    class EmptyOnMeta(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if func is torch.empty:
                kwargs = {**(kwargs or {}), "device": torch.device("meta")}
            return func(*args, **(kwargs or {}))

    original = torch.nn.Module.register_parameter

    def register(module: Any, name: str, param: Any) -> None:
        if param is not None and param.device.type != "meta":
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        if param is not None:
            setattr(param, LOADED_PARAMETER_FLAG, True)
        original(module, name, param)

    torch.nn.Module.register_parameter = register
    try:
        with EmptyOnMeta():
            yield
    finally:
        torch.nn.Module.register_parameter = original


def check_dtype(name: str, skeleton: Any, dtype: str) -> None:
    """An ``InputError`` when ``from_pretrained`` would keep part of the architecture of ``skeleton`` (the ``meta``
    build) in float32 at the compute ``dtype`` (``_keep_in_fp32_modules``): certa computes such a model in float32
    only."""
    kept = set(getattr(skeleton, "_keep_in_fp32_modules", None) or ()) if dtype == "float16" else set()
    if dtype != "float32":
        kept |= set(getattr(skeleton, "_keep_in_fp32_modules_strict", None) or ())
    if kept:
        raise InputError(f"input '{name}': transformers keeps the '{skeleton.config.model_type}' architecture's "
                         f"{', '.join(sorted(kept))} in float32 when it is loaded in {dtype}; certa computes it in "
                         "float32 only (dtype: float32)")


def materialise(name: str, skeleton: Any, transformers: Any, torch: Any, dtype: str) -> Any:
    """The model that weights are loaded into (module docstring, step 7), of the architecture of ``skeleton`` (the
    ``meta`` build): parameters on ``meta``, computed buffers on the CPU, built in the compute ``dtype`` (one of
    ``COMPUTE_DTYPES``), after ``check_dtype``."""
    check_dtype(name, skeleton, dtype)
    return _construct(name, skeleton.config, transformers, torch, getattr(torch, dtype), _parameters_on_meta(torch))


@dataclass(frozen=True)
class TensorPlan:
    """Which stored tensor loads as which of the model's (``names``: stored name -> the model's), which stored
    tensors the model computes itself and are not loaded (``ignored``), and the model's tensors that are one
    parameter (``tied``: groups of names; loading one member loads all)."""

    names: Mapping[str, str]
    ignored: tuple[str, ...]
    tied: tuple[tuple[str, ...], ...]


def _checkpoint_renamings(model: Any) -> tuple[Callable[[str], str], Callable[[str], bool]]:
    """``(rename, converted)``: the stored-name renamings the installed transformers declares for ``model``'s
    architecture (``transformers.conversion_mapping``, transformers 5; none before), and whether a stored name is
    one a ``WeightConverter`` merges or splits. Both are the identity / False when transformers has no such table
    or it cannot be read."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightConverter

        transforms = list(get_model_conversion_mapping(model))
    except Exception:  # noqa: BLE001 - absent before transformers 5; an internal table whose API may move
        return (lambda key: key), (lambda key: False)
    renamings = [t for t in transforms if not isinstance(t, WeightConverter)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]

    def rename(key: str) -> str:
        for renaming in renamings:
            key = renaming.rename_source_key(key)[0]
        return key

    def converted(key: str) -> bool:
        return any(converter.rename_source_key(key)[1] is not None for converter in converters)

    return rename, converted


def _tied_groups(model: Any) -> tuple[tuple[str, ...], ...]:
    """Names of the built model's parameters that are one object (tied embeddings), in groups of two or more."""
    groups: dict[int, list[str]] = {}
    for key, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(key)
    return tuple(tuple(group) for group in groups.values() if len(group) > 1)


def _ignorable(model: Any) -> re.Pattern[str] | None:
    """Stored names from_pretrained does not load for ``model`` (module docstring, step 5), as one pattern."""
    buffers = [key for key, _ in model.named_buffers()]
    patterns = set(getattr(model, "_keys_to_ignore_on_load_unexpected", None) or ())
    patterns |= {p for p in IGNORED_WHEN_COMPUTED if any(re.search(p, key) for key in buffers)}
    return re.compile("|".join(f"(?:{p})" for p in sorted(patterns))) if patterns else None


def match_tensors(name: str, model: Any, tensors: Mapping[str, TensorHeader]) -> TensorPlan:
    """Every stored tensor against the built (meta) ``model`` (module docstring, step 5)."""
    model_type = model.config.model_type
    expected = model.state_dict()
    computed = {key for key, _ in model.named_buffers()} - set(expected)
    rename, converted = _checkpoint_renamings(model)
    ignorable = _ignorable(model)
    prefix = str(getattr(model, "base_model_prefix", "") or "")
    names: dict[str, str] = {}
    ignored: list[str] = []
    unexpected: list[str] = []
    for stored in sorted(tensors):
        key = rename(stored)
        if key not in expected and prefix and f"{prefix}.{key}" in set(expected) | computed:
            key = f"{prefix}.{key}"
        if key in expected:
            names[stored] = key
        elif key in computed or (ignorable is not None and ignorable.search(key)):
            ignored.append(stored)
        else:
            unexpected.append(stored)
    version = f"transformers {_version()}"
    layout = [stored for stored in unexpected if converted(rename(stored))]
    if layout:
        raise InputError(f"input '{name}': the weights store tensor {layout[0]!r} in a layout {version} converts "
                         f"while loading the '{model_type}' architecture (it merges or splits tensors: "
                         f"{len(layout)} such tensor(s)); certa loads tensors as they are stored, so it does not load "
                         f"'{model_type}' checkpoints with {version}")
    if unexpected:
        raise InputError(f"input '{name}': the weights hold tensors the '{model_type}' architecture does not have: "
                         f"{', '.join(unexpected[:5])}")
    loaded: dict[str, str] = {}
    for stored, key in names.items():
        if key in loaded:
            raise InputError(f"input '{name}': tensors {loaded[key]!r} and {stored!r} both load as the '{model_type}' "
                             f"architecture's {key}; a model's weights hold each tensor once")
        loaded[key] = stored
    tied = _tied_groups(model)
    covered = set(loaded) | {key for group in tied if set(group) & set(loaded) for key in group}
    missing = sorted(set(expected) - covered)
    if missing:
        raise InputError(f"input '{name}': the weights lack {len(missing)} tensor(s) of the '{model_type}' "
                         f"architecture: {', '.join(missing[:5])}")
    for stored, key in sorted(names.items()):
        header = tensors[stored]
        wanted = tuple(expected[key].shape)
        if header.shape != wanted:
            raise InputError(f"input '{name}': tensor {stored} is {_shape_text(header.shape)} in {header.file}, but "
                             f"the '{model_type}' architecture config.json describes has it {_shape_text(wanted)}")
        if expected[key].is_floating_point() and header.dtype not in FLOATING:
            raise InputError(f"input '{name}': tensor {stored} in {header.file} holds {header.dtype} numbers, not "
                             "the floating-point weights of the architecture")
    return TensorPlan(names=names, ignored=tuple(ignored), tied=tied)


def _version() -> str:
    from importlib.metadata import version

    return version("transformers")


def weight_bytes(tensors: Mapping[str, TensorHeader]) -> int:
    """The bytes of the tensors the headers declare: the sum of ``prod(shape) x dtype size``."""
    return sum(math.prod(header.shape) * DTYPE_BYTES[header.dtype] for header in tensors.values())


def check_buffers(name: str, model: Any, tensors: Mapping[str, TensorHeader]) -> None:
    """The bytes of the buffers the built (meta) ``model`` computes, against its weights' (module docstring,
    step 6)."""
    persistent = set(model.state_dict())
    buffers = [(key, buffer) for key, buffer in model.named_buffers() if key not in persistent]
    computed = sum(buffer.numel() * buffer.element_size() for _, buffer in buffers)
    weights = weight_bytes(tensors)
    if computed > weights + BUFFER_ALLOWANCE:
        key, largest = max(buffers, key=lambda item: item[1].numel() * item[1].element_size())
        raise InputError(f"input '{name}': the '{model.config.model_type}' architecture config.json describes "
                         f"computes {computed:,} bytes of buffers when it is built ({key} is "
                         f"{_shape_text(tuple(largest.shape))} {str(largest.dtype).removeprefix('torch.')}), more "
                         f"than its weights' {weights:,} bytes plus {BUFFER_ALLOWANCE:,}: a size in config.json "
                         "(max_position_embeddings, a rotary fraction, ...) is larger than these weights can use")
