"""paired.ppl_ratio 1.4.0 (issue 30, item 3): the unit the windows are counted in (tokens, bytes, words) names the
certified estimand, in the outputs, the decisions, the explanation and the gate paths, so that a byte gate cannot
be read as a token gate. The unit follows from the inputs where the spec declares them (an lm-eval export's count
column, model.windows' unit), else from the knob ``unit`` (tokens by default); a gate naming another unit is
refused before anything runs. Expected numbers are computed here from the raw lm-eval JSON Lines."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from certa.engine import InputError, SpecError, run
from certa.engine.core.seeds import stage_generator
from certa.engine.core.spec import load_plan
from certa.engine.core.stages.base import StageContext
from certa.engine.core.stages.paired_ratio import KERNELS, STAGES, run_paired_ratio
from certa.engine.core.stages.ratio_audit import audit_paired_ratio
from certa.engine.core.tables import table_from_columns
from certa.engine.foundation.jsondiff import materiality
from certa.engine.services.presentation.explain import how_to_read
from certa.engine.services.presentation.html.view import StageInput
from certa.engine.services.presentation.stages import markdown_of, presentation_of

from tests.conftest import window_columns

LM_EVAL = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "lm_eval"
ARMS = ("baseline", "subject")
SINGULAR = {"tokens": "token", "bytes": "byte", "words": "word"}
COUNT_METRIC = {"bytes": "byte_perplexity", "words": "word_perplexity"}


def samples(arm: str) -> Path:
    (found,) = sorted((LM_EVAL / arm).glob("samples_certa_ppl_*.jsonl"))
    return found


def lm_eval_spec(folder: Path, unit: str = "bytes", *, knobs: dict[str, Any] | None = None,
                 gates: list[dict[str, Any]] | None = None, use: str = "paired.ppl_ratio",
                 read: dict[str, dict[str, Any]] | None = None) -> Path:
    """A spec over the fixtures' perplexity samples, counts in ``unit`` (``columns.tokens``; with ``unit``
    ``weight``, the column ``read.count_unit`` fills)."""
    inputs = {}
    for arm in ARMS:
        name = f"{arm}_{samples(arm).name}"
        (folder / name).write_bytes(samples(arm).read_bytes())
        inputs[arm] = {"path": name, "format": "lm-eval-samples", "read": (read or {}).get(arm, {})}
    with_ = {"baseline": "baseline", "subject": "subject", "replicates": 1000,
             "columns": {"window_id": "doc_id", "tokens": unit, "nll_sum": "nll"}, **(knobs or {})}
    spec = {"certa": 1, "name": "units", "seed": 3, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "ppl", "use": use, "with": with_}], "gates": gates or []}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def raw(arm: str, unit: str) -> tuple[float, int]:
    """(Σ −loglikelihood, Σ count) of one arm's documents, from the JSON Lines with the standard library."""
    lines = [json.loads(line) for line in samples(arm).read_text(encoding="utf-8").splitlines()]
    return (sum(-float(line["filtered_resps"][0]) for line in lines),
            sum(line[COUNT_METRIC[unit]][1] for line in lines))


CSV_SPEC = """\
certa: 1
name: units
seed: 11
inputs:
  baseline: {{path: baseline.csv}}
  subject: {{path: subject.csv}}
stages:
  - id: ratio
    use: {use}
    with: {{baseline: baseline, subject: subject, replicates: 500{extra}}}
"""


# ------------------------------------------------------------------------------------------ the unit in names


@pytest.mark.parametrize("unit", ["bytes", "words"])
def test_an_lm_eval_ratio_is_named_by_its_unit_in_outputs_decisions_and_knobs(tmp_path: Path, unit: str) -> None:
    result = run(lm_eval_spec(tmp_path, unit))
    content = result.certificate["content"]
    outputs = content["stages"]["ppl"]
    word = SINGULAR[unit]
    # no primary_metric, no drift without phases; the exports' pairing and provenance (1.5.0)
    assert set(outputs) == {f"{word}_perplexity", "dataset", "pairing", "sources"}
    block = outputs[f"{word}_perplexity"]
    assert block["unit"] == unit and block["analysis_basis"] == f"mean_logloss_per_{word}"
    (nll_b, count), (nll_s, _) = raw("baseline", unit), raw("subject", unit)
    assert block["baseline_final"] == pytest.approx(math.exp(nll_b / count), rel=1e-12)
    assert block["ratio_vs_baseline"] == pytest.approx(math.exp((nll_s - nll_b) / count), rel=1e-12)
    stats = outputs["dataset"]["windows"]["stats"]
    assert stats[f"{word}_count_mismatches"] == 0 and "token_count_mismatches" not in stats
    assert content["knobs"]["stages"][0]["version"] == "1.5.0"
    assert content["knobs"]["stages"][0]["with"]["unit"] == unit
    pairing = next(d.decision.detail for d in result.decisions if d.decision.kind == "pairing")
    assert pairing["weights"] == f"subject {unit}" and pairing[f"{word}_count_mismatches"] == 0
    rules = [d.decision.detail["rule"] for d in result.decisions if d.decision.kind == "profile_rule"]
    assert f"{word}_counts_match" in rules and "token_counts_match" not in rules
    assert audit_paired_ratio(outputs) == []
    tampered = json.loads(json.dumps(outputs))
    tampered[f"{word}_perplexity"]["display_ci"][1] *= 1 + 1e-12
    assert audit_paired_ratio(tampered) == [f"{word}_perplexity.display_ci != exp({word}_perplexity.ci)"]


