"""The served examples (``specs/*/spec.yaml`` with an ``endpoint:`` input: ``SERVED_EXAMPLES``), which the tests that
run every example leave out (they need a server), end to end against the test server through the command line, as
their READMEs say: ``python -m certa run SPEC --input NAME=URL`` must PASS, ``certa show`` states the server's claims
apart from what was hashed, and ``certa replay`` must REPRODUCE the run without the server. Validating them needs no
server (these cases run in the unit tier)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from certa.cli import main
from certa.engine.core.runtimes import http_client
from tests.conftest import ROOT, SERVED_EXAMPLES, VllmServer


def _endpoint_inputs(example: str) -> list[str]:
    inputs = yaml.safe_load((ROOT / "specs" / example / "spec.yaml").read_text(encoding="utf-8"))["inputs"]
    return [name for name, entry in inputs.items() if "endpoint" in entry]


def _forbid_the_network(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail(f"{what} queried a server"))


def test_there_is_a_served_example() -> None:
    assert "served-perplexity" in SERVED_EXAMPLES and _endpoint_inputs("served-perplexity") == ["served"]


def test_every_served_example_validates_without_its_server(monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_the_network(monkeypatch, "certa validate")
    for example in SERVED_EXAMPLES:  # one test, not parametrized: an example's name would mark it ``models``
        result = CliRunner().invoke(main, ["validate", str(ROOT / "specs" / example / "spec.yaml"), "--json"])
        assert result.exit_code == 0 and json.loads(result.stdout)["ok"] is True, (example, result.output)


def test_each_served_examples_reference_is_the_model_the_test_server_serves(vllm_server: VllmServer) -> None:
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    for example in SERVED_EXAMPLES:
        for name in ("model.safetensors", "tokenizer.json"):
            assert digest(ROOT / "specs" / example / "models" / "reference" / name) == \
                digest(vllm_server.folder / name), \
                f"{example}: {name} differs from the served folder's: rebuild with python3 specs/{example}/make_data.py"


@pytest.mark.parametrize("example", SERVED_EXAMPLES)
def test_each_served_example_passes_against_the_test_server_and_replays_without_it(
        example: str, vllm_server: VllmServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = str(tmp_path / "ledger.db")
    overrides = [arg for name in _endpoint_inputs(example) for arg in ("--input", f"{name}={vllm_server.url}")]
    ran = subprocess.run([sys.executable, "-m", "certa", "run", str(ROOT / "specs" / example / "spec.yaml"),
                          *overrides, "--ledger", ledger, "--json"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads(ran.stdout)
    assert result["verdict"] == "PASS", result
    # the certificate says what was given on the command line, and show states what the server claims
    _forbid_the_network(monkeypatch, "certa show or certa replay")
    shown = CliRunner().invoke(main, ["show", result["run_id"], "--ledger", ledger, "--json"])
    content = json.loads(shown.stdout)["content"]
    assert content["verdict"] == "PASS" and all(gate["passed"] for gate in content["gates"]), content["gates"]
    served = [i for i in content["inputs"] if i["format"] == "endpoint"]
    assert [(i["overridden"], i["endpoint"]["url"]) for i in served] == [(True, vllm_server.url)] * len(served)
    text = CliRunner().invoke(main, ["show", result["run_id"], "--ledger", ledger])
    assert text.exit_code == 0 and "Its server claims (not verified" in text.stdout, text.output
    replayed = CliRunner().invoke(main, ["replay", result["run_id"], "--ledger", ledger, "--json"])
    assert replayed.exit_code == 0 and json.loads(replayed.stdout)["outcome"] == "REPRODUCED", replayed.output
