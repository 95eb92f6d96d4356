"""Hostile evaluator exports (issue 31): variants of real lm-evaluation-harness samples and results files, Inspect
AI logs (``.eval`` archives and their JSON form) and promptfoo results, each given to ``certa run`` of an example
spec with ``--input NAME=PATH`` in-process, each checked against the sweep's invariants (``conftest.check``):
an exit code from 0 to 3, one ``error:`` line on stderr for a refusal (exit 2, no ledger and no certificate file
left), never a traceback, no ``*.certa-tmp`` file, and a run that is recorded is the only one of a ledger that
verifies intact.

Every variant starts from a genuine export: the example specs' own lm-eval and Inspect files
(``tests/data/evaluators``, made by the tools) and a promptfoo ``--output results.jsonl`` built in promptfoo's
shape (``tests/core/evidence/promptfoo_export.py``). A case states what it expects:

- ``refuse``: the export is broken or lies (truncated, not UTF-8, ``NaN``, a field of the wrong type, a duplicate
  id, a count that disagrees with the export's own, another task's results file): exit 2 and one line;
- ``read``: hostile but valid (ids with ``/``, control characters): recorded, exit 0 or 1 (a dev run whose
  pairing gates FAIL), and the certificate says every record was read (``inputs[].rows``);
- ``any``: either, as long as the invariants hold (a zip member named ``../../x``, a byte flipped).

Categories: ``lm_eval_samples``, ``lm_eval_results``, ``inspect_eval``, ``inspect_json``, ``promptfoo`` and
``export_ids`` (hypothesis-drawn sample ids, the same on both sides: every sample read and paired).
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard

from tests.core.evidence.inspect_epochs import fixture_members
from tests.core.evidence.promptfoo_export import evaluation, provider, write_jsonl
from tests.core.evidence.zstd_zip import zstd_zip
from .conftest import assert_ledger_kept, check, invoke, run_count

pytestmark = pytest.mark.adversarial

ROOT = Path(__file__).resolve().parents[2]
LM_MC = ROOT / "specs" / "lm-eval-accuracy" / "spec.yaml"
LM_PPL = ROOT / "specs" / "lm-eval-perplexity" / "spec.yaml"
INSPECT = ROOT / "specs" / "inspect-accuracy" / "spec.yaml"
EVALUATORS = ROOT / "tests" / "data" / "evaluators"

Expect = str  # "refuse", "read" or "any"
ALLOWED = {"refuse": {2}, "read": {0, 1}, "any": {0, 1, 2, 3}}


def _only(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found


# ------------------------------------------------------------------------------------------- the runs


def run_export(case: str, spec: Path, inputs: dict[str, Path], folder: Path, expect: Expect,
               rows: dict[str, int] | None = None) -> dict[str, Any] | None:
    """``certa run SPEC --input NAME=PATH ...`` into a new ledger in ``folder``, checked against the invariants
    (module docstring); the certificate's content when the run was recorded."""
    db, cert = folder / "new-ledger.db", folder / "cert.json"
    args: list[object] = ["run", spec]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    started = time.monotonic()
    result = invoke(*args, "--ledger", db, "-o", cert)
    assert time.monotonic() - started < 20, f"{case}: certa took {time.monotonic() - started:.0f} s"
    recorded = result.exit_code in (0, 1, 3)
    check(case, result, allowed=ALLOWED[expect], folders=(folder,), verdict_command=True,
          no_files=() if recorded else (db, Path(f"{db}-wal"), Path(f"{db}-journal"), cert))
    if not recorded:
        return None
    assert_ledger_kept(case, db, 0, new_runs=1)
    assert run_count(db) == 1, f"{case}: {run_count(db)} runs recorded by one certa run"
    if result.exit_code == 3:
        return None
    content = json.loads(cert.read_text(encoding="utf-8"))["content"]
    read = {entry["name"]: entry["rows"] for entry in content["inputs"]}
    for name, n in (rows or {}).items():
        assert read[name] == n, f"{case}: input {name!r} read {read[name]} records of {n}: some were dropped"
    return content


# ---------------------------------------------------------------------------------- files of every kind


def _fifo(path: Path) -> Path:
    """A FIFO, with a guard: should certa open it for reading, a writer opens it within 5 s and closes it."""
    os.mkfifo(path)

    def unblock() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and path.exists():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError:
                time.sleep(0.05)

    threading.Thread(target=unblock, daemon=True).start()
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _link_to_zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


