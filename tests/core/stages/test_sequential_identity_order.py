"""sequential.diff 3.0.0 (issue 30, items 2 and 4): IDENTICAL is a fact, and the row order never matters.

Item 2: up to 2.0.0 the stage said IDENTICAL once the first 20 scores were exactly 0, before DIFFERENT or SAME
was considered. With a discrete scorer (a per-prompt accuracy difference) a subject worse on a share w of the
prompts was IDENTICAL with probability (1 - w)^20: 0.818 / 0.544 / 0.358 at w = 1 / 3 / 5 %. From 3.0.0 a run of
zeros yields IDENTICAL only from a scorer whose metric is 0 exactly when the two models' next-token
distributions are identical, and only when every prompt scored is 0; a table's or a discrete scorer's zeros never
do.

Item 4: up to 2.0.0 table mode took the rows in file order, so a sorted copy of a table decided otherwise than a
shuffled one. From 3.0.0 the observations are put in canonical order (prompt_id, then score) and then in a
permutation drawn from the stage's seeded generator: any order of the same rows gives the same certificate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from certa.engine.core.spec import fill_defaults, load_schema
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import StageContext
from certa.engine.core.stages.sequential_diff import (CAPTURED_IDENTITY, CAPTURED_SCORES, KERNELS,
                                                      audit_sequential_diff, analyse_scores)
from certa.engine.core.tables import table_from_columns
from certa.engine.core.stats.kernels.libm import LIBM, PORTABLE
from certa.engine.foundation.canonical import to_jsonable

from tests.conftest import AccuracyDifference

V3, V2 = REGISTRY.get("sequential.diff", "3.0.0"), REGISTRY.get("sequential.diff", "2.0.0")


def _run(knobs: dict, tables: dict, *, stage=V3, profile: str = "release", seed: int = 1,
         captured: dict | None = None):
    resolved = fill_defaults(knobs, load_schema(stage.schema_file))
    ctx = StageContext(stage_id="diff", knobs=resolved, tables=tables, rng=np.random.default_rng(seed),
                       profile=profile, upstream={}, seed={}, captured=captured)
    return stage.run(ctx)


def _table(values, **extra) -> dict:
    return {"s": table_from_columns("s", {"score": np.asarray(values, dtype=float), **extra})}


def test_3_1_0_computes_as_3_0_0_and_the_newest_3_2_0_as_3_1_0_with_portable_functions() -> None:
    assert REGISTRY["sequential.diff"].version == "3.2.0" == KERNELS[-1].version
    newest, v31, v30 = KERNELS[-1], KERNELS[-2], KERNELS[-3]
    assert (v31.version, v30.version) == ("3.1.0", "3.0.0")
    assert newest.describes_models and v31.describes_models and not v30.describes_models
    assert v31.elementary is v30.elementary is LIBM and newest.elementary is newest.scorer_elementary is PORTABLE
    assert [type(getattr(k, field)) for k in (newest, v31, v30) for field in ("range_rule", "identity", "order")] == \
        [type(getattr(v30, field)) for field in ("range_rule", "identity", "order")] * 3


# --------------------------------------------------------------------------- item 2: IDENTICAL is a fact


def _regression_with_zeros_first(w: float, n: int = 400, seed: int = 3) -> np.ndarray:
    """Per-prompt accuracy differences: -1 on a share w of the prompts, else 0; the first 20 happen to be 0."""
    rng = np.random.default_rng(seed)
    scores = np.where(rng.random(n) < w, -1.0, 0.0)
    return np.concatenate([np.zeros(20), scores[20:]])


@pytest.mark.parametrize("w", [0.01, 0.03, 0.05])
def test_a_discrete_tables_run_of_zeros_is_identical_in_2_0_0_and_never_in_3_0_0(w: float) -> None:
    scores = _regression_with_zeros_first(w)
    knobs = {"input": "s", "range": [-1, 1], "n_max": 400}
    old = _run(knobs, _table(scores), stage=V2).outputs["results"]
    assert (old["decision"], old["n_used"]) == ("IDENTICAL", 20)                    # the issue's case
    zeros_first = _run(knobs, _table(scores)).outputs
    assert zeros_first["results"]["decision"] != "IDENTICAL"
    assert zeros_first["identity"]["zero_means_identical"] is False
    assert "never decide IDENTICAL" in zeros_first["identity"]["statement"]


def test_a_discrete_scorers_run_of_zeros_is_identical_in_2_0_0_and_never_in_3_0_0(monkeypatch) -> None:
    import certa.engine.core.stages.sequential_diff as stage_module
    values = {f"q{i:03d}": (-1.0 if i < 3 else 0.0) for i in range(100)}      # worse on 3 % of the prompts
    monkeypatch.setattr(stage_module, "load_scorer", lambda *a, **k: AccuracyDifference(values))
    tables = {"ref": table_from_columns("ref", {"x": [1]}), "cand": table_from_columns("cand", {"x": [1]})}
    knobs = {"scorer": {"name": "accuracy"}, "reference": "ref", "candidate": "cand", "n_max": 300}
    seed = next(s for s in range(100) if np.all(np.random.default_rng(s).integers(0, 100, 20) >= 3))
    old = _run(knobs, tables, stage=V2, seed=seed).outputs["results"]
    assert (old["decision"], old["n_used"]) == ("IDENTICAL", 20)
    new = _run(knobs, tables, seed=seed)
    assert new.outputs["results"]["decision"] != "IDENTICAL"
    assert new.outputs["identity"]["zero_means_identical"] is False
    assert CAPTURED_IDENTITY not in new.captured


def _logprob_distributions(candidate_shift: float = 0.0) -> dict:
    rng = np.random.default_rng(11)
    ids = np.repeat([f"p{i:03d}" for i in range(50)], 4)
    pos = np.tile(np.arange(4), 50)
    logits = rng.normal(0.0, 1.0, size=(ids.size, 3))
    cand = logits.copy()
    cand[::7, 0] += candidate_shift                       # the candidate moves some positions' distributions
    cols = lambda x: {f"logp_{t}": x[:, j] for j, t in enumerate("abc")}  # noqa: E731
    return {"ref": table_from_columns("ref", {"prompt_id": ids, "position": pos, "logprob": logits[:, 0],
                                              **cols(logits)}),
            "cand": table_from_columns("cand", {"prompt_id": ids, "position": pos, "logprob": cand[:, 0],
                                                **cols(cand)})}


def _identity_knobs(metric: str, **extra) -> dict:
    return {"scorer": {"name": "logprob_tables", "metric": metric}, "reference": "ref", "candidate": "cand",
            "positions_per_prompt": 4, "alpha": 0.01, **extra}


def test_identical_distributions_under_sym_kl_are_identical_with_the_stated_bound() -> None:
    live = _run(_identity_knobs("sym_kl", range=[0, 1]), _logprob_distributions())
    r, identity = live.outputs["results"], live.outputs["identity"]
    assert (r["decision"], r["outcome"], r["n_used"]) == ("IDENTICAL", "identical_zero", 20)
    assert identity["zero_means_identical"] is True
    # hand check: exact binomial bound with 0 differing prompts of 20, alpha 0.01: 1 - 0.01^(1/20) = 0.2056718...
    assert identity["differing_share_upper"] == pytest.approx(0.20567176527571, abs=1e-12)
    assert identity["differing_share_upper"] == -math.expm1(math.log(0.01) / 20)
    assert "identical on the 20 prompts scored" in identity["statement"]
    assert "not a statistical claim about unseen prompts" in identity["statement"]
    assert "0.205672" in identity["statement"]
    assert "identical next-token distributions on all 20 prompts scored" in r["reason"]
    assert "not a statistical claim" in live.outputs["interpretation"]
    assert live.captured[CAPTURED_IDENTITY].numeric("zero_means_identical").tolist() == [1.0]
    assert audit_sequential_diff(to_jsonable(live.outputs)) == []
    assert V3.audit_checks(to_jsonable(live.outputs)) == []
    replayed = _run(_identity_knobs("sym_kl", range=[0, 1]), {}, captured=dict(live.captured))
    assert replayed.outputs == live.outputs


def test_identical_tables_under_delta_ce_are_not_identical_because_its_zeros_are_not_identity() -> None:
    out = _run(_identity_knobs("delta_ce", range=[-0.02, 0.02], equivalence_band=0.01), _logprob_distributions())
    assert out.outputs["identity"]["zero_means_identical"] is False
    assert out.outputs["results"]["decision"] == "SAME"          # every score 0: the sequence closes inside the band
    assert np.all(out.captured[CAPTURED_SCORES].numeric("score") == 0.0)


def test_a_distribution_that_moves_on_some_positions_is_never_identical() -> None:
    out = _run(_identity_knobs("sym_kl", range=[0, 1], n_max=60), _logprob_distributions(candidate_shift=0.5))
    assert out.outputs["results"]["decision"] != "IDENTICAL"


def test_verify_refuses_an_identical_decision_without_an_identity_scorer() -> None:
    out = _run(_identity_knobs("sym_kl", range=[0, 1]), _logprob_distributions())
    stored = to_jsonable(out.outputs)
    stored["identity"]["zero_means_identical"] = False
    assert any("IDENTICAL" in p for p in V3.audit_checks(stored))


def test_early_stop_threshold_is_no_longer_a_knob() -> None:
    from certa.engine.core.spec import load_plan
    from certa.engine.foundation.errors import SpecError
    text = ("certa: 1\nname: old-knobs\nseed: 1\ninputs:\n  s: {path: s.csv}\nstages:\n  - id: diff\n"
            "    use: sequential.diff\n    with: {input: s, range: [-1, 1], early_stop_threshold: 0.001}\n")
    with pytest.raises(SpecError, match="removed in sequential.diff 3.0.0"):
        load_plan(text)
    assert load_plan(text.replace("use: sequential.diff\n", "use: sequential.diff@2.0.0\n"))


# ------------------------------------------------------------------------------ item 4: order never matters


def _issue_table() -> np.ndarray:
    """The issue's 2,000 scores with mean -0.0625: 250 of -1, 125 of +1, the rest 0 (an accuracy difference)."""
    scores = np.zeros(2000)
    scores[:250], scores[250:375] = -1.0, 1.0
    return np.random.default_rng(20261130).permutation(scores)


