"""Loading a model input: the hashed bytes are the loaded bytes, safetensors only, no model code, every tensor
accounted for."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import folder_manifest
from certa.engine.core.models.runtime import load_causal_lm


def _table(folder: Path):
    manifest = folder_manifest("m", folder, InputLimits())
    return replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder)


def _copy(tiny_models, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_models["baseline"], tmp_path / "copy"))


def test_loads_the_model_and_tokenizer_it_hashed(tiny_models):
    loaded = load_causal_lm(_table(tiny_models["baseline"]))
    assert loaded.model_type == "gpt2" and loaded.parameters > 0 and not loaded.model.training
    assert loaded.tokenizer.encode("hello").ids
    assert loaded.manifest_sha256 == folder_manifest("m", tiny_models["baseline"], InputLimits()).sha256


def test_a_file_changed_after_the_manifest_was_taken_is_refused(tiny_models, tmp_path):
    folder = _copy(tiny_models, tmp_path)
    table = _table(folder)
    raw = bytearray((folder / "model.safetensors").read_bytes())
    raw[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(InputError, match="model.safetensors has SHA-256 .* the folder changed during the run"):
        load_causal_lm(table)


def test_model_code_is_refused(tiny_models, tmp_path):
    folder = _copy(tiny_models, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling.MyModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="auto_map"):
        load_causal_lm(_table(folder))


def test_unexpected_and_missing_tensors_are_refused(tiny_models, tmp_path):
    import safetensors.torch as st
    import torch

    folder = _copy(tiny_models, tmp_path)
    state = st.load((folder / "model.safetensors").read_bytes())
    st.save_file({**state, "extra.weight": torch.zeros(2)}, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match="tensors the 'gpt2' architecture does not have: extra.weight"):
        load_causal_lm(_table(folder))
    missing = {k: v for k, v in state.items() if not k.endswith("h.0.mlp.c_fc.weight")}
    st.save_file(missing, str(folder / "model.safetensors"))
    with pytest.raises(InputError, match="lack 1 tensor.*h.0.mlp.c_fc.weight"):
        load_causal_lm(_table(folder))


def test_a_manifest_read_back_from_a_ledger_cannot_load_a_model(tiny_models):
    table = _table(tiny_models["baseline"])
    with pytest.raises(StageError, match="read back from a ledger"):
        load_causal_lm(replace(table, origin=None))


def _state(folder: Path, name: str = "model.safetensors") -> dict:
    import safetensors.torch as st

    return st.load((folder / name).read_bytes())


def test_a_stale_weight_file_below_the_folder_is_not_what_is_evaluated(tiny_models, tmp_path):
    """Issue 31: with the baseline's weights left in subject/zz_old/, every *.safetensors was loaded and the file
    sorting last won, so the subject was evaluated with the baseline's weights (ratio exactly 1). The subject is
    model.safetensors, as from_pretrained(subject) loads it."""
    folder = Path(shutil.copytree(tiny_models["subject"], tmp_path / "subject"))
    (folder / "zz_old").mkdir()
    shutil.copyfile(tiny_models["baseline"] / "model.safetensors", folder / "zz_old" / "model.safetensors")
    loaded = load_causal_lm(_table(folder)).model.state_dict()
    own, stale = _state(tiny_models["subject"]), _state(tiny_models["baseline"])
    key = "transformer.h.0.mlp.c_fc.weight"
    assert not own[key].equal(stale[key])
    assert all(loaded[k].equal(v) for k, v in own.items())


def _sharded(tiny_models, tmp_path) -> Path:
    """The baseline saved as two shards and an index, as save_pretrained writes a large model."""
    import safetensors.torch as st

    folder = _copy(tiny_models, tmp_path)
    state = _state(folder)
    (folder / "model.safetensors").unlink()
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for shard, keys in shards.items():
        st.save_file({k: state[k] for k in keys}, str(folder / shard), metadata={"format": "pt"})
    (folder / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": sum(v.numel() * 4 for v in state.values())},
        "weight_map": {k: shard for shard, keys in shards.items() for k in keys}}))
    return folder


def test_sharded_weights_load_from_the_shards_the_index_lists(tiny_models, tmp_path):
    import torch

    folder = _sharded(tiny_models, tmp_path)
    sharded, single = load_causal_lm(_table(folder)), load_causal_lm(_table(tiny_models["baseline"]))
    ids = torch.tensor([sharded.tokenizer.encode("hello world").ids])
    with torch.inference_mode():
        assert torch.equal(sharded.model(input_ids=ids).logits, single.model(input_ids=ids).logits)


def test_an_index_that_misplaces_a_tensor_is_refused(tiny_models, tmp_path):
    folder = _sharded(tiny_models, tmp_path)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    moved = sorted(index["weight_map"])[0]
    index["weight_map"][moved] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match=f"maps tensor '{moved}' to 'model-00002-of-00002.safetensors', but it is in "
                                         "model-00001-of-00002.safetensors"):
        load_causal_lm(_table(folder))


# ------------------------------------------------------------------------------------- memory: one read, no copy


def _held_table(folder: Path):
    """The model input as ``certa run`` reads the first model a stage names: its weights kept as hashed."""
    manifest = folder_manifest("m", folder, InputLimits(), keep_weights=True)
    return replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder,
                   weights=manifest.held)


def _begins(path: Path) -> dict[str, int]:
    """Where each tensor's bytes start in the safetensors file ``path``."""
    from certa.engine.core.models.architecture import read_header

    return {name: header.begin for name, header in read_header("m", path.name, path.read_bytes()).items()}