Bytes = Callable[[bytes], bytes]
FILE_CASES: dict[str, tuple[Bytes | Callable[[Path], Path], Expect]] = {
    "empty": (lambda raw: b"", "refuse"),
    "blank-lines": (lambda raw: b"\n \n\t\n", "refuse"),
    "nul-bytes": (lambda raw: b"\x00" * 4096, "refuse"),
    "truncated-half": (lambda raw: raw[: len(raw) // 2], "refuse"),
    "truncated-tail": (lambda raw: raw[:-2], "refuse"),
    "bom-prefix": (lambda raw: b"\xef\xbb\xbf" + raw, "any"),
    "doubled": (lambda raw: raw + raw, "refuse"),
    "folder": (_folder, "refuse"),
    "fifo": (_fifo, "refuse"),
    "link-to-dev-zero": (_link_to_zero, "refuse"),
}
"""Hostile files of any format: (the file's bytes from the genuine export's, or how to make the path), expect."""
PATH_MAKERS = {"folder", "fifo", "link-to-dev-zero"}


def file_case(kind: str, raw: bytes, folder: Path, name: str, *, archive: bool = False) -> tuple[Path, Expect]:
    """The hostile file ``kind`` made in ``folder`` and what is expected of it. Two archives back to back
    (``doubled``) are read as ZIP readers read them, by the directory at the end: the genuine log, any outcome."""
    make, expect = FILE_CASES[kind]
    if archive and kind == "doubled":
        expect = "any"
    path = folder / name
    if kind in PATH_MAKERS:
        return make(path), expect  # type: ignore[return-value,arg-type]
    path.write_bytes(make(raw))  # type: ignore[arg-type]
    return path, expect


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    """JSON Lines as the tools write them; ``NaN``/``Infinity`` for non-finite floats, ``\\uXXXX`` escapes."""
    return "".join(json.dumps(record) + "\n" for record in records).encode("utf-8")


def _records(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


# ------------------------------------------------------------------------------- record-level mutations

DELETE = object()
"""A mutation's value that deletes the field."""
SWAPS: dict[str, Any] = {"null": None, "text": "x", "int": 7, "float": 2.5, "bool": True, "list": [1],
                         "object": {"a": 1}, "beyond-int64": 2**64, "negative": -1, "nan": math.nan,
                         "infinity": math.inf, "deleted": DELETE}


def _set(record: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    record = copy.deepcopy(record)
    target = record
    for part in path[:-1]:
        target = target[part]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return record


UNREAD_SWAPS = ("null", "object", "nan", "deleted")
"""The swaps tried on a field certa does not read (``"*"`` in its overrides): each accepted case is a whole
recorded run, so a few kinds suffice where every kind is read alike (not at all)."""


def _swap_cases(fields: dict[str, dict[str, Expect]], default: Expect = "refuse") -> dict[str, tuple[tuple, Any, Expect]]:
    """Every swap of every field (a dotted path): ``fields[path]`` overrides the expectation of some swaps; a field
    whose overrides say ``"*"`` (any swap alike) gets the ``UNREAD_SWAPS`` only."""
    cases = {}
    for dotted, overrides in fields.items():
        for swap, value in SWAPS.items():
            if "*" in overrides and swap not in UNREAD_SWAPS:
                continue
            # NaN and Infinity are no JSON: refused wherever they are, whatever the field ("*" is not for them)
            expect = overrides.get(swap, overrides.get("*", default) if swap not in ("nan", "infinity") else "refuse")
            if expect != "skip":
                cases[f"{dotted}-{swap}"] = (tuple(dotted.split(".")), value, expect)
    return cases


# ------------------------------------------------------------------------------------- lm-eval samples

LM_MC_FIELDS = {  # field: expectations other than refuse, by swap
    "doc_id": {},
    "doc_hash": {}, "prompt_hash": {}, "target_hash": {},
    "metrics": {},
    "filter": {},
    "acc": {"bool": "any"},  # true is 1, the line's own value: the results file's mean still holds
    "acc_norm": {"bool": "any"},
    "doc": {"*": "any"}, "target": {"*": "any"}, "arguments": {"*": "any"}, "resps": {"*": "any"},
    "filtered_resps": {"*": "any"},  # not read for a multiple-choice task
}
LM_PPL_FIELDS = {
    "doc_id": {}, "doc_hash": {}, "metrics": {}, "filter": {},
    "filtered_resps": {},
    "byte_perplexity": {}, "word_perplexity": {}, "bits_per_byte": {},
}


def _lm_line(records: list[dict[str, Any]], index: int, change: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    records = list(records)
    records[index] = change(records[index])
    return _jsonl(records)


def _ppl_loglik(text: str) -> Callable[[list[dict[str, Any]]], bytes]:
    """The first document's log-likelihood set to ``text`` consistently (``filtered_resps``, ``resps`` and every
    logged pair), as a harness with that value would log it."""
    def change(records: list[dict[str, Any]]) -> bytes:
        def one(record: dict[str, Any]) -> dict[str, Any]:
            record = copy.deepcopy(record)
            record["filtered_resps"], record["resps"] = [text], [[text]]
            for metric in ("word_perplexity", "byte_perplexity", "bits_per_byte"):
                record[metric][0] = float(text) if re.fullmatch(r"-?[0-9.e+]+", text) else text
            return record
        return _jsonl([one(records[0]), *records[1:]])
    return change


def _ppl_counts(count: Any) -> Callable[[list[dict[str, Any]]], bytes]:
    def change(records: list[dict[str, Any]]) -> bytes:
        record = copy.deepcopy(records[0])
        record["byte_perplexity"][1] = record["bits_per_byte"][1] = count
        return _jsonl([record, *records[1:]])
    return change


def _raw_replace(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def change(raw: bytes) -> bytes:
        assert old in raw, old
        return raw.replace(old, new, 1)
    return change


RecordsChange = Callable[[list[dict[str, Any]]], bytes]
LM_MC_CASES: dict[str, tuple[RecordsChange | Bytes, Expect, bool]] = {  # name: (change, expect, on raw bytes)
    "re-serialised": (_jsonl, "read", False),
    "not-utf8": (_raw_replace(b"Question", b"Qu\xffstion"), "refuse", True),
    "lone-surrogate-in-doc": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("doc", "question"), "\ud800")), "any", False),
    "control-chars-in-doc": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("doc", "question"), "a\x00\x1b[2J\r\n")),
                             "any", False),
    "nan-token": (_raw_replace(b'"acc": 1.0', b'"acc": NaN'), "refuse", True),
    "infinity-token": (_raw_replace(b'"acc": 1.0', b'"acc": -Infinity'), "refuse", True),
    "1e999": (_raw_replace(b'"acc": 1.0', b'"acc": 1e999'), "refuse", True),
    "doc-id-5000-digits": (_raw_replace(b'"doc_id": 0', b'"doc_id": ' + b"9" * 5000), "refuse", True),
    "doc-id-1e400": (_raw_replace(b'"doc_id": 0', b'"doc_id": 1e400'), "refuse", True),
    "duplicate-doc-id": (lambda rs: _lm_line(rs, 1, lambda r: _set(r, ("doc_id",), rs[0]["doc_id"])), "refuse", False),
    "duplicate-line": (lambda rs: _jsonl([*rs, rs[0]]), "refuse", False),
    "a-line-dropped": (lambda rs: _jsonl(rs[:-1]), "refuse", False),  # sample_len and the task hash say 24
    "lines-reordered": (lambda rs: _jsonl(rs[::-1]), "any", False),
    "other-doc-hash": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("doc_hash",), "0" * 64)), "refuse", False),
    "upper-case-hash": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("doc_hash",), r["doc_hash"].upper())),
                        "refuse", False),
    "second-filter": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("filter",), "strict")), "refuse", False),
    "other-metrics": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("metrics",), ["acc"])), "refuse", False),
    "duplicate-json-key": (_raw_replace(b'{"doc_id": 0,', b'{"doc_id": 0, "doc_id": 3,'), "refuse", True),
    "extra-field": (lambda rs: _lm_line(rs, 0, lambda r: {**r, "certa_extra": {"x": [1, 2]}}), "read", False),
    "deep-nesting": (_raw_replace(b'"doc": {', b'"deep": ' + b"[" * 5000 + b"]" * 5000 + b', "doc": {'), "any", True),
    "hash-of-lone-surrogates": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("doc_hash",), "\ud800" * 64)),
                                "refuse", False),
    "a-line-not-object": (lambda rs: _jsonl(rs) + b"[1, 2, 3]\n", "refuse", False),
    "crlf": (lambda raw: raw.replace(b"\n", b"\r\n"), "any", True),
    **{f"field-{name}": (lambda rs, p=path, v=value: _lm_line(rs, 2, lambda r: _set(r, p, v)), expect, False)
       for name, (path, value, expect) in _swap_cases(LM_MC_FIELDS).items()},
}
LM_PPL_CASES: dict[str, tuple[RecordsChange | Bytes, Expect, bool]] = {
    "re-serialised": (_jsonl, "read", False),
    "loglik-nan-text": (_ppl_loglik("nan"), "refuse", False),
    "loglik-1e999-text": (_ppl_loglik("1e999"), "refuse", False),
    "loglik-hex-text": (_ppl_loglik("0x10"), "refuse", False),
    "loglik-underscore-text": (_ppl_loglik("-1_0"), "refuse", False),
    "loglik-a-sum-as-a-mean": (_ppl_loglik("-1e6"), "any", False),
    "loglik-positive": (_ppl_loglik("5.5"), "refuse", False),  # a probability above 1
    "loglik-zero": (_ppl_loglik("0.0"), "any", False),
    "loglik-beyond-overflow": (_ppl_loglik("-1e308"), "any", False),
    "count-zero": (_ppl_counts(0), "refuse", False),
    "count-negative": (_ppl_counts(-3), "refuse", False),
    "count-beyond-int64": (_ppl_counts(2**64), "refuse", False),
    "count-2^62": (_ppl_counts(2**62), "any", False),
    "count-float": (_ppl_counts(12.5), "refuse", False),
    "count-text": (_ppl_counts("12"), "refuse", False),
    "pair-of-three": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("byte_perplexity",), [*r["byte_perplexity"], 1])),
                      "refuse", False),
    "two-responses": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("filtered_resps",), r["filtered_resps"] * 2)),
                      "refuse", False),
    "pairs-disagree": (lambda rs: _lm_line(rs, 0, lambda r: _set(r, ("word_perplexity",),
                                                                 [r["word_perplexity"][0] - 1, r["word_perplexity"][1]])),
                       "refuse", False),
    "a-line-dropped": (lambda rs: _jsonl(rs[1:]), "refuse", False),
    **{f"field-{name}": (lambda rs, p=path, v=value: _lm_line(rs, 3, lambda r: _set(r, p, v)), expect, False)
       for name, (path, value, expect) in _swap_cases(LM_PPL_FIELDS).items()},
}
LM_CASES = ([pytest.param("mc", f"file-{k}", id=f"mc-file-{k}") for k in FILE_CASES]
            + [pytest.param("mc", k, id=f"mc-{k}") for k in LM_MC_CASES]
            + [pytest.param("ppl", k, id=f"ppl-{k}") for k in LM_PPL_CASES])
