"""Inspect logs (and lm-eval results files) are read without building the fields certa does not read (issue 31,
item 5), and what certa reads does not change: a sample's other fields (its transcript) never change the records, what ``json`` refuses
anywhere in a member is refused in ``json``'s words, the fields certa parses are bounded by ``cell_bytes`` before
they are parsed, and a member is refused at the byte that passes its declared size. The memory itself is
measured in ``tests/adversarial/test_export_memory.py`` and ``bench/hostile_inputs.py``."""

from __future__ import annotations

import json
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from certa.engine.core.evidence import EvidenceRecords, read_inspect_eval, read_inspect_json, read_lm_eval_samples
from certa.engine.core.evidence import sources
from certa.engine.core.evidence.sources import JsonObject, json_document, require_utf8
from certa.engine.core.input_limits import InputLimits
from certa.engine.foundation.errors import InputError
from tests.core.evidence.zstd_zip import zstd_zip

HEADER = {"version": 2, "status": "success", "eval": {"task": "t", "model": "mockllm/model",
                                                       "packages": {"inspect_ai": "0.3.285"}}}


def sample(sample_id: object = "a", **changes: object) -> dict[str, Any]:
    return {"id": sample_id, "epoch": 1, "input": "What is 1 + 1?", "target": "2",
            "scores": {"match": {"value": "C", "answer": "2"}}, "metadata": {"kind": "sum"}, **changes}


def json_log(*members: bytes) -> bytes:
    """The JSON form of a log whose samples are the JSON texts ``members``."""
    return json.dumps(HEADER)[:-1].encode() + b', "samples": [' + b", ".join(members) + b"]}"


def eval_log(*members: bytes) -> bytes:
    return zstd_zip({"header.json": json.dumps(HEADER).encode(),
                     **{f"samples/s{index}_epoch_1.json": member for index, member in enumerate(members)}})


def outcome(read: Any, raw: bytes, **options: Any) -> tuple[Any, ...] | str:
    """The records as plain values (the provenance without the file's digest), or the ``InputError``'s message."""
    try:
        records: EvidenceRecords = read(raw, name="log", **options)
    except InputError as error:
        return str(error)
    groups = (records.keys, records.metrics, records.identity)
    plain = tuple({name: [(type(v), v) for v in values.tolist()] for name, values in group.items()}
                  for group in groups)
    slices = None if records.slices is None else records.slices.tolist()
    return (*plain, slices, records.provenance.as_dict() | {"files": None})


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8) | st.sampled_from(["\ud800", "\udfff x", "é", "\U0001f600", "\\", '"']),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12)
"""JSON values, lone surrogates included (``json`` writes them as escapes, which msgspec refuses and ``json``
reads)."""


@pytest.mark.slow  # about 2.5 s
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(extra=st.dictionaries(st.sampled_from(["messages", "events", "output", "store", "attachments", "error",
                                              "model_usage", "x"]), JSON_VALUES, max_size=4),
       metadata=st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=3),
       ensure_ascii=st.booleans(), form=st.sampled_from(["eval", "json"]), sliced=st.booleans())
