"""engine.run end to end: certificate content, determinism across processes, inputs, and refusals."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from certa import engine
from certa.engine import InputError, SpecError, StageError, run
from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.core.certificate import certificate_problems
from certa.engine.core.tables import columns_to_csv_bytes
from certa.engine.core.stages import REGISTRY
from certa.ledger import Ledger

from tests.conftest import OFFLINE_EXAMPLES, ROOT, window_columns, write_spec


def test_public_api_is_pinned() -> None:
    assert engine.__all__ == sorted(engine.__all__, key=str.casefold)
    assert set(engine.__all__) == {"CertaError", "InputError", "LedgerError", "LedgerIntegrityError", "Plan",
                                   "ProfileAbort", "RunResult", "SpecError", "StageError",
                                   "load_plan", "run"}


def test_certificate_content_is_complete_and_hash_is_over_content(small_spec: Path) -> None:
    result = run(small_spec)
    cert = result.certificate
    assert certificate_problems(cert) == []
    content = cert["content"]
    assert cert["content_sha256"] == canonical_sha256(content)
    assert content["verdict"] == result.verdict == "PASS"
    assert content["spec"]["name"] == "small-paired" and len(content["spec"]["sha256"]) == 64
    assert content["knobs_hash"] == canonical_sha256(content["knobs"])
    assert content["seed"]["root"] == "7" and set(content["seed"]["stages"]) == {"ratio"}
    assert [i["name"] for i in content["inputs"]] == ["baseline", "subject"]
    assert all(i["rows"] == 60 for i in content["inputs"])
    assert set(content["versions"]) >= {"certa", "python", "numpy", "scipy", "numba"}
    assert content["versions"]["numpy"] == np.__version__
    assert content["gates"][0]["passed"] is True
    assert "time_utc" in cert["issued"] and "time_utc" not in str(content)
    machine = cert["issued"]["platform"]
    assert machine["machine"] == platform.machine() and machine["system"] == platform.system()
    assert machine["numpy_simd"] and "platform" not in content  # recorded, outside the hash


def _start_hash_subprocess(spec: Path, hash_seed: str = "0") -> subprocess.Popen:
    """A fresh process running ``spec`` under ``PYTHONHASHSEED=hash_seed``; ``_hash_of`` waits for its content hash."""
    code = "import sys; from certa.engine import run; print(run(sys.argv[1]).certificate['content_sha256'])"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.Popen([sys.executable, "-c", code, str(spec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=spec.parent, env=env)


def _hash_of(child: subprocess.Popen) -> str:
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    return out.strip()


def _hashes_in_subprocesses(spec: Path, hash_seeds: tuple[str, ...], in_process: Callable[[], str]) -> list[str]:
    """The content hashes of ``spec`` run in one fresh process per hash seed (all started at once, running while
    ``in_process`` runs here), then ``in_process()``'s."""
    children = [_start_hash_subprocess(spec, seed) for seed in hash_seeds]
    try:
        here = in_process()
        return [_hash_of(child) for child in children] + [here]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()


def test_same_spec_inputs_and_seed_give_the_same_hash_across_processes(small_spec: Path) -> None:
    first, second, here = _hashes_in_subprocesses(small_spec, ("0", "0"),
                                                  lambda: run(small_spec).certificate["content_sha256"])
    assert first == second == here and len(here) == 64


@pytest.mark.slow
@pytest.mark.parametrize("example", OFFLINE_EXAMPLES)
def test_every_example_spec_is_deterministic_across_processes_and_hash_seeds(example: str) -> None:
    """Set or dict iteration order (which PYTHONHASHSEED changes) must never reach a certificate."""
    spec = ROOT / "specs" / example / "spec.yaml"
    first, second, here = _hashes_in_subprocesses(spec, ("1", "2"), lambda: run(spec).content_sha256)
    assert first == second == here and len(here) == 64


def test_a_different_seed_changes_the_hash(small_spec: Path) -> None:
    original = run(small_spec).content_sha256
    other = write_spec(small_spec.parent, small_spec.read_text().replace("seed: 7", "seed: 8"))
    assert run(other).content_sha256 != original


