"""A served run (``certa run`` of a ``model.windows`` 1.2.0 spec, in a subprocess) facing real server faults, injected
by a proxy in front of the real vLLM server of the reference weights (``tests/served/fault_proxy.py``).

Each fault ends in a clear error or a recorded decision, never a partial run:

- refused (exit 5, ``EndpointError``; exit 2, ``InputError``, for tokens that differ): the server killed mid-run, a
  body cut short, a 200 that is not JSON, a 200 with an error inside, an answer holding the API key, an answer for
  another model name, prompt ids that are not the ids sent, and a ``/tokenize`` answer that is not the reference
  tokenizer's. The run prints one line on stderr naming the fault (no traceback), its ``--json`` error on stdout,
  its ``--junit`` report holds the error, and the ledger holds no entry.
- survived (exit 0, recorded once): a stalled answer (the client times out and retries) and two 503s (retried); the
  transcript has one row per request, whose ``attempts`` count the retries, and the certificate's usage counts them.

The key the spec names (``api_key_env``) reaches the server and appears in no output, no report and nowhere in the
ledger file, even when the server echoes it in an error message, or in an answer (refused: answers are recorded).
The client's timeout is 3 s (the real server answers a request in 60-130 ms when idle, but the test servers are
shared), its retries 2, its backoff the default 0.5 s doubling.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from certa.ledger import Ledger
from certa.ledger.run_record import read_stored_run
from certa.engine.services.stored_inputs import stored_table
from tests.conftest import VllmServer, write_spec
from tests.served import fault_proxy
from tests.served.fault_proxy import COMPLETIONS, TOKENIZE, Fault, FaultProxy, Request
from tests.served.reference import DOCUMENTS, write_texts

SECRET = "sk-fault-test-5f0c1e9b7a"
TIMEOUT = 3.0
THREE_DOCUMENTS = DOCUMENTS[:3]
"""Three documents: 26 windows of 96 tokens, so two completion requests of 16 and 10 prompts."""
COMPLETION_REQUESTS = 2


@pytest.fixture(scope="module")
def spec(vllm_server: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spec: the real server's weights as the local reference, the served model behind a proxy (its URL given
    with ``--input served=URL``), a key in ``SERVED_KEY``, a client that gives up quickly."""
    folder = tmp_path_factory.mktemp("faults")
    shutil.copytree(vllm_server.folder, folder / "reference")
    write_texts(folder / "text.jsonl", THREE_DOCUMENTS)
    endpoint = {"url": "http://127.0.0.1:9/v1", "model": vllm_server.name, "api_key_env": "SERVED_KEY",
                "client": {"timeout": TIMEOUT, "retries": 2, "concurrency": 2}}
    windows = {"baseline": "reference", "subject": "served", "text": "text", "unit": "tokens", "seq_len": 96,
               "stride": 64, "batch_size": 8}
    return write_spec(folder, json.dumps({  # JSON is YAML
        "certa": 1, "name": "served-faults", "seed": 5, "profile": "dev",
        "inputs": {"reference": {"model": "reference"}, "served": {"endpoint": endpoint}, "text": {"path": "text.jsonl"}},
        "stages": [{"id": "w", "use": "model.windows", "with": windows}]}, indent=1))


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """An empty ledger (created, so that "no run" is a fact about it, not about a missing file)."""
    path = tmp_path / "ledger.db"
    Ledger.open(path).close()
    return path


@pytest.fixture
def proxy(vllm_server: VllmServer) -> Iterator[Callable[[Fault], FaultProxy]]:
    """A factory of proxies in front of the reference server, each closed after the test."""
    opened: list[FaultProxy] = []

    def start(fault: Fault) -> FaultProxy:
        opened.append(FaultProxy(vllm_server.url, fault))
        return opened[-1]

    yield start
    for each in opened:
        each.close()


