"""How ``conformal.monitor`` reads: each production rate against the bound it is compared to, and the
class-conditional coverage in production."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.core.stages.conformal import RATE_METRICS, SCOPES
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.html.view import Cell, Plot, StageInput, StageSection, fmt, table

__all__ = ["section", "reading", "how_to_read", "markdown"]


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's summary, a CI summary's line): the rates outside their bounds."""
    return (f"{fmt(outputs.get('n_evaluated'))} rates evaluated on {fmt(outputs.get('n_test'))} production "
            f"points: {fmt(outputs.get('n_outside'))} outside their bounds"
            + (f" ({', '.join(map(str, outputs.get('outside') or []))})." if outputs.get("outside") else "."))


def section(stage: StageInput) -> StageSection:
    """The report section of a ``conformal.monitor`` stage."""
    stage_id, outputs = stage.stage_id, stage.outputs
    metrics_out = outputs.get("metrics") or {}
    scopes = [s for s in sorted(metrics_out) if s != "marginal"] + (["marginal"] if "marginal" in metrics_out else [])
    compare_to = str(outputs.get("compare_to") or "certified")
    bounds, inside, rows = {}, {}, []
    for scope in scopes:
        for metric in RATE_METRICS:
            m = (metrics_out.get(scope) or {}).get(metric) or {}
            bound = (m.get("realised_size") or {}).get("bound") if compare_to == "realised_size" else m.get("certified")
            bound = bound or [None, None]
            bounds[(metric, scope)] = (m.get("rate"), bound[0], bound[1])
            inside[(metric, scope)] = bool(m.get("inside"))
            rows.append((scope, metric, m.get("count"), m.get("n"), m.get("rate"), m.get("certified"),
                         (m.get("realised_size") or {}).get("bound"),
                         Cell(fmt(m.get("inside")), bool(m.get("inside")))))
    svg = plots.monitor_plot(f"{stage_id}-monitor", metrics=RATE_METRICS, scopes=scopes, bounds=bounds, inside=inside)
    coverage = outputs.get("coverage") or {}
    tables = [
        table(f"Production rates against the bounds (compared to: {compare_to})",
              ("scope", "rate", "count", "n", "production rate", "certified bound", "bound at realised size",
                "inside"), rows, numeric=(2, 3, 4)),
        table("Class-conditional coverage in production", ("class", "covered", "n", "rate", "target", "p-value"),
              [(k, v.get("covered"), v.get("n"), v.get("rate"), v.get("target"), v.get("p_value"))
                for k, v in coverage.items()], numeric=(1, 2, 3, 4, 5)),
        table("Source of the bounds", ("field", "value"),
              [(k, v) for k, v in (outputs.get("source") or {}).items() if k != "thresholds"]),
    ]
    all_inside = bool(outputs.get("all_inside"))
    return StageSection(stage_id, "", "", decision="all inside" if all_inside else "OUTSIDE",
                        ok=all_inside, summary=reading(outputs),
                        plots=(Plot(svg, "Each production rate (point: green inside, red outside) against the bound "
                                         "it is compared to (bar)."),), tables=tuple(tables))


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``conformal.monitor`` stage\'s outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    all_inside = outputs.get("all_inside")
    compare_to = outputs.get("compare_to") or "certified"
    return (
        "What was tested: a labelled production batch was run through the recorded conformal thresholds, and each "
        f"operational rate was compared with its bound ({compare_to}: "
        + ("recomputed for the batch's realised size" if compare_to == "realised_size" else
           "as certified for the planned test size") + ").",
        "What the result means: "
        + ("every rate lies inside its bound: the batch is consistent with the certified behaviour."
           if all_inside is True else
           "at least one rate lies OUTSIDE its bound: the batch is not consistent with the certified behaviour, a "
           "sign of data shift or of a bound missing by chance (each bound misses with small probability)."
           if all_inside is False else "see the table below.")
        + " Inside does NOT prove the data have not shifted; it says no shift large enough to show was seen.",
        "Assumptions: the batch is labelled correctly and is one sample of the deployment data; per-class coverage "
        "in the table is for information only.",
    )


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``conformal.monitor`` stage (every ``version``): each realised rate against
    its bound."""
    source = outputs["source"]
    where = (f"run {source['run_id']}" if source["run_id"] else "this run")
    lines = [f"Checked against the report of stage '{source['stage_id']}' in {where} ({outputs['compare_to']} bounds).",
             "", "| scope | metric | realised | bound | inside |", "|---|---|---|---|---|"]
    for scope in SCOPES:
        for metric in RATE_METRICS:
            e = outputs["metrics"][scope][metric]
            if e["rate"] is None:
                lines.append(f"| {scope} | {metric} | n/a | | n/a |")
                continue
            bound = e["certified"] if outputs["compare_to"] == "certified" else e["realised_size"]["bound"]
            lines.append(f"| {scope} | {metric} | {e['rate']:.4f} ({e['count']}/{e['n']}) | "
                         f"[{bound[0]:.4f}, {bound[1]:.4f}] | {'yes' if e['inside'] else 'NO'} |")
    return "\n".join(lines)
