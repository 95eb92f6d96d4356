"""Repeated trials in evidence records: Inspect's epoch and a table's repeat column are the key's repeat field, and
``sample_units`` groups the paired rows by sample and counts, by sample, what pairing left unpaired."""

from __future__ import annotations

import numpy as np
import pytest

from certa.engine.core.evidence import TableMapping, pair_records, read_inspect_json, read_mapped_table
from certa.engine.core.evidence.records import EvidenceRecords, Provenance
from certa.engine.core.evidence.repeats import sample_units
from certa.engine.foundation.errors import InputError

from tests.core.evidence.test_inspect_fixtures import json_log

MAPPING = TableMapping(item_id="id", metrics=("acc",), repeat="trial")


def trials(rows: list[tuple[str, str, float]], name: str, mapping: TableMapping = MAPPING) -> EvidenceRecords:
    text = "id,trial,acc\n" + "".join(f"{i},{t},{a}\n" for i, t, a in rows)
    return read_mapped_table(text.encode(), mapping, fmt="csv", name=name)


def test_inspect_epochs_and_a_repeat_column_are_the_keys_repeat_field() -> None:
    records = read_inspect_json(json_log("baseline"))
    assert records.key_fields == ("id", "epoch") and records.repeat_field == "epoch"
    table = trials([("a", "1", 1.0), ("a", "2", 0.0), ("b", "1", 1.0)], "A")
    assert table.key_fields == ("id", "trial") and table.repeat_field == "trial"
    assert table.item_keys() == [("a", "1"), ("a", "2"), ("b", "1")]
    plain = read_mapped_table(b"id,acc\na,1\n", TableMapping(item_id="id", metrics=("acc",)), fmt="csv", name="P")
    assert plain.key_fields == ("id",) and plain.repeat_field is None


def test_a_repeat_may_occur_once_per_item() -> None:
    with pytest.raises(InputError, match=r"input 'A': row 3: item id='a', trial='1' occurs twice \(first at row 1\)"):
        trials([("a", "1", 1.0), ("a", "2", 0.0), ("a", "1", 1.0)], "A")
    with pytest.raises(InputError, match="names column\\(s\\) id more than once"):
        TableMapping(item_id="id", metrics=("acc",), repeat="id")


def test_the_repeat_field_must_be_one_of_several_key_fields() -> None:
    with pytest.raises(ValueError, match="repeat_field 'id' must be one of several key_fields"):
        EvidenceRecords(source="x", key_fields=("id",), keys={"id": np.array(["a"])},
                        metrics={"acc": np.array([1.0])}, provenance=Provenance(tool="table"), repeat_field="id")


def test_samples_are_numbered_in_key_order_and_unpaired_rows_are_counted_by_sample() -> None:
    baseline = trials([("c", "1", 1), ("a", "1", 1), ("a", "2", 0), ("b", "1", 1), ("b", "2", 1), ("d", "1", 0),
                       ("e", "1", 1)], "A")
    subject = trials([("a", "2", 1), ("a", "1", 0), ("b", "1", 1), ("c", "1", 0), ("c", "2", 1), ("e", "9", 1),
                      ("f", "1", 0)], "B")
    paired = pair_records(baseline, subject)
    units = sample_units(baseline, subject, paired)
    assert units.sample_fields == ("id",) and units.repeat_field == "trial" and units.repeat_position == 1
    assert units.keys == (("a",), ("b",), ("c",)) and units.repeats.tolist() == [2, 1, 1]
    assert paired.baseline.keys["id"][units.first_row].tolist() == ["a", "b", "c"]
    assert units.codes.tolist() == [2, 0, 0, 1]  # the paired rows in the baseline's order: c1, a1, a2, b1
    assert (units.baseline_samples, units.subject_samples) == (5, 5)
    assert units.only_baseline == (("d",),) and units.only_subject == (("f",),)
    assert units.unpaired_repeats_baseline == (("b", "2"), ("e", "1"))
    assert units.unpaired_repeats_subject == (("c", "2"), ("e", "9"))
    assert units.without_paired_repeat == (("e",),) and units.samples_with_unpaired_repeats == 3
    assert units.has_repeats and units.repeat_counts() == [{"repeats": 1, "samples": 2}, {"repeats": 2, "samples": 1}]


def test_without_a_repeat_field_every_row_is_its_own_sample() -> None:
    mapping = TableMapping(item_id="id", metrics=("acc",))
    base = read_mapped_table(b"id,acc\nb,1\na,0\nc,1\n", mapping, fmt="csv", name="A")
    subj = read_mapped_table(b"id,acc\na,1\nb,1\nd,0\n", mapping, fmt="csv", name="B")
    units = sample_units(base, subj, pair_records(base, subj))
    assert units.repeat_field is None and units.sample_fields == ("id",) and not units.has_repeats
    assert units.keys == (("b",), ("a",)) and units.codes.tolist() == [0, 1]  # the paired (baseline's) order
    assert units.only_baseline == (("c",),) and units.only_subject == (("d",),)
    assert units.unpaired_repeats_baseline == units.unpaired_repeats_subject == units.without_paired_repeat == ()


def test_sides_that_number_repeats_differently_cannot_be_analysed_by_sample() -> None:
    with_trials = trials([("a", "1", 1.0)], "A")
    other = trials([("a", "1", 1.0)], "B", TableMapping(item_id="id", metrics=("acc",), repeat="trial"))
    object.__setattr__(other, "repeat_field", None)  # a side whose reader states no repeat field
    with pytest.raises(InputError, match=r"cannot pair A \(repeats: trial\) with B \(repeats: none\)"):
        sample_units(with_trials, other, pair_records(with_trials, other))
