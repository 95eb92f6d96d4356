"""What certa asks Hugging Face Text Generation Inference (TGI) and how it reads the answers: pure functions over
request bodies, texts and response texts, no I/O (``http_client`` sends them; ``certa.engine.core.runtimes.tgi``
runs them).

TGI's own API (the OpenAPI of TGI 3.3, https://huggingface.github.io/text-generation-inference/ ; the router's
``GenerateRequest``, ``Details``, ``PrefillToken`` and ``Info`` in ``router/src/lib.rs`` of
https://github.com/huggingface/text-generation-inference/tree/v3.3.7):

- ``POST /generate`` takes ``{"inputs": TEXT, "parameters": {...}}``: one text, not token ids. TGI tokenizes it
  with its model's tokenizer and **always adds that tokenizer's special tokens** (the request's
  ``add_special_tokens`` is internal: ``#[serde(skip)]``, true for ``/generate``). With ``details`` and
  ``decoder_input_details`` true it answers ``details.prefill``: one ``{"id", "text", "logprob"}`` per prompt token
  as it scored them, special tokens included, the first one's ``logprob`` null (nothing predicts it; a NaN
  serialised as null), each other ``log p(x_i | x_<i)``. ``max_new_tokens`` must be at least 1 (the router refuses
  0), so one token is generated greedily (``do_sample`` false) and ignored.
- TGI 3 computes prompt log-probs only when launched with ``--enable-prefill-logprobs`` (``ENABLE_PREFILL_LOGPROBS``,
  https://huggingface.co/docs/text-generation-inference/reference/launcher ); without it the answer's
  ``prefill`` is empty. A server that ignores ``decoder_input_details`` is refused (``NO_PREFILL``), and so is a
  null ``logprob`` beyond the first (a prompt token whose log-prob the server did not compute).
- ``GET /info`` states ``model_id``, ``model_sha``, ``max_input_tokens``, ``max_total_tokens``, ``version`` and more
  (``model_dtype`` and ``model_device_type`` in TGI 1 and 2, ``max_input_length`` before ``max_input_tokens``):
  claims (``info_claims``), not proof of the weights that answer.

**Text, not ids.** certa means to score a sequence of token ids x_0 .. x_n (the reference tokenizer's, special
tokens included). It sends their text, the reference tokenizer's decoding with the special tokens left out
(``sent_text``: TGI adds its own), and requires the ids TGI scored (``prefill[].id``) to **equal** x_0 .. x_n, id
for id (``read_prefill``); otherwise the sequence is refused with its first differing position, never re-aligned.
So a sequence is scored through TGI only when its decoded text, tokenized with the special tokens, gives back the
same ids: ``retokenized`` checks that locally with the reference tokenizer before any request (a window cut inside
a document of a tokenizer that adds a beginning-of-sequence token fails it: TGI would prepend that token), and each
answer checks that the server's tokenizer did the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from certa.engine.foundation.errors import EndpointError, InputError
from certa.engine.foundation.json_read import json_value

__all__ = ["GENERATE", "INFO", "INFO_CLAIMS", "NO_PREFILL", "generate_request", "sent_text", "retokenized",
           "first_difference", "read_prefill", "info_model", "info_positions", "info_claims"]

GENERATE = "/generate"
"""TGI's teacher-forcing path (relative to the declared URL, TGI's root)."""
INFO = "/info"
"""TGI's identity path."""
INFO_CLAIMS = ("model_id", "model_sha", "model_dtype", "model_device_type", "model_pipeline_tag", "max_input_tokens",
               "max_input_length", "max_total_tokens", "router", "version", "sha", "docker_label")
"""The ``GET /info`` fields recorded as claims (None when the server does not state one)."""
NO_PREFILL = ("the answer's details.prefill is missing or empty: the server ignored decoder_input_details, so it gives "
              "no prompt-token log-probs, which teacher-forced scoring needs (TGI 3 gives them only when launched with "
              "--enable-prefill-logprobs)")
"""The refusal of a TGI answer without prompt-token log-probs."""


def generate_request(text: str) -> dict[str, Any]:
    """The ``POST /generate`` body that scores ``text``'s prompt tokens (one greedy generated token, ignored)."""
    return {"inputs": text, "parameters": {"details": True, "decoder_input_details": True, "max_new_tokens": 1,
                                           "do_sample": False}}


