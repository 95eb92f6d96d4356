"""Stage types ``conformal.pac_report`` and ``conformal.monitor``: report structure, JSON, input
validation, the joint guarantee, the upstream-compat path, monitoring through a (fake) ledger, and the
example spec end to end."""

from __future__ import annotations

import json
import math
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from certa.engine import run
from certa.engine.services.audit import replay
from certa.engine.foundation.canonical import canonical_bytes, canonical_sha256, to_jsonable
from certa.engine.foundation.errors import InputError, SpecError, StageError
from certa.engine.core.spec import fill_defaults, load_plan
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import StageContext
from certa.engine.services.presentation.stages import markdown_of
from certa.engine.core.stats.conformal.mondrian import nonconformity_scores
from certa.engine.core.stats.conformal.rate_bounds import METHODS, clopper_pearson
from certa.engine.core.stats.conformal.ssbc import ssbc_correct
from certa.engine.core.tables import table_from_columns
from certa.schemas import load_schema

ROOT = Path(__file__).resolve().parents[3]
PAC = REGISTRY["conformal.pac_report"]
MONITOR = REGISTRY["conformal.monitor"]
PAC_1_0_0 = REGISTRY.get("conformal.pac_report", "1.0.0")


def labelled(n: int, seed: int, *, share1: float = 0.3, flip: float = 0.0, n1: int | None = None) -> dict:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < share1).astype(int)
    if n1 is not None:
        labels = np.r_[np.zeros(n - n1, int), np.ones(n1, int)]
    p1 = np.where(labels == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))
    if flip:
        labels = np.where(rng.random(n) < flip, 1 - labels, labels)
    return {"label": labels, "p1": np.round(p1, 4)}


def knobs_for(stage, **with_):
    return fill_defaults(with_, load_schema(stage.schema_file))


def run_pac(columns: dict, ledger=None, stage=PAC, **with_):
    ctx = StageContext(stage_id="pac", knobs=knobs_for(stage, input="cal", **with_),
                       tables={"cal": table_from_columns("cal", columns)}, rng=np.random.default_rng(1),
                       profile="dev", upstream={}, seed={}, ledger=ledger)
    return stage.run(ctx)


def run_monitor(columns: dict, *, ledger=None, upstream=None, **with_):
    ctx = StageContext(stage_id="mon", knobs=knobs_for(MONITOR, input="test", **with_),
                       tables={"test": table_from_columns("test", columns)}, rng=np.random.default_rng(1),
                       profile="dev", upstream=upstream or {}, seed={}, ledger=ledger)
    return MONITOR.run(ctx)


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


# ----------------------------------------------------------------------------- pac_report


def test_report_has_the_seed_keys_and_is_canonical_json():
    out = run_pac(labelled(400, 1), test_size=1000).outputs
    for key in ("ssbc_class_0", "ssbc_class_1", "pac_bounds_marginal", "pac_bounds_class_0", "pac_bounds_class_1",
                "calibration_result", "prediction_stats", "parameters", "joint_guarantee"):
        assert key in out
    as_json = json.loads(canonical_bytes(out))
    assert not {"NaN", "Infinity", "-Infinity"} & set(_strings(as_json))
    assert "timestamp" not in json.dumps(as_json)
    for scope in ("marginal", "class_0", "class_1"):
        for metric in ("singleton", "doublet", "abstention", "error_given_singleton"):
            bound = out[f"pac_bounds_{scope}"][metric]
            assert 0.0 <= bound["lower"] <= bound["upper"] <= 1.0
            for field in ("method", "level", "count", "n", "count_shifted", "n_shifted", "test_size", "estimate"):
                assert field in bound


def test_thresholds_are_the_kth_smallest_class_scores():
    cols = labelled(300, 2)
    out = run_pac(cols, alpha=[0.1, 0.2], delta=[0.05, 0.1]).outputs
    labels = cols["label"]
    s0, s1 = nonconformity_scores(1 - cols["p1"], cols["p1"])
    for c, s, alpha, delta in ((0, s0, 0.1, 0.05), (1, s1, 0.2, 0.1)):
        scores = np.sort(s[labels == c])
        ssbc = ssbc_correct(alpha, scores.size, delta)
        entry = out["calibration_result"][f"class_{c}"]
        assert (entry["k"], entry["u_star"]) == (ssbc.k, ssbc.u_star)
        assert entry["threshold"] == scores[ssbc.k - 1] and entry["threshold_infinite"] is False
        assert entry["alpha_corrected_exact"] == f"{ssbc.u_star}/{scores.size + 1}"