def _orders(scores: np.ndarray, ids: np.ndarray) -> dict[str, np.ndarray]:
    by_score = np.argsort(scores, kind="stable")
    zeros_first = np.concatenate([np.flatnonzero(scores == 0), np.flatnonzero(scores != 0)])
    return {"file": np.arange(scores.size), "reversed": np.arange(scores.size)[::-1],
            "shuffled": np.random.default_rng(5).permutation(scores.size), "ascending": by_score,
            "descending": by_score[::-1], "zeros_first": zeros_first,
            "by_id_descending": np.argsort(ids)[::-1]}


def test_sorted_and_zeros_first_copies_decide_differently_in_2_0_0() -> None:
    scores = _issue_table()
    knobs = {"input": "s", "range": [-1, 1], "n_max": 2000, "alpha": 0.05}
    decided = {name: _run(knobs, _table(scores[order]), stage=V2).outputs["results"]
               for name, order in _orders(scores, np.arange(scores.size)).items()
               if name in ("shuffled", "descending", "zeros_first")}
    assert (decided["descending"]["decision"], decided["descending"]["direction"],
            decided["descending"]["n_used"]) == ("DIFFERENT", "higher", 10)
    assert (decided["zeros_first"]["decision"], decided["zeros_first"]["n_used"]) == ("IDENTICAL", 20)
    assert (decided["shuffled"]["decision"], decided["shuffled"]["direction"]) == ("DIFFERENT", "lower")


