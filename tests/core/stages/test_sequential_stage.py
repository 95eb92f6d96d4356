"""Stage sequential.diff: inputs, decisions per check, certificate outputs, profile rules, scorer runs and replay."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from certa.engine import ProfileAbort, run
from certa.engine.services.audit import replay
from certa.engine.foundation.canonical import to_jsonable
from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.scorers import available_scorers
from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import StageContext
from certa.engine.core.stages.sequential_diff import CAPTURED_SCORES, audit_sequential_diff
from certa.engine.core.tables import table_from_columns
from certa.ledger import Ledger

from tests.conftest import PLUGIN_MODULE, ROOT

STAGE = REGISTRY["sequential.diff"]
EXAMPLE = ROOT / "specs" / "sequential-diff"


FILE_ORDER = REGISTRY.get("sequential.diff", "2.0.0")
"""The last version that takes a table's rows in file order (3.0.0 takes them in a seeded order)."""


def _run(knobs: dict, tables: dict, *, profile: str = "dev", captured: dict | None = None, seed: int = 1,
         stage=STAGE):
    resolved = fill_defaults(knobs, load_schema(stage.schema_file))
    ctx = StageContext(stage_id="diff", knobs=resolved, tables=tables, rng=np.random.default_rng(seed),
                       profile=profile, upstream={}, seed={}, captured=captured)
    return stage.run(ctx)


def _scores(values, **extra) -> dict:
    return {"s": table_from_columns("s", {"score": np.asarray(values, dtype=float), **extra})}


def _checks(out) -> list:
    return [d for d in out.decisions if d.kind == "sequential_check"]


def test_report_has_the_seed_keys_and_the_method_statement() -> None:
    out = _run({"input": "s", "range": [0, 0.2]}, _scores(np.random.default_rng(0).normal(0.05, 0.01, 200)))
    results = out.outputs["results"]
    assert {"decision", "reason", "direction", "n_used", "mean", "variance", "std_dev", "ci", "half_width",
            "rel_me"} <= set(results)
    assert results["decision"] == "DIFFERENT" and results["direction"] == "higher" and results["n_used"] == 10
    assert results["half_width"] == (results["ci"][1] - results["ci"][0]) / 2
    assert out.outputs["method"]["validity"] == "anytime-valid" and out.outputs["method"]["name"] == "betting"
    assert out.outputs["method"]["parameters"]["grid_size"] == 1000
    assert out.outputs["range"]["source"] == "declared"
    assert "assumed to lie in [0, 0.2]" in out.outputs["range"]["statement"]
    assert results["estimand"] == "mean score difference" and results["confidence_level"] == 0.99
    assert out.outputs["sequence"]["stopping_time"] == 10
    assert to_jsonable(out.outputs) == to_jsonable(to_jsonable(out.outputs))
    assert audit_sequential_diff(to_jsonable(out.outputs)) == []


@pytest.mark.parametrize("stage", [FILE_ORDER, STAGE], ids=lambda s: s.version)
def test_every_check_is_a_decision_up_to_the_stop(stage) -> None:
    out = _run({"input": "s", "n_min": 5, "n_max": 40, "rel_margin_target": None, "range": [-0.1, 0.1]},
               _scores(np.random.default_rng(1).normal(0.0, 0.05, 100)), stage=stage)
    checks = _checks(out)
    assert [c.detail["n"] for c in checks] == list(range(5, 41))
    assert all(not c.detail["stop"] for c in checks[:-1]) and checks[-1].detail["stop"]
    assert checks[-1].detail["decision"] == "UNDECIDED" and out.outputs["results"]["reason"].startswith("n_max = 40")
    assert set(checks[0].detail) >= {"n", "mean", "lower", "upper", "half_width", "rel_me", "p_value", "rules"}
    assert set(checks[0].detail["rules"]) == {"identical", "different", "same", "precision"}
    assert out.outputs["sequence"]["checks"] == 36
    outside = np.abs(np.random.default_rng(1).normal(0.0, 0.05, 100)) > 0.1
    # dev: clipped, with a warning; the 40 used are the file's first 40 (2.0.0) or the seeded order's (3.0.0)
    used = outside[:40] if stage is FILE_ORDER else outside[_seeded_order(np.random.default_rng(1).normal(
        0.0, 0.05, 100), seed=1)[:40]]
    assert out.outputs["range"]["n_clipped"] == int(np.sum(used)) > 0
    assert [d.kind for d in out.decisions if d.detail.get("outcome") == "warn"] == ["out_of_range"]