def test_small_class_is_always_included_with_null_threshold():
    cols = labelled(208, 3, n1=8)
    result = run_pac(cols, test_size=500)
    out = result.outputs
    entry = out["calibration_result"]["class_1"]
    assert entry["threshold"] is None and entry["threshold_infinite"] is True and entry["always_include"] is True
    assert entry["k"] == 9 and out["ssbc_class_1"]["u_star"] == 0
    assert any(d.kind == "degenerate_fallback" and d.detail["class"] == 1 for d in result.decisions)
    # label 1 is in every set: no class-1 point can be a wrong singleton or an abstention
    assert out["prediction_stats"]["class_1"]["covered"]["count"] == 8
    assert out["joint_guarantee"]["risk_terms"]["coverage_class_1"] == 0.0
    json.loads(canonical_bytes(out))


@pytest.mark.parametrize("version, risk", [("1.0.0", None), ("1.1.0", 0.1)])
def test_prediction_stats_are_clopper_pearson_on_the_deployed_sets(version, risk):
    """At confidence 0.9: 1.0.0 at alpha = 1.0 - 0.9 (0.09999999999999998), 1.1.0 at the exact 0.1."""
    out = run_pac(labelled(500, 4), stage=REGISTRY.get("conformal.pac_report", version), confidence_level=0.9).outputs
    stats_ = out["prediction_stats"]
    for name in ("singleton", "doublet", "abstention", "covered"):
        assert stats_["marginal"][name]["count"] == stats_["class_0"][name]["count"] + stats_["class_1"][name]["count"]
    m = stats_["marginal"]
    assert m["singleton"]["count"] + m["doublet"]["count"] + m["abstention"]["count"] == m["n"] == 500
    lo, hi = clopper_pearson(m["doublet"]["count"], 500, 0.9, risk=risk)
    assert m["doublet"]["ci"] == [float(lo), float(hi)]
    assert stats_["ci_level"] == 0.9


def test_stage_versions_newest_last():
    from certa.engine.core.stages import conformal, conformal_monitor

    for module in (conformal, conformal_monitor):
        assert [s.version for s in module.STAGES] == [k.version for k in module.KERNELS] == ["1.0.0", "1.1.0"]
        assert module.STAGE is module.STAGES[-1] and all(s.changes for s in module.STAGES)
    assert PAC.version == MONITOR.version == "1.1.0"


def test_union_bound_and_joint_guarantee_arithmetic_is_exact():
    """1.1.0: every level and risk derived from the decimal knobs is the exact rational, rounded once."""
    cols = labelled(600, 5)
    out = run_pac(cols, test_size=1000, confidence_level=0.95, delta=[0.05, 0.1]).outputs
    params, joint = out["parameters"], out["joint_guarantee"]
    per_bound = Fraction("0.05") / 12
    assert params["n_metrics"] == 12 and params["level_per_bound"] == float(1 - per_bound)
    assert out["pac_bounds_marginal"]["singleton"]["level"] == params["level_per_bound"]
    assert out["pac_bounds_marginal"]["singleton"]["risk"] == float(per_bound)
    vacuous = sum(out[f"pac_bounds_{s}"][m]["vacuous"] for s in ("marginal", "class_0", "class_1")
                  for m in ("singleton", "doublet", "abstention", "error_given_singleton"))
    assert joint["level"] == float(1 - Fraction("0.05") - Fraction("0.1") - per_bound * (12 - vacuous))
    assert joint["risk_terms"]["coverage_class_0"] == 0.05
    separate = run_pac(cols, test_size=1000, use_union_bound=False).outputs
    assert separate["parameters"]["level_per_bound"] == 0.95
    assert separate["joint_guarantee"]["level"] == float(1 - Fraction("0.2") - 12 * Fraction("0.05"))
    loose = run_pac(cols, test_size=1000, use_union_bound=False, confidence_level=0.9).outputs
    assert loose["joint_guarantee"]["level"] == 0.0  # 1 - 0.2 - 12 x 0.1 < 0: vacuous, stated as 0


