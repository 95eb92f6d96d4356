"""``hf_models``' scores derived again from what a served run captured (issue 33, item 3): a replay computes each
draw's score from the served model's transcript (the server's recorded answers, checked again against the ids sent)
and the local model's captured log-probs, by the scorer's own formulas, and finds the numbers the run recorded.

The transcripts here are built by hand in vLLM's layout (``prompt_logprobs``, ``return_token_ids``), so every
expected score is computed from the numbers written below; the real server's are in tests/served."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from certa.engine.core.endpoint_input import EndpointFormat, declaration_bytes
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.runtimes.completions import generation_request, prompt_logprobs_request
from certa.engine.core.runtimes.endpoint import transcript_table
from certa.engine.core.runtimes.http_client import Exchange, request_key
from certa.engine.core.scorers import rederived_scores
from certa.engine.core.scorers.hf_models import HfModelsScorer
from certa.engine.core.tables import Table, table_from_columns
from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import EndpointError, InputError

MODEL = "tiny-llama"


def _endpoint(name: str) -> Table:
    raw = declaration_bytes(name, {"url": "http://127.0.0.1:9/v1", "model": MODEL})
    return EndpointFormat().read(name, raw, options={}, companions={}, limits=InputLimits())


def _local(name: str) -> Table:
    """A local model's input (its table is not read: its numbers are the captured log-probs)."""
    return table_from_columns(name, {"file": ["model.safetensors"]})


def _exchange(body: dict, answer: dict) -> Exchange:
    request = canonical_bytes(body)
    return Exchange(key=request_key("POST", "/completions", request), method="POST", path="/completions",
                    request=request.decode("utf-8"), status=200, response=json.dumps(answer), elapsed_ms=1.0,
                    attempts=1)


def _teacher(sequences: Sequence[Sequence[int]], logprobs: Sequence[Sequence[float]]) -> Exchange:
    """A vLLM answer scoring ``sequences`` with ``logprobs`` (tokens 1 .. n of each)."""
    choices = [{"index": i, "prompt_token_ids": list(ids), "token_ids": [1], "text": " ", "finish_reason": "length",
                "prompt_logprobs": [None] + [{str(t): {"logprob": lp, "rank": 1}} for t, lp in zip(ids[1:], lps)]}
               for i, (ids, lps) in enumerate(zip(sequences, logprobs))]
    return _exchange(prompt_logprobs_request(MODEL, sequences), {"model": MODEL, "choices": choices})


def _generated(ids: Sequence[int], tokens: Sequence[int], logprobs: Sequence[float], seed: int) -> Exchange:
    choice = {"index": 0, "prompt_token_ids": list(ids), "token_ids": list(tokens), "finish_reason": "length",
              "logprobs": {"token_logprobs": list(logprobs)}, "text": "x"}
    return _exchange(generation_request(MODEL, ids, max_tokens=len(tokens), seed=seed),
                     {"model": MODEL, "choices": [choice]})


def _transcript(*exchanges: Exchange) -> Table:
    return transcript_table([(json.dumps([f"sequence:{i}"]), e) for i, e in enumerate(exchanges)])


def _kept(logprobs: Sequence[Sequence[float]]) -> Table:
    """A local model's captured log-probs (``<role>_logprobs``), as the scorer keeps them."""
    return table_from_columns("reference_logprobs", {
        "sequence": np.repeat(np.arange(len(logprobs)), [len(lp) for lp in logprobs]),
        "position": np.concatenate([np.arange(1, len(lp) + 1) for lp in logprobs]),
        "logprob": np.concatenate([np.asarray(lp, dtype=np.float64) for lp in logprobs])})


def _scorer(metric: str) -> HfModelsScorer:
    return HfModelsScorer(metric=metric, options={"prompts": "prompts"},
                          tables={"prompts": table_from_columns("prompts", {"text": ["a b", "c d"]})})


SEQUENCES = [[5, 6, 7], [8, 9]]
SERVED = [[-1.0, -2.5], [-0.25]]
LOCAL = [[-1.5, -2.0], [-0.5]]


