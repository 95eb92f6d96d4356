"""The method identities ``certa verify`` re-checks on a stored ``paired.ppl_ratio`` output (every version): plain
arithmetic on the recorded numbers, in a module of its own so that checking a certificate does not import the stage
(numpy, the bootstrap; ``certa.engine.core.stages.catalogue.AUDITS``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from certa.engine.core.stages.ratio_names import ESTIMATE_KEYS

__all__ = ["audit_paired_ratio"]


def audit_paired_ratio(outputs: Mapping[str, Any]) -> list[str]:
    """Identities ``certa verify`` re-checks: display_ci == exp(ci) and ratio == exp(log_ratio), exactly (on the
    ratio's output, ``primary_metric`` or ``<unit>_perplexity``)."""
    problems = []
    key = next((k for k in ESTIMATE_KEYS if k in outputs), "primary_metric")
    pm = outputs.get(key, {})
    try:
        if pm["display_ci"] != [math.exp(pm["ci"][0]), math.exp(pm["ci"][1])]:
            problems.append(f"{key}.display_ci != exp({key}.ci)")
        if pm["ratio_vs_baseline"] != math.exp(pm["log_ratio"]):
            problems.append(f"{key}.ratio_vs_baseline != exp({key}.log_ratio)")
        if not pm["ci"][0] <= pm["ci"][1]:
            problems.append(f"{key}.ci is not ordered (low > high)")
    except (KeyError, TypeError, IndexError, OverflowError):
        problems.append(f"{key} is missing ci, display_ci, log_ratio or ratio_vs_baseline")
    return problems
