"""Input tables: CSV, JSON Lines and Parquet files, or in-memory columns, loaded into one ``Table`` type.

A table is content-addressed by the SHA-256 of its bytes (for every format the raw file bytes, which the
ledger stores, so a replay needs nothing outside it). In-memory tables (``engine.run(inputs=...)``)
are first written to canonical CSV (header in the given column order, floats as their shortest
round-trip ``repr``) and then parsed by the same reader as a file, so a run from memory, a run from the
written file and a replay from the ledger's stored copy see byte-identical data.

Cells are kept as text (Parquet numbers as numbers); stages ask for typed columns (``numeric``, ``text``)
and get an ``InputError`` naming the table, column and row when a cell does not fit.

Parsing goes through Apache Arrow (``certa.engine.core.table_formats``, imported on first use) where it is proven to
give the same cells and the same float64 bits as the Python code that parsed every table before it:
CSV files outside that proven subset (quoted cells, NUL bytes, invalid UTF-8, ragged rows, ...) and JSON
Lines are parsed by that Python code, and every error message is still written by it. Numbers are
converted vectorised (``table_formats.decimal``), equal bit for bit to Python's ``float()``.

Speed (``bench/tables.py``): Arrow parses and types a CSV file on its CPU threads while another thread hashes
the same bytes (both release the GIL); Arrow's numbers are kept where they are provably ``float()``'s
(``table_formats.arrow_csv``), and text columns are cast on threads. No result depends on the thread count,
the block size or the order in which threads finish (every cell's value depends on that cell alone).

Every table is read within ``certa.engine.core.input_limits.InputLimits`` (bytes, rows, columns, cell size, Parquet
decoded size; ``CERTA_INPUT_LIMITS`` raises them): a table over a limit is an ``InputError`` naming the
input, the row or line and the column where there is one, the limit and the value.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from certa.engine.foundation.canonical import sha256_hex
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits

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

    Backed by an object array of strings (the Python readers), an Arrow string array (Parquet text; Arrow CSV,
    whose cells are stripped as ``str.strip()`` does on the first request for text, ``strip``), Parquet
    numbers (``float64`` values, null mask and the Arrow array) or Arrow CSV numbers (``float64`` values and
    ``source``, which reads the column's unstripped cells from the file on the first request for text).
    """

    __slots__ = ("_cells", "_arrow", "_numbers", "_kind", "_length", "_strip", "_source")

    def __init__(self, *, cells: np.ndarray | None = None, arrow: Any = None,
                 numbers: tuple[np.ndarray, np.ndarray, Any] | None = None, kind: str = "text",
                 strip: bool = False, source: Callable[[], Any] | None = None) -> None:
        self._cells, self._arrow, self._numbers, self._kind, self._strip = cells, arrow, numbers, kind, strip
        self._source = source
        self._length = len(cells) if cells is not None else len(arrow) if arrow is not None else len(numbers[0])

    def __len__(self) -> int:
        return self._length

    def cells(self) -> np.ndarray:
        if self._cells is None:
            arrow = self._text_arrow()
            if arrow is not None:
                from certa.engine.core.table_formats.arrow_numpy import texts_of

                self._cells = texts_of(arrow)
            elif self._numbers is not None:
                values, nulls, arr = self._numbers
                as_text = repr if self._kind == "float" else str
                python = arr.to_pylist() if self._kind == "int" else values.tolist()
                self._cells = _cells(["" if null else as_text(v) for v, null in zip(python, nulls.tolist())])
        return self._cells

    def _text_arrow(self) -> Any:
        """The Arrow cells (read from the file first for Arrow CSV numbers), stripped once if they came
        unstripped; None for a column of Python strings or Parquet numbers."""
        self._read_source()
        if self._strip:
            from certa.engine.core.table_formats.arrow_csv import strip

            self._arrow, self._strip = strip(self._arrow), False
        return self._arrow

    def _read_source(self) -> None:
        if self._source is not None:
            self._arrow, self._strip, self._source = self._source(), True, None

    def cell(self, row: int) -> str:
        self._read_source()
        if self._cells is None and self._arrow is not None:
            text = self._arrow[row].as_py()
            return text.strip() if self._strip else text
        return self.cells()[row]

    def factorize(self) -> tuple[tuple[str, ...], np.ndarray]:
        """(sorted distinct cells, each row's index into them). An Arrow-backed text column is
        dictionary-encoded by Arrow, so its rows never become Python strings; otherwise the cells are
        hashed with C-level builtins (``set``, ``map``), about 4x faster than ``np.unique`` on text."""
        text = self._text_arrow() if self._cells is None else None
        if text is not None and text.null_count == 0:
            import pyarrow as pa
            import pyarrow.compute as pc

            from certa.engine.core.table_formats.arrow_numpy import values_of

            arrow = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
            encoded = pc.dictionary_encode(arrow)
            found = encoded.dictionary.to_pylist()
            labels = tuple(sorted(found))
            position = {label: i for i, label in enumerate(labels)}
            rank = np.array([position[label] for label in found], dtype=np.intp)
            return labels, rank[values_of(encoded.indices)]
        return factorize_cells(self.cells())

    def float64(self) -> tuple[np.ndarray, int | None]:
        """``(values, first row that is not a number or None)``."""
        if self._numbers is not None:
            return self._numbers[0].copy(), None
        if self._length == 0:
            return np.empty(0, dtype=np.float64), None
        from certa.engine.core.table_formats.arrow_numpy import text_array
        from certa.engine.core.table_formats.decimal import cast_float64, strings_to_float64
        if self._strip:  # a cell the cast accepts has no whitespace to strip
            quick = cast_float64(self._arrow)
            if quick is not None:
                return quick
        arrow = self._text_arrow() if self._arrow is not None else text_array(self._cells)
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
    return Columns({k: column_of_cells(v) for k, v in cells.items()})


