"""How ``sequential.diff`` reads: the decision with its confidence sequence at every recorded check, the
thresholds, the score range that is part of the claim, and what was done to the scores."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from certa.engine.core.stages.sequential_diff import DECLARED, KERNELS, ClipKnobs, DeclaredRange
from certa.engine.services.presentation.explain import number_text
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.served_models import (claim_rows, claims_text, is_served, tokens_source,
                                                               tokens_text)
from certa.engine.services.presentation.html.view import Cell, Plot, StageInput, StageSection, fmt, mapping, table

__all__ = ["section", "reading", "estimates", "how_to_read", "sequential_estimand", "markdown"]


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


_USAGE_NAMES = {"scorer": "scorer", "prompts_scored": "prompts scored", "n_max": "n_max (prompts the run could score)",
                "stopped_before_n_max": "stopped before n_max", "forward_passes": "forward passes",
                "model_calls": "model calls"}


def _usage_rows(usage: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A live scorer's recorded costs: the known ones first, named in words, then any other count as recorded."""
    known = [key for key in _USAGE_NAMES if key in usage]
    others = sorted(key for key in usage if key not in _USAGE_NAMES and key != "decision_kind")
    return [(_USAGE_NAMES.get(key, key.replace("_", " ")), usage[key]) for key in known + others]


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's summary, a CI summary's line): the decision, when the sequence
    stopped and why."""
    results, sequence = mapping(outputs.get("results")), mapping(outputs.get("sequence"))
    return (f"{results.get('decision', '?')} after {fmt(results.get('n_used'))} of "
            f"{fmt(sequence.get('observations_available'))} observations ({fmt(sequence.get('checks'))} checks): "
            f"{results.get('reason', '')}. {outputs.get('interpretation', '')}")


def section(stage: StageInput) -> StageSection:
    """The report section of a ``sequential.diff`` stage."""
    outputs = stage.outputs
    results = mapping(outputs.get("results"))
    config = mapping(outputs.get("config"))
    sequence = mapping(outputs.get("sequence"))
    method = mapping(outputs.get("method"))
    decision = str(results.get("decision", "?"))
    rows = [c for c in stage.checks
            if c.get("decision_kind", "sequential_check") == "sequential_check" and isinstance(c.get("n"), (int, float))]
    usage = [c for c in stage.checks if c.get("decision_kind") == "scorer_usage"]
    band = config.get("equivalence_band")
    svg = plots.sequence_plot(f"{stage.stage_id}-cs", n=[c["n"] for c in rows], lower=[c.get("lower") for c in rows],
                              upper=[c.get("upper") for c in rows], mean=[c.get("mean") for c in rows],
                              band=band, min_effect=config.get("delta_star"),
                              stop_n=sequence.get("stopping_time"), decision=decision, clip=None)
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
    if usage:
        tables.append(table("What the scorer spent (the ledger's scorer_usage decision)", ("quantity", "value"),
                            _usage_rows(usage[-1])))
    models = mapping(mapping(outputs.get("source")).get("models"))
    if models:
        tables.append(_models_table(models))
    return StageSection(stage.stage_id, "", "", decision=decision,
                        ok=decision in ("SAME", "DIFFERENT"), summary=reading(outputs), facts=tuple(facts),
                        plots=(Plot(svg, "The confidence sequence (shaded) at each recorded check against n, the "
                                         "running mean, the equivalence band and the minimum effect, and the "
                                         "stopping point."),),
                        tables=tuple(tables))


def _models_table(models: Mapping[str, Any]) -> Any:
    """The models a scorer ran (3.1.0 on), by role: what was verified, then a served model's claims, marked as such."""
    roles = sorted(models)
    described = {role: mapping(models[role]) for role in roles}
    identity = {role: ("manifest of the folder's files" if not is_served(described[role]) else
                       "declaration (URL, served name, client settings)") for role in roles}
    rows: list[tuple[Any, ...]] = [
        ("kind", *(described[r].get("kind") for r in roles)), ("input", *(described[r].get("input") for r in roles)),
        ("identity: SHA-256 of the", *(identity[r] for r in roles)),
        ("SHA-256", *(described[r].get("sha256") for r in roles)),
        ("tokenizer SHA-256 (a served model: the reference's, checked against the server's)",
         *(described[r].get("tokenizer_sha256") for r in roles)),
        ("tokens scored (a served model: whose, checked against its server's)",
         *(tokens_source(described[r]) if is_served(described[r]) else "its tokenizer.json" for r in roles))]
    labels = sorted({label for r in roles for label, _ in claim_rows(described[r])})
    rows += [(label, *(dict(claim_rows(described[r])).get(label, "") for r in roles)) for label in labels]
    return table("Models the scorer ran", ("", *roles), rows)


