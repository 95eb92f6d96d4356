"""sequential.diff 2.0.0: no default transforms data into a verdict.

The score range of a bounded method is part of the statistical claim: it has no default (declared, or the
scorer metric's finite support, or the run is refused), a score outside it is refused in profiles ci and
release and a recorded warning in dev, clipping is opt-in (``out_of_range: clip``) and stated as the
estimand. 1.x keeps its silent [0, 0.2] clip for replays and pins.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from certa.engine import run
from certa.engine.foundation.errors import InputError, SpecError, StageError
from certa.engine.core.spec import fill_defaults, load_plan, load_schema
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import StageContext
from certa.engine.services.presentation.stages import markdown_of
from certa.engine.core.stages.sequential_diff import CAPTURED_SCORES, CAPTURED_SUPPORT, KERNELS, analyse_scores
from certa.engine.core.tables import table_from_columns

from tests.conftest import ROOT, AccuracyDifference

NEW, OLD = REGISTRY.get("sequential.diff", "2.0.0"), REGISTRY.get("sequential.diff", "1.1.0")


def _run(knobs: dict, tables: dict, *, profile: str = "release", stage=NEW, captured: dict | None = None):
    resolved = fill_defaults(knobs, load_schema(stage.schema_file))
    ctx = StageContext(stage_id="diff", knobs=resolved, tables=tables, rng=np.random.default_rng(1),
                       profile=profile, upstream={}, seed={}, captured=captured)
    return stage.run(ctx)


def _table(values) -> dict:
    return {"s": table_from_columns("s", {"score": np.asarray(values, dtype=float)})}


def _g(value: float) -> str:
    return f"{value:.6g}"


# the user's report: 2,000 per-prompt differences with mean -0.03 (sd 0.02), band 0.005, profile release
USER_SCORES = np.random.default_rng(20261124).normal(-0.03, 0.02, 2000)
USER_KNOBS = {"input": "s", "equivalence_band": 0.005, "n_max": 2000}


def test_the_users_case_without_a_range_is_refused_naming_the_observed_min_and_max() -> None:
    with pytest.raises(StageError) as info:
        _run(USER_KNOBS, _table(USER_SCORES))
    message = str(info.value)
    assert f"lie in [{_g(USER_SCORES.min())}, {_g(USER_SCORES.max())}] (observed min, max)" in message
    assert "'range: [low, high]'" in message and "'out_of_range: clip'" in message and "asymptotic_cs" in message
    assert "np." not in message


def test_the_users_case_with_a_declared_range_is_different_never_same() -> None:
    out = _run({**USER_KNOBS, "range": [-0.2, 0.2]}, _table(USER_SCORES))
    r = out.outputs["results"]
    assert r["decision"] == "DIFFERENT" and r["direction"] == "lower"
    assert r["estimand"] == "mean score difference" and r["mean"] == r["raw_mean"] < -0.02
    assert out.outputs["range"] == {
        "low": -0.2, "high": 0.2, "source": "declared", "out_of_range": "refuse", "n_outside": 0, "n_clipped": 0,
        "statement": "the scores are assumed to lie in [-0.2, 0.2] (declared); all 2000 observation(s) do, none was "
                     "clipped and the estimand is the mean score difference"}
    assert "clip" not in out.outputs


def test_the_users_case_clipped_on_request_states_the_clipped_estimand() -> None:
    out = _run({**USER_KNOBS, "range": [0, 0.2], "out_of_range": "clip"}, _table(USER_SCORES))
    r, block = out.outputs["results"], out.outputs["range"]
    used = USER_SCORES[: r["n_used"]]
    assert r["estimand"] == "mean of the scores clipped to [0, 0.2]"
    assert block["n_clipped"] == int(np.sum(used < 0)) > 0 and block["n_outside"] == int(np.sum(USER_SCORES < 0))
    assert r["raw_mean"] == pytest.approx(np.mean(used)) and r["raw_mean"] < -0.02
    assert r["mean"] == pytest.approx(np.mean(np.clip(used, 0, 0.2))) and r["mean"] > 0
    assert block["out_of_range"] == "clip" and "the estimand is the mean of the clipped scores" in block["statement"]
    clip = next(d for d in out.decisions if d.kind == "out_of_range")
    assert clip.detail["outcome"] == "pass" and clip.detail["n_outside"] == block["n_outside"]   # opted in: no warning
    shown = markdown_of(NEW.name, NEW.version)(out.outputs)
    note = (f"{r['decision']} (estimand: mean of the scores clipped to [0, 0.2]; clipped scores: {block['n_clipped']}"
            f"; raw mean {_g(r['raw_mean'])})")
    assert note in shown


def test_version_1_1_0_still_clips_silently_to_its_0_0_2_defaults() -> None:
    out = _run({"input": "s", "equivalence_band": 0.005, "n_max": 2000}, _table(USER_SCORES), stage=OLD)
    clip = out.outputs["clip"]
    assert (clip["low"], clip["high"], clip["applies"]) == (0.0, 0.2, True) and clip["n_clipped"] > 0
    assert out.outputs["results"]["decision"] == "SAME"           # the false certificate 2.0.0 refuses to issue
    assert "range" not in out.outputs and "estimand" not in out.outputs["results"]
    assert [d.kind for d in out.decisions if d.kind in ("out_of_range", "range_ignored")] == []


# ------------------------------------------------------------------------------------------ out of range

SCORES = np.random.default_rng(3).uniform(0.0, 0.2, 200)
SCORES[[6, 29]] = [-0.05, -0.01]                                  # rows 7 and 30 lie below the range [0, 0.2]


@pytest.mark.parametrize("profile", ["ci", "release"])
def test_scores_outside_the_range_are_refused_in_ci_and_release(profile: str) -> None:
    with pytest.raises(InputError) as info:
        _run({"input": "s", "range": [0, 0.2]}, _table(SCORES), profile=profile)
    message = str(info.value)
    assert message.startswith("input 's': 2 of 200 observation(s) lie outside the score range [0, 0.2] (declared)")
    assert f"observed min -0.05, max {_g(SCORES.max())}, the first at row 7" in message
    assert f"profile {profile} refuses" in message and "'out_of_range: clip'" in message


def test_the_first_offending_row_of_per_position_rows_is_where_its_prompt_starts() -> None:
    table = {"s": table_from_columns("s", {
        "prompt_id": ["a", "a", "b", "c", "b", "c"], "position": [0, 1, 0, 0, 1, 1],
        "score": [0.1, 0.1, 0.1, 0.5, 0.1, 0.5]})}                # prompt c (mean 0.5) starts at row 4
    with pytest.raises(InputError, match=r"1 of 3 observation\(s\).*max 0\.5, the first at row 4"):
        _run({"input": "s", "range": [0, 0.2], "n_min": 1, "positions_per_prompt": 2}, table)


def test_dev_warns_clips_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "s.csv").write_text("score\n" + "".join(f"{v!r}\n" for v in SCORES.tolist()))
    spec = tmp_path / "spec.yaml"
    spec.write_text("certa: 1\nname: dev-range\nseed: 1\nprofile: dev\ninputs:\n  s: {path: s.csv}\n"
                    "stages:\n  - id: diff\n    use: sequential.diff\n"
                    "    with: {input: s, range: [0, 0.2], n_max: 200, rel_margin_target: null}\n")
    result = run(spec)
    out = result.certificate["content"]["stages"]["diff"]
    assert out["results"]["estimand"] == "mean of the scores clipped to [0, 0.2]"
    n_used = out["results"]["n_used"]
    assert out["range"]["n_outside"] == 2 and out["range"]["out_of_range"] == "refuse"
    assert out["range"]["n_clipped"] == int(np.sum(SCORES[:n_used] < 0)) >= 1              # row 7 is always used
    assert "profile dev let the run go on" in out["range"]["statement"]
    warning = [w for w in result.warnings if "outside the score range" in w]
    assert warning == [f"stage 'diff': 2 of 200 observation(s) of input 's' lie outside the score range [0, 0.2] "
                       f"(declared; observed min -0.05, max {_g(SCORES.max())}, the first at row 7); they are "
                       "clipped and the estimand is the mean of the clipped scores, because profile dev lets the run "
                       "go on (ci and release refuse)"]


def test_an_unbounded_method_ignores_a_range_with_a_recorded_warning() -> None:
    out = _run({"input": "s", "method": "asymptotic_cs", "range": [0, 0.2]}, _table(SCORES), profile="ci")
    block = out.outputs["range"]
    assert (block["low"], block["high"], block["n_clipped"]) == (None, None, 0)
    assert block["source"] == "none: unbounded method"
    assert out.outputs["results"]["estimand"] == "mean score difference"
    assert out.outputs["results"]["mean"] == out.outputs["results"]["raw_mean"]          # nothing clipped
    ignored = [d for d in out.decisions if d.kind == "range_ignored"]
    assert len(ignored) == 1 and ignored[0].detail["outcome"] == "warn"
    assert "'range: [0, 0.2]' was ignored" in ignored[0].detail["message"]
    assert "Score range: method asymptotic_cs needs no score range" in markdown_of(NEW.name, NEW.version)(out.outputs)
    silent = _run({"input": "s", "method": "asymptotic_cs"}, _table(SCORES), profile="ci")
    assert [d.kind for d in silent.decisions if d.kind == "range_ignored"] == []


# -------------------------------------------------------------------------------------------- scorer runs


def _logprob_tables(shift: float = 0.03, noise: float = 0.01) -> dict:
    rng = np.random.default_rng(7)
    ids = np.repeat([f"p{i:03d}" for i in range(60)], 4)
    pos = np.tile(np.arange(4), 60)
    ref = -rng.gamma(2.0, 1.0, size=ids.size)
    cand = ref - shift + rng.normal(0, noise, size=ids.size)
    return {"ref": table_from_columns("ref", {"prompt_id": ids, "position": pos, "logprob": ref}),
            "cand": table_from_columns("cand", {"prompt_id": ids, "position": pos, "logprob": cand})}


SCORER = {"scorer": {"name": "logprob_tables", "metric": "delta_ce"}, "reference": "ref", "candidate": "cand",
          "positions_per_prompt": 4}


def test_a_scorer_metric_without_support_and_no_range_is_refused_before_scoring(monkeypatch) -> None:
    from certa.engine.core.scorers.logprob_tables import LogprobTablesScorer
    calls = []
    monkeypatch.setattr(LogprobTablesScorer, "score_batch",
                        lambda self, *args: calls.append(args) or np.zeros(len(args[2])))
    with pytest.raises(StageError, match=r"scorer 'logprob_tables' \(metric delta_ce\) declares no finite support"):
        _run(SCORER, _logprob_tables())
    assert calls == []


def test_a_score_outside_the_range_stops_a_scorer_run_at_its_draw() -> None:
    with pytest.raises(InputError, match=r"^scorer 'logprob_tables': \d+ of 4 observation\(s\) lie outside the score "
                                         r"range \[-0\.02, 0\.02\] \(declared\).*the first at draw 1\."):
        _run({**SCORER, "range": [-0.02, 0.02]}, _logprob_tables(shift=0.05))      # scores near 0.05


def test_a_scorer_metric_support_is_the_range_and_is_recorded_for_the_replay(monkeypatch) -> None:
    import certa.engine.core.stages.sequential_diff as stage_module
    draws = np.random.default_rng(9).choice([0.0, 1.0], 40, p=[0.6, 0.4])
    values = {f"q{i:02d}": float(v) for i, v in enumerate(draws)}
    monkeypatch.setattr(stage_module, "load_scorer", lambda *a, **k: AccuracyDifference(values))
    tables = {"ref": table_from_columns("ref", {"x": [1]}), "cand": table_from_columns("cand", {"x": [1]})}
    knobs = {"scorer": {"name": "accuracy"}, "reference": "ref", "candidate": "cand", "n_max": 60}
    live = _run(knobs, tables)
    block = live.outputs["range"]
    assert (block["low"], block["high"], block["source"]) == (-1.0, 1.0, "scorer metric support")
    assert set(live.captured) == {CAPTURED_SCORES, CAPTURED_SUPPORT}
    assert markdown_of(NEW.name, NEW.version)(live.outputs).count("raw mean") == 1          # range not declared: shown
    monkeypatch.setattr(stage_module, "load_scorer", None)                  # a replay never loads the scorer
    replayed = _run(knobs, tables, captured=dict(live.captured))
    assert replayed.outputs == live.outputs and replayed.captured.keys() == live.captured.keys()


# ------------------------------------------------------------------------------------------ knobs, spec


def test_a_2_0_0_spec_with_the_1_x_knob_names_is_pointed_to_the_new_ones() -> None:
    text = ("certa: 1\nname: old-knobs\nseed: 1\ninputs:\n  s: {path: s.csv}\nstages:\n  - id: diff\n"
            "    use: sequential.diff\n    with: {input: s, clip_low: -0.2, clip_high: 0.2}\n")
    with pytest.raises(SpecError) as info:
        load_plan(text)
    assert "stages[0].with.clip_high" in str(info.value) or "stages[0].with.clip_low" in str(info.value)
    assert "removed in sequential.diff 2.0.0: declare the score range as range: [low, high]" in str(info.value)
    assert "is no longer a knob: removed in" in str(info.value) and "should not be valid" not in str(info.value)
    pinned = load_plan(text.replace("use: sequential.diff\n", "use: sequential.diff@1.1.0\n"))
    assert pinned.stages[0].knobs["clip_low"] == -0.2


def test_a_range_must_be_finite_and_increasing() -> None:
    for bad in ([0.2, 0.2], [0.0, float("inf")]):
        with pytest.raises(StageError, match=r"'range' must be \[low, high\] with finite low < high"):
            _run({"input": "s", "range": bad}, _table(SCORES))


def test_numbers_derived_from_decimal_knobs_are_exact_in_2_0_0_only() -> None:
    knobs = {"input": "s", "alpha": 0.07, "betting": {"grid_size": 1000}}
    scores = _table(np.random.default_rng(4).uniform(0.12, 0.28, 100))
    new = _run({**knobs, "range": [0.1, 0.3]}, scores).outputs
    assert new["results"]["confidence_level"] == 0.93 and new["method"]["parameters"]["grid_step"] == 0.0002
    old = _run({**knobs, "clip_low": 0.1, "clip_high": 0.3}, scores, stage=OLD).outputs
    assert old["results"]["confidence_level"] == 1.0 - 0.07 != 0.93                 # frozen: 0.9299999999999999
    assert old["method"]["parameters"]["grid_step"] == (0.3 - 0.1) / 1000 != 0.0002


# --------------------------------------------------------------------------------------------- simulation


# One mean simulated in the unit tier, the others under ``slow``.
@pytest.mark.parametrize("mean", [-0.006, *(pytest.param(m, marks=pytest.mark.slow) for m in (0.0075, -0.005, 0.005))])
def test_same_is_rare_when_the_true_mean_lies_outside_the_band_and_the_range_is_declared(mean: float) -> None:
    """P(SAME while |mean| >= band) <= alpha, over 300 seeded streams of 600 observations checked at every
    observation; |mean| = band is the worst case, where the guarantee is used (SAME on a few streams)."""
    alpha, band, streams = 0.1, 0.005, 300
    rng = np.random.default_rng(int(abs(mean) * 1e4) + (mean > 0))
    x = mean + rng.uniform(-0.01, 0.01, size=(streams, 600))
    knobs = fill_defaults({"input": "s", "alpha": alpha, "equivalence_band": band, "range": [-0.02, 0.02],
                           "n_max": 600, "rel_margin_target": None, "betting": {"grid_size": 200}},
                          load_schema(NEW.schema_file))
    version = {"elementary": KERNELS[-1].elementary, "grid_values": KERNELS[-1].grid_values}     # 2.0.0's
    decided = analyse_scores(x, knobs, tuple(knobs["range"]), **version).stop.decisions()
    same = float(np.mean(decided == "SAME"))
    assert same <= alpha + 3.0 * np.sqrt(alpha * (1 - alpha) / streams), f"SAME on {same:.3f} of the streams"
    if abs(mean) > band:
        assert np.mean(decided == "DIFFERENT") > 0.6                      # the data decide, and decide right
    else:
        assert 0 < same                                                    # not vacuous at the boundary
    if mean < 0:        # the same streams through 1.x's silent default clip [0, 0.2]: a false SAME on most
        clipped = analyse_scores(x, {**knobs, "range": [0.0, 0.2]}, (0.0, 0.2), **version).stop.decisions()
        assert np.mean(clipped == "SAME") > 0.9


def test_betting_bounds_are_exact_grid_points_so_a_bound_equal_to_the_minimum_effect_does_not_clear_it() -> None:
    # the example's fine-tune scores on [-0.2, 0.2], grid step 0.0004: 1.1.0 computes the grid point 0.01 as
    # 0.010000000000000009 > min_effect 0.01 and stops DIFFERENT there; 2.0.0's bound is 0.01, which does not
    scores = np.loadtxt(ROOT / "specs" / "sequential-diff" / "data" / "finetune_scores.csv", delimiter=",",
                        skiprows=1, usecols=1)
    knobs = {"input": "s", "method": "betting", "alpha": 0.01, "min_effect": 0.01}
    old = _run({**knobs, "clip_low": -0.2, "clip_high": 0.2}, _table(scores), stage=OLD).outputs
    new = _run({**knobs, "range": [-0.2, 0.2]}, _table(scores)).outputs
    assert old["results"]["ci"][0] == 0.010000000000000009 and old["results"]["decision"] == "DIFFERENT"
    assert new["results"]["n_used"] > old["results"]["n_used"] and new["results"]["ci"][0] > 0.01
    assert all(round(v, 4) == v for v in new["results"]["ci"])                # decimal grid points, rounded once


def test_verify_catches_an_estimand_edited_out_of_a_clipped_certificate() -> None:
    from certa.engine.foundation.canonical import to_jsonable
    out = to_jsonable(_run({**USER_KNOBS, "range": [0, 0.2], "out_of_range": "clip"}, _table(USER_SCORES)).outputs)
    assert NEW.audit_checks(out) == []
    out["results"]["estimand"] = "mean score difference"
    assert any("estimand" in p for p in NEW.audit_checks(out))
    declared = to_jsonable(_run({**USER_KNOBS, "range": [-0.2, 0.2]}, _table(USER_SCORES)).outputs)
    assert NEW.audit_checks(declared) == []
    declared["range"]["n_clipped"] = 3
    assert any("n_clipped" in p for p in NEW.audit_checks(declared))