def column_of_cells(cells: np.ndarray) -> _Column:
    """A column of text cells (an object array of Python strings)."""
    return _Column(cells=cells)


def column_of_numbers(values: np.ndarray) -> _Column:
    """A column of finite float64 numbers (its text, when asked for, is each value's ``repr``)."""
    return _Column(numbers=(values, np.zeros(len(values), dtype=bool), None), kind="float")


@dataclass(frozen=True)
class Table:
    """A loaded input table: text cells by column, its source bytes' SHA-256, and its format."""

    name: str
    columns: Mapping[str, np.ndarray]
    sha256: str
    fmt: str
    raw: bytes = field(repr=False, compare=False)
    evidence: Any = field(default=None, repr=False, compare=False)
    """An evaluator export's per-item records (``certa.engine.core.evidence.EvidenceRecords``); None for a plain table."""
    origin: Path | None = field(default=None, repr=False, compare=False)
    """A model input's folder, where it was read from (``certa.engine.core.models.manifest``: the table is its
    manifest); None for every other table and for a model input read back from a ledger."""
    signature: Any = field(default=None, repr=False, compare=False)
    """A model input's signature check (``certa.engine.core.models.signature.SignatureCheck``), made when the folder
    was read; None for every other table and for a model input read back from a ledger."""
    overridden: bool = field(default=False, repr=False, compare=False)
    """Read from a path given instead of the spec's (``certa.engine.core.inputs.InputSource.overridden``)."""
    weights: Any = field(default=None, repr=False, compare=False)
    """A model input's weight files as they were read and hashed with its folder
    (``certa.engine.core.models.manifest.HeldWeights``), for the loader to take instead of reading them again;
    None for every other table (and for a model input whose weights were not kept)."""
    columns_read: set[str] = field(init=False, default_factory=set, repr=False, compare=False)
    """The columns read through ``text``, ``factorize`` or ``numeric`` since this object was made (``has`` is not a
    read). ``dataclasses.replace(table)`` starts a new, empty record: ``certa.engine.core.interpreter.execute`` gives
    each run its own copy, and lists the input columns no stage read (``unread_columns``)."""

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
        cells = self._require(column)
        self.columns_read.add(column)
        return cells

    def factorize(self, column: str) -> tuple[tuple[str, ...], np.ndarray]:
        """(the column's distinct cells, sorted, and each row's index into them): ``np.unique(text,
        return_inverse=True)``'s answer, without turning an Arrow-read column into Python strings."""
        factors = self._column(column).factorize()
        self.columns_read.add(column)
        return factors

    def numeric(self, column: str, *, allow_missing: bool = False) -> np.ndarray:
        """The column as float64. Empty cells are NaN if ``allow_missing``, else an ``InputError``.

        Explicit non-finite values ('nan', 'inf') are an ``InputError`` unless ``allow_missing``.
        Values are bit for bit Python's ``float()`` of each cell (see ``table_formats.decimal``).
        """
        source = self._column(column)
        self.columns_read.add(column)
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


