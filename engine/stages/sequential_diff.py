"""Stage ``sequential.diff``: are two models DIFFERENT, IDENTICAL, SAME (equivalent) or UNDECIDED? (seed 000)

Observations are per-prompt score differences in arrival order, either from an input table (``input``;
column ``score``, optional ``prompt_id`` and ``position``: with positions, the mean over a prompt's first
``positions_per_prompt`` positions is one observation) or from a scorer plugin (``scorer`` with the
input tables ``reference`` and ``candidate``, see ``engine.scorers``). A (1 - alpha) confidence sequence
(``method``, ``engine.stats.confseq``) is computed for every prefix and the decision rules of
``engine.stats.sequential_decision`` are checked after every observation (or batch), stopping at the
first rule that fires and never after ``n_max``. Every check is one ``sequential_check`` decision in the
ledger (n, mean, bounds, p-value, rule states); the certificate holds the stopping time, the final
sequence values, the method, its validity statement and the clip-range assumption.

Scorer runs are recorded: the stage returns the scores it obtained in ``captured['scores']`` and, given
``ctx.captured`` (a replay), recomputes everything from them without calling the scorer. The outputs
depend only on the knobs and the scores, so a replay reproduces the certificate bit for bit.

Profile rule ``optional_stopping_validity``: ``dev`` warns when the method is not (non-asymptotically)
anytime-valid; ``ci`` aborts for the fixed-n methods and warns for ``asymptotic_cs``; ``release``
aborts unless the method is anytime-valid.

Versions (``KERNELS``, oldest first): each is this module's glue run with a ``SequentialKernels`` record of
what differs. 1.0.0 computes exp, log, log1p and logaddexp with numpy's ufuncs, whose kernels numpy picks
by CPU at run time; 1.1.0 with libm in compiled loops (``engine.stats.libm``), so its numbers do not
depend on numpy's SIMD choice. Everything else is shared and computes the same bytes for both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, ProfileAbort, StageError
from ..scorers import load_scorer, score_prompts
from ..stats.confseq import BOUNDED_METHODS, VALIDITY, CSSettings, PValuePath, confidence_sequence, null_p_value
from ..stats.confseq_common import ConfidenceSequence, prefix_mean
from ..stats.libm import LIBM, NUMPY_UFUNCS, ElementaryFunctions
from ..stats.sequential_decision import (DECISION_OF, OUTCOMES, DecisionRules, RuleStates, Stop, all_zero_path,
                                         first_stop, rule_states)
from ..tables import Table, table_from_columns
from .base import Decision, StageContext, StageOutput, StageType

__all__ = ["STAGE", "STAGES", "SequentialKernels", "KERNELS", "CAPTURED_SCORES", "analyse_scores", "Analysis"]

CAPTURED_SCORES = "scores"
"""Name of the captured table (columns ``draw``, ``prompt_id``, ``score``) of a scorer run."""

NULL_MEAN = 0.0

_VALIDITY_RULE: dict[str, dict[str, str]] = {
    # profile -> validity -> outcome
    "dev": {"anytime-valid": "pass", "asymptotic anytime-valid": "warn", "not valid under optional stopping": "warn"},
    "ci": {"anytime-valid": "pass", "asymptotic anytime-valid": "warn", "not valid under optional stopping": "abort"},
    "release": {"anytime-valid": "pass", "asymptotic anytime-valid": "abort",
                "not valid under optional stopping": "abort"},
}


# -------------------------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class SequentialKernels:
    """What one version of ``sequential.diff`` computes with: the elementary functions (exp, log, log1p,
    logaddexp) of its confidence sequences, p-values, e-value and stopping decisions."""

    version: str
    elementary: ElementaryFunctions
    changes: str


KERNELS: tuple[SequentialKernels, ...] = (
    SequentialKernels(version="1.0.0", elementary=NUMPY_UFUNCS, changes="first version (certa 0.1.0)"),
    SequentialKernels(
        version="1.1.0", elementary=LIBM,
        changes="certa 0.3.0: exp, log, log1p (and logaddexp from them) by libm in compiled loops, independent "
                "of numpy's run-time SIMD choice; p-values, e-values and bounds may move in the last bits"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


# ----------------------------------------------------------------------------------------------- knobs


def _rules(knobs: Mapping[str, Any]) -> DecisionRules:
    return DecisionRules(
        n_min=knobs["n_min"], n_max=knobs["n_max"], check_every=knobs["check_every"], batch_size=knobs["batch_size"],
        min_effect=knobs.get("min_effect"), equivalence_band=knobs.get("equivalence_band"),
        rel_margin_target=knobs.get("rel_margin_target"), min_effect_floor=knobs["min_effect_floor"],
        early_stop_threshold=knobs["early_stop_threshold"], identical_model_n_min=knobs["identical_model_n_min"],
    )


def _settings(knobs: Mapping[str, Any]) -> CSSettings:
    betting, stitching, asymptotic = knobs["betting"], knobs["stitching"], knobs["asymptotic"]
    t_opt = asymptotic.get("t_opt")
    return CSSettings(grid_size=betting["grid_size"], truncation=betting["truncation"], theta=betting["theta"],
                      stitch_m=stitching["m"], stitch_s=stitching["s"], stitch_eta=stitching["eta"],
                      t_opt=float(knobs["n_max"] if t_opt is None else t_opt))


def _iv_knobs(knobs: Mapping[str, Any]) -> None:
    """Cross-field checks the JSON Schema cannot express (messages name the knob, expectation, value)."""
    has_input, has_scorer = knobs.get("input") is not None, knobs.get("scorer") is not None
    if has_input == has_scorer:
        raise StageError("give either 'input' (a table of per-prompt scores) or 'scorer' with 'reference' and "
                         f"'candidate' (input tables the scorer reads), not {'both' if has_input else 'neither'}")
    if has_scorer and (knobs.get("reference") is None or knobs.get("candidate") is None):
        raise StageError("'scorer' needs 'reference' and 'candidate': the names of the input tables it reads")
    if not knobs["clip_low"] < knobs["clip_high"]:
        raise StageError(f"'clip_low' must be < 'clip_high' (got {knobs['clip_low']} and {knobs['clip_high']})")
    if knobs["n_min"] > knobs["n_max"]:
        raise StageError(f"'n_min' must be <= 'n_max' (got n_min={knobs['n_min']}, n_max={knobs['n_max']})")


# ------------------------------------------------------------------------------------------ observations


def _table_observations(table: Table, knobs: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """Per-prompt observations in arrival order from the input table (the ``_iv`` step of table mode)."""
    cols = knobs["columns"]
    score = table.numeric(cols["score"])
    if score.size == 0:
        raise InputError(f"input '{table.name}' has no rows")
    info: dict[str, Any] = {"kind": "table", "input": knobs["input"], "rows": int(score.size)}
    if not table.has(cols["position"]):
        return score, info
    if not table.has(cols["prompt_id"]):
        raise InputError(f"input '{table.name}' has a '{cols['position']}' column but no '{cols['prompt_id']}' column; "
                         "per-position rows are averaged per prompt, so the prompt must be named")
    prompts = table.text(cols["prompt_id"]).astype(str)
    positions = table.numeric(cols["position"])
    uniq, first_row, group = np.unique(prompts, return_index=True, return_inverse=True)
    order = np.lexsort((positions, group))                       # rows by prompt, then position
    g_sorted, pos_sorted = group[order], positions[order]
    if np.any((g_sorted[1:] == g_sorted[:-1]) & (pos_sorted[1:] == pos_sorted[:-1])):
        raise InputError(f"input '{table.name}': a (prompt_id, position) pair appears twice")
    starts = np.searchsorted(g_sorted, np.arange(uniq.size))
    rank = np.arange(order.size) - starts[g_sorted]
    keep = rank < knobs["positions_per_prompt"]
    counts = np.bincount(g_sorted[keep], minlength=uniq.size)
    means = np.bincount(g_sorted[keep], weights=score[order][keep], minlength=uniq.size) / counts
    arrival = np.argsort(first_row, kind="stable")               # prompts in order of first appearance
    info.update({"prompts": int(uniq.size), "positions_used": {"min": int(counts.min()), "max": int(counts.max())},
                 "positions_available": {"min": int(np.bincount(group).min()), "max": int(np.bincount(group).max())}})
    return means[arrival], info


@dataclass(frozen=True)
class Analysis:
    """Everything computed from one score array (pure function of scores and knobs)."""

    scores: np.ndarray
    cs: ConfidenceSequence
    estimand: np.ndarray          # clipped scores (bounded methods) or raw scores
    mean: np.ndarray
    p_value: PValuePath | None
    states: RuleStates
    stop: Stop
    bounded: bool


def analyse_scores(scores: np.ndarray, knobs: Mapping[str, Any], *, with_p_value: bool = True,
                   elementary: ElementaryFunctions = NUMPY_UFUNCS) -> Analysis:
    """Confidence sequence, p-value, rule states and stopping time of ``scores`` (first n_max used).

    Works on one stream (shape ``(n,)``) or many (``(streams, n)``, e.g. in simulations). ``elementary``:
    the exp/log/log1p/logaddexp of the stage version (``KERNELS``; default 1.0.0's numpy ufuncs).
    """
    scores = np.asarray(scores, dtype=np.float64)[..., : knobs["n_max"]]
    method, alpha = knobs["method"], knobs["alpha"]
    low, high = float(knobs["clip_low"]), float(knobs["clip_high"])
    settings = _settings(knobs)
    rules = _rules(knobs)
    bounded = method in BOUNDED_METHODS
    estimand = np.clip(scores, low, high) if bounded else scores
    cs = confidence_sequence(scores, method, alpha, low, high, settings, elementary=elementary)
    mean = prefix_mean(estimand)
    p_value = (null_p_value(scores, method, NULL_MEAN, alpha, low, high, settings, start=knobs["n_min"],
                            elementary=elementary)
               if with_p_value else None)
    states = rule_states(cs.lower, cs.upper, mean, all_zero_path(scores), rules)
    return Analysis(scores=scores, cs=cs, estimand=estimand, mean=mean, p_value=p_value,
                    states=states, stop=first_stop(states, rules), bounded=bounded)


def _scorer_observations(ctx: StageContext, knobs: Mapping[str, Any],
                         elementary: ElementaryFunctions) -> tuple[np.ndarray, Table, dict[str, Any]]:
    """Draw prompts with the stage's generator and score them batch by batch until a rule fires or n_max."""
    spec = knobs["scorer"]
    reference, candidate = ctx.table("reference"), ctx.table("candidate")
    scorer = load_scorer(spec["name"], metric=spec.get("metric"), options=spec.get("options"))
    population = list(scorer.prompts(reference, candidate))
    if not population:
        raise StageError(f"scorer '{spec['name']}' found no prompts in '{knobs['reference']}' and "
                         f"'{knobs['candidate']}'")
    n_max, batch, k = knobs["n_max"], knobs["batch_size"], knobs["positions_per_prompt"]
    draws = ctx.rng.integers(0, len(population), size=n_max)    # with replacement: iid prompts
    prompts = [str(population[i]) for i in draws.tolist()]
    values = np.empty(0)
    while values.size < n_max:
        chunk = prompts[values.size: values.size + batch]
        values = np.concatenate([values, score_prompts(scorer, reference, candidate, chunk, k)])
        ctx.progress(int(values.size), n_max, "prompts scored")
        analysis = analyse_scores(values, knobs, with_p_value=False, elementary=elementary)
        if OUTCOMES[int(analysis.stop.outcome)] != "exhausted":
            break
    captured = table_from_columns(CAPTURED_SCORES, {
        "draw": np.arange(1, values.size + 1), "prompt_id": prompts[: values.size], "score": values})
    return captured.numeric("score"), captured, {"population": len(population)}


def _replayed_observations(captured: Table) -> np.ndarray:
    if not captured.has("score"):
        raise InputError(f"captured table '{captured.name}' has no 'score' column")
    return captured.numeric("score")


# ---------------------------------------------------------------------------------------------- outputs


def _num(value: float) -> str:
    return f"{value:.6g}"


def _reason(outcome: str, n: int, lo: float, hi: float, mean: float, half: float, rel_me: float,
            rules: DecisionRules) -> str:
    ci = f"[{_num(lo)}, {_num(hi)}]"
    delta = rules.delta_star
    if outcome == "identical_zero":
        return f"all {n} scores are exactly 0 (n >= identical_model_n_min = {rules.identical_model_n_min})"
    if outcome == "identical_small":
        return (f"|mean| = {_num(abs(mean))} and half-width = {_num(half)} are below early_stop_threshold = "
                f"{_num(rules.early_stop_threshold)}")
    if outcome == "different_higher":
        return f"the confidence sequence {ci} lies above the minimum effect {_num(delta)}"
    if outcome == "different_lower":
        return f"the confidence sequence {ci} lies below minus the minimum effect -{_num(delta)}"
    if outcome == "same":
        return f"the confidence sequence {ci} lies inside the equivalence band ±{_num(rules.equivalence_band or 0.0)}"
    straddles = f"the confidence sequence {ci} " + ("includes 0" if lo <= 0.0 <= hi else
                                                    f"does not clear the minimum effect ±{_num(delta)}")
    if outcome == "precision":
        return (f"precision target reached: rel_me = {_num(rel_me)} <= rel_margin_target = "
                f"{_num(rules.rel_margin_target or 0.0)}, and {straddles}")
    if outcome == "n_max":
        return f"n_max = {rules.n_max} reached and {straddles}"
    return f"the input ran out after {n} of n_max = {rules.n_max} observations and {straddles}"


_INTERPRETATION = {
    "DIFFERENT": "The models differ by more than the minimum effect, at the stated error rate.",
    "IDENTICAL": "The models' scores show no difference at all (identity, not a statistical test).",
    "SAME": "Any difference between the models lies inside the equivalence band, at the stated error rate.",
    "UNDECIDED": "The data do not support DIFFERENT or SAME yet; raise n_max, widen the band or reduce score noise.",
}


def _check_decisions(a: Analysis, outcome: str) -> tuple[Decision, ...]:
    """One ``sequential_check`` decision per check up to and including the stop."""
    assert a.p_value is not None
    stop = int(a.stop.index)
    checks = np.flatnonzero(a.states.checked[: stop + 1]).tolist()
    s = a.states
    rows = {
        "n": (np.asarray(checks) + 1).tolist(), "mean": a.mean[checks].tolist(), "lower": a.cs.lower[checks].tolist(),
        "upper": a.cs.upper[checks].tolist(), "half_width": s.half_width[checks].tolist(),
        "rel_me": s.rel_me[checks].tolist(), "p_value": a.p_value.p[checks].tolist(),
        "identical": (s.identical_zero | s.identical_small)[checks].tolist(),
        "different": (s.different_higher | s.different_lower)[checks].tolist(), "same": s.same[checks].tolist(),
        "precise": s.precise[checks].tolist(),
    }
    decisions = []
    for j, t in enumerate(checks):
        detail: dict[str, Any] = {
            "n": rows["n"][j], "mean": rows["mean"][j], "lower": rows["lower"][j], "upper": rows["upper"][j],
            "half_width": rows["half_width"][j], "rel_me": rows["rel_me"][j], "p_value": rows["p_value"][j],
            "rules": {"identical": rows["identical"][j], "different": rows["different"][j], "same": rows["same"][j],
                      "precision": rows["precise"][j]},
            "stop": t == stop,
        }
        if t == stop:
            detail["decision"] = DECISION_OF[outcome]
            detail["outcome"] = outcome
        decisions.append(Decision("sequential_check", detail))
    return tuple(decisions)


def _summary(values: np.ndarray) -> dict[str, float]:
    q25, median, q75 = np.quantile(values, [0.25, 0.5, 0.75])
    return {"min": float(values.min()), "max": float(values.max()), "median": float(median), "q25": float(q25),
            "q75": float(q75), "iqr": float(q75 - q25)}


def _outputs(a: Analysis, knobs: Mapping[str, Any], source: dict[str, Any],
             elementary: ElementaryFunctions) -> tuple[dict[str, Any], str]:
    assert a.p_value is not None
    rules = _rules(knobs)
    stop = int(a.stop.index)
    n_used = stop + 1
    outcome = OUTCOMES[int(a.stop.outcome)]
    decision = DECISION_OF[outcome]
    lo, hi = float(a.cs.lower[stop]), float(a.cs.upper[stop])
    mean = float(a.mean[stop])
    half = float(a.states.half_width[stop])
    rel_me = float(a.states.rel_me[stop])
    used = a.scores[:n_used]
    variance = float(np.var(a.estimand[:n_used], ddof=1)) if n_used > 1 else 0.0
    n_clipped = int(np.count_nonzero(np.clip(used, knobs["clip_low"], knobs["clip_high"]) != used))
    direction = {"different_higher": "higher", "different_lower": "lower"}.get(outcome)
    e_value = (float(elementary.exp(np.max(a.p_value.log_evalue[:n_used]))) if a.p_value.log_evalue is not None
               else None)
    results = {
        "decision": decision, "reason": _reason(outcome, n_used, lo, hi, mean, half, rel_me, rules),
        "direction": direction, "outcome": outcome, "n_used": n_used, "mean": mean,
        "raw_mean": float(np.mean(used)), "variance": variance, "std_dev": math.sqrt(variance),
        "ci": [lo, hi], "confidence_level": 1.0 - knobs["alpha"], "half_width": half, "rel_me": rel_me,
        "p_value": float(a.p_value.p[stop]), "e_value": e_value,
    }
    clip_statement = (f"scores are assumed to lie in [{_num(knobs['clip_low'])}, {_num(knobs['clip_high'])}]; "
                      "values outside are clipped and the estimand is the mean of the clipped scores"
                      if a.bounded else "no bound is assumed; scores are used unclipped")
    outputs = {
        "results": results,
        "method": {"name": a.cs.method, "validity": a.cs.validity, "alpha": knobs["alpha"],
                   "parameters": dict(a.cs.parameters), "p_value": a.p_value.kind},
        "clip": {"applies": a.bounded, "low": knobs["clip_low"], "high": knobs["clip_high"],
                 "assumption": clip_statement, "n_clipped": n_clipped if a.bounded else 0,
                 "n_outside_range": n_clipped},
        "sequence": {"stopping_time": n_used, "checks": int(np.count_nonzero(a.states.checked[: stop + 1])),
                     "check_every": knobs["check_every"], "observations_available": int(a.scores.size),
                     "lower": lo, "upper": hi, "trajectory": "one sequential_check decision per check in the ledger"},
        "config": {
            "alpha": knobs["alpha"], "rel_margin_target": knobs.get("rel_margin_target"),
            "min_effect_floor": knobs["min_effect_floor"], "method": knobs["method"], "n_min": knobs["n_min"],
            "n_max": knobs["n_max"], "batch_size": knobs["batch_size"],
            "positions_per_prompt": knobs["positions_per_prompt"], "equivalence_band": knobs.get("equivalence_band"),
            "min_effect": knobs.get("min_effect"), "delta_star": rules.delta_star,
            "early_stop_threshold": knobs["early_stop_threshold"],
            "identical_model_n_min": knobs["identical_model_n_min"], "check_every": knobs["check_every"],
        },
        "source": source,
        "scores_summary": _summary(used),
        "interpretation": _INTERPRETATION[decision],
    }
    return outputs, outcome


def _validity_rule(validity: str, profile: str) -> Decision:
    outcome = _VALIDITY_RULE.get(profile, _VALIDITY_RULE["release"])[validity]
    return Decision("profile_rule", {"rule": "optional_stopping_validity", "value": validity,
                                     "required": "anytime-valid", "outcome": outcome, "profile": profile})


def run_sequential_diff(ctx: StageContext, kernels: SequentialKernels = KERNELS[-1]) -> StageOutput:
    """The stage at ``kernels.version``."""
    knobs = ctx.knobs
    elementary = kernels.elementary
    _iv_knobs(knobs)
    validity = VALIDITY[knobs["method"]]
    rule = _validity_rule(validity, ctx.profile)
    if rule.detail["outcome"] == "abort":  # before any scoring: a refused method never calls a scorer
        raise ProfileAbort(f"profile '{ctx.profile}' requires an anytime-valid method; '{knobs['method']}' is "
                           f"{validity} (use betting, eb_cs or stitched, or profile dev to compare)",
                           rule="optional_stopping_validity", decisions=(rule,))
    captured: dict[str, Table] = {}
    if knobs.get("scorer") is not None:
        spec = knobs["scorer"]
        source: dict[str, Any] = {"kind": "scorer", "scorer": spec["name"], "metric": spec.get("metric"),
                                  "options": dict(spec.get("options") or {}), "reference": knobs["reference"],
                                  "candidate": knobs["candidate"],
                                  "prompt_draws": "uniform with replacement, stage rng"}
        replay_table = (ctx.captured or {}).get(CAPTURED_SCORES)
        if replay_table is not None:
            scores = _replayed_observations(replay_table)
            table = replay_table
        else:
            scores, table, _ = _scorer_observations(ctx, knobs, elementary)
        captured[CAPTURED_SCORES] = table
        source["prompts_scored"] = int(scores.size)
        source["captured_sha256"] = table.sha256
    else:
        scores, source = _table_observations(ctx.table("input"), knobs)
    if scores.size < knobs["n_min"]:
        raise StageError(f"{scores.size} observation(s) but n_min = {knobs['n_min']}; add data or lower n_min")

    analysis = analyse_scores(scores, knobs, elementary=elementary)
    outputs, outcome = _outputs(analysis, knobs, source, elementary)
    decisions = (rule, *_check_decisions(analysis, outcome))
    return StageOutput(outputs=outputs, decisions=decisions, captured=captured)


# ---------------------------------------------------------------------------------------------- audit


def audit_sequential_diff(outputs: Mapping[str, Any]) -> list[str]:
    """Identities ``certa verify`` re-checks on stored outputs: half-width, rel_me and the decision vs the CS."""
    problems: list[str] = []
    try:
        r, cfg = outputs["results"], outputs["config"]
        lo, hi = (float(v) for v in r["ci"])                # float() also reads "Infinity" / "-Infinity"
        half, rel_me = float(r["half_width"]), float(r["rel_me"])
        if half != max((hi - lo) / 2.0, 0.0):
            problems.append("results.half_width != max((ci[1] - ci[0]) / 2, 0)")
        if rel_me != half / max(abs(r["mean"]), cfg["min_effect_floor"]):
            problems.append("results.rel_me != half_width / max(|mean|, min_effect_floor)")
        if not 1 <= r["n_used"] <= cfg["n_max"]:
            problems.append("results.n_used is outside [1, n_max]")
        delta, band = cfg["delta_star"], cfg["equivalence_band"]
        if r["decision"] == "DIFFERENT" and not (lo > delta or hi < -delta):
            problems.append("decision DIFFERENT but the CS does not clear the minimum effect")
        if r["decision"] == "SAME" and not (band is not None and -band < lo and hi < band):
            problems.append("decision SAME but the CS is not inside the equivalence band")
    except (KeyError, TypeError, ValueError):
        problems.append("results or config is missing ci, half_width, rel_me, mean, n_used or decision")
    return problems


def render_sequential_diff(outputs: Mapping[str, Any]) -> str:
    """A short Markdown view for ``certa show``."""
    r, m, clip = outputs["results"], outputs["method"], outputs["clip"]
    lo, hi = r["ci"]
    lines = [
        "| decision | n used | mean | CS | p (mean = 0) | method | validity |", "|---|---|---|---|---|---|---|",
        f"| {r['decision']} | {r['n_used']} | {r['mean']:.6g} | [{lo:.6g}, {hi:.6g}] | {r['p_value']:.4g} | "
        f"{m['name']} | {m['validity']} |", "", r["reason"],
    ]
    if clip["applies"]:
        lines.append(f"Clip range [{clip['low']}, {clip['high']}] (assumption); clipped scores: {clip['n_clipped']}.")
    return "\n".join(lines)


SUMMARY = "Sequential DIFFERENT/IDENTICAL/SAME/UNDECIDED decision on anytime-valid confidence sequences (seed 000)."


def diff_stage(kernels: SequentialKernels) -> StageType:
    """``sequential.diff`` at ``kernels.version``."""
    return StageType(
        name="sequential.diff",
        version=kernels.version,
        input_knobs=("input", "reference", "candidate"),
        run=lambda ctx: run_sequential_diff(ctx, kernels),
        summary=SUMMARY,
        render_markdown=render_sequential_diff,
        audit_checks=audit_sequential_diff,
        changes=kernels.changes,
    )


STAGES = tuple(diff_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
