"""``model.windows`` 1.2.0 with a served model (issue 33): the real vLLM servers scored against the local reference
folder, on the same token windows, through one spec, recorded, and replayed without the server.

The reference server serves the folder's own weights: its windows' NLL sums equal the local ones to float32
precision and the perplexity ratio is 1 within 1e-5. The impostor serves, under the same name, a copy perturbed by
5 %: its ratio's interval lies above 1. The server's tokens are checked against the reference tokenizer, its
claims recorded apart from what certa verified, and a replay recomputes the served arm's sums from the transcript."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from certa.engine.core.runtimes import http_client
from certa.engine.foundation.errors import InputError
from certa.engine.services.audit import replay
from certa.engine.services.run import run
from certa.engine.services.stored_inputs import stored_source, stored_table
from certa.ledger.run_record import read_stored_run
from certa.ledger import Ledger
from tests.conftest import VllmServer, write_spec
from tests.served.reference import DOCUMENTS, TOLERANCE, write_texts

SECRET = "sk-served-test-0123456789"


def _spec(folder: Path, server: VllmServer, url: str, *, subject: str = "served", api_key_env: str = "") -> Path:
    if not (folder / "reference").exists():
        shutil.copytree(server.folder, folder / "reference")
    write_texts(folder / "text.jsonl", DOCUMENTS)
    key = f", api_key_env: {api_key_env}" if api_key_env else ""
    return write_spec(folder, f"""\
        certa: 1
        name: served-windows
        seed: 5
        profile: dev
        inputs:
          reference: {{model: reference}}
          served: {{endpoint: {{url: '{url}', model: {server.name}{key}, client: {{concurrency: 2}}}}}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: reference, subject: {subject}, text: text, unit: tokens,
              seq_len: 96, stride: 64, batch_size: 8}}}}
          - {{id: ratio, use: paired.ppl_ratio, with: {{baseline: w.baseline, subject: w.subject, replicates: 500}}}}
        gates:
          - {{id: ratio-upper, metric: 'ratio.token_perplexity.display_ci[1]', max: 1.01}}
        """)


def _sums(ledger: Ledger, run_id: str) -> dict[str, np.ndarray]:
    stored = read_stored_run(ledger, run_id)
    return {record["name"]: stored_table(ledger, record).numeric("nll_sum") for record in stored.captured
            if record["name"] in ("baseline", "subject")}


def test_the_endpoint_of_the_reference_weights_scores_the_windows_as_the_folder_does(
        vllm_server: VllmServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVED_KEY", SECRET)  # vLLM started without --api-key takes any bearer token
    spec = _spec(tmp_path, vllm_server, vllm_server.url, api_key_env="SERVED_KEY")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        content = result.certificate["content"]
        w, ratio = content["stages"]["w"], content["stages"]["ratio"]
        assert content["verdict"] == "PASS" and w["unit"] == "tokens" and w["tokenizers_match"] is True
        served, local = w["models"]["subject"], w["models"]["baseline"]
        assert local["kind"] == "local" and served["kind"] == "endpoint"
        assert served["manifest_sha256"] == next(i["sha256"] for i in content["inputs"] if i["name"] == "served")
        assert served["model_type"] is None and served["parameters"] is None and served["signature"] is None
        assert served["tokenizer_sha256"] == local["tokenizer_sha256"]
        claims = served["claims"]
        assert claims["served_name"] == vllm_server.name and claims["server_version"] == "0.32.0"
        assert claims["models_entry"]["root"] == str(vllm_server.folder)
        assert served["usage"]["requests"] >= 1 and served["usage"]["tokens"] > 0
        # the same weights: every window's NLL sum within float32 noise, the ratio 1 to 1e-5
        sums = _sums(ledger, result.run_id)
        assert np.max(np.abs(sums["baseline"] - sums["subject"])) < TOLERANCE * 96
        assert abs(ratio["token_perplexity"]["ratio_vs_baseline"] - 1) < 1e-5
        low, high = ratio["token_perplexity"]["display_ci"]
        assert low <= 1 <= high
        # the transcript: captured, no credential anywhere in the ledger's tables or the certificate
        transcript = next(r for r in read_stored_run(ledger, result.run_id).captured
                          if r["name"] == "subject_transcript")
        text = stored_table(ledger, transcript)
        assert transcript["sha256"] == served["transcript"]["sha256"] and text.n_rows == served["transcript"]["rows"]
        assert set(text.text("path")) == {"/models", "/../version", "/../tokenize", "/completions"}
        everything = json.dumps(result.certificate) + "".join(str(v) for c in text.columns for v in text.text(c))
        assert SECRET not in everything
        # a replay needs no server: the network is forbidden, the sums recomputed from the transcript
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_the_impostor_under_the_same_name_is_caught(vllm_server: VllmServer, tmp_path: Path) -> None:
    spec = _spec(tmp_path, vllm_server, vllm_server.impostor_url)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        content = result.certificate["content"]
        ratio = content["stages"]["ratio"]["token_perplexity"]
        # a 5 % weight perturbation moves the perplexity by a fraction of a percent (measured: ratio 1.0025, 95 %
        # interval [1.0008, 1.0042]): within the gate's 1 % margin, and yet clearly not the reference's weights
        assert ratio["display_ci"][0] > 1.0 and content["verdict"] == "PASS"
        # what the impostor says about itself is indistinguishable from the real server's: only the scores differ
        claims = content["stages"]["w"]["models"]["subject"]["claims"]
        assert claims["served_name"] == vllm_server.name


def test_a_transcript_that_does_not_give_the_recorded_sums_is_refused_on_replay(vllm_server: VllmServer,
                                                                                 tmp_path: Path) -> None:
    from certa.engine.core.input_formats import read_input
    from certa.engine.core.input_limits import InputLimits
    from certa.engine.core.runtimes.endpoint import check_replayed_windows
    from certa.engine.core.tables import table_from_columns

    spec = _spec(tmp_path, vllm_server, vllm_server.url)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        stored = read_stored_run(ledger, result.run_id)
        tables = {r["name"]: stored_table(ledger, r) for r in stored.captured}
        served = next(r for r in stored.inputs if r["name"] == "served")
        source = stored_source(ledger, served)
        endpoint = read_input("served", source.raw, source.fmt, limits=InputLimits())
        check_replayed_windows(endpoint, tables["subject_transcript"], tables["subject"])
        sums = tables["subject"].numeric("nll_sum").copy()
        sums[3] += 1e-9
        forged = table_from_columns("subject", {"window_id": list(tables["subject"].text("window_id")),
                                                "tokens": tables["subject"].numeric("tokens"), "nll_sum": sums})
        with pytest.raises(InputError, match="window 4 .* does not follow from the server's recorded answers"):
            check_replayed_windows(endpoint, tables["subject_transcript"], forged)


def test_a_server_whose_tokenizer_is_not_the_references_is_refused(vllm_server: VllmServer, tiny_models,
                                                                   tmp_path: Path) -> None:
    shutil.copytree(tiny_models["baseline"], tmp_path / "reference")  # a tiny GPT-2 with another tokenizer
    spec = _spec(tmp_path, vllm_server, vllm_server.url)
    with pytest.raises(InputError, match="tokenizes text 1 of 8 differently from input 'reference'"):
        run(spec)


def test_recompute_evidence_queries_the_server_again_and_reports_the_spread(vllm_server: VllmServer,
                                                                          tmp_path: Path) -> None:
    from certa.engine.services.evidence_recompute import recompute_evidence

    spec = _spec(tmp_path, vllm_server, vllm_server.url)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        evidence = recompute_evidence(ledger, result.run_id, folders={"reference": tmp_path / "reference"})
        served = next(t for t in evidence.tables if t.name == "subject")
        assert served.rows == (69, 69) and served.rows_reproduced <= 69
        assert [t.name for t in evidence.transcripts] == ["subject_transcript"]
        assert "timing differs by nature" in evidence.text()
        # the impostor at the recorded run's input name: every window's sum moves, and the report says by how much
        moved = recompute_evidence(ledger, result.run_id, folders={"reference": tmp_path / "reference",
                                                                   "served": vllm_server.impostor_url})
        subject = next(t for t in moved.tables if t.name == "subject")
        assert not moved.reproduced and subject.rows_reproduced == 0 and subject.deviations["nll_sum"] > 1e-3
        assert f"served={vllm_server.impostor_url}" in moved.text()


def test_windows_longer_than_the_server_takes_are_refused_before_any_is_sent(vllm_server: VllmServer,
                                                                               tmp_path: Path) -> None:
    spec = _spec(tmp_path, vllm_server, vllm_server.url)
    spec.write_text(spec.read_text().replace("seq_len: 96, stride: 64", "seq_len: 256, stride: 200"))
    with pytest.raises(InputError, match="a window of 256 tokens does not fit the served model: its server states "
                                         "max_model_len 256.*at most 255"):
        run(spec)
