"""Text cells to float64, bit for bit what ``numpy.ndarray.astype(float64)`` gives on Python strings.

Cells are sorted into three kinds, all vectorised except the last:

* empty: NaN (``float('nan')``, the value of the empty cell before this module existed);
* cells made only of the characters ``0-9 + - . e E``: converted by Arrow's ``cast(string -> float64)``,
  which parses with a correctly rounded algorithm (fast_float: Eisel-Lemire with an exact big-decimal
  fallback), as CPython's ``float()`` does (David Gay's ``strtod``); both give the float64 nearest to the
  decimal value, ties to even, overflow to ±inf and underflow through the subnormals to ±0. Over this
  alphabet both accept exactly the plain decimals ``[+-]?(digits[.digits*] | .digits)([eE][+-]?digits)?``
  (no underscores, no non-ASCII digits, no ``nan``/``inf`` words): pinned exhaustively for every string of
  up to 5 characters over ``0 1 9 + - . e E`` and by property tests on long mantissas, halfway cases,
  exponents and subnormals (``tests/core/test_tables_arrow.py``). If the cast fails (a cell such as ``1.2.3``),
  the cells matching that grammar (RE2) are cast and the others go to the last kind;
* everything else (``nan``/``inf`` spellings, ``1_000``, non-ASCII digits, bad cells): Python's own
  conversion, cell by cell, exactly the code that converted every cell before.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def strings_to_float64(cells: pa.Array) -> tuple[np.ndarray, int | None]:
    """``(values, first_bad_row)``: float64 values of text cells (no nulls), or the first cell that is not a number."""
    n = len(cells)
    if n == 0:
        return np.empty(0, dtype=np.float64), None
    offsets, data = _offsets_and_bytes(cells)
    empty = offsets[1:] == offsets[:-1]
    fast = _decimal_alphabet_only(offsets, data) & ~empty
    try:
        values = _cast(cells, fast)
    except pa.ArrowInvalid:  # a cell like '1.2.3' or '-': cast only the grammar's cells
        fast &= pc.match_substring_regex(cells, PLAIN_DECIMAL).to_numpy(zero_copy_only=False)
        values = _cast(cells, fast)
    values[empty] = float("nan")
    other = np.flatnonzero(~(fast | empty))
    if other.size:
        subset = cells.take(pa.array(other)).to_pylist()
        try:
            values[other] = _python_float64(subset)
        except ValueError:
            j = next(j for j, c in enumerate(subset) if not _is_float(c))
            return values, int(other[j])
    return values, None


def _cast(cells: pa.Array, fast: np.ndarray) -> np.ndarray:
    source = cells if fast.all() else pc.if_else(pa.array(fast), cells, "0")
    return pc.cast(source, pa.float64()).to_numpy(zero_copy_only=False).copy()
