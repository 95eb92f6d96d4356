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

Limits (``certa.engine.core.input_limits``) are checked from the footer before any page is decompressed: rows, columns,
and a lower bound of the decoded size (fixed-width values and string offsets: a file of 4·10^8 identical
rows is refused in milliseconds); then the row groups are read one at a time and the decoded size counted as
they come (dictionary encoding hides it from the footer): a text column made mostly of dictionary indices is
read as a dictionary and its decoded size computed before it is decoded, so a string bomb is refused with
little memory. Then each text column's longest cell is checked against ``cell_bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pat

from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.table_formats.arrow_memory import arrow_owned_copy
from certa.engine.core.table_formats.arrow_numpy import nulls_of, values_of

SUPPORTED = "float64/float32, an integer type, bool, string, or a dictionary of these"


def _numbers(name: str, column: str, arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(float64 values, null mask)`` of a float or integer column."""
    nulls = nulls_of(arr)
    values = values_of(arr).astype(np.float64)  # a copy: exact widening / correctly rounded
    if nulls is None:
        return values, np.zeros(len(arr), dtype=bool)
    values[nulls] = float("nan")
    return values, nulls


def _field_type(field: pa.Field) -> pa.DataType:
    return field.type.value_type if pat.is_dictionary(field.type) else field.type


def _is_text(t: pa.DataType) -> bool:
    return pat.is_string(t) or pat.is_large_string(t)


def _check_schema(name: str, schema: pa.Schema) -> None:
    """Column names and types, before any page is read."""
    names = schema.names
    if not names:
        raise InputError(f"input '{name}' is empty: a Parquet table needs at least one column")
    if len(set(names)) != len(names) or any(n == "" for n in names):
        raise InputError(f"input '{name}': the header has empty or repeated column names: {names}")
    for field in schema:
        t = _field_type(field)
        if not (pat.is_floating(t) or pat.is_integer(t) or _is_text(t) or pat.is_boolean(t) or pat.is_null(t)):
            raise InputError(f"input '{name}', column '{field.name}': Parquet type {t} is not supported; "
                             f"use {SUPPORTED}")


def _least_decoded_bytes(schema: pa.Schema, rows: int) -> int:
    """What the decoded columns take at the least: each fixed-width value's bytes, each string's offset."""
    per_row = 0
    for field in schema:
        t = _field_type(field)
        if _is_text(t):
            per_row += 4
        elif not pat.is_null(t):
            per_row += -(-t.bit_width // 8)
    return rows * per_row


def _dictionary_read(metadata: pq.FileMetaData, schema: pa.Schema) -> list[str]:
    """Text columns whose pages are mostly dictionary indices: a chunk under 4 bytes a value, less than any
    plainly encoded string takes (a string bomb is one). They are read as dictionaries, their decoded size
    counted before they are decoded; a column of distinct ids, dictionary-encoded until the writer fell back
    to plain pages, is read as strings (building a dictionary of it would cost a hash per row)."""
    return [field.name for j, field in enumerate(schema) if _is_text(_field_type(field)) and any(
        chunk.has_dictionary_page and chunk.total_uncompressed_size < 4 * chunk.num_values
        for chunk in (metadata.row_group(i).column(j) for i in range(metadata.num_row_groups)))]


def _decoded_bytes(chunk: pa.Array) -> int:
    """The bytes ``chunk`` takes once its dictionary (if any) is decoded."""
    if not pat.is_dictionary(chunk.type):
        return chunk.nbytes
    if _is_text(chunk.type.value_type):
        lengths = pc.take(pc.binary_length(chunk.dictionary), chunk.indices)
        return (pc.sum(lengths).as_py() or 0) + 4 * len(chunk)
    return len(chunk) * -(-chunk.type.value_type.bit_width // 8)


def _decoded_columns(name: str, raw: pa.Buffer, parquet: pq.ParquetFile, limits: InputLimits) -> list[pa.Array]:
    """Each column decoded, one row group at a time, refused as soon as the decoded bytes pass the limit (a
    dictionary column's before it is decoded)."""
    schema = parquet.schema_arrow
    dictionary = _dictionary_read(parquet.metadata, schema)
    reader = pq.ParquetFile(pa.BufferReader(raw), read_dictionary=dictionary, pre_buffer=False) if dictionary else parquet
    chunks: list[list[pa.Array]] = [[] for _ in schema]
    decoded = 0
    for group in range(reader.num_row_groups):
        for chunk, column in zip(chunks, reader.read_row_group(group).columns):
            chunk.extend(column.chunks)
            decoded += sum(map(_decoded_bytes, column.chunks))
        limits.check(f"input '{name}'", "parquet_bytes", decoded, "the decoded size in bytes (read so far)")
    return [_combined(chunk, _field_type(field)) for chunk, field in zip(chunks, schema)]


def _combined(chunks: list[pa.Array], t: pa.DataType) -> pa.Array:
    """One column's chunks, dictionaries decoded, as one array of type ``t``."""
    decoded = [chunk.dictionary_decode() if pat.is_dictionary(chunk.type) else chunk for chunk in chunks]
    return decoded[0] if len(decoded) == 1 else pa.chunked_array(decoded, type=t).combine_chunks()


def _check_cells(name: str, column: str, arr: pa.Array, limits: InputLimits) -> None:
    """The longest string of a text column within ``cell_bytes``."""
    if len(arr) and arr.null_count < len(arr):
        lengths = pc.binary_length(arr)
        longest = pc.max(lengths).as_py()
        if longest > limits.cell_bytes:
            row = pc.index(lengths, longest).as_py()
            limits.check(f"input '{name}', row {row + 1}, column '{column}'", "cell_bytes", longest,
                         "the size in bytes of the cell")


def read_parquet(name: str, raw: bytes, limits: InputLimits) -> list[tuple[str, str, Any]]:
    """``[(column, kind, payload)]`` in schema order: kind ``text`` with a string array (no nulls), or
    ``float``/``int`` with ``(values float64, null mask, arrow array)``; within ``limits``."""
    owned = arrow_owned_copy(raw)  # no Arrow thread may ever hold the Python bytes (arrow_memory)
    try:
        parquet = pq.ParquetFile(pa.BufferReader(owned), pre_buffer=False)  # no read left running on Arrow's IO pool
        metadata, schema = parquet.metadata, parquet.schema_arrow
        limits.check(f"input '{name}'", "columns", metadata.num_columns, "the number of columns")
        rows = max(metadata.num_rows, sum(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)))
        limits.check(f"input '{name}'", "rows", rows, "the number of rows (from the footer)")
        _check_schema(name, schema)
        limits.check(f"input '{name}'", "parquet_bytes", _least_decoded_bytes(schema, rows),
                     "the decoded size in bytes (at least, from the footer)")
        arrays = _decoded_columns(name, owned, parquet, limits)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"input '{name}' is not a readable Parquet file: {exc}") from None
    out: list[tuple[str, str, object]] = []
    for column, arr in zip(schema.names, arrays):
        t = arr.type
        if pat.is_floating(t):
            out.append((column, "float", (*_numbers(name, column, arr), arr)))
        elif pat.is_integer(t):
            out.append((column, "int", (*_numbers(name, column, arr), arr)))
        elif _is_text(t):
            _check_cells(name, column, arr, limits)
            out.append((column, "text", arr.fill_null("") if arr.null_count else arr))
        elif pat.is_boolean(t):
            text = pc.if_else(arr, "true", "false")
            out.append((column, "text", text.fill_null("") if text.null_count else text))
        else:  # null: a column with no values
            out.append((column, "text", pa.repeat(pa.scalar("", pa.string()), len(arr))))
    return out
