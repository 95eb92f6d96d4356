"""How ``paired.ppl_ratio`` reads: the perplexity ratio with its bootstrap interval against the gate thresholds,
the preview/final drift and the paired deltas per window, each per the unit the windows are counted in (1.4.0's
``unit``: token, byte or word). A version that records no unit (1.3.0 and older) is described as counting
"whatever its count column held": it called every count a token, also an evaluator's bytes or words. With two
evaluator exports (1.5.0) it also shows how their documents paired, by key and identity digests, and what each
export states about its origin (``certa.engine.services.presentation.html.evidence``, as ``paired.metric_delta``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.core.stages.ratio_names import ESTIMATE_KEYS, UNITS
from certa.engine.services.presentation.explain import number_text, percent_text
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.html.evidence import (PROVENANCE_TEXT, SIDES, export_facts, pairing_table,
                                                           provenance_table, unpaired_counts)
from certa.engine.services.presentation.html.view import (Cell, Plot, StageInput, StageSection, fmt, gates_state,
                                                          mapping, table, threshold_values)

__all__ = ["section", "reading", "estimates", "how_to_read", "markdown"]


def _estimate(outputs: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], str | None]:
    """(the output holding the ratio, that output, the word for the counted unit or None when the version
    records no unit)."""
    key = next((k for k in ESTIMATE_KEYS if isinstance(outputs.get(k), Mapping)), "primary_metric")
    block = mapping(outputs.get(key))
    return key, block, UNITS.get(block.get("unit")) if isinstance(block.get("unit"), str) else None


def _mismatches(stats: Mapping[str, Any], word: str | None) -> Any:
    return stats.get(f"{word or 'token'}_count_mismatches")


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's summary, a CI summary's line): the ratio with its bootstrap
    interval, and the preview/final drift against its band when recorded."""
    _, primary, word = _estimate(outputs)
    drift = mapping(outputs.get("drift"))
    boot = mapping(mapping(mapping(mapping(outputs.get("dataset")).get("windows")).get("stats")).get("bootstrap"))
    level = primary.get("confidence_level")
    ci = primary.get("display_ci") or [None, None]
    return (f"Perplexity ratio{f' per {word}' if word else ''} {fmt(primary.get('ratio_vs_baseline'))} "
            f"(subject / baseline), {fmt(100 * level if isinstance(level, (int, float)) else None)}% "
            f"{boot.get('method', '')} CI [{fmt(ci[0])}, {fmt(ci[1])}] from {fmt(boot.get('replicates'))} paired "
            "bootstrap replicates"
            + (f"; preview/final drift {fmt(drift.get('preview_final_ratio'))} "
               f"{'inside' if drift.get('within_band') else 'OUTSIDE'} the band {fmt(drift.get('band'))}."
               if drift else "."))


