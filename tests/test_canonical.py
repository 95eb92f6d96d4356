"""Canonical JSON (RFC 8785) and the JSON-able conversion of stage outputs."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.canonical import canonical_bytes, canonical_sha256, to_jsonable

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
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