def test_batch_checks_stop_at_n_max_without_overshooting() -> None:
    out = _run({"input": "s", "n_min": 1, "n_max": 10, "batch_size": 4, "check_every": "batch",
                "rel_margin_target": None, "range": [-0.2, 0.2]},
               _scores(np.random.default_rng(2).uniform(-0.1, 0.1, 50)))
    assert [c.detail["n"] for c in _checks(out)] == [4, 8, 10]
    assert out.outputs["results"]["n_used"] == 10


def _seeded_order(scores: np.ndarray, seed: int) -> np.ndarray:
    """3.0.0's order of a table without prompt ids, written out: sorted by score, then ranked by one raw 64-bit
    draw each of the stage's generator."""
    draws = np.random.default_rng(seed).bit_generator.random_raw(scores.size)
    return np.argsort(scores, kind="stable")[np.argsort(draws, kind="stable")]


def test_positions_are_averaged_per_prompt_in_arrival_order_up_to_2_0_0() -> None:
    # prompt p2 arrives first; K = 2 keeps positions 0 and 1 of each prompt
    table = {"s": table_from_columns("s", {
        "prompt_id": ["p2", "p1", "p2", "p1", "p2", "p1"], "position": [1, 0, 0, 2, 2, 1],
        "score": [0.02, 0.01, 0.04, 0.5, 0.5, 0.03]})}
    out = _run({"input": "s", "n_min": 1, "n_max": 2, "positions_per_prompt": 2, "rel_margin_target": None,
                "range": [0, 0.2]}, table, stage=FILE_ORDER)
    assert out.outputs["source"]["prompts"] == 2
    assert out.outputs["source"]["positions_used"] == {"min": 2, "max": 2}
    assert out.outputs["results"]["mean"] == pytest.approx((0.03 + 0.02) / 2)
    first = _checks(out)[0].detail
    assert first["n"] == 1 and first["mean"] == pytest.approx(0.03)      # p2 = mean(0.04, 0.02)


def test_a_tables_exact_zeros_were_identical_up_to_2_0_0_and_are_not_from_3_0_0() -> None:
    old = _run({"input": "s", "range": [-1, 1]}, _scores(np.zeros(100)), stage=FILE_ORDER)
    assert old.outputs["results"]["decision"] == "IDENTICAL" and old.outputs["results"]["n_used"] == 20
    new = _run({"input": "s", "range": [-0.2, 0.2], "equivalence_band": 0.1}, _scores(np.zeros(100)))
    assert new.outputs["results"]["decision"] == "SAME" and new.outputs["identity"]["zero_means_identical"] is False


@pytest.mark.parametrize("method,validity", [("betting", "anytime-valid"), ("eb_cs", "anytime-valid"),
                                             ("stitched", "anytime-valid"),
                                             ("asymptotic_cs", "asymptotic anytime-valid"),
                                             ("eb_fixed_n", "not valid under optional stopping"),
                                             ("t_fixed_n", "not valid under optional stopping")])
def test_each_method_states_its_validity(method: str, validity: str) -> None:
    bounded = method not in ("asymptotic_cs", "t_fixed_n")
    knobs = {"input": "s", "method": method, **({"range": [0, 0.2]} if bounded else {})}
    out = _run(knobs, _scores(np.random.default_rng(3).normal(0.05, 0.01, 200)))
    assert out.outputs["method"]["validity"] == validity
    assert out.outputs["results"]["decision"] == "DIFFERENT"
    rule = next(d for d in out.decisions if d.kind == "profile_rule")
    assert rule.detail["outcome"] == ("pass" if validity == "anytime-valid" else "warn")
    assert (out.outputs["range"]["low"] is not None) == bounded
    assert out.outputs["range"]["source"] == ("declared" if bounded else "none: unbounded method")


def test_release_profile_refuses_methods_not_valid_under_optional_stopping() -> None:
    data = _scores(np.random.default_rng(4).normal(0.05, 0.01, 50))
    with pytest.raises(ProfileAbort, match="requires an anytime-valid method") as info:
        _run({"input": "s", "method": "t_fixed_n"}, data, profile="release")
    assert info.value.decisions[0].detail["outcome"] == "abort"
    with pytest.raises(ProfileAbort):
        _run({"input": "s", "method": "asymptotic_cs"}, data, profile="release")
    assert _run({"input": "s", "method": "asymptotic_cs"}, data, profile="ci").outputs["results"]["n_used"] >= 10
    with pytest.raises(ProfileAbort):
        _run({"input": "s", "method": "eb_fixed_n"}, data, profile="ci")


