"""What certa asks an OpenAI-compatible completions server (vLLM's) and how it reads the answers: pure functions over
request bodies and response texts, no I/O (``http_client`` sends them).

Two modes (the request fields are vLLM's extra sampling parameters, sent at the top level of the JSON body:
https://docs.vllm.ai/en/v0.32.0/serving/online_serving/openai_compatible_server/):

- **Teacher forcing** (``prompt_logprobs_request``, ``read_prompt_logprobs``): the prompts go as token ids, not text
  (so the server's tokenizer is not trusted), with ``prompt_logprobs: 0`` and ``return_token_ids: true``; the
  server answers, per prompt, ``log p(x_i | x_<i)`` for every token but the first (nothing predicts it) and the ids
  it scored, which must be the ids sent. ``max_tokens`` is 1 because vLLM refuses 0 (the generated token is
  ignored). Several prompts go in one request, one choice per prompt: on the CPU test server this scored 128
  prompts of 128 tokens 1.8x to 3x faster at 16 prompts per request than one per request (``PROMPTS_PER_REQUEST``;
  docs/serving.md has the figures).
- **Generated tokens** (``generation_request``, ``read_generated``), for servers that give log-probs only of what
  they generate: the server continues one prompt by ``max_tokens`` tokens sampled at temperature 1 with no top-p or
  top-k truncation and a fixed ``seed``, and returns each sampled token's id and log-prob (``logprobs: 0``). One
  prompt per request: vLLM seeds every prompt of a request with the same seed, so prompts batched together would
  share their random draws. A continuation that met the end-of-sequence token stops early (``finish_reason``
  ``stop``) and is returned as it is, shorter. vLLM 0.32 returns *raw* log-probs by default (``--logprobs-mode
  raw_logprobs``: the model's log-softmax before temperature, penalties or top-k/top-p,
  https://docs.vllm.ai/en/v0.32.0/configuration/engine_args/#-logprobs-mode), which at temperature 1 without
  truncation are the log-probs of the distribution sampled from; the test server's equal its prompt log-probs of
  the same tokens.

Every reader checks what it relies on and raises an ``EndpointError`` naming the field and the numbers: the
answer's ``model`` is the served name asked for, one choice per prompt (by ``index``), the ids equal the ids sent
(the first differing position and both ids), one log-prob per token, each finite and at most 0. ``server_claims``
collects what a server says about itself; these are claims, not proof of the weights it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from certa.engine.foundation.errors import EndpointError
from certa.engine.foundation.json_read import json_value

__all__ = ["PROMPTS_PER_REQUEST", "NO_PROMPT_LOGPROBS", "prompt_logprobs_request", "read_prompt_logprobs",
           "generation_request", "read_generated", "server_claims"]

PROMPTS_PER_REQUEST = 16
"""Prompts per teacher-forcing request: the fastest measured on the test server (module docstring)."""

NO_PROMPT_LOGPROBS = ("the server returns no prompt_logprobs: teacher-forced scoring needs a server that returns "
                      "prompt-token log-probs (vLLM prompt_logprobs, TGI decoder_input_details); llama.cpp's server "
                      "and hosted chat APIs return generated tokens only: use generated-token mode")
"""The refusal of a server that does not give prompt-token log-probs (llama.cpp's answers without them)."""


def prompt_logprobs_request(model: str, prompts: Sequence[Sequence[int] | np.ndarray]) -> dict[str, Any]:
    """The ``POST /completions`` body that scores ``prompts`` (token ids) by teacher forcing on vLLM."""
    return {"model": model, "prompt": [[int(token) for token in prompt] for prompt in prompts], "max_tokens": 1,
            "temperature": 0, "prompt_logprobs": 0, "return_token_ids": True, "add_special_tokens": False}


def generation_request(model: str, token_ids: Sequence[int], *, max_tokens: int, seed: int) -> dict[str, Any]:
    """The ``POST /completions`` body that continues one prompt (token ids) by ``max_tokens`` tokens sampled from the
    model's own distribution (temperature 1, ``top_p`` 1, vLLM's ``top_k`` -1: no truncation) with ``seed``,
    returning their ids and log-probs."""
    return {"model": model, "prompt": [int(token) for token in token_ids], "max_tokens": int(max_tokens),
            "temperature": 1, "top_p": 1, "top_k": -1, "seed": int(seed), "logprobs": 0, "return_token_ids": True,
            "add_special_tokens": False}


def read_prompt_logprobs(response_text: str, *, model: str, sent: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Per prompt sent, the float64 ``log p(x_i | x_<i)`` of its tokens 1..n-1 (entry 0 of ``prompt_logprobs`` is
    null: nothing predicts the first token), from a vLLM answer to ``prompt_logprobs_request`` (checks: module
    docstring)."""
    scored = []
    for prompt, (ids, choice) in enumerate(zip(sent, _choices(response_text, model, len(sent)), strict=True)):
        entries = choice.get("prompt_logprobs")
        if not isinstance(entries, list):
            raise EndpointError(NO_PROMPT_LOGPROBS)
        _check_ids(prompt, "prompt_token_ids", choice.get("prompt_token_ids"), ids)
        if len(entries) != len(ids):
            raise EndpointError(f"prompt {prompt}: {len(entries)} prompt_logprobs entries for a prompt of {len(ids)} "
                                "tokens")
        found = [entry.get(str(token)) if isinstance(entry, dict) else None
                 for entry, token in zip(entries[1:], ids[1:], strict=True)]
        lacking = next((at for at, value in enumerate(found) if value is None), None)
        if lacking is not None:
            raise EndpointError(f"prompt {prompt}: prompt_logprobs[{lacking + 1}] holds no entry for the prompt's own "
                                f"token {ids[lacking + 1]} (it holds {str(entries[lacking + 1])[:80]})")
        scored.append(_logprobs(prompt, "prompt_logprobs", ids[1:], 1,
                                [value.get("logprob") if isinstance(value, dict) else None for value in found]))
    return scored


def read_generated(response_text: str, *, model: str,
                   sent: Sequence[Sequence[int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per prompt sent, the generated token ids (int64) and their float64 log-probs from a vLLM answer to
    ``generation_request``; a continuation that stopped at the end-of-sequence token (``finish_reason`` ``stop``)
    is shorter than ``max_tokens`` and returned as it is."""
    generated = []
    for prompt, (ids, choice) in enumerate(zip(sent, _choices(response_text, model, len(sent)), strict=True)):
        _check_ids(prompt, "prompt_token_ids", choice.get("prompt_token_ids"), ids)
        tokens, logprobs = choice.get("token_ids"), choice.get("logprobs")
        if not isinstance(tokens, list) or not all(type(token) is int for token in tokens):
            raise EndpointError(f"prompt {prompt}: the server returns no token_ids of the generated tokens (vLLM "
                                "return_token_ids)")
        values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if not isinstance(values, list):
            raise EndpointError(f"prompt {prompt}: the server returns no logprobs.token_logprobs of the generated "
                                "tokens")
        if len(values) != len(tokens):
            raise EndpointError(f"prompt {prompt}: {len(values)} token_logprobs for {len(tokens)} generated tokens")
        if choice.get("finish_reason") not in ("length", "stop"):
            raise EndpointError(f"prompt {prompt}: the generation ended with finish_reason "
                                f"{choice.get('finish_reason')!r}, neither 'length' nor 'stop'")
        generated.append((np.array(tokens, dtype=np.int64), _logprobs(prompt, "token_logprobs", tokens, 0, values)))
    return generated


def server_claims(models_response: str, version_response: str | None, completion_response: str) -> dict[str, Any]:
    """What the server says about itself, from its answers to ``GET /v1/models``, ``GET /version`` (vLLM's, outside
    ``/v1``; None when the server has none: not stated) and one completion: ``served_name`` (the completion's
    ``model``), ``models_entry`` (that name's ``/v1/models`` entry: ``id``, ``root``, ``max_model_len``,
    ``owned_by``; None when it lists no such name), ``server_version`` and ``system_fingerprint`` (None when not
    stated). Claims, not verified: none of them proves which weights answer."""
    completion = _object(completion_response, "the completion")
    served = completion.get("model")
    listed = _object(models_response, "GET /models").get("data")
    if not isinstance(listed, list):
        raise EndpointError("GET /models: the answer has no 'data' list of models")
    entry = next((item for item in listed if isinstance(item, dict) and item.get("id") == served), None)
    version = None if version_response is None else _object(version_response, "GET /version").get("version")
    return {"served_name": served,
            "models_entry": None if entry is None else {key: entry.get(key) for key in
                                                         ("id", "root", "max_model_len", "owned_by")},
            "server_version": version, "system_fingerprint": completion.get("system_fingerprint")}


# ------------------------------------------------------------------------------------------------- checks


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json_value(text)
    except ValueError:
        raise EndpointError(f"{what}: the answer is not JSON") from None
    if not isinstance(value, dict):
        raise EndpointError(f"{what}: the answer is not a JSON object")
    return value


def _choices(text: str, model: str, count: int) -> list[dict[str, Any]]:
    """The answer's choices in prompt order, checked: the answer is for ``model``, with one choice per prompt."""
    answer = _object(text, "the completion")
    if answer.get("model") != model:
        raise EndpointError(f"the answer is for model {answer.get('model')!r}, not the served name asked for "
                            f"{model!r}")
    choices = answer.get("choices")
    if not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        raise EndpointError("the answer has no list of choices")
    indices = [choice.get("index") for choice in choices]
    if len(choices) != count or sorted(index for index in indices if type(index) is int) != list(range(count)):
        raise EndpointError(f"the answer has {len(choices)} choices for {count} prompts sent, or their indices are not "
                            f"0..{count - 1} (got {str(indices[:8])[:80]})")
    by_index = {choice["index"]: choice for choice in choices}
    return [by_index[index] for index in range(count)]


def _check_ids(prompt: int, field: str, got: Any, sent: Sequence[int]) -> None:
    """The server's ``field`` equals the ids ``sent``; else the first differing position and both ids."""
    if not isinstance(got, list):
        raise EndpointError(f"prompt {prompt}: the server returns no {field} (vLLM return_token_ids): the ids it "
                            "scored cannot be checked against the ids sent")
    try:
        received = np.array(got, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise EndpointError(f"prompt {prompt}: {field} holds something other than token ids") from None
    expected = np.asarray(sent, dtype=np.int64)
    length = min(len(received), len(expected))
    differ = np.flatnonzero(received[:length] != expected[:length])
    if differ.size:
        at = int(differ[0])
        raise EndpointError(f"prompt {prompt}: {field} differ from the ids sent at position {at}: the server has "
                            f"{received[at]}, certa sent {expected[at]}")
    if len(received) != len(expected):
        raise EndpointError(f"prompt {prompt}: {field} has {len(received)} ids, certa sent {len(expected)}")


def _logprobs(prompt: int, field: str, tokens: Sequence[int], first: int, values: list[Any]) -> np.ndarray:
    """``values`` as float64, each a finite number at most 0; else the first bad one's position (``first`` + its
    offset), token and value."""
    numeric = [value if isinstance(value, (int, float)) and not isinstance(value, bool) else np.nan
               for value in values]
    logprobs = np.array(numeric, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(logprobs) | (logprobs > 0))
    if bad.size:
        at = int(bad[0])
        raise EndpointError(f"prompt {prompt}: {field}[{at + first}] (token {tokens[at]}) holds no finite log-prob "
                            f"<= 0 (got {str(values[at])[:80]})")
    return logprobs