LM_SAMPLES = {"mc": "samples_certa_mc_*.jsonl", "ppl": "samples_certa_ppl_*.jsonl"}


def _lm_subject(task: str) -> tuple[Path, bytes]:
    spec = LM_MC if task == "mc" else LM_PPL
    path = _only(spec.parent / "data" / "subject", LM_SAMPLES[task])
    return spec, path.read_bytes()


@pytest.mark.parametrize(("task", "kind"), LM_CASES)
def test_lm_eval_samples(task: str, kind: str, tmp_path: Path) -> None:
    spec, raw = _lm_subject(task)
    name = "samples_hostile.jsonl"
    if kind.startswith("file-"):
        path, expect = file_case(kind[5:], raw, tmp_path, name)
    else:
        change, expect, on_bytes = (LM_MC_CASES if task == "mc" else LM_PPL_CASES)[kind]
        path = tmp_path / name
        path.write_bytes(change(raw) if on_bytes else change(_records(raw)))  # type: ignore[arg-type]
    run_export(f"lm-eval {task} samples {kind}", spec, {"subject": path}, tmp_path, expect, rows={"subject": 24})


# ------------------------------------------------------------------------------------- lm-eval results


def _results_document(raw: bytes) -> dict[str, Any]:
    return json.loads(raw)


def _doc_change(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda document: _set(document, path, value)


RESULTS_CHANGES: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], Expect]] = {
    "re-serialised": (lambda d: d, "read"),
    "sample-len-23": (_doc_change(("results", "certa_mc", "sample_len"), 23), "refuse"),
    "sample-len-text": (_doc_change(("results", "certa_mc", "sample_len"), "24"), "any"),
    "acc-off-by-a-document": (lambda d: _set(d, ("results", "certa_mc", "acc,none"),
                                             d["results"]["certa_mc"]["acc,none"] + 1 / 24), "refuse"),
    "acc-nan": (_doc_change(("results", "certa_mc", "acc,none"), math.nan), "refuse"),
    "n-samples-effective-23": (_doc_change(("n-samples", "certa_mc", "effective"), 23), "refuse"),
    "n-samples-original-23": (_doc_change(("n-samples", "certa_mc", "original"), 23), "any"),
    "n-samples-effective-text": (_doc_change(("n-samples", "certa_mc", "effective"), "24"), "any"),
    "task-hash-other": (_doc_change(("task_hashes", "certa_mc"), "0" * 64), "refuse"),
    "task-hash-int": (_doc_change(("task_hashes", "certa_mc"), 7), "any"),
    "task-hashes-deleted": (_doc_change(("task_hashes",), DELETE), "any"),
    "configs-deleted": (_doc_change(("configs",), DELETE), "refuse"),
    "configs-empty": (_doc_change(("configs",), {}), "refuse"),
    "configs-list": (_doc_change(("configs",), [1]), "refuse"),
    "task-config-deleted": (_doc_change(("configs", "certa_mc"), DELETE), "refuse"),
    "task-config-text": (_doc_change(("configs", "certa_mc"), "x"), "refuse"),
    "results-deleted": (_doc_change(("results",), DELETE), "any"),
    "results-list": (_doc_change(("results",), [1]), "any"),
    "model-name-lone-surrogate": (_doc_change(("model_name",), "gpt\ud800"), "any"),
    "model-name-control-chars": (_doc_change(("model_name",), "\x1b[32mPASS\x1b[0m\r\n\x00"), "any"),
    "model-args-lone-surrogate": (_doc_change(("config", "model_args"), {"pretrained": "\udfff"}), "any"),
    "model-args-deep": (_doc_change(("config", "model_args"), _nested(200)), "any"),
    "version-lone-surrogate": (_doc_change(("lm_eval_version",), "\ud800"), "any"),
    "version-huge-int": (_doc_change(("lm_eval_version",), 10**300), "any"),
    "task-version-object": (_doc_change(("versions", "certa_mc"), {"v": [1, None]}), "any"),
    "date-lone-surrogate": (_doc_change(("date",), "\udc00"), "any"),
    "task-config-lone-surrogate": (_doc_change(("configs", "certa_mc", "task_alias"), "\ud800"), "any"),
    "task-config-deep": (_doc_change(("configs", "certa_mc", "metadata"), _nested(200)), "any"),
}
RESULTS_FILES: dict[str, tuple[Callable[[Path], Path], Expect]] = {
    "another-task": (lambda folder: _only(EVALUATORS / "lm_eval_more" / "subject", "results_*.json"), "refuse"),
    "the-baseline-s": (lambda folder: _only(LM_MC.parent / "data" / "baseline", "results_*.json"), "refuse"),
    "a-json-list": (lambda folder: _write(folder / "r.json", b"[1, 2]"), "refuse"),
    "not-utf8": (lambda folder: _write(folder / "r.json", _raw_results().replace(b"certa_mc", b"certa\xffmc", 1)),
                 "refuse"),
    "nan-token": (lambda folder: _write(folder / "r.json", _raw_results().replace(b'"N/A"', b"NaN", 1)), "refuse"),
}
RESULTS_CASES = ([pytest.param(f"file-{k}", id=f"file-{k}") for k in FILE_CASES]
                 + [pytest.param(k, id=k) for k in RESULTS_FILES]
                 + [pytest.param(k, id=k) for k in RESULTS_CHANGES])


