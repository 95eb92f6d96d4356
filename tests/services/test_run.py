"""engine.run end to end: certificate content, determinism across processes, inputs, and refusals."""

from __future__ import annotations

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

from tests.conftest import ROOT, window_columns, write_spec


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
@pytest.mark.parametrize("example", sorted(p.parent.name for p in (ROOT / "specs").glob("*/spec.yaml")))
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
