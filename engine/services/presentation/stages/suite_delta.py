"""How ``paired.suite_delta`` reads: a benchmark suite compared task by task. The claim "non-inferior on every
task" and its decision (NONINFERIOR green, UNDECIDED amber, INFERIOR red, as a gate's PASS, INCONCLUSIVE and
FAIL), with its error rate and the margins, or that no claim was made without a margin; which tasks differ (the
adjustment across tasks and the error rate it controls); the pooled micro or macro difference with its interval
(micro: the pooled table's; macro: MOVER) and the independence it assumes; one row per task (folded beyond
``SLICE_ROWS_SHOWN``); a forest plot of the tasks against their −margin; the unit of analysis, how the items paired and what each export states.

The intersection–union test is Berger (1982), "Multiparameter hypothesis testing and acceptance sampling",
Technometrics 24(4); Holm (1979) and Benjamini and Hochberg (1995) adjust the tests of which tasks differ; the
macro pooled interval is the MOVER of Zou and Donner (2008), Statistics in Medicine 27(10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from certa.engine.services.presentation.explain import (finite_number, interval_text, number_pair, number_text,
                                                        percent_text, signed_text)
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.html.evidence import (PROVENANCE_TEXT, SIDES, export_facts, pairing_table,
                                                           provenance_table)
from certa.engine.services.presentation.html.view import (INCONCLUSIVE_STATE, Cell, Plot, StageInput, StageSection,
                                                          Table, fmt, gates_state, mapping, table)
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.stages.paired_metric import (SLICE_ROWS_SHOWN, adjustment_name,
                                                                     assumptions_text, by_sample, gate_lines,
                                                                     loss_text, method_name, paired_units)

__all__ = ["section", "reading", "estimates", "how_to_read", "markdown"]

DECISION_STATES: dict[str, bool | str] = {"NONINFERIOR": True, "UNDECIDED": INCONCLUSIVE_STATE, "INFERIOR": False}
"""A decision's badge colour: green, amber, red (a gate's PASS, INCONCLUSIVE, FAIL)."""

POOLING = {"micro": "micro (every item counts once: the difference of the suite's overall means)",
           "macro": "macro (every task counts once: the difference of the means of the per-task means)"}

ON_AXIS = ("pooled.ci", "pooled.estimate", "rows[")
"""The outputs whose gates share the forest plot's axis (differences)."""

STRADDLE = "straddle their margin|straddles its margin"
"""The UNDECIDED tasks' verb (``_tasks_word``: plural|singular)."""

LISTED = 5
"""Task names listed in a sentence; the rest are counted."""


