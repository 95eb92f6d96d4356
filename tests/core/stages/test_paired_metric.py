"""Stage ``paired.metric_delta`` end to end, through specs: hand-computed 2×2 tables and means whose intervals and
p-values equal the kernels' on the same data, the profile rules (pairing, floors), refused values and knobs,
slices, every input format recorded and replayed, determinism, and a seeded simulation of the
non-inferiority gate. Expected numbers are computed here from the raw files, never through certa's readers."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from certa.engine import InputError, ProfileAbort, SpecError, StageError, run
from certa.engine.core.seeds import stage_generator
from certa.engine.core.stats.paired_metric import (PairedTable, anytime_mean_difference, bca_mean_difference,
                                             binary_slices, mcnemar_exact_test, minimum_detectable_difference,
                                             newcombe_interval, tango_interval, tango_noninferiority_test)
from certa.engine.services.audit import replay
from certa.ledger import Ledger

ROOT = Path(__file__).resolve().parents[3]
EVALUATORS = ROOT / "tests" / "data" / "evaluators"
STAGE_ID = "delta"
SEED = 11


def _one(folder: Path, pattern: str) -> Path:
    """The one file of ``folder`` matching ``pattern``."""
    (found,) = sorted(folder.glob(pattern))
    return found


MC_SAMPLES = {arm: _one(EVALUATORS / "lm_eval" / arm, "samples_certa_mc_*.jsonl") for arm in ("baseline", "subject")}
RESULTS = {arm: _one(EVALUATORS / "lm_eval" / arm, "results_*.json") for arm in ("baseline", "subject")}
INSPECT_EVAL = {arm: EVALUATORS / "inspect" / f"{arm}.eval" for arm in ("baseline", "subject")}
INSPECT_JSON_GZ = {arm: EVALUATORS / "inspect" / f"{arm}.json.gz" for arm in ("baseline", "subject")}


# ------------------------------------------------------------------------------------------------ helpers


def write_spec(folder: Path, inputs: dict[str, dict[str, Any]], knobs: dict[str, Any], *, profile: str = "dev",
               seed: int = SEED, version: str | None = None) -> Path:
    """A one-stage spec (``paired.metric_delta`` on inputs ``baseline`` and ``subject``, pinned to ``version`` when
    given) written as JSON, which YAML reads as it is."""
    use = "paired.metric_delta" + (f"@{version}" if version else "")
    spec = {"certa": 1, "name": "metric-delta", "seed": seed, "profile": profile, "inputs": inputs,
            "stages": [{"id": STAGE_ID, "use": use,
                        "with": {"baseline": "baseline", "subject": "subject", **knobs}}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def table_spec(knobs: dict[str, Any], *, profile: str = "dev", seed: int = SEED) -> dict[str, Any]:
    """A spec dict for in-memory per-item tables (``run(..., inputs=...)`` replaces the paths)."""
    return {"certa": 1, "name": "metric-delta", "seed": seed, "profile": profile,
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": STAGE_ID, "use": "paired.metric_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "correct", **knobs}}]}


def item_table(values: np.ndarray | list[float], *, metric: str = "correct", ids: list[str] | None = None,
               **extra: list[Any]) -> dict[str, np.ndarray]:
    """Columns of a per-item table: ``item_id`` (``i000``, ...), the metric, and any ``extra`` columns."""
    values = np.asarray(values, dtype=np.float64)
    ids = ids if ids is not None else [f"i{index:03d}" for index in range(values.size)]
    return {"item_id": np.array(ids, dtype=object), metric: values,
            **{name: np.array(column, dtype=object) for name, column in extra.items()}}


def write_csv(path: Path, columns: dict[str, Any]) -> None:
    """``columns`` as a CSV file with a header row."""
    names = list(columns)
    rows = zip(*(np.asarray(columns[name]).tolist() for name in names))
    path.write_text("\n".join([",".join(names), *(",".join(map(str, row)) for row in rows)]) + "\n", encoding="utf-8")


def copy_in(folder: Path, source: Path, name: str | None = None) -> str:
    """Copy ``source`` into the spec's folder (a spec reads only inside its folder); its name there."""
    target = folder / (name or source.name)
    if not target.exists():
        target.write_bytes(source.read_bytes())
    return target.name


def outputs(result: Any) -> dict[str, Any]:
    """The stage's outputs in a run's certificate."""
    return result.certificate["content"]["stages"][STAGE_ID]


def rules(decisions: Any) -> dict[str, dict[str, Any]]:
    """The recorded profile-rule decisions, by rule."""
    return {d.detail["rule"]: d.detail for d in decisions if d.kind == "profile_rule"}


def recorded_rules(result: Any) -> dict[str, dict[str, Any]]:
    """The profile-rule decisions a run recorded, by rule."""
    return rules(d.decision for d in result.decisions)


def jsonl_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines file, read with the standard library."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    """``records`` as JSON Lines."""
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def inspect_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of a gzipped Inspect JSON log, read with the standard library."""
    return json.loads(gzip.decompress(path.read_bytes()))["samples"]


LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
"""Inspect's ``value_to_float`` for its letter scores."""


def inspect_match(samples: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """(sample id, epoch) -> the scorer ``match``'s letter as Inspect reads it."""
    return {(s["id"], s["epoch"]): LETTERS[s["scores"]["match"]["value"]] for s in samples}


# ------------------------------------------------------------------------- hand-computed binary and bounded


# items:          0  1  2  3  4  5  6  7  8  9
HAND_BASELINE = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
HAND_SUBJECT = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
HAND_TABLE = PairedTable(n11=3, n10=1, n01=2, n00=4)
"""Both right: items 0-2; subject only: item 5; baseline only: items 3, 4; neither: items 6-9."""


@pytest.mark.parametrize("method, interval", [(None, tango_interval), ("tango", tango_interval),
                                              ("newcombe", newcombe_interval)])
def test_binary_table_estimate_and_kernels_numbers_on_a_hand_computed_case(method: str | None, interval: Any) -> None:
    knobs = {"margin": 0.3, **({"method": method} if method else {})}
    result = run(table_spec(knobs), inputs={"baseline": item_table(HAND_BASELINE),
                                            "subject": item_table(HAND_SUBJECT)})
    out = outputs(result)
    assert out["table"] == {"both": 3, "subject_only": 1, "baseline_only": 2, "neither": 4}
    assert out["n_paired"] == 10 and out["baseline_mean"] == 0.5 and out["subject_mean"] == 0.4
    assert out["difference"]["estimate"] == pytest.approx(-0.1, abs=1e-15)  # (n10 − n01) / n = (1 − 2) / 10
    # exact McNemar: 3 discordant items, 1 of them the subject's; p = 2 P(X ≤ 1 | 3, 1/2) = 2 · 4/8 = 1
    assert out["test"]["p_value"] == 1.0 == mcnemar_exact_test(HAND_TABLE).p_value
    ci = interval(HAND_TABLE, 0.95)
    assert out["difference"]["ci"] == [float(ci.low), float(ci.high)] and out["difference"]["method"] == ci.method
    test = tango_noninferiority_test(HAND_TABLE, 0.3)
    assert out["noninferiority"]["alpha"] == 0.025
    assert out["noninferiority"]["lower_bound"] == float(ci.low)
    assert out["noninferiority"]["noninferior"] is bool(ci.low > -0.3)
    if interval is tango_interval:  # Tango's test is the inversion of Tango's interval: the same verdict
        assert out["noninferiority"]["p_value"] == float(test.p_value)
        assert out["noninferiority"]["noninferior"] is bool(test.p_value < 0.025)
    else:  # Newcombe's interval inverts no single test: no p-value beside it
        assert "p_value" not in out["noninferiority"]
    detectable = minimum_detectable_difference(HAND_TABLE, alpha=0.05, power=0.8)
    assert out["detectable_difference"]["difference"] == float(detectable.difference)
    assert out["slices"] is None


def test_tango_noninferiority_agrees_with_the_interval_lower_bound() -> None:
    """Tango's test of Δ ≤ −δ at α = (1 − level)/2 rejects exactly when the interval's lower bound is above
    −δ."""
    rng = np.random.default_rng(5)
    for margin in (0.05, 0.1, 0.2):
        baseline = rng.integers(0, 2, 120).astype(float)
        subject = np.where(rng.random(120) < 0.85, baseline, 1 - baseline)
        out = outputs(run(table_spec({"margin": margin}), inputs={"baseline": item_table(baseline),
                                                                  "subject": item_table(subject)}))
        assert out["noninferiority"]["noninferior"] == (out["difference"]["ci"][0] > -margin)


HAND_BOUNDED_BASELINE = [0.2, 0.4, 0.6, 0.8, 1.0, 0.0, 0.5, 0.5]
HAND_BOUNDED_SUBJECT = [0.3, 0.4, 0.5, 0.8, 0.9, 0.2, 0.5, 0.7]
"""Differences 0.1, 0, −0.1, 0, −0.1, 0.2, 0, 0.2: mean 0.3 / 8 = 0.0375."""


@pytest.mark.parametrize("method", [None, "empirical_bernstein", "betting"])
def test_bounded_mean_difference_equals_the_kernels_on_the_same_values(method: str | None) -> None:
    knobs = {"scale": "bounded", "range": [0, 1], "margin": 0.5, "replicates": 500,
             **({"method": method} if method else {})}
    out = outputs(run(table_spec(knobs), inputs={"baseline": item_table(HAND_BOUNDED_BASELINE),
                                                 "subject": item_table(HAND_BOUNDED_SUBJECT)}))
    assert out["difference"]["estimate"] == pytest.approx(0.0375, abs=1e-15)
    assert out["baseline_mean"] == pytest.approx(0.5) and out["subject_mean"] == pytest.approx(0.5375)
    subject, baseline = np.array(HAND_BOUNDED_SUBJECT), np.array(HAND_BOUNDED_BASELINE)
    if method is None:  # BCa on the stage's own generator: the plan's seed and the stage id
        expected = bca_mean_difference(subject, baseline, rng=stage_generator(SEED, STAGE_ID), replicates=500,
                                       confidence_level=0.95, metric_range=(0.0, 1.0))
        assert out["difference"]["validity"] == "fixed n" and out["difference"]["replicates"] == 500
    else:
        expected = anytime_mean_difference(subject, baseline, confidence_level=0.95, metric_range=(0.0, 1.0),
                                           method=method)
        assert out["difference"]["validity"] == expected.validity
    assert out["difference"]["ci"] == [float(expected.low), float(expected.high)]
    assert out["noninferiority"]["noninferior"] is (out["difference"]["ci"][0] > -0.5)
    assert "table" not in out and "test" not in out


# --------------------------------------------------------------------------------------------- profile rules


def mc_subject_variant(folder: Path, change: str) -> Path:
    """The subject's lm-eval samples of ``certa_mc`` with the last document removed (``missing``) or document 3's
    prompt digest changed (``prompt``) or its target digest (``target``)."""
    records = jsonl_lines(MC_SAMPLES["subject"])
    if change == "missing":
        records = records[:-1]
    else:
        field = f"{change}_hash"
        records[3][field] = "0" * 64
    path = folder / f"subject_{MC_SAMPLES['subject'].name}"
    write_jsonl(path, records)
    return path


def mc_inputs(folder: Path, subject: Path | None = None) -> dict[str, dict[str, Any]]:
    """The lm-eval ``certa_mc`` samples of both sides copied into ``folder`` (``subject``: another subject file
    already there)."""
    names = {"baseline": copy_in(folder, MC_SAMPLES["baseline"], f"baseline_{MC_SAMPLES['baseline'].name}"),
             "subject": subject.name if subject else copy_in(folder, MC_SAMPLES["subject"],
                                                             f"subject_{MC_SAMPLES['subject'].name}")}
    return {arm: {"path": name, "format": "lm-eval-samples"} for arm, name in names.items()}


@pytest.mark.parametrize("change, field", [("missing", "unmatched_subject"), ("prompt", "identity_mismatched"),
                                           ("target", "identity_mismatched")])
def test_dev_records_an_incomplete_pairing_as_a_warning(tmp_path: Path, change: str, field: str) -> None:
    subject = mc_subject_variant(tmp_path, change)
    result = run(write_spec(tmp_path, mc_inputs(tmp_path, subject), {"metric": "acc"}))
    rule = recorded_rules(result)["samples_paired"]
    assert rule["outcome"] == "warn" and rule["profile"] == "dev" and rule["value"]["paired_samples"] == 23
    assert rule["message"].endswith("the estimate covers the 23 item(s) paired (profile dev lets it through; ci and "
                                    "release refuse)")
    assert set(recorded_rules(result)) == {"samples_paired", "min_paired_samples"}  # no repeat field: no repeat rules
    out = outputs(result)
    assert out["n_paired"] == 23 and out["pairing"]["paired"] == 23
    if change == "missing":  # the baseline's document 23 has no partner
        assert out["pairing"]["unmatched_baseline"] == 1 and out["pairing"]["examples"]["unmatched_baseline"] == [[23]]
    else:
        assert out["pairing"][field] == 1 and out["pairing"]["examples"]["identity_mismatched"] == [[3]]
        assert out["pairing"]["identity_fields_mismatched"] == [f"{change}_hash"]


@pytest.mark.parametrize("profile", ["ci", "release"])
@pytest.mark.parametrize("change", ["missing", "prompt"])
def test_strict_profiles_abort_on_an_incomplete_pairing_and_record_the_attempt(tmp_path: Path, profile: str,
                                                                               change: str) -> None:
    subject = mc_subject_variant(tmp_path, change)
    spec = write_spec(tmp_path, mc_inputs(tmp_path, subject), {"metric": "acc"}, profile=profile)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        with pytest.raises(ProfileAbort, match="samples_paired") as info:
            run(spec, ledger=ledger)
        assert info.value.exit_code == 3
        assert ledger.run(info.value.run_id).status == "aborted"
    assert rules(info.value.decisions)["samples_paired"]["outcome"] == "abort"
    named = "1 item(s) only in the baseline" if change == "missing" else "1 with another input or target digest"
    assert named in str(info.value)


@pytest.mark.parametrize("profile, floor", [("ci", 100), ("release", 200)])
def test_min_paired_samples_floors(profile: str, floor: int) -> None:
    rng = np.random.default_rng(floor)
    for n, passes in ((floor - 1, False), (floor, True)):
        baseline, subject = rng.integers(0, 2, n), rng.integers(0, 2, n)
        inputs = {"baseline": item_table(baseline), "subject": item_table(subject)}
        if passes:
            rule = recorded_rules(run(table_spec({}, profile=profile), inputs=inputs))["min_paired_samples"]
            assert rule["outcome"] == "pass" and rule["value"] == floor and rule["required"] == floor
        else:
            with pytest.raises(ProfileAbort, match=f"min_paired_samples: {floor - 1} paired item\\(s\\), below the "
                                                   f"floor of {floor}") as info:
                run(table_spec({}, profile=profile), inputs=inputs)
            assert info.value.exit_code == 3
    dev = recorded_rules(run(table_spec({}), inputs={"baseline": item_table([0, 1]), "subject": item_table([1, 1])}))
    assert dev["min_paired_samples"]["outcome"] == "pass" and dev["min_paired_samples"]["required"] is None


def test_fewer_than_two_pairs_is_a_stage_error() -> None:
    with pytest.raises(StageError, match="only 1 item"):
        run(table_spec({}), inputs={"baseline": item_table([1.0]), "subject": item_table([0.0])})


# ------------------------------------------------------------------------------------ values and knobs refused


def inspect_log(scores: dict[str, str]) -> dict[str, Any]:
    """A hand-made Inspect JSON log (the shape of ``inspect log convert --to json``: ``eval`` and ``samples``
    with ``id``, ``epoch``, ``input``, ``target``, ``scores.<scorer>.value``, ``metadata``)."""
    return {"version": 2, "status": "success",
            "eval": {"task": "hand", "task_version": 0, "model": "mockllm/model",
                     "packages": {"inspect_ai": "0.3.285"}},
            "samples": [{"id": sample_id, "epoch": 1, "input": f"question {sample_id}", "target": "42",
                         "scores": {"match": {"value": value}}, "metadata": {"topic": f"t{index % 2}"}}
                        for index, (sample_id, value) in enumerate(scores.items())]}


def test_a_partial_credit_letter_is_refused_for_a_binary_metric(tmp_path: Path) -> None:
    (tmp_path / "baseline.json").write_text(json.dumps(inspect_log({"a": "C", "b": "I", "c": "P", "d": "P"})))
    (tmp_path / "subject.json").write_text(json.dumps(inspect_log({"a": "C", "b": "C", "c": "C", "d": "I"})))
    inputs = {arm: {"path": f"{arm}.json", "format": "inspect-json"} for arm in ("baseline", "subject")}
    with pytest.raises(InputError, match=r"input 'baseline': metric 'match' must be 0 or 1 \(scale: binary\), but 2 "
                                         r"of 4 item\(s\) are not \(first: item id='c', epoch=1, value 0\.5\); "
                                         r"a metric with partial credit is scale: bounded"):
        run(write_spec(tmp_path, inputs, {"metric": "match"}))
    bounded = outputs(run(write_spec(tmp_path, inputs, {"metric": "match", "scale": "bounded", "range": [0, 1],
                                                        "replicates": 200})))
    assert bounded["baseline_mean"] == 0.5 and bounded["subject_mean"] == 0.75  # (1 + 0 + .5 + .5)/4, (1+1+1+0)/4


def test_bounded_values_outside_the_range_are_refused_not_clipped() -> None:
    knobs = {"scale": "bounded", "range": [0, 1]}
    inputs = {"baseline": item_table([0.5, 0.5, 0.5, 0.5]), "subject": item_table([0.5, 1.25, 0.5, -0.1])}
    with pytest.raises(InputError, match=r"input 'subject': metric 'correct' must be within the declared range "
                                         r"\[0, 1\] \(scale: bounded\), "
                                         r"but 2 of 4 item\(s\) are not \(first: item item_id='i001', value 1\.25\)"):
        run(table_spec(knobs), inputs=inputs)


@pytest.mark.parametrize("knobs, message", [
    ({"range": [0, 1]}, r"range \[0, 1\] applies to scale: bounded"),
    ({"scale": "bounded"}, r"scale: bounded needs the range"),
    ({"scale": "bounded", "range": [1, 0]}, r"must be \[low, high\] with low < high"),
    ({"method": "bca"}, r"method 'bca' is for bounded metrics; a binary metric takes tango or newcombe"),
    ({"scale": "bounded", "range": [0, 1], "method": "newcombe"}, r"method 'newcombe' is for binary metrics"),
    ({"metric": "accuracy"}, r"input 'baseline' has no column 'accuracy' \(columns: item_id, correct\)"),
    ({"scale": "bounded", "range": [0, 1], "columns": {"slice": "category"}},
     r"columns.slice \('category'\) gives per-slice results only for a binary metric; the metric 'correct' is "
     r"scale: bounded: remove columns.slice"),
])
def test_knob_errors_name_what_to_change(knobs: dict[str, Any], message: str) -> None:
    inputs = {"baseline": item_table([0.0, 1.0, 1.0]), "subject": item_table([1.0, 1.0, 0.0])}
    with pytest.raises((StageError, InputError), match=message):
        run(table_spec(knobs), inputs=inputs)


def test_a_metric_the_export_does_not_log_is_named_with_the_ones_it_does(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"input 'baseline' has no metric 'accuracy' \(its metrics: acc, acc_norm\)"):
        run(write_spec(tmp_path, mc_inputs(tmp_path), {"metric": "accuracy"}))


def test_knobs_outside_their_schema_are_spec_errors() -> None:
    inputs = {"baseline": item_table([0.0, 1.0]), "subject": item_table([1.0, 1.0])}
    for knobs in ({"margin": 1.5}, {"method": "wald"}, {"scale": "ordinal"}, {"columns": {"weight": "w"}}):
        with pytest.raises(SpecError):
            run(table_spec(knobs), inputs=inputs)


# ----------------------------------------------------------------------------------------------------- slices


@pytest.mark.parametrize("adjustment", ["holm", "benjamini_hochberg"])
def test_slices_from_a_table_column_equal_the_kernel(adjustment: str) -> None:
    rng = np.random.default_rng(2)
    groups = np.array(["arith", "logic", "recall"])[rng.integers(0, 3, 90)]
    baseline = rng.integers(0, 2, 90).astype(float)
    subject = np.where(rng.random(90) < 0.8, baseline, 1 - baseline)
    knobs = {"margin": 0.1, "adjustment": adjustment, "columns": {"item": "item_id", "slice": "group"}}
    out = outputs(run(table_spec(knobs), inputs={"baseline": item_table(baseline, group=groups.tolist()),
                                                 "subject": item_table(subject, group=groups.tolist())}))
    expected = binary_slices(subject, baseline, groups, margin=0.1, confidence_level=0.95, interval="tango",
                             adjustment=adjustment)
    assert out["slices"]["adjustment"] == adjustment
    assert out["slices"]["p_value_of"] == "Tango non-inferiority test, inverting the Tango intervals of the rows"
    assert [row["slice"] for row in out["slices"]["rows"]] == ["arith", "logic", "recall"]
    for row, slice_result in zip(out["slices"]["rows"], expected.slices):
        assert row["items"] == int((groups == row["slice"]).sum())
        assert row["estimate"] == slice_result.estimate and row["ci"] == [slice_result.low, slice_result.high]
        assert row["p_value"] == slice_result.p_value and row["adjusted_p_value"] == slice_result.adjusted_p_value
        assert row["estimate"] == pytest.approx(float(np.mean(subject[groups == row["slice"]]
                                                                - baseline[groups == row["slice"]])))


def test_slices_of_an_inspect_log_come_from_its_sample_metadata(tmp_path: Path) -> None:
    inputs = {arm: {"path": copy_in(tmp_path, INSPECT_EVAL[arm]), "format": "inspect-eval", "read": {"slice": "kind"}}
              for arm in ("baseline", "subject")}
    out = outputs(run(write_spec(tmp_path, inputs, {"metric": "match"})))
    samples = {arm: inspect_samples(INSPECT_JSON_GZ[arm]) for arm in ("baseline", "subject")}
    kinds = {(s["id"], s["epoch"]): s["metadata"]["kind"] for s in samples["baseline"]}
    scores = {arm: inspect_match(samples[arm]) for arm in samples}
    assert out["slices"]["p_value_of"] == ("Tango score test of Δ = 0 on each slice's design-effect-adjusted table of "
                                           "samples (Student's t, samples − 1 degrees of freedom), inverting the "
                                           "intervals of the rows")
    for row in out["slices"]["rows"]:  # 1.2.0: a slice counts its samples, each with its two epochs
        keys = [key for key, kind in kinds.items() if kind == row["slice"]]
        assert row["items"] == len({key[0] for key in keys}) == len(keys) / 2
        assert row["estimate"] == pytest.approx(np.mean([scores["subject"][k] - scores["baseline"][k] for k in keys]))
    assert sum(row["items"] for row in out["slices"]["rows"]) == len(kinds) / 2 == 20
    pinned = outputs(run(write_spec(tmp_path, inputs, {"metric": "match"}, version="1.1.0")))
    assert pinned["slices"]["p_value_of"] == "exact McNemar test"  # 1.1.0: every (id, epoch) an item
    assert sum(row["items"] for row in pinned["slices"]["rows"]) == 40


def test_a_slice_column_does_not_apply_to_an_evaluator_export(tmp_path: Path) -> None:
    inputs = {arm: {"path": copy_in(tmp_path, INSPECT_EVAL[arm]), "format": "inspect-eval"}
              for arm in ("baseline", "subject")}
    with pytest.raises(InputError, match=r"its slices come from the input's read\.slice, not from a column \(columns\.slice: 'kind'\)"):
        run(write_spec(tmp_path, inputs, {"metric": "match", "columns": {"slice": "kind"}}))


# ------------------------------------------------------------------------- every input format, recorded and replayed


PROMPTFOO_SCORES = {"baseline": [1, 1, 0, 1, 0, 1], "subject": [1, 0, 0, 1, 1, 1]}


def write_promptfoo(path: Path, successes: list[int], provider: str) -> None:
    """A promptfoo JSON Lines file built by hand after promptfoo's ``EvaluateResult`` as ``promptfoo eval --output
    results.jsonl`` writes it (no real promptfoo run is among the fixtures)."""
    write_jsonl(path, [{"evalId": f"eval-{provider}", "promptIdx": 0, "testIdx": index,
                        "testCase": {"vars": {"question": f"q{index}"}}, "vars": {"question": f"q{index}"},
                        "prompt": {"raw": "Answer: {{question}}", "label": "answer"},
                        "provider": {"id": provider, "label": provider}, "success": bool(value),
                        "score": float(value), "namedScores": {}} for index, value in enumerate(successes)])


def lm_eval_acc(path: Path) -> dict[int, float]:
    """doc_id -> ``acc`` of an lm-eval samples file, read with the standard library."""
    return {record["doc_id"]: float(record["acc"]) for record in jsonl_lines(path)}


def prepare(fmt: str, folder: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, dict], dict]:
    """(inputs, knobs, per-item values by arm computed from the raw files, facts the provenance must state)."""
    arms = ("baseline", "subject")
    if fmt in ("lm-eval-samples", "lm-eval-samples+results"):
        inputs = mc_inputs(folder)
        facts: dict[str, Any] = {"tool": "lm-evaluation-harness", "task": None, "tool_version": None}
        if fmt.endswith("+results"):
            facts["task"] = "certa_mc"
            for arm in arms:
                inputs[arm]["read"] = {"results": f"{arm}_results", "task": "certa_mc"}
                inputs[f"{arm}_results"] = {"path": copy_in(folder, RESULTS[arm], f"{arm}_{RESULTS[arm].name}"),
                                            "format": "lm-eval-results"}
            facts["tool_version"] = json.loads(RESULTS["baseline"].read_text())["lm_eval_version"]
        return inputs, {"metric": "acc"}, {arm: lm_eval_acc(MC_SAMPLES[arm]) for arm in arms}, facts
    if fmt in ("inspect-eval", "inspect-json"):
        inputs = {}
        for arm in arms:
            name = copy_in(folder, INSPECT_EVAL[arm])
            if fmt == "inspect-json":
                name = f"{arm}.json"
                (folder / name).write_bytes(gzip.decompress(INSPECT_JSON_GZ[arm].read_bytes()))
            inputs[arm] = {"path": name, "format": fmt}
        values = {arm: inspect_match(inspect_samples(INSPECT_JSON_GZ[arm])) for arm in arms}
        return inputs, {"metric": "match"}, values, {"tool": "inspect_ai", "task": "certa_arith",
                                                     "tool_version": "0.3.285"}
    if fmt == "promptfoo-jsonl":
        for arm in arms:
            write_promptfoo(folder / f"promptfoo-handbuilt-{arm}.jsonl", PROMPTFOO_SCORES[arm], f"echo-{arm}")
        inputs = {arm: {"path": f"promptfoo-handbuilt-{arm}.jsonl", "format": fmt} for arm in arms}
        values = {arm: dict(enumerate(map(float, PROMPTFOO_SCORES[arm]))) for arm in arms}
        return inputs, {"metric": "success"}, values, {"tool": "promptfoo", "task": None, "tool_version": None}
    rng = np.random.default_rng(8)
    values = {arm: {f"q{index:02d}": float(v) for index, v in enumerate(rng.integers(0, 2, 30))} for arm in arms}
    for arm in arms:
        columns = {"question": list(values[arm]), "exact": list(values[arm].values())}
        if fmt == "csv":
            write_csv(folder / f"{arm}.csv", columns)
        else:
            pq.write_table(pa.table(columns), folder / f"{arm}.parquet")
    inputs = {arm: {"path": f"{arm}.{fmt}"} for arm in arms}
    return inputs, {"metric": "exact", "columns": {"item": "question"}}, values, {"tool": "table", "task": None,
                                                                                   "tool_version": None}


