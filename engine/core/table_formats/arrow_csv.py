"""CSV through Arrow's reader, on the files where it provably gives what Python's ``csv`` module gave.

``read_csv`` returns the stripped header and the columns' cells, not yet stripped, as Arrow string arrays,
or None when the file is outside the proven subset; the caller then parses it with the Python reader, which
also writes every error message. The subset (checked on the raw bytes, in C speed):

* valid UTF-8 by Python's own decoder (a leading BOM is dropped by both readers), no NUL byte;
* no quote character ``"`` anywhere: no quoting, so a cell is exactly the bytes between commas and line
  ends, and ``\\r``, ``\\n`` and ``\\r\\n`` end a line in both readers; empty lines are skipped by both;
* every field shorter than 100,000 bytes (``MAX_FIELD_BYTES``, or the caller's lower ``max_field_bytes``:
  the Python reader then names the cell over the input's cell limit);
* Arrow's parse succeeds: every row has the header's number of cells (otherwise the Python reader
  reports the row), with every column read as a string (no type inference: ``01`` stays ``01``).

Arrow parses blocks of ``BLOCK_BYTES`` on its CPU thread pool (``use_threads``); a cell never depends on the
block it was read in, so the columns (one chunk per block) hold the same cells whatever the block size and
thread count. Cells are stripped (``strip``) of exactly the characters Python's ``str.strip()`` removes
(``PY_WHITESPACE``: every code point whose ``str.isspace()`` is true; pinned by a test) when the caller
first asks for text: a number is converted from the unstripped cell when Arrow's cast accepts it, which it
does only for cells without whitespace (``engine.core.table_formats.decimal``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
MAX_FIELD_BYTES = 100_000
BLOCK_BYTES = 1 << 20
"""Bytes of CSV per block Arrow parses on one of its threads (Arrow's default); tests vary it."""
_BOM = b"\xef\xbb\xbf"


def _column_count(raw: bytes) -> int | None:
    body = raw[len(_BOM):] if raw.startswith(_BOM) else raw
    body = body.lstrip(b"\r\n")
    if not body:
        return None
    ends = [i for i in (body.find(b"\n"), body.find(b"\r")) if i >= 0]
    first_line = body[:min(ends)] if ends else body
    return first_line.count(b",") + 1


def strip(cells: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Each cell stripped as ``str.strip()`` strips it."""
    return pc.utf8_trim(cells, characters=PY_WHITESPACE)


def read_csv(raw: bytes, *, max_field_bytes: int = MAX_FIELD_BYTES
             ) -> tuple[list[str], list[pa.ChunkedArray]] | None:
    """``(header, columns)``, the header stripped and the columns' cells not yet (``strip`` them), or None
    outside the proven subset (which includes a field of ``max_field_bytes`` or more)."""
    if b'"' in raw or b"\x00" in raw:
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    n_cols = _column_count(raw)
    if n_cols is None:
        return None
    names = [f"f{i}" for i in range(n_cols)]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(raw),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=True, block_size=BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=",", quote_char=False, escape_char=False,
                                              double_quote=False, newlines_in_values=False,
                                              ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types={k: pa.string() for k in names},
                                                 null_values=[], strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False,
                                                 check_utf8=False),  # validated above, as Python does
        )
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    if table.num_columns != n_cols or table.num_rows == 0:
        return None
    for column in table.columns:
        if pc.max(pc.binary_length(column)).as_py() >= max_field_bytes:
            return None
    header = [column[0].as_py().strip() for column in table.columns]
    return header, [column.slice(1) for column in table.columns]
