"""Hostile and malformed exports: every one is an ``InputError`` naming the file, the line or member and the
field, never a traceback; nothing is dropped silently."""

from __future__ import annotations

import json
import os
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from certa.engine.core.evidence import (TableMapping, read_inspect_eval, read_inspect_json, read_lm_eval_samples,
                                  read_mapped_table, read_promptfoo_jsonl)
from certa.engine.foundation.errors import InputError
from certa.engine.core import input_limits as input_limits_module
from certa.engine.core.evidence import inspect_log as inspect_log_module
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from tests.core.evidence.zstd_zip import zstd_zip

HEX = "ab" * 32


def rolling_line(doc_id: int, loglik: str = "-120.5", **changes: object) -> dict:
    """A loglikelihood_rolling record as lm-eval 0.4 logs it (values as observed in the fixtures)."""
    value = float(loglik) if loglik.lstrip("-").replace(".", "").isdigit() else -1.0
    record = {"doc_id": doc_id, "doc": {"text": "some words"}, "target": "some words",
              "arguments": {"gen_args_0": {"arg_0": "some words", "arg_1": None}},
              "resps": [[loglik]], "filtered_resps": [loglik], "filter": "none",
              "metrics": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
              "word_perplexity": [value, 2], "byte_perplexity": [value, 10], "bits_per_byte": [value, 10],
              "doc_hash": HEX, "prompt_hash": HEX, "target_hash": HEX}
    record.update(changes)
    return record


def jsonl(*records: dict) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def inspect_sample(sample_id: object, epoch: int = 1, value: object = "C") -> dict:
    return {"id": sample_id, "epoch": epoch, "input": "What is 1 + 1?", "target": "2",
            "scores": {"match": {"value": value, "answer": "2"}}}


def inspect_log(*samples: dict) -> dict:
    return {"version": 2, "status": "success", "eval": {"task": "t", "model": "mockllm/model",
                                                         "packages": {"inspect_ai": "0.3.285"}},
            "samples": list(samples)}


def eval_archive(*samples: dict, **options: dict) -> bytes:
    members = {"header.json": json.dumps({k: v for k, v in inspect_log().items() if k != "samples"}).encode()}
    members |= {f"samples/{s['id']}_epoch_{s['epoch']}.json": json.dumps(s).encode() for s in samples}
    return zstd_zip(members, **options)


