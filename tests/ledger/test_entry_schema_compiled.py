"""The fast paths of ``verify``'s payload checks answer as the slow ones do: every entry kind's schema compiled once
(``certa.engine.foundation.schema_check.compile_schema``) says yes exactly where ``jsonschema`` does, on every
payload of the golden ledgers and on mutated ones, and ``payload_problems`` keeps ``jsonschema``'s messages; and a
payload read by msgspec's decoder (``certa.ledger.verify_batch``) reads as ``parse_json`` reads it, wherever
``_slow_payloads`` lets it."""

from __future__ import annotations

import json
import random
import sqlite3
from importlib import metadata
from pathlib import Path

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certa.engine.foundation.json_read import parse_json
from certa.engine.foundation.schema_check import compile_schema
from certa.ledger import verify_batch
from certa.ledger.run_record import LEDGER_KINDS, RUN_KINDS, payload_problems

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "ledger-entries.schema.json").read_text(encoding="utf-8"))
KINDS = RUN_KINDS + LEDGER_KINDS
HEX64, HEX32 = "ab" * 32, "cd" * 16

HAND_MADE = {  # the kinds the golden ledgers do not hold, valid by the schema (checked below)
    "abort": {"reason": "a profile rule stopped the run", "rule": "min_windows", "stage": None},
    "policy": {"sha256": HEX64, "source": "policy.yaml", "text": "keys: []",
               "keys": [{"key_id": HEX64, "person": "ana", "roles": ["approver"]}]},
    "registration": {"name": "spec", "spec_text": "name: spec", "spec_sha256": HEX64, "knobs_hash": HEX64,
                     "knobs": {}, "seed": "1", "profile": "ci", "source": None,
                     "planned_sizes": [{"stage": "s", "knob": "n", "value": 3}]},
}
VALUES = [None, True, False, 0, 1, -1, 2.0, 1.5, -0.5, "", "x", "dev", "PASS", "approved", HEX64, HEX32, "12",
          "results_sha256", [], [1], ["a"], {}, {"x": 1}, {"path": "a", "recorded": 1, "replayed": 2}]
KEYS = ["extra", "stage", "name", "sha256", "rows", "format", "index", "detail", "note", "changes", "compared",
        "platform", "certificate", "signature", "public_keys", "planned_sizes", "keys"]


def _golden_payloads() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for db in sorted((ROOT / "tests" / "golden").glob("*/ledger.db")):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            for kind, payload in conn.execute("SELECT kind, payload FROM entries WHERE kind != 'decision' OR seq % 50 "
                                              "= 0"):
                found.setdefault(kind, []).append(payload)
    for kind, payload in HAND_MADE.items():
        found.setdefault(kind, []).append(json.dumps(payload))
    return found


PAYLOADS = _golden_payloads()


VALIDATORS = {kind: jsonschema.Draft202012Validator({"$ref": f"#/$defs/{kind}", "$defs": SCHEMA["$defs"]})
              for kind in KINDS}
COMPILED = {kind: compile_schema({"$ref": f"#/$defs/{kind}", "$defs": SCHEMA["$defs"]}) for kind in KINDS}