def _raw_results() -> bytes:
    return _only(LM_MC.parent / "data" / "subject", "results_*.json").read_bytes()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", RESULTS_CASES)
def test_lm_eval_results(kind: str, tmp_path: Path) -> None:
    """The subject's ``results_<time>.json`` (the samples' companion, ``read.results``) replaced."""
    if kind.startswith("file-"):
        path, expect = file_case(kind[5:], _raw_results(), tmp_path, "results_hostile.json")
    elif kind in RESULTS_FILES:
        make, expect = RESULTS_FILES[kind]
        path = make(tmp_path)
    else:
        change, expect = RESULTS_CHANGES[kind]
        path = _write(tmp_path / "results_hostile.json", json.dumps(change(json.loads(_raw_results())),
                                                                     indent=2).encode())
    run_export(f"lm-eval results {kind}", LM_MC, {"subject_results": path}, tmp_path, expect, rows={"subject": 24})


# ------------------------------------------------------------------------------------------- Inspect

SAMPLE_FIELDS = {  # a sample's field: expectations other than refuse, by swap
    "id": {"int": "read", "beyond-int64": "any", "negative": "read", "text": "read"},
    "epoch": {"int": "read"},  # epoch 7 of a sample: a third epoch of one sample, read
    "scores": {},
    "scores.match.value": {"bool": "read"},  # the spec's metric is binary: 7, 2.5, -1 are refused by the stage
    "scores.closeness.value": {"int": "read", "float": "read", "bool": "read", "negative": "read",
                               "beyond-int64": "read"},
    "input": {"text": "read", "list": "read"},
    "target": {"text": "read", "list": "read"},
    "metadata": {"*": "read"},
    "messages": {"*": "read"},
    "output": {"*": "read"},
}
SampleChange = Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, Any] | None]


def _sample_set(path: tuple[str, ...], value: Any) -> SampleChange:
    return lambda sample, others: _set(sample, path, value)


SAMPLE_CASES: dict[str, tuple[SampleChange, Expect, bool]] = {  # name: (change, expect, rename the member)
    "id-with-slash": (_sample_set(("id",), "sum/01"), "read", True),
    "id-with-slashes-and-dots": (_sample_set(("id",), "../../../etc/passwd"), "read", True),
    "id-control-chars": (_sample_set(("id",), "s\x01\x1b[31m\r\n\t"), "read", True),
    "id-nul": (_sample_set(("id",), "s\x00m"), "read", False),
    "id-lone-surrogate": (_sample_set(("id",), "sum-\ud800"), "refuse", False),
    "id-empty": (_sample_set(("id",), ""), "any", False),
    "id-long": (_sample_set(("id",), "x" * 100_000), "any", False),
    "id-of-another-sample": (lambda sample, others: _set(sample, ("id",), others[2]["id"]), "refuse", False),
    "id-int-equal-to-text": (lambda sample, others: _set(sample, ("id",), 1), "read", False),
    "epoch-zero": (_sample_set(("epoch",), 0), "refuse", False),
    "epoch-2^63": (_sample_set(("epoch",), 2**63), "refuse", False),
    "epoch-2^63-1": (_sample_set(("epoch",), 2**63 - 1), "read", False),
    "epoch-of-the-other": (lambda sample, others: _set(sample, ("epoch",), 3 - sample["epoch"]), "refuse", False),
    "score-letter-lower": (_sample_set(("scores", "match", "value"), "c"), "refuse", False),
    "score-text-nan": (_sample_set(("scores", "match", "value"), "nan"), "refuse", False),
    "score-text-inf": (_sample_set(("scores", "match", "value"), "-inf"), "refuse", False),
    "score-10^400": (_sample_set(("scores", "match", "value"), 10**400), "refuse", False),
    "score-extra-scorer": (_sample_set(("scores", "other"), {"value": 1}), "refuse", False),
    "score-dotted-collision": (_sample_set(("scores", "match.a"), {"value": 1}), "any", False),
    "score-without-value": (_sample_set(("scores", "match"), {"answer": "1"}), "refuse", False),
    "scores-empty": (_sample_set(("scores",), {}), "refuse", False),
    "failed-sample": (lambda sample, others: {**_set(sample, ("scores",), None), "error": {"message": "boom"}},
                      "refuse", False),
    "input-deep": (_sample_set(("input",), _nested(200)), "refuse", False),
    "input-lone-surrogate": (_sample_set(("input",), "\ud800"), "any", False),
    "metadata-lone-surrogate": (_sample_set(("metadata",), {"k": "\udfff"}), "read", False),
    "not-an-object": (lambda sample, others: [sample], "refuse", False),  # type: ignore[return-value,list-item]
    **{f"{name}": (_sample_set(path, value), expect, False)
       for name, (path, value, expect) in _swap_cases(SAMPLE_FIELDS).items()},
}


