"""Render one run's report (``ReportData``) to a self-contained HTML document (Jinja2, autoescaped).

``render_report`` is a pure function of its arguments: the same data give the same bytes (no clock, host or
random id; ``rendered_at`` is shown only when the caller passes it). The page needs nothing at view time:
the stylesheet is inlined (or linked, ``css_href``, for a static site sharing one ``report.css``) and every
plot is inline SVG inside ``<figure class="plot">``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from certa.engine.services.presentation.input_notes import endpoint_note, model_files, override_note, unread_note
from certa.engine.services.presentation.registration_note import registration_note
from certa.engine.services.presentation.display_text import plain_text
from certa.engine.core.gate_family import stated_family
from certa.engine.core.gates import gate_display, gate_outcome, inconclusive_note
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.html.report_model import ReportData
from certa.engine.services.presentation.html.sections import stage_section
from certa.engine.services.presentation.html.view import Cell, StageSection, fmt, run_vendors

__all__ = ["Link", "render_report", "stylesheet", "report_sections", "identity_rows", "template_environment"]


@dataclass(frozen=True)
class Link:
    """A navigation link of a report page (for ``certa site``: index, chain page, ...); ``href`` is relative."""

    label: str
    href: str


@lru_cache(maxsize=1)
def stylesheet() -> str:
    """The shared report stylesheet (screen and print)."""
    return resources.files(__package__).joinpath("report.css").read_text(encoding="utf-8")


def _displayed(value: Any) -> Any:
    """Every ``{{ ... }}`` of the templates: a string (a recorded user string: spec description, reviewer, note,
    input name, ...) without control and bidi characters (``certa.engine.services.presentation.display_text.plain_text``; newlines kept,
    HTML is escaped by the environment); markup certa built (plots, stylesheet, macros) and other values as
    they are."""
    return plain_text(value, newlines=True) if isinstance(value, str) and not isinstance(value, Markup) else value


@lru_cache(maxsize=1)
def template_environment() -> jinja2.Environment:
    """The Jinja2 environment of the report and the site (autoescape on, strict undefined, every shown string
    stripped of control and bidi characters), built once per process."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, finalize=_displayed)
    env.filters["fmt"] = fmt
    env.tests["cell"] = lambda value: isinstance(value, Cell)
    return env


def _safe_href(href: str) -> str:
    """Report pages link only to relative paths and fragments: no scheme, no network location."""
    lowered = href.strip().lower()
    if "://" in lowered or lowered.startswith("//") or ":" in lowered.split("/", 1)[0]:
        raise ValueError(f"report links must be relative (got {href!r})")
    return href


def identity_rows(data: ReportData) -> list[tuple[str, str]]:
    """(field, value) rows of the identity table."""
    rows = [("run id", data.run_id), ("spec name", data.name), ("status", data.status), ("profile", data.profile),
            ("recorded at (UTC)", data.recorded_at)]
    certificate = data.certificate
    if certificate is None:
        return rows
    content = certificate["content"]
    issued = certificate.get("issued") or {}
    platform = issued.get("platform") or {}
    rows += [
        ("spec sha256", content["spec"]["sha256"]),
        ("knobs_hash", content["knobs_hash"]),
        *([("registration", note)] if (note := registration_note(content)) else []),
        ("content_sha256", certificate["content_sha256"]),
        ("results_sha256", data.results_sha256 or ""),
        ("certificate format", fmt(certificate.get("certificate_format", 1))),
        ("root seed", fmt(content["seed"]["root"])),
        ("seed derivation", fmt(content["seed"].get("derivation"))),
        ("issued", f"{issued.get('time_utc', '')} by {issued.get('user', '')} on {issued.get('host', '')}"),
        ("platform", " ".join(str(p) for p in (platform.get("system"), platform.get("machine"),
                                               "/".join(platform.get("numpy_simd") or ())) if p)),
        ("library versions", ", ".join(f"{k} {v}" for k, v in sorted(content.get("versions", {}).items()))),
    ]
    return rows


def report_sections(data: ReportData) -> list[StageSection]:
    """One section per stage of the run, in the spec's order (empty for an aborted run)."""
    if data.certificate is None:
        return []
    content = data.certificate["content"]
    uses = {str(s["id"]): (str(s["use"]), str(s["version"])) for s in content["knobs"]["stages"]}
    order = [*uses, *(stage_id for stage_id in content["stages"] if stage_id not in uses)]  # stored JSON sorts keys
    colours = plots.vendor_colours(run_vendors(content["stages"]))  # one colour per vendor in every plot of the run
    return [stage_section(stage_id, *uses.get(stage_id, ("?", "?")), content["stages"][stage_id], content["gates"],
                          data.checks.get(stage_id, ()), colours)
            for stage_id in order if stage_id in content["stages"]]


def _gate_rows(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each gate with its value and threshold at the precision that decided (``certa.engine.core.gates.gate_display``)."""
    return [{"id": gate["id"], "metric": gate["metric"], **gate_display(gate), "passed": bool(gate.get("passed")),
             "outcome": gate_outcome(gate)} for gate in content.get("gates", [])]


def render_report(data: ReportData, *, links: Sequence[Link] = (), css_href: str | None = None,
                  rendered_at: str | None = None) -> str:
    """The report page of one run as an HTML string (see module docstring).

    ``links``: navigation links shown in the page header (relative hrefs only). ``css_href``: link this
    relative stylesheet instead of inlining ``stylesheet()``. ``rendered_at``: a render time to print in the
    footer; leave it None for byte-identical reports of an unchanged ledger."""
    content = data.certificate["content"] if data.certificate is not None else None
    stage_seeds = (content or {}).get("seed", {}).get("stages", {})
    stage_versions = [(str(s["id"]), str(s["use"]), str(s["version"]), fmt(stage_seeds.get(s["id"], {}).get("spawn_key")))
                      for s in (content or {}).get("knobs", {}).get("stages", [])]
    inputs = list((content or {}).get("inputs", []))
    captured = list((content or {}).get("captured", []))
    sections = report_sections(data)
    template = template_environment().get_template("report.html.j2")
    return template.render(
        data=data, content=content, description=(content or {}).get("spec", {}).get("description") or "",
        identity=identity_rows(data), inputs=inputs, captured=captured, stage_versions=stage_versions,
        override=override_note(inputs),
        unread=[note for i in inputs for note in (unread_note(i), endpoint_note(i)) if note is not None],
        files=[(str(i["name"]), str(i["sha256"]), rows) for i in inputs if (rows := model_files(i))],
        gates=_gate_rows(content or {}), undecided=inconclusive_note((content or {}).get("gates", [])),
        family=stated_family(content) if content is not None else None,
        registration=registration_note(content) if content is not None else None,
        sections=sections,
        links=[Link(link.label, _safe_href(link.href)) for link in links],
        css=Markup(stylesheet()) if css_href is None else None, css_href=_safe_href(css_href) if css_href else None,
        rendered_at=rendered_at, svg=Markup,
    )

