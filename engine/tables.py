"""Input tables: CSV, JSON Lines and Parquet files, or in-memory columns, loaded into one ``Table`` type.

A table is content-addressed by the SHA-256 of its bytes (for every format the raw file bytes, which the
ledger stores, so a replay needs nothing outside it). In-memory tables (``engine.run(inputs=...)``)
are first written to canonical CSV (header in the given column order, floats as their shortest
round-trip ``repr``) and then parsed by the same reader as a file, so a run from memory, a run from the
written file and a replay from the ledger's stored copy see byte-identical data.

Cells are kept as text (Parquet numbers as numbers); stages ask for typed columns (``numeric``, ``text``)
and get an ``InputError`` naming the table, column and row when a cell does not fit.

Parsing goes through Apache Arrow (``engine.table_formats``, imported on first use) where it is proven to
give the same cells and the same float64 bits as the Python code that parsed every table before it:
CSV files outside that proven subset (quoted cells, NUL bytes, invalid UTF-8, ragged rows, ...) and JSON
Lines are parsed by that Python code, and every error message is still written by it. Numbers are
converted vectorised (``table_formats.decimal``), equal bit for bit to Python's ``float()``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .canonical import sha256_hex
from .errors import InputError

__all__ = ["Table", "Columns", "parse_table", "table_from_columns", "columns_to_csv_bytes", "factorize_cells"]

FORMATS = ("csv", "jsonl", "parquet")


def factorize_cells(values: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """(sorted distinct cells, each row's index into them), hashing with C-level builtins (``set`` and dict
    lookups driven by ``map``, no Python loop per row): about 4x faster than ``np.unique`` on text."""
    cells = (values if values.dtype == object else values.astype(str)).tolist()
    labels = tuple(sorted(set(cells)))
    index = {label: i for i, label in enumerate(labels)}
    return labels, np.fromiter(map(index.__getitem__, cells), dtype=np.intp, count=len(cells))


class _Column:
    """One column: its cells as Python strings (object array) on first use, and its float64 values.

    Backed by an object array of strings (the Python readers), an Arrow string array (Arrow CSV, Parquet
    text) or Parquet numbers (``float64`` values, null mask and the Arrow array).
    """

    __slots__ = ("_cells", "_arrow", "_numbers", "_kind", "_length")

    def __init__(self, *, cells: np.ndarray | None = None, arrow: Any = None,
                 numbers: tuple[np.ndarray, np.ndarray, Any] | None = None, kind: str = "text") -> None:
        self._cells, self._arrow, self._numbers, self._kind = cells, arrow, numbers, kind
        self._length = len(cells) if cells is not None else len(arrow) if arrow is not None else len(numbers[0])

    def __len__(self) -> int:
        return self._length

    def cells(self) -> np.ndarray:
        if self._cells is None:
            if self._numbers is not None:
                values, nulls, arr = self._numbers
                as_text = repr if self._kind == "float" else str
                python = arr.to_pylist() if self._kind == "int" else values.tolist()
                self._cells = _cells(["" if null else as_text(v) for v, null in zip(python, nulls.tolist())])
            else:
                self._cells = self._arrow.to_numpy(zero_copy_only=False)
        return self._cells

    def cell(self, row: int) -> str:
        if self._cells is None and self._arrow is not None:
            return self._arrow[row].as_py()
        return self.cells()[row]

    def factorize(self) -> tuple[tuple[str, ...], np.ndarray]:
        """(sorted distinct cells, each row's index into them). An Arrow-backed text column is
        dictionary-encoded by Arrow, so its rows never become Python strings; otherwise the cells are
        hashed with C-level builtins (``set``, ``map``), about 4x faster than ``np.unique`` on text."""
        if self._cells is None and self._arrow is not None and self._arrow.null_count == 0:
            import pyarrow as pa
            import pyarrow.compute as pc

            arrow = self._arrow.combine_chunks() if isinstance(self._arrow, pa.ChunkedArray) else self._arrow
            encoded = pc.dictionary_encode(arrow)
            found = encoded.dictionary.to_pylist()
            labels = tuple(sorted(found))
            position = {label: i for i, label in enumerate(labels)}
            rank = np.array([position[label] for label in found], dtype=np.intp)
            return labels, rank[encoded.indices.to_numpy(zero_copy_only=False)]
        return factorize_cells(self.cells())

    def float64(self) -> tuple[np.ndarray, int | None]:
        """``(values, first row that is not a number or None)``."""
        if self._numbers is not None:
            return self._numbers[0].copy(), None
        if self._length == 0:
            return np.empty(0, dtype=np.float64), None
        import pyarrow as pa

        from .table_formats.decimal import strings_to_float64
        arrow = self._arrow if self._arrow is not None else pa.array(self._cells, type=pa.string())
        return strings_to_float64(arrow)


class Columns(Mapping[str, np.ndarray]):
    """A table's columns by name, in file order; each value is an object array of Python strings, built on
    first access (Arrow-read columns stay in Arrow memory until a stage asks for their text)."""

    def __init__(self, columns: Mapping[str, _Column]) -> None:
        self._columns = dict(columns)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name].cells()

    def __iter__(self):
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def column(self, name: str) -> _Column:
        return self._columns[name]

    @property
    def n_rows(self) -> int:
        return len(next(iter(self._columns.values()))) if self._columns else 0


def _as_columns(cells: Mapping[str, np.ndarray]) -> Columns:
    return Columns({k: _Column(cells=v) for k, v in cells.items()})


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
        if isinstance(self.columns, Columns):
            return self.columns.n_rows
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

    def _column(self, column: str) -> _Column:
        if column not in self.columns:
            self._require(column)
        if isinstance(self.columns, Columns):
            return self.columns.column(column)
        return _Column(cells=self.columns[column])

    def text(self, column: str) -> np.ndarray:
        """The column as an array of Python strings (object dtype)."""
        return self._require(column)

    def factorize(self, column: str) -> tuple[tuple[str, ...], np.ndarray]:
        """(the column's distinct cells, sorted, and each row's index into them): ``np.unique(text,
        return_inverse=True)``'s answer, without turning an Arrow-read column into Python strings."""
        return self._column(column).factorize()

    def numeric(self, column: str, *, allow_missing: bool = False) -> np.ndarray:
        """The column as float64. Empty cells are NaN if ``allow_missing``, else an ``InputError``.

        Explicit non-finite values ('nan', 'inf') are an ``InputError`` unless ``allow_missing``.
        Values are bit for bit Python's ``float()`` of each cell (see ``table_formats.decimal``).
        """
        source = self._column(column)
        values, bad = source.float64()
        if bad is not None:
            raise InputError(
                f"input '{self.name}', column '{column}', row {bad + 1}: {source.cell(bad)!r} is not a number"
            )
        if not allow_missing:
            bad_rows = np.flatnonzero(~np.isfinite(values))
            if bad_rows.size:
                row = int(bad_rows[0])
                raise InputError(
                    f"input '{self.name}', column '{column}', row {row + 1}: value {source.cell(row)!r} is "
                    f"missing or not finite ({bad_rows.size} such row(s)); clean the data or drop those rows"
                )
        return values


def _cells(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _parse_csv_python(name: str, raw: bytes) -> dict[str, np.ndarray]:
    """The Python reader: every CSV file outside Arrow's proven subset, and every CSV error message."""
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
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"input '{name}' is not UTF-8 text: {exc}") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=lambda c: float(c))
        except json.JSONDecodeError as exc:
            raise InputError(f"input '{name}', line {lineno}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise InputError(f"input '{name}', line {lineno}: JSON nested too deeply for a table row") from None
        if not isinstance(record, dict):
            raise InputError(f"input '{name}', line {lineno}: each line must be a JSON object")
        records.append(record)
    if not records:
        raise InputError(f"input '{name}' is empty: a JSON Lines table needs at least one record")
    names: list[str] = []
    for record in records:
        names.extend(k for k in record if k not in names)
    return {k: _cells([_jsonl_cell(r.get(k)) for r in records]) for k in names}


def _parse_csv(name: str, raw: bytes) -> Columns:
    from .table_formats.arrow_csv import read_csv

    read = read_csv(raw)
    if read is None:
        return _as_columns(_parse_csv_python(name, raw))
    header, arrays = read
    if len(set(header)) != len(header) or any(h == "" for h in header):
        raise InputError(f"input '{name}': the header has empty or repeated column names: {header}")
    return Columns({h: _Column(arrow=a) for h, a in zip(header, arrays)})


def _parse_parquet(name: str, raw: bytes) -> Columns:
    from .table_formats.parquet import read_parquet

    return Columns({column: _Column(arrow=payload) if kind == "text" else _Column(numbers=payload, kind=kind)
                    for column, kind, payload in read_parquet(name, raw)})


def parse_table(name: str, raw: bytes, fmt: str) -> Table:
    """Parse ``raw`` bytes as a ``csv``, ``jsonl`` or ``parquet`` table named ``name``."""
    if fmt not in FORMATS:
        raise InputError(f"input '{name}': unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "csv":
        columns = _parse_csv(name, raw)
    elif fmt == "jsonl":
        columns = _as_columns(_parse_jsonl(name, raw))
    else:
        columns = _parse_parquet(name, raw)
    return Table(name=name, columns=columns, sha256=sha256_hex(raw), fmt=fmt, raw=raw)


def format_for_path(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv",):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    raise InputError(f"input file {path}: unknown table format '{suffix}'; use .csv, .jsonl or .parquet")


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
        floats = arr.astype(np.float64)
        cells = list(map(repr, floats.tolist()))
        for row in np.flatnonzero(np.isnan(floats)).tolist():  # NaN is an empty (missing) cell
            cells[row] = ""
        return cells
    if arr.dtype.kind in "iu":
        return list(map(str, arr.tolist()))
    if arr.dtype.kind == "U":  # text: its cells are the strings themselves
        return arr.tolist()
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
    cells = [_column_cells(columns[k]) for k in names]
    if not any(_needs_quotes(column) for column in (names, *cells)):
        # nothing to quote (csv.writer's minimal quoting would write the same bytes): join in C
        return ("\n".join([",".join(names), *map(",".join, zip(*cells))]) + "\n").encode("utf-8")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(zip(*cells))
    return out.getvalue().encode("utf-8")


_QUOTED = re.compile(r'[,"\r\n]')


def _needs_quotes(cells: list[str]) -> bool:
    """Whether csv.writer (QUOTE_MINIMAL, delimiter ',', quotechar '"') might quote a cell of this column: one
    holding a delimiter, quote or line break, or an empty one (quoted when it is a row's only cell). One C
    scan over the joined column."""
    return "" in cells or _QUOTED.search("\x1f".join(cells)) is not None


def table_from_columns(name: str, columns: Mapping[str, Sequence[Any] | np.ndarray]) -> Table:
    """An in-memory table, written to canonical CSV and parsed back (see module docstring)."""
    return parse_table(name, columns_to_csv_bytes(columns), "csv")