def test_in_memory_inputs_hash_like_their_canonical_csv_file(small_spec: Path) -> None:
    base, subj = window_columns(60, seed=3)
    from_memory = run(small_spec, inputs={"baseline": base, "subject": subj})
    assert from_memory.content_sha256 == run(small_spec).content_sha256
    shas = {i["name"]: i["sha256"] for i in from_memory.certificate["content"]["inputs"]}
    import hashlib
    assert shas["subject"] == hashlib.sha256(columns_to_csv_bytes(subj)).hexdigest()


def test_stage_streams_do_not_depend_on_other_stages(small_spec: Path) -> None:
    alone = run(small_spec).certificate["content"]["stages"]["ratio"]
    text = small_spec.read_text().replace("gates:", "  - id: again\n    use: paired.ppl_ratio\n"
                                                    "    with: {baseline: baseline, subject: subject}\ngates:", 1)
    with_other = run(write_spec(small_spec.parent, text)).certificate["content"]["stages"]
    assert with_other["ratio"] == alone
    assert with_other["again"]["token_perplexity"]["ci"] != alone["token_perplexity"]["ci"]


@pytest.mark.parametrize("problem, error_type, message", [
    ("nan", InputError, "not finite"),
    ("duplicate", InputError, "duplicate window_id"),
    ("pin", InputError, "SHA-256"),
    ("missing_file", InputError, "cannot read"),
    ("text_in_numbers", InputError, "is not a number"),
    ("single_pair", StageError, "at least 2"),
    ("missing_column", InputError, "no column 'tokens'"),
])
def test_invalid_input_is_refused_and_nothing_is_recorded(small_spec: Path, tmp_path: Path, problem: str,
                                                          error_type: type, message: str) -> None:
    data = small_spec.parent / "data" / "subject.csv"
    lines = data.read_text().splitlines()
    if problem == "nan":
        lines[5] = lines[5].rsplit(",", 1)[0] + ",nan"
    elif problem == "duplicate":
        lines[6] = lines[5]
    elif problem == "pin":
        small_spec.write_text(small_spec.read_text().replace(
            "data/subject.csv}", "data/subject.csv, sha256: " + "ab" * 32 + "}"))
    elif problem == "missing_file":
        data.unlink()
    elif problem == "text_in_numbers":
        lines[3] = lines[3].rsplit(",", 1)[0] + ",abc"
    elif problem == "single_pair":
        lines = lines[:2]
    elif problem == "missing_column":
        lines = [",".join(c for c in line.split(",")[:1] + line.split(",")[2:]) for line in lines]
    if problem not in ("pin", "missing_file"):
        data.write_text("\n".join(lines) + "\n")
    with Ledger.open(tmp_path / "l.db") as ledger:
        with pytest.raises(error_type, match=message) as info:
            run(small_spec, ledger=ledger)
        assert info.value.exit_code == 2
        assert ledger.entry_count() == 0 and ledger.runs() == []


def test_undeclared_in_memory_input_is_a_spec_error(small_spec: Path) -> None:
    with pytest.raises(SpecError, match="not declared"):
        run(small_spec, inputs={"candidate": {"a": [1]}})


def test_gate_on_missing_output_fails_closed(small_spec: Path) -> None:
    """An output the schema allows but this run's data do not give (no phase column: no drift) fails its gate."""
    text = small_spec.read_text().replace("token_perplexity.display_ci[1]\n    max: 1.05",
                                          "drift.within_band\n    equals: true")
    result = run(write_spec(small_spec.parent, text))
    gate = result.certificate["content"]["gates"][0]
    assert result.verdict == "FAIL" and gate["passed"] is False
    assert gate["reason"] == "metric not found: no output at 'ratio.drift'"


def test_gate_on_an_output_no_version_gives_is_refused_before_running(small_spec: Path) -> None:
    text = small_spec.read_text().replace("display_ci[1]", "display_ci[5]")
    with pytest.raises(SpecError, match=r"gates\[0\]\.metric: 'ratio.token_perplexity.display_ci' holds at most 2"):
        run(write_spec(small_spec.parent, text))


def test_example_spec_in_repository_passes() -> None:
    result = run(ROOT / "specs" / "paired-ratio" / "spec.yaml")
    assert result.verdict == "PASS"
    pm = result.certificate["content"]["stages"]["ratio"]["token_perplexity"]
    assert 1.0 < pm["display_ci"][0] < pm["ratio_vs_baseline"] < pm["display_ci"][1] < 1.05


