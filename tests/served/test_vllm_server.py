"""What a real vLLM server (0.32, CPU build) answers, as the served-model runtime of issue 33 will rely on it.

The server is the one ``CERTA_TEST_VLLM_URL`` names (``bash .ci/vllm`` starts it on loopback, serving the tiny
Llama of ``tests/served/tiny_llama.py``; without it these tests skip, and fail under CI). HTTP through the standard
library only. What these tests pin down, from the server's real answers:

- ``GET /v1/models`` lists the served name, with ``root`` = the folder it loaded and ``max_model_len``; ``GET
  /version`` (outside ``/v1``) gives vLLM's version; completions carry ``system_fingerprint``
  (``vllm-<version>-<hex>``). All three are claims of the server, not proof of its weights.
- ``POST /v1/completions`` takes vLLM's extra sampling fields at the top level of the JSON body (the OpenAI Python
  client sends them as ``extra_body``): ``"prompt_logprobs": 0`` returns, per choice, one entry per prompt token,
  the first ``null`` (nothing predicts it) and each other a one-entry object ``{"<token id>": {"logprob", "rank",
  "decoded_token"}}`` for the token itself (``k > 0`` adds the top ``k``); ``"return_token_ids": true`` adds
  ``prompt_token_ids`` (and ``token_ids``, the generated ones). ``"echo": true, "logprobs": 0`` returns the same
  prompt log-probs in OpenAI's legacy layout (``token_logprobs``, first ``null``). ``max_tokens`` must be at least
  1 (0 is a 400), so a scorer generates one token and ignores it. A list of prompts is one request, one choice per
  prompt (``index`` = its position).
- The prompt token ids equal the model folder's ``tokenizer.json`` encoding of the same text (no special tokens
  added), and the prompt log-probs equal the log-softmax of ``transformers``' float32 logits for the same folder
  computed locally on CPU: measured max |difference| 2.9e-6 nats (mean 3.5e-7) over the 8 prompts below (1,368
  predicted tokens, log-probs from -13.9 to -0.3), 6.3e-6 against a float64 forward pass; the tolerance is 2e-5
  (a few float32 ulps of values up to ~14 nats, through two different attention kernels; a CPU with other SIMD
  kernels may round differently).
- A prompt's log-probs do not depend on what else is in the batch: the same prompt alone, repeated, and inside a
  batch of 8 gave bit-identical numbers here (one CPU worker); the tests allow the same 2e-5.
- Errors are JSON ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status: an unknown model name is
  a 404 that names the valid ones; a prompt longer than ``max_model_len`` is a 400.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import pytest

from tests.conftest import VllmServer
from tests.served.reference import PROMPTS, TOLERANCE, local_logprobs, local_token_ids
from tests.served.tiny_llama import TEXT

SCORE = {"max_tokens": 1, "temperature": 0, "prompt_logprobs": 0, "return_token_ids": True}
"""The request fields of a teacher-forced score: one log-prob per prompt token, and the token ids."""


def _request(url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """GET (``body`` None) or POST JSON to ``url``: (HTTP status, parsed JSON body), error statuses included."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.load(error)


def _completions(server: VllmServer, prompt: str | list[str], **fields: Any) -> dict[str, Any]:
    """POST /v1/completions for ``prompt`` (one or a list) with ``fields``; the parsed 200 answer."""
    status, answer = _request(f"{server.url}/completions", {"model": server.name, "prompt": prompt, **fields})
    assert status == 200, answer
    return answer


