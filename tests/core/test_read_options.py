"""Every ``read:`` option an evaluator format takes is either used by a stage that reads the input or refused when
the spec is validated, naming the spec key (``inputs.NAME.read.OPTION``) and why; a replay runs the spec as it was
recorded. Error messages of the readers name the spec's keys (``read.filter``), not the Python parameters."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from certa.engine import InputError, SpecError, run
from certa.engine.core.evidence import read_lm_eval_samples
from certa.engine.core.spec import load_plan

ROOT = Path(__file__).resolve().parents[2]
EVALUATORS = ROOT / "tests" / "data" / "evaluators"
ARMS = ("baseline", "subject")


def _one(folder: Path, pattern: str) -> Path:
    (found,) = sorted(folder.glob(pattern))
    return found


INSPECT = {arm: EVALUATORS / "inspect" / f"{arm}.eval" for arm in ARMS}
PPL = {arm: _one(EVALUATORS / "lm_eval" / arm, "samples_certa_ppl_*.jsonl") for arm in ARMS}
MC = {arm: _one(EVALUATORS / "lm_eval" / arm, "samples_certa_mc_*.jsonl") for arm in ARMS}


def write(folder: Path, files: dict[str, Path], fmt: str, read: dict[str, dict[str, Any]],
          stage: dict[str, Any]) -> Path:
    """A spec of one stage on inputs ``baseline`` and ``subject`` (``files`` copied into ``folder``)."""
    inputs = {}
    for arm in ARMS:
        (folder / f"{arm}{files[arm].suffix}").write_bytes(files[arm].read_bytes())
        inputs[arm] = {"path": f"{arm}{files[arm].suffix}", "format": fmt, **({"read": read[arm]} if arm in read
                                                                              else {})}
    spec = {"certa": 1, "name": "read-options", "seed": 1, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "s", **stage}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


DELTA = {"use": "paired.metric_delta", "with": {"baseline": "baseline", "subject": "subject", "metric": "match"}}
BOUNDED = {"use": "paired.metric_delta", "with": {"baseline": "baseline", "subject": "subject", "metric": "match",
                                                  "scale": "bounded", "range": [0, 1]}}
RATIO = {"use": "paired.ppl_ratio", "with": {"baseline": "baseline", "subject": "subject", "replicates": 500,
                                             "columns": {"window_id": "doc_id", "tokens": "bytes",
                                                         "nll_sum": "nll"}}}


def refused(spec: Path, key: str, reason: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_plan(spec)
    error = info.value
    assert error.path == key and f"{key}: " in str(error), str(error)
    assert reason in str(error), str(error)
    assert error.line is not None and error.file == str(spec)
    return error


def test_a_slice_with_a_bounded_metric_is_refused_naming_the_key(tmp_path: Path) -> None:
    """paired.metric_delta computes slices only for a binary metric: a bounded metric's read.slice was ignored."""
    spec = write(tmp_path, INSPECT, "inspect-eval", {arm: {"slice": "kind"} for arm in ARMS}, BOUNDED)
    error = refused(spec, "inputs.baseline.read.slice",
                    "stage 's' (paired.metric_delta) computes per-slice results only for a binary metric, and the "
                    "metric 'match' is scale: bounded; remove it")
    assert "input 'baseline': read.slice would have no effect" in str(error)
    with pytest.raises(SpecError, match=r"inputs\.baseline\.read\.slice"):
        run(spec)


def test_a_slice_on_the_subject_alone_is_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, INSPECT, "inspect-eval", {"subject": {"slice": "kind"}}, DELTA)
    refused(spec, "inputs.subject.read.slice", "takes the slices from the baseline, which has no read.slice")


@pytest.mark.parametrize("read", [{"baseline": {"slice": "kind"}}, {arm: {"slice": "kind"} for arm in ARMS}])
def test_a_slice_with_a_binary_metric_is_used(tmp_path: Path, read: dict[str, dict[str, Any]]) -> None:
    result = run(write(tmp_path, INSPECT, "inspect-eval", read, DELTA))
    stage = result.certificate["content"]["stages"]["s"]
    rows = stage["slices"]["rows"]  # 20 samples of 2 epochs each: paired.metric_delta 1.2.0 counts samples
    assert rows and sum(row["items"] for row in rows) == 20 and "20 samples (2 repeats each)" in stage["units"]["statement"]


def test_count_unit_is_refused_where_no_stage_reads_the_weights(tmp_path: Path) -> None:
    """paired.metric_delta reads no weights; paired.ppl_ratio reads the columns its knobs name (here bytes), not
    the 'weight' column count_unit fills."""
    spec = write(tmp_path, MC, "lm-eval-samples", {"baseline": {"count_unit": "words"}},
                 {**DELTA, "with": {**DELTA["with"], "metric": "acc"}})
    refused(spec, "inputs.baseline.read.count_unit", "compares a per-item metric and reads no weights")
    spec = write(tmp_path, PPL, "lm-eval-samples", {arm: {"count_unit": "words"} for arm in ARMS}, RATIO)
    refused(spec, "inputs.baseline.read.count_unit",
            "stage 's' (paired.ppl_ratio) reads no column 'weight' (its knobs name the columns it reads)")


