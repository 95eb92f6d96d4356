"""JSON text read back as certa wrote it: RFC 8785's number model, with no heavy import (``certa.ledger.rows`` reads
payloads with it at ``certa list``); and JSON from elsewhere (a server's answers) as ``json.loads`` reads it, faster."""

from __future__ import annotations

import functools
import json
from itertools import accumulate
from typing import Any

__all__ = ["MAX_SAFE_INTEGER", "MAX_DOCUMENT_DEPTH", "MAX_DOCUMENT_BYTES", "parse_json", "parse_document",
           "check_document_depth", "json_value"]

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer every IEEE double below it represents exactly: RFC 8785 (I-JSON) integers stay within it."""


def parse_json(text: str | bytes) -> Any:
    """JSON text as Python values under RFC 8785's number model, so that what ``canonical_bytes`` wrote reads
    back to the same bytes: ``canonical_bytes(parse_json(canonical_bytes(x))) == canonical_bytes(x)``.

    RFC 8785 numbers are IEEE doubles. ``canonical_bytes`` writes an integer beyond ±(2**53 − 1) as a string,
    so an integer token beyond that range can only be a double written without a fraction (an integral float
    of magnitude 2**53 to 1e16, e.g. ``9007199254740992``): it is read as that float. ``json.loads`` alone
    would read it as an int, which ``canonical_bytes`` then writes as a string, and a recomputed digest of
    stored content (``verify``, ``replay``, ``verify-bundle``) would no longer match the recorded one.

    Text nested deeper than the decoder's recursion allows raises ``ValueError`` (not ``RecursionError``). It
    does not bound nesting below that (a scan costs half a parse: ``verify`` reads every payload); documents
    from outside the ledger go through ``parse_document``, which does."""
    try:
        return _DECODE_JSON(text.decode("utf-8") if isinstance(text, (bytes, bytearray)) else text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def json_value(text: str) -> Any:
    """``json.loads(text)``: the same value, or the same exception, in a third to a half of the time for a server's
    answer (msgspec's C decoder). msgspec decodes what it can; whatever it refuses, ``json.loads`` decides, so the
    result is ``json.loads``'s: both keep the last of duplicate keys and read integers of any size as ``int``, and
    msgspec's float parser is correctly rounded as ``float`` is (same double, the sign of ``-0.0`` kept); msgspec
    refuses the texts where the two could differ (``NaN``, ``Infinity``, a number beyond the double range, a lone
    surrogate escape), which ``json.loads`` then reads as it always did. Tested on those cases and on mutated
    answers (``tests/foundation/test_json_read.py``)."""
    decode, refused = _msgspec_decoder()
    try:
        return decode(text)
    except refused:
        return json.loads(text)


@functools.cache
def _msgspec_decoder() -> tuple[Any, tuple[type[BaseException], ...]]:
    """msgspec's decode and what it raises on a text it does not read (``DecodeError``, a ``ValueError`` only from
    msgspec 0.19; ``RecursionError`` beyond its depth)."""
    import msgspec  # imported on first use: a server's first answer, never at ``certa list``

    return msgspec.json.Decoder().decode, (msgspec.DecodeError, ValueError, RecursionError)


MAX_DOCUMENT_DEPTH = 75
"""The deepest nesting a certa document may have: 64 levels beyond the deepest certa writes (a bundle or an
attestation: a certificate, 10 levels, inside one object), far below the recursion of the JSON decoder and of
what reads the values (``canonical_bytes``, schema validation)."""

MAX_DOCUMENT_BYTES = 64 * 2**20
"""The longest certa document read: a certificate is well under a megabyte; a bundle or attestation adds a few
kilobytes."""


def parse_document(text: str | bytes, what: str) -> Any:
    """``parse_json`` of a document certa wrote and someone brings back (a bundle, checkpoint, attestation, a
    review's envelope), bounded before parsing: longer than ``MAX_DOCUMENT_BYTES`` or nested deeper than
    ``MAX_DOCUMENT_DEPTH`` raises ``ValueError`` naming ``what``, as text that is not JSON does."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{what} of {len(text)} bytes is longer than any certa writes ({MAX_DOCUMENT_BYTES})")
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{what} is not UTF-8 text ({error})") from None
    if text.count("[") + text.count("{") > MAX_DOCUMENT_DEPTH:
        depth = _nesting_depth(text)
        if depth > MAX_DOCUMENT_DEPTH:
            raise ValueError(f"{what} is nested {depth} levels deep; certa documents have at most "
                             f"{MAX_DOCUMENT_DEPTH}")
    return parse_json(text)


def check_document_depth(value: Any, what: str) -> None:
    """Raise ``ValueError`` if parsed JSON ``value`` nests deeper than ``MAX_DOCUMENT_DEPTH`` (a document that
    reached certa as values, not through ``parse_document``). Level by level, without recursion."""
    level, values = 0, [value]
    while True:
        containers = [item for item in values if type(item) is dict or type(item) is list]
        if not containers:
            return
        level += 1
        if level > MAX_DOCUMENT_DEPTH:
            raise ValueError(f"{what} is nested more than {MAX_DOCUMENT_DEPTH} levels deep, deeper than certa "
                             "documents")
        values = [item for container in containers
                  for item in (container.values() if type(container) is dict else container)]


_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_BRACKET_STEP = [0] * 256
for _byte in b"[{":
    _BRACKET_STEP[_byte] = 1
for _byte in b"]}":
    _BRACKET_STEP[_byte] = -1


def _nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text, brackets inside strings not counted (escaped
    backslashes and quotes removed first, then every other quote-separated part is a string). Any text gives a
    number: for text that is not JSON it means nothing, and the decoder rejects that text anyway."""
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(text.split('"')[::2]).encode("utf-8", "replace").translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_BRACKET_STEP.__getitem__, outside)), default=0)


def _json_integer(token: str) -> int | float:
    value = int(token)
    return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(token)


def _no_json_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number (RFC 8259; certa writes non-finite values as strings)")


_DECODE_JSON = json.JSONDecoder(parse_int=_json_integer, parse_constant=_no_json_constant).decode
"""One decoder for every ``parse_json`` call (``json.loads`` with hooks builds a new one per call)."""
