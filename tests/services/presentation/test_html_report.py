"""The HTML report (certa.engine.services.presentation.html, ``certa report``): every example renders with each stage's plot and tables,
the verdict first, then the stages (each opening with "How to read this"), gates, identity, verification and
reviews; nothing fetched at view time, the same bytes twice, hostile strings escaped; every golden ledger's runs
render; the bake-off, sequential and paired sections show what their outputs hold and nothing they do not."""

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

from certa.cli import main
from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.explain import EXPLAINED, how_to_read
from certa.engine.services.presentation.stages.bakeoff import bucket_lead
from certa.engine.services.presentation.html import Link, render_report
from certa.engine.services.report_data import gather_report
from certa.engine.services.presentation.html.sections import stage_section
from certa.ledger import Ledger

from tests.conftest import OFFLINE_EXAMPLES as EXAMPLES  # a served example needs its server
from tests.paired_metric_support import LM_EVAL_GATE, SLICED_GATE, SLICES, lm_eval_spec, run_spec, sliced_spec
from tests.suite_delta_support import suite_outputs, suite_spec

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = sorted(p.parent.name for p in (ROOT / "tests" / "golden").glob("*/ledger.db"))
HOSTILE = "<script>alert(\"x\")</script> & 'single' \"double\""


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def examples(example_runs: tuple[Path, dict[str, str]]) -> tuple[Path, dict[str, str]]:
    """Every example spec run into one ledger (``example_runs``, shared by the session): (ledger path, example
    folder -> run id)."""
    return example_runs


def _report(db: Path, run_id: str) -> str:
    with Ledger.open(str(db), create=False) as ledger:
        return render_report(gather_report(ledger, run_id))


@pytest.fixture(scope="module")
def pages(examples) -> dict[str, str]:
    """Each example's report, rendered once for the module's read-only checks (example folder -> HTML)."""
    db, runs = examples
    return {example: _report(db, run_id) for example, run_id in runs.items()}


def _sections(page: str) -> dict[str, str]:
    """Stage id -> the HTML of its section."""
    found = re.findall(r'<section class="stage" id="stage-([^"]+)"[^>]*>(.*?)</section>', page, flags=re.S)
    return dict(found)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_stage_has_a_plot_and_tables_after_the_verdict(examples, pages, example: str) -> None:
    db, runs = examples
    page = pages[example]
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
    # verdict -> stages with their plots -> gates -> identity -> verification -> reviews
    last_stage = page.rindex('<section class="stage"')
    assert page.index('id="verdict"') < page.index('<section class="stage"') <= last_stage < page.index('id="gates"')
    assert page.index('id="gates"') < page.index('id="identity"') < page.index('id="verification"')
    assert page.index('id="verification"') < page.index('id="reviews"')
    assert f'<p class="verdict-word">{certificate["content"]["verdict"]}</p>' in page
    for gate in certificate["content"]["gates"]:
        assert gate["id"] in page
    for item in certificate["content"]["inputs"]:
        assert item["sha256"] in page
    assert certificate["content_sha256"] in page and certificate["content"]["knobs_hash"] in page
    assert certificate["results_sha256"] in page


@pytest.mark.parametrize("example", EXAMPLES)
def test_report_references_nothing_outside_itself(pages, example: str) -> None:
    page = pages[example]
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", page, flags=re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:|//)""", page, flags=re.I)
    assert "@import" not in page and "<script" not in page.lower() and "<link" not in page.lower()
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "element ids must be unique across the inline SVGs"


# One example in the unit tier, every other under ``slow`` (each renders its report twice).
@pytest.mark.parametrize("example", [pytest.param(e, marks=[] if e == "paired-ratio" else [pytest.mark.slow])
                                     for e in EXAMPLES])
def test_report_is_byte_identical_when_rendered_twice(examples, pages, example: str) -> None:
    db, runs = examples
    assert _report(db, runs[example]) == pages[example]


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
    for stage_id, html in _sections(page).items():
        n = len(data.checks[stage_id])
        # a summary of the checks, and the full table folded inside <details>
        assert "checks recorded" in html and f"All {n} recorded checks" in html
        details = re.search(r"<details[^>]*>(.*?)</details>", html, flags=re.S)
        assert details is not None and details.group(1).count("<tr>") == n + 1  # header + one row per check
        assert html.count("<tr>") - details.group(1).count("<tr>") < 40  # the rest of the section stays short


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


SPOOFED = "acme\u202e<b>devorppa</b> & --\x1b[31m\x07"
"""A name from a spec or its data with a right-to-left override, markup, a comment end and control characters."""


def test_plot_labels_lose_control_and_bidi_characters_and_stay_well_formed_xml() -> None:
    """Gate, vendor, bucket, band, metric and scope names reach the SVG plots without U+202E or control
    characters (as glyph paths and in matplotlib's comments), and the SVG is still well-formed, escaped XML."""
    import xml.etree.ElementTree as ET

    from certa.engine.services.presentation.html import plots

    svgs = [
        plots.bakeoff_plot("b", buckets=[(SPOOFED, [(SPOOFED, 0.1, [0.0, 0.2]), ("other", -0.1, None)])],
                           band_edges={SPOOFED: 0.05}, value_label=SPOOFED,
                           colours=plots.vendor_colours([SPOOFED, "other"])),
        plots.ratio_plot("r", ratio=1.01, display_ci=[0.99, 1.03], confidence_level=0.95,
                         gate_lines=[(SPOOFED, 1.05)], drift_ratio=None, drift_band=None, delta=None),
        plots.pac_bounds_plot("p", metrics=[SPOOFED], scopes=[SPOOFED], bounds={(SPOOFED, SPOOFED): (0.1, 0.05, 0.2)},
                              thresholds=[(SPOOFED, SPOOFED, 0.15)]),
        plots.difference_plot("d", overall=("overall", 0.01, [-0.02, 0.04]), slices=[(SPOOFED, 0.0, [-0.1, 0.1])],
                              confidence_level=0.95, margin=0.05, gate_lines=[(SPOOFED, -0.03)], value_label=SPOOFED),
    ]
    for svg in svgs:
        assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", svg)
        ET.fromstring(svg)  # well-formed: the name's markup and "--" are escaped inside the comments
        assert "<b>" not in svg and "acme&lt;b&gt;devorppa&lt;/b&gt; &amp;" in svg


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


