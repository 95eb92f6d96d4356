"""Reading an export's bytes within certa's input limits: files, JSON Lines, JSON documents, numbers in text.

Every failure is an ``InputError`` whose message starts with the export's name and the line or member, and
names the field: a hostile file (a device, a multi-gigabyte file, text nested a thousand levels deep,
``NaN``, a number spelt as text that is not one) is refused, never a traceback.

Limits are ``certa.engine.core.input_limits.InputLimits`` (``CERTA_INPUT_LIMITS`` raises them): ``bytes`` for an
export (checked from a file's size before it is read), ``text_bytes`` for a ZIP member and for JSON Lines read
through ``json`` (``json_lines``), ``rows`` for records, ``cell_bytes`` for one JSON line. JSON nested
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

A whole JSON document that may be large (an Inspect log or one of its samples, whose event transcript can be
hundreds of MB) is read as a ``JsonObject``: msgspec checks the whole text as JSON (after a UTF-8 check) and
keeps each field's text unparsed (``msgspec.Raw``, a view of the document's bytes); a reader parses only the
fields it reads, each through ``json`` as ``json_document`` would, so those values are ``json``'s own. A
document therefore costs its bytes plus the fields read, where ``json`` would build every field as Python
objects, about 10 to 30 bytes for each byte of text (``bench/hostile_inputs.py``).
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import msgspec
import numpy as np

from certa.engine.foundation.canonical import RecordColumns, canonical_records, canonical_sha256, sha256_hex
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits, read_input_file
from certa.engine.foundation.json_read import check_document_depth

__all__ = ["Source", "EXPORT", "read_source", "json_lines", "typed_json_lines", "typed_line_blocks", "Declined", "joined_numbers",
           "json_document", "JsonObject", "require_utf8",
           "strict_floats", "field_of", "number_of", "finite_number", "number_column", "value_digest", "value_digests",
           "Labels", "stated_text", "sha256_hex"]

Source = bytes | str | Path
"""An export given as its bytes, or as the path of a regular file."""

_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


EXPORT = "export"
"""The format ``InputLimits.check_size`` is told for an evaluator's export: not a text format, so its size is
bounded by ``bytes`` (its records are decoded a block of lines, or a member, at a time, and only the fields read
are kept); what the reference path builds as Python objects is bounded by ``text_bytes`` (``json_lines``)."""


def read_source(source: Source, name: str | None, limits: InputLimits) -> tuple[str, bytes]:
    """(the name messages use, the bytes) of an export: a path is read as a regular file within ``limits``
    (``bytes``, checked from its size before it is read); bytes are checked against the same limit. ``name``
    defaults to the file's name, or ``<bytes>``."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        label = name or "<bytes>"
        raw = bytes(source)
        limits.check_size(label, EXPORT, len(raw))
        return label, raw
    path = Path(source)
    label = name or path.name
    return label, read_input_file(label, path, EXPORT, limits)


def json_lines(where: str, raw: bytes, limits: InputLimits) -> tuple[list[dict[str, Any]], list[int]]:
    """The JSON objects of JSON Lines text, one per non-blank line, and their 1-based line numbers.

    Each line is bounded (``cell_bytes``) and parsed as ``json_document`` parses a document; the record count
    is bounded by ``rows``, and the text by ``text_bytes``, checked first: every record is built as Python
    objects, about 12 bytes for each byte of text."""
    limits.check(where, "text_bytes", len(raw), "the size in bytes of JSON Lines read record by record through "
                 "json (the reference reader, which an export the fast reader declines needs)")
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


class Declined(Exception):
    """The fast path (``typed_line_blocks``) does not take the export: the reference path must read it."""


def typed_json_lines(raw: bytes, limits: InputLimits,
                     decoder_for: Callable[[bytes], msgspec.json.Decoder | None]) -> tuple[list[Any], Sequence[int]] | None:
    """The records of JSON Lines text as msgspec decodes them, one per non-blank line, by the decoder (of a
    struct type) that ``decoder_for`` makes for the first such line, and their 1-based line numbers (a ``range``
    where no line is blank); ``None`` where ``json_lines`` must decide (``typed_line_blocks``)."""
    records: list[Any] = []
    numbers: list[Sequence[int]] = []
    try:
        for block, lines in typed_line_blocks(raw, limits, decoder_for):
            records += block
            numbers.append(lines)
    except Declined:
        return None
    return records, joined_numbers(numbers)


