"""``sequential.diff`` 3.1.0 with a served model (issue 33): "is this endpoint serving the model we certified?"

The live ``hf_models`` scorer scores each drawn prompt on the local reference folder and on the endpoint (teacher
forcing, delta-CE over 32 positions), and the anytime-valid betting test stops at the decision. The server of the
reference weights is decided SAME (every score within float32 noise of 0); the impostor, which serves a copy
perturbed by 5 % under the same name and says the same things about itself, is decided DIFFERENT. Measured here
(seed 7, 74 prompts drawn with replacement, range [-0.03, 0.03], alpha 0.05): SAME after 226 prompts (mean 3.6e-9
nats), DIFFERENT after 228 (mean 0.0023 nats, interval [0.00054, 0.0037]); n_max is 400."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from certa.engine.core.runtimes import http_client
from certa.engine.foundation.errors import StageError
from certa.engine.services.audit import replay
from certa.engine.services.run import run
from certa.ledger import Ledger
from tests.conftest import VllmServer, write_spec
from tests.served.tiny_llama import TEXT


def _spec(folder: Path, server: VllmServer, url: str, *, metric: str = "delta_ce") -> Path:
    if not (folder / "reference").exists():
        shutil.copytree(server.folder, folder / "reference")
    lines = [line.strip() for line in TEXT.splitlines() if len(line.strip()) > 40]
    (folder / "prompts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines), encoding="utf-8")
    return write_spec(folder, f"""\
        certa: 1
        name: served-substitution
        seed: 7
        profile: release
        inputs:
          reference: {{model: reference}}
          served: {{endpoint: {{url: '{url}', model: {server.name}}}}}
          prompts: {{path: prompts.jsonl}}
        stages:
          - id: diff
            use: sequential.diff
            with:
              scorer: {{name: hf_models, metric: {metric}, options: {{prompts: prompts}}}}
              reference: reference
              candidate: served
              positions_per_prompt: 32
              batch_size: 16
              n_max: 400
              method: betting
              alpha: 0.05
              range: [-0.03, 0.03]
              min_effect: 0.0005
              equivalence_band: 0.001
        """)


def test_the_endpoint_of_the_reference_weights_is_the_same_model(vllm_server: VllmServer, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_spec(tmp_path, vllm_server, vllm_server.url), ledger=ledger)
        content = result.certificate["content"]
        diff = content["stages"]["diff"]
        assert diff["results"]["decision"] == "SAME" and diff["results"]["n_used"] < 400
        assert abs(diff["results"]["mean"]) < 1e-6
        models = diff["source"]["models"]
        assert models["reference"]["kind"] == "local" and models["candidate"]["kind"] == "endpoint"
        assert models["candidate"]["claims"]["served_name"] == vllm_server.name
        assert models["candidate"]["tokenizer_sha256"] == models["reference"]["tokenizer_sha256"]
        captured = {c["name"] for c in content["captured"]}
        assert "scorer_evidence_candidate_transcript" in captured and "scorer_models" in captured
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_the_impostor_under_the_same_name_is_a_different_model(vllm_server: VllmServer, tmp_path: Path) -> None:
    diff = run(_spec(tmp_path, vllm_server, vllm_server.impostor_url)).certificate["content"]["stages"]["diff"]
    assert diff["results"]["decision"] == "DIFFERENT" and diff["results"]["ci"][0] > 0.0005
    assert diff["source"]["models"]["candidate"]["claims"]["served_name"] == vllm_server.name


def test_a_metric_needing_full_distributions_is_refused_for_a_served_model(vllm_server: VllmServer,
                                                                           tmp_path: Path) -> None:
    with pytest.raises(StageError, match="metric sym_kl needs the full next-token distributions.*input 'served'"):
        run(_spec(tmp_path, vllm_server, vllm_server.url, metric="sym_kl"))
