"""One report section per stage: a sentence with the method's decision, a plot of it and its numbers in tables.

``stage_section(stage_id, use, version, outputs, gates, checks, vendor_colours)`` builds the section with the
stage type's presentation module (``StageType.presentation``, resolved by
``certa.engine.services.presentation.stages.presentation_of``); a type without one gets a generic outputs table and
no plot. Every section opens with the method's "how to read this" paragraphs
(``certa.engine.services.presentation.explain.how_to_read``). Builders only read the certificate's stored outputs
(and, for ``sequential.diff``, the recorded checks); they format numbers and never compute a statistic. Keys
are read defensively: a block a stage version does not record is not shown at all. Plot text is drawn as
paths; table cells are plain strings escaped by the template (the view model is
``certa.engine.services.presentation.html.view``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from certa.engine.services.presentation.explain import how_to_read
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.html.view import StageInput, StageSection, run_vendors, table
from certa.engine.services.presentation.stages import presentation_of

__all__ = ["stage_section", "stage_gates"]


def stage_gates(stage_id: str, gates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The gates whose metric reads this stage's outputs."""
    return [g for g in gates if str(g.get("metric", "")).startswith(f"{stage_id}.")]


def _generic(stage: StageInput) -> StageSection:
    outputs = stage.outputs
    return StageSection(stage.stage_id, "", "", decision="", ok=None, summary="No report layout for this stage type; "
                        "its outputs follow.", tables=(table("Outputs", ("output", "value"), list(outputs.items())),))


def stage_section(stage_id: str, use: str, version: str, outputs: Mapping[str, Any],
                  gates: Sequence[Mapping[str, Any]], checks: Sequence[Mapping[str, Any]],
                  vendor_colours: Mapping[str, str] | None = None) -> StageSection:
    """The report section of one stage (see module docstring); ``vendor_colours`` is
    ``plots.vendor_colours(run_vendors(content.stages))`` of the whole run (computed here if None)."""
    presentation = presentation_of(use)
    builder = _generic if presentation is None else presentation.section
    colours = plots.vendor_colours(run_vendors({stage_id: outputs})) if vendor_colours is None else vendor_colours
    section = builder(StageInput(stage_id, outputs, stage_gates(stage_id, gates), checks, colours))
    return dataclasses.replace(section, stage_id=stage_id, use=use, version=version,
                               how_to_read=how_to_read(use, outputs))