def raises(match: str, read, *args, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as caught:
        read(*args, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("record, message", [
    (rolling_line(0, "nan"), r"line 1: field 'filtered_resps' .* must be a number written as text \(got 'nan'\)"),
    (rolling_line(0, "1e999"), r"line 1: field 'filtered_resps' .* is '1e999', not finite"),
    (rolling_line(0, "5.5"), r"line 1: field 'filtered_resps' holds the log-likelihood 5.5, above 0 \(a probability "
                             r"above 1\), which no model computes \(1 such record"),
    (rolling_line(0, "-1_0"), r"line 1: .*got '-1_0'"),
    (rolling_line(0, filtered_resps=[-3.5]), r"line 1: .*must be a number written as text \(got -3.5\)"),
    (rolling_line(0, doc_hash="xyz"), r"line 1: field 'doc_hash' must be a hex SHA-256"),
    (rolling_line(0, doc_hash="\ud800" * 64), r"line 1: field 'doc_hash' must be a hex SHA-256 .*got '\\ud800"),
    ({k: v for k, v in rolling_line(0).items() if k != "prompt_hash"}, r"line 1: field 'prompt_hash' is missing"),
    ({**rolling_line(0), "doc_id": True}, r"line 1: field 'doc_id' must be int \(got True\)"),
    ({**rolling_line(0), "doc_id": -1}, r"line 1: field 'doc_id' must be ≥ 0"),
    ({**rolling_line(0), "doc_id": 2**63}, r"line 1: field 'doc_id' must be ≥ 0 and < 2\^63 \(got 9223372036854775808\)"),
    (rolling_line(0, metrics=["acc"], acc=10**400), r"line 1: metric 'acc' must be a finite number \(got 1000"),
    (rolling_line(0, byte_perplexity=[-120.5, 2**64]), r"line 1: metric 'byte_perplexity' must be \[loglikelihood"),
    (rolling_line(0, byte_perplexity=[-120.5, 0]), r"line 1: metric 'byte_perplexity' must be \[loglikelihood"),
    (rolling_line(0, bits_per_byte=[-99.0, 10]), r"line 1: metric 'bits_per_byte' logs loglikelihood -99.0"),
    (rolling_line(0, bits_per_byte=[-120.5, 11]), r"line 1: metric 'bits_per_byte' logs another bytes count"),
])
def test_malformed_lm_eval_records_name_line_and_field(record: dict, message: str) -> None:
    raises(message, read_lm_eval_samples, jsonl(record), name="samples_x.jsonl")


def test_lm_eval_json_errors_name_the_line() -> None:
    good = json.dumps(rolling_line(0)).encode()
    raises(r"samples\.jsonl, line 2: not a JSON object", read_lm_eval_samples, good + b"\n{bad\n", name="samples.jsonl")
    raises(r"line 2: not a JSON object .*NaN is not a JSON number", read_lm_eval_samples,
           good + b'\n{"doc_id": NaN}\n', name="s")
    raises(r"line 1: a JSON list where a JSON object", read_lm_eval_samples, b"[1, 2]\n", name="s")
    raises(r"line 3: not UTF-8 text", read_lm_eval_samples, good + b"\n" + good + b"\n\xff\xfe\n", name="s")
    raises(r"line 1: not a JSON object \(nested too deeply to read\)", read_lm_eval_samples,
           b"[" * 100_000 + b"]" * 100_000 + b"\n", name="s")
    raises(r"line 1: not a JSON object", read_lm_eval_samples, b"[" * 100_000 + b"\n", name="s")
    raises(r"line 1: not a JSON object \(Exceeds the limit", read_lm_eval_samples,
           b'{"doc_id": ' + b"9" * 5000 + b"}\n", name="s")
    raises(r"s: no records", read_lm_eval_samples, b"\n\n", name="s")


def test_duplicate_doc_ids_name_both_lines() -> None:
    message = raises(r"line 3: item doc_id=0 occurs twice \(first at line 1\)", read_lm_eval_samples,
                     jsonl(rolling_line(0), rolling_line(1), rolling_line(0)), name="s")
    assert message.startswith("s: ")


def test_metric_lists_must_agree_and_corpus_metrics_are_refused() -> None:
    mc = {**rolling_line(0), "metrics": ["acc"], "acc": 1.0}
    raises(r"line 2: field 'metrics' is \['acc_norm'\], not \['acc'\]", read_lm_eval_samples,
           jsonl(mc, {**mc, "doc_id": 1, "metrics": ["acc_norm"], "acc_norm": 0.0}), name="s")
    raises(r"line 1: metric 'bleu' must be a finite number \(got \['a', 'b'\]\)", read_lm_eval_samples,
           jsonl({**mc, "metrics": ["bleu"], "bleu": ["a", "b"]}), name="s")
    raises(r"line 1: metric 'acc' must be a finite number \(got None\)", read_lm_eval_samples,
           jsonl({**mc, "acc": None}), name="s")


def test_several_filters_need_a_choice_and_the_choice_is_recorded() -> None:
    mc = {**rolling_line(0), "metrics": ["exact_match"], "exact_match": 1.0}
    data = jsonl(mc, {**mc, "filter": "strict", "exact_match": 0.0})
    raises(r"records of 2 filters \(none, strict\); name the one", read_lm_eval_samples, data, name="s")
    records = read_lm_eval_samples(data, name="s", filter_name="strict")
    assert records.metrics["exact_match"].tolist() == [0.0]
    assert ("filter", "strict") in records.provenance.details
    raises(r"no records of filter 'flexible'", read_lm_eval_samples, data, name="s", filter_name="flexible")


def test_word_counts_on_request() -> None:
    records = read_lm_eval_samples(jsonl(rolling_line(0), rolling_line(1, "-7.25")), name="s", count_unit="words")
    assert records.weights.tolist() == [2.0, 2.0]
    assert records.metrics["nll"].tolist() == [120.5, 7.25]
    raises(r"count_unit must be 'bytes' or 'words'", read_lm_eval_samples, jsonl(rolling_line(0)), count_unit="tokens")


def test_files_over_the_limits_are_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "samples_t_2026-01-01T00-00-00.000.jsonl"
    path.write_bytes(jsonl(rolling_line(0), rolling_line(1)))
    raises(r"the file size in bytes is .* over the limit bytes=100", read_lm_eval_samples, path,
           limits=InputLimits(bytes=100))
    raises(r"the number of records is 2, over the limit rows=1", read_lm_eval_samples, path,
           limits=InputLimits(rows=1))
    raises(r"line 1: the line's length in bytes is .* over the limit cell_bytes=50", read_lm_eval_samples, path,
           limits=InputLimits(cell_bytes=50))
    raises(r"is a folder", read_lm_eval_samples, tmp_path)
    raises(r"cannot read", read_lm_eval_samples, tmp_path / "absent.jsonl")


def test_results_file_must_describe_the_samples_task(tmp_path: Path) -> None:
    samples = jsonl(rolling_line(0))
    results = tmp_path / "results.json"
    results.write_text("{")
    raises(r"results\.json: not a JSON document", read_lm_eval_samples, samples, results, task="t")
    results.write_text(json.dumps({"configs": {"other": {}}}))
    raises(r"results\.json: no configuration of task 't'", read_lm_eval_samples, samples, results, task="t")
    results.write_text(json.dumps({"configs": {}}))
    raises(r"field 'configs' .* is missing or empty", read_lm_eval_samples, samples, results, task="t")


@pytest.mark.parametrize("value, expected", [("C", 1.0), ("I", 0.0), ("P", 0.5), ("N", 0.0), ("yes", 1.0),
                                             ("FALSE", 0.0), ("0.25", 0.25), (True, 1.0), (3, 3.0), (0.75, 0.75)])
def test_score_values_follow_inspect(value: object, expected: float) -> None:
    records = read_inspect_json(json.dumps(inspect_log(inspect_sample("a", value=value))).encode(), name="log.json")
    assert records.metrics["match"].tolist() == [expected]


@pytest.mark.parametrize("value", ["c", "maybe", "nan", "inf", [1, 0], None, 10**400])
def test_unreadable_score_values_are_refused_where_inspect_scores_zero(value: object) -> None:
    raises(r"log\.json, samples\[0\]: scores\.match\.value is .*, not a number", read_inspect_json,
           json.dumps(inspect_log(inspect_sample("a", value=value))).encode(), name="log.json")


def test_malformed_inspect_samples_name_the_sample() -> None:
    def log(*samples: dict) -> bytes:
        return json.dumps(inspect_log(*samples)).encode()

    raises(r"samples\[1\]: item id='a', epoch=1 occurs twice \(first at samples\[0\]\)", read_inspect_json,
           log(inspect_sample("a"), inspect_sample("a")), name="log.json")
    failed = {**inspect_sample("b"), "scores": None, "error": {"message": "boom"}}
    raises(r"samples\[1\]: field 'scores' is missing or empty \(the sample failed", read_inspect_json,
           log(inspect_sample("a"), failed), name="log.json")
    raises(r"samples\[0\]: field 'epoch' must be an integer from 1 to 2\^63", read_inspect_json, log(inspect_sample("a", epoch=0)),
           name="log.json")
    raises(r"samples\[0\]: field 'id' must be int or str \(got 1.5\)", read_inspect_json,
           log(inspect_sample(1.5)), name="log.json")
    extra = inspect_sample("b")
    extra["scores"]["other"] = {"value": 1}
    raises(r"samples\[1\]: scores \['match', 'other'\], not \['match'\]", read_inspect_json,
           log(inspect_sample("a"), extra), name="log.json")
    raises(r"the log holds no samples", read_inspect_json, log(), name="log.json")
    raises(r"log\.json: not a JSON document \(NaN is not a JSON number", read_inspect_json,
           log(inspect_sample("a", value=0.5)).replace(b"0.5", b"NaN"), name="log.json")
    raises(r"log\.json: not a JSON document \(nested too deeply", read_inspect_json, b"[" * 100_000, name="log.json")
    raises(r"field 'samples' is missing", read_inspect_json, b'{"eval": {}}', name="log.json")
    deep = inspect_sample("a")
    deep["input"] = json.loads("[" * 90 + "]" * 90)
    raises(r"samples\[0\]: field 'input': .*nested more than 75 levels", read_inspect_json, log(deep), name="log.json")


def test_damaged_eval_archives_name_the_member() -> None:
    sample = inspect_sample("a")
    member = "samples/a_epoch_1.json"
    raises(r"x\.eval: not an Inspect \.eval archive", read_inspect_eval, b"PK\x03\x04 not a zip", name="x.eval")
    raises(r"member 'header\.json' is missing", read_inspect_eval, zstd_zip({member: b"{}"}), name="x.eval")
    raises(rf"member {member}: not valid zstd data", read_inspect_eval,
           eval_archive(sample, payloads={member: b"\x28\xb5\x2f\xfd garbage"}), name="x.eval")
    raises(rf"member {member}: decompresses to more than its declared 10 bytes", read_inspect_eval,
           eval_archive(sample, declared_sizes={member: 10}), name="x.eval")
    raises(r"x\.eval: the declared size in bytes of the samples is 4,294,967,295, over the limit bytes",
           read_inspect_eval, eval_archive(sample, declared_sizes={member: 0xFFFF_FFFF}), name="x.eval")
    raises(r"member header\.json: the member's declared size in bytes is 4,294,967,295, over the limit text_bytes",
           read_inspect_eval, eval_archive(sample, declared_sizes={"header.json": 0xFFFF_FFFF}), name="x.eval")
    bomb = zstd_zip({"header.json": b"{}", member: b" " * 50_000_000})
    raises(rf"member {member}: the member's declared size in bytes is 50,000,000, over the limit text_bytes=1,000,000",
           read_inspect_eval, bomb, name="x.eval", limits=InputLimits(text_bytes=1_000_000))
    raises(r"the declared size in bytes of the samples is 50,000,000, over the limit bytes=40,000,000",
           read_inspect_eval, bomb, name="x.eval", limits=InputLimits(bytes=40_000_000))
    raises(rf"member {member}: not a JSON document", read_inspect_eval,
           zstd_zip({"header.json": b"{}", member: b"{"}), name="x.eval")
    raises(rf"member {member}: not a JSON document \(Infinity is not a JSON number", read_inspect_eval,
           zstd_zip({"header.json": b"{}", member: b'{"id": "a", "epoch": Infinity}'}), name="x.eval")


def test_deflated_members_are_read_too() -> None:
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"task": "t"}}))
        archive.writestr("samples/a_epoch_1.json", json.dumps(inspect_sample("a")))
    assert read_inspect_eval(buffer.getvalue(), name="x.eval").metrics["match"].tolist() == [1.0]