@pytest.mark.parametrize("with_ids", [False, True])
def test_every_order_of_one_table_gives_the_same_certificate(with_ids: bool) -> None:
    scores = _issue_table()
    ids = np.array([f"p{i:04d}" for i in range(scores.size)])
    knobs = {"input": "s", "range": [-1, 1], "n_max": 2000, "alpha": 0.05}
    outputs = {}
    for name, order in _orders(scores, ids).items():
        extra = {"prompt_id": ids[order]} if with_ids else {}
        outputs[name] = to_jsonable(_run(knobs, _table(scores[order], **extra)).outputs)
    first = outputs["file"]
    assert all(o == first for o in outputs.values()), [k for k, o in outputs.items() if o != first]
    r = first["results"]
    assert (r["decision"], r["direction"]) == ("DIFFERENT", "lower")     # the true mean is -0.0625
    assert first["order"]["rule"] == "seeded permutation"
    assert "does not depend on the order of the rows in the file" in first["order"]["statement"]


def test_the_order_comes_from_the_seed_and_a_replay_reproduces_it() -> None:
    scores = _issue_table()
    knobs = {"input": "s", "range": [-1, 1], "n_max": 2000}
    one, again = _run(knobs, _table(scores), seed=7), _run(knobs, _table(scores[::-1]), seed=7)
    other = _run(knobs, _table(scores), seed=8)
    assert one.outputs == again.outputs
    assert one.outputs["results"]["n_used"] != other.outputs["results"]["n_used"]
    assert [d.detail for d in one.decisions] == [d.detail for d in again.decisions]