_SEQUENTIAL_DECISIONS = {
    "DIFFERENT": "DIFFERENT: the confidence sequence cleared the minimum effect delta* = {delta}, so the mean score "
                 "difference is larger than delta* in the stated direction (wrong at most with probability alpha = "
                 "{alpha}). It does NOT say how large the difference is beyond the interval shown, nor that it matters "
                 "for every prompt.",
    "SAME": "SAME: the whole confidence sequence lies inside the equivalence band of +/-{band}, so the mean score "
            "difference is smaller than the band (wrong at most with probability alpha = {alpha}). SAME means "
            "\"inside the band at level alpha\", NOT identical: the models may still differ by less than the band, "
            "and individual prompts may differ a lot.",
    "IDENTICAL": "IDENTICAL: all scores were zero, or the mean and the interval's half-width fell below the early-stop "
                 "threshold. This is a check of identity on the scored prompts, not a statistical test with a "
                 "guarantee.",
    "UNDECIDED": "UNDECIDED: the evidence reached neither rule before the run stopped (n_max, the end of the input or "
                 "the precision target). It does NOT mean the models are the same: collect more prompts or "
                 "reconsider the band.",
}


def sequential_estimand(outputs: Mapping[str, Any]) -> str:
    """What a ``sequential.diff`` decision is about: 2.0.0's ``results.estimand``; for 1.x, which records none,
    the mean of the scores clipped to the ``clip`` range when the method clipped, else the mean score difference."""
    recorded = mapping(outputs.get("results")).get("estimand")
    if isinstance(recorded, str) and recorded:
        return recorded
    clip = mapping(outputs.get("clip"))
    if clip.get("applies"):
        return f"mean of the scores clipped to [{number_text(clip.get('low'))}, {number_text(clip.get('high'))}]"
    return "mean score difference"


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """The estimand's value with its confidence sequence at the stop."""
    results = mapping(outputs.get("results"))
    return (Estimate.read(sequential_estimand(outputs), results.get("mean"), results.get("ci"),
                          results.get("confidence_level")),)


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``sequential.diff`` stage\'s outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    results = mapping(outputs.get("results"))
    config = mapping(outputs.get("config"))
    method = mapping(outputs.get("method"))
    estimand = sequential_estimand(outputs)
    texts = [
        f"What was tested: per prompt, a score difference between two models; the estimand is the {estimand}. After "
        "every check the stage computed a confidence sequence for it and stopped as soon as a decision rule held.",
    ]
    decision = str(results.get("decision", ""))
    template = _SEQUENTIAL_DECISIONS.get(decision)
    identity = mapping(outputs.get("identity")).get("statement")      # 3.0.0 states what its IDENTICAL claims
    if decision == "IDENTICAL" and isinstance(identity, str) and identity:
        texts.append(f"What the decision means: IDENTICAL: {identity}.")
    elif template is not None:
        texts.append("What the decision means: " + template.format(
            delta=number_text(config.get("delta_star")), alpha=number_text(config.get("alpha") if "alpha" in config
                                                       else method.get("alpha")),
            band=number_text(config.get("equivalence_band"))))
    validity = str(method.get("validity") or "")
    if validity.startswith("anytime"):
        texts.append(f"The sequence is {validity}: the guarantee holds however often the data were looked at and "
                     "wherever the run stopped, so stopping early is not a form of cherry-picking.")
    elif validity.startswith("asymptotic"):
        texts.append(f"The sequence is {validity}: its guarantee holds as the number of prompts grows, for any "
                     "stopping rule, but it is an approximation at small n.")
    elif validity:
        texts.append(f"The method's validity: {validity}. A fixed-n interval checked after every prompt can decide "
                     "too early; treat the decision as indicative, not as a guarantee at level alpha.")
    range_block = outputs.get("range")
    clip_block = outputs.get("clip")
    if isinstance(range_block, Mapping) and range_block.get("low") is not None:
        texts.append(f"Assumption: every score lies in [{number_text(range_block.get('low'))}, {number_text(range_block.get('high'))}] "
                     f"(source: {range_block.get('source', 'declared')}). The score range is part of the claim: "
                     "the guarantee is a statement about scores bounded by it.")
    elif isinstance(range_block, Mapping):
        texts.append("Assumption: the method needs no bound on the scores (no score range is part of this claim).")
    elif isinstance(clip_block, Mapping) and clip_block.get("applies", True):
        texts.append(f"Assumption: every score lies in [{number_text(clip_block.get('low'))}, {number_text(clip_block.get('high'))}]. "
                     "The score range is part of the claim: the guarantee is a statement about scores bounded by it.")
    n_clipped = mapping(outputs.get("range" if isinstance(range_block, Mapping) else "clip")).get("n_clipped")
    if isinstance(n_clipped, int) and n_clipped > 0:
        texts.append(f"{n_clipped} score(s) fell outside the range and were clipped to it: the decision is about the "
                     f"mean of the clipped scores, which can differ from the raw mean ({number_text(results.get('raw_mean'))}) "
                     "in size and even in sign.")
    return tuple(texts)


