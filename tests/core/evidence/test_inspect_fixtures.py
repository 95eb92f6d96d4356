"""The Inspect AI readers on real logs (``tests/data/evaluators/inspect``, made by ``make_fixtures.py`` with
Inspect's mock model); expected numbers come from the raw files through ``zipfile`` + ``zstandard`` and ``json``.
The JSON form is kept gzipped; ``json_log`` gives its bytes as Inspect wrote them."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zstandard

from certa.engine.core.evidence import pair_records, read_inspect_eval, read_inspect_json
from certa.engine.foundation.errors import InputError

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "inspect"
LETTERS = {"C": 1.0, "I": 0.0}


def raw_eval_samples(path: Path) -> list[dict]:
    """The samples of a ``.eval`` archive: each zstd member's bytes decompressed with ``zstandard``."""
    data = path.read_bytes()
    archive = zipfile.ZipFile(io.BytesIO(data))
    samples = []
    for info in archive.infolist():
        if info.filename.startswith("samples/"):
            assert info.compress_type == 93
            lengths = data[info.header_offset + 26:info.header_offset + 30]  # file name and extra field lengths
            start = info.header_offset + 30 + sum(int.from_bytes(lengths[i:i + 2], "little") for i in (0, 2))
            raw = zstandard.ZstdDecompressor().decompress(data[start:start + info.compress_size],
                                                           max_output_size=info.file_size)
            samples.append(json.loads(raw))
    return samples


def json_log(side: str) -> bytes:
    """The bytes of ``inspect log convert --to json`` for one side."""
    return gzip.decompress((FIXTURES / f"{side}.json.gz").read_bytes())


def by_key(records) -> dict[tuple, dict[str, float]]:
    return {key: {metric: float(values[i]) for metric, values in records.metrics.items()}
            for i, key in enumerate(records.item_keys())}


@pytest.mark.parametrize("side", ["baseline", "subject"])
def test_eval_archive_scores_match_the_raw_members(side: str) -> None:
    samples = raw_eval_samples(FIXTURES / f"{side}.eval")
    records = read_inspect_eval(FIXTURES / f"{side}.eval", slice_metadata="kind")
    assert records.item_keys() == [(sample["id"], sample["epoch"]) for sample in samples]
    assert records.metrics["match"].tolist() == [LETTERS[s["scores"]["match"]["value"]] for s in samples]
    assert records.metrics["closeness"].tolist() == [s["scores"]["closeness"]["value"] for s in samples]
    assert records.slices.tolist() == [s["metadata"]["kind"] for s in samples]
    assert len(samples) == 40 and {s["epoch"] for s in samples} == {1, 2}


@pytest.mark.parametrize("side", ["baseline", "subject"])
def test_json_form_reads_to_the_same_records_and_the_logged_accuracy(side: str) -> None:
    from_eval = read_inspect_eval(FIXTURES / f"{side}.eval")
    from_json = read_inspect_json(json_log(side), name=f"{side}.json")
    assert by_key(from_json) == by_key(from_eval)
    assert from_json.provenance.task_config_sha256 == from_eval.provenance.task_config_sha256
    assert from_json.provenance.models == from_eval.provenance.models
    log = json.loads(json_log(side))
    (match,) = [score for score in log["results"]["scores"] if score["name"] == "match"]
    assert np.isclose(from_json.metrics["match"].mean(), match["metrics"]["accuracy"]["value"], rtol=1e-12)


def test_provenance_is_what_the_log_states() -> None:
    log = json.loads(json_log("subject"))
    provenance = read_inspect_json(json_log("subject"), name="subject.json").provenance
    assert provenance.tool == "inspect_ai" and provenance.tool_version == log["eval"]["packages"]["inspect_ai"]
    assert provenance.task == log["eval"]["task"] == "certa_arith"
    assert dict(provenance.models)["model"] == "mockllm/model"
    assert ("status", "success") in provenance.details


def test_seeded_runs_pair_on_sample_and_epoch_and_differ() -> None:
    paired = pair_records(read_inspect_eval(FIXTURES / "baseline.eval"),
                          read_inspect_json(json_log("subject"), name="subject.json"))
    assert paired.report.complete and paired.report.n_paired == 40
    baseline = {(s["id"], s["epoch"]): LETTERS[s["scores"]["match"]["value"]]
                for s in raw_eval_samples(FIXTURES / "baseline.eval")}
    subject = {(s["id"], s["epoch"]): LETTERS[s["scores"]["match"]["value"]]
               for s in raw_eval_samples(FIXTURES / "subject.eval")}
    keys = paired.baseline.item_keys()
    assert paired.baseline.metrics["match"].tolist() == [baseline[key] for key in keys]
    assert paired.subject.metrics["match"].tolist() == [subject[key] for key in keys]
    assert baseline != subject


def test_an_edited_input_is_a_mismatch_and_a_dropped_epoch_is_unmatched(tmp_path: Path) -> None:
    log = json.loads(json_log("subject"))
    edited_key = (log["samples"][0]["id"], log["samples"][0]["epoch"])
    log["samples"][0]["input"] = "What is 1 + 1?"
    dropped = log["samples"].pop()
    path = tmp_path / "subject.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    with pytest.raises(InputError, match=r"subject.json: the log's results say 40 samples were completed \(results."
                                         r"completed_samples\), but it holds 39"):
        read_inspect_json(path)  # a sample missing from a log that says it completed it is never dropped silently
    log["results"]["completed_samples"] -= 1  # one sample fewer completed, yet a success over all 40: refused
    path.write_text(json.dumps(log), encoding="utf-8")
    with pytest.raises(InputError, match=r"subject.json: the log's results say the evaluation succeeded over 40 "
                                         r"samples \(results.total_samples, status success\), but it holds 39"):
        read_inspect_json(path)
    log["status"] = "cancelled"  # a run stopped before its last sample: the epoch is unmatched
    path.write_text(json.dumps(log), encoding="utf-8")
    report = pair_records(read_inspect_eval(FIXTURES / "baseline.eval"), read_inspect_json(path)).report
    assert report.unmatched_baseline == ((dropped["id"], dropped["epoch"]),)
    assert dict(report.identity_mismatches) == {"input_sha256": (edited_key,)}
    assert report.n_paired == 38
