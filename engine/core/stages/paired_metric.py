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

1.2.0 analyses repeated trials at the sample level (``Units``; ``certa.engine.core.evidence.repeats``). A record
keyed by a repeat field (Inspect's ``epoch``; a table's ``columns.repeat``) is one repeat of its sample, and the
sample is the unit of analysis: a binary metric's interval and tests come from the design-effect-adjusted table
of the samples (``certa.engine.core.stats.paired_metric.clustered``: the cluster-robust variance of the
per-sample mean differences, Rao–Scott effective rows, Student's t with samples − 1 degrees of freedom), a
bounded metric's from the per-sample means of the repeats (BCa over whole samples: the cluster bootstrap); the
floors count samples; a sample or a repeat found in one arm only and unequal repeats per sample are profile rules
(``samples_paired``, ``repeats_paired``, ``equal_repeats``, ``min_paired_samples``); the outputs say the unit of
analysis in words (``units``). Data without repeats get 1.1.0's numbers. 1.0.0 and 1.1.0 take every (id, epoch)
row as an independent item: with correlated epochs their intervals are too narrow (docs/paired_metric.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from certa.engine.core.evidence import EvidenceRecords, PairedEvidence, pair_records
from certa.engine.core.evidence.pairing import key_text, unpaired_text
from certa.engine.core.evidence.formats import records_of_table
from certa.engine.core.evidence.lm_eval import LOGLIKELIHOOD_METRIC
from certa.engine.core.evidence.repeats import SampleUnits, sample_units
from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType
from certa.engine.core.stages.pairing_rules import items_paired_rule, profile_rule
from certa.engine.core.stats.paired_metric import (ClusteredTable, PairedTable, anytime_mean_difference,
                                                   bca_mean_difference, binary_slices, clustered_interval,
                                                   clustered_noninferiority, clustered_score_test, clustered_slices,
                                                   clustered_table, interval_noninferiority, mcnemar_exact_test,
                                                   minimum_detectable_difference, newcombe_interval,
                                                   paired_table_from_outcomes, sample_cell_counts, sample_means,
                                                   t_factor, tango_interval, tango_noninferiority_test)
from certa.engine.core.stats.pairing import canonical_order
from certa.engine.foundation.errors import InputError, ProfileAbort, StageError

__all__ = ["PROFILE_FLOORS", "RULES", "STAGE", "STAGES", "MetricDeltaRules", "Units", "binary_method",
           "checked_values", "one_sided_alpha", "run_metric_delta", "sample_level_units", "sample_slices",
           "units_block", "unused_record_parts"]

PROFILE_FLOORS: dict[str, int | None] = {"dev": None, "ci": 100, "release": 200}
"""Minimum paired items per profile (``dev``: none); from 1.2.0 paired samples, a sample with its repeats counting
once."""

BINARY_METHODS = ("tango", "newcombe")
BOUNDED_METHODS = ("bca", "empirical_bernstein", "betting")
EXAMPLES = 5
"""Unpaired item keys listed in the outputs per side (all are counted)."""


def _records(ctx: StageContext, arm: str) -> EvidenceRecords:
    knobs = ctx.knobs
    columns = knobs["columns"]
    return records_of_table(ctx.table(arm), item=columns["item"], metrics=(knobs["metric"],),
                            slice_column=columns["slice"], repeat_column=columns.get("repeat"))


def _rule(name: str, ok: bool, value: Any, required: Any, profile: str, message: str | None = None) -> Decision:
    """A profile rule's decision (``profile_rule``; strict: a profile with a floor); ``message`` (1.2.0's rules)
    says in words what failed and what was done."""
    return profile_rule(name, ok, value, required, profile, PROFILE_FLOORS[profile] is not None, message)


def _pairing(paired: PairedEvidence) -> dict[str, Any]:
    return paired.report.summary(EXAMPLES)


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
        key = key_text(records.key_fields, records.item_keys()[first])
        raise InputError(f"input '{side}': metric '{knobs['metric']}' must be {wanted}, but "
                         f"{bad.size} of {values.size} item(s) are not (first: item {key}, value "
                         f"{float(values[first])!r}){hint}")


def one_sided_alpha(level: float) -> float:
    """(1 − level)/2 as the decimal numbers read (0.95 gives 0.025, not 1 − 0.95's binary 0.0500000000000000444/2)."""
    return float((Decimal(1) - Decimal(repr(level))) / 2)


def _tango_test_verdict(table: PairedTable, margin: float, level: float, method: str) -> dict[str, Any]:
    """1.0.0: Tango's score test at α = (1 − level)/2, whichever interval is printed (frozen)."""
    alpha = one_sided_alpha(level)
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
            "method": DECIDED_BY[method], "alpha": one_sided_alpha(level),
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


# ------------------------------------------------------------------------------------------ units of analysis


@dataclass(frozen=True)
class Units:
    """What a version takes as one unit of analysis: the profile rules it records about the units (and the abort
    message when one fails in ci or release), how many units paired (what "at least 2" counts, named by
    ``noun``), and the samples of the paired rows (None: every paired row is a unit, as 1.0.0 and 1.1.0 take
    it; the outputs then state nothing about units)."""

    rules: tuple[Decision, ...]
    abort: str
    n: int
    noun: str
    samples: SampleUnits | None


def _row_units(sides: Mapping[str, EvidenceRecords], paired: PairedEvidence, pairing: Mapping[str, Any],
               profile: str) -> Units:
    """1.0.0 and 1.1.0: every paired (key) row is one item, Inspect's (id, epoch) included (frozen)."""
    report = paired.report
    floor = PROFILE_FLOORS[profile]
    rules = (
        items_paired_rule(report, profile, floor is not None, message=False),
        _rule("min_paired_items", floor is None or report.n_paired >= floor, report.n_paired, floor, profile),
    )
    abort = (f"{report.n_paired} item(s) paired of {report.n_baseline} (baseline) and {report.n_subject} (subject); "
             f"{pairing['unmatched_baseline']} baseline and {pairing['unmatched_subject']} subject item(s) "
             f"unmatched, {pairing['identity_mismatched']} with different identity digests (see the recorded pairing "
             "decision; use profile dev to explore)")
    return Units(rules, abort, report.n_paired, "item", None)


def sample_level_units(sides: Mapping[str, EvidenceRecords], paired: PairedEvidence, pairing: Mapping[str, Any],
                  profile: str) -> Units:
    """1.2.0: the sample (a key without its repeat field) is the unit; its rules count samples and repeats."""
    samples = sample_units(sides["baseline"], sides["subject"], paired)
    fields, key_fields = samples.sample_fields, paired.report.key_fields
    n = samples.n_samples
    noun = "item" if samples.repeat_field is None else "sample"
    samples_ok = not (samples.only_baseline or samples.only_subject or samples.identity_mismatched)
    samples_message = unpaired_text(noun, fields, samples.only_baseline, samples.only_subject,
                                    samples.identity_mismatched, n)
    unpaired = samples.unpaired_repeats_baseline + samples.unpaired_repeats_subject
    repeats_ok = not (unpaired or samples.without_paired_repeat)
    repeat_name = samples.repeat_field or "repeat"
    repeats_message = (
        f"{len(unpaired)} {repeat_name}(s) of {samples.samples_with_unpaired_repeats} sample(s) found in one arm "
        f"only ({len(samples.unpaired_repeats_baseline)} baseline, {len(samples.unpaired_repeats_subject)} subject"
        + (f"; first: {key_text(key_fields, unpaired[0])}" if unpaired else "") + ")"
        + (f", {len(samples.without_paired_repeat)} sample(s) on both sides with no {repeat_name} on both"
           if samples.without_paired_repeat else "")
        + f"; a sample is analysed on its {repeat_name}s found in both arms")
    counts = samples.repeat_counts()
    low, high = (int(samples.repeats.min()), int(samples.repeats.max())) if n else (0, 0)
    equal_message = (
        f"paired {repeat_name}s per sample differ ("
        + ", ".join(f"{c['samples']} sample(s) with {c['repeats']}" for c in counts)
        + f"; min {low}, max {high}): each sample weighs the same (the mean of its {repeat_name}s), so the "
        "difference is the mean over samples, not over rows")
    floor = PROFILE_FLOORS[profile]
    floor_message = (f"{n} paired item(s), below the floor of {floor}" if samples.repeat_field is None else
                     f"{n} paired sample(s) (a sample with all its {repeat_name}s counts once), below the floor of "
                     f"{floor}")
    repeat_rules = () if samples.repeat_field is None else (
        _rule("repeats_paired", repeats_ok,
              {"unpaired_baseline": len(samples.unpaired_repeats_baseline),
               "unpaired_subject": len(samples.unpaired_repeats_subject),
               "samples_affected": samples.samples_with_unpaired_repeats,
               "samples_without_paired_repeat": len(samples.without_paired_repeat)},
              f"every {repeat_name} of a sample found in both arms", profile, repeats_message),
        _rule("equal_repeats", low == high, {"min": low, "max": high, "counts": counts},
              f"the same number of paired {repeat_name}s for every sample", profile, equal_message))
    rules = (
        _rule("samples_paired", samples_ok,
              {"baseline_samples": samples.baseline_samples, "subject_samples": samples.subject_samples,
               "paired_samples": n, "only_baseline": len(samples.only_baseline),
               "only_subject": len(samples.only_subject), "identity_mismatched": len(samples.identity_mismatched)},
              "every sample of both sides paired, with equal identity digests", profile, samples_message),
        *repeat_rules,
        _rule("min_paired_samples", floor is None or n >= floor, n, floor, profile, floor_message),
    )
    failed = "; ".join(d.detail["message"] for d in rules if d.detail["outcome"] == "abort")
    return Units(rules, f"{failed} (see the recorded decisions; use profile dev to explore)", n, noun, samples)


def _statement(samples: SampleUnits) -> str:
    """"unit of analysis: N samples (R repeats each)" (items without a repeat field)."""
    n = samples.n_samples
    if samples.repeat_field is None:
        return f"unit of analysis: {n} items (no repeats)"
    low, high = int(samples.repeats.min()), int(samples.repeats.max())
    each = f"{low} repeat{'' if low == 1 else 's'}" if low == high else f"{low} to {high} repeats"
    return f"unit of analysis: {n} samples ({each} each)"


def _analysis_words(samples: SampleUnits, clustered: ClusteredTable | None, method: str) -> str:
    """How the units were analysed, in words (the certificate's ``units.analysis``)."""
    n = samples.n_samples
    if not samples.has_repeats:
        unit = "item" if samples.repeat_field is None else f"sample (one {samples.repeat_field} each)"
        return f"each {unit} is one unit, taken as independent of the others"
    words = (f"the {samples.repeat_field}s of one sample are not independent, so the sample is the unit: the "
             f"difference is the mean over the {n} samples of each sample's mean over its {samples.repeat_field}s; ")
    if clustered is not None:
        interval = "Tango" if method == "tango" else "Newcombe"
        words += (f"its variance comes from the {n} per-sample mean differences (cluster-robust) and is expressed as "
                  f"{float(clustered.effective_rows):.6g} effective independent rows of the {int(clustered.rows)} "
                  f"(design effect {float(clustered.design_effect):.6g}; Rao and Scott 1992); the {interval} interval "
                  f"of that table refers its score statistic to Student's t with {n - 1} degrees of freedom "
                  "(Korn and Graubard 1998)")
    else:
        words += (f"the interval is computed over the {n} per-sample mean differences (BCa: whole samples "
                  "resampled, the cluster bootstrap of Davison and Hinkley 1997, §3.8; a confidence sequence: one "
                  "observation per sample, in the order the samples arrived)")
    if samples.repeats.min() != samples.repeats.max():
        words += "; the samples have unequal repeats, and each weighs the same"
    return words


def units_block(samples: SampleUnits, clustered: ClusteredTable | None, method: str) -> dict[str, Any]:
    """The ``units`` outputs: the unit of analysis in words, the samples, rows and repeats per sample."""
    return {"unit": "item" if samples.repeat_field is None else "sample", "statement": _statement(samples),
            "analysis": _analysis_words(samples, clustered, method),
            "sample_fields": list(samples.sample_fields), "repeat_field": samples.repeat_field,
            "samples": samples.n_samples, "rows": int(samples.repeats.sum()),
            "repeats": {"min": int(samples.repeats.min()), "max": int(samples.repeats.max()),
                        "counts": samples.repeat_counts()}}


@dataclass(frozen=True)
class MetricDeltaRules:
    """What one version of ``paired.metric_delta`` decides with: the binary non-inferiority verdict (its block of
    the outputs), the words for what the slices' p-values are, the order the items are computed in (None: the
    export's), what it takes as a unit (``units_of``), and what changed."""

    version: str
    binary_verdict: Callable[[PairedTable, float, float, str], dict[str, Any]]
    slice_p_value_of: Callable[[Mapping[str, Any]], str]
    item_order: Callable[[PairedEvidence], np.ndarray | None]
    changes: str
    units_of: Callable[[Mapping[str, EvidenceRecords], PairedEvidence, Mapping[str, Any], str], Units] = _row_units
    refuses_unused_slice_column: bool = False
    """``columns.slice`` with a bounded metric, which computes no per-slice results, is refused (1.0.0 and 1.1.0
    read the column and left it unused)."""


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
    MetricDeltaRules(
        version="1.2.0", binary_verdict=_interval_verdict, slice_p_value_of=_slice_p_value_of,
        item_order=_key_order, units_of=sample_level_units, refuses_unused_slice_column=True,
        changes="issue 30: repeated trials (Inspect epochs, a table's columns.repeat) are analysed at the sample "
                "level: the interval and tests of a binary metric come from the design-effect-adjusted table of the "
                "samples (cluster-robust variance of the per-sample mean differences, Rao-Scott effective rows, "
                "Student's t with samples - 1 degrees of freedom), a bounded metric's from the per-sample means; "
                "floors count samples; a sample or repeat in one arm only and unequal repeats are profile rules; "
                "the outputs state the unit of analysis (units). Data without repeats give 1.1.0's numbers"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


def _binary(subject: np.ndarray, baseline: np.ndarray, knobs: Mapping[str, Any],
            rules: MetricDeltaRules) -> dict[str, Any]:
    table: PairedTable = paired_table_from_outcomes(subject, baseline)
    level = knobs["confidence_level"]
    method = binary_method(knobs)
    ci = (tango_interval if method == "tango" else newcombe_interval)(table, level)
    exact = mcnemar_exact_test(table)
    alpha = one_sided_alpha(level)
    detectable = minimum_detectable_difference(table, alpha=2 * alpha, power=knobs["power"])
    out = {
        "difference": {"estimate": float(ci.estimate), "ci": [float(ci.low), float(ci.high)],
                       "confidence_level": level, "method": ci.method},
        "table": _table_block(table),
        "test": {"name": "exact McNemar (conditional binomial on the discordant items), two-sided",
                 "null": "the two proportions are equal", "p_value": float(exact.p_value)},
        "detectable_difference": {"difference": float(detectable.difference), "power": knobs["power"],
                                  "alpha_two_sided": 2 * alpha, "attainable": bool(detectable.attainable),
                                  "approximation": detectable.approximation},
    }
    if knobs["margin"] is not None:
        out["noninferiority"] = rules.binary_verdict(table, knobs["margin"], level, method)
    return out


def binary_method(knobs: Mapping[str, Any]) -> str:
    method = knobs["method"] or "tango"
    if method not in BINARY_METHODS:
        raise StageError(f"method '{method}' is for bounded metrics; a binary metric takes {' or '.join(BINARY_METHODS)}")
    return str(method)


def _table_block(table: PairedTable) -> dict[str, int]:
    return {"both": int(table.n11), "subject_only": int(table.n10), "baseline_only": int(table.n01),
            "neither": int(table.n00)}


CLUSTERED_DECIDED_BY = {
    "tango": "Tango score test on the design-effect-adjusted table of the samples (Student's t, samples − 1 "
             "degrees of freedom), inverting the printed interval",
    "newcombe": "lower bound of the printed Newcombe interval of the design-effect-adjusted table of the samples "
                "above −margin (no p-value: that interval inverts no single test)",
}
"""1.2.0's words for the method that decides non-inferiority of repeated trials, by interval."""


def _clustered_binary(subject: np.ndarray, baseline: np.ndarray, samples: SampleUnits,
                      knobs: Mapping[str, Any]) -> tuple[dict[str, Any], ClusteredTable]:
    """1.2.0, a binary metric with repeats: the samples' design-effect-adjusted table
    (``certa.engine.core.stats.paired_metric.clustered``); the row table is reported beside it."""
    level = knobs["confidence_level"]
    method = binary_method(knobs)
    clustered = clustered_table(sample_cell_counts(subject, baseline, samples.codes))
    ci = clustered_interval(clustered, level, method)
    test = clustered_score_test(clustered)
    alpha = one_sided_alpha(level)
    factor = float(t_factor(clustered.degrees_of_freedom, level))
    adjusted = clustered.scaled(factor)
    detectable = minimum_detectable_difference(adjusted, alpha=2 * alpha, power=knobs["power"])
    out: dict[str, Any] = {
        "difference": {"estimate": float(ci.estimate), "ci": [float(ci.low), float(ci.high)],
                       "confidence_level": level, "method": ci.method},
        "table": _table_block(paired_table_from_outcomes(subject, baseline)),
        "test": {"name": "Tango score test of Δ = 0 (McNemar's asymptotic test) on the design-effect-adjusted "
                         "table of the samples, Student's t with samples − 1 degrees of freedom, two-sided",
                 "null": "the two proportions are equal", "p_value": float(test.p_value)},
        "detectable_difference": {"difference": float(detectable.difference), "power": knobs["power"],
                                  "alpha_two_sided": 2 * alpha, "attainable": bool(detectable.attainable),
                                  "approximation": "Connor (1987), normal approximation to McNemar's test, at the "
                                                   "effective rows times the degrees-of-freedom factor"},
        "clustering": {
            "variance": "cluster-robust: from the per-sample mean differences (Liang and Zeger 1986; Obuchowski 1998)",
            "within_sample_variance": float(clustered.within), "between_sample_variance": float(clustered.between),
            "effective_rows": float(clustered.effective_rows), "rows": int(clustered.rows),
            "design_effect": float(clustered.design_effect),
            "degrees_of_freedom": int(clustered.degrees_of_freedom), "t_factor": factor,
            "adjusted_table": {"both": float(adjusted.n11), "subject_only": float(adjusted.n10),
                               "baseline_only": float(adjusted.n01), "neither": float(adjusted.n00)}},
    }
    margin = knobs["margin"]
    if margin is not None:
        decided = clustered_noninferiority(clustered, margin, level, method)
        p_value = {} if decided.p_value is None else {"p_value": float(decided.p_value)}
        out["noninferiority"] = {"margin": margin, "null": f"subject worse by {margin} or more (Δ ≤ −{margin})",
                                 "method": CLUSTERED_DECIDED_BY[method], "alpha": alpha,
                                 "lower_bound": float(decided.interval.low), **p_value,
                                 "noninferior": bool(decided.noninferior)}
    return out, clustered


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
                                 "method": "lower confidence bound above −margin", "alpha": one_sided_alpha(level),
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




def sample_slices(paired: PairedEvidence, samples: SampleUnits, knobs: Mapping[str, Any]) -> np.ndarray:
    """The slice of each sample (the baseline's slices, which must be given), as text; an ``InputError`` naming the
    first row whose slice is not its sample's first repeat's (a slice must be a property of the sample)."""
    text = np.asarray(paired.baseline.slices).astype(str)
    per_sample = text[samples.first_row]
    differs = np.flatnonzero(per_sample[samples.codes] != text)
    if differs.size:
        row = int(differs[0])
        key = key_text(paired.baseline.key_fields, paired.baseline.item_keys()[row])
        raise InputError(f"input '{knobs['baseline']}': the {samples.repeat_field}s of one sample lie in different "
                         f"slices ({key} is in {str(text[row])!r}, its sample's first {samples.repeat_field} in "
                         f"{str(per_sample[samples.codes[row]])!r}); a slice must be a property of the sample")
    return per_sample


def _clustered_slices(paired: PairedEvidence, subject: np.ndarray, baseline: np.ndarray, samples: SampleUnits,
                      knobs: Mapping[str, Any]) -> dict[str, Any] | None:
    """1.2.0 with repeats: one slice per sample (its rows must agree), each slice's design-effect-adjusted table."""
    if paired.baseline.slices is None or knobs["scale"] != "binary":
        return None
    per_sample = sample_slices(paired, samples, knobs)
    results = clustered_slices(sample_cell_counts(subject, baseline, samples.codes), per_sample,
                               margin=knobs["margin"], confidence_level=knobs["confidence_level"],
                               interval=knobs["method"] or "tango", adjustment=knobs["adjustment"])
    counts = dict(zip(*np.unique(per_sample, return_counts=True)))
    test = "Tango non-inferiority test" if knobs["margin"] is not None else "Tango score test of Δ = 0"
    tango = knobs["margin"] is None or (knobs["method"] or "tango") == "tango"
    inverts = "inverting the intervals of the rows" if tango else "not the Newcombe intervals of the rows"
    return {"adjustment": results.adjustment,
            "p_value_of": f"{test} on each slice's design-effect-adjusted table of samples (Student's t, samples − 1 "
                          f"degrees of freedom), {inverts}",
            "rows": [{"slice": str(r.name), "items": int(counts.get(str(r.name), 0)), "estimate": r.estimate,
                      "ci": [r.low, r.high], "p_value": r.p_value, "adjusted_p_value": r.adjusted_p_value}
                     for r in results.slices]}


def checked_values(paired: PairedEvidence, units: Units, knobs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The paired (subject, baseline) values of the metric, each checked against its scale; a
    ``StageError`` when fewer than 2 units pair."""
    if units.n < 2:
        raise StageError(f"only {units.n} {units.noun}(s) pair between '{knobs['baseline']}' and "
                         f"'{knobs['subject']}'; a paired comparison needs at least 2")
    metric = knobs["metric"]
    baseline = _metric_values(paired.baseline, metric, knobs["baseline"])
    subject = _metric_values(paired.subject, metric, knobs["subject"])
    _check_scale(baseline, paired.baseline, knobs["baseline"], knobs)
    _check_scale(subject, paired.subject, knobs["subject"], knobs)
    return subject, baseline


def run_metric_delta(ctx: StageContext, version_rules: MetricDeltaRules = RULES[-1]) -> StageOutput:
    knobs = ctx.knobs
    if knobs["scale"] == "bounded" and knobs["range"] is None:
        raise StageError("scale: bounded needs the range the metric takes (range: [low, high], e.g. [0, 1] for F1)")
    if knobs["scale"] == "binary" and knobs["range"] is not None:
        raise StageError(f"range {knobs['range']} applies to scale: bounded; a binary metric's values are 0 and 1")
    if knobs["range"] is not None and not knobs["range"][0] < knobs["range"][1]:
        raise StageError(f"range {knobs['range']} must be [low, high] with low < high")
    slice_column = (knobs.get("columns") or {}).get("slice")
    if version_rules.refuses_unused_slice_column and knobs["scale"] != "binary" and slice_column is not None:
        raise StageError(f"columns.slice ({slice_column!r}) gives per-slice results only for a binary metric; the "
                         f"metric '{knobs['metric']}' is scale: {knobs['scale']}: remove columns.slice")
    sides = {arm: _records(ctx, arm) for arm in ("baseline", "subject")}
    paired = pair_records(sides["baseline"], sides["subject"])
    pairing = _pairing(paired)
    units = version_rules.units_of(sides, paired, pairing, ctx.profile)
    decisions = [Decision("pairing", pairing), *units.rules]
    failed = [d.detail["rule"] for d in units.rules if d.detail["outcome"] == "abort"]
    if failed:
        raise ProfileAbort(f"profile '{ctx.profile}' rule(s) failed: {', '.join(failed)}: {units.abort}",
                           rule=failed[0], decisions=tuple(decisions))
    subject, baseline = checked_values(paired, units, knobs)
    metric = knobs["metric"]
    samples = units.samples
    clustered: ClusteredTable | None = None
    if samples is not None and samples.has_repeats:  # 1.2.0 with repeats: the samples are the units
        means = (sample_means(subject, samples.codes), sample_means(baseline, samples.codes))
        arrival = np.argsort(samples.first_row, kind="stable")
        ordered = means
        if knobs["scale"] == "binary":
            computed, clustered = _clustered_binary(subject, baseline, samples, knobs)
        else:
            computed = _bounded(means, (means[0][arrival], means[1][arrival]), ctx)
        slices = _clustered_slices(paired, subject, baseline, samples, knobs)
        n_paired = samples.n_samples
    else:
        order = version_rules.item_order(paired)
        ordered = (subject, baseline) if order is None else (subject[order], baseline[order])
        computed = (_binary(ordered[0], ordered[1], knobs, version_rules) if knobs["scale"] == "binary"
                    else _bounded(ordered, (subject, baseline), ctx))
        slices = _slices(paired, subject, baseline, knobs, version_rules)
        n_paired = paired.report.n_paired
    outputs = {
        "metric": metric,
        "scale": knobs["scale"],
        **({"range": list(knobs["range"])} if knobs["scale"] == "bounded" else {}),
        "direction": "difference = subject − baseline (negative: the subject is worse)",
        "n_paired": n_paired,
        "baseline_mean": float(ordered[1].mean()),
        "subject_mean": float(ordered[0].mean()),
        **computed,
        "slices": slices,
        "pairing": pairing,
        "sources": {"baseline": sides["baseline"].provenance.as_dict(),
                    "subject": sides["subject"].provenance.as_dict()},
        **({} if samples is None else {"units": units_block(samples, clustered, knobs["method"] or "tango")}),
    }
    return StageOutput(outputs=outputs, decisions=tuple(decisions))


def unused_record_parts(knobs: Mapping[str, Any], parts: Mapping[str, frozenset[str]]) -> list[tuple[str, str, str]]:
    """Validation (``StageType.unused_record_parts``): the parts of an evaluator export's records that the inputs'
    ``read:`` options make and this stage would not use. It reads the metric, the pairing identity, the slices
    and the provenance, never the weights; slices give per-slice results only for a binary metric, and those come
    from the baseline's slices (the subject's are checked against them when the baseline has slices too)."""
    unused = []
    for arm in ("baseline", "subject"):
        given = parts.get(arm, frozenset())
        if "weights" in given:
            unused.append((arm, "weights", "compares a per-item metric and reads no weights (read.count_unit picks "
                                           "the counts of the 'weight' column)"))
        if "slices" not in given:
            continue
        if knobs["scale"] != "binary":
            unused.append((arm, "slices", f"computes per-slice results only for a binary metric, and the metric "
                                          f"'{knobs['metric']}' is scale: {knobs['scale']}"))
        elif arm == "subject" and "slices" not in parts.get("baseline", frozenset()):
            unused.append((arm, "slices", "takes the slices from the baseline, which has no read.slice (give it on "
                                          "the baseline's input; the subject's are checked against them)"))
    return unused


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
        unused_record_parts=unused_record_parts,
    )


STAGES = tuple(metric_delta_stage(rules) for rules in RULES)
STAGE = STAGES[-1]