def joined_numbers(blocks: Sequence[Sequence[int]]) -> Sequence[int]:
    """The line numbers of several blocks' records (``typed_line_blocks``) as one sequence: a ``range`` where they
    are 1, 2, 3, ... (no blank line before a record: no list of a number a record)."""
    expected = 1
    for numbers in blocks:
        if type(numbers) is not range or (len(numbers) and (numbers.start != expected or numbers.step != 1)):
            return [number for numbers in blocks for number in numbers]
        expected += len(numbers)
    return range(1, expected)


def typed_line_blocks(raw: bytes, limits: InputLimits, decoder_for: Callable[[bytes], msgspec.json.Decoder | None]
                      ) -> Iterator[tuple[list[Any], Sequence[int]]]:
    """The records of JSON Lines text as msgspec decodes them, one per non-blank line, by the decoder (of a
    struct type) that ``decoder_for`` makes for the first such line, with their 1-based line numbers, a block of
    lines at a time, so that a reader keeps only what it takes of each record; ``Declined`` (raised at any point)
    where ``json_lines`` must decide: no record, text that is not UTF-8 (msgspec does not check the strings it
    skips), more records than ``rows``, a line over ``cell_bytes``, no decoder for the first line, a line msgspec
    refuses (not JSON, a field of another type, nesting beyond the recursion limit).

    The text is taken ``LINES_BLOCK`` bytes at a time, cut after a newline (which no UTF-8 character holds), and
    only that block is split into lines: the lines never cost a second copy of the file.

    Whatever it gives ``json_lines`` reads too, as the same values: both refuse ``NaN`` and ``Infinity``,
    both keep the last of duplicate keys, numbers are parsed to the same floats (msgspec's parser is correctly
    rounded, as ``float`` is). A line blank to ``bytes.strip`` is blank to ``str.strip``; a line blank only to
    the latter (a no-break space) is refused by msgspec, so it leads to ``json_lines`` as well."""
    decode: Callable[[bytes], Any] | None = None
    line = count = 0  # the lines before the block, the records in them
    for block, final in _line_blocks(raw):
        if not block.isascii():
            try:
                block.decode("utf-8")
            except UnicodeDecodeError:
                raise Declined from None
        lines = block.split(b"\n")
        if not final:
            lines.pop()  # the empty text after the block's last newline: the next block's first line
        if max(map(len, lines)) > limits.cell_bytes:
            raise Declined
        records: list[Any] = []
        blank: list[int] = []
        for number, text in enumerate(lines, start=line + 1):
            try:
                if decode is None:
                    if not text.strip():
                        raise msgspec.DecodeError
                    decoder = decoder_for(text)
                    if decoder is None:
                        raise Declined
                    decode = decoder.decode
                records.append(decode(text))
            except (msgspec.DecodeError, RecursionError):  # msgspec.ValidationError is a DecodeError
                if text.strip():
                    raise Declined from None
                blank.append(number)
        count += len(records)
        if count > limits.rows:
            raise Declined
        if not blank or blank[0] > line + len(records):  # blank lines only after the block's last record
            numbers: Sequence[int] = range(line + 1, line + len(records) + 1)
        else:
            skipped = set(blank)
            numbers = [number for number in range(line + 1, line + len(lines) + 1) if number not in skipped]
        line += len(lines)
        if records:
            yield records, numbers
    if not count:
        raise Declined


LINES_BLOCK = 1 << 23
"""Bytes of JSON Lines text split into lines at a time (``typed_json_lines``)."""


def _line_blocks(raw: bytes) -> Iterator[tuple[bytes, bool]]:
    """(block, whether it is the last) of ``raw``: about ``LINES_BLOCK`` bytes each, each but the last ending
    with a newline (a line longer than a block is one block)."""
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", start + LINES_BLOCK - 1) + 1
        if end == 0 or end >= len(raw):
            yield raw[start:], True
            return
        yield raw[start:end], False
        start = end


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
_DECODE_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_DECODE_ITEMS = msgspec.json.Decoder(list[msgspec.Raw]).decode
_DECODE_RAW = msgspec.json.Decoder(msgspec.Raw).decode
_UTF8_BLOCK = 1 << 22
_JSON_SPACE = re.compile(rb"[ \t\r\n]*")

REFERENCE_BYTES = 1 << 20
"""A document msgspec refuses is parsed again by ``json``, which words the error as ``json_document`` does (or
reads what only ``json`` reads: a lone surrogate escape such as ``"\\ud800"``), when it is at most this many
bytes; a larger one is refused in msgspec's words, so that no document, however it is damaged, costs ``json``'s
Python objects for more than this many bytes."""


