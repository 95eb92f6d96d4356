"""Memory bounded by what the limits say (issue 31, item 5): Inspect logs of about 100 KB on disk whose one sample
member is 64 MiB of JSON (and an lm-eval results file with a 64 MiB field certa does not read) (``tests/core/evidence/inspect_bombs.py``), each run through ``certa run`` in a fresh
process whose own peak resident memory (``VmHWM``; ``ru_maxrss`` would start from pytest's) and time are measured.

Before: the member was parsed by ``json`` into Python objects, about 26 times its size: 1.7 GB for 64 MiB of
empty objects, 3.3 GB and 9 s for a 64 MiB ``input`` (hashed). Now a sample's transcript is checked as JSON and
never built, and the fields certa parses are bounded by ``cell_bytes`` before they are: every case stays under
300 MB (the command's own floor, start-up and the fixture, is about 70 MB), a refusal is one ``error:`` line
naming the input, the member and the numbers, and a genuine sample with a large transcript is read as the
fixture's own sample is (the same verdict and figures).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from certa.engine.core.evidence import read_inspect_eval, read_inspect_json
from tests.core.evidence.inspect_bombs import grown_json_log, grown_log
from .conftest import check

pytestmark = pytest.mark.adversarial

ROOT = Path(__file__).resolve().parents[2]
MIB64 = 64 << 20
PEAK_MB = 300
ADDRESS_SPACE = 6 << 30
"""The child's address-space limit: a regression fails at 6 GiB instead of filling the machine."""

MEASURED = """
import json, os, sys, time
from certa.cli import main
started = time.process_time()
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else 1
seconds = time.process_time() - started
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
with open(os.environ["MEASURED_TO"], "w") as out:
    json.dump({"code": code, "seconds": seconds, "peak_mb": peak / 1024}, out)
"""
"""``certa ARGS`` in this process; writes its exit code, the command's CPU seconds (after start-up: the process's own
CPU time, which other processes on a loaded machine do not inflate as they do wall time) and the process's peak
resident memory to the file ``MEASURED_TO`` names."""


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def measured_run(folder: Path, subject: Path, fmt: str = "inspect-eval", *, example: str = "inspect-accuracy",
                 name: str = "subject") -> tuple[Result, dict]:
    """``certa run`` of ``specs/<example>`` (copied to ``folder``) with ``subject`` as its input ``name`` (an Inspect
    subject's format ``fmt``), ``--no-record``, in a fresh process: the result (for the sweep's ``check``) and the
    measurements."""
    shutil.copytree(ROOT / "specs" / example, folder / example)
    spec = folder / example / "spec.yaml"
    spec.write_text(spec.read_text().replace("subject: {path: data/subject.eval, format: inspect-eval}",
                                             f"subject: {{path: data/subject.eval, format: {fmt}}}"))
    to = folder / "measured.json"
    done = subprocess.run([sys.executable, "-c", MEASURED, "run", str(spec), "--no-record",
                           "--input", f"{name}={subject}"], cwd=folder, capture_output=True, timeout=120,
                          preexec_fn=_bounded, env={**os.environ, "PYTHONPATH": str(ROOT), "MEASURED_TO": str(to)})
    measured = json.loads(to.read_text()) if to.exists() else {"code": done.returncode, "seconds": None,
                                                                "peak_mb": None}
    result = Result(CliRunner(), done.stdout, done.stderr, done.stdout + done.stderr, None, measured["code"], None)
    return result, measured


REFUSED: dict[str, tuple[Callable[[], bytes], str]] = {
    "member-without-a-sample": (lambda: grown_log("subject", MIB64, "padding"),
                                r"^error: input 'subject', member samples/sum-01_epoch_1\.json: field 'epoch' is "
                                r"missing$"),
    "member-inflating-past-its-size": (lambda: grown_log("subject", MIB64, "lie"),
                                       r"^error: input 'subject', member samples/sum-01_epoch_1\.json: decompresses "
                                       r"to more than its declared 67,108,864 bytes$"),
    "sample-input-of-64-mib": (lambda: grown_log("subject", MIB64, "input"),
                               r"^error: input 'subject', member samples/sum-01_epoch_1\.json: the JSON text of the "
                               r"sample's fields certa reads .* in bytes is 67,10[0-9],[0-9]{3}, over the limit "
                               r"cell_bytes=16,777,216; if the input is genuine, raise it with "
                               r"CERTA_INPUT_LIMITS=cell_bytes=67"),
}