def promptfoo_line(test: int, provider: str = "echo", score: float = 1.0, **changes: object) -> dict:
    """A promptfoo result, hand-built after promptfoo's ``EvaluateResult`` as ``--output x.jsonl`` writes it (the
    fixtures hold no real promptfoo run)."""
    record = {"evalId": "eval-1", "promptIdx": 0, "testIdx": test, "testCase": {"vars": {"q": f"q{test}"}},
              "prompt": {"raw": "Answer {{q}}", "label": "p"}, "provider": {"id": provider, "label": provider},
              "success": score == 1.0, "score": score, "namedScores": {"exact": score}}
    record.update(changes)
    return record


@pytest.mark.parametrize("field", ["testIdx", "promptIdx"])
def test_promptfoo_indices_beyond_int64_are_refused(field: str) -> None:
    raises(rf"line 1: field '{field}' must be ≥ 0 and < 2\^63 \(got {2**63}\)", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0, **{field: 2**63})), name="r.jsonl")


def test_promptfoo_providers_are_never_mixed() -> None:
    data = jsonl(promptfoo_line(0), promptfoo_line(0, "other", 0.0))
    raises(r"results of 2 providers \(id 'echo' label 'echo', id 'other' label 'other'\); select one with "
           r"read\.provider", read_promptfoo_jsonl, data, name="r.jsonl")
    other = read_promptfoo_jsonl(data, provider="other", name="r.jsonl")
    assert other.metrics["score"].tolist() == [0.0] and other.metrics["success"].tolist() == [0.0]
    assert other.metrics["named.exact"].tolist() == [0.0]
    raises(r"no results of provider 'third'", read_promptfoo_jsonl, data, provider="third", name="r.jsonl")
    raises(r"line 2: item testIdx=0, promptIdx=0 occurs twice", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0), promptfoo_line(0)), name="r.jsonl")
    raises(r"line 1: field 'score' must be int or float \(got None\)", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0, score=None, namedScores={})), name="r.jsonl")
    raises(r"line 1: namedScores\.exact must be a finite number", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0, namedScores={"exact": "high"})), name="r.jsonl")
    raises(r"line 1: field 'success' must be bool", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0, success=1)), name="r.jsonl")


