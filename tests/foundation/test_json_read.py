"""``json_value`` reads a server's answer as ``json.loads`` does: the same value (type for type, the sign of zero
included) or the same refusal, on the texts where msgspec and ``json`` could disagree and on mutated answers."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest

from certa.engine.foundation.json_read import json_value

EDGES = ['{"a":1,"a":2}', "[123456789012345678901234567890]", "[-18446744073709551617]", '{"x":NaN}',
         '{"x":-Infinity}', "[Infinity]", '"\\ud800"', '"\\uD83D"', '{"\\ud83d\\ude00":1}', "[1e400]", "[-1e400]",
         "[1e-400]", "[-0.0]", "[-0]", "[1.0]", "[1E5]", '"a\x01b"', '"a\tb"', "[1,]", '{"a":1,}', "01", "1.", ".5",
         "+1", '"\\u0000"', "[1] x", "\ufeff[1]", "[1]\x00", " \r\n\t[1] ", '"\\x41"', '"\\/"', '"\x7f"', "[tru]",
         "[true,false,null]", "", "   ", "{}", "[]", '""', "[" * 50 + "]" * 50]


def outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        value = read(text)
    except (ValueError, RecursionError) as error:
        return "refused", type(error).__name__
    return "read", _typed(value)


def _typed(value: Any) -> Any:
    """The value with every number tagged by its type and floats by their bits (so -0.0 != 0.0, nan == nan)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


@pytest.mark.parametrize("text", EDGES)
def test_a_text_where_the_two_decoders_could_differ_reads_as_json_loads_reads_it(text: str) -> None:
    assert outcome(json_value, text) == outcome(json.loads, text)


def test_numbers_read_to_the_same_doubles_in_every_notation() -> None:
    rng = random.Random(20261129)
    bits = [rng.getrandbits(64) for _ in range(1500)]
    values = [x for x in (struct.unpack("<d", struct.pack("<Q", b))[0] for b in bits) if math.isfinite(x)]
    texts = [f"[{x!r},{x:.17g},{x:.12g},{x:.25e},{-x!r}]" for x in values]
    assert [outcome(json_value, t) for t in texts] == [outcome(json.loads, t) for t in texts]


def test_a_mutated_answer_reads_or_is_refused_as_json_loads_decides() -> None:
    answer = json.dumps({"model": "m", "choices": [{"index": 0, "prompt_logprobs": [None] + [
        {str(i): {"logprob": -1.5 - i / 7, "rank": i, "decoded_token": "é\u2028x"}} for i in range(1, 20)]}],
        "usage": {"prompt_tokens": 20}}, ensure_ascii=False)
    rng = random.Random(7)
    alphabet = '{}[],:"\\-+.eE0123456789 ntruflsaNI\x01\u00e9\ud800'
    mutated = []
    for _ in range(600):
        chars = list(answer)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(chars))
            choice = rng.random()
            if choice < 0.4:
                chars[at] = rng.choice(alphabet)
            elif choice < 0.7:
                del chars[at]
            else:
                chars.insert(at, rng.choice(alphabet))
        mutated.append("".join(chars))
    assert [outcome(json_value, t) for t in mutated] == [outcome(json.loads, t) for t in mutated]
    assert sum(outcome(json.loads, t)[0] == "read" for t in mutated) > 40  # the mutations are not all refused
