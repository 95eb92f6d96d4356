"""The Markdown report of a certificate (certa show)."""

from __future__ import annotations

from pathlib import Path

from engine import run
from engine.report import certificate_markdown, format_value

from .conftest import ROOT


def test_report_of_every_example_names_identity_inputs_stages_and_gates() -> None:
    for spec in sorted((ROOT / "specs").glob("*/spec.yaml")):
        certificate = run(spec).certificate
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
    assert "| no-regression | `ratio.primary_metric.display_ci[1]` |" in report and "**FAIL**" in report


def test_format_value() -> None:
    assert format_value(1.23456789) == "1.23457" and format_value(True) == "true" and format_value(None) == "null"
    assert format_value([0.5, "x"]) == "[0.5, x]" and format_value({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
