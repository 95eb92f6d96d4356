"""Reading an export's bytes within certa's input limits: files, JSON Lines, JSON documents, numbers in text.

Every failure is an ``InputError`` whose message starts with the export's name and the line or member, and
names the field: a hostile file (a device, a multi-gigabyte file, text nested a thousand levels deep,
``NaN``, a number spelt as text that is not one) is refused, never a traceback.

Limits are ``certa.engine.core.input_limits.InputLimits`` (``CERTA_INPUT_LIMITS`` raises them): ``bytes`` and
``text_bytes`` for a file or ZIP member, ``rows`` for records, ``cell_bytes`` for one JSON line. JSON nested
beyond the decoder's recursion limit is refused; a value that is hashed (and so walked) is bounded by
``certa.engine.foundation.json_read.MAX_DOCUMENT_DEPTH``.

JSON Lines have two readers. ``json_lines`` is the reference: every line becomes Python objects through
``json``, and a reader checks each record's fields one by one, with a message naming the line and the field.
``typed_json_lines`` is the fast path: msgspec decodes each line into a typed struct of only the fields a
reader needs (the other fields are parsed and checked as JSON, never built), about ten times faster on the
~1 KB records evaluators write. It decides nothing: on anything it does not take (a wrong type, an over-long
line, text msgspec refuses but ``json`` reads, such as a lone surrogate escape), it answers ``None`` and the
reader reads the export through ``json_lines``, whose checks decide the error. Both give the same records
(``tests/core/evidence/test_fast_path.py``).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from certa.engine.foundation.canonical import canonical_sha256, sha256_hex
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits, read_input_file
from certa.engine.foundation.json_read import check_document_depth

__all__ = ["Source", "read_source", "json_lines", "typed_json_lines", "json_document", "strict_floats", "field_of",
           "number_of", "finite_number", "number_column", "value_digest", "stated_text", "sha256_hex"]

Source = bytes | str | Path
"""An export given as its bytes, or as the path of a regular file."""

_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def read_source(source: Source, name: str | None, limits: InputLimits) -> tuple[str, bytes]:
    """(the name messages use, the bytes) of an export: a path is read as a regular file within ``limits``
    (text formats: ``text_bytes``); bytes are checked against the same limits. ``name`` defaults to the
    file's name, or ``<bytes>``."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        label = name or "<bytes>"
        raw = bytes(source)
        limits.check_size(label, "jsonl", len(raw))
        return label, raw
    path = Path(source)
    label = name or path.name
    return label, read_input_file(label, path, "jsonl", limits)


def json_lines(where: str, raw: bytes, limits: InputLimits) -> tuple[list[dict[str, Any]], list[int]]:
    """The JSON objects of JSON Lines text, one per non-blank line, and their 1-based line numbers.

    Each line is bounded (``cell_bytes``) and parsed as ``json_document`` parses a document; the record count
    is bounded by ``rows``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad_line = raw.count(b"\n", 0, error.start) + 1
        raise InputError(f"{where}, line {bad_line}: not UTF-8 text ({error.reason}); "
                         "export the file as UTF-8") from None
    lines = text.split("\n")
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    limits.check(where, "rows", len(numbered), "the number of records")
    records: list[dict[str, Any]] = []
    for number, line in numbered:
        if len(line) > limits.cell_bytes:
            limits.check(f"{where}, line {number}", "cell_bytes", len(line.encode("utf-8")),
                         "the line's length in bytes")
        try:
            record = _DECODE_DOCUMENT(line)
        except RecursionError:
            raise InputError(f"{where}, line {number}: not a JSON object (nested too deeply to read)") from None
        except ValueError as error:
            raise InputError(f"{where}, line {number}: not a JSON object ({error})") from None
        if type(record) is not dict:
            raise InputError(f"{where}, line {number}: a JSON {type(record).__name__} where a JSON object "
                             "(one record per line) was expected")
        records.append(record)
    return records, [number for number, _ in numbered]


def typed_json_lines(raw: bytes, limits: InputLimits,
                     decoder_for: Callable[[bytes], msgspec.json.Decoder | None]) -> tuple[list[Any], list[int]] | None:
    """The records of JSON Lines text as msgspec decodes them, one per non-blank line, by the decoder (of a
    struct type) that ``decoder_for`` makes for the first such line, and their 1-based line numbers; ``None``
    where ``json_lines`` must decide: no record, text that is not UTF-8 (msgspec does not check the strings it
    skips), more records than ``rows``, a line over ``cell_bytes``, no decoder for the first line, a line
    msgspec refuses (not JSON, a field of another type, nesting beyond the recursion limit).

    Whatever it returns ``json_lines`` reads too, as the same values: both refuse ``NaN`` and ``Infinity``,
    both keep the last of duplicate keys, numbers are parsed to the same floats (msgspec's parser is correctly
    rounded, as ``float`` is). A line blank to ``bytes.strip`` is blank to ``str.strip``; a line blank only to
    the latter (a no-break space) is refused by msgspec, so it leads to ``json_lines`` as well."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    lines = raw.split(b"\n")
    numbered = [number for number, line in enumerate(lines, start=1) if line.strip()]
    if not numbered or len(numbered) > limits.rows or max(map(len, lines)) > limits.cell_bytes:
        return None
    decoder = decoder_for(lines[numbered[0] - 1])
    if decoder is None:
        return None
    decode = decoder.decode
    try:
        return [decode(lines[number - 1]) for number in numbered], numbered
    except (msgspec.DecodeError, RecursionError):  # msgspec.ValidationError is a DecodeError
        return None


