"""The fast path of the lm-eval reader (msgspec decoding only the fields read) against the reference path
(``json`` and a check of every field, record by record): the same ``EvidenceRecords`` bit for bit on the real
fixtures and on generated hostile exports, and the same ``InputError`` wherever the reference refuses one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from certa.engine.core.evidence import EvidenceRecords, lm_eval, read_lm_eval_samples, sources
from certa.engine.core.evidence.sources import typed_json_lines
from certa.engine.core.input_limits import InputLimits
from certa.engine.foundation.errors import InputError

EVALUATORS = Path(__file__).resolve().parents[2] / "data" / "evaluators"
FIXTURES = sorted(EVALUATORS.glob("lm_eval*/*/samples_*.jsonl"))
"""Every real samples file: perplexity and multiple-choice tasks (lm_eval), loglikelihood and generation with two
filters (lm_eval_more)."""
HEX = "0123456789abcdef"


def same_records(fast: EvidenceRecords, reference: EvidenceRecords) -> None:
    """Every array equal in dtype, shape and bytes (so ``-0.0`` differs from ``0.0``), every other field equal."""
    assert (fast.source, fast.key_fields, fast.provenance) == (reference.source, reference.key_fields,
                                                              reference.provenance)
    for group in ("keys", "metrics", "identity", "counts"):
        ours, theirs = getattr(fast, group), getattr(reference, group)
        assert list(ours) == list(theirs)
        for name in ours:
            assert_same_array(ours[name], theirs[name])
    for name in ("weights", "slices"):
        ours, theirs = getattr(fast, name), getattr(reference, name)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert_same_array(ours, theirs)


def assert_same_array(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    if ours.dtype == object:
        assert [(type(v), v) for v in ours.tolist()] == [(type(v), v) for v in theirs.tolist()]
    else:
        assert ours.tobytes() == theirs.tobytes()


def outcome(read: Callable[[], EvidenceRecords]) -> EvidenceRecords | str:
    """The records, or the ``InputError``'s message (any other exception fails the test)."""
    try:
        return read()
    except InputError as error:
        return f"InputError: {error}"


def both_paths(raw: bytes, monkeypatch: pytest.MonkeyPatch, **options: object) -> tuple[object, object, bool]:
    """(outcome with the fast path, outcome of the reference path alone, whether the fast path took the file)."""
    taken = lm_eval._typed_fields(raw, InputLimits(), options.get("filter_name")) is not None
    fast = outcome(lambda: read_lm_eval_samples(raw, name="samples_t.jsonl", **options))
    with monkeypatch.context() as patch:
        patch.setattr(lm_eval, "_typed_fields", lambda *args: None)
        reference = outcome(lambda: read_lm_eval_samples(raw, name="samples_t.jsonl", **options))
    return fast, reference, taken


