"""The registry of stage types, every version of each.

Each module listed in ``_STAGE_MODULES`` defines ``STAGES: tuple[StageType, ...]`` (its versions: the
newest and every older one kept for replay); registering a new stage type is adding its module name here
(one line) next to its knob schema in ``schemas/stages/`` and its output schema in ``schemas/outputs/``
(``tests/core/test_output_schemas.py`` requires one for every registered version), and its versions and
presentation module in ``certa.engine.core.stages.catalogue`` (what ``certa show`` reads instead of importing the
stage modules; tests/core/test_stage_catalogue.py checks that the two agree).

``REGISTRY`` is built, importing every stage module (numpy, the statistics), when it is first used (PEP 562), not
when the package is imported: naming a ``Decision`` or a ``StageType`` loads neither.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    REGISTRY: StageRegistry


def __getattr__(name: str) -> Any:
    if name == "REGISTRY":
        registry = StageRegistry.of(import_module(f"{__name__}.{module}").STAGES for module in _STAGE_MODULES)
        globals()["REGISTRY"] = registry
        return registry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REGISTRY", "Decision", "StageContext", "StageOutput", "StageType", "StageRegistry", "UnknownStage",
           "parse_stage_ref"]
