"""Stage ``conformal.pac_report``: a PAC report for a binary classifier's Mondrian conformal sets (seed 003).

From a calibration table (true ``label`` 0/1 and ``p1``, optionally ``p0``):

1. SSBC per class (``certa.engine.core.stats.conformal.ssbc``): the largest u with P(Beta(n_c+1-u, u) >= 1-alpha_c) >= 1-delta_c,
   k_c = n_c+1-u*, exact integer arithmetic; no qualifying u means the class is always included.
2. Mondrian thresholds q_c = k_c-th smallest class-c score, s_c = 1 - p_c (``certa.engine.core.stats.conformal.mondrian``);
   in-sample summaries of the deployed sets with Clopper-Pearson intervals (``prediction_stats``).
3. Leave-one-out set outcomes with k fixed, O(n log n) (``certa.engine.core.stats.conformal.loo``): the reported
   LOO counts and rates.
4. Prediction bounds for the rates on a future test set of ``test_size`` points
   (``certa.engine.core.stats.conformal.rate_bounds``): singleton, doublet, abstention and error-given-singleton rates,
   marginally and per class (M = 12 bounds), Bonferroni-adjusted if ``use_union_bound``.
   Each bound is the envelope of the bounds from two LOO counts: the k-fixed one, and a "shifted" one in
   which the held-out point's own-class threshold is the (k-1)-th smallest of the others. Why: the
   deployed threshold (k-th of n_c) covers a fresh class-c point with expected probability k/(n_c+1);
   the k-fixed LOO covers k/n_c of the points (optimistic) and the shifted one (k-1)/n_c (pessimistic),
   so the two bracket it. Without the envelope the beta_binomial bounds fall below their nominal
   coverage at small n_c (error given singleton: 0.82 instead of 0.90 at n_c = 30 in
   tests/core/stats/test_conformal_bounds.py's simulation); with it they hold. The two counts differ by at most
   one point per class without ties, so the envelope is barely wider.
5. The joint guarantee: coverage of both classes and all rate bounds hold together with probability
   at least 1 - delta_0 - delta_1 - sum of the bounds' risks (union bound).

Thresholds of +inf (always include) are written as ``threshold: null`` with ``threshold_infinite: true``.

Versions (``KERNELS``, oldest first): each is this module's glue run with a ``PacReportKernels`` record of what
differs. 1.0.0 computes the quantities derived from decimal knobs (1 - gamma, the union-bound level
1 - (1 - gamma)/M, 1 - delta_c, the joint level) in binary floating point, rounding at every step: delta = 0.05
per class and gamma = 0.95 give a joint level of 0.8499999999999999. 1.1.0 computes them in exact rational
arithmetic on the knobs' decimal values (``fractions.Fraction``, ``certa.engine.core.stats.conformal.ssbc.exact_fraction``) and
rounds each once to a double (0.85), passes the risk alpha it computed to the bound kernels (instead of their
``1.0 - level``) and records it in each bound (``risk``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.stats.conformal.loo import loo_summary
from certa.engine.core.stats.conformal.mondrian import (SetCounts, SetSummary, class_threshold, nonconformity_scores, prediction_sets,
                              summarise_sets)
from certa.engine.core.stats.conformal.rate_bounds import (
    METHODS,
    bonferroni_level,
    bound_envelope,
    clopper_pearson,
    prediction_bounds,
    resolve_method,
)
from certa.engine.core.stats.conformal.ssbc import SSBCResult, coverage_risk, exact_fraction, ssbc_correct
from certa.engine.core.tables import Table
from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType

__all__ = ["STAGE", "STAGES", "KERNELS", "PacReportKernels", "RATE_METRICS", "CalibrationData", "load_calibration",
           "threshold_json", "threshold_from_json", "metric_counts", "bound_json", "scope_test_sizes", "SCOPES",
           "loo_bound_rows", "loo_envelope_bounds", "float_number"]

RATE_METRICS = ("singleton", "doublet", "abstention", "error_given_singleton")
SCOPES = ("marginal", "class_0", "class_1")
PROB_SUM_TOLERANCE = 0.01


# --------------------------------------------------------------------------- versions


def float_number(x: float) -> float:
    """1.0.0's arithmetic: a knob stays a binary double, and every derived quantity is rounded at each step."""
    return float(x)


