"""Gate metric paths and comparators (fail-closed)."""

from __future__ import annotations

import pytest

from engine.gates import evaluate_gate, lookup_metric
from engine.spec import GateSpec

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
