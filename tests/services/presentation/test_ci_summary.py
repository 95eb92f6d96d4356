"""CI summaries (certa.engine.services.presentation.ci_summary, certa run/batch --summary): the verdict in words,
the gates as a table, each stage's one-line reading, the digests and the report; rendered by GitHub's own
Markdown library (cmark-gfm, through cmarkgfm) with raw HTML allowed, so that a hostile spec or gate name that
broke a table cell or opened a tag would show; appended to the file atomically, as each step of a GitHub job
appends to $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import copy
import os
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.services.batch import BatchRow
from certa.engine.services.presentation.ci_summary import batch_summary, report_link, run_summary
from certa.engine.services.presentation.stages.paired_ratio import reading as ratio_reading

HOSTILE = "a|b <script>alert(1)</script> `x`"


def gfm_html(markdown: str) -> str:
    """``markdown`` rendered as GitHub renders a job summary (cmark-gfm with its table extension), raw HTML let
    through (GitHub then sanitises it; this test must see what the Markdown itself produced)."""
    try:
        import cmarkgfm
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must render summaries with cmark-gfm: install the test extra (cmarkgfm)", pytrace=False)
        pytest.skip("cmarkgfm is not installed")
    from cmarkgfm.cmark import Options
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


def table_rows(html: str, index: int) -> list[list[str]]:
    """The cells' text of each row of table ``index`` in ``html`` (header row first)."""
    table = re.findall(r"<table>(.*?)</table>", html, flags=re.S)[index]
    return [[unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A small paired-ratio run's certificate (not recorded): PASS, one gate."""
    from certa.engine import run
    from tests.conftest import small_spec_folder
    return run(small_spec_folder(tmp_path_factory.mktemp("summary"))).certificate


def test_a_pass_summary_has_the_verdict_the_gate_table_the_reading_and_the_digests(certificate) -> None:
    text = run_summary(name="small-paired", certificate=certificate, run_id="ab" * 16)
    html = gfm_html(text)
    assert "✅ <strong>PASS</strong>: Every gate passed (1 of 1)." in html
    header, gate = table_rows(html, 0)
    assert header == ["gate", "value", "threshold", "outcome"]
    assert gate[0] == "no-regression" and gate[2] == "max 1.05" and gate[3].startswith("PASS: ")
    outputs = certificate["content"]["stages"]["ratio"]
    assert ratio_reading(outputs) in unescape(html) and "Perplexity ratio per token" in ratio_reading(outputs)
    identity = dict((row[0], row[1]) for row in table_rows(html, 1)[1:])
    assert identity["run"] == "ab" * 16 and identity["content_sha256"] == certificate["content_sha256"]
    assert identity["results_sha256"] == certificate["results_sha256"]
    assert "certa report abababababab -o abababababab.html" in text


def test_hostile_names_stay_text_in_every_cell(certificate) -> None:
    """A gate id and a spec name holding ``|``, a ``<script>`` tag and backticks: every row keeps its four
    cells, no tag is produced, and the strings read as given."""
    hostile = copy.deepcopy(certificate)
    hostile["content"]["gates"][0]["id"] = HOSTILE
    hostile["content"]["gates"][0]["reason"] = HOSTILE
    hostile["content"]["spec"]["name"] = HOSTILE
    html = gfm_html(run_summary(name=HOSTILE, certificate=hostile, run_id="cd" * 16))
    assert "<script>" not in html
    rows = table_rows(html, 0)
    assert all(len(row) == 4 for row in rows)
    assert rows[1][0] == HOSTILE and rows[1][3] == f"PASS: {HOSTILE}"
    assert f"certa run: {HOSTILE}" in unescape(re.sub(r"<[^>]+>", "", html))


def test_fail_inconclusive_abort_and_refusal_are_said_in_words(certificate) -> None:
    failed = copy.deepcopy(certificate)
    gate = failed["content"]["gates"][0]
    gate.update(outcome="FAIL", passed=False, reason="1.03 > 1.0")
    failed["content"]["verdict"] = "FAIL"
    assert "❌ **FAIL**: 1 of 1 gate(s) failed." in run_summary(name="s", certificate=failed)
    undecided = copy.deepcopy(certificate)
    undecided["content"]["gates"][0].update(outcome="INCONCLUSIVE", passed=False)
    undecided["content"]["verdict"] = "INCONCLUSIVE"
    assert "⚠️ **INCONCLUSIVE**: Inconclusive: no-regression could not be decided" in \
        run_summary(name="s", certificate=undecided)
    aborted = run_summary(name="s", run_id="ef" * 16, abort_reason="profile rule min_replicates failed",
                          failed_rules=[{"rule": "min_replicates", "value": 1000, "required": 3200}])
    assert aborted.startswith("### certa run: s\n\n⛔ **ABORTED**")
    assert table_rows(gfm_html(aborted), 0)[1] == ["min_replicates", "min_replicates = 1000, required 3200"]
    assert "not recorded (`--no-record`)." in run_summary(name="s", abort_reason="stopped")
    refused = run_summary(name="s", error="spec: unknown key <b>")
    assert "⛔ **REFUSED**" in refused and "<b>" not in gfm_html(refused)
    assert "Not recorded (`--no-record`)" in run_summary(name="s", certificate=certificate)


def test_a_report_link_is_percent_encoded_and_names_the_run(certificate) -> None:
    assert report_link("https://ci.example.org/r/{run_id} (1).html", "ab") == \
        "https://ci.example.org/r/ab%20%281%29.html"
    html = gfm_html(run_summary(name="s", certificate=certificate, run_id="ab" * 16,
                                link="reports/{run_id}.html)<b>"))
    assert f'<a href="reports/{"ab" * 16}.html%29%3Cb%3E">abababababab</a>' in html


def test_a_batch_summary_is_one_row_per_spec_and_a_totals_row() -> None:
    gate = {"id": "g", "outcome": "PASS", "passed": True, "reason": "ok"}
    failed = {"id": "h", "outcome": "FAIL", "passed": False, "reason": "no"}
    rows = [BatchRow("specs/a.yaml", "1" * 32, "recorded", "PASS", 0, name=HOSTILE, gates=(gate, gate)),
            BatchRow("specs/b.yaml", "2" * 32, "recorded", "FAIL", 1, name="b", gates=(gate, failed)),
            BatchRow("specs/c.yaml", "3" * 32, "aborted", None, 3, error="profile rule failed", name="c",
                     failed_rules=({"rule": "min_n", "value": 10, "required": 100},)),
            BatchRow("specs/d|.yaml", None, "error", None, 2, error="invalid spec")]
    text = batch_summary("nightly", rows, 3.25, exit_code=2)
    html = gfm_html(text)
    assert "⛔ <strong>REFUSED</strong>: 4 spec(s) in 3.2 s: 1 PASS, 1 FAIL, 1 ABORTED, 1 REFUSED." in html
    table = table_rows(html, 0)
    assert len(table) == 1 + 4 + 1 and all(len(row) == 6 for row in table) and "<script>" not in html
    assert table[1][:2] == ["specs/a.yaml", HOSTILE] and table[1][4] == "2 of 2"
    assert table[3][5] == "profile rule failed; min_n = 10, required 100"
    assert table[4][0] == "specs/d|.yaml" and table[4][2] == "–"
    assert table[5] == ["total", "", "3 run(s)", "1 PASS, 1 FAIL, 1 ABORTED, 1 REFUSED", "3 of 4", ""]
    assert "⚠️ **INCONCLUSIVE**" in batch_summary("b", rows[:1], 1.0, exit_code=6)


def test_certa_run_summary_appends_to_the_file(small_spec: Path, tmp_path: Path) -> None:
    """Two steps of a CI job append to one summary file: the text before stays; a --report-link that is not
    http(s) nor relative is refused before anything runs."""
    summary = tmp_path / "step_summary.md"
    summary.write_text("## Build\n\nearlier step\n")
    db = tmp_path / "ledger.db"
    for _ in range(2):
        result = CliRunner().invoke(main, ["run", str(small_spec), "--ledger", str(db), "--summary", str(summary),
                                           "--report-link", "https://ci.example.org/{run_id}.html"])
        assert result.exit_code == 0, result.output
    text = summary.read_text()
    assert text.startswith("## Build\n\nearlier step\n### certa run: small-paired")
    assert text.count("### certa run: small-paired") == 2 and text.count("https://ci.example.org/") == 2
    refused = CliRunner().invoke(main, ["run", str(small_spec), "--ledger", str(tmp_path / "other.db"),
                                        "--summary", str(summary), "--report-link", "javascript:alert(1)"])
    assert refused.exit_code == 2 and "--report-link" in refused.output and not (tmp_path / "other.db").exists()
    assert summary.read_text() == text


def test_every_stage_type_reads_in_one_line_also_from_outputs_it_does_not_know() -> None:
    """Each registered stage type's presentation has a one-line ``reading``, which reads its outputs defensively:
    empty outputs give a line, never an exception."""
    from certa.engine.core.stages import REGISTRY
    from certa.engine.services.presentation.stages import presentation_of
    for name in sorted({stage.name for stage in REGISTRY if stage.presentation is not None}):
        line = presentation_of(name).reading({})
        assert isinstance(line, str) and line and "\n" not in line, name