@pytest.mark.parametrize("held", [False, True])
def test_weights_in_the_compute_dtype_are_the_bytes_read_not_a_copy(tiny_architectures, held):
    """bfloat16 weights computed in bfloat16 are tensors on the bytes read and hashed, laid out as in the file
    (no copy); computed in float32 each is converted, and the values are the stored ones, upcast."""
    import safetensors.torch as st
    import torch

    folder = tiny_architectures("llama", weights_dtype="bfloat16")
    table = _held_table(folder) if held else _table(folder)
    loaded = load_causal_lm(table, dtype="bfloat16")
    begins = _begins(folder / "model.safetensors")
    pointers = {key: value.data_ptr() for key, value in loaded.model.state_dict().items() if key in begins}
    first = min(begins, key=begins.__getitem__)
    assert len(pointers) == len(begins) and all(p.dtype == torch.bfloat16 for p in loaded.model.parameters())
    assert all(pointers[key] - pointers[first] == begins[key] - begins[first] for key in begins)
    stored = st.load((folder / "model.safetensors").read_bytes())
    assert all(loaded.model.state_dict()[key].equal(value) for key, value in stored.items())
    upcast = load_causal_lm(_table(folder), dtype="float32").model.state_dict()
    assert all(upcast[key].dtype == torch.float32 and upcast[key].equal(value.float()) for key, value in stored.items())
    if held:
        assert not table.weights  # taken: the loader owns the bytes, freed with the model


def test_the_held_weights_are_the_bytes_hashed_whatever_the_file_becomes(tiny_models, tmp_path, monkeypatch):
    """The weights kept in private memory when the folder was hashed are what is loaded: the file rewritten
    afterwards changes nothing (the bytes scored are the bytes the certificate names). Where they are a map of
    the file under a read lease instead, the writer breaks the lease and the run is refused
    (tests/core/models/test_lease.py)."""
    from certa.engine.core.models import manifest, runtime

    for module in (manifest, runtime):
        monkeypatch.setattr(module, "leases_possible", lambda: False)
    folder = _copy(tiny_models, tmp_path)
    table = _held_table(folder)
    shutil.copyfile(tiny_models["subject"] / "model.safetensors", folder / "model.safetensors")
    loaded = load_causal_lm(table).model.state_dict()
    assert all(loaded[k].equal(v) for k, v in _state(tiny_models["baseline"]).items())


def _edit(path: Path, old: bytes, new: bytes) -> bytes:
    raw = path.read_bytes()
    assert raw.count(old) == 1 and len(old) == len(new)
    path.write_bytes(raw.replace(old, new))
    return raw