def test_promptfoo_keys_across_providers_only_where_every_result_states_a_unique_label() -> None:
    """A result without a prompt label (or with one that is empty or not text), or a test repeated under one
    label, leaves the file without a key across providers: it then pairs by its columns only; nothing is guessed."""
    good = read_promptfoo_jsonl(jsonl(promptfoo_line(0), promptfoo_line(1)), name="r.jsonl")
    assert good.keys_across_models["prompt.label"].tolist() == ["p", "p"]
    for prompt in ({"raw": "Answer q1"}, {"raw": "Answer q1", "label": 7}, {"raw": "Answer q1", "label": ""}):
        records = read_promptfoo_jsonl(jsonl(promptfoo_line(0), promptfoo_line(1, prompt=prompt)), name="r.jsonl")
        assert dict(records.keys_across_models) == {} and records.n_items == 2
    raises(r"line 2: field 'prompt' must be object \(got 'text'\)", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0), promptfoo_line(1, prompt="text")), name="r.jsonl")
    repeated = read_promptfoo_jsonl(jsonl(promptfoo_line(0), promptfoo_line(0, promptIdx=1)), name="r.jsonl")
    assert repeated.n_items == 2 and dict(repeated.keys_across_models) == {}


def promptfoo_of(test: int, provider: object, **changes: object) -> dict:
    """``promptfoo_line`` with ``provider`` as the result's whole ``provider`` field."""
    return {**promptfoo_line(test, **changes), "provider": provider}