def test_knob_and_input_errors_name_the_problem() -> None:
    data = _scores(np.full(30, 0.1))
    with pytest.raises(StageError, match="either 'input'"):
        _run({"input": "s", "scorer": {"name": "logprob_tables"}, "reference": "s", "candidate": "s"}, data)
    with pytest.raises(StageError, match="'scorer' needs 'reference' and 'candidate'"):
        _run({"scorer": {"name": "logprob_tables"}}, data)
    with pytest.raises(StageError, match="'range' must be \\[low, high\\] with finite low < high"):
        _run({"input": "s", "range": [0.3, 0.2]}, data)
    with pytest.raises(StageError, match="n_min = 50"):
        _run({"input": "s", "n_min": 50}, data)
    with pytest.raises(InputError, match="no column 'delta'"):
        _run({"input": "s", "columns": {"score": "delta"}}, data)
    with pytest.raises(InputError, match="not a number"):
        _run({"input": "s"}, {"s": table_from_columns("s", {"score": ["0.1", "x"]})})
    with pytest.raises(InputError, match="no 'prompt_id' column"):
        _run({"input": "s"}, _scores([0.1, 0.2], position=[0, 1]))


def test_audit_checks_catch_an_edited_decision() -> None:
    out = to_jsonable(_run({"input": "s", "range": [0, 0.2]},
                           _scores(np.random.default_rng(5).normal(0.05, 0.01, 60))).outputs)
    out["results"]["decision"] = "SAME"
    assert any("SAME" in p for p in audit_sequential_diff(out))
    out["results"]["half_width"] = 1.0
    assert any("half_width" in p for p in audit_sequential_diff(out))


# ----------------------------------------------------------------------------------------- scorer runs


def _logprob_tables(n_prompts: int = 60, shift: float = 0.03):
    rng = np.random.default_rng(7)
    ids = np.repeat([f"p{i:03d}" for i in range(n_prompts)], 4)
    pos = np.tile(np.arange(4), n_prompts)
    ref = -rng.gamma(2.0, 1.0, size=ids.size)
    cand = ref - shift + rng.normal(0, 0.01, size=ids.size)
    return {"ref": table_from_columns("ref", {"prompt_id": ids, "position": pos, "logprob": ref}),
            "cand": table_from_columns("cand", {"prompt_id": ids, "position": pos, "logprob": cand})}


SCORER_KNOBS = {"scorer": {"name": "logprob_tables", "metric": "delta_ce"}, "reference": "ref", "candidate": "cand",
                "positions_per_prompt": 4, "n_min": 10, "range": [-0.2, 0.2]}


def test_scorer_run_records_its_scores_and_stops_scoring_at_the_decision() -> None:
    out = _run(SCORER_KNOBS, _logprob_tables())
    table = out.captured[CAPTURED_SCORES]
    assert out.outputs["results"]["decision"] == "DIFFERENT"
    n_used = out.outputs["results"]["n_used"]
    assert n_used <= table.n_rows < n_used + SCORER_KNOBS.get("batch_size", 4)    # whole batches, then stop
    assert out.outputs["source"]["prompts_scored"] == table.n_rows
    assert list(table.columns) == ["draw", "prompt_id", "score"]
    again = _run(SCORER_KNOBS, _logprob_tables())
    assert again.captured[CAPTURED_SCORES].sha256 == table.sha256     # same seed, same prompts, same scores


