"""Stage ``conformal.monitor``: check a new labelled test table against a recorded ``conformal.pac_report``.

The recorded report is read from the ledger (``report_run``: run id, ``report_stage``: its stage id)
through the read-only ``LedgerReader``; without ``report_run`` the report is an earlier
``conformal.pac_report`` stage of the same run. The recorded Mondrian thresholds are applied to the
test table (s_c = 1 - p_c, class c in the set iff s_c <= q_c), and each of the 12 certified rates
(singleton, doublet, abstention, error given singleton; marginal and per class) is compared with its
bound: inside or outside.

``compare_to``:

* ``realised_size`` (default): each bound is recomputed from its recorded inputs (the two LOO counts
  and denominators, method, level, inflation factor) for the realised denominator of the test table (its size, its
  class counts, its singleton counts). This is the statement the report makes for a test set of that
  size; the certified bounds were for the planned ``test_size`` and plug-in class sizes.
* ``certified``: the recorded bounds as they are.

Both comparisons are reported; ``all_inside`` follows ``compare_to``. Per-class coverage is reported
with the one-sided binomial p-value P(Binomial(n_c, alpha_c) >= misses) of "coverage >= 1 - alpha_c"
(informational: the PAC guarantee is about the true coverage, which a finite test set only estimates).

Versions (``KERNELS``, oldest first): 1.0.0 computes each coverage target 1 - alpha_c in floating point and
recomputes a bound at its recorded level with risk ``1.0 - level``; 1.1.0 computes the target exactly on
alpha_c's decimal value (rounded once) and recomputes a bound at the risk the report recorded
(``conformal.pac_report`` 1.1.0 records it), or at ``1.0 - level`` for a 1.0.0 report, which computed its
bounds so: each report version's bounds are recomputed with that version's own arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from certa.engine.foundation.errors import StageError
from certa.engine.core.stats.kernels.lazy_scipy import stats
from certa.engine.core.stats.conformal.mondrian import prediction_sets, summarise_sets
from certa.engine.core.stats.conformal.ssbc import exact_fraction
from certa.engine.core.stages.base import Decision, LedgerReferences, StageContext, StageOutput, StageType
from certa.engine.core.stages.conformal import (RATE_METRICS, SCOPES, float_number, load_calibration, loo_envelope_bounds, metric_counts,
                        threshold_from_json)

__all__ = ["STAGE", "STAGES", "KERNELS", "MonitorKernels"]


def _risk_from_level(recorded: Mapping[str, Any]) -> None:
    """1.0.0: no risk of its own; the kernels take 1.0 - level (what a 1.0.0 report computed its bounds at)."""
    return None


def _recorded_risk(recorded: Mapping[str, Any]) -> float | None:
    """1.1.0: the risk the report recorded with the bound (``conformal.pac_report`` 1.1.0), else None (a 1.0.0
    report: 1.0.0 - level, as it computed)."""
    return recorded.get("risk")


@dataclass(frozen=True)
class MonitorKernels:
    """What one version of ``conformal.monitor`` computes with: ``number`` (as ``PacReportKernels.number``) for
    the coverage targets 1 - alpha_c, ``bound_risk`` the risk a recorded bound is recomputed at, and what
    changed."""

    version: str
    number: Callable[[float], float | Fraction]
    bound_risk: Callable[[Mapping[str, Any]], float | None]
    changes: str


KERNELS: tuple[MonitorKernels, ...] = (
    MonitorKernels(version="1.0.0", number=float_number, bound_risk=_risk_from_level,
                   changes="first version (certa 0.1.0)"),
    MonitorKernels(
        version="1.1.0", number=exact_fraction, bound_risk=_recorded_risk,
        changes="certa 0.6.0: coverage targets 1 - alpha_c exact (rounded once); realised-size bounds recomputed "
                "at the risk a conformal.pac_report 1.1.0 recorded (1.0 - level for a 1.0.0 report, as it "
                "computed them)"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""

REPORT_KEYS = ("calibration_result", "parameters", "pac_bounds_marginal", "pac_bounds_class_0", "pac_bounds_class_1")


def _is_report(outputs: Any) -> bool:
    return isinstance(outputs, Mapping) and all(key in outputs for key in REPORT_KEYS)


def _find_report(stages: Mapping[str, Any], stage_id: str | None, where: str) -> tuple[str, Mapping[str, Any]]:
    if stage_id is not None:
        if stage_id not in stages:
            raise StageError(f"{where} has no stage '{stage_id}' (stages: {', '.join(stages) or 'none'}); "
                             "set report_stage to the id of its conformal.pac_report stage")
        if not _is_report(stages[stage_id]):
            raise StageError(f"stage '{stage_id}' of {where} is not a conformal.pac_report (its outputs lack "
                             f"{', '.join(REPORT_KEYS)})")
        return stage_id, stages[stage_id]
    found = [sid for sid, out in stages.items() if _is_report(out)]
    if len(found) != 1:
        raise StageError(f"{where} has {len(found)} conformal.pac_report stages ({', '.join(found) or 'none'}); "
                         "set report_stage to the one to monitor")
    return found[0], stages[found[0]]


def monitored_run(knobs: Mapping[str, Any]) -> LedgerReferences:
    """The recorded run whose report this stage monitors (``report_run``), if it names one."""
    run_id = knobs.get("report_run")
    return LedgerReferences(runs=(run_id,) if isinstance(run_id, str) else ())


def _load_report(ctx: StageContext) -> tuple[dict[str, Any], Mapping[str, Any]]:
    run_id, stage_id = ctx.knobs["report_run"], ctx.knobs["report_stage"]
    if run_id is None:
        stages = dict(ctx.upstream)
        sid, report = _find_report(stages, stage_id, "this run (no report_run given)")
        return {"run_id": None, "stage_id": sid, "source": "this_run"}, report
    if ctx.ledger is None:
        raise StageError(f"conformal.monitor reads the recorded report of run '{run_id}' from the ledger, but this "
                         "run has no ledger; run it with a ledger (the one that recorded the report), or drop "
                         "report_run and monitor a conformal.pac_report stage of the same spec")
    certificate = ctx.ledger.certificate(run_id)
    try:
        stages = certificate["content"]["stages"]
    except (KeyError, TypeError):
        raise StageError(f"the certificate of run '{run_id}' has no content.stages; it is not a certa "
                         "run certificate") from None
    sid, report = _find_report(stages, stage_id, f"run '{run_id}'")
    return {"run_id": run_id, "stage_id": sid, "source": "ledger",
            "content_sha256": certificate["content_sha256"]}, report


def _realised_denominators(counts) -> dict[str, int]:
    return {"singleton": counts.n, "doublet": counts.n, "abstention": counts.n,
            "error_given_singleton": counts.singleton}


def run_monitor(ctx: StageContext, kernels: MonitorKernels = KERNELS[-1]) -> StageOutput:
    knobs = ctx.knobs
    source, report = _load_report(ctx)
    data = load_calibration(ctx.table("input"), knobs["columns"])
    cal = report["calibration_result"]
    thresholds = [threshold_from_json(cal[f"class_{c}"]) for c in (0, 1)]
    alphas = [float(cal[f"class_{c}"]["alpha_target"]) for c in (0, 1)]
    include0, include1 = prediction_sets(data.s0, data.s1, thresholds[0], thresholds[1])
    summary = summarise_sets(data.labels, include0, include1)
    scopes = {"marginal": summary.marginal, "class_0": summary.class_0, "class_1": summary.class_1}

    compare_to = knobs["compare_to"]
    metrics: dict[str, dict[str, Any]] = {}
    outside: list[str] = []
    not_evaluable: list[str] = []
    for scope in SCOPES:
        block = report[f"pac_bounds_{scope}"]
        counts = scopes[scope]
        denominators = _realised_denominators(counts)
        metrics[scope] = {}
        for metric in RATE_METRICS:
            recorded = block[metric]
            count, denom = metric_counts(counts, metric)
            entry: dict[str, Any] = {"count": count, "n": denom, "rate": count / denom if denom else None,
                                     "certified": [recorded["lower"], recorded["upper"]],
                                     "certified_test_size": recorded["test_size"]}
            if denom == 0:
                entry.update(inside_certified=None, realised_size=None, inside_realised_size=None, inside=None)
                not_evaluable.append(f"{scope}.{metric}")
                metrics[scope][metric] = entry
                continue
            rate = count / denom
            entry["inside_certified"] = bool(recorded["lower"] <= rate <= recorded["upper"])
            if recorded["vacuous"]:
                lo, hi = 0.0, 1.0
            else:
                b = loo_envelope_bounds({**recorded, "test_size": denominators[metric]}, recorded["level"],
                                        recorded["method"], recorded["inflation_factor"],
                                        risk=kernels.bound_risk(recorded))
                lo, hi = float(b.lower[0]), float(b.upper[0])
            entry["realised_size"] = {"bound": [lo, hi], "test_size": denom, "method": recorded["method"],
                                      "level": recorded["level"]}
            entry["inside_realised_size"] = bool(lo <= rate <= hi)
            entry["inside"] = entry["inside_certified"] if compare_to == "certified" else entry["inside_realised_size"]
            if not entry["inside"]:
                outside.append(f"{scope}.{metric}")
            metrics[scope][metric] = entry

    coverage = {}
    for c in (0, 1):
        counts = scopes[f"class_{c}"]
        misses = counts.n - counts.covered
        coverage[f"class_{c}"] = {
            "n": counts.n, "covered": counts.covered, "rate": counts.covered / counts.n if counts.n else None,
            "target": float(1 - kernels.number(alphas[c])),
            "p_value": float(stats.binom.sf(misses - 1, counts.n, alphas[c])) if counts.n else None,
        }

    evaluated = sum(len(v) for v in metrics.values()) - len(not_evaluable)
    outputs = {
        "source": {**source, "thresholds": {f"class_{c}": cal[f"class_{c}"] for c in (0, 1)},
                   "confidence_level": report["parameters"].get("confidence_level"),
                   "level_per_bound": report["parameters"].get("level_per_bound"),
                   "certified_test_size": report["parameters"].get("test_size"),
                   "upstream_compat": report["parameters"].get("upstream_compat")},
        "compare_to": compare_to,
        "n_test": int(data.labels.size),
        "n_class_0": summary.class_0.n, "n_class_1": summary.class_1.n,
        "metrics": metrics,
        "coverage": coverage,
        "n_evaluated": evaluated,
        "n_outside": len(outside),
        "outside": outside,
        "not_evaluable": not_evaluable,
        "all_inside": not outside,
    }
    decision = Decision("monitor_check", {"run_id": source["run_id"], "stage_id": source["stage_id"],
                                          "compare_to": compare_to, "n_test": int(data.labels.size),
                                          "outside": outside, "not_evaluable": not_evaluable})
    return StageOutput(outputs=outputs, decisions=(decision,))


def monitor_stage(kernels: MonitorKernels) -> StageType:
    """``conformal.monitor`` at ``kernels.version``."""
    return StageType(
        name="conformal.monitor",
        version=kernels.version,
        input_knobs=("input",),
        run=lambda ctx: run_monitor(ctx, kernels),
        summary=("Apply a recorded conformal.pac_report's thresholds to new labelled data; "
                 "realised rates vs certified bounds."),
        ledger_reads=monitored_run,
        presentation="certa.engine.services.presentation.stages.conformal_monitor",
        changes=kernels.changes,
    )


STAGES = tuple(monitor_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