def test_a_header_changed_between_the_checks_and_the_hashed_read_is_refused(tiny_models, tmp_path):
    """The header checked before the weights are read (prepare_causal_lm) must be the one of the bytes hashed
    (load): a file changed in between and changed back hashes as the manifest says, but its checked header was
    another."""
    from certa.engine.core.models.runtime import prepare_causal_lm

    folder = _copy(tiny_models, tmp_path)
    table = _table(folder)
    original = _edit(folder / "model.safetensors", b'"format":"pt"', b'"format":"px"')
    prepared = prepare_causal_lm(table)
    (folder / "model.safetensors").write_bytes(original)
    with pytest.raises(InputError, match="model.safetensors's header is not the one read before its bytes were "
                                         "hashed: the folder changed during the run"):
        prepared.load()


def test_a_header_broken_after_the_manifest_is_reported_as_the_change_it_is(tiny_models, tmp_path):
    folder = _copy(tiny_models, tmp_path)
    table = _table(folder)
    _edit(folder / "model.safetensors", b'"__metadata__"', b'"__metadata_\\"')
    with pytest.raises(InputError, match="model.safetensors has SHA-256 .* the folder changed during the run"):
        load_causal_lm(table)


def test_tensors_not_aligned_for_their_dtype_are_copied(tiny_models, tmp_path):
    """A header whose length leaves the float32 tensors 2 bytes off their alignment (safetensors pads headers to
    8 bytes; the format does not require it): each tensor is copied before it is used, with the stored values."""
    folder = _copy(tiny_models, tmp_path)
    raw = (folder / "model.safetensors").read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = raw[8: 8 + length].rstrip(b" ")
    header += b" " * ((2 - len(header)) % 8)
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + raw[8 + length:])
    loaded = load_causal_lm(_table(folder)).model
    assert all(p.data_ptr() % 4 == 0 for p in loaded.parameters())  # a view of the file's bytes would be 2 off
    assert all(loaded.state_dict()[k].equal(v) for k, v in _state(folder).items())


@pytest.mark.parametrize("dtype, value", [("bfloat16", float("inf")), ("float16", float("nan"))])
def test_a_non_finite_weight_in_half_precision_is_refused(tiny_architectures, tmp_path, dtype, value):
    import safetensors.torch as st

    folder = Path(shutil.copytree(tiny_architectures("llama", weights_dtype=dtype), tmp_path / "m"))
    state = _state(folder)
    key = "model.layers.1.mlp.down_proj.weight"
    state[key].view(-1)[7] = value
    st.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(InputError, match=f"tensor {key} in model.safetensors holds 1 NaN or infinite value"):
        load_causal_lm(_table(folder), dtype=dtype)


def _examined_table(folder: Path):
    """The model input as ``certa run`` reads the first model a stage names: its weights kept as hashed and
    examined in the hashing threads (``examine_weights``)."""
    from certa.engine.core.models.runtime import examine_weights

    manifest = folder_manifest("m", folder, InputLimits(), keep_weights=True, examine=examine_weights)
    return replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder,
                   weights=manifest.held), manifest


@pytest.mark.parametrize("dtype, value", [("bfloat16", float("inf")), ("float16", float("nan"))])
def test_a_non_finite_weight_found_as_it_is_hashed_is_refused_when_loaded(tiny_architectures, tmp_path, dtype,
                                                                        value):
    """examine_weights counts the non-finite values of every floating-point tensor of the bytes hashed; the
    loader refuses the tensor with the message it gives when it checks itself."""
    import safetensors.torch as st

    folder = Path(shutil.copytree(tiny_architectures("llama", weights_dtype=dtype), tmp_path / "m"))
    state = _state(folder)
    key = "model.layers.1.mlp.down_proj.weight"
    state[key].view(-1)[7] = value
    state[key].view(-1)[8] = value
    st.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    table, manifest = _examined_table(folder)
    examined = manifest.held.peek("model.safetensors", manifest.digest_of("model.safetensors")).examined
    assert examined[key] == 2 and sum(examined.values()) == 2 and set(examined) == set(state)
    with pytest.raises(InputError, match=f"tensor {key} in model.safetensors holds 2 NaN or infinite value"):
        load_causal_lm(table, dtype=dtype)


