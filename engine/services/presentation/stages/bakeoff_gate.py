"""How ``bakeoff.gate`` reads: the calm gate g of each decision row against its floor, its lanes, parameters and
references."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.html.view import Plot, StageInput, StageSection, fmt, mapping, table

__all__ = ["section", "reading", "how_to_read"]


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's summary, a CI summary's line): the range and mean of g, the
    rows flagged."""
    summary_out = outputs.get("summary") or {}
    flag = summary_out.get("flag")
    return (f"Calm gate over {fmt(outputs.get('n_rows'))} rows: g from {fmt(summary_out.get('g_min'))} to "
            f"{fmt(summary_out.get('g_max'))} (mean {fmt(summary_out.get('g_mean'))}), "
            f"{fmt(summary_out.get('flagged'))} rows flagged" + (f" ({flag})." if flag else "."))


def section(stage: StageInput) -> StageSection:
    """The section of a ``bakeoff.gate`` stage."""
    stage_id, outputs = stage.stage_id, stage.outputs
    params = outputs.get("params") or {}
    summary_out = outputs.get("summary") or {}
    g = [float(v) for v in outputs.get("g") or [] if isinstance(v, (int, float))]
    svg = plots.calm_gate_plot(f"{stage_id}-gate", g=g, g_min=params.get("g_min"),
                               flagged_rows=outputs.get("flagged_rows") or [])
    weights = params.get("weights") or {}
    lanes = outputs.get("lanes") or {}
    tables = [
        table("Lanes", ("lane", "telemetry", "weight"), [(k, v, weights.get(k)) for k, v in lanes.items()],
              numeric=(2,)),
        table("Gate summary", ("quantity", "value"),
              [(k, summary_out.get(k)) for k in summary_out] +
              [("rows", outputs.get("n_rows")), ("mode", outputs.get("mode")), ("preset", outputs.get("preset")),
                ("cold start", outputs.get("cold_start")), ("streams by", outputs.get("stream_by"))]),
        table("Parameters and references", ("knob", "value"),
              [(k, v) for k, v in params.items() if k != "weights"] +
              [(f"reference {k}", v) for k, v in (outputs.get("references") or {}).items()]),
    ]
    return StageSection(stage_id, "", "", decision=f"{fmt(summary_out.get('flagged'))} flagged", ok=None,
                        summary=reading(outputs),
                        plots=(Plot(svg, "The calm gate g of each decision row against its floor g_min; flagged "
                                         "rows are marked."),), tables=tuple(tables))


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``bakeoff.gate`` stage\'s outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    summary = mapping(outputs.get("summary"))
    flagged = summary.get("flagged")
    return (
        "What was computed: a calm gate g in [0, 1] for every decision from its telemetry (contradictions, drift, "
        "latency, errors, edits, queueing), smoothed per stream. A bake-off comparison multiplies each score by g, "
        "so decisions taken under poor operating conditions count less.",
        "What it means: g is a weighting, not a test; nothing here passes or fails. "
        + (f"{flagged} row(s) were flagged: their telemetry was missing or out of range and they got g = 1."
           if isinstance(flagged, int) and flagged > 0 else "No row was flagged."),
        "Assumptions: the telemetry references (percentiles, reference similarity) describe normal operation; a "
        "reference taken from the data is recorded as such.",
    )
