"""One report section per stage: a sentence with the method's decision, a plot of it and its numbers in tables.

``stage_section(stage_id, use, version, outputs, gates, checks)`` dispatches on the stage type (``use``) to a
builder below; an unknown type gets a generic outputs table and no plot. Builders only read the certificate's
stored outputs (and, for ``sequential.diff``, the recorded checks); they format numbers and never compute a
statistic. Plot text is drawn as paths; table cells are plain strings escaped by the template.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import plots

__all__ = ["Cell", "Table", "Plot", "StageSection", "stage_section", "fmt", "stage_gates"]


def fmt(value: Any, digits: int = 6) -> str:
    """A compact human form of a JSON value (``digits`` significant digits for floats)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v, digits) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


@dataclass(frozen=True)
class Cell:
    """A table cell with a status: ``ok`` True (pass), False (fail), None (neutral)."""

    text: str
    ok: bool | None = None


@dataclass(frozen=True)
class Table:
    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str | Cell, ...], ...]
    numeric: tuple[int, ...] = ()
    """Indices of right-aligned (numeric) columns."""


@dataclass(frozen=True)
class Plot:
    svg: str
    caption: str


@dataclass(frozen=True)
class StageSection:
    stage_id: str
    use: str
    version: str
    decision: str
    ok: bool | None
    summary: str
    plots: tuple[Plot, ...] = ()
    tables: tuple[Table, ...] = field(default=())


