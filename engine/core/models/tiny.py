"""Tiny GPT-2 style models built locally, for the examples and the tests: nothing is downloaded.

``build_tiny_model(folder, text, seed=...)`` trains a byte-level BPE tokenizer with ``tokenizers`` on ``text``,
builds ``GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=...))`` with weights drawn from
``torch.manual_seed(seed)``, trains it for ``steps`` Adam steps on the text (CPU, one thread, deterministic
kernels), and writes the folder in Hugging Face layout: ``config.json``, ``model.safetensors``,
``tokenizer.json`` (and ``generation_config.json`` as transformers writes it). The same arguments on the same
machine give bit-identical files.

``perturbed_copy(source, folder, scale, seed)`` writes a "subject": the same tokenizer and configuration with
every weight matrix multiplied by (1 + scale·ε), ε ~ N(0, 1) seeded (scale 0 copies the model bit for bit).

Needs the ``models`` extra (torch, transformers, tokenizers, safetensors).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from certa.engine.core.models.runtime import deterministic_torch, require_model_libraries

__all__ = ["build_tiny_model", "perturbed_copy"]


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
