"""Three gate outcomes: interval and decided gates (PASS, FAIL, INCONCLUSIVE), the verdict rule, and the interval
gate's error rates in seeded simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from certa.engine.core.gates import (FAIL, INCONCLUSIVE, PASS, evaluate_gate, gate_display, gate_outcome,
                                     interval_outcomes, run_verdict)
from certa.engine.core.spec import GateSpec


def _gate(threshold: dict, value: object) -> tuple[str, str]:
    result = evaluate_gate(GateSpec("g", "s.v", threshold), {"s": {"v": value}})
    return result.outcome, result.reason


@pytest.mark.parametrize("interval, bounds, outcome", [
    ([0.98, 1.005], {"max": 1.01}, PASS),
    ([1.0, 1.01], {"max": 1.01}, PASS),            # upper == max: within, as a max gate's value == max passes
    ([0.99, 1.02], {"max": 1.01}, INCONCLUSIVE),   # straddles
    ([1.01, 1.02], {"max": 1.01}, INCONCLUSIVE),   # lower == max: not wholly beyond
    ([1.011, 1.03], {"max": 1.01}, FAIL),
    ([0.9, 0.95], {"min": 0.9}, PASS),
    ([0.85, 0.95], {"min": 0.9}, INCONCLUSIVE),
    ([0.8, 0.89], {"min": 0.9}, FAIL),
    ([0.95, 1.0], {"min": 0.9, "max": 1.01}, PASS),
    ([0.85, 1.0], {"min": 0.9, "max": 1.01}, INCONCLUSIVE),
    ([0.85, 1.05], {"min": 0.9, "max": 1.01}, INCONCLUSIVE),  # straddles both: still undecided
    ([0.85, 0.89], {"min": 0.9, "max": 1.01}, FAIL),
    ([0.85, 0.95], {"min": 0.9, "max": 0.91}, INCONCLUSIVE),  # wider than the band: never PASS
])
def test_interval_gate_outcomes(interval: list[float], bounds: dict, outcome: str) -> None:
    assert _gate({"interval": bounds}, interval)[0] == outcome
    assert str(interval_outcomes(*interval, bounds.get("min"), bounds.get("max"))) == outcome


def test_interval_gate_reasons_name_each_bound() -> None:
    assert _gate({"interval": {"max": 1.01}}, [0.99, 1.02]) == (
        INCONCLUSIVE, "lower 0.99 <= max 1.01 < upper 1.02: the interval straddles max")
    assert _gate({"interval": {"min": 0.9, "max": 1.01}}, [0.95, 1.02]) == (
        INCONCLUSIVE, "lower 0.95 >= min 0.9 and lower 0.95 <= max 1.01 < upper 1.02: the interval straddles max")
    assert _gate({"interval": {"max": 1.01}}, [1.011, 1.03]) == (FAIL, "lower 1.011 > max 1.01")


@pytest.mark.parametrize("value", [None, 1.0, [1.0], [1.0, 2.0, 3.0], [2.0, 1.0], [1.0, "NaN"], [True, 2.0],
                                   [float("nan"), 1.0], "[0, 1]"])
def test_interval_gate_is_fail_closed(value: object) -> None:
    outcome, reason = _gate({"interval": {"max": 5}}, value)
    assert outcome == FAIL and "is not an interval" in reason


def test_interval_gate_on_a_missing_metric_fails() -> None:
    result = evaluate_gate(GateSpec("g", "s.absent", {"interval": {"max": 1}}), {"s": {}})
    assert result.outcome == FAIL and result.reason.startswith("metric not found")


def test_a_hand_computed_t_interval() -> None:
    """x = 1, 2, 3, 4: mean 2.5, s = sqrt(5/3) = 1.290994, t(0.975; 3) = 3.182446, half-width
    3.182446 * 1.290994 / 2 = 2.054260: the 95 % interval [0.445740, 4.554260]."""
    x = np.array([1.0, 2.0, 3.0, 4.0])
    half = stats.t.ppf(0.975, 3) * x.std(ddof=1) / 2
    interval = [2.5 - half, 2.5 + half]
    assert interval == pytest.approx([0.445740, 4.554260], abs=1e-6)
    assert _gate({"interval": {"max": 4.6}}, interval)[0] == PASS
    assert _gate({"interval": {"max": 4.5}}, interval)[0] == INCONCLUSIVE
    assert _gate({"interval": {"max": 0.4}}, interval)[0] == FAIL
    assert _gate({"interval": {"min": 0.5}}, interval)[0] == INCONCLUSIVE
    assert _gate({"interval": {"min": 4.6}}, interval)[0] == FAIL


@pytest.mark.parametrize("decision, outcome", [("SAME", PASS), ("UNDECIDED", INCONCLUSIVE), ("DIFFERENT", FAIL),
                                               ("IDENTICAL", FAIL), (None, FAIL), (1, FAIL)])
def test_decided_gate(decision: object, outcome: str) -> None:
    assert _gate({"decided": "SAME"}, decision)[0] == outcome


def test_old_gate_forms_never_give_inconclusive() -> None:
    """``equals`` on a decision keeps its meaning: UNDECIDED fails it, as it always did."""
    assert _gate({"equals": "SAME"}, "UNDECIDED") == (FAIL, "'UNDECIDED' != 'SAME'")
    assert _gate({"max": 1.01}, 1.02)[0] == FAIL


@pytest.mark.parametrize("outcomes, verdict", [
    ([], PASS), ([PASS], PASS), ([PASS, INCONCLUSIVE], INCONCLUSIVE), ([INCONCLUSIVE, FAIL, PASS], FAIL),
    ([FAIL], FAIL), ([INCONCLUSIVE, INCONCLUSIVE], INCONCLUSIVE),
])
def test_verdict_rule(outcomes: list[str], verdict: str) -> None:
    assert run_verdict(outcomes) == verdict


def test_recorded_outcome_of_old_and_new_gates() -> None:
    assert gate_outcome({"passed": True}) == PASS and gate_outcome({"passed": False}) == FAIL  # formats 1 and 2
    assert gate_outcome({"passed": False, "outcome": INCONCLUSIVE}) == INCONCLUSIVE


def test_interval_display_keeps_each_comparison_visible() -> None:
    shown = gate_display({"value": [0.8499999999999999, 1.0000001], "threshold": {"interval": {"min": 0.85}},
                          "reason": "r"})
    assert shown == {"value": "[0.8499999999999999, 1.0000001]", "threshold": "whole interval >= 0.85",
                     "reason": "r"}
    both = gate_display({"value": [0.95, 1.0], "threshold": {"interval": {"min": 0.9, "max": 1.01}}})
    assert both["value"] == "[0.95, 1]" and both["threshold"] == "whole interval within [0.9, 1.01]"
    assert gate_display({"value": "SAME", "threshold": {"decided": "SAME"}})["threshold"] == "decided 'SAME'"


# ------------------------------------------------------------------ error rates, seeded simulation

ALPHA = 0.10
"""A two-sided 90 % t-interval: each side misses the true mean 5 % of the time."""
REPLICATES = 20_000


def _t_intervals(rng: np.random.Generator, mean: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``REPLICATES`` two-sided (1 - ALPHA) t-intervals of the mean of n N(mean, 1) draws, vectorised."""
    x = rng.normal(mean, 1.0, size=(REPLICATES, n))
    centre, half = x.mean(axis=1), stats.t.ppf(1 - ALPHA / 2, n - 1) * x.std(axis=1, ddof=1) / np.sqrt(n)
    return centre - half, centre + half