@dataclass
class InspectLog:
    """The genuine subject log: its members (name, JSON) in archive order."""

    members: list[tuple[str, Any]]

    @property
    def samples(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, value) for name, value in self.members if name.startswith("samples/")]


def _inspect_log() -> InspectLog:
    return InspectLog(list(fixture_members("subject").items()))


def _archive(members: list[tuple[str, Any]], **options: Any) -> bytes:
    return zstd_zip([(name, value if isinstance(value, bytes) else json.dumps(value).encode("utf-8"))
                     for name, value in members], **options)


def _sample_changed(log: InspectLog, change: SampleChange, rename: bool, index: int = 1) -> list[tuple[str, Any]]:
    """The log's members with sample ``index`` (in archive order) changed; ``rename``: its member named after its
    new id, as Inspect names it (``samples/<id>_epoch_<n>.json``)."""
    samples = [value for _, value in log.samples]
    members = []
    for name, value in log.members:
        if name.startswith("samples/") and value is samples[index]:
            changed = change(value, samples)
            if rename:
                name = f"samples/{changed['id']}_epoch_{changed['epoch']}.json"
            members.append((name, changed))
        else:
            members.append((name, value))
    return members


def _header_changed(log: InspectLog, path: tuple[str, ...], value: Any) -> list[tuple[str, Any]]:
    return [(name, _set(member, path, value) if name == "header.json" else member) for name, member in log.members]


def _without(log: InspectLog, which: Callable[[str], bool]) -> list[tuple[str, Any]]:
    return [(name, value) for name, value in log.members if not which(name)]


def _renamed(log: InspectLog, old: str, new: str) -> list[tuple[str, Any]]:
    return [(new if name == old else name, value) for name, value in log.members]


def _flip(raw: bytes, fraction: float) -> bytes:
    flipped = bytearray(raw)
    flipped[int(fraction * (len(raw) - 1))] ^= 0x5A
    return bytes(flipped)


FIRST, SECOND = "samples/sum-01_epoch_1.json", "samples/sum-02_epoch_1.json"
ArchiveCase = Callable[[InspectLog], bytes]
ARCHIVE_CASES: dict[str, tuple[ArchiveCase, Expect]] = {
    "rebuilt": (lambda log: _archive(log.members), "read"),
    "bad-crc": (lambda log: _archive(log.members, payloads={FIRST: zstandard.ZstdCompressor().compress(
        json.dumps(dict(log.members)[FIRST]).encode().replace(b"sum-01", b"sum-00"))}), "refuse"),
    "declared-size-smaller": (lambda log: _archive(log.members, declared_sizes={FIRST: 100}), "refuse"),
    "declared-size-larger": (lambda log: _archive(log.members, declared_sizes={FIRST: 50_000}), "refuse"),
    "declared-size-4GiB": (lambda log: _archive(log.members, declared_sizes={FIRST: 0xFFFF_FFFF}), "refuse"),
    "header-declared-4GiB": (lambda log: _archive(log.members, declared_sizes={"header.json": 0xFFFF_FFFF}), "refuse"),
    "not-zstd": (lambda log: _archive(log.members, payloads={FIRST: b"\x28\xb5\x2f\xfd garbage"}), "refuse"),
    "empty-zstd-member": (lambda log: _archive(log.members, payloads={FIRST: b""}), "refuse"),
    "no-header": (lambda log: _archive(_without(log, lambda n: n == "header.json")), "refuse"),
    "no-samples": (lambda log: _archive(_without(log, lambda n: n.startswith("samples/"))), "refuse"),
    "a-sample-missing": (lambda log: _archive(_without(log, lambda n: n == FIRST)), "refuse"),
    "completed-samples-41": (lambda log: _archive(_header_changed(log, ("results", "completed_samples"), 41)),
                             "refuse"),
    "completed-samples-2^64": (lambda log: _archive(_header_changed(log, ("results", "completed_samples"), 2**64)),
                               "refuse"),
    "completed-samples-text": (lambda log: _archive(_header_changed(log, ("results", "completed_samples"), "40")),
                               "any"),
    "header-eval-deleted": (lambda log: _archive(_header_changed(log, ("eval",), DELETE)), "refuse"),
    "header-eval-list": (lambda log: _archive(_header_changed(log, ("eval",), [1])), "refuse"),
    "header-not-json": (lambda log: _archive([(n, b"{" if n == "header.json" else v) for n, v in log.members]),
                        "refuse"),
    "header-nan": (lambda log: _archive([(n, json.dumps(v).replace('"epochs": 2', '"epochs": NaN').encode()
                                          if n == "header.json" else v) for n, v in log.members]), "refuse"),
    "header-json-list": (lambda log: _archive([(n, [v] if n == "header.json" else v) for n, v in log.members]),
                         "refuse"),
    "model-lone-surrogate": (lambda log: _archive(_header_changed(log, ("eval", "model"), "mock\ud800")), "any"),
    "task-lone-surrogate": (lambda log: _archive(_header_changed(log, ("eval", "task"), "\udfff")), "any"),
    "created-lone-surrogate": (lambda log: _archive(_header_changed(log, ("eval", "created"), "\ud800")), "any"),
    "status-lone-surrogate": (lambda log: _archive(_header_changed(log, ("status",), "\ud800")), "any"),
    "version-lone-surrogate": (lambda log: _archive(_header_changed(log, ("eval", "packages", "inspect_ai"),
                                                                    "\ud800")), "any"),
    "model-args-lone-surrogate": (lambda log: _archive(_header_changed(log, ("eval", "model_args"),
                                                                       {"k": "\ud800"})), "any"),
    "task-args-deep": (lambda log: _archive(_header_changed(log, ("eval", "task_args"), _nested(200))), "any"),
    "model-control-chars": (lambda log: _archive(_header_changed(log, ("eval", "model"), "\x1b[2J\x00\r")), "any"),
    "two-headers": (lambda log: _archive([*log.members, ("header.json", _set(dict(log.members)["header.json"],
                                                                           ("eval", "model"), "other"))]), "any"),
    "re-logged-sample": (lambda log: _archive([*log.members, (FIRST, dict(log.members)[FIRST])]), "read"),
    "member-traversal-name": (lambda log: _archive(_renamed(log, FIRST, "samples/../../../tmp/sum-01_epoch_1.json")),
                              "read"),
    "member-absolute-name": (lambda log: _archive(_renamed(log, FIRST, "/samples/sum-01_epoch_1.json")), "refuse"),
    "member-backslash-name": (lambda log: _archive(_renamed(log, FIRST, "samples\\sum-01_epoch_1.json")), "refuse"),
    "extra-traversal-member": (lambda log: _archive([*log.members, ("../../evil.json", {"x": 1})]), "read"),
    "extra-sample-under-traversal": (lambda log: _archive([*log.members, (
        "samples/../sum-99_epoch_1.json", _set(dict(log.members)[FIRST], ("id",), "sum-99"))]), "refuse"),
    "a-sample-twice-under-two-names": (lambda log: _archive([*log.members, (
        "samples/copy_epoch_1.json", dict(log.members)[FIRST])]), "refuse"),
    "sample-not-utf8": (lambda log: _archive([(n, json.dumps(v).encode().replace(b"What", b"Wh\xfft", 1)
                                               if n == FIRST else v) for n, v in log.members]), "refuse"),
    "sample-nan": (lambda log: _archive([(n, json.dumps(v).encode().replace(b'"value": 0.5', b'"value": NaN', 1)
                                          if n == FIRST else v) for n, v in log.members]), "refuse"),
    "sample-truncated": (lambda log: _archive([(n, json.dumps(v).encode()[:-10] if n == FIRST else v)
                                               for n, v in log.members]), "refuse"),
    "empty-archive": (lambda log: _archive([]), "refuse"),
    "junk-before-the-archive": (lambda log: b"#!/bin/sh\n" * 10 + _archive(log.members), "any"),
    "junk-after-the-archive": (lambda log: _archive(log.members) + b"\x00" * 100, "any"),
    **{f"byte-flip-{i}": (lambda log, f=i / 9: _flip(_archive(log.members), f), "any") for i in range(10)},
}
INSPECT_EVAL_CASES = ([pytest.param(f"file-{k}", id=f"file-{k}") for k in FILE_CASES]
                      + [pytest.param(k, id=k) for k in ARCHIVE_CASES]
                      + [pytest.param(f"sample-{k}", id=f"sample-{k}") for k in SAMPLE_CASES])


