"""Gates: pass/fail policy on stage outputs, addressed as ``<stage id>.<path>`` with ``[i]`` indexes.

A gate is fail-closed: a metric that is missing, not a number where a bound needs one, or not finite
fails its gate, with the reason recorded.

The recorded ``reason`` writes each number as its shortest round-trip form (``repr``): it never rounds, so it
shows ``0.8499999999999999 < 0.85``, never ``0.85 < 0.85``. It is part of the certificate's content and stays
byte for byte as recorded. For display (``certa run``, ``certa show``, the HTML report) ``format_gate_numbers``
writes a value and its thresholds with the fewest significant digits (at least 6) that keep each comparison
visible, and ``gate_display`` does it for a recorded gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certa.engine.core.metric_paths import format_steps, parse_metric

if TYPE_CHECKING:
    from certa.engine.core.spec import GateSpec

__all__ = ["GateResult", "lookup_metric", "evaluate_gate", "format_gate_numbers", "gate_display"]


@dataclass(frozen=True)
class GateResult:
    """One evaluated gate: the value found at ``metric`` (None if missing), pass/fail and the recorded reason."""

    id: str
    metric: str
    value: Any
    threshold: Mapping[str, Any]
    passed: bool
    reason: str


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
    numbers = (value, *thresholds)
    if not all(_is_number(x) for x in numbers):
        raise ValueError("format_gate_numbers takes finite numbers")
    for digits in range(_MIN_DIGITS, 18):
        texts = tuple(f"{x:.{digits}g}" for x in numbers)
        if all(_order(float(texts[0]), float(t)) == _order(value, x) for t, x in zip(texts[1:], thresholds)):
            return texts
    return tuple(repr(float(x)) if isinstance(x, float) else str(x) for x in numbers)


def gate_display(gate: Mapping[str, Any]) -> dict[str, str]:
    """A recorded gate (``content.gates[i]``) for people: ``value`` and ``threshold`` (``"min 0.85"``,
    ``"between 0.1 and 0.2"``, ``"equals 'SAME'"``) written with ``format_gate_numbers`` when they are numbers,
    so that the CLI, ``certa show`` and the HTML report print the same digits and a failed bound never reads
    as equal to its value. The recorded ``reason`` is shown as recorded."""
    value, threshold = gate.get("value"), dict(gate.get("threshold") or {})
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


def _plain(value: Any) -> str:
    """A non-numeric gate value or threshold as the reason writes it (``repr``: strings quoted)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    return repr(value)
