"""The runtime seam (``certa.runtimes``): discovery, the choice of a runtime by input format, refusals, and the
protocol driven end to end by a runtime that is not certa's: a pure-numpy bigram model (``toy_runtime``) runs
``model.windows`` and the ``hf_models`` scorer of ``sequential.diff``, its numbers checked against hand
computation. No torch: these take a fraction of a second."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points

import numpy as np
import pytest

import certa.engine.core.runtimes as runtimes
from certa.engine.foundation.errors import StageError
from certa.engine.core.endpoint_input import ENDPOINT_FORMAT
from certa.engine.core.models.manifest import MODEL_FORMAT
from certa.engine.core.runtimes import (ENTRY_POINT_GROUP, Runtime, available_runtimes, load_runtime,
                                        runtime_for)
from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import StageContext
from certa.engine.core.stages.sequential_diff import CAPTURED_SCORES, CAPTURED_USAGE
from certa.engine.core.tables import table_from_columns
from tests.conftest import ROOT
from tests.core.runtimes.toy_runtime import LETTERS, ToyRuntime, log_probs, toy_table

RNG = np.random.default_rng(20261201)
BASE = RNG.normal(size=(5, 5))
SUBJ = BASE + 0.3 * RNG.normal(size=(5, 5))
DOCUMENTS = ["".join(RNG.choice(list(LETTERS), size=n)) for n in (1, 2, 9, 23, 40, 17)]
PROMPTS = ["".join(RNG.choice(list(LETTERS), size=n)) for n in (12, 3, 30, 8, 12, 40, 5, 19)]


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy runtimes registered by a third-party package: entry points of the group beside certa's own."""
    toys = [EntryPoint(name, f"tests.core.runtimes.toy_runtime:{obj}", ENTRY_POINT_GROUP)
            for name, obj in (("toy", "ToyRuntime"), ("toy_full", "ToyFullRuntime"))]

    def with_toys(*, group: str) -> list[EntryPoint]:
        return [*entry_points(group=group), *(toys if group == ENTRY_POINT_GROUP else [])]

    monkeypatch.setattr(runtimes, "entry_points", with_toys)


# ----------------------------------------------------------------------------------- discovery and choice


def test_the_shipped_runtimes_are_registered_and_run_model_folders_and_endpoints() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared == {"hf": "certa.engine.core.runtimes.hf:HfRuntime",
                        "endpoint": "certa.engine.core.runtimes.endpoint:EndpointRuntime"}
    assert {"hf", "endpoint"} <= set(available_runtimes())
    folder = replace(table_from_columns("m", {"x": ["1"]}), fmt=MODEL_FORMAT)
    assert runtime_for(folder) == "hf"
    assert runtime_for(replace(folder, fmt=ENDPOINT_FORMAT)) == "endpoint"


def test_an_unknown_runtime_is_one_line_with_a_hint() -> None:
    table = table_from_columns("t", {"x": ["1"]})
    with pytest.raises(StageError) as error:
        load_runtime("hff", table)
    message = str(error.value)
    assert "\n" not in message and "runtime 'hff' is not registered in the 'certa.runtimes'" in message
    assert "did you mean 'hf'?" in message
    with pytest.raises(StageError, match=r"runtime 'vllm-remote' is not registered .* \(registered: .*hf.*\); install"):
        load_runtime("vllm-remote", table)


def test_an_input_no_runtime_runs_is_refused_by_name() -> None:
    with pytest.raises(StageError, match=r"^'t' \(baseline\) is not a model input: a csv table, not a model folder "
                                         r"\(declare it with model: FOLDER\); no runtime .* runs csv inputs"):
        runtime_for(table_from_columns("t", {"x": ["1"]}), "'t' (baseline)")


