"""Arrow-backed table parsing equals the Python parser of certa <= 0.3.0, bit for bit.

The oracle (``_oracle_*``) is a verbatim copy of ``engine/core/tables.py`` as released in 0.3.0 (CSV by Python's
``csv`` module, numbers by ``astype(float64)`` on Python strings). Every table the oracle accepted must
give the same columns (order, strings, float64 bits, row count, sha256); every table it refused must be
refused with the same message.
"""

from __future__ import annotations

import csv
import io
import struct
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certa.engine import InputError
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.table_formats.arrow_csv import PY_WHITESPACE
from certa.engine.core.tables import columns_to_csv_bytes, format_for_path, parse_table

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- the oracle: certa 0.3.0

def _oracle_cells(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _oracle_parse_csv(name: str, raw: bytes) -> dict[str, np.ndarray]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"input '{name}' is not UTF-8 text: {exc}") from None
    # the csv module's field size limit is process-wide, and a test of small limits may have left it low
    csv.field_size_limit(InputLimits().cell_bytes)
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
    return {h: _oracle_cells([row[j].strip() for row in body]) for j, h in enumerate(header)}


def _oracle_is_float(cell: str) -> bool:
    try:
        float(cell or "nan")
    except ValueError:
        return False
    return True


def _oracle_numeric(name: str, column: str, cells: np.ndarray, allow_missing: bool) -> np.ndarray:
    filled = np.where(cells == "", "nan", cells)
    try:
        values = filled.astype(np.float64)
    except ValueError:
        bad = next(i for i, c in enumerate(cells.tolist()) if not _oracle_is_float(c))
        raise InputError(
            f"input '{name}', column '{column}', row {bad + 1}: {cells[bad]!r} is not a number"
        ) from None
    if not allow_missing:
        bad_rows = np.flatnonzero(~np.isfinite(values))
        if bad_rows.size:
            row = int(bad_rows[0])
            raise InputError(
                f"input '{name}', column '{column}', row {row + 1}: value {cells[row]!r} is missing or "
                f"not finite ({bad_rows.size} such row(s)); clean the data or drop those rows"
            )
    return values


# --------------------------------------------------------------------------- comparison

def _bits(values: np.ndarray) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.uint64).tolist()


def _outcome(fn):
    try:
        return ("ok", fn())
    except InputError as exc:
        return ("InputError", str(exc))
    except csv.Error as exc:
        return ("csv.Error", str(exc))


def assert_csv_same_as_oracle(raw: bytes) -> None:
    expected = _outcome(lambda: _oracle_parse_csv("t", raw))
    got = _outcome(lambda: parse_table("t", raw, "csv"))
    assert got[0] == expected[0], (raw, got, expected)
    if expected[0] != "ok":
        assert got[1] == expected[1]
        return
    oracle, table = expected[1], got[1]
    assert list(table.columns) == list(oracle)
    assert table.n_rows == (len(next(iter(oracle.values()))) if oracle else 0)
    for column, cells in oracle.items():
        text = table.text(column)
        assert text.dtype == object and text.tolist() == cells.tolist()
        assert all(type(c) is str for c in text.tolist())
        for allow_missing in (True, False):
            want = _outcome(lambda: _bits(_oracle_numeric("t", column, cells, allow_missing)))
            have = _outcome(lambda: _bits(table.numeric(column, allow_missing=allow_missing)))
            assert have == want, (raw, column, allow_missing)


# --------------------------------------------------------------------------- strategies

def _halfway(draw) -> str:
    """A decimal at, just below or just above the midpoint of two adjacent doubles (often > 17 digits)."""
    x = draw(st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False, allow_infinity=False))
    up = np.nextafter(x, np.inf)
    mid = (Decimal(x) + Decimal(float(up))) / 2
    digits = format(mid, "e")
    nudge = draw(st.sampled_from(["", "0", "1", "9", "00000000000000000001", "99999999999999999999"]))
    mantissa, exponent = digits.split("e")
    if nudge and "." in mantissa:
        mantissa = mantissa + nudge if draw(st.booleans()) else mantissa[:-1]
    return f"{mantissa}e{exponent}"


