"""A stub of Hugging Face Text Generation Inference's own API on 127.0.0.1, for the TGI runtime's tests: it answers
``GET /info`` and ``POST /generate`` in TGI 3.3's documented JSON layout (https://huggingface.github.io/text-generation-inference/ :
``Info``, ``GenerateResponse``, ``Details``, ``PrefillToken``), with the real log-probs of a local model folder.

Not a TGI: it tokenizes ``inputs`` with the folder's ``tokenizer.json`` and its special tokens (as TGI does), runs
transformers' float32 forward pass on the ids, and sends each prompt token's log-softmax as TGI does (the first
token's ``logprob`` null, the values rounded to float32 and written as their shortest float32 text, as TGI's serde
writes an ``f32``). Faults, for the refusals: ``prefill=False`` (a server that ignores ``decoder_input_details``:
an empty ``prefill``, as TGI 3 answers without ``--enable-prefill-logprobs``), ``null_at`` (a null ``logprob`` at
that position), ``prepend`` (ids its tokenizer adds before the text's), ``model_id`` (another model stated)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests.core.runtimes.fake_endpoint import Answer, FakeEndpoint, Received, json_answer


@dataclass
class TgiStub:
    """The stub serving ``folder`` as ``model_id`` (module docstring); ``url`` is its root, ``generated`` counts the
    ``/generate`` requests answered. ``stop()`` shuts it down."""

    folder: Path
    model_id: str = "tiny"
    max_total_tokens: int = 128
    prefill: bool = True
    null_at: int | None = None
    prepend: tuple[int, ...] = ()
    generated: int = 0
    server: FakeEndpoint = field(init=False)

    def __post_init__(self) -> None:
        import tokenizers
        import torch
        import transformers

        self.tokenizer = tokenizers.Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.model = transformers.AutoModelForCausalLM.from_pretrained(self.folder, dtype=torch.float32).eval()
        self.server = FakeEndpoint(self.answer)
        self.url = self.server.url.removesuffix("/v1")

    def stop(self) -> None:
        self.server.stop()

    def answer(self, n: int, received: Received) -> Answer:
        if received.method == "GET" and received.path == "/info":
            return json_answer({"model_id": self.model_id, "model_sha": None, "model_pipeline_tag": "text-generation",
                                "max_concurrent_requests": 128, "max_best_of": 2, "max_stop_sequences": 4,
                                "max_input_tokens": self.max_total_tokens - 1, "max_total_tokens": self.max_total_tokens,
                                "validation_workers": 2, "max_client_batch_size": 4,
                                "router": "text-generation-router", "version": "3.3.7", "sha": None,
                                "docker_label": None})
        if received.method == "POST" and received.path == "/generate":
            return json_answer(self.generate(json.loads(received.body)))
        return json_answer({"error": "Not Found", "error_type": "not_found"}, status=404)

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        import torch

        self.generated += 1
        ids = [*self.prepend, *self.tokenizer.encode(request["inputs"], add_special_tokens=True).ids]
        with torch.no_grad():
            logits = self.model(torch.tensor(ids)[None]).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        scored = [None, *(_f32(logprobs[i - 1, token]) for i, token in enumerate(ids) if i)]
        if self.null_at is not None:
            scored[self.null_at] = None
        prefill = [{"id": token, "text": self.tokenizer.decode([token], skip_special_tokens=False),
                    "logprob": value} for token, value in zip(ids, scored)]
        following = int(torch.argmax(logprobs[-1]))
        details = {"finish_reason": "length", "generated_tokens": 1, "seed": None,
                   "prefill": prefill if self.prefill and request["parameters"].get("decoder_input_details") else [],
                   "tokens": [{"id": following, "text": self.tokenizer.decode([following]),
                               "logprob": _f32(logprobs[-1, following]), "special": False}]}
        return {"generated_text": self.tokenizer.decode([following]), "details": details}


def _f32(value: Any) -> float:
    """A float32 log-prob as TGI writes it: its shortest float32 text, read back."""
    return float(str(np.float32(float(value))))
