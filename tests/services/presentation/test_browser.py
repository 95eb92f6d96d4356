"""The report and the site in a real browser: headless Debian Chromium driven by Playwright (tests/browser_support.py),
pages opened from file://. No console error, no network request, plots that are not blank, a visible "How to
read this" box in every stage section, one colour per vendor in every bake-off plot, a working filter and sort
on the index, and a PDF with a page per stage. Skipped only where Chromium or Playwright is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.ledger import Ledger

from tests.browser_support import (
    browser,
    example_ledger,
    missing_browser_reason,
    open_page,
    pdf_page_count,
    plot_pixel_spread,
    save_screenshot,
)
from tests.conftest import OFFLINE_EXAMPLES as EXAMPLES  # a served example needs its server
from tests.paired_metric_support import lm_eval_spec, run_spec, sliced_spec
from tests.suite_delta_support import suite_spec

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(missing_browser_reason() is not None, reason=missing_browser_reason() or "")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The examples in one ledger (reviewed, the paired-ratio example run twice), each one's standalone
    report, and the site of the ledger."""
    folder = tmp_path_factory.mktemp("browser")
    db, runs = example_ledger(folder)
    result = CliRunner().invoke(main, ["run", str(ROOT / "specs" / "paired-ratio" / "spec.yaml"), "--ledger", str(db),
                                       "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    reports = {}
    for example, run_id in runs.items():
        reports[example] = folder / f"{example}.html"
        result = CliRunner().invoke(main, ["report", run_id, "-o", str(reports[example]), "--ledger", str(db)])
        assert result.exit_code == 0, result.output
    site = folder / "site"
    result = CliRunner().invoke(main, ["site", "-o", str(site), "--ledger", str(db), "--json"])
    assert result.exit_code == 0, result.output
    with Ledger.open(str(db), create=False) as ledger:
        stages = {example: len(ledger.certificate(run_id)["content"]["stages"]) for example, run_id in runs.items()}
    return {"db": db, "runs": runs, "reports": reports, "site": site, "stages": stages}


@pytest.fixture(scope="module")
def chromium():
    with browser() as context:
        yield context


@pytest.mark.parametrize("example", EXAMPLES)
def test_report_renders_offline_with_visible_plots(built, chromium, example: str) -> None:
    page, log = open_page(chromium, built["reports"][example])
    try:
        assert log.console_errors == []
        assert log.network_requests == []
        assert page.locator("#verdict .verdict-word").inner_text() in {"PASS", "FAIL"}
        spreads = plot_pixel_spread(page)
        assert len(spreads) >= built["stages"][example]
        assert all(spread > 10 for spread in spreads), spreads  # a blank plot area has a spread of 0
        boxes = page.locator("section.stage .how-to-read")
        assert boxes.count() == built["stages"][example]
        for i in range(boxes.count()):
            box = boxes.nth(i)
            box.scroll_into_view_if_needed()
            assert box.is_visible() and box.inner_text().startswith("How to read this")
            assert box.bounding_box()["height"] > 40
    finally:
        page.close()


_VENDOR_FILLS = """() => Array.from(document.querySelectorAll("figure.plot svg g[id*='-vendor']"))
    .filter(g => /-vendor\\d+-row\\d+$/.test(g.id))
    .map(g => [g.closest("figure").dataset.stage, g.id.match(/-vendor(\\d+)-row/)[1],
               getComputedStyle(g.querySelector("use, path:not(defs path)") || g).fill])"""


def test_each_vendor_is_drawn_in_one_colour_in_every_bakeoff_plot(built, chromium) -> None:
    page, log = open_page(chromium, built["reports"]["vendor-bakeoff"])
    try:
        marks = page.evaluate(_VENDOR_FILLS)
    finally:
        page.close()
    assert log.console_errors == []
    assert len({stage for stage, _, _ in marks}) >= 2  # several bake-off plots
    colours: dict[str, set[str]] = {}
    for _, vendor, fill in marks:
        colours.setdefault(vendor, set()).add(fill)
    assert len(colours) >= 3 and all(len(fills) == 1 for fills in colours.values()), colours
    assert len({next(iter(f)) for f in colours.values()}) == len(colours)


def test_site_run_page_loads_the_shared_stylesheet(built, chromium) -> None:
    run_id = built["runs"]["paired-ratio"]
    page, log = open_page(chromium, built["site"] / "runs" / f"{run_id}.html")
    try:
        assert log.console_errors == [] and log.network_requests == []
        assert any(url.endswith("/certa.css") for url in log.requests)
        # the stylesheet applied: the verdict box is green-bordered, not the default black
        assert page.eval_on_selector("#verdict", "e => getComputedStyle(e).borderTopColor") == "rgb(26, 127, 55)"
        assert all(spread > 10 for spread in plot_pixel_spread(page))
    finally:
        page.close()


def test_an_inconclusive_run_is_amber_in_the_report_and_the_site(chromium, tmp_path: Path) -> None:
    """Its own word and colour: the verdict box amber-bordered, the word and the gate's badge amber, the site's
    index badge amber; PASS stays green and FAIL red on the same index."""
    from tests.conftest import small_spec_folder

    db = tmp_path / "ledger.db"
    spec = small_spec_folder(tmp_path / "spec")
    text = spec.read_text()
    runs = {}
    for verdict, gate in (("PASS", "    max: 1.05\n"), ("FAIL", "    max: 1.0\n"),
                          ("INCONCLUSIVE", "    interval: {max: 1.02}\n")):
        metric = "ratio.token_perplexity.display_ci" + ("" if verdict == "INCONCLUSIVE" else "[1]")
        spec.write_text(text[:text.index("  - id: no-regression")] + f"  - id: no-regression\n    metric: {metric}\n"
                        + gate)
        result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(db), "--json"])
        assert json.loads(result.stdout)["verdict"] == verdict, result.output
        runs[verdict] = json.loads(result.stdout)["run_id"]
    report, site = tmp_path / "run.html", tmp_path / "site"
    assert CliRunner().invoke(main, ["report", runs["INCONCLUSIVE"], "-o", str(report), "--ledger", str(db)]).exit_code == 0
    assert CliRunner().invoke(main, ["site", "-o", str(site), "--ledger", str(db)]).exit_code == 0
    amber, amber_line, green, red = "rgb(154, 103, 0)", "rgb(191, 135, 0)", "rgb(26, 127, 55)", "rgb(207, 34, 46)"
    page, log = open_page(chromium, report)
    try:
        assert log.console_errors == [] and log.network_requests == []
        assert page.locator("#verdict .verdict-word").inner_text() == "INCONCLUSIVE"
        assert page.eval_on_selector("#verdict", "e => getComputedStyle(e).borderTopColor") == amber_line
        assert page.eval_on_selector("#verdict .verdict-word", "e => getComputedStyle(e).color") == amber
        assert page.eval_on_selector("#gates .badge", "e => getComputedStyle(e).color") == amber
        width = page.eval_on_selector("#verdict", "e => [e.scrollWidth, e.clientWidth]")
        assert width[0] <= width[1]  # the long word fits its box
    finally:
        page.close()
    page, log = open_page(chromium, site / "index.html")
    try:
        colours = page.eval_on_selector_all("#runs-table tbody tr", "rows => rows.map(r => [r.dataset.verdict, "
                                            "getComputedStyle(r.querySelector('.badge')).color])")
        assert dict(colours) == {"PASS": green, "FAIL": red, "INCONCLUSIVE": amber}
    finally:
        page.close()