SPECIAL = ["nan", "NaN", "NAN", "-nan", "+nan", "inf", "-inf", "+inf", "Inf", "INF", "infinity", "Infinity",
           "-Infinity", "+INFINITY", "1_000", "1_0.5e1_0", "١٢٣", "１２", "0x10", "1e", "e5", ".", "+", "-", "+-1",
           "1.2.3", "1e5.5", "--1", "abc", "1 2", "nan1", "infinit", "1d5", "1f", "0.0", "-0", "-0.0", "+0",
           "1E+400", "-1e400", "1e-400", "4.9e-324", "2.4703282292062328e-324", "2.4703282292062327e-324",
           "2.2250738585072011e-308", "2.2250738585072012e-308", "1.7976931348623157e308",
           "1.7976931348623158e308", "1.797693134862315807e308", "9007199254740993", "0000012", "1.",
           ".5", "-.5e-3", "+5.", "1e0000000000000000000001", "1e-99999999999999999999"]


@st.composite
def decimal_cell(draw) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.sampled_from(SPECIAL))
    if kind == 1:
        return _halfway(draw)
    if kind == 2:
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    sign = draw(st.sampled_from(["", "-", "+"]))
    int_part = draw(st.text("0123456789", max_size=30))
    frac = draw(st.none() | st.text("0123456789", max_size=30))
    mantissa = int_part + ("" if frac is None else "." + frac)
    if not mantissa.strip(".") :
        mantissa = "0"
    exponent = draw(st.none() | st.integers(-400, 400) | st.integers(-10**25, 10**25))
    exp_text = "" if exponent is None else draw(st.sampled_from(["e", "E"])) + (
        ("+" if exponent >= 0 and draw(st.booleans()) else "") + str(exponent))
    return sign + mantissa + exp_text


WHITESPACE = st.sampled_from(["", "", " ", "\t", "  ", "\xa0", "\u2003", "\x0b", "\x0c", "\x1c", "\x85", "\u3000"])


@st.composite
def padded_cell(draw) -> str:
    return draw(WHITESPACE) + draw(decimal_cell()) + draw(WHITESPACE)


# --------------------------------------------------------------------------- properties

def test_py_whitespace_is_what_str_strip_removes() -> None:
    assert set(PY_WHITESPACE) == {chr(c) for c in range(0x110000) if chr(c).isspace()}


@pytest.mark.slow
@settings(derandomize=True, max_examples=400, deadline=None)
@given(st.lists(padded_cell(), min_size=1, max_size=40))
def test_numbers_equal_pythons_float_bit_for_bit(cells: list[str]) -> None:
    raw = ("x\n" + "\n".join(cells) + "\n").encode("utf-8")
    assert_csv_same_as_oracle(raw)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.lists(decimal_cell(), min_size=1, max_size=200))
def test_numbers_without_bad_cells_equal_pythons_float(cells: list[str]) -> None:
    good = [c for c in cells if _oracle_is_float(c)] or ["1"]
    table = parse_table("t", ("x\n" + "\n".join(good) + "\n").encode(), "csv")
    assert _bits(table.numeric("x", allow_missing=True)) == _bits([float(c) for c in good])


CELL_TEXT = st.text(alphabet=st.sampled_from(list("ab01.e-+ ,\t\"\r\n\x00\x1c\xa0é\u2003x\ufeff")), max_size=6)


