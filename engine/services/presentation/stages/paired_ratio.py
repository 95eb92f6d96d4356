"""How ``paired.ppl_ratio`` reads: the perplexity ratio with its bootstrap interval against the gate thresholds,
the preview/final drift and the paired deltas per window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.services.presentation.explain import percent_text
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.html.view import Cell, Plot, StageInput, StageSection, fmt, mapping, table, threshold_values

__all__ = ["section", "how_to_read", "markdown"]


def section(stage: StageInput) -> StageSection:
    """The report section of a ``paired.ppl_ratio`` stage."""
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
    return StageSection(stage.stage_id, "", "",
                        decision=f"ratio {fmt(primary.get('ratio_vs_baseline'))}", ok=ok, summary=summary,
                        plots=(Plot(svg, caption),), tables=tuple(tables))


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``paired.ppl_ratio`` stage\'s outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    primary = mapping(outputs.get("primary_metric"))
    level = percent_text(primary.get("confidence_level"))
    texts = [
        "What was tested: the same evaluation windows were scored by the baseline and by the subject model, and the "
        "ratio of their perplexities (subject / baseline) was estimated from the paired, token-weighted difference "
        f"in log-loss. The interval is a {level} paired bootstrap confidence interval for that ratio: a ratio "
        "below 1 means the subject predicts the windows better, above 1 worse.",
        "What the verdict means: the gates compare the ratio or its interval with fixed thresholds (for example "
        "\"the upper end of the interval is at most 1.05\"). PASS says the data are compatible with no regression "
        "larger than the threshold at that confidence level. It does NOT say the models behave the same on other "
        "data, other tasks or other metrics, nor that a ratio inside the interval is certain.",
        "Assumptions: the windows are a fair sample of the text the models will see, each window is scored by both "
        "models on the same tokens (pairing), and windows are independent of each other; the bootstrap resamples "
        "whole windows.",
    ]
    drift = outputs.get("drift")
    if isinstance(drift, Mapping) and drift:
        inside = drift.get("within_band")
        texts.append("Preview/final drift compares the subject's perplexity on the preview windows with the final "
                     "ones; "
                     + ("it lies inside its band, so the two phases agree." if inside is True else
                        "it lies OUTSIDE its band: the preview and final phases disagree, which questions whether the "
                        "final windows represent the same data." if inside is False else
                        "the certificate does not say whether it lies inside its band."))
    return tuple(texts)


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``paired.ppl_ratio`` stage (every ``version``): the primary metric, the
    pairing checks and the bootstrap settings; the preview/final drift only when the outputs hold one (1.2.0
    leaves it out without a phase column)."""
    pm = outputs["primary_metric"]
    stats = outputs["dataset"]["windows"]["stats"]
    boot = stats["bootstrap"]
    level = round(100 * pm["confidence_level"], 2)
    overlap = stats["window_overlap_fraction"] if stats["overlap_checked"] else "not checked (no offsets)"
    arms = stats.get("overlap_checked_arms", ("baseline", "subject"))
    if len(arms) == 1:
        overlap = f"{overlap} ({arms[0]} only: the other arm has no offsets)"
    lines = [
        f"| ratio vs baseline | {level:g}% CI | log-ratio CI | subject PPL | baseline PPL |",
        "|---:|---|---|---:|---:|",
        f"| {pm['ratio_vs_baseline']:.6f} | [{pm['display_ci'][0]:.6f}, {pm['display_ci'][1]:.6f}] | "
        f"[{pm['ci'][0]:.6g}, {pm['ci'][1]:.6g}] | {pm['final']:.4f} | {pm['baseline_final']:.4f} |",
        "",
        f"Paired windows {stats['paired_windows']} (match fraction {stats['window_match_fraction']:.6g}, "
        f"overlap {overlap}, token-count mismatches {stats['token_count_mismatches']}). "
        f"Bootstrap: {boot['method']} ({boot['scheme']} resampling), {boot['replicates']} replicates"
        + (f"; fallback: {boot['fallback']}" if boot["fallback"] else "")
        + ("; degenerate deltas: CI collapsed to the point" if stats["paired_delta_summary"]["degenerate"] else "")
        + ".",
    ]
    drift = outputs.get("drift")
    if drift:
        lines.append(f"Preview→final drift ratio {drift['preview_final_ratio']:.6f} "
                     f"({'within' if drift['within_band'] else 'OUTSIDE'} band {drift['band']}).")
    return "\n".join(lines)