FORMATS = ["lm-eval-samples", "lm-eval-samples+results", "inspect-eval", "inspect-json", "promptfoo-jsonl", "csv",
           "parquet"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_input_format_certifies_records_and_replays(tmp_path: Path, fmt: str) -> None:
    inputs, knobs, values, facts = prepare(fmt, tmp_path)
    spec = write_spec(tmp_path, inputs, {**knobs, "margin": 0.2})
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes
    out = outputs(result)
    keys = list(values["baseline"])
    baseline = np.array([values["baseline"][k] for k in keys])
    subject = np.array([values["subject"][k] for k in keys])
    assert len(keys) == out["pairing"]["baseline_items"] == out["pairing"]["subject_items"] == out["units"]["rows"]
    if fmt.startswith("inspect"):  # 20 samples of 2 epochs: the sample is the unit
        assert out["n_paired"] == len({key[0] for key in keys}) == len(keys) / 2 == out["units"]["samples"]
        assert out["units"]["statement"] == "unit of analysis: 20 samples (2 repeats each)"
    else:
        assert out["n_paired"] == len(keys) and out["units"]["repeats"] == {
            "min": 1, "max": 1, "counts": [{"repeats": 1, "samples": len(keys)}]}
    assert out["baseline_mean"] == pytest.approx(baseline.mean())
    assert out["subject_mean"] == pytest.approx(subject.mean())
    table = out["table"]
    assert table["subject_only"] == int(((subject == 1) & (baseline == 0)).sum())
    assert table["baseline_only"] == int(((subject == 0) & (baseline == 1)).sum())
    for arm in ("baseline", "subject"):
        source = out["sources"][arm]
        assert {k: source[k] for k in facts} == facts
        assert source["files"] and all(len(f["sha256"]) == 64 for f in source["files"])
    if fmt == "lm-eval-samples+results":  # the run's results file: its digest, the task's configuration, the model
        results = json.loads(RESULTS["subject"].read_text())
        source = out["sources"]["subject"]
        assert len(source["files"]) == 2 and source["task_version"] == str(results["versions"]["certa_mc"])
        assert {"field": "model_name", "value": results["model_name"]} in source["models"]


# ------------------------------------------------------------------------------------- spec errors on read:


READ_SPEC = """\
certa: 1
name: read-options
seed: 1
profile: dev
inputs:
  baseline:
    path: {baseline}
    format: lm-eval-samples
    read: {{{read}}}
  subject: {{path: {subject}, format: lm-eval-samples}}
  baseline_results: {{path: {results}, format: lm-eval-results}}
stages:
  - id: delta
    use: paired.metric_delta
    with: {{baseline: baseline, subject: subject, metric: acc}}
"""


@pytest.mark.parametrize("read, message", [
    ("task: certa_mc, bogus: 1", r"inputs\.baseline\.read\.bogus: unknown key 'bogus'"),
    ("task: certa_mc, slice: kind", r"format lm-eval-samples takes count_unit, filter, results, task, not 'slice'"),
    ("results: subject", r"read\.results must name another input of format lm-eval-results \(got 'subject'\)"),
    ("results: nowhere", r"read\.results must name another input of format lm-eval-results \(got 'nowhere'\)"),
])
def test_read_option_errors_are_spec_errors_naming_file_line_and_field(tmp_path: Path, read: str,
                                                                      message: str) -> None:
    spec = tmp_path / "spec.yaml"
    names = mc_inputs(tmp_path)
    spec.write_text(READ_SPEC.format(read=read, baseline=names["baseline"]["path"], subject=names["subject"]["path"],
                                     results=copy_in(tmp_path, RESULTS["baseline"])), encoding="utf-8")
    with pytest.raises(SpecError, match=message) as info:
        run(spec)
    assert info.value.file == str(spec) and info.value.line == 9
    assert "baseline" in str(info.value.path) and "read" in str(info.value.path)


def test_a_results_companion_needs_the_task_and_must_describe_it(tmp_path: Path) -> None:
    """The samples' lines do not name their task, so a results file is read for the task ``read.task`` names,
    never for one guessed; a results file without that task's configuration is not the samples' sibling."""
    results = json.loads(RESULTS["baseline"].read_text())
    del results["configs"]["certa_mc"]
    (tmp_path / "results.json").write_text(json.dumps(results))
    inputs = mc_inputs(tmp_path)
    inputs["baseline"]["read"] = {"results": "baseline_results"}
    inputs["baseline_results"] = {"path": "results.json", "format": "lm-eval-results"}
    with pytest.raises(InputError, match=r"input 'baseline': read\.results needs read\.task"):
        run(write_spec(tmp_path, inputs, {"metric": "acc"}))
    inputs["baseline"]["read"]["task"] = "certa_mc"
    with pytest.raises(InputError, match=r"no configuration of task 'certa_mc'"):
        run(write_spec(tmp_path, inputs, {"metric": "acc"}))


def test_a_results_companion_of_other_samples_is_refused(tmp_path: Path) -> None:
    """lm-eval's ``task_hashes.<task>`` is the SHA-256 of the samples' concatenated doc, prompt and target
    digests: the perplexity task's samples read with the multiple-choice task's results are refused (what
    ``--input baseline=OTHER`` without ``--input baseline_results=...`` would do)."""
    inputs = mc_inputs(tmp_path)
    inputs["baseline"]["path"] = copy_in(tmp_path, _one(EVALUATORS / "lm_eval" / "baseline", "samples_certa_ppl_*"))
    inputs["baseline"]["read"] = {"results": "baseline_results", "task": "certa_mc"}
    inputs["baseline_results"] = {"path": copy_in(tmp_path, RESULTS["baseline"]), "format": "lm-eval-results"}
    with pytest.raises(InputError, match=r"input 'baseline_results' does not describe the samples of input "
                                         r"'baseline' as task 'certa_mc': its task_hashes\.certa_mc is dc63c4bf"):
        run(write_spec(tmp_path, inputs, {"metric": "acc"}))
    samples = jsonl_lines(MC_SAMPLES["baseline"])  # the digest lm-eval states, computed from the raw lines
    joined = "".join(line["doc_hash"] + line["prompt_hash"] + line["target_hash"] for line in samples)
    stated = json.loads(RESULTS["baseline"].read_text())["task_hashes"]["certa_mc"]
    assert hashlib.sha256(joined.encode()).hexdigest() == stated


# -------------------------------------------------------------------------------------------------- determinism


def test_the_same_spec_gives_the_same_certificate_and_bca_follows_the_stage_generator(tmp_path: Path) -> None:
    inputs = {arm: {"path": copy_in(tmp_path, INSPECT_EVAL[arm]), "format": "inspect-eval"}
              for arm in ("baseline", "subject")}
    bounded = {"metric": "closeness", "scale": "bounded", "range": [0, 1], "replicates": 400}
    first = run(write_spec(tmp_path, inputs, bounded))
    second = run(write_spec(tmp_path, inputs, bounded))
    assert first.certificate["content_sha256"] == second.certificate["content_sha256"]
    reseeded = outputs(run(write_spec(tmp_path, inputs, bounded, seed=SEED + 1)))
    assert reseeded["difference"]["estimate"] == outputs(first)["difference"]["estimate"]
    assert reseeded["difference"]["ci"] != outputs(first)["difference"]["ci"]
    samples = {arm: inspect_samples(INSPECT_JSON_GZ[arm]) for arm in ("baseline", "subject")}
    closeness = {arm: {(s["id"], s["epoch"]): s["scores"]["closeness"]["value"] for s in samples[arm]}
                 for arm in samples}
    ids = sorted({key[0] for key in closeness["baseline"]})  # the samples in the order of their ids
    assert all(isinstance(i, str) for i in ids)
    means = {arm: np.array([np.mean([v for (i, _), v in closeness[arm].items() if i == sample]) for sample in ids])
             for arm in closeness}  # 1.2.0: the mean of each sample's two epochs is the unit
    expected = bca_mean_difference(means["subject"], means["baseline"], rng=stage_generator(SEED + 1, STAGE_ID),
                                   replicates=400, confidence_level=0.95, metric_range=(0.0, 1.0))
    assert reseeded["difference"]["ci"] == [expected.low, expected.high]
    binary = [outputs(run(write_spec(tmp_path, inputs, {"metric": "match"}, seed=seed))) for seed in (1, 2)]
    assert binary[0] == binary[1]


# ------------------------------------------------------------------------------------------ seeded simulation


def simulated_pair(rng: np.random.Generator, n: int, cells: tuple[float, float, float, float]) -> dict[str, Any]:
    """Per-item tables of ``n`` items whose (both, subject only, baseline only, neither) probabilities are ``cells``."""
    cell = rng.choice(4, size=n, p=cells)
    subject = ((cell == 0) | (cell == 1)).astype(float)
    baseline = ((cell == 0) | (cell == 2)).astype(float)
    return {"baseline": item_table(baseline), "subject": item_table(subject)}


@pytest.mark.slow
def test_simulated_noninferiority_gate_holds_its_level_and_refuses_a_clearly_worse_subject() -> None:
    """At the boundary (true Δ = −margin = −0.05, n = 500, 300 runs of the stage) the gate passes at most
    α = 0.025 plus three binomial standard errors (3 · 0.009); a subject 10 points worse (margin 0.01) never
    passes."""
    rng = np.random.default_rng(20261124)
    boundary = (0.70, 0.05, 0.10, 0.15)  # Δ = 0.05 − 0.10
    spec = table_spec({"margin": 0.05}, profile="release")
    passes = [outputs(run(spec, inputs=simulated_pair(rng, 500, boundary)))["noninferiority"]["noninferior"]
              for _ in range(300)]
    assert np.mean(passes) <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / 300)
    worse = (0.65, 0.05, 0.15, 0.15)  # Δ = 0.05 − 0.15
    spec = table_spec({"margin": 0.01}, profile="release")
    assert not any(outputs(run(spec, inputs=simulated_pair(rng, 500, worse)))["noninferiority"]["noninferior"]
                   for _ in range(60))


