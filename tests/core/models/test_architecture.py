"""A model's configuration against its weights' safetensors headers, before anything is built: the headers read
and checked without loading a tensor, and every size config.json declares bounded by the tensors the weights hold
(no torch or transformers needed: the files are written here in the safetensors format by hand)."""

from __future__ import annotations

import json
import math

import pytest

from certa.engine.foundation.errors import InputError
from certa.engine.core.models.architecture import TensorHeader, check_limits, read_header, weight_headers

GPT2_ATTRIBUTES = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
                   "num_hidden_layers": "n_layer"}
"""``GPT2Config.attribute_map`` (transformers)."""


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]], *, header: dict | None = None) -> bytes:
    """A safetensors file (https://github.com/huggingface/safetensors, "Format"): the 8-byte little-endian length
    of the JSON header, the header, then each tensor's bytes (zeros) at its data offsets."""
    size = {"F32": 4, "F16": 2, "I32": 4}
    document: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        length = math.prod(shape) * size[dtype]
        document[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + length]}
        offset += length
    text = json.dumps(header if header is not None else document).encode()
    return len(text).to_bytes(8, "little") + text + b"\0" * offset


def tiny_gpt2(layers: int = 2, hidden: int = 8, vocab: int = 20, positions: int = 16) -> dict[str, tuple[str, list[int]]]:
    tensors = {"transformer.wte.weight": ("F32", [vocab, hidden]), "transformer.wpe.weight": ("F32", [positions, hidden])}
    for i in range(layers):
        tensors[f"transformer.h.{i}.attn.c_attn.weight"] = ("F32", [hidden, 3 * hidden])
        tensors[f"transformer.h.{i}.mlp.c_fc.weight"] = ("F32", [hidden, 4 * hidden])
    return tensors


def _headers(tensors: dict[str, tuple[str, list[int]]]) -> dict[str, TensorHeader]:
    return read_header("m", "model.safetensors", safetensors_bytes(tensors))


def test_a_header_is_read_without_the_tensors():
    headers = _headers(tiny_gpt2())
    assert headers["transformer.wte.weight"] == TensorHeader("model.safetensors", "F32", (20, 8))
    assert headers["transformer.h.1.mlp.c_fc.weight"].shape == (8, 32)
    assert len(headers) == 6


def _entry(shape: list[int], offsets: list[int], dtype: str = "F32") -> dict:
    return {"a": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}