@st.composite
def csv_bytes(draw) -> bytes:
    n_cols = draw(st.integers(1, 4))
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 9)) == 0:
            lines.append("")  # an empty line
            continue
        width = n_cols if draw(st.integers(0, 7)) else draw(st.integers(1, 5))
        lines.append(",".join(draw(st.one_of(CELL_TEXT, padded_cell())) for _ in range(width)))
    header = ",".join(draw(st.sampled_from(["a", " b", "c ", "a", "", "é", "x\ty"])) for _ in range(n_cols))
    ends = [draw(st.sampled_from(["\n", "\r\n", "\r"])) for _ in range(len(lines) + 1)]
    text = header + "".join(end + line for end, line in zip(ends, lines))
    if draw(st.booleans()):
        text += ends[-1]
    raw = text.encode("utf-8")
    if draw(st.integers(0, 5)) == 0:
        raw = b"\xef\xbb\xbf" + raw
    if draw(st.integers(0, 9)) == 0:
        raw += b"\xff"  # invalid UTF-8
    return raw


@pytest.mark.slow
@settings(derandomize=True, max_examples=600, deadline=None)
@given(csv_bytes())
def test_csv_files_parse_as_python_csv_did(raw: bytes) -> None:
    assert_csv_same_as_oracle(raw)


@pytest.mark.parametrize("raw", [
    b"", b"\n\n", b"\xef\xbb\xbf", b"a\n", b"a,b\n1,2\n\n\n3,4", b"a,b\r\n1,2\r\n", b"a,b\r1,2\r3,4",
    b" a , b \n 01 , 2 \n", b"id\n01\n007\n", b"a\n\"q\"\n", b"a,b\n1\n", b"a\n1,2\n", b"a,a\n1,2\n",
    b"a,\n1,2\n", b"\xef\xbb\xbfa\n1\n", b"a\n\xff\n", b"a\n1\x002\n", b"a\n" + b"x" * 200_000 + b"\n",
    b"a\n" + b"1" * 120_000 + b"\n", b"x\nnan\n-nan\n+inf\n", b"x\n1\n2\noops\n", b"a\n\x1c1\x1c\n",
])
def test_edge_case_files_parse_as_python_csv_did(raw: bytes) -> None:
    assert_csv_same_as_oracle(raw)


def test_long_ids_and_leading_zeros_stay_text() -> None:
    table = parse_table("t", b"id,x\n01,1\n0007,2\n12345678901234567890123,3\n", "csv")
    assert table.text("id").tolist() == ["01", "0007", "12345678901234567890123"]


def test_large_csv_matches_oracle() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(20_000) * 10.0 ** rng.integers(-300, 300, 20_000)
    raw = columns_to_csv_bytes({"id": [f"r{i:06d}" for i in range(x.size)], "x": x,
                                "k": rng.integers(-10**18, 10**18, x.size)})
    assert_csv_same_as_oracle(raw)
    assert _bits(parse_table("t", raw, "csv").numeric("x")) == _bits(x)


# --------------------------------------------------------------------------- Parquet

