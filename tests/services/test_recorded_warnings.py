"""A run's warnings are not only printed when it runs: ``certa show`` and the HTML report read them back from the
recorded decisions, so a reviewer months later sees what the run let through."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.services.presentation.html import render_report
from certa.engine.services.report_data import gather_report
from certa.engine.services.presentation.markdown import recorded_warnings
from certa.engine.core.tables import columns_to_csv_bytes
from certa.ledger import Ledger

from tests.conftest import window_columns


def _unmatched_windows(small_spec: Path) -> None:
    """The subject loses 6 of its 60 windows: window_match_fraction 0.9, which profile dev lets through."""
    _, subject = window_columns(60, seed=3)
    (small_spec.parent / "data" / "subject.csv").write_bytes(
        columns_to_csv_bytes({name: list(values)[6:] for name, values in subject.items()}))


def test_warnings_are_printed_then_read_back_by_show_and_the_report(small_spec: Path, tmp_path: Path) -> None:
    _unmatched_windows(small_spec)
    location = tmp_path / "ledger.db"
    with Ledger.open(location) as ledger:
        result = run(small_spec, ledger=ledger)
        assert len(result.warnings) == 1 and "window_match_fraction = 0.9, required 1" in result.warnings[0]
        assert recorded_warnings(ledger, result.run_id) == result.warnings
        page = render_report(gather_report(ledger, result.run_id))
    assert 'id="warnings"' in page and "window_match_fraction = 0.9, required 1" in page
    assert page.index('id="warnings"') < page.index('class="stage"')  # under the verdict, before the stages
    shown = CliRunner().invoke(main, ["show", result.run_id[:12], "--ledger", str(location)])
    assert shown.exit_code == 0 and "## Warnings (1)" in shown.output
    assert f"- {result.warnings[0]}" in shown.output


def test_a_run_without_warnings_shows_no_warnings_section(small_spec: Path, tmp_path: Path) -> None:
    location = tmp_path / "ledger.db"
    with Ledger.open(location) as ledger:
        result = run(small_spec, ledger=ledger)
        assert result.warnings == () and recorded_warnings(ledger, result.run_id) == ()
        page = render_report(gather_report(ledger, result.run_id))
    assert 'id="warnings"' not in page
    shown = CliRunner().invoke(main, ["show", result.run_id[:12], "--ledger", str(location)])
    assert "Warnings" not in shown.output


def test_the_sites_run_page_shows_the_warnings(small_spec: Path, tmp_path: Path) -> None:
    from certa.engine.services.site import build_site
    _unmatched_windows(small_spec)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(small_spec, ledger=ledger)
        build_site(ledger, tmp_path / "site")
    pages = list((tmp_path / "site").rglob(f"*{result.run_id[:12]}*.html"))
    page = next(p for p in pages if "diff" not in p.parts).read_text(encoding="utf-8")
    assert 'id="warnings"' in page and "window_match_fraction = 0.9, required 1" in page
