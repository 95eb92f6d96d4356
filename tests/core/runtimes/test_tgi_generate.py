"""What certa asks TGI and how it reads the answers (``certa.engine.core.runtimes.tgi_generate``), on answers written
by hand in TGI 3.3's documented layout (``details.prefill``: ``id``, ``text``, ``logprob``; ``GET /info``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from certa.engine.core.runtimes.tgi_generate import (first_difference, generate_request, info_claims, info_model,
                                                   info_positions, read_prefill)
from certa.engine.foundation.errors import EndpointError, InputError


def _answer(ids: list[int], logprobs: list[float | None], **details: object) -> str:
    prefill = [{"id": token, "text": f"t{token}", "logprob": value} for token, value in zip(ids, logprobs)]
    return json.dumps({"generated_text": "x", "details": {"finish_reason": "length", "generated_tokens": 1,
                                                          "prefill": prefill, "tokens": [], **details}})


def test_the_request_asks_for_the_prompt_tokens_log_probs_and_one_greedy_token() -> None:
    assert generate_request("abc") == {"inputs": "abc", "parameters": {
        "details": True, "decoder_input_details": True, "max_new_tokens": 1, "do_sample": False}}


def test_the_prefill_gives_the_log_probs_of_tokens_1_to_n_exactly() -> None:
    values = read_prefill(_answer([5, 7, 9], [None, -0.25, -1.5]), [5, 7, 9], "w")
    assert values.dtype == np.float64 and values.tolist() == [-0.25, -1.5]
    # the first token's logprob is not read (nothing predicts it; TGI sends null)
    assert read_prefill(_answer([5, 7], [-3.0, -0.5]), [5, 7], "w").tolist() == [-0.5]


@pytest.mark.parametrize(("answer", "error", "said"), [
    (json.dumps({"generated_text": "x"}), EndpointError, "details.prefill is missing or empty"),
    (_answer([], []), EndpointError, "ignored decoder_input_details"),
    (_answer([5, 7, 9], [None, None, -1.0]), EndpointError, r"details.prefill\[1\].logprob \(token 7\) .*got null"),
    (_answer([5, 7, 9], [None, -1.0, 0.5]), EndpointError, r"details.prefill\[2\].logprob \(token 9\) .*got 0.5"),
    (_answer([5, 8, 9], [None, -1.0, -1.0]), InputError, "at position 1, 8 where certa meant 7"),
    (_answer([5, 7], [None, -1.0]), InputError, r"at position 2, the end where certa meant 9 \(2 ids vs 3\)"),
    (_answer([1, 5, 7, 9], [None, -1.0, -1.0, -1.0]), InputError, r"TGI adds \[1\] before every text"),
    (_answer([7, 9], [None, -1.0]), InputError, r"these ids begin with \[5\], special tokens TGI's tokenizer does not"),
    ("not json", EndpointError, "not JSON"),
])
def test_an_answer_that_is_not_the_meant_ids_log_probs_is_refused_naming_the_field(answer: str, error: type,
                                                                                     said: str) -> None:
    with pytest.raises(error, match=f"^w: .*{said}"):
        read_prefill(answer, [5, 7, 9], "w")


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 4, 3], [1, 2, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2 and first_difference([], [1]) == 0


def test_info_states_the_model_the_length_and_claims() -> None:
    info = json.dumps({"model_id": "org/model", "model_sha": "abc", "max_input_tokens": 1024,
                       "max_total_tokens": 2048, "version": "3.3.7", "router": "text-generation-router"})
    assert info_model(info) == "org/model"
    assert info_positions(info) == 1024
    assert info_positions(json.dumps({"max_input_tokens": 4000, "max_total_tokens": 4096})) == 4000
    assert info_positions(json.dumps({"max_input_length": 4096, "max_total_tokens": 4096})) == 4095  # TGI 1
    assert info_positions(json.dumps({"model_id": "m"})) == 0
    claims = info_claims(info)
    assert claims["model_id"] == "org/model" and claims["model_sha"] == "abc" and claims["model_dtype"] is None
    with pytest.raises(EndpointError, match="states no model_id"):
        info_model(json.dumps({"data": []}))
    with pytest.raises(EndpointError, match="not a JSON object"):
        info_claims("[]")
