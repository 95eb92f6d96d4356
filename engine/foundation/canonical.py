"""Canonical JSON (RFC 8785, byte-identical to the ``rfc8785`` package) and the SHA-256 digests built on it.

Every hash certa records (``knobs_hash``, ``content_sha256``, ledger entry hashes) is the SHA-256 of
the RFC 8785 canonical bytes of a JSON value, so that any conforming implementation in any language
reproduces it. RFC 8785 rejects NaN/Infinity and integers beyond ±(2**53 − 1); ``to_jsonable`` maps
numpy scalars and arrays to plain JSON values and encodes non-finite floats as the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` so that a certificate never fails to serialise.

Speed: ``rfc8785.dumps`` is pure Python (a few microseconds a JSON node). ``canonical_bytes`` instead makes
one pass that does ``to_jsonable``'s conversions and writes every integral float below 1e21 as the integer
RFC 8785 prints for it (``1.0`` -> ``1``; below 1e16), then lets the C encoder of ``json`` write the text (sorted keys,
no spaces, no ASCII escaping: its string escapes are RFC 8785's), and reformats the few float tokens the two
write differently (those with an exponent, ``1e-05`` -> ``0.00001``, via ``rfc8785`` itself; looked for only
when the value holds a float). A list that begins with an int (token ids, as the endpoint client sends them) is
checked in one C pass (every item an int with ``bit_length()`` at most 53) and then left as it is: the C encoder
writes such items as RFC 8785 does (``bool`` as ``true``/``false``; an int subclass such as an ``IntEnum`` by its
integer value, which is ``to_jsonable``'s ``int()`` of it unless the subclass redefines ``__int__``). Anything it
cannot prove identical (a key with a character at or above U+E000, where UTF-16 and code-point order may
differ; text that is not valid UTF-8) goes through ``rfc8785.dumps`` unchanged. ``tests/foundation/test_perf_canonical.py``
checks the bytes against ``rfc8785.dumps`` on generated JSON.
A stored certificate's digests (``canonical_sha256_pair`` of plain JSON, as ``verify`` reads it) are written by
msgspec's C encoder instead wherever its text is RFC 8785's as it stands (``_canonical_pair_of_plain``): two to
three times as fast again, with no ``repr`` per float.

``canonical_records`` writes many objects with the same keys (a stage's per-decision ledger rows) column by
column: each column's tokens at once (numpy masks pick the floats whose form differs from ``repr``), then one
``%`` template per record. ``tests/foundation/test_canonical_records.py`` checks it against ``canonical_bytes``. It imports
numpy when first called, as ``to_jsonable`` avoids importing it: ledger readers start without numpy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import sys
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import rfc8785

from certa.engine.foundation.json_read import MAX_SAFE_INTEGER as _MAX_SAFE_INT
from certa.engine.foundation.json_read import parse_json  # re-exported: reading back what canonical_bytes wrote

__all__ = ["to_jsonable", "canonical_bytes", "parse_json", "canonical_sha256", "canonical_sha256_pair", "sha256_hex",
           "RecordColumns", "canonical_records", "is_utf8_text", "first_text_not_utf8", "TextNotUTF8"]


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    Tuples and numpy arrays become lists, numpy scalars become Python scalars, non-finite floats become
    the strings ``"NaN"``/``"Infinity"``/``"-Infinity"``, integers outside ±(2**53 − 1) become decimal
    strings, and mapping keys must be strings.
    """
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings (got {key!r})")
            out[key] = to_jsonable(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    np = sys.modules.get("numpy")  # numpy values exist only if numpy is loaded: importing it here would cost
    if np is not None and isinstance(value, np.ndarray):  # every ledger reader (certa list) its start-up
        return [to_jsonable(item) for item in value.tolist()]
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return bool(value)
    if isinstance(value, int) or (np is not None and isinstance(value, np.integer)):
        as_int = int(value)
        return as_int if abs(as_int) <= _MAX_SAFE_INT else str(as_int)
    if isinstance(value, float) or (np is not None and isinstance(value, np.floating)):
        as_float = float(value)
        if math.isnan(as_float):
            return "NaN"
        if math.isinf(as_float):
            return "Infinity" if as_float > 0 else "-Infinity"
        return as_float
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot represent {type(value).__name__} in a certificate: {value!r}")


_SAFE_INT_BITS = _MAX_SAFE_INT.bit_length()
"""53: an integer is within ±(2**53 − 1) exactly when its ``bit_length()`` is at most this."""
_AS_IS = frozenset({str, bool, type(None)})
"""The types ``_encodable`` returns unchanged (looked up before a call per member)."""
_INTEGRAL_FLOAT_LIMIT = 1e16
"""Below 1e16 an integral float's shortest round-trip digits (what RFC 8785 prints, without ``.0``) are its
exact integer value; above it ``repr`` has an exponent and the exponent path applies."""


def _encodable(value: Any, floats: list[float] | None = None) -> Any:
    """``to_jsonable(value)`` with every integral float of magnitude below 1e16 as an ``int`` (the digits
    RFC 8785 prints for it, and what the C JSON encoder prints for an int); only for encoding. ``floats``
    collects the floats it returns (without any, the C encoder's text needs no float rewritten)."""
    kind = type(value)
    if kind is str:
        return value
    if kind is float:
        if value.is_integer() and -_INTEGRAL_FLOAT_LIMIT < value < _INTEGRAL_FLOAT_LIMIT:
            return int(value)
        if value != value:
            return "NaN"
        if value in (math.inf, -math.inf):
            return "Infinity" if value > 0 else "-Infinity"
        if floats is not None:
            floats.append(value)
        return value
    if kind is dict:
        for key in value:
            if type(key) is not str and not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings (got {key!r})")
        return {key: (item if type(item) in _AS_IS else _encodable(item, floats)) for key, item in value.items()}
    if kind is list or kind is tuple:
        if not value or (type(value[0]) is int and _safe_integers(value)):
            return value  # e.g. token ids: their own encoding (the C encoder writes a tuple as a list)
        return [item if type(item) is str else _encodable(item, floats) for item in value]
    if kind is int:
        return value if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT else str(value)
    if kind is bool or value is None:
        return value
    plain = to_jsonable(value)  # numpy values, other mappings and sequences, subclasses: the general rules
    if type(plain) is float or type(plain) is dict or type(plain) is list:
        return _encodable(plain, floats)
    return plain


def _safe_integers(values: Sequence[Any]) -> bool:
    """Whether every item of ``values`` is an ``int`` (a ``bool`` too) within ±(2**53 − 1): one pass in C. Their
    RFC 8785 text is what the C encoder writes for them (``int.__repr__``, ``true``, ``false``), as for
    ``to_jsonable``'s ``int(item)``."""
    try:
        return max(map(int.bit_length, values)) <= _SAFE_INT_BITS
    except TypeError:  # an item that is not an int
        return False


_encode_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")).encode
_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]
"""The C string encoder behind ``_encode_json`` (``ensure_ascii=False``)."""
_FLOAT_TOKEN = re.compile(r"-?\d+(?:\.\d+)?e[+-]\d+|(?:(?<=[:,\[])|^)-?\d+\.0(?=[,\]}]|$)")
"""A float ``repr`` writes otherwise than RFC 8785: with an exponent (``1e-05``, ``1.5e+22``), or integral below 1e16
(``2.0``, ``-0.0``: RFC 8785 writes ``2``, ``0``); the latter only where a JSON value stands (after ``:``, ``,``,
``[`` or at the start, before ``,``, ``]``, ``}`` or at the end), as ``_encode_json`` writes values without spaces."""
_EXPONENT_END = re.compile(rb"e[-+]?\d+(?:[,\]}]|$)")
_INTEGRAL_END = re.compile(rb"\.0(?:[,\]}]|$)")
"""An exponent, an integral float's end where msgspec's text may hold one (``_may_hold_float_forms``; each begins
with a literal, which the regular expression engine scans for quickly; msgspec writes a lower-case ``e``)."""
_BELOW_HIGH_UTF8 = bytes(range(0xEE)) + bytes(range(0xF5, 0x100))
"""Deleted from UTF-8 text, they leave the lead bytes of its characters from U+E000 (``_HIGH_CHARACTER``; one
``bytes.translate``)."""
_EXPONENT_HINT = re.compile(r"\de[+-]\d")
_INTEGRAL_HINT = re.compile(r"\.0(?:[,\]}]|$)")
"""Where ``_FLOAT_TOKEN``'s integral form may end (a literal first: the regex engine scans for it quickly)."""
_STRING_TOKEN = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")')
_HIGH_CHARACTER = re.compile("[\ue000-\U0010ffff]")
"""Characters whose UTF-16 order (RFC 8785's key order) may differ from their code-point order (Python's)."""


