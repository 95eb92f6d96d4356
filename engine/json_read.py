"""JSON text read back as certa wrote it: RFC 8785's number model, with no heavy import (``ledger.rows`` reads
payloads with it at ``certa list``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_SAFE_INTEGER", "parse_json"]

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer every IEEE double below it represents exactly: RFC 8785 (I-JSON) integers stay within it."""


def parse_json(text: str | bytes) -> Any:
    """JSON text as Python values under RFC 8785's number model, so that what ``canonical_bytes`` wrote reads
    back to the same bytes: ``canonical_bytes(parse_json(canonical_bytes(x))) == canonical_bytes(x)``.

    RFC 8785 numbers are IEEE doubles. ``canonical_bytes`` writes an integer beyond ±(2**53 − 1) as a string,
    so an integer token beyond that range can only be a double written without a fraction (an integral float
    of magnitude 2**53 to 1e16, e.g. ``9007199254740992``): it is read as that float. ``json.loads`` alone
    would read it as an int, which ``canonical_bytes`` then writes as a string, and a recomputed digest of
    stored content (``verify``, ``replay``, ``verify-bundle``) would no longer match the recorded one."""
    return _DECODE_JSON(text.decode("utf-8") if isinstance(text, (bytes, bytearray)) else text)


def _json_integer(token: str) -> int | float:
    value = int(token)
    return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(token)


def _no_json_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number (RFC 8259; certa writes non-finite values as strings)")


_DECODE_JSON = json.JSONDecoder(parse_int=_json_integer, parse_constant=_no_json_constant).decode
"""One decoder for every ``parse_json`` call (``json.loads`` with hooks builds a new one per call)."""