def _expected_rows(expect: Expect, kind: str) -> dict[str, int]:
    return {"subject": 40} if expect == "read" and kind not in ("score-extra-scorer",) else {}


@pytest.mark.parametrize("kind", INSPECT_EVAL_CASES)
def test_inspect_eval(kind: str, tmp_path: Path) -> None:
    log = _inspect_log()
    if kind.startswith("file-"):
        raw = (INSPECT.parent / "data" / "subject.eval").read_bytes()
        path, expect = file_case(kind[5:], raw, tmp_path, "hostile.eval", archive=True)
    elif kind in ARCHIVE_CASES:
        make, expect = ARCHIVE_CASES[kind]
        path = _write(tmp_path / "hostile.eval", make(log))
    else:
        change, expect, rename = SAMPLE_CASES[kind.removeprefix("sample-")]
        path = _write(tmp_path / "hostile.eval", _archive(_sample_changed(log, change, rename)))
    run_export(f"inspect .eval {kind}", INSPECT, {"subject": path}, tmp_path, expect, rows=_expected_rows(expect, kind))


def test_inspect_declared_counts(tmp_path: Path) -> None:
    """A sample removed from a ``.eval`` log and ``results.completed_samples`` lowered to match: the header's
    ``results.total_samples`` (and ``eval.dataset.samples`` × ``eval.config.epochs``) still say 40, the log 39."""
    log = _inspect_log()
    header = dict(log.members)["header.json"]
    assert header["results"]["total_samples"] == 40 == header["eval"]["dataset"]["samples"] * header["eval"]["config"]["epochs"]
    members = _header_changed(InspectLog(_without(log, lambda n: n == FIRST)), ("results", "completed_samples"), 39)
    path = _write(tmp_path / "hostile.eval", _archive(members))
    run_export("inspect .eval a sample missing, completed_samples lowered to 39", INSPECT, {"subject": path},
               tmp_path, "refuse")


def _inspect_json_raw(side: str) -> bytes:
    return gzip.decompress((EVALUATORS / "inspect" / f"{side}.json.gz").read_bytes())


@pytest.fixture(scope="module")
def inspect_json_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The inspect-accuracy example read from the logs in Inspect's JSON form (``format: inspect-json``)."""
    folder = tmp_path_factory.mktemp("inspect-json")
    for side in ("baseline", "subject"):
        (folder / f"{side}.json").write_bytes(_inspect_json_raw(side))
    text = INSPECT.read_text(encoding="utf-8")
    text = text.replace("{path: data/baseline.eval, format: inspect-eval}", "{path: baseline.json, format: inspect-json}")
    text = text.replace("{path: data/subject.eval, format: inspect-eval}", "{path: subject.json, format: inspect-json}")
    assert text.count("json, format: inspect-json}") == 2
    (folder / "spec.yaml").write_text(text, encoding="utf-8")
    return folder / "spec.yaml"


DOCUMENT_CASES: dict[str, tuple[Callable[[dict[str, Any]], Any], Expect]] = {
    "re-serialised": (lambda d: d, "read"),
    "samples-deleted": (lambda d: _set(d, ("samples",), DELETE), "refuse"),
    "samples-null": (lambda d: _set(d, ("samples",), None), "refuse"),
    "samples-object": (lambda d: _set(d, ("samples",), {"0": d["samples"][0]}), "refuse"),
    "samples-empty": (lambda d: _set(d, ("samples",), []), "refuse"),
    "a-sample-missing": (lambda d: _set(d, ("samples",), d["samples"][1:]), "refuse"),
    "a-sample-twice": (lambda d: _set(d, ("samples",), [*d["samples"], d["samples"][0]]), "refuse"),
    "completed-samples-39": (lambda d: _set(d, ("results", "completed_samples"), 39), "refuse"),
    "eval-deleted": (lambda d: _set(d, ("eval",), DELETE), "refuse"),
    "model-lone-surrogate": (lambda d: _set(d, ("eval", "model"), "\ud800"), "any"),
    "plan-deep": (lambda d: _set(d, ("plan",), _nested(200)), "any"),
    "a-list": (lambda d: [d], "refuse"),
}
INSPECT_JSON_CASES = ([pytest.param(f"file-{k}", id=f"file-{k}") for k in FILE_CASES]
                      + [pytest.param(k, id=k) for k in DOCUMENT_CASES]
                      + [pytest.param("not-utf8", id="not-utf8"), pytest.param("nan-token", id="nan-token")]
                      + [pytest.param(f"sample-{k}", id=f"sample-{k}") for k in SAMPLE_CASES
                         if not SAMPLE_CASES[k][2]])  # a renamed member is the .eval's own matter


