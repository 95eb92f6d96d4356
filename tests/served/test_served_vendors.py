"""Two served models compared (issue 33: endpoint vs endpoint, a vendor comparison): ``sequential.diff`` 3.1.0 with
the ``hf_models`` scorer and no local model. The reference's server tokenizes each prompt (``POST /tokenize``), the
candidate's server must tokenize it into the same ids, and both score those ids by teacher forcing; the replay
derives every score again from the two transcripts, without either server.

The server of the reference weights against a second client of itself: every score is exactly 0 (the same server
computes the same log-probs), SAME. Against the impostor (the same name, weights perturbed by 5 %): DIFFERENT."""

from __future__ import annotations

from pathlib import Path

import pytest

from certa.engine.core.runtimes import http_client
from certa.engine.services.audit import replay
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.engine.services.run import run
from certa.ledger import Ledger
from tests.conftest import VllmServer, write_spec
from tests.served.reference import SUBSTITUTION_PROMPTS, write_texts


def _spec(folder: Path, server: VllmServer, candidate_url: str) -> Path:
    write_texts(folder / "prompts.jsonl", SUBSTITUTION_PROMPTS)
    # the candidate's client differs (concurrency 2), so the two inputs are two declarations even on one server
    return write_spec(folder, f"""\
        certa: 1
        name: vendor-comparison
        seed: 7
        profile: release
        inputs:
          official: {{endpoint: {{url: '{server.url}', model: {server.name}}}}}
          vendor: {{endpoint: {{url: '{candidate_url}', model: {server.name}, client: {{concurrency: 2}}}}}}
          prompts: {{path: prompts.jsonl}}
        stages:
          - id: diff
            use: sequential.diff
            with:
              scorer: {{name: hf_models, metric: abs_delta_lp, options: {{prompts: prompts}}}}
              reference: official
              candidate: vendor
              positions_per_prompt: 32
              batch_size: 16
              n_max: 400
              method: betting
              alpha: 0.05
              range: [0, 0.2]
              min_effect: 0.002
              equivalence_band: 0.004
        """)


def test_a_server_against_itself_is_the_same_and_the_replay_needs_neither(vllm_server: VllmServer, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_spec(tmp_path, vllm_server, vllm_server.url), ledger=ledger)
        content = result.certificate["content"]
        diff = content["stages"]["diff"]
        assert diff["results"]["decision"] == "SAME" and diff["results"]["mean"] == 0.0
        models = diff["source"]["models"]
        assert models["reference"]["kind"] == models["candidate"]["kind"] == "endpoint"
        # no tokenizer file: the reference's server tokenized, the vendor's was checked against it
        assert models["reference"]["tokens_from"] == models["candidate"]["tokens_from"] == "server"
        assert models["reference"]["tokenizer_of"] == models["candidate"]["tokenizer_of"] == "official"
        assert models["reference"]["tokenizer_sha256"] is None
        captured = {c["name"] for c in content["captured"]}
        assert {"scorer_evidence_reference_transcript", "scorer_evidence_candidate_transcript"} <= captured
        assert not any(name.endswith("_logprobs") for name in captured)  # both served: the transcripts suffice
        shown = certificate_markdown(result.certificate)
        assert "tokens of the server of official (its /tokenize)" in shown
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_a_vendor_serving_other_weights_under_the_same_name_is_different(vllm_server: VllmServer,
                                                                         tmp_path: Path) -> None:
    diff = run(_spec(tmp_path, vllm_server, vllm_server.impostor_url)).certificate["content"]["stages"]["diff"]
    assert diff["results"]["decision"] == "DIFFERENT" and diff["results"]["ci"][0] > 0.002
    assert diff["results"]["n_used"] < 400
    claims = {role: model["claims"]["served_name"] for role, model in diff["source"]["models"].items()}
    assert claims == {"reference": vllm_server.name, "candidate": vllm_server.name}
