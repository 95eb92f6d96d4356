"""CSV through Arrow's reader, on the files where it provably gives what Python's ``csv`` module gave.

``read_csv`` returns the stripped header and one ``CsvColumn`` per column (its cells, not yet stripped, as an
Arrow string array, or its float64 values with a way to read its cells when asked), or None when the file is
outside the proven subset; the caller then parses it with the Python reader, which also writes every error
message. The subset (checked on the raw bytes, in C speed):

* valid UTF-8 by Python's own decoder (a leading BOM is dropped by both readers), no NUL byte;
* no quote character ``"`` anywhere: no quoting, so a cell is exactly the bytes between commas and line
  ends, and ``\\r``, ``\\n`` and ``\\r\\n`` end a line in both readers; empty lines are skipped by both;
* every field shorter than 100,000 bytes (``MAX_FIELD_BYTES``, or the caller's lower ``max_field_bytes``:
  the Python reader then names the cell over the input's cell limit);
* Arrow's parse succeeds: every row has the header's number of cells (otherwise the Python reader
  reports the row).

The header is the first non-empty line, split at commas; Arrow reads the lines after it, inferring each
column's type as pandas-like readers do (booleans never: no cell can equal a true or false value holding
a NUL byte). A column keeps Arrow's numbers only where they are provably Python's ``float()`` of the stripped
cells, else it is read again as text (its numbers then come from ``certa.engine.core.table_formats.decimal``):

* ``float64``: Arrow converts a cell by trimming spaces and tabs (which ``str.strip()`` removes too) and
  parsing the rest with the parser of ``decimal.cast_float64``, so every finite value is ``float()``'s; a
  column holding a non-finite value (``nan``, ``inf``, ``1e999``) is read as text. An empty cell is null: NaN.
* ``int64``: a cell of decimal digits with an optional ``-``, or a hexadecimal ``0x1f``. The column is read as
  text when a hexadecimal cell is possible (an ``x`` or ``X`` in the data) or it holds a zero (``float('-0')``
  is -0.0); otherwise each value converts to the float64 nearest to it, ties to even, as ``float()`` of its
  digits does.
* ``string``: the cells (an empty cell is never null in a text column).
* anything else Arrow infers (dates, times, timestamps, an all-empty column): read as text.

Arrow widens a column's type when a later block needs it (``1`` then ``1.5`` or ``a``); if its typed read
fails, the file is read again with every column as text. A field's length is proven under the limit from the raw bytes (a comma
or line end in every aligned window of half the limit, so no run of the limit's length without one), else the
text read measures every cell.

Arrow parses blocks of ``BLOCK_BYTES`` on its CPU thread pool (``use_threads``); a cell never depends on the
block it was read in, and every typed value is checked as above, so the columns hold the same cells and
values whatever the block size and thread count. Cells are stripped (``strip``) of exactly the characters
Python's ``str.strip()`` removes (``PY_WHITESPACE``: every code point whose ``str.isspace()`` is true; pinned
by a test) when the caller first asks for text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from certa.engine.core.table_formats.arrow_memory import arrow_owned_copy
from certa.engine.core.table_formats.arrow_numpy import nulls_of, values_of

PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
MAX_FIELD_BYTES = 100_000
BLOCK_BYTES = 1 << 20
"""Bytes of CSV per block Arrow parses on one of its threads (Arrow's default); tests vary it."""
_BOM = b"\xef\xbb\xbf"
_PARSE = {"delimiter": ",", "quote_char": False, "escape_char": False, "double_quote": False,
          "newlines_in_values": False, "ignore_empty_lines": True}


@dataclass(frozen=True)
class CsvColumn:
    """One column: ``cells`` (Arrow strings, unstripped), or ``values`` (float64, NaN where a cell is empty)
    and ``read_cells``, which reads its unstripped cells from the file when they are asked for."""

    cells: pa.ChunkedArray | None = None
    values: np.ndarray | None = None
    read_cells: Callable[[], pa.ChunkedArray] | None = None


def _header_line(raw: bytes) -> tuple[bytes, int] | None:
    """(the first non-empty line, the offset after it), or None for a file of line ends only."""
    start = len(_BOM) if raw.startswith(_BOM) else 0
    while start < len(raw) and raw[start] in b"\r\n":
        start += 1
    if start == len(raw):
        return None
    ends = [i for i in (raw.find(b"\n", start), raw.find(b"\r", start)) if i >= 0]
    end = min(ends) if ends else len(raw)
    return raw[start:end], min(end + 1, len(raw))


def _fields_shorter_than(raw: bytes, limit: int) -> bool:
    """True if every field is shorter than ``limit`` bytes, proven by a comma or line end in every aligned
    window of ``limit // 2`` bytes (a run of ``limit`` bytes holds a whole window); False if not proven."""
    half = limit // 2
    if half < 4096:
        return False
    for start in range(0, len(raw) - half + 1, half):
        end = start + half
        if raw.find(b",", start, end) < 0 and raw.find(b"\n", start, end) < 0 and raw.find(b"\r", start, end) < 0:
            return False
    return True


def strip(cells: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Each cell stripped as ``str.strip()`` strips it."""
    return pc.utf8_trim(cells, characters=PY_WHITESPACE)


def _read(body: pa.Buffer, names: list[str], convert: pacsv.ConvertOptions) -> pa.Table | None:
    try:
        return pacsv.read_csv(body, read_options=pacsv.ReadOptions(column_names=names, use_threads=True,
                                                                   block_size=BLOCK_BYTES),
                              parse_options=pacsv.ParseOptions(**_PARSE), convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowException):
        return None


def _as_text(names: list[str]) -> pacsv.ConvertOptions:
    return pacsv.ConvertOptions(column_types={k: pa.string() for k in names}, include_columns=names,
                                null_values=[], strings_can_be_null=False, check_utf8=False)


def _read_text(body: pa.Buffer, names: list[str], name: str) -> pa.ChunkedArray:
    return _read(body, names, _as_text([name])).column(0)


def _typed_values(column: pa.ChunkedArray, hex_possible: bool) -> np.ndarray | None:
    """The column's float64 values if Arrow's type for it provably gives ``float()`` of its cells, else None."""
    kind = column.type
    if not (pa.types.is_float64(kind) or (pa.types.is_int64(kind) and not hex_possible)):
        return None
    nulls = nulls_of(column)
    if pa.types.is_int64(kind):
        ints = values_of(column)
        if ((ints == 0) if nulls is None else (ints == 0) & ~nulls).any():
            return None
        values = ints.astype(np.float64)
    else:
        values = values_of(column)
        if not (np.isfinite(values) if nulls is None else np.isfinite(values) | nulls).all():
            return None
        values = values.copy() if not values.flags.writeable else values
    if nulls is not None:
        values[nulls] = float("nan")
    return values


def read_csv(raw: bytes, *, max_field_bytes: int = MAX_FIELD_BYTES) -> tuple[list[str], list[CsvColumn]] | None:
    """``(header, columns)``, the header stripped and the cells not yet (``strip`` them), or None outside the
    proven subset (which includes a field of ``max_field_bytes`` or more)."""
    if b'"' in raw or b"\x00" in raw:
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    found = _header_line(raw)
    if found is None:
        return None
    line, offset = found
    if any(len(field) >= max_field_bytes for field in line.split(b",")):
        return None
    header = [cell.strip() for cell in line.decode("utf-8").split(",")]
    names = [f"f{i}" for i in range(len(header))]
    body = arrow_owned_copy(raw).slice(offset)  # no Arrow thread may ever hold the Python bytes (arrow_memory)
    typed = text = None
    if _fields_shorter_than(raw, max_field_bytes):
        typed = _read(body, names, pacsv.ConvertOptions(null_values=[""], strings_can_be_null=False,
                                                        true_values=["\x00"], false_values=["\x00\x00"],
                                                        check_utf8=False))
    if typed is None:
        text = _read(body, names, _as_text(names))
        if text is None or any(pc.max(pc.binary_length(column)).as_py() >= max_field_bytes
                               for column in text.columns if len(column)):
            return None
    read = typed if typed is not None else text
    if read.num_columns != len(names) or read.num_rows == 0:
        return None
    if typed is None:
        return header, [CsvColumn(cells=column) for column in text.columns]
    hex_possible = any(pa.types.is_int64(column.type) for column in typed.columns) and (
        raw.find(b"x", offset) >= 0 or raw.find(b"X", offset) >= 0)
    columns = [CsvColumn(cells=column) if pa.types.is_string(column.type) and not column.null_count else
               CsvColumn(values=values, read_cells=partial(_read_text, body, names, name))
               if (values := _typed_values(column, hex_possible)) is not None else None
               for name, column in zip(names, typed.columns)]
    again = [name for name, column in zip(names, columns) if column is None]
    if again:
        text = _read(body, names, _as_text(again))
        reread = dict(zip(again, text.columns))
        columns = [column or CsvColumn(cells=reread[name]) for name, column in zip(names, columns)]
    return header, columns
