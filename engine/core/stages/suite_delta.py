"""``paired.suite_delta``: is the subject no worse than the baseline on every task of a benchmark suite, which tasks
differ, and by how much overall?

The two inputs are suites (``lm-eval-suite``, ``inspect-suite``: a folder of one export per task, docs/suites.md)
or per-item tables whose ``columns.task`` names each row's task; items pair per (task, item), and a task on one
side only leaves its items unpaired (the ``samples_paired`` rule). The metric is binary (accuracy, exact match,
pass@1). For each task t the difference Δ_t = mean(subject) − mean(baseline) gets its interval at the declared
level, exactly as ``paired.metric_delta`` 1.2.0 computes one task's: Tango's (default) or Newcombe's score
interval of the task's paired table, or, with repeated trials (Inspect epochs, ``columns.repeat``), of the task's
design-effect-adjusted table of samples (the sample is the unit, its repeats a cluster).

Across tasks (``certa.engine.core.stats.paired_metric.suite``):

* with ``margin`` (one for every task, or one per task), each task is NONINFERIOR, INFERIOR or UNDECIDED against
  its margin, and ``every_task.decision`` is the claim "non-inferior on every task" (an intersection–union test at
  one-sided level (1 − confidence_level)/2, no correction needed);
* ``which_differ``: each task's two-sided test of Δ_t = 0 (exact McNemar; with repeats Tango's score test on the
  adjusted table), adjusted across the tasks by Holm or Benjamini–Hochberg at α = 1 − confidence_level;
* ``pooled``: the declared pooled difference (``micro``: every unit once; ``macro``: every task once) with its
  MOVER interval.

Floors: at least 100 (ci) or 200 (release) paired samples in all (``min_paired_samples``, as
``paired.metric_delta``), and at least 50 (ci) or 100 (release) in every task (``min_paired_samples_per_task``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from certa.engine.core.evidence import EvidenceRecords, pair_records
from certa.engine.core.evidence.formats import records_of_table
from certa.engine.core.evidence.repeats import SampleUnits
from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType
from certa.engine.core.stages.paired_metric import (binary_method, checked_values, one_sided_alpha, sample_level_units,
                                                    sample_slices, units_block)
from certa.engine.core.stages.pairing_rules import profile_rule
from certa.engine.core.stats.paired_metric import (PairedTable, adjust_p_values, clustered_interval, clustered_score_test,
                                                   clustered_table, mcnemar_exact_test, minimum_detectable_difference,
                                                   newcombe_interval, paired_tables_by_slice, sample_cell_counts,
                                                   sample_means, t_factor, tango_interval)
from certa.engine.core.stats.paired_metric.suite import (pooled_difference, pooled_weights, suite_decision,
                                                         task_decisions, which_differ)
from certa.engine.foundation.errors import ProfileAbort, StageError

__all__ = ["STAGE", "STAGES", "TASK_FLOORS", "run_suite_delta"]

TASK_FLOORS: dict[str, int | None] = {"dev": None, "ci": 50, "release": 100}
"""Minimum paired samples in every task, per profile."""

EXAMPLES = 5
"""Unpaired item keys listed in the outputs per side (all are counted)."""

INTERVALS = {"tango": tango_interval, "newcombe": newcombe_interval}

POOLING_WORDS = {
    "micro": "micro: every {unit} counts once, so each task weighs its share of the {n} {unit}s (the difference of "
             "the suite's overall means)",
    "macro": "macro: every task counts once, each weighing 1/{tasks} whatever its size (the difference of the mean "
             "of the per-task means)",
}


def _records(ctx: StageContext, arm: str) -> EvidenceRecords:
    columns = ctx.knobs["columns"]
    return records_of_table(ctx.table(arm), item=columns["item"], metrics=(ctx.knobs["metric"],), slice_column=None,
                            repeat_column=columns.get("repeat"), task_column=columns.get("task"))


def _margins(knobs: Mapping[str, Any], tasks: Sequence[str]) -> np.ndarray | None:
    """One margin per task: the knob's number for every task, or its mapping, which must name every task."""
    margin = knobs["margin"]
    if margin is None:
        return None
    if not isinstance(margin, Mapping):
        return np.full(len(tasks), float(margin))
    missing = [t for t in tasks if t not in margin]
    unknown = sorted(set(margin) - set(tasks))
    if missing or unknown:
        raise StageError("margin names each task's margin, and must name exactly the paired tasks: "
                         + "; ".join(part for part in (
                             f"missing {len(missing)} ({', '.join(missing[:EXAMPLES])})" if missing else "",
                             f"not a paired task: {', '.join(unknown[:EXAMPLES])}" if unknown else "") if part))
    return np.array([float(margin[t]) for t in tasks])