def test_notify_reports_each_stage_and_recording(small_spec: Path, tmp_path: Path) -> None:
    messages: list[str] = []
    with Ledger.open(tmp_path / "l.db") as ledger:
        run(small_spec, ledger=ledger, notify=messages.append)
    assert messages[0] == f"[1/1] stage 'ratio' (paired.ppl_ratio v{REGISTRY['paired.ppl_ratio'].version})"
    assert messages[-1].startswith("recording run ") and "decision(s)" in messages[-1]


def _window_jsonl(path: Path, columns: dict, *, odd_id: str | None = None) -> None:
    """The windows as JSON Lines; ``odd_id`` replaces the fourth window's id (one side only: it is unmatched, and an
    unmatched id is listed in the run's decisions)."""
    ids = list(columns["window_id"])
    if odd_id is not None:
        ids[3] = odd_id
    path.write_text("".join(json.dumps({"window_id": i, "tokens": int(t), "mean_nll": float(m)}) + "\n"
                            for i, t, m in zip(ids, columns["tokens"], columns["mean_nll"])), encoding="utf-8")


def test_text_that_is_not_utf8_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    """An item id with a lone surrogate (a JSON escape ``\\ud800`` with no pair) listed as unmatched cannot be in a
    ledger entry (RFC 8785 text is UTF-8): one ``InputError`` naming the text, nothing recorded, the ledger as it
    was; a new ledger file is removed again (it was left empty, after an internal error)."""
    from certa.engine.services.run_report import run_spec_file

    base, subj = window_columns(40, seed=2)
    (tmp_path / "data").mkdir()
    _window_jsonl(tmp_path / "data" / "baseline.jsonl", base)
    _window_jsonl(tmp_path / "data" / "subject.jsonl", subj)
    spec = write_spec(tmp_path, """\
        certa: 1
        name: text
        seed: 1
        profile: dev
        inputs:
          baseline: {path: data/baseline.jsonl}
          subject: {path: data/subject.jsonl}
        stages:
          - {id: ratio, use: paired.ppl_ratio, with: {baseline: baseline, subject: subject, replicates: 200}}
        """)
    db = tmp_path / "ledger.db"
    run_spec_file(spec, ledger=str(db))
    _window_jsonl(tmp_path / "data" / "subject.jsonl", subj, odd_id="w\ud800")
    with pytest.raises(InputError, match=r"cannot be recorded: a decision would hold text that is not UTF-8, "
                                         r"'w\\ud800': it holds a lone surrogate"):
        run_spec_file(spec, ledger=str(db))
    with Ledger.open(db) as ledger:
        assert len(ledger.runs()) == 1
    fresh = tmp_path / "fresh.db"
    with pytest.raises(InputError, match="not UTF-8"):
        run_spec_file(spec, ledger=str(fresh))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("fresh.db")]


def test_a_certificate_that_would_hold_text_that_is_not_utf8_names_where(tmp_path: Path) -> None:
    """A model name an export states with a lone surrogate (an Inspect log's ``eval.model``) is in the
    certificate's sources: the seal refuses it naming the path, before the ledger is written."""
    from tests.core.evidence.inspect_epochs import fixture_members
    from tests.core.evidence.zstd_zip import zstd_zip

    members = fixture_members("subject")
    members["header.json"]["eval"]["model"] = "mock\ud800"
    log = tmp_path / "subject.eval"
    log.write_bytes(zstd_zip({n: json.dumps(v).encode() for n, v in members.items()}))
    with Ledger.open(tmp_path / "l.db") as ledger:
        with pytest.raises(InputError, match=r"the certificate would hold text that is not UTF-8 at "
                                             r"stages\.match\.sources\.subject\.models\[0\]\.value \('mock\\ud800'\)"):
            run(ROOT / "specs" / "inspect-accuracy" / "spec.yaml", ledger=ledger,
                input_paths={"subject": log})
        assert ledger.entry_count() == 0


def test_a_new_ledger_is_removed_after_any_error_that_left_it_empty(small_spec: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug while recording (here a ``RuntimeError`` from the seal) leaves no empty ledger file behind either."""
    from certa.engine.services import run as run_module
    from certa.engine.services.run_report import run_spec_file

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(run_module, "seal", broken)
    with pytest.raises(RuntimeError, match="boom"):
        run_spec_file(small_spec, ledger=str(tmp_path / "new.db"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("new.db")]