def _rfc8785_float(match: re.Match[str]) -> str:
    return rfc8785.dumps(float(match.group(0))).decode("ascii")


def _fix_float_tokens(text: str) -> str:
    """Rewrite the float tokens ``repr`` writes otherwise than RFC 8785 (``_FLOAT_TOKEN``), outside JSON strings,
    in RFC 8785's form."""
    parts = _STRING_TOKEN.split(text)  # even indices: between strings; odd: string tokens, left as they are
    for i in range(0, len(parts), 2):
        if _EXPONENT_HINT.search(parts[i]) or _INTEGRAL_HINT.search(parts[i]):
            parts[i] = _FLOAT_TOKEN.sub(_rfc8785_float, parts[i])
    return "".join(parts)


@functools.cache
def _msgspec_encoders() -> tuple[Callable[[Any], bytes], Callable[[Any], bytes]] | None:
    """msgspec's JSON encoder with every object's keys sorted, and its MessagePack encoder (imported on first use:
    ledger readers such as ``certa list`` never hash content); None where msgspec cannot sort keys (``order``
    is newer than msgspec 0.18, the lowest version certa allows: the ``json`` path writes every digest there)."""
    import msgspec

    try:
        sorted_json = msgspec.json.Encoder(order="sorted")
    except TypeError:
        return None
    return sorted_json.encode, msgspec.msgpack.Encoder().encode


