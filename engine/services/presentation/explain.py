"""How to read a stage's result: short plain-language paragraphs for a governance reviewer.

``how_to_read(stage_name, outputs)`` returns, for one stage of a certificate, what was tested, what the
verdict or decision means and what it does not mean, and the assumptions the claim rests on. The texts read
the stored outputs only (the decision reached, whether scores were clipped, whether a lead is significant),
defensively: a key a stage version does not record changes the wording, never raises. A pure module: no HTML,
no I/O; the HTML report (``engine.services.presentation.html``) and ``certa show --explain`` both print these paragraphs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["how_to_read", "EXPLAINED", "Lead", "bucket_lead", "lead_sentence", "p_value_text", "sequential_estimand"]

Outputs = Mapping[str, Any]


def _block(outputs: Outputs, key: str) -> Mapping[str, Any]:
    value = outputs.get(key)
    return value if isinstance(value, Mapping) else {}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _g(value: Any) -> str:
    number = _num(value)
    return "?" if number is None else f"{number:.4g}"


def _percent(level: Any) -> str:
    number = _num(level)
    return "the stated" if number is None else f"{100 * number:.4g}%"


# -- paired.ppl_ratio -----------------------------------------------------------------------------------------

def _paired_ratio(outputs: Outputs) -> tuple[str, ...]:
    primary = _block(outputs, "primary_metric")
    level = _percent(primary.get("confidence_level"))
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


# -- sequential.diff ------------------------------------------------------------------------------------------

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
    recorded = _block(outputs, "results").get("estimand")
    if isinstance(recorded, str) and recorded:
        return recorded
    clip = _block(outputs, "clip")
    if clip.get("applies"):
        return f"mean of the scores clipped to [{_g(clip.get('low'))}, {_g(clip.get('high'))}]"
    return "mean score difference"


def _sequential(outputs: Outputs) -> tuple[str, ...]:
    results = _block(outputs, "results")
    config = _block(outputs, "config")
    method = _block(outputs, "method")
    estimand = sequential_estimand(outputs)
    texts = [
        f"What was tested: per prompt, a score difference between two models; the estimand is the {estimand}. After "
        "every check the stage computed a confidence sequence for it and stopped as soon as a decision rule held.",
    ]
    decision = str(results.get("decision", ""))
    template = _SEQUENTIAL_DECISIONS.get(decision)
    if template is not None:
        texts.append("What the decision means: " + template.format(
            delta=_g(config.get("delta_star")), alpha=_g(config.get("alpha") if "alpha" in config
                                                       else method.get("alpha")),
            band=_g(config.get("equivalence_band"))))
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
        texts.append(f"Assumption: every score lies in [{_g(range_block.get('low'))}, {_g(range_block.get('high'))}] "
                     f"(source: {range_block.get('source', 'declared')}). The score range is part of the claim: "
                     "the guarantee is a statement about scores bounded by it.")
    elif isinstance(range_block, Mapping):
        texts.append("Assumption: the method needs no bound on the scores (no score range is part of this claim).")
    elif isinstance(clip_block, Mapping) and clip_block.get("applies", True):
        texts.append(f"Assumption: every score lies in [{_g(clip_block.get('low'))}, {_g(clip_block.get('high'))}]. "
                     "The score range is part of the claim: the guarantee is a statement about scores bounded by it.")
    n_clipped = _block(outputs, "range" if isinstance(range_block, Mapping) else "clip").get("n_clipped")
    if isinstance(n_clipped, int) and n_clipped > 0:
        texts.append(f"{n_clipped} score(s) fell outside the range and were clipped to it: the decision is about the "
                     f"mean of the clipped scores, which can differ from the raw mean ({_g(results.get('raw_mean'))}) "
                     "in size and even in sign.")
    return tuple(texts)


# -- bakeoff.compare / bakeoff.merge / bakeoff.gate -------------------------------------------------------------

@dataclass(frozen=True)
class Lead:
    """A bake-off bucket's leader against the runner-up: the Holm-adjusted p of their pair and its significance."""

    leader: str
    runner_up: str
    diff_u: float | None
    p_holm: float | None
    significant: bool


def bucket_lead(bucket: Mapping[str, Any]) -> Lead | None:
    """The lead of one ``bakeoff.compare`` bucket: its ``lead`` block (1.2.0), or for older versions the pair of
    the leader and the runner-up (second in the ranking) with its Holm p; None when there is no leader, no
    runner-up, that pair was not tested, or the ranking is by ``RSI_pool`` (the bootstrap tests the gated pools,
    not that ranking key: 1.2.0 records no lead then either)."""
    lead = bucket.get("lead")
    if isinstance(lead, Mapping):
        if lead.get("leader") is None or lead.get("runner_up") is None:
            return None
        return Lead(str(lead["leader"]), str(lead["runner_up"]), _num(lead.get("diff_u")), _num(lead.get("p_holm")),
                    bool(lead.get("significant")))
    leader, ranking = bucket.get("leader"), bucket.get("ranking")
    if (leader is None or not isinstance(ranking, list) or len(ranking) < 2 or ranking[0] != leader
            or bucket.get("rank_by", "RSI_pool_env") != "RSI_pool_env"):
        return None
    runner_up = ranking[1]
    for pair in bucket.get("pairs") or ():
        if not isinstance(pair, Mapping) or pair.get("reason") is not None or {pair.get("a"), pair.get("b")} != {
                leader, runner_up}:
            continue
        diff = _num(pair.get("diff_u"))
        diff_u = None if diff is None else (diff if pair.get("a") == leader else -diff)
        return Lead(str(leader), str(runner_up), diff_u, _num(pair.get("p_holm")),
                    bool(pair.get("significant")) and diff_u is not None and diff_u > 0)
    return None


