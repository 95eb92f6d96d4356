"""The lm-evaluation-harness reader on real ``--log_samples`` output (``tests/data/evaluators/lm_eval``, made by
``make_fixtures.py``); every expected number is computed here from the raw files with ``json`` alone."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
import rfc8785

from certa.engine.core.evidence import pair_records, read_lm_eval_samples

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "lm_eval"


def files(side: str, task: str) -> tuple[Path, Path]:
    """(samples file, results file) of one side and task."""
    (samples,) = (FIXTURES / side).glob(f"samples_{task}_*.jsonl")
    (results,) = (FIXTURES / side).glob("results_*.json")
    return samples, results


def raw_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("side", ["baseline", "subject"])
def test_perplexity_records_match_the_raw_lines_and_the_harness_aggregate(side: str) -> None:
    samples, results = files(side, "certa_ppl")
    lines = raw_lines(samples)
    records = read_lm_eval_samples(samples, results)
    assert records.keys["doc_id"].tolist() == [line["doc_id"] for line in lines]
    assert records.metrics["nll"].tolist() == [-float(line["filtered_resps"][0]) for line in lines]
    texts = [line["doc"]["text"] for line in lines]
    assert records.counts["bytes"].tolist() == [len(text.encode("utf-8")) for text in texts]
    assert records.counts["words"].tolist() == [len(text.split()) for text in texts]
    assert records.weights.tolist() == records.counts["bytes"].tolist()
    for field in ("doc_hash", "prompt_hash", "target_hash"):
        assert records.identity[field].tolist() == [line[field] for line in lines]
    # the harness's doc_hash is the SHA-256 of the document as indented JSON
    assert lines[0]["doc_hash"] == hashlib.sha256(json.dumps(lines[0]["doc"], indent=2,
                                                             ensure_ascii=False).encode()).hexdigest()
    harness = json.loads(results.read_text(encoding="utf-8"))["results"]["certa_ppl"]
    nll, n_bytes = records.metrics["nll"].sum(), records.counts["bytes"].sum()
    assert math.isclose(math.exp(nll / n_bytes), harness["byte_perplexity,none"], rel_tol=1e-12)
    assert math.isclose(math.exp(nll / records.counts["words"].sum()), harness["word_perplexity,none"],
                        rel_tol=1e-12)


def test_multiple_choice_records_match_the_raw_lines_and_the_harness_aggregate() -> None:
    samples, results = files("baseline", "certa_mc")
    lines = raw_lines(samples)
    records = read_lm_eval_samples(samples, results)
    assert sorted(records.metrics) == ["acc", "acc_norm"] and records.weights is None
    for metric in ("acc", "acc_norm"):
        assert records.metrics[metric].tolist() == [float(line[metric]) for line in lines]
        harness = json.loads(results.read_text(encoding="utf-8"))["results"]["certa_mc"][f"{metric},none"]
        assert math.isclose(records.metrics[metric].mean(), harness, rel_tol=1e-12)


def test_provenance_is_what_the_results_file_states() -> None:
    samples, results = files("subject", "certa_mc")
    document = json.loads(results.read_text(encoding="utf-8"))
    provenance = read_lm_eval_samples(samples, results).provenance
    assert provenance.tool == "lm-evaluation-harness"
    assert provenance.tool_version == document["lm_eval_version"]
    assert provenance.task == "certa_mc" and provenance.task_version == str(document["versions"]["certa_mc"])
    own = dict(document["configs"]["certa_mc"])
    own["metadata"] = {k: v for k, v in own["metadata"].items() if k not in ("pretrained", "dtype")}  # the model's
    assert provenance.task_config_sha256 == hashlib.sha256(rfc8785.dumps(own)).hexdigest()
    models = dict(provenance.models)
    assert models["model"] == "hf" and json.loads(models["model_args"]) == document["config"]["model_args"]
    assert ("task_hash", document["task_hashes"]["certa_mc"]) in provenance.details
    assert dict(provenance.sources) == {
        samples.name: hashlib.sha256(samples.read_bytes()).hexdigest(),
        results.name: hashlib.sha256(results.read_bytes()).hexdigest()}


def test_baseline_and_quantised_subject_pair_on_every_document() -> None:
    for task in ("certa_ppl", "certa_mc"):
        paired = pair_records(read_lm_eval_samples(files("baseline", task)[0]),
                              read_lm_eval_samples(files("subject", task)[0]))
        n = len(raw_lines(files("baseline", task)[0]))
        assert paired.report.complete and paired.report.n_paired == n
    baseline_nll, subject_nll = ({line["doc_id"]: -float(line["filtered_resps"][0])
                                  for line in raw_lines(files(side, "certa_ppl")[0])}
                                 for side in ("baseline", "subject"))
    paired = pair_records(read_lm_eval_samples(files("baseline", "certa_ppl")[0]),
                          read_lm_eval_samples(files("subject", "certa_ppl")[0]))
    delta = paired.subject.metrics["nll"] - paired.baseline.metrics["nll"]
    assert delta.tolist() == [subject_nll[d] - baseline_nll[d] for d in paired.baseline.keys["doc_id"].tolist()]
    assert delta.any(), "the 4-bit subject should change some document's loglikelihood"


def test_a_changed_prompt_and_a_missing_document_are_reported(tmp_path: Path) -> None:
    samples = files("subject", "certa_mc")[0]
    lines = raw_lines(samples)
    lines[3]["prompt_hash"] = "0" * 64
    removed = lines.pop(5)["doc_id"]
    edited = tmp_path / samples.name
    edited.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    paired = pair_records(read_lm_eval_samples(files("baseline", "certa_mc")[0]), read_lm_eval_samples(edited))
    report = paired.report
    assert report.unmatched_baseline == ((removed,),) and report.unmatched_subject == ()
    assert dict(report.identity_mismatches) == {"prompt_hash": ((lines[3]["doc_id"],),)}
    assert report.n_paired == report.n_baseline - 2
    assert lines[3]["doc_id"] not in paired.baseline.keys["doc_id"].tolist()


def test_the_two_models_runs_of_one_task_have_one_task_configuration_digest() -> None:
    """lm-eval copies the model's arguments into each task's metadata; the digest leaves them out, so the
    baseline's and the subject's exports of the same task state the same configuration."""
    sides = [read_lm_eval_samples(*files(side, "certa_mc"), task="certa_mc") for side in ("baseline", "subject")]
    assert sides[0].provenance.task_config_sha256 == sides[1].provenance.task_config_sha256


def test_results_files_swapped_between_the_sides_are_refused_by_their_own_figures(tmp_path: Path) -> None:
    """The two sides ran the same task on the same documents (same task hash), so a results file swapped with the
    other side's passed every check and named the other model as this side's. Its own mean accuracy (0.0833 vs
    0.1667) is now checked against the samples' mean, and its sample_len against their count."""
    from certa.engine.foundation.errors import InputError

    samples, _ = files("baseline", "certa_mc")
    _, others = files("subject", "certa_mc")
    lines = raw_lines(samples)
    mean = sum(float(line["acc"]) for line in lines) / len(lines)
    with pytest.raises(InputError, match=rf"results.certa_mc.'acc,none' is 0.16666666666666666, but the mean of the "
                                         rf"{len(lines)} documents' 'acc' in .* is {mean!r}: the results file is not "
                                         r"these samples'"):
        read_lm_eval_samples(samples, others)
    document = json.loads(files("baseline", "certa_mc")[1].read_text(encoding="utf-8"))
    document["results"]["certa_mc"]["sample_len"] += 1
    edited = tmp_path / "results.json"
    edited.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InputError, match=rf"results.certa_mc.sample_len is {len(lines) + 1}, but .* holds "
                                         rf"{len(lines)} documents"):
        read_lm_eval_samples(samples, edited, task="certa_mc")


