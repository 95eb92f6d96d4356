"""certa.engine.foundation.jsondiff: field changes most material first, indices in numeric order, long numeric arrays folded."""

from __future__ import annotations


from certa.engine.foundation.jsondiff import ArrayChange, FieldChange, flatten, json_diff, materiality, summarised


def _content() -> dict:
    return {
        "verdict": "PASS",
        "gates": [{"id": "g", "passed": True, "value": 1.01}],
        "knobs": {"replicates": 500},
        "versions": {"numpy": "2.0"},
        "stages": {"ratio": {
            "primary_metric": {"display_ci": [0.99, 1.02], "final": 10.5},
            "results": {"decision": "h0"},
            "distribution": {"ratio_quantiles": [1.0 + i / 1000 for i in range(101)]},
            "coverage": {"ok": True},
            "sequence": {"checks": [{"n": 10, "outcome": "continue"}]},
        }},
    }


def test_indices_sort_as_numbers_not_text() -> None:
    before = {"stages": {"s": {"other": list(range(12))}}}
    after = {"stages": {"s": {"other": [v + 1 for v in range(12)]}}}
    paths = [c.path for c in json_diff(before, after)]
    assert paths == [f"stages.s.other[{i}]" for i in range(12)]


def test_material_fields_come_first() -> None:
    before, after = _content(), _content()
    after["verdict"] = "FAIL"
    after["gates"][0].update(passed=False, value=1.06)
    after["knobs"]["replicates"] = 600
    after["versions"]["numpy"] = "2.1"
    ratio = after["stages"]["ratio"]
    ratio["primary_metric"]["display_ci"][1] = 1.06
    ratio["results"]["decision"] = "h1"
    ratio["coverage"]["ok"] = False
    ratio["sequence"]["checks"][0]["outcome"] = "stop"
    paths = [c.path for c in json_diff(before, after)]
    assert paths == ["verdict", "gates[0].passed", "gates[0].value", "stages.ratio.primary_metric.display_ci[1]",
                     "stages.ratio.results.decision", "stages.ratio.sequence.checks[0].outcome",
                     "stages.ratio.coverage.ok", "knobs.replicates", "versions.numpy"]


def test_materiality_rules_are_by_key_not_by_stage() -> None:
    assert materiality(("verdict",)) == 0 and materiality(("gates", 0, "reason")) == 1
    assert materiality(("stages", "any", "pac_bounds_marginal", "x")) == 2
    assert materiality(("stages", "any", "rate_ci", 0)) == 2
    assert materiality(("stages", "any", "decisions", 3, "vendor")) == 3
    assert materiality(("stages", "any", "config", "alpha")) == 4
    assert materiality(("knobs", "gates", 0, "max")) == 5


def test_long_numeric_arrays_fold_into_one_line_with_the_largest_change() -> None:
    before, after = _content(), _content()
    quantiles = after["stages"]["ratio"]["distribution"]["ratio_quantiles"]
    for i in range(len(quantiles)):
        quantiles[i] += 0.5 if i == 57 else 0.001
    after["stages"]["ratio"]["primary_metric"]["display_ci"][0] = 0.98
    changes = json_diff(before, after)
    lines = summarised(changes)
    assert isinstance(lines[0], FieldChange) and lines[0].path == "stages.ratio.primary_metric.display_ci[0]"
    folded = lines[1]
    assert isinstance(folded, ArrayChange) and folded.path == "stages.ratio.distribution.ratio_quantiles"
    assert len(folded.changes) == 101 and folded.largest_at == 57 and abs(folded.largest - 0.5) < 1e-12
    assert folded.as_json() == {"path": folded.path, "changed": 101, "largest_abs_change": folded.largest,
                                "largest_at": 57}
    assert len(lines) == 2 and len(changes) == 102


def test_a_few_changed_elements_stay_listed() -> None:
    before = {"q": list(range(100))}
    after = {"q": [v + (1 if v < 8 else 0) for v in range(100)]}
    assert all(isinstance(line, FieldChange) for line in summarised(json_diff(before, after)))
    after["q"][8] += 1
    assert [type(line) for line in summarised(json_diff(before, after))] == [ArrayChange]


def test_values_compare_as_json_and_missing_sides_are_none() -> None:
    assert json_diff({"a": 1}, {"a": 1.0}) == []
    assert json_diff({"a": 1}, {"a": True}) == [FieldChange("a", 1, True)]
    assert json_diff({"a": [1]}, {"a": [1, 2]}) == [FieldChange("a[1]", None, 2)]
    assert flatten({"a": [1, {"b": 2}], "c": {}}) == {"a[0]": 1, "a[1].b": 2, "c": {}}