def _rows(outputs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The recorded per-task rows."""
    return [row for row in outputs.get("rows") or () if isinstance(row, Mapping)]


def _names(values: Any) -> list[str]:
    """A recorded list of task names (empty when it is not a list)."""
    return [fmt(v) for v in values] if isinstance(values, Sequence) and not isinstance(values, str) else []


def _listed(names: Sequence[str]) -> str:
    """``a, b and c``, or the first ``LISTED`` and ``and N more``."""
    if len(names) > LISTED:
        return f"{', '.join(names[:LISTED])} and {len(names) - LISTED} more"
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1]))) if names else "none"


def _tasks_word(names: Sequence[str], verb: str = "") -> str:
    """``task a`` or ``tasks a and b``, with ``verb`` agreeing (``straddle|straddles their|its margin``: the plural
    before ``|``, the singular after)."""
    plural, _, singular = verb.partition("|")
    return f"task{'' if len(names) == 1 else 's'} {_listed(names)}" + (
        f" {singular if len(names) == 1 else plural}" if verb else "")


def _margins_text(outputs: Mapping[str, Any]) -> str:
    """``margin 0.02 on every task`` or ``per-task margins 0.01 to 0.05``."""
    margins = sorted({m for m in (finite_number(row.get("margin")) for row in _rows(outputs)) if m is not None})
    if not margins:
        return "the declared margin"
    if len(margins) == 1:
        return f"margin {number_text(margins[0])} ({loss_text(margins[0], outputs.get('scale'))}) on every task"
    return f"per-task margins from {number_text(margins[0])} to {number_text(margins[-1])}"


def _decision(outputs: Mapping[str, Any]) -> tuple[str, bool | str | None]:
    """The badge: the claim's decision with a margin, else the pooled difference."""
    every = mapping(outputs.get("every_task"))
    decision = every.get("decision")
    tasks = fmt(outputs.get("tasks"))
    if decision == "NONINFERIOR":
        return f"Non-inferior on every one of the {tasks} tasks", True
    if decision == "INFERIOR":
        return f"INFERIOR on {_tasks_word(_names(every.get('inferior_tasks')))}", False
    if decision == "UNDECIDED":
        return f"UNDECIDED: {_tasks_word(_names(every.get('undecided_tasks')), STRADDLE)}", INCONCLUSIVE_STATE
    return f"pooled difference {signed_text(mapping(outputs.get('pooled')).get('estimate'))}", None


def _claim_sentence(outputs: Mapping[str, Any]) -> str:
    """The claim's decision in words, with the margins and what else the tasks show."""
    every = mapping(outputs.get("every_task"))
    if not every:
        return "No non-inferiority margin was set, so no claim of non-inferiority was made."
    decision = every.get("decision")
    alpha = number_text(every.get("alpha"))
    margins = _margins_text(outputs)
    if decision == "NONINFERIOR":
        return (f"Non-inferior on every one of the {fmt(outputs.get('tasks'))} tasks at {margins}: every task's "
                f"interval lies above its −margin (intersection-union test: the chance of making this claim falsely "
                f"is at most {alpha}).")
    undecided = _names(every.get("undecided_tasks"))
    if decision == "INFERIOR":
        inferior = _names(every.get("inferior_tasks"))
        return (f"INFERIOR on {_tasks_word(inferior)} at {margins}: the whole interval lies below −margin, so the "
                f"subject is worse there by more than the margin (one-sided level {alpha})"
                + (f"; {_tasks_word(undecided)} undecided." if undecided else "."))
    return (f"UNDECIDED at {margins}: {_tasks_word(undecided, STRADDLE)} (the interval holds both "
            "−margin and values above it) and no task is shown inferior, so \"non-inferior on every task\" is "
            "neither shown nor refuted.")


def _differ_sentence(outputs: Mapping[str, Any]) -> str:
    """Which tasks differ, in a sentence."""
    which = mapping(outputs.get("which_differ"))
    differing = _names(which.get("differing"))
    how = f"({adjustment_name(which.get('adjustment'))}, α = {number_text(which.get('alpha'))})"
    if not differing:
        return f"No task is shown to differ from the baseline {how}; not shown to differ is not the same as equal."
    return f"T{_tasks_word(differing, 'differ|differs')[1:]} from the baseline {how}."


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's opening, a CI summary's line): the pooled difference, the
    claim's decision, which tasks differ."""
    pooled = mapping(outputs.get("pooled"))
    return (f"{fmt(outputs.get('metric'))} over {paired_units(outputs)} in {fmt(outputs.get('tasks'))} tasks: "
            f"pooled {fmt(pooled.get('pooling'))} difference {signed_text(pooled.get('estimate'))} (subject − "
            f"baseline), {percent_text(pooled.get('confidence_level'))} CI {interval_text(pooled.get('ci'))} "
            f"(subject {number_text(pooled.get('subject_mean'))}, baseline "
            f"{number_text(pooled.get('baseline_mean'))}). {_claim_sentence(outputs)} {_differ_sentence(outputs)}")


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """The pooled difference (subject − baseline) with its MOVER interval, then each task's with its interval
    (the slice is the task)."""
    pooled, metric = mapping(outputs.get("pooled")), str(outputs.get("metric", "metric"))
    name = f"{metric} difference (subject - baseline)"
    return (Estimate.read(f"pooled {pooled.get('pooling', '')} {name}".replace("  ", " "), pooled.get("estimate"),
                          pooled.get("ci"), pooled.get("confidence_level")),
            *(Estimate.read(name, row.get("estimate"), row.get("ci"), outputs.get("confidence_level"),
                            slice=str(row.get("task"))) for row in _rows(outputs)))