def _red_signer_shown(page, selector: str, text: str, shots: Path) -> None:
    """The report's one review row matching ``selector`` reads ``text`` in red; screenshots of the page and the
    reviews table saved as ``shots``.png and ``shots``-reviews.png."""
    signer = page.locator(selector)
    assert signer.count() == 1 and signer.inner_text() == text
    assert signer.evaluate("e => getComputedStyle(e).color") == "rgb(207, 34, 46)"
    save_screenshot(page, shots.with_name(f"{shots.name}.png"), max_height=600)
    page.locator("#reviews").screenshot(path=str(shots.with_name(f"{shots.name}-reviews.png")))


def test_an_unknown_key_is_never_shown_as_an_approval_in_the_report_or_the_site(chromium, tmp_path: Path) -> None:
    """The unauthorised-key case (tests/policy_support.py): mallory approves both runs with a key the policy does
    not list, alice approves the first with hers. Under the policy the first run is APPROVED (green, by alice as
    the policy names her) and the second NOT APPROVED (red); mallory's reviews read "unknown key", never her
    claimed name. Without a policy both read "approval not checked" in grey. Screenshots in tmp_path."""
    from tests.policy_support import policy_case

    case = policy_case(tmp_path / "case")
    green, red, grey_bg = "rgb(26, 127, 55)", "rgb(207, 34, 46)", "rgb(234, 238, 242)"
    pages = {}
    for name, extra in (("policy", ["--policy", str(case.policy)]), ("none", [])):
        pages[name] = tmp_path / f"report-{name}.html"
        result = CliRunner().invoke(main, ["report", case.unapproved, "-o", str(pages[name]), "--ledger", str(case.db),
                                           *extra])
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(main, ["site", "-o", str(tmp_path / f"site-{name}"), "--ledger", str(case.db),
                                           "--jobs", "1", *extra])
        assert result.exit_code == 0, result.output
    page, log = open_page(chromium, pages["policy"])
    try:
        assert log.console_errors == [] and log.network_requests == []
        badge = page.locator("#verdict .approval-line .badge")
        assert badge.inner_text() == "NOT APPROVED"
        assert badge.evaluate("e => getComputedStyle(e).color") == red
        assert "alice@example.org (signed)" not in page.inner_text("body")
        _red_signer_shown(page, "#reviews td.signer", f"unknown key {case.mallory[:8]}…", tmp_path / "report-unknown-key")
    finally:
        page.close()
    page, _ = open_page(chromium, pages["none"])
    try:
        badge = page.locator("#verdict .approval-line .badge")
        assert badge.inner_text() == "approval not checked (no policy)"
        assert badge.evaluate("e => getComputedStyle(e).backgroundColor") == grey_bg
        assert page.locator("#reviews td.signer").inner_text() == \
            f"signed by key {case.mallory[:8]}…, claims to be 'alice@example.org' — not checked against a policy"
        page.locator("#verdict").screenshot(path=str(tmp_path / "report-no-policy-verdict.png"))
        page.locator("#reviews").screenshot(path=str(tmp_path / "report-no-policy-reviews.png"))
    finally:
        page.close()
    page, log = open_page(chromium, tmp_path / "site-policy" / "index.html")
    try:
        assert log.console_errors == [] and log.network_requests == []
        cells = page.eval_on_selector_all("#runs-table tbody tr", "rows => rows.map(r => [r.querySelector("
                                          "'.name-cell .mono').textContent, r.querySelector('.approval-cell .badge')"
                                          ".textContent, getComputedStyle(r.querySelector('.approval-cell .badge')).color, "
                                          "r.querySelector('.approval-cell').innerText])")
        by_run = {run: (word, colour, text) for run, word, colour, text in cells}
        assert by_run[case.approved[:12]][:2] == ("APPROVED", green)
        assert "by Alice Example <alice@example.org> (model-risk)" in by_run[case.approved[:12]][2]
        assert by_run[case.unapproved[:12]][:2] == ("NOT APPROVED", red)
        assert "mallory" not in page.inner_text("body")
        save_screenshot(page, tmp_path / "site-unknown-key.png", max_height=900)
    finally:
        page.close()
    page, _ = open_page(chromium, tmp_path / "site-none" / "index.html")
    try:
        words = page.eval_on_selector_all(".approval-cell .badge", "bs => bs.map(b => b.textContent)")
        assert words == ["approval not checked (no policy)"] * 2
        assert "approved by" not in page.inner_text("body").lower()
    finally:
        page.close()


