"""The live scorer hf_models (certa.engine.core.scorers.hf_models) and sequential.diff running it: scores against a plain
transformers forward pass, shifted targets, batch invariance, determinism across processes, early stopping counted
at the models, refusals, and a replay without the model folders."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from certa.engine import run
from certa.engine.services.audit import replay
from certa.engine.services.presentation.html import render_report
from certa.engine.services.report_data import gather_report
from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import MODEL_FORMAT, folder_manifest
from certa.engine.core.scorers import ENTRY_POINT_GROUP, available_scorers, load_scorer, reported_usage
from certa.engine.core.scorers.hf_models import HfModelsScorer
from certa.engine.core.scorers.logprob_tables import LogprobTablesScorer
from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import StageContext
from certa.engine.core.stages.sequential_diff import CAPTURED_IDENTITY, CAPTURED_MODELS, CAPTURED_SCORES, CAPTURED_USAGE
from certa.engine.core.tables import Table, table_from_columns
from certa.ledger import Ledger

from tests.conftest import ROOT, require_model_libraries

STAGE = REGISTRY["sequential.diff"]
PROMPT_LINES = [line.strip() for line in "\n".join(textwrap.dedent(m.__doc__ or "") for m in (json, textwrap))
                .splitlines() if len(line.strip()) >= 30]


def model_table(name: str, folder: Path) -> Table:
    """A model input as the interpreter reads it: the manifest's bytes, with the folder as its origin."""
    manifest = folder_manifest(name, folder, InputLimits())
    return replace(read_input(name, manifest.raw, MODEL_FORMAT, limits=InputLimits()), origin=folder)


def prompts_table(lines: list[str] = PROMPT_LINES) -> Table:
    return table_from_columns("prompts", {"text": lines})


@pytest.fixture
def tables(tiny_models: dict[str, Path]) -> dict[str, Table]:
    return {**{name: model_table(name, folder) for name, folder in tiny_models.items()}, "prompts": prompts_table()}


@pytest.fixture
def hf_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hf_models found by name: from the installed metadata, or (a checkout not re-installed since the entry point
    was added) from a dist-info holding pyproject.toml's own declaration."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared["hf_models"] == "certa.engine.core.scorers.hf_models:HfModelsScorer"
    if "hf_models" not in available_scorers():
        info = tmp_path / "site" / "certa_hf_models-0.0.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: certa-hf-models\nVersion: 0.0.0\n")
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nhf_models = {declared['hf_models']}\n")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert "hf_models" in available_scorers()


def _scorer(metric: str = "delta_ce", **options) -> HfModelsScorer:
    return HfModelsScorer(metric=metric, options={"prompts": "prompts", **options}, tables={"prompts": prompts_table()})


# ------------------------------------------------------------------------------------------ the scores


def _by_hand(folders: tuple[Path, Path], prompt: str, K: int) -> tuple[float, float, float]:
    """(delta_ce, sym_kl, the unshifted delta_ce) from a plain transformers forward of the whole prompt, float64."""
    import tokenizers
    import torch
    import transformers

    ids = tokenizers.Tokenizer.from_file(str(folders[0] / "tokenizer.json")).encode(prompt).ids
    logs = []
    for folder in folders:
        model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double().numpy()
        logs.append(special.log_softmax(logits, axis=-1))
    log_p, log_q = logs
    k = min(K, len(ids) - 1)
    delta = [log_p[t, ids[t + 1]] - log_q[t, ids[t + 1]] for t in range(k)]       # logits at t predict t + 1
    sym = [float(np.sum((np.exp(log_p[t]) - np.exp(log_q[t])) * (log_p[t] - log_q[t]))) for t in range(k)]
    unshifted = [log_p[t, ids[t]] - log_q[t, ids[t]] for t in range(k)]
    return float(np.mean(delta)), float(np.mean(sym)), float(np.mean(unshifted))