@pytest.mark.parametrize("kind", INSPECT_JSON_CASES)
def test_inspect_json(kind: str, inspect_json_spec: Path, tmp_path: Path) -> None:
    raw = _inspect_json_raw("subject")
    if kind.startswith("file-"):
        path, expect = file_case(kind[5:], raw, tmp_path, "hostile.json")
    elif kind == "not-utf8":
        path, expect = _write(tmp_path / "hostile.json", raw.replace(b"What", b"Wh\xc3t", 1)), "refuse"
    elif kind == "nan-token":
        assert b'"value": 0.5' in raw
        path, expect = _write(tmp_path / "hostile.json", raw.replace(b'"value": 0.5', b'"value": NaN', 1)), "refuse"
    elif kind in DOCUMENT_CASES:
        change, expect = DOCUMENT_CASES[kind]
        path = _write(tmp_path / "hostile.json", json.dumps(change(json.loads(raw))).encode())
    else:
        change, expect, _ = SAMPLE_CASES[kind.removeprefix("sample-")]
        document = json.loads(raw)
        samples = document["samples"]
        document["samples"] = [change(s, samples) if i == 1 else s for i, s in enumerate(samples)]
        path = _write(tmp_path / "hostile.json", json.dumps(document).encode())
    run_export(f"inspect json {kind}", inspect_json_spec, {"subject": path}, tmp_path, expect,
               rows=_expected_rows(expect, kind))


# ------------------------------------------------------------------------------------------- promptfoo

PROMPTFOO_PROVIDERS = (provider("openai:gpt-4o-mini"), provider("ollama:chat:llama3.1:8b", "llama-8b"))
PROMPTFOO_TESTS = 30
SUBJECT_ID = "ollama:chat:llama3.1:8b"


def promptfoo_lines() -> list[dict[str, Any]]:
    """One ``promptfoo eval --output results.jsonl`` of two providers, two prompts and 30 tests (80 % and 70 %
    pass)."""
    rng = np.random.default_rng(31)
    passes = [[(rng.random(PROMPTFOO_TESTS) < chance).tolist() for _ in range(2)] for chance in (0.8, 0.7)]
    return evaluation(PROMPTFOO_PROVIDERS, passes)


@pytest.fixture(scope="module")
def promptfoo_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``paired.metric_delta`` spec on ``success`` reading each provider of one results file."""
    folder = tmp_path_factory.mktemp("promptfoo")
    write_jsonl(folder / "results.jsonl", promptfoo_lines())
    inputs = {"baseline": {"path": "results.jsonl", "format": "promptfoo-jsonl",
                           "read": {"provider": {"id": "openai:gpt-4o-mini"}}},
              "subject": {"path": "results.jsonl", "format": "promptfoo-jsonl",
                          "read": {"provider": {"id": SUBJECT_ID}}}}
    gates = [{"id": f"no-{side}-unmatched", "metric": f"delta.pairing.unmatched_{side}", "max": 0}
             for side in ("baseline", "subject")]
    document = {"certa": 1, "name": "promptfoo-hostile", "seed": 3, "profile": "dev", "inputs": inputs,
                "stages": [{"id": "delta", "use": "paired.metric_delta",
                            "with": {"baseline": "baseline", "subject": "subject", "metric": "success",
                                     "margin": 0.3}}],
                "gates": gates}
    (folder / "spec.yaml").write_text(json.dumps(document, indent=1), encoding="utf-8")
    assert invoke("run", folder / "spec.yaml", "--no-record").exit_code in (0, 1)
    return folder / "spec.yaml"


PROMPTFOO_FIELDS = {
    "testIdx": {"int": "any"},  # test 7 under this prompt twice: refused, or another test's column
    "promptIdx": {"int": "any"},
    "score": {"int": "read", "float": "read", "negative": "read", "beyond-int64": "read"},
    "success": {"bool": "read"},
    "namedScores": {"null": "read", "deleted": "read"},
    "provider": {},
    "provider.id": {"text": "any"},  # the line is another provider's, the subject one result short
    "provider.label": {},  # one result of the subject's id under another label: two providers of one id
    "prompt": {},
    "prompt.raw": {"text": "any"},  # another prompt text: an identity mismatch, which the spec records
    "prompt.label": {"*": "any"},
    "testCase": {"*": "any"},
    "testCase.vars": {"*": "any", "deleted": "refuse"},
    "evalId": {"*": "read"},
    "response": {"*": "read"},
    "gradingResult": {"*": "read"},
}


def _subject_line(change: Callable[[dict[str, Any]], Any], *, every: bool = False) -> Callable[[list], list]:
    """The subject provider's first result (every one with ``every``) changed."""
    def apply(lines: list[dict[str, Any]]) -> list[Any]:
        out, done = [], False
        for line in lines:
            if line["provider"]["id"] == SUBJECT_ID and (every or not done):
                out.append(change(line))
                done = True
            else:
                out.append(line)
        return out
    return apply


