"""How ``paired.metric_delta`` reads: the paired difference subject − baseline of a per-item metric with its
interval against the non-inferiority margin and the gate thresholds, the paired 2×2 table and the tests, the
smallest difference this many items detect, the slices with raw and adjusted p-values, how the items paired,
what each evaluator export states about where its numbers come from, and (1.2.0) the unit of analysis: with
repeated trials (Inspect epochs) "unit of analysis: N samples (R repeats each)" and how the repeats were
analysed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from certa.engine.services.presentation.explain import (finite_number, interval_text, number_pair, number_text,
                                                        percent_text, signed_text)
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.html.evidence import (PROVENANCE_TEXT, export_facts, pairing_table,
                                                           provenance_table, unpaired_counts)
from certa.engine.services.presentation.html.view import (Cell, Plot, StageInput, StageSection, Table, fmt, gates_state,
                                                          mapping, table,
                                                    threshold_values)

__all__ = ["section", "reading", "estimates", "how_to_read", "markdown", "METHOD_NAMES", "ADJUSTMENTS",
           "SLICE_ROWS_SHOWN", "method_name", "adjustment_name", "loss_text", "by_sample", "paired_units", "gate_lines",
           "assumptions_text"]

SIDES = ("baseline", "subject")

METHOD_NAMES = {
    "tango_score": "Tango score interval for paired proportions",
    "newcombe_hybrid_score": "Newcombe hybrid score interval for paired proportions",
    "tango_score_rao_scott": "Tango score interval of the samples' design-effect-adjusted table (Student's t)",
    "newcombe_hybrid_score_rao_scott": "Newcombe hybrid score interval of the samples' design-effect-adjusted table "
                                       "(Student's t)",
    "bca": "BCa bootstrap interval over whole items",
    "percentile": "percentile bootstrap interval over whole items, BCa being undefined",
    "empirical_bernstein": "empirical-Bernstein confidence sequence",
    "betting": "betting confidence sequence",
}
"""The interval methods the stage records (``difference.method``), in words; another name is shown as it is."""

ADJUSTMENTS = {"holm": "Holm (familywise error rate)",
               "benjamini_hochberg": "Benjamini–Hochberg (false discovery rate)"}

SLICE_ROWS_SHOWN = 15
"""Slice tables with more rows than this are folded (the plot shows every slice)."""


def method_name(method: Any) -> str:
    """A recorded interval method (``difference.method``, ``interval_method``) in words."""
    return METHOD_NAMES.get(str(method), fmt(method))


def adjustment_name(adjustment: Any) -> str:
    """A recorded multiplicity adjustment (``holm``, ``benjamini_hochberg``) in words."""
    return ADJUSTMENTS.get(str(adjustment), fmt(adjustment))


def loss_text(margin: Any, scale: Any) -> str:
    """A loss of ``margin`` in words: percentage points for a binary metric (0.01 is 1 point), else the metric's
    own units."""
    number = finite_number(margin)
    if number is None:
        return "the margin"
    if scale == "binary":
        points = number_text(100 * number)
        return f"{points} point{'' if points == '1' else 's'}"
    return number_text(number)


def _units(outputs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The recorded unit of analysis (1.2.0; empty before)."""
    return mapping(outputs.get("units"))


def by_sample(outputs: Mapping[str, Any]) -> bool:
    """The samples, each with several repeats, are the units (1.2.0 with repeats)."""
    repeats = mapping(_units(outputs).get("repeats"))
    most = repeats.get("max")
    return _units(outputs).get("unit") == "sample" and isinstance(most, int) and most > 1


def paired_units(outputs: Mapping[str, Any]) -> str:
    """``24 paired items``, or ``20 paired samples (10 repeats each)`` when the samples are the units."""
    statement = str(_units(outputs).get("statement", ""))
    if by_sample(outputs) and statement.startswith("unit of analysis: ") and " " in statement[18:]:
        number, rest = statement.removeprefix("unit of analysis: ").split(" ", 1)
        return f"{number} paired {rest}"  # "20 paired samples (10 repeats each)"
    return f"{fmt(outputs.get('n_paired'))} paired items"