def test_a_third_party_runtime_is_chosen_for_the_format_it_declares(toy_registered) -> None:
    assert {"hf", "toy", "toy_full"} <= set(available_runtimes())
    table = toy_table("served", BASE)
    assert runtime_for(table) == "toy"
    runtime = load_runtime("toy", table, device="cpu", dtype="float32", threads=2)
    assert isinstance(runtime, ToyRuntime) and isinstance(runtime, Runtime)
    assert runtime.options == {"device": "cpu", "dtype": "float32", "threads": 2}
    np.testing.assert_allclose(runtime.log_p, log_probs(BASE), rtol=0, atol=1e-15)


def test_two_runtimes_for_one_format_or_a_factory_that_returns_no_runtime_are_refused(monkeypatch) -> None:
    doubled = [EntryPoint(name, "tests.core.runtimes.toy_runtime:ToyRuntime", ENTRY_POINT_GROUP) for name in ("a", "b")]
    monkeypatch.setattr(runtimes, "entry_points", lambda *, group: doubled)
    with pytest.raises(StageError, match="input 'served': the runtimes a, b of the 'certa.runtimes' entry-point group "
                                         "all run toy-model inputs"):
        runtime_for(toy_table("served", BASE))
    junk = [EntryPoint("junk", "tests.core.runtimes.toy_runtime:not_a_runtime", ENTRY_POINT_GROUP)]
    monkeypatch.setattr(runtimes, "entry_points", lambda *, group: junk)
    with pytest.raises(StageError, match="runtime 'junk' returned a Encoding without name, sha256, tokenizer"):
        load_runtime("junk", toy_table("served", BASE))


# ------------------------------------------------------------------------------------ model.windows, end to end


def _windows_by_hand(weights: np.ndarray, seq_len: int, stride: int) -> tuple[list[int], list[float]]:
    """(targets, NLL sum) of each token window, written out position by position."""
    lp = log_probs(weights)
    counts, sums = [], []
    for document in DOCUMENTS:
        ids = [LETTERS.index(c) for c in document]
        for first in range(1, len(ids), stride):
            end = min(first + stride, len(ids))
            counts.append(end - first)
            sums.append(-sum(lp[ids[t - 1], ids[t]] for t in range(first, end)))
    return counts, sums


def _stage_context(stage: str, knobs: dict, tables: dict, captured: dict | None = None) -> StageContext:
    resolved = fill_defaults(knobs, load_schema(REGISTRY[stage].schema_file))
    return StageContext(stage_id="w", knobs=resolved, tables=tables, rng=np.random.default_rng(1), profile="dev",
                        upstream={}, seed={}, captured=captured)


def test_a_third_party_runtime_drives_model_windows_in_any_pairing(toy_registered) -> None:
    tables = {"base": toy_table("base", BASE), "subj": toy_table("subj", SUBJ, fmt="toy-full-model"),
              "text": table_from_columns("text", {"text": DOCUMENTS})}
    knobs = {"baseline": "base", "subject": "subj", "text": "text", "seq_len": 8, "stride": 5, "batch_size": 2}
    out = REGISTRY["model.windows"].run(_stage_context("model.windows", knobs, tables))
    assert out.outputs["unit"] == "tokens" and out.outputs["tokenizers_match"] is True
    for arm, weights in (("baseline", BASE), ("subject", SUBJ)):
        counts, sums = _windows_by_hand(weights, 8, 5)
        assert out.captured[arm].numeric("tokens").tolist() == counts
        np.testing.assert_allclose(out.captured[arm].numeric("nll_sum"), sums, rtol=1e-12)
    described = out.outputs["models"]
    assert described["baseline"]["manifest_sha256"] == tables["base"].sha256
    assert described["subject"]["model_type"] == "bigram" and described["subject"]["parameters"] == 25
    assert out.outputs["runtime"]["device"] == "remote"
    replayed = REGISTRY["model.windows"].run(_stage_context("model.windows", knobs, tables, dict(out.captured)))
    assert json.dumps(replayed.outputs, sort_keys=True) == json.dumps(out.outputs, sort_keys=True)


