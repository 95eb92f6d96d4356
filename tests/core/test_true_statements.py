"""Every statement a certificate makes is true: no claim about data the input lacks (``paired.ppl_ratio``
1.2.0), no recognised column ignored in silence, and numbers derived from decimal knobs computed exactly
(``conformal.pac_report`` and ``conformal.monitor`` 1.1.0). The older versions keep what they recorded."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from certa.engine import ProfileAbort, run
from certa.engine.core.stages import REGISTRY
from certa.engine.services.presentation.stages import markdown_of

from tests.conftest import window_columns

# ----------------------------------------------------------------------------- paired.ppl_ratio


def _paired_spec(version: str | None = None, profile: str = "dev", replicates: int = 400,
                 **with_: Any) -> dict[str, Any]:
    use = "paired.ppl_ratio" + (f"@{version}" if version else "")
    return {"certa": 1, "name": "true-statements", "seed": 5, "profile": profile,
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": "ratio", "use": use,
                        "with": {"baseline": "baseline", "subject": "subject", "replicates": replicates, **with_}}]}


def _outputs(result) -> dict[str, Any]:
    return result.certificate["content"]["stages"]["ratio"]


def _details(result, kind: str) -> list[Mapping[str, Any]]:
    return [d.decision.detail for d in result.decisions if d.decision.kind == kind]


def _paths(tree: Any, prefix: str = "") -> Iterator[str]:
    """Every key path of a JSON tree (``a.b.c``)."""
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path
            yield from _paths(value, path)


PHASE = np.array(["preview"] * 100 + ["final"] * 100)


def test_without_a_phase_column_1_2_0_states_nothing_about_preview_windows_or_drift() -> None:
    """Why: 1.1.0 reports every window as both preview and final (counts.preview = coverage.preview.used = n, the
    number of windows) and writes null preview perplexity and drift: claims about windows that do not exist."""
    base, subj = window_columns(80, seed=1)
    result = run(_paired_spec(), inputs={"baseline": base, "subject": subj})
    outputs = _outputs(result)
    # the newest version, 1.5.0, keeps 1.2.0's claims
    assert [s["version"] for s in result.certificate["content"]["knobs"]["stages"]] == ["1.5.0"]
    assert not [p for p in _paths(outputs) if "preview" in p or "drift" in p]
    assert outputs["dataset"]["windows"]["counts"] == {"baseline": {"final": 80}, "subject": {"final": 80}}
    assert set(outputs["dataset"]["windows"]["stats"]["coverage"]) == {"final", "replicates"}
    rules = [d["rule"] for d in _details(result, "profile_rule")]
    assert "preview_final_counts_match" not in rules and "min_preview_windows" not in rules
    markdown = markdown_of("paired.ppl_ratio", REGISTRY.newest("paired.ppl_ratio").version)(outputs)
    assert "review" not in markdown and "drift" not in markdown.lower()


def test_without_a_phase_column_1_1_0_keeps_what_it_recorded() -> None:
    base, subj = window_columns(80, seed=1)
    outputs = _outputs(run(_paired_spec("1.1.0"), inputs={"baseline": base, "subject": subj}))
    assert outputs["dataset"]["windows"]["counts"]["subject"] == {"preview": 80, "final": 80}
    assert outputs["dataset"]["windows"]["stats"]["coverage"]["preview"] == {"used": 80, "required": None, "ok": True}
    assert outputs["primary_metric"]["preview"] is None and outputs["drift"] is None
    assert outputs["dataset"]["windows"]["stats"]["window_overlap_fraction"] is None
    assert "nll_from" not in outputs["dataset"]["windows"]


def test_without_offsets_the_overlap_is_not_checked_not_zero() -> None:
    """Why: an overlap fraction of 0 (or null) and a passed overlap rule claim a check that never ran."""
    base, subj = window_columns(60, seed=2)
    result = run(_paired_spec(), inputs={"baseline": base, "subject": subj})
    stats = _outputs(result)["dataset"]["windows"]["stats"]
    assert stats["overlap_checked"] is False and "window_overlap_fraction" not in stats
    rule = next(d for d in _details(result, "profile_rule") if d["rule"] == "window_overlap_fraction")
    assert (rule["value"], rule["outcome"]) == ("not checked (no start/end offsets)", "not_checked")
    pinned = run(_paired_spec("1.1.0"), inputs={"baseline": base, "subject": subj})
    old_rule = next(d for d in _details(pinned, "profile_rule") if d["rule"] == "window_overlap_fraction")
    assert old_rule["outcome"] == "pass"


def test_offsets_in_one_arm_are_checked_in_that_arm_and_named() -> None:
    """Why: 1.1.0 checks overlap only when both arms have offsets, ignoring one arm's offsets in silence."""
    base, subj = window_columns(60, seed=3)
    start = np.arange(60) * 100
    base = {**base, "start": start, "end": start + 150}  # every window runs into the next
    result = run(_paired_spec(), inputs={"baseline": base, "subject": subj})
    stats = _outputs(result)["dataset"]["windows"]["stats"]
    assert stats["overlap_checked"] is True and stats["overlap_checked_arms"] == ["baseline"]
    assert stats["window_overlap_fraction"] == 1.0
    assert "baseline only" in markdown_of("paired.ppl_ratio", REGISTRY.newest("paired.ppl_ratio").version)(_outputs(result))
    pinned = _outputs(run(_paired_spec("1.1.0"), inputs={"baseline": base, "subject": subj}))
    assert pinned["dataset"]["windows"]["stats"]["overlap_checked"] is False


