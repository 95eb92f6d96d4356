"""HTML reports of runs, for governance reviewers: ``certa report RUN -o run.html``.

Two steps, so that other pages (a static site of the whole ledger) reuse them::

    data = gather_report(ledger, run_id)   # reads the ledger (certificate, checks, verify, replay, reviews)
    html = render_report(data)             # pure: the same data give the same bytes

The page is self-contained (inline CSS, plots as inline SVG in ``<figure class="plot">``, no script, no
network reference) and prints to PDF with one stage per page. This package imports matplotlib and Jinja2;
only the report commands import it, so ``certa --help`` stays fast. See docs/reports.md.
"""

from __future__ import annotations

from engine.services.presentation.html.data import ReplayStatus, ReportData, Verification, gather_report
from engine.services.presentation.html.render import Link, render_report, report_sections, stylesheet
from engine.services.presentation.html.view import Cell, Plot, StageSection, Table

__all__ = ["gather_report", "render_report", "report_html", "ReportData", "Verification", "ReplayStatus", "Link",
           "StageSection", "Table", "Cell", "Plot", "report_sections", "stylesheet"]


def report_html(ledger: object, run_id: str) -> str:
    """``render_report(gather_report(ledger, run_id))``: the report page of one run."""
    return render_report(gather_report(ledger, run_id))  # type: ignore[arg-type]
