"""The HTML report (engine.html, ``certa report``): every example renders with each stage's plot and tables,
the verdict first, nothing fetched at view time, the same bytes twice, hostile strings escaped."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from engine.html import Link, gather_report, render_report
from ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.parent.name for p in (ROOT / "specs").glob("*/spec.yaml"))
HOSTILE = "<script>alert(\"x\")</script> & 'single' \"double\""


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Every example spec run into one temporary ledger: (ledger path, example folder -> run id)."""
    db = tmp_path_factory.mktemp("html") / "ledger.db"
    runs = {}
    for example in EXAMPLES:
        result = invoke("run", str(ROOT / "specs" / example / "spec.yaml"), "--ledger", str(db), "--json")
        assert result.exit_code == 0, result.output
        runs[example] = json.loads(result.stdout)["run_id"]
    return db, runs


def _report(db: Path, run_id: str) -> str:
    with Ledger.open(str(db), create=False) as ledger:
        return render_report(gather_report(ledger, run_id))


def _sections(page: str) -> dict[str, str]:
    """Stage id -> the HTML of its section."""
    found = re.findall(r'<section class="stage" id="stage-([^"]+)"[^>]*>(.*?)</section>', page, flags=re.S)
    return dict(found)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_stage_has_a_plot_and_tables_after_the_verdict(examples, example: str) -> None:
    db, runs = examples
    page = _report(db, runs[example])
    with Ledger.open(str(db), create=False) as ledger:
        certificate = ledger.certificate(runs[example])
    stage_ids = [s["id"] for s in certificate["content"]["knobs"]["stages"]]  # the spec's order
    sections = _sections(page)
    assert list(sections) == stage_ids
    for stage_id, html in sections.items():
        assert '<figure class="plot"' in html and "<svg" in html, stage_id
        assert "<table" in html and "<td" in html, stage_id
    first_section = re.search(r"<section[^>]*>", page)
    assert first_section is not None and 'id="verdict"' in first_section.group(0)
    assert page.index('id="verdict"') < page.index('id="gates"') < page.index('class="stage"')
    assert f'<p class="verdict-word">{certificate["content"]["verdict"]}</p>' in page
    for gate in certificate["content"]["gates"]:
        assert gate["id"] in page
    for item in certificate["content"]["inputs"]:
        assert item["sha256"] in page
    assert certificate["content_sha256"] in page and certificate["content"]["knobs_hash"] in page
    assert certificate["results_sha256"] in page


@pytest.mark.parametrize("example", EXAMPLES)
def test_report_references_nothing_outside_itself(examples, example: str) -> None:
    db, runs = examples
    page = _report(db, runs[example])
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", page, flags=re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:|//)""", page, flags=re.I)
    assert "@import" not in page and "<script" not in page.lower() and "<link" not in page.lower()
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids must be unique across the inline SVGs"


@pytest.mark.parametrize("example", EXAMPLES)
def test_report_is_byte_identical_when_rendered_twice(examples, example: str) -> None:
    db, runs = examples
    assert _report(db, runs[example]) == _report(db, runs[example])


def test_sequential_plot_uses_the_recorded_checks(examples) -> None:
    db, runs = examples
    with Ledger.open(str(db), create=False) as ledger:
        data = gather_report(ledger, runs["sequential-diff"])
        certificate = ledger.certificate(runs["sequential-diff"])
    for stage_id, outputs in certificate["content"]["stages"].items():
        checks = data.checks[stage_id]
        assert len(checks) == outputs["sequence"]["checks"]
        assert checks[-1]["n"] == outputs["sequence"]["stopping_time"] and checks[-1]["stop"] is True
    page = render_report(data)
    assert "Recorded checks (7;" in page


def test_hostile_strings_are_escaped(tmp_path: Path) -> None:
    folder = tmp_path / "paired"
    shutil.copytree(ROOT / "specs" / "paired-ratio", folder)
    spec = folder / "spec.yaml"
    text = spec.read_text()
    text = re.sub(r"description: >\n(?:  .*\n)+", "description: " + json.dumps(HOSTILE) + "\n", text)
    spec.write_text(text)
    db = tmp_path / "ledger.db"
    run_id = json.loads(invoke("run", str(spec), "--ledger", str(db), "--json").stdout)["run_id"]
    assert invoke("review", run_id, "--by", HOSTILE, "--decision", "comment", "--note", HOSTILE,
                  "--ledger", str(db)).exit_code == 0
    with Ledger.open(str(db), create=False) as ledger:
        data = gather_report(ledger, run_id)
    assert data.certificate["content"]["spec"]["description"].strip() == HOSTILE
    page = render_report(dataclasses.replace(data, name=HOSTILE))
    assert "<script" not in page
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;single&#39; &#34;double&#34;"
    assert page.count(escaped) >= 4  # title, heading, description, reviewer, note
    assert "unsigned" in page