def test_replay_from_captured_scores_reproduces_outputs_without_the_scorer(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = _logprob_tables()
    live = _run(SCORER_KNOBS, tables)
    import certa.engine.core.stages.sequential_diff as stage_module

    def refuse(*args, **kwargs):
        raise AssertionError("the scorer must not be called in a replay")

    monkeypatch.setattr(stage_module, "load_scorer", refuse)
    replayed = _run(SCORER_KNOBS, tables, captured=dict(live.captured), seed=999)
    assert to_jsonable(replayed.outputs) == to_jsonable(live.outputs)
    assert [d.detail for d in replayed.decisions] == [d.detail for d in live.decisions]


# -------------------------------------------------------------------------------------------- end to end


def test_example_spec_runs_and_replays_from_the_ledger(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(EXAMPLE / "spec.yaml", ledger=ledger)
        assert result.verdict == "PASS"
        stages = result.certificate["content"]["stages"]
        assert stages["finetune"]["results"]["decision"] == "DIFFERENT"
        assert stages["quantized"]["results"]["decision"] == "SAME"
        assert [c["name"] for c in result.certificate["content"]["captured"]] == [CAPTURED_SCORES]
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes


def test_a_run_with_a_scorer_plugin_replays_bit_for_bit_without_calling_it(tmp_path: Path, scorer_plugin: Path) -> None:
    rng = np.random.default_rng(11)
    ids = [f"x{i:03d}" for i in range(80)]
    ref = rng.normal(0, 1, 80)
    (tmp_path / "ref.csv").write_text("prompt_id,value\n" + "".join(f"{i},{float(v)!r}\n" for i, v in zip(ids, ref)))
    (tmp_path / "cand.csv").write_text("prompt_id,value\n" + "".join(
        f"{i},{float(v + 0.004 + rng.normal(0, 0.002))!r}\n" for i, v in zip(ids, ref)))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "certa: 1\nname: plugin-replay\nseed: 5\nprofile: release\n"
        "inputs:\n  ref: {path: ref.csv}\n  cand: {path: cand.csv}\n"
        "stages:\n  - id: diff\n    use: sequential.diff\n"
        "    with: {scorer: {name: test_shift, options: {shift: 0.0}}, reference: ref, candidate: cand,\n"
        "           range: [-0.05, 0.05], equivalence_band: 0.01, n_max: 300}\n"
        "gates:\n  - id: equivalent\n    metric: diff.results.decision\n    equals: SAME\n")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec, ledger=ledger)
        plugin = sys.modules[PLUGIN_MODULE]
        n_used = result.certificate["content"]["stages"]["diff"]["results"]["n_used"]
        assert result.verdict == "PASS" and len(plugin.CALLS) >= n_used
        checks = [e.data() for e in ledger.entries(run_id=result.run_id, kinds=["decision"])
                  if e.data()["kind"] == "sequential_check"]
        assert [c["detail"]["n"] for c in checks] == list(range(10, n_used + 1))      # the trajectory
        assert checks[-1]["detail"]["decision"] == "SAME"
        plugin.CALLS.clear()
        sys.path.remove(str(scorer_plugin))                      # uninstall the plugin: a replay needs no model
        sys.modules.pop(PLUGIN_MODULE)
        importlib.invalidate_caches()
        assert "test_shift" not in available_scorers()
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes
        assert plugin.CALLS == []


def test_a_method_the_profile_refuses_never_calls_the_scorer(tmp_path: Path, scorer_plugin: Path) -> None:
    (tmp_path / "ref.csv").write_text("prompt_id,value\na,0.1\nb,0.2\n")
    (tmp_path / "cand.csv").write_text("prompt_id,value\na,0.1\nb,0.3\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "certa: 1\nname: refused\nseed: 5\nprofile: release\n"
        "inputs:\n  ref: {path: ref.csv}\n  cand: {path: cand.csv}\n"
        "stages:\n  - id: diff\n    use: sequential.diff\n"
        "    with: {scorer: {name: test_shift}, reference: ref, candidate: cand, method: t_fixed_n}\n")
    with pytest.raises(ProfileAbort, match="anytime-valid"):
        run(spec)
    assert PLUGIN_MODULE not in sys.modules or sys.modules[PLUGIN_MODULE].CALLS == []


def test_an_unbounded_sequence_that_never_narrows_is_reported_and_audits_cleanly() -> None:
    # asymptotic_cs has no variance estimate while all scores are equal: the CS stays the whole line
    out = _run({"input": "s", "method": "asymptotic_cs", "n_max": 30}, _scores(np.full(40, 0.1)))
    stored = to_jsonable(out.outputs)
    assert stored["results"]["decision"] == "UNDECIDED" and stored["results"]["ci"] == ["-Infinity", "Infinity"]
    assert audit_sequential_diff(stored) == []


@pytest.mark.parametrize("version", ["1.0.0", "1.1.0", "2.0.0", "3.0.0"])
def test_schema_has_the_seed_knob_names_and_defaults(version: str) -> None:
    from jsonschema import Draft202012Validator
    schema = load_schema(REGISTRY.get("sequential.diff", version).schema_file)
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "urn:certa:schema:stages:sequential.diff" and schema["additionalProperties"] is False
    seed_defaults = {"alpha": 0.01, "rel_margin_target": 0.05, "min_effect_floor": 1e-4, "n_min": 10, "n_max": 200,
                     "batch_size": 4, "positions_per_prompt": 32, "equivalence_band": None,
                     "identical_model_n_min": 20,
                     **({"early_stop_threshold": 1e-6} if version < "3" else {}),   # 3.0.0: removed, with its rule
                     **({"clip_low": 0.0, "clip_high": 0.2} if version < "2" else
                        {"range": None, "out_of_range": "refuse"})}       # 2.0.0: the range has no default
    props = schema["properties"]
    assert {k: props[k]["default"] for k in seed_defaults} == seed_defaults
    assert props["method"]["default"] == "betting" and props["check_every"]["default"] == "sample"
    for name, prop in props.items():
        assert prop.get("description"), name
        if prop.get("type") == "object" and name != "scorer":
            assert prop["additionalProperties"] is False and prop["default"] == {}, name
    assert props["scorer"]["additionalProperties"] is False      # only scorer.options is free-form (plugin's own)
