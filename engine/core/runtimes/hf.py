"""The runtime ``hf``: a local Hugging Face model folder (input format ``hf-model``) run by torch in this process.

A thin adapter of ``certa.engine.core.models`` to the runtime protocol (``certa.engine.core.runtimes``): preparing
is ``prepare_causal_lm`` (the folder's files checked against the input's manifest, the architecture built on
``meta`` and matched with the weights' headers, the tokenizer read; ``deterministic_torch``: ``threads`` intra-op
threads, deterministic kernels), opening is ``PreparedModel.load`` (the weights read, or taken from memory when
they were kept as the folder was hashed: ``resident``), and ``close`` drops the model so that its memory is
returned before the next one is loaded. ``close`` is where every stage that scores a local model finishes with it
(``model.windows``' block, the ``hf_models`` scorer's ``close``, the same stages re-run by ``replay
--recompute-evidence``), so it first refuses the run if a weight file scored where it lies (under a read lease:
``certa.engine.core.models.lease``) was opened for writing while the model was loaded.

Scores, in nats (float64 from the model's float32 log-softmax; docs/models.md, "Numerics"):

* ``window_nll``: ``certa.engine.core.models.windows.window_nll`` (windows of one shape batched, no padding);
* ``token_logprobs`` and ``next_token_logprobs``: each group of equal-length sequences is one forward pass, without
  padding (padded rows under an attention mask move the logits' last bits; equal-length rows do not, so a
  sequence's numbers do not depend on the others of the call). The logits at position t - 1 give
  ln p(· | x_0 .. x_{t-1}) = log_softmax(float32 logits), and the teacher-forced x_t is read from it at t
  (targets shifted by one: never logits[t] against x_t), as Hugging Face's causal-LM loss shifts its labels
  (https://huggingface.co/docs/transformers/perplexity).

``usage()`` counts ``forward_passes`` (sequences or windows through the model), ``model_calls`` (batched forward
calls) and ``tokens`` (tokens fed). A local model captures no evidence and makes no claims: its identity is its
files' digests.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.models import windows as hf_windows
from certa.engine.core.models.manifest import MODEL_FORMAT
from certa.engine.core.models.runtime import (LoadedModel, deterministic_torch, model_forward, model_libraries,
                                              prepare_causal_lm, require_model_libraries)
from certa.engine.core.tables import Table

__all__ = ["HfRuntime", "OpenHfRuntime"]


class HfRuntime:
    """A model folder prepared to load (module docstring): ``HfRuntime(table, device=, dtype=, threads=)``."""

    formats = (MODEL_FORMAT,)

    def __init__(self, table: Table, *, device: str = "cpu", dtype: str = "float32", threads: int = 1) -> None:
        deterministic_torch(threads)
        if device == "cuda" and not require_model_libraries()["torch"].cuda.is_available():
            raise StageError("device: cuda asked for, but torch sees no CUDA GPU here; use device: cpu")
        self.prepared = prepare_causal_lm(table, device=device, dtype=dtype)
        config = self.prepared.config
        self.name = self.prepared.name
        self.sha256 = self.prepared.manifest_sha256
        self.tokenizer = self.prepared.tokenizer
        self.tokenizer_sha256 = self.prepared.tokenizer_sha256
        self.positions = int(getattr(config, "max_position_embeddings", 0) or getattr(config, "n_positions", 0) or 0)
        self.vocabulary = self.prepared.vocabulary
        self.resident = bool(self.prepared.held)
        self.signature = table.signature.record() if table.signature else {"status": "not_read"}

    def first_token(self) -> int:
        """config.json's ``bos_token_id``, else its ``eos_token_id``."""
        config = self.prepared.config
        bos = config.bos_token_id if config.bos_token_id is not None else config.eos_token_id
        if bos is None:
            raise InputError(f"input '{self.name}': byte windows start with the model's beginning-of-sequence token, "
                             "but its config.json names neither bos_token_id nor eos_token_id")
        return int(bos)

    def check_token_ids(self, ids: np.ndarray, text: str) -> None:
        """An ``InputError`` when an id has no row in the model's input embedding."""
        self.prepared.check_token_ids(ids, text)

    def open(self) -> OpenHfRuntime:
        """The model with its weights (``PreparedModel.load``)."""
        return OpenHfRuntime(self, self.prepared.load())