def test_the_other_fields_of_a_sample_never_change_what_is_read(extra: dict, metadata: dict, ensure_ascii: bool,
                                                               form: str, sliced: bool) -> None:
    """A sample with other fields (any JSON) reads as the sample without them; where ``json`` refuses the member
    (text that is not UTF-8: a lone surrogate written unescaped), the error is ``json``'s."""
    read = read_inspect_eval if form == "eval" else read_inspect_json
    build = eval_log if form == "eval" else json_log
    kept = sample(metadata={**metadata, "kind": "sum"})
    full = json.dumps({**extra, **kept} | {key: value for key, value in extra.items() if key not in kept},
                      ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    minimal = json.dumps({key: kept[key] for key in ("id", "epoch", "input", "target", "scores")}
                         | ({"metadata": {"kind": "sum"}} if sliced else {})).encode()
    options = {"slice_metadata": "kind"} if sliced else {}
    try:  # the reference: json reading the member (the whole log, in JSON form)
        if form == "eval":
            json_document("log, member samples/s0_epoch_1.json", full)
        else:
            json_document("log", build(full))
    except InputError as error:
        assert outcome(read, build(full), **options) == str(error)
        return
    assert outcome(read, build(full), **options) == outcome(read, build(minimal), **options)


@pytest.mark.parametrize("text, kind", [(b"[1, {}]", "list"), (b' "a"', "str"), (b"1", "int"), (b"-1.5", "float"),
                                        (b"2e3", "float"), (b"true", "bool"), (b"\nnull ", "NoneType")])
def test_a_document_that_is_not_an_object_is_named_as_json_names_it(text: bytes, kind: str) -> None:
    with pytest.raises(InputError) as reference:
        json_document("d", text)
    with pytest.raises(InputError) as ours:
        JsonObject.document("d", text)
    assert str(ours.value) == str(reference.value) == f"d: a JSON {kind} where a JSON object was expected"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from([b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xff", b"\xc3",
                                       b"\xed\xa0\x80", b"\xe2\x82", b"\x80"]), max_size=30),
       block=st.integers(1, 9))
def test_utf8_is_checked_a_block_at_a_time_as_a_whole_decode_checks_it(parts: list[bytes], block: int) -> None:
    """Blocks of any size, characters cut at a block's end: the same verdict and the same message (position
    counted from the start) as decoding the whole text."""
    text = b"".join(parts)
    try:
        text.decode("utf-8")
        expected = None
    except UnicodeDecodeError as error:
        expected = f"t: not a JSON document ({error})"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "_UTF8_BLOCK", block)
        try:
            require_utf8("t", text)
            got = None
        except InputError as error:
            got = str(error)
    assert got == expected


def test_a_document_only_json_reads_is_read_by_json_up_to_the_reference_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone surrogate escape in a transcript: msgspec refuses it, ``json`` reads it; a member up to
    ``REFERENCE_BYTES`` is read as ``json`` reads it (as before), a larger one refused in msgspec's words, so that
    no damaged member costs ``json``'s Python objects beyond that size."""
    member = json.dumps(sample(events=["\ud800"])).encode()
    records = read_inspect_eval(eval_log(member), name="log")
    assert records.keys["id"].tolist() == ["a"]
    assert outcome(read_inspect_eval, eval_log(member)) == outcome(read_inspect_eval,
                                                                   eval_log(json.dumps(sample()).encode()))
    monkeypatch.setattr(sources, "REFERENCE_BYTES", len(member) - 1)
    with pytest.raises(InputError, match=r"^log, member samples/s0_epoch_1\.json: not a JSON document \((JSON is "
                                         r"malformed: .* \(byte \d+\)|Input data was truncated)\)$"):
        read_inspect_eval(eval_log(member), name="log")
    lone_id = json.dumps(sample("\ud800")).encode()  # still json's reading where it decides: the id is refused
    monkeypatch.setattr(sources, "REFERENCE_BYTES", 1 << 20)
    with pytest.raises(InputError, match="holds a lone surrogate"):
        read_inspect_eval(eval_log(lone_id), name="log")