def test_phases_in_one_arm_only_fail_the_preview_final_rule_without_inventing_preview_windows() -> None:
    """Why: 1.1.0 counts the phase-less arm's windows as preview windows, so the rule passes on invented data."""
    base, subj = window_columns(400, seed=4)
    subj = {**subj, "phase": np.array(["preview"] * 200 + ["final"] * 200)}
    base = {k: np.asarray(v)[200:] for k, v in base.items()}
    with pytest.raises(ProfileAbort, match="preview_final_counts_match") as info:
        run(_paired_spec(profile="ci", replicates=1200), inputs={"baseline": base, "subject": subj})
    rule = next(d.detail for d in info.value.decisions if d.detail.get("rule") == "preview_final_counts_match")
    assert rule["value"] == {"baseline": {"final": 200}, "subject": {"preview": 200, "final": 200}}
    old = run(_paired_spec("1.1.0", profile="ci", replicates=1200), inputs={"baseline": base, "subject": subj})
    assert _outputs(old)["dataset"]["windows"]["counts"]["baseline"] == {"preview": 200, "final": 200}


def test_with_phases_1_2_0_states_preview_counts_coverage_and_drift() -> None:
    base, subj = window_columns(200, seed=5)
    base, subj = {**base, "phase": PHASE}, {**subj, "phase": PHASE}
    outputs = _outputs(run(_paired_spec(), inputs={"baseline": base, "subject": subj}))
    assert outputs["dataset"]["windows"]["counts"]["subject"] == {"preview": 100, "final": 100}
    assert outputs["dataset"]["windows"]["stats"]["coverage"]["preview"]["used"] == 100
    assert outputs["token_perplexity"]["preview"] > 0 and set(outputs["drift"]) == {"preview_final_ratio", "band",
                                                                                  "within_band"}


