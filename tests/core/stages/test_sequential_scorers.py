"""Scorer plugins (certa.engine.core.scorers): entry-point discovery, the built-in logprob_tables scorer, refusals."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.scorers import ENTRY_POINT_GROUP, available_scorers, load_scorer, score_prompts
from certa.engine.core.scorers.logprob_tables import LogprobTablesScorer
from certa.engine.core.tables import table_from_columns

from tests.conftest import ROOT

def _logprob_tables():
    ref = table_from_columns("ref", {"prompt_id": ["b", "a", "a", "b", "a", "b"], "position": [1, 2, 0, 0, 1, 2],
                                     "logprob": [-1.0, -0.5, -2.0, -3.0, -1.5, -0.25]})
    cand = table_from_columns("cand", {"prompt_id": ["a", "a", "a", "b", "b", "b"], "position": [0, 1, 2, 0, 1, 2],
                                       "logprob": [-2.5, -1.0, -0.5, -3.25, -1.5, -1.0]})
    return ref, cand


def test_logprob_tables_delta_ce_by_hand() -> None:
    ref, cand = _logprob_tables()
    scorer = LogprobTablesScorer(metric="delta_ce")
    assert scorer.prompts(ref, cand) == ["a", "b"]
    # prompt a: positions 0,1,2 -> ref (-2, -1.5, -0.5), cand (-2.5, -1, -0.5): differences 0.5, -0.5, 0
    # prompt b: ref (-3, -1, -0.25), cand (-3.25, -1.5, -1): differences 0.25, 0.5, 0.75
    np.testing.assert_allclose(scorer.score_batch(ref, cand, ["a", "b", "a"], 3), [0.0, 0.5, 0.0])
    np.testing.assert_allclose(scorer.score_batch(ref, cand, ["a", "b"], 2), [0.0, 0.375])   # first K positions
    assert scorer.score(ref, cand, "b", 1) == 0.25


def test_logprob_tables_sym_kl_matches_scipy_entropy() -> None:
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(4), size=4), rng.dirichlet(np.ones(4), size=4)
    base = {"prompt_id": ["x", "x", "y", "y"], "position": [0, 1, 0, 1]}
    ref = table_from_columns("ref", {**base, **{f"logp_{v}": np.log(p[:, v]) for v in range(4)}})
    unnormalised = {f"logp_{v}": np.log(q[:, v]) + 0.3 for v in range(4)}
    cand = table_from_columns("cand", {**base, **unnormalised})
    sym = [stats.entropy(p[i], q[i]) + stats.entropy(q[i], p[i]) for i in range(4)]
    got = LogprobTablesScorer(metric="sym_kl").score_batch(ref, cand, ["x", "y"], 32)
    np.testing.assert_allclose(got, [(sym[0] + sym[1]) / 2, (sym[2] + sym[3]) / 2], rtol=1e-9)


def test_logprob_tables_refuses_mismatched_or_duplicated_positions() -> None:
    ref, cand = _logprob_tables()
    short = table_from_columns("cand", {"prompt_id": ["a"], "position": [0], "logprob": [-1.0]})
    with pytest.raises(InputError, match="same \\(prompt_id, position\\) pairs"):
        LogprobTablesScorer().prompts(ref, short)
    dup = table_from_columns("ref", {"prompt_id": ["a", "a"], "position": [0, 0], "logprob": [-1.0, -2.0]})
    with pytest.raises(InputError, match="position 0 twice"):
        LogprobTablesScorer().prompts(dup, dup)
    with pytest.raises(StageError, match="metric must be one of delta_ce, sym_kl"):
        LogprobTablesScorer(metric="kl")
    with pytest.raises(StageError, match="unknown option"):
        LogprobTablesScorer(options={"colum": "x"})
    with pytest.raises(StageError, match="not in the log-prob tables"):
        LogprobTablesScorer().score_batch(ref, cand, ["zzz"], 3)


def test_builtin_scorer_is_declared_as_an_entry_point_in_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared["logprob_tables"] == "certa.engine.core.scorers.logprob_tables:LogprobTablesScorer"
    assert "logprob_tables" in available_scorers()
    assert isinstance(load_scorer("logprob_tables", metric="sym_kl"), LogprobTablesScorer)


def test_a_plugin_registered_by_entry_point_is_found_by_name(scorer_plugin: Path) -> None:
    assert "test_shift" in available_scorers()
    scorer = load_scorer("test_shift", options={"shift": 0.5})
    ref = table_from_columns("r", {"prompt_id": ["p1", "p2"], "value": [1.0, 2.0]})
    cand = table_from_columns("c", {"prompt_id": ["p1", "p2"], "value": [1.5, 1.0]})
    np.testing.assert_allclose(score_prompts(scorer, ref, cand, ["p2", "p1"], 4), [-0.5, 1.0])


def test_unknown_scorer_names_the_registered_ones() -> None:
    with pytest.raises(StageError, match="did you mean 'logprob_tables'"):
        load_scorer("logprob_table")
    with pytest.raises(StageError, match="not registered in the 'certa.scorers' entry-point group"):
        load_scorer("my_package.scoring:make")      # an import path is a name like any other: refused


def test_non_finite_scores_are_refused_never_substituted() -> None:
    class Broken:
        def prompts(self, reference, candidate):
            return ["a"]

        def score(self, reference, candidate, prompt, K):
            return float("nan")

    ref = table_from_columns("r", {"prompt_id": ["a"]})
    with pytest.raises(StageError, match="non-finite score"):
        score_prompts(Broken(), ref, ref, ["a"], 4)


def test_declared_support_is_optional_and_checked() -> None:
    from certa.engine.core.scorers import declared_support

    assert declared_support(LogprobTablesScorer(metric="delta_ce")) is None       # unbounded: declares none
    assert declared_support(LogprobTablesScorer(metric="sym_kl")) is None

    class Bounded:
        def __init__(self, support):
            self._support = support

        def support(self):
            return self._support

    assert declared_support(Bounded((-1, 1))) == (-1.0, 1.0)
    assert declared_support(object()) is None                                    # no support(): none declared
    for bad in ((1.0, 1.0), (0.0, float("inf")), "ab", (1.0,)):
        with pytest.raises(StageError, match="support"):
            declared_support(Bounded(bad))
