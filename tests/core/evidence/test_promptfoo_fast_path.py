"""The fast path of the promptfoo reader (msgspec decoding only the fields read, a block of lines at a time, the
variables and prompts kept as their digests) against the reference path (``json`` and a check of every field):
the same ``EvidenceRecords`` bit for bit, or the same ``InputError``, on exports as promptfoo writes them and on
hostile ones."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from certa.engine.core.evidence import promptfoo, read_promptfoo_jsonl, sources
from certa.engine.core.input_limits import InputLimits
from tests.core.evidence.promptfoo_export import evaluation, provider
from tests.core.evidence.test_fast_path import assert_same_outcome, outcome

PROVIDERS = (provider("openai:gpt-4o-mini", "small"), provider("openai:gpt-4o"))
SELECTIONS = (None, "small", "openai:gpt-4o", {"id": "openai:gpt-4o-mini"}, {"label": "small"})


def export(lines: list[dict[str, Any]], blank: bool = False) -> bytes:
    text = "".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines)
    return (("\n  \n" if blank else "") + text).encode("utf-8", "surrogatepass")


def both_paths(raw: bytes, selected: object, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object, bool]:
    """(outcome with the fast path, outcome of the reference path alone, whether the fast path took the file)."""
    taken = promptfoo._typed_results(raw, InputLimits(), selected) is not None  # type: ignore[arg-type]
    fast = outcome(lambda: read_promptfoo_jsonl(raw, provider=selected, name="r.jsonl"))  # type: ignore[arg-type]
    with monkeypatch.context() as patch:
        patch.setattr(promptfoo, "_typed_results", lambda *args: None)
        reference = outcome(lambda: read_promptfoo_jsonl(raw, provider=selected, name="r.jsonl"))  # type: ignore[arg-type]
    return fast, reference, taken


def results(n_tests: int = 5, providers: tuple[dict[str, str], ...] = PROVIDERS) -> list[dict[str, Any]]:
    return evaluation(providers, [[[t % 3 > 0 for t in range(n_tests)]] * 2] * len(providers))


@pytest.mark.parametrize("selected", SELECTIONS, ids=str)
def test_the_fast_path_reads_promptfoo_exports_as_the_reference_does(selected: object,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    lines = results()
    for line in lines[::3]:
        line["namedScores"] = {"fluency": 0.5, "exact": True}
    lines[-1]["namedScores"] = {"exact": 1, "fluency": 2}
    for raw in (export(lines), export(lines, blank=True)):
        fast, reference, taken = both_paths(raw, selected, monkeypatch)
        assert taken  # (a file of two providers with none selected: refused alike, by _selected)
        assert_same_outcome(fast, reference)


def test_variables_of_one_shape_are_digested_column_by_column_as_value_by_value() -> None:
    values = [{"question": f"q{i}", "answer": "\u00e9\u20ac\U0001f600 \"\\\n", "\ue001key": "x"} for i in range(4)]
    assert sources.value_digests(values, str) == [sources.value_digest(value, "") for value in values]
    mixed = [*values, {"question": 1}, ["a"], "text", {"a": {"b": [1.5, None]}}, {}]
    assert sources.value_digests(mixed, str) == [sources.value_digest(value, "") for value in mixed]


def mutations() -> dict[str, Any]:
    """A field of a result and the values it may take instead of promptfoo's (``...``: the field removed)."""
    return {
        "testIdx": [..., -1, 2**63, 2**64, 1.0, True, "3", None],
        "promptIdx": [..., -1, 2**63, True, None],
        "score": [..., True, "1", None, 2**1030, 0.25, -0.0],
        "success": [..., 1, "true", None],
        "namedScores": [..., None, 0, [], "x", {"a": True}, {"a": "1"}, {"b": 1.5}, {"a": 2**1030}],
        "vars": [..., {"question": "q"}, [1, 2], "text", None, {"a": {"b": [1, {"c": None}]}}, {"x": "\ud800"}],
        "testCase": [..., None, "text", {"vars": None}, {"vars": {"q": 2**70}}, {}, {"vars": {"q": [[[]]]}}],
        "prompt": [..., None, "raw", {"label": "p"}, {"raw": 3}, {"raw": "\ud800"}, {"raw": "r", "label": 3}],
        "provider": [..., None, {"id": 3}, {"id": "openai:gpt-4o", "label": ""}, {"id": "other"}],
        "evalId": [..., 3, None, "another"],
    }


@st.composite
def hostile_export(draw: st.DrawFn) -> bytes:
    lines = results(draw(st.integers(1, 4)), PROVIDERS[:draw(st.integers(1, 2))])
    choices = mutations()
    for line in lines:
        if draw(st.integers(0, 3)) == 0:
            field = draw(st.sampled_from(sorted(choices)))
            value = draw(st.sampled_from(choices[field]))
            if value is ...:
                line.pop(field, None)
            else:
                line[field] = value
    return export(lines, blank=draw(st.booleans()))


@pytest.mark.slow
@given(raw=hostile_export(), selected=st.sampled_from(SELECTIONS))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
def test_the_fast_path_agrees_with_the_reference_on_hostile_exports(raw: bytes, selected: object,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fast, reference, taken = both_paths(raw, selected, monkeypatch)
    event(f"fast path {'taken' if taken else 'declined'}, reference {'refuses' if isinstance(reference, str) else 'reads'}")
    assert_same_outcome(fast, reference)
