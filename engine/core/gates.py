"""Gates: policy on stage outputs, addressed as ``<stage id>.<path>`` with ``[i]`` indexes; three outcomes.

A gate's outcome is PASS, FAIL or INCONCLUSIVE (``OUTCOMES``). The forms ``min``/``max``, ``between`` and
``equals`` (and a family member's ``differs``, ``certa.engine.core.gate_family``) only PASS or FAIL, as they always
have. Two forms can also say that the evidence cannot decide at the precision the run reached:

``interval: {min: a, max: b}`` (either or both) on a ``[lower, upper]`` interval (a confidence interval, a
    confidence sequence at its stopping time): PASS when the whole interval lies within the bounds (lower >= a,
    upper <= b), FAIL when it lies wholly beyond one of them (upper < a, or lower > b), INCONCLUSIVE when it
    straddles a bound. With a (1 - alpha) interval and a true value exactly at a bound, the interval misses it
    at most alpha of the time (its coverage), so a wrong decisive outcome (PASS or FAIL) at the margin has
    chance at most about alpha: the interval gate of a non-inferiority or equivalence claim (Wellek, S. (2010).
    Testing Statistical Hypotheses of Equivalence and Noninferiority, 2nd ed., ch. 1; the same reading as
    CONSORT's non-inferiority figure, Piaggio et al. (2012), JAMA 308, 2594-2604, Fig. 1).
``decided: WORD`` on a stage's decision (``sequential.diff``'s ``results.decision``): PASS when the stage decided
    WORD, INCONCLUSIVE when it stopped ``UNDECIDED`` (n_max reached, the data exhausted, or precise but on neither
    side of its rules), FAIL when it decided anything else.

``run_verdict`` combines the outcomes: any FAIL gives FAIL; else any INCONCLUSIVE gives INCONCLUSIVE; else PASS.

A gate is fail-closed: a metric that is missing, not a number (or an interval) where a bound needs one, or not
finite fails its gate, with the reason recorded.

The recorded ``reason`` writes each number as its shortest round-trip form (``repr``): it never rounds, so it
shows ``0.8499999999999999 < 0.85``, never ``0.85 < 0.85``. It is part of the certificate's content and stays
byte for byte as recorded. For display (``certa run``, ``certa show``, the HTML report) ``format_gate_numbers``
writes a value and its thresholds with the fewest significant digits (at least 6) that keep each comparison
visible, and ``gate_display`` does it for a recorded gate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certa.engine.core.metric_paths import format_steps, parse_metric

if TYPE_CHECKING:  # numpy loads where an array of intervals is decided, not where a recorded gate is shown
    import numpy as np
    import numpy.typing as npt

    from certa.engine.core.spec import GateSpec

__all__ = ["PASS", "FAIL", "INCONCLUSIVE", "OUTCOMES", "UNDECIDED", "GateResult", "lookup_metric", "evaluate_gate",
           "run_verdict", "gate_outcome", "interval_outcomes", "format_gate_numbers", "gate_display",
           "inconclusive_note"]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
OUTCOMES = (PASS, FAIL, INCONCLUSIVE)
"""A gate's outcomes, and a run's verdicts."""
UNDECIDED = "UNDECIDED"
"""The decision a stage records when it stopped without one (``sequential.diff``): a ``decided`` gate's
INCONCLUSIVE."""


@dataclass(frozen=True)
class GateResult:
    """One evaluated gate: the value found at ``metric`` (None if missing), whether it passed, whether it is
    inconclusive (neither passed nor failed: ``interval`` and ``decided`` gates only) and the recorded reason."""

    id: str
    metric: str
    value: Any
    threshold: Mapping[str, Any]
    passed: bool
    reason: str
    inconclusive: bool = False

    @property
    def outcome(self) -> str:
        """PASS, FAIL or INCONCLUSIVE."""
        return PASS if self.passed else INCONCLUSIVE if self.inconclusive else FAIL


def run_verdict(outcomes: Iterable[str]) -> str:
    """The run's verdict from its gates' outcomes: FAIL if any gate failed; else INCONCLUSIVE if any gate is
    inconclusive; else PASS (also for no gates)."""
    found = set(outcomes)
    return FAIL if FAIL in found else INCONCLUSIVE if INCONCLUSIVE in found else PASS


def gate_outcome(gate: Mapping[str, Any]) -> str:
    """A recorded gate's (``content.gates[i]``) outcome: its ``outcome`` (content format 3), else PASS or FAIL
    by ``passed`` (formats 1 and 2, whose gates had no third outcome)."""
    recorded = gate.get("outcome")
    if recorded in OUTCOMES:
        return str(recorded)
    return PASS if gate.get("passed") is True else FAIL


def lookup_metric(stages: Mapping[str, Any], metric: str) -> Any:
    """The value at ``metric`` in the stage outputs; raises ``KeyError`` naming the missing step."""
    stage_id, steps = parse_metric(metric)
    value: Any = stages
    for i, (kind, step) in enumerate([("key", stage_id), *steps]):
        if kind == "key" and isinstance(value, Mapping) and step in value:
            value = value[step]
        elif kind == "index" and isinstance(value, list) and -len(value) <= step < len(value):
            value = value[step]
        else:
            raise KeyError(format_steps(steps[:i], stage_id) if i else stage_id)
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def evaluate_gate(gate: GateSpec, stages: Mapping[str, Any]) -> GateResult:
    """Evaluate one gate against the stage outputs (fail-closed)."""
    try:
        value = lookup_metric(stages, gate.metric)
    except KeyError as exc:
        return GateResult(gate.id, gate.metric, None, gate.threshold, False,
                          f"metric not found: no output at '{exc.args[0]}'")
    t = gate.threshold
    if "interval" in t:
        return _interval_gate(gate, value)
    if "decided" in t:
        return _decided_gate(gate, value)
    if "equals" in t:
        target = t["equals"]
        passed = isinstance(value, bool) == isinstance(target, bool) and value == target
        return GateResult(gate.id, gate.metric, value, t, bool(passed),
                          f"{value!r} {'==' if passed else '!='} {target!r}")
    number = _number(value)
    if number is None:
        return GateResult(gate.id, gate.metric, value, t, False, f"value {value!r} is not a finite number")
    lo, hi = t["between"] if "between" in t else (t.get("min"), t.get("max"))
    checks = []
    if lo is not None:
        checks.append((number >= lo, f"{number!r} {'>=' if number >= lo else '<'} {lo!r}"))
    if hi is not None:
        checks.append((number <= hi, f"{number!r} {'<=' if number <= hi else '>'} {hi!r}"))
    passed = all(ok for ok, _ in checks)
    return GateResult(gate.id, gate.metric, value, t, passed, " and ".join(text for _, text in checks))


def interval_outcomes(lower: npt.ArrayLike, upper: npt.ArrayLike, low: float | None = None,
                      high: float | None = None) -> npt.NDArray[np.str_]:
    """The outcome of an ``interval: {min: low, max: high}`` gate (either bound may be None) for each
    ``[lower, upper]``, elementwise: FAIL where the interval lies wholly beyond a bound (upper < low, or
    lower > high), PASS where it lies wholly within (lower >= low and upper <= high), INCONCLUSIVE elsewhere (it
    straddles a bound). A pure function of arrays, so that a simulation decides 10^4 intervals at once."""
    import numpy as np
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    beyond = np.zeros(np.broadcast(lower, upper).shape, dtype=bool)
    within = np.ones_like(beyond)
    if low is not None:
        beyond |= upper < low
        within &= lower >= low
    if high is not None:
        beyond |= lower > high
        within &= upper <= high
    return np.where(beyond, FAIL, np.where(within, PASS, INCONCLUSIVE))


_INTERVAL_REASONS = {
    ("min", PASS): "lower {lower!r} >= min {bound!r}",
    ("min", FAIL): "upper {upper!r} < min {bound!r}",
    ("min", INCONCLUSIVE): "lower {lower!r} < min {bound!r} <= upper {upper!r}: the interval straddles min",
    ("max", PASS): "upper {upper!r} <= max {bound!r}",
    ("max", FAIL): "lower {lower!r} > max {bound!r}",
    ("max", INCONCLUSIVE): "lower {lower!r} <= max {bound!r} < upper {upper!r}: the interval straddles max",
}
"""The recorded reason of an interval gate, per bound and that bound's outcome."""