def _verdict_sentence(outputs: Mapping[str, Any]) -> str:
    """The non-inferiority verdict in words, with the evidence it rests on; a statement that no margin was set
    when the stage records none."""
    ni = mapping(outputs.get("noninferiority"))
    if not ni:
        test = mapping(outputs.get("test"))
        return ("No non-inferiority margin was set, so there is no verdict on a loss"
                + (f"; exact McNemar test of equal proportions: p = {number_text(test.get('p_value'))}." if test
                   else "."))
    loss = loss_text(ni.get("margin"), outputs.get("scale"))
    alpha = number_text(ni.get("alpha"))
    if "p_value" in ni:
        evidence = f"{fmt(ni.get('method'))}, one-sided p = {number_text(ni.get('p_value'))}"
        evidence += f" {'<' if ni.get('noninferior') else '≥'} α = {alpha}"
    else:
        limit = finite_number(ni.get("margin"))
        evidence = (f"the interval's lower bound {number_text(ni.get('lower_bound'))} "
                    f"{'lies' if ni.get('noninferior') else 'does NOT lie'} above −margin = "
                    f"{number_text(None if limit is None else -limit)}")
    margin = number_text(ni.get("margin"))
    if ni.get("noninferior") is True:
        return f"Non-inferior at margin {margin}: the subject is at most {loss} worse ({evidence})."
    return (f"NOT shown non-inferior at margin {margin}: the data do not rule out that the subject is {loss} or "
            f"more worse ({evidence}).")


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's opening sentence, a CI summary's line): the means, the
    difference with its interval, the verdict."""
    difference = mapping(outputs.get("difference"))
    return (f"{fmt(outputs.get('metric'))} over {paired_units(outputs)}: subject "
            f"{number_text(outputs.get('subject_mean'))}, baseline {number_text(outputs.get('baseline_mean'))}, "
            f"difference {signed_text(difference.get('estimate'))} (subject − baseline), "
            f"{percent_text(difference.get('confidence_level'))} CI {interval_text(difference.get('ci'))} "
            f"({method_name(difference.get('method'))}). {_verdict_sentence(outputs)}")


def _decision(outputs: Mapping[str, Any]) -> tuple[str, bool | None]:
    """The badge: the non-inferiority verdict when a margin was set, else the difference."""
    ni = mapping(outputs.get("noninferiority"))
    if ni:
        margin = number_text(ni.get("margin"))
        if ni.get("noninferior") is True:
            return f"non-inferior at margin {margin}", True
        return f"NOT shown non-inferior at margin {margin}", False
    return f"difference {signed_text(mapping(outputs.get('difference')).get('estimate'))}", None


def _facts(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """Beside the decision: the sign convention, the items left out and how the two exports' statements compare."""
    facts = [str(outputs["direction"])] if isinstance(outputs.get("direction"), str) else []
    if isinstance(_units(outputs).get("statement"), str):
        facts.append(str(_units(outputs)["statement"]))
    return (*facts, *export_facts(outputs))


def _result_table(outputs: Mapping[str, Any]) -> Table:
    """The means, the difference, its interval and how the interval was made."""
    difference = mapping(outputs.get("difference"))
    scale = outputs.get("scale")
    units = _units(outputs)
    counted = [("paired samples n (the unit of analysis)", outputs.get("n_paired")),
               ("paired (sample, repeat) rows", units.get("rows")),
               ("repeats per sample", _repeats_text(mapping(units.get("repeats"))))] if by_sample(outputs) \
        else [("paired items n", outputs.get("n_paired"))]
    rows: list[tuple[str, Any]] = [
        ("metric", outputs.get("metric")),
        ("scale", f"{fmt(scale)} in {fmt(outputs.get('range'))}" if "range" in outputs else scale),
        *counted,
        ("baseline mean", outputs.get("baseline_mean")),
        ("subject mean", outputs.get("subject_mean")),
        ("difference subject − baseline (estimate)", difference.get("estimate")),
        (f"{percent_text(difference.get('confidence_level'))} CI of the difference", difference.get("ci")),
        ("interval method", method_name(difference.get("method"))),
    ]
    rows += [(label, difference.get(key)) for label, key in (
        ("validity", "validity"), ("bootstrap replicates", "replicates"), ("BCa bias correction z0", "z0"),
        ("BCa acceleration", "acceleration"), ("fallback", "fallback")) if key in difference]
    clustering = mapping(outputs.get("clustering"))
    rows += [(label, clustering.get(key)) for label, key in (
        ("effective independent rows (Rao–Scott)", "effective_rows"), ("design effect", "design_effect"),
        ("degrees of freedom (Student's t)", "degrees_of_freedom")) if key in clustering]
    if "analysis" in units:
        rows.append(("unit of analysis", f"{fmt(units.get('statement'))}: {fmt(units.get('analysis'))}"))
    return table("Result", ("quantity", "value"), rows)


