"""A served model behind Hugging Face TGI (``endpoint: {..., api: tgi}``, issue 33): ``model.windows`` and the
``hf_models`` scorer of ``sequential.diff`` score it by teacher forcing through TGI's ``/generate`` with
``decoder_input_details``, against a local reference folder.

Tested against a stub of TGI's documented API (``tests/core/runtimes/tgi_stub.py``) answering with a tiny local
model's real float32 log-probs, not against a real TGI (no TGI runs on this machine): the stub serving the
reference's weights scores every window as the folder does (to float32 rounding), one serving the 5 %-perturbed
copy does not; the refusals name the field or the position."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from certa.engine.core.runtimes import http_client
from certa.engine.foundation.errors import EndpointError, InputError
from certa.engine.services.audit import replay
from certa.engine.services.run import run
from certa.engine.services.stored_inputs import stored_source, stored_table
from certa.ledger import Ledger
from certa.ledger.run_record import read_stored_run
from tests.conftest import TINY_MODEL_TEXT, write_spec
from tests.core.runtimes.tgi_stub import TgiStub

DOCUMENTS = [TINY_MODEL_TEXT[i * 400: (i + 1) * 400] for i in range(4)]
"""Four documents of the tiny models' training text, several windows each at seq_len 64."""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CERTA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def stub(tiny_models: dict[str, Path], cache: Path) -> Iterator[TgiStub]:
    server = TgiStub(tiny_models["baseline"])
    yield server
    server.stop()


WINDOWS = ("{id: w, use: model.windows, with: {baseline: reference, subject: served, text: data, batch_size: 8, "
           "WINDOW}}")
SEQUENTIAL = ("{id: diff, use: sequential.diff, with: {scorer: {name: hf_models, metric: delta_ce, options: {prompts: "
              "data}}, reference: reference, candidate: served, positions_per_prompt: 8, batch_size: 8, n_max: 48, "
              "method: betting, alpha: 0.05, range: [-0.02, 0.02], min_effect: 0.002, equivalence_band: 0.005}}")
"""The stages run: ``model.windows`` (``WINDOW`` its windows' knobs) and ``sequential.diff`` with ``hf_models``."""


def _spec(folder: Path, reference: Path, url: str, *, rows: list[str], stage: str) -> Path:
    """A spec scoring the TGI input ``served`` at ``url`` (model ``tiny``) against the folder ``reference`` on the
    texts ``rows`` (input ``data``), in one ``stage``."""
    if not (folder / "reference").exists():
        shutil.copytree(reference, folder / "reference")
    (folder / "data.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in rows), encoding="utf-8")
    return write_spec(folder, f"""\
        certa: 1
        name: tgi
        seed: 7
        inputs:
          reference: {{model: reference}}
          served: {{endpoint: {{url: '{url}', model: tiny, api: tgi, client: {{concurrency: 2, retries: 0}}}}}}
          data: {{path: data.jsonl}}
        stages:
          - {stage}
        """)


def _windows_spec(folder: Path, reference: Path, url: str, *, window: str = "unit: tokens, seq_len: 64, stride: 48",
                  documents: list[str] = DOCUMENTS) -> Path:
    return _spec(folder, reference, url, rows=documents, stage=WINDOWS.replace("WINDOW", window))


def _captured(ledger: Ledger, run_id: str) -> dict:
    return {r["name"]: stored_table(ledger, r) for r in read_stored_run(ledger, run_id).captured}


def test_the_reference_weights_behind_tgi_score_the_windows_as_the_folder_does_and_replay_offline(
        stub: TgiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_windows_spec(tmp_path, stub.folder, stub.url), ledger=ledger)
        w = result.certificate["content"]["stages"]["w"]
        served = w["models"]["subject"]
        assert served["kind"] == "endpoint" and served["tokenizer_sha256"] == w["models"]["baseline"]["tokenizer_sha256"]
        assert served["claims"]["model_id"] == "tiny" and served["claims"]["version"] == "3.3.7"
        assert served["claims"]["max_total_tokens"] == 128
        (declared,) = [i for i in result.certificate["content"]["inputs"] if i["name"] == "served"]
        assert declared["endpoint"]["api"] == "tgi"
        tables = _captured(ledger, result.run_id)
        local, remote = tables["baseline"].numeric("nll_sum"), tables["subject"].numeric("nll_sum")
        assert stub.generated == local.size > 2 * len(DOCUMENTS)  # one request a window
        assert np.max(np.abs(local - remote)) < 1e-4  # float32 log-probs, up to 63 targets a window
        transcript = tables["subject_transcript"]
        assert list(transcript.text("path")) == ["/info"] + ["/generate"] * local.size
        label, ids = json.loads(transcript.text("unit")[1])
        assert label == [tables["subject"].text("window_id")[0], int(tables["subject"].numeric("tokens")[0])]
        assert len(ids) > label[1]  # the window's context and targets
        assert served["usage"]["requests"] == local.size + 1 and served["usage"]["tokens"] == int(sum(
            json.loads(unit)[1].__len__() for unit in transcript.text("unit")[1:]))
        assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_a_replay_refuses_sums_or_ids_that_do_not_follow_from_the_transcript(stub: TgiStub, tmp_path: Path) -> None:
    from certa.engine.core.input_formats import read_input
    from certa.engine.core.input_limits import InputLimits
    from certa.engine.core.runtimes.endpoint import check_replayed_windows, read_transcript, transcript_table
    from certa.engine.core.tables import table_from_columns

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_windows_spec(tmp_path, stub.folder, stub.url), ledger=ledger)
        tables = _captured(ledger, result.run_id)
        source = stored_source(ledger, next(r for r in read_stored_run(ledger, result.run_id).inputs
                                            if r["name"] == "served"))
    endpoint = read_input("served", source.raw, source.fmt, limits=InputLimits())
    transcript, windows = tables["subject_transcript"], tables["subject"]
    check_replayed_windows(endpoint, transcript, windows)
    sums = windows.numeric("nll_sum").copy()
    sums[2] += 1e-9
    forged = table_from_columns("subject", {"window_id": list(windows.text("window_id")),
                                            "tokens": windows.numeric("tokens"), "nll_sum": sums})
    with pytest.raises(InputError, match="window 3 .* does not follow from the server's recorded answers"):
        check_replayed_windows(endpoint, transcript, forged)
    rows = read_transcript(transcript)
    (label, ids), exchange = json.loads(rows[2][0]), rows[2][1]
    rows[2] = (json.dumps([label, [ids[0], ids[1] + 1, *ids[2:]]]), exchange)
    edited = transcript_table(rows)
    with pytest.raises(InputError, match=f"window '{label[0]}'.*at position 1"):
        check_replayed_windows(endpoint, edited, windows)