def _places(value: object, where: tuple = ()) -> list[tuple]:
    found = [where]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _places(child, (*where, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _places(child, (*where, i))
    return found


def _mutated(payload: object, rng: random.Random) -> object:
    """``payload`` with one to three members replaced, deleted or added, anywhere in it."""
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(_places(payload))
        if not where:
            payload = rng.choice([payload, *VALUES])
            continue
        parent = payload
        for step in where[:-1]:
            parent = parent[step]  # type: ignore[index]
        action = rng.choice(["replace", "replace", "delete", "add"])
        if action == "replace":
            parent[where[-1]] = json.loads(json.dumps(rng.choice(VALUES)))  # type: ignore[index]
        elif action == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif isinstance(parent, dict):
            parent[rng.choice(KEYS)] = json.loads(json.dumps(rng.choice(VALUES)))
    return payload


def _assert_same_answer(kind: str, payload: object) -> None:
    validator = VALIDATORS[kind]
    valid = validator.is_valid(payload)
    assert COMPILED[kind](payload) is valid, (kind, payload)
    assert payload_problems(kind, payload) == [f"{'/'.join(map(str, e.absolute_path)) or '(payload)'}: {e.message}"
                                               for e in validator.iter_errors(payload)]


def _check_golden(count: int | None) -> None:
    assert set(PAYLOADS) == set(KINDS)
    for kind in KINDS:
        for text in PAYLOADS[kind][:count]:
            assert VALIDATORS[kind].is_valid(json.loads(text))
            _assert_same_answer(kind, json.loads(text))


def test_every_kind_compiles_and_golden_and_hand_made_payloads_pass_both() -> None:
    _check_golden(2)


@pytest.mark.slow  # every payload of every golden ledger
def test_every_golden_payload_passes_both() -> None:
    _check_golden(None)


def _check_mutations(count: int, seed: int) -> None:
    rng = random.Random(seed)
    for kind in KINDS:
        for _ in range(count):
            _assert_same_answer(kind, _mutated(json.loads(rng.choice(PAYLOADS[kind])), rng))


def test_mutated_payloads_of_every_kind_get_jsonschemas_answer_and_messages() -> None:
    _check_mutations(6, seed=36)


@pytest.mark.slow  # thousands of mutations: CI runs them, a unit run a few
def test_many_mutated_payloads_of_every_kind_get_jsonschemas_answer_and_messages() -> None:
    _check_mutations(400, seed=3636)


_ADDITIONAL_UNDER_REF_EVALUATED = jsonschema.Draft202012Validator(
    {"$defs": {"t": {"additionalProperties": {"type": "string"}}}, "$ref": "#/$defs/t", "unevaluatedProperties": False}
).is_valid({"a": "x"})
"""Whether this jsonschema reads JSON Schema 2020-12 as written on that point (its lowest allowed version does not)."""


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "string"}, {"type": "null"}, {"enum": ["a", None]}]},
    {"$defs": {"t": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
     "$ref": "#/$defs/t", "properties": {"b": {"type": "string"}}, "unevaluatedProperties": False},
    {"$defs": {"t": {"type": "object", "additionalProperties": {"type": "string"}}},
     "$ref": "#/$defs/t", "unevaluatedProperties": False},
    {"type": "object", "properties": {"a": True}, "unevaluatedProperties": {"type": "integer"}},
])
def test_one_of_and_unevaluated_properties_compile_as_jsonschema_checks_them(schema: dict) -> None:
    if "$ref" in schema and "additionalProperties" in schema["$defs"]["t"] and not _ADDITIONAL_UNDER_REF_EVALUATED:
        pytest.skip(f"jsonschema {metadata.version('jsonschema')} does not count the members additionalProperties "
                    "evaluates under $ref as evaluated (JSON Schema 2020-12, 11.3: they are; newer jsonschema "
                    "agrees, and so does the compiled check)")
    check = compile_schema(schema)
    for instance in (None, "a", "b", 1, [], {}, {"a": 1}, {"a": 1.0}, {"a": "x"}, {"a": 1, "b": "y"},
                     {"a": 1, "c": 2}, {"a": 1, "b": 2}, {"c": "z"}, {"c": 1}):
        assert check(instance) is jsonschema.Draft202012Validator(schema).is_valid(instance), instance


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"properties": {"a": True}}], "unevaluatedProperties": False},
    {"$defs": {"t": {"anyOf": [{"properties": {"a": True}}]}}, "$ref": "#/$defs/t", "unevaluatedProperties": False},
    {"patternProperties": {"^a": True}, "unevaluatedProperties": False},
])
def test_unevaluated_properties_it_cannot_decide_statically_are_left_to_jsonschema(schema: dict) -> None:
    with pytest.raises(NotImplementedError):
        compile_schema(schema)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


def _assert_read_alike(texts: list[str]) -> None:
    """Where ``_slow_payloads`` lets msgspec read one of ``texts``, it reads the same values, of the same types (an
    integer beyond 2**53 is a float to ``parse_json``), as ``parse_json``; or refuses it."""
    slow = verify_batch._slow_payloads(texts)
    for i, text in enumerate(texts):
        if i in slow:
            continue
        try:
            fast = verify_batch._DECODE_JSON(text)
        except (msgspec.DecodeError, ValueError):  # DecodeError is a ValueError from msgspec 0.19
            continue
        assert json.dumps(fast) == json.dumps(parse_json(text)), text


def test_long_integers_are_read_by_parse_json_and_long_fractions_fast() -> None:
    texts = ['{"a":9007199254740993}', '{"a": 9007199254740993}', '{"a":[1,-9007199254740993]}', '{"a":[\n12345678901234567]}',
             '{"a":1.0295098660496773,"b":0.013774535316693681}', '{"a":1e-1234567890123456}', '{"a":"9007199254740993"}',
             '{"é":123456789012345}', '{"a":NaN}', '{"a":"\\ud800"}', '{"a":1} x', '9007199254740993']
    # 5: an exponent's digits follow "-", where a negative number's could: read by parse_json too (the rule is
    # conservative: it looks at the character before a run of digits only)
    assert verify_batch._slow_payloads(texts) == {0, 1, 2, 3, 5, 11}
    _assert_read_alike(texts)


@pytest.mark.slow  # hundreds of property examples: CI runs them
@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=8), st.sampled_from([(",", ":"), (", ", ": ")]))
def test_payloads_read_fast_read_as_parse_json_reads_them(values: list, separators: tuple[str, str]) -> None:
    _assert_read_alike([json.dumps({"v": value}, separators=separators, ensure_ascii=False) for value in values])
