"""Parquet inputs: typed columns from the file's schema, decoded by Arrow without per-cell Python.

Column types (the table's ``numeric`` and ``text`` views of each):

======================================  ==========================================  ===========================
Parquet / Arrow type                    ``numeric``                                 ``text``
======================================  ==========================================  ===========================
float64, float32, float16               the values (narrow floats widened exactly)  ``repr`` of the float64
int8 ... int64, uint8 ... uint64        ``float(value)``, correctly rounded         ``str(value)``
string, large_string                    parsed as a CSV cell would be                the strings, unstripped
bool                                    not a number (as JSON Lines ``true``)        ``'true'`` / ``'false'``
dictionary of any of the above          as its decoded values                        as its decoded values
null (a column with no values)          all missing                                  ``''``
======================================  ==========================================  ===========================

A null cell is a missing value, as an empty CSV cell is: NaN in ``numeric(..., allow_missing=True)``, an
error without it, and ``''`` in ``text``. NaN stored in a float column is also missing (its bits are kept).
Any other type (decimal, date, time, timestamp, binary, list, struct, map, ...) is refused, naming the
column: convert it to one of the above when writing the file.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pat

from ..errors import InputError

SUPPORTED = "float64/float32, an integer type, bool, string, or a dictionary of these"


def _numbers(name: str, column: str, arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(float64 values, null mask)`` of a float or integer column."""
    nulls = arr.is_null().to_numpy(zero_copy_only=False)
    filled = arr.fill_null(0) if arr.null_count else arr
    values = filled.to_numpy(zero_copy_only=False).astype(np.float64)  # exact widening / correctly rounded
    if nulls.any():
        values = values.copy()
        values[nulls] = float("nan")
    return values, nulls


def read_parquet(name: str, raw: bytes) -> list[tuple[str, str, object]]:
    """``[(column, kind, payload)]`` in schema order: kind ``text`` with a string array (no nulls), or
    ``float``/``int`` with ``(values float64, null mask, arrow array)``."""
    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"input '{name}' is not a readable Parquet file: {exc}") from None
    names = table.column_names
    if not names:
        raise InputError(f"input '{name}' is empty: a Parquet table needs at least one column")
    if len(set(names)) != len(names) or any(n == "" for n in names):
        raise InputError(f"input '{name}': the header has empty or repeated column names: {names}")
    out: list[tuple[str, str, object]] = []
    for column, chunked in zip(names, table.columns):
        arr = chunked.combine_chunks() if chunked.num_chunks != 1 else chunked.chunk(0)
        if pat.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        t = arr.type
        if pat.is_floating(t):
            out.append((column, "float", (*_numbers(name, column, arr), arr)))
        elif pat.is_integer(t):
            out.append((column, "int", (*_numbers(name, column, arr), arr)))
        elif pat.is_string(t) or pat.is_large_string(t):
            out.append((column, "text", arr.fill_null("") if arr.null_count else arr))
        elif pat.is_boolean(t):
            text = pc.if_else(arr, "true", "false")
            out.append((column, "text", text.fill_null("") if text.null_count else text))
        elif pat.is_null(t):
            out.append((column, "text", pa.repeat(pa.scalar("", pa.string()), len(arr))))
        else:
            raise InputError(f"input '{name}', column '{column}': Parquet type {t} is not supported; "
                             f"use {SUPPORTED}")
    return out
