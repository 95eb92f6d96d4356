"""``certa.engine.foundation.canonical.canonical_records`` (the ledger's column-wise encoder of per-decision payloads) and
``certa.ledger.chain.chain_hashes`` (templated entry hashes) are byte-identical to ``canonical_bytes`` and
``entry_hash``, including floats at RFC 8785's format edges, non-finite floats, None, escapes, non-ASCII text
and keys whose UTF-16 order differs from their code-point order."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certa.engine.foundation.canonical import RecordColumns, canonical_bytes, canonical_records
from certa.ledger.chain import GENESIS, chain_hashes, entry_hash

PROPERTY = settings(derandomize=True, max_examples=300, deadline=None)

EDGE_FLOATS = [0.0, -0.0, 1.0, -3.0, 0.1, 1e-7, -1e-7, 1.5e-7, 1e-6, 9.99e-5, 1e-4, 0.000123, 1e15, 1e15 + 0.5,
               123456789012345.6, 9007199254740992.0, 9007199254740993.0, 1e16, -1e16, 1.2345e16, 1e20, 1e21,
               1.5e22, 2.0**60, 5e-324, 1.7976931348623157e308, float("nan"), float("inf"), float("-inf")]
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EDGE_FLOATS))
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
keys = st.one_of(texts, st.sampled_from(["a", "A", "é", "\ue000", "\uffff", "\U0001f600", "%s", "%", '"', "\\", ""]))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**60, 2**60), floats, texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=6)


def column_of(rows: int) -> st.SearchStrategy:
    """A column of ``rows`` cells as a stage may give it: numpy arrays of each dtype, Python lists, a
    column of one repeated value, or a nested record."""
    def repeated(cell):
        return st.just([cell] * rows)

    return st.one_of(
        st.lists(floats, min_size=rows, max_size=rows).map(lambda c: np.array(c, dtype=np.float64)),
        st.lists(st.floats(width=32), min_size=rows, max_size=rows).map(lambda c: np.array(c, dtype=np.float32)),
        st.lists(st.integers(-2**53 - 5, 2**53 + 5), min_size=rows, max_size=rows).map(
            lambda c: np.array(c, dtype=np.int64)),
        st.lists(st.booleans(), min_size=rows, max_size=rows).map(np.array),
        st.lists(st.one_of(st.none(), texts), min_size=rows, max_size=rows),
        st.lists(st.one_of(st.none(), texts), min_size=rows, max_size=rows).map(lambda c: np.array(c, dtype=object)),
        st.lists(floats, min_size=rows, max_size=rows),
        st.lists(st.one_of(st.none(), floats), min_size=rows, max_size=rows),
        st.lists(st.one_of(st.none(), floats), min_size=rows, max_size=rows).map(lambda c: np.array(c, dtype=object)),
        st.lists(st.integers(-2**60, 2**60), min_size=rows, max_size=rows),
        st.lists(json_values, min_size=rows, max_size=rows),
        floats.flatmap(lambda x: st.just(np.full(rows, x))),
        st.one_of(floats, texts, st.none(), st.booleans()).flatmap(repeated),
        st.dictionaries(keys, st.one_of(floats, texts), min_size=1, max_size=2).map(lambda c: RecordColumns(
            {k: np.full(rows, v) if isinstance(v, float) else [v] * rows for k, v in c.items()})),
    )


@st.composite
def records(draw) -> RecordColumns:
    rows = draw(st.integers(1, 6))
    names = draw(st.lists(keys, min_size=1, max_size=5, unique=True))
    split = draw(st.integers(1, len(names)))
    columns = {name: draw(column_of(rows)) for name in names[:split]}
    constants = {name: draw(json_values) for name in names[split:]}
    return RecordColumns(columns, constants)


def cell(column, row: int):
    """What record ``row`` holds for ``column`` (a numpy value as ``tolist`` gives it)."""
    if isinstance(column, RecordColumns):
        return record_at(column, row)
    return column.tolist()[row] if isinstance(column, np.ndarray) else column[row]


def record_at(records: RecordColumns, row: int) -> dict:
    return {**{name: cell(column, row) for name, column in records.columns.items()}, **records.constants}


@pytest.mark.slow
@PROPERTY
@given(records())
def test_records_are_canonical_bytes_of_each_record(given_records: RecordColumns) -> None:
    texts_out = canonical_records(given_records)
    expected = [canonical_bytes(record_at(given_records, row)).decode("utf-8") for row in range(given_records.rows)]
    assert texts_out == expected


def test_a_decision_payload_with_every_edge_in_one_float_column() -> None:
    values = np.array(EDGE_FLOATS)
    ids = (["é\"\n\x01", None, "%s"] * len(values))[:len(values)]
    detail = RecordColumns({"x": values, "id": ids}, {"seed": "42", "item_id": None})
    payloads = canonical_records(RecordColumns({"index": range(len(values)), "detail": detail},
                                               {"stage": "cmp", "kind": "bakeoff_decision"}))
    for i, text in enumerate(payloads):
        row = {"x": float(values[i]), "id": ids[i], "seed": "42", "item_id": None}
        assert text == canonical_bytes({"stage": "cmp", "index": i, "kind": "bakeoff_decision", "detail": row}).decode()


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="one length"):
        canonical_records(RecordColumns({"a": [1, 2], "b": [1]}))
    with pytest.raises(ValueError, match="both columns and constants"):
        canonical_records(RecordColumns({"a": [1]}, {"a": 2}))


@PROPERTY
@given(st.lists(st.sampled_from(["run", "input", "decision", "certificate"]), min_size=1, max_size=8), texts, texts,
       st.integers(1, 2**53 - 100), st.randoms(use_true_random=False))
def test_chain_hashes_are_entry_hashes_chained(kinds, run_id, recorded_at, first_seq, random) -> None:
    digests = [hashlib.sha256(random.randbytes(8)).hexdigest() for _ in kinds]
    head = random.choice([GENESIS, hashlib.sha256(b"head").hexdigest()])
    expected, prev = [], head
    for seq, kind, digest in zip(range(first_seq, first_seq + len(kinds)), kinds, digests):
        prev = entry_hash(seq=seq, run_id=run_id, kind=kind, recorded_at=recorded_at, payload_sha256=digest,
                          prev_hash=prev)
        expected.append(prev)
    assert chain_hashes(first_seq=first_seq, run_id=run_id, kinds=kinds, recorded_at=recorded_at,
                        payload_sha256s=digests, prev_hash=head) == expected


def test_chain_hashes_refuse_what_the_template_cannot_write() -> None:
    with pytest.raises(ValueError, match="64 ASCII"):
        chain_hashes(first_seq=1, run_id="r", kinds=["run"], recorded_at="t", payload_sha256s=['"' * 64],
                     prev_hash=GENESIS)
    with pytest.raises(ValueError, match="seq"):
        chain_hashes(first_seq=0, run_id="r", kinds=["run"], recorded_at="t", payload_sha256s=["a" * 64],
                     prev_hash=GENESIS)