def test_a_review_signed_after_its_key_expired_is_red_and_says_so(chromium, tmp_path: Path) -> None:
    """Alice's real approval of the first run, under a policy whose entry for her key expired before the review was
    recorded: the verdict box says NOT APPROVED (red) and names the expiry, the reviews table reads "key expired on
    DATE" in red, never her name as an approver. Screenshots in tmp_path."""
    from tests.policy_support import EXPIRED, expired_policy, policy_case

    case = policy_case(tmp_path / "case")
    red = "rgb(207, 34, 46)"
    page_file = tmp_path / "report-expired.html"
    result = CliRunner().invoke(main, ["report", case.approved, "-o", str(page_file), "--ledger", str(case.db),
                                       "--policy", str(expired_policy(case))])
    assert result.exit_code == 0, result.output
    page, log = open_page(chromium, page_file)
    try:
        assert log.console_errors == [] and log.network_requests == []
        badge = page.locator("#verdict .approval-line .badge")
        assert badge.inner_text() == "NOT APPROVED"
        assert badge.evaluate("e => getComputedStyle(e).color") == red
        assert f"key expired on {EXPIRED}" in page.inner_text("#verdict")
        assert "APPROVED by" not in page.inner_text("body")
        _red_signer_shown(page, "#reviews td.signer-expired", f"key expired on {EXPIRED} ({case.alice[:8]}…, listed for "
                          "Alice Example <alice@example.org>): counts for no approval", tmp_path / "report-expired-key")
    finally:
        page.close()