def simulated_bounded_pair(rng: np.random.Generator, n: int, drop: float) -> dict[str, Any]:
    """Per-item scores on {0, 0.25, ..., 1}: the subject loses 0.25 on an item the baseline scores ≥ 0.25 with
    probability ``drop``, so the true Δ = −0.25 · 0.8 · ``drop`` exactly."""
    baseline = rng.integers(0, 5, n) / 4
    subject = np.where((baseline >= 0.25) & (rng.random(n) < drop), baseline - 0.25, baseline)
    return {"baseline": item_table(baseline), "subject": item_table(subject)}


@pytest.mark.slow
def test_simulated_bounded_gate_holds_its_level_and_refuses_a_clearly_worse_subject() -> None:
    """BCa on the stage's generator, n = 500: at true Δ = −margin = −0.05 (200 runs) the gate passes at most
    α = 0.025 plus three binomial standard errors; at Δ = −0.10 with margin 0.01 (30 runs) it never passes."""
    rng = np.random.default_rng(20261125)
    spec = table_spec({"scale": "bounded", "range": [0, 1], "margin": 0.05}, profile="release")
    passes = [outputs(run(spec, inputs=simulated_bounded_pair(rng, 500, 0.25)))["noninferiority"]["noninferior"]
              for _ in range(200)]
    assert np.mean(passes) <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / 200)
    spec = table_spec({"scale": "bounded", "range": [0, 1], "margin": 0.01}, profile="release")
    assert not any(outputs(run(spec, inputs=simulated_bounded_pair(rng, 500, 0.5)))["noninferiority"]["noninferior"]
                   for _ in range(30))