def test_count_unit_is_used_where_a_stage_reads_the_weight_column(tmp_path: Path) -> None:
    """``count_unit: words`` fills the 'weight' column, which ``columns.tokens: weight`` reads: the word-level
    perplexities exp(Σ NLL / Σ words), computed here from the raw lines."""
    by_weight = {**RATIO, "with": {**RATIO["with"], "replicates": 200,
                                   "columns": {"window_id": "doc_id", "tokens": "weight", "nll_sum": "nll"}}}
    result = run(write(tmp_path, PPL, "lm-eval-samples", {arm: {"count_unit": "words"} for arm in ARMS}, by_weight))
    metric = result.certificate["content"]["stages"]["s"]["word_perplexity"]  # the unit count_unit gave 'weight'
    assert result.certificate["content"]["knobs"]["stages"][0]["with"]["unit"] == "words"
    perplexity = {}
    for arm in ARMS:
        lines = [json.loads(line) for line in PPL[arm].read_text(encoding="utf-8").splitlines()]
        nll = sum(-float(line["filtered_resps"][0]) for line in lines)
        perplexity[arm] = math.exp(nll / sum(line["word_perplexity"][1] for line in lines))
    assert metric["baseline_final"] == pytest.approx(perplexity["baseline"], rel=1e-12)
    assert metric["final"] == pytest.approx(perplexity["subject"], rel=1e-12)


def test_a_task_without_results_is_refused_where_no_stage_records_it(tmp_path: Path) -> None:
    """read.task without read.results only names the task in the provenance: paired.metric_delta and
    paired.ppl_ratio 1.5.0 record it, paired.ppl_ratio 1.4.0 records no export's provenance."""
    spec = write(tmp_path, PPL, "lm-eval-samples", {"subject": {"task": "certa_ppl"}},
                 {**RATIO, "use": "paired.ppl_ratio@1.4.0"})
    refused(spec, "inputs.subject.read.task", "stage 's' (paired.ppl_ratio) reads no evaluator's provenance")
    result = run(write(tmp_path, PPL, "lm-eval-samples", {"subject": {"task": "certa_ppl"}}, RATIO))
    assert result.certificate["content"]["stages"]["s"]["sources"]["subject"]["task"] == "certa_ppl"
    result = run(write(tmp_path, MC, "lm-eval-samples", {arm: {"task": "certa_mc"} for arm in ARMS},
                       {**DELTA, "with": {**DELTA["with"], "metric": "acc"}}))
    assert result.certificate["content"]["stages"]["s"]["sources"]["baseline"]["task"] == "certa_mc"


def test_an_option_one_of_two_stages_uses_is_accepted(tmp_path: Path) -> None:
    """An input read by two stages: an option is refused only when neither uses it."""
    spec = json.loads(write(tmp_path, INSPECT, "inspect-eval", {arm: {"slice": "kind"} for arm in ARMS},
                            BOUNDED).read_text())
    spec["stages"].append({"id": "t", **DELTA})
    path = tmp_path / "two.yaml"
    path.write_text(json.dumps(spec), encoding="utf-8")
    assert [stage.id for stage in load_plan(path).stages] == ["s", "t"]


def test_a_replay_runs_the_spec_as_it_was_recorded(tmp_path: Path) -> None:
    """A run recorded before this check (an option then silently ignored) replays: the check is a validation of
    new runs, as the gates' metric paths are."""
    spec = write(tmp_path, INSPECT, "inspect-eval", {arm: {"slice": "kind"} for arm in ARMS}, BOUNDED)
    plan = load_plan(spec.read_text(encoding="utf-8"), stage_versions={"s": "1.1.0"})
    assert plan.inputs["baseline"].read == {"slice": "kind"}


def test_reader_messages_name_the_spec_keys() -> None:
    lines = [json.loads(line) for line in MC["baseline"].read_text(encoding="utf-8").splitlines()]
    raw = "".join(json.dumps({**line, "filter": name}) + "\n" for line in lines for name in ("none", "strict"))
    with pytest.raises(InputError, match=r"records of 2 filters \(none, strict\); name the one to certify with "
                                         r"read\.filter") as info:
        read_lm_eval_samples(raw.encode(), name="input 'baseline'")
    assert "filter_name" not in str(info.value)
    with pytest.raises(InputError, match=r"no records of filter 'flexible' \(read\.filter; filters: none, strict\)"):
        read_lm_eval_samples(raw.encode(), filter_name="flexible", name="input 'baseline'")
    with pytest.raises(InputError, match=r"read\.count_unit must be 'bytes' or 'words' \(got 'tokens'\)"):
        read_lm_eval_samples(PPL["baseline"], count_unit="tokens")
    bytes_only = [json.loads(line) for line in PPL["baseline"].read_text(encoding="utf-8").splitlines()]
    for line in bytes_only:
        line["metrics"] = [metric for metric in line["metrics"] if metric != "word_perplexity"]
        del line["word_perplexity"]
    with pytest.raises(InputError, match=r"read\.count_unit 'words' is not logged \(metrics byte_perplexity, "
                                         r"bits_per_byte\); use bytes"):
        read_lm_eval_samples("".join(json.dumps(line) + "\n" for line in bytes_only).encode(), count_unit="words")


def test_the_slice_messages_name_read_slice(tmp_path: Path) -> None:
    spec = write(tmp_path, INSPECT, "inspect-eval", {arm: {"slice": "topic"} for arm in ARMS}, DELTA)
    with pytest.raises(InputError, match=r"input 'baseline', member samples/.+: metadata\.topic \(the slice, "
                                         r"read\.slice\) is missing"):
        run(spec)