@dataclass(frozen=True)
class PacReportKernels:
    """What one version of ``conformal.pac_report`` computes with.

    ``number`` lifts a decimal knob (or a probability the stage computed) into the arithmetic of the quantities
    derived from it: ``float_number`` (binary floating point) or ``exact_fraction`` (the exact rational of its
    decimal value, rounded once to a double at the end). ``states_risk``: each bound records the risk alpha it
    was computed at (``risk``). ``changes``: what changed against the previous version.
    """

    version: str
    number: Callable[[float], float | Fraction]
    states_risk: bool
    changes: str


KERNELS: tuple[PacReportKernels, ...] = (
    PacReportKernels(version="1.0.0", number=float_number, states_risk=False,
                     changes="first version (certa 0.1.0)"),
    PacReportKernels(
        version="1.1.0", number=exact_fraction, states_risk=True,
        changes="certa 0.6.0: quantities derived from decimal knobs in exact rational arithmetic, rounded once "
                "(parameters.level_per_bound and pac_level_*, each bound's level, joint_guarantee.level and "
                "risk_terms: delta = 0.05 per class at confidence 0.95 gives 0.85, not 0.8499999999999999); the "
                "bounds and the Clopper-Pearson intervals of prediction_stats at the exactly derived risk alpha "
                "(they move where 1.0 - level rounded across a quantile); each bound records its risk"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


@dataclass(frozen=True)
class CalibrationData:
    """Validated labels and class scores of a labelled table."""

    labels: np.ndarray
    s0: np.ndarray
    s1: np.ndarray


def load_calibration(table: Table, columns: Mapping[str, str]) -> CalibrationData:
    """Read and validate ``label`` (0/1), ``p1`` and optional ``p0`` (the stage's ``_iv`` step)."""
    label_col, p0_col, p1_col = columns["label"], columns["p0"], columns["p1"]
    if table.n_rows == 0:
        raise InputError(f"input '{table.name}' has no rows; a conformal stage needs labelled rows")
    labels = table.numeric(label_col)
    bad = np.flatnonzero((labels != 0) & (labels != 1))
    if bad.size:
        row = int(bad[0])
        raise InputError(f"input '{table.name}', column '{label_col}', row {row + 1}: labels must be 0 or 1 "
                         f"(got {float(labels[row])!r}; {bad.size} such row(s))")
    p1 = table.numeric(p1_col)
    probs = {p1_col: p1}
    if table.has(p0_col):
        p0 = table.numeric(p0_col)
        probs[p0_col] = p0
    else:
        p0 = 1.0 - p1
    for col, values in probs.items():
        bad = np.flatnonzero((values < 0) | (values > 1))
        if bad.size:
            row = int(bad[0])
            raise InputError(f"input '{table.name}', column '{col}', row {row + 1}: probabilities must lie in "
                             f"[0, 1] (got {float(values[row])!r}; {bad.size} such row(s))")
    if table.has(p0_col):
        off = np.abs(p0 + p1 - 1.0)
        bad = np.flatnonzero(off > PROB_SUM_TOLERANCE)
        if bad.size:
            row = int(bad[0])
            raise InputError(f"input '{table.name}', row {row + 1}: '{p0_col}' + '{p1_col}' must equal 1 within "
                             f"{PROB_SUM_TOLERANCE} (got {float(p0[row] + p1[row])!r}; {bad.size} such row(s))")
    s0, s1 = nonconformity_scores(p0, p1)
    return CalibrationData(labels=labels.astype(np.int8), s0=s0, s1=s1)


def _per_class(value: Any, name: str) -> tuple[float, float]:
    values = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(values) != 2:
        raise StageError(f"'{name}' must be a number or a list of two numbers (class 0, class 1) (got {value!r})")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 < float(v) < 1.0):
            raise StageError(f"'{name}' must lie strictly between 0 and 1 (got {v!r})")
    return float(values[0]), float(values[1])


def threshold_json(q: float) -> dict[str, Any]:
    """A threshold as JSON: finite float, or ``null`` with ``threshold_infinite: true`` (RFC 8785 has no Infinity)."""
    infinite = bool(np.isinf(q))
    return {"threshold": None if infinite else float(q), "threshold_infinite": infinite}


def threshold_from_json(entry: Mapping[str, Any]) -> float:
    """Inverse of ``threshold_json``."""
    if entry.get("threshold_infinite"):
        return float("inf")
    if entry.get("threshold") is None:
        raise StageError("a recorded threshold is null but not flagged threshold_infinite; "
                         "the certificate is malformed")
    return float(entry["threshold"])


def metric_counts(summary_scope: SetCounts, metric: str) -> tuple[int, int]:
    """(count, denominator) of a rate metric in one scope's set counts."""
    if metric == "error_given_singleton":
        return summary_scope.singleton_error, summary_scope.singleton
    return getattr(summary_scope, metric), summary_scope.n


def _ssbc_json(result: SSBCResult, risk: float) -> dict[str, Any]:
    out = asdict(result)
    out["alpha_corrected_exact"] = f"{result.u_star}/{result.n + 1}"
    out["coverage_risk"] = risk
    return out


def _rate(count: int, n: int) -> float | None:
    return count / n if n else None


def _stats_json(counts: SetCounts, level: float, risk: float, marginal: bool) -> dict[str, Any]:
    names = ["singleton", "doublet", "abstention", "covered"]
    if marginal:
        names += ["singleton_pred_0", "singleton_pred_1"]
    out: dict[str, Any] = {"n": counts.n}
    values = [getattr(counts, name) for name in names]
    lower, upper = clopper_pearson(values, counts.n, level, risk=risk)
    for i, name in enumerate(names):
        out[name] = {"count": values[i], "rate": _rate(values[i], counts.n),
                     "ci": [float(lower[i]), float(upper[i])]}
    lo, hi = clopper_pearson(counts.singleton_error, counts.singleton, level, risk=risk)
    out["error_given_singleton"] = {"count": counts.singleton_error, "n": counts.singleton,
                                    "rate": _rate(counts.singleton_error, counts.singleton),
                                    "ci": [float(lo), float(hi)]}
    return out


def _loo_json(counts: SetCounts) -> dict[str, Any]:
    return {
        "n": counts.n,
        "counts": {name: getattr(counts, name) for name in
                   ("singleton", "doublet", "abstention", "singleton_correct", "singleton_error", "covered")},
        "rates": {"singleton": _rate(counts.singleton, counts.n), "doublet": _rate(counts.doublet, counts.n),
                  "abstention": _rate(counts.abstention, counts.n),
                  "error_given_singleton": _rate(counts.singleton_error, counts.singleton)},
    }


def bound_json(row: Mapping[str, int], bounds, i: int, requested: str, inflation_factor: float) -> dict[str, Any]:
    """One bound's JSON: the estimate, the inputs (both LOO counts, test size), method, level and flags."""
    vacuous = bool(bounds.vacuous[i])
    count, n = row["count"], row["n"]
    return {
        "lower": float(bounds.lower[i]), "upper": float(bounds.upper[i]),
        "estimate": _rate(count, n), "count": int(count), "n": int(n),
        "count_shifted": int(row["count_shifted"]), "n_shifted": int(row["n_shifted"]),
        "test_size": int(row["test_size"]),
        "method": "none_no_calibration_events" if vacuous else bounds.method, "requested_method": requested,
        "level": bounds.level, "inflation_factor": inflation_factor,
        "one_sided": bool(not vacuous and (bounds.lower[i] == 0.0 or bounds.upper[i] == 1.0)),
        "fallback": "exact" if bool(bounds.fallback[i]) else None,
        "vacuous": vacuous,
    }


def loo_envelope_bounds(rows: Sequence[Mapping[str, Any]] | Mapping[str, Any], level: float, method: str,
                        inflation_factor: float, *, risk: float | None = None):
    """Bounds from the k-fixed and the shifted LOO counts, and their envelope (see the module docstring), at
    ``level`` with risk alpha = ``risk`` (None: 1.0 - level, as 1.0.0 computed it)."""
    if isinstance(rows, Mapping):
        rows = [rows]
    get = lambda key: np.array([r[key] for r in rows], dtype=np.int64)  # noqa: E731
    fixed = prediction_bounds(get("count"), get("n"), get("test_size"), level, method, inflation_factor, risk=risk)
    shifted = prediction_bounds(get("count_shifted"), get("n_shifted"), get("test_size"), level, method,
                                inflation_factor, risk=risk)
    return bound_envelope(fixed, shifted)


def scope_test_sizes(test_size: int, n: int, scope_counts: SetCounts, marginal: bool) -> dict[str, int]:
    """Plug-in test sizes: N for marginal rates, max(1, floor(N n_c/n)) per class; error-given-singleton
    rates use max(1, floor(N_scope n_singleton/n_scope)) (exact integer arithmetic)."""
    n_scope = test_size if marginal else max(1, test_size * scope_counts.n // n)
    n_single = max(1, n_scope * scope_counts.singleton // scope_counts.n)
    return {"singleton": n_scope, "doublet": n_scope, "abstention": n_scope, "error_given_singleton": n_single}


def loo_bound_rows(labels: np.ndarray, s0: np.ndarray, s1: np.ndarray, k0: int, k1: int, test_size: int, *,
                   clamp: bool = False) -> tuple[SetSummary, SetSummary, list[dict[str, Any]]]:
    """The k-fixed and shifted LOO summaries and one row per bounded rate (scope, metric, both counts,
    plug-in test size), in the order of ``SCOPES`` x ``RATE_METRICS``."""
    loo = loo_summary(labels, s0, s1, k0, k1, clamp=clamp)
    loo_shifted = loo_summary(labels, s0, s1, k0, k1, clamp=clamp, own_offset=1)
    rows: list[dict[str, Any]] = []
    for scope in SCOPES:
        counts, shifted = getattr(loo, scope), getattr(loo_shifted, scope)
        sizes = scope_test_sizes(test_size, int(labels.size), counts, scope == "marginal")
        for metric in RATE_METRICS:
            count, denom = metric_counts(counts, metric)
            count_s, denom_s = metric_counts(shifted, metric)
            rows.append({"scope": scope, "metric": metric, "count": count, "n": denom, "count_shifted": count_s,
                         "n_shifted": denom_s, "test_size": sizes[metric]})
    return loo, loo_shifted, rows


def run_pac_report(ctx: StageContext, kernels: PacReportKernels = KERNELS[-1]) -> StageOutput:
    knobs = ctx.knobs
    num = kernels.number
    data = load_calibration(ctx.table("input"), knobs["columns"])
    alphas = _per_class(knobs["alpha"], "alpha")
    deltas = _per_class(knobs["delta"], "delta")
    gamma = float(knobs["confidence_level"])
    requested = knobs["prediction_method"]
    compat = bool(knobs["upstream_compat"])
    mode, m = knobs["mode"], knobs["m"]
    inflation = 1.0 if knobs["loo_inflation_factor"] is None else float(knobs["loo_inflation_factor"])
    n = int(data.labels.size)
    test_size = n if knobs["test_size"] is None else int(knobs["test_size"])
    decisions: list[Decision] = []

    # 1-2. SSBC and Mondrian thresholds per class
    ssbc: list[SSBCResult] = []
    thresholds: list[float] = []
    risks: list[float] = []
    for c, scores in ((0, data.s0), (1, data.s1)):
        class_scores = np.sort(scores[data.labels == c])
        if class_scores.size == 0:
            raise StageError(f"class {c} has no calibration points in input '{knobs['input']}'; SSBC needs at least "
                             "one labelled point per class")
        try:
            result = ssbc_correct(alphas[c], int(class_scores.size), deltas[c], mode=mode, m=m, upstream_compat=compat)
        except ValueError as exc:
            raise StageError(f"class {c}: {exc}") from None
        ssbc.append(result)
        thresholds.append(float(class_threshold(class_scores, result.k, clamp=compat)))
        deployed_k = min(result.k, result.n) if compat else result.k
        risks.append(coverage_risk(alphas[c], result.n, deployed_k, mode=mode, m=result.m))
        if result.always_include:
            decisions.append(Decision("degenerate_fallback", {
                "class": c, "rule": "always_include", "n": result.n, "alpha": alphas[c], "delta": deltas[c],
                "reason": "no u in [1, floor(alpha (n+1))] meets the PAC rule; the class is in every prediction set"}))
        if compat and result.u_star == 0:
            decisions.append(Decision("upstream_compat", {
                "class": c, "rule": "clamped_threshold", "coverage_risk": risks[c], "delta": deltas[c],
                "reason": "upstream uses the largest score when u*=0; the PAC guarantee does not hold (B1)"}))

    include0, include1 = prediction_sets(data.s0, data.s1, thresholds[0], thresholds[1])
    in_sample = summarise_sets(data.labels, include0, include1)
    loo, loo_shifted, rows = loo_bound_rows(data.labels, data.s0, data.s1, ssbc[0].k, ssbc[1].k, test_size,
                                            clamp=compat)
    pac: dict[str, dict[str, Any]] = {}
    for scope in SCOPES:
        first_row = next(r for r in rows if r["scope"] == scope)
        pac[scope] = {"n_calibration": getattr(loo, scope).n, "test_size": first_row["test_size"],
                      "loo": _loo_json(getattr(loo, scope)), "loo_shifted": _loo_json(getattr(loo_shifted, scope))}

    # 4. prediction bounds, all 12 metrics in one vectorised call per method and LOO variant
    #    level 1 - (1 - gamma)/M (or gamma) and risk 1 - level, in the version's arithmetic, each rounded once
    n_metrics = len(rows)
    union = bool(knobs["use_union_bound"])
    level_exact = bonferroni_level(num(gamma), n_metrics) if union else num(gamma)  # type: ignore[type-var]
    level, risk = float(level_exact), float(1 - level_exact)
    chosen = resolve_method("auto" if requested == "all" else requested)
    bounds = loo_envelope_bounds(rows, level, chosen, inflation, risk=risk)
    comparison = ({method: loo_envelope_bounds(rows, level, method, inflation, risk=risk) for method in METHODS}
                  if requested == "all" else {})

    fallbacks = []
    for i, row in enumerate(rows):
        scope, metric = row["scope"], row["metric"]
        entry = bound_json(row, bounds, i, requested, inflation)
        if kernels.states_risk:
            entry["risk"] = bounds.risk
        if comparison:
            entry["comparison"] = {method: {"lower": float(b.lower[i]), "upper": float(b.upper[i]),
                                            "width": float(b.upper[i] - b.lower[i])}
                                   for method, b in comparison.items()}
        if entry["fallback"]:
            fallbacks.append(f"{scope}.{metric}")
        pac[scope][metric] = entry
    if fallbacks:
        decisions.append(Decision("zero_count_fallback", {
            "metrics": fallbacks, "method": chosen, "replacement": "exact",
            "reason": "a normal-approximation bound collapses at a zero or full count"}))
    if requested in ("auto", "all"):
        decisions.append(Decision("method_selection", {"requested": requested, "selected": chosen,
                                                       "reason": "exact conditional prediction limits: a finite-sample "
                                                                 "guarantee, narrower than exact and hoeffding"}))
    decisions.append(Decision("union_bound", {"enabled": bool(knobs["use_union_bound"]), "n_metrics": n_metrics,
                                              "confidence_level": gamma, "level_per_bound": level}))

    # 5. the joint guarantee (union bound over coverage events and non-vacuous rate bounds):
    #    1 - t_0 - t_1 - (risk of each non-vacuous bound), t_c = max(delta_c, coverage risk), in the version's
    #    arithmetic, each reported number rounded once
    per_bound_risk = (1 - num(gamma)) / n_metrics if union else 1 - num(gamma)
    bound_risk_exact = per_bound_risk * int(np.count_nonzero(~bounds.vacuous))
    terms_exact = [num(0.0) if ssbc[c].always_include else max(num(deltas[c]), num(risks[c])) for c in (0, 1)]
    joint = float(max(num(0.0), 1 - terms_exact[0] - terms_exact[1] - bound_risk_exact))
    coverage_terms, bound_risk = [float(t) for t in terms_exact], float(bound_risk_exact)
    coverage_event = ("class-conditional coverage >= 1 - alpha_c" if mode == "beta" else
                      f"at least ceil((1 - alpha_c) m) of the next m = {ssbc[0].m}/{ssbc[1].m} class-c points covered")
    joint_guarantee = {
        "level": joint,
        "risk_terms": {"coverage_class_0": coverage_terms[0], "coverage_class_1": coverage_terms[1],
                       "rate_bounds": bound_risk},
        "statement": (f"With probability at least {joint:.6g} over the calibration draw and a future test set of "
                      f"{test_size} points, all of these hold together: ({coverage_event}) for class 0 "
                      f"(alpha = {alphas[0]}) "
                      f"and class 1 (alpha = {alphas[1]}), and every non-vacuous rate in pac_bounds_* falls inside "
                      f"its bound (union bound: 1 - {coverage_terms[0]:.6g} - {coverage_terms[1]:.6g} - "
                      f"{bound_risk:.6g})."),
        "assumptions": ("Calibration and test points are exchangeable (i.i.d.) draws. The rate bounds treat the "
                        "leave-one-out counts as binomial counts and per-class test sizes as plug-in values "
                        "floor(N n_c / n); their coverage is checked by simulation, not proven."),
        "upstream_compat": compat,
    }

    calibration_result: dict[str, Any] = {}
    for c in (0, 1):
        r = ssbc[c]
        calibration_result[f"class_{c}"] = {
            "n": r.n, "alpha_target": alphas[c], "delta": deltas[c], "alpha_corrected": r.alpha_corrected,
            "alpha_corrected_exact": f"{r.u_star}/{r.n + 1}", "u_star": r.u_star, "k": r.k,
            "always_include": r.always_include, **threshold_json(thresholds[c]),
        }
    calibration_result["score"] = "s_c = 1 - p_c; class c is in the set iff s_c <= threshold_c"

    ci_risk = float(1 - num(gamma))
    prediction_stats = {
        "class_0": _stats_json(in_sample.class_0, gamma, ci_risk, False),
        "class_1": _stats_json(in_sample.class_1, gamma, ci_risk, False),
        "marginal": _stats_json(in_sample.marginal, gamma, ci_risk, True),
        "ci_method": "clopper_pearson", "ci_level": gamma,
        "sets": "deployed Mondrian sets, in-sample on the calibration data",
    }
    parameters = {
        "alpha_target": {"class_0": alphas[0], "class_1": alphas[1]},
        "alpha_target_exact": {f"class_{c}": str(exact_fraction(alphas[c])) for c in (0, 1)},
        "delta": {"class_0": deltas[0], "class_1": deltas[1]},
        "test_size": test_size, "confidence_level": gamma, "level_per_bound": level,
        "prediction_method": requested, "prediction_method_used": chosen,
        "use_union_bound": bool(knobs["use_union_bound"]), "n_metrics": n_metrics,
        "mode": mode, "m": {"class_0": ssbc[0].m, "class_1": ssbc[1].m},
        "loo_inflation_factor": inflation, "upstream_compat": compat,
        "pac_level_class_0": float(1 - num(deltas[0])), "pac_level_class_1": float(1 - num(deltas[1])),
        "pac_level_marginal": float((1 - num(deltas[0])) * (1 - num(deltas[1]))),
        "n_calibration": n, "n_class_0": ssbc[0].n, "n_class_1": ssbc[1].n,
    }
    outputs = {
        "ssbc_class_0": _ssbc_json(ssbc[0], risks[0]),
        "ssbc_class_1": _ssbc_json(ssbc[1], risks[1]),
        "pac_bounds_marginal": pac["marginal"],
        "pac_bounds_class_0": pac["class_0"],
        "pac_bounds_class_1": pac["class_1"],
        "calibration_result": calibration_result,
        "prediction_stats": prediction_stats,
        "parameters": parameters,
        "joint_guarantee": joint_guarantee,
    }
    return StageOutput(outputs=outputs, decisions=tuple(decisions))


def audit_pac_report(outputs: Mapping[str, Any]) -> list[str]:
    """Identities ``certa verify`` re-checks: each class's SSBC correction recomputed from its recorded
    inputs (α, n, δ, mode, m) gives the recorded u*, k and always-include flag, and the calibration
    result deploys those same k."""
    problems = []
    try:
        for c in (0, 1):
            block = outputs[f"ssbc_class_{c}"]
            again = ssbc_correct(block["alpha_target"], block["n"], block["delta"], mode=block["mode"],
                                 m=block["m"], upstream_compat=block["upstream_compat"])
            for key in ("u_star", "k", "always_include"):
                if block[key] != getattr(again, key):
                    problems.append(f"ssbc_class_{c}.{key} is {block[key]!r} but SSBC recomputes {getattr(again, key)!r}")
            deployed = outputs["calibration_result"][f"class_{c}"]
            if (deployed["k"], deployed["u_star"]) != (block["k"], block["u_star"]):
                problems.append(f"calibration_result.class_{c} does not deploy the certified k and u*")
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"PAC report outputs are incomplete or malformed ({type(exc).__name__}: {exc})")
    return problems


def pac_report_stage(kernels: PacReportKernels) -> StageType:
    """``conformal.pac_report`` at ``kernels.version``."""
    return StageType(
        name="conformal.pac_report",
        version=kernels.version,
        input_knobs=("input",),
        run=lambda ctx: run_pac_report(ctx, kernels),
        summary="PAC report for binary Mondrian conformal sets: exact SSBC, LOO rates, prediction bounds (seed 003).",
        presentation="certa.engine.services.presentation.stages.conformal",
        audit_checks=audit_pac_report,
        changes=kernels.changes,
    )


STAGES = tuple(pac_report_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