def _facts(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """Beside the decision: the sign convention, the unit of analysis, the pairing and the exports."""
    facts = [str(outputs[key]) for key in ("direction",) if isinstance(outputs.get(key), str)]
    statement = mapping(outputs.get("units")).get("statement")
    if isinstance(statement, str):
        facts.append(statement)
    return (*facts, *export_facts(outputs))


def _claim_table(outputs: Mapping[str, Any]) -> Table:
    """The claim "non-inferior on every task": its rule, decision, tasks by decision and error rate."""
    every = mapping(outputs.get("every_task"))
    if not every:
        return table("Claim: non-inferior on every task", ("quantity", "value"),
                     [("claim", "none: no non-inferiority margin was set")])
    decision = every.get("decision")
    state = DECISION_STATES.get(str(decision))
    return table("Claim: non-inferior on every task", ("quantity", "value"), [
        ("claim", every.get("claim")), ("margins", f"{fmt(every.get('margins'))}: {_margins_text(outputs)}"),
        ("rule", every.get("rule")), ("one-sided level α of each task's test", every.get("alpha")),
        ("decision", Cell(fmt(decision), state)),
        *((f"tasks {word}", _listed(_names(every.get(key))))
          for word, key in (("NONINFERIOR", "noninferior_tasks"), ("UNDECIDED", "undecided_tasks"),
                            ("INFERIOR", "inferior_tasks"))),
        ("error rate", every.get("error_rate"))])


def _differ_table(outputs: Mapping[str, Any]) -> Table:
    """Which tasks differ: the test, the adjustment, the error rate it controls, the tasks."""
    which = mapping(outputs.get("which_differ"))
    return table("Which tasks differ", ("quantity", "value"), [
        ("test of each task", which.get("test")), ("adjustment across the tasks", adjustment_name(which.get("adjustment"))),
        ("level α of the adjusted p-values", which.get("alpha")), ("error rate controlled", which.get("controls")),
        ("tasks that differ", _listed(_names(which.get("differing")))), ("note", which.get("note"))])


def _pooled_table(outputs: Mapping[str, Any]) -> Table:
    """The pooled difference: the weights, the pooled means, the estimate, its interval and what it assumes."""
    pooled = mapping(outputs.get("pooled"))
    units = mapping(outputs.get("units"))
    return table("Pooled difference", ("quantity", "value"), [
        ("metric", outputs.get("metric")), ("tasks", outputs.get("tasks")),
        ("paired units n", outputs.get("n_paired")),
        ("pooling", POOLING.get(str(pooled.get("pooling")), fmt(pooled.get("pooling")))),
        ("weights", pooled.get("weights")), ("baseline pooled mean", pooled.get("baseline_mean")),
        ("subject pooled mean", pooled.get("subject_mean")),
        ("pooled difference subject − baseline (estimate)", pooled.get("estimate")),
        (f"{percent_text(pooled.get('confidence_level'))} CI of the pooled difference", pooled.get("ci")),
        ("interval method", pooled.get("method")), ("assumption", pooled.get("assumption")),
        ("each task's interval", method_name(outputs.get("interval_method"))),
        ("unit of analysis", f"{fmt(units.get('statement'))}: {fmt(units.get('analysis'))}")])


def _differs_cell(row: Mapping[str, Any]) -> str:
    """``yes, worse``, ``yes, better`` or ``no``."""
    if row.get("differs") is not True:
        return fmt(row.get("differs"))
    estimate = finite_number(row.get("estimate"))
    return "yes" if estimate is None or estimate == 0 else f"yes, {'worse' if estimate < 0 else 'better'}"


def _task_tables(outputs: Mapping[str, Any]) -> tuple[Table, Table]:
    """Two tables of one row per task, folded beyond ``SLICE_ROWS_SHOWN`` rows (together they would not fit a
    page): the differences (units, means, Δ and its interval, and with a margin the task's margin and decision),
    and the tests of which differ (p-values, whether it differs, the smallest difference its size detects)."""
    rows = _rows(outputs)
    claimed = bool(mapping(outputs.get("every_task")))
    differences, tests = [], []
    for row in rows:
        low, high = number_pair(row.get("ci"))
        decision = row.get("decision")
        differences.append((row.get("task"), row.get("units"), row.get("baseline_mean"), row.get("subject_mean"),
                            row.get("estimate"), f"[{fmt(low, 4)}, {fmt(high, 4)}]",
                            *((row.get("margin"), Cell(fmt(decision), DECISION_STATES.get(str(decision))))
                              if claimed else ())))
        tests.append((row.get("task"), row.get("estimate"), row.get("p_value"), row.get("adjusted_p_value"),
                      _differs_cell(row), fmt(row.get("detectable_difference"), 4)
                      + (" (not attainable)" if row.get("detectable_attainable") is False else "")))
    folded = len(rows) > SLICE_ROWS_SHOWN
    level = percent_text(outputs.get("confidence_level"))
    headers = ("task", "units", "baseline mean", "subject mean", "Δ", f"{level} interval",
               *(("margin", "decision") if claimed else ()))
    first = table(f"{len(rows)} tasks: Δ = subject − baseline with its {level} interval"
                  + (" against the task's margin" if claimed else ""), headers,
                  [tuple(fmt(c, 4) if isinstance(c, float) else c for c in r) for r in differences],
                  numeric=(1, 2, 3, 4, *((6,) if claimed else ())), collapsed=folded)
    which = mapping(outputs.get("which_differ"))
    second = table(f"{len(rows)} tasks: which differ (p-values of Δ = 0, adjusted across the tasks by "
                   f"{adjustment_name(which.get('adjustment'))})",
                   ("task", "Δ", "p-value", "adjusted p-value", "differs", "detectable |Δ|"),
                   [tuple(fmt(c, 4) if isinstance(c, float) else c for c in r) for r in tests], numeric=(1, 2, 3, 5),
                   collapsed=folded)
    return first, second


def _plot(stage: StageInput) -> Plot:
    """The forest plot: the pooled difference (diamond) and each task's, coloured by its decision, against 0, the
    −margin line (one margin) or each task's −margin tick (per-task margins) and the gates on a difference."""
    outputs = stage.outputs
    pooled = mapping(outputs.get("pooled"))
    rows = _rows(outputs)
    margins = {finite_number(row.get("margin")) for row in rows} - {None}
    one = margins.pop() if len(margins) == 1 else None
    gates = gate_lines(stage, ON_AXIS)
    unit = " samples" if by_sample(outputs) else ""
    svg = plots.difference_plot(
        f"{stage.stage_id}-difference",
        overall=(f"pooled, {fmt(pooled.get('pooling'))} (n = {fmt(outputs.get('n_paired'))}{unit})",
                 pooled.get("estimate"), pooled.get("ci")),
        slices=[(f"{fmt(row.get('task'))} (n = {fmt(row.get('units'))})", row.get("estimate"), row.get("ci"))
                for row in rows],
        confidence_level=finite_number(outputs.get("confidence_level")), margin=one, gate_lines=gates,
        value_label=f"difference in {fmt(outputs.get('metric'))}, subject − baseline (negative: the subject is worse)",
        names=("pooled", "task"), row_margins=[] if one is not None else [row.get("margin") for row in rows],
        decisions=[row.get("decision") for row in rows])
    level = percent_text(outputs.get("confidence_level"))
    caption = (f"Each task's difference subject − baseline with its {level} interval"
               + (", coloured by its decision (green non-inferior, amber undecided, red inferior)"
                  if any(row.get("decision") for row in rows) else "")
               + ", and the pooled difference (diamond), against 0 (no difference)"
               + (f" and the non-inferiority limit −margin = −{number_text(one)} (orange, dashed)" if one is not None
                  else " and each task's non-inferiority limit −margin (orange ticks)" if margins else "")
               + ("; the gate thresholds on a difference (red, dashed)" if gates else "") + ".")
    return Plot(svg, caption)


def section(stage: StageInput) -> StageSection:
    """The report section of a ``paired.suite_delta`` stage."""
    outputs = stage.outputs
    decision, state = _decision(outputs)
    sources = mapping(outputs.get("sources"))
    differences, tests = _task_tables(outputs)
    tables = [_claim_table(outputs), differences, _differ_table(outputs), tests, _pooled_table(outputs),
              pairing_table(mapping(outputs.get("pairing"))),
              *(provenance_table(side, mapping(sources.get(side))) for side in SIDES if side in sources)]
    return StageSection(stage.stage_id, "", "", decision=decision, ok=gates_state(stage.gates, state),
                        summary=reading(outputs), facts=_facts(outputs), plots=(_plot(stage),), tables=tuple(tables))


def _tested_text(outputs: Mapping[str, Any]) -> str:
    """What was tested: the suite, the pairing within each task, the estimand, the intervals."""
    keys = ", ".join(map(str, mapping(outputs.get("pairing")).get("key_fields") or ())) or "the task and item id"
    units = mapping(outputs.get("units"))
    text = (f"What was tested: both models, the baseline and the subject, ran the same suite of "
            f"{fmt(outputs.get('tasks'))} tasks, and their answers were paired within each task (by {keys}). For "
            f"each task the estimand is Δ = subject − baseline, the task's mean {fmt(outputs.get('metric'))} of the "
            f"subject minus that of the baseline; a negative Δ means the subject is worse. Each task's interval is "
            f"a two-sided {percent_text(outputs.get('confidence_level'))} "
            f"{method_name(outputs.get('interval_method'))}.")
    if by_sample(outputs):
        statement = fmt(units.get("statement"))
        text += f" {statement[:1].upper()}{statement[1:]}: {fmt(units.get('analysis'))}."
    return text


def _claim_text(outputs: Mapping[str, Any]) -> str:
    """What the claim "non-inferior on every task" and its decision mean, and its error rate."""
    every = mapping(outputs.get("every_task"))
    if not every:
        return ("What the result means: no non-inferiority margin was set, so no claim that the subject is no "
                "worse was made, on any task. Read each task's interval (the differences the data are compatible "
                "with), which tasks differ, and the gates (if any). An interval containing 0 does NOT mean the "
                "models are equal.")
    alpha = number_text(every.get("alpha"))
    meaning = {
        "NONINFERIOR": "every task's interval lies above its −margin: on no task is the subject shown to be worse "
                       "by its margin or more. It does NOT say the models are equal on any task, nor anything about "
                       "tasks outside the suite.",
        "INFERIOR": "on the tasks named INFERIOR the whole interval lies below −margin: there the subject is worse "
                    "by more than the margin. One inferior task is enough for the suite to be INFERIOR.",
        "UNDECIDED": "no task is shown inferior, but the tasks named UNDECIDED have intervals that hold both −margin "
                     "and values above it: the data cannot tell a loss of the margin from a smaller one there. More "
                     "items on those tasks would decide; a gate on this decision is INCONCLUSIVE, not failed.",
    }.get(str(every.get("decision")), "the decision was not recorded.")
    return (f"What the claim means: \"non-inferior on every task\" at {_margins_text(outputs)}. "
            f"{fmt(every.get('decision'))}: {meaning} Each task is tested on its own at one-sided level {alpha}; "
            f"because the claim needs every task to pass, its chance of being made falsely stays at most {alpha} "
            "however many tasks there are (an intersection-union test, Berger 1982), so no correction for the "
            "number of tasks is needed. The INFERIOR side is not corrected: with many tasks, one may be called "
            "inferior by chance.")


def _differ_text(outputs: Mapping[str, Any]) -> str:
    """How to read which tasks differ."""
    which = mapping(outputs.get("which_differ"))
    return (f"Which tasks differ: each task's Δ = 0 is tested ({fmt(which.get('test'))}), and the p-values are "
            f"adjusted across the tasks by {adjustment_name(which.get('adjustment'))}, which controls the "
            f"{fmt(which.get('controls'))}. "
            "A task is said to differ when its adjusted p-value is at most α; the 'differs' column says in which "
            "direction. A task not shown to differ is NOT shown to be the same: its interval says how large a "
            "difference remains possible, and the detectable |Δ| column how large a difference its size would "
            "likely have found.")


def _pooled_text(outputs: Mapping[str, Any]) -> str:
    """How to read the pooled difference."""
    pooled = mapping(outputs.get("pooled"))
    return (f"The pooled difference sums up the suite in one number: {fmt(pooled.get('weights'))}. Its interval "
            f"is the {fmt(pooled.get('method'))}. It assumes {fmt(pooled.get('assumption'))}. A small pooled "
            "difference can hide a large loss on one task: the per-task rows (and, with a margin, the claim on every "
            "task) show that.")


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``paired.suite_delta`` stage's outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    return (_tested_text(outputs), _claim_text(outputs), _differ_text(outputs), _pooled_text(outputs),
            assumptions_text(outputs), PROVENANCE_TEXT)


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``paired.suite_delta`` stage (every ``version``): one row per task, the pooled
    difference, the claim's decision and the tasks that differ."""
    claimed = bool(outputs.get("every_task"))
    level = round(100 * outputs["confidence_level"], 2)
    lines = [f"| task | units | baseline | subject | Δ | {level:g}% CI ({outputs['interval_method']}) |"
             + (" margin | decision |" if claimed else "") + " adjusted p | differs |",
             "|---|---:|---:|---:|---:|---|" + ("---:|---|" if claimed else "") + "---:|---|"]
    for row in outputs["rows"]:
        lines.append(f"| {row['task']} | {row['units']} | {row['baseline_mean']:.4g} | {row['subject_mean']:.4g} | "
                     f"{row['estimate']:.4g} | [{row['ci'][0]:.4g}, {row['ci'][1]:.4g}] |"
                     + (f" {row['margin']:g} | {row['decision']} |" if claimed else "")
                     + f" {row['adjusted_p_value']:.4g} | {'yes' if row['differs'] else 'no'} |")
    pooled = outputs["pooled"]
    which = outputs["which_differ"]
    every = outputs["every_task"]
    statement = outputs["units"]["statement"]
    facts = [f"{statement[0].upper()}{statement[1:]} in {outputs['tasks']} tasks",
             f"pooled ({pooled['pooling']}) difference {pooled['estimate']:.6g}, {level:g}% CI "
             f"[{pooled['ci'][0]:.6g}, {pooled['ci'][1]:.6g}] (baseline {pooled['baseline_mean']:.6g}, subject "
             f"{pooled['subject_mean']:.6g})",
             f"non-inferior on every task: {every['decision']}" if every else "no margin: no non-inferiority claim",
             f"tasks that differ ({which['adjustment']}, α = {which['alpha']:g}): "
             + (", ".join(which["differing"]) or "none")]
    return "\n".join([*lines, "", "; ".join(facts) + "."])
