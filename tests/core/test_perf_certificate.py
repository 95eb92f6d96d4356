"""The compiled certificate schema check (``certa.engine.foundation.schema_check.compile_schema``) agrees with
``jsonschema`` exactly, and ``certificate_problems`` reports what it reported before (messages come from ``jsonschema``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certa.engine.core.certificate import certificate_problems
from certa.engine.foundation.schema_check import compile_schema
from certa.engine.foundation.schema_validator import Draft202012Validator
from certa.schemas import load_schema

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def golden_certificates() -> list[dict]:
    found = []
    for db in sorted(GOLDEN.glob("*/ledger.db")):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            found += [json.loads(p) for (p,) in conn.execute("SELECT payload FROM entries WHERE kind = 'certificate'")]
    return found


CERTIFICATES = golden_certificates()
CERTIFICATE_TEXTS = [json.dumps(certificate) for certificate in CERTIFICATES]
"""The same certificates as JSON text: ``json.loads`` of one is a fresh deep copy, several times faster than
``copy.deepcopy``."""
SCHEMA = load_schema("certificate.schema.json")
VALIDATOR, FAST = Draft202012Validator(SCHEMA), compile_schema(SCHEMA)
"""What ``certificate_problems`` builds once: the messages' validator and the compiled check."""

json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 2.0, 1.5, 2, 1])
                           | st.sampled_from(["", "x", "dev", "PASS", "a" * 64, "0" * 64, "0" * 32, "12"]),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["id", "x", "name"]), c,
                                                                               max_size=3), max_leaves=6)


def paths(value, prefix=()) -> list[tuple]:
    """Every place in ``value`` (``prefix`` first), depth first in item order: one list, built in time linear in the
    places (a recursive generator re-yields each place once per level above it)."""
    found: list[tuple] = []

    def walk(item, where: tuple) -> None:
        found.append(where)
        if isinstance(item, dict):
            for key, child in item.items():
                walk(child, (*where, key))
        elif isinstance(item, list):
            for i, child in enumerate(item):
                walk(child, (*where, i))

    walk(value, prefix)
    return found


def test_golden_certificates_exist_and_pass_both() -> None:
    assert CERTIFICATES and FAST is not None
    for certificate in CERTIFICATES:
        assert FAST(certificate) is VALIDATOR.is_valid(certificate) is True


def assert_the_compiled_check_is_jsonschemas(certificate: dict) -> None:
    """The same verdict, and ``certificate_problems`` lists ``jsonschema``'s errors as it did."""
    assert FAST(certificate) is VALIDATOR.is_valid(certificate)
    messages = certificate_problems(certificate)
    assert [m for m in messages if m.startswith("schema: ")] == [
        f"schema: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in VALIDATOR.iter_errors(certificate)]


@pytest.mark.slow  # hundreds of property examples: CI runs them, a unit run does not
# 500 edited certificates reach every branch (line-to-line arc) of certificate.py that 1500 did (measured with a
# sys.settrace arc collector) but one, a list or object where a number is pinned (1 in 1000 edits):
# test_a_number_pinned_by_const_or_enum_against_every_kind_of_value checks that place with every kind of value.
@settings(derandomize=True, max_examples=500, deadline=None)
@given(st.data())
def test_compiled_check_equals_jsonschema_on_edited_certificates(data) -> None:
    certificate = json.loads(data.draw(st.sampled_from(CERTIFICATE_TEXTS)))
    for _ in range(data.draw(st.integers(1, 3))):
        candidates = paths(certificate)[1:]
        path = data.draw(st.sampled_from(candidates))
        parent = certificate
        for step in path[:-1]:
            parent = parent[step]
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = data.draw(json_values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["extra", "results_sha256", "platform", "versions"]))] = data.draw(json_values)
    assert_the_compiled_check_is_jsonschemas(certificate)


@pytest.mark.parametrize("value", [[1], [], [[1]], {"id": 1}, {}, None, 1, 1.0, 2, 2.0, 3, 1.5, -1, "1", "", True,
                                   False])
def test_a_number_pinned_by_const_or_enum_against_every_kind_of_value(value: object) -> None:
    """The places the schema pins to numbers (``certificate_format``: enum [1, 2]; ``content.certa_format``: const
    1) holding arrays, objects, other numbers, strings, booleans and null, in a certificate of either format."""
    formats = {certificate["certificate_format"]: text for certificate, text in zip(CERTIFICATES, CERTIFICATE_TEXTS)}
    assert set(formats) == {1, 2}
    for text in formats.values():
        for parent in ((), ("content",)):
            certificate = json.loads(text)
            place = certificate
            for step in parent:
                place = place[step]
            place["certa_format" if parent else "certificate_format"] = value
            assert_the_compiled_check_is_jsonschemas(certificate)


@pytest.mark.parametrize("schema", [{"$ref": "#/x"}, {"$ref": "other.schema.json#/x"},
                                    {"$ref": "#/$defs/a", "type": "object"}, {"patternProperties": {}},
                                    {"enum": [[1]]}, {"type": "thing"}])
def test_unknown_keywords_are_not_compiled(schema) -> None:
    with pytest.raises(NotImplementedError):
        compile_schema(schema)


def test_local_refs_any_of_and_fixed_length_arrays_compile_as_jsonschema_checks_them() -> None:
    from jsonschema import Draft202012Validator

    schema = {"$defs": {"real": {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}},
              "type": "array", "prefixItems": [{"$ref": "#/$defs/real"}, {"type": "string"}], "items": False,
              "minItems": 1, "maxItems": 2, "x-certa-note": "annotations never fail"}
    check = compile_schema(schema)
    for instance in ([1.5], [1, "a"], ["NaN", "b"], [], [1, 2], ["nan"], [True], [1, "a", 3], "x", [1.0, "a"]):
        assert check(instance) is Draft202012Validator(schema).is_valid(instance), instance
