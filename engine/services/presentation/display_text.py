"""User strings made safe to show: on a terminal, in Markdown (``certa show``) and in HTML (the report).

A spec's description, a reviewer's name, a note, an input or gate name, a string a stage output holds: any of
them may carry characters that change how the text around them looks rather than being seen themselves.
Bidirectional controls (U+202E "right-to-left override" makes ``approved`` display as ``devorppa``) and C0/C1
control characters (ESC starts a terminal escape sequence) are removed; raw HTML, backticks and table pipes
would turn a string into markup in a Markdown report. Everything here is for display only: recorded bytes
(certificates, ledger entries, ``--json`` output) keep the strings exactly as they were given.

- ``plain_text``: control and bidi characters removed (a newline and a tab become a space unless
  ``newlines``); for terminal lines (``certa verify``, ``list``, ``decisions``, ``diff``) and the HTML report
  (whose template engine escapes HTML itself).
- ``markdown_text``: ``plain_text``, then ``&``, ``<``, ``>`` as HTML entities and ``|`` and backticks
  backslash-escaped, so that the string is text in any Markdown renderer, also inside a table cell.
- ``markdown_code``: ``plain_text`` as one inline code span (a longer backtick fence when the string holds
  backticks; ``|`` escaped for table cells).
- ``markdown_strings``: every string (and key) of a JSON-like value through ``markdown_text``, for the stage
  output renderers that build Markdown from a certificate's outputs.
- ``json_display``: JSON text for a terminal (``--json``): the same JSON value, with each such character
  written as a ``\\uXXXX`` escape instead of removed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["plain_text", "markdown_text", "markdown_code", "markdown_strings", "json_display"]

_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"   # C0 controls but tab, newline, carriage return; DEL; C1 controls
    "\u061c\u200e\u200f"                       # Arabic letter mark, left-to-right and right-to-left marks
    "\u202a-\u202e\u2066-\u2069]"              # bidi embeddings, overrides and isolates
)
_LINE_BREAKS = re.compile("\r\n|[\r\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")      # not encodable: a lone surrogate would stop the output
# The two patterns below are compiled on first use (``re``'s cache), not at import: ``certa list`` needs neither.
_JSON_ESCAPED = f"{_INVISIBLE.pattern}|{_SURROGATE.pattern}|[\u2028\u2029]"
_MARKDOWN = {"&": "&amp;", "<": "&lt;", "|": "\\|", "`": "\\`", "\\": "\\\\"}
_MARKDOWN_SPECIAL = r"<(?=[A-Za-z/!?])|&(?=#|[A-Za-z][A-Za-z0-9]*;)|[|`\\]"
"""What can start markup in CommonMark text: ``<`` before a tag, comment or autolink (raw HTML), ``&`` before
an entity, ``|`` (a table cell), a backtick (a code span) and a backslash (which would escape what follows).
``<=``, ``a < b`` and ``R&D`` stay as they read."""


def plain_text(text: object, *, newlines: bool = False) -> str:
    """``text`` (any value, shown as ``str``) without control characters and bidi controls; line breaks
    (CR LF, CR, U+2028, U+2029) become newlines, kept when ``newlines`` (a paragraph) and else, like tabs,
    spaces."""
    shown = _SURROGATE.sub("\ufffd", _INVISIBLE.sub("", _LINE_BREAKS.sub("\n", str(text))))
    shown = shown.replace("\t", " ")
    return shown if newlines else shown.replace("\n", " ")


def markdown_text(text: object, *, newlines: bool = False) -> str:
    """``plain_text(text)`` as Markdown text that renders as it reads: a ``<`` that would open raw HTML and an
    ``&`` that would open an entity written as entities, ``|`` and backticks backslash-escaped (no table cell
    break, no code span)."""
    return re.sub(_MARKDOWN_SPECIAL, lambda m: _MARKDOWN[m.group()], plain_text(text, newlines=newlines))


def markdown_code(text: object) -> str:
    """``plain_text(text)`` as one Markdown code span (HTML is inert inside it); ``|`` is escaped, as a table
    cell needs, and a string holding backticks gets a longer fence."""
    shown = plain_text(text).replace("|", "\\|")
    runs = re.findall("`+", shown)
    if not runs:
        return f"`{shown}`"
    fence = "`" * (max(len(run) for run in runs) + 1)
    return f"{fence} {shown} {fence}"


def markdown_strings(value: Any) -> Any:
    """``value`` (JSON-like) with every string, dictionary keys included, through ``markdown_text``; other
    values unchanged."""
    if isinstance(value, str):
        return markdown_text(value)
    if isinstance(value, Mapping):
        return {markdown_text(key) if isinstance(key, str) else key: markdown_strings(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [markdown_strings(item) for item in value]
    return value


def json_display(text: str) -> str:
    """JSON ``text`` (``json.dumps(..., ensure_ascii=False)``) with every control, bidi, line-separator and
    lone surrogate character written as a ``\\uXXXX`` escape: the same JSON value, safe on a terminal. (Such
    characters occur only inside JSON strings, where the escape means the same character.)"""
    return re.sub(_JSON_ESCAPED, lambda m: f"\\u{ord(m.group()):04x}", text)