def _utf8_len(text: str) -> int:
    """The UTF-8 bytes of ``text`` (lone surrogates, which JSON escapes can hold, as 3 bytes each), without
    encoding it when it is ASCII."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _check_cell_bytes(name: str, columns: Mapping[str, np.ndarray], limits: InputLimits, size: int) -> None:
    """Every text cell within ``cell_bytes`` UTF-8 bytes; nothing to scan when the whole input (``size`` bytes)
    fits in one cell. A character is 1 to 4 bytes, so only cells over ``cell_bytes / 4`` characters are encoded."""
    if size <= limits.cell_bytes:
        return
    for column, cells in columns.items():
        lengths = np.fromiter(map(len, cells), dtype=np.int64, count=len(cells))
        for row in np.flatnonzero(lengths * 4 > limits.cell_bytes).tolist():
            limits.check(f"input '{name}', row {row + 1}, column '{column}'", "cell_bytes",
                         _utf8_len(cells[row]), "the size in bytes of the cell")


_CSV_FIELD = re.compile(r'(?:"(?:[^"]+|"")*"?)?[^,\r\n]*')
"""One field of the default CSV dialect: an optional quoted part (``""`` a quote inside it), then unquoted text."""
_LINE_END = re.compile(r"\r\n|\r|\n")
"""A line end as ``io.StringIO(text, newline="")`` splits lines (what the ``csv`` reader counts)."""
_BLANK_LINES = re.compile(r"[\r\n]*")


def _longest_field(text: str, records_before: int) -> tuple[int, int]:
    """(index, UTF-8 bytes) of the longest field of the CSV record after the first ``records_before``
    non-empty ones: where the ``csv`` module stopped at its field size limit."""
    reader = csv.reader(io.StringIO(text, newline=""))
    for _ in itertools.islice(filter(None, reader), records_before):
        pass
    lines = reader.line_num if records_before else 0
    ends = itertools.islice(_LINE_END.finditer(text), lines - 1, None) if lines else iter(())
    position = _BLANK_LINES.match(text, next((end.end() for end in ends), 0)).end()
    spans: list[tuple[int, int]] = []
    while True:
        match = _CSV_FIELD.match(text, position)  # always matches (possibly empty)
        spans.append(match.span())
        position = match.end()
        if text[position:position + 1] != ",":
            break
        position += 1
    index = max(range(len(spans)), key=lambda i: spans[i][1] - spans[i][0])
    return index, _utf8_len(text[slice(*spans[index])])


def _csv_rows(name: str, text: str, limits: InputLimits) -> list[list[str]]:
    """The non-empty rows of CSV text, header first, within the column, row and cell limits. The ``csv``
    module's field size limit (process-wide: it has no per-reader one) is set to ``cell_bytes`` characters, so
    a huge field stops the reader at the limit instead of after it is read; UTF-8 bytes are checked after."""
    csv.field_size_limit(limits.cell_bytes)
    rows: list[list[str]] = []
    try:
        rows.extend(filter(None, csv.reader(io.StringIO(text, newline=""))))  # keeps the rows before an error
        too_long = False
    except csv.Error as exc:
        if "field limit" not in str(exc):  # the only error this non-strict dialect raises, in Python 3.11
            raise InputError(f"input '{name}', row {len(rows)}: not valid CSV ({exc})") from None
        too_long = True
    if too_long:  # outside the handler, which would keep the failed reader's copy of the text alive
        index, size = _longest_field(text, len(rows))
        header = [h.strip() for h in rows[0]] if rows else []
        column = f"column '{header[index]}'" if index < len(header) else f"column {index + 1}"
        limits.check(f"input '{name}', {f'row {len(rows)}' if rows else 'header'}, {column}", "cell_bytes",
                     max(size, limits.cell_bytes + 1), "the size in bytes of the cell")
    if rows:
        limits.check(f"input '{name}'", "columns", len(rows[0]), "the number of columns in the header")
        limits.check(f"input '{name}'", "rows", len(rows) - 1, "the number of data rows")
    return rows


def _parse_csv_python(name: str, raw: bytes, limits: InputLimits) -> dict[str, np.ndarray]:
    """The Python reader: every CSV file outside Arrow's proven subset, and every CSV error message."""
    limits.check(f"input '{name}'", "text_bytes", len(raw), "the size in bytes of a CSV file read cell by cell "
                 "(it has quoted cells, NUL bytes, invalid UTF-8, ragged rows or long fields)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"input '{name}' is not UTF-8 text: {exc}") from None
    rows = _csv_rows(name, text, limits)
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
    columns = {h: _cells([row[j].strip() for row in body]) for j, h in enumerate(header)}
    _check_cell_bytes(name, columns, limits, len(raw))
    return columns


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


class _IntToken(str):
    """A JSON integer's text, unconverted (``_check_jsonl_cells``)."""


class _FloatToken(str):
    """A JSON fraction's or exponent's text, unconverted (``_check_jsonl_cells``)."""


def _loads(line: str, *, tokens: bool = False) -> Any:
    """One JSON Lines record; with ``tokens``, numbers are left as their text (``_IntToken``, ``_FloatToken``)."""
    if tokens:
        return json.loads(line, parse_constant=float, parse_int=_IntToken, parse_float=_FloatToken)
    return json.loads(line, parse_constant=lambda c: float(c))


def _check_integers(where: str, value: Any) -> None:
    """Every integer token inside ``value`` within Python's conversion limit (4,300 digits by default)."""
    if isinstance(value, _IntToken):
        digits, most = len(value.lstrip("-")), sys.get_int_max_str_digits()
        if most and digits > most:
            raise InputError(f"{where}: an integer of {digits:,} digits; certa reads integers of at most "
                             f"{most:,} digits (write it as a fraction or a string)")
    elif isinstance(value, (dict, list)):
        for item in value.values() if isinstance(value, dict) else value:
            _check_integers(where, item)


def _check_jsonl_cells(name: str, lineno: int, record: dict[str, Any], limits: InputLimits) -> None:
    """Each cell of a record read with number tokens within ``cell_bytes``, and each integer convertible."""
    for column, value in record.items():
        where = f"input '{name}', line {lineno}, column '{column}'"
        cell = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        limits.check(where, "cell_bytes", _utf8_len(cell), "the size in bytes of the cell")
        _check_integers(where, value)


def _jsonl_record(name: str, lineno: int, line: str, limits: InputLimits) -> Any:
    """One line's JSON value. A line long enough to hold a cell over ``cell_bytes`` (a character of JSON text
    is at most 4 bytes of a cell) or an integer over Python's digit limit is read first with its numbers as
    text, so that such a cell is refused, naming its column, before anything converts it."""
    most = sys.get_int_max_str_digits()
    checked = 4 * len(line) > limits.cell_bytes or 0 < most < len(line)
    try:
        record = _loads(line, tokens=checked)
        if checked and isinstance(record, dict):
            _check_jsonl_cells(name, lineno, record, limits)
            record = _loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"input '{name}', line {lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise InputError(f"input '{name}', line {lineno}: JSON nested too deeply for a table row") from None
    return record


def _parse_jsonl(name: str, raw: bytes, limits: InputLimits) -> Columns:
    limits.check(f"input '{name}'", "text_bytes", len(raw), "the size in bytes of a jsonl file")
    records: list[dict[str, Any]] = []
    names: dict[str, None] = {}  # every key, in order of first appearance
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"input '{name}' is not UTF-8 text: {exc}") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(records) >= limits.rows:
            limits.check(f"input '{name}', line {lineno}", "rows", len(records) + 1, "the number of records")
        record = _jsonl_record(name, lineno, line, limits)
        if not isinstance(record, dict):
            raise InputError(f"input '{name}', line {lineno}: each line must be a JSON object")
        records.append(record)
        if not names.keys() >= record.keys():
            names.update(dict.fromkeys(record))
            limits.check(f"input '{name}', line {lineno}", "columns", len(names), "the number of columns")
    if not records:
        raise InputError(f"input '{name}' is empty: a JSON Lines table needs at least one record")
    return _as_columns({k: _cells([_jsonl_cell(r.get(k)) for r in records]) for k in names})