def _visible_names(page) -> list[str]:
    return page.eval_on_selector_all("#runs-table tbody tr", "rows => rows.filter(r => !r.hidden && r.offsetParent !== null)"
                                                              ".map(r => r.dataset.name)")


def test_a_bundle_reports_without_a_ledger_saying_what_was_verified(chromium, tmp_path: Path) -> None:
    """``certa report BUNDLE_FILE``: the same page as from the ledger (verdict, plots), a source note under the
    verdict naming the bundle and the keys that verified it, the bundle's reviews, and NOT VERIFIED in red when
    no key was given."""
    db, runner = str(tmp_path / "ledger.db"), CliRunner()
    ran = runner.invoke(main, ["run", str(ROOT / "specs" / "paired-ratio" / "spec.yaml"), "--ledger", db, "--json"])
    run_id = json.loads(ran.stdout)["run_id"]
    assert runner.invoke(main, ["review", run_id, "--by", "auditor@example.org", "--decision", "approved",
                                "--ledger", db]).exit_code == 0
    assert runner.invoke(main, ["keygen", "--out-dir", str(tmp_path), "--json"]).exit_code == 0
    checkpoint, bundle = tmp_path / "head.checkpoint", tmp_path / "run.bundle.json"
    for args in (["checkpoint", "--key", str(tmp_path / "certa.key"), "--out", str(checkpoint)],
                 ["prove", run_id, "--checkpoint", str(checkpoint), "-o", str(bundle)]):
        assert runner.invoke(main, [*args, "--ledger", db]).exit_code == 0
    pages = {"verified": tmp_path / "verified.html", "unverified": tmp_path / "unverified.html"}
    for name, keys in (("verified", ["--public-key", str(tmp_path / "certa.pub")]), ("unverified", [])):
        result = runner.invoke(main, ["report", str(bundle), *keys, "-o", str(pages[name]), "--json"])
        assert result.exit_code == 0, result.output
        written = json.loads(result.output)
        assert (written["bundle"], written["bundle_verified"]) == (str(bundle), name == "verified")
    page, log = open_page(chromium, pages["verified"])
    try:
        assert log.console_errors == [] and log.network_requests == []
        assert page.locator("#verdict .verdict-word").inner_text() == "PASS"
        assert page.locator("#verdict .status-line").inner_text().startswith("Bundle: verified")
        note = page.locator("#bundle-source")
        assert note.is_visible() and f"Rendered from the bundle {bundle}, not from a ledger." in note.inner_text()
        assert "Verified with key(s) " in note.inner_text() and "Who holds the keys is not checked" in note.inner_text()
        assert page.locator("#reviews td", has_text="auditor@example.org").count() == 1
        assert all(spread > 10 for spread in plot_pixel_spread(page))
        save_screenshot(page, tmp_path / "report-from-bundle.png", max_height=1100)
    finally:
        page.close()
    page, log = open_page(chromium, pages["unverified"])
    try:
        note = page.locator("#bundle-source.bundle-unverified")
        assert note.is_visible() and "NOT VERIFIED: no public key was given" in note.inner_text()
        assert page.locator("#verdict .status-line").inner_text().startswith("Bundle: NOT VERIFIED")
        assert page.locator("#reviews").inner_text().count("Not shown: the bundle was not verified") == 1
        red = note.evaluate("e => getComputedStyle(e).borderLeftColor")
        assert red == "rgb(207, 34, 46)", red  # --fail
        save_screenshot(page, tmp_path / "report-from-unverified-bundle.png", max_height=700)
    finally:
        page.close()
    print(f"screenshots in {tmp_path}")


