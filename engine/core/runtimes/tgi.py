"""A served model behind Hugging Face Text Generation Inference (an ``endpoint`` input declared with ``api: tgi``),
scored by teacher forcing through TGI's own API: the open runtime ``EndpointRuntime.open`` returns for it.

The prepared runtime is the endpoint's (``certa.engine.core.runtimes.endpoint.EndpointRuntime``: its declaration,
the local reference's tokenizer it borrows); only opening and scoring differ. What is sent and read is
``certa.engine.core.runtimes.tgi_generate`` (TGI's API, https://huggingface.github.io/text-generation-inference/):

- **Identity.** Opening queries ``GET /info``: its ``model_id`` must be the declared ``model`` (else an
  ``EndpointError`` naming both), and its ``max_input_tokens`` and ``max_total_tokens`` bound a prompt
  (``positions``). Everything it states is recorded as ``claims`` in ``describe()``, apart from what certa verified.
- **Scoring** (``window_nll``, ``token_logprobs``): each sequence of ids x_0 .. x_n is sent as its text
  (``sent_text``), one ``POST /generate`` a sequence (TGI takes one text a request and batches on its side; certa
  keeps ``client.concurrency`` in flight), after checking locally that the reference tokenizer gives the same ids
  back from that text with its special tokens (``retokenized``: refused before any request otherwise, naming the
  window or sequence). Each answer's ``details.prefill`` must give exactly x_0 .. x_n and a log-prob for each of x_1
  .. x_n (``read_prefill``); the quantities are then the HF runtime's: Σ −ln p(x_t | x_<t) over a window's targets,
  ln p(x_t | x_<t) for t = 1 .. n.
- **No ``/tokenize`` check.** The ids of each answer's prefill are the server's own tokenization of exactly the text
  it scored, checked against the reference's ids per response, so the document-level ``check_tokenization`` of the
  OpenAI-compatible runtime would check nothing more; this runtime has none (the stages ask for it only when
  present). Nor does it generate (``generated_kl`` refuses it).
- **Transcript.** Every request and answer is a row of ``evidence()["transcript"]`` (the endpoint's columns), its
  ``unit`` the JSON ``[LABEL, IDS]``: ``LABEL`` is ``[window id, targets]`` for a window, ``"sequence:i"`` for a
  sequence, ``IDS`` the ids certa meant to score, which the request (text) does not hold. A replay recomputes a
  served arm's window sums from it without the server (``replayed_windows``), each answer checked again against
  its unit's ids. Answers are kept for a resume as the endpoint's are (``transcript_cache``).

``usage()``: the endpoint's counts (``requests``, ``retries``, ``reused``, ``tokens`` scored, ``bytes_sent``,
``bytes_received``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from certa.engine.core.models.windows import ScoreProgress, Windows
from certa.engine.core.runtimes.endpoint import OpenServedRuntime, read_transcript, window_labels, window_sums
from certa.engine.core.runtimes.http_client import EndpointClient
from certa.engine.core.runtimes.tgi_generate import (GENERATE, INFO, generate_request, info_claims, info_model,
                                                   info_positions, read_prefill, retokenized, sent_text)
from certa.engine.core.runtimes.transcript_cache import TranscriptCache
from certa.engine.core.tables import Table
from certa.engine.foundation.errors import EndpointError, InputError

if TYPE_CHECKING:
    from certa.engine.core.runtimes.endpoint import EndpointRuntime

__all__ = ["OpenTgiRuntime", "replayed_windows"]


class OpenTgiRuntime(OpenServedRuntime):
    """A TGI server being queried (module docstring); closing, ``usage()`` and ``evidence()`` are every served
    runtime's (``OpenServedRuntime``)."""

    def __init__(self, runtime: EndpointRuntime, client: EndpointClient, cache: TranscriptCache) -> None:
        super().__init__(runtime, client, cache)
        self.info = self._keep("", client.get(INFO))
        served, declared = info_model(self.info.response), runtime.declaration.model
        if served != declared:
            raise EndpointError(f"input '{runtime.name}': the TGI server at {runtime.declaration.url} serves "
                                f"'{served}' (its /info model_id), not the declared model '{declared}'")
        runtime.positions = info_positions(self.info.response)

    def window_nll(self, windows: Windows, *, batch_size: int, progress: ScoreProgress | None = None) -> np.ndarray:
        """Each window's Σ −ln p over its targets, from the server's prefill log-probs (``window_sums``)."""
        del batch_size  # TGI batches on its side; certa bounds the requests in flight (client.concurrency)
        inputs = [windows.flat[s: s + n].tolist() for s, n in zip(windows.start.tolist(), windows.length.tolist())]
        labels: list[Any] = [[window, int(targets)] for window, targets in zip(windows.ids, windows.targets.tolist())]
        return window_sums(self._score(labels, inputs, progress), windows.targets, self.runtime.name)

    def token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """ln p(x_t | x_<t), t = 1 .. n, of each sequence, from the server's prefill log-probs."""
        return self._score([f"sequence:{i}" for i in range(len(sequences))],
                           [[int(token) for token in ids] for ids in sequences], None)

    def _score(self, labels: Sequence[Any], sequences: Sequence[list[int]],
               progress: ScoreProgress | None) -> list[np.ndarray]:
        """The prompt log-probs of each sequence, one ``/generate`` request a sequence, every exchange kept with its
        unit (module docstring)."""
        name = self.runtime.name
        longest = max((len(ids) for ids in sequences), default=0)
        if self.runtime.positions and longest > self.runtime.positions:
            raise InputError(f"input '{name}': a sequence of {longest} tokens does not fit the TGI server: its /info "
                             f"allows {self.runtime.positions} prompt tokens with the one generated token certa asks "
                             "for; lower seq_len (or positions_per_prompt)")
        if self.runtime.tokenizer is None or not callable(getattr(self.runtime.tokenizer, "decode", None)):
            raise InputError(f"input '{name}' is a TGI server: its texts are a local reference's decoded tokens, and "
                             "it has none; score it against a local reference folder with a tokenizer.json")
        named = [f"input '{name}': {_unit_name(label)}" for label in labels]
        texts = [sent_text(self.runtime.tokenizer, ids) for ids in sequences]
        retokenized(self.runtime.tokenizer, texts, sequences, named)
        per_sequence = sum(len(ids) for ids in sequences) / max(len(sequences), 1)

        def report(done: int, total: int, requests_per_s: float, tokens_per_s: float) -> None:
            if progress is not None:  # the answers count no tokens: the sequences' mean length stands for them
                progress(done, total, requests_per_s * per_sequence)

        exchanges = self._post_many(GENERATE, [generate_request(text) for text in texts], progress=report)
        for label, ids, exchange in zip(labels, sequences, exchanges):
            self._keep(json.dumps([label, ids], separators=(",", ":")), exchange)
        self.tokens += sum(len(ids) for ids in sequences)
        return [read_prefill(exchange.response, ids, what) for exchange, ids, what in zip(exchanges, sequences, named)]

    def describe(self) -> Mapping[str, Any]:
        """The served model's identity: the declaration's digest, the tokenizer it was checked against, and what
        ``GET /info`` states, as claims (module docstring)."""
        runtime = self.runtime
        partner = runtime.partner
        prepared = getattr(partner, "prepared", None)
        special = (prepared.special_tokens.record(partner.tokenizer)
                   if prepared is not None and prepared.special_tokens is not None else None)
        return {"kind": "endpoint", "input": runtime.name, "sha256": runtime.sha256, "model_type": None,
                "parameters": None, "tokenizer_sha256": runtime.tokenizer_sha256,
                "tokenizer_of": partner.name if partner is not None else None, "tokens_from": "tokenizer.json",
                "special_tokens": special,
                "signature": None, "claims": info_claims(self.info.response), "device": "served", "dtype": "served",
                "libraries": {}}