def _rates(outcomes: np.ndarray) -> dict[str, float]:
    return {o: float(np.mean(outcomes == o)) for o in (PASS, FAIL, INCONCLUSIVE)}


@pytest.mark.parametrize("n", [5, 30, 200])
def test_at_the_margin_a_decisive_outcome_is_as_rare_as_the_interval_misses(n: int) -> None:
    """True mean exactly at max: PASS needs upper < mean (chance ALPHA/2), FAIL lower > mean (ALPHA/2); the
    rest is INCONCLUSIVE. Bounds: 4 binomial standard errors."""
    margin = 0.3
    lower, upper = _t_intervals(np.random.default_rng(20261129 + n), margin, n)
    rates = _rates(interval_outcomes(lower, upper, high=margin))
    tolerance = 4 * np.sqrt(ALPHA / 2 * (1 - ALPHA / 2) / REPLICATES)
    assert abs(rates[PASS] - ALPHA / 2) < tolerance
    assert abs(rates[FAIL] - ALPHA / 2) < tolerance
    assert rates[INCONCLUSIVE] > 1 - ALPHA - 2 * tolerance


def test_far_inside_the_margin_pass_tends_to_one_as_n_grows() -> None:
    """True mean 0.5 below max: the PASS rate grows with n towards 1 (the power of the one-sided test at
    ALPHA/2), and FAIL stays below ALPHA/2."""
    margin, truth = 0.3, -0.2
    passes = []
    for n in (4, 16, 64, 256):
        lower, upper = _t_intervals(np.random.default_rng(7 + n), truth, n)
        rates = _rates(interval_outcomes(lower, upper, high=margin))
        assert rates[FAIL] < ALPHA / 2
        passes.append(rates[PASS])
    assert passes == sorted(passes) and passes[-1] > 0.999 and passes[0] < 0.5


def test_with_tiny_n_most_outcomes_are_inconclusive() -> None:
    """n = 3 and a true mean 0.1 from the bound: the interval (half-width about 2.9 s / sqrt 3) is far wider
    than the distance, so the gate mostly cannot decide, where a max gate on the upper end would simply FAIL."""
    margin = 0.3
    lower, upper = _t_intervals(np.random.default_rng(3), margin - 0.1, 3)
    rates = _rates(interval_outcomes(lower, upper, high=margin))
    assert rates[INCONCLUSIVE] > 0.85
    assert rates[PASS] < ALPHA / 2 + 0.02