PROMPTFOO_CASES: dict[str, tuple[Callable[[list], list], Expect]] = {
    "re-serialised": (lambda lines: lines, "read"),
    "duplicate-result": (lambda lines: [*lines, next(line for line in lines if line["provider"]["id"] == SUBJECT_ID)],
                         "refuse"),
    "a-result-dropped": (lambda lines: [line for line in lines if line["provider"]["id"] != SUBJECT_ID
                                        or line["testIdx"] != 0 or line["promptIdx"] != 2], "any"),
    "test-index-of-another": (_subject_line(lambda line: _set(line, ("testIdx",), 1)), "refuse"),
    "third-provider-same-id": (_subject_line(lambda line: _set(line, ("provider", "label"), "other")), "refuse"),
    "label-lone-surrogate-everywhere": (_subject_line(lambda line: _set(line, ("provider", "label"), "l\ud800"),
                                                      every=True), "any"),
    "label-control-chars-everywhere": (_subject_line(lambda line: _set(line, ("provider", "label"), "\x1b[2J\r\n"),
                                                     every=True), "read"),
    "prompt-raw-lone-surrogate": (_subject_line(lambda line: _set(line, ("prompt", "raw"), "Q\udfff")), "any"),
    "prompt-label-lone-surrogate": (_subject_line(lambda line: _set(line, ("prompt", "label"), "\ud800")), "any"),
    "vars-lone-surrogate": (_subject_line(lambda line: _set(line, ("testCase", "vars", "question"), "\ud800")),
                            "any"),
    "eval-id-lone-surrogate": (_subject_line(lambda line: _set(line, ("evalId",), "e\ud800"), every=True), "any"),
    "named-score-lone-surrogate-key": (_subject_line(lambda line: _set(line, ("namedScores",), {"\ud800": 1}),
                                                     every=True), "any"),
    "named-score-text": (_subject_line(lambda line: _set(line, ("namedScores",), {"q": "high"})), "refuse"),
    "named-score-nan": (_subject_line(lambda line: _set(line, ("namedScores",), {"q": math.nan})), "refuse"),
    "named-scores-on-one-line": (_subject_line(lambda line: _set(line, ("namedScores",), {"q": 1})), "refuse"),
    "named-score-collides-with-score": (_subject_line(lambda line: _set(line, ("namedScores",), {"": 1}),
                                                      every=True), "any"),
    "vars-deep": (_subject_line(lambda line: _set(line, ("testCase", "vars"), _nested(200))), "refuse"),
    "line-not-object": (lambda lines: [*lines, [1, 2]], "refuse"),
    **{name: (_subject_line(lambda line, p=path, v=value: _set(line, p, v)), expect)
       for name, (path, value, expect) in _swap_cases(PROMPTFOO_FIELDS).items()},
}
PROMPTFOO_RAW_CASES: dict[str, tuple[Bytes, Expect]] = {
    "not-utf8": (_raw_replace(b"What is 3", b"What \xff 3"), "refuse"),
    "nan-token": (_raw_replace(b'"score":1,', b'"score":NaN,'), "refuse"),
    "testidx-5000-digits": (_raw_replace(b'"testIdx":0,', b'"testIdx":' + b"9" * 5000 + b","), "refuse"),
}
PROMPTFOO_ALL = ([pytest.param(f"file-{k}", id=f"file-{k}") for k in FILE_CASES]
                 + [pytest.param(k, id=k) for k in PROMPTFOO_RAW_CASES]
                 + [pytest.param(k, id=k) for k in PROMPTFOO_CASES])


@pytest.mark.parametrize("kind", PROMPTFOO_ALL)
def test_promptfoo(kind: str, promptfoo_spec: Path, tmp_path: Path) -> None:
    raw = (promptfoo_spec.parent / "results.jsonl").read_bytes()
    if kind.startswith("file-"):
        path, expect = file_case(kind[5:], raw, tmp_path, "hostile.jsonl")
    elif kind in PROMPTFOO_RAW_CASES:
        change, expect = PROMPTFOO_RAW_CASES[kind]
        path = _write(tmp_path / "hostile.jsonl", change(raw))
    else:
        change_lines, expect = PROMPTFOO_CASES[kind]
        path = _write(tmp_path / "hostile.jsonl", _jsonl(change_lines(_records(raw))))
    run_export(f"promptfoo {kind}", promptfoo_spec, {"subject": path}, tmp_path, expect,
               rows={"subject": 2 * PROMPTFOO_TESTS} if expect == "read" else None)


# ----------------------------------------------------------------------------- hypothesis-drawn sample ids

EXISTING_IDS = {f"sum-{i:02d}" for i in range(1, 21)}


def _relabelled(side: str, ids: dict[str, str]) -> bytes:
    """The fixture log of ``side`` with sample ``old`` renamed ``ids[old]`` (in every epoch's sample and member
    name, as Inspect names members: ``samples/<id>_epoch_<n>.json``)."""
    members = []
    for name, value in fixture_members(side).items():
        if name.startswith("samples/") and value["id"] in ids:
            value = {**value, "id": ids[value["id"]]}
            name = f"samples/{value['id']}_epoch_{value['epoch']}.json"
        members.append((name, value))
    return _archive(members)


def _drawn_ids(count: int):  # type: ignore[no-untyped-def]
    from hypothesis import strategies as st

    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),  # NUL: a ZIP name
                   min_size=1, max_size=16)  # ends there (no tool writes one); Cs: lone surrogates, refused
    return st.lists(text.filter(lambda i: i not in EXISTING_IDS), min_size=count, max_size=count, unique=True)


@pytest.mark.parametrize("sides", ["both", "subject-only"])
def test_export_ids(sides: str, tmp_path: Path) -> None:
    """Sample ids drawn by hypothesis (any characters but lone surrogates and NUL: ``/``, ``..``, control
    characters, newlines, right-to-left marks) given to 3 samples of an Inspect ``.eval`` log: on both sides every
    sample is read and paired; on the subject only, the run is recorded with those 3 samples (6 epochs) unmatched
    on each side (their ids then in the certificate)."""
    from hypothesis import given, settings

    examples = iter(range(10**6))

    @settings(max_examples=8, deadline=None, derandomize=True, database=None)
    @given(_drawn_ids(3))
    def one(drawn: list[str]) -> None:
        folder = tmp_path / f"example-{next(examples)}"
        folder.mkdir()
        ids = dict(zip(["sum-03", "sum-11", "sum-20"], drawn))
        subject = _write(folder / "subject.eval", _relabelled("subject", ids))
        inputs = {"subject": subject}
        if sides == "both":
            inputs["baseline"] = _write(folder / "baseline.eval", _relabelled("baseline", ids))
        content = run_export(f"inspect ids {drawn!r} ({sides})", INSPECT, inputs, folder, "read",
                             rows={"subject": 40, "baseline": 40})
        assert content is not None
        pairing = content["stages"]["match"]["pairing"]
        unmatched = 0 if sides == "both" else 6  # 3 samples of 2 epochs each
        assert (pairing["unmatched_baseline"], pairing["unmatched_subject"]) == (unmatched, unmatched), pairing

    one()