def test_the_explanation_and_the_report_say_per_byte_and_never_token_weighted(tmp_path: Path) -> None:
    outputs = run(lm_eval_spec(tmp_path, "bytes")).certificate["content"]["stages"]["ppl"]
    text = " ".join(how_to_read("paired.ppl_ratio", outputs))
    assert "per byte" in text and "byte-weighted" in text
    assert "token-weighted" not in text and "same tokens" not in text
    assert "a byte gate of 1.05 is a token gate of 1.158" in text  # 1.05 ** 3: at 3 bytes per token
    shown = markdown_of("paired.ppl_ratio", "1.4.0")(outputs)
    assert "per byte" in shown and "byte-count mismatches 0" in shown and "token" not in shown
    gate = {"id": "g", "metric": "ppl.byte_perplexity.display_ci[1]", "max": 1.05, "passed": True}
    section = presentation_of("paired.ppl_ratio").section(StageInput("ppl", outputs, gates=(gate,)))
    assert section.summary.startswith("Perplexity ratio per byte")
    rows = [row for table in section.tables for row in table.rows]
    assert ("byte count mismatches", "0") in rows and not any("token" in str(row) for row in rows)


def test_the_explanation_of_an_older_version_does_not_claim_tokens() -> None:
    """1.3.0 and older record no unit: their windows' counts were whatever column the spec mapped to tokens."""
    base, subj = window_columns(40, seed=2)
    outputs = run(CSV_SPEC.format(use="paired.ppl_ratio@1.3.0", extra=""),
                  inputs={"baseline": base, "subject": subj}).certificate["content"]["stages"]["ratio"]
    text = " ".join(how_to_read("paired.ppl_ratio", outputs))
    assert "token-weighted" not in text and "same tokens" not in text
    assert "does not record" in text and "bytes" in text


def test_a_unit_named_output_is_an_estimate_in_a_diff() -> None:
    assert materiality(("stages", "ppl", "byte_perplexity", "final")) == \
        materiality(("stages", "ppl", "primary_metric", "final")) == 2


# ------------------------------------------------------------------------- gates and knobs refused at validation


@pytest.mark.parametrize("metric, named", [
    ("ppl.token_perplexity.display_ci[1]", "token_perplexity"),
    ("ppl.word_perplexity.ratio_vs_baseline", "word_perplexity"),
    ("ppl.dataset.windows.stats.token_count_mismatches", "token_count_mismatches"),
])
def test_a_gate_naming_another_unit_is_refused_saying_which_unit_the_input_gives(tmp_path: Path, metric: str,
                                                                                named: str) -> None:
    spec = lm_eval_spec(tmp_path, "bytes", gates=[{"id": "g", "metric": metric, "max": 1.05}])
    with pytest.raises(SpecError) as refused:
        load_plan(spec)
    message = str(refused.value)
    assert refused.value.path == "gates[0].metric" and f"'{named}'" in message
    assert "counted in bytes" in message and "input 'baseline'" in message and "lm-eval-samples" in message
    assert "byte_" in message.split("counted in bytes")[1]  # the name to use instead