def _parse_csv(name: str, raw: bytes, limits: InputLimits) -> Columns:
    from certa.engine.core.table_formats.arrow_csv import MAX_FIELD_BYTES, read_csv

    read = read_csv(raw, max_field_bytes=min(MAX_FIELD_BYTES, limits.cell_bytes + 1))
    if read is None:
        return _as_columns(_parse_csv_python(name, raw, limits))
    header, columns = read
    rows = len(columns[0].cells) if columns[0].cells is not None else len(columns[0].values)
    limits.check(f"input '{name}'", "columns", len(header), "the number of columns in the header")
    limits.check(f"input '{name}'", "rows", rows, "the number of data rows")
    if len(set(header)) != len(header) or any(h == "" for h in header):
        raise InputError(f"input '{name}': the header has empty or repeated column names: {header}")
    return Columns({h: _Column(arrow=c.cells, strip=True) if c.cells is not None else  # numbers' text: read_cells
                    _Column(numbers=(c.values, np.zeros(0, dtype=bool), None), kind="csv", source=c.read_cells)
                    for h, c in zip(header, columns)})


def _parse_parquet(name: str, raw: bytes, limits: InputLimits) -> Columns:
    from certa.engine.core.table_formats.parquet import read_parquet

    return Columns({column: _Column(arrow=payload) if kind == "text" else _Column(numbers=payload, kind=kind)
                    for column, kind, payload in read_parquet(name, raw, limits)})


