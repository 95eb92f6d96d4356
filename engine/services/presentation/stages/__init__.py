"""Each stage type's presentation: its HTML report section, its "how to read this" paragraphs and its Markdown in
``certa show``.

A stage type names its presentation module in ``StageType.presentation`` (a dotted module name; see
``certa.engine.core.stages.base`` for why a name and not a function): the core may not import the services, so it
names the module and ``presentation_of`` (``markdown_of``) imports it when a report or ``certa show`` needs it. Each
module here serves the stage module of ``certa.engine.core.stages`` of the same name (``bakeoff`` serves
``bakeoff.compare`` and ``bakeoff.merge``) and defines::

    section(stage: StageInput) -> StageSection        the stage's HTML report section
    reading(outputs) -> str                           its one-line reading (the section's summary, certa's CI summary)
    how_to_read(outputs) -> tuple[str, ...]           plain-language paragraphs (HTML and Markdown)

and, optionally (``certa show`` prints a generic outputs table for a type whose module has none)::

    markdown(outputs, version) -> str                 the stage's Markdown, as the type at ``version`` states it
    estimates(outputs) -> tuple[Estimate, ...]        its estimates with their intervals (``certa export --format``)

``section``, ``reading`` and ``how_to_read`` read the stored outputs only, defensively; none of them computes a
statistic. The core renders nothing. Adding a stage type's presentation is writing its module here and naming it
in the ``StageType``: nothing here lists stage names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol, cast

from certa.engine.core.stages.catalogue import CATALOGUE, shown_version
from certa.engine.core.stages.registry import parse_stage_ref

if TYPE_CHECKING:  # the view model lives in the HTML package, which only the report commands import
    from certa.engine.services.presentation.html.view import StageInput, StageSection

__all__ = ["StagePresentation", "MarkdownRenderer", "presentation_of", "presentation_modules", "markdown_of",
           "Estimate", "estimates_of", "run_estimates"]

MarkdownRenderer = Callable[[Mapping[str, Any], str], str]
"""A presentation module's ``markdown(outputs, version)``: a stage's outputs as Markdown for ``certa show``."""


class StagePresentation(Protocol):
    """What a stage type's presentation module defines."""

    def section(self, stage: StageInput) -> StageSection:
        """The stage's report section (``stage_id``, ``use``, ``version`` and ``how_to_read`` are filled in by
        ``certa.engine.services.presentation.html.sections.stage_section``)."""
        ...

    def reading(self, outputs: Mapping[str, Any]) -> str:
        """The stage's result in one line, from its stored outputs (``certa run --summary``)."""
        ...

    def how_to_read(self, outputs: Mapping[str, Any]) -> tuple[str, ...]:
        """Plain-language paragraphs on reading the stage's stored outputs."""
        ...


def presentation_modules() -> tuple[str, ...]:
    """The presentation modules the stage types name (``certa.engine.core.stages.catalogue``), sorted (the text a report prints)."""
    return tuple(sorted({shown.presentation for shown in CATALOGUE.values() if shown.presentation is not None}))


@functools.cache
def presentation_of(use: str) -> StagePresentation | None:
    """The presentation module of stage type ``use`` (``name`` or ``name@version``: every version of a type shares
    the newest version's presentation, which reads older outputs defensively); None for a type this certa does
    not have or one without a presentation."""
    shown = shown_version(parse_stage_ref(use)[0])
    module = shown.presentation if shown is not None else None
    return None if module is None else cast(StagePresentation, import_module(module))


def markdown_of(use: str, version: str) -> Callable[[Mapping[str, Any]], str] | None:
    """The Markdown renderer of stage type ``use`` at ``version`` (its presentation module's ``markdown``, with the
    version given), which ``certa show`` prints each stage's outputs with; None for a type or version this certa
    does not have, or one whose presentation has no Markdown (``certa show`` then lists the outputs)."""
    shown = shown_version(use, version)
    module = None if shown is None or shown.presentation is None else import_module(shown.presentation)
    render: MarkdownRenderer | None = getattr(module, "markdown", None)
    return None if render is None else functools.partial(render, version=version)


@dataclass(frozen=True)
class Estimate:
    """A number a stage estimated, as other tools' formats carry a metric (``certa export --format``): its
    ``name``, ``value``, the ``lower`` and ``upper`` ends of its ``level`` confidence interval (None: the stage
    records none) and the ``slice`` it was computed on (a class, a bucket's vendor; None: all the data)."""

    name: str
    value: float
    lower: float | None = None
    upper: float | None = None
    level: float | None = None
    slice: str | None = None

    @classmethod
    def read(cls, name: str, value: Any, interval: Any = None, level: Any = None,
             slice: str | None = None) -> Estimate | None:
        """An estimate from stored outputs, read defensively: None when ``value`` is not a finite number; the
        interval kept only when ``interval`` is a pair of finite numbers."""
        from certa.engine.services.presentation.explain import finite_number  # it imports this module
        number = finite_number(value)
        if number is None:
            return None
        pair = [finite_number(end) for end in interval] if isinstance(interval, (list, tuple)) and len(interval) == 2 \
            else [None, None]
        lower, upper = pair if None not in pair else (None, None)
        return cls(name, number, lower, upper, finite_number(level) if lower is not None else None, slice)


def estimates_of(use: str, outputs: Mapping[str, Any]) -> tuple[Estimate, ...]:
    """The estimates a stage of type ``use`` recorded in ``outputs`` (its presentation module's ``estimates``);
    ``()`` for a type without them (a gate stage, a monitor: they record decisions, not estimates)."""
    module = presentation_of(use)
    read: Callable[[Mapping[str, Any]], tuple[Estimate | None, ...]] | None = getattr(module, "estimates", None)
    if read is None:
        return ()
    return tuple(estimate for estimate in read(outputs if isinstance(outputs, Mapping) else {})
                 if estimate is not None)


def run_estimates(content: Mapping[str, Any]) -> tuple[tuple[str, Estimate], ...]:
    """Every stage's estimates (``estimates_of``) of a certificate's ``content``, in stage order, each with its
    stage id."""
    uses = {stage["id"]: stage["use"] for stage in content["knobs"]["stages"]}
    return tuple((stage_id, estimate) for stage_id, outputs in content["stages"].items()
                 for estimate in estimates_of(uses.get(stage_id, "?"), outputs))