def test_index_filters_and_sorts_without_a_server(built, chromium) -> None:
    page, log = open_page(chromium, built["site"] / "index.html")
    try:
        assert log.console_errors == [] and log.network_requests == []
        everything = _visible_names(page)
        assert len(everything) == len(built["runs"]) + 1
        page.fill("#filter", "llama-edit-vs-base")
        assert _visible_names(page) == ["llama-edit-vs-base", "llama-edit-vs-base"]
        assert page.inner_text("#shown") == f"2 of {len(everything)} runs"
        page.fill("#filter", "no such spec")
        assert _visible_names(page) == [] and page.is_visible("#no-match")
        page.fill("#filter", "")
        page.click("button[data-sort='name']")
        assert _visible_names(page) == sorted(everything)
        page.click("button[data-sort='name']")
        assert _visible_names(page) == sorted(everything, reverse=True)
        assert page.get_attribute("#runs-table th:nth-child(2)", "aria-sort") == "descending"
        page.click("button[data-sort='time']")  # ascending: oldest first
        times = page.eval_on_selector_all("#runs-table tbody tr", "rows => rows.map(r => Number(r.dataset.time))")
        assert times == sorted(times)
        page.click("a[href^='runs/']")  # the links work from file://
        page.wait_for_selector("#verdict")
        assert log.console_errors == [] and log.network_requests == []
    finally:
        page.close()


def test_report_prints_to_pdf_with_a_page_per_stage(built, chromium) -> None:
    example = "vendor-bakeoff" if "vendor-bakeoff" in EXAMPLES else EXAMPLES[0]
    page, _ = open_page(chromium, built["reports"][example])
    try:
        pdf = page.pdf(format="A4", print_background=True)
    finally:
        page.close()
    assert pdf.startswith(b"%PDF")
    # the first page (verdict), then each stage on a page of its own (gates, identity, verification after the
    # last one), then the reviews
    assert pdf_page_count(pdf) >= built["stages"][example] + 1


def test_json_summary_of_the_site(built) -> None:
    result = CliRunner().invoke(main, ["site", "-o", str(built["site"]), "--ledger", str(built["db"]), "--json"])
    assert json.loads(result.stdout)["pages_written"] == 0


_OVERFLOWS = """() => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth) problems.push(`page: ${page.scrollWidth} > ${page.clientWidth} px`);
  for (const section of document.querySelectorAll("section.stage")) {
    const right = section.getBoundingClientRect().right + 0.5;
    for (const element of section.querySelectorAll("*")) {
      if (element.closest("svg")) continue;
      const name = `${element.tagName} "${element.textContent.trim().slice(0, 40)}"`;
      if (element.getBoundingClientRect().right > right) problems.push(`${name} ends right of its section`);
      else if (element.clientWidth && element.scrollWidth > element.clientWidth + 1) problems.push(`${name} overflows`);
    }
    for (const svg of section.querySelectorAll("figure.plot > svg")) {
      const view = svg.viewBox.baseVal, drawn = svg.querySelector(":scope > g").getBBox();
      if (drawn.x < view.x - 0.5 || drawn.y < view.y - 0.5 || drawn.x + drawn.width > view.x + view.width + 0.5
          || drawn.y + drawn.height > view.y + view.height + 0.5) problems.push(`a plot draws outside its view box`);
    }
  }
  return problems;
}"""
"""What sticks out: the page wider than the window, an element of a stage section past the section's right edge
or with content wider than itself, a plot drawing outside its view box (a cut legend or label)."""