def _clip_notes(outputs: Mapping[str, Any]) -> tuple[str, list[str]]:
    """1.x (``ClipKnobs``): no note next to the decision; the clip range and the clipped count when it applied."""
    clip = outputs["clip"]
    if not clip["applies"]:
        return "", []
    return "", [f"Clip range [{clip['low']}, {clip['high']}] (assumption); clipped scores: {clip['n_clipped']}."]


def _declared_range_notes(outputs: Mapping[str, Any]) -> tuple[str, list[str]]:
    """2.0.0 on (``DeclaredRange``): the estimand, the clipped count and the raw mean next to the decision when
    scores were (or may be) clipped or the range was not declared; the range statement after the reason."""
    r, block = outputs["results"], outputs["range"]
    shown = block["n_clipped"] > 0 or r["estimand"] != "mean score difference" or block["source"] != DECLARED
    note = (f" (estimand: {r['estimand']}; clipped scores: {block['n_clipped']}; raw mean {r['raw_mean']:.6g})"
            if shown else "")
    return note, [f"Score range: {block['statement']}."]


_RANGE_NOTES: dict[type, Callable[[Mapping[str, Any]], tuple[str, list[str]]]] = {
    ClipKnobs: _clip_notes, DeclaredRange: _declared_range_notes}
"""(a note next to the decision, Markdown lines after the reason) by the version's score-range rule."""


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``sequential.diff`` stage: the decision with its sequence and the reason,
    and the score range as ``version``'s range rule states it (``_RANGE_NOTES``)."""
    rule = next(kernels.range_rule for kernels in KERNELS if kernels.version == version)
    r, m = outputs["results"], outputs["method"]
    lo, hi = r["ci"]
    note, range_lines = _RANGE_NOTES[type(rule)](outputs)
    lines = [
        "| decision | n used | mean | CS | p (mean = 0) | method | validity |", "|---|---|---|---|---|---|---|",
        f"| {r['decision']}{note} | {r['n_used']} | {r['mean']:.6g} | [{lo:.6g}, {hi:.6g}] | {r['p_value']:.4g} | "
        f"{m['name']} | {m['validity']} |", "", r["reason"],
    ]
    for role, model in sorted(mapping(mapping(outputs.get("source")).get("models")).items()):
        model = mapping(model)
        what = ("a served model, identified by the SHA-256 of its declaration " if is_served(model) else
                "a local model, identified by the SHA-256 of its folder's manifest ")
        lines += ["", f"The {role} ({model.get('input')}) is {what}{model.get('sha256')}."
                  + (f" {tokens_text(model)} {claims_text(model)}" if is_served(model) else "")]
    return "\n".join(lines + range_lines)