def test_byte_windows_start_with_the_runtimes_first_token(toy_registered) -> None:
    tables = {"base": toy_table("base", BASE), "subj": toy_table("subj", SUBJ),
              "text": table_from_columns("text", {"text": DOCUMENTS})}
    knobs = {"baseline": "base", "subject": "subj", "text": "text", "unit": "bytes", "window_bytes": 16}
    out = REGISTRY["model.windows"].run(_stage_context("model.windows", knobs, tables))
    lp = log_probs(BASE)
    pieces = [d[i: i + 16] for d in DOCUMENTS for i in range(0, len(d), 16)]
    by_hand = [-sum(lp[a, b] for a, b in zip([0, *ids[:-1]], ids)) for ids in
               ([LETTERS.index(c) for c in piece] for piece in pieces)]
    np.testing.assert_allclose(out.captured["baseline"].numeric("nll_sum"), by_hand, rtol=1e-12)


# ------------------------------------------------------------------------- the hf_models scorer, end to end


def _diff_knobs(candidate: str, metric: str) -> dict:
    return {"scorer": {"name": "hf_models", "metric": metric, "options": {"prompts": "prompts"}},
            "reference": "base", "candidate": candidate, "positions_per_prompt": 10, "batch_size": 3, "n_min": 3, "n_max": 8,
            "alpha": 0.05, "range": [-5, 5] if metric == "delta_ce" else [0, 10]}


def _scores_by_hand(metric: str) -> dict[str, float]:
    p, q = log_probs(BASE), log_probs(SUBJ)
    scores = {}
    for prompt in PROMPTS:
        ids = [LETTERS.index(c) for c in prompt][:11]
        if metric == "delta_ce":
            terms = [p[ids[t - 1], ids[t]] - q[ids[t - 1], ids[t]] for t in range(1, len(ids))]
        else:
            terms = [float(np.sum((np.exp(p[u]) - np.exp(q[u])) * (p[u] - q[u]))) for u in ids[:-1]]
        scores[prompt] = float(np.mean(terms))
    return scores


def _diff_tables(candidate_format: str) -> dict:
    base_format = "toy-full-model" if candidate_format == "toy-full-model" else "toy-model"
    return {"base": toy_table("base", BASE, fmt=base_format), "subj": toy_table("subj", SUBJ, fmt=candidate_format),
            "prompts": table_from_columns("prompts", {"text": PROMPTS})}


@pytest.mark.parametrize("metric", ["delta_ce", "sym_kl"])
def test_a_third_party_runtime_drives_the_hf_models_scorer(toy_registered, metric) -> None:
    tables = _diff_tables("toy-full-model" if metric == "sym_kl" else "toy-model")
    out = REGISTRY["sequential.diff"].run(_stage_context("sequential.diff", _diff_knobs("subj", metric), tables))
    scores = out.captured[CAPTURED_SCORES]
    by_hand = _scores_by_hand(metric)
    got = dict(zip(scores.text("prompt_id").tolist(), scores.numeric("score").tolist()))
    assert got and got == pytest.approx({prompt: by_hand[prompt] for prompt in got}, rel=1e-12, abs=1e-15)
    usage = out.captured[CAPTURED_USAGE]
    assert set(usage.columns) >= {"requests", "tokens"} and int(usage.numeric("requests")[0]) == 2 * scores.n_rows


def test_sym_kl_is_refused_for_a_runtime_without_next_token_distributions(toy_registered) -> None:
    tables = _diff_tables("toy-model")
    with pytest.raises(StageError) as error:
        REGISTRY["sequential.diff"].run(_stage_context("sequential.diff", _diff_knobs("subj", "sym_kl"), tables))
    assert str(error.value) == ("scorer 'hf_models': metric sym_kl needs the full next-token distributions of both "
                                "models, but input 'base' (runtime 'toy') gives the log-probs of given tokens only, as "
                                "a served model does; use metric delta_ce")