def test_scores_match_a_plain_transformers_forward_with_shifted_targets(tiny_models, tables) -> None:
    folders = (tiny_models["baseline"], tiny_models["subject"])
    long_prompt, short_prompt = PROMPT_LINES[0] + " " + PROMPT_LINES[1], PROMPT_LINES[2]
    ref, cand = tables["baseline"], tables["subject"]
    for prompt, K in ((long_prompt, 32), (short_prompt, 32), (long_prompt, 5)):
        delta, sym, unshifted = _by_hand(folders, prompt, K)
        got_delta = _scorer("delta_ce").score(ref, cand, prompt, K)
        got_sym = _scorer("sym_kl").score(ref, cand, prompt, K)
        assert math.isclose(got_delta, delta, rel_tol=1e-4, abs_tol=1e-7), (prompt, K)
        assert math.isclose(got_sym, sym, rel_tol=1e-4, abs_tol=1e-9), (prompt, K)
        assert abs(got_delta - unshifted) > 100 * abs(got_delta - delta)              # the shift matters
        assert got_sym > 0


def test_delta_ce_is_the_logprob_tables_definition_bit_for_bit(tiny_models, tables) -> None:
    """The per-position log-probs written to tables and scored by logprob_tables give the same bits."""
    import torch

    from certa.engine.core.models.runtime import load_causal_lm

    prompts = PROMPT_LINES[:6]
    K = 16
    rows: dict[str, dict[str, list]] = {"ref": {"prompt_id": [], "position": [], "logprob": []},
                                        "cand": {"prompt_id": [], "position": [], "logprob": []}}
    for key, table in (("ref", tables["baseline"]), ("cand", tables["subject"])):
        loaded = load_causal_lm(table)
        for i, prompt in enumerate(prompts):
            ids = loaded.tokenizer.encode(prompt).ids[: K + 1]
            with torch.inference_mode():
                logp = torch.log_softmax(loaded.model(input_ids=torch.tensor([ids])).logits[0], dim=-1)
            for t in range(len(ids) - 1):
                rows[key]["prompt_id"].append(f"p{i}")
                rows[key]["position"].append(t + 1)
                rows[key]["logprob"].append(float(logp[t, ids[t + 1]]))
    ref, cand = table_from_columns("ref", rows["ref"]), table_from_columns("cand", rows["cand"])
    from_tables = LogprobTablesScorer(metric="delta_ce").score_batch(ref, cand, [f"p{i}" for i in range(6)], K)
    live = _scorer("delta_ce").score_batch(tables["baseline"], tables["subject"], prompts, K)
    assert live.tobytes() == from_tables.tobytes()


def test_a_prompts_score_does_not_depend_on_its_batch(tables) -> None:
    prompts = PROMPT_LINES[:12] + PROMPT_LINES[:3]                 # lengths differ; repeats are allowed
    for metric in ("delta_ce", "sym_kl"):
        batched = _scorer(metric).score_batch(tables["baseline"], tables["subject"], prompts, 32)
        one = np.array([_scorer(metric).score(tables["baseline"], tables["subject"], p, 32) for p in prompts])
        assert batched.tobytes() == one.tobytes()


def test_identical_models_score_exactly_zero(tables) -> None:
    for metric in ("delta_ce", "sym_kl"):
        scores = _scorer(metric).score_batch(tables["baseline"], tables["same"], PROMPT_LINES, 32)
        assert np.all(scores == 0.0)


DETERMINISM = """
import sys
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, {root!r})
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import folder_manifest
from certa.engine.core.scorers.hf_models import HfModelsScorer
from certa.engine.core.tables import table_from_columns
def table(name, folder):
    return replace(read_input(name, folder_manifest(name, Path(folder), InputLimits()).raw, "hf-model",
                              limits=InputLimits()),
                   origin=Path(folder))
prompts = table_from_columns("prompts", {{"text": {prompts!r}}})
ref, cand = table("r", {ref!r}), table("c", {cand!r})
for metric in sys.argv[1:]:
    scorer = HfModelsScorer(metric=metric, options={{"prompts": "prompts"}}, tables={{"prompts": prompts}})
    print(metric, scorer.score_batch(ref, cand, scorer.prompts(ref, cand), 32).tobytes().hex())
"""


