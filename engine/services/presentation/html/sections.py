"""One report section per stage: a sentence with the method's decision, a plot of it and its numbers in tables.

``stage_section(stage_id, use, version, outputs, gates, checks, vendor_colours)`` dispatches on the stage type
(``use``) to a builder (here: paired, sequential, conformal; the bake-off ones in ``bakeoff_section``); an
unknown type gets a generic outputs table and no plot. Every section opens with the method's "how to read this"
paragraphs (``engine.services.presentation.explain.how_to_read``). Builders only read the certificate's stored outputs (and, for
``sequential.diff``, the recorded checks); they format numbers and never compute a statistic. Keys are read
defensively: a block a stage version does not record is not shown at all. Plot text is drawn as paths; table
cells are plain strings escaped by the template (the view model is ``engine.services.presentation.html.view``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.services.presentation.explain import how_to_read, sequential_estimand
from engine.services.presentation.html import plots
from engine.services.presentation.html.bakeoff_section import bakeoff_merge_section, bakeoff_section, calm_gate_section, run_vendors
from engine.services.presentation.html.view import Cell, Plot, StageInput, StageSection, Table, fmt, mapping, table, threshold_values

__all__ = ["Cell", "Table", "Plot", "StageSection", "StageInput", "stage_section", "fmt", "stage_gates",
           "run_vendors"]


def stage_gates(stage_id: str, gates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The gates whose metric reads this stage's outputs."""
    return [g for g in gates if str(g.get("metric", "")).startswith(f"{stage_id}.")]


# -- paired.ppl_ratio -----------------------------------------------------------------------------------------

def _paired_ratio(stage: StageInput) -> StageSection:
    outputs, gates = stage.outputs, stage.gates
    primary = mapping(outputs.get("primary_metric"))
    drift = mapping(outputs.get("drift"))  # absent (1.2.0) when the input has no phase column
    stats = mapping(mapping(mapping(outputs.get("dataset")).get("windows")).get("stats"))
    delta = mapping(stats.get("paired_delta_summary"))
    boot = mapping(stats.get("bootstrap"))
    ratio_gates = [(g["id"], v) for g in gates for v in threshold_values(g)
                   if ".primary_metric.display_ci" in g["metric"] or g["metric"].endswith("ratio_vs_baseline")]
    level = primary.get("confidence_level")
    svg = plots.ratio_plot(f"{stage.stage_id}-ratio", ratio=primary.get("ratio_vs_baseline"),
                           display_ci=primary.get("display_ci"), confidence_level=level, gate_lines=ratio_gates,
                           drift_ratio=drift.get("preview_final_ratio"), drift_band=drift.get("band"), delta=delta,
                           distribution=mapping(boot.get("distribution")).get("ratio_quantiles"))
    ci = primary.get("display_ci") or [None, None]
    summary = (f"Perplexity ratio {fmt(primary.get('ratio_vs_baseline'))} (subject / baseline), "
               f"{fmt(100 * level if isinstance(level, (int, float)) else None)}% {boot.get('method', '')} CI "
               f"[{fmt(ci[0])}, {fmt(ci[1])}] from {fmt(boot.get('replicates'))} paired bootstrap replicates"
               + (f"; preview/final drift {fmt(drift.get('preview_final_ratio'))} "
                  f"{'inside' if drift.get('within_band') else 'OUTSIDE'} the band {fmt(drift.get('band'))}."
                  if drift else "."))
    perplexities = [("perplexity: baseline final", primary.get("baseline_final")),
                    ("perplexity: subject final", primary.get("final"))]
    if "preview" in primary:
        perplexities.append(("perplexity: subject preview", primary.get("preview")))
    tables = [
        table("Primary metric", ("quantity", "value"), [
            ("ratio vs baseline (point estimate)", primary.get("ratio_vs_baseline")),
            (f"{fmt(level)} CI of the ratio (display_ci = exp(ci))", primary.get("display_ci")),
            ("CI of the log ratio", primary.get("ci")),
            ("log ratio", primary.get("log_ratio")),
            *perplexities,
            ("kind / analysis basis / direction",
             f"{fmt(primary.get('kind'))} / {fmt(primary.get('analysis_basis'))} / {fmt(primary.get('direction'))}"),
        ]),
    ]
    if drift:
        tables.append(table("Preview / final drift", ("quantity", "value"), [
            ("preview / final ratio", drift.get("preview_final_ratio")), ("band", drift.get("band")),
            ("within band", Cell(fmt(drift.get("within_band")), bool(drift.get("within_band"))))]))
    tables += [
        table("Paired delta of mean log-loss (subject - baseline), per window", ("statistic", "value"),
              [(k, delta.get(k)) for k in ("mean", "mean_unweighted", "std", "min", "max", "degenerate",
                                            "degenerate_reason")] +
              [("paired windows", stats.get("paired_windows")),
                ("window match fraction", stats.get("window_match_fraction")),
                ("token count mismatches", stats.get("token_count_mismatches"))]),
        table("Bootstrap", ("field", "value"),
              [(k, boot.get(k)) for k in ("method", "requested_method", "fallback", "replicates", "confidence_level",
                                           "scheme", "z0", "acceleration", "index_streams") if k in boot]),
    ]
    ok = all(g.get("passed") for g in gates) if gates else None
    caption = ("The bootstrap distribution of the ratio (its CDF, from the 101 quantiles the certificate records since "
               "paired.ppl_ratio 1.1.0) when recorded, the confidence interval and point estimate against the gate "
               "thresholds (dashed); " + ("the preview/final drift against its band; " if drift else "")
               + "the per-window paired deltas.")
    return StageSection(stage.stage_id, "paired.ppl_ratio", "",
                        decision=f"ratio {fmt(primary.get('ratio_vs_baseline'))}", ok=ok, summary=summary,
                        plots=(Plot(svg, caption),), tables=tuple(tables))