def require_utf8(where: str, data: bytes | bytearray) -> None:
    """Refuse ``data`` that is not UTF-8 text as ``json_document`` does (``'utf-8' codec can't decode byte 0xff
    in position 12: invalid start byte``, the position counted from the start of ``data``), checking it a block
    at a time: never a decoded copy of the whole text."""
    if data.isascii():
        return
    view = memoryview(data)
    start = 0
    while start < len(view):
        block = view[start:start + max(_UTF8_BLOCK, 4)]  # 4 bytes hold a character: each block moves on
        final = start + len(block) == len(view)
        try:
            _, used = codecs.utf_8_decode(block, "strict", final)
        except UnicodeDecodeError as error:
            moved = UnicodeDecodeError(error.encoding, bytes(view[:start + error.end]), start + error.start,
                                       start + error.end, error.reason)
            raise InputError(f"{where}: not a JSON document ({moved})") from None
        start += used  # short of the block's end by an incomplete character, which the next block holds


class JsonObject:
    """A JSON object, each of whose fields is parsed only when a reader asks for it (module docstring).

    ``JsonObject.document`` reads a document; ``value`` parses one field as ``json_document`` parses a document
    (so its value is ``json``'s, duplicate keys resolved to the last as ``json`` does), ``object`` and ``objects``
    give a field that is itself an object, or an array of objects, as ``JsonObject`` s, and ``text_bytes`` the
    bytes of a field's JSON text, so that a reader can bound what it parses before it parses it."""

    __slots__ = ("where", "_fields", "_parsed")

    def __init__(self, where: str, fields: Mapping[str, Any], *, parsed: bool = False) -> None:
        self.where, self._fields, self._parsed = where, fields, parsed

    @classmethod
    def document(cls, where: str, data: bytes | bytearray) -> JsonObject:
        """The JSON object that is all of ``data``: refused as ``json_document`` refuses it (text that is not
        UTF-8, malformed JSON, ``NaN``, nesting beyond the decoder's recursion, another JSON value than an object),
        in ``json``'s words up to ``REFERENCE_BYTES``, in msgspec's beyond."""
        require_utf8(where, data)
        try:
            try:
                return cls(where, _DECODE_FIELDS(data))
            except msgspec.ValidationError:  # not an object: msgspec stopped at its first byte, json reads it all
                _DECODE_RAW(data)
                raise InputError(f"{where}: a JSON {_kind_of(data)} where a JSON object was expected") from None
        except RecursionError:
            raise InputError(f"{where}: not a JSON document (nested too deeply to read)") from None
        except msgspec.DecodeError as error:
            if len(data) > REFERENCE_BYTES:
                raise InputError(f"{where}: not a JSON document ({error})") from None
        return cls(where, json_document(where, bytes(data)), parsed=True)

    def __contains__(self, name: str) -> bool:
        return name in self._fields

    def text_bytes(self, name: str) -> int:
        """The bytes of field ``name``'s JSON text (0 when it is absent); of a document ``json`` read, the bytes of
        the value written back as compact JSON."""
        if name not in self._fields:
            return 0
        if self._parsed:
            return len(json.dumps(self._fields[name], ensure_ascii=False, separators=(",", ":"))
                       .encode("utf-8", "surrogatepass"))
        return len(self._fields[name])

    def value(self, name: str) -> Any:
        """Field ``name``'s value as ``json`` parses it (``KeyError`` when absent)."""
        field = self._fields[name]
        return field if self._parsed else self._parse(bytes(field))

    def _parse(self, text: bytes) -> Any:
        try:
            return _DECODE_DOCUMENT(text.decode("utf-8"))
        except RecursionError:
            raise InputError(f"{self.where}: not a JSON document (nested too deeply to read)") from None
        except ValueError as error:  # what msgspec reads and json does not: an integer of over 4,300 digits
            raise InputError(f"{self.where}: not a JSON document ({error})") from None

    def values(self, names: Sequence[str], limits: InputLimits, what: str, *, also: int = 0) -> dict[str, Any]:
        """``{name: value}`` of the fields ``names`` present, parsed as ``value`` parses one (in one call of the
        decoder), at most ``cell_bytes`` of JSON text in all with ``also`` bytes parsed beside them, checked before
        any is parsed (``what`` names them in the refusal)."""
        present = [name for name in names if name in self._fields]
        limits.check(self.where, "cell_bytes", also + sum(map(self.text_bytes, present)), what)
        if self._parsed:
            return {name: self._fields[name] for name in present}
        text = b",".join(_json_key(name) + bytes(self._fields[name]) for name in present)
        return self._parse(b"{" + text + b"}")

    def object(self, name: str) -> JsonObject | None:
        """Field ``name`` as a ``JsonObject``; ``None`` when it is absent or not a JSON object."""
        if name not in self._fields:
            return None
        field = self._fields[name]
        if self._parsed:
            return JsonObject(self.where, field, parsed=True) if type(field) is dict else None
        try:
            return JsonObject(self.where, _DECODE_FIELDS(field))
        except msgspec.ValidationError:
            return None

    def objects(self, name: str) -> Sequence[JsonObject | None] | None:
        """Field ``name``'s items, each a ``JsonObject`` named ``<where>, <name>[<index>]`` (``None`` for an item
        that is not a JSON object), made when it is taken (one at a time while they are iterated); ``None`` when
        the field is absent or not a JSON array."""
        if name not in self._fields:
            return None
        field = self._fields[name]
        if self._parsed:
            return None if type(field) is not list else _Items(f"{self.where}, {name}", field, parsed=True)
        try:
            return _Items(f"{self.where}, {name}", _DECODE_ITEMS(field))
        except msgspec.ValidationError:
            return None


