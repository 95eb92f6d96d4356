"""A tiny Llama model folder for the served-model tests, built locally (nothing is downloaded).

vLLM's CPU attention kernels accept a head dimension of 64 but refuse small ones (head_dim 16: "Unsupported CPU
attention configuration"), so the tiny GPT-2 models the other tests use (head_dim 32) cannot be served; this one is
a ``LlamaForCausalLM`` with hidden size 128, 2 attention heads (head_dim 64), 1 key/value head, 2 layers and a
byte-level BPE vocabulary of 300 tokens trained with ``tokenizers`` on local text (standard-library docstrings),
then trained for ``steps`` Adam steps on the same text (CPU, one thread, deterministic kernels) so that its
next-token distributions are far from uniform. Written in Hugging Face layout: ``config.json``,
``model.safetensors``, ``generation_config.json``, ``tokenizer.json`` and a ``tokenizer_config.json`` naming the
fast tokenizer class, which is what both ``transformers`` and vLLM load. The same arguments on the same machine
give bit-identical files.

``--perturb SCALE`` writes instead a perturbed copy of the same trained model (the impostor the served-model tests
serve under the same name): every weight matrix (every parameter of two or more dimensions) multiplied by
(1 + SCALE·ε), ε ~ N(0, 1) drawn from ``torch.Generator().manual_seed(seed + 1)``; the tokenizer and configuration
are the same files.

Self-contained (torch, transformers, tokenizers and safetensors only, no certa), because ``.ci/vllm`` runs it
with the server's own venv:

    python tests/served/tiny_llama.py FOLDER [--seed N] [--steps N] [--perturb SCALE]
    python tests/served/tiny_llama.py FOLDER --from SOURCE --perturb SCALE   # a perturbed copy of SOURCE

The test servers (``.ci/vllm``) serve the committed model of the served examples
(``specs/served-perplexity/models/reference``, built by ``build`` on the machine that wrote it) and a perturbed copy
of it: training is bit-identical on one machine only (another CPU's kernels round differently), and the examples'
certificates pin that model's digests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import textwrap
import uuid
from pathlib import Path

TEXT = "\n".join(filter(None, (textwrap.dedent(m.__doc__ or "") for m in (textwrap, os, shutil, hashlib, sqlite3,
                                                                          uuid))))
"""The training text: standard-library docstrings (the same modules as the tiny GPT-2 models' text)."""

EOS = "<|endoftext|>"


def build(folder: Path, *, seed: int = 0, steps: int = 120, vocab_size: int = 300, seq_len: int = 64,
          max_positions: int = 256, perturb: float = 0.0) -> Path:
    """Train and write the tiny Llama (module docstring) into ``folder``, its weight matrices perturbed by
    ``perturb`` when not 0; returns ``folder``."""
    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
                                             special_tokens=[EOS])
    tokenizer.train_from_iterator(TEXT.splitlines(), trainer=trainer)
    eos = tokenizer.token_to_id(EOS)
    ids = torch.tensor(tokenizer.encode(TEXT).ids, dtype=torch.long)
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=128, intermediate_size=256,
                                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                      head_dim=64, max_position_embeddings=max_positions, rms_norm_eps=1e-5,
                                      tie_word_embeddings=False, bos_token_id=eos, eos_token_id=eos,
                                      torch_dtype="float32")
    model = transformers.LlamaForCausalLM(config)
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
    if perturb:
        _perturb(torch, model, seed=seed, scale=perturb)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOS, "eos_token": EOS,
         "model_max_length": max_positions, "add_bos_token": False, "add_eos_token": False}, indent=2) + "\n",
        encoding="utf-8")
    return folder


def _perturb(torch: object, model: object, *, seed: int, scale: float) -> None:
    """Every weight matrix of ``model`` (a parameter of two or more dimensions) multiplied in place by
    (1 + scale·ε), ε ~ N(0, 1) drawn from ``torch.Generator().manual_seed(seed + 1)``."""
    noise = torch.Generator().manual_seed(seed + 1)  # type: ignore[attr-defined]
    with torch.no_grad():  # type: ignore[attr-defined]
        for parameter in model.parameters():  # type: ignore[attr-defined]
            if parameter.dim() >= 2:
                parameter.mul_(1 + scale * torch.randn(parameter.shape, generator=noise))  # type: ignore[attr-defined]


def perturbed_copy(source: Path, folder: Path, *, seed: int = 0, perturb: float = 0.05) -> Path:
    """Write into ``folder`` the model of ``source`` (a folder ``build`` wrote, read from its safetensors) with its
    weight matrices perturbed as ``build`` perturbs them, and the same tokenizer and configuration files: the
    impostor of a committed model folder, whatever machine trained it (training is bit-identical only on one
    machine)."""
    import torch
    import transformers

    model = transformers.LlamaForCausalLM.from_pretrained(source, dtype=torch.float32)
    _perturb(torch, model, seed=seed, scale=perturb)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(source / name, folder / name)
    return folder


def main() -> None:
    """Command line: build the model into the folder given (``--from SOURCE``: a perturbed copy of SOURCE)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--perturb", type=float, default=0.0)
    parser.add_argument("--from", dest="source", type=Path, default=None)
    args = parser.parse_args()
    if args.source is not None:
        perturbed_copy(args.source, args.folder, seed=args.seed, perturb=args.perturb)
    else:
        build(args.folder, seed=args.seed, steps=args.steps, perturb=args.perturb)
    print(args.folder)


if __name__ == "__main__":
    main()
