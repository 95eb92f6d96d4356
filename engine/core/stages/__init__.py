"""The registry of stage types, every version of each.

Each module listed in ``_STAGE_MODULES`` defines ``STAGES: tuple[StageType, ...]`` (its versions: the
newest and every older one kept for replay); registering a new stage type is adding its module name here
(one line) next to its knob schema in ``schemas/stages/`` and its output schema in ``schemas/outputs/``
(``tests/core/test_output_schemas.py`` requires one for every registered version).
"""

from __future__ import annotations

from importlib import import_module

from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType
from certa.engine.core.stages.registry import StageRegistry, UnknownStage, parse_stage_ref

_STAGE_MODULES: tuple[str, ...] = (
    "paired_ratio",
    "conformal",
    "conformal_monitor",
    "bakeoff",
    "bakeoff_gate",
    "bakeoff_merge",
    "sequential_diff",
    "paired_metric",
    "model_windows",
    "suite_delta",
)

REGISTRY = StageRegistry.of(import_module(f"{__name__}.{module}").STAGES for module in _STAGE_MODULES)

__all__ = ["REGISTRY", "Decision", "StageContext", "StageOutput", "StageType", "StageRegistry", "UnknownStage",
           "parse_stage_ref"]
