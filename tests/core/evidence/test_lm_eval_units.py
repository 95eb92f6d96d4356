"""What an lm-evaluation-harness export can and cannot certify (issue 30, items 3 and 8), on real ``--log_samples``
output (``tests/data/evaluators/lm_eval`` and ``lm_eval_more``, made by ``make_fixtures.py``): a perplexity task
counts bytes and words, never tokens; a loglikelihood task's per-document ``perplexity`` is a log-likelihood; a
results file is checked against every line of a samples file that holds several filters. Every expected number is
computed here from the raw files with ``json`` and ``hashlib`` alone."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from certa.engine import InputError, SpecError, run
from certa.engine.core.evidence import read_lm_eval_samples
from certa.engine.core.evidence.lm_eval import NO_TOKEN_COUNT
from certa.schemas import load_schema

EVALUATORS = Path(__file__).resolve().parents[2] / "data" / "evaluators"
ARMS = ("baseline", "subject")


def one(folder: Path, pattern: str) -> Path:
    (found,) = sorted(folder.glob(pattern))
    return found


def fixture(run_folder: str, arm: str, task: str | None) -> Path:
    """The samples file of ``task`` (or, for None, the results file) of one arm of an lm-eval run."""
    return one(EVALUATORS / run_folder / arm, f"samples_{task}_*.jsonl" if task else "results_*.json")


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_spec(folder: Path, inputs: dict[str, Any], stage: dict[str, Any],
               gates: list[dict[str, Any]] | None = None) -> Path:
    spec = {"certa": 1, "name": "lm-eval-units", "seed": 5, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "s", **stage}], "gates": gates or []}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def copied(folder: Path, source: Path, prefix: str) -> str:
    target = folder / f"{prefix}_{source.name}"
    target.write_bytes(source.read_bytes())
    return target.name


# ------------------------------------------------------------------------------------- no token count (item 8)


def test_count_unit_tokens_is_refused_saying_lm_eval_counts_no_tokens_and_pointing_to_model_windows(
        tmp_path: Path) -> None:
    samples = {arm: copied(tmp_path, fixture("lm_eval", arm, "certa_ppl"), arm) for arm in ARMS}
    inputs = {arm: {"path": samples[arm], "format": "lm-eval-samples", "read": {"count_unit": "tokens"}}
              for arm in ARMS}
    spec = write_spec(tmp_path, inputs, {"use": "paired.ppl_ratio",
                                         "with": {"baseline": "baseline", "subject": "subject"}})
    with pytest.raises(SpecError, match="no token count") as refused:
        run(spec)
    assert "model.windows" in str(refused.value) and refused.value.path == "inputs.baseline.read.count_unit"
    with pytest.raises(InputError, match=r"count_unit must be 'bytes' or 'words' \(got 'tokens'\): lm-evaluation"):
        read_lm_eval_samples(fixture("lm_eval", "baseline", "certa_ppl"), count_unit="tokens")
    declared = load_schema("spec.schema.json")["properties"]["inputs"]["additionalProperties"]["properties"]
    assert declared["read"]["properties"]["count_unit"]["x-certa-refused"]["tokens"] == NO_TOKEN_COUNT


# ------------------------------------------------------------------------ a loglikelihood task (item 3)


@pytest.mark.parametrize("arm", ARMS)
def test_a_loglikelihood_tasks_per_document_perplexity_is_read_as_its_loglikelihood(arm: str) -> None:
    """lm-eval logs a loglikelihood task's per-document ``perplexity`` as the document's log-likelihood (its
    aggregate is exp(−mean)): certa reads it as metric ``loglikelihood``, and no metric is called perplexity."""
    samples, results = fixture("lm_eval_more", arm, "certa_ll"), fixture("lm_eval_more", arm, None)
    lines = raw_lines(samples)
    records = read_lm_eval_samples(samples, results)
    assert sorted(records.metrics) == ["acc", "loglikelihood"]
    assert records.metrics["loglikelihood"].tolist() == [line["perplexity"] for line in lines] \
        == [float(line["filtered_resps"][0][0]) for line in lines]
    assert all(line["perplexity"] < 0 for line in lines)  # a log-likelihood: no perplexity is below 1
    harness = json.loads(results.read_text(encoding="utf-8"))["results"]["certa_ll"]["perplexity,none"]
    assert math.isclose(math.exp(-records.metrics["loglikelihood"].mean()), harness, rel_tol=1e-12)


def test_a_spec_certifying_the_loglikelihood_names_it_and_never_a_perplexity(tmp_path: Path) -> None:
    inputs = {arm: {"path": copied(tmp_path, fixture("lm_eval_more", arm, "certa_ll"), arm),
                    "format": "lm-eval-samples"} for arm in ARMS}
    stage = {"use": "paired.metric_delta", "with": {"baseline": "baseline", "subject": "subject",
                                                    "metric": "perplexity", "replicates": 500}}
    with pytest.raises(InputError, match=r"has no metric 'perplexity' \(its metrics: acc, loglikelihood\); lm-eval's "
                                         r"per-document 'perplexity' of a loglikelihood task is the document's "
                                         r"log-likelihood, read as metric 'loglikelihood'"):
        run(write_spec(tmp_path, inputs, stage))
    stage["with"] |= {"metric": "loglikelihood", "scale": "bounded", "range": [-100, 0]}
    content = run(write_spec(tmp_path, inputs, stage)).certificate["content"]
    assert "perplexity" not in json.dumps(content["stages"]) and "loglikelihood" in json.dumps(content["stages"])
    lines = {arm: raw_lines(fixture("lm_eval_more", arm, "certa_ll")) for arm in ARMS}
    mean = {arm: sum(line["perplexity"] for line in lines[arm]) / len(lines[arm]) for arm in ARMS}
    assert content["stages"]["s"]["difference"]["estimate"] == pytest.approx(mean["subject"] - mean["baseline"],
                                                                             rel=1e-12)


def test_a_perplexity_that_is_not_the_loglikelihood_of_its_response_is_refused(tmp_path: Path) -> None:
    lines = raw_lines(fixture("lm_eval_more", "baseline", "certa_ll"))
    lines[3]["perplexity"] = math.exp(-lines[3]["perplexity"])  # a per-document perplexity: not what lm-eval logs
    path = tmp_path / "samples_certa_ll_2026-01-01T00-00-00.000000.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(InputError, match=r"line 4: metric 'perplexity' is .*, not the log-likelihood .* in "
                                         r"'filtered_resps'"):
        read_lm_eval_samples(path)


# --------------------------------------------------------- a results file and a samples file of several filters


def test_the_recomputed_task_hash_of_a_samples_file_of_several_filters_is_the_harness_own() -> None:
    from certa.engine.core.evidence.lm_eval import samples_task_hash
    from certa.engine.core.input_limits import InputLimits

    samples = fixture("lm_eval_more", "baseline", "certa_gen")
    lines = raw_lines(samples)
    assert {line["filter"] for line in lines} == {"strict-match", "flexible-extract"} and len(lines) == 48
    stated = json.loads(fixture("lm_eval_more", "baseline", None).read_text())["task_hashes"]["certa_gen"]
    joined = "".join(line["doc_hash"] + line["prompt_hash"] + line["target_hash"] for line in lines)
    assert hashlib.sha256(joined.encode()).hexdigest() == stated
    assert samples_task_hash(samples.read_bytes(), "samples", InputLimits.from_env()) == stated


@pytest.mark.parametrize("task", ["certa_gen", "certa_ll"])
def test_a_results_file_of_another_task_is_refused_when_the_samples_hold_several_filters(tmp_path: Path,
                                                                                        task: str) -> None:
    """The samples of ``certa_gen`` (two filters, 48 lines) read as task ``certa_ll`` of their own run's results
    file, which describes both tasks: lm-eval's hash covers every line, so it is recomputed and compared."""
    results = fixture("lm_eval_more", "baseline", None)
    inputs = {arm: {"path": copied(tmp_path, fixture("lm_eval_more", arm, "certa_gen"), arm),
                    "format": "lm-eval-samples", "read": {"filter": "strict-match"}} for arm in ARMS}
    inputs["baseline"]["read"] |= {"results": "baseline_results", "task": task}
    inputs["baseline_results"] = {"path": copied(tmp_path, results, "baseline"), "format": "lm-eval-results"}
    spec = write_spec(tmp_path, inputs, {"use": "paired.metric_delta",
                                         "with": {"baseline": "baseline", "subject": "subject",
                                                  "metric": "exact_match"}})
    if task == "certa_gen":
        assert run(spec).certificate["content"]["verdict"] == "PASS"
        return
    hashes = json.loads(results.read_text())["task_hashes"]
    with pytest.raises(InputError, match=r"input 'baseline_results' does not describe the samples of input "
                                         r"'baseline' as task 'certa_ll'") as refused:
        run(spec)
    assert hashes["certa_ll"] in str(refused.value) and hashes["certa_gen"] in str(refused.value)
    assert "48 lines" in str(refused.value)
