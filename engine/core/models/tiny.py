"""Tiny GPT-2 style models built locally, for the examples and the tests: nothing is downloaded.

``build_tiny_model(folder, text, seed=...)`` trains a byte-level BPE tokenizer with ``tokenizers`` on ``text``,
builds ``GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=...))`` with weights drawn from
``torch.manual_seed(seed)``, trains it for ``steps`` Adam steps on the text (CPU, one thread, deterministic
kernels), and writes the folder in Hugging Face layout: ``config.json``, ``model.safetensors``,
``tokenizer.json`` (and ``generation_config.json`` as transformers writes it). The same arguments on the same
machine give bit-identical files.

``perturbed_copy(source, folder, scale, seed)`` writes a "subject": the same tokenizer and configuration with
every weight matrix multiplied by (1 + scale·ε), ε ~ N(0, 1) seeded (scale 0 copies the model bit for bit).

``build_tiny_architecture(folder, model_type, text, ...)`` writes an untrained model of any architecture of
``ARCHITECTURES`` (2 layers, hidden size 32, vocabulary about 300, weights drawn from ``torch.manual_seed(seed)``
by the architecture's own initialisation), saved by ``save_pretrained`` as that architecture's checkpoints are
(GPT-NeoX's ``embed_out``, tied embeddings stored once), optionally in bfloat16 or float16 and sharded over several
files with ``model.safetensors.index.json``, beside a byte-level BPE ``tokenizer.json`` trained on ``text`` whose
post-processor adds the family's beginning-of-sequence token as the family's own tokenizers do (Llama, Mistral,
Phi-3: ``<s>``; Gemma: ``<bos>``; OPT: ``</s>``; the others none) and a ``tokenizer_config.json`` naming the generic
``PreTrainedTokenizerFast`` (as Llama 3's does), so ``AutoTokenizer`` reads the same ``tokenizer.json``.

Needs the ``models`` extra (torch, transformers, tokenizers, safetensors).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from certa.engine.core.models.runtime import deterministic_torch, require_model_libraries

__all__ = ["build_tiny_model", "perturbed_copy", "build_tiny_architecture", "ARCHITECTURES", "MINIMUM_TRANSFORMERS"]

_DECODER: dict[str, object] = {"vocab_size": 0, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}
ARCHITECTURES: dict[str, dict[str, object]] = {
    "llama": _DECODER,
    "mistral": {**_DECODER, "sliding_window": 64},
    "qwen2": {**_DECODER, "tie_word_embeddings": True},
    "qwen3": {**_DECODER, "head_dim": 8, "tie_word_embeddings": True},
    "gemma": {**_DECODER, "head_dim": 8},
    "gemma2": {**_DECODER, "head_dim": 8, "sliding_window": 64},
    "gemma3_text": {**_DECODER, "head_dim": 8, "sliding_window": 64},
    "phi3": _DECODER,
    "phi": {**_DECODER, "num_key_value_heads": 4},
    "gpt_neox": {**_DECODER, "num_key_value_heads": 4},
    "falcon": {"vocab_size": 0, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
               "max_position_embeddings": 128},
    "olmo2": _DECODER,
    "starcoder2": _DECODER,
    "stablelm": _DECODER,
    "gpt2": {"vocab_size": 0, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 128},
    "gpt_neo": {"vocab_size": 0, "hidden_size": 32, "num_layers": 2, "num_heads": 4, "max_position_embeddings": 128,
                "attention_types": [[["global", "local"], 1]], "window_size": 16},
    "opt": {"vocab_size": 0, "hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "word_embed_proj_dim": 32, "max_position_embeddings": 128},
    "bloom": {"vocab_size": 0, "hidden_size": 32, "n_layer": 2, "n_head": 4},
}
"""Tiny configurations (``vocab_size`` set from the tokenizer) of the causal-LM architectures certa is tested on:
its loader's logits equal ``from_pretrained``'s for each (tests/core/models/test_architectures.py)."""
MINIMUM_TRANSFORMERS = {"qwen3": "4.51.0", "gemma3_text": "4.50.0", "olmo2": "4.47.0"}
"""The first transformers release with an architecture above certa's lowest supported one (4.46)."""
_SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<bos>", "<eos>", "<unk>", "<pad>"]
_BEGIN = {"llama": ("<s>", "</s>"), "mistral": ("<s>", "</s>"), "phi3": ("<s>", "</s>"), "gemma": ("<bos>", "<eos>"),
          "gemma2": ("<bos>", "<eos>"), "gemma3_text": ("<bos>", "<eos>"), "opt": ("</s>", "</s>")}