def test_an_impostor_behind_tgi_scores_other_sums(tiny_models: dict[str, Path], cache: Path, tmp_path: Path) -> None:
    impostor = TgiStub(tiny_models["subject"])  # the 5 %-perturbed weights, stating the same model_id
    try:
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            result = run(_windows_spec(tmp_path, tiny_models["baseline"], impostor.url), ledger=ledger)
            tables = _captured(ledger, result.run_id)
    finally:
        impostor.stop()
    assert np.min(np.abs(tables["baseline"].numeric("nll_sum") - tables["subject"].numeric("nll_sum"))) > 1e-3


@pytest.mark.parametrize(("fault", "error", "said"), [
    ({"prefill": False}, EndpointError, r"details\.prefill is missing or empty: the server ignored "
                                        r"decoder_input_details.*--enable-prefill-logprobs"),
    ({"null_at": 5}, EndpointError, r"details\.prefill\[5\]\.logprob \(token \d+\) holds no finite log-prob <= 0 "
                                    r"\(got null"),
    ({"prepend": (0,)}, InputError, r"details\.prefill\[\]\.id\) are not the ids certa meant to score: at position 0, "
                                    r"0 where certa meant \d+ \((\d+) ids vs \d+\); TGI adds \[0\] before every text"),
    ({"model_id": "someone/else"}, EndpointError, "serves 'someone/else' \\(its /info model_id\\), not the declared "
                                                  "model 'tiny'"),
])
def test_a_server_that_cannot_teacher_force_as_meant_is_refused_naming_why(
        tiny_models: dict[str, Path], cache: Path, tmp_path: Path, fault: dict, error: type, said: str) -> None:
    server = TgiStub(tiny_models["baseline"], **fault)
    try:
        with pytest.raises(error, match=f"input 'served'.*{said}"):
            run(_windows_spec(tmp_path, tiny_models["baseline"], server.url))
    finally:
        server.stop()


def test_a_window_that_does_not_begin_with_the_special_tokens_tgi_adds_is_refused_before_any_request(
        tiny_architectures, cache: Path, tmp_path: Path) -> None:
    llama = tiny_architectures("llama")  # its tokenizer puts <s> before every text, as TGI's would
    server = TgiStub(llama)
    try:
        spec = _windows_spec(tmp_path, llama, server.url)
        with pytest.raises(InputError, match=r"input 'served': window '.*' cannot be scored through TGI.*at position "
                                             r"0, 1 where certa meant \d+.*TGI adds \[1\] before every text"):
            run(spec)
        assert server.generated == 0
        # whole documents (one window each, beginning with <s>) are scored, as the folder scores them
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            whole = _windows_spec(tmp_path / "whole", llama, server.url, window="unit: tokens, seq_len: 127",
                                  documents=[document[:150] for document in DOCUMENTS])
            tables = _captured(ledger, run(whole, ledger=ledger).run_id)
        assert np.max(np.abs(tables["baseline"].numeric("nll_sum") - tables["subject"].numeric("nll_sum"))) < 1e-4
    finally:
        server.stop()


def test_hf_models_delta_ce_against_a_tgi_candidate(stub: TgiStub, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        prompts = [" ".join(line.split()) for line in TINY_MODEL_TEXT.splitlines() if len(line.strip()) > 40][:40]
        result = run(_spec(tmp_path, stub.folder, stub.url, rows=prompts, stage=SEQUENTIAL), ledger=ledger)
        diff = result.certificate["content"]["stages"]["diff"]
        scores = _captured(ledger, result.run_id)
        assert diff["source"]["models"]["candidate"]["claims"]["model_id"] == "tiny"
        assert abs(diff["results"]["mean"]) < 1e-6 and diff["results"]["decision"] == "SAME"
        transcript = scores["scorer_evidence_candidate_transcript"]
        sent = list(transcript.text("request"))[1:]  # a call's equal prompts (drawn with replacement) share a request
        assert len(sent) >= stub.generated >= len(set(sent)) and len(sent) >= diff["results"]["n_used"]
        assert all(json.loads(unit)[0].startswith("sequence:") for unit in transcript.text("unit")[1:])
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"