def _per_task(subject: np.ndarray, baseline: np.ndarray, labels: np.ndarray, samples: SampleUnits,
              knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Each task's units, means, interval, two-sided p-value and detectable difference (arrays in task order)."""
    level = knobs["confidence_level"]
    method = binary_method(knobs)
    alpha = one_sided_alpha(level)
    if samples.has_repeats:
        counts = sample_cell_counts(subject, baseline, samples.codes)
        names, codes = np.unique(labels, return_inverse=True)
        codes = codes.ravel()
        table = clustered_table(counts, codes)
        ci = clustered_interval(table, level, method)
        p = clustered_score_test(table).p_value
        detectable = minimum_detectable_difference(table.scaled(np.asarray(t_factor(table.degrees_of_freedom, level))),
                                                   alpha=2 * alpha, power=knobs["power"])
        units = np.bincount(codes, minlength=names.size)
        means = [np.bincount(codes, weights=sample_means(values, samples.codes), minlength=names.size) / units
                 for values in (subject, baseline)]
        whole = clustered_interval(clustered_table(counts), level, method)
    else:
        slice_names, tables = paired_tables_by_slice(subject, baseline, labels)
        names = np.asarray(slice_names)
        ci = INTERVALS[method](tables, level)
        p = mcnemar_exact_test(tables).p_value
        detectable = minimum_detectable_difference(tables, alpha=2 * alpha, power=knobs["power"])
        units = np.asarray(tables.n)
        means = [np.asarray(tables.n11 + tables.n10) / units, np.asarray(tables.n11 + tables.n01) / units]
        whole = INTERVALS[method](PairedTable(*(np.asarray(cells).sum() for cells in (
            tables.n11, tables.n10, tables.n01, tables.n00))), level)
    return {"names": [str(n) for n in np.atleast_1d(names)], "units": np.atleast_1d(units),
            "subject_mean": np.atleast_1d(means[0]), "baseline_mean": np.atleast_1d(means[1]),
            "estimate": np.atleast_1d(ci.estimate), "low": np.atleast_1d(ci.low), "high": np.atleast_1d(ci.high),
            "method": ci.method, "p_value": np.atleast_1d(p),
            "detectable": np.atleast_1d(detectable.difference), "attainable": np.atleast_1d(detectable.attainable),
            "whole": whole}


def _every_task(tasks: Mapping[str, Any], margins: np.ndarray | None, knobs: Mapping[str, Any],
                rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The claim "non-inferior on every task" and each task's decision (None without a margin)."""
    if margins is None:
        return None
    decided = task_decisions(tasks["low"], tasks["high"], margins)
    for row, margin, decision in zip(rows, margins.tolist(), decided.tolist()):
        row.update(margin=margin, decision=decision)
    decision = str(suite_decision(decided))
    alpha = one_sided_alpha(knobs["confidence_level"])
    names = tasks["names"]
    by = {word: [n for n, d in zip(names, decided.tolist()) if d == word]
          for word in ("NONINFERIOR", "UNDECIDED", "INFERIOR")}
    return {
        "claim": f"the subject is non-inferior on every one of the {len(names)} tasks (no task worse by its margin "
                 "or more)",
        "margins": "one for every task" if not isinstance(knobs["margin"], Mapping) else "one per task",
        "rule": f"a task is NONINFERIOR when its interval's lower bound is above −margin (H0 Δ ≤ −margin rejected "
                f"at one-sided level {alpha!r}), INFERIOR when its upper bound is below −margin, else UNDECIDED; "
                "the suite is INFERIOR when any task is, NONINFERIOR when every task is, else UNDECIDED",
        "error_rate": f"intersection-union test (Berger 1982): the claim is made falsely with probability at most "
                      f"{alpha!r}, whatever the number of tasks and their dependence; the INFERIOR side is not "
                      f"corrected (among {len(names)} tasks all truly at their margin, some task is called "
                      f"INFERIOR up to {len(names)} × {alpha!r} of the time)",
        "alpha": alpha,
        "decision": decision,
        "noninferior": decision == "NONINFERIOR",
        "noninferior_tasks": by["NONINFERIOR"], "undecided_tasks": by["UNDECIDED"],
        "inferior_tasks": by["INFERIOR"],
    }


def _which_differ(tasks: Mapping[str, Any], knobs: Mapping[str, Any], rows: list[dict[str, Any]],
                  clustered: bool) -> dict[str, Any]:
    """Each task's two-sided p-value adjusted across the tasks, and the tasks that differ at α = 1 − level."""
    alpha = 2 * one_sided_alpha(knobs["confidence_level"])
    adjusted = adjust_p_values(tasks["p_value"], knobs["adjustment"])
    differs = which_differ(adjusted, alpha)
    for row, adj, flag in zip(rows, adjusted.tolist(), differs.tolist()):
        row.update(adjusted_p_value=adj, differs=flag)
    names = [n for n, flag in zip(tasks["names"], differs.tolist()) if flag]
    test = ("Tango's score test of Δ = 0 on each task's design-effect-adjusted table of samples (Student's t, "
            "samples − 1 degrees of freedom), two-sided" if clustered else
            "exact McNemar test of Δ = 0 on each task's paired table (conditional binomial on the discordant "
            "items), two-sided")
    control = ("familywise error rate: the chance that any task that does not truly differ is said to differ is "
               f"at most {alpha!r}, whatever the dependence between the tasks" if knobs["adjustment"] == "holm" else
               f"false discovery rate: the expected share of tasks said to differ that do not truly differ is at "
               f"most {alpha!r} (independent or positively dependent tasks)")
    return {"test": test, "adjustment": knobs["adjustment"], "alpha": alpha, "controls": control,
            "differing": names, "any_differs": bool(names),
            "note": "'not shown to differ' is not a claim that a task is the same"}


def _pooled(tasks: Mapping[str, Any], knobs: Mapping[str, Any], unit: str) -> dict[str, Any]:
    """The declared pooled difference: micro, the interval of the suite's pooled table; macro, MOVER over the
    tasks' intervals (``certa.engine.core.stats.paired_metric.suite``)."""
    weights = pooled_weights(tasks["units"], knobs["pooled"])
    n = int(tasks["units"].sum())
    if knobs["pooled"] == "micro":
        whole = tasks["whole"]
        estimate, low, high = float(whole.estimate), float(whole.low), float(whole.high)
        method = (f"{tasks['method']} interval of the suite's pooled table (all {n} {unit}s together), which "
                  "ignores the tasks as strata and so can only be wider than needed (Cochran 1977, §5A)")
    else:
        pooled = pooled_difference(tasks["estimate"], tasks["low"], tasks["high"], weights)
        estimate, low, high = float(pooled.estimate), float(pooled.low), float(pooled.high)
        method = ("MOVER (Zou and Donner 2008): the weighted sum of the tasks' differences, each limit recovering "
                  "the tasks' variances from their own intervals; conservative when tasks have few discordant "
                  f"{unit}s")
    return {
        "pooling": knobs["pooled"],
        "weights": POOLING_WORDS[knobs["pooled"]].format(unit=unit, n=n, tasks=len(tasks["names"])),
        "estimate": estimate, "ci": [low, high], "confidence_level": knobs["confidence_level"],
        "baseline_mean": float(weights @ tasks["baseline_mean"]), "subject_mean": float(weights @ tasks["subject_mean"]),
        "method": method,
        "assumption": f"the tasks hold distinct {unit}s, so their estimates are independent; tasks built on the "
                      "same documents make this interval too narrow",
    }


def _task_floor_rule(tasks: Mapping[str, Any], profile: str, unit: str) -> Decision:
    floor = TASK_FLOORS[profile]
    low = int(tasks["units"].min())
    short = [f"{n} ({int(u)})" for n, u in zip(tasks["names"], tasks["units"].tolist()) if floor is not None
             and u < floor]
    message = (f"{len(short)} of {len(tasks['names'])} task(s) have fewer than {floor} paired {unit}s: "
               f"{', '.join(short[:EXAMPLES])}{' ...' if len(short) > EXAMPLES else ''}")
    return profile_rule("min_paired_samples_per_task", floor is None or low >= floor, low, floor, profile,
                        TASK_FLOORS[profile] is not None, message)


def run_suite_delta(ctx: StageContext) -> StageOutput:
    knobs = ctx.knobs
    sides = {arm: _records(ctx, arm) for arm in ("baseline", "subject")}
    paired = pair_records(sides["baseline"], sides["subject"])
    pairing = paired.report.summary(EXAMPLES)
    units = sample_level_units(sides, paired, pairing, ctx.profile)
    decisions = [Decision("pairing", pairing), *units.rules]
    failed = [d.detail["rule"] for d in units.rules if d.detail["outcome"] == "abort"]
    if failed:
        raise ProfileAbort(f"profile '{ctx.profile}' rule(s) failed: {', '.join(failed)}: {units.abort}",
                           rule=failed[0], decisions=tuple(decisions))
    samples = units.samples
    assert samples is not None  # sample_level_units always states the samples
    if paired.baseline.slices is None:
        raise StageError(f"input '{knobs['baseline']}' names no task per item: give a suite (format lm-eval-suite "
                         "or inspect-suite) or a per-item table with columns.task")
    subject, baseline = checked_values(paired, units, knobs)
    metric = knobs["metric"]
    labels = sample_slices(paired, samples, knobs) if samples.has_repeats else \
        np.asarray(paired.baseline.slices).astype(str)
    tasks = _per_task(subject, baseline, labels, samples, knobs)
    unit = units.noun
    floor_rule = _task_floor_rule(tasks, ctx.profile, unit)
    decisions.append(floor_rule)
    if floor_rule.detail["outcome"] == "abort":
        raise ProfileAbort(f"profile '{ctx.profile}' rule(s) failed: min_paired_samples_per_task: "
                           f"{floor_rule.detail['message']} (use profile dev to explore)",
                           rule="min_paired_samples_per_task", decisions=tuple(decisions))
    margins = _margins(knobs, tasks["names"])
    rows = [{"task": name, "units": int(u), "baseline_mean": float(b), "subject_mean": float(s),
             "estimate": float(e), "ci": [float(lo), float(hi)], "p_value": float(p),
             "detectable_difference": float(d), "detectable_attainable": bool(a)}
            for name, u, b, s, e, lo, hi, p, d, a in zip(
                tasks["names"], tasks["units"].tolist(), tasks["baseline_mean"].tolist(),
                tasks["subject_mean"].tolist(), tasks["estimate"].tolist(), tasks["low"].tolist(),
                tasks["high"].tolist(), tasks["p_value"].tolist(), tasks["detectable"].tolist(),
                tasks["attainable"].tolist())]
    every_task = _every_task(tasks, margins, knobs, rows)
    which = _which_differ(tasks, knobs, rows, samples.has_repeats)
    analysis = ("each task's interval is the " + ("Tango" if binary_method(knobs) == "tango" else "Newcombe")
                + " score interval of " + ("its design-effect-adjusted table of samples (the repeats of a sample "
                                           "are one cluster; Rao and Scott 1992, Student's t)" if samples.has_repeats
                                           else "its paired 2×2 table") + "; the tasks are independent strata")
    outputs = {
        "metric": metric,
        "scale": "binary",
        "direction": "difference = subject − baseline (negative: the subject is worse)",
        "confidence_level": knobs["confidence_level"],
        "interval_method": tasks["method"],
        "tasks": len(rows),
        "n_paired": units.n,
        "rows": rows,
        "every_task": every_task,
        "which_differ": which,
        "pooled": _pooled(tasks, knobs, unit),
        "pairing": pairing,
        "sources": {"baseline": sides["baseline"].provenance.as_dict(),
                    "subject": sides["subject"].provenance.as_dict()},
        "units": {**units_block(samples, None, binary_method(knobs)), "analysis": analysis},
    }
    return StageOutput(outputs=outputs, decisions=tuple(decisions))


STAGE = StageType(
    name="paired.suite_delta",
    version="1.0.0",
    input_knobs=("baseline", "subject"),
    run=run_suite_delta,
    summary="A benchmark suite of tasks (lm-eval or Inspect folders, tables with a task column): per-task paired "
            "differences of a binary metric, non-inferior on every task, which tasks differ (Holm/BH), the pooled "
            "micro or macro difference with its interval.",
    presentation="certa.engine.services.presentation.stages.suite_delta",
    changes="issue 34: first version.",
)
STAGES = (STAGE,)
