"""Text cells to float64, bit for bit what ``numpy.ndarray.astype(float64)`` gives on Python strings.

First, one vectorised pass (``cast_float64``): Arrow's ``cast(string -> float64)`` of every non-empty cell,
empty cells NaN (``float('nan')``, the value of the empty cell before this module existed). Arrow parses with
a correctly rounded algorithm (fast_float: Eisel-Lemire with an exact big-decimal fallback), as CPython's
``float()`` does (David Gay's ``strtod``); both give the float64 nearest to the decimal value, ties to even,
overflow to ±inf and underflow through the subnormals to ±0. The cast accepts a cell only if it is a plain
decimal ``[+-]?(digits[.digits*] | .digits)([eE][+-]?digits)?`` (no whitespace, no underscores, no
non-ASCII digits), which ``float()`` reads to the same bits, or a ``nan``/``inf``/``infinity`` spelling
(``nan(...)`` included), which gives a non-finite value: so every finite value of a successful cast is
``float()``'s, and the few non-finite ones are converted again by Python's ``float()`` (which refuses
``nan(1)``). Pinned exhaustively for every string of up to 4 characters over digits, signs, point, exponent
letters, the letters of ``nan`` and ``inf``, ``(``, ``x``, ``_`` and a space, and by property tests on long
mantissas, halfway cases, exponents and subnormals (``tests/core/test_tables_arrow.py``). Long columns are
cast in row ranges on ``pyarrow.cpu_count()`` threads (the cast releases the GIL); a value depends only on
its cell, so the result does not depend on the split.

If the cast refuses a cell (``1.2.3``, `` 1``, ``1_000``, ``١٢٣``), the cells are sorted into three kinds:

* empty: NaN;
* cells made only of the characters ``0-9 + - . e E``: cast by Arrow, over which alphabet it accepts exactly
  the plain decimals, as ``float()`` does. If the cast fails (a cell such as ``1.2.3``), the cells matching
  that grammar (RE2) are cast and the others go to the last kind;
* everything else (``nan``/``inf`` spellings, ``1_000``, non-ASCII digits, bad cells): Python's own
  conversion, cell by cell, exactly the code that converted every cell before.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from certa.engine.core.table_formats.arrow_numpy import array_of, text_scalar, values_of

PLAIN_DECIMAL = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"


def _python_float64(cells: list[str]) -> np.ndarray:
    """Python's conversion of the cells, as ``Table.numeric`` did it on every cell (ValueError if one is bad)."""
    arr = np.empty(len(cells), dtype=object)
    arr[:] = ["nan" if c == "" else c for c in cells]
    return arr.astype(np.float64)


def _is_float(cell: str) -> bool:
    try:
        float(cell or "nan")
    except ValueError:
        return False
    return True


_DECIMAL_ALPHABET = b"0123456789+-.eE"
_DECIMAL_BYTES = np.zeros(256, dtype=bool)
_DECIMAL_BYTES[np.frombuffer(_DECIMAL_ALPHABET, dtype=np.uint8)] = True


