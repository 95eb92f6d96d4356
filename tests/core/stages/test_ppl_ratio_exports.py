"""paired.ppl_ratio 1.5.0 (issue 32, item 5): lm-evaluation-harness perplexity samples pair by ``doc_id`` with the
harness's own digests of the document, the prompt and the target (``doc_hash``, ``prompt_hash``, ``target_hash``),
as ``paired.metric_delta`` pairs them; a document missing on one side or present on both with other digests is the
profile rule ``items_paired`` (a warning recorded in ``dev``, a refusal naming the numbers in ``ci`` and
``release``); and the certificate records what each export states about where its numbers come from (tool,
version, task, model, the files read with their SHA-256).

The inputs are the real lm-eval fixtures (tests/data/evaluators/lm_eval, task ``certa_ppl``), copied or edited
here as the harness writes its records: an edited document gets the digests lm-eval 0.4 computes
(``doc_hash``: SHA-256 of ``json.dumps(doc, indent=2, ensure_ascii=False)``; ``prompt_hash``: of the request's
context; ``target_hash``: of the target). Expected numbers come from the raw JSON Lines, never from certa's
readers."""

from __future__ import annotations

import hashlib
import shutil
import json
import math
from pathlib import Path
from typing import Any

import pytest

from certa.engine import InputError, ProfileAbort, SpecError, run
from certa.engine.core.spec import load_plan
from certa.engine.services.audit import replay
from certa.engine.services.presentation.explain import how_to_read
from certa.engine.services.presentation.html.view import StageInput
from certa.engine.services.presentation.stages import markdown_of, presentation_of
from certa.ledger import Ledger

LM_EVAL = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "lm_eval"
ARMS = ("baseline", "subject")
STAGE = "ppl"
EDITED = 5
"""The document whose text the subject's edited export changes (the same byte count: ``a`` -> ``o``)."""


def _one(arm: str, pattern: str) -> Path:
    (found,) = sorted((LM_EVAL / arm).glob(pattern))
    return found


SAMPLES = {arm: _one(arm, "samples_certa_ppl_*.jsonl") for arm in ARMS}
RESULTS = {arm: _one(arm, "results_*.json") for arm in ARMS}


def records(arm: str) -> list[dict[str, Any]]:
    """One arm's samples, read with the standard library."""
    return [json.loads(line) for line in SAMPLES[arm].read_text(encoding="utf-8").splitlines() if line.strip()]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def with_text(record: dict[str, Any], text: str) -> dict[str, Any]:
    """``record`` for a document whose text is ``text``, with the digests lm-eval 0.4 writes for it
    (``lm_eval/loggers/evaluation_tracker.py``, ``hash_string``); the log-likelihood and counts kept."""
    doc = {**record["doc"], "text": text}
    return {**record, "doc": doc, "target": text, "arguments": {"gen_args_0": {"arg_0": text}},
            "doc_hash": _sha256(json.dumps(doc, indent=2, ensure_ascii=False)),
            "prompt_hash": _sha256(text), "target_hash": _sha256(text)}


def edited_subject() -> list[dict[str, Any]]:
    """The subject's samples with document ``EDITED``'s text changed, its byte and word counts the same."""
    lines = records("subject")
    text = lines[EDITED]["doc"]["text"]
    changed = text.replace("a", "o", 1)
    assert changed != text and len(changed.encode()) == len(text.encode())
    lines[EDITED] = with_text(lines[EDITED], changed)
    return lines


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path.name