def sent_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text sent for ``ids``: ``tokenizer`` (a ``tokenizers.Tokenizer``) decodes them, special tokens left out
    (TGI adds its tokenizer's own)."""
    return str(tokenizer.decode([int(token) for token in ids], skip_special_tokens=True))


def first_difference(got: Sequence[int], meant: Sequence[int]) -> int | None:
    """The first position where ``got`` and ``meant`` differ (the shorter one's length when one is a prefix of the
    other), None when they are equal."""
    received, expected = np.asarray(got, dtype=np.int64), np.asarray(meant, dtype=np.int64)
    length = min(received.size, expected.size)
    differ = np.flatnonzero(received[:length] != expected[:length])
    if differ.size:
        return int(differ[0])
    return None if received.size == expected.size else length


def retokenized(tokenizer: Any, texts: Sequence[str], sequences: Sequence[Sequence[int]],
                names: Sequence[str]) -> None:
    """An ``InputError`` naming the first sequence whose text (``texts[i]``, from ``sent_text``), tokenized by
    ``tokenizer`` with its special tokens as TGI tokenizes it, does not give back its ids: TGI would score other
    tokens."""
    encoded = tokenizer.encode_batch(list(texts), add_special_tokens=True)
    for name, encoding, ids in zip(names, encoded, sequences):
        at = first_difference(encoding.ids, ids)
        if at is not None:
            raise InputError(f"{name} cannot be scored through TGI: TGI takes text and tokenizes it with its special "
                             f"tokens, and this text (the reference tokenizer's decoding of the {len(ids)} ids) "
                             f"tokenizes to {_differ(list(encoding.ids), list(ids), at)}; "
                             f"{_hint(list(encoding.ids), list(ids))}")


def read_prefill(response_text: str, meant: Sequence[int], name: str) -> np.ndarray:
    """The float64 ``log p(x_i | x_<i)`` of tokens 1 .. n of ``meant`` (x_0 .. x_n) from a TGI answer to
    ``generate_request``: its ``details.prefill`` must hold one entry per id, with ``id`` equal to ``meant``'s, id
    for id (an ``InputError`` at the first differing position, naming ``name``), and a finite ``logprob`` <= 0 for
    every entry after the first (an ``EndpointError`` naming the field)."""
    try:
        answer = json_value(response_text)
    except ValueError:
        raise EndpointError(f"{name}: the /generate answer is not JSON") from None
    details = answer.get("details") if isinstance(answer, dict) else None
    prefill = details.get("prefill") if isinstance(details, dict) else None
    if not isinstance(prefill, list) or not prefill:
        raise EndpointError(f"{name}: {NO_PREFILL}")
    if not all(isinstance(entry, dict) and type(entry.get("id")) is int for entry in prefill):
        raise EndpointError(f"{name}: an entry of details.prefill holds no integer id")
    scored = [entry["id"] for entry in prefill]
    at = first_difference(scored, meant)
    if at is not None:
        raise InputError(f"{name}: the ids TGI scored (details.prefill[].id) are not the ids certa meant to score: "
                         f"{_differ(scored, list(meant), at)}; {_hint(scored, list(meant))}")
    values = [entry.get("logprob") for entry in prefill[1:]]
    logprobs = np.array([value if isinstance(value, (int, float)) and not isinstance(value, bool) else np.nan
                         for value in values], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(logprobs) | (logprobs > 0))
    if bad.size:
        where = int(bad[0]) + 1
        said = "null: the server did not compute it" if values[where - 1] is None else str(values[where - 1])[:40]
        raise EndpointError(f"{name}: details.prefill[{where}].logprob (token {scored[where]}) holds no finite "
                            f"log-prob <= 0 (got {said}); every prompt token after the first needs one")
    return logprobs


def info_model(info_text: str) -> str:
    """The ``model_id`` a ``GET /info`` answer states; an ``EndpointError`` when it states none."""
    model = _info(info_text).get("model_id")
    if not isinstance(model, str):
        raise EndpointError("GET /info: the answer states no model_id (is this a TGI server?)")
    return model


def info_positions(info_text: str) -> int:
    """The most prompt tokens the server takes with the one generated token certa asks for: min(``max_input_tokens``
    (``max_input_length`` before TGI 2), ``max_total_tokens`` − 1) of those it states; 0 when it states neither."""
    info = _info(info_text)
    stated = [value for value in (info.get("max_input_tokens", info.get("max_input_length")),
                                  _less_one(info.get("max_total_tokens")))
              if type(value) is int and value > 0]
    return min(stated) if stated else 0


def info_claims(info_text: str) -> dict[str, Any]:
    """The server's statements about itself from its ``GET /info`` answer (``INFO_CLAIMS``): claims, not verified."""
    info = _info(info_text)
    return {key: info.get(key) for key in INFO_CLAIMS}


def _info(text: str) -> dict[str, Any]:
    try:
        value = json_value(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise EndpointError("GET /info: the answer is not a JSON object")
    return value


def _less_one(value: Any) -> Any:
    return value - 1 if type(value) is int else None


def _differ(got: list[int], meant: list[int], at: int) -> str:
    """``"at position P, ID where certa meant ID"`` (``end`` past either's last id)."""
    def token(ids: list[int]) -> str:
        return str(ids[at]) if at < len(ids) else "the end"

    return f"at position {at}, {token(got)} where certa meant {token(meant)} ({len(got)} ids vs {len(meant)})"


def _hint(got: list[int], meant: list[int]) -> str:
    """Why: special tokens TGI adds that the ids certa meant do not begin with, or the reverse, or another
    tokenization of the text."""
    extra = len(got) - len(meant)
    if extra > 0 and got[extra:] == meant:
        return (f"TGI adds {got[:extra]} before every text (its tokenizer's special tokens), and these ids do not begin "
                "with them (a window cut inside a document): score whole documents (a seq_len above each document's "
                "length) or byte windows (unit: bytes), which begin with them")
    if extra < 0 and meant[-extra:] == got:
        return (f"these ids begin with {meant[:-extra]}, special tokens TGI's tokenizer does not add to a text: score "
                "token windows (unit: tokens)")
    return "its decoding and re-tokenization give other tokens, so it is refused rather than re-aligned"