def test_union_bound_and_joint_guarantee_arithmetic_of_1_0_0():
    """1.0.0 (frozen) in floating point: within rounding of the exact values, and no risk recorded."""
    cols = labelled(600, 5)
    out = run_pac(cols, stage=PAC_1_0_0, test_size=1000, confidence_level=0.95,
                  delta=[0.05, 0.1]).outputs
    assert "risk" not in out["pac_bounds_marginal"]["singleton"]
    params, joint = out["parameters"], out["joint_guarantee"]
    assert params["n_metrics"] == 12 and params["level_per_bound"] == pytest.approx(1 - 0.05 / 12)
    assert out["pac_bounds_marginal"]["singleton"]["level"] == params["level_per_bound"]
    vacuous = sum(out[f"pac_bounds_{s}"][m]["vacuous"] for s in ("marginal", "class_0", "class_1")
                  for m in ("singleton", "doublet", "abstention", "error_given_singleton"))
    assert joint["level"] == pytest.approx(1 - 0.05 - 0.1 - 0.05 * (12 - vacuous) / 12)
    assert joint["risk_terms"]["coverage_class_0"] == 0.05
    separate = run_pac(cols, stage=PAC_1_0_0, test_size=1000, use_union_bound=False).outputs
    assert separate["parameters"]["level_per_bound"] == 0.95
    assert separate["joint_guarantee"]["level"] == pytest.approx(1 - 0.2 - 12 * 0.05)
    loose = run_pac(cols, stage=PAC_1_0_0, test_size=1000, use_union_bound=False, confidence_level=0.9).outputs
    assert loose["joint_guarantee"]["level"] == 0.0  # 1 - 0.2 - 12 x 0.1 < 0: vacuous, stated as 0