@pytest.mark.parametrize("form", ["eval", "json"])
def test_the_fields_certa_parses_are_bounded_by_cell_bytes_before_they_are_parsed(form: str) -> None:
    read, build = (read_inspect_eval, eval_log) if form == "eval" else (read_inspect_json, json_log)
    limits = InputLimits(cell_bytes=2000)
    transcript = json.dumps(sample(events=[{}] * 5000)).encode()  # 20 KB of transcript, not parsed: read
    assert read(build(transcript), name="log", limits=limits).n_items == 1
    big_input = json.dumps(sample(input=[{"role": "user", "content": "x" * 2500}])).encode()
    where = "member samples/s0_epoch_1.json" if form == "eval" else r"samples\[0\]"
    with pytest.raises(InputError, match=rf"^log, {where}: the JSON text of the sample's fields certa reads \(id, "
                                         r"epoch, input, target, scores, and the slice's metadata key or the error\) "
                                         r"in bytes is 2,\d{3}, over the limit cell_bytes=2,000; if the input is "
                                         r"genuine, raise it with CERTA_INPUT_LIMITS=cell_bytes=2\d{3}$"):
        read(build(big_input), name="log", limits=limits)
    big_slice = json.dumps(sample(metadata={"kind": "x" * 2500, "other": "y" * 2500})).encode()
    assert read(build(big_slice), name="log", limits=limits).n_items == 1  # the metadata is not read
    with pytest.raises(InputError, match="over the limit cell_bytes=2,000"):  # its key is, with read.slice
        read(build(big_slice), name="log", limits=limits, slice_metadata="kind")
    header = {**HEADER, "plan": {"steps": ["x" * 2500]}}
    raw = (zstd_zip({"header.json": json.dumps(header).encode(), "samples/a_epoch_1.json": transcript})
           if form == "eval" else json.dumps({**header, "samples": [json.loads(transcript)]}).encode())
    at = "log, member header.json" if form == "eval" else "log"
    with pytest.raises(InputError, match=rf"^{at}: the JSON text of the log's fields eval, plan, results, status "
                                         r"in bytes is 2,\d{3}, over the limit cell_bytes=2,000"):
        read(raw, name="log", limits=limits)


def test_a_slice_key_named_as_a_sample_field_is_the_metadata_s() -> None:
    member = json.dumps(sample(metadata={"id": "from-metadata", "epoch": 7})).encode()
    for key, expected in (("id", "from-metadata"), ("epoch", "7")):
        records = read_inspect_eval(eval_log(member), name="log", slice_metadata=key)
        assert records.slices.tolist() == [expected] and records.keys["id"].tolist() == ["a"]
    for metadata in ("[1]", '"text"', "{}"):  # not an object, or without the key: missing
        text = json.dumps(sample()).replace('{"kind": "sum"}', metadata).encode()
        with pytest.raises(InputError, match=r"metadata\.kind \(the slice, read\.slice\) is missing"):
            read_inspect_eval(eval_log(text), name="log", slice_metadata="kind")


def test_a_key_written_twice_counts_its_last_value_as_json_reads_it() -> None:
    member = json.dumps(sample()).replace('"epoch": 1', '"epoch": 5, "epoch": 1').encode()
    member = member.replace(b'"id": "a"', b'"id": "z", "events": [], "id": "a"')
    assert json.loads(member)["epoch"] == 1
    records = read_inspect_eval(eval_log(member), name="log")
    assert records.keys["id"].tolist() == ["a"] and records.keys["epoch"].tolist() == [1]


def test_what_json_refuses_in_a_transcript_is_refused_in_json_s_words() -> None:
    for bad, message in ((b"NaN", "NaN is not a JSON number"), (b'"a\x01b"', "Invalid control character"),
                         (b"[" * 5000 + b"]" * 5000, "nested too deeply to read"), (b'"\xff"', "can't decode byte 0xff")):
        member = json.dumps(sample(events="@")).encode().replace(b'"@"', bad)
        with pytest.raises(InputError) as reference:
            json_document("log, member samples/s0_epoch_1.json", member)
        assert message in str(reference.value)
        with pytest.raises(InputError) as ours:
            read_inspect_eval(eval_log(member), name="log")
        assert str(ours.value) == str(reference.value)


def test_a_failed_sample_s_error_is_read_only_to_explain_missing_scores() -> None:
    huge_error = {"message": "boom", "traceback": "x" * 5000}
    limits = InputLimits(cell_bytes=2000)
    scored = json.dumps(sample(error=huge_error)).encode()
    assert read_inspect_eval(eval_log(scored), name="log", limits=limits).n_items == 1
    failed = json.dumps(sample(scores={}, error={"message": "boom"})).encode()
    with pytest.raises(InputError, match=r"field 'scores' is missing or empty \(the sample failed: \{'message': "
                                         r"'boom'\}\)"):
        read_inspect_eval(eval_log(failed), name="log", limits=limits)