def test_the_same_scores_in_two_processes(tiny_models) -> None:
    """Two fresh processes, started together, score the same prompts with both metrics, in opposite orders (so
    each metric is scored once first in a process and once after the other metric): the bytes agree."""
    script = DETERMINISM.format(root=str(ROOT), prompts=PROMPT_LINES[:20], ref=str(tiny_models["baseline"]),
                                cand=str(tiny_models["subject"]))
    orders = (("delta_ce", "sym_kl"), ("sym_kl", "delta_ce"))
    children = [subprocess.Popen([sys.executable, "-c", script, *order], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for order in orders]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        outputs.append(dict(line.split() for line in out.splitlines()))
    assert [list(o) for o in outputs] == [list(order) for order in orders]
    for metric in ("delta_ce", "sym_kl"):
        assert outputs[0][metric] == outputs[1][metric] and len(outputs[0][metric]) == 20 * 16, metric  # 20 float64


# -------------------------------------------------------------------------------------------- refusals


def test_refusals_name_the_problem(tables) -> None:
    with pytest.raises(InputError, match="different tokenizers"):
        _scorer().prompts(tables["baseline"], tables["other"])
    with pytest.raises(StageError, match="metric must be one of delta_ce, sym_kl"):
        _scorer("kl")
    with pytest.raises(StageError, match="unknown option"):
        _scorer(text_colum="text")
    with pytest.raises(StageError, match="needs options.prompts"):
        HfModelsScorer(options={}, tables={"prompts": prompts_table()})
    with pytest.raises(StageError, match="'missing', which is not a declared input"):
        HfModelsScorer(options={"prompts": "missing"}, tables={"prompts": prompts_table()})
    with pytest.raises(StageError, match="threads must be an integer"):
        _scorer(threads=0)
    with pytest.raises(StageError, match="not a model folder"):
        _scorer().prompts(tables["prompts"], tables["baseline"])
    with pytest.raises(StageError, match="more than the models' context of 128"):
        _scorer().score(tables["baseline"], tables["subject"], PROMPT_LINES[0], 200)
    short = HfModelsScorer(options={"prompts": "p"}, tables={"p": table_from_columns("p", {"text": ["a", "x y z"]})})
    with pytest.raises(InputError, match="the prompt 'a' has 1 token"):
        short.prompts(tables["baseline"], tables["subject"])
    no_column = HfModelsScorer(options={"prompts": "prompts", "text_column": "prompt"},
                               tables={"prompts": prompts_table()})
    with pytest.raises(InputError, match="no column 'prompt'"):
        no_column.prompts(tables["baseline"], tables["subject"])


def test_load_scorer_passes_the_tables_only_to_a_factory_that_takes_them(hf_registered) -> None:
    scorer = load_scorer("hf_models", metric="sym_kl", options={"prompts": "prompts"},
                         tables={"prompts": prompts_table()})
    assert isinstance(scorer, HfModelsScorer) and scorer.prompt_table.n_rows == len(PROMPT_LINES)
    assert isinstance(load_scorer("logprob_tables", tables={"x": prompts_table()}), LogprobTablesScorer)
    assert reported_usage(LogprobTablesScorer()) is None


def test_reported_usage_must_be_named_counts() -> None:
    class Usage:
        def __init__(self, usage):
            self._usage = usage

        def usage(self):
            return self._usage

    assert reported_usage(Usage({"forward_passes": 4})) == {"forward_passes": 4}
    for bad in ({"forward passes": 1}, {"calls": -1}, {"calls": 1.5}, {"calls": True}, 7):
        with pytest.raises(StageError, match="usage"):
            reported_usage(Usage(bad))


# ----------------------------------------------------------------------------------- sequential.diff live


def _run(knobs: dict, tables: dict, *, seed: int = 1, captured: dict | None = None, profile: str = "dev"):
    resolved = fill_defaults(knobs, load_schema(STAGE.schema_file))
    ctx = StageContext(stage_id="diff", knobs=resolved, tables=tables, rng=np.random.default_rng(seed),
                       profile=profile, upstream={}, seed={}, captured=captured)
    return STAGE.run(ctx)


def _knobs(candidate: str, metric: str = "delta_ce", **extra) -> dict:
    return {"scorer": {"name": "hf_models", "metric": metric, "options": {"prompts": "prompts"}},
            "reference": "baseline", "candidate": candidate, "positions_per_prompt": 32, "batch_size": 4,
            "n_max": 200, "alpha": 0.01, **extra}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Forward calls and rows counted at the models themselves (a hook on every model the scorer loads: its
    runtime, ``hf``, loads a folder with ``PreparedModel.load``)."""
    import certa.engine.core.models.runtime as runtime

    counts = {"calls": 0, "rows": 0}
    original = runtime.PreparedModel.load

    def load_and_count(self):  # type: ignore[no-untyped-def]
        loaded = original(self)

        def hook(model, args, kwargs, output):
            counts["calls"] += 1
            counts["rows"] += int(kwargs["input_ids"].shape[0])

        loaded.model.register_forward_hook(hook, with_kwargs=True)
        return loaded

    monkeypatch.setattr(runtime.PreparedModel, "load", load_and_count)
    return counts


def test_identical_models_are_identical_after_identical_model_n_min_under_sym_kl_only(hf_registered, tables,
                                                                                    counted) -> None:
    out = _run(_knobs("same", "sym_kl", range=[0, 1]), tables, profile="release")
    results = out.outputs["results"]
    assert results["decision"] == "IDENTICAL" and results["outcome"] == "identical_zero"
    assert results["n_used"] == 20 == out.captured[CAPTURED_SCORES].n_rows     # 5 batches of 4
    assert np.all(out.captured[CAPTURED_SCORES].numeric("score") == 0.0)
    assert "identical on the 20 prompts scored" in out.outputs["identity"]["statement"]
    assert counted["rows"] == 2 * 20
    # delta_ce is 0 whenever the teacher-forced token keeps its log-prob: its zeros are not identity (3.0.0)
    out = _run(_knobs("same", "delta_ce", range=[-1, 1], n_max=24), tables, profile="release")
    assert out.outputs["results"]["decision"] == "UNDECIDED" and out.outputs["identity"]["zero_means_identical"] is False
    assert np.all(out.captured[CAPTURED_SCORES].numeric("score") == 0.0)


def test_a_perturbed_model_is_different_and_evaluation_stops_early(hf_registered, tables, counted) -> None:
    out = _run(_knobs("subject", "sym_kl", range=[0, 0.01], min_effect=0.0001), tables, profile="release")
    results = out.outputs["results"]
    scored = out.outputs["source"]["prompts_scored"]
    assert results["decision"] == "DIFFERENT" and results["direction"] == "higher"
    assert results["n_used"] <= scored < results["n_used"] + 4 and scored < 200 / 2
    usage = next(d.detail for d in out.decisions if d.kind == "scorer_usage")
    assert usage == {"scorer": "hf_models", "prompts_scored": scored, "n_max": 200, "stopped_before_n_max": True,
                     "forward_passes": 2 * scored, "model_calls": counted["calls"], "tokens": usage["tokens"]}
    assert counted["rows"] == 2 * scored                            # each prompt once through each model
    table = out.captured[CAPTURED_USAGE]
    assert table.n_rows == 1 and int(table.numeric("forward_passes")[0]) == 2 * scored


def test_a_replay_restates_scores_and_usage_without_loading_a_model(hf_registered, tables,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    knobs = _knobs("subject", "delta_ce", range=[-0.1, 0.1], equivalence_band=0.01)
    live = _run(knobs, tables)
    import certa.engine.core.scorers.hf_models as module

    def refuse(name, table, **options):
        raise AssertionError("a replay must not load a model")

    monkeypatch.setattr(module, "load_runtime", refuse)
    replayed = _run(knobs, tables, captured=dict(live.captured), seed=999)
    assert json.dumps(replayed.outputs, sort_keys=True) == json.dumps(live.outputs, sort_keys=True)
    assert [(d.kind, d.detail) for d in replayed.decisions] == [(d.kind, d.detail) for d in live.decisions]


def test_a_run_replays_from_the_ledger_with_the_model_folders_deleted(hf_registered, tiny_models,
                                                                      tmp_path: Path) -> None:
    for name in ("baseline", "subject"):
        shutil.copytree(tiny_models[name], tmp_path / name)
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in PROMPT_LINES))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "certa: 1\nname: live-replay\nseed: 3\nprofile: release\n"
        "inputs:\n  baseline: {model: baseline}\n  subject: {model: subject}\n  prompts: {path: prompts.jsonl}\n"
        "stages:\n  - id: diff\n    use: sequential.diff\n"
        "    with: {scorer: {name: hf_models, metric: sym_kl, options: {prompts: prompts}}, reference: baseline,\n"
        "           candidate: subject, range: [0, 0.01], min_effect: 0.0001}\n"
        "gates:\n  - id: differ\n    metric: diff.results.decision\n    equals: DIFFERENT\n")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        assert result.verdict == "PASS"
        content = result.certificate["content"]
        assert [i["format"] for i in content["inputs"]] == ["hf-model", "hf-model", "jsonl"]
        assert [c["name"] for c in content["captured"]] == [CAPTURED_SCORES, CAPTURED_USAGE, CAPTURED_IDENTITY,
                                                            CAPTURED_MODELS]
        models = content["stages"]["diff"]["source"]["models"]  # 3.1.0: which models the scorer ran
        assert {role: (m["kind"], m["sha256"]) for role, m in models.items()} == {
            "reference": ("local", content["inputs"][0]["sha256"]), "candidate": ("local", content["inputs"][1]["sha256"])}
        shutil.rmtree(tmp_path / "baseline")
        shutil.rmtree(tmp_path / "subject")
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes


@pytest.mark.models
def test_the_example_runs_and_passes(hf_registered, tmp_path: Path) -> None:
    require_model_libraries()
    example = ROOT / "specs" / "model-sequential"
    if not (example / "models" / "base").exists():
        pytest.skip("build the example's models first: python3 specs/model-sequential/make_data.py")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(example / "spec.yaml", ledger=ledger)
        assert result.verdict == "PASS"
        stages = result.certificate["content"]["stages"]
        assert stages["cross-entropy"]["results"]["decision"] == "SAME"
        assert stages["distribution"]["results"]["decision"] == "DIFFERENT"
        assert all(s["source"]["prompts_scored"] < 200 for s in stages.values())
        assert replay(ledger, result.run_id).reproduced
        report = render_report(gather_report(ledger, result.run_id))
    for stage_id, outputs in stages.items():  # the report says what each live scorer spent
        usage = report.split(f'id="stage-{stage_id}"')[1].split("What the scorer spent")[1].split("</table>")[0]
        scored = outputs["source"]["prompts_scored"]
        assert f"<td>prompts scored</td><td>{scored}</td>" in usage.replace('class="num" ', "")
        assert "forward passes" in usage and "model calls" in usage


def test_a_rule_that_holds_on_the_first_batch_does_not_stop_scoring_before_n_min(hf_registered, tables) -> None:
    """asymptotic_cs clears 0 after 4 sym_kl scores; scoring goes on to n_min (it used to stop at 4 and refuse)."""
    out = _run(_knobs("subject", "sym_kl", method="asymptotic_cs"), tables)
    results = out.outputs["results"]
    assert results["decision"] == "DIFFERENT" and results["n_used"] == 10
    assert out.outputs["source"]["prompts_scored"] == 12                     # whole batches of 4 up to n_min