def _interval_gate(gate: GateSpec, value: Any) -> GateResult:
    """An ``interval`` gate (module docstring) on ``value``, which must be [lower, upper] with finite lower <= upper."""
    t = gate.threshold
    pair = value if isinstance(value, list) and len(value) == 2 else []
    ends = [_number(x) for x in pair]
    if len(ends) != 2 or ends[0] is None or ends[1] is None or ends[0] > ends[1]:
        return GateResult(gate.id, gate.metric, value, t, False,
                          f"value {value!r} is not an interval (two finite numbers, lower <= upper)")
    lower, upper = ends
    bounds = t["interval"]
    reasons = []
    for key in ("min", "max"):
        if key in bounds:
            alone = str(interval_outcomes(lower, upper, **{"low" if key == "min" else "high": bounds[key]}))
            reasons.append(_INTERVAL_REASONS[key, alone].format(lower=lower, upper=upper, bound=bounds[key]))
    outcome = str(interval_outcomes(lower, upper, bounds.get("min"), bounds.get("max")))
    return GateResult(gate.id, gate.metric, value, t, outcome == PASS, " and ".join(reasons),
                      inconclusive=outcome == INCONCLUSIVE)


def _decided_gate(gate: GateSpec, value: Any) -> GateResult:
    """A ``decided`` gate (module docstring): PASS on the decision it names, INCONCLUSIVE on ``UNDECIDED``."""
    t = gate.threshold
    target = t["decided"]
    if value == UNDECIDED and isinstance(value, str):
        return GateResult(gate.id, gate.metric, value, t, False,
                          f"{value!r}: the stage stopped without a decision (expected {target!r})", inconclusive=True)
    passed = isinstance(value, str) and value == target
    return GateResult(gate.id, gate.metric, value, t, passed, f"{value!r} {'==' if passed else '!='} {target!r}")


