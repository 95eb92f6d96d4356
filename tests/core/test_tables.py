"""Input tables: CSV / JSON Lines parsing, typed columns with row-level errors, canonical in-memory bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from certa.engine import InputError
from certa.engine.core.tables import columns_to_csv_bytes, parse_table, table_from_columns


def test_csv_and_jsonl_give_the_same_columns() -> None:
    csv_table = parse_table("t", b"id,x\na,1.5\nb,\n", "csv")
    jsonl_table = parse_table("t", b'{"id": "a", "x": 1.5}\n{"id": "b", "x": null}\n', "jsonl")
    for table in (csv_table, jsonl_table):
        assert table.text("id").tolist() == ["a", "b"]
        assert np.isnan(table.numeric("x", allow_missing=True)[1])
        with pytest.raises(InputError, match="row 2"):
            table.numeric("x")


def test_errors_name_table_column_and_row() -> None:
    table = parse_table("scores", b"x\n1\n2\noops\n", "csv")
    with pytest.raises(InputError, match=r"input 'scores', column 'x', row 3: 'oops' is not a number"):
        table.numeric("x")
    with pytest.raises(InputError, match="row 1: 2 cells"):
        parse_table("t", b"a\n1,2\n", "csv")
    with pytest.raises(InputError, match="repeated"):
        parse_table("t", b"a,a\n1,2\n", "csv")
    with pytest.raises(InputError, match="line 2"):
        parse_table("t", b'{"a": 1}\n{oops\n', "jsonl")


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=30),
       st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=8), min_size=1, max_size=30))
def test_in_memory_columns_round_trip_exactly(values: list[float], labels: list[str]) -> None:
    n = min(len(values), len(labels))
    labels = [label.strip() for label in labels[:n]]
    table = table_from_columns("t", {"x": np.array(values[:n]), "label": labels})
    assert table.numeric("x").tolist() == values[:n]
    assert table.text("label").tolist() == labels
    assert parse_table("t", columns_to_csv_bytes({"x": np.array(values[:n]), "label": labels}), "csv").sha256 == table.sha256


def test_in_memory_csv_bytes_are_csv_writers_bytes_whatever_the_cells() -> None:
    """``columns_to_csv_bytes`` joins cells directly when nothing needs quoting; the bytes must be exactly what
    csv.writer (minimal quoting) writes, for every kind of cell."""
    import csv
    import io

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from certa.engine.core.tables import _column_cells, columns_to_csv_bytes

    cell = st.one_of(st.text(alphabet=st.sampled_from('ab,"\r\n xé\x1f'), max_size=4),
                     st.floats(allow_infinity=True, allow_nan=True), st.integers(-10**20, 10**20), st.booleans())

    @settings(derandomize=True, max_examples=300, deadline=None)
    @given(st.integers(1, 3).flatmap(lambda width: st.lists(st.lists(cell, min_size=width, max_size=width),
                                                            min_size=1, max_size=6)))
    def check(rows: list[list]) -> None:
        columns = {f"c{j}": [row[j] for row in rows] for j in range(len(rows[0]))}
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(list(columns))
        writer.writerows(zip(*[_column_cells(values) for values in columns.values()]))
        assert columns_to_csv_bytes(columns) == out.getvalue().encode("utf-8")

    check()