def _parquet(table: pa.Table, **kwargs: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue()


def test_parquet_and_csv_with_the_same_values_give_equal_columns() -> None:
    rng = np.random.default_rng(3)
    n = 500
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
    k = rng.integers(-2**62, 2**62, n)
    ids = [f"r{i:04d}" for i in range(n)]
    flag = rng.integers(0, 2, n).astype(bool)
    cols = {"id": ids, "x": x, "k": k, "flag": flag}
    from_csv = parse_table("t", columns_to_csv_bytes(cols), "csv")
    raw = _parquet(pa.table({"id": pa.array(ids).dictionary_encode(), "x": x, "k": k, "flag": flag}))
    from_parquet = parse_table("t", raw, "parquet")
    assert from_parquet.fmt == "parquet" and from_parquet.raw == raw
    assert list(from_parquet.columns) == list(from_csv.columns) and from_parquet.n_rows == n
    for column in cols:
        assert from_parquet.text(column).tolist() == from_csv.text(column).tolist()
    for column in ("x", "k"):
        assert _bits(from_parquet.numeric(column)) == _bits(from_csv.numeric(column))
    for table in (from_csv, from_parquet):
        with pytest.raises(InputError, match=r"column 'flag', row 1: '(true|false)' is not a number"):
            table.numeric("flag")
    assert _bits(from_parquet.numeric("k")) == _bits([float(v) for v in k.tolist()])


def test_parquet_nulls_are_missing_like_empty_csv_cells() -> None:
    raw = _parquet(pa.table({"x": pa.array([1.5, None, 3.0]), "k": pa.array([1, None, 3]),
                             "s": pa.array(["1", None, " 2 "]), "z": pa.nulls(3)}))
    table = parse_table("t", raw, "parquet")
    csv_table = parse_table("t", b"x,k,s,z\n1.5,1,1,\n,,,\n3.0,3, 2 ,\n", "csv")
    assert table.text("x").tolist() == csv_table.text("x").tolist() == ["1.5", "", "3.0"]
    assert table.text("k").tolist() == ["1", "", "3"] and table.text("z").tolist() == ["", "", ""]
    assert table.text("s").tolist() == ["1", "", " 2 "]  # Parquet strings are kept as stored (not stripped)
    for column in "xksz":
        assert _bits(table.numeric(column, allow_missing=True)) == _bits(csv_table.numeric(column, allow_missing=True))
        with pytest.raises(InputError, match=rf"column '{column}', row \d: value '' is missing"):
            table.numeric(column)


@pytest.mark.parametrize("arrow_type, values", [
    (pa.list_(pa.int64()), [[1], [2]]), (pa.struct([("a", pa.int64())]), [{"a": 1}, {"a": 2}]),
    (pa.decimal128(5, 2), [Decimal("1.25"), Decimal("2.50")]), (pa.timestamp("s"), [0, 1]), (pa.binary(), [b"a", b"b"]),
])
def test_unsupported_parquet_types_are_refused_naming_the_column(arrow_type: pa.DataType, values: list) -> None:
    raw = _parquet(pa.table({"ok": [1.0, 2.0], "bad": pa.array(values, type=arrow_type)}))
    with pytest.raises(InputError, match=r"input 't', column 'bad': Parquet type .* is not supported"):
        parse_table("t", raw, "parquet")


def test_parquet_refusals_name_the_input() -> None:
    with pytest.raises(InputError, match="input 't' is not a readable Parquet file"):
        parse_table("t", b"x\n1\n", "parquet")
    assert format_for_path(Path("data/x.parquet")) == "parquet"


def test_parquet_float32_and_big_ints_convert_exactly() -> None:
    f32 = np.array([0.1, 1e-40, 3.4e38], dtype=np.float32)
    big = [2**53 + 1, -(2**63), 2**63 - 1]
    raw = _parquet(pa.table({"f": f32, "i": pa.array(big, pa.int64()), "u": pa.array([2**64 - 1, 0, 1], pa.uint64())}))
    table = parse_table("t", raw, "parquet")
    assert _bits(table.numeric("f")) == _bits(f32.astype(np.float64))
    assert _bits(table.numeric("i")) == _bits([float(v) for v in big])
    assert table.text("u").tolist() == [str(2**64 - 1), "0", "1"]
    assert _bits(table.numeric("u")) == _bits([float(2**64 - 1), 0.0, 1.0])


# --------------------------------------------------------------------------- import cost

def test_pyarrow_is_not_imported_by_certa_help_or_import_engine() -> None:
    code = ("import sys, cli, engine\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_arrow_cast_accepts_exactly_what_float_accepts_over_the_decimal_alphabet() -> None:
    """Every string of up to 5 characters over 0 1 9 + - . e E: Arrow's cast succeeds exactly where Python's
    float() does, with the same bits (the premise of ``table_formats.decimal``'s fast path)."""
    import itertools

    import pyarrow.compute as pc

    for length in range(1, 6):
        for chars in itertools.product("019+-.eE", repeat=length):
            cell = "".join(chars)
            try:
                arrow = pc.cast(pa.array([cell]), pa.float64())[0].as_py()
            except pa.ArrowInvalid:
                arrow = None
            python = float(cell) if _oracle_is_float(cell) and cell else None
            assert (arrow is None) == (python is None), cell
            if python is not None:
                assert struct.pack("<d", arrow) == struct.pack("<d", python), cell


@pytest.mark.slow  # the unit tier has the exhaustive short-cell check above
@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.lists(st.text("0123456789+-.eE", min_size=1, max_size=12), min_size=1, max_size=30))
def test_cells_over_the_decimal_alphabet_parse_as_python_did(cells: list[str]) -> None:
    assert_csv_same_as_oracle(("x\n" + "\n".join(cells) + "\n").encode())


@settings(derandomize=True, max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["vendor-a", "vendor-b", "é", "a b", "0", "01", "Z", "zz"]), min_size=1,
                max_size=40))
