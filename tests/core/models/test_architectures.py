"""Every tested causal-LM architecture loads as transformers' ``from_pretrained`` loads it: the same logits to the bit
(float32, bfloat16 and float16 compute; float32, bfloat16 and float16 weights, one file or sharded with an index),
the same computed buffers, the same tokens; checkpoints stored as older versions stored them (GPT-2 without its base
prefix and with its causal masks, Pythia's rotary frequencies) load as from_pretrained loads them; and the stages
that run models (model.windows, sequential.diff's hf_models scorer, ``certa replay --recompute-evidence``) run each.

The models are tiny and untrained (``certa.engine.core.models.tiny.build_tiny_architecture``), built here; an
architecture the installed transformers lacks is skipped with the reason (certa supports transformers 4.46 on)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import folder_manifest
from certa.engine.core.models.runtime import load_causal_lm
from certa.engine.core.models.tiny import ARCHITECTURES, perturbed_copy
from certa.engine.foundation.errors import InputError, StageError
from tests.conftest import TINY_MODEL_TEXT, write_spec

ISSUE_32 = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt_neox", "falcon", "olmo2",
            "starcoder2", "gpt2", "opt", "bloom")
"""The architectures issue 32 asks for at least; ``ARCHITECTURES`` holds them and a few more."""
BEGINNING = {"llama": "<s>", "mistral": "<s>", "phi3": "<s>", "gemma": "<bos>", "gemma2": "<bos>",
             "gemma3_text": "<bos>", "opt": "</s>"}
"""The families whose tiny tokenizers put a beginning-of-sequence token before a text (as their real ones do)."""
TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "Return a list of the words in the string, using sep as the delimiter string."]
DOCUMENTS = [d for d in TINY_MODEL_TEXT.split("\n\n") if d.strip()][:12]


def test_the_matrix_holds_every_architecture_the_issue_names():
    assert set(ISSUE_32) <= set(ARCHITECTURES)


def _table(name: str, folder: Path):
    manifest = folder_manifest(name, folder, InputLimits())
    return replace(read_input(name, manifest.raw, "hf-model", limits=InputLimits()), origin=folder)


def _reference(folder: Path, dtype: str):
    import torch
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=getattr(torch, dtype)).eval()


def _logits(model, ids):
    import torch

    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits


@pytest.mark.parametrize("model_type", list(ARCHITECTURES))
def test_logits_buffers_and_tokens_equal_from_pretrained(model_type, tiny_architectures):
    import torch
    import transformers

    folder = tiny_architectures(model_type)
    loaded = load_causal_lm(_table("m", folder))
    reference = _reference(folder, "float32")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert loaded.model_type == model_type and loaded.dtype == "float32" and not loaded.model.training
    for text in TEXTS:
        ids = tokenizer(text).input_ids
        assert loaded.tokenizer.encode(text).ids == ids  # the tokens transformers feeds, special tokens included
        assert torch.equal(_logits(loaded.model, ids), _logits(reference, ids))
    buffers, expected = dict(loaded.model.named_buffers()), dict(reference.named_buffers())
    assert buffers.keys() == expected.keys()
    assert all(torch.equal(buffers[key], expected[key]) for key in expected)  # rotary frequencies, masks: computed
    assert loaded.parameters == sum(p.numel() for p in reference.parameters())
    assert loaded.tokenizer.id_to_token(ids[0]) == BEGINNING.get(model_type, loaded.tokenizer.id_to_token(ids[0]))
    assert loaded.special_tokens.record(loaded.tokenizer) == {
        "before": [BEGINNING[model_type]] if model_type in BEGINNING else [], "after": []}


@pytest.mark.parametrize("model_type", list(ARCHITECTURES))
def test_bfloat16_weights_in_shards_load_in_float32_and_bfloat16_as_from_pretrained(model_type, tiny_architectures):
    import torch

    folder = tiny_architectures(model_type, weights_dtype="bfloat16", shard_bytes=16_000)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2 and not (folder / "model.safetensors").exists()
    assert folder_manifest("m", folder, InputLimits()).weights == tuple(shards)  # every shard, from the index
    ids = load_causal_lm(_table("m", folder)).tokenizer.encode(TEXTS[0]).ids
    for dtype in ("float32", "bfloat16"):
        loaded = load_causal_lm(_table("m", folder), dtype=dtype)
        assert {p.dtype for p in loaded.model.parameters()} == {getattr(torch, dtype)}
        assert torch.equal(_logits(loaded.model, ids), _logits(_reference(folder, dtype), ids))


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "gemma", "gpt2", "opt"])
def test_float16_weights_computed_in_float16_as_from_pretrained(model_type, tiny_architectures):
    import torch

    folder = tiny_architectures(model_type, weights_dtype="float16")
    loaded = load_causal_lm(_table("m", folder), dtype="float16")
    ids = loaded.tokenizer.encode(TEXTS[1]).ids
    assert torch.equal(_logits(loaded.model, ids), _logits(_reference(folder, "float16"), ids))


def test_an_unknown_compute_dtype_is_refused(tiny_architectures):
    with pytest.raises(StageError, match="dtype 'float64' is not one certa computes a model in .float32, bfloat16, "
                                         "float16."):
        load_causal_lm(_table("m", tiny_architectures("llama")), dtype="float64")


def _rewrite(folder: Path, target: Path, change) -> Path:
    """A copy of the model folder ``folder`` whose model.safetensors is ``change(state)``."""
    import safetensors.torch as st

    shutil.copytree(folder, target)
    state = st.load((target / "model.safetensors").read_bytes())
    st.save_file(change(state), str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


def test_gpt2_stored_without_its_base_prefix_and_with_its_causal_masks_loads_as_from_pretrained(tiny_architectures,
                                                                                                  tmp_path):
    """openai-community/gpt2's model.safetensors names its tensors h.0.attn.c_attn.weight (GPT2Model's names, no
    'transformer.') and holds each layer's causal mask h.N.attn.bias: from_pretrained adds the prefix and leaves the
    masks (the model computes its own); so does certa, and lists the masks it left."""
    import torch

    def as_openai_stored(state):
        stored = {key.removeprefix("transformer."): value for key, value in state.items()}
        for layer in range(2):
            stored[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(128, 128)).view(1, 1, 128, 128)
        return stored

    folder = _rewrite(tiny_architectures("gpt2"), tmp_path / "gpt2", as_openai_stored)
    loaded = load_causal_lm(_table("m", folder))
    assert loaded.ignored == ("h.0.attn.bias", "h.1.attn.bias")
    ids = loaded.tokenizer.encode(TEXTS[0]).ids
    assert torch.equal(_logits(loaded.model, ids), _logits(_reference(folder, "float32"), ids))
    assert torch.equal(_logits(loaded.model, ids), _logits(load_causal_lm(_table("m", tiny_architectures("gpt2"))).model,
                                                           ids))


def test_pythia_style_stored_rotary_frequencies_and_masks_are_left_as_from_pretrained_leaves_them(tiny_architectures,
                                                                                                   tmp_path):
    """Pythia's checkpoints hold each layer's attention.bias, attention.masked_bias and rotary_emb.inv_freq, buffers
    later versions compute; GPT-NeoX's output embedding is stored as embed_out (transformers 5 reads it as
    lm_head)."""
    import torch

    def as_pythia_stored(state):
        for layer in range(2):
            prefix = f"gpt_neox.layers.{layer}.attention"
            state[f"{prefix}.bias"] = torch.tril(torch.ones(128, 128, dtype=torch.bool)).view(1, 1, 128, 128)
            state[f"{prefix}.masked_bias"] = torch.tensor(-1e9)
            state[f"{prefix}.rotary_emb.inv_freq"] = torch.ones(1)
        return state

    source = tiny_architectures("gpt_neox")
    folder = _rewrite(source, tmp_path / "pythia", as_pythia_stored)
    loaded = load_causal_lm(_table("m", folder))
    assert len(loaded.ignored) == 6 and "embed_out.weight" in _stored_names(folder)
    ids = loaded.tokenizer.encode(TEXTS[0]).ids
    assert torch.equal(_logits(loaded.model, ids), _logits(_reference(folder, "float32"), ids))


def _stored_names(folder: Path) -> set[str]:
    import safetensors.torch as st

    return set(st.load((folder / "model.safetensors").read_bytes()))


def test_a_tied_output_embedding_stored_apart_must_be_the_input_embedding(tiny_architectures, tmp_path):
    """qwen2 here ties lm_head.weight to model.embed_tokens.weight: a stored copy equal to the embedding loads;
    a different one is refused (transformers would use the embedding and drop it without a word)."""
    import torch

    source = tiny_architectures("qwen2")
    same = _rewrite(source, tmp_path / "same", lambda s: {**s, "lm_head.weight": s["model.embed_tokens.weight"].clone()})
    ids = load_causal_lm(_table("m", source)).tokenizer.encode(TEXTS[0]).ids
    assert torch.equal(_logits(load_causal_lm(_table("m", same)).model, ids),
                       _logits(load_causal_lm(_table("m", source)).model, ids))
    other = _rewrite(source, tmp_path / "other",
                     lambda s: {**s, "lm_head.weight": s["model.embed_tokens.weight"] * 2})
    with pytest.raises(InputError, match="input 'm': the architecture ties lm_head.weight to model.embed_tokens.weight "
                                         ".*two different tensors"):
        load_causal_lm(_table("m", other))


def test_an_untied_architecture_without_its_output_embedding_is_refused(tiny_architectures, tmp_path):
    folder = _rewrite(tiny_architectures("llama"), tmp_path / "llama",
                      lambda s: {k: v for k, v in s.items() if k != "lm_head.weight"})
    with pytest.raises(InputError, match="input 'm': the weights lack 1 tensor.s. of the 'llama' architecture: "
                                         "lm_head.weight"):
        load_causal_lm(_table("m", folder))


def test_a_layout_transformers_converts_while_loading_is_refused_in_one_line(tiny_architectures, tmp_path):
    """transformers 5 stores Mixtral's experts one tensor per expert and merges them while loading (a
    WeightConverter); certa loads tensors as they are stored, so it refuses the layout, naming it. transformers 4
    builds the experts as stored, and certa loads them."""
    import torch
    import transformers

    config = transformers.AutoConfig.for_model("mixtral", **{**ARCHITECTURES["llama"], "vocab_size": 64},
                                               num_local_experts=4, num_experts_per_tok=2)
    torch.manual_seed(0)
    folder = tmp_path / "mixtral"
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    shutil.copyfile(tiny_architectures("llama") / "tokenizer.json", folder / "tokenizer.json")
    if int(transformers.__version__.split(".")[0]) < 5:
        # equal to float32 rounding, not to the bit: transformers 4.46 places an expert's 32 x 64 weight 8 bytes off
        # a 16-byte boundary, and the CPU's matrix-vector kernel then rounds differently (measured: the same weights
        # copied to 16 offsets give 2 results; the largest logit difference is 4.5e-8)
        loaded = load_causal_lm(_table("m", folder))
        assert torch.allclose(_logits(loaded.model, [1, 2, 3]), _logits(_reference(folder, "float32"), [1, 2, 3]),
                              rtol=0, atol=1e-6)
        return
    with pytest.raises(InputError, match=f"input 'm': the weights store tensor 'model.layers.0.block_sparse_moe.experts"
                                         f".0.w1.weight' in a layout transformers {transformers.__version__} converts "
                                         "while loading the 'mixtral' architecture .*certa loads tensors as they are "
                                         "stored"):
        load_causal_lm(_table("m", folder))


def test_buffers_a_configuration_blows_up_are_refused_before_they_are_computed(tiny_architectures, tmp_path):
    """GPT-NeoX computes its rotary table at head size x rotary_pct (transformers 5: rope_parameters'
    partial_rotary_factor), a size no tensor of the weights bounds: 10^8 would be a 1.6 GB table for a model of
    100 kB."""
    import time

    folder = Path(shutil.copytree(tiny_architectures("gpt_neox"), tmp_path / "neox"))
    config = json.loads((folder / "config.json").read_text())
    config["rotary_pct"] = 1e8
    if "rope_parameters" in config:
        config["rope_parameters"]["partial_rotary_factor"] = 1e8
    (folder / "config.json").write_text(json.dumps(config))
    started = time.monotonic()
    with pytest.raises(InputError, match=r"input 'm': the 'gpt_neox' architecture config.json describes computes "
                                         r"[\d,]+ bytes of buffers when it is built \(gpt_neox.*inv_freq is \[4"):
        load_causal_lm(_table("m", folder))
    assert time.monotonic() - started < 5


def _spec(folder: Path, baseline: Path, subject: Path, *, windows: str = "", scorer: str = "") -> Path:
    for name, source in (("baseline", baseline), ("subject", subject)):
        shutil.copytree(source, folder / name)
    (folder / "text.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCUMENTS), encoding="utf-8")
    return write_spec(folder, f"""\
        certa: 1
        name: architectures
        seed: 11
        profile: dev
        inputs:
          base: {{model: baseline}}
          subj: {{model: subject}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: base, subject: subj, text: text, unit: tokens, seq_len: 48, stride: 40,
              batch_size: 4{windows}}}}}
          - {{id: ratio, use: paired.ppl_ratio, with: {{baseline: w.baseline, subject: w.subject, replicates: 200}}}}
          - id: ce
            use: sequential.diff
            with:
              scorer: {{name: hf_models, metric: delta_ce, options: {{prompts: text{scorer}}}}}
              reference: base
              candidate: subj
              positions_per_prompt: 16
              batch_size: 4
              n_min: 8
              n_max: 8
              method: asymptotic_cs
              alpha: 0.05
              min_effect: 0.5
        """)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", list(ARCHITECTURES))
def test_every_architecture_runs_through_the_stages_and_its_evidence_recomputes(model_type, tiny_architectures,
                                                                               tmp_path):
    from certa.engine.services.audit import replay
    from certa.engine.services.evidence_recompute import recompute_evidence
    from certa.engine.services.run import run
    from certa.ledger import Ledger

    source = tiny_architectures(model_type)
    subject = perturbed_copy(source, tmp_path / "perturbed", scale=0.2, seed=3)
    (tmp_path / "spec").mkdir()
    spec = _spec(tmp_path / "spec", source, subject)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        stages = result.certificate["content"]["stages"]
        w, ce = stages["w"], stages["ce"]
        assert w["unit"] == "tokens" and w["runtime"]["dtype"] == "float32"
        assert {w["models"][arm]["model_type"] for arm in ("baseline", "subject")} == {model_type}
        assert w["models"]["baseline"]["special_tokens"]["before"] == ([BEGINNING[model_type]]
                                                                       if model_type in BEGINNING else [])
        assert w["nll_per_unit"]["subject"] != w["nll_per_unit"]["baseline"]
        assert ce["results"]["n_used"] == 8
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"
    with Ledger.open(tmp_path / "ledger.db", create=False, read_only=True) as ledger:
        recomputed = recompute_evidence(ledger, result.run_id, folders={"base": tmp_path / "spec" / "baseline",
                                                                        "subj": tmp_path / "spec" / "subject"})
    assert recomputed.reproduced, recomputed.text()
    assert {(t.stage, t.name) for t in recomputed.tables} >= {("w", "baseline"), ("w", "subject"), ("ce", "scores")}


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["llama", "gemma2", "qwen2"])
def test_bfloat16_sharded_models_run_in_bfloat16_and_the_dtype_is_recorded(model_type, tiny_architectures, tmp_path):
    from certa.engine.services.audit import replay
    from certa.engine.services.run import run
    from certa.ledger import Ledger

    source = tiny_architectures(model_type, weights_dtype="bfloat16", shard_bytes=16_000)
    subject = perturbed_copy(source, tmp_path / "perturbed", scale=0.2, seed=3)
    (tmp_path / "spec").mkdir()
    spec = _spec(tmp_path / "spec", source, subject, windows=", dtype: bfloat16", scorer=", dtype: bfloat16")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        content = result.certificate["content"]
        assert content["stages"]["w"]["runtime"]["dtype"] == "bfloat16"
        knobs = {stage["id"]: stage for stage in content["knobs"]["stages"]}
        assert json.dumps(knobs["w"]).count('"dtype": "bfloat16"') == 1
        assert json.dumps(knobs["ce"]).count('"dtype": "bfloat16"') == 1
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


@pytest.mark.skipif("not __import__('importlib').util.find_spec('torch') or "
                    "not __import__('torch').cuda.is_available()",
                    reason="no CUDA GPU here (torch.cuda.is_available() is False): device: cuda runs where one is")
@pytest.mark.parametrize("model_type", ["gpt2", "llama"])
def test_model_windows_on_cuda_agrees_with_the_cpu(model_type, tiny_architectures, tmp_path):
    """device: cuda runs the models on the GPU; its sums agree with the CPU's to float32 rounding (not to the bit:
    other kernels), and the certificate names the device."""
    from certa.engine.services.run import run

    source = tiny_architectures(model_type)
    results = {}
    for device in ("cpu", "cuda"):
        (tmp_path / device).mkdir()
        spec = _spec(tmp_path / device, source, source, windows=f", device: {device}")
        results[device] = run(spec).certificate["content"]["stages"]["w"]
    assert results["cuda"]["runtime"]["device"] == "cuda"
    for arm in ("baseline", "subject"):
        assert results["cuda"]["nll_per_unit"][arm] == pytest.approx(results["cpu"]["nll_per_unit"][arm], rel=1e-5)


def test_a_forward_pass_that_fails_is_one_line_naming_the_architecture(tiny_architectures):
    """An architecture that builds but cannot run here (a kernel it needs, memory on a GPU): the model's own
    exception becomes one StageError line, in model.windows' scoring and in the live scorer alike."""
    import numpy as np

    from certa.engine.core.models.windows import token_windows, window_nll

    loaded = load_causal_lm(_table("m", tiny_architectures("llama")))

    def fails(**inputs):
        raise RuntimeError("no kernel image is available for execution on the device")

    loaded.model.forward = fails
    windows = token_windows([list(range(1, 9))], seq_len=8, stride=7)
    with pytest.raises(StageError, match=r"^the 'llama' model's forward pass failed \(RuntimeError: no kernel image "
                                         r"is available for execution on the device\)$"):
        window_nll(loaded.model, windows, batch_size=1)
    assert np.isfinite(window_nll(load_causal_lm(_table("m", tiny_architectures("llama"))).model, windows,
                                  batch_size=1)).all()
