"""Pairing two sides by item key: unmatched items and identity mismatches are reported, never dropped silently."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import certa.engine.core.evidence as evidence
from certa.engine.core.evidence import TableMapping, pair_records, read_mapped_table
from certa.engine.foundation.errors import InputError

MAPPING = TableMapping(item_id="id", metrics=("acc",), weight="w", slice="s")


def table(rows: list[tuple[str, float, float, str]], name: str) -> evidence.EvidenceRecords:
    text = "id,acc,w,s\n" + "".join(f"{i},{a},{w},{s}\n" for i, a, w, s in rows)
    return read_mapped_table(text.encode(), MAPPING, fmt="csv", name=name)


def test_public_names_are_pinned() -> None:
    assert sorted(evidence.__all__) == sorted([
        "EvidenceRecords", "Provenance", "PairedEvidence", "PairingReport", "TableMapping", "pair_records",
        "read_inspect_eval", "read_inspect_json", "read_lm_eval_samples", "read_mapped_table",
        "read_promptfoo_jsonl"])


def test_unmatched_and_mismatched_items_are_named_and_left_out() -> None:
    baseline = table([("a", 1, 2, "x"), ("b", 0, 1, "y"), ("c", 1, 1, "x")], "A")
    subject = table([("b", 1, 1, "y"), ("a", 1, 2, "z"), ("d", 0, 1, "x")], "B")
    paired = pair_records(baseline, subject)
    report = paired.report
    assert (report.n_baseline, report.n_subject, report.n_paired) == (3, 3, 1)
    assert report.unmatched_baseline == (("c",),) and report.unmatched_subject == (("d",),)
    assert dict(report.identity_mismatches) == {"slice": (("a",),)}
    assert report.mismatched_keys == (("a",),) and not report.complete
    assert paired.baseline.keys["id"].tolist() == paired.subject.keys["id"].tolist() == ["b"]
    assert paired.subject.metrics["acc"].tolist() == [1.0] and paired.baseline.metrics["acc"].tolist() == [0.0]
    assert report.as_dict() == {"key_fields": ["id"], "n_baseline": 3, "n_subject": 3, "n_paired": 1,
                                "n_unmatched_baseline": 1, "n_unmatched_subject": 1, "n_identity_mismatched": 1,
                                "unmatched_baseline": [["c"]], "unmatched_subject": [["d"]],
                                "identity_mismatches": {"slice": [["a"]]}}


def test_sides_keyed_differently_cannot_be_paired() -> None:
    other = read_mapped_table(b"item,acc\na,1\n", TableMapping(item_id="item", metrics=("acc",)), fmt="csv",
                              name="B")
    with pytest.raises(InputError, match=r"cannot pair A \(items keyed by id\) with B \(keyed by item\)"):
        pair_records(table([("a", 1, 1, "x")], "A"), other)


def test_records_are_frozen() -> None:
    records = table([("a", 1, 2, "x")], "A")
    with pytest.raises(ValueError):
        records.metrics["acc"][0] = 0.0
    with pytest.raises(TypeError):
        records.metrics["new"] = np.zeros(1)  # type: ignore[index]


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(12)), st.sets(st.integers(0, 11), max_size=4))
def test_pairs_do_not_depend_on_the_subjects_order(order: list[int], missing: set[int]) -> None:
    rows = [(f"i{n}", float(n % 2), float(n + 1), f"s{n % 3}") for n in range(12)]
    baseline = table(rows, "A")
    subject = table([(i, 1 - a, w, s) for i, a, w, s in (rows[n] for n in order if n not in missing)], "B")
    paired = pair_records(baseline, subject)
    kept = [f"i{n}" for n in range(12) if n not in missing]
    assert paired.baseline.keys["id"].tolist() == paired.subject.keys["id"].tolist() == kept
    assert np.array_equal(paired.baseline.weights, paired.subject.weights)
    assert sorted(paired.report.unmatched_baseline) == sorted((f"i{n}",) for n in missing)
    assert paired.report.unmatched_subject == () and paired.report.n_paired == len(kept)