def test_reviews_and_replay_status_are_shown(tmp_path: Path, small_spec: Path) -> None:
    db = tmp_path / "ledger.db"
    run_id = json.loads(invoke("run", str(small_spec), "--ledger", str(db), "--json").stdout)["run_id"]
    page = _report(db, run_id)
    assert "never replayed" in page and "No reviews recorded" in page and "intact" in page
    assert invoke("replay", run_id, "--ledger", str(db)).exit_code == 0
    assert invoke("review", run_id, "--by", "alice@example.org", "--decision", "approved", "--note",
                  "matches the model card", "--ledger", str(db)).exit_code == 0
    page = _report(db, run_id)
    assert "REPRODUCED" in page and "never replayed" not in page
    assert "alice@example.org" in page and "matches the model card" in page and "approved" in page


def test_links_must_be_relative(examples) -> None:
    db, runs = examples
    with Ledger.open(str(db), create=False) as ledger:
        data = gather_report(ledger, runs["paired-ratio"])
    page = render_report(data, links=[Link("All runs", "../index.html")], css_href="../report.css")
    assert '<a href="../index.html">All runs</a>' in page and 'href="../report.css"' in page and "<style>" not in page
    for bad in ("https://example.org/", "//example.org/x", "javascript:alert(1)"):
        with pytest.raises(ValueError):
            render_report(data, links=[Link("x", bad)])


def test_render_time_is_a_parameter(examples) -> None:
    db, runs = examples
    with Ledger.open(str(db), create=False) as ledger:
        data = gather_report(ledger, runs["paired-ratio"])
    assert "2030-01-01T00:00:00Z" in render_report(data, rendered_at="2030-01-01T00:00:00Z")
    assert "Rendered at" not in render_report(data)


def test_cli_report_writes_refuses_to_overwrite_and_prints_json(examples, tmp_path: Path) -> None:
    db, runs = examples
    out = tmp_path / "run.html"
    result = invoke("report", runs["conformal-pac"][:10], "-o", str(out), "--ledger", str(db), "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    body = out.read_bytes()
    assert payload["ok"] is True and payload["file"] == str(out)
    assert payload["sha256"] == hashlib.sha256(body).hexdigest()
    assert body.decode("utf-8") == _report(db, runs["conformal-pac"])

    out.write_text("keep me")
    refused = invoke("report", runs["conformal-pac"], "-o", str(out), "--ledger", str(db), "--json")
    assert refused.exit_code == 2 and json.loads(refused.stdout)["ok"] is False
    assert out.read_text() == "keep me"

    forced = invoke("report", runs["conformal-pac"], "-o", str(out), "--force", "--ledger", str(db), "--json")
    assert forced.exit_code == 0 and out.read_bytes() == body
    assert json.loads(forced.stdout)["sha256"] == payload["sha256"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_importing_the_cli_loads_no_plotting_or_templating() -> None:
    code = ("import sys, cli; loaded = [m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'jinja2')]; "
            "print(loaded); sys.exit(1 if loaded else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_aborted_run_renders_its_reason_without_stages(tmp_path: Path) -> None:
    folder = tmp_path / "aborted"
    shutil.copytree(ROOT / "specs" / "paired-ratio", folder)
    spec = folder / "spec.yaml"
    spec.write_text(re.sub(r"replicates: \d+", "replicates: 200", spec.read_text()))  # below release's minimum
    db = tmp_path / "ledger.db"
    result = invoke("run", str(spec), "--ledger", str(db), "--json")
    assert result.exit_code == 3
    with Ledger.open(str(db), create=False) as ledger:
        page = render_report(gather_report(ledger, "latest"))
    assert '<p class="verdict-word">ABORTED</p>' in page and "min_replicates" in page
    assert not _sections(page)
