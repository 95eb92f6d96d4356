"""How to read a stage's result: short plain-language paragraphs for a governance reviewer.

``how_to_read(stage_name, outputs)`` returns, for one stage of a certificate, what was tested, what the
verdict or decision means and what it does not mean, and the assumptions the claim rests on. Each stage type's
texts live in its presentation module (``certa.engine.services.presentation.stages``); they read the stored outputs
only, defensively: a key a stage version does not record changes the wording, never raises. No HTML, no I/O:
the HTML report (``certa.engine.services.presentation.html``) and ``certa show --explain`` both print these
paragraphs. The number helpers below write numbers in those texts (``certa.engine.core.value_text.format_value``,
4 significant digits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from certa.engine.core.stages.catalogue import CATALOGUE
from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.stages import presentation_of

__all__ = ["how_to_read", "EXPLAINED", "finite_number", "number_text", "percent_text", "signed_text", "number_pair",
           "interval_text"]


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def number_text(value: Any) -> str:
    """A number in a sentence: 4 significant digits, ``?`` when ``value`` is not a finite number."""
    number = finite_number(value)
    return "?" if number is None else format_value(number, digits=4)


def percent_text(level: Any) -> str:
    """A confidence level as a percentage (``95%``), ``the stated`` when it is not a finite number."""
    number = finite_number(level)
    return "the stated" if number is None else f"{format_value(100 * number, digits=4)}%"


def signed_text(value: Any) -> str:
    """A difference in a sentence: 4 significant digits with its sign (``+0.05``, ``-0.02``)."""
    number = finite_number(value)
    return f"+{number_text(number)}" if number is not None and number > 0 else number_text(value)


def number_pair(value: Any) -> tuple[Any, Any]:
    """``value`` as (low, high) when it is a list of two (an interval, a range), else (None, None)."""
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        return value[0], value[1]
    return None, None


def interval_text(ci: Any) -> str:
    """``[low, high]`` in a sentence (``[?, ?]`` when the interval is not two numbers)."""
    low, high = number_pair(ci)
    return f"[{number_text(low)}, {number_text(high)}]"


EXPLAINED: frozenset[str] = frozenset(name for name, shown in CATALOGUE.items() if shown.presentation is not None)
"""The stage types ``how_to_read`` has texts for: those that name a presentation module."""


def how_to_read(stage_name: str, outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """Plain-language paragraphs on reading one stage's result; ``()`` for a stage type without texts.

    ``stage_name`` is the stage type (``use``, e.g. ``"sequential.diff"``; a ``@version`` suffix is ignored),
    ``outputs`` its stored outputs (``content.stages.<id>``). Never raises on missing or unexpected keys.
    """
    presentation = presentation_of(stage_name)
    return presentation.how_to_read(outputs if isinstance(outputs, Mapping) else {}) if presentation else ()
