"""The local reference the served tests compare the vLLM server with: the prompts, the tolerance, and the model
folder's own tokenizer and float32 log-softmax, computed on CPU with transformers (the ``models`` extra)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.conftest import require_model_libraries
from tests.served.tiny_llama import TEXT

TOLERANCE = 2e-5
"""Max |server − local| log-prob (nats) allowed; measured 2.9e-6 (tests/served/test_vllm_server.py's docstring)."""

PROMPTS = [TEXT[i * 300: (i + 1) * 300] for i in range(6)] + [
    "Return the hello world", "Café — naïve façade, 東京 🙂 (bytes outside ASCII)"]
"""Prompts of 18 to about 230 tokens (max_model_len is 256), one with multi-byte UTF-8 characters."""


DOCUMENTS = [TEXT[i * 700: (i + 1) * 700] for i in range(8)]
"""Eight documents of the model's own training text, ~150-200 tokens each (model.windows' text)."""

SUBSTITUTION_PROMPTS = [line.strip() for line in TEXT.splitlines() if len(line.strip()) > 40]
"""The sequential tests' prompt population: the training text's lines of more than 40 characters."""


def write_texts(path: Path, texts: Sequence[str]) -> None:
    """``texts`` as a JSON Lines input, one ``{"text": ...}`` object a line."""
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")


def local_token_ids(folder: Path, prompts: Sequence[str]) -> list[list[int]]:
    """The folder's ``tokenizer.json`` encoding of each prompt (no special tokens added: the tiny Llama has none)."""
    require_model_libraries()
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    return [tokenizer.encode(prompt).ids for prompt in prompts]


def local_logprobs(folder: Path, prompts: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Per prompt (token ids), ``log p(x_i | x_<i)`` for i = 1..n-1: the log-softmax of transformers' float32 logits
    of the folder's model, gathered at the next token."""
    require_model_libraries()
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    found = []
    for prompt in prompts:
        ids = torch.tensor(list(prompt))
        with torch.no_grad():
            logits = model(ids[None]).logits[0, :-1].float()
        found.append(torch.log_softmax(logits, dim=-1)[torch.arange(ids.numel() - 1), ids[1:]].numpy())
    return found