@pytest.mark.parametrize(("metric", "expected"), [
    ("delta_ce", [((-1.5 + 1.0) + (-2.0 + 2.5)) / 2, -0.5 + 0.25]),
    ("abs_delta_lp", [(0.5 + 0.5) / 2, 0.25]),
])
def test_a_local_reference_and_a_served_candidate_give_the_hand_computed_scores(metric: str,
                                                                               expected: list[float]) -> None:
    # two scoring calls (two batches), as sequential.diff makes them: the order of the draws is the order asked
    evidence = {"candidate_transcript": _transcript(_teacher(SEQUENCES[:1], SERVED[:1]),
                                                    _teacher(SEQUENCES[1:], SERVED[1:])),
                "reference_logprobs": _kept(LOCAL)}
    derived = rederived_scores(_scorer(metric), _local("reference"), _endpoint("served"), evidence)
    assert derived is not None and derived.tolist() == expected


def test_two_served_models_are_derived_from_their_two_transcripts() -> None:
    evidence = {"reference_transcript": _transcript(_teacher(SEQUENCES, LOCAL)),
                "candidate_transcript": _transcript(_teacher(SEQUENCES, SERVED))}
    derived = _scorer("delta_ce").scores_from_evidence(_endpoint("a"), _endpoint("b"), evidence)
    assert derived is not None and derived.tolist() == [0.0, -0.25]


def test_generated_token_mode_scores_the_generated_tokens_against_the_references_last_log_probs() -> None:
    # the reference scored prompt + generated tokens (3 + 2 and 2 + 1 tokens): only the generated ones count
    evidence = {"candidate_transcript": _transcript(_generated([5, 6, 7], [10, 11], [-0.5, -1.0], seed=0),
                                                    _generated([8, 9], [12], [-2.0], seed=1)),
                "reference_logprobs": _kept([[-9.0, -9.0, -0.75, -1.5], [-9.0, -1.0]])}
    derived = _scorer("generated_kl").scores_from_evidence(_local("reference"), _endpoint("served"), evidence)
    assert derived is not None and derived.tolist() == [((-0.5 + 0.75) + (-1.0 + 1.5)) / 2, -2.0 + 1.0]


def test_local_models_only_have_nothing_to_derive_from() -> None:
    assert _scorer("delta_ce").scores_from_evidence(_local("a"), _local("b"), {}) is None


def test_an_answer_that_does_not_score_the_ids_sent_is_refused_again_in_a_replay() -> None:
    forged = _teacher([[5, 6, 7]], [[-1.0, -2.5]])
    answer = json.loads(forged.response)
    answer["choices"][0]["prompt_token_ids"] = [5, 6, 8]
    evidence = {"candidate_transcript": _transcript(Exchange(**{**forged.__dict__, "response": json.dumps(answer)})),
                "reference_logprobs": _kept(LOCAL[:1])}
    with pytest.raises(EndpointError, match="prompt_token_ids differ from the ids sent at position 2"):
        _scorer("delta_ce").scores_from_evidence(_local("reference"), _endpoint("served"), evidence)


def test_an_edited_request_in_the_transcript_is_refused() -> None:
    exchange = _teacher(SEQUENCES[:1], SERVED[:1])
    edited = Exchange(**{**exchange.__dict__, "request": exchange.request.replace("[5,6,7]", "[5,6,9]")})
    evidence = {"candidate_transcript": _transcript(edited), "reference_logprobs": _kept(LOCAL[:1])}
    with pytest.raises(InputError, match="row 1 of the captured transcript .* the transcript was edited"):
        _scorer("delta_ce").scores_from_evidence(_local("reference"), _endpoint("served"), evidence)


@pytest.mark.parametrize(("local", "message"), [
    ([[-1.5, -2.0]], "log-probs of 2 sequences for 1 sequences the reference scored"),
    ([[-1.5, -2.0], [-0.5, -0.1]], "sequence 2: the reference's captured log-probs cover 2 tokens and the candidate's 1"),
])
def test_evidence_that_does_not_belong_together_is_refused(local: list[list[float]], message: str) -> None:
    evidence = {"candidate_transcript": _transcript(_teacher(SEQUENCES, SERVED)), "reference_logprobs": _kept(local)}
    with pytest.raises(InputError, match=message):
        _scorer("delta_ce").scores_from_evidence(_local("reference"), _endpoint("served"), evidence)


def test_a_run_without_the_local_models_log_probs_cannot_be_derived() -> None:
    evidence = {"candidate_transcript": _transcript(_teacher(SEQUENCES, SERVED))}
    with pytest.raises(InputError, match="captured no log-probs of its local reference model"):
        _scorer("delta_ce").scores_from_evidence(_local("reference"), _endpoint("served"), evidence)
