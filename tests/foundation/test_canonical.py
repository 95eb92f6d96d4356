"""Canonical JSON (RFC 8785) and the JSON-able conversion of stage outputs."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from certa.engine.foundation.canonical import canonical_bytes, canonical_sha256, parse_json, to_jsonable

integral_doubles_beyond_safe_integers = st.integers(2**53, 10**16 - 1).map(float) | st.integers(
    -(10**16) + 1, -(2**53)).map(float)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | integral_doubles_beyond_safe_integers | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def test_rfc8785_examples() -> None:
    assert canonical_bytes({"b": 1, "a": [1.0, 2.5e-7, 1e21]}) == b'{"a":[1,2.5e-7,1e+21],"b":1}'
    assert canonical_bytes({"\u20ac": "x", "a": True}) == '{"a":true,"€":"x"}'.encode()


def test_numpy_and_non_finite_values_become_plain_json() -> None:
    value = {"i": np.int64(3), "f": np.float32(0.5), "a": np.array([1, 2]), "nan": float("nan"),
             "inf": -np.inf, "big": 2**60, "t": (1, 2), "b": np.bool_(True)}
    assert to_jsonable(value) == {"i": 3, "f": 0.5, "a": [1, 2], "nan": "NaN", "inf": "-Infinity",
                                  "big": str(2**60), "t": [1, 2], "b": True}


@given(json_values)
def test_canonical_hash_survives_a_json_round_trip_and_key_order(value) -> None:
    text = json.dumps(value)
    assert canonical_sha256(json.loads(text)) == canonical_sha256(value)
    if isinstance(value, dict):
        assert canonical_sha256(dict(reversed(list(value.items())))) == canonical_sha256(value)


@given(json_values | st.integers() | st.floats())
def test_what_canonical_bytes_wrote_reads_back_to_the_same_bytes(value) -> None:
    text = canonical_bytes(value)
    assert canonical_bytes(parse_json(text)) == text
    assert canonical_bytes(parse_json(text.decode("utf-8"))) == text


def test_an_integral_double_beyond_the_safe_integers_reads_back_as_that_double() -> None:
    text = canonical_bytes({"tokens": 2.0**53, "big": 2**60, "small": 2**53 - 1})
    assert text == b'{"big":"1152921504606846976","small":9007199254740991,"tokens":9007199254740992}'
    assert parse_json(text) == {"tokens": 2.0**53, "big": "1152921504606846976", "small": 2**53 - 1}
    assert type(parse_json(text)["small"]) is int and type(parse_json(text)["tokens"]) is float
    assert canonical_bytes(json.loads(text)) != text  # what verify and replay computed before parse_json


def test_text_that_is_not_utf8_is_named_where_it_is() -> None:
    """A lone surrogate (a JSON escape such as \\ud800 with no pair, which ``json`` reads into a string) cannot be in
    RFC 8785 text: the error names the string and its path, key or value, instead of the reference's bare
    "input contains non-UTF-8 codepoints"."""
    import pytest

    from certa.engine.foundation.canonical import TextNotUTF8, first_text_not_utf8

    value = {"a": [1, {"b": "ok", "c": "x\ud800"}], "é": 1}
    with pytest.raises(TextNotUTF8, match=r"at a\[1\]\.c: 'x\\ud800' holds a lone surrogate") as caught:
        canonical_bytes(value)
    assert (caught.value.where, caught.value.text) == ("a[1].c", "x\ud800")
    assert isinstance(caught.value, ValueError)
    assert first_text_not_utf8({"k\udfff": 1}) == ("k\udfff", "k\udfff")
    assert first_text_not_utf8(["\ud800"]) == ("[0]", "\ud800") and first_text_not_utf8("\ud800") == ("(top)", "\ud800")
    assert first_text_not_utf8({"a": ["é", 1.5, None, {"b": "\U0001F600"}]}) is None
    with pytest.raises(TextNotUTF8, match=r"at \[0\]"):
        canonical_sha256(["\udc00", "é"])