def test_a_gate_written_for_1_3_0_is_told_the_new_name_and_how_to_keep_it(tmp_path: Path) -> None:
    gates = [{"id": "g", "metric": "ppl.primary_metric.display_ci[1]", "max": 1.05}]
    with pytest.raises(SpecError) as refused:
        load_plan(lm_eval_spec(tmp_path, "bytes", gates=gates))
    assert "ppl.byte_perplexity.display_ci[1]" in str(refused.value)
    assert "use: paired.ppl_ratio@1.3.0" in str(refused.value)
    pinned = run(lm_eval_spec(tmp_path, "bytes", gates=gates, use="paired.ppl_ratio@1.3.0"))
    newest = run(lm_eval_spec(tmp_path, "bytes"))
    old = pinned.certificate["content"]["stages"]["ppl"]["primary_metric"]
    new = newest.certificate["content"]["stages"]["ppl"]["byte_perplexity"]
    assert {k: v for k, v in new.items() if k not in ("unit", "analysis_basis")} == \
        {k: v for k, v in old.items() if k != "analysis_basis"}  # the names move, the numbers do not
    assert pinned.certificate["content"]["verdict"] == "PASS"


def test_a_unit_knob_contradicting_the_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"unit: tokens, but input 'baseline', .* counts bytes") as refused:
        load_plan(lm_eval_spec(tmp_path, "bytes", knobs={"unit": "tokens"}))
    assert refused.value.path == "stages[0].with.unit"


def test_an_lm_eval_export_read_as_token_counts_is_refused_pointing_to_model_windows(tmp_path: Path) -> None:
    spec = json.loads(lm_eval_spec(tmp_path, "bytes").read_text())
    del spec["stages"][0]["with"]["columns"]["tokens"]  # the default column: tokens
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="no token count") as refused:
        load_plan(tmp_path / "spec.yaml")
    assert "model.windows" in str(refused.value) and "columns.tokens: bytes" in str(refused.value)


def test_arms_counted_in_different_units_are_refused(tmp_path: Path) -> None:
    read = {"baseline": {"count_unit": "bytes"}, "subject": {"count_unit": "words"}}
    with pytest.raises(SpecError, match=r"input 'baseline', .* counts bytes.* input 'subject', .* counts words"):
        load_plan(lm_eval_spec(tmp_path, "weight", read=read))


# -------------------------------------------------------------------------------------------- plain tables


@pytest.mark.parametrize("unit", ["tokens", "bytes", "words"])
def test_a_plain_table_is_counted_in_tokens_unless_the_knob_says_otherwise(unit: str) -> None:
    base, subj = window_columns(60, seed=4, shift=0.01)
    extra = "" if unit == "tokens" else f", unit: {unit}"
    newest = run(CSV_SPEC.format(use="paired.ppl_ratio", extra=extra), inputs={"baseline": base, "subject": subj})
    pinned = run(CSV_SPEC.format(use="paired.ppl_ratio@1.3.0", extra=""), inputs={"baseline": base, "subject": subj})
    outputs = newest.certificate["content"]["stages"]["ratio"]
    assert newest.certificate["content"]["knobs"]["stages"][0]["with"]["unit"] == unit
    block = outputs[f"{SINGULAR[unit]}_perplexity"]
    old = pinned.certificate["content"]["stages"]["ratio"]["primary_metric"]
    assert block["ci"] == old["ci"] and block["ratio_vs_baseline"] == old["ratio_vs_baseline"]
    assert outputs["dataset"]["windows"]["stats"]["bootstrap"] == \
        pinned.certificate["content"]["stages"]["ratio"]["dataset"]["windows"]["stats"]["bootstrap"]


def test_the_versions_are_1_0_0_to_1_5_0_and_only_1_4_0_and_1_5_0_resolve_a_unit() -> None:
    assert [stage.version for stage in STAGES] == ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"]
    assert [stage.resolve_knobs is not None for stage in STAGES] == [False] * 4 + [True, True]
    assert all(stage.schema_file == f"stages/{stage.ref}.schema.json" for stage in STAGES[:4])  # frozen, no unit
    assert STAGES[-1].schema_file == "stages/paired.ppl_ratio.schema.json"


# ------------------------------------------------------------------------------------------ model.windows


MODEL_SPEC = """\
certa: 1
name: units
seed: 1
inputs:
  baseline: {{model: models/baseline}}
  subject: {{model: models/subject}}
  text: {{path: text.jsonl}}
stages:
  - id: windows
    use: model.windows
    with: {{baseline: baseline, subject: subject, text: text{windows}}}
  - id: ratio
    use: paired.ppl_ratio
    with: {{baseline: windows.baseline, subject: windows.subject{ratio}}}
gates:
  - {{id: g, metric: "{metric}", max: 1.05}}
"""


def model_spec(folder: Path, windows: str = "", ratio: str = "",
               metric: str = "ratio.token_perplexity.display_ci[1]") -> Path:
    path = folder / "spec.yaml"
    path.write_text(MODEL_SPEC.format(windows=windows, ratio=ratio, metric=metric), encoding="utf-8")
    return path


