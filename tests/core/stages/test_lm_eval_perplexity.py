"""lm-evaluation-harness perplexity samples through ``paired.ppl_ratio``: the samples table's ``doc_id``, ``nll``,
``bytes`` and ``words`` columns are the stage's window id, summed NLL and token counts, so the certificate holds
the byte-level (or word-level) perplexity ratio of the two models, named so (``byte_perplexity``,
``word_perplexity``). Every expected number is computed here from
the raw JSON Lines, and checked against the harness's own aggregate in its results file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from certa.engine import run
from certa.engine.services.audit import replay
from certa.ledger import Ledger

ROOT = Path(__file__).resolve().parents[3]
LM_EVAL = ROOT / "tests" / "data" / "evaluators" / "lm_eval"
ARMS = ("baseline", "subject")
COUNT_METRIC = {"bytes": "byte_perplexity", "words": "word_perplexity"}
"""The harness's per-document ``[loglikelihood, count]`` pair that carries each count."""


def _one(folder: Path, pattern: str) -> Path:
    """The one file of ``folder`` matching ``pattern``."""
    (found,) = sorted(folder.glob(pattern))
    return found


SAMPLES = {arm: _one(LM_EVAL / arm, "samples_certa_ppl_*.jsonl") for arm in ARMS}
RESULTS = {arm: _one(LM_EVAL / arm, "results_*.json") for arm in ARMS}


def raw_documents(arm: str, unit: str) -> dict[int, tuple[float, int]]:
    """doc_id -> (−loglikelihood, count) read from the samples file with the standard library."""
    documents = {}
    for line in SAMPLES[arm].read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        documents[record["doc_id"]] = (-float(record["filtered_resps"][0]), record[COUNT_METRIC[unit]][1])
    return documents


def perplexity_spec(folder: Path, unit: str, *, with_results: bool) -> Path:
    """A ``paired.ppl_ratio`` spec over the fixtures' perplexity samples (copied into ``folder``), counts in
    ``unit``, with or without the results companions."""
    inputs: dict[str, Any] = {}
    for arm in ARMS:
        inputs[arm] = {"path": f"{arm}_{SAMPLES[arm].name}", "format": "lm-eval-samples",
                       "read": {"count_unit": unit}}  # the 'weight' column, which columns.tokens names
        (folder / inputs[arm]["path"]).write_bytes(SAMPLES[arm].read_bytes())
        if with_results:
            inputs[arm]["read"] |= {"results": f"{arm}_results", "task": "certa_ppl"}
            inputs[f"{arm}_results"] = {"path": f"{arm}_{RESULTS[arm].name}", "format": "lm-eval-results"}
            (folder / inputs[f"{arm}_results"]["path"]).write_bytes(RESULTS[arm].read_bytes())
    spec = {"certa": 1, "name": "lm-eval-perplexity", "seed": 3, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "ratio", "use": "paired.ppl_ratio",
                        "with": {"baseline": "baseline", "subject": "subject", "replicates": 1000,
                                 "columns": {"window_id": "doc_id", "tokens": "weight", "nll_sum": "nll"}}}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


@pytest.mark.parametrize("unit", ["bytes", "words"])
def test_ppl_ratio_certifies_the_harness_perplexity_ratio(tmp_path: Path, unit: str) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(perplexity_spec(tmp_path, unit, with_results=True), ledger=ledger)
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes
    primary = result.certificate["content"]["stages"]["ratio"][f"{unit[:-1]}_perplexity"]  # byte_, word_perplexity
    assert primary["unit"] == unit
    documents = {arm: raw_documents(arm, unit) for arm in ARMS}
    assert documents["baseline"].keys() == documents["subject"].keys()
    assert all(documents["baseline"][d][1] == documents["subject"][d][1] for d in documents["baseline"])
    counts = sum(count for _, count in documents["baseline"].values())
    nll = {arm: sum(value for value, _ in documents[arm].values()) for arm in ARMS}
    perplexity = {arm: math.exp(nll[arm] / counts) for arm in ARMS}
    assert primary["baseline_final"] == pytest.approx(perplexity["baseline"], rel=1e-12)
    assert primary["final"] == pytest.approx(perplexity["subject"], rel=1e-12)
    assert primary["log_ratio"] == pytest.approx((nll["subject"] - nll["baseline"]) / counts, rel=1e-9)
    assert primary["ratio_vs_baseline"] == pytest.approx(perplexity["subject"] / perplexity["baseline"], rel=1e-12)
    assert primary["display_ci"][0] <= primary["ratio_vs_baseline"] <= primary["display_ci"][1]
    for arm, key in (("baseline", "baseline_final"), ("subject", "final")):  # the harness's own aggregate
        harness = json.loads(RESULTS[arm].read_text())["results"]["certa_ppl"][f"{COUNT_METRIC[unit]},none"]
        assert primary[key] == pytest.approx(harness, rel=1e-9)


def test_the_byte_ratio_does_not_need_the_results_file(tmp_path: Path) -> None:
    primary = []
    for with_results in (True, False):
        folder = tmp_path / str(with_results)
        folder.mkdir()
        result = run(perplexity_spec(folder, "bytes", with_results=with_results))
        primary.append(result.certificate["content"]["stages"]["ratio"]["byte_perplexity"])
    assert primary[0] == primary[1]