def _certa(spec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SERVED_KEY": SECRET}
    return subprocess.run([sys.executable, "-m", "certa", *args], cwd=spec.parent, env=env, capture_output=True,
                          text=True, timeout=300)


def _run(spec: Path, proxy: FaultProxy, ledger: Path) -> subprocess.CompletedProcess[str]:
    junit = ledger.parent / "junit.xml"
    result = _certa(spec, "run", str(spec), "--input", f"served={proxy.url}", "--ledger", str(ledger), "--json",
                    "--junit", str(junit))
    assert all(request.authorization == f"Bearer {SECRET}" for request in proxy.requests)  # the key was in play
    assert SECRET not in result.stdout + result.stderr + junit.read_text(encoding="utf-8")
    assert not any(SECRET.encode() in path.read_bytes() for path in ledger.parent.glob(ledger.name + "*"))
    return result


def _refused(result: subprocess.CompletedProcess[str], ledger: Path, kind: str, code: int, message: str) -> None:
    """Exit ``code``, one line on stderr matching ``message`` and no traceback, the ``--json`` error on stdout, the
    JUnit report's error case of type ``kind``, and no entry in the ledger."""
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert re.search(message, lines[0]), f"{message!r} does not match {lines[0]!r}"
    error = json.loads(result.stdout)
    assert error["ok"] is False and error["error"]["type"] == kind and error["error"]["exit_code"] == code
    assert f'type="{kind}"' in (ledger.parent / "junit.xml").read_text(encoding="utf-8")
    with Ledger.open(ledger) as opened:
        assert opened.runs() == [] and opened.entry_count() == 0


def _completed(result: subprocess.CompletedProcess[str], ledger: Path,
               proxy: FaultProxy) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The one run recorded (exit 0, nothing on stderr), after checking that its transcript has one row per distinct
    request, whose attempts add up to the requests the server received, as the certificate's usage counts them:
    the served model's record in the certificate, and its transcript's columns."""
    assert result.returncode == 0 and result.stderr == "", result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    with Ledger.open(ledger) as opened:
        assert [row.run_id for row in opened.runs()] == [run_id]
        served = opened.certificate(run_id)["content"]["stages"]["w"]["models"]["subject"]
        record = next(r for r in read_stored_run(opened, run_id).captured if r["name"] == "subject_transcript")
        table = stored_table(opened, record)
        transcript = {"key": np.array(table.text("key")), "path": np.array(table.text("path")),
                      "attempts": table.numeric("attempts")}
    received = len(proxy.requests)
    assert np.unique(transcript["key"]).size == transcript["key"].size
    assert (transcript["path"] == "/completions").sum() == COMPLETION_REQUESTS
    assert transcript["attempts"].sum() == received == served["usage"]["requests"]
    assert served["usage"]["retries"] == received - transcript["key"].size
    return served, transcript


def test_the_server_killed_mid_run_leaves_no_run_and_a_run_after_it_is_recorded_once(
        spec: Path, ledger: Path, proxy: Callable[[Fault], FaultProxy]) -> None:
    killed = proxy(fault_proxy.killed_after(1))
    _refused(_run(spec, killed, ledger), ledger, "EndpointError", 5,
             r"^error: input 'served' \(http://127\.0\.0\.1:\d+/v1\): "
             r"POST /completions failed after 3 attempts: connection refused$")
    assert sum(r.path == COMPLETIONS for r in killed.requests) == 2  # the first answered, the second met the death
    alive = proxy(fault_proxy.pass_through)
    _completed(_run(spec, alive, ledger), ledger, alive)
    verified = _certa(spec, "verify", "--ledger", str(ledger), "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True, verified.stdout


def test_a_stalled_answer_times_out_and_its_retry_completes_the_run(
        spec: Path, ledger: Path, proxy: Callable[[Fault], FaultProxy]) -> None:
    stalling = proxy(fault_proxy.stalled(TIMEOUT * 3))
    served, transcript = _completed(_run(spec, stalling, ledger), ledger, stalling)
    assert transcript["attempts"][transcript["path"] == "/completions"].max() >= 2 and served["usage"]["retries"] >= 1


def test_two_503s_are_retried_and_recorded_once(spec: Path, ledger: Path,
                                               proxy: Callable[[Fault], FaultProxy]) -> None:
    overloaded = proxy(fault_proxy.failing(503, 2))
    served, transcript = _completed(_run(spec, overloaded, ledger), ledger, overloaded)
    assert transcript["attempts"][transcript["path"] == "/completions"].sum() >= COMPLETION_REQUESTS + 2
    assert served["usage"]["retries"] >= 2


def _other_model(request: Request, answer: dict[str, Any]) -> None:
    answer["model"] = "another-model"


def _other_prompt_id(request: Request, answer: dict[str, Any]) -> None:
    answer["choices"][0]["prompt_token_ids"][5] += 1


def _other_tokens(request: Request, answer: dict[str, Any]) -> None:
    answer["tokens"][3] += 1


@pytest.mark.parametrize(("fault", "kind", "code", "message"), [
    (fault_proxy.truncated, "EndpointError", 5,
     r"^error: input 'served' \(http://127\.0\.0\.1:\d+/v1\): "
     r"POST /completions: the response was cut short \(\d+ bytes of \d+\); it begins "),
    (fault_proxy.malformed, "EndpointError", 5,
     r"^error: input 'served' \(http://127\.0\.0\.1:\d+/v1\): POST /completions: the response is not UTF-8 JSON; "
     r'it begins "<html>'),
    (fault_proxy.error_inside, "EndpointError", 5,
     r"^error: input 'served' \(http://127\.0\.0\.1:\d+/v1\): "
     r"POST /completions: HTTP 200 with an error inside: the server said: engine failure while scoring "
     r"request authorized by Bearer <api key>$"),
    (fault_proxy.key_echoed, "EndpointError", 5,
     r"^error: input 'served' \(http://127\.0\.0\.1:\d+/v1\): "
     r"POST /completions: the response holds the API key \(the server echoes it\); certa records every "
     r"response and never a key, so this answer is refused$"),
    (fault_proxy.rewritten(COMPLETIONS, _other_model), "EndpointError", 5,
     r"^error: input 'served': the answer is for model 'another-model', not the served name asked for 'tiny-llama'$"),
    (fault_proxy.rewritten(COMPLETIONS, _other_prompt_id), "EndpointError", 5,
     r"^error: input 'served': prompt 0: prompt_token_ids differ from the ids sent at position 5: the server has "
     r"\d+, certa sent \d+$"),
    (fault_proxy.rewritten(TOKENIZE, _other_tokens), "InputError", 2,
     r"^error: input 'served': the server tokenizes text 1 of 3 differently from input 'reference''s tokenizer.json "
     r"\(first difference at token 3: \d+ served vs \d+\)"),
], ids=["truncated", "malformed", "error-inside", "key-echoed", "another-model", "other-prompt-ids", "other-tokenization"])
def test_a_fault_in_an_answer_is_refused_in_one_line_and_records_nothing(
        spec: Path, ledger: Path, proxy: Callable[[Fault], FaultProxy], fault: Fault, kind: str, code: int,
        message: str) -> None:
    _refused(_run(spec, proxy(fault), ledger), ledger, kind, code, message)


def test_a_run_after_an_interrupted_one_reuses_the_answers_it_got_and_sends_the_rest(
        spec: Path, ledger: Path, proxy: Callable[[Fault], FaultProxy]) -> None:
    """Resume: the first completion is answered, then the server fails every completion (503) until it is fixed;
    the run stops (exit 5, nothing recorded) but keeps the answers it got. The same spec run again against the same
    URL reuses them (the 3 documents' tokenizations and the first completion: usage.reused 4) and sends only the
    missing completion; once it completes, the kept answers are removed."""
    from certa.engine.core.runtimes.transcript_cache import cache_folder

    broken = {"now": True}

    def fails_after_one(proxy: FaultProxy, request: Request, forward: fault_proxy.Forward) -> fault_proxy.Answer:
        if request.path == COMPLETIONS and request.index >= 1 and broken["now"]:
            return fault_proxy.Answer(503, b'{"error": {"message": "overloaded", "code": 503}}')
        return forward()

    server = proxy(fails_after_one)
    earlier = set(cache_folder().glob("*/*.json"))  # other tests' interrupted runs
    _refused(_run(spec, server, ledger), ledger, "EndpointError", 5,
             r"^error: input 'served' \(http://127\.0\.0\.1:\d+/v1\): POST /completions failed after 3 attempts: "
             r"HTTP 503")
    kept = set(cache_folder().glob("*/*.json")) - earlier
    assert len({path.parent for path in kept}) == 1 and len(kept) == 4
    sent_before = len(server.requests)
    broken["now"] = False
    result = _run(spec, server, ledger)
    assert result.returncode == 0, result.stderr
    resent = [r for r in server.requests[sent_before:] if r.path in (COMPLETIONS, TOKENIZE)]
    assert [r.path for r in resent] == [COMPLETIONS]  # only the completion the first run lacked
    run_id = json.loads(result.stdout)["run_id"]
    with Ledger.open(ledger) as opened:
        served = opened.certificate(run_id)["content"]["stages"]["w"]["models"]["subject"]
    assert served["usage"]["reused"] == 4 and served["transcript"]["rows"] == 2 + 3 + COMPLETION_REQUESTS
    assert not any(path.exists() for path in kept)