CONCURRENT_HASH_BYTES = 1 << 20
"""Inputs of at least this many bytes are hashed on a thread of their own while they are parsed."""


def _parse_and_hash(raw: bytes, parse: Callable[[], Columns]) -> tuple[Columns, str]:
    """``(parse(), sha256_hex(raw))``, a large input hashed on another thread while it is parsed: ``hashlib``
    releases the GIL while it hashes a buffer of more than 2 KiB, and Arrow while it parses, so the two run
    on two cores. The digest is of the same immutable bytes either way."""
    if len(raw) < CONCURRENT_HASH_BYTES:
        return parse(), sha256_hex(raw)
    digest: list[str] = []
    hasher = threading.Thread(target=lambda: digest.append(sha256_hex(raw)), name="certa-sha256", daemon=True)
    hasher.start()
    try:
        columns = parse()
    finally:
        hasher.join()
    return columns, digest[0]


def parse_table(name: str, raw: bytes, fmt: str, limits: InputLimits | None = None) -> Table:
    """Parse ``raw`` bytes as a ``csv``, ``jsonl`` or ``parquet`` table named ``name``, within ``limits``
    (default: ``InputLimits.from_env()``). An evaluator's export is read by ``certa.engine.core.evidence.formats``."""
    if fmt not in FORMATS:
        raise InputError(f"input '{name}': unknown table format {fmt!r}; use one of {', '.join(FORMATS)}")
    limits = limits or InputLimits.from_env()
    limits.check_size(name, fmt, len(raw))
    reader = {"csv": _parse_csv, "jsonl": _parse_jsonl, "parquet": _parse_parquet}[fmt]
    columns, sha256 = _parse_and_hash(raw, lambda: reader(name, raw, limits))
    return Table(name=name, columns=columns, sha256=sha256, fmt=fmt, raw=raw)


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


def table_from_columns(name: str, columns: Mapping[str, Sequence[Any] | np.ndarray],
                       limits: InputLimits | None = None) -> Table:
    """An in-memory table, written to canonical CSV and parsed back (see module docstring) within ``limits``."""
    return parse_table(name, columns_to_csv_bytes(columns), "csv", limits)