def test_per_position_rows_in_any_order_give_the_same_certificate() -> None:
    rng = np.random.default_rng(4)
    ids = np.repeat([f"p{i:03d}" for i in range(120)], 3)
    pos = np.tile(np.arange(3), 120)
    score = rng.normal(0.01, 0.02, ids.size)
    knobs = {"input": "s", "range": [-0.2, 0.2], "positions_per_prompt": 3, "n_max": 120}
    seen = []
    for order in (np.arange(ids.size), np.arange(ids.size)[::-1], rng.permutation(ids.size),
                  np.argsort(score)):
        out = _run(knobs, _table(score[order], prompt_id=ids[order], position=pos[order]))
        seen.append(to_jsonable(out.outputs))
    assert all(s == seen[0] for s in seen)


def test_an_out_of_range_row_is_named_by_its_row_in_the_file() -> None:
    from certa.engine.foundation.errors import InputError
    scores = np.zeros(50)
    scores[[7, 30]] = 2.0
    with pytest.raises(InputError, match=r"the first at row 8\b"):
        _run({"input": "s", "range": [-1, 1]}, _table(scores))


def test_a_scorer_run_keeps_its_draw_order_and_says_so(monkeypatch) -> None:
    import certa.engine.core.stages.sequential_diff as stage_module
    values = {f"q{i:03d}": float(i % 3 - 1) for i in range(30)}
    monkeypatch.setattr(stage_module, "load_scorer", lambda *a, **k: AccuracyDifference(values))
    tables = {"ref": table_from_columns("ref", {"x": [1]}), "cand": table_from_columns("cand", {"x": [1]})}
    out = _run({"scorer": {"name": "accuracy"}, "reference": "ref", "candidate": "cand", "n_max": 40}, tables)
    assert out.outputs["order"]["rule"] == "draw order"


# --------------------------------------------------------------------------------------- simulations (slow)


def _kernels(version: str):
    return next(k for k in KERNELS if k.version == version)


