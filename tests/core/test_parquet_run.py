"""A Parquet input end to end: hashed and stored like CSV, the same numbers as the CSV of the same values,
and a replay from the ledger alone."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from certa.engine import run
from certa.engine.services.audit import replay
from certa.engine.core.certificate import results_of
from certa.ledger import Ledger

from tests.conftest import SMALL_SPEC, columns_to_csv_bytes, window_columns


def test_a_parquet_input_runs_records_and_replays_like_its_csv(tmp_path: Path) -> None:
    baseline, subject = window_columns(60, seed=3)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(baseline))
    (tmp_path / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subject))
    pq.write_table(pa.table({k: list(v) for k, v in subject.items()}), tmp_path / "data" / "subject.parquet")
    csv_spec = tmp_path / "spec.yaml"
    csv_spec.write_text(SMALL_SPEC, encoding="utf-8")
    parquet_spec = tmp_path / "parquet.yaml"
    parquet_spec.write_text(SMALL_SPEC.replace("data/subject.csv", "data/subject.parquet"), encoding="utf-8")
    with Ledger.open(tmp_path / "l.db") as ledger:
        from_csv = run(csv_spec).certificate["content"]
        result = run(parquet_spec, ledger=ledger)
        (tmp_path / "data" / "subject.parquet").unlink()  # the replay reads the ledger's copy
        assert replay(ledger, result.run_id).reproduced
    content = result.certificate["content"]
    subject_input = next(i for i in content["inputs"] if i["name"] == "subject")
    assert subject_input["format"] == "parquet" and subject_input["rows"] == 60
    assert content["stages"] == from_csv["stages"] and content["verdict"] == from_csv["verdict"]
    differing = {k for k in results_of(content) if content[k] != from_csv[k]}
    assert differing == {"spec", "inputs"}  # the spec names another file; the inputs record its format and hash
