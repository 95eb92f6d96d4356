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
