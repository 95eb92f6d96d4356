"""The run record (ledger/run_record.py) and the entries' JSON Schema (schemas/ledger-entries.schema.json):
every ledger certa ever wrote is valid against the schema, read without certa's code; verify reports a payload
that breaks it even when the forger rechained the hashes; the decision-shape shortcut answers exactly as the
schema does; run and batch write the same record; the Python API leaves no file behind a refused run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from certa.engine import CertaError, ProfileAbort, run
from certa.engine.services.audit import verify
from certa.ledger import Ledger
from certa.ledger.run_record import NOTE_KINDS, RECORD_KINDS, payload_problems

from tests.conftest import rechain, window_columns

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "ledger-entries.schema.json").read_text(encoding="utf-8"))
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*/ledger.db"))


def _kind_validator(kind: str) -> jsonschema.Draft202012Validator:
    """A validator for one kind built from the schema file alone, as an auditor without certa would."""
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{kind}", "$defs": SCHEMA["$defs"]})


def test_the_schema_is_a_valid_draft_2020_12_schema_with_one_member_per_kind() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert set(RECORD_KINDS + NOTE_KINDS) <= set(SCHEMA["$defs"])


@pytest.mark.parametrize("db", GOLDEN, ids=[p.parent.name for p in GOLDEN])
def test_every_entry_of_every_released_ledger_is_valid_against_the_schema(db: Path) -> None:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT seq, kind, payload FROM entries ORDER BY seq").fetchall()
    finally:
        conn.close()
    kinds = {kind for _, kind, _ in rows}
    assert {"run", "input", "decision", "certificate"} <= kinds
    validators = {kind: _kind_validator(kind) for kind in kinds}
    invalid = [(seq, kind, next(validators[kind].iter_errors(json.loads(payload))).message)
               for seq, kind, payload in rows if not validators[kind].is_valid(json.loads(payload))]
    assert invalid == []


def _decision_payloads() -> st.SearchStrategy[dict]:
    value = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
                      st.just(2.0), st.text(max_size=3), st.lists(st.integers(), max_size=2),
                      st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))
    fields = st.fixed_dictionaries({}, optional={"stage": value, "index": value, "kind": value, "detail": value,
                                                 "extra": value})
    valid = st.fixed_dictionaries({"stage": st.one_of(st.none(), st.text(max_size=3)), "index": st.integers(0, 9),
                                   "kind": st.text(max_size=3), "detail": st.dictionaries(st.text(max_size=2),
                                                                                          st.integers(), max_size=2)})
    return st.one_of(fields, valid)


@given(st.lists(_decision_payloads(), min_size=1, max_size=20))
def test_the_decision_shape_shortcut_answers_as_the_schema_does(payloads: list[dict]) -> None:
    """payload_problems validates one decision payload per valid shape; whatever came before, its answer for
    each payload is the schema's own."""
    validator = _kind_validator("decision")
    for payload in payloads:
        assert (payload_problems("decision", payload) == []) == validator.is_valid(payload), payload


def test_the_decision_schema_uses_only_what_the_shape_captures() -> None:
    """The shortcut is exact because the decision schema constrains only member names, JSON types and the
    index's sign: a new keyword there must come with a new shape."""
    decision = SCHEMA["$defs"]["decision"]
    assert set(decision) <= {"description", "type", "required", "additionalProperties", "properties"}
    for member in decision["properties"].values():
        assert set(member) <= {"type", "minimum"} and member.get("minimum", 0) == 0


@pytest.mark.parametrize(("kind", "change"), [
    ("run", lambda p: {**p, "profile": "prod"}),
    ("run", lambda p: {k: v for k, v in p.items() if k != "spec_text"}),
    ("input", lambda p: {**p, "rows": -1}),
    ("decision", lambda p: {**p, "index": -1}),
    ("decision", lambda p: {**p, "detail": "text"}),
])
def test_verify_reports_a_payload_that_breaks_the_schema_even_when_rechained(kind: str, change, small_spec: Path,
                                                                              tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run(small_spec, ledger=ledger)
    with sqlite3.connect(db) as conn:
        seq, payload = conn.execute("SELECT seq, payload FROM entries WHERE kind = ? ORDER BY seq LIMIT 1",
                                    (kind,)).fetchone()
        changed = json.dumps(change(json.loads(payload)), sort_keys=True, separators=(",", ":"))
        conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (changed, seq))
    rechain(db, seq)
    with Ledger.open(db, read_only=True) as ledger:
        report = verify(ledger)
    assert not report.intact
    assert any(p.seq == seq and "does not match its schema" in p.message for p in report.problems), report.problems


def test_the_python_api_leaves_no_ledger_file_behind_a_run_refused_while_running(small_spec: Path,
                                                                                 tmp_path: Path) -> None:
    """A subject sharing no window with the baseline is refused by the stage, after the ledger was opened: the
    file the run created is removed again, as ``certa run`` does."""
    base, subject = window_columns(60, seed=3)
    subject["window_id"] = [f"other-{i}" for i in range(60)]
    db = tmp_path / "new.db"
    with pytest.raises(CertaError) as refused:
        run(small_spec, ledger=db, inputs={"subject": subject})
    assert not isinstance(refused.value, ProfileAbort)
    assert [p for p in tmp_path.iterdir() if p.name.startswith("new.db")] == []
    result = run(small_spec, ledger=db)
    with Ledger.open(db, read_only=True) as ledger:
        assert [r.run_id for r in ledger.runs()] == [result.run_id]