def test_both_nll_columns_say_which_one_is_used_and_record_the_other() -> None:
    base, subj = window_columns(50, seed=6)
    subj = {**subj, "nll_sum": np.asarray(subj["mean_nll"]) * np.asarray(subj["tokens"])}
    result = run(_paired_spec(), inputs={"baseline": base, "subject": subj})
    assert _outputs(result)["dataset"]["windows"]["nll_from"] == {"baseline": "mean_nll", "subject": "mean_nll"}
    unused = _details(result, "unused_column")
    assert [(d["input"], d["column"], d["outcome"]) for d in unused] == [("subject", "nll_sum", "warn")]
    assert any("'nll_sum'" in line for line in result.warnings)
    summed = {k: v for k, v in subj.items() if k != "mean_nll"}
    result = run(_paired_spec(), inputs={"baseline": base, "subject": summed})
    assert _outputs(result)["dataset"]["windows"]["nll_from"]["subject"] == "nll_sum / tokens"
    assert not _details(result, "unused_column")
    assert not _details(run(_paired_spec("1.1.0"), inputs={"baseline": base, "subject": subj}), "unused_column")


def test_a_phase_column_remapped_away_is_recorded_and_claims_no_preview() -> None:
    base, subj = window_columns(200, seed=7)
    base, subj = {**base, "phase": PHASE}, {**subj, "phase": PHASE}
    result = run(_paired_spec(columns={"phase": "split"}), inputs={"baseline": base, "subject": subj})
    unused = _details(result, "unused_column")
    assert [(d["input"], d["column"], d["use_with"]) for d in unused] == [
        ("baseline", "phase", "columns.phase: phase"), ("subject", "phase", "columns.phase: phase")]
    outputs = _outputs(result)
    assert outputs["dataset"]["windows"]["counts"]["subject"] == {"final": 200}  # every window final, as stated
    assert not [p for p in _paths(outputs) if "preview" in p or "drift" in p]


def test_a_start_column_without_an_end_column_is_recorded() -> None:
    base, subj = window_columns(40, seed=8)
    subj = {**subj, "start": np.arange(40) * 10}
    result = run(_paired_spec(), inputs={"baseline": base, "subject": subj})
    assert [(d["input"], d["column"]) for d in _details(result, "unused_column")] == [("subject", "start")]
    assert _outputs(result)["dataset"]["windows"]["stats"]["overlap_checked"] is False


# ----------------------------------------------------------------------------- conformal


def _labelled(n: int, seed: int, *, flip: float = 0.0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(int)
    p1 = np.where(labels == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))
    if flip:
        labels = np.where(rng.random(n) < flip, 1 - labels, labels)
    return {"label": labels, "p1": np.round(p1, 4)}


def _conformal_spec(version: str | None = None, monitor: str | None = None, **with_: Any) -> dict[str, Any]:
    at = f"@{version}" if version else ""
    spec: dict[str, Any] = {
        "certa": 1, "name": "exact-levels", "seed": 9, "profile": "dev",
        "inputs": {"calibration": {"path": "calibration.csv"}, "production": {"path": "production.csv"}},
        "stages": [{"id": "pac", "use": f"conformal.pac_report{at}", "with": {"input": "calibration", **with_}}],
        "gates": [{"id": "joint-at-least-0.85", "metric": "pac.joint_guarantee.level", "min": 0.85}]}
    if monitor is not None:
        spec["stages"].append({"id": "monitor", "use": f"conformal.monitor{'@' + monitor if monitor else ''}",
                               "with": {"input": "production", "report_stage": "pac"}})
    return spec


CONFORMAL_INPUTS = {"calibration": _labelled(3000, 1), "production": _labelled(2000, 2)}


