"""The Markdown report of a certificate (certa show)."""

from __future__ import annotations

from pathlib import Path

import pytest

from certa.engine import run
from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.ledger import Ledger

from tests.conftest import RUNNABLE_EXAMPLES


@pytest.mark.parametrize("example", RUNNABLE_EXAMPLES)
def test_report_of_every_example_names_identity_inputs_stages_and_gates(example_runs, example: str) -> None:
    db, runs = example_runs
    with Ledger.open(str(db), create=False) as ledger:
        certificate = ledger.certificate(runs[example])
    content = certificate["content"]
    report = certificate_markdown(certificate)
    assert report.startswith(f"# {content['spec']['name']}: {content['verdict']}")
    assert certificate["content_sha256"] in report and content["knobs_hash"] in report
    assert all(item["sha256"] in report for item in content["inputs"])
    assert all(f"## Stage `{stage_id}`" in report for stage_id in content["stages"])
    assert all(f"| {gate['id']} |" in report for gate in content["gates"])


def test_failed_gates_are_marked_in_the_report(example_spec: Path) -> None:
    example_spec.write_text(example_spec.read_text().replace("max: 1.05", "max: 1.0"))
    report = certificate_markdown(run(example_spec).certificate)
    assert report.startswith("# llama-edit-vs-base: FAIL")
    assert "| no-regression | `ratio.token_perplexity.display_ci[1]` |" in report and "**FAIL**" in report


def test_format_value() -> None:
    assert format_value(1.23456789) == "1.23457" and format_value(True) == "true" and format_value(None) == "null"
    assert format_value([0.5, "x"]) == "[0.5, x]" and format_value({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


def test_failed_rules_and_their_text() -> None:
    from certa.engine.services.presentation.markdown import failed_rules, rule_text
    from certa.engine.core.stages import Decision

    import numpy as np

    decisions = [Decision("pairing", {"window_match_fraction": 0.9}),
                 Decision("profile_rule", {"rule": "min_replicates", "value": np.int64(1000), "required": 3200,
                                           "outcome": "abort", "profile": "release"}),
                 Decision("profile_rule", {"rule": "token_counts_match", "value": 0, "required": 0,
                                           "outcome": "pass", "profile": "release"})]
    rules = failed_rules(decisions)
    assert rules == ({"rule": "min_replicates", "value": 1000, "required": 3200, "profile": "release"},)
    assert type(rules[0]["value"]) is int  # plain JSON, never a numpy scalar
    assert rule_text(rules[0]) == "min_replicates = 1000, required 3200"


def test_decision_and_change_lines() -> None:
    from certa.engine.foundation.jsondiff import json_diff, summarised
    from certa.engine.services.presentation.markdown import change_text, decision_line

    line = decision_line(12, {"stage": None, "kind": "gate", "detail": {"passed": True, "id": "g"}})
    assert line.split() == ["12", "gates", "gate", '{"id":', '"g",', '"passed":', "true}"]
    changes = summarised(json_diff({"q": [0.0] * 10, "x": 1}, {"q": [0.5] + [0.25] * 9, "x": 2}))
    assert [change_text(c) for c in changes] == ["q: 10 elements differ, the largest by 0.5 at [0]", "x: 1 -> 2"]
    assert change_text(changes[1], sides=("recorded", "replayed")) == "x: recorded 1 -> replayed 2"


def test_explain_puts_how_to_read_before_each_stages_markdown(example_spec: Path) -> None:
    from certa.engine.services.presentation.explain import how_to_read

    certificate = run(example_spec).certificate
    plain = certificate_markdown(certificate)
    explained = certificate_markdown(certificate, explain=True)
    paragraphs = how_to_read("paired.ppl_ratio", certificate["content"]["stages"]["ratio"])
    assert paragraphs and not any(p in plain for p in paragraphs)
    heading = explained.index("## Stage `ratio`")
    first_table = explained.index("|", heading)
    assert all(heading < explained.index(p) < first_table for p in paragraphs)
    assert explained.replace("".join(f"{p}\n\n" for p in paragraphs), "") == plain