def test_promptfoo_selection_is_never_a_guess() -> None:
    """A value that is one provider's label and another's id names both; an empty label is no label."""
    crossed = jsonl(promptfoo_of(0, {"id": "x", "label": "y"}), promptfoo_of(0, {"id": "y"}, promptIdx=1))
    raises(r"read\.provider 'y' names 2 providers \(id 'x' label 'y', id 'y' \(no label\)\)", read_promptfoo_jsonl,
           crossed, provider="y", name="r.jsonl")
    assert dict(read_promptfoo_jsonl(crossed, provider="x", name="r.jsonl").provenance.models) == {
        "provider.id": "x", "provider.label": "y"}
    unlabelled = jsonl(promptfoo_of(0, {"id": "z", "label": ""}))
    assert dict(read_promptfoo_jsonl(unlabelled, name="r.jsonl").provenance.models) == {
        "provider.id": "z", "provider.label": "z"}
    raises(r"line 1: provider: field 'id' must be str \(got 3\)", read_promptfoo_jsonl,
           jsonl(promptfoo_of(0, {"id": 3})), name="r.jsonl")


def test_a_promptfoo_prompt_that_is_not_utf8_text_is_one_error() -> None:
    """``prompt.raw`` with a lone surrogate (a JSON escape with no pair): its digest is of its UTF-8 bytes, which it
    has none of (a ``UnicodeEncodeError``, an internal error, before)."""
    raises(r"line 2: prompt: field 'raw' 'Q\\udfff' holds a lone surrogate", read_promptfoo_jsonl,
           jsonl(promptfoo_line(0), promptfoo_line(1, prompt={"raw": "Q\udfff", "label": "p"})), name="r.jsonl")