def _choices(answer: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The answer's choices in prompt order (checked: one per prompt)."""
    choices = sorted(answer["choices"], key=lambda choice: choice["index"])
    assert [choice["index"] for choice in choices] == list(range(count))
    return choices


def _prompt_logprobs(choice: dict[str, Any]) -> np.ndarray:
    """The log-probs of prompt tokens 2..n from a ``prompt_logprobs: 0`` choice, checked against its token ids."""
    entries, ids = choice["prompt_logprobs"], choice["prompt_token_ids"]
    assert len(entries) == len(ids) and entries[0] is None
    assert all(list(entry) == [str(token)] for entry, token in zip(entries[1:], ids[1:], strict=True))
    return np.array([entry[str(token)]["logprob"] for entry, token in zip(entries[1:], ids[1:], strict=True)])


@pytest.fixture(scope="module")
def scored(vllm_server: VllmServer) -> list[dict[str, Any]]:
    """The choices of one request scoring every prompt of ``PROMPTS``."""
    return _choices(_completions(vllm_server, PROMPTS, **SCORE), len(PROMPTS))


def test_models_lists_the_served_name_and_the_folder_it_loaded(vllm_server: VllmServer) -> None:
    status, models = _request(f"{vllm_server.url}/models")
    assert status == 200
    entries = {entry["id"]: entry for entry in models["data"]}
    assert list(entries) == [vllm_server.name]
    assert entries[vllm_server.name]["root"] == str(vllm_server.folder)
    assert entries[vllm_server.name]["max_model_len"] == 256
    status, version = _request(vllm_server.url.removesuffix("/v1") + "/version")
    assert (status, version) == (200, {"version": "0.32.0"})


def test_prompt_logprobs_one_per_prompt_token_and_the_local_tokenizers_ids(
        vllm_server: VllmServer, scored: list[dict[str, Any]]) -> None:
    local = local_token_ids(vllm_server.folder, PROMPTS)
    assert [choice["prompt_token_ids"] for choice in scored] == local
    assert max(map(len, local)) < 256 and min(map(len, local)) > 10
    for choice in scored:
        logprobs = _prompt_logprobs(choice)
        assert np.all(np.isfinite(logprobs)) and np.all(logprobs <= 0)
        assert len(choice["token_ids"]) == 1
    answer = _completions(vllm_server, PROMPTS, **SCORE)
    assert answer["usage"]["prompt_tokens"] == sum(map(len, local))
    assert answer["system_fingerprint"].startswith("vllm-0.32.0-")


def test_prompt_logprobs_equal_the_local_float32_log_softmax(
        vllm_server: VllmServer, scored: list[dict[str, Any]]) -> None:
    local = local_logprobs(vllm_server.folder, [choice["prompt_token_ids"] for choice in scored])
    differences = [np.abs(_prompt_logprobs(choice) - expected) for choice, expected in zip(scored, local, strict=True)]
    worst = float(np.concatenate(differences).max())
    assert worst <= TOLERANCE, f"max |server - local| = {worst:.3g} nats"
    # Far from a vacuous check: the prompt log-probs are spread over several nats, not near-uniform.
    assert float(np.concatenate([_prompt_logprobs(choice) for choice in scored]).std()) > 0.5


def test_echo_logprobs_and_batching_give_the_same_prompt_logprobs(
        vllm_server: VllmServer, scored: list[dict[str, Any]]) -> None:
    echoed = _choices(_completions(vllm_server, PROMPTS, max_tokens=1, temperature=0, echo=True, logprobs=0),
                      len(PROMPTS))
    for by_prompt_logprobs, by_echo in zip(scored, echoed, strict=True):
        token_logprobs = by_echo["logprobs"]["token_logprobs"]
        n = len(by_prompt_logprobs["prompt_token_ids"])
        assert token_logprobs[0] is None and len(token_logprobs) == n + 1  # the prompt, then the generated token
        assert np.abs(np.array(token_logprobs[1:n]) - _prompt_logprobs(by_prompt_logprobs)).max() <= TOLERANCE
    alone = _choices(_completions(vllm_server, PROMPTS[0], **SCORE), 1)[0]
    assert np.abs(_prompt_logprobs(alone) - _prompt_logprobs(scored[0])).max() <= TOLERANCE


def test_errors_are_json_with_their_status(vllm_server: VllmServer) -> None:
    status, answer = _request(f"{vllm_server.url}/completions", {"model": "not-served", "prompt": "x", **SCORE})
    assert status == 404 and answer["error"]["code"] == 404 and vllm_server.name in answer["error"]["message"]
    status, answer = _request(f"{vllm_server.url}/completions",
                              {"model": vllm_server.name, "prompt": "x", **SCORE, "max_tokens": 0})
    assert status == 400 and answer["error"]["param"] == "max_tokens"
    status, answer = _request(f"{vllm_server.url}/completions",
                              {"model": vllm_server.name, "prompt": TEXT[:600], **SCORE})
    assert status == 400 and "maximum context length is 256" in answer["error"]["message"]