def test_model_windows_tells_the_unit_or_the_spec_must(tmp_path: Path) -> None:
    """model.windows with unit: auto picks tokens or bytes at run time (by the tokenizers): a gate names one, so
    the spec must say which; with tokens or bytes the unit follows."""
    with pytest.raises(SpecError, match=r"unit: auto.*at run time") as refused:
        load_plan(model_spec(tmp_path))
    assert refused.value.path.startswith("stages[1]")
    plan = load_plan(model_spec(tmp_path, windows=", unit: bytes", metric="ratio.byte_perplexity.display_ci[1]"))
    assert plan.stages[1].knobs["unit"] == "bytes"
    with pytest.raises(SpecError, match=r"'token_perplexity'.*counted in bytes.*model\.windows"):
        load_plan(model_spec(tmp_path, windows=", unit: bytes"))
    assert load_plan(model_spec(tmp_path, ratio=", unit: tokens")).stages[1].knobs["unit"] == "tokens"


def test_a_unit_that_model_windows_did_not_pick_is_refused_at_run_time() -> None:
    """unit: auto with the stage's unit given: the choice model.windows made is checked before anything is
    computed."""
    base, subj = window_columns(20, seed=1)
    tables = {name: table_from_columns(name, columns)
              for name, columns in (("windows.baseline", base), ("windows.subject", subj))}
    knobs = load_plan(CSV_SPEC.format(use="paired.ppl_ratio", extra="")).stages[0].knobs
    context = StageContext(stage_id="ratio", knobs={**knobs, "baseline": "windows.baseline",
                                                    "subject": "windows.subject"},
                           tables=tables, rng=stage_generator(1, "ratio"), profile="dev",
                           upstream={"windows": {"unit": "bytes"}}, seed={})
    with pytest.raises(InputError, match=r"stage 'windows' \(model.windows\) counted its windows in bytes"):
        run_paired_ratio(context, KERNELS[-1])
    assert np.isfinite(run_paired_ratio(
        StageContext(**{**context.__dict__, "upstream": {"windows": {"unit": "tokens"}}}),
        KERNELS[-1]).outputs["token_perplexity"]["ratio_vs_baseline"])


# ------------------------------------------------------------------------------- a byte gate is not a token gate


def test_a_byte_ratio_is_the_token_ratio_to_the_power_tokens_per_byte_and_its_gate_is_looser() -> None:
    """The incident behind 1.4.0: windows of 3 bytes per token whose ratio per token is 1.0756 (hand-set). Per byte
    each window's NLL difference is divided by 3, so the ratio per byte is 1.0756^(1/3) = 1.0246 and its interval
    is the token interval to the power 1/3 (the same seeded draws; BCa is equivariant under scaling): the gate
    max 1.05 passes per byte and fails per token, and a byte gate of 1.05 is the token gate 1.05^3 = 1.158."""
    rng = np.random.default_rng(30)
    n = 400
    tokens = rng.integers(100, 300, n)
    mean_nll = rng.normal(3.0, 0.2, n)
    shift = math.log(1.0756)
    ids = [f"w{i:04d}" for i in range(n)]
    base = {"window_id": ids, "tokens": tokens, "bytes": 3 * tokens, "nll_sum": mean_nll * tokens}
    subj = {**base, "nll_sum": (mean_nll + shift + rng.normal(0.0, 0.01, n)) * tokens}
    per = {}
    for unit, extra in (("tokens", ""), ("bytes", ", unit: bytes, columns: {tokens: bytes}")):
        outputs = run(CSV_SPEC.format(use="paired.ppl_ratio", extra=extra),
                      inputs={"baseline": base, "subject": subj}).certificate["content"]["stages"]["ratio"]
        per[unit] = outputs[f"{SINGULAR[unit]}_perplexity"]
    token, byte = per["tokens"], per["bytes"]
    assert round(token["ratio_vs_baseline"], 3) == 1.076 and round(byte["ratio_vs_baseline"], 4) == 1.0247
    assert byte["ratio_vs_baseline"] ** 3 == pytest.approx(token["ratio_vs_baseline"], rel=1e-12)
    assert [3 * bound for bound in byte["ci"]] == pytest.approx(token["ci"], rel=1e-9)
    assert byte["display_ci"][1] <= 1.05 < token["display_ci"][1]  # the byte gate passes, the token gate fails
    assert round(1.05 ** 3, 3) == 1.158 and byte["display_ci"][1] ** 3 <= 1.05 ** 3