def test_a_deflated_member_is_refused_past_its_declared_size() -> None:
    """zipfile stops a member at its declared size, and its CRC then differs: refused, naming the member."""
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(HEADER))
        archive.writestr("samples/a_epoch_1.json", json.dumps(sample(events=[{}] * 1000)))
    raw = bytearray(buffer.getvalue())
    name = b"samples/a_epoch_1.json"
    info = zipfile.ZipFile(BytesIO(bytes(raw))).getinfo(name.decode())
    central = raw.rindex(name) - 46  # the name's last occurrence is in its central record, 46 bytes in
    assert raw[central:central + 4] == b"PK\x01\x02"
    for size_at in (info.header_offset + 22, central + 24):  # uncompressed size: local header, central record
        raw[size_at:size_at + 4] = (info.file_size - 100).to_bytes(4, "little")
    with pytest.raises(InputError, match=r"^log, member samples/a_epoch_1\.json: cannot be read \(Bad CRC-32"):
        read_inspect_eval(bytes(raw), name="log")


def test_the_json_form_s_samples_must_be_a_list_of_objects_as_before() -> None:
    for value, shown in (('{"a": 1}', r"\{'a': 1\}"), ('"x"', "'x'"), ("3", "3")):
        raw = json.dumps(HEADER)[:-1].encode() + b', "samples": ' + value.encode() + b"}"
        with pytest.raises(InputError, match=rf"^log: field 'samples' must be list \(got {shown}\)$"):
            read_inspect_json(raw, name="log")
    with pytest.raises(InputError, match=r"^log, samples\[1\]: a sample must be a JSON object$"):
        read_inspect_json(json_log(json.dumps(sample()).encode(), b"[1]"), name="log")
    assert np.array_equal(read_inspect_json(json_log(json.dumps(sample()).encode()), name="log").metrics["match"],
                          [1.0])


LM_EVAL = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "lm_eval" / "baseline"


def test_an_lm_eval_results_file_is_read_without_its_other_fields() -> None:
    """Fields of a results file certa does not read (``pretty_env_info``, ``n-samples``, anything) never change the
    provenance; what ``json`` refuses in them is refused; the fields it reads are bounded by ``cell_bytes``."""
    (samples,) = LM_EVAL.glob("samples_certa_mc_*.jsonl")
    (results,) = LM_EVAL.glob("results_*.json")
    stated = json.loads(results.read_text(encoding="utf-8"))
    plain = read_lm_eval_samples(samples, results, task="certa_mc").provenance
    for extra in (b"[" + b"{}," * 999 + b"{}]", b'"\\ud800"', b'{"deep": [[[[1e400]]]]}', b"1" + b"0" * 300):
        text = json.dumps({**stated, "pretty_env_info": "@"}).encode().replace(b'"@"', extra)
        padded = read_lm_eval_samples(samples, text, task="certa_mc", results_name="r").provenance
        assert padded.as_dict() | {"files": None} == plain.as_dict() | {"files": None}
    bad = json.dumps({**stated, "pretty_env_info": "@"}).encode().replace(b'"@"', b"NaN")
    with pytest.raises(InputError, match=r"^r: not a JSON document \(NaN is not a JSON number"):
        read_lm_eval_samples(samples, bad, task="certa_mc", results_name="r")
    with pytest.raises(InputError, match=r"^r: the JSON text of the results file's fields configs, config, .* in bytes "
                                         r"is [0-9,]+, over the limit cell_bytes=2,000"):  # its lines are 1.1 KB
        read_lm_eval_samples(samples, results, task="certa_mc", results_name="r", limits=InputLimits(cell_bytes=2000))
