"""``paired.metric_delta``: is the subject model no worse (or different) than the baseline on a per-item metric?

The two inputs hold one record per benchmark item: an evaluator's export (lm-evaluation-harness samples,
Inspect AI logs, promptfoo results, read by ``certa.engine.core.evidence``) or a plain table (CSV, JSON Lines,
Parquet) whose item-id and metric columns the knobs name. Items pair by the tool's own identity (lm-eval:
``doc_id`` with equal document, prompt and target digests; Inspect: sample id and epoch); an item missing on
one side, or present on both with different digests, is the profile rule ``items_paired`` (recorded in
``dev``; an abort in ``ci`` and ``release``).

The estimand is Δ = mean(subject) − mean(baseline) over the paired items (negative: the subject is worse):

* ``scale: binary`` (accuracy, exact match, pass@1: every value 0 or 1): the paired 2×2 table; Tango's (1998)
  score interval (default) or Newcombe's (1998) hybrid score interval; the exact McNemar test of Δ = 0; with a
  ``margin`` δ, Tango's score test of H0: Δ ≤ −δ at level α = (1 − confidence_level)/2, which rejects exactly
  when the interval's lower bound exceeds −δ; the minimum detectable difference at the achieved n (Connor
  1987).
* ``scale: bounded`` (F1, a rubric score in a declared ``range``): the mean paired difference with a BCa
  bootstrap interval on the project's compiled SFC64 streams (default), or an anytime-valid confidence
  sequence (empirical Bernstein or betting) that stays valid however often the evaluation is re-run.

With a ``slice`` (a category per item), each slice gets its own estimate, interval and p-value, adjusted across
slices by Holm (familywise) or Benjamini–Hochberg (false discovery rate). Kernels:
``certa.engine.core.stats.paired_metric`` (formulas, sources and the coverage figures in docs/paired_metric.md).

Nothing is clipped or dropped: a binary metric with another value, or a bounded one outside its range, is an
input error naming the count and the first item; every unpaired item is counted in the outputs.

Versions (``RULES``, oldest first): each is this module's glue run with a ``MetricDeltaRules`` record of what
differs. 1.0.0 (frozen) decides non-inferiority of a binary metric by Tango's score test whichever interval it
prints, so with ``method: newcombe`` the verdict can contradict the printed interval (about 1 % of the tables with
n ≤ 30), and it bootstraps the items in the baseline export's order. 1.1.0 decides by the printed interval's
lower bound (``interval_noninferiority``; for Tango's interval the same as Tango's test, whose p-value it reports)
and states the deciding method in words; its BCa bootstrap and means take the items in the canonical order of
their pairing keys (``canonical_order``), so a reordered export gives the same certificate. The confidence
sequences keep the export's order in both: their guarantee is over the order the items arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from certa.engine.core.evidence import EvidenceRecords, PairedEvidence, pair_records
from certa.engine.core.evidence.formats import records_of_table
from certa.engine.core.evidence.lm_eval import LOGLIKELIHOOD_METRIC
from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType
from certa.engine.core.stats.paired_metric import (PairedTable, anytime_mean_difference, bca_mean_difference,
                                             binary_slices, interval_noninferiority, mcnemar_exact_test,
                                             minimum_detectable_difference, newcombe_interval,
                                             paired_table_from_outcomes, tango_interval, tango_noninferiority_test)
from certa.engine.core.stats.pairing import canonical_order
from certa.engine.foundation.errors import InputError, ProfileAbort, StageError

__all__ = ["PROFILE_FLOORS", "RULES", "STAGE", "STAGES", "MetricDeltaRules", "run_metric_delta"]

PROFILE_FLOORS: dict[str, int | None] = {"dev": None, "ci": 100, "release": 200}
"""Minimum paired items per profile (``dev``: none)."""

BINARY_METHODS = ("tango", "newcombe")
BOUNDED_METHODS = ("bca", "empirical_bernstein", "betting")
EXAMPLES = 5
"""Unpaired item keys listed in the outputs per side (all are counted)."""


def _records(ctx: StageContext, arm: str) -> EvidenceRecords:
    knobs = ctx.knobs
    columns = knobs["columns"]
    return records_of_table(ctx.table(arm), item=columns["item"], metrics=(knobs["metric"],),
                            slice_column=columns["slice"])


def _rule(name: str, ok: bool, value: Any, required: Any, profile: str) -> Decision:
    strict = PROFILE_FLOORS[profile] is not None
    outcome = "pass" if ok else ("abort" if strict else "warn")
    detail = {"rule": name, "value": value, "required": required, "outcome": outcome, "profile": profile}
    return Decision("profile_rule", detail)


def _pairing(paired: PairedEvidence) -> dict[str, Any]:
    report = paired.report
    return {"key_fields": list(report.key_fields), "baseline_items": report.n_baseline,
            "subject_items": report.n_subject, "paired": report.n_paired,
            "unmatched_baseline": len(report.unmatched_baseline), "unmatched_subject": len(report.unmatched_subject),
            "identity_mismatched": len(report.mismatched_keys),
            "identity_fields_mismatched": sorted(report.identity_mismatches),
            "examples": {"unmatched_baseline": [list(k) for k in report.unmatched_baseline[:EXAMPLES]],
                         "unmatched_subject": [list(k) for k in report.unmatched_subject[:EXAMPLES]],
                         "identity_mismatched": [list(k) for k in report.mismatched_keys[:EXAMPLES]]}}


def _metric_values(records: EvidenceRecords, metric: str, side: str) -> np.ndarray:
    if metric not in records.metrics:
        renamed = LOGLIKELIHOOD_METRIC.get(metric)
        why = (f"; lm-eval's per-document '{metric}' of a loglikelihood task is the document's log-likelihood, read "
               f"as metric '{renamed}'" if renamed in records.metrics and records.provenance.tool ==
               "lm-evaluation-harness" else "")
        raise InputError(f"input '{side}' has no metric '{metric}' (its metrics: "
                         f"{', '.join(sorted(records.metrics)) or 'none'}){why}; set the stage's metric knob")
    return np.asarray(records.metrics[metric], dtype=np.float64)


def _check_scale(values: np.ndarray, records: EvidenceRecords, side: str, knobs: Mapping[str, Any]) -> None:
    """A binary metric holds only 0 and 1, a bounded one stays in its range: else an ``InputError`` naming the
    count and the first item (nothing is clipped or rounded)."""
    if knobs["scale"] == "binary":
        bad = np.flatnonzero((values != 0.0) & (values != 1.0))
        wanted = "0 or 1 (scale: binary)"
        hint = "; a metric with partial credit is scale: bounded with its range"
    else:
        low, high = knobs["range"]
        bad = np.flatnonzero((values < low) | (values > high))
        wanted = f"within the declared range [{low}, {high}] (scale: bounded)"
        hint = "; declare the range the metric can take"
    if bad.size:
        first = int(bad[0])
        key = ", ".join(f"{f}={v!r}" for f, v in zip(records.key_fields, records.item_keys()[first]))
        raise InputError(f"input '{side}': metric '{knobs['metric']}' must be {wanted}, but "
                         f"{bad.size} of {values.size} item(s) are not (first: item {key}, value "
                         f"{float(values[first])!r}){hint}")


def _one_sided_alpha(level: float) -> float:
    """(1 − level)/2 as the decimal numbers read (0.95 gives 0.025, not 1 − 0.95's binary 0.0500000000000000444/2)."""
    return float((Decimal(1) - Decimal(repr(level))) / 2)


def _tango_test_verdict(table: PairedTable, margin: float, level: float, method: str) -> dict[str, Any]:
    """1.0.0: Tango's score test at α = (1 − level)/2, whichever interval is printed (frozen)."""
    alpha = _one_sided_alpha(level)
    test = tango_noninferiority_test(table, margin)
    return {"margin": margin, "null": f"subject worse by {margin} or more (Δ ≤ −{margin})",
            "method": "Tango score test", "alpha": alpha, "p_value": float(test.p_value),
            "noninferior": bool(test.p_value < alpha)}


DECIDED_BY = {
    "tango": "Tango score test, inverting the printed Tango interval",
    "newcombe": "lower bound of the printed Newcombe interval above −margin (no p-value: that interval inverts no "
                "single test)",
}
"""1.1.0's words for the method that decides non-inferiority, by interval."""


def _interval_verdict(table: PairedTable, margin: float, level: float, method: str) -> dict[str, Any]:
    """1.1.0: the printed interval decides (``interval_noninferiority``); Tango's p-value when it is Tango's."""
    decided = interval_noninferiority(table, margin, level, method)
    p_value = {} if decided.p_value is None else {"p_value": float(decided.p_value)}
    return {"margin": margin, "null": f"subject worse by {margin} or more (Δ ≤ −{margin})",
            "method": DECIDED_BY[method], "alpha": _one_sided_alpha(level),
            "lower_bound": float(decided.interval.low), **p_value, "noninferior": bool(decided.noninferior)}


def _slice_p_value_of_1_0_0(knobs: Mapping[str, Any]) -> str:
    return "Tango non-inferiority test" if knobs["margin"] is not None else "exact McNemar test"


def _slice_p_value_of(knobs: Mapping[str, Any]) -> str:
    """1.1.0: says whether the rows' p-values invert the rows' intervals (Tango) or not (Newcombe)."""
    if knobs["margin"] is None:
        return "exact McNemar test"
    if (knobs["method"] or "tango") == "tango":
        return "Tango non-inferiority test, inverting the Tango intervals of the rows"
    return "Tango non-inferiority test, not the Newcombe intervals of the rows"


def _export_order(paired: PairedEvidence) -> np.ndarray | None:
    """1.0.0: the items in the baseline export's order (frozen; the bootstrap depends on it)."""
    return None


def _key_order(paired: PairedEvidence) -> np.ndarray | None:
    """1.1.0: the items in the canonical order of their pairing keys."""
    keys = paired.baseline.keys
    return canonical_order(*(keys[field] for field in paired.baseline.key_fields))


@dataclass(frozen=True)
class MetricDeltaRules:
    """What one version of ``paired.metric_delta`` decides with: the binary non-inferiority verdict (its block of
    the outputs), the words for what the slices' p-values are, the order the items are computed in (None: the
    export's), and what changed."""

    version: str
    binary_verdict: Callable[[PairedTable, float, float, str], dict[str, Any]]
    slice_p_value_of: Callable[[Mapping[str, Any]], str]
    item_order: Callable[[PairedEvidence], np.ndarray | None]
    changes: str


RULES: tuple[MetricDeltaRules, ...] = (
    MetricDeltaRules(version="1.0.0", binary_verdict=_tango_test_verdict, slice_p_value_of=_slice_p_value_of_1_0_0,
                     item_order=_export_order, changes="certa 0.7.0: first version."),
    MetricDeltaRules(
        version="1.1.0", binary_verdict=_interval_verdict, slice_p_value_of=_slice_p_value_of,
        item_order=_key_order,
        changes="issue 30: a binary metric's non-inferiority is decided by the printed interval's lower bound "
                "(with method newcombe 1.0.0 decided by Tango's test and could contradict the interval), stated in "
                "noninferiority.method with the lower bound; the BCa bootstrap and the means take the items in the "
                "canonical order of their pairing keys, so a reordered export gives the same interval"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


def _binary(subject: np.ndarray, baseline: np.ndarray, knobs: Mapping[str, Any],
            rules: MetricDeltaRules) -> dict[str, Any]:
    table: PairedTable = paired_table_from_outcomes(subject, baseline)
    level = knobs["confidence_level"]
    method = knobs["method"] or "tango"
    if method not in BINARY_METHODS:
        raise StageError(f"method '{method}' is for bounded metrics; a binary metric takes {' or '.join(BINARY_METHODS)}")
    ci = (tango_interval if method == "tango" else newcombe_interval)(table, level)
    exact = mcnemar_exact_test(table)
    alpha = _one_sided_alpha(level)
    detectable = minimum_detectable_difference(table, alpha=2 * alpha, power=knobs["power"])
    out = {
        "difference": {"estimate": float(ci.estimate), "ci": [float(ci.low), float(ci.high)],
                       "confidence_level": level, "method": ci.method},
        "table": {"both": int(table.n11), "subject_only": int(table.n10), "baseline_only": int(table.n01),
                  "neither": int(table.n00)},
        "test": {"name": "exact McNemar (conditional binomial on the discordant items), two-sided",
                 "null": "the two proportions are equal", "p_value": float(exact.p_value)},
        "detectable_difference": {"difference": float(detectable.difference), "power": knobs["power"],
                                  "alpha_two_sided": 2 * alpha, "attainable": bool(detectable.attainable),
                                  "approximation": detectable.approximation},
    }
    if knobs["margin"] is not None:
        out["noninferiority"] = rules.binary_verdict(table, knobs["margin"], level, method)
    return out


def _bounded(ordered: tuple[np.ndarray, np.ndarray], arrived: tuple[np.ndarray, np.ndarray],
             ctx: StageContext) -> dict[str, Any]:
    """The bounded metric's interval: BCa on the (subject, baseline) scores in the version's ``ordered`` order, a
    confidence sequence on them in the order they ``arrived`` (the export's)."""
    knobs = ctx.knobs
    level = knobs["confidence_level"]
    method = knobs["method"] or "bca"
    if method not in BOUNDED_METHODS:
        raise StageError(f"method '{method}' is for binary metrics; a bounded metric takes "
                         f"{', '.join(BOUNDED_METHODS)}")
    metric_range = tuple(knobs["range"])
    if method == "bca":
        boot = bca_mean_difference(*ordered, rng=ctx.rng, replicates=knobs["replicates"],
                                   confidence_level=level, metric_range=metric_range)
        difference = {"estimate": boot.estimate, "ci": [boot.low, boot.high], "confidence_level": level,
                      "method": boot.method, "replicates": boot.replicates, "z0": boot.z0,
                      "acceleration": boot.acceleration, "fallback": boot.fallback, "validity": "fixed n"}
    else:
        seq = anytime_mean_difference(*arrived, confidence_level=level, metric_range=metric_range,
                                      method=method)
        difference = {"estimate": float(seq.estimate), "ci": [float(seq.low), float(seq.high)],
                      "confidence_level": level, "method": seq.method, "validity": seq.validity}
    out: dict[str, Any] = {"difference": difference}
    margin = knobs["margin"]
    if margin is not None:
        low = difference["ci"][0]
        out["noninferiority"] = {"margin": margin, "null": f"subject worse by {margin} or more (Δ ≤ −{margin})",
                                 "method": "lower confidence bound above −margin", "alpha": _one_sided_alpha(level),
                                 "lower_bound": low, "noninferior": bool(low > -margin)}
    return out


def _slices(paired: PairedEvidence, subject: np.ndarray, baseline: np.ndarray,
            knobs: Mapping[str, Any], rules: MetricDeltaRules) -> dict[str, Any] | None:
    labels = paired.baseline.slices
    if labels is None or knobs["scale"] != "binary":
        return None
    results = binary_slices(subject, baseline, np.asarray(labels), margin=knobs["margin"],
                            confidence_level=knobs["confidence_level"], interval=knobs["method"] or "tango",
                            adjustment=knobs["adjustment"])
    counts = dict(zip(*np.unique(np.asarray(labels).astype(str), return_counts=True)))
    return {"adjustment": results.adjustment,
            "p_value_of": rules.slice_p_value_of(knobs),
            "rows": [{"slice": str(r.name), "items": int(counts.get(str(r.name), 0)), "estimate": r.estimate,
                      "ci": [r.low, r.high], "p_value": r.p_value, "adjusted_p_value": r.adjusted_p_value}
                     for r in results.slices]}


def run_metric_delta(ctx: StageContext, version_rules: MetricDeltaRules = RULES[-1]) -> StageOutput:
    knobs = ctx.knobs
    if knobs["scale"] == "bounded" and knobs["range"] is None:
        raise StageError("scale: bounded needs the range the metric takes (range: [low, high], e.g. [0, 1] for F1)")
    if knobs["scale"] == "binary" and knobs["range"] is not None:
        raise StageError(f"range {knobs['range']} applies to scale: bounded; a binary metric's values are 0 and 1")
    if knobs["range"] is not None and not knobs["range"][0] < knobs["range"][1]:
        raise StageError(f"range {knobs['range']} must be [low, high] with low < high")
    sides = {arm: _records(ctx, arm) for arm in ("baseline", "subject")}
    paired = pair_records(sides["baseline"], sides["subject"])
    report = paired.report
    pairing = _pairing(paired)
    floor = PROFILE_FLOORS[ctx.profile]
    rules = [
        _rule("items_paired", report.complete, {k: pairing[k] for k in (
            "baseline_items", "subject_items", "paired", "unmatched_baseline", "unmatched_subject",
            "identity_mismatched")}, "every item of both sides paired, with equal identity digests", ctx.profile),
        _rule("min_paired_items", floor is None or report.n_paired >= floor, report.n_paired, floor, ctx.profile),
    ]
    decisions = [Decision("pairing", pairing), *rules]
    failed = [d.detail["rule"] for d in rules if d.detail["outcome"] == "abort"]
    if failed:
        raise ProfileAbort(f"profile '{ctx.profile}' rule(s) failed: {', '.join(failed)}: {report.n_paired} item(s) "
                           f"paired of {report.n_baseline} (baseline) and {report.n_subject} (subject); "
                           f"{pairing['unmatched_baseline']} baseline and {pairing['unmatched_subject']} subject item(s) "
                           f"unmatched, {pairing['identity_mismatched']} with different identity digests (see the "
                           "recorded pairing decision; use profile dev to explore)", rule=failed[0],
                           decisions=tuple(decisions))
    if report.n_paired < 2:
        raise StageError(f"only {report.n_paired} item(s) pair between '{knobs['baseline']}' and "
                         f"'{knobs['subject']}'; a paired comparison needs at least 2")
    metric = knobs["metric"]
    baseline = _metric_values(paired.baseline, metric, knobs["baseline"])
    subject = _metric_values(paired.subject, metric, knobs["subject"])
    _check_scale(baseline, paired.baseline, knobs["baseline"], knobs)
    _check_scale(subject, paired.subject, knobs["subject"], knobs)
    order = version_rules.item_order(paired)
    ordered = (subject, baseline) if order is None else (subject[order], baseline[order])
    computed = (_binary(ordered[0], ordered[1], knobs, version_rules) if knobs["scale"] == "binary"
                else _bounded(ordered, (subject, baseline), ctx))
    outputs = {
        "metric": metric,
        "scale": knobs["scale"],
        **({"range": list(knobs["range"])} if knobs["scale"] == "bounded" else {}),
        "direction": "difference = subject − baseline (negative: the subject is worse)",
        "n_paired": report.n_paired,
        "baseline_mean": float(ordered[1].mean()),
        "subject_mean": float(ordered[0].mean()),
        **computed,
        "slices": _slices(paired, subject, baseline, knobs, version_rules),
        "pairing": pairing,
        "sources": {"baseline": sides["baseline"].provenance.as_dict(),
                    "subject": sides["subject"].provenance.as_dict()},
    }
    return StageOutput(outputs=outputs, decisions=tuple(decisions))


def metric_delta_stage(rules: MetricDeltaRules) -> StageType:
    """``paired.metric_delta`` at ``rules.version``."""
    return StageType(
        name="paired.metric_delta",
        version=rules.version,
        input_knobs=("baseline", "subject"),
        run=lambda ctx: run_metric_delta(ctx, rules),
        summary="Paired per-item metric difference (accuracy, exact match, F1) vs a baseline: Tango/Newcombe "
                "intervals, exact McNemar, non-inferiority margin, slices with Holm/BH; reads evaluator exports.",
        presentation="certa.engine.services.presentation.stages.paired_metric",
        changes=rules.changes,
    )


STAGES = tuple(metric_delta_stage(rules) for rules in RULES)
STAGE = STAGES[-1]