class OpenHfRuntime:
    """A loaded model folder, scoring (module docstring)."""

    def __init__(self, runtime: HfRuntime, loaded: LoadedModel) -> None:
        self.runtime = runtime
        self.loaded: LoadedModel | None = loaded
        self.parameters = loaded.parameters
        self.counts = {"forward_passes": 0, "model_calls": 0, "tokens": 0}

    def __enter__(self) -> OpenHfRuntime:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close(check=error is None)

    def close(self, *, check: bool = True) -> None:
        """Drop the model, and collect it now: its weights' memory is returned before another model is loaded.
        Scoring is done, so first (with ``check``; not when an error already stops the run) an ``InputError`` if
        a weight file scored where it lies was opened for writing meanwhile (``LoadedModel.check_unchanged``)."""
        loaded, self.loaded = self.loaded, None
        try:
            if check and loaded is not None:
                loaded.check_unchanged()
        finally:
            del loaded
            gc.collect()

    def _model(self) -> LoadedModel:
        if self.loaded is None:
            raise StageError(f"input '{self.runtime.name}': the model was closed before it scored")
        return self.loaded

    def window_nll(self, windows: hf_windows.Windows, *, batch_size: int,
                   progress: hf_windows.ScoreProgress | None = None) -> np.ndarray:
        """Each window's summed NLL (``certa.engine.core.models.windows.window_nll``), checked finite."""
        loaded = self._model()
        sums = hf_windows.window_nll(loaded.model, windows, batch_size=batch_size, device=loaded.device,
                                     progress=progress)
        loaded.check_finite(sums, "log-likelihood", "windows")
        self.counts["forward_passes"] += int(windows.start.size)
        self.counts["model_calls"] += len(hf_windows.window_batches(windows, batch_size))
        self.counts["tokens"] += int(windows.length.sum())
        return sums

    def _log_softmax(self, batch: Any) -> Any:
        """log_softmax (float32) of the model's logits for the rows of ``batch`` (one forward call), the logits
        checked finite."""
        torch = require_model_libraries()["torch"]
        loaded = self._model()
        with torch.inference_mode():
            logits = model_forward(loaded.model, input_ids=batch).logits
        rows, length = batch.shape
        loaded.check_finite(logits.to(torch.float64).sum(dim=(1, 2)).cpu().numpy(), "logit", "prompts of a batch")
        self.counts["forward_passes"] += rows
        self.counts["model_calls"] += 1
        self.counts["tokens"] += rows * length
        return torch.log_softmax(logits.to(torch.float32), dim=-1)

    def _by_length(self, sequences: Sequence[Sequence[int]], take: Callable[[Any, Any], Any]) -> list[np.ndarray]:
        """``take(log-distributions at positions 1 .. n, batch)`` (float64) of each sequence, the sequences of one
        length fed in one forward call, returned in the order of ``sequences``."""
        torch = require_model_libraries()["torch"]
        lengths = np.array([len(s) for s in sequences], dtype=np.int64)
        values: list[np.ndarray] = [np.empty(0)] * len(sequences)
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length).tolist()
            batch = torch.tensor([list(sequences[i]) for i in rows], dtype=torch.long).to(self._model().device)
            taken = take(self._log_softmax(batch)[:, :-1], batch).to("cpu", torch.float64).numpy()
            for row, value in zip(rows, taken):
                values[row] = value
        return values

    def token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """ln p(x_t | x_<t), t = 1 .. n, of each sequence (module docstring)."""
        return self._by_length(sequences, lambda log_p, batch: log_p.gather(-1, batch[:, 1:].unsqueeze(-1)).squeeze(-1))

    def next_token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """ln p(· | x_<t), t = 1 .. n, of each sequence: (n, vocabulary) per sequence (module docstring)."""
        return self._by_length(sequences, lambda log_p, batch: log_p)

    def describe(self) -> Mapping[str, Any]:
        """The folder's identity: its manifest's digest, architecture, loaded parameter count, tokenizer, signature
        check, and where and how it computes."""
        prepared = self.runtime.prepared
        special = prepared.special_tokens
        return {"kind": "local", "input": self.runtime.name, "sha256": self.runtime.sha256,
                "model_type": prepared.model_type, "parameters": self.parameters,
                "tokenizer_sha256": self.runtime.tokenizer_sha256,
                "special_tokens": special.record(prepared.tokenizer) if special is not None else None,
                "signature": self.runtime.signature, "claims": {}, "device": prepared.device, "dtype": prepared.dtype,
                "libraries": model_libraries()}

    def usage(self) -> dict[str, int]:
        """Forward passes, batched model calls and tokens fed, so far."""
        return dict(self.counts)

    def evidence(self) -> Mapping[str, Table]:
        """None: a local model's evidence is its files, bound by the input's manifest."""
        return {}