def spec(folder: Path, subject: list[dict[str, Any]] | None = None, *, baseline: list[dict[str, Any]] | None = None,
         profile: str = "dev", use: str = "paired.ppl_ratio", results: bool = False,
         knobs: dict[str, Any] | None = None, read: dict[str, Any] | None = None) -> Path:
    """A one-stage spec over the fixtures' perplexity samples (``subject``/``baseline``: edited records written in
    their place), with the results companions when ``results``."""
    inputs: dict[str, Any] = {}
    for arm, lines in (("baseline", baseline), ("subject", subject)):
        name = write_jsonl(folder / f"{arm}_{SAMPLES[arm].name}", lines if lines is not None else records(arm))
        inputs[arm] = {"path": name, "format": "lm-eval-samples", "read": dict(read or {})}
        if results:
            inputs[arm]["read"] |= {"results": f"{arm}_results", "task": "certa_ppl"}
            inputs[f"{arm}_results"] = {"path": f"{arm}_{RESULTS[arm].name}", "format": "lm-eval-results"}
            (folder / inputs[f"{arm}_results"]["path"]).write_bytes(RESULTS[arm].read_bytes())
    with_ = {"baseline": "baseline", "subject": "subject", "replicates": 1200,
             "columns": {"window_id": "doc_id", "tokens": "bytes", "nll_sum": "nll"}, **(knobs or {})}
    document = {"certa": 1, "name": "ppl-exports", "seed": 7, "profile": profile, "inputs": inputs,
                "stages": [{"id": STAGE, "use": use, "with": with_}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def outputs(result: Any) -> dict[str, Any]:
    return result.certificate["content"]["stages"][STAGE]


def rules(decisions: Any) -> dict[str, dict[str, Any]]:
    return {d.detail["rule"]: d.detail for d in decisions if d.kind == "profile_rule"}


def recorded_rules(result: Any) -> dict[str, dict[str, Any]]:
    return rules(d.decision for d in result.decisions)


def byte_ratio(baseline: list[dict[str, Any]], subject: list[dict[str, Any]], docs: set[int]) -> tuple[float, float,
                                                                                                        float]:
    """(baseline, subject perplexity per byte, their ratio) over documents ``docs``, from the raw records:
    exp(Σ −loglikelihood / Σ bytes), the subject's byte counts weighting both."""
    def sums(lines: list[dict[str, Any]]) -> tuple[float, int]:
        chosen = [line for line in lines if line["doc_id"] in docs]
        return (sum(-float(line["filtered_resps"][0]) for line in chosen),
                sum(line["byte_perplexity"][1] for line in chosen))

    (nll_b, _), (nll_s, count) = sums(baseline), sums(subject)
    return math.exp(nll_b / count), math.exp(nll_s / count), math.exp((nll_s - nll_b) / count)


# ------------------------------------------------------------------------------------- order of the documents


def test_exports_in_another_order_give_the_same_certificate(tmp_path: Path) -> None:
    """Already so since 1.3.0 (the windows in the canonical order of their keys); 1.5.0 keeps it: the subject's
    lines reversed, the baseline's rotated."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    as_written = outputs(run(spec(tmp_path / "a")))
    base = records("baseline")
    moved = outputs(run(spec(tmp_path / "b", records("subject")[::-1], baseline=base[7:] + base[:7])))
    sources = {name: out.pop("sources") for name, out in (("as written", as_written), ("moved", moved))}
    assert moved == as_written and moved["pairing"]["paired"] == 24
    assert sources["moved"]["subject"]["files"] != sources["as written"]["subject"]["files"]  # each its own digest


# ------------------------------------------------------------------------------------ a document on one side


def test_a_document_missing_on_one_side_is_the_items_paired_rule_recorded_in_dev(tmp_path: Path) -> None:
    subject = records("subject")[:-1]  # document 23 only in the baseline
    result = run(spec(tmp_path, subject))
    rule = recorded_rules(result)["items_paired"]
    assert rule["outcome"] == "warn" and rule["profile"] == "dev"
    assert rule["value"] == {"baseline_items": 24, "subject_items": 23, "paired": 23, "unmatched_baseline": 1,
                             "unmatched_subject": 0, "identity_mismatched": 0}
    assert rule["message"] == ("1 item(s) only in the baseline, 0 only in the subject, 0 with another input or target "
                               "digest (first only in the baseline: doc_id=23); the estimate covers the 23 item(s) "
                               "paired (profile dev lets it through; ci and release refuse)")
    assert "window_match_fraction" not in recorded_rules(result)  # items_paired is the pairing rule of exports
    assert any("1 item(s) only in the baseline" in line for line in result.warnings)
    out = outputs(result)
    assert out["pairing"]["unmatched_baseline"] == 1 and out["pairing"]["examples"]["unmatched_baseline"] == [[23]]
    stats = out["dataset"]["windows"]["stats"]
    assert stats["paired_windows"] == 23 and stats["window_match_fraction"] == 23 / 24
    base_ppl, subject_ppl, ratio = byte_ratio(records("baseline"), subject, set(range(23)))
    block = out["byte_perplexity"]
    assert block["baseline_final"] == pytest.approx(base_ppl, rel=1e-12)
    assert block["final"] == pytest.approx(subject_ppl, rel=1e-12)
    assert block["ratio_vs_baseline"] == pytest.approx(ratio, rel=1e-12)


@pytest.mark.parametrize("profile", ["ci", "release"])
def test_strict_profiles_refuse_an_unpaired_document_naming_the_numbers(tmp_path: Path, profile: str) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        with pytest.raises(ProfileAbort) as info:
            run(spec(tmp_path, records("subject")[1:], profile=profile), ledger=ledger)
        assert info.value.exit_code == 3 and ledger.run(info.value.run_id).status == "aborted"
    assert rules(info.value.decisions)["items_paired"]["outcome"] == "abort"
    message = str(info.value)
    assert "items_paired" in message
    assert ("0 item(s) only in the baseline" not in message
            and "1 only in the subject" not in message)  # document 0 is only in the baseline
    assert "1 item(s) only in the baseline, 0 only in the subject, 0 with another input or target digest " \
           "(first only in the baseline: doc_id=0); the estimate covers the 23 item(s) paired" in message
    floor = {"ci": 200, "release": 400}[profile]
    assert f"min_paired_windows: 23, required {floor}" in message  # the floor too, with its numbers


# ------------------------------------------------------------------------------- a document with other text


def test_a_document_whose_text_differs_is_not_paired_and_is_recorded_in_dev(tmp_path: Path) -> None:
    """The case 1.4.0 certified silently: document 5's text differs between the runs with the same byte count,
    so only the harness's digests tell; 1.4.0 paired it (its byte counts agree) and counted it in the ratio."""
    subject = edited_subject()
    result = run(spec(tmp_path, subject))
    rule = recorded_rules(result)["items_paired"]
    assert rule["outcome"] == "warn"
    assert rule["value"]["identity_mismatched"] == 1 and rule["value"]["paired"] == 23
    assert rule["message"].startswith("0 item(s) only in the baseline, 0 only in the subject, 1 with another input "
                                      f"or target digest (first with another identity digest: doc_id={EDITED})")
    out = outputs(result)
    assert out["pairing"]["identity_fields_mismatched"] == ["doc_hash", "prompt_hash", "target_hash"]
    assert out["pairing"]["examples"]["identity_mismatched"] == [[EDITED]]
    assert out["dataset"]["windows"]["stats"]["byte_count_mismatches"] == 0  # the bytes cannot tell
    _, _, ratio = byte_ratio(records("baseline"), subject, set(range(24)) - {EDITED})
    assert out["byte_perplexity"]["ratio_vs_baseline"] == pytest.approx(ratio, rel=1e-12)

    (tmp_path / "old").mkdir()
    old = outputs(run(spec(tmp_path / "old", subject, use="paired.ppl_ratio@1.4.0")))
    assert old["dataset"]["windows"]["stats"]["paired_windows"] == 24  # 1.4.0, frozen: paired by doc_id alone
    _, _, all_24 = byte_ratio(records("baseline"), subject, set(range(24)))
    assert old["byte_perplexity"]["ratio_vs_baseline"] == pytest.approx(all_24, rel=1e-12)


@pytest.mark.parametrize("field", ["doc_hash", "prompt_hash", "target_hash"])
def test_each_digest_alone_unpairs_a_document(tmp_path: Path, field: str) -> None:
    subject = records("subject")
    subject[3] = {**subject[3], field: "0" * 64}
    out = outputs(run(spec(tmp_path, subject)))
    assert out["pairing"]["identity_fields_mismatched"] == [field] and out["pairing"]["paired"] == 23


@pytest.mark.parametrize("profile", ["ci", "release"])
def test_strict_profiles_refuse_a_document_whose_text_differs(tmp_path: Path, profile: str) -> None:
    with pytest.raises(ProfileAbort, match=r"items_paired.*1 with another input or target digest") as info:
        run(spec(tmp_path, edited_subject(), profile=profile))
    assert rules(info.value.decisions)["items_paired"]["outcome"] == "abort"


# ----------------------------------------------------------------------------------------------- provenance


def test_the_certificate_records_what_each_export_states(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec(tmp_path, results=True), ledger=ledger)
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes
    sources = outputs(result)["sources"]
    for arm in ARMS:
        stated = json.loads(RESULTS[arm].read_text(encoding="utf-8"))
        source = sources[arm]
        assert source["tool"] == "lm-evaluation-harness" and source["tool_version"] == stated["lm_eval_version"]
        assert source["task"] == "certa_ppl" and source["task_version"] == str(stated["versions"]["certa_ppl"])
        models = {entry["field"]: entry["value"] for entry in source["models"]}
        assert json.loads(models["model_args"]) == stated["config"]["model_args"]  # a mapping, stated as JSON
        assert {entry["field"]: entry["value"] for entry in source["details"]}["task_hash"] == \
            stated["task_hashes"]["certa_ppl"]
        assert [entry["sha256"] for entry in source["files"]] == [
            hashlib.sha256(SAMPLES[arm].read_bytes()).hexdigest(), hashlib.sha256(RESULTS[arm].read_bytes()).hexdigest()]
    assert outputs(result)["pairing"]["key_fields"] == ["doc_id"]


def test_without_the_results_files_the_task_named_in_read_is_recorded(tmp_path: Path) -> None:
    """read.task without read.results makes only the provenance's task: 1.5.0 records it; 1.4.0, which records no
    provenance, refuses the option (it would have no effect)."""
    out = outputs(run(spec(tmp_path, read={"task": "certa_ppl"})))
    assert out["sources"]["baseline"]["task"] == "certa_ppl" and out["sources"]["baseline"]["tool_version"] is None
    with pytest.raises(SpecError, match=r"read\.task would have no effect"):
        load_plan(spec(tmp_path, read={"task": "certa_ppl"}, use="paired.ppl_ratio@1.4.0"))


# ----------------------------------------------------------------------- complete exports: 1.4.0's numbers


def test_complete_exports_give_the_numbers_of_1_4_0(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = run(spec(tmp_path / "new", results=True))
    old = run(spec(tmp_path / "old", results=True, use="paired.ppl_ratio@1.4.0"))
    assert new.certificate["content"]["knobs"]["stages"][0]["version"] == "1.5.0"
    a, b = outputs(new), outputs(old)
    assert a["byte_perplexity"] == b["byte_perplexity"] and a["dataset"] == b["dataset"]
    assert set(a) - set(b) == {"pairing", "sources"}


# --------------------------------------------------------------------------------------------------- refused


def test_one_export_on_both_sides_is_refused(tmp_path: Path) -> None:
    path = spec(tmp_path)
    document = json.loads(path.read_text(encoding="utf-8"))
    document["stages"][0]["with"]["subject"] = "baseline"
    del document["inputs"]["subject"]
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InputError, match="is both the baseline and the subject"):
        run(path)
    with pytest.raises(InputError, match="are the same records"):
        run(spec(tmp_path, records("baseline")))  # the baseline's bytes given as the subject too


def test_an_export_against_a_plain_table_is_refused(tmp_path: Path) -> None:
    path = spec(tmp_path)
    lines = records("subject")
    table = "doc_id,bytes,nll\n" + "".join(f"{line['doc_id']},{line['byte_perplexity'][1]},"
                                           f"{-float(line['filtered_resps'][0])!r}\n" for line in lines)
    (tmp_path / "subject.csv").write_text(table, encoding="utf-8")
    document = json.loads(path.read_text(encoding="utf-8"))
    document["inputs"]["subject"] = {"path": "subject.csv"}
    document["stages"][0]["with"]["unit"] = "bytes"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InputError, match=r"input 'baseline' is an lm-eval-samples export and input 'subject' a "
                                         r"table.*paired\.ppl_ratio@1\.4\.0"):
        run(path)


def test_an_export_pairs_by_its_own_key(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"pair by doc_id.*columns\.window_id is 'doc_hash'.*window_id: doc_id"):
        run(spec(tmp_path, knobs={"columns": {"window_id": "doc_hash", "tokens": "bytes", "nll_sum": "nll"}}))


# ------------------------------------------------------------------------------------------ report and show


def test_the_report_and_show_state_the_pairing_and_the_provenance(tmp_path: Path) -> None:
    out = outputs(run(spec(tmp_path, results=True)))
    shown = markdown_of("paired.ppl_ratio", "1.5.0")(out)
    assert "Paired documents 24 of 24 (baseline) and 24 (subject) by doc_id with equal identity digests" in shown
    assert "lm-evaluation-harness 0.4.13, task certa_ppl" in shown
    (tmp_path / "edited").mkdir()
    out = outputs(run(spec(tmp_path / "edited", edited_subject())))  # edited: the results files no longer fit
    shown = markdown_of("paired.ppl_ratio", "1.5.0")(out)
    assert "Paired documents 23 of 24 (baseline) and 24 (subject)" in shown
    assert "not paired: 1 with different identity digests" in shown
    section = presentation_of("paired.ppl_ratio").section(StageInput(STAGE, out))
    captions = [t.caption for t in section.tables]
    assert "Pairing of the items" in captions
    assert {"Provenance: baseline (as its export states it)", "Provenance: subject (as its export states it)"} <= \
        set(captions)
    texts = " ".join(how_to_read("paired.ppl_ratio", out))
    assert "document, prompt and target digests" in texts
    assert "1 item(s) with different identity digests were not paired" in texts


# ------------------------------------------------------------------------------ model.windows: window_id pairing


def test_model_windows_tables_still_pair_by_window_id_with_the_numbers_of_1_4_0(tiny_models: dict[str, Path],
                                                                                tmp_path: Path) -> None:
    """Tables made by model.windows are no export: 1.5.0 pairs them by window_id, with the window_match_fraction
    rule, records no pairing or sources block, and computes 1.4.0's numbers (the same stage id, so the same
    stream); both replay."""
    from tests.conftest import TINY_MODEL_TEXT

    documents = [d for d in TINY_MODEL_TEXT.split("\n\n") if d.strip()][:20]
    results = {}
    for use in ("paired.ppl_ratio", "paired.ppl_ratio@1.4.0"):
        folder = tmp_path / use
        for name in ("baseline", "subject"):
            shutil.copytree(tiny_models[name], folder / name)
        (folder / "text.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in documents),
                                           encoding="utf-8")
        (folder / "spec.yaml").write_text(
            "certa: 1\nname: windows\nseed: 5\ninputs:\n  base: {model: baseline}\n  subj: {model: subject}\n"
            "  text: {path: text.jsonl}\nstages:\n  - {id: w, use: model.windows, with: {baseline: base, subject: subj, "
            "text: text, column: body, seq_len: 32, stride: 24}}\n"
            f"  - {{id: ratio, use: {use}, with: {{baseline: w.baseline, subject: w.subject, unit: tokens, "
            "replicates: 400}}\n", encoding="utf-8")
        with Ledger.open(folder / "ledger.db") as ledger:
            results[use] = run(folder / "spec.yaml", ledger=ledger)
            assert replay(ledger, results[use].run_id).outcome == "REPRODUCED"
    new, old = results["paired.ppl_ratio"], results["paired.ppl_ratio@1.4.0"]
    assert new.certificate["content"]["knobs"]["stages"][1]["version"] == "1.5.0"
    ratio = new.certificate["content"]["stages"]["ratio"]
    assert "pairing" not in ratio and "sources" not in ratio
    assert ratio == old.certificate["content"]["stages"]["ratio"]
    assert ratio["dataset"]["windows"]["stats"]["window_match_fraction"] == 1.0
    rules_new = [d.decision.detail["rule"] for d in new.decisions
                 if d.stage == "ratio" and d.decision.kind == "profile_rule"]
    assert "window_match_fraction" in rules_new and "items_paired" not in rules_new


def test_a_gate_on_the_pairing_of_window_tables_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """``pairing`` and ``sources`` exist only for two exports: on window tables a gate on them would always FAIL
    with "metric not found", so it is refused when the spec is loaded, pointing to window_match_fraction."""
    text = ("certa: 1\nname: g\nseed: 1\ninputs:\n  baseline: {path: baseline.csv}\n  subject: {path: subject.csv}\n"
            "stages:\n  - {id: r, use: paired.ppl_ratio, with: {baseline: baseline, subject: subject}}\n"
            "gates:\n  - {id: g, metric: r.pairing.identity_mismatched, max: 0}\n")
    with pytest.raises(SpecError, match=r"no output 'pairing'.*only for two evaluator exports.*window_match_fraction"):
        load_plan(text)
    plan = load_plan(spec(tmp_path))  # on exports the same gate path is accepted
    assert plan.stages[0].version == "1.5.0"
    document = json.loads((tmp_path / "spec.yaml").read_text(encoding="utf-8"))
    document["gates"] = [{"id": "g", "metric": f"{STAGE}.sources.subject.tool", "equals": "lm-evaluation-harness"}]
    (tmp_path / "spec.yaml").write_text(json.dumps(document), encoding="utf-8")
    assert run(tmp_path / "spec.yaml").certificate["content"]["verdict"] == "PASS"
