"""HTML reports of runs, for governance reviewers: ``certa report RUN -o run.html``.

Two steps, so that other pages (a static site of the whole ledger) reuse them::

    data = certa.engine.services.report_data.gather_report(ledger, run_id)   # a service: reads the ledger
    html = render_report(data)                                          # pure: the same data give the same bytes

The page is self-contained (inline CSS, plots as inline SVG in ``<figure class="plot">``, no script, no
network reference) and prints to PDF with one stage per page. Rendering imports matplotlib and Jinja2 (the
``report`` extra); importing this package does not: ``render``'s names load when first asked for, so the stage
presentation modules (which also hold ``certa show --explain``'s texts) work on the base install, and
``certa --help`` stays fast. See docs/reports.md.
"""

from __future__ import annotations

from typing import Any

from certa.engine.services.presentation.html.report_model import ReplayStatus, ReportData, Verification
from certa.engine.services.presentation.html.view import Cell, Plot, StageSection, Table

__all__ = ["render_report", "ReportData", "Verification", "ReplayStatus", "Link", "StageSection", "Table", "Cell",
           "Plot", "report_sections", "stylesheet"]

_RENDERED = frozenset({"Link", "render_report", "report_sections", "stylesheet"})


def __getattr__(name: str) -> Any:
    """``render``'s public names (Jinja2 and matplotlib), imported on first use."""
    if name in _RENDERED:
        from certa.engine.services.presentation.html import render
        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
