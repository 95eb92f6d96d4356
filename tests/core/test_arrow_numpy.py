"""Arrow <-> numpy through buffers (certa.engine.core.table_formats.arrow_numpy): the same values as pyarrow's own
conversions, and reading a table never makes pyarrow try to import pandas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from certa.engine.core.table_formats.arrow_numpy import (array_of, nulls_of, text_array, text_scalar, texts_of,
                                                         values_of)

ROOT = Path(__file__).resolve().parents[2]


def _arrays() -> list[pa.Array | pa.ChunkedArray]:
    """Numeric and boolean arrays with nulls, sliced at offsets that are not whole bytes, and chunked."""
    ints = pa.array([5, None, -3, 0, 7, None, 11, 2**40, -1, 4, None], type=pa.int64())
    floats = pa.array([0.5, None, -1e300, float("inf"), 2.25, None, -0.0, 3.0, None], type=pa.float64())
    bools = pa.array([True, None, False, True, True, False, None, False, True, True, False, True], type=pa.bool_())
    return [ints, ints.slice(3, 6), floats.slice(1, 7), pa.array([1, 2, 3], type=pa.int32()).slice(1),
            pa.array([1.5, 2.5], type=pa.float32()), bools, bools.slice(5, 6),
            pa.chunked_array([ints.slice(1, 4), ints.slice(6)]), pa.chunked_array([], type=pa.float64()),
            pa.chunked_array([bools.slice(2, 3), bools.slice(9)]), pa.array([], type=pa.int64()), bools.slice(4, 0),
            pa.chunked_array([ints.slice(2, 0), ints.slice(0, 2)])]


@pytest.mark.parametrize("array", _arrays())
def test_values_and_nulls_are_pyarrows_own(array):
    nulls = array.is_null().to_numpy(zero_copy_only=False)
    expected = array.fill_null(False if pa.types.is_boolean(array.type) else 0).to_numpy(zero_copy_only=False)
    got, got_nulls = values_of(array), nulls_of(array)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got[~nulls], expected[~nulls])  # a null's slot holds whatever the buffer holds
    assert (got_nulls is None) == (not nulls.any()) and (got_nulls is None or np.array_equal(got_nulls, nulls))


@pytest.mark.parametrize("values", [np.array([3, -1, 0, 2**50]), np.array([0.25, -0.0, np.nan]),
                                    np.array([True, False, True, True, False, False, True, False, True]),
                                    np.arange(10, dtype=np.int32)[::3]])
def test_array_of_is_pa_array(values):
    got, expected = array_of(values), pa.array(values)
    assert got.type == expected.type and got.null_count == expected.null_count == 0
    assert np.array_equal(values_of(got), expected.to_numpy(zero_copy_only=False), equal_nan=values.dtype.kind == "f")


def test_text_conversions_are_pyarrows_own():
    cells = np.array(["", "a", "ünï", "日本", "x" * 100, " 1.5 "], dtype=object)
    built = text_array(cells)
    assert built.equals(pa.array(cells, type=pa.string()))
    assert texts_of(pa.chunked_array([built.slice(0, 2), built.slice(2)])).tolist() == cells.tolist()
    assert texts_of(pa.array(["a", None])).tolist() == ["a", None]
    assert text_scalar("0", pa.string()) == pa.scalar("0", pa.string())
    assert text_scalar("ü", pa.large_string()) == pa.scalar("ü", pa.large_string())
    with pytest.raises(UnicodeEncodeError):
        text_array(np.array(["\ud800"], dtype=object))


@pytest.mark.slow  # a fresh interpreter: about 0.5 s
def test_reading_a_csv_and_its_columns_never_tries_to_import_pandas():
    """pyarrow tries ``import pandas`` on its first numpy or Python conversion (installed: 0.4 s, 50 MB): a finder
    placed first on ``sys.meta_path`` sees every attempt. Reading a CSV with integer, float, text and number-as-text
    columns, and asking for their values, text and factorization, makes none; ``to_numpy`` would (the check
    works)."""
    script = """
import sys
attempts = []
class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            attempts.append(name)
sys.meta_path.insert(0, Finder())
from certa.engine.core.tables import parse_table
raw = b"id,n,x,t,s\\n1,3,0.5,a, 1e3\\n2,,,b,\\n3,4,2.5,a,1_0\\n"
table = parse_table("t", raw, "csv")
table.numeric("n", allow_missing=True), table.numeric("x", allow_missing=True), table.text("t"), table.factorize("t")
table.numeric("s", allow_missing=True), table.text("n")
parse_table("j", b'{"v": "1.5"}\\n{"v": " 2"}\\n', "jsonl").numeric("v")
print(len(attempts))
import pyarrow as pa
pa.array([1]).to_numpy()
print(len(attempts) > 0)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["0", "True"], done.stderr[-2000:]