def _canonical_pair_of_plain(value: dict[str, Any], part: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """The canonical bytes of the plain JSON object ``value`` and of ``part``, ``value`` without some members
    (``canonical_sha256_pair``'s ``plain``), written by msgspec's C encoder (https://jcristharif.com/msgspec/) when
    its text is RFC 8785's as it stands; None otherwise (the ``json`` path decides). Two to ten times as fast on
    a stored certificate: the standard library's encoder calls ``float.__repr__`` per float, msgspec formats them
    itself.

    msgspec writes what RFC 8785 writes (section 3.2.2) for keys sorted by code point, ``null``, ``true``,
    ``false``, integers and strings (the same escapes as ``json``'s encoder without ASCII escaping: ``\\"``,
    ``\\\\``, ``\\b\\f\\n\\r\\t``, other control characters as ``\\u00xx``, nothing else escaped); a float by the
    shortest digits that read back to it, closest to it (as ``repr`` and ECMAScript's Number::toString, which
    RFC 8785 cites, choose them), laid out as ECMAScript does where it writes a plain decimal with a fraction.
    None where they may differ: another layout (an exponent: ``1e16``, ``5e-6``; an integral ``2.0``, ``-0.0``;
    a decimal below 1e-6: ``_may_hold_float_forms``), a non-finite float (msgspec writes ``null``; found in its
    MessagePack form, where a double with every exponent bit set begins ``cb 7f f`` or ``cb ff f``: any ``cb 7f``
    or ``cb ff`` counts), a character at or above U+E000 (key order), text that is not UTF-8, a value msgspec
    refuses. Each member of ``part`` is written as in ``value``, so what holds of ``value``'s text holds of
    ``part``'s. ``tests/foundation/test_perf_canonical.py`` checks the bytes against ``rfc8785.dumps``."""
    encoders = _msgspec_encoders()
    if encoders is None:
        return None
    encode_json, encode_msgpack = encoders
    try:
        text = encode_json(value)
        if _may_hold_float_forms(text) or (not text.isascii() and text.translate(None, _BELOW_HIGH_UTF8)):
            return None
        packed = encode_msgpack(value)
    except (TypeError, ValueError, OverflowError, RecursionError):  # a lone surrogate's UnicodeEncodeError too
        return None
    if b"\xcb\x7f" in packed or b"\xcb\xff" in packed:
        return None
    return text, encode_json(part)


def _may_hold_float_forms(text: bytes) -> bool:
    """Whether msgspec's JSON ``text`` may hold a float in a layout other than RFC 8785's
    (``_canonical_pair_of_plain``): a number token ends at ``,``, ``]``, ``}`` or the text's end, so an exponent is
    an ``e`` and digits before one of those, an integral token ``.0`` before one of those, and a decimal below 1e-6
    holds ``0.000000``. The same bytes in a string (rare: a hex digest's ``e`` is followed by a quote before any
    ``,``) only send the text to the ``json`` path."""
    return (_EXPONENT_END.search(text) is not None or _INTEGRAL_END.search(text) is not None
            or b"0.000000" in text)


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of ``value`` (after ``to_jsonable``): ``rfc8785.dumps(to_jsonable(value))``
    byte for byte, computed faster (see module docstring)."""
    floats: list[float] = []
    prepared = _encodable(value, floats)
    return _canonical_of_encodable(prepared, value, floats=bool(floats))


def _canonical_of_encodable(prepared: Any, value: Any, *, floats: bool = True) -> bytes:
    """The canonical bytes of ``value``, given ``prepared = _encodable(value)`` (or ``value`` itself when it is
    plain JSON: see ``canonical_sha256_pair``); ``floats=False``: ``prepared`` holds no float, so no float token
    is looked for."""
    text = _encode_json(prepared)
    if floats and ((("e-" in text or "e+" in text) and _EXPONENT_HINT.search(text))  # substring tests first
                   or (".0" in text and _INTEGRAL_HINT.search(text))):
        text = _fix_float_tokens(text)
    if text.isascii():
        return text.encode("ascii")
    if _HIGH_CHARACTER.search(text):
        return _reference(value)  # keys ordered by UTF-16 code units: the reference
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the reference refuses it (TextNotUTF8)
        return _reference(value)


class TextNotUTF8(rfc8785.CanonicalizationError):
    """A string to be canonicalised is not UTF-8 text: it holds a lone surrogate (a ``\\ud800``-``\\udfff``
    JSON escape with no pair, which Python's ``json`` reads into a string), which RFC 8785 cannot encode (the
    reference's own error, naming the text). ``where`` is its path in the value encoded
    (``first_text_not_utf8``), ``text`` the string."""

    def __init__(self, where: str, text: str) -> None:
        self.where, self.text = where, text
        super().__init__(f"text that is not UTF-8 at {where}: {ascii(text)[:80]} holds a lone surrogate (a "
                         "\\ud800-\\udfff escape with no pair)")


def _reference(value: Any) -> bytes:
    """``rfc8785.dumps(to_jsonable(value))``; its refusal of text that is not UTF-8 is a ``TextNotUTF8`` naming
    the text."""
    plain = to_jsonable(value)
    try:
        return rfc8785.dumps(plain)
    except rfc8785.CanonicalizationError:
        found = first_text_not_utf8(plain)
        if found is None:
            raise
        raise TextNotUTF8(*found) from None


def canonical_sha256_pair(value: Mapping[str, Any], without: tuple[str, ...], *,
                          plain: bool = False) -> tuple[str, str]:
    """(``canonical_sha256(value)``, ``canonical_sha256`` of ``value`` without the members ``without``), each
    member encoded once (a certificate's ``content_sha256`` and ``results_sha256``).

    An RFC 8785 object is ``{`` + the members ``"key":value`` in key order, joined by ``,`` + ``}``, and a
    member's text does not depend on its neighbours; so both documents are joined from the same member texts.
    With a key outside ASCII (whose UTF-16 order may differ from Python's) both are encoded whole instead.

    ``plain``: ``value`` holds JSON values only (dicts with string keys, lists, strings, bools, None, ints
    within ±(2**53 − 1) and finite floats), as ``parse_json`` and ``to_jsonable`` return them: both documents are
    encoded whole by msgspec where its text is RFC 8785's (``_canonical_pair_of_plain``); elsewhere the walk that
    prepares other values (``_encodable``) is skipped, and integral floats are rewritten in the encoded text
    instead (``_fix_float_tokens``).
    """
    prepared = value if plain else _encodable(value)
    if type(prepared) is not dict:
        raise TypeError(f"expected a JSON object (got {type(value).__name__})")
    fast = _canonical_pair_of_plain(prepared, {key: item for key, item in prepared.items() if key not in without}) \
        if plain else None
    if fast is not None:
        return sha256_hex(fast[0]), sha256_hex(fast[1])
    if not all(key.isascii() for key in prepared):
        prepared_part = {key: item for key, item in prepared.items() if key not in without}
        rest = {key: item for key, item in value.items() if key not in without}
        return (sha256_hex(_canonical_of_encodable(prepared, value)),
                sha256_hex(_canonical_of_encodable(prepared_part, rest)))
    members = [(key, _canonical_of_encodable(key, key) + b":" + _canonical_of_encodable(prepared[key], value[key]))
               for key in sorted(prepared)]
    whole = b"{" + b",".join(text for _, text in members) + b"}"
    part = b"{" + b",".join(text for key, text in members if key not in without) + b"}"
    return sha256_hex(whole), sha256_hex(part)


@dataclass(frozen=True)
class RecordColumns:
    """Many JSON objects with the same keys, held as columns: record i is ``{name: columns[name][i], ...,
    **constants}``. A column is a numpy array, a sequence, or a nested ``RecordColumns`` (an object-valued
    member); all columns are equally long."""

    columns: Mapping[str, Any]
    constants: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        lengths = {column.rows if isinstance(column, RecordColumns) else len(column)
                   for column in self.columns.values()}
        if len(lengths) != 1:
            raise ValueError(f"a RecordColumns needs columns of one length (got lengths {sorted(lengths)})")
        return lengths.pop()


def canonical_records(records: RecordColumns) -> list[str]:
    """The RFC 8785 text of every record: ``canonical_bytes(record_i).decode()`` for each i, written column
    by column and joined by one ``%`` template (members in RFC 8785 order, constants written into it once)."""
    rows = records.rows
    template, args = _record_template(records)
    if not args:
        return [template % ()] * rows
    return list(map(template.__mod__, zip(*args)))


def _record_template(records: RecordColumns) -> tuple[str, list[Sequence[Any]]]:
    """(``%`` template of one record, its per-row arguments column by column, in template order)."""
    both = set(records.columns) & set(records.constants)
    if both:
        raise ValueError(f"keys {sorted(both)} are both columns and constants")
    members, args = [], []
    for key in sorted([*records.columns, *records.constants], key=_utf16_order):
        if key in records.constants:
            spec = _escape_percent(_canonical_text(records.constants[key]))
        elif isinstance(records.columns[key], RecordColumns):
            spec, nested = _record_template(records.columns[key])
            args += nested
        else:
            spec, values = _column_format(records.columns[key])
            args += [] if values is None else [values]
        members.append(_escape_percent(_canonical_text(key)) + ":" + spec)
    return "{" + ",".join(members) + "}", args


def _utf16_order(key: str) -> bytes:
    """RFC 8785's member order: keys compared as UTF-16 code units."""
    if type(key) is not str:
        raise TypeError(f"JSON object keys must be strings (got {key!r})")
    return key.encode("utf-16-be")


def _canonical_text(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def _escape_percent(text: str) -> str:
    return text.replace("%", "%%")


def _column_format(column: Any) -> tuple[str, Sequence[Any] | None]:
    """(``%`` spec, its per-row arguments) of one column: ``%s`` of floats where RFC 8785 writes ``repr``, ``%d``
    of safe integers, ``%s`` of tokens made here otherwise; a numeric column of one value is that value's
    token, written into the template (no arguments)."""
    import numpy as np

    if not isinstance(column, np.ndarray):
        return _cells_format(list(column))
    kind = column.dtype.kind
    values = column.astype(np.float64, copy=False) if kind == "f" else column
    if kind in "fiub" and values.size and (values == values.flat[0]).all():
        return _escape_percent(_canonical_text(values.flat[0])), None
    if kind == "f":
        return _float_format(values)
    if kind == "b":
        return "%s", np.array(["false", "true"], dtype=object)[values.astype(np.intp)].tolist()
    if kind in "iu" and (values.size == 0 or -_MAX_SAFE_INT <= values.min() <= values.max() <= _MAX_SAFE_INT):
        return "%d", values.tolist()
    return _cells_format(values.tolist())


def _cells_format(cells: list[Any]) -> tuple[str, Sequence[Any] | None]:
    """``_column_format`` of Python values: strings and None, floats and None, or integers, column-wise;
    anything else (objects, mixed types) one cell at a time through ``canonical_bytes``."""
    types = set(map(type, cells))
    if types <= {str, type(None)}:
        return "%s", _text_tokens(cells)
    if types <= {float, type(None)}:
        return _nullable_float_format(cells)
    if types == {int} and -_MAX_SAFE_INT <= min(cells) and max(cells) <= _MAX_SAFE_INT:
        return "%d", cells
    return "%s", [_canonical_text(cell) for cell in cells]


def _text_tokens(cells: list[str | None]) -> list[str]:
    """Tokens of strings and None, each distinct string encoded once (all of them in place when every cell
    differs)."""
    distinct = set(cells)
    has_none = None in distinct
    distinct.discard(None)
    if not has_none and len(distinct) == len(cells):
        return _string_tokens(cells)  # type: ignore[arg-type]
    strings = [cell for cell in distinct if cell is not None]
    table: dict[str | None, str] = dict(zip(strings, _string_tokens(strings)))
    table[None] = "null"
    return list(map(table.__getitem__, cells))


def _string_tokens(strings: list[str]) -> list[str]:
    """``json``'s C string encoder writes RFC 8785's escapes (see the module docstring); a string that UTF-8
    cannot encode (a lone surrogate) goes through the reference, which rejects it."""
    tokens = list(map(_encode_string, strings))
    if "".join(tokens).isascii():
        return tokens
    return [token if is_utf8_text(token) else _reference(text).decode("utf-8") for text, token in zip(strings, tokens)]


def is_utf8_text(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (it holds no lone surrogate), as RFC 8785 text must."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_text_not_utf8(value: Any, path: str = "") -> tuple[str, str] | None:
    """(where, text) of the first string of the plain JSON ``value`` (a key or a value) that is not UTF-8 text
    (it holds a lone surrogate, which a JSON escape such as ``\\ud800`` can put in a parsed string and RFC 8785
    refuses), ``where`` a path such as ``stages.acc.sources[0].models[2].value``; None when every string is. For
    naming the string after canonicalisation failed: it walks the whole value."""
    if isinstance(value, str):
        return None if is_utf8_text(value) else (path or "(top)", value)
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and not is_utf8_text(key):
                return where, key
            found = first_text_not_utf8(item, where)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = first_text_not_utf8(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _nullable_float_format(cells: list[float | None]) -> tuple[str, Sequence[Any]]:
    """``_float_format`` of the floats among ``cells``, ``null`` for each None (e.g. a missing lane value)."""
    import numpy as np

    values = np.array(cells, dtype=object)
    present = ~np.equal(values, None)  # type: ignore[call-overload]  # elementwise 'is None' over objects
    spec, floats = _float_format(values[present].astype(np.float64))
    out = np.full(len(cells), "null", dtype=object)
    out[present] = floats
    return spec, out.tolist()


_NONFINITE_TOKENS = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def _float_format(values: Any) -> tuple[str, Sequence[Any]]:
    """``%s`` of the floats themselves where RFC 8785's form is ``repr`` (finite, not integral, between 1e-4 and
    1e16 in magnitude), and of tokens elsewhere: integral values as integers (no ``.0``), values ``repr`` writes
    with an exponent through ``rfc8785`` itself (rare), non-finite ones as ``to_jsonable``'s strings."""
    import numpy as np

    magnitude = np.abs(values)
    finite = np.isfinite(values)
    integral = finite & (values == np.trunc(values)) & (magnitude < _INTEGRAL_FLOAT_LIMIT)
    exponent = finite & ~integral & ((magnitude < 1e-4) | (magnitude >= _INTEGRAL_FLOAT_LIMIT))
    if not (integral.any() or exponent.any() or not finite.all()):
        return "%s", values.tolist()  # str(float) is repr(float)
    cells = values.astype(object)
    cells[integral] = list(map(int.__repr__, values[integral].astype(np.int64).tolist()))
    cells[exponent] = [rfc8785.dumps(x).decode("ascii") for x in values[exponent].tolist()]
    cells[~finite] = [_NONFINITE_TOKENS[repr(x)] for x in values[~finite].tolist()]
    return "%s", cells.tolist()


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(value: Any) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON of ``value``."""
    return sha256_hex(canonical_bytes(value))
