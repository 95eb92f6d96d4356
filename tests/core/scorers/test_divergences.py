"""The per-position formulas of the scorer metrics (``certa.engine.core.scorers.divergences``), against values
computed by hand, and the hf_models options that belong to one metric only (issue 33: abs_delta_lp, generated_kl)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certa.engine.core.scorers.divergences import (ZERO_MEANS_IDENTICAL, abs_delta_lp_positions, delta_ce_positions,
                                                   generated_kl_positions, prompt_means)
from certa.engine.core.scorers.hf_models import HfModelsScorer
from certa.engine.core.tables import table_from_columns
from certa.engine.foundation.errors import StageError


def test_abs_delta_lp_does_not_cancel_where_delta_ce_does() -> None:
    reference = np.log([0.5, 0.25, 0.125])
    candidate = np.log([0.25, 0.5, 0.125])  # one token better, one worse by the same factor, one equal
    assert delta_ce_positions(reference, candidate).tolist() == pytest.approx([math.log(2), -math.log(2), 0.0])
    assert prompt_means(np.zeros(3, dtype=np.int64), delta_ce_positions(reference, candidate), 1)[0] == \
        pytest.approx(0.0, abs=1e-15)
    assert prompt_means(np.zeros(3, dtype=np.int64), abs_delta_lp_positions(reference, candidate), 1)[0] == \
        pytest.approx(2 * math.log(2) / 3)
    assert abs_delta_lp_positions(reference, reference).tolist() == [0.0, 0.0, 0.0]


def test_generated_kl_is_the_candidates_log_prob_minus_the_references_and_its_mean_is_the_kl() -> None:
    assert generated_kl_positions(np.log([0.5]), np.log([0.25])).tolist() == pytest.approx([math.log(2)])
    # the mean of ln q(y) - ln p(y) over y ~ q is KL(q || p): a seeded simulation of a 3-token vocabulary
    q, p = np.array([0.6, 0.3, 0.1]), np.array([0.4, 0.4, 0.2])
    draws = np.random.default_rng(5).choice(3, size=200_000, p=q)
    estimate = generated_kl_positions(np.log(q)[draws], np.log(p)[draws]).mean()
    kl = float(np.sum(q * np.log(q / p)))
    standard_error = generated_kl_positions(np.log(q)[draws], np.log(p)[draws]).std() / math.sqrt(draws.size)
    # by hand: 0.6 ln 1.5 + 0.3 ln 0.75 + 0.1 ln 0.5 = 0.24328 - 0.08630 - 0.06931 = 0.08766
    assert abs(estimate - kl) < 4 * standard_error and kl == pytest.approx(0.08766, abs=1e-5)
    assert not ZERO_MEANS_IDENTICAL["generated_kl"] and not ZERO_MEANS_IDENTICAL["abs_delta_lp"]


def test_a_sampling_seed_is_refused_for_a_metric_that_samples_nothing() -> None:
    tables = {"prompts": table_from_columns("prompts", {"text": ["a prompt"]})}
    with pytest.raises(StageError, match="options.seed seeds the sampling of metric generated_kl"):
        HfModelsScorer(metric="abs_delta_lp", options={"prompts": "prompts", "seed": 3}, tables=tables)
    with pytest.raises(StageError, match="options.seed must be an integer"):
        HfModelsScorer(metric="generated_kl", options={"prompts": "prompts", "seed": -1}, tables=tables)
    assert HfModelsScorer(metric="generated_kl", options={"prompts": "prompts", "seed": 3}, tables=tables).seed == 3
