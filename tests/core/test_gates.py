"""Gate metric paths, comparators (fail-closed), the recorded reasons and how gate numbers are displayed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certa.engine.core.gates import evaluate_gate, format_gate_numbers, gate_display, lookup_metric
from certa.engine.core.spec import GateSpec

OUTPUTS = {"s": {"a": {"b": [1.5, 2.5], "flag": True, "name": "SAME", "nan": "NaN"}}}


def test_lookup_follows_keys_and_indexes() -> None:
    assert lookup_metric(OUTPUTS, "s.a.b[1]") == 2.5
    assert lookup_metric(OUTPUTS, "s.a.b[-2]") == 1.5
    with pytest.raises(KeyError, match=r"s.a.b\[2\]"):
        lookup_metric(OUTPUTS, "s.a.b[2]")


@pytest.mark.parametrize("metric, threshold, passed", [
    ("s.a.b[0]", {"min": 1.5}, True),
    ("s.a.b[0]", {"min": 1.6}, False),
    ("s.a.b[1]", {"max": 2.5}, True),
    ("s.a.b[1]", {"min": 1, "max": 2}, False),
    ("s.a.b[1]", {"between": [2, 3]}, True),
    ("s.a.b[1]", {"between": [3, 4]}, False),
    ("s.a.name", {"equals": "SAME"}, True),
    ("s.a.name", {"equals": "DIFFERENT"}, False),
    ("s.a.flag", {"equals": True}, True),
    ("s.a.flag", {"equals": 1}, False),
    ("s.a.nan", {"max": 1}, False),
    ("s.a.name", {"min": 0}, False),
    ("s.missing", {"max": 1}, False),
])
def test_comparators(metric: str, threshold: dict, passed: bool) -> None:
    assert evaluate_gate(GateSpec("g", metric, threshold), OUTPUTS).passed is passed


def test_lookup_names_the_first_missing_step() -> None:
    with pytest.raises(KeyError, match=r"^'s\.a\.missing'$"):
        lookup_metric(OUTPUTS, "s.a.missing.deeper")
    with pytest.raises(KeyError, match=r"^'t'$"):
        lookup_metric(OUTPUTS, "t.a")


@pytest.mark.parametrize("value, thresholds, shown", [
    (0.8499999999999999, (0.85,), ("0.8499999999999999", "0.85")),  # never "0.85 < 0.85"
    (41.78, (40,), ("41.78", "40")),
    (0.85, (0.85,), ("0.85", "0.85")),  # equal numbers read equal
    (1.0000001, (1,), ("1.0000001", "1")),
    (0.123456789, (0.5,), ("0.123457", "0.5")),  # 6 significant digits when they tell the numbers apart
    (0.5, (0.4999996, 0.5000004), ("0.5", "0.4999996", "0.5000004")),  # one digit count for every bound
    (1e-20, (0,), ("1e-20", "0")),
])
def test_gate_numbers_are_shown_with_just_enough_digits(value, thresholds, shown) -> None:
    assert format_gate_numbers(value, *thresholds) == shown


@settings(max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_shown_gate_numbers_compare_as_the_numbers_do(value: float, threshold: float) -> None:
    shown_value, shown_threshold = format_gate_numbers(value, threshold)
    assert (float(shown_value) > float(shown_threshold)) == (value > threshold)
    assert (float(shown_value) == float(shown_threshold)) == (value == threshold)


def test_gate_display_matches_the_cli_and_html_needs() -> None:
    failed = {"id": "g", "metric": "pac.joint_guarantee.level", "value": 0.8499999999999999,
              "threshold": {"min": 0.85}, "passed": False, "reason": "0.8499999999999999 < 0.85"}
    assert gate_display(failed) == {"value": "0.8499999999999999", "threshold": "min 0.85",
                                    "reason": "0.8499999999999999 < 0.85"}
    between = {**failed, "value": 0.5104781, "threshold": {"between": [0.510477, 0.510479]}}
    assert gate_display(between)["threshold"] == "between 0.510477 and 0.510479"
    assert gate_display(between)["value"] == "0.510478"
    words = {**failed, "value": "SAME", "threshold": {"equals": "SAME"}}
    assert gate_display(words)["value"] == "'SAME'" and gate_display(words)["threshold"] == "equals 'SAME'"
    missing = {**failed, "value": None, "threshold": {"max": 1}}
    assert gate_display(missing)["value"] == "None" and gate_display(missing)["threshold"] == "max 1"


def test_recorded_gate_reasons_are_reproduced_byte_for_byte() -> None:
    """The reason is part of the certificate: every gate every release recorded evaluates to the same text.

    RFC 8785 writes the float 1.0 as ``1``, as it writes the integer 1, so the stored content cannot say which the
    run had (0.8.0's model-perplexity gate ``equals: 1.0`` on a fraction of 1.0 gave the reason ``1.0 == 1.0``):
    the reason must come out of one of the two readings of the stored numbers, integral ones as ints or as
    floats. (A replay re-runs the stages and compares the reasons themselves.)"""
    import json
    import sqlite3
    from pathlib import Path

    seen = 0
    for db in sorted((Path(__file__).resolve().parents[1] / "golden").glob("*/ledger.db")):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            for (payload,) in conn.execute("SELECT payload FROM entries WHERE kind = 'certificate'"):
                readings = [json.loads(payload)["content"], json.loads(payload, parse_int=float)["content"]]
                for index, gate in enumerate(readings[0]["gates"]):
                    recorded = (gate["value"], gate["passed"], gate["reason"])
                    again = [evaluate_gate(GateSpec(g["id"], g["metric"], g["threshold"]), content["stages"])
                             for content in readings for g in [content["gates"][index]]]
                    assert recorded in [(a.value, a.passed, a.reason) for a in again], (db.parent.name, recorded)
                    seen += 1
    assert seen >= 60  # 12 gates per release (0.1.0 onwards)