"""Families whose tokenizers put a beginning-of-sequence token before a text: (that token, the end token)."""


def build_tiny_model(folder: Path, text: str, *, seed: int = 0, vocab_size: int = 320, n_positions: int = 128,
                     steps: int = 60, seq_len: int = 64) -> Path:
    """Train and write a tiny GPT-2 on ``text`` into ``folder`` (module docstring); returns ``folder``."""
    libs = require_model_libraries()
    torch, transformers, tokenizers = libs["torch"], libs["transformers"], libs["tokenizers"]
    deterministic_torch(1)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                             special_tokens=["<|endoftext|>"])
    tokenizer.train_from_iterator(text.splitlines(), trainer=trainer)
    ids = torch.tensor(tokenizer.encode(text).ids, dtype=torch.long)
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=n_positions,
                                     vocab_size=tokenizer.get_vocab_size(), bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, max(1, ids.numel() - seq_len - 1), (8,), generator=generator)
        batch = torch.stack([ids[s: s + seq_len] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def perturbed_copy(source: Path, folder: Path, *, scale: float, seed: int = 1) -> Path:
    """Copy the model folder ``source`` to ``folder`` with its 2-D weights multiplied by (1 + scale·ε)."""
    libs = require_model_libraries()
    torch, safetensors = libs["torch"], libs["safetensors"]
    folder.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".safetensors":
            shutil.copyfile(path, folder / path.name)
    generator = torch.Generator().manual_seed(seed)
    for path in sorted(source.glob("*.safetensors")):
        raw = path.read_bytes()
        state = safetensors.load(raw)
        changed = {key: (value * (1 + scale * torch.randn(value.shape, generator=generator))
                         if value.ndim == 2 else value).contiguous() for key, value in sorted(state.items())}
        metadata = json.loads(raw[8: 8 + int.from_bytes(raw[:8], "little")]).get("__metadata__")
        safetensors.save_file(changed, str(folder / path.name), metadata=metadata)
    return folder


def _tokenizer(text: str, model_type: str, tokenizers: Any) -> tuple[Any, str | None, str]:
    """A byte-level BPE trained on ``text`` (about 300 tokens, ``_SPECIALS`` first) with the post-processor of the
    ``model_type`` family; its (beginning token, or None when none is added; end token)."""
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, show_progress=False, special_tokens=_SPECIALS,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text.splitlines(), trainer=trainer)
    begin, end = _BEGIN.get(model_type, (None, "<|endoftext|>"))
    if begin is not None:
        tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{begin} $A", pair=f"{begin} $A {begin} $B", special_tokens=[(begin, _SPECIALS.index(begin))])
    return tokenizer, begin, end


def build_tiny_architecture(folder: Path, model_type: str, text: str, *, seed: int = 0,
                            weights_dtype: str = "float32", shard_bytes: int | None = None) -> Path:
    """Write an untrained tiny ``model_type`` model (module docstring) into ``folder``; returns ``folder``.
    ``shard_bytes`` shards the weights into files of about that size (with an index)."""
    libs = require_model_libraries()
    torch, transformers, tokenizers = libs["torch"], libs["transformers"], libs["tokenizers"]
    if model_type not in ARCHITECTURES:
        raise ValueError(f"no tiny configuration for {model_type!r} (known: {', '.join(ARCHITECTURES)})")
    tokenizer, begin, end = _tokenizer(text, model_type, tokenizers)
    ids = {"bos_token_id": _SPECIALS.index(begin or end), "eos_token_id": _SPECIALS.index(end),
           "pad_token_id": _SPECIALS.index("<pad>")}
    config = transformers.AutoConfig.for_model(
        model_type, **{**ARCHITECTURES[model_type], "vocab_size": tokenizer.get_vocab_size(), **ids})
    deterministic_torch(1)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).to(getattr(torch, weights_dtype))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True,
                          **({"max_shard_size": shard_bytes} if shard_bytes is not None else {}))
    tokenizer.save(str(folder / "tokenizer.json"))
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": begin or end, "eos_token": end,
                "pad_token": "<pad>", "model_max_length": 128, "add_bos_token": begin is not None}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return folder