def _unit_name(label: Any) -> str:
    """``window 'ID'`` for a window's label, ``sequence i`` (from 1) for a sequence's."""
    if isinstance(label, list):
        return f"window '{label[0]}'"
    return f"sequence {int(str(label).rpartition(':')[2]) + 1}"


def replayed_windows(transcript: Table, name: str) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """From the captured ``transcript`` of the TGI input ``name``: the windows it scored (ids, in order), their
    targets, and each one's prompt log-probs read again from its recorded answer, checked against the ids its unit
    says certa meant (``replayed_logprobs``); an ``InputError`` when a unit is not a window's ``[[id, targets], ids]``."""
    labels, logprobs = replayed_logprobs(transcript, name)
    windows, targets = window_labels(labels, name, "[[id, targets], ids] units")
    return windows, targets, logprobs


def replayed_logprobs(transcript: Table, name: str) -> tuple[list[Any], list[np.ndarray]]:
    """From the captured ``transcript`` of the TGI input ``name``: each scored sequence's label (a window's ``[id,
    targets]`` or ``sequence:i``) and its prompt log-probs read again from its recorded answer, checked against the
    ids its unit says certa meant (``read_prefill``), in the order asked."""
    labels, logprobs = [], []
    for unit, exchange in read_transcript(transcript):
        if exchange.path != GENERATE:
            continue
        try:
            label, ids = json.loads(unit)
            meant = [int(token) for token in ids]
        except (TypeError, ValueError):
            raise InputError(f"the transcript of input '{name}' does not name what it scored as [label, ids] "
                             "units") from None
        labels.append(label)
        logprobs.append(read_prefill(exchange.response, meant, f"input '{name}': {_unit_name(label)}"))
    return labels, logprobs