def _repeats_text(repeats: Mapping[str, Any]) -> str:
    """``10`` or ``9 to 10 (2 samples with 9, 18 with 10)``."""
    low, high = repeats.get("min"), repeats.get("max")
    if low == high:
        return fmt(low)
    counts = [c for c in repeats.get("counts") or () if isinstance(c, Mapping)]
    return (f"{fmt(low)} to {fmt(high)} ("
            + ", ".join(f"{fmt(c.get('samples'))} samples with {fmt(c.get('repeats'))}" for c in counts) + ")")


def _two_by_two(counts: Mapping[str, Any], rows: str = "items") -> Table | None:
    """The paired 2×2 table of the ``rows`` with its margins (None when the four counts are not all integers)."""
    both, subject_only, baseline_only, neither = (counts.get(k) for k in ("both", "subject_only", "baseline_only",
                                                                           "neither"))
    cells = (both, subject_only, baseline_only, neither)
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in cells):
        return None
    return table(f"Paired 2×2 table of the {rows} (discordant: {subject_only} correct for the subject only, "
                 f"{baseline_only} for the baseline only)",
                 ("", "baseline correct (1)", "baseline wrong (0)", "total"),
                 [("subject correct (1)", both, subject_only, both + subject_only),
                  ("subject wrong (0)", baseline_only, neither, baseline_only + neither),
                  ("total", both + baseline_only, subject_only + neither, sum(cells))], numeric=(1, 2, 3))


def _test_tables(outputs: Mapping[str, Any]) -> list[Table]:
    """The exact McNemar test, the non-inferiority test and the minimum detectable difference, as recorded."""
    tables = []
    test = mapping(outputs.get("test"))
    if test:
        tables.append(table("Exact McNemar test", ("quantity", "value"), [
            ("test", test.get("name")), ("null hypothesis", test.get("null")),
            ("p-value (two-sided)", test.get("p_value"))]))
    ni = mapping(outputs.get("noninferiority"))
    if ni:
        noninferior = ni.get("noninferior")
        verdict = Cell("non-inferior" if noninferior is True else "NOT shown non-inferior", noninferior is True)
        evidence = ([("p-value (one-sided)", ni.get("p_value"))] if "p_value" in ni else []) + \
                   ([("lower bound of the interval", ni.get("lower_bound"))] if "lower_bound" in ni else [])
        tables.append(table("Non-inferiority test", ("quantity", "value"), [
            ("margin δ", ni.get("margin")), ("null hypothesis (rejected to declare non-inferiority)", ni.get("null")),
            ("method", ni.get("method")), ("one-sided level α", ni.get("alpha")), *evidence,
            ("verdict", verdict)]))
    detectable = mapping(outputs.get("detectable_difference"))
    if detectable:
        attainable = detectable.get("attainable")
        samples = " samples" if by_sample(outputs) else ""
        tables.append(table(f"Minimum detectable difference at n = {fmt(outputs.get('n_paired'))}{samples}",
                            ("quantity", "value"), [
            ("minimum detectable |difference|", detectable.get("difference")), ("power", detectable.get("power")),
            ("two-sided α", detectable.get("alpha_two_sided")),
            ("attainable with the discordance observed",
             Cell(fmt(attainable), attainable if isinstance(attainable, bool) else None)),
            ("approximation", detectable.get("approximation"))]))
    return tables


