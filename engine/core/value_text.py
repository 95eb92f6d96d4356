"""One formatter of JSON values for people: every presentation writes a stored number, list or mapping with it.

``format_value`` writes floats with ``digits`` significant digits (``f"{x:.6g}"``), lists element by element
and mappings as sorted JSON; a ``ValueStyle`` says how the JSON literals read and whether mappings keep
non-ASCII characters. Two styles exist: ``JSON_STYLE`` (``null``, ``true``, ``false``, mappings as ``json.dumps``
writes them, ASCII) for one-line texts and Markdown (``certa show``, ``certa diff``, warnings, failed rules,
JUnit messages), and ``READER_STYLE`` (``–``, ``yes``, ``no``, mappings in their own characters) for the HTML
report. Each keeps the bytes its presentation printed before the two formatters became one.

It lives in the core, not in the presentation layer, because the core writes the warning lines a run prints
(``certa.engine.core.interpreter.warning_line``) and may not import the services. Nothing recorded in a ledger or a
certificate is written with it: changing it moves displayed text only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["ValueStyle", "JSON_STYLE", "READER_STYLE", "format_value"]


@dataclass(frozen=True)
class ValueStyle:
    """How ``format_value`` writes the JSON literals ``null``, ``true`` and ``false``, and whether a mapping's
    JSON escapes non-ASCII characters (``ascii``)."""

    null: str
    true: str
    false: str
    ascii: bool


JSON_STYLE = ValueStyle(null="null", true="true", false="false", ascii=True)
"""As JSON writes values: one-line texts and Markdown."""

READER_STYLE = ValueStyle(null="–", true="yes", false="no", ascii=False)
"""In words: the HTML report."""


def format_value(value: Any, *, digits: int = 6, style: ValueStyle = JSON_STYLE) -> str:
    """A compact human form of a JSON value: floats with ``digits`` significant digits (``nan``, ``inf`` as
    Python writes them), lists and tuples element by element, mappings as JSON with sorted keys, ``None`` and
    booleans as ``style`` says, anything else as ``str``."""
    if value is None:
        return style.null
    if isinstance(value, bool):
        return style.true if value else style.false
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, digits=digits, style=style) for v in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=style.ascii)
    return str(value)