def _assert_fits(page, screenshot: Path) -> None:
    """Nothing sticks out (``_OVERFLOWS``) at the screenshot's width and in a narrow window; the screenshot saved."""
    for width in (1200, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(_OVERFLOWS) == [], width
    page.set_viewport_size({"width": 1200, "height": 900})
    assert save_screenshot(page, screenshot) > 20_000


@pytest.fixture(scope="module")
def metric_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The standalone reports of paired.metric_delta on the lm-eval fixtures and on the sliced CSV tables."""
    folder = tmp_path_factory.mktemp("metric-browser")
    return _reports(folder, {"lm-eval": lm_eval_spec(folder / "lm-eval"), "sliced": sliced_spec(folder / "sliced")})


def _reports(folder: Path, specs: dict[str, Path]) -> dict[str, Path]:
    """Each spec run into one ledger in ``folder`` and its run's standalone report written there (name -> path)."""
    db = folder / "ledger.db"
    reports = {}
    for name, spec in specs.items():
        reports[name] = folder / f"{name}.html"
        result = CliRunner().invoke(main, ["report", run_spec(spec, db), "-o", str(reports[name]), "--ledger", str(db)])
        assert result.exit_code == 0, result.output
    return reports


@pytest.mark.parametrize("name", ["lm-eval", "sliced"])
def test_metric_delta_report_fits_its_page_in_a_browser(metric_reports, chromium, name: str, tmp_path: Path) -> None:
    page, log = open_page(chromium, metric_reports[name])
    try:
        assert log.console_errors == [] and log.network_requests == []
        assert page.locator("section.stage .decision .badge").inner_text().endswith("non-inferior at margin 0.05")
        box = page.locator("section.stage .how-to-read")
        assert box.is_visible() and box.inner_text().startswith("How to read this")
        assert all(spread > 10 for spread in plot_pixel_spread(page))
        assert page.locator("section.stage table.data caption").count() >= 7
        _assert_fits(page, tmp_path / f"report-paired-metric-{name}.png")
    finally:
        page.close()


@pytest.fixture(scope="module")
def suite_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The standalone reports of paired.suite_delta: three tasks (one INFERIOR), and 60 tasks with long names and
    per-task margins (the task table folded)."""
    folder = tmp_path_factory.mktemp("suite-browser")
    tasks = {f"mmlu_{i:02d}" + ("_a_subject_name_long_enough_to_wrap_in_its_cell" if i == 7 else ""):
             -0.3 if i == 13 else 0.0 for i in range(60)}
    return _reports(folder, {"three": suite_spec(folder / "three"),
                             "sixty": suite_spec(folder / "sixty", effects=tasks, items=60,
                                                 margin={t: 0.15 for t in tasks})})


@pytest.mark.parametrize("name", ["three", "sixty"])
def test_suite_delta_report_fits_its_page_in_a_browser(suite_reports, chromium, name: str, tmp_path: Path) -> None:
    page, log = open_page(chromium, suite_reports[name])
    try:
        assert log.console_errors == [] and log.network_requests == []
        badge = page.locator("section.stage .decision .badge")
        assert badge.inner_text().startswith("INFERIOR on task ") and "badge-fail" in badge.get_attribute("class")
        assert page.locator("section.stage .how-to-read").is_visible()
        assert all(spread > 10 for spread in plot_pixel_spread(page))
        assert page.locator("section.stage details.table-details").count() == (2 if name == "sixty" else 0)
        page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")  # the folded table
        _assert_fits(page, tmp_path / f"report-suite-delta-{name}.png")
    finally:
        page.close()