def test_mapped_tables_refuse_duplicates_gaps_and_negative_weights() -> None:
    mapping = TableMapping(item_id="id", metrics=("acc",), weight="w")
    raises(r"input 't': row 3: item id='a' occurs twice \(first at row 1\)", read_mapped_table,
           b"id,acc,w\na,1,1\nb,0,1\na,1,1\n", mapping, fmt="csv", name="t")
    raises(r"column 'acc', row 2: value 'nan' is missing or not finite", read_mapped_table,
           b"id,acc,w\na,1,1\nb,nan,1\n", mapping, fmt="csv", name="t")
    raises(r"column 'w', row 1: weight -1.0 is negative", read_mapped_table,
           b"id,acc,w\na,1,-1\n", mapping, fmt="csv", name="t")
    raises(r"has no column 'w'", read_mapped_table, b"id,acc\na,1\n", mapping, fmt="csv", name="t")
    raises(r"needs its format", read_mapped_table, b"id,acc\na,1\n", mapping)
    with pytest.raises(InputError, match=r"names column\(s\) id more than once"):
        TableMapping(item_id="id", metrics=("id",))


def test_other_metrics_beside_perplexity_are_kept() -> None:
    line = rolling_line(0, metrics=["word_perplexity", "byte_perplexity", "bits_per_byte", "extra"], extra=0.5)
    records = read_lm_eval_samples(jsonl(line), name="s")
    assert sorted(records.metrics) == ["extra", "nll"] and records.metrics["extra"].tolist() == [0.5]


