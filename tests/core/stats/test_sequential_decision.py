"""The decision layer (certa.engine.core.stats.confseq.decision): check times, rule order, stopping, n_max."""

from __future__ import annotations

import numpy as np
import pytest

from certa.engine.core.stats.confseq.decision import (DecisionRules, OUTCOMES, all_zero_path, check_mask, first_stop,
                                              rule_states)


def _decide(lower, upper, mean=None, zero=None, **knobs):
    rules = DecisionRules(**{"rel_margin_target": None, "n_min": 1, **knobs})
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    mean = (lower + upper) / 2 if mean is None else np.asarray(mean, float)
    zero = np.zeros(lower.shape, bool) if zero is None else np.asarray(zero)
    stop = first_stop(rule_states(lower, upper, mean, zero, rules), rules)
    return int(stop.n_used), OUTCOMES[int(stop.outcome)]


def test_batch_checks_never_overshoot_n_max() -> None:
    # the seed consumes 12 samples with n_max = 10 and batches of 4; certa checks at 4, 8 and 10
    rules = DecisionRules(n_min=1, n_max=10, check_every="batch", batch_size=4)
    assert np.flatnonzero(check_mask(30, rules)).tolist() == [3, 7, 9]
    every = DecisionRules(n_min=3, n_max=6, check_every="sample")
    assert np.flatnonzero(check_mask(6, every)).tolist() == [2, 3, 4, 5]
    assert _decide(np.full(30, -1.0), np.full(30, 1.0), n_max=10, check_every="batch") == (10, "n_max")


def test_data_shorter_than_n_max_ends_exhausted_at_its_last_sample() -> None:
    assert _decide(np.full(7, -1.0), np.full(7, 1.0), n_max=200) == (7, "exhausted")


def test_stop_is_the_first_check_where_a_rule_fires() -> None:
    lower = np.array([-1, -0.5, 0.01, 0.02, 0.03, 0.04])
    upper = np.full(6, 1.0)
    assert _decide(lower, upper) == (3, "different_higher")
    assert _decide(lower, upper, n_min=5) == (5, "different_higher")
    assert _decide(lower, upper, check_every="batch", batch_size=2) == (4, "different_higher")


def test_different_needs_the_whole_cs_beyond_the_minimum_effect() -> None:
    # the upstream HEAD rule |lo| >= d* or |hi| >= d* accepts [0.095, 0.105] for d* = 0.1 (note §4.6)
    assert _decide([0.095], [0.105], min_effect=0.1, n_max=1) == (1, "n_max")
    assert _decide([0.101], [0.105], min_effect=0.1, n_max=1) == (1, "different_higher")
    assert _decide([-0.2], [-0.15], min_effect=0.1, n_max=1) == (1, "different_lower")
    assert _decide([0.0], [0.1], n_max=1) == (1, "n_max")            # strict: L = 0 does not exclude 0


def test_band_is_the_minimum_effect_unless_min_effect_is_set() -> None:
    # CS [0.004, 0.006] excludes 0 but lies inside the band 0.01: SAME, not DIFFERENT (seed: DIFFERENT)
    assert DecisionRules(equivalence_band=0.01).delta_star == 0.01
    assert DecisionRules(equivalence_band=0.01, min_effect=0.002).delta_star == 0.002
    assert DecisionRules().delta_star == 0.0
    assert _decide([0.004], [0.006], equivalence_band=0.01, n_max=1) == (1, "same")
    assert _decide([0.004], [0.006], equivalence_band=0.01, min_effect=0.002, n_max=1) == (1, "different_higher")
    assert _decide([-0.011], [0.005], equivalence_band=0.01, n_max=1) == (1, "n_max")


def test_identical_needs_identical_model_n_min_and_comes_first() -> None:
    n = 30
    zero = all_zero_path(np.zeros(n))
    lower, upper = np.full(n, 0.5), np.full(n, 1.0)     # even a CS that says DIFFERENT loses to exact zeros
    stop = _decide(lower, upper, mean=np.zeros(n), zero=zero, identical_model_n_min=20, n_min=25)
    assert stop == (25, "identical_zero")
    assert _decide(lower, upper, mean=np.zeros(n), zero=zero, identical_model_n_min=20) == (1, "different_higher")
    tiny = np.full(n, 1e-7)
    assert _decide(-tiny, tiny, mean=np.zeros(n), identical_model_n_min=20) == (20, "identical_small")
    assert all_zero_path(np.array([0.0, 0.0, 1e-12, 0.0])).tolist() == [True, True, False, False]


def test_precision_target_stops_undecided_only_when_no_other_rule_holds() -> None:
    # CS [0.095, 0.105]: half-width 0.005 <= 0.05 * 0.1, but it straddles d* = 0.1
    assert _decide([0.095], [0.105], min_effect=0.1, rel_margin_target=0.05, n_max=5) == (1, "precision")
    assert _decide([0.095], [0.105], min_effect=0.1, rel_margin_target=0.01, n_max=1) == (1, "n_max")
    # |mean| below the floor: rel_me uses the floor
    assert _decide([-1e-6], [1e-6], rel_margin_target=0.05, min_effect_floor=1e-4, n_max=1,
                   early_stop_threshold=0.0) == (1, "precision")


def test_many_streams_are_decided_at_once_like_one_at_a_time() -> None:
    rng = np.random.default_rng(0)
    drift = np.linspace(-0.2, 0.2, 40)[:, None]
    centre = np.cumsum(rng.normal(drift, 0.3, size=(40, 100)), axis=1) / np.arange(1, 101)
    width = 0.5 / np.sqrt(np.arange(1, 101))
    lower, upper = centre - width, centre + width
    rules = DecisionRules(n_min=5, n_max=80, equivalence_band=0.08, rel_margin_target=None)
    zero = np.zeros(lower.shape, bool)
    batch = first_stop(rule_states(lower, upper, centre, zero, rules), rules)
    for s in range(40):
        one = first_stop(rule_states(lower[s], upper[s], centre[s], zero[s], rules), rules)
        assert (int(one.index), int(one.outcome)) == (int(batch.index[s]), int(batch.outcome[s]))
    assert len(set(batch.outcome.tolist())) >= 3


def test_rules_refuse_inconsistent_knobs() -> None:
    with pytest.raises(ValueError, match="n_min <= n_max"):
        DecisionRules(n_min=20, n_max=10)
    with pytest.raises(ValueError, match="check_every"):
        DecisionRules(check_every="prompt")
    with pytest.raises(ValueError, match="equivalence_band"):
        DecisionRules(equivalence_band=0.0)