@pytest.mark.parametrize("count, value, accepted", [("effective", -1, False), ("effective", +1, False),
                                                    ("original", -1, False), ("original", +1, True)])
def test_the_results_files_n_samples_must_count_the_samples(tmp_path: Path, count: str, value: int,
                                                             accepted: bool) -> None:
    """lm-eval states a task's documents twice more, in ``n-samples.<task>``: ``effective`` (the documents evaluated)
    must be the number of documents read, ``original`` (before ``--limit``) at least it. An ``effective`` of 23
    beside 24 documents was accepted."""
    from certa.engine.foundation.errors import InputError

    samples, results = files("subject", "certa_mc")
    documents = len(raw_lines(samples))
    document = json.loads(results.read_text(encoding="utf-8"))
    assert document["n-samples"]["certa_mc"] == {"original": documents, "effective": documents}
    document["n-samples"]["certa_mc"][count] = documents + value
    edited = tmp_path / "results.json"
    edited.write_text(json.dumps(document), encoding="utf-8")
    if accepted:
        assert read_lm_eval_samples(samples, edited, task="certa_mc").n_items == documents
        return
    with pytest.raises(InputError, match=rf"results.json: n-samples.certa_mc.{count} is {documents + value}, but "
                                         rf".* holds {documents} documents of the task"):
        read_lm_eval_samples(samples, edited, task="certa_mc")