def test_joint_level_of_0_85_is_exactly_0_85_and_its_gate_passes() -> None:
    """Why: δ = 0.05 per class at confidence 0.95 makes the joint level exactly 1 - 0.05 - 0.05 - 0.05 = 0.85;
    1.0.0 computes 1 - 0.95 as 0.050000000000000044 and fails a gate min: 0.85 on 0.8499999999999999."""
    knobs = {"delta": 0.05, "confidence_level": 0.95, "test_size": 2000}
    result = run(_conformal_spec(**knobs), inputs=CONFORMAL_INPUTS)
    pac = result.certificate["content"]["stages"]["pac"]
    assert [s["version"] for s in result.certificate["content"]["knobs"]["stages"]] == ["1.1.0"]
    vacuous = sum(pac[f"pac_bounds_{s}"][m]["vacuous"] for s in ("marginal", "class_0", "class_1")
                  for m in ("singleton", "doublet", "abstention", "error_given_singleton"))
    assert vacuous == 0 and pac["joint_guarantee"]["level"] == 0.85
    assert pac["joint_guarantee"]["risk_terms"] == {"coverage_class_0": 0.05, "coverage_class_1": 0.05,
                                                    "rate_bounds": 0.05}
    assert result.verdict == "PASS" and result.certificate["content"]["gates"][0]["passed"] is True
    old = run(_conformal_spec("1.0.0", **knobs), inputs=CONFORMAL_INPUTS)
    assert old.certificate["content"]["stages"]["pac"]["joint_guarantee"]["level"] == 0.8499999999999999
    assert old.verdict == "FAIL"  # 1.0.0 keeps what it recorded


def test_every_level_and_risk_derived_from_decimal_knobs_is_rounded_once() -> None:
    """Why: 1 - (1 - 0.8)/12, 1 - 0.07 and (1 - 0.07)(1 - 0.18) each round more than once in floating point."""
    knobs = {"delta": [0.07, 0.18], "confidence_level": 0.8, "prediction_method": "all"}
    pac = run(_conformal_spec(**knobs), inputs=CONFORMAL_INPUTS).certificate["content"]["stages"]["pac"]
    gamma, d0, d1 = Fraction("0.8"), Fraction("0.07"), Fraction("0.18")
    per_bound = (1 - gamma) / 12
    params = pac["parameters"]
    assert params["level_per_bound"] == float(1 - per_bound) != 1 - (1 - 0.8) / 12
    assert params["pac_level_class_0"] == float(1 - d0) != 1.0 - 0.07
    assert params["pac_level_marginal"] == float((1 - d0) * (1 - d1))
    bound = pac["pac_bounds_marginal"]["singleton"]
    assert (bound["level"], bound["risk"]) == (float(1 - per_bound), float(per_bound))
    terms = pac["joint_guarantee"]["risk_terms"]
    assert pac["joint_guarantee"]["level"] == float(1 - Fraction(str(terms["coverage_class_0"]))
                                                    - Fraction(str(terms["coverage_class_1"])) - 12 * per_bound)


@pytest.mark.parametrize("report", ["1.0.0", "1.1.0"])
def test_the_newest_monitor_reads_a_report_of_every_version_with_that_versions_arithmetic(report: str) -> None:
    """A 1.0.0 report computed its bounds at 1.0 - level: the newest monitor recomputes them so (its realised-size
    bounds equal monitor 1.0.0's); a 1.1.0 report records each bound's risk, which the monitor uses."""
    knobs = {"alpha": 0.07, "confidence_level": 0.8, "test_size": 2000}
    newest = run(_conformal_spec(report, monitor="", **knobs), inputs=CONFORMAL_INPUTS)
    content = newest.certificate["content"]
    assert [s["version"] for s in content["knobs"]["stages"]] == [report, "1.1.0"]
    monitor = content["stages"]["monitor"]
    assert monitor["coverage"]["class_0"]["target"] == 0.93 != 1.0 - 0.07
    if report == "1.0.0":
        frozen = run(_conformal_spec(report, monitor="1.0.0", **knobs), inputs=CONFORMAL_INPUTS)
        assert monitor["metrics"] == frozen.certificate["content"]["stages"]["monitor"]["metrics"]
        assert frozen.certificate["content"]["stages"]["monitor"]["coverage"]["class_0"]["target"] == 1.0 - 0.07
    else:
        bound = content["stages"]["pac"]["pac_bounds_marginal"]["singleton"]
        assert bound["risk"] == float((1 - Fraction("0.8")) / 12)
