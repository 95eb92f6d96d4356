"""Gates: pass/fail policy on stage outputs, addressed as ``<stage id>.<path>`` with ``[i]`` indexes.

A gate is fail-closed: a metric that is missing, not a number where a bound needs one, or not finite
fails its gate, with the reason recorded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .spec import GateSpec

__all__ = ["GateResult", "lookup_metric", "evaluate_gate"]

_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(-?\d+)\]")


@dataclass(frozen=True)
class GateResult:
    id: str
    metric: str
    value: Any
    threshold: Mapping[str, Any]
    passed: bool
    reason: str


def lookup_metric(stages: Mapping[str, Any], metric: str) -> Any:
    """The value at ``metric`` in the stage outputs; raises ``KeyError`` naming the missing step."""
    head = re.match(r"[a-z][a-z0-9_-]*", metric)
    assert head is not None
    value: Any = stages
    steps = [("key", head.group(0))] + [
        ("key", m.group(1)) if m.group(1) is not None else ("index", int(m.group(2)))
        for m in _STEP.finditer(metric, head.end())
    ]
    walked = ""
    for kind, step in steps:
        walked += f".{step}" if kind == "key" and walked else (f"[{step}]" if kind == "index" else str(step))
        if kind == "key" and isinstance(value, Mapping) and step in value:
            value = value[step]
        elif kind == "index" and isinstance(value, list) and -len(value) <= step < len(value):
            value = value[step]
        else:
            raise KeyError(walked)
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
