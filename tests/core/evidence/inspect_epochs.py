"""Native Inspect ``.eval`` logs with as many epochs as a test needs, rebuilt from the real fixture logs
(``tests/data/evaluators/inspect``, task ``certa_arith``: 20 samples, made by Inspect 0.3.285 with its mock model).

Every member is the fixture's own JSON with only what the epochs change: ``header.json`` (``eval.config.epochs``,
the sample counts and the ``match`` accuracy and its standard error over the epoch-reduced samples, as Inspect
computes them), one ``samples/<id>_epoch_<k>.json`` per sample and epoch (the fixture's epoch-1 sample with its
``epoch``, its ``match`` score and its answer set), ``summaries.json``, ``reductions.json`` (each sample's mean
``match`` over its epochs) and ``_journal/start.json`` as it is; zstd-compressed members, as Inspect writes them
(``zstd_zip``).
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import zstandard

from tests.core.evidence.zstd_zip import zstd_zip

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "inspect"


def fixture_members(side: str) -> dict[str, object]:
    """The JSON of every member of the fixture log of ``side``, by member name."""
    raw = (FIXTURES / f"{side}.eval").read_bytes()
    archive = zipfile.ZipFile(io.BytesIO(raw))
    members: dict[str, object] = {}
    for info in archive.infolist():
        lengths = raw[info.header_offset + 26:info.header_offset + 30]
        start = info.header_offset + 30 + sum(int.from_bytes(lengths[i:i + 2], "little") for i in (0, 2))
        data = zstandard.ZstdDecompressor().decompress(raw[start:start + info.compress_size],
                                                       max_output_size=info.file_size)
        members[info.filename] = json.loads(data)
    return members


def sample_ids() -> list[str]:
    """The fixture task's sample ids, in the dataset's order."""
    return list(fixture_members("baseline")["header.json"]["eval"]["dataset"]["sample_ids"])


def epochs_log(side: str, correct: Mapping[str, Sequence[int]]) -> bytes:
    """An ``.eval`` log of the fixture task for ``side`` in which sample ``id`` has ``len(correct[id])`` epochs,
    epoch k scored ``match`` = C when ``correct[id][k − 1]`` is 1, else I (module docstring). Samples absent from
    ``correct`` are left out of the log."""
    members = fixture_members(side)
    first = {m["id"]: m for name, m in members.items() if name.startswith("samples/") and m["epoch"] == 1}
    summaries = {s["id"]: s for s in members["summaries.json"] if s["epoch"] == 1}
    samples, summary_list, reduced = {}, [], []
    for sample_id, outcomes in correct.items():
        for epoch, value in enumerate(outcomes, start=1):
            sample = copy.deepcopy(first[sample_id])
            answer = sample["target"] if value else str(int(sample["target"]) + 1)
            sample["epoch"] = epoch
            sample["output"]["choices"][0]["message"]["content"] = answer
            sample["output"]["completion"] = answer
            sample["scores"]["match"] = {"value": "C" if value else "I", "answer": answer, "explanation": answer,
                                         "history": []}
            samples[f"samples/{sample_id}_epoch_{epoch}.json"] = sample
            summary = copy.deepcopy(summaries[sample_id])
            summary["epoch"], summary["scores"]["match"] = epoch, sample["scores"]["match"]
            summary_list.append(summary)
        reduced.append({"value": float(np.mean(outcomes)), "history": [], "sample_id": sample_id})
    means = np.array([r["value"] for r in reduced])
    header = copy.deepcopy(members["header.json"])
    header["eval"]["config"]["epochs"] = max(len(v) for v in correct.values())
    results = header["results"]
    results["total_samples"] = results["completed_samples"] = sum(len(v) for v in correct.values())
    match = next(score for score in results["scores"] if score["name"] == "match")
    match["scored_samples"] = len(correct)
    match["metrics"]["accuracy"]["value"] = float(means.mean())
    match["metrics"]["stderr"]["value"] = float(means.std(ddof=1) / np.sqrt(means.size))
    reductions = copy.deepcopy(members["reductions.json"])
    for scorer in reductions:
        if scorer["scorer"] == "match":
            scorer["samples"] = reduced
    built = {"_journal/start.json": members["_journal/start.json"], **samples, "summaries.json": summary_list,
             "reductions.json": reductions, "header.json": header}
    return zstd_zip({name: json.dumps(value).encode("utf-8") for name, value in built.items()})