def test_factorize_of_an_arrow_column_equals_the_python_cells_path(labels: list[str]) -> None:
    """``Table.factorize`` dictionary-encodes an Arrow-read column; the answer is the one the cells give."""
    from certa.engine.core.tables import factorize_cells, parse_table

    raw = ("label,x\n" + "".join(f"{label},1\n" for label in labels)).encode("utf-8")
    table = parse_table("t", raw, "csv")
    found_labels, codes = table.factorize("label")
    expected_labels, expected_codes = factorize_cells(table.text("label"))
    assert found_labels == expected_labels == tuple(sorted(set(labels)))
    assert codes.tolist() == expected_codes.tolist() == [found_labels.index(label) for label in labels]


# --------------------------------------------------------------------------- threads, blocks, the quick cast

def test_arrow_cast_gives_python_floats_bits_wherever_it_gives_a_finite_value() -> None:
    """Every string of up to 4 characters over digits, signs, point, exponent letters, the letters of nan/inf,
    ``(``, ``x``, ``_`` and a space: where Arrow's cast succeeds with a finite value, Python's ``float()`` gives
    the same bits (the premise of ``decimal.cast_float64``, which converts the non-finite ones again)."""
    import itertools

    import pyarrow.compute as pc

    accepted = 0
    for length in range(1, 5):
        for chars in itertools.product("019+-.eEnaif(x_ ", repeat=length):
            cell = "".join(chars)
            try:
                arrow = pc.cast(pa.array([cell]), pa.float64())[0].as_py()
            except pa.ArrowInvalid:
                continue
            accepted += 1
            if np.isfinite(arrow):
                assert _oracle_is_float(cell), cell
                assert struct.pack("<d", arrow) == struct.pack("<d", float(cell)), cell
    assert accepted > 500  # the enumeration reaches the cast's accepted strings


EDGE_CELLS = ["", "", "-0.0", "-0", "0", "+0", "1e308", "1.7976931348623157e308", "1e309", "-1e309", "5e-324",
              "2.4703282292062328e-324", "1e-400", "-1e-400", "9007199254740993", "-9007199254740993",
              "18446744073709551617", "123456789012345678901234567890", "1E+5", "1e-05", ".5", "5.", "+.5e+3",
              "nan", "-NaN", "inf", "-Infinity", "nan(1)", "0x10", "1_0", " 7 ", "\t-2.5\x0b", "\xa01\u3000",
              "1.2.3", "abc", "0.1", "1e-7", "0000.5000", "1e0000000000000000000001"]


@st.composite
def halfway_cell(draw) -> str:
    return _halfway(draw)


