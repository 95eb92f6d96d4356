"""JUnit XML reports (certa.engine.services.presentation.junit, certa run --junit): valid against the JUnit schema CI test reporters read
(tests/data/junit.xsd), one case per gate, per aborting profile rule, an error case for a refused spec; the
file is written whole also when the run fails or aborts."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.services.presentation.junit import JUnitCase, JUnitSuite, junit_bytes, run_suite, utc_timestamp, write_junit
from certa.ledger import Ledger

SCHEMA = Path(__file__).resolve().parents[2] / "data" / "junit.xsd"


def assert_valid_junit(path: Path) -> ET.Element:
    """Validate the file against tests/data/junit.xsd (xmlschema) and return its root."""
    try:
        import xmlschema
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must validate JUnit reports: install the test extra (xmlschema)", pytrace=False)
        pytest.skip("xmlschema is not installed")
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(path))
    return ET.parse(path).getroot()


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


GATES = [{"id": "no-regression", "metric": "ratio.primary_metric.display_ci[1]", "value": 1.07,
          "threshold": {"max": 1.05}, "passed": False, "reason": "1.07 > 1.05"},
         {"id": "drift", "metric": "ratio.drift.within_band", "value": True, "threshold": {"equals": True},
          "passed": True, "reason": "True == True"}]


def test_a_suite_per_run_a_case_per_gate_and_the_counts(tmp_path: Path) -> None:
    suites = [run_suite(name="spec-a", timestamp="2026-11-24T10:00:00", seconds=1.5, run_id="ab" * 16,
                        verdict="FAIL", gates=GATES),
              run_suite(name="spec-b", timestamp="2026-11-24T10:00:01", run_id="cd" * 16, abort_reason="stopped",
                        failed_rules=[{"rule": "min_replicates", "value": 1000, "required": 3200}]),
              run_suite(name="bad.yaml", timestamp="2026-11-24T10:00:02", error="bad.yaml:3: unknown key",
                        error_type="SpecError")]
    out = tmp_path / "junit.xml"
    write_junit(out, suites)
    root = assert_valid_junit(out)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "2", "1")
    a, b, c = root.findall("testsuite")
    assert a.get("name") == "spec-a" and a.get("time") == "1.500"
    assert {p.get("name"): p.get("value") for p in a.iter("property")}["run_id"] == "ab" * 16
    failing, passing = a.findall("testcase")
    assert failing.get("classname") == "spec-a" and failing.get("name") == "gate no-regression"
    assert failing.find("failure").get("message") == "1.07 > 1.05" and passing.find("failure") is None
    rule = b.find("testcase")
    assert rule.get("name") == "profile rule min_replicates"
    assert rule.find("failure").get("message") == "min_replicates = 1000, required 3200"
    assert c.find("testcase/error").get("type") == "SpecError"
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]  # no temporary file left


def test_an_inconclusive_gate_is_a_skipped_case_with_its_reason(tmp_path: Path) -> None:
    undecided = {"id": "non-inferior", "metric": "ratio.token_perplexity.display_ci", "value": [0.99, 1.07],
                 "threshold": {"interval": {"max": 1.05}}, "passed": False, "outcome": "INCONCLUSIVE",
                 "reason": "lower 0.99 <= max 1.05 < upper 1.07: the interval straddles max"}
    out = tmp_path / "junit.xml"
    write_junit(out, [run_suite(name="spec-a", timestamp="2026-11-24T10:00:00", verdict="INCONCLUSIVE",
                                gates=[undecided, GATES[1]])])
    root = assert_valid_junit(out)
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("2", "0", "0", "1")
    assert root.find("testsuite").get("skipped") == "1"
    skipped = root.find("testsuite/testcase/skipped")
    assert skipped.get("message") == "INCONCLUSIVE: " + undecided["reason"] and skipped.get("type") is None
    assert "whole interval <= 1.05" in skipped.text  # the text too: Jenkins shows it when it reads no message
    assert root.find("testsuite/testcase/failure") is None
    # a format-2 gate (no outcome) keeps reading as passed or failed
    old = run_suite(name="old", timestamp="2026-11-24T10:00:00", verdict="FAIL", gates=GATES)
    assert [case.outcome for case in old.cases] == ["failure", "passed"]


def test_markup_in_messages_is_escaped_and_an_unwritable_path_is_an_error(tmp_path: Path) -> None:
    suite = JUnitSuite("s<&>", (JUnitCase("c", "s", "failure", message='a "quote" & <tag>', kind="T"),),
                       utc_timestamp())
    root = ET.fromstring(junit_bytes([suite]))
    assert root.find("testsuite/testcase/failure").get("message") == 'a "quote" & <tag>'
    from certa.engine.foundation.errors import CertaError
    with pytest.raises(CertaError, match="cannot write the JUnit report"):
        write_junit(tmp_path / "missing" / "junit.xml", [suite])


def test_certa_run_junit_for_pass_fail_abort_and_a_refused_spec(small_spec: Path, example_spec: Path,
                                                                  tmp_path: Path) -> None:
    db, report = tmp_path / "ledger.db", tmp_path / "junit.xml"
    passed = _run("run", str(small_spec), "--junit", str(report), "--ledger", str(db))
    assert passed.exit_code == 0
    root = assert_valid_junit(report)
    assert root.get("failures") == "0" and root.find("testsuite/testcase").get("classname") == "small-paired"

    small_spec.write_text(small_spec.read_text().replace("max: 1.05", "max: 1.0"))
    assert _run("run", str(small_spec), "--junit", str(report), "--ledger", str(db)).exit_code == 1
    failure = assert_valid_junit(report).find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "GateFailed" and "> 1" in failure.get("message")

    example_spec.write_text(example_spec.read_text().replace("replicates: 3200", "replicates: 1000"))
    assert _run("run", str(example_spec), "--junit", str(report), "--ledger", str(db)).exit_code == 3
    case = assert_valid_junit(report).find("testsuite/testcase")
    assert case.get("name") == "profile rule min_replicates"
    assert case.find("failure").get("message") == "min_replicates = 1000, required 3200"

    small_spec.write_text(small_spec.read_text().replace("replicates", "replicatez"))
    assert _run("run", str(small_spec), "--junit", str(report), "--ledger", str(db)).exit_code == 2
    error = assert_valid_junit(report).find("testsuite/testcase/error")
    assert error.get("type") == "SpecError" and "did you mean 'replicates'" in error.get("message")


def test_an_abort_without_a_named_rule_is_one_failure() -> None:
    suite = run_suite(name="seq", timestamp=utc_timestamp(), run_id="ef" * 16,
                      abort_reason="profile 'release' requires an anytime-valid method")
    (case,) = suite.cases
    assert (case.name, case.outcome, case.kind) == ("profile abort", "failure", "ProfileAbort")
    assert suite.properties["verdict"] == "ABORTED"


def test_batch_junit_unwritable_is_exit_2_before_and_exit_4_after_recording_on_a_local_cluster(tmp_path: Path) -> None:
    """``certa batch --junit``: a report that cannot be written is refused before anything runs (exit 2, no
    ledger created); one that fails only after the runs were recorded (here a symbolic link, which certa never
    replaces) is exit 4 with one line naming every recorded run, so that a scheduler does not count it as a
    refused batch."""
    pytest.importorskip("distributed")
    from tests.services.test_batch import write_tiny_specs

    write_tiny_specs(tmp_path / "specs", 2)
    db = tmp_path / "ledger.db"
    early = _run("batch", str(tmp_path / "specs"), "--junit", str(tmp_path / "missing" / "junit.xml"),
                 "--ledger", str(db))
    assert early.exit_code == 2 and early.stderr.startswith("error: cannot write the JUnit report")
    assert not db.exists()
    link = tmp_path / "junit.xml"
    link.symlink_to(tmp_path / "elsewhere.xml")
    late = _run("batch", str(tmp_path / "specs"), "--workers", "1", "--junit", str(link), "--ledger", str(db))
    errors = [line for line in late.stderr.splitlines() if line.startswith("error:")]
    assert late.exit_code == 4, late.output
    assert len(errors) == 1 and "Traceback" not in late.output
    with Ledger.open(db, create=False) as ledger:
        run_ids = [row.run_id for row in ledger.runs()]
    assert len(run_ids) == 2 and all(run_id in errors[0] for run_id in run_ids)
    assert "cannot write the JUnit report" in errors[0] and link.is_symlink() and not link.exists()