_MIN_DIGITS = 6
"""Significant digits a displayed gate number has at least (as ``certa.engine.core.value_text.format_value``)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _order(a: float, b: float) -> int:
    return (a > b) - (a < b)


def format_gate_numbers(value: float, *thresholds: float) -> tuple[str, ...]:
    """``value`` and each threshold written with the same, smallest number of significant digits (at least 6)
    at which every ``value``-threshold comparison reads as it is: ``(0.8499999999999999, 0.85)`` gives
    ``("0.8499999999999999", "0.85")``, never two equal strings for unequal numbers; ``(41.78, 40)`` gives
    ``("41.78", "40")``. Finite numbers only (``ValueError`` otherwise)."""
    return _written((value, *thresholds), _digits(value, *thresholds))


def _digits(value: float, *thresholds: float) -> int | None:
    """The fewest significant digits (at least 6) that keep each ``value``-threshold comparison visible; None
    when only the shortest round-trip form (``repr``) does."""
    if not all(_is_number(x) for x in (value, *thresholds)):
        raise ValueError("format_gate_numbers takes finite numbers")
    for digits in range(_MIN_DIGITS, 18):
        if all(_order(float(f"{value:.{digits}g}"), float(f"{x:.{digits}g}")) == _order(value, x)
               for x in thresholds):
            return digits
    return None


def _written(numbers: tuple[float, ...], digits: int | None) -> tuple[str, ...]:
    if digits is None:
        return tuple(repr(float(x)) if isinstance(x, float) else str(x) for x in numbers)
    return tuple(f"{x:.{digits}g}" for x in numbers)


def _interval_display(value: Any, bounds: Mapping[str, Any]) -> dict[str, str] | None:
    """An ``interval`` gate's value and threshold for people (``"[0.991, 1.02]"``, ``"whole interval <= 1.01"``),
    each end written with the digits that keep its comparisons with the bounds visible (the larger count of the
    two ends, ``format_gate_numbers``); None when the value is not two finite numbers."""
    limits = [bounds[k] for k in ("min", "max") if k in bounds]
    if not (isinstance(value, list) and len(value) == 2 and all(_is_number(x) for x in [*value, *limits])):
        return None
    counts = [_digits(end, *limits) for end in value]
    digits = None if None in counts else max(c for c in counts if c is not None)
    lower, upper, *shown = _written((*value, *limits), digits)
    words = {"min": ">=", "max": "<="}
    limit_text = dict(zip([k for k in ("min", "max") if k in bounds], shown))
    text = (f"whole interval within [{limit_text['min']}, {limit_text['max']}]" if len(limit_text) == 2 else
            "whole interval " + " ".join(f"{words[k]} {v}" for k, v in limit_text.items()))
    return {"value": f"[{lower}, {upper}]", "threshold": text}


def gate_display(gate: Mapping[str, Any]) -> dict[str, str]:
    """A recorded gate (``content.gates[i]``) for people: ``value`` and ``threshold`` (``"min 0.85"``,
    ``"between 0.1 and 0.2"``, ``"equals 'SAME'"``, ``"whole interval <= 1.01"``, ``"decided 'SAME'"``) written
    with ``format_gate_numbers`` when they are numbers, so that the CLI, ``certa show`` and the HTML report print
    the same digits and a failed bound never reads as equal to its value. The recorded ``reason`` is shown as recorded."""
    value, threshold = gate.get("value"), dict(gate.get("threshold") or {})
    if isinstance(threshold.get("interval"), Mapping):
        shown_interval = _interval_display(value, threshold["interval"])
        if shown_interval is not None:
            return {**shown_interval, "reason": str(gate.get("reason", ""))}
    if "differs" in threshold:  # a member of a corrected family (certa.engine.core.gate_family): its adjusted p
        expected = "differs (adjusted p ≤ the family's α)" if threshold["differs"] is True else \
            "not shown to differ (adjusted p > the family's α)"
        shown = f"adjusted p {value:.6g}" if _is_number(value) else _plain(value)
        return {"value": shown, "threshold": expected, "reason": str(gate.get("reason", ""))}
    bounds = list(threshold["between"]) if "between" in threshold else [
        threshold[k] for k in ("min", "max") if k in threshold]
    if _is_number(value) and bounds and all(_is_number(b) for b in bounds):
        shown, *shown_bounds = format_gate_numbers(value, *bounds)
        if "between" in threshold:
            text = f"between {shown_bounds[0]} and {shown_bounds[1]}"
        else:
            text = ", ".join(f"{k} {b}" for k, b in zip([k for k in ("min", "max") if k in threshold], shown_bounds))
    else:
        shown = _plain(value)
        text = ", ".join(f"{k} {_plain(v)}" for k, v in threshold.items())
    return {"value": shown, "threshold": text, "reason": str(gate.get("reason", ""))}


def inconclusive_note(gates: Iterable[Mapping[str, Any]]) -> str | None:
    """What an INCONCLUSIVE verdict means, for people (the CLI, ``certa show``, the HTML report): which recorded
    gates could not be decided; None when no gate is inconclusive."""
    undecided = [str(g.get("id")) for g in gates if gate_outcome(g) == INCONCLUSIVE]
    if not undecided:
        return None
    return (f"Inconclusive: {', '.join(undecided)} could not be decided at the precision this run reached (an "
            "interval straddles its bound, or a sequential test stopped UNDECIDED). This is not a regression and not "
            "a pass: more data (a larger sample, a larger n_max) may decide it.")


def _plain(value: Any) -> str:
    """A non-numeric gate value or threshold as the reason writes it (``repr``: strings quoted)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    return repr(value)
