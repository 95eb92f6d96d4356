"""Input tables: CSV and JSON Lines files, or in-memory columns, loaded into one ``Table`` type.

A table is content-addressed by the SHA-256 of its bytes. In-memory tables (``engine.run(inputs=...)``)
are first written to canonical CSV (header in the given column order, floats as their shortest
round-trip ``repr``) and then parsed by the same reader as a file, so a run from memory, a run from the
written file and a replay from the ledger's stored copy see byte-identical data.

Cells are kept as text; stages ask for typed columns (``numeric``, ``text``) and get an ``InputError``
naming the table, column and row when a cell does not fit.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .canonical import sha256_hex
from .errors import InputError

__all__ = ["Table", "parse_table", "table_from_columns", "columns_to_csv_bytes"]

FORMATS = ("csv", "jsonl")


@dataclass(frozen=True)
class Table:
    """A loaded input table: text cells by column, its source bytes' SHA-256, and its format."""

    name: str
    columns: Mapping[str, np.ndarray]
    sha256: str
    fmt: str
    raw: bytes = field(repr=False, compare=False)

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def has(self, column: str) -> bool:
        return column in self.columns

    def _require(self, column: str) -> np.ndarray:
        if column not in self.columns:
            raise InputError(
                f"input '{self.name}' has no column '{column}' (columns: {', '.join(self.columns) or 'none'}); "
                "add it or remap the column name in the stage's with:"
            )
        return self.columns[column]

    def text(self, column: str) -> np.ndarray:
        """The column as an array of Python strings (object dtype)."""
        return self._require(column)

    def numeric(self, column: str, *, allow_missing: bool = False) -> np.ndarray:
        """The column as float64. Empty cells are NaN if ``allow_missing``, else an ``InputError``.

        Explicit non-finite values ('nan', 'inf') are an ``InputError`` unless ``allow_missing``.
        """
        cells = self._require(column)
        filled = np.where(cells == "", "nan", cells)
        try:
            values = filled.astype(np.float64)
        except ValueError:
            bad = next(i for i, c in enumerate(cells.tolist()) if not _is_float(c))
            raise InputError(
                f"input '{self.name}', column '{column}', row {bad + 1}: {cells[bad]!r} is not a number"
            ) from None
        if not allow_missing:
            bad_rows = np.flatnonzero(~np.isfinite(values))
            if bad_rows.size:
                row = int(bad_rows[0])
                raise InputError(
                    f"input '{self.name}', column '{column}', row {row + 1}: value {cells[row]!r} is missing or "
                    f"not finite ({bad_rows.size} such row(s)); clean the data or drop those rows"
                )
        return values


def _is_float(cell: str) -> bool:
    try:
        float(cell or "nan")
    except ValueError:
        return False
    return True


def _cells(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _parse_csv(name: str, raw: bytes) -> dict[str, np.ndarray]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"input '{name}' is not UTF-8 text: {exc}") from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    rows = [r for r in rows if r]
    if not rows:
        raise InputError(f"input '{name}' is empty: a CSV table needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or any(h == "" for h in header):
        raise InputError(f"input '{name}': the header has empty or repeated column names: {header}")
    body = rows[1:]
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise InputError(
                f"input '{name}', row {i + 1}: {len(row)} cells but the header has {len(header)} columns"
            )
    return {h: _cells([row[j].strip() for row in body]) for j, h in enumerate(header)}


def _jsonl_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _parse_jsonl(name: str, raw: bytes) -> dict[str, np.ndarray]:
    records: list[dict[str, Any]] = []
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=lambda c: float(c))
        except json.JSONDecodeError as exc:
            raise InputError(f"input '{name}', line {lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(f"input '{name}', line {lineno}: each line must be a JSON object")
        records.append(record)
    if not records:
        raise InputError(f"input '{name}' is empty: a JSON Lines table needs at least one record")
    names: list[str] = []
    for record in records:
        names.extend(k for k in record if k not in names)
    return {k: _cells([_jsonl_cell(r.get(k)) for r in records]) for k in names}


def parse_table(name: str, raw: bytes, fmt: str) -> Table:
    """Parse ``raw`` bytes as a ``csv`` or ``jsonl`` table named ``name``."""
    if fmt not in FORMATS:
        raise InputError(f"input '{name}': unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    columns = _parse_csv(name, raw) if fmt == "csv" else _parse_jsonl(name, raw)
    return Table(name=name, columns=columns, sha256=sha256_hex(raw), fmt=fmt, raw=raw)


def format_for_path(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv",):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    raise InputError(f"input file {path}: unknown table format '{suffix}'; use .csv or .jsonl")


def _csv_cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        as_float = float(value)
        return "" if math.isnan(as_float) else repr(as_float)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value)


def _column_cells(values: Sequence[Any] | np.ndarray) -> list[str]:
    """One column's CSV cells: the same text as ``_csv_cell`` per value, fast paths by numpy dtype."""
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return ["" if cell == "nan" else cell for cell in map(repr, arr.astype(np.float64).tolist())]
    if arr.dtype.kind in "iu":
        return list(map(str, arr.tolist()))
    return [_csv_cell(v) for v in arr.tolist()]


def columns_to_csv_bytes(columns: Mapping[str, Sequence[Any] | np.ndarray]) -> bytes:
    """Canonical CSV bytes of in-memory columns (LF line ends, minimal quoting)."""
    names = list(columns)
    if not names:
        raise InputError("an in-memory table needs at least one column")
    lengths = {len(columns[k]) for k in names}
    if len(lengths) != 1:
        raise InputError(f"in-memory table columns have different lengths: "
                         f"{ {k: len(columns[k]) for k in names} }")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(zip(*[_column_cells(columns[k]) for k in names]))
    return out.getvalue().encode("utf-8")


def table_from_columns(name: str, columns: Mapping[str, Sequence[Any] | np.ndarray]) -> Table:
    """An in-memory table, written to canonical CSV and parsed back (see module docstring)."""
    return parse_table(name, columns_to_csv_bytes(columns), "csv")
