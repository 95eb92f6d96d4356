"""A plain per-item table with a task column read as a suite: keyed by (task, item[, repeat]), the task as the
slice, paired per (task, item) (docs/suites.md, "Per-item tables with a task column")."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from certa.engine.core.evidence import TableMapping, pair_records, read_inspect_json, read_mapped_table
from certa.engine.core.evidence.formats import records_of_table
from certa.engine.core.evidence.records import EvidenceRecords
from certa.engine.core.evidence.repeats import sample_units
from certa.engine.core.tables import Table, parse_table
from certa.engine.foundation.errors import InputError

from tests.core.evidence.test_inspect_fixtures import json_log

ROWS = [("arc", "q1", 1.0), ("arc", "q2", 0.0), ("gsm", "q1", 0.0), ("gsm", "q2", 1.0)]
"""Two tasks sharing the ids q1 and q2."""


def csv_bytes(rows: list[tuple[str, str, float]]) -> bytes:
    return ("task,id,acc\n" + "".join(f"{t},{i},{a}\n" for t, i, a in rows)).encode()


def parquet_bytes(columns: dict[str, list]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


def suite_table(raw: bytes, name: str, fmt: str = "csv", *, slice_column: str | None = None,
                repeat_column: str | None = None) -> EvidenceRecords:
    """The records of ``raw`` as a stage reads them (``records_of_table``), with ``task`` the task column."""
    return records_of_table(parse_table(name, raw, fmt), item="id", metrics=("acc",), slice_column=slice_column,
                            repeat_column=repeat_column, task_column="task")


def test_a_task_column_keys_by_task_then_item_and_is_the_slice() -> None:
    records = suite_table(csv_bytes(ROWS), "A")
    assert records.key_fields == ("task", "id") and records.repeat_field is None
    assert records.item_keys() == [("arc", "q1"), ("arc", "q2"), ("gsm", "q1"), ("gsm", "q2")]
    assert records.slices.tolist() == ["arc", "arc", "gsm", "gsm"]
    assert records.metrics["acc"].tolist() == [1.0, 0.0, 0.0, 1.0]
    plain = records_of_table(parse_table("P", b"id,acc\nq1,1\n", "csv"), item="id", metrics=("acc",),
                             slice_column=None)
    assert plain.key_fields == ("id",) and plain.slices is None


def test_parquet_with_a_task_column_reads_as_csv_does() -> None:
    columns = {"task": [t for t, _, _ in ROWS], "id": [i for _, i, _ in ROWS], "acc": [a for _, _, a in ROWS]}
    from_parquet = suite_table(parquet_bytes(columns), "A", "parquet")
    from_csv = suite_table(csv_bytes(ROWS), "A")
    assert from_parquet.key_fields == from_csv.key_fields == ("task", "id")
    assert from_parquet.item_keys() == from_csv.item_keys()
    assert from_parquet.slices.tolist() == from_csv.slices.tolist()
    assert np.array_equal(from_parquet.metrics["acc"], from_csv.metrics["acc"])
    with pytest.raises(InputError, match=r"input 'A', column 'task', row 2: the task is missing \(1 such row"):
        suite_table(parquet_bytes({**columns, "task": ["arc", None, "gsm", "gsm"]}), "A", "parquet")


def test_a_duplicate_task_and_item_is_refused_naming_it() -> None:
    with pytest.raises(InputError, match=r"input 'A': row 5: item task='gsm', id='q1' occurs twice "
                                         r"\(first at row 3\)"):
        suite_table(csv_bytes([*ROWS, ("gsm", "q1", 1.0)]), "A")


@pytest.mark.parametrize("raw, fmt, row, count", [
    (b"task,id,acc\narc,q1,1\n,q2,0\n,q3,1\n", "csv", 2, 2),
    (b"task,id,acc\narc,q1,1\narc,q2,0\n  ,q3,1\n", "csv", 3, 1),
    (b'{"task": "arc", "id": "q1", "acc": 1}\n{"task": null, "id": "q2", "acc": 0}\n', "jsonl", 2, 1),
    (b'{"task": "arc", "id": "q1", "acc": 1}\n{"task": "arc", "id": "q2", "acc": 0}\n{"id": "q3", "acc": 0}\n',
     "jsonl", 3, 1),
])
def test_a_missing_task_is_refused_naming_the_row(raw: bytes, fmt: str, row: int, count: int) -> None:
    with pytest.raises(InputError, match=rf"input 'A', column 'task', row {row}: the task is missing "
                                         rf"\({count} such row\(s\)\)"):
        suite_table(raw, "A", fmt)


def test_a_slice_beside_a_task_is_refused_the_task_being_the_slice() -> None:
    with pytest.raises(InputError, match=r"names a slice column \('s'\) and a task column \('task'\): the task is "
                                         r"the slice"):
        suite_table(b"task,id,s,acc\narc,q1,x,1\n", "A", slice_column="s")
    with pytest.raises(InputError, match=r"names column\(s\) id more than once"):
        TableMapping(item_id="id", metrics=("acc",), task="id")


def test_an_export_takes_no_task_column() -> None:
    export = Table(name="B", columns={}, sha256="", fmt="inspect-json", raw=b"",
                   evidence=read_inspect_json(json_log("baseline")))
    with pytest.raises(InputError, match=r"input 'B' is a inspect-json export: its tasks are the tool's own .* "
                                         r"\(columns.task: 'task'\)"):
        records_of_table(export, item="id", metrics=("acc",), slice_column=None, task_column="task")


def test_pairing_is_per_task_and_item_and_reports_a_task_on_one_side_only() -> None:
    """The baseline holds arc and gsm, the subject arc (reordered) and mmlu: the two arc items pair, by (task, id),
    gsm's two are the baseline's unmatched and mmlu's one the subject's, though all share the ids q1 and q2."""
    baseline = suite_table(csv_bytes(ROWS), "A")
    subject = suite_table(csv_bytes([("mmlu", "q1", 1.0), ("arc", "q2", 1.0), ("arc", "q1", 1.0)]), "B")
    paired = pair_records(baseline, subject)
    report = paired.report
    assert report.key_fields == ("task", "id") and (report.n_baseline, report.n_subject, report.n_paired) == (4, 3, 2)
    assert report.unmatched_baseline == (("gsm", "q1"), ("gsm", "q2"))
    assert report.unmatched_subject == (("mmlu", "q1"),) and not report.identity_mismatches
    summary = report.summary(5)
    assert (summary["paired"], summary["unmatched_baseline"], summary["unmatched_subject"],
            summary["identity_mismatched"]) == (2, 2, 1, 0)
    assert summary["examples"]["unmatched_subject"] == [["mmlu", "q1"]]
    # arc q1: 1 -> 1, arc q2: 0 -> 1 (by id alone, gsm's q1 = 0 and the subject's mmlu q1 would have paired)
    assert (paired.subject.metrics["acc"] - paired.baseline.metrics["acc"]).tolist() == [0.0, 1.0]
    assert paired.baseline_index.tolist() == [0, 1] and paired.subject_index.tolist() == [2, 1]
    plain = read_mapped_table(b"id,acc\nq1,1\n", TableMapping(item_id="id", metrics=("acc",)), fmt="csv", name="P")
    with pytest.raises(InputError, match=r"keyed by task, id\) with"):
        pair_records(baseline, plain)


def test_a_repeat_with_a_task_keys_task_item_repeat_whatever_the_column_order() -> None:
    raw = b"trial,acc,id,task\n1,1,q1,arc\n2,0,q1,arc\n1,1,q1,gsm\n2,1,q1,gsm\n1,0,q2,gsm\n"
    records = suite_table(raw, "A", repeat_column="trial")
    assert records.key_fields == ("task", "id", "trial") and records.repeat_field == "trial"
    assert records.item_keys()[:2] == [("arc", "q1", "1"), ("arc", "q1", "2")]
    subject = suite_table(raw.replace(b"1,0,q2,gsm\n", b""), "B", repeat_column="trial")
    units = sample_units(records, subject, pair_records(records, subject))
    assert units.sample_fields == ("task", "id") and units.keys == (("arc", "q1"), ("gsm", "q1"))
    assert units.repeats.tolist() == [2, 2] and units.only_baseline == (("gsm", "q2"),)
    with pytest.raises(InputError, match=r"row 4: item task='gsm', id='q1', trial='2' occurs twice"):
        suite_table(raw.replace(b"1,1,q1,gsm\n", b"2,1,q1,gsm\n"), "A", repeat_column="trial")
