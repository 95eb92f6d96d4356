"""A run with an INCONCLUSIVE gate end to end: exit 6, --json, the certificate (content format 3), JUnit (a
skipped case), certa show, the HTML report and the site (amber), certa list, replay; FAIL outranks it; old gate
forms keep their verdicts; specs that cannot be inconclusive are refused."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main

from tests.conftest import interval_spec

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("bound, verdict, code", [("1.05", "PASS", 0), ("1.02", "INCONCLUSIVE", 6),
                                                   ("1.0", "FAIL", 1)])
def test_an_interval_gate_gives_each_verdict_its_exit_code(small_spec: Path, tmp_path: Path, bound: str,
                                                          verdict: str, code: int) -> None:
    result = invoke("run", str(interval_spec(small_spec, bound)), "--no-record", "--json")
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["verdict"] == verdict


def test_an_inconclusive_run_everywhere(small_spec: Path, tmp_path: Path) -> None:
    db, junit, cert = tmp_path / "ledger.db", tmp_path / "junit.xml", tmp_path / "cert.json"
    spec = interval_spec(small_spec, "1.02")
    result = invoke("run", str(spec), "--ledger", str(db), "--junit", str(junit), "-o", str(cert))
    assert result.exit_code == 6
    assert "small-paired: INCONCLUSIVE" in result.stdout and "gate no-regression: INCONCLUSIVE" in result.stdout
    assert "Inconclusive: no-regression could not be decided" in result.stdout

    content = json.loads(cert.read_text())["content"]
    assert content["certa_format"] == 3 and content["verdict"] == "INCONCLUSIVE"
    gate = content["gates"][0]
    assert (gate["outcome"], gate["passed"]) == ("INCONCLUSIVE", False)
    assert gate["reason"].endswith("< upper 1.0295702858685378: the interval straddles max")

    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("1", "0", "1")
    skipped = root.find("testsuite/testcase/skipped")
    assert skipped is not None and skipped.get("message", "").startswith("INCONCLUSIVE: lower 1.0043")
    assert {p.get("name"): p.get("value") for p in root.iter("property")}["verdict"] == "INCONCLUSIVE"

    shown = invoke("show", "latest", "--ledger", str(db)).stdout
    assert shown.startswith("# small-paired: INCONCLUSIVE")
    assert "| _**INCONCLUSIVE**_: lower 1.0043" in shown and "> Inconclusive: no-regression" in shown
    assert "whole interval <= 1.02" in shown

    listed = invoke("list", "--ledger", str(db), "--json")
    assert json.loads(listed.stdout)[0]["verdict"] == "INCONCLUSIVE"

    page = tmp_path / "run.html"
    assert invoke("report", "latest", "-o", str(page), "--ledger", str(db)).exit_code == 0
    html = page.read_text()
    assert '<section id="verdict" class="verdict verdict-inconclusive"' in html
    assert '<p class="verdict-word">INCONCLUSIVE</p>' in html and "0 of 1 <a" in html and "1 inconclusive" in html
    assert '<span class="badge badge-inconclusive">INCONCLUSIVE</span>' in html
    # the stage's decision badge is amber too: its one gate is undecided, not failed
    assert '<p class="decision"><span class="badge badge-inconclusive">ratio per token 1.01697</span>' in html
    assert ".verdict-inconclusive { border-color: var(--inconclusive-line)" in html  # amber, inlined

    site = tmp_path / "site"
    assert invoke("site", "-o", str(site), "--ledger", str(db)).exit_code == 0
    assert '<span class="badge badge-inconclusive">INCONCLUSIVE</span>' in (site / "index.html").read_text()

    replay = invoke("replay", "latest", "--ledger", str(db))
    assert replay.exit_code == 0 and "REPRODUCED" in replay.stdout


def test_fail_outranks_inconclusive(small_spec: Path) -> None:
    spec = interval_spec(small_spec, "1.02")
    spec.write_text(spec.read_text() + "  - id: strict\n    metric: ratio.token_perplexity.display_ci[1]\n    max: 1.0\n")
    result = invoke("run", str(spec), "--no-record", "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["verdict"] == "FAIL"


def test_a_sequential_test_stopped_at_n_max_is_inconclusive_for_a_decided_gate(tmp_path: Path) -> None:
    folder = tmp_path / "sequential"
    shutil.copytree(ROOT / "specs" / "sequential-diff", folder)
    spec = folder / "spec.yaml"
    text = spec.read_text().replace("profile: release", "profile: dev")
    text = text.replace("      equivalence_band: 0.01\n", "      equivalence_band: 0.01\n      n_max: 12\n")
    old_form = folder / "old.yaml"
    old_form.write_text(text)
    spec.write_text(text.replace("    metric: quantized.results.decision\n    equals: SAME",
                                 "    metric: quantized.results.decision\n    decided: SAME"))
    result = invoke("run", str(spec), "--no-record", "--json")
    assert result.exit_code == 6 and json.loads(result.stdout)["verdict"] == "INCONCLUSIVE"
    # the same run gated with equals, as before: UNDECIDED fails it
    result = invoke("run", str(old_form), "--no-record", "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["verdict"] == "FAIL"


@pytest.mark.parametrize("gate, message", [
    ("  - id: g\n    metric: ratio.token_perplexity.display_ci[1]\n    interval: {max: 1.02}",
     "is not an interval (a [lower, upper] array)"),
    ("  - {id: g, metric: ratio.token_perplexity.display_ci, interval: {min: 1.1, max: 1.02}}",
     "interval: {min, max} needs min <= max"),
    ("  - {id: g, metric: ratio.token_perplexity.display_ci, interval: {}}", "interval: needs min and/or max"),
    ("  - {id: g, metric: ratio.token_perplexity.display_ci, interval: {max: 1.02}, max: 1.0}",
     "a gate needs exactly one kind"),
    ("  - {id: g, metric: ratio.drift.within_band, decided: SAME}", "is never UNDECIDED"),
    ("  - {id: g, metric: ratio.drift.within_band, decided: UNDECIDED}", "UNDECIDED is what makes it INCONCLUSIVE"),
])
def test_gates_that_cannot_be_inconclusive_are_refused(small_spec: Path, gate: str, message: str) -> None:
    text = small_spec.read_text()
    small_spec.write_text(text[:text.index("  - id: no-regression")] + gate + "\n")
    result = invoke("validate", str(small_spec))
    assert result.exit_code == 2 and message in result.output, result.output


def test_run_help_states_exit_6() -> None:
    assert "6 INCONCLUSIVE" in " ".join(invoke("run", "--help").output.split())


def test_an_interval_gates_bounds_are_drawn_as_the_plots_thresholds() -> None:
    from certa.engine.services.presentation.html.view import threshold_values

    assert threshold_values({"threshold": {"interval": {"max": 1.02}}}) == [1.02]
    assert threshold_values({"threshold": {"interval": {"min": -0.1, "max": 0.1}}}) == [-0.1, 0.1]
    assert threshold_values({"threshold": {"max": 1.05}}) == [1.05]