def section(stage: StageInput) -> StageSection:
    """The report section of a ``paired.ppl_ratio`` stage."""
    outputs, gates = stage.outputs, stage.gates
    key, primary, word = _estimate(outputs)
    per = f" per {word}" if word else ""
    drift = mapping(outputs.get("drift"))  # absent (1.2.0) when the input has no phase column
    stats = mapping(mapping(mapping(outputs.get("dataset")).get("windows")).get("stats"))
    delta = mapping(stats.get("paired_delta_summary"))
    boot = mapping(stats.get("bootstrap"))
    ratio_gates = [(g["id"], v) for g in gates for v in threshold_values(g)
                   if f".{key}.display_ci" in g["metric"] or g["metric"].endswith("ratio_vs_baseline")]
    level = primary.get("confidence_level")
    svg = plots.ratio_plot(f"{stage.stage_id}-ratio", ratio=primary.get("ratio_vs_baseline"),
                           display_ci=primary.get("display_ci"), confidence_level=level, gate_lines=ratio_gates,
                           drift_ratio=drift.get("preview_final_ratio"), drift_band=drift.get("band"), delta=delta,
                           distribution=mapping(boot.get("distribution")).get("ratio_quantiles"), per=word)
    perplexities = [(f"perplexity{per}: baseline final", primary.get("baseline_final")),
                    (f"perplexity{per}: subject final", primary.get("final"))]
    if "preview" in primary:
        perplexities.append((f"perplexity{per}: subject preview", primary.get("preview")))
    counted = [("windows counted in", primary.get("unit"))] if word else []
    tables = [
        table(f"Perplexity{per} (primary metric, {key})", ("quantity", "value"), [
            *counted,
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
        table(f"Paired delta of mean log-loss{per} (subject - baseline), per window", ("statistic", "value"),
              [(k, delta.get(k)) for k in ("mean", "mean_unweighted", "std", "min", "max", "degenerate",
                                            "degenerate_reason")] +
              [("paired windows", stats.get("paired_windows")),
                ("window match fraction", stats.get("window_match_fraction")),
                (f"{word} count mismatches" if word else "count mismatches (counts named tokens by this version)",
                 _mismatches(stats, word))]),
        table("Bootstrap", ("field", "value"),
              [(k, boot.get(k)) for k in ("method", "requested_method", "fallback", "replicates", "confidence_level",
                                           "scheme", "z0", "acceleration", "index_streams") if k in boot]),
    ]
    pairing, sources = mapping(outputs.get("pairing")), mapping(outputs.get("sources"))  # 1.5.0, exports only
    if pairing:
        tables.append(pairing_table(pairing))
    tables += [provenance_table(side, mapping(sources.get(side))) for side in SIDES if side in sources]
    ok = gates_state(gates, None)
    caption = ("The bootstrap distribution of the ratio (its CDF, from the 101 quantiles the certificate records since "
               "paired.ppl_ratio 1.1.0) when recorded, the confidence interval and point estimate against the gate "
               "thresholds (dashed); " + ("the preview/final drift against its band; " if drift else "")
               + "the per-window paired deltas.")
    return StageSection(stage.stage_id, "", "",
                        decision=f"ratio{per} {fmt(primary.get('ratio_vs_baseline'))}", ok=ok, summary=reading(outputs),
                        plots=(Plot(svg, caption),), tables=tuple(tables), facts=export_facts(outputs))


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """The perplexity ratio (subject / baseline) with its bootstrap interval (``display_ci``)."""
    _, primary, word = _estimate(outputs)
    return (Estimate.read(f"perplexity ratio{f' per {word}' if word else ''} (subject / baseline)",
                          primary.get("ratio_vs_baseline"), primary.get("display_ci"), primary.get("confidence_level")),)


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``paired.ppl_ratio`` stage\'s outputs (``certa.engine.services.presentation.explain.how_to_read``):
    per the unit the windows are counted in, and how a gate per one unit compares with a gate per another."""
    _, primary, word = _estimate(outputs)
    level = percent_text(primary.get("confidence_level"))
    if word is None:
        counted = ("each window's count: the column the spec mapped to tokens, which this version does not record "
                   "as tokens, bytes or words (an lm-eval export counts bytes or words, never tokens), so the "
                   "ratio is per whatever that column counted")
        estimand = "the ratio of their perplexities (subject / baseline) per counted unit"
        pairing = "on the same text with the same counts (pairing)"
    else:
        counted = f"each window's {word} count (the windows are counted in {primary.get('unit')})"
        estimand = f"the ratio of their perplexities per {word} (subject / baseline)"
        pairing = f"on the same text with the same {word} counts (pairing)"
    texts = [
        f"What was tested: the same evaluation windows were scored by the baseline and by the subject model, and "
        f"{estimand} was estimated from the paired difference in mean log-loss{f' per {word}' if word else ''}, "
        f"{word + '-weighted' if word else 'weighted by ' + counted}. The interval is a {level} paired bootstrap "
        "confidence interval for that ratio: a ratio below 1 means the subject predicts the windows better, above "
        "1 worse.",
        "What the verdict means: the gates compare the ratio or its interval with fixed thresholds (for example "
        "\"the upper end of the interval is at most 1.05\"). PASS says the data are compatible with no regression "
        "larger than the threshold at that confidence level. It does NOT say the models behave the same on other "
        "data, other tasks or other metrics, nor that a ratio inside the interval is certain.",
        "Assumptions: the windows are a fair sample of the text the models will see, each window is scored by both "
        f"models {pairing}, and windows are independent of each other; the bootstrap resamples whole windows.",
    ]
    pairing = mapping(outputs.get("pairing"))
    if pairing:
        texts.append(_export_pairing_text(pairing))
    if word != "token":
        texts.append(_units_text(word, primary.get("ratio_vs_baseline")))
    if mapping(outputs.get("sources")):
        texts.append(PROVENANCE_TEXT)
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


def _export_pairing_text(pairing: Mapping[str, Any]) -> str:
    """How two exports' documents paired (1.5.0): by the tool's key with its document, prompt and target digests;
    those left out, and what leaving them out does to the ratio."""
    keys = ", ".join(map(str, pairing.get("key_fields") or ())) or "the item key"
    text = (f"Pairing: the two exports' documents were paired by {keys}, and a document counted only when the "
            "evaluator's document, prompt and target digests are equal on both sides (the same text scored by both "
            "models); a document found on one side only, or with other digests (another text, even of the same "
            "length), is left out of the ratio and recorded.")
    left_out = unpaired_counts(pairing)
    if left_out:
        text += (" Here " + ", ".join(f"{count} item(s) {kind}" for kind, count in left_out) + " were not paired: "
                 "the ratio covers the paired documents only, and is biased if the missing ones are harder or easier "
                 "to predict than the rest.")
    else:
        text += " Here every document paired."
    return text


_PER_TOKEN = {"byte": 3.0, "word": 0.75}
"""Typical counts per token of English text with a GPT-2-style tokenizer (about 3 to 4 bytes and 0.75 words per
token), for the worked example only: the certificate never converts."""


def _units_text(word: str | None, ratio: Any) -> str:
    """How a ratio per ``word`` (None: a version that records no unit) compares with a ratio per token: for one
    text and one tokenizer, ratio per token = (ratio per unit) ^ (units per token)."""
    unit = word or "counted unit"
    examples = [(w, k) for w, k in _PER_TOKEN.items() if word in (w, None)]
    worked = "; ".join(f"at {number_text(k)} {w}s per token a {w} gate of 1.05 is a token gate of "
                       f"{number_text(1.05 ** k)}" for w, k in examples)
    this = (f" (this ratio, {number_text(ratio)}, would be {number_text(ratio ** _PER_TOKEN[word])} per token at "
            f"{number_text(_PER_TOKEN[word])} {word}s per token)"
            if word in _PER_TOKEN and isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else "")
    return (f"Units: a ratio per {unit} is not a ratio per token. For one text and one tokenizer, ratio per token = "
            f"(ratio per {unit}) ^ ({unit}s per token), so the same threshold is another limit per token: {worked}"
            f"{this}. Compare a gate per {unit} with a gate per token only through that power"
            + (" (this version does not record what its counts were)." if word is None else "."))


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``paired.ppl_ratio`` stage (every ``version``): the primary metric, the
    pairing checks and the bootstrap settings; the preview/final drift only when the outputs hold one (1.2.0
    leaves it out without a phase column)."""
    key, pm, word = _estimate(outputs)
    per = f" per {word}" if word else ""
    stats = outputs["dataset"]["windows"]["stats"]
    boot = stats["bootstrap"]
    level = round(100 * pm["confidence_level"], 2)
    overlap = stats["window_overlap_fraction"] if stats["overlap_checked"] else "not checked (no offsets)"
    arms = stats.get("overlap_checked_arms", ("baseline", "subject"))
    if len(arms) == 1:
        overlap = f"{overlap} ({arms[0]} only: the other arm has no offsets)"
    lines = [
        f"| ratio{per} vs baseline | {level:g}% CI | log-ratio CI | subject PPL{per} | baseline PPL{per} |",
        "|---:|---|---|---:|---:|",
        f"| {pm['ratio_vs_baseline']:.6f} | [{pm['display_ci'][0]:.6f}, {pm['display_ci'][1]:.6f}] | "
        f"[{pm['ci'][0]:.6g}, {pm['ci'][1]:.6g}] | {pm['final']:.4f} | {pm['baseline_final']:.4f} |",
        "",
        f"Paired windows {stats['paired_windows']} (match fraction {stats['window_match_fraction']:.6g}, "
        f"overlap {overlap}, {word or 'token'}-count mismatches {_mismatches(stats, word)}). "
        f"Bootstrap: {boot['method']} ({boot['scheme']} resampling), {boot['replicates']} replicates"
        + (f"; fallback: {boot['fallback']}" if boot["fallback"] else "")
        + ("; degenerate deltas: CI collapsed to the point" if stats["paired_delta_summary"]["degenerate"] else "")
        + ".",
    ]
    drift = outputs.get("drift")
    if drift:
        lines.append(f"Preview→final drift ratio {drift['preview_final_ratio']:.6f} "
                     f"({'within' if drift['within_band'] else 'OUTSIDE'} band {drift['band']}).")
    if "pairing" in outputs:
        lines.append(_markdown_exports(outputs["pairing"], outputs.get("sources", {})))
    return "\n".join(lines)


def _markdown_exports(pairing: Mapping[str, Any], sources: Mapping[str, Any]) -> str:
    """1.5.0 with two exports: how their documents paired, and the tool, version and task each states."""
    left_out = [f"{count} {kind}" for kind, count in unpaired_counts(pairing)]
    line = (f"Paired documents {pairing['paired']} of {pairing['baseline_items']} (baseline) and "
            f"{pairing['subject_items']} (subject) by {', '.join(pairing['key_fields'])} with equal identity digests"
            + (f"; not paired: {', '.join(left_out)}" if left_out else "") + ".")
    stated = [f"{side}: {source['tool']} {source['tool_version'] or '(version not stated)'}"
              + (f", task {source['task']}" if source.get("task") else "")
              for side, source in sources.items()]
    return line + (f" Exports: {'; '.join(stated)}." if stated else "")