def json_document(where: str, raw: bytes) -> dict[str, Any]:
    """A JSON object that is a whole export (Inspect's JSON log or one sample of a ``.eval``, lm-eval's results
    file), parsed under RFC 8259 (no ``NaN``); text nested beyond the decoder's recursion is an ``InputError``.
    Values taken from it and hashed are bounded by ``value_digest``. Integers are read as Python's ``json``
    reads them (``certa.engine.foundation.json_read``'s number model is for certa's own documents, and its integer hook would
    make a sample's many integers cost a Python call each)."""
    try:
        document = _DECODE_DOCUMENT(raw.decode("utf-8"))
    except RecursionError:
        raise InputError(f"{where}: not a JSON document (nested too deeply to read)") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(f"{where}: not a JSON document ({error})") from None
    if type(document) is not dict:
        raise InputError(f"{where}: a JSON {type(document).__name__} where a JSON object was expected")
    return document


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number (RFC 8259)")


_DECODE_DOCUMENT = json.JSONDecoder(parse_constant=_refuse_constant).decode


def field_of(record: dict[str, Any], name: str, kinds: tuple[type, ...], where: str) -> Any:
    """``record[name]``, which must exist and be exactly one of ``kinds`` (``bool`` is not ``int``)."""
    if name not in record:
        raise InputError(f"{where}: field '{name}' is missing")
    value = record[name]
    if type(value) not in kinds:
        expected = " or ".join(kind.__name__ if kind is not dict else "object" for kind in kinds)
        raise InputError(f"{where}: field '{name}' must be {expected} (got {_shown(value)})")
    return value


def number_of(value: Any, where: str) -> float:
    """A finite JSON number (``true``/``false`` read as 1 and 0) as a float."""
    if type(value) is bool:
        return float(value)
    if type(value) not in (int, float) or not finite_number(value):
        raise InputError(f"{where} must be a finite number (got {_shown(value)})")
    return float(value)


def finite_number(value: int | float) -> bool:
    """``value`` is a finite number that float64 holds (an integer beyond it is not)."""
    try:
        return math.isfinite(value)  # math: a numpy ufunc costs µs a call
    except OverflowError:
        return False


def number_column(values: Sequence[Any], where: Callable[[int], str]) -> np.ndarray:
    """``[number_of(value, where(i)) for i, value in enumerate(values)]`` as float64, checked for the whole
    column at once where every value is a finite number (the first bad value is reported by ``number_of``)."""
    if set(map(type, values)) <= {float, int, bool}:
        with contextlib.suppress(OverflowError):  # an integer beyond float64: number_of names it
            column = np.fromiter(map(float, values), dtype=np.float64, count=len(values))
            if np.isfinite(column).all():
                return column
    return np.array([number_of(value, where(index)) for index, value in enumerate(values)], dtype=np.float64)


def strict_floats(texts: Sequence[Any], where: Callable[[int], str]) -> np.ndarray:
    """Numbers that an export stores as text (lm-eval's ``resps``), as float64: each must be a string of a
    plain decimal (``-12.5``, ``3e-4``) with a finite value; ``where(i)`` names the item of a bad one."""
    for index, text in enumerate(texts):
        if type(text) is not str or _PLAIN_NUMBER.fullmatch(text) is None:
            raise InputError(f"{where(index)} must be a number written as text (got {_shown(text)})")
    values = np.array(texts, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise InputError(f"{where(int(bad[0]))} is {texts[bad[0]]!r}, not finite ({bad.size} such value(s))")
    return values


def value_digest(value: Any, where: str) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON of a parsed value (an item's input or variables): equal
    values give equal digests whatever their key order or spacing. Nesting is bounded first."""
    try:
        check_document_depth(value, where)
        return canonical_sha256(value)
    except ValueError as error:
        raise InputError(f"{where}: {error}") from None


def stated_text(value: Any) -> str | None:
    """A value an export states (a version, a model name), as text: ``None`` stays ``None``, text stays as it
    is, anything else is its JSON text with sorted keys (``1.0``, ``{"dtype": "float32", ...}``)."""
    return value if value is None or type(value) is str else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