@pytest.mark.parametrize("raw, message", [
    (b"\x01\x02", "shorter than the 8-byte header length"),
    ((10**9).to_bytes(8, "little") + b"{}", "header length 1,000,000,000 exceeds the file's 2 bytes"),
    ((2**64 - 1).to_bytes(8, "little"), "header length 18,446,744,073,709,551,615 exceeds"),
    ((4).to_bytes(8, "little") + b"nope", "its header is not JSON"),
    ((9).to_bytes(8, "little") + b'{"a": NaN}', "its header is not JSON"),
    ((2).to_bytes(8, "little") + b"[]", "its header is not a JSON object"),
    (safetensors_bytes({}, header=_entry([2], [0, 8], "Q4")), "tensor 'a' has dtype 'Q4'"),
    (safetensors_bytes({}, header=_entry([2.0], [0, 8])), "tensor 'a' has shape .2.0., not a list of whole numbers"),
    (safetensors_bytes({}, header=_entry([-2], [0, 8])), "not a list of whole numbers"),
    (safetensors_bytes({}, header=_entry([2], [0, 12])), r"data offsets \[0, 12\], not 8 bytes inside the file's 0"),
    # the tensors cover the data, one after another, as the safetensors library requires
    (safetensors_bytes({"a": ("F32", [2])}) + b"\0" * 4, "its tensors cover 8 of its 12 bytes of data"),
    (safetensors_bytes({}, header={"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                   "c": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}) + b"\0" * 8,
     "tensor 'c' starts at byte 4 of the data, but the tensors before it end at byte 8"),
    (safetensors_bytes({}, header={"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}) + b"\0" * 8,
     "tensor 'a' starts at byte 4 of the data, but the tensors before it end at byte 0"),
    (safetensors_bytes({}, header={"__metadata__": {"format": 1}}), "its __metadata__ is not an object of strings"),
])
def test_a_malformed_header_is_refused_naming_the_file(raw, message):
    with pytest.raises(InputError, match=f"input 'm': model.safetensors is not a valid safetensors file .*{message}"):
        read_header("m", "model.safetensors", raw)


@pytest.mark.models  # safetensors.torch imports torch
def test_the_layouts_the_safetensors_library_accepts_are_read():
    """The same verdicts as ``safetensors.torch.load`` on the layout rules (no torch needed for certa's side):
    tensors in any order in the header, empty tensors, ``__metadata__`` null or absent, a header padded with
    spaces; each tensor's ``begin`` is where its bytes are in the file."""
    header = {"__metadata__": None, "b": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]},
              "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [12, 12]}}
    text = json.dumps(header).encode() + b"   "
    raw = len(text).to_bytes(8, "little") + text + bytes(range(12))
    tensors = read_header("m", "model.safetensors", raw)
    assert [tensors[k].begin for k in "abe"] == [8 + len(text), 16 + len(text), 20 + len(text)]
    assert read_header("m", "model.safetensors", raw[: 8 + len(text)], size=len(raw)) == tensors
    safetensors = pytest.importorskip("safetensors.torch")
    assert {k: tuple(v.shape) for k, v in safetensors.load(raw).items()} == {k: t.shape for k, t in tensors.items()}


def test_a_tensor_named_twice_in_a_header_is_refused_not_the_last_one_taken():
    text = b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, ' \
           b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}'
    raw = len(text).to_bytes(8, "little") + text + b"\0" * 8
    with pytest.raises(InputError, match="names 'a' twice"):
        read_header("m", "model.safetensors", raw)


def test_a_tensor_in_two_shards_is_refused_and_an_index_must_match_the_shards():
    one, two = safetensors_bytes({"a": ("F32", [2])}), safetensors_bytes({"a": ("F32", [2]), "b": ("F32", [1])})
    with pytest.raises(InputError, match="tensor 'a' is in both s1.safetensors and s2.safetensors"):
        weight_headers("m", {"s1.safetensors": one, "s2.safetensors": two})
    b = safetensors_bytes({"b": ("F32", [1])})
    shards = {"s1.safetensors": one, "s2.safetensors": b}
    assert set(weight_headers("m", shards, {"a": "s1.safetensors", "b": "s2.safetensors"})) == {"a", "b"}
    with pytest.raises(InputError, match="maps tensor 'b' to 's1.safetensors', but it is in s2.safetensors"):
        weight_headers("m", shards, {"a": "s1.safetensors", "b": "s1.safetensors"})
    with pytest.raises(InputError, match="maps tensor 'c' to 's2.safetensors', but it is in no shard"):
        weight_headers("m", shards, {"a": "s1.safetensors", "b": "s2.safetensors", "c": "s2.safetensors"})


def _config(**sizes: object) -> dict:
    return {"model_type": "gpt2", "n_layer": 2, "n_embd": 8, "n_head": 2, "vocab_size": 20, **sizes}


def test_a_configuration_that_describes_its_weights_passes():
    check_limits("m", _config(), _headers(tiny_gpt2()), GPT2_ATTRIBUTES)
    check_limits("m", _config(n_layer=1, num_labels=2), _headers(tiny_gpt2()), GPT2_ATTRIBUTES)


@pytest.mark.parametrize("sizes, message", [
    ({"n_layer": 20000}, "n_layer is 20,000, but the weights .model.safetensors. hold only 2 .their tensor names "
                         "are numbered 0 to 1."),
    ({"num_hidden_layers": 3}, "num_hidden_layers is 3, but the weights"),
    ({"num_local_experts": 5}, "num_local_experts is 5, but the weights"),
    ({"vocab_size": 10**9}, "vocab_size is 1,000,000,000, which is no dimension of any tensor of the weights "
                            r".model.safetensors: 8, 16, 20, 24, 32."),
    ({"n_embd": 7}, "n_embd is 7, which is no dimension"),
    ({"n_head": 0}, "n_head is 0, outside 1 to 32"),
    ({"n_head": 33}, "n_head is 33, outside 1 to 32"),
    ({"num_labels": 10**7}, "num_labels is 10,000,000, outside 1 to 32"),
    ({"n_layer": "two"}, "n_layer is 'two', not a count"),
    ({"n_layer": 2.5}, "n_layer is 2.5, not a count"),
    ({"n_layer": True}, "n_layer is True, not a count"),
    ({"n_layer": -1}, "n_layer is -1, not a count"),
    ({"vocab_size": None}, "vocab_size is None, not a count"),
    ({"text_config": {"num_hidden_layers": 20000}}, "text_config.num_hidden_layers is 20,000, but the weights"),
    ({"text_config": {"vision_config": {"num_labels": 10**7}}}, "text_config.vision_config.num_labels is 10,000,000"),
])
def test_a_size_the_weights_cannot_hold_is_refused_before_anything_is_built(sizes, message):
    with pytest.raises(InputError, match=f"input 'm': config.json's {message}"):
        check_limits("m", _config(**sizes), _headers(tiny_gpt2()), GPT2_ATTRIBUTES)


def test_layers_are_bounded_by_the_consecutive_indices_the_tensor_names_carry():
    """A hand count: indices 0, 1 and 3 (no 2) hold 2 consecutive layers; an index alone (a tensor named
    ``x.19999.y``) holds none beyond the run from 0."""
    tensors = {**tiny_gpt2(layers=2), "transformer.h.3.attn.c_attn.weight": ("F32", [8, 24]),
               "x.19999.y": ("F32", [1])}
    check_limits("m", _config(n_layer=2), _headers(tensors), GPT2_ATTRIBUTES)
    with pytest.raises(InputError, match="n_layer is 3, but the weights .* hold only 2"):
        check_limits("m", _config(n_layer=3), _headers(tensors), GPT2_ATTRIBUTES)
    no_layers = {"transformer.wte.weight": ("F32", [20, 8])}
    with pytest.raises(InputError, match="n_layer is 1, but the weights .* hold only 0 .their tensor names carry no "
                                         "index."):
        check_limits("m", _config(n_layer=1), _headers(no_layers), GPT2_ATTRIBUTES)


def test_layers_beyond_256_are_paid_for_by_the_weights_bytes():
    """Why: a header naming 20,000 tiny layers (one 1-element tensor each) passed the index bound, and building
    20,000 GPT-2 layers took 54 s and 1.3 GB before the tensors were found not to fit. Hand count: 300 layers of
    a hidden size 8 GPT-2 hold less than 44 x 128 KiB of weights, so 300 (44 beyond 256) are refused; 256 pass
    whatever the weights; with 256 MiB more of weights (2,048 x 128 KiB), 300 pass."""
    from certa.engine.core.models.architecture import FREE_LAYERS, LAYER_BUILD_BYTES, weight_bytes

    headers = _headers(tiny_gpt2(layers=300))
    small = weight_bytes(headers)
    assert small == sum(math.prod(h.shape) * 4 for h in headers.values()) and small < LAYER_BUILD_BYTES * 44
    check_limits("m", _config(n_layer=FREE_LAYERS), headers, GPT2_ATTRIBUTES)
    payable = FREE_LAYERS + small // LAYER_BUILD_BYTES
    with pytest.raises(InputError, match=rf"config.json's n_layer is 300: building that many costs about 38 MiB "
                                         rf".* enough for {payable} \(256 and one per 131,072 bytes of weights\)"):
        check_limits("m", _config(n_layer=300), headers, GPT2_ATTRIBUTES)
    padded = {**headers, "pad": TensorHeader("model.safetensors", "F32", (1 << 20, 64))}  # 256 MiB more
    check_limits("m", _config(n_layer=300), padded, GPT2_ATTRIBUTES)