def _slice_rows(outputs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The recorded slices (none when the stage had no slice column)."""
    return [row for row in mapping(outputs.get("slices")).get("rows") or () if isinstance(row, Mapping)]


def _slice_table(outputs: Mapping[str, Any]) -> Table | None:
    """One row per slice with its raw and adjusted p-values (None without slices)."""
    slices = mapping(outputs.get("slices"))
    rows = _slice_rows(outputs)
    if not rows:
        return None
    return table(f"{len(rows)} slices: p-values of the {fmt(slices.get('p_value_of'))}, adjusted across slices by "
                 f"{adjustment_name(slices.get('adjustment'))}; intervals not adjusted",
                 ("slice", "items", "difference", "CI low", "CI high", "p-value", "adjusted p-value"),
                 [(row.get("slice"), row.get("items"), row.get("estimate"), *number_pair(row.get("ci")),
                   row.get("p_value"), row.get("adjusted_p_value")) for row in rows],
                 numeric=(1, 2, 3, 4, 5, 6), collapsed=len(rows) > SLICE_ROWS_SHOWN)


def gate_lines(stage: StageInput, on_axis: Sequence[str] = ("difference.ci", "difference.estimate")) -> list[
        tuple[str, float]]:
    """The thresholds of the gates on the outputs ``on_axis`` (paths below the stage id; by default the difference
    or its interval, ``<id>.difference.ci[...]``, ``<id>.difference.estimate``): they share the plot's axis."""
    prefixes = tuple(f"{stage.stage_id}.{path}" for path in on_axis)
    return [(str(g.get("id")), v) for g in stage.gates if str(g.get("metric", "")).startswith(prefixes)
            for v in threshold_values(g)]


def _plot(stage: StageInput) -> Plot:
    """The forest plot of the difference (``plots.difference_plot``) with its caption."""
    outputs = stage.outputs
    difference = mapping(outputs.get("difference"))
    margin = mapping(outputs.get("noninferiority")).get("margin")
    gates = gate_lines(stage)
    slices = [(f"{fmt(row.get('slice'))} (n = {fmt(row.get('items'))})", row.get("estimate"), row.get("ci"))
              for row in _slice_rows(outputs)]
    svg = plots.difference_plot(
        f"{stage.stage_id}-difference", overall=(f"overall (n = {fmt(outputs.get('n_paired'))}"
                                                 f"{' samples' if by_sample(outputs) else ''})",
                                                 difference.get("estimate"), difference.get("ci")),
        slices=slices, confidence_level=difference.get("confidence_level"), margin=finite_number(margin),
        gate_lines=gates,
        value_label=f"difference in {fmt(outputs.get('metric'))}, subject − baseline "
                    "(negative: the subject is worse)")
    level = percent_text(difference.get("confidence_level"))
    caption = (f"The difference subject − baseline with its {level} interval, overall (diamond)"
               + (" and per slice (intervals not adjusted for multiplicity)" if slices else "")
               + ", against 0 (no difference)"
               + (f", the non-inferiority limit −margin = −{number_text(margin)} (orange, dashed)"
                  if finite_number(margin) is not None else "")
               + (" and the gate thresholds (red, dashed)" if gates else "") + ".")
    return Plot(svg, caption)


def section(stage: StageInput) -> StageSection:
    """The report section of a ``paired.metric_delta`` stage."""
    outputs = stage.outputs
    decision, verdict = _decision(outputs)
    ok = gates_state(stage.gates, verdict)
    two_by_two = _two_by_two(mapping(outputs.get("table")),
                             "(sample, repeat) rows" if by_sample(outputs) else "items")
    slices = _slice_table(outputs)
    sources = mapping(outputs.get("sources"))
    tables = [_result_table(outputs), *([two_by_two] if two_by_two else []), *_test_tables(outputs),
              *([slices] if slices else []), pairing_table(mapping(outputs.get("pairing"))),
              *(provenance_table(side, mapping(sources.get(side))) for side in SIDES if side in sources)]
    return StageSection(stage.stage_id, "", "", decision=decision, ok=ok, summary=reading(outputs),
                        facts=_facts(outputs), plots=(_plot(stage),), tables=tuple(tables))


def _tested_text(outputs: Mapping[str, Any]) -> str:
    """What was tested: the pairing, the estimand, the interval (and the McNemar test)."""
    difference = mapping(outputs.get("difference"))
    pairing = mapping(outputs.get("pairing"))
    keys = ", ".join(map(str, pairing.get("key_fields") or ())) or "the item id"
    by = "repeat by repeat" if by_sample(outputs) else "item by item"
    text = (f"What was tested: every benchmark item was scored by both models, the baseline and the subject, and the "
            f"two sides were paired {by} (by {keys}). The estimand is Δ = subject − baseline: the mean "
            f"{fmt(outputs.get('metric'))} of the subject minus that of the baseline over the "
            f"{paired_units(outputs)}; a negative Δ means the subject is worse. The interval "
            f"for Δ is a two-sided {percent_text(difference.get('confidence_level'))} {method_name(difference.get('method'))}.")
    if by_sample(outputs):
        units = _units(outputs)
        text += (f" {fmt(units.get('statement'))[0].upper()}{fmt(units.get('statement'))[1:]}: "
                 f"{fmt(units.get('analysis'))}. An analysis that took every (sample, repeat) row as an independent "
                 "item would count the repeats of one question as new evidence and give too narrow an interval.")
    if outputs.get("test") and not by_sample(outputs):
        text += (" The exact McNemar test of Δ = 0 uses only the discordant items (right on one side, wrong on the "
                 "other); a large p-value does NOT show that the models are equal.")
    elif outputs.get("test"):
        text += (" The test of Δ = 0 is McNemar's asymptotic test on the same adjusted table; a large p-value does "
                 "NOT show that the models are equal.")
    if str(difference.get("validity", "")).startswith("anytime"):
        text += (" The interval is a confidence sequence: it stays valid however often the evaluation is re-run "
                 "and looked at, at the price of being wider than a fixed-n interval.")
    return text


def _verdict_text(outputs: Mapping[str, Any]) -> str:
    """What the non-inferiority verdict means and does not mean (or that no margin was set)."""
    ni = mapping(outputs.get("noninferiority"))
    if not ni:
        return ("What the result means: no non-inferiority margin was set, so the stage gives no verdict; read the "
                "interval, which holds the differences the data are compatible with at that level, and the gates "
                "(if any) that compare it with thresholds. An interval containing 0 does NOT mean the models are "
                "equal.")
    loss = loss_text(ni.get("margin"), outputs.get("scale"))
    alpha = number_text(ni.get("alpha"))
    if ni.get("noninferior") is True:
        return (f"What the verdict means: non-inferior at margin {number_text(ni.get('margin'))}: the hypothesis "
                f"\"the subject is worse by {loss} or more\" was rejected at one-sided level α = {alpha}, so the "
                "data are compatible with a loss no larger than the margin at that level. It does NOT say that the "
                "models are equal or that the subject is better, nor anything about other benchmarks, other "
                "metrics or items unlike these.")
    return (f"What the verdict means: NOT shown non-inferior at margin {number_text(ni.get('margin'))}: the data "
            f"do not rule out, at one-sided level α = {alpha}, that the subject is worse by {loss} or more. It does "
            "NOT show that the subject is worse: the interval may also hold no loss at all, and a small evaluation "
            "cannot tell the two apart (see the minimum detectable difference).")


def assumptions_text(outputs: Mapping[str, Any]) -> str:
    """The assumptions: fair and independent items, the same items on both sides (and the declared range)."""
    pairing = mapping(outputs.get("pairing"))
    independent = ("the samples are a fair sample of the questions the models will face and independent of each "
                   "other (the repeats of one sample need not be), and both sides scored the same samples"
                   if by_sample(outputs) else
                   "the items are a fair sample of the items the models will face and independent of each "
                   "other, and both sides scored the same items")
    text = (f"Assumptions: {independent}. Items were paired by their identity (the evaluator's own "
            "item id, or a table's item column); where the export records identity digests "
            "(lm-evaluation-harness: document, prompt and target hashes) they were compared, and an item whose "
            "digests differ is not paired.")
    left_out = unpaired_counts(pairing)
    if left_out:
        text += (" Here " + ", ".join(f"{count} item(s) {kind}" for kind, count in left_out) + " were not paired: the "
                 "estimate covers the paired items only, and is biased if the missing items are harder or easier "
                 "than the rest.")
    elif pairing:
        text += " Here every item paired."
    if number_pair(outputs.get("range")) != (None, None):
        text += (f" The metric's values lie in the declared range {interval_text(outputs.get('range'))} (values "
                 "outside it are refused, never clipped): the interval relies on that bound.")
    return text


def _detectable_text(outputs: Mapping[str, Any]) -> str | None:
    """What the minimum detectable difference says about the evaluation's size (binary metrics)."""
    detectable = mapping(outputs.get("detectable_difference"))
    if not detectable:
        return None
    text = (f"Minimum detectable difference: with {paired_units(outputs)} and the share of "
            f"discordant items observed, a true |Δ| of {number_text(detectable.get('difference'))} would be found "
            f"with power {number_text(detectable.get('power'))} at two-sided α = "
            f"{number_text(detectable.get('alpha_two_sided'))}. Differences smaller than that are likely to go "
            "unnoticed: a wide interval or a large p-value with a detectable difference above the margin says the "
            "evaluation is too small to decide, not that there is no difference; more items narrow it.")
    if detectable.get("attainable") is False:
        text += (" That difference is not attainable with the discordance observed (too few items on which the "
                 "models disagree): the test has little power here.")
    return text


def _slices_text(outputs: Mapping[str, Any]) -> str | None:
    """How to read the slices: adjusted p-values, unadjusted intervals."""
    slices = mapping(outputs.get("slices"))
    rows = _slice_rows(outputs)
    if not rows:
        return None
    return (f"Slices: each of the {len(rows)} slices has its own estimate, interval and p-value (of the "
            f"{fmt(slices.get('p_value_of'))}); the p-values are adjusted across slices by "
            f"{adjustment_name(slices.get('adjustment'))}, the intervals are not. Judge a slice by its adjusted p-value: with several "
            "slices some raw p-values are small by chance. Slices hold fewer items, so their intervals are wider than "
            "the overall one.")


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """The difference of the means (subject − baseline) with its interval, and each side's mean (no interval)."""
    difference, metric = mapping(outputs.get("difference")), str(outputs.get("metric", "metric"))
    return (Estimate.read(f"{metric} difference (subject - baseline)", difference.get("estimate"),
                          difference.get("ci"), difference.get("confidence_level")),
            Estimate.read(f"{metric} (subject)", outputs.get("subject_mean")),
            Estimate.read(f"{metric} (baseline)", outputs.get("baseline_mean")))


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``paired.metric_delta`` stage's outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    texts = [_tested_text(outputs), _verdict_text(outputs), assumptions_text(outputs), _detectable_text(outputs),
             _slices_text(outputs),
             PROVENANCE_TEXT]
    return tuple(text for text in texts if text)


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``paired.metric_delta`` stage (every ``version``): the difference with its
    interval, the test, the non-inferiority verdict and the pairing."""
    diff = outputs["difference"]
    level = round(100 * diff["confidence_level"], 2)
    lines = [f"| metric | baseline | subject | difference | {level:g}% CI ({diff['method']}) |",
             "|---|---:|---:|---:|---|",
             f"| {outputs['metric']} | {outputs['baseline_mean']:.6g} | {outputs['subject_mean']:.6g} | "
             f"{diff['estimate']:.6g} | [{diff['ci'][0]:.6g}, {diff['ci'][1]:.6g}] |", ""]
    pairing = outputs["pairing"]
    facts = [f"Paired items {outputs['n_paired']} of {pairing['baseline_items']} (baseline) and "
             f"{pairing['subject_items']} (subject)"]
    units = outputs.get("units")
    if units:
        facts = [f"{units['statement'][0].upper()}{units['statement'][1:]} of {pairing['baseline_items']} "
                 f"(baseline) and {pairing['subject_items']} (subject) rows read"]
    if "test" in outputs:
        facts.append(f"{'McNemar (design-effect-adjusted)' if 'clustering' in outputs else 'exact McNemar'} "
                     f"p = {outputs['test']['p_value']:.4g}")
    ni = outputs.get("noninferiority")
    if ni:
        facts.append(f"non-inferior at margin {ni['margin']:g}: {'yes' if ni['noninferior'] else 'NO'}")
    lines.append("; ".join(facts) + ".")
    return "\n".join(lines)