def test_plug_in_test_sizes_are_integer_floors():
    cols = labelled(500, 6)
    out = run_pac(cols, test_size=777).outputs
    n1 = int(cols["label"].sum())
    block = out["pac_bounds_class_1"]
    assert block["test_size"] == 777 * n1 // 500
    singles = block["loo"]["counts"]["singleton"]
    assert block["error_given_singleton"]["test_size"] == max(1, block["test_size"] * singles // n1)
    assert out["pac_bounds_marginal"]["doublet"]["test_size"] == 777


def test_method_all_compares_every_method_and_uses_auto():
    cols = labelled(400, 7)
    out = run_pac(cols, prediction_method="all").outputs
    auto = run_pac(cols, prediction_method="auto").outputs
    bound = out["pac_bounds_marginal"]["singleton"]
    assert set(bound["comparison"]) == set(METHODS)
    assert bound["method"] == "beta_binomial"
    assert (bound["lower"], bound["upper"]) == (auto["pac_bounds_marginal"]["singleton"]["lower"],
                                                auto["pac_bounds_marginal"]["singleton"]["upper"])
    assert bound["comparison"]["hoeffding"]["width"] >= bound["comparison"]["beta_binomial"]["width"]


def test_zero_count_abstentions_get_a_non_degenerate_bound():
    out = run_pac(labelled(400, 8), prediction_method="analytical", test_size=400).outputs
    bound = out["pac_bounds_marginal"]["abstention"]
    assert bound["count"] == 0 and bound["lower"] == 0.0 and bound["upper"] > 0.0
    assert bound["fallback"] == "exact" and bound["one_sided"] is True


def test_upstream_compat_reproduces_the_clamped_threshold_and_says_so():
    cols = labelled(215, 9, n1=15)
    result = run_pac(cols, upstream_compat=True)
    out = result.outputs
    entry = out["calibration_result"]["class_1"]
    s1 = 1 - cols["p1"][cols["label"] == 1]
    assert entry["threshold_infinite"] is False and entry["threshold"] == s1.max()  # B1
    assert out["parameters"]["upstream_compat"] is True and out["joint_guarantee"]["upstream_compat"] is True
    assert out["joint_guarantee"]["risk_terms"]["coverage_class_1"] == pytest.approx(0.9 ** 15)
    assert any(d.kind == "upstream_compat" for d in result.decisions)
    exact = run_pac(cols).outputs["calibration_result"]["class_1"]
    assert exact["threshold_infinite"] is True
    with pytest.raises(StageError, match="n >= 10"):
        run_pac(labelled(208, 3, n1=8), upstream_compat=True)


@pytest.mark.parametrize("columns, error, message", [
    ({"y": [0, 1], "p1": [0.1, 0.9]}, InputError, "no column 'label'"),
    ({"label": [0, 2], "p1": [0.1, 0.9]}, InputError, r"labels must be 0 or 1 \(got 2\.0;"),
    ({"label": [0, 1], "p1": [0.1, 1.2]}, InputError, r"must lie in \[0, 1\] \(got 1\.2;"),
    ({"label": [0, 1], "p1": [0.1, ""]}, InputError, "missing or not finite"),
    ({"label": [0, 1], "p0": [0.5, 0.2], "p1": [0.1, 0.8]}, InputError, r"must equal 1 within 0.01 \(got 0\.6;"),
    ({"label": [0, 0, 0], "p1": [0.1, 0.2, 0.3]}, StageError, "class 1 has no calibration points"),
])
def test_input_validation_names_the_problem(columns, error, message):
    with pytest.raises(error, match=message):
        run_pac(columns)


def test_p0_column_is_used_when_present():
    cols = labelled(300, 10)
    with_p0 = run_pac({**cols, "p0": np.round(1 - cols["p1"], 4)}).outputs
    assert with_p0["calibration_result"]["class_0"]["k"] == run_pac(cols).outputs["calibration_result"]["class_0"]["k"]


@pytest.mark.parametrize("bad", ["alpha: [0.1]", "alpha: 1.5", "delta: 0", "prediction_method: bayes",
                                 "test_size: 0", "loo_inflation_factor: 0.5", "unknown_knob: 1"])
def test_schema_rejects_bad_knobs(bad):
    spec = textwrap.dedent(f"""\
        certa: 1
        name: t
        seed: 1
        inputs: {{cal: {{path: cal.csv}}}}
        stages:
          - id: pac
            use: conformal.pac_report
            with: {{input: cal, {bad}}}
        """)
    with pytest.raises(SpecError):
        load_plan(spec)


# ----------------------------------------------------------------------------- monitor


class FakeLedger:
    """A LedgerReader holding certificates in memory."""

    def __init__(self, certificates: dict):
        self.certificates = certificates

    def certificate(self, run_id: str) -> dict:
        return self.certificates[run_id]


@pytest.fixture(scope="module")
def recorded():
    outputs = to_jsonable(run_pac(labelled(1200, 11), test_size=2000).outputs)
    content = {"stages": {"pac": outputs, "other": {"x": 1}}}
    return FakeLedger({"run-1": {"content": content, "content_sha256": canonical_sha256(content)}})


def test_monitor_same_distribution_is_inside(recorded):
    out = run_monitor(labelled(2000, 12), ledger=recorded, report_run="run-1", report_stage="pac").outputs
    assert out["all_inside"] is True and out["n_outside"] == 0 and out["n_evaluated"] == 12
    assert out["source"]["content_sha256"] == recorded.certificate("run-1")["content_sha256"]
    assert out["source"] == {**out["source"], "run_id": "run-1", "stage_id": "pac", "source": "ledger"}
    rate = out["metrics"]["marginal"]["singleton"]
    assert rate["n"] == 2000 and rate["rate"] == rate["count"] / 2000
    assert out["coverage"]["class_0"]["target"] == 0.9
    json.loads(canonical_bytes(out))


def test_monitor_detects_a_shift(recorded):
    """Flipping 25% of the labels multiplies wrong singletons: the error rates leave their bounds."""
    result = run_monitor(labelled(2000, 13, flip=0.25), ledger=recorded, report_run="run-1")
    out = result.outputs
    assert out["all_inside"] is False
    assert "marginal.error_given_singleton" in out["outside"]
    assert out["metrics"]["marginal"]["error_given_singleton"]["inside"] is False
    assert out["coverage"]["class_0"]["p_value"] < 1e-6  # coverage well below 0.9 too
    assert result.decisions[0].kind == "monitor_check" and result.decisions[0].detail["outside"] == out["outside"]


def test_monitor_certified_bounds_are_the_recorded_ones(recorded):
    out = run_monitor(labelled(2000, 12), ledger=recorded, report_run="run-1", compare_to="certified").outputs
    report = recorded.certificate("run-1")["content"]["stages"]["pac"]
    m = out["metrics"]["class_1"]["doublet"]
    recorded_bound = report["pac_bounds_class_1"]["doublet"]
    assert m["certified"] == [recorded_bound["lower"], recorded_bound["upper"]]
    assert m["inside"] == m["inside_certified"]


def test_monitor_needs_a_ledger_for_a_run_id():
    with pytest.raises(StageError, match="no ledger"):
        run_monitor(labelled(100, 1), report_run="run-1")


def test_monitor_names_a_missing_or_wrong_stage(recorded):
    with pytest.raises(StageError, match="no stage 'nope'"):
        run_monitor(labelled(100, 1), ledger=recorded, report_run="run-1", report_stage="nope")
    with pytest.raises(StageError, match="is not a conformal.pac_report"):
        run_monitor(labelled(100, 1), ledger=recorded, report_run="run-1", report_stage="other")
    with pytest.raises(StageError, match="0 conformal.pac_report stages"):
        run_monitor(labelled(100, 1))


def test_monitor_reads_an_always_included_threshold():
    outputs = to_jsonable(run_pac(labelled(208, 3, n1=8)).outputs)
    out = run_monitor(labelled(300, 14), upstream={"pac": outputs}).outputs
    assert out["source"]["source"] == "this_run"
    assert out["coverage"]["class_1"]["rate"] == 1.0  # label 1 is in every set


# ----------------------------------------------------------------------------- end to end


def test_example_spec_end_to_end():
    result = run(ROOT / "specs" / "conformal-pac" / "spec.yaml", ledger=None)
    assert result.verdict == "PASS"
    stages = result.certificate["content"]["stages"]
    assert stages["pac"]["joint_guarantee"]["level"] >= 0.7
    assert stages["monitor"]["all_inside"] is True
    assert markdown_of(PAC.name, PAC.version)(stages["pac"]).count("\n") > 10


def test_monitor_run_reads_the_report_from_the_ledger(tmp_path, ledger):
    spec_dir = ROOT / "specs" / "conformal-pac"
    report = run(spec_dir / "spec.yaml", ledger=ledger)
    (tmp_path / "production.csv").write_bytes((spec_dir / "data" / "production.csv").read_bytes())
    spec = tmp_path / "monitor.yaml"
    spec.write_text(textwrap.dedent(f"""\
        certa: 1
        name: triage-classifier-monitor
        seed: 1
        inputs: {{production: {{path: production.csv}}}}
        stages:
          - id: check
            use: conformal.monitor
            with: {{input: production, report_run: {report.run_id}, report_stage: pac}}
        gates:
          - id: inside
            metric: check.all_inside
            equals: true
        """), encoding="utf-8")
    checked = run(spec, ledger=ledger)
    assert checked.verdict == "PASS"
    out = checked.certificate["content"]["stages"]["check"]
    assert out["source"]["run_id"] == report.run_id and out["source"]["source"] == "ledger"
    same_run = report.certificate["content"]["stages"]["monitor"]
    assert out["metrics"] == same_run["metrics"]
    assert not math.isnan(out["metrics"]["marginal"]["singleton"]["rate"])
    assert replay(ledger, checked.run_id).reproduced  # the monitor reads the same recorded report again
    assert replay(ledger, report.run_id).reproduced


def test_verify_recomputes_the_ssbc_correction_and_catches_an_edited_k():
    from certa.engine.core.stages.conformal import audit_pac_report

    outputs = run(ROOT / "specs" / "conformal-pac" / "spec.yaml").certificate["content"]["stages"]["pac"]
    assert audit_pac_report(outputs) == []
    edited = json.loads(json.dumps(outputs))
    edited["ssbc_class_1"]["k"] -= 1
    edited["calibration_result"]["class_1"]["k"] -= 1
    assert any("ssbc_class_1.k" in p for p in audit_pac_report(edited))
    edited = json.loads(json.dumps(outputs))
    edited["calibration_result"]["class_0"]["k"] += 1
    assert audit_pac_report(edited) == ["calibration_result.class_0 does not deploy the certified k and u*"]
