"""Bounded continuous per-item metrics: the BCa bootstrap on the project's kernel and the confidence
sequences, against scipy and their own definitions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from certa.engine.core.stats.paired_metric import anytime_mean_difference, bca_mean_difference


def f1_like(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    subject = rng.beta(4, 2, n)
    return subject, np.clip(subject - rng.normal(0.02, 0.15, n), 0.0, 1.0)


def test_bca_estimate_is_the_mean_difference_and_the_seed_fixes_the_interval():
    subject, baseline = f1_like(1, 400)
    first = bca_mean_difference(subject, baseline, rng=np.random.default_rng(7))
    again = bca_mean_difference(subject, baseline, rng=np.random.default_rng(7))
    assert first.estimate == pytest.approx(np.mean(subject - baseline))
    assert (first.low, first.high) == (again.low, again.high)
    assert first.method == "bca" and first.replicates == 2000 and first.low < first.estimate < first.high


def test_bca_interval_agrees_with_scipy_bootstrap_within_resampling_noise():
    """scipy.stats.bootstrap(method='BCa') is an independent implementation (its own generator and jackknife);
    with 20,000 replicates each, the bounds differ by resampling noise only."""
    subject, baseline = f1_like(2, 300)
    ours = bca_mean_difference(subject, baseline, rng=np.random.default_rng(3), replicates=20_000)
    theirs = stats.bootstrap((subject - baseline,), np.mean, n_resamples=20_000, method="BCa",
                             random_state=np.random.default_rng(4)).confidence_interval
    half_width = (theirs.high - theirs.low) / 2
    assert abs(ours.low - theirs.low) < 0.05 * half_width
    assert abs(ours.high - theirs.high) < 0.05 * half_width


def test_equal_differences_give_the_point_interval():
    scores = np.arange(40) / 64                    # dyadic: every difference is exactly 0.25
    ci = bca_mean_difference(scores + 0.25, scores, rng=np.random.default_rng(0))
    assert ci.low == ci.high == 0.25 and ci.replicates == 0


@pytest.mark.parametrize("method", ["empirical_bernstein", "betting"])
def test_anytime_interval_holds_the_estimate_and_narrows_with_n(method):
    subject, baseline = f1_like(5, 4000)
    short = anytime_mean_difference(subject[:400], baseline[:400], method=method)
    long = anytime_mean_difference(subject, baseline, method=method)
    assert long.low <= long.estimate <= long.high
    assert long.high - long.low < short.high - short.low
    assert long.validity == "anytime-valid"


def test_anytime_interval_is_computed_per_stream_along_the_leading_axes():
    subject, baseline = f1_like(6, 600)
    streams = anytime_mean_difference(np.stack([subject[:300], subject[300:]]),
                                      np.stack([baseline[:300], baseline[300:]]))
    second = anytime_mean_difference(subject[300:], baseline[300:])
    assert streams.low.shape == (2,)
    assert (streams.low[1], streams.high[1]) == (second.low, second.high)


def test_the_metric_range_scales_the_sequence():
    """Scores on [0, 100] are the [0, 1] scores times 100: the interval scales with them."""
    subject, baseline = f1_like(8, 500)
    unit = anytime_mean_difference(subject, baseline)
    percent = anytime_mean_difference(100 * subject, 100 * baseline, metric_range=(0, 100))
    assert (percent.low, percent.high) == pytest.approx((100 * unit.low, 100 * unit.high))


@pytest.mark.parametrize("call, message", [
    (lambda s, b: bca_mean_difference(s, b[:-1], rng=np.random.default_rng()), "must pair item by item"),
    (lambda s, b: bca_mean_difference(s + 1, b, rng=np.random.default_rng()),
     "'subject' must lie in the metric range [0.0, 1.0] (item 0 is"),
    (lambda s, b: bca_mean_difference(s, b, rng=np.random.default_rng(), replicates=50),
     "'replicates' must be an integer >= 100 (got 50)"),
    (lambda s, b: anytime_mean_difference(s, b, method="hoeffding"), "'method' must be one of"),
    (lambda s, b: anytime_mean_difference(s, b, metric_range=(1, 0)), "'metric_range' must be finite with low < high"),
])
def test_invalid_input_names_the_field_the_expectation_and_the_value(call, message):
    subject, baseline = f1_like(9, 20)
    with pytest.raises(ValueError) as error:
        call(subject, baseline)
    assert message in str(error.value)


def test_a_generator_of_another_type_is_a_type_error():
    subject, baseline = f1_like(9, 20)
    with pytest.raises(TypeError, match=r"'rng' must be a numpy.random.Generator \(got int\)"):
        bca_mean_difference(subject, baseline, rng=1)
