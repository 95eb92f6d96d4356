"""certa's endpoint client and completions protocol against the real vLLM server (``vllm_server``): token-id prompts
scored by teacher forcing equal the local float32 log-softmax, the ids sent come back, generated tokens come with
their (raw) log-probs and the same seed gives the same tokens, an unknown served name is a clear error, the server's
claims are read, and a transcript replays without the server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from certa.engine.core.runtimes.completions import (generation_request, prompt_logprobs_request, read_generated,
                                                    read_prompt_logprobs, server_claims)
from certa.engine.core.runtimes.http_client import EndpointClient, Exchange, RecordedTransport
from certa.engine.foundation.errors import EndpointError

from tests.conftest import VllmServer
from tests.served.reference import PROMPTS, TOLERANCE, local_logprobs, local_token_ids

K = 8
"""Tokens generated per prompt in generated-token mode."""


@pytest.fixture(scope="module")
def token_prompts(vllm_server: VllmServer) -> list[list[int]]:
    return local_token_ids(vllm_server.folder, PROMPTS)


def _score(client: EndpointClient, name: str, prompts: list[list[int]], per_request: int) -> list[np.ndarray]:
    batches = [prompts[i: i + per_request] for i in range(0, len(prompts), per_request)]
    exchanges = client.post_many("/completions", [prompt_logprobs_request(name, batch) for batch in batches])
    return [logprobs for batch, exchange in zip(batches, exchanges, strict=True)
            for logprobs in read_prompt_logprobs(exchange.response, model=name, sent=batch)]


def test_teacher_forced_logprobs_of_token_ids_equal_the_local_float32_log_softmax(
        vllm_server: VllmServer, token_prompts: list[list[int]]) -> None:
    with EndpointClient(vllm_server.url) as client:
        served = _score(client, vllm_server.name, token_prompts, per_request=3)
        assert client.usage()["requests"] == 3 and client.usage()["failures"] == 0
    local = local_logprobs(vllm_server.folder, token_prompts)
    worst = max(float(np.abs(s - expected).max()) for s, expected in zip(served, local, strict=True))
    assert worst <= TOLERANCE, f"max |server - local| = {worst:.3g} nats"
    assert [len(s) for s in served] == [len(ids) - 1 for ids in token_prompts]


def test_generated_tokens_come_with_their_raw_logprobs_and_the_seed_fixes_them(
        vllm_server: VllmServer, token_prompts: list[list[int]]) -> None:
    prompts = [ids[:40] for ids in token_prompts[:3]]
    with EndpointClient(vllm_server.url) as client:
        def generate(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
            return [read_generated(client.post("/completions", generation_request(
                vllm_server.name, ids, max_tokens=K, seed=seed + i)).response, model=vllm_server.name, sent=[ids])[0]
                for i, ids in enumerate(prompts)]
        first, again, other = generate(100), generate(100), generate(200)
    assert all(len(tokens) == len(logprobs) == K for tokens, logprobs in first)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(first, again, strict=True))
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(first, other, strict=True))
    # vLLM's default logprobs_mode is raw_logprobs: a sampled token's log-prob is the model's teacher-forced one
    continued = [[*ids, *tokens.tolist()] for ids, (tokens, _) in zip(prompts, first, strict=True)]
    local = local_logprobs(vllm_server.folder, continued)
    worst = max(float(np.abs(logprobs - expected[-K:]).max()) for (_, logprobs), expected in zip(first, local, strict=True))
    assert worst <= TOLERANCE, f"max |generated - local| = {worst:.3g} nats"


def test_an_unknown_served_name_is_an_endpoint_error_naming_the_served_ones(
        vllm_server: VllmServer, token_prompts: list[list[int]]) -> None:
    with EndpointClient(vllm_server.url) as client, pytest.raises(EndpointError) as refused:
        client.post("/completions", prompt_logprobs_request("not-served", token_prompts[:1]))
    assert str(refused.value) == ("POST /completions: HTTP 404 (not retried: the request's fault): the server said: "
                                  f"The model `not-served` does not exist. Valid aliases: {vllm_server.name}.")
    assert refused.value.exit_code == 5


def test_the_server_claims_are_read(vllm_server: VllmServer, token_prompts: list[list[int]]) -> None:
    with EndpointClient(vllm_server.url) as client:
        completion = client.post("/completions", prompt_logprobs_request(vllm_server.name, token_prompts[:1]))
        claims = server_claims(client.get("/models").response, client.get("/../version").response, completion.response)
    assert claims["served_name"] == vllm_server.name
    assert claims["models_entry"] == {"id": vllm_server.name, "root": str(vllm_server.folder), "max_model_len": 256,
                                      "owned_by": "vllm"}
    assert claims["server_version"] == "0.32.0" and claims["system_fingerprint"].startswith("vllm-0.32.0-")


def test_a_transcript_replays_the_same_logprobs_without_the_server(
        vllm_server: VllmServer, token_prompts: list[list[int]]) -> None:
    body = prompt_logprobs_request(vllm_server.name, token_prompts[:4])
    with EndpointClient(vllm_server.url) as client:
        recorded = client.post("/completions", body)
    transcript = [json.loads(json.dumps(recorded.__dict__))]  # as a ledger would store and read it back
    replay = EndpointClient("http://127.0.0.1:9/v1", transport=RecordedTransport(
        [Exchange(**row) for row in transcript]))
    again = replay.post("/completions", body)
    assert again.response == recorded.response
    assert all(np.array_equal(a, b) for a, b in zip(
        read_prompt_logprobs(again.response, model=vllm_server.name, sent=token_prompts[:4]),
        read_prompt_logprobs(recorded.response, model=vllm_server.name, sent=token_prompts[:4]), strict=True))