def _decide(version: str, scores: np.ndarray, knobs: dict, zero_means_identical: bool):
    """The stage's own decision layer (``analyse_scores`` with the version's kernels) on many streams at once."""
    kernels = _kernels(version)
    resolved = fill_defaults(knobs, load_schema(REGISTRY.get("sequential.diff", version).schema_file))
    bounds = (float(knobs["range"][0]), float(knobs["range"][1]))
    analysis = analyse_scores(scores, resolved, bounds, with_p_value=False, elementary=kernels.elementary,
                              grid_values=kernels.grid_values, zero_means_identical=zero_means_identical)
    return analysis.stop.decisions()


ALPHA = 0.05
STREAMS = 1000
SIM_KNOBS = {"input": "s", "range": [-1, 1], "alpha": ALPHA, "n_max": 200, "betting": {"grid_size": 200}}


def _upper(rate_bound: float, streams: int) -> float:
    """rate_bound plus three binomial standard errors (a one-sided tolerance of about 0.0013)."""
    return rate_bound + 3.0 * math.sqrt(rate_bound * (1.0 - rate_bound) / streams)


@pytest.mark.slow
@pytest.mark.parametrize("w,seed", [(0.01, 301), (0.03, 303), (0.05, 305)])
def test_false_identical_on_discrete_regressions_is_at_most_alpha(w: float, seed: int) -> None:
    """1000 streams of accuracy differences (-1 on a share w of the prompts, else 0), n_max 200, alpha 0.05:
    3.0.0 says IDENTICAL on none (the bound: alpha + 3 binomial SE); 2.0.0 on (1 - w)^20 of them."""
    scores = np.where(np.random.default_rng(seed).random((STREAMS, 200)) < w, -1.0, 0.0)
    new = _decide("3.0.0", scores, SIM_KNOBS, zero_means_identical=False)
    rate = float(np.mean(new == "IDENTICAL"))
    assert rate <= _upper(ALPHA, STREAMS)
    old = _decide("2.0.0", scores, SIM_KNOBS, zero_means_identical=True)
    old_rate, expected = float(np.mean(old == "IDENTICAL")), (1.0 - w) ** 20
    assert abs(old_rate - expected) <= 4.0 * math.sqrt(expected * (1.0 - expected) / STREAMS)


@pytest.mark.slow
@pytest.mark.parametrize("factor,seed", [(1.0, 401), (1.5, 402)])
def test_an_identity_scorers_identical_bound_errs_at_most_alpha(factor: float, seed: int) -> None:
    """With a scorer whose zeros are identity, IDENTICAL states that the models differ on less than a share
    1 - alpha^(1/20) of the prompt population. 4000 streams where they differ on exactly that share (factor 1)
    or 1.5 times it: the statement is false on at most alpha of them (alpha + 3 binomial SE)."""
    streams = 4000
    share = factor * -math.expm1(math.log(ALPHA) / 20)
    rng = np.random.default_rng(seed)
    scores = np.where(rng.random((streams, 200)) < share, rng.uniform(0.001, 0.01, (streams, 200)), 0.0)
    decided = _decide("3.0.0", scores, {**SIM_KNOBS, "range": [0, 1]}, zero_means_identical=True)
    rate = float(np.mean(decided == "IDENTICAL"))
    assert rate <= _upper(ALPHA, streams)
    if factor == 1.0:                                                       # the bound is tight there
        assert rate >= ALPHA - 3.0 * math.sqrt(ALPHA * (1 - ALPHA) / streams)


def test_the_report_explains_identical_with_the_certificates_own_statement() -> None:
    from certa.engine.services.presentation.stages.sequential_diff import how_to_read
    out = _run(_identity_knobs("sym_kl", range=[0, 1]), _logprob_distributions())
    meaning = [t for t in how_to_read(to_jsonable(out.outputs)) if t.startswith("What the decision means")]
    assert meaning == [f"What the decision means: IDENTICAL: {out.outputs['identity']['statement']}."]
    assert "early-stop" not in meaning[0]