def stage_gates(stage_id: str, gates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The gates whose metric reads this stage's outputs."""
    return [g for g in gates if str(g.get("metric", "")).startswith(f"{stage_id}.")]


def _table(caption: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> Table:
    return Table(caption, tuple(headers), tuple(tuple(c if isinstance(c, Cell) else fmt(c) for c in r) for r in rows),
                 tuple(numeric))


def _pairs(mapping: Mapping[str, Any], caption: str, keys: Sequence[str] | None = None) -> Table:
    items = [(k, mapping.get(k)) for k in keys] if keys is not None else list(mapping.items())
    return _table(caption, ("field", "value"), [(k, v) for k, v in items])


def _threshold_values(gate: Mapping[str, Any]) -> list[float]:
    threshold = gate.get("threshold") or {}
    values = [threshold.get("min"), threshold.get("max"), *(threshold.get("between") or [])]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


# -- paired.ppl_ratio -----------------------------------------------------------------------------------------

def _paired_ratio(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
                  checks: Sequence[Mapping[str, Any]]) -> StageSection:
    primary = outputs.get("primary_metric") or {}
    drift = outputs.get("drift") or {}
    stats = ((outputs.get("dataset") or {}).get("windows") or {}).get("stats") or {}
    delta = stats.get("paired_delta_summary") or {}
    boot = stats.get("bootstrap") or {}
    ratio_gates = [(g["id"], v) for g in gates for v in _threshold_values(g)
                   if ".primary_metric.display_ci" in g["metric"] or g["metric"].endswith("ratio_vs_baseline")]
    level = primary.get("confidence_level")
    svg = plots.ratio_plot(f"{stage_id}-ratio", ratio=primary.get("ratio_vs_baseline"),
                           display_ci=primary.get("display_ci"), confidence_level=level, gate_lines=ratio_gates,
                           drift_ratio=drift.get("preview_final_ratio"), drift_band=drift.get("band"), delta=delta,
                           distribution=(boot.get("distribution") or {}).get("ratio_quantiles"))
    ci = primary.get("display_ci") or [None, None]
    summary = (f"Perplexity ratio {fmt(primary.get('ratio_vs_baseline'))} (subject / baseline), "
               f"{fmt(100 * level if isinstance(level, (int, float)) else None)}% {boot.get('method', '')} CI "
               f"[{fmt(ci[0])}, {fmt(ci[1])}] from {fmt(boot.get('replicates'))} paired bootstrap replicates; "
               f"preview/final drift {fmt(drift.get('preview_final_ratio'))} "
               f"{'inside' if drift.get('within_band') else 'OUTSIDE'} the band {fmt(drift.get('band'))}.")
    tables = [
        _table("Primary metric", ("quantity", "value"), [
            ("ratio vs baseline (point estimate)", primary.get("ratio_vs_baseline")),
            (f"{fmt(level)} CI of the ratio (display_ci = exp(ci))", primary.get("display_ci")),
            ("CI of the log ratio", primary.get("ci")),
            ("log ratio", primary.get("log_ratio")),
            ("perplexity: baseline final / subject final / subject preview",
             [primary.get("baseline_final"), primary.get("final"), primary.get("preview")]),
            ("kind / analysis basis / direction",
             f"{fmt(primary.get('kind'))} / {fmt(primary.get('analysis_basis'))} / {fmt(primary.get('direction'))}"),
        ]),
        _table("Preview / final drift", ("quantity", "value"), [
            ("preview / final ratio", drift.get("preview_final_ratio")), ("band", drift.get("band")),
            ("within band", Cell(fmt(drift.get("within_band")), bool(drift.get("within_band"))))]),
        _table("Paired delta of mean log-loss (subject - baseline), per window", ("statistic", "value"),
               [(k, delta.get(k)) for k in ("mean", "mean_unweighted", "std", "min", "max", "degenerate",
                                            "degenerate_reason")] +
               [("paired windows", stats.get("paired_windows")),
                ("window match fraction", stats.get("window_match_fraction")),
                ("token count mismatches", stats.get("token_count_mismatches"))]),
        _table("Bootstrap", ("field", "value"),
               [(k, boot.get(k)) for k in ("method", "requested_method", "fallback", "replicates", "confidence_level",
                                           "scheme", "z0", "acceleration", "index_streams")]),
    ]
    ok = None
    if gates:
        ok = all(g.get("passed") for g in gates)
    return StageSection(stage_id, "paired.ppl_ratio", "", decision=f"ratio {fmt(primary.get('ratio_vs_baseline'))}",
                        ok=ok, summary=summary,
                        plots=(Plot(svg, "The bootstrap distribution of the ratio (its CDF, from the 101 quantiles the "
                                         "certificate records since paired.ppl_ratio 1.1.0), the confidence interval "
                                         "(shaded) and point estimate against the gate thresholds (dashed); the "
                                         "preview/final drift against its band; the per-window paired deltas."),),
                        tables=tuple(tables))


# -- sequential.diff ------------------------------------------------------------------------------------------

def _sequential(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
                checks: Sequence[Mapping[str, Any]]) -> StageSection:
    results = outputs.get("results") or {}
    config = outputs.get("config") or {}
    sequence = outputs.get("sequence") or {}
    method = outputs.get("method") or {}
    decision = str(results.get("decision", "?"))
    rows = [c for c in checks if isinstance(c.get("n"), (int, float))]
    band = config.get("equivalence_band")
    svg = plots.sequence_plot(f"{stage_id}-cs", n=[c["n"] for c in rows], lower=[c.get("lower") for c in rows],
                              upper=[c.get("upper") for c in rows], mean=[c.get("mean") for c in rows],
                              band=band, min_effect=config.get("delta_star"),
                              stop_n=sequence.get("stopping_time"), decision=decision, clip=None)
    summary = (f"{decision} after {fmt(results.get('n_used'))} of {fmt(sequence.get('observations_available'))} "
               f"observations ({fmt(sequence.get('checks'))} checks): {results.get('reason', '')}. "
               f"{outputs.get('interpretation', '')}")
    check_rows = [(c.get("n"), c.get("lower"), c.get("upper"), c.get("mean"), c.get("half_width"), c.get("p_value"),
                   ", ".join(k for k, v in sorted((c.get("rules") or {}).items()) if v) or "–",
                   Cell("stop: " + str(c.get("decision", "")), True) if c.get("stop") else "continue")
                  for c in rows]
    tables = [
        _table("Result", ("quantity", "value"), [
            ("decision", Cell(decision, decision in ("SAME", "DIFFERENT"))), ("outcome", results.get("outcome")),
            (f"confidence sequence at the stop ({fmt(results.get('confidence_level'))})", results.get("ci")),
            ("mean", results.get("mean")), ("half width", results.get("half_width")),
            ("n used", results.get("n_used")), ("e-value", results.get("e_value")),
            ("anytime-valid p-value", results.get("p_value")), ("direction", results.get("direction"))]),
        _table("Decision thresholds", ("knob", "value"), [
            ("alpha", config.get("alpha")), ("equivalence band gamma", band), ("minimum effect", config.get("min_effect")),
            ("delta* used", config.get("delta_star")), ("n_min / n_max", [config.get("n_min"), config.get("n_max")]),
            ("method", method.get("name")), ("validity", method.get("validity")),
            ("clip range", [(outputs.get("clip") or {}).get("low"), (outputs.get("clip") or {}).get("high")])]),
        _table(f"Recorded checks ({len(rows)}; the ledger's sequential_check decisions)",
               ("n", "lower", "upper", "mean", "half width", "p-value", "rules met", "action"), check_rows,
               numeric=(0, 1, 2, 3, 4, 5)),
    ]
    return StageSection(stage_id, "sequential.diff", "", decision=decision, ok=decision in ("SAME", "DIFFERENT"),
                        summary=summary,
                        plots=(Plot(svg, "The confidence sequence (shaded) at each recorded check against n, the "
                                         "running mean, the equivalence band and the minimum effect, and the "
                                         "stopping point."),),
                        tables=tuple(tables))


# -- bakeoff.compare / bakeoff.merge ----------------------------------------------------------------------------

def _bakeoff(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
             checks: Sequence[Mapping[str, Any]], use: str = "bakeoff.compare") -> StageSection:
    buckets = outputs.get("buckets") or {}
    manifest = outputs.get("manifest") or {}
    bands = manifest.get("bands") or {}
    plot_rows = []
    tables: list[Table] = []
    rank_by = "RSI_pool_env"
    for name, bucket in buckets.items():
        rank_by = str(bucket.get("rank_by") or rank_by)
        vendors = bucket.get("vendors") or {}
        order = list(bucket.get("ranking") or vendors)
        plot_rows.append((name, [(v, (vendors.get(v) or {}).get(rank_by), (vendors.get(v) or {}).get("ci_rsi"))
                                 for v in order]))
        tables.append(_table(f"Bucket {name}: ranking by {rank_by} (leader {fmt(bucket.get('leader'))})",
                             ("rank", "vendor", "n", rank_by, "interval", "band", "band shares", "g mean", "reason"),
                             [((vendors.get(v) or {}).get("rank"), v, (vendors.get(v) or {}).get("n"),
                               (vendors.get(v) or {}).get(rank_by), (vendors.get(v) or {}).get("ci_rsi"),
                               (vendors.get(v) or {}).get("band_pool_env"),
                               [round(s, 3) for s in (vendors.get(v) or {}).get("band_shares") or []],
                               (vendors.get(v) or {}).get("g_mean"), (vendors.get(v) or {}).get("reason"))
                              for v in order], numeric=(0, 2, 3, 7)))
        pairs = bucket.get("pairs")
        if pairs:
            tables.append(_table(f"Bucket {name}: pairwise differences (Holm-adjusted)",
                                 ("a", "b", "diff", "interval (tanh)", "p two-sided", "p Holm", "significant"),
                                 [(p.get("a"), p.get("b"), p.get("diff_rsi"), p.get("ci_tanh"), p.get("p_two_sided"),
                                   p.get("p_holm"),
                                   Cell(fmt(p.get("significant")), bool(p.get("significant"))) if p.get("reason") is None
                                   else Cell(str(p.get("reason")))) for p in pairs], numeric=(2, 4, 5)))
    svg = plots.bakeoff_plot(f"{stage_id}-pools", buckets=plot_rows, band_edges=bands.get("edges") or {},
                             value_label=f"pooled {rank_by}")
    if bands:
        tables.append(_table("Band rule", ("band on", "rule"), [(bands.get("band_on"), bands.get("rule"))]))
    if outputs.get("shards"):
        shards = outputs["shards"]
        tables.append(_table("Merged shards", ("shard", "value"),
                             [(str(i), s) for i, s in enumerate(shards)] if isinstance(shards, list)
                             else list(shards.items())))
    leaders = ", ".join(f"{name}: {fmt(b.get('leader'))}" for name, b in buckets.items())
    boot = outputs.get("bootstrap") or {}
    summary = (f"Leaders by bucket: {leaders}. " +
               (f"Intervals: {fmt(boot.get('confidence_level'))} bootstrap, {fmt(boot.get('replicates'))} replicates; "
                f"pairwise p-values Holm-adjusted within each bucket." if boot else
                "A merge of shard sums: pooled values without bootstrap intervals."))
    caption = ("Pooled value per vendor and bucket (points, ranking order) with its bootstrap interval (bars) over "
               "the band regions." if boot else "Pooled value per vendor and bucket over the band regions.")
    return StageSection(stage_id, use, "", decision=leaders, ok=None, summary=summary, plots=(Plot(svg, caption),),
                        tables=tuple(tables))


def _bakeoff_merge(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
                   checks: Sequence[Mapping[str, Any]]) -> StageSection:
    return _bakeoff(stage_id, outputs, gates, checks, use="bakeoff.merge")


# -- bakeoff.gate ---------------------------------------------------------------------------------------------

def _calm_gate(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
               checks: Sequence[Mapping[str, Any]]) -> StageSection:
    params = outputs.get("params") or {}
    summary_out = outputs.get("summary") or {}
    g = [float(v) for v in outputs.get("g") or [] if isinstance(v, (int, float))]
    svg = plots.calm_gate_plot(f"{stage_id}-gate", g=g, g_min=params.get("g_min"),
                               flagged_rows=outputs.get("flagged_rows") or [])
    weights = params.get("weights") or {}
    lanes = outputs.get("lanes") or {}
    tables = [
        _table("Lanes", ("lane", "telemetry", "weight"), [(k, v, weights.get(k)) for k, v in lanes.items()],
               numeric=(2,)),
        _table("Gate summary", ("quantity", "value"),
               [(k, summary_out.get(k)) for k in summary_out] +
               [("rows", outputs.get("n_rows")), ("mode", outputs.get("mode")), ("preset", outputs.get("preset")),
                ("cold start", outputs.get("cold_start")), ("streams by", outputs.get("stream_by"))]),
        _table("Parameters and references", ("knob", "value"),
               [(k, v) for k, v in params.items() if k != "weights"] +
               [(f"reference {k}", v) for k, v in (outputs.get("references") or {}).items()]),
    ]
    flag = summary_out.get("flag")
    summary = (f"Calm gate over {fmt(outputs.get('n_rows'))} rows: g from {fmt(summary_out.get('g_min'))} to "
               f"{fmt(summary_out.get('g_max'))} (mean {fmt(summary_out.get('g_mean'))}), "
               f"{fmt(summary_out.get('flagged'))} rows flagged" + (f" ({flag})." if flag else "."))
    return StageSection(stage_id, "bakeoff.gate", "", decision=f"{fmt(summary_out.get('flagged'))} flagged", ok=None,
                        summary=summary,
                        plots=(Plot(svg, "The calm gate g of each decision row against its floor g_min; flagged "
                                         "rows are marked."),), tables=tuple(tables))


# -- conformal.pac_report / conformal.monitor -------------------------------------------------------------------

_RATES = ("singleton", "doublet", "abstention", "error_given_singleton")


def _scopes(outputs: Mapping[str, Any], prefix: str) -> list[str]:
    classes = sorted(k[len(prefix):] for k in outputs if k.startswith(prefix) and not k.endswith("marginal"))
    return [*classes, "marginal"] if f"{prefix}marginal" in outputs else classes


def _pac_report(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
                checks: Sequence[Mapping[str, Any]]) -> StageSection:
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
            thresholds += [(parts[1][len("pac_bounds_"):], parts[2], v) for v in _threshold_values(gate)]
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
        _table("PAC bounds on operational rates", ("scope", "rate", "count", "n", "LOO rate", "lower", "upper",
                                                   "method", "level", "vacuous"), rows, numeric=(2, 3, 4, 5, 6, 8)),
        _table("SSBC correction (small-sample-corrected alpha per class)",
               ("class", "alpha target", "alpha corrected", "exact", "delta", "n", "k", "u*", "satisfied mass",
                "score threshold"), ssbc_rows, numeric=(1, 2, 4, 5, 6, 7, 8, 9)),
        _table("Joint guarantee", ("field", "value"),
               [("level", joint.get("level")), ("risk terms", joint.get("risk_terms")),
                ("statement", joint.get("statement")), ("assumptions", joint.get("assumptions"))]),
    ]
    summary = f"Joint guarantee at level {fmt(joint.get('level'))}: {joint.get('statement', '')}"
    return StageSection(stage_id, "conformal.pac_report", "", decision=f"joint level {fmt(joint.get('level'))}",
                        ok=None, summary=summary,
                        plots=(Plot(svg, "Per class and marginal: each operational rate on the calibration data "
                                         "(leave-one-out, point) with its PAC bound (bar); gate thresholds dashed."),),
                        tables=tuple(tables))


def _monitor(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
             checks: Sequence[Mapping[str, Any]]) -> StageSection:
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
        _table(f"Production rates against the bounds (compared to: {compare_to})",
               ("scope", "rate", "count", "n", "production rate", "certified bound", "bound at realised size",
                "inside"), rows, numeric=(2, 3, 4)),
        _table("Class-conditional coverage in production", ("class", "covered", "n", "rate", "target", "p-value"),
               [(k, v.get("covered"), v.get("n"), v.get("rate"), v.get("target"), v.get("p_value"))
                for k, v in coverage.items()], numeric=(1, 2, 3, 4, 5)),
        _table("Source of the bounds", ("field", "value"),
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


def _generic(stage_id: str, outputs: Mapping[str, Any], gates: Sequence[Mapping[str, Any]],
             checks: Sequence[Mapping[str, Any]]) -> StageSection:
    return StageSection(stage_id, "", "", decision="", ok=None, summary="No report layout for this stage type; "
                        "its outputs follow.", tables=(_table("Outputs", ("output", "value"), list(outputs.items())),))


_BUILDERS: dict[str, Callable[..., StageSection]] = {
    "paired.ppl_ratio": _paired_ratio,
    "sequential.diff": _sequential,
    "bakeoff.compare": _bakeoff,
    "bakeoff.merge": _bakeoff_merge,
    "bakeoff.gate": _calm_gate,
    "conformal.pac_report": _pac_report,
    "conformal.monitor": _monitor,
}


def stage_section(stage_id: str, use: str, version: str, outputs: Mapping[str, Any],
                  gates: Sequence[Mapping[str, Any]], checks: Sequence[Mapping[str, Any]]) -> StageSection:
    """The report section of one stage (see module docstring)."""
    builder = _BUILDERS.get(use, _generic)
    section = builder(stage_id, outputs, stage_gates(stage_id, gates), checks)
    return StageSection(stage_id=stage_id, use=use, version=version, decision=section.decision, ok=section.ok,
                        summary=section.summary, plots=section.plots, tables=section.tables)