def assert_same_outcome(fast: object, reference: object) -> None:
    if isinstance(reference, str) or isinstance(fast, str):
        assert fast == reference
    else:
        same_records(fast, reference)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_the_fast_path_reads_the_fixtures_as_the_reference_does(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filters = {json.loads(line)["filter"] for line in path.read_text(encoding="utf-8").splitlines()}
    for filter_name in sorted(filters) if len(filters) > 1 else [None]:
        fast, reference, taken = both_paths(path.read_bytes(), monkeypatch, filter_name=filter_name)
        assert taken and not isinstance(fast, str)
        same_records(fast, reference)


# Generated exports: records of a multiple-choice or a perplexity task, each field either as lm-eval writes it
# or hostile (wrong type, out of range, non-finite, an integer beyond float64), written as JSON text member by
# member so that a member can be duplicated, a token can be one ``json`` and msgspec disagree on (NaN, 1e400,
# a lone surrogate escape, a control character, bytes that are not UTF-8) and lines can be blank in either's
# eyes.

def member_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


finite = st.floats(allow_nan=False, allow_infinity=False)
number_text = st.one_of(finite.map(repr), st.integers(-2**70, 2**70).map(str), st.sampled_from(
    ["true", "false", "1e400", "-1e400", "1e-400", "-0.0", "-0", "0.1e1", "123456789012345678901234567890.5",
     "2.2250738585072011e-308", "9007199254740993"]))
hostile_value = st.sampled_from(['"1.0"', "null", "[1.0]", '{"v": 1}', "NaN", "Infinity", "-Infinity",
                                 '"\\ud800"', '"a\x01b"', "1.", "01", '"\xff"'])
metric_value = st.one_of(number_text, number_text, number_text, hostile_value)
digest = st.one_of(st.text(HEX, min_size=64, max_size=64), st.text(HEX, min_size=64, max_size=64),
                   st.sampled_from(["AB" * 32, "ab" * 31, "ab" * 33, "xyz", "ab" * 31 + "a\n"]))
doc_id = st.one_of(st.integers(0, 50), st.integers(0, 50),
                   st.sampled_from([-1, 2**63 - 1, 2**63, 10**30, True, 1.0, "3", None]))
ignored = st.recursive(st.one_of(st.none(), st.booleans(), finite, st.integers(-2**80, 2**80), st.text(max_size=8)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=8).map(member_text)
ignored_text = st.one_of(ignored, ignored, ignored, hostile_value, st.sampled_from(["[" * 3000 + "]" * 3000]))
loglik = st.one_of(finite.map(repr), st.sampled_from(["nan", "1e999", "-1_0", "12", ".5", " 3"]))


@st.composite
def lm_eval_record(draw: st.DrawFn, kind: str) -> str:
    """One line of a task of ``kind`` (``rolling``, ``loglikelihood`` or ``choice``): members of a record, as the
    harness writes them or (one record in two) some hostile, some twice, in a drawn order."""
    if draw(st.booleans()):
        return good_record(draw, kind)
    members: list[tuple[str, str]] = [("doc_id", member_text(draw(doc_id))),
                                      ("filter", member_text(draw(st.sampled_from(["none", "none", "none", "strict"]))))]
    members += [(field, member_text(draw(digest))) for field in ("doc_hash", "prompt_hash", "target_hash")]
    if kind == "rolling":
        names = ["word_perplexity", "byte_perplexity", "bits_per_byte"]
        text = draw(loglik)
        value = text if draw(st.integers(0, 5)) else draw(number_text)
        members.append(("filtered_resps", member_text(draw(st.sampled_from([[text], [text], [text, text], text])))))
        words, size = draw(st.integers(-1, 40)), draw(st.sampled_from([10, 10, 11, 0, 2**64]))
        members += [(metric, f"[{value}, {count}]") for metric, count in zip(names, (words, size, size))]
    elif kind == "loglikelihood":
        names = ["perplexity", "acc"]
        text = draw(loglik)
        value = text if draw(st.integers(0, 5)) else draw(number_text)
        members.append(("filtered_resps", member_text(draw(st.sampled_from(
            [[[text, "False"]], [[text, "True"]], [[text, "False"]], [[text]], [[text, "False", "x"]], [text],
             [[text, "False"], [text, "False"]]])))))
        members += [("perplexity", value), ("acc", draw(metric_value))]
    else:
        names = ["acc", "acc_norm"]
        members += [(metric, draw(metric_value)) for metric in names]
    listed = draw(st.sampled_from([names, names, names, names[:1], [], [1]]))
    members.append(("metrics", member_text(listed)))
    members += [(draw(st.sampled_from(["doc", "arguments", "resps", "target"])), draw(ignored_text))
                for _ in range(draw(st.integers(0, 3)))]
    if draw(st.integers(0, 4)) == 0:
        key, _ = draw(st.sampled_from(members))
        members.append((key, draw(st.one_of(metric_value, st.just(member_text("none"))))))
    order = draw(st.permutations(members))
    return "{" + ", ".join(f"{json.dumps(key)}: {text}" for key, text in order) + "}"


def good_record(draw: st.DrawFn, kind: str) -> str:
    """A record as the harness writes it, with drawn values (any finite float, integers, booleans)."""
    record: dict[str, object] = {"doc_id": draw(st.integers(0, 2**63 - 1)), "doc": draw(ignored),
                                 "filter": "none", **{field: draw(st.text(HEX, min_size=64, max_size=64))
                                                      for field in ("doc_hash", "prompt_hash", "target_hash")}}
    if kind == "rolling":
        value = draw(finite)
        record |= {"filtered_resps": [repr(value)], "metrics": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
                   "word_perplexity": [value, draw(st.integers(1, 99))], "byte_perplexity": [value, 10],
                   "bits_per_byte": [value, 10]}
    elif kind == "loglikelihood":
        value = draw(finite)
        record |= {"filtered_resps": [[repr(value), draw(st.sampled_from(["True", "False"]))]],
                   "metrics": ["perplexity", "acc"], "perplexity": value, "acc": draw(st.integers(0, 1))}
    else:
        record |= {"metrics": ["acc", "acc_norm"], "acc": draw(st.one_of(finite, st.booleans(), st.integers())),
                   "acc_norm": draw(st.one_of(finite, st.sampled_from([0.0, 1.0])))}
    line = json.dumps(record, ensure_ascii=draw(st.booleans()))
    quirk = draw(st.sampled_from(["", "", "", '"\\ud800"', '"\\udfff x"', "1e400"]))  # json reads these, msgspec not all
    return line[:-1] + f', "doc_note": {quirk}}}' if quirk else line


@st.composite
def lm_eval_export(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["rolling", "loglikelihood", "choice"]))
    lines = draw(st.lists(st.one_of(lm_eval_record(kind), lm_eval_record(kind), lm_eval_record(kind),
                                    st.sampled_from(["", "  ", "\r", "\x0c", "\u00a0", "\x1c"])),
                          min_size=1, max_size=6))
    return "\n".join(lines).encode("utf-8", "surrogateescape")


@pytest.mark.slow
@given(raw=lm_eval_export(), filter_name=st.sampled_from([None, "none", "strict"]))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
def test_the_fast_path_agrees_with_the_reference_on_hostile_exports(raw: bytes, filter_name: str | None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fast, reference, taken = both_paths(raw, monkeypatch, filter_name=filter_name)
    event(f"fast path {'taken' if taken else 'declined'}, reference {'refuses' if isinstance(reference, str) else 'reads'}")
    assert_same_outcome(fast, reference)


@pytest.mark.parametrize("line, why", [
    (b'{"x": "\\ud800"}', "a lone surrogate escape: json reads it, msgspec does not"),
    (b'{"x": "\xff"}', "not UTF-8 inside a string msgspec would skip unchecked"),
    (b'{"x": NaN}', "not JSON"),
    (b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested beyond the recursion limit"),
    (b"\xc2\xa0", "blank to str.strip only"),
])
def test_typed_lines_decline_what_json_lines_must_decide(line: bytes, why: str) -> None:
    decoder = msgspec.json.Decoder(dict)
    assert typed_json_lines(b'{"a": 1}\n' + line + b"\n", InputLimits(), lambda first: decoder) is None, why


@pytest.mark.parametrize("limits", [InputLimits(rows=2), InputLimits(cell_bytes=200)], ids=["rows", "cell_bytes"])
def test_limits_refuse_on_both_paths_alike(limits: InputLimits, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = b"".join(json.dumps({"doc_id": i, "filter": "none", "doc_hash": "a" * 64, "prompt_hash": "b" * 64,
                               "target_hash": "c" * 64, "metrics": ["acc"], "acc": 1.0}).encode() + b"\n"
                   for i in range(3))
    fast, reference, _ = both_paths(raw, monkeypatch, limits=limits)
    assert isinstance(reference, str) and "over the limit" in reference
    assert fast == reference


@pytest.mark.parametrize("field, value", [("filtered_resps", '["0.0", "0.0"]'),
                                          ("byte_perplexity", "[0.0, 10, 3]")])
def test_an_array_longer_than_its_struct_is_refused_by_both_paths(field: str, value: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """msgspec ignores an array-like struct's extra elements unless told not to: a perplexity record's
    ``filtered_resps`` of two values (or a metric pair of three) once passed the fast path (found by hypothesis)."""
    fields = {"doc_id": 0, "filter": "none", "doc_hash": "0" * 64, "prompt_hash": "0" * 64, "target_hash": "0" * 64,
              "filtered_resps": '["0.0"]', "word_perplexity": "[0.0, 1]", "byte_perplexity": "[0.0, 10]",
              "bits_per_byte": "[0.0, 10]"}
    fields[field] = value
    body = ", ".join(f'"{k}": {v if k not in ("filter",) and not k.endswith("hash") else repr(v).replace(chr(39), chr(34))}'
                     for k, v in fields.items())
    raw = ("{" + body + ', "metrics": ["word_perplexity", "byte_perplexity", "bits_per_byte"]}').encode()
    fast, reference, _ = both_paths(raw, monkeypatch)
    assert isinstance(reference, str) and reference.startswith("InputError")
    assert_same_outcome(fast, reference)


@pytest.mark.parametrize("block", [1, 50, 333, 1 << 23])
def test_lines_are_numbered_alike_whatever_the_block_they_are_split_in(block: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of ``block`` bytes (``sources.LINES_BLOCK``) cut after a newline: a line longer than a block is one
    block, blank lines (before, between and after records, and at a block's edge) are skipped, and every record keeps
    its line number."""
    monkeypatch.setattr(sources, "LINES_BLOCK", block)
    records = [json.dumps({"i": i, "pad": "x" * (i * 37 % 200)}) for i in range(40)]
    text = "\n \n" + "\n".join(record + ("\n\t" if i % 7 == 3 else "") for i, record in enumerate(records)) + "\n\n"
    raw = text.encode()
    typed = typed_json_lines(raw, InputLimits(), lambda first: msgspec.json.Decoder(dict))
    reference = sources.json_lines("x", raw, InputLimits())
    assert typed is not None and typed[0] == reference[0] and list(typed[1]) == reference[1]
    without_blanks = ("\n".join(records) + "\n").encode()
    typed = typed_json_lines(without_blanks, InputLimits(), lambda first: msgspec.json.Decoder(dict))
    assert typed is not None and typed[1] == range(1, 41)
    fixture = FIXTURES[0].read_bytes()
    fast, reference_records, taken = both_paths(b"\n" + fixture.replace(b"\n", b"\n\n", 3), monkeypatch)
    assert taken
    assert_same_outcome(fast, reference_records)