class _Items(Sequence[JsonObject | None]):
    """The items of a JSON array (``msgspec.Raw`` each, or parsed values), each a ``JsonObject`` when taken."""

    def __init__(self, where: str, items: list[Any], *, parsed: bool = False) -> None:
        self.where, self.items, self.parsed = where, items, parsed

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> JsonObject | None: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[JsonObject | None]: ...

    def __getitem__(self, index: int | slice) -> JsonObject | None | Sequence[JsonObject | None]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        item, where = self.items[index], f"{self.where}[{index % len(self.items)}]"
        if self.parsed:
            return JsonObject(where, item, parsed=True) if type(item) is dict else None
        try:
            return JsonObject(where, _DECODE_FIELDS(item))
        except msgspec.ValidationError:
            return None


@functools.lru_cache(maxsize=256)
def _json_key(name: str) -> bytes:
    """``"name":`` as JSON text (a reader's field names are few: cached)."""
    return json.dumps(name).encode() + b":"


def _kind_of(data: bytes | bytearray) -> str:
    """The Python type name ``json`` gives the JSON value ``data`` that is not an object (msgspec has read it):
    list, str, bool, NoneType, int or float."""
    start = _JSON_SPACE.match(data).end()
    first = bytes(data[start:start + 1])
    kinds = {b"[": "list", b'"': "str", b"t": "bool", b"f": "bool", b"n": "NoneType"}
    if first in kinds:
        return kinds[first]
    return "float" if re.search(rb"[.eE]", data) else "int"


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


def value_digests(values: Sequence[Any], where: Callable[[int], str]) -> list[str]:
    """``[value_digest(value, where(i)) for i, value in enumerate(values)]``, of many items' values (their
    inputs or variables), written column by column where every value is an object of the same keys whose values
    are all text (``canonical.canonical_records``: the same RFC 8785 bytes, ``tests/foundation``), one by one
    otherwise; a value that cannot be hashed is named by ``value_digest``."""
    if values and type(values[0]) is dict and set(map(type, values)) == {dict}:
        keys = values[0].keys()
        if all(map(keys.__eq__, map(dict.keys, values))):
            columns = {key: [value[key] for value in values] for key in keys}
            if all(set(map(type, column)) == {str} for column in columns.values()):
                with contextlib.suppress(ValueError):  # text that is not UTF-8: named below, value by value
                    return [sha256_hex(text.encode("utf-8"))
                            for text in canonical_records(RecordColumns(columns))]
    return [value_digest(value, where(index)) for index, value in enumerate(values)]


class Labels(Sequence[str]):
    """``template`` filled with each of ``values`` (``Labels("line {}", numbers)``: ``line <n>`` of each record's
    line number; ``member {}`` of an archive's member names), made when it is taken: a message names one, where a
    list of them would cost a string a record."""

    def __init__(self, template: str, values: Sequence[object]) -> None:
        self.template, self.values = template, values

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return Labels(self.template, self.values[index])
        return self.template.format(self.values[index])


def stated_text(value: Any) -> str | None:
    """A value an export states (a version, a model name), as text: ``None`` stays ``None``, text stays as it
    is, anything else is its JSON text with sorted keys (``1.0``, ``{"dtype": "float32", ...}``)."""
    return value if value is None or type(value) is str else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
