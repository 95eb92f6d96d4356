"""The registry of stage types.

Each module listed in ``_STAGE_MODULES`` defines ``STAGE: StageType``; registering a new stage type
is adding its module name here (one line) next to its schema file in ``schemas/stages/``.
"""

from __future__ import annotations

from importlib import import_module

from .base import Decision, StageContext, StageOutput, StageType

_STAGE_MODULES: tuple[str, ...] = (
    "paired_ratio",
    "conformal",
    "conformal_monitor",
    "bakeoff",
    "bakeoff_gate",
    "bakeoff_merge",
    "sequential_diff",
)

REGISTRY: dict[str, StageType] = {}
for _module in _STAGE_MODULES:
    _stage: StageType = import_module(f"{__name__}.{_module}").STAGE
    REGISTRY[_stage.name] = _stage

__all__ = ["REGISTRY", "Decision", "StageContext", "StageOutput", "StageType"]