def test_weights_examined_as_they_were_hashed_are_not_checked_again(tiny_architectures, monkeypatch):
    """The loader takes examine_weights' counts for the same bytes and reads no weight to check it again; the
    model is the one loaded without them."""
    from certa.engine.core.models import runtime

    folder = tiny_architectures("llama", weights_dtype="bfloat16")
    table, _ = _examined_table(folder)
    with monkeypatch.context() as patched:
        patched.setattr(runtime, "_non_finite", lambda torch, values: pytest.fail("checked again"))
        loaded = load_causal_lm(table, dtype="bfloat16").model.state_dict()
    reference = load_causal_lm(_table(folder), dtype="bfloat16").model.state_dict()
    assert loaded.keys() == reference.keys() and all(loaded[k].equal(v) for k, v in reference.items())


def test_weights_whose_header_cannot_be_read_are_left_to_the_loader(tiny_models, tmp_path):
    """A header examine_weights cannot read is not examined (None): the loader reports it when it prepares."""
    from certa.engine.core.models.manifest import Kept, ModelFile
    from certa.engine.core.models.runtime import examine_weights

    folder = _copy(tiny_models, tmp_path)
    _edit(folder / "model.safetensors", b'"__metadata__"', b'"__metadata_\\"')
    raw = (folder / "model.safetensors").read_bytes()
    import mmap

    buffer = mmap.mmap(-1, len(raw))
    buffer[:] = raw
    assert examine_weights(ModelFile("model.safetensors", "0" * 64, len(raw)), Kept("0" * 64, buffer)) is None
    table, _ = _examined_table(folder)
    with pytest.raises(InputError, match="model.safetensors is not a valid safetensors file"):
        load_causal_lm(table)


def test_held_weights_never_travel_in_a_pickle(tiny_models):
    """A batch worker gets a model input's InputSource in a pickle: the bytes read by the client stay there."""
    import pickle

    from certa.engine.core.inputs import InputSource

    manifest = folder_manifest("m", tiny_models["baseline"], InputLimits(), keep_weights=True)
    assert manifest.held and manifest.held.peek("model.safetensors", manifest.digest_of("model.safetensors"))
    source = InputSource("m", "hf-model", manifest.raw, origin=tiny_models["baseline"], weights=manifest.held)
    assert len(pickle.dumps(source)) < 10_000 and not pickle.loads(pickle.dumps(source)).weights
    assert manifest.held  # the original still holds them


@pytest.mark.models
def test_the_model_built_for_loading_allocates_no_parameter_and_computes_its_buffers():
    """materialise: parameters on meta, made there by torch.empty (no memory written, whereas deterministic torch
    fills every new empty tensor with NaN), buffers computed on the CPU; a buffer made by torch.empty and never
    written stays on meta, so the loader refuses the model rather than compute on memory nobody wrote."""
    from types import SimpleNamespace

    import torch

    from certa.engine.core.models.architecture import materialise

    made = []

    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)
            self.scale = torch.nn.Parameter(torch.ones(3))
            self.register_buffer("steps", torch.arange(5.0), persistent=False)
            self.register_buffer("unwritten", torch.empty(2), persistent=False)
            made.append(torch.get_default_dtype())

    transformers = SimpleNamespace(__version__="test", AutoModelForCausalLM=SimpleNamespace(
        from_config=lambda config, torch_dtype: Toy()))
    model = materialise("m", SimpleNamespace(config=SimpleNamespace(model_type="toy")), transformers, torch, "bfloat16")
    assert made == [torch.bfloat16] and torch.get_default_dtype() == torch.float32
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert model.steps.device.type == "cpu" and model.steps.tolist() == [0, 1, 2, 3, 4]
    assert model.unwritten.device.type == "meta"
    assert torch.empty(2).device.type == "cpu"  # only while the model is built


# ------------------------------------------------------------------ loading while the folder is hashed (issue 32)