@st.composite
def numeric_csv(draw) -> tuple[bytes, int]:
    """A CSV of 1 to 3 columns and up to 120 rows, cells mostly numbers (``EDGE_CELLS``, floats' reprs, big
    integers, halfway decimals), sometimes a quote; line ends LF, CRLF or CR; sometimes a BOM and empty lines."""
    n_cols = draw(st.integers(1, 3))
    clean = st.one_of(st.floats(allow_nan=False).map(repr), st.integers(-2**70, 2**70).map(str), halfway_cell(),
                      st.sampled_from(["", "-0.0", "-0", "1e-400", "1e309", "nan", "-inf", "nan(1)"]))
    mixed = st.one_of(st.sampled_from(EDGE_CELLS), clean, decimal_cell())
    kinds = [draw(st.sampled_from([clean, mixed])) for _ in range(n_cols)]  # a clean column: Arrow's quick cast
    n_rows = draw(st.integers(1, 120))
    rows = list(zip(*(draw(st.lists(kind, min_size=n_rows, max_size=n_rows)) for kind in kinds)))
    rows = [list(row) for row in rows]
    if draw(st.integers(0, 7)) == 0:
        rows[draw(st.integers(0, len(rows) - 1))][0] = '"1.5"'
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    lines = [",".join(f"c{j}" for j in range(n_cols)), *(",".join(row) for row in rows)]
    if draw(st.integers(0, 4)) == 0:
        lines.insert(draw(st.integers(1, len(lines))), "")
    raw = (end.join(lines) + end).encode("utf-8")
    return (b"\xef\xbb\xbf" + raw if draw(st.integers(0, 4)) == 0 else raw), n_cols