def test_cli_report_writes_refuses_to_overwrite_and_prints_json(examples, pages, tmp_path: Path) -> None:
    db, runs = examples
    out = tmp_path / "run.html"
    result = invoke("report", runs["conformal-pac"][:10], "-o", str(out), "--ledger", str(db), "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    body = out.read_bytes()
    assert payload["ok"] is True and payload["file"] == str(out)
    assert payload["sha256"] == hashlib.sha256(body).hexdigest()
    assert body.decode("utf-8") == pages["conformal-pac"]

    out.write_text("keep me")
    refused = invoke("report", runs["conformal-pac"], "-o", str(out), "--ledger", str(db), "--json")
    assert refused.exit_code == 2 and json.loads(refused.stdout)["ok"] is False
    assert out.read_text() == "keep me"

    forced = invoke("report", runs["conformal-pac"], "-o", str(out), "--force", "--ledger", str(db), "--json")
    assert forced.exit_code == 0 and out.read_bytes() == body
    assert json.loads(forced.stdout)["sha256"] == payload["sha256"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind


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


# -- how to read ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("example", EXAMPLES)
def test_every_stage_section_opens_with_how_to_read(examples, pages, example: str) -> None:
    db, runs = examples
    page = pages[example]
    with Ledger.open(str(db), create=False) as ledger:
        content = ledger.certificate(runs[example])["content"]
    uses = {s["id"]: s["use"] for s in content["knobs"]["stages"]}
    for stage_id, html in _sections(page).items():
        assert uses[stage_id] in EXPLAINED
        box = re.search(r'<aside class="how-to-read"[^>]*>(.*?)</aside>', html, flags=re.S)
        assert box is not None and "How to read this" in box.group(1), stage_id
        assert html.index('class="how-to-read"') < html.index('<figure class="plot"')
        for paragraph in how_to_read(uses[stage_id], content["stages"][stage_id]):
            assert f"<p>{paragraph}</p>".replace('"', "&#34;").replace("'", "&#39;") in box.group(1)


def test_every_stage_type_names_a_presentation_module_with_a_section_and_texts() -> None:
    """``StageType.presentation`` is a module name the core cannot import: each must import and define both parts."""
    from certa.engine.core.stages import REGISTRY
    from certa.engine.services.presentation.stages import presentation_of

    for stage in REGISTRY:
        presentation = presentation_of(stage.ref)
        assert presentation is not None, stage.ref
        assert callable(presentation.section) and callable(presentation.how_to_read), stage.ref
    assert EXPLAINED == frozenset(REGISTRY.names())


@pytest.mark.parametrize("use", sorted(EXPLAINED))
def test_how_to_read_never_raises_on_missing_or_odd_keys(use: str) -> None:
    for outputs in ({}, {"results": None, "buckets": {"x": None}, "range": "?", "joint_guarantee": []},
                    {"buckets": {"all": {"leader": "a", "ranking": ["a"], "pairs": [None]}}}):
        texts = how_to_read(use, outputs)
        assert texts and all(isinstance(t, str) and t for t in texts)
    assert how_to_read("no.such_stage", {}) == ()
    assert how_to_read(f"{use}@1.0.0", {}) == how_to_read(use, {})


def test_how_to_read_depends_on_the_decision_and_the_clipping() -> None:
    same = how_to_read("sequential.diff", {"results": {"decision": "SAME", "estimand": "mean score difference"},
                                           "config": {"alpha": 0.05, "equivalence_band": 0.01},
                                           "method": {"validity": "anytime-valid"},
                                           "range": {"low": -0.2, "high": 0.2, "source": "declared", "n_clipped": 0}})
    text = " ".join(same)
    assert "NOT identical" in text and "anytime-valid" in text and "[-0.2, 0.2]" in text and "part of the claim" in text
    assert "clipped to it" not in text
    clipped = " ".join(how_to_read("sequential.diff", {
        "results": {"decision": "SAME", "raw_mean": -0.03}, "config": {"equivalence_band": 0.005},
        "clip": {"applies": True, "low": 0, "high": 0.2, "n_clipped": 1200}}))
    assert "1200 score(s) fell outside the range" in clipped and "-0.03" in clipped
    assert "NOT mean the models are the same" in " ".join(how_to_read("sequential.diff",
                                                                      {"results": {"decision": "UNDECIDED"}}))
    asymptotic = " ".join(how_to_read("sequential.diff", {"method": {"validity": "asymptotic anytime-valid"},
                                                          "range": {"low": None, "high": None}}))
    assert "approximation at small n" in asymptotic and "no score range" in asymptotic
    fixed = " ".join(how_to_read("sequential.diff", {"method": {"validity": "not valid under optional stopping"}}))
    assert "indicative" in fixed


def test_the_lead_of_an_old_bakeoff_version_comes_from_its_pairs() -> None:
    bucket = {"leader": "b", "ranking": ["b", "a"], "pairs": [
        {"a": "a", "b": "b", "diff_u": -0.3, "p_holm": 0.01, "significant": True, "reason": None}]}
    lead = bucket_lead(bucket)
    assert lead is not None and (lead.leader, lead.runner_up, lead.diff_u, lead.significant) == ("b", "a", 0.3, True)
    assert bucket_lead({**bucket, "pairs": [{"a": "a", "b": "b", "reason": "not_in_pairs"}]}) is None
    assert bucket_lead({"leader": None, "ranking": ["a", "b"]}) is None
    assert bucket_lead({**bucket, "rank_by": "RSI_pool"}) is None  # the bootstrap tests the gated pools only


# -- golden ledgers: every recorded stage version renders ---------------------------------------------------------

# The newest golden ledger renders in the unit tier; every older one under ``slow`` (about 1 s each).
@pytest.mark.parametrize("version", [pytest.param(v, marks=[] if v == GOLDEN[-1] else [pytest.mark.slow])
                                     for v in GOLDEN])
def test_every_golden_run_renders(version: str, tmp_path: Path) -> None:
    copy = tmp_path / "ledger.db"
    shutil.copyfile(ROOT / "tests" / "golden" / version / "ledger.db", copy)
    assert invoke("migrate", "--ledger", str(copy)).exit_code == 0
    with Ledger.open(str(copy), create=False) as ledger:
        for row in ledger.runs():
            page = render_report(gather_report(ledger, row.run_id))
            content = ledger.certificate(row.run_id)["content"]
            sections = _sections(page)
            assert list(sections) == [s["id"] for s in content["knobs"]["stages"]]
            assert all('class="how-to-read"' in html for html in sections.values())
            if "cmp" in content["stages"]:  # bakeoff.compare 1.0/1.1: the headline from the pairs' Holm p-values
                lead = bucket_lead(content["stages"]["cmp"]["buckets"]["e5"])
                assert lead is not None and not lead.significant
                assert (f"vendor-a leads e5, but the lead over vendor-b is not significant (p_Holm = "
                        f"{lead.p_holm:.4g})") in sections["cmp"]
                assert "ci_tanh" not in sections["cmp"] and "diff_rsi" not in sections["cmp"]
            if "finetune" in content["stages"]:
                version = next(s["version"] for s in content["knobs"]["stages"] if s["id"] == "finetune")
                estimand = ("mean of the scores clipped to [0, 0.2]" if version.startswith("1.")  # 1.x: clip block
                            else "mean score difference")                          # 2.x: a declared range, no clip
                assert f"estimand: {estimand}" in sections["finetune"]
                assert "scores clipped: 0" in sections["finetune"] and "raw mean (unclipped)" in sections["finetune"]


# -- bake-off ----------------------------------------------------------------------------------------------------

def _vendor_fills(html: str) -> dict[tuple[str, int], set[str]]:
    """(plot key, vendor index) -> the fill colours of that vendor's point markers."""
    fills: dict[tuple[str, int], set[str]] = {}
    for key, index, body in re.findall(r'<g id="(.+?)-vendor(\d+)-row\d+">(.*?)</g>\s*</g>', html, flags=re.S):
        fills.setdefault((key, int(index)), set()).update(re.findall(r"fill: (#[0-9a-f]{6})", body))
    return fills


def test_each_vendor_has_one_colour_in_every_bakeoff_plot(examples, pages) -> None:
    db, runs = examples
    page = pages["vendor-bakeoff"]
    fills = _vendor_fills(page)
    plots_seen = {key for key, _ in fills}
    assert len(plots_seen) >= 2
    by_vendor: dict[int, set[str]] = {}
    for (_, index), colours in fills.items():
        by_vendor.setdefault(index, set()).update(colours)
    assert len(by_vendor) >= 3 and all(len(colours) == 1 for colours in by_vendor.values()), by_vendor
    assert len({next(iter(c)) for c in by_vendor.values()}) == len(by_vendor)  # distinct vendors, distinct colours


def test_bakeoff_section_states_the_estimand_overlays_and_lead(examples, pages) -> None:
    db, runs = examples
    page = pages["vendor-bakeoff"]
    with Ledger.open(str(db), create=False) as ledger:
        outputs = ledger.certificate(runs["vendor-bakeoff"])["content"]["stages"]["cmp"]
    html = _sections(page)["cmp"]
    assert "Δu" in html and "CI of Δu" in html and "display: tanh(Δu)" in html and "display: tanh(CI)" in html
    for bucket in outputs["buckets"].values():
        for pair in bucket["pairs"]:
            if pair.get("reason") is None:  # Δu is shown, diff_rsi is not (it has no interval)
                assert f"{pair['diff_u']:.4g}" in html
                assert f"{pair['diff_rsi']:.6g}" not in html
        lead = bucket_lead(bucket)
        if lead is not None and not lead.significant:
            assert f"but the lead over {lead.runner_up} is not significant" in html
    assert "tokens median" in html and "latency ms mean" in html
    assert "cost median" not in html  # the example has no cost column: absent data are not shown
    for note in outputs["input"].get("data_notes", []):  # 1.2.0: what was done to the data, as recorded
        assert note.replace("'", "&#39;") in html
    assert "What was done to the data" not in _sections(page)["merged"]  # no notes recorded: no table


def test_bakeoff_cost_overlay_and_old_flat_ci_tanh() -> None:
    outputs = {"bootstrap": {"confidence_level": 0.95, "replicates": 1000}, "buckets": {"all": {
        "leader": "x", "ranking": ["x", "y"], "rank_by": "RSI_pool_env",
        "vendors": {"x": {"rank": 1, "RSI_pool_env": 0.5, "cost_median": 0.25, "cost_mean": 0.375},
                    "y": {"rank": 2, "RSI_pool_env": 0.4}},
        "pairs": [{"a": "x", "b": "y", "diff_u": 0.125, "ci_u": [-0.5, 0.75], "ci_tanh": [-0.4621, 0.6351],
                   "diff_rsi": 0.1, "p_two_sided": 0.0, "p_holm": 0.0, "significant": True, "reason": None}]}}}
    section = stage_section("cmp", "bakeoff.compare", "1.1.0", outputs, [], [])
    cells = [c for t in section.tables for row in t.rows for c in row]
    assert "cost median" in [h for t in section.tables for h in t.headers] and "0.375" in cells
    assert "tokens median" not in [h for t in section.tables for h in t.headers]
    assert "[-0.4621, 0.6351]" in cells and "0.1" not in cells  # the flat 1.1 ci_tanh as display; no diff_rsi
    assert "< 0.002" in cells  # p = 0 means p < 2/B
    assert section.facts == ("x leads all; the lead over y is significant (p_Holm < 0.002).",)


# -- sequential ---------------------------------------------------------------------------------------------------

def test_sequential_states_estimand_clipped_count_and_raw_mean_beside_the_decision(examples, pages) -> None:
    db, runs = examples
    page = pages["sequential-diff"]
    with Ledger.open(str(db), create=False) as ledger:
        stages = ledger.certificate(runs["sequential-diff"])["content"]["stages"]
    for stage_id, html in _sections(page).items():
        results, block = stages[stage_id]["results"], stages[stage_id]["range"]
        facts = re.search(r'<ul class="facts">(.*?)</ul>', html, flags=re.S)
        assert facts is not None and html.index('class="decision"') < html.index('class="facts"')
        assert f"estimand: {results['estimand']}" in facts.group(1)
        assert f"scores clipped: {block['n_clipped']}" in facts.group(1)
        assert f"raw mean (unclipped): {results['raw_mean']:.6g}" in facts.group(1)
        assert block["statement"] in html


def test_sequential_range_2_0_0_with_clipped_scores() -> None:
    outputs = {"results": {"decision": "SAME", "estimand": "mean of the scores clipped to [0, 0.2]", "mean": 0.001,
                           "raw_mean": -0.03},
               "range": {"low": 0, "high": 0.2, "source": "declared", "out_of_range": "clip", "n_outside": 1200,
                         "n_clipped": 1100, "statement": "scores outside [0, 0.2] are clipped"},
               "config": {"equivalence_band": 0.005}, "sequence": {}, "method": {}}
    section = stage_section("s", "sequential.diff", "2.0.0", outputs, [], [])
    assert section.facts == ("estimand: mean of the scores clipped to [0, 0.2]", "scores clipped: 1100",
                             "raw mean (unclipped): -0.03")
    assert any("1100 score(s) fell outside the range" in p for p in section.how_to_read)


def test_sequential_shows_what_a_live_scorer_spent_apart_from_the_checks() -> None:
    outputs = {"results": {"decision": "SAME", "n_used": 40}, "config": {}, "sequence": {"checks": 2}, "method": {}}
    checks = [{"n": 20, "lower": -0.1, "upper": 0.1, "mean": 0.0, "decision_kind": "sequential_check"},
              {"n": 40, "lower": -0.01, "upper": 0.01, "mean": 0.0, "stop": True, "decision": "SAME",
               "decision_kind": "sequential_check"},
              {"scorer": "hf_models", "prompts_scored": 40, "n_max": 200, "stopped_before_n_max": True,
               "forward_passes": 80, "model_calls": 20, "tokens": 1234, "decision_kind": "scorer_usage"}]
    section = stage_section("s", "sequential.diff", "2.0.0", outputs, [], checks)
    tables = {t.caption: t for t in section.tables}
    assert tables["Checks (the ledger's sequential_check decisions)"].rows[0] == ("checks recorded", "2")
    assert "All 2 recorded checks" in tables
    usage = tables["What the scorer spent (the ledger's scorer_usage decision)"].rows
    assert usage == (("scorer", "hf_models"), ("prompts scored", "40"), ("n_max (prompts the run could score)", "200"),
                     ("stopped before n_max", "yes"), ("forward passes", "80"), ("model calls", "20"),
                     ("tokens", "1234"))
    without = stage_section("s", "sequential.diff", "2.0.0", outputs, [], checks[:2])
    assert not any(t.caption.startswith("What the scorer spent") for t in without.tables)


# -- paired --------------------------------------------------------------------------------------------------------

def test_paired_without_phase_column_shows_no_drift(examples, tmp_path: Path) -> None:
    folder = tmp_path / "nophase"
    (folder / "data").mkdir(parents=True)
    for arm in ("baseline", "subject"):
        lines = (ROOT / "specs" / "paired-ratio" / "data" / f"{arm}.csv").read_text().splitlines()
        header = lines[0].split(",")
        phase = header.index("phase")
        kept = [",".join(c for i, c in enumerate(line.split(",")) if i != phase) for line in lines
                if line.split(",")[phase] != "preview"]
        (folder / "data" / f"{arm}.csv").write_text("\n".join(kept) + "\n")
    (folder / "spec.yaml").write_text(
        "certa: 1\nname: nophase\nseed: 1\nprofile: dev\ninputs:\n  baseline: {path: data/baseline.csv}\n"
        "  subject: {path: data/subject.csv}\nstages:\n  - id: ratio\n    use: paired.ppl_ratio\n"
        "    with: {baseline: baseline, subject: subject, replicates: 500}\n")
    db = tmp_path / "ledger.db"
    result = invoke("run", str(folder / "spec.yaml"), "--ledger", str(db), "--json")
    assert result.exit_code == 0, result.output
    page = _report(db, json.loads(result.stdout)["run_id"])
    html = _sections(page)["ratio"]
    assert "drift" not in html.lower() and "OUTSIDE" not in html and "preview" not in html.lower().replace(
        "preview/final drift", "")
    with_drift = _sections(_report(examples[0], examples[1]["paired-ratio"]))["ratio"]
    assert "Preview / final drift" in with_drift
    axes = lambda h: len(re.findall(r'<g id="[^"]*-axes_\d+">', h))  # noqa: E731
    assert axes(html) == axes(with_drift) - 1  # no empty drift panel


# -- gates --------------------------------------------------------------------------------------------------------

def test_gates_show_value_and_threshold_at_the_precision_that_decided(tmp_path: Path) -> None:
    folder = tmp_path / "close"
    shutil.copytree(ROOT / "specs" / "paired-ratio", folder)
    spec = folder / "spec.yaml"
    spec.write_text(spec.read_text().replace("max: 1.05", "max: 1.013648"))  # the upper bound is 1.0136479...
    db = tmp_path / "ledger.db"
    result = invoke("run", str(spec), "--ledger", str(db), "--json")
    assert result.exit_code == 0, result.output
    page = _report(db, json.loads(result.stdout)["run_id"])
    gates = page[page.index('id="gates"'):page.index('id="identity"')]
    row = re.search(r"<tr><td>no-regression</td>.*?</tr>", gates, flags=re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), flags=re.S)
    value, threshold = cells[2], cells[3]
    assert threshold == "max 1.013648" and value.startswith("1.013647")  # not "1.01365" against "max 1.01365"


def test_a_stage_type_without_a_layout_shows_its_outputs_as_a_table() -> None:
    from certa.engine.services.presentation.html.sections import stage_section
    section = stage_section("x", "future.stage", "9.0.0", {"answer": 42}, (), ())
    assert (section.stage_id, section.use) == ("x", "future.stage")
    assert "No report layout" in section.summary and section.tables


# -- paired.metric_delta ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def metric_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The lm-eval fixtures (accuracy on certa_mc) and the sliced CSV tables, each run once into one ledger."""
    folder = tmp_path_factory.mktemp("metric")
    db = folder / "ledger.db"
    return db, {"lm-eval": run_spec(lm_eval_spec(folder / "lm-eval"), db),
                "sliced": run_spec(sliced_spec(folder / "sliced"), db)}


def _metric_stage(db: Path, run_id: str) -> tuple[str, dict, list]:
    """(the HTML of stage ``acc``, its stored outputs, the run's gates)."""
    with Ledger.open(str(db), create=False) as ledger:
        content = ledger.certificate(run_id)["content"]
    return _sections(_report(db, run_id))["acc"], content["stages"]["acc"], content["gates"]


def _tables(html: str) -> dict[str, list[list[str]]]:
    """Caption -> the rows of that table, each a list of its cells' text (badges unwrapped)."""
    found = {}
    for caption, body in re.findall(r"<caption>(.*?)</caption>.*?<tbody>(.*?)</tbody>", html, flags=re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
        found[caption] = [[re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
                          for row in rows]
    return found


def _escaped(text: str) -> str:
    """``text`` as the templates write it (``markupsafe`` escaping)."""
    from markupsafe import escape

    return str(escape(text))


def _assert_reads_in_order(html: str, use: str, outputs: dict) -> None:
    """A stage section opens with its "How to read this" paragraphs, then its plot, then its tables."""
    box = re.search(r'<aside class="how-to-read"[^>]*>(.*?)</aside>', html, flags=re.S)
    assert box is not None
    for paragraph in how_to_read(use, outputs):
        assert f"<p>{_escaped(paragraph)}</p>" in box.group(1)
    assert html.index('class="how-to-read"') < html.index('<figure class="plot"') < html.index("<table")


def _svg_strings(html: str) -> set[str]:
    """The strings a plot drew (matplotlib writes each one as an XML comment before its glyphs)."""
    return {comment.strip() for comment in re.findall(r"<!--(.*?)-->", html, flags=re.S)}


def test_metric_delta_report_renders_every_part(metric_runs) -> None:
    db, runs = metric_runs
    html, outputs, gates = _metric_stage(db, runs["lm-eval"])
    assert '<span class="badge badge-fail">NOT shown non-inferior at margin 0.05</span>' in html
    assert ("acc over 24 paired items: subject 0.1667, baseline 0.08333, difference +0.08333 (subject − baseline), "
            "95% CI [-0.06614, 0.2585] (Tango score interval for paired proportions). NOT shown non-inferior at margin "
            "0.05: the data do not rule out that the subject is 5 points or more worse (Tango score test, inverting "
            "the printed Tango interval, one-sided p = 0.03323 ≥ α = 0.025).") in html
    assert "<li>every item paired (24)</li>" in html
    # both sides ran one task configuration (the model arguments lm-eval copies into its metadata are left out of
    # the digest): no false "the exports differ" line
    assert outputs["sources"]["baseline"]["task_config_sha256"] == outputs["sources"]["subject"]["task_config_sha256"]
    assert "the exports differ in" not in html
    assert re.search(r"<li>both exports state the same [^<]*task config digest \(SHA-256\)</li>", html)
    _assert_reads_in_order(html, "paired.metric_delta", outputs)

    tables = _tables(html)
    provenance = [f"Provenance: {side} (as its export states it)" for side in ("baseline", "subject")]
    two_by_two = "Paired 2×2 table of the items (discordant: 2 correct for the subject only, 0 for the baseline only)"
    assert list(tables) == ["Result", two_by_two, "Exact McNemar test", "Non-inferiority test",
                            "Minimum detectable difference at n = 24", "Pairing of the items", *provenance]
    result = dict(map(tuple, tables["Result"]))
    assert result["95% CI of the difference"] == "[-0.0661409, 0.258488]" and result["paired items n"] == "24"
    counts = outputs["table"]
    assert tables[two_by_two] == [
        ["subject correct (1)", str(counts["both"]), str(counts["subject_only"]),
         str(counts["both"] + counts["subject_only"])],
        ["subject wrong (0)", str(counts["baseline_only"]), str(counts["neither"]),
         str(counts["baseline_only"] + counts["neither"])],
        ["total", str(counts["both"] + counts["baseline_only"]), str(counts["subject_only"] + counts["neither"]), "24"]]
    assert dict(map(tuple, tables["Exact McNemar test"]))["p-value (two-sided)"] == "0.5"
    assert dict(map(tuple, tables["Non-inferiority test"]))["verdict"] == "NOT shown non-inferior"
    detectable = dict(map(tuple, tables["Minimum detectable difference at n = 24"]))
    assert detectable["attainable with the discordance observed"] == "no"
    for side, caption in zip(("baseline", "subject"), provenance):
        stated = outputs["sources"][side]
        rows = dict(map(tuple, tables[caption]))
        assert rows["tool"] == "lm-evaluation-harness" and rows["tool version"] == "0.4.13"
        assert rows["task"] == "certa_mc" and rows["task config digest (SHA-256)"] == stated["task_config_sha256"]
        assert stated["models"] and stated["files"]
        for entry in stated["models"]:
            assert rows[f"model: {entry['field']}"] == _escaped(entry["value"])
        for entry in stated["details"]:
            assert rows[entry["field"]] == _escaped(entry["value"])
        for entry in stated["files"]:
            assert rows[f"file read as {_escaped(entry['name'])} (SHA-256)"] == entry["sha256"]

    drawn = _svg_strings(html)
    assert {"overall (n = 24)", "−margin −0.05 (non-inferiority)", f"gate {LM_EVAL_GATE[0]}"} <= drawn
    assert not any(g["id"] == "no-worse-than-5-points" and f"gate {g['id']}" in drawn for g in gates)  # not on the axis


def test_metric_delta_slices_and_unpaired_items(metric_runs) -> None:
    db, runs = metric_runs
    html, outputs, _ = _metric_stage(db, runs["sliced"])
    assert '<span class="badge badge-pass">non-inferior at margin 0.05</span>' in html
    assert "Non-inferior at margin 0.05: the subject is at most 5 points worse (Tango score test" in html
    assert "<li>items not paired (not in the estimate): 1 only in the baseline, 1 only in the subject</li>" in html
    assert "<li>both exports state the same tool</li>" in html
    tables = _tables(html)
    caption = next(c for c in tables if "slices" in c)
    assert caption == ("4 slices: p-values of the Tango non-inferiority test, inverting the Tango intervals of the "
                       "rows, adjusted across slices by Holm (familywise error rate); intervals not adjusted")
    rows = outputs["slices"]["rows"]
    assert sorted(row["slice"] for row in rows) == sorted(SLICES)
    assert tables[caption] == [[row["slice"], str(row["items"]), *(format_value(v, digits=6) for v in (
        row["estimate"], *row["ci"], row["p_value"], row["adjusted_p_value"]))] for row in rows]
    pairing = dict(map(tuple, tables["Pairing of the items"]))
    for side, key in (("baseline", "q0008"), ("subject", "q0005")):
        assert pairing[f"items not paired: only in the {side}"] == "1"
        assert pairing[f"first keys: only in the {side}"] == key
    assert re.search(r'<td><span class="badge badge-fail">1</span></td>', html)
    assert "first keys: with different identity digests" not in pairing
    assert dict(map(tuple, tables["Provenance: baseline (as its export states it)"]))["tool version"] == "not stated"
    drawn = _svg_strings(html)
    assert {f"{row['slice']} (n = {row['items']})" for row in rows} <= drawn
    assert {"overall (n = 598)", f"gate {SLICED_GATE[0]}", "95% CI per slice (unadjusted)"} <= drawn
    assert "Slices: each of the 4 slices" in html and "were not paired" in html


def test_difference_plot_is_well_formed_deterministic_and_keyed() -> None:
    import xml.etree.ElementTree as ET

    from certa.engine.services.presentation.html import plots

    def draw() -> str:
        return plots.difference_plot("acc-difference", overall=("overall (n = 598)", 0.018, [0.0015, 0.037]),
                                     slices=[("s" * 60, -0.05, [-0.1, -0.03]), ("b", 0.0, [-0.02, 0.02])],
                                     confidence_level=0.95, margin=0.05, gate_lines=[("g", -0.03)],
                                     value_label="difference in acc")
    svg = draw()
    assert svg == draw() and svg.startswith('<svg role="img" ')
    ET.fromstring(svg)
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert ids and all(i.startswith("acc-difference-") for i in ids)
    assert "s" * 35 + "…" in _svg_strings(svg)  # a long slice name is cut, the plot keeps its width
    bare = plots.difference_plot("x", overall=("overall", None, None), confidence_level=None, margin=None,
                                 value_label="difference")
    ET.fromstring(bare)
    assert "−margin" not in bare and "gate" not in bare


def _metric_outputs(**changes) -> dict:
    """Stored outputs of a binary paired.metric_delta (the shape 1.0.0 records), with ``changes``."""
    outputs = {"metric": "acc", "scale": "binary", "direction": "difference = subject − baseline", "n_paired": 400,
               "baseline_mean": 0.7, "subject_mean": 0.695,
               "difference": {"estimate": -0.005, "ci": [-0.009, 0.001], "confidence_level": 0.95,
                              "method": "tango_score"},
               "table": {"both": 270, "subject_only": 8, "baseline_only": 10, "neither": 112},
               "test": {"name": "exact McNemar", "null": "equal", "p_value": 0.81},
               "noninferiority": {"margin": 0.01, "null": "Δ ≤ −0.01", "method": "Tango score test",
                                  "alpha": 0.025, "p_value": 0.001, "noninferior": True},
               "detectable_difference": {"difference": 0.03, "power": 0.8, "alpha_two_sided": 0.05,
                                         "attainable": True, "approximation": "Connor (1987)"},
               "slices": None,
               "pairing": {"key_fields": ["doc_id"], "baseline_items": 400, "subject_items": 400, "paired": 400,
                           "unmatched_baseline": 0, "unmatched_subject": 0, "identity_mismatched": 0,
                           "identity_fields_mismatched": [], "examples": {}},
               "sources": {}}
    outputs.update(changes)
    return outputs


def test_metric_delta_words_follow_the_verdict_the_scale_and_the_pairing() -> None:
    passed = _metric_outputs()
    section = stage_section("acc", "paired.metric_delta", "1.0.0", passed, (), ())
    assert section.ok is True and section.decision == "non-inferior at margin 0.01"
    assert ("Non-inferior at margin 0.01: the subject is at most 1 point worse (Tango score test, one-sided "
            "p = 0.001 < α = 0.025).") in section.summary
    text = " ".join(how_to_read("paired.metric_delta", passed))
    assert "compatible with a loss no larger than the margin" in text
    assert "does NOT say that the models are equal" in text
    assert "Δ = subject − baseline" in text and "fair sample" in text and "identity digests" in text
    assert "Minimum detectable difference" in text and "not attainable" not in text and "Here every item paired" in text

    failed = _metric_outputs(noninferiority={**passed["noninferiority"], "p_value": 0.2, "noninferior": False},
                             detectable_difference={**passed["detectable_difference"], "attainable": False},
                             pairing={**passed["pairing"], "unmatched_subject": 3, "identity_mismatched": 2})
    section = stage_section("acc", "paired.metric_delta", "1.0.0", failed,
                            [{"id": "g", "metric": "acc.difference.ci[0]", "passed": True, "threshold": {"min": -0.1}}],
                            ())
    assert section.ok is True and section.decision == "NOT shown non-inferior at margin 0.01"  # the gates decide ok
    assert ("NOT shown non-inferior at margin 0.01: the data do not rule out that the subject is 1 point or more "
            "worse (Tango score test, one-sided p = 0.2 ≥ α = 0.025).") in section.summary
    text = " ".join(how_to_read("paired.metric_delta", failed))
    assert "does NOT show that the subject is worse" in text and "not attainable" in text
    assert "3 item(s) only in the subject, 2 item(s) with different identity digests were not paired" in text

    unset = " ".join(how_to_read("paired.metric_delta", _metric_outputs(noninferiority=None)))
    assert "no non-inferiority margin was set" in unset and "does NOT mean the models are equal" in unset

    bounded = _metric_outputs(scale="bounded", range=[0, 1], table=None, test=None, detectable_difference=None,
                              difference={"estimate": 0.01, "ci": [-0.05, 0.07], "confidence_level": 0.9,
                                          "method": "betting", "validity": "anytime-valid"},
                              noninferiority={"margin": 0.03, "method": "lower confidence bound above −margin",
                                              "alpha": 0.05, "lower_bound": -0.05, "noninferior": False})
    section = stage_section("f1", "paired.metric_delta", "1.0.0", bounded, (), ())
    assert section.ok is False and not any("2×2" in t.caption for t in section.tables)
    assert "the interval's lower bound -0.05 does NOT lie above −margin = -0.03" in section.summary
    assert "0.03 or more worse" in section.summary
    assert "90% CI [-0.05, 0.07] (betting confidence sequence)" in section.summary
    text = " ".join(how_to_read("paired.metric_delta", bounded))
    assert "declared range [0, 1]" in text and "confidence sequence" in text and "Minimum detectable" not in text


@pytest.mark.parametrize("outputs", [{}, {"difference": None, "table": {"both": "x"}, "range": "?",
                                          "slices": {"rows": [None, {"ci": "ab"}]}, "sources": {"baseline": 1},
                                          "pairing": {"examples": {"unmatched_baseline": "q"}},
                                          "noninferiority": {"margin": "?"}}])
def test_metric_delta_section_reads_odd_outputs(outputs: dict) -> None:
    section = stage_section("acc", "paired.metric_delta", "1.0.0", outputs, (), ())
    assert section.plots and "<svg" in section.plots[0].svg and section.tables and section.how_to_read


# -- paired.suite_delta -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Two lm-eval suites run once each into one ledger: three tasks with one much worse (margin 0.1, a gate on the
    claim and one on the pooled interval), and the same suites without a margin."""
    folder = tmp_path_factory.mktemp("suite")
    db = folder / "ledger.db"
    return db, {"margin": run_spec(suite_spec(folder / "margin"), db),
                "none": run_spec(suite_spec(folder / "none", margin=None, pooled="macro"), db)}


def _suite_stage(db: Path, run_id: str) -> tuple[str, dict]:
    """(the HTML of stage ``suite``, its stored outputs)."""
    with Ledger.open(str(db), create=False) as ledger:
        content = ledger.certificate(run_id)["content"]
    return _sections(_report(db, run_id))["suite"], content["stages"]["suite"]


def _task_cells(row: dict, claimed: bool) -> tuple[list[str], list[str]]:
    """A task's rows as the two per-task tables write them (4 significant digits): its difference, its tests."""
    def four(value) -> str:
        return format_value(value, digits=4)
    differs = "no" if not row["differs"] else f"yes, {'worse' if row['estimate'] < 0 else 'better'}"
    return ([row["task"], str(row["units"]), four(row["baseline_mean"]), four(row["subject_mean"]),
             four(row["estimate"]), f"[{four(row['ci'][0])}, {four(row['ci'][1])}]",
             *([four(row["margin"]), row["decision"]] if claimed else [])],
            [row["task"], four(row["estimate"]), four(row["p_value"]), four(row["adjusted_p_value"]), differs,
             four(row["detectable_difference"]) + ("" if row["detectable_attainable"] else " (not attainable)")])


def test_suite_delta_report_renders_every_part(suite_runs) -> None:
    db, runs = suite_runs
    html, outputs = _suite_stage(db, runs["margin"])
    every, pooled, which = outputs["every_task"], outputs["pooled"], outputs["which_differ"]
    assert every["decision"] == "INFERIOR" and every["inferior_tasks"] == ["hellaswag"]  # the support's design
    assert '<span class="badge badge-fail">INFERIOR on task hellaswag</span>' in html
    assert (f"acc over {outputs['n_paired']} paired items in 3 tasks: pooled micro difference "
            f"{format_value(pooled['estimate'], digits=4)} (subject − baseline), 95% CI "
            f"[{format_value(pooled['ci'][0], digits=4)}, {format_value(pooled['ci'][1], digits=4)}]") in html
    assert ("INFERIOR on task hellaswag at margin 0.1 (10 points) on every task: the whole interval lies below "
            "−margin") in html
    assert "Task hellaswag differs from the baseline (Holm (familywise error rate), α = 0.05)." in html
    assert f"<li>{outputs['units']['statement']}</li>" in html and "<li>every item paired (600)</li>" in html
    _assert_reads_in_order(html, "paired.suite_delta", outputs)

    tables = _tables(html)
    per_task = (_escaped("3 tasks: Δ = subject − baseline with its 95% interval against the task's margin"),
                "3 tasks: which differ (p-values of Δ = 0, adjusted across the tasks by Holm (familywise error rate))")
    assert list(tables) == ["Claim: non-inferior on every task", per_task[0], "Which tasks differ", per_task[1],
                            "Pooled difference", "Pairing of the items",
                            *(f"Provenance: {side} (as its export states it)" for side in ("baseline", "subject"))]
    cells = [_task_cells(row, claimed=True) for row in outputs["rows"]]
    assert [tables[caption] for caption in per_task] == [[c[0] for c in cells], [c[1] for c in cells]]
    for row in outputs["rows"]:  # each decision in its colour
        colour = {"NONINFERIOR": "pass", "INFERIOR": "fail", "UNDECIDED": "inconclusive"}[row["decision"]]
        assert f'<span class="badge badge-{colour}">{row["decision"]}</span>' in html
    claim = dict(map(tuple, tables["Claim: non-inferior on every task"]))
    assert claim["decision"] == "INFERIOR" and claim["tasks INFERIOR"] == "hellaswag"
    assert claim["error rate"] == _escaped(every["error_rate"])
    differ = dict(map(tuple, tables["Which tasks differ"]))
    assert differ["tasks that differ"] == ", ".join(which["differing"])
    assert differ["note"] == _escaped(which["note"])
    result = dict(map(tuple, tables["Pooled difference"]))
    assert result["95% CI of the pooled difference"] == format_value(pooled["ci"], digits=6)
    assert result["assumption"] == _escaped(pooled["assumption"])
    drawn = _svg_strings(html)
    assert {f"pooled, micro (n = {outputs['n_paired']})", "−margin −0.1 (non-inferiority)",
            "gate pooled-above-minus-15-points", "95% CI, task INFERIOR", "95% CI, task NONINFERIOR"} <= drawn
    assert {f"{row['task']} (n = {row['units']})" for row in outputs["rows"]} <= drawn
    assert "gate every-task" not in drawn  # a gate on the decision is not on the axis


def test_suite_delta_without_a_margin_makes_no_claim(suite_runs) -> None:
    db, runs = suite_runs
    html, outputs = _suite_stage(db, runs["none"])
    assert outputs["every_task"] is None
    assert '<span class="badge badge-neutral">pooled difference ' in html
    assert "No non-inferiority margin was set, so no claim of non-inferiority was made." in html
    tables = _tables(html)
    assert tables["Claim: non-inferior on every task"] == [["claim", "none: no non-inferiority margin was set"]]
    cells = [_task_cells(row, claimed=False) for row in outputs["rows"]]
    assert tables["3 tasks: Δ = subject − baseline with its 95% interval"] == [c[0] for c in cells]
    assert [c[1] for c in cells] == next(rows for caption, rows in tables.items() if "which differ" in caption)
    drawn = _svg_strings(html)
    assert "pooled, macro (n = 600)" in drawn and not any("margin" in s for s in drawn)
    assert "no claim that the subject is no worse was made" in " ".join(how_to_read("paired.suite_delta", outputs))


@pytest.mark.parametrize(("decisions", "badge", "state", "words"), [
    (["NONINFERIOR"] * 3, "Non-inferior on every one of the 3 tasks", True,
     "every task's interval lies above its −margin"),
    (["NONINFERIOR", "INFERIOR", "UNDECIDED", "INFERIOR"], "INFERIOR on tasks task_01 and task_03", False,
     "One inferior task is enough"),
    (["NONINFERIOR", "UNDECIDED"], "UNDECIDED: task task_01 straddles its margin", "inconclusive",
     "a gate on this decision is INCONCLUSIVE, not failed"),
    (["UNDECIDED"] * 7, "UNDECIDED: tasks task_00, task_01, task_02, task_03, task_04 and 2 more straddle their margin",
     "inconclusive", "More items on those tasks would decide"),
    ([None] * 2, "pooled difference -0.01", None, "no non-inferiority margin was set"),
])
def test_suite_delta_words_follow_each_decision(decisions, badge, state, words) -> None:
    outputs = suite_outputs(decisions)
    section = stage_section("suite", "paired.suite_delta", "1.0.0", outputs, (), ())
    assert (section.decision, section.ok) == (badge, state)
    text = " ".join(how_to_read("paired.suite_delta", outputs))
    assert words in text and "No task is shown to differ" in section.summary  # no task differs here
    assert "Benjamini–Hochberg (false discovery rate)" in text and "A task not shown to differ is NOT shown" in text
    task_table, tests = (t for t in section.tables if t.caption.startswith(f"{len(decisions)} tasks: "))
    assert tests.headers == ("task", "Δ", "p-value", "adjusted p-value", "differs", "detectable |Δ|")
    if decisions[0] is None:
        assert "decision" not in task_table.headers and "margin" not in task_table.headers
    else:
        column = task_table.headers.index("decision")
        assert [(c.text, c.ok) for c in (row[column] for row in task_table.rows)] == [
            (d, {"NONINFERIOR": True, "INFERIOR": False, "UNDECIDED": "inconclusive"}[d]) for d in decisions]
    # a gate decides the badge's colour, as for every stage
    gated = stage_section("suite", "paired.suite_delta", "1.0.0", outputs,
                          [{"id": "g", "metric": "suite.every_task.decision", "passed": True, "outcome": "PASS"}], ())
    assert gated.ok is True and gated.decision == badge


def test_suite_delta_folds_many_tasks_and_draws_each_margin() -> None:
    shown = stage_section("suite", "paired.suite_delta", "1.0.0", suite_outputs(["NONINFERIOR"] * 15), (), ())
    many = suite_outputs(["NONINFERIOR"] * 59 + ["INFERIOR"], margins=[0.02 + 0.001 * i for i in range(60)])
    folded = stage_section("suite", "paired.suite_delta", "1.0.0", many, (), ())
    for section, rows in ((shown, 15), (folded, 60)):
        tables = [t for t in section.tables if t.caption.startswith(f"{rows} tasks: ")]
        assert len(tables) == 2 and all(t.collapsed == (rows > 15) and len(t.rows) == rows for t in tables)
    drawn = _svg_strings(folded.plots[0].svg)
    assert {f"task_{i:02d} (n = 200)" for i in range(60)} <= drawn  # the plot shows every task
    assert "−margin of each task (non-inferiority)" in drawn and "(orange ticks)" in folded.plots[0].caption
    assert not any(s.startswith("−margin −") for s in drawn)  # no single margin line
    assert "per-task margins from 0.02 to 0.079" in folded.summary


@pytest.mark.parametrize("outputs", [{}, {"rows": [None, {"ci": "ab", "decision": 3}], "every_task": {"decision": "?"},
                                          "pooled": None, "which_differ": {"differing": "x"}, "sources": {"baseline": 1},
                                          "units": {"statement": 4}}])
def test_suite_delta_section_reads_odd_outputs(outputs: dict) -> None:
    section = stage_section("suite", "paired.suite_delta", "1.0.0", outputs, (), ())
    assert section.plots and "<svg" in section.plots[0].svg and section.tables and section.how_to_read