@pytest.mark.models
def test_warming_imports_the_module_of_the_architecture_config_json_names(tiny_architectures):
    """In a fresh interpreter: transformers' Llama module is not imported, then warm_model_libraries imports it
    (what prepare_causal_lm would import first)."""
    import subprocess
    import sys

    folder = tiny_architectures("llama")
    check = ("import sys; from pathlib import Path; from certa.engine.core.models.runtime import warm_model_libraries; "
             "name = 'transformers.models.llama.modeling_llama'; before = name in sys.modules; "
             "warm_model_libraries(Path(sys.argv[1])); print(before, name in sys.modules)")
    done = subprocess.run([sys.executable, "-c", check, str(folder)], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["False", "True"], done.stderr[-2000:]


@pytest.mark.models
def test_deterministic_torch_sets_the_flag_without_importing_inductor():
    """In a fresh interpreter: deterministic_torch sets what torch.use_deterministic_algorithms(True) sets in ATen
    (deterministic kernels, errors rather than warnings) and imports no module of torch._inductor (that call would:
    828 modules; a model run may still import them through transformers' model code, as from_pretrained does)."""
    import subprocess
    import sys

    check = ("import sys, torch; from certa.engine.core.models.runtime import deterministic_torch; "
             "before = torch.are_deterministic_algorithms_enabled(); deterministic_torch(1); "
             "print(before, torch.are_deterministic_algorithms_enabled(), "
             "torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_num_threads(), "
             "any(m.split('.')[:2] == ['torch', '_inductor'] for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["False", "True", "False", "1", "False"], done.stderr[-2000:]


@pytest.mark.models  # the warm-up imports torch and transformers first (5-10 s): not in the unit tier
@pytest.mark.parametrize("config", [None, "fifo", b"not json", b"[1]", b'{"model_type": "no-such-model"}',
                                    b'{"model_type": ["llama"]}', b"[" * 100_000],
                         ids=["absent", "fifo", "not-json", "not-an-object", "unknown-type", "type-not-text",
                              "nested-100000-deep"])
def test_warming_skips_a_config_it_cannot_use_without_a_word(tmp_path, config):
    """The warm-up reads config.json unverified: a missing file, a FIFO (never waited on), not JSON, nesting
    deeper than Python parses, no known model_type: nothing is imported, nothing raised (prepare_causal_lm reports
    it on the verified bytes)."""
    import os

    from certa.engine.core.models.runtime import warm_model_libraries

    if config == "fifo":
        os.mkfifo(tmp_path / "config.json")
    elif config is not None:
        (tmp_path / "config.json").write_bytes(config)
    assert warm_model_libraries(tmp_path) is None


def test_warming_without_the_model_libraries_does_nothing(tmp_path, monkeypatch):
    """Without the models extra the warm-up is skipped without a word: reading a model folder (its manifest)
    needs no torch; only loading the model reports the missing extra."""
    from certa.engine.core.models import runtime
    from certa.engine.foundation.errors import MissingExtraError

    def missing() -> None:
        raise MissingExtraError("evaluating a model needs the 'models' extra")

    monkeypatch.setattr(runtime, "require_model_libraries", missing)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    assert runtime.warm_model_libraries(tmp_path) is None


def test_weights_replaced_while_the_folder_hashes_load_as_the_digest_says(tiny_models, tmp_path):
    """A weight file replaced while the folder is hashed (``meanwhile``, as the warm-up runs): whichever bytes
    were read, the manifest's digest is theirs and the model is built on them, so the weights scored are the ones
    the manifest (and a pin of it) names."""
    import hashlib

    folder = _copy(tiny_models, tmp_path)
    original = folder_manifest("m", folder, InputLimits()).digest_of("model.safetensors")
    replacement = tmp_path / "replacement.safetensors"
    shutil.copyfile(tiny_models["subject"] / "model.safetensors", replacement)
    manifest = folder_manifest("m", folder, InputLimits(), keep_weights=True,
                               meanwhile=lambda: replacement.replace(folder / "model.safetensors"))
    digest = manifest.digest_of("model.safetensors")
    assert digest in (original, hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest())
    table = replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder,
                    weights=manifest.held)
    loaded = load_causal_lm(table).model.state_dict()
    scored = _state(tiny_models["baseline" if digest == original else "subject"])
    assert all(loaded[k].equal(v) for k, v in scored.items())