def _offsets_and_bytes(cells: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The cells' offsets (``len + 1``, absolute) and the whole data buffer, without copies."""
    _, offsets_buf, data_buf = cells.buffers()
    width = np.int64 if pa.types.is_large_string(cells.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width)[cells.offset:cells.offset + len(cells) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return offsets.astype(np.int64), data


def _decimal_alphabet_only(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Per cell: every byte is one of ``0-9 + - . e E``."""
    region = data[offsets[0]:offsets[-1]]
    ok = np.ones(len(offsets) - 1, dtype=bool)
    if not region.tobytes().translate(None, _DECIMAL_ALPHABET):  # the common case, at memory speed
        return ok
    foreign = np.flatnonzero(~_DECIMAL_BYTES[region])
    ok[np.searchsorted(offsets, foreign + offsets[0], side="right") - 1] = False
    return ok


PARALLEL_ROWS = 1 << 17
"""Rows per thread below which a column is cast on the calling thread alone; tests lower it."""


def _cast_ranges(cells: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Arrow's cast of every cell to float64 (``ArrowInvalid`` if it refuses one), in row ranges on threads."""
    n = len(cells)
    parts = max(1, min(pa.cpu_count(), n // PARALLEL_ROWS))
    bounds = [n * i // parts for i in range(parts + 1)]
    values = np.empty(n, dtype=np.float64)

    def cast(i: int) -> None:
        row = bounds[i]
        part = cells.slice(row, bounds[i + 1] - row)
        for chunk in part.chunks if isinstance(part, pa.ChunkedArray) else [part]:  # one copy, chunk by chunk
            values[row:row + len(chunk)] = values_of(pc.cast(chunk, pa.float64()))
            row += len(chunk)

    if parts == 1:
        cast(0)
    else:
        with ThreadPoolExecutor(parts) as pool:
            list(pool.map(cast, range(parts)))  # re-raises a worker's ArrowInvalid
    return values


def cast_float64(cells: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, int | None] | None:
    """``strings_to_float64``'s answer when Arrow's cast accepts every non-empty cell, else None. The cells may
    be unstripped: a cell the cast accepts (the non-finite ones, converted again by Python, included) holds no
    whitespace, so it is its own stripped text."""
    any_empty = pc.min(pc.binary_length(cells)).as_py() == 0
    empty = pc.invert(pc.cast(pc.binary_length(cells), pa.bool_())) if any_empty else None  # length 0
    try:
        values = _cast_ranges(pc.if_else(empty, text_scalar("0", cells.type), cells) if any_empty else cells)
    except pa.ArrowInvalid:
        return None
    if not any_empty and np.isfinite(values).all():
        return values, None
    missing = values_of(empty) if any_empty else np.zeros(len(values), dtype=bool)
    values[missing] = float("nan")
    other = np.flatnonzero(~np.isfinite(values) & ~missing)
    if other.size:
        return _python_rows(cells, values, other)
    return values, None


def _python_rows(cells: pa.Array | pa.ChunkedArray, values: np.ndarray, rows: np.ndarray
                 ) -> tuple[np.ndarray, int | None]:
    """``values`` with ``rows`` converted by Python's ``float()`` of the cells, or the first bad row."""
    subset = cells.take(array_of(rows)).to_pylist()
    try:
        values[rows] = _python_float64(subset)
    except ValueError:
        j = next(j for j, c in enumerate(subset) if not _is_float(c))
        return values, int(rows[j])
    return values, None


def strings_to_float64(cells: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, int | None]:
    """``(values, first_bad_row)``: float64 values of stripped text cells (no nulls), or the first cell that is
    not a number."""
    n = len(cells)
    if n == 0:
        return np.empty(0, dtype=np.float64), None
    quick = cast_float64(cells)
    if quick is not None:
        return quick
    if isinstance(cells, pa.ChunkedArray):
        cells = cells.combine_chunks()
    offsets, data = _offsets_and_bytes(cells)
    empty = offsets[1:] == offsets[:-1]
    fast = _decimal_alphabet_only(offsets, data) & ~empty
    try:
        values = _cast(cells, fast)
    except pa.ArrowInvalid:  # a cell like '1.2.3' or '-': cast only the grammar's cells
        fast &= values_of(pc.match_substring_regex(cells, PLAIN_DECIMAL))
        values = _cast(cells, fast)
    values[empty] = float("nan")
    other = np.flatnonzero(~(fast | empty))
    if other.size:
        return _python_rows(cells, values, other)
    return values, None


def _cast(cells: pa.Array, fast: np.ndarray) -> np.ndarray:
    source = cells if fast.all() else pc.if_else(array_of(fast), cells, text_scalar("0", cells.type))
    return values_of(pc.cast(source, pa.float64())).copy()