@pytest.mark.slow
@pytest.mark.parametrize("block_bytes, parallel_rows", [(64, 1), (1000, 7), (1 << 20, 1 << 17)])
def test_results_do_not_depend_on_block_size_or_threads(monkeypatch, block_bytes: int, parallel_rows: int) -> None:
    """Arrow parses blocks on its threads and long columns are cast in row ranges on threads: with tiny blocks
    (many chunks per column) and casts split down to one row per range, every table is still the 0.3.0 parser's."""
    from certa.engine.core.table_formats import arrow_csv, decimal

    monkeypatch.setattr(arrow_csv, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(decimal, "PARALLEL_ROWS", parallel_rows)

    @settings(derandomize=True, max_examples=150, deadline=None)
    @given(numeric_csv())
    def check(case: tuple[bytes, int]) -> None:
        assert_csv_same_as_oracle(case[0])

    check()


def test_small_blocks_keep_the_arrow_path_and_split_columns_into_chunks(monkeypatch) -> None:
    """The block-size test above runs through Arrow (not the Python fallback), with several chunks a column,
    Arrow's numbers kept where proven, and casts split into ranges where a column is read as text."""
    from certa.engine.core.table_formats import arrow_csv, decimal

    monkeypatch.setattr(arrow_csv, "BLOCK_BYTES", 256)
    monkeypatch.setattr(decimal, "PARALLEL_ROWS", 3)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(400) * 10.0 ** rng.integers(-300, 300, 400)
    raw = columns_to_csv_bytes({"id": [f"r{i}" for i in range(400)], "x": x, "k": rng.integers(-2**62, 2**62, 400),
                                "t": [f"\x0b{v!r}" for v in x.tolist()]})
    header, columns = arrow_csv.read_csv(raw)
    assert header == ["id", "x", "k", "t"]
    assert columns[0].cells.num_chunks > 10 and columns[3].cells.num_chunks > 10
    assert _bits(columns[1].values) == _bits(x) and columns[2].cells is None
    values, bad = decimal.strings_to_float64(arrow_csv.strip(columns[3].cells))
    assert bad is None and _bits(values) == _bits(x)
    assert_csv_same_as_oracle(raw)


@pytest.mark.parametrize("cells, kept", [
    (["1", "2", "-3"], True), (["1", "", "3"], True), (["1.5", "", "-0.0", " 2 ", "\t7"], True),
    (["0x10", "2"], False), (["1", "0"], False), (["1", "-0"], False), (["1.5", "nan"], False), (["1", "inf"], False),
    (["1e999", "1"], False), (["true", "false"], False), (["2020-01-01"], False), (["12:00"], False), (["", ""], False),
    (["9223372036854775808", "1"], True), (["1", "1.5"], True), (["01", "007"], True),
])
def test_arrow_typed_columns_are_kept_only_where_proven(cells: list[str], kept: bool) -> None:
    """Arrow's inferred numbers are kept only where they are ``float()`` of the cells (no hexadecimal, no
    integer zero, nothing non-finite, numbers only); elsewhere the column is read as text. Either way the
    table is the 0.3.0 parser's."""
    from certa.engine.core.table_formats import arrow_csv

    raw = ("x,y\n" + "".join(f"{cell},a\n" for cell in cells)).encode("utf-8")
    _, columns = arrow_csv.read_csv(raw)
    assert (columns[0].values is not None) == kept and columns[1].cells is not None
    assert_csv_same_as_oracle(raw)


def test_types_that_later_blocks_widen_give_the_same_table(monkeypatch) -> None:
    """Integers then a fraction, numbers then a word, in later blocks: Arrow widens the column's type (or,
    if it cannot, every column is read as text); the table is the 0.3.0 parser's either way."""
    from certa.engine.core.table_formats import arrow_csv

    monkeypatch.setattr(arrow_csv, "BLOCK_BYTES", 64)
    raw = ("x,y\n" + "".join(f"{i},{i}.5\n" for i in range(1, 60)) + "1.5,abc\n").encode()
    _, columns = arrow_csv.read_csv(raw)
    assert columns[0].values is not None and columns[1].cells is not None
    assert_csv_same_as_oracle(raw)
    for first, last in (("-0", "1.5"), ("0x10", "1.5"), ("-0", "1"), ("7", "0x1f"), ("1", "2020-01-01")):
        assert_csv_same_as_oracle(f"x\n{first}\n{''.join(f'{i}{chr(10)}' for i in range(1, 60))}{last}\n".encode())


@pytest.mark.slow
def test_every_short_cell_through_arrows_typed_read_is_pythons() -> None:
    """Every cell of up to 3 characters over digits, signs, point, exponent letters, ``n a i f x``, space and
    tab, alone in a column and next to a plain number: the table (text, numbers, refusals) is 0.3.0's."""
    import itertools

    for length in range(1, 4):
        for chars in itertools.product("09+-.eEnaifx \t", repeat=length):
            cell = "".join(chars)
            assert_csv_same_as_oracle(f"x,y\n{cell},1\n2.5,{cell}\n".encode())


def test_a_long_field_is_measured_before_arrows_numbers_are_kept() -> None:
    """A field of at least the limit is never read by Arrow (the Python reader names the cell over the limit)."""
    from certa.engine.core.table_formats import arrow_csv

    assert arrow_csv.read_csv(b"x\n" + b" " * 150_000 + b"1\n2\n") is None
    assert arrow_csv.read_csv(b"x\n" + b"1" * 120_000 + b"\n") is None
    assert arrow_csv.read_csv(b"x" * 100_000 + b"\n1\n") is None
    assert arrow_csv.read_csv(b"x\n" + b"0" * 99_990 + b"1\n")[1][0].values.tolist() == [1.0]
    assert arrow_csv.read_csv(b"x\n1\n", max_field_bytes=2)[1][0].cells is not None
    assert arrow_csv.read_csv(b"x\n11\n", max_field_bytes=2) is None


def test_large_inputs_are_hashed_on_a_thread_to_the_same_digest(monkeypatch) -> None:
    import hashlib

    from certa.engine.core import tables

    monkeypatch.setattr(tables, "CONCURRENT_HASH_BYTES", 1)
    for raw, fmt in ((b"a,b\n1,2\n", "csv"), (b'{"a": 1}\n', "jsonl")):
        assert parse_table("t", raw, fmt).sha256 == hashlib.sha256(raw).hexdigest()
    with pytest.raises(InputError, match="row 1: 2 cells"):  # a parse error still surfaces, the hasher joined
        parse_table("t", b"a\n1,2\n", "csv")


def test_unstripped_cells_give_stripped_text_and_numbers() -> None:
    """Arrow-read cells are stripped on the first request for text; numbers come from the cells either way."""
    raw = "id,x\n a ,\t1.5\n\u3000b, 2 \nc,3\n".encode("utf-8")
    table = parse_table("t", raw, "csv")
    assert table.columns.column("id").cell(0) == "a" and table.columns.column("x").cell(1) == "2"
    assert table.numeric("x").tolist() == [1.5, 2.0, 3.0]
    assert table.text("id").tolist() == ["a", "b", "c"] and table.factorize("id")[0] == ("a", "b", "c")
    assert table.text("x").tolist() == ["1.5", "2", "3"]
    typed = parse_table("t", b"x,y\n 1.50 ,a\n2e0,b\n", "csv")
    assert typed.columns.column("x").cell(1) == "2e0" and typed.numeric("x").tolist() == [1.5, 2.0]
    labels, codes = typed.factorize("x")
    assert labels == ("1.50", "2e0") and codes.tolist() == [0, 1]
    assert typed.text("x").tolist() == ["1.50", "2e0"]


@pytest.mark.slow  # the unit tier has the fixed cases above
@settings(derandomize=True, max_examples=150, deadline=None)
@given(st.lists(st.one_of(padded_cell(), st.sampled_from([" ", "\t", "nan(1)", " nan ", "", "1_0"])), min_size=1,
                max_size=30))
def test_parquet_text_cells_convert_unstripped_as_python_did(cells: list[str]) -> None:
    """Parquet strings are not stripped; their numbers are ``astype(float64)`` of the cells as stored (which
    skips surrounding whitespace, but refuses a whitespace-only cell)."""
    table = parse_table("t", _parquet(pa.table({"s": pa.array(cells, pa.string())})), "parquet")
    for allow_missing in (True, False):
        want = _outcome(lambda: _bits(_oracle_numeric("t", "s", _oracle_cells(cells), allow_missing)))
        have = _outcome(lambda: _bits(table.numeric("s", allow_missing=allow_missing)))
        assert have == want, (cells, allow_missing)


def test_arrow_never_reads_the_python_bytes_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow reads a copy in its own memory, never a zero-copy view of the input's Python ``bytes``: a view that an
    Arrow pool thread released last, at interpreter exit, aborted the process (SIGABRT; engine/core/table_formats/
    arrow_memory.py). Every buffer handed to Arrow's CSV and Parquet readers is checked not to overlap ``raw``."""
    from certa.engine.core.table_formats.arrow_memory import arrow_owned_copy
    import pyarrow.csv as pacsv
    handed: list[pa.Buffer] = []

    def recording(real):
        def wrapper(source, *args, **kwargs):
            handed.append(source if isinstance(source, pa.Buffer) else pa.py_buffer(source))
            return real(source, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(pa, "BufferReader", recording(pa.BufferReader))
    monkeypatch.setattr(pacsv, "read_csv", recording(pacsv.read_csv))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"x": np.arange(1000.0), "t": [str(i % 7) for i in range(1000)]}), sink)
    inputs = {"csv": columns_to_csv_bytes({"x": np.arange(1000.0), "y": np.arange(1000.0) / 3}),
              "parquet": sink.getvalue().to_pybytes()}
    for fmt, raw in inputs.items():
        handed.clear()
        table = parse_table("t", raw, fmt)
        assert table.numeric("x", allow_missing=False)[-1] == 999.0 and handed, fmt
        start = np.frombuffer(raw, dtype=np.uint8).ctypes.data
        for buffer in handed:
            assert buffer.address + buffer.size <= start or buffer.address >= start + len(raw), fmt
    copy = arrow_owned_copy(inputs["csv"])
    assert copy.equals(pa.py_buffer(inputs["csv"])) and copy.is_mutable and arrow_owned_copy(b"").size == 0
