"""``sequential.diff`` 3.1.0 with a served model (issue 33): "is this endpoint serving the model we certified?"

The live ``hf_models`` scorer scores each drawn prompt on the local reference folder and on the endpoint (teacher
forcing, delta-CE over 32 positions), and the anytime-valid betting test stops at the decision. The server of the
reference weights is decided SAME (every score within float32 noise of 0); the impostor, which serves a copy
perturbed by 5 % under the same name and says the same things about itself, is decided DIFFERENT. Measured here
(seed 7, 74 prompts drawn with replacement, range [-0.03, 0.03], alpha 0.05): SAME after 226 prompts (mean 3.6e-9
nats), DIFFERENT after 228 (mean 0.0023 nats, interval [0.00054, 0.0037]); n_max is 400."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from certa.engine.core.runtimes import http_client
from certa.engine.foundation.errors import StageError
from certa.engine.services.audit import replay
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.engine.services.run import run
from certa.ledger import Ledger
from tests.conftest import VllmServer, write_spec
from tests.served.reference import SUBSTITUTION_PROMPTS, write_texts


def _spec(folder: Path, server: VllmServer, url: str, *, metric: str = "delta_ce", bound: float = 0.03) -> Path:
    if not (folder / "reference").exists():
        shutil.copytree(server.folder, folder / "reference")
    write_texts(folder / "prompts.jsonl", SUBSTITUTION_PROMPTS)
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
              range: [-{bound}, {bound}]
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
        shown = certificate_markdown(result.certificate)  # certa show: the claims said to be claims
        assert "The candidate (served) is a served model" in shown and "Its server claims (not verified" in shown
        captured = {c["name"] for c in content["captured"]}
        assert "scorer_evidence_candidate_transcript" in captured and "scorer_models" in captured
        monkeypatch.setattr(http_client.HTTPTransport, "send", lambda *a, **k: pytest.fail("replay queried"))
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_the_impostor_under_the_same_name_is_a_different_model(vllm_server: VllmServer, tmp_path: Path) -> None:
    """The impostor's scores are declared within [-0.05, 0.05]: a model trained on another machine and perturbed
    gave per-prompt delta-CE beyond [-0.03, 0.03] (-0.0344 within 32 draws, which profile release refuses), so the
    range leaves room; the committed model's impostor: DIFFERENT after 242 prompts, mean 0.0025, 95 % interval
    [0.0006, 0.0040] (measured 2026-11-29; [-0.08, 0.08] would leave it UNDECIDED at n_max 400)."""
    url = vllm_server.impostor_url
    diff = run(_spec(tmp_path, vllm_server, url, bound=0.05)).certificate["content"]["stages"]["diff"]
    assert diff["results"]["decision"] == "DIFFERENT" and diff["results"]["ci"][0] > 0.0005
    assert diff["source"]["models"]["candidate"]["claims"]["served_name"] == vllm_server.name


def test_a_metric_needing_full_distributions_is_refused_for_a_served_model(vllm_server: VllmServer,
                                                                           tmp_path: Path) -> None:
    with pytest.raises(StageError, match="metric sym_kl needs the full next-token distributions.*input 'served'"):
        run(_spec(tmp_path, vllm_server, vllm_server.url, metric="sym_kl"))


def _generated_scores(folder: Path, server: VllmServer, url: str) -> list[float]:
    from certa.engine.core.inputs import load_tables
    from certa.engine.core.scorers.hf_models import HfModelsScorer
    from certa.engine.core.spec import load_plan

    tables = load_tables(load_plan(_spec(folder, server, url, metric="generated_kl")))
    scorer = HfModelsScorer(metric="generated_kl", options={"prompts": "prompts", "seed": 11}, tables=tables)
    prompts = list(scorer.prompts(tables["reference"], tables["served"]))[:16]
    return scorer.score_batch(tables["reference"], tables["served"], prompts, 32).tolist()


def test_generated_token_mode_scores_zero_for_the_same_weights_and_not_for_the_impostor(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    """The served model samples 32 tokens after each prompt (temperature 1, seeded) with their raw log-probs; the
    reference scores the same tokens. Same weights: every prompt's mean ln q - ln p is float32 noise (measured
    max |score| 1.4e-7 over these 16 prompts); the impostor's are per-token KL estimates of a different model
    (measured max 0.020, mean 0.0037).
    The sequential decision in this mode (release, betting, range [-0.08, 0.08], band 0.001, min_effect 0.0005):
    the reference weights' endpoint SAME after 610 prompts (24 s); the impostor UNDECIDED at n_max 1000 (mean
    0.0014 nats per token, 95 % interval [0.0003, 0.0024]: it differs, by less than the declared min_effect)."""
    same = _generated_scores(tmp_path / "same", vllm_server, vllm_server.url)
    other = _generated_scores(tmp_path / "other", vllm_server, vllm_server.impostor_url)
    assert max(abs(v) for v in same) < 1e-5
    assert max(abs(v) for v in other) > 1e-3


def test_generated_token_mode_needs_a_candidate_that_generates(vllm_server: VllmServer, tmp_path: Path) -> None:
    spec = _spec(tmp_path, vllm_server, vllm_server.url, metric="generated_kl")
    text = spec.read_text().replace("reference: reference\n", "reference: served\n").replace(
        "candidate: served\n", "candidate: reference\n")
    spec.write_text(text)
    with pytest.raises(StageError, match="generated_kl needs a candidate that generates.*input 'reference'"):
        run(spec)


def test_the_replay_derives_every_score_from_the_transcript_and_refuses_one_that_does_not_follow(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    """The stage run live, then replayed from what it captured: the scores are derived again from the candidate's
    transcript and the reference's captured log-probs (no model run, no server); a score moved by 1e-12, or an
    answer in the transcript edited, is refused, naming the draw."""
    import numpy as np

    from certa.engine.core.inputs import load_tables
    from certa.engine.core.runtimes.endpoint import read_transcript, transcript_table
    from certa.engine.core.spec import load_plan
    from certa.engine.core.stages import REGISTRY
    from certa.engine.core.stages.base import StageContext
    from certa.engine.core.stages.sequential_diff import CAPTURED_SCORES
    from certa.engine.core.tables import table_from_columns
    from certa.engine.foundation.errors import InputError

    stage = REGISTRY["sequential.diff"]
    plan = load_plan(_spec(tmp_path, vllm_server, vllm_server.impostor_url))
    tables = load_tables(plan)
    knobs = {**plan.stages[0].knobs, "n_max": 40}

    def stage_run(captured: dict | None):
        return stage.run(StageContext(stage_id="diff", knobs=knobs, tables=tables, rng=np.random.default_rng(7),
                                      profile="release", upstream={}, seed={}, captured=captured))

    live = stage_run(None)
    captured = dict(live.captured)
    assert {"scorer_evidence_candidate_transcript", "scorer_evidence_reference_logprobs"} <= set(captured)
    assert stage_run(captured).outputs == live.outputs
    scores = captured[CAPTURED_SCORES]
    moved = scores.numeric("score").copy()
    moved[5] += 1e-12
    forged = table_from_columns(CAPTURED_SCORES, {"draw": scores.numeric("draw"), "prompt_id": list(
        scores.text("prompt_id")), "score": moved})
    with pytest.raises(InputError, match="score of draw 6 is .*, but .* do not follow from the server's recorded answers"):
        stage_run({**captured, CAPTURED_SCORES: forged})
    rows = read_transcript(captured["scorer_evidence_candidate_transcript"])
    at = next(i for i, (_, e) in enumerate(rows) if e.path == "/completions")
    unit, exchange = rows[at]
    edited = exchange.response.replace('"logprob":-', '"logprob":-1', 1)
    assert edited != exchange.response
    rows[at] = (unit, type(exchange)(**{**exchange.__dict__, "response": edited}))
    with pytest.raises(InputError, match="score of draw 1 "):
        name = "scorer_evidence_candidate_transcript"
        stage_run({**captured, name: replace(transcript_table(rows), name=name)})


def test_recompute_evidence_queries_the_server_again_and_reports_each_table(vllm_server: VllmServer,
                                                                             tmp_path: Path) -> None:
    """``--recompute-evidence`` of a served ``sequential.diff`` run: the server queried again and the reference re-run,
    the scores and the reference's log-probs compared row by row, the transcript listed apart; with the impostor at
    the recorded input's name, the scores do not reproduce (the range declared wide enough for the impostor's
    scores: see the impostor test)."""
    from certa.engine.services.evidence_recompute import recompute_evidence

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_spec(tmp_path, vllm_server, vllm_server.url, bound=0.05), ledger=ledger)
        evidence = recompute_evidence(ledger, result.run_id, folders={"reference": tmp_path / "reference"})
        tables = {t.name: t for t in evidence.tables}
        assert evidence.reproduced, evidence.text()
        assert tables["scores"].rows_reproduced == tables["scores"].rows[0]
        assert tables["scorer_evidence_reference_logprobs"].rows_reproduced > 0
        assert [t.name for t in evidence.transcripts] == ["scorer_evidence_candidate_transcript"]
        moved = recompute_evidence(ledger, result.run_id, folders={"reference": tmp_path / "reference",
                                                                   "served": vllm_server.impostor_url})
        assert not moved.reproduced and "scores" in moved.text()
