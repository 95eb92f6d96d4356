"""Each stage version publishes the JSON Schema of its outputs (``schemas/outputs/``); every output any release
recorded, and every example's, matches its version's schema; sealing refuses outputs that do not."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from certa.engine import run
from certa.engine.core.certificate import output_problems, seal
from certa.engine.foundation.schema_check import compile_schema
from certa.engine.foundation.errors import CertaError
from certa.engine.core.metric_paths import DATA_KEY
from certa.engine.core.stages import REGISTRY
from certa.schemas import load_schema, schema_exists

from tests.conftest import OFFLINE_EXAMPLES, ROOT

GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = [ROOT / "specs" / name / "spec.yaml" for name in OFFLINE_EXAMPLES]


def golden_contents() -> list[dict]:
    found = []
    for db in sorted(GOLDEN.glob("*/ledger.db")):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            found += [json.loads(p)["content"] for (p,) in
                      conn.execute("SELECT payload FROM entries WHERE kind = 'certificate'")]
    return found


CONTENTS = golden_contents()


def _schema_nodes(node):
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _schema_nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_nodes(value)


@pytest.mark.parametrize("stage", list(REGISTRY), ids=lambda s: s.ref)
def test_every_registered_stage_version_has_an_output_schema(stage) -> None:
    assert schema_exists(stage.output_schema_file), f"add schemas/{stage.output_schema_file}"
    schema = load_schema(stage.output_schema_file)
    Draft202012Validator.check_schema(schema)
    assert schema["x-certa-stage"]["name"] == stage.name
    assert stage.version in schema["x-certa-stage"]["versions"], \
        f"schemas/{stage.output_schema_file} does not list {stage.ref}: freeze or extend it (docs/contributing.md)"
    compile_schema(schema)  # sealing uses the compiled check: every keyword of an output schema must compile


@pytest.mark.parametrize("stage", list(REGISTRY), ids=lambda s: s.ref)
def test_output_schemas_describe_every_property_and_where_data_keys_come_from(stage) -> None:
    schema = load_schema(stage.output_schema_file)
    knobs = load_schema(stage.schema_file)
    for node in _schema_nodes(schema):
        if not isinstance(node, dict):
            continue
        for name, sub in node.get("properties", {}).items():
            assert sub.get("description"), f"{stage.ref}: property '{name}' has no description"
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{stage.ref}: fixed keys need additionalProperties false"
        if isinstance(node.get("additionalProperties"), dict):
            source = node.get(DATA_KEY)
            assert source, f"{stage.ref}: an object keyed by data needs {DATA_KEY}"
            assert source["input_knob"] in stage.input_knobs
            if "column_knob" in source:
                group, column = source["column_knob"].split(".")
                assert knobs["properties"][group]["properties"][column]["default"] == source["default_column"]


def test_golden_outputs_match_their_versions_schemas() -> None:
    assert len(CONTENTS) >= 5 * 4  # one run of each example spec per release
    for content in CONTENTS:
        assert output_problems(content) == []


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_outputs_match_their_versions_schemas(spec: Path) -> None:
    content = run(spec).certificate["content"]  # sealing checks them: this names the example that broke
    assert output_problems(content) == []


def test_an_output_that_does_not_match_is_refused_at_seal_time() -> None:
    content = copy.deepcopy(next(c for c in CONTENTS if c["stages"].get("ratio")))
    assert output_problems(content) == []
    content["stages"]["ratio"]["primary_metric"]["ratio_vs_baselin"] = 1.0
    content["stages"]["ratio"]["primary_metric"]["ci"] = [0.1]
    problems = output_problems(content)
    assert any("'ratio_vs_baselin' was unexpected" in p for p in problems)
    assert any("primary_metric/ci" in p for p in problems)
    with pytest.raises(CertaError, match="do not match their output schema"):
        seal(content, "0" * 32)


def test_a_version_without_an_output_schema_is_refused(monkeypatch) -> None:
    content = copy.deepcopy(next(c for c in CONTENTS if c["stages"].get("ratio")))
    entry = next(s for s in content["knobs"]["stages"] if s["use"] == "paired.ppl_ratio")
    monkeypatch.setattr("certa.engine.core.certificate._output_checker", lambda path: (frozenset(), None, lambda outputs: True))
    assert any(f"paired.ppl_ratio@{entry['version']} has no output schema" in p for p in output_problems(content))
    entry["version"] = "9.9.9"
    assert any("not a registered stage version" in p for p in output_problems(content))


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            yield from _paths(item, (*prefix, i))


json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 3)
                           | st.sampled_from([0.5, 1.0, "NaN", "x", "A0"]),
                           lambda c: st.lists(c, max_size=3)
                           | st.dictionaries(st.sampled_from(["x", "n", "lower"]), c, max_size=2), max_leaves=4)
SAMPLES = [(REGISTRY.get(s["use"], s["version"]).output_schema_file, c["stages"][s["id"]])
           for c in CONTENTS[-4:] for s in c["knobs"]["stages"]]


@pytest.mark.slow  # 300 edited outputs, about 1 s; the unit tier checks the compiled check on real and bad outputs
@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.data())
def test_compiled_output_check_equals_jsonschema_on_edited_outputs(data) -> None:
    schema_file, outputs = data.draw(st.sampled_from(SAMPLES))
    outputs = copy.deepcopy(outputs)
    path = data.draw(st.sampled_from(list(_paths(outputs))[1:]))
    parent = outputs
    for step in path[:-1]:
        parent = parent[step]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(json_values)
    schema = load_schema(schema_file)
    assert compile_schema(schema)(outputs) is Draft202012Validator(schema).is_valid(outputs)
