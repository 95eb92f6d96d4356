"""How ``conformal.pac_report`` reads: the PAC bounds on the operational rates per class and marginal, the SSBC
correction and the joint guarantee."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.core.stages.conformal import RATE_METRICS, SCOPES
from certa.engine.services.presentation.explain import finite_number, number_text
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.html.view import Plot, StageInput, StageSection, fmt, mapping, table, threshold_values

__all__ = ["section", "reading", "estimates", "how_to_read", "markdown"]


def _pac_scopes(outputs: Mapping[str, Any], prefix: str) -> list[str]:
    """The classes with ``prefix`` blocks, sorted, then ``marginal``."""
    classes = sorted(k[len(prefix):] for k in outputs if k.startswith(prefix) and not k.endswith("marginal"))
    return [*classes, "marginal"] if f"{prefix}marginal" in outputs else classes


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's summary, a CI summary's line): the joint guarantee."""
    joint = outputs.get("joint_guarantee") or {}
    return f"Joint guarantee at level {fmt(joint.get('level'))}: {joint.get('statement', '')}"


def section(stage: StageInput) -> StageSection:
    """The report section of a ``conformal.pac_report`` stage."""
    stage_id, outputs, gates = stage.stage_id, stage.outputs, stage.gates
    scopes = _pac_scopes(outputs, "pac_bounds_")
    bounds = {}
    rows = []
    for scope in scopes:
        block = outputs.get(f"pac_bounds_{scope}") or {}
        for metric in RATE_METRICS:
            b = block.get(metric) or {}
            bounds[(metric, scope)] = (b.get("estimate"), b.get("lower"), b.get("upper"))
            rows.append((scope, metric, b.get("count"), b.get("n"), b.get("estimate"), b.get("lower"), b.get("upper"),
                         b.get("method"), b.get("level"), b.get("vacuous")))
    thresholds = []
    for gate in gates:
        parts = str(gate.get("metric", "")).split(".")
        if len(parts) >= 4 and parts[1].startswith("pac_bounds_") and parts[2] in RATE_METRICS:
            thresholds += [(parts[1][len("pac_bounds_"):], parts[2], v) for v in threshold_values(gate)]
    svg = plots.pac_bounds_plot(f"{stage_id}-pac", metrics=RATE_METRICS, scopes=scopes, bounds=bounds,
                                thresholds=[(s, m, v) for s, m, v in thresholds])
    ssbc_rows = []
    for scope in scopes:
        s = outputs.get(f"ssbc_{scope}")
        c = (outputs.get("calibration_result") or {}).get(scope) or {}
        if s:
            ssbc_rows.append((scope, s.get("alpha_target"), s.get("alpha_corrected"), s.get("alpha_corrected_exact"),
                              s.get("delta"), s.get("n"), s.get("k"), s.get("u_star"), s.get("satisfied_mass"),
                              c.get("threshold")))
    joint = outputs.get("joint_guarantee") or {}
    tables = [
        table("PAC bounds on operational rates", ("scope", "rate", "count", "n", "LOO rate", "lower", "upper",
                                                   "method", "level", "vacuous"), rows, numeric=(2, 3, 4, 5, 6, 8)),
        table("SSBC correction (small-sample-corrected alpha per class)",
              ("class", "alpha target", "alpha corrected", "exact", "delta", "n", "k", "u*", "satisfied mass",
                "score threshold"), ssbc_rows, numeric=(1, 2, 4, 5, 6, 7, 8, 9)),
        table("Joint guarantee", ("field", "value"),
              [("level", joint.get("level")), ("risk terms", joint.get("risk_terms")),
                ("statement", joint.get("statement")), ("assumptions", joint.get("assumptions"))]),
    ]
    return StageSection(stage_id, "", "", decision=f"joint level {fmt(joint.get('level'))}",
                        ok=None, summary=reading(outputs),
                        plots=(Plot(svg, "Per class and marginal: each operational rate on the calibration data "
                                         "(leave-one-out, point) with its PAC bound (bar); gate thresholds dashed."),),
                        tables=tuple(tables))


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """Each operational rate per scope (a class, or marginal): its leave-one-out estimate with its PAC bounds."""
    return tuple(Estimate.read(metric, bound.get("estimate"), [bound.get("lower"), bound.get("upper")],
                               bound.get("level"), slice=scope)
                 for scope in _pac_scopes(outputs, "pac_bounds_") for metric in RATE_METRICS
                 for bound in [mapping(mapping(outputs.get(f"pac_bounds_{scope}")).get(metric))])


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``conformal.pac_report`` stage\'s outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    joint = mapping(outputs.get("joint_guarantee"))
    level = finite_number(joint.get("level"))
    return (
        "What was computed: class-wise conformal prediction sets for a binary classifier, calibrated so that each "
        "class is covered with at least the target rate, and bounds on how often a future batch of the planned size "
        "will get a single label, both labels (doublet), no label (abstention), or a wrong single label.",
        "What the guarantee means: "
        + (f"with probability at least {number_text(level)} over the calibration draw and the future test set, both class "
           "coverages hold and every future rate falls inside its bound at the same time." if level is not None else
           "the certificate states a joint probability that all coverages and bounds hold together.")
        + " It does NOT promise any single prediction is right, nor that the rates hold for data unlike the "
          "calibration set.",
        "Assumptions: calibration and future data are exchangeable (drawn from the same distribution), the "
        "leave-one-out counts behave like binomial counts, and per-class test sizes are plug-in values. A shift in "
        "the data breaks the guarantee: that is what the monitor stage checks.",
    )


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``conformal.pac_report`` stage (every ``version``): the deployed thresholds,
    the rate bounds and the joint guarantee."""
    lines = ["| class | n | u* | k | threshold |", "|---|---|---|---|---|"]
    for c in (0, 1):
        r = outputs["calibration_result"][f"class_{c}"]
        thr = "+inf (always included)" if r["threshold_infinite"] else f"{r['threshold']:.6g}"
        lines.append(f"| {c} | {r['n']} | {r['u_star']} | {r['k']} | {thr} |")
    lines += ["", "| scope | metric | LOO estimate | bound | method | level |", "|---|---|---|---|---|---|"]
    for scope in SCOPES:
        block = outputs[f"pac_bounds_{scope}"]
        for metric in RATE_METRICS:
            b = block[metric]
            est = "n/a" if b["estimate"] is None else f"{b['estimate']:.4f}"
            lines.append(f"| {scope} | {metric} | {est} | [{b['lower']:.4f}, {b['upper']:.4f}] | {b['method']} | "
                         f"{b['level']:.4g} |")
    lines += ["", outputs["joint_guarantee"]["statement"]]
    return "\n".join(lines)