def test_inspect_sample_ids_of_any_characters_are_all_read() -> None:
    """An id with '/' makes a deeper member (samples/a/b_epoch_1.json): such samples were silently left out (40 of a
    log read as 20). Every sample member is read, whatever its id."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),  # NUL: the
                            min_size=1, max_size=12),  # ZIP writer cuts a member's name there, no tool writes one
                    min_size=1, max_size=6, unique=True))
    def every_id(ids: list[str]) -> None:
        samples = [inspect_sample(i) for i in ids]
        try:
            raw = eval_archive(*samples)
        except (ValueError, UnicodeEncodeError):  # a name the ZIP writer itself refuses
            return
        records = read_inspect_eval(raw, name="log.eval")
        assert sorted(records.keys["id"].tolist()) == sorted(ids)

    every_id()
    records = read_inspect_eval(eval_archive(inspect_sample("a/b"), inspect_sample("c")), name="log.eval")
    assert sorted(records.keys["id"].tolist()) == ["a/b", "c"]


def test_two_inspect_scorers_never_merge_into_one_metric() -> None:
    """Scorer 'a' with value {"b": ...} and a scorer named 'a.b' both named metric 'a.b', mixed per sample."""
    sample = {**inspect_sample("x"), "scores": {"a": {"value": {"b": 1}}, "a.b": {"value": 0}}}
    raises(r"scores.a.b.value and another scorer's value are both metric 'a.b'", read_inspect_json,
           json.dumps(inspect_log(sample)).encode(), name="log.json")


@pytest.mark.parametrize("sample, message", [
    (inspect_sample("x", epoch=2 ** 63), r"field 'epoch' must be an integer from 1 to 2\^63 − 1 \(got 9223372036854775808\)"),
    (inspect_sample("\ud800"), r"field 'id' .* holds a lone surrogate"),
])
def test_inspect_keys_beyond_what_a_certificate_can_hold_are_one_error(sample: dict, message: str) -> None:
    raises(message, read_inspect_json, json.dumps(inspect_log(sample)).encode(), name="log.json")


def test_an_inspect_log_missing_a_completed_sample_is_refused() -> None:
    log = {**inspect_log(inspect_sample("x"), inspect_sample("y")), "results": {"completed_samples": 3}}
    raises(r"the log's results say 3 samples were completed \(results.completed_samples\), but it holds 2",
           read_inspect_json, json.dumps(log).encode(), name="log.json")


def test_a_re_logged_inspect_sample_is_read_as_inspect_reads_it_and_said() -> None:
    """A sample logged again (a retry) is a second member of the same name: Inspect reads the last. certa refused
    the log; it reads the last too and records how many members were superseded."""
    header = json.dumps({k: v for k, v in inspect_log().items() if k != "samples"}).encode()
    first, retried = inspect_sample("x", value="I"), inspect_sample("x", value="C")
    raw = zstd_zip([("header.json", header), ("samples/x_epoch_1.json", json.dumps(first).encode()),
                    ("samples/y_epoch_1.json", json.dumps(inspect_sample("y")).encode()),
                    ("samples/x_epoch_1.json", json.dumps(retried).encode())])
    records = read_inspect_eval(raw, name="log.eval")
    assert records.keys["id"].tolist() == ["x", "y"] and records.metrics["match"].tolist() == [1.0, 1.0]
    assert ("superseded_members", "1") in records.provenance.details
    plain = read_inspect_eval(eval_archive(inspect_sample("x"), inspect_sample("y")), name="log.eval")
    assert all(key != "superseded_members" for key, _ in plain.provenance.details)


@pytest.mark.parametrize("limit", ["bytes", "text_bytes"])
def test_an_eval_log_is_refused_from_its_directory_before_any_member_is_decompressed(
        limit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    padded = [{**inspect_sample(f"s{i}"), "metadata": {"pad": " " * size}} for i, size in ((1, 40_000), (2, 70_000),
                                                                                           (3, 40_000))]
    sizes = [len(json.dumps(sample).encode()) for sample in padded]
    archive = eval_archive(*padded)
    decompressed: list[int] = []
    unpack = inspect_log_module._MemberReader._zstd_member  # every member's decompression, in one call or streamed
    monkeypatch.setattr(inspect_log_module._MemberReader, "_zstd_member",
                        lambda *args: decompressed.append(1) or unpack(*args))
    assert read_inspect_eval(archive, name="x.eval").n_items == 3 and len(decompressed) == 4  # the header too
    decompressed.clear()
    if limit == "bytes":  # the samples' total (never held together) is bounded as a file is
        refused = f"x.eval: the declared size in bytes of the samples is {sum(sizes):,}, over the limit bytes=100,000"
    else:  # each member, held whole while it is read
        refused = (f"x.eval, member samples/s2_epoch_1.json: the member's declared size in bytes is {sizes[1]:,}, "
                   "over the limit text_bytes=60,000")
    message = raises("over the limit", read_inspect_eval, archive, name="x.eval",
                     limits=InputLimits(**{limit: 100_000 if limit == "bytes" else 60_000}))
    assert message.startswith(refused)
    assert decompressed == []


def test_an_export_over_bytes_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "samples_t_2026-01-01T00-00-00.jsonl"
    path.write_bytes(jsonl(*(rolling_line(i) for i in range(20))))
    opened: list[str] = []
    monkeypatch.setattr(input_limits_module.os, "open", lambda *args: opened.append(args[0]) or os.open(*args))
    raises(r"the file size in bytes is [0-9,]+, over the limit bytes=1,000", read_lm_eval_samples, path,
           limits=InputLimits(bytes=1_000))
    assert opened == []


def test_text_bytes_bounds_only_the_reference_reader() -> None:
    """An export the fast reader reads is bounded by ``bytes``; one it declines (a lone surrogate escape in a field
    certa does not read: only json reads it) is read through json, whose objects ``text_bytes`` bounds."""
    export = jsonl(*(rolling_line(i) for i in range(20)))
    limits = InputLimits(text_bytes=len(export) - 1)
    assert read_lm_eval_samples(export, limits=limits).n_items == 20
    assert read_input("s", export, "lm-eval-samples", limits=limits).evidence.n_items == 20  # type: ignore[union-attr]
    declined = jsonl(*(rolling_line(i, doc={"text": "\ud800"}) for i in range(20)))
    assert read_lm_eval_samples(declined, limits=InputLimits()).n_items == 20
    raises(r"the size in bytes of JSON Lines read record by record through json .* over the limit text_bytes",
           read_lm_eval_samples, declined, limits=InputLimits(text_bytes=len(declined) - 1))