@pytest.fixture(scope="module")
def genuine_seconds(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The CPU seconds of the same command on the genuine fixture (read in full, verdict computed) on this machine,
    now: start-up and imports included, as in a refusal's figure, so a slower or loaded machine moves both."""
    _, measured = measured_run(tmp_path_factory.mktemp("genuine"), ROOT / "specs" / "inspect-accuracy" / "data" /
                               "subject.eval")
    assert measured["code"] == 0, measured
    return float(measured["seconds"])


@pytest.mark.parametrize("case", list(REFUSED))
def test_an_eval_bomb_is_refused_in_bounded_memory_and_time(case: str, tmp_path: Path,
                                                            genuine_seconds: float) -> None:
    """Refused within 300 MiB, and within one CPU second more than the genuine fixture's whole run costs (the
    64 MiB member is inflated once, in bounded pieces: 0.7-1.2 s against the fixture's 0.84 s on a 2.1 GHz core)."""
    build, message = REFUSED[case]
    (tmp_path / "bomb.eval").write_bytes(raw := build())
    assert len(raw) < 1 << 20  # small on disk
    result, measured = measured_run(tmp_path, tmp_path / "bomb.eval")
    check(f"inspect .eval {case}", result, allowed={2}, folders=(tmp_path,))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert re.search(message, lines[0]), lines[0]
    assert measured["peak_mb"] < PEAK_MB, measured
    assert measured["seconds"] < genuine_seconds + 1.0, (measured, genuine_seconds)  # CPU seconds, not wall


@pytest.mark.parametrize("form", ["inspect-eval", "inspect-json"])
def test_a_sample_with_a_64_mib_transcript_is_read_in_bounded_memory(form: str, tmp_path: Path) -> None:
    """The fixture's subject log with one sample's event transcript grown to 64 MiB: read as the fixture is (the
    same verdict and figures on stdout), its transcript never built."""
    (tmp_path / "grown").write_bytes(grown_log("subject", MIB64) if form == "inspect-eval"
                                     else grown_json_log("subject", MIB64))
    result, measured = measured_run(tmp_path, tmp_path / "grown", form)
    check(f"inspect {form} 64 MiB transcript", result, allowed={0})
    assert measured["peak_mb"] < PEAK_MB, measured
    fixture = ROOT / "specs" / "inspect-accuracy" / "data" / "subject.eval"
    (tmp_path / "fixture").mkdir()
    plain, _ = measured_run(tmp_path / "fixture", fixture)
    assert _verdict(result.stdout) == _verdict(plain.stdout) != [], (result.stdout, plain.stdout)
    read = read_inspect_eval if form == "inspect-eval" else read_inspect_json
    grown, genuine = read((tmp_path / "grown").read_bytes()), read_inspect_eval(fixture.read_bytes())
    assert genuine.n_items == grown.n_items == 40
    for ours, theirs in ((grown.keys, genuine.keys), (grown.metrics, genuine.metrics),
                         (grown.identity, genuine.identity)):
        assert {name: values.tolist() for name, values in ours.items()} == \
            {name: values.tolist() for name, values in theirs.items()}


def _verdict(stdout: str) -> list[str]:
    """The verdict and the gates' lines of ``certa run``'s output (not the run id or the digests, which name the
    input's bytes)."""
    return [line for line in stdout.splitlines() if line.startswith(("inspect-accuracy:", "lm-eval-accuracy:", "  gate",
                                                                       "  family"))]


def test_an_lm_eval_results_file_with_a_64_mib_field_it_does_not_read_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """The lm-eval example's subject results file with ``pretty_env_info`` grown to 64 MiB of empty objects: was
    1.7 GB (the whole document built by ``json``), now the field is checked as JSON and never built."""
    (results,) = (ROOT / "specs" / "lm-eval-accuracy" / "data" / "subject").glob("results_*.json")
    head, tail = json.dumps({**json.loads(results.read_text(encoding="utf-8")), "pretty_env_info": "@"}).encode() \
        .split(b'"@"')
    (tmp_path / "results.json").write_bytes(head + b"[" + b"{}," * (MIB64 // 3) + b"{}]" + tail)
    result, measured = measured_run(tmp_path, tmp_path / "results.json", example="lm-eval-accuracy",
                                    name="subject_results")
    check("lm-eval results with a 64 MiB field", result, allowed={0})
    assert measured["peak_mb"] < PEAK_MB, measured
    (tmp_path / "fixture").mkdir()
    plain, _ = measured_run(tmp_path / "fixture", results, example="lm-eval-accuracy", name="subject_results")
    assert _verdict(result.stdout) == _verdict(plain.stdout) != [], (result.stdout, plain.stdout)