# -- sequential.diff ------------------------------------------------------------------------------------------

def _score_range(outputs: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], Any]:
    """(rows describing the score range and what was done to the scores, the clipped count) from 2.0.0's
    ``range`` block or 1.x's ``clip`` block; no rows when neither is recorded."""
    block = outputs.get("range")
    if isinstance(block, Mapping):
        return [("score range [low, high]", [block.get("low"), block.get("high")]),
                ("range source", block.get("source")), ("scores outside the range", block.get("out_of_range")),
                ("observations outside the range", block.get("n_outside")),
                ("scores clipped", block.get("n_clipped")), ("range statement", block.get("statement"))
                ], block.get("n_clipped")
    clip = outputs.get("clip")
    if isinstance(clip, Mapping):
        return [("score range [low, high]", [clip.get("low"), clip.get("high")]),
                ("range applies", clip.get("applies")), ("scores clipped", clip.get("n_clipped")),
                ("range assumption", clip.get("assumption"))], clip.get("n_clipped")
    return [], None


def _check_summary(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """Checks, first and last n, and the n at which each decision rule first held."""
    summary: list[tuple[str, Any]] = [("checks recorded", len(rows))]
    if rows:
        summary += [("first check at n", rows[0].get("n")), ("last check at n", rows[-1].get("n"))]
    rules = sorted({rule for row in rows for rule in mapping(row.get("rules"))})
    for rule in rules:
        held = next((row.get("n") for row in rows if mapping(row.get("rules")).get(rule)), None)
        summary.append((f"rule {rule} first held at n", "never" if held is None else held))
    return summary


def _sequential(stage: StageInput) -> StageSection:
    outputs = stage.outputs
    results = mapping(outputs.get("results"))
    config = mapping(outputs.get("config"))
    sequence = mapping(outputs.get("sequence"))
    method = mapping(outputs.get("method"))
    decision = str(results.get("decision", "?"))
    rows = [c for c in stage.checks if isinstance(c.get("n"), (int, float))]
    band = config.get("equivalence_band")
    svg = plots.sequence_plot(f"{stage.stage_id}-cs", n=[c["n"] for c in rows], lower=[c.get("lower") for c in rows],
                              upper=[c.get("upper") for c in rows], mean=[c.get("mean") for c in rows],
                              band=band, min_effect=config.get("delta_star"),
                              stop_n=sequence.get("stopping_time"), decision=decision, clip=None)
    summary = (f"{decision} after {fmt(results.get('n_used'))} of {fmt(sequence.get('observations_available'))} "
               f"observations ({fmt(sequence.get('checks'))} checks): {results.get('reason', '')}. "
               f"{outputs.get('interpretation', '')}")
    range_rows, n_clipped = _score_range(outputs)
    estimand = sequential_estimand(outputs)
    facts = [f"estimand: {estimand}"]
    if n_clipped is not None:
        facts.append(f"scores clipped: {fmt(n_clipped)}")
    if "raw_mean" in results:
        facts.append(f"raw mean (unclipped): {fmt(results.get('raw_mean'))}")
    check_rows = [(c.get("n"), c.get("lower"), c.get("upper"), c.get("mean"), c.get("half_width"), c.get("p_value"),
                   ", ".join(k for k, v in sorted(mapping(c.get("rules")).items()) if v) or "–",
                   Cell("stop: " + str(c.get("decision", "")), True) if c.get("stop") else "continue")
                  for c in rows]
    tables = [
        table("Result", ("quantity", "value"), [
            ("decision", Cell(decision, decision in ("SAME", "DIFFERENT"))), ("outcome", results.get("outcome")),
            ("estimand", estimand),
            (f"confidence sequence at the stop ({fmt(results.get('confidence_level'))})", results.get("ci")),
            ("mean (the estimand's value)", results.get("mean")),
            *([("raw mean of the unclipped scores", results.get("raw_mean"))] if "raw_mean" in results else []),
            ("half width", results.get("half_width")),
            ("n used", results.get("n_used")), ("e-value", results.get("e_value")),
            ("anytime-valid p-value" if str(method.get("validity", "")).startswith("anytime") else "p-value",
             results.get("p_value")), ("direction", results.get("direction"))]),
        table("Decision thresholds", ("knob", "value"), [
            ("alpha", config.get("alpha")), ("equivalence band gamma", band), ("minimum effect", config.get("min_effect")),
            ("delta* used", config.get("delta_star")), ("n_min / n_max", [config.get("n_min"), config.get("n_max")]),
            ("method", method.get("name")), ("validity", method.get("validity"))]),
    ]
    if range_rows:
        tables.append(table("Score range (part of the claim) and what was done to the scores", ("field", "value"),
                            range_rows))
    tables += [
        table("Checks (the ledger's sequential_check decisions)", ("quantity", "value"), _check_summary(rows)),
        table(f"All {len(rows)} recorded checks", ("n", "lower", "upper", "mean", "half width", "p-value",
                                                     "rules met", "action"), check_rows,
              numeric=(0, 1, 2, 3, 4, 5), collapsed=True),
    ]
    return StageSection(stage.stage_id, "sequential.diff", "", decision=decision,
                        ok=decision in ("SAME", "DIFFERENT"), summary=summary, facts=tuple(facts),
                        plots=(Plot(svg, "The confidence sequence (shaded) at each recorded check against n, the "
                                         "running mean, the equivalence band and the minimum effect, and the "
                                         "stopping point."),),
                        tables=tuple(tables))



# -- conformal.pac_report / conformal.monitor -------------------------------------------------------------------

_RATES = ("singleton", "doublet", "abstention", "error_given_singleton")


def _scopes(outputs: Mapping[str, Any], prefix: str) -> list[str]:
    classes = sorted(k[len(prefix):] for k in outputs if k.startswith(prefix) and not k.endswith("marginal"))
    return [*classes, "marginal"] if f"{prefix}marginal" in outputs else classes


def _pac_report(stage: StageInput) -> StageSection:
    stage_id, outputs, gates = stage.stage_id, stage.outputs, stage.gates
    scopes = _scopes(outputs, "pac_bounds_")
    bounds = {}
    rows = []
    for scope in scopes:
        block = outputs.get(f"pac_bounds_{scope}") or {}
        for metric in _RATES:
            b = block.get(metric) or {}
            bounds[(metric, scope)] = (b.get("estimate"), b.get("lower"), b.get("upper"))
            rows.append((scope, metric, b.get("count"), b.get("n"), b.get("estimate"), b.get("lower"), b.get("upper"),
                         b.get("method"), b.get("level"), b.get("vacuous")))
    thresholds = []
    for gate in gates:
        parts = str(gate.get("metric", "")).split(".")
        if len(parts) >= 4 and parts[1].startswith("pac_bounds_") and parts[2] in _RATES:
            thresholds += [(parts[1][len("pac_bounds_"):], parts[2], v) for v in threshold_values(gate)]
    svg = plots.pac_bounds_plot(f"{stage_id}-pac", metrics=_RATES, scopes=scopes, bounds=bounds,
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
    summary = f"Joint guarantee at level {fmt(joint.get('level'))}: {joint.get('statement', '')}"
    return StageSection(stage_id, "conformal.pac_report", "", decision=f"joint level {fmt(joint.get('level'))}",
                        ok=None, summary=summary,
                        plots=(Plot(svg, "Per class and marginal: each operational rate on the calibration data "
                                         "(leave-one-out, point) with its PAC bound (bar); gate thresholds dashed."),),
                        tables=tuple(tables))


def _monitor(stage: StageInput) -> StageSection:
    stage_id, outputs = stage.stage_id, stage.outputs
    metrics_out = outputs.get("metrics") or {}
    scopes = [s for s in sorted(metrics_out) if s != "marginal"] + (["marginal"] if "marginal" in metrics_out else [])
    compare_to = str(outputs.get("compare_to") or "certified")
    bounds, inside, rows = {}, {}, []
    for scope in scopes:
        for metric in _RATES:
            m = (metrics_out.get(scope) or {}).get(metric) or {}
            bound = (m.get("realised_size") or {}).get("bound") if compare_to == "realised_size" else m.get("certified")
            bound = bound or [None, None]
            bounds[(metric, scope)] = (m.get("rate"), bound[0], bound[1])
            inside[(metric, scope)] = bool(m.get("inside"))
            rows.append((scope, metric, m.get("count"), m.get("n"), m.get("rate"), m.get("certified"),
                         (m.get("realised_size") or {}).get("bound"),
                         Cell(fmt(m.get("inside")), bool(m.get("inside")))))
    svg = plots.monitor_plot(f"{stage_id}-monitor", metrics=_RATES, scopes=scopes, bounds=bounds, inside=inside)
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
    summary = (f"{fmt(outputs.get('n_evaluated'))} rates evaluated on {fmt(outputs.get('n_test'))} production "
               f"points: {fmt(outputs.get('n_outside'))} outside their bounds"
               + (f" ({', '.join(map(str, outputs.get('outside') or []))})." if outputs.get("outside") else "."))
    return StageSection(stage_id, "conformal.monitor", "", decision="all inside" if all_inside else "OUTSIDE",
                        ok=all_inside, summary=summary,
                        plots=(Plot(svg, "Each production rate (point: green inside, red outside) against the bound "
                                         "it is compared to (bar)."),), tables=tuple(tables))


def _generic(stage: StageInput) -> StageSection:
    outputs = stage.outputs
    return StageSection(stage.stage_id, "", "", decision="", ok=None, summary="No report layout for this stage type; "
                        "its outputs follow.", tables=(table("Outputs", ("output", "value"), list(outputs.items())),))


_BUILDERS: dict[str, Callable[[StageInput], StageSection]] = {
    "paired.ppl_ratio": _paired_ratio,
    "sequential.diff": _sequential,
    "bakeoff.compare": bakeoff_section,
    "bakeoff.merge": bakeoff_merge_section,
    "bakeoff.gate": calm_gate_section,
    "conformal.pac_report": _pac_report,
    "conformal.monitor": _monitor,
}


def stage_section(stage_id: str, use: str, version: str, outputs: Mapping[str, Any],
                  gates: Sequence[Mapping[str, Any]], checks: Sequence[Mapping[str, Any]],
                  vendor_colours: Mapping[str, str] | None = None) -> StageSection:
    """The report section of one stage (see module docstring); ``vendor_colours`` is
    ``plots.vendor_colours(run_vendors(content.stages))`` of the whole run (computed here if None)."""
    builder = _BUILDERS.get(use, _generic)
    colours = plots.vendor_colours(run_vendors({stage_id: outputs})) if vendor_colours is None else vendor_colours
    section = builder(StageInput(stage_id, outputs, stage_gates(stage_id, gates), checks, colours))
    return dataclasses.replace(section, stage_id=stage_id, use=use, version=version,
                               how_to_read=how_to_read(use, outputs))