def p_value_text(p: Any, replicates: Any = None) -> str:
    """A bootstrap p-value for reading: 0 means only that no replicate crossed 0, i.e. p < 2/B."""
    b = _num(replicates)
    if _num(p) == 0.0 and b is not None and b > 0:
        return f"< {2 / b:.2g}"
    return f"= {_g(p)}"


def lead_sentence(bucket_id: str, lead: Lead, replicates: Any = None) -> str:
    """"vendor-a leads e5, but the lead over vendor-b is not significant (p_Holm = 0.61)" and its positive form."""
    p = p_value_text(lead.p_holm, replicates)
    if lead.significant:
        return f"{lead.leader} leads {bucket_id}; the lead over {lead.runner_up} is significant (p_Holm {p})."
    return f"{lead.leader} leads {bucket_id}, but the lead over {lead.runner_up} is not significant (p_Holm {p})."


def _leads_paragraph(buckets: Mapping[str, Any]) -> str | None:
    """Which buckets' leads are established in this run, and which are not."""
    leads = {str(name): bucket_lead(bucket) for name, bucket in sorted(buckets.items()) if isinstance(bucket, Mapping)}
    established = [name for name, lead in leads.items() if lead is not None and lead.significant]
    open_ = [name for name, lead in leads.items() if lead is not None and not lead.significant]
    if not established and not open_:
        return None
    texts = []
    if open_:
        texts.append(f"In this run the lead is NOT significant in {', '.join(open_)}: there the data do not establish "
                     "which of the top two vendors is better, whatever the ranking shows.")
    if established:
        texts.append(f"The lead is significant in {', '.join(established)}.")
    return " ".join(texts)


def _bakeoff(outputs: Outputs) -> tuple[str, ...]:
    texts = [
        "What was tested: every vendor answered the same prompts; each decision got a bounded score RSI in (-1, 1). "
        "Per bucket, the scores are pooled per vendor (in rapidity space u = atanh(RSI), mapped back by tanh) and the "
        "vendors are ranked by the pooled value, with token use and latency only as tie-breaks.",
        "What the ranking means: the leader has the highest pooled score on these prompts. A lead is a claim only "
        "when the bootstrap test of the difference in pooled rapidity (delta-u) against the runner-up is significant "
        "after Holm's correction over the pairs of the bucket. A non-significant lead does NOT show the leader is "
        "better; nor does any ranking say how the vendors compare on other prompts or tasks.",
    ]
    if outputs.get("bootstrap") is None and "shards" in outputs:
        texts[1] = ("What the ranking means: this is a merge of shard sums: the pooled values equal one comparison "
                    "over all decisions, but a merge has no bootstrap, so no lead is tested here.")
    leads = _leads_paragraph(_block(outputs, "buckets"))
    if leads:
        texts.append(leads)
    texts.append("Assumptions: the prompts are a fair sample of the workload, decisions are independent, and the "
                 "scores of different vendors are comparable. Tanh-mapped intervals are displays of the u-space "
                 "interval, not intervals of the difference of two pooled scores.")
    return tuple(texts)


def _calm_gate(outputs: Outputs) -> tuple[str, ...]:
    summary = _block(outputs, "summary")
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


# -- conformal.pac_report / conformal.monitor -------------------------------------------------------------------

def _pac_report(outputs: Outputs) -> tuple[str, ...]:
    joint = _block(outputs, "joint_guarantee")
    level = _num(joint.get("level"))
    return (
        "What was computed: class-wise conformal prediction sets for a binary classifier, calibrated so that each "
        "class is covered with at least the target rate, and bounds on how often a future batch of the planned size "
        "will get a single label, both labels (doublet), no label (abstention), or a wrong single label.",
        "What the guarantee means: "
        + (f"with probability at least {level:.4g} over the calibration draw and the future test set, both class "
           "coverages hold and every future rate falls inside its bound at the same time." if level is not None else
           "the certificate states a joint probability that all coverages and bounds hold together.")
        + " It does NOT promise any single prediction is right, nor that the rates hold for data unlike the "
          "calibration set.",
        "Assumptions: calibration and future data are exchangeable (drawn from the same distribution), the "
        "leave-one-out counts behave like binomial counts, and per-class test sizes are plug-in values. A shift in "
        "the data breaks the guarantee: that is what the monitor stage checks.",
    )


def _monitor(outputs: Outputs) -> tuple[str, ...]:
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


_EXPLAINERS: dict[str, Callable[[Outputs], tuple[str, ...]]] = {
    "paired.ppl_ratio": _paired_ratio,
    "sequential.diff": _sequential,
    "bakeoff.compare": _bakeoff,
    "bakeoff.merge": _bakeoff,
    "bakeoff.gate": _calm_gate,
    "conformal.pac_report": _pac_report,
    "conformal.monitor": _monitor,
}

EXPLAINED: frozenset[str] = frozenset(_EXPLAINERS)
"""The stage types ``how_to_read`` has texts for."""


def how_to_read(stage_name: str, outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """Plain-language paragraphs on reading one stage's result; ``()`` for a stage type without texts.

    ``stage_name`` is the stage type (``use``, e.g. ``"sequential.diff"``; a ``@version`` suffix is ignored),
    ``outputs`` its stored outputs (``content.stages.<id>``). Never raises on missing or unexpected keys.
    """
    explainer = _EXPLAINERS.get(stage_name.split("@", 1)[0])
    return explainer(outputs if isinstance(outputs, Mapping) else {}) if explainer else ()
