"""Stage paired.ppl_ratio: the seed's worked example, pairing, profile rules, degenerate data, identities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from certa.engine import ProfileAbort, StageError, run
from certa.engine.core.seeds import stage_generator
from certa.engine.core.stages.ratio_audit import audit_paired_ratio
from certa.engine.core.stats.pairing import overlap_fraction, pair_windows

from tests.conftest import window_columns

SPEC = """\
certa: 1
name: paired
seed: 11
profile: {profile}
inputs:
  baseline: {{path: baseline.csv}}
  subject: {{path: subject.csv}}
stages:
  - id: ratio
    use: paired.ppl_ratio
    with: {{baseline: baseline, subject: subject, replicates: {replicates}{extra}}}
"""


def _spec(profile: str = "dev", replicates: int = 500, extra: str = "") -> str:
    return SPEC.format(profile=profile, replicates=replicates, extra=extra)


def _ratio(result) -> dict:
    return result.certificate["content"]["stages"]["ratio"]


def _decisions(result, kind: str) -> list[dict]:
    return [d.decision.detail for d in result.decisions if d.decision.kind == kind]


def test_seed_two_window_counter_example_gives_1_021722() -> None:
    """Seed 001: weights [512, 256], preview PPL [40, 220], final [38, 260] -> exp(weighted mean Δlog) = 1.021722."""
    base = {"window_id": ["a", "b"], "tokens": [512, 256], "mean_nll": [math.log(40.0), math.log(220.0)]}
    subj = {"window_id": ["a", "b"], "tokens": [512, 256], "mean_nll": [math.log(38.0), math.log(260.0)]}
    pm = _ratio(run(_spec(replicates=200), inputs={"baseline": base, "subject": subj}))["token_perplexity"]
    assert round(pm["ratio_vs_baseline"], 6) == 1.021722
    naive = (512 * 38 + 256 * 260) / (512 * 40 + 256 * 220)
    assert round(naive, 2) == 1.12 and abs(pm["ratio_vs_baseline"] - naive) > 0.09


def test_display_ci_is_exactly_exp_of_ci_and_brackets_the_ratio() -> None:
    base, subj = window_columns(120, seed=5, shift=0.02)
    outputs = _ratio(run(_spec(), inputs={"baseline": base, "subject": subj}))
    pm = outputs["token_perplexity"]
    assert pm["display_ci"] == [math.exp(pm["ci"][0]), math.exp(pm["ci"][1])]
    assert pm["display_ci"][0] < pm["ratio_vs_baseline"] < pm["display_ci"][1]
    assert audit_paired_ratio(outputs) == []
    outputs["token_perplexity"]["display_ci"] = [pm["display_ci"][0], pm["display_ci"][1] * (1 + 1e-12)]
    assert audit_paired_ratio(outputs) == ["token_perplexity.display_ci != exp(token_perplexity.ci)"]


def test_nll_sum_column_gives_the_same_certificate_numbers_as_mean_nll() -> None:
    base, subj = window_columns(50, seed=9)
    as_sum = {k: v for k, v in subj.items() if k != "mean_nll"}
    as_sum["nll_sum"] = np.asarray(subj["mean_nll"]) * np.asarray(subj["tokens"])
    a = _ratio(run(_spec(), inputs={"baseline": base, "subject": subj}))["token_perplexity"]
    b = _ratio(run(_spec(), inputs={"baseline": base, "subject": as_sum}))["token_perplexity"]
    assert b["log_ratio"] == pytest.approx(a["log_ratio"], rel=1e-12)


def test_column_names_can_be_remapped() -> None:
    base, subj = window_columns(40, seed=2)
    renamed = {"id": subj["window_id"], "n_tokens": subj["tokens"], "loss": subj["mean_nll"]}
    extra = ", columns: {window_id: id, tokens: n_tokens, mean_nll: loss}"
    text = _spec(extra=extra).replace("with: {baseline", "with: {baseline")
    with pytest.raises(Exception, match="no column 'id'"):
        run(text, inputs={"baseline": base, "subject": renamed})  # the remap applies to both arms
    base_renamed = {"id": base["window_id"], "n_tokens": base["tokens"], "loss": base["mean_nll"]}
    remapped = _ratio(run(text, inputs={"baseline": base_renamed, "subject": renamed}))
    plain = _ratio(run(_spec(), inputs={"baseline": base, "subject": subj}))
    assert remapped["token_perplexity"] == plain["token_perplexity"]


def test_dev_profile_warns_and_uses_matched_windows() -> None:
    base, subj = window_columns(50, seed=4)
    subj = {k: np.asarray(v)[5:] for k, v in subj.items()}
    result = run(_spec(), inputs={"baseline": base, "subject": subj})
    stats = _ratio(result)["dataset"]["windows"]["stats"]
    assert stats["paired_windows"] == 45 and stats["window_match_fraction"] == pytest.approx(0.9)
    rule = next(r for r in _decisions(result, "profile_rule") if r["rule"] == "window_match_fraction")
    assert rule["outcome"] == "warn"


@pytest.mark.parametrize("profile", ["ci", "release"])
def test_strict_profiles_abort_on_incomplete_pairing(profile: str) -> None:
    base, subj = window_columns(450, seed=4)
    subj = {k: np.asarray(v)[:-1] for k, v in subj.items()}
    with pytest.raises(ProfileAbort, match="window_match_fraction") as info:
        run(_spec(profile, replicates=3200), inputs={"baseline": base, "subject": subj})
    assert info.value.exit_code == 3


@pytest.mark.parametrize("profile, windows, replicates, rule", [
    ("ci", 150, 1200, "min_paired_windows"),
    ("ci", 250, 1000, "min_replicates"),
    ("release", 300, 3200, "min_paired_windows"),
    ("release", 450, 2000, "min_replicates"),
])
def test_strict_profiles_enforce_floors(profile: str, windows: int, replicates: int, rule: str) -> None:
    base, subj = window_columns(windows, seed=6)
    with pytest.raises(ProfileAbort, match=rule):
        run(_spec(profile, replicates=replicates), inputs={"baseline": base, "subject": subj})


def test_ci_profile_passes_at_its_floors() -> None:
    base, subj = window_columns(200, seed=6)
    result = run(_spec("ci", replicates=1200), inputs={"baseline": base, "subject": subj})
    coverage = _ratio(result)["dataset"]["windows"]["stats"]["coverage"]
    assert coverage["final"] == {"used": 200, "required": 200, "ok": True}
    assert coverage["replicates"] == {"used": 1200, "required": 1200, "ok": True}
    outcomes = {r["rule"]: r["outcome"] for r in _decisions(result, "profile_rule")}
    assert outcomes.pop("window_overlap_fraction") == "not_checked"  # no start/end offsets (1.2.0)
    assert set(outcomes.values()) == {"pass"}


def test_strict_profile_aborts_on_overlapping_windows_and_token_mismatch() -> None:
    base, subj = window_columns(220, seed=8)
    start = np.arange(220) * 100
    base = {**base, "start": start, "end": start + 100}
    subj = {**subj, "start": start, "end": start + 150}  # each window runs into the next
    with pytest.raises(ProfileAbort, match="window_overlap_fraction"):
        run(_spec("ci", replicates=1200), inputs={"baseline": base, "subject": subj})
    subj = {**subj, "end": start + 100, "tokens": np.asarray(subj["tokens"]) + 1}
    with pytest.raises(ProfileAbort, match="token_counts_match"):
        run(_spec("ci", replicates=1200), inputs={"baseline": base, "subject": subj})


def test_preview_final_counts_must_match_in_strict_profiles_and_drift_is_reported() -> None:
    base, subj = window_columns(400, seed=12)
    phase = np.array(["preview"] * 200 + ["final"] * 200)
    base, subj = {**base, "phase": phase}, {**subj, "phase": phase}
    result = run(_spec("ci", replicates=1200), inputs={"baseline": base, "subject": subj})
    outputs = _ratio(result)
    assert outputs["dataset"]["windows"]["counts"]["subject"] == {"preview": 200, "final": 200}
    drift = outputs["drift"]
    assert drift["band"] == [0.95, 1.05] and drift["within_band"] == (0.95 <= drift["preview_final_ratio"] <= 1.05)
    uneven = {k: np.asarray(v)[1:] for k, v in subj.items()}
    with pytest.raises(ProfileAbort, match="preview_final_counts_match"):
        run(_spec("ci", replicates=1200), inputs={"baseline": base, "subject": uneven})


def test_degenerate_deltas_collapse_ci_to_point_and_are_recorded() -> None:
    base, _ = window_columns(30, seed=1)
    subj = {**base, "mean_nll": np.asarray(base["mean_nll"]) + 0.125}
    result = run(_spec(), inputs={"baseline": base, "subject": subj})
    pm = _ratio(result)["token_perplexity"]
    assert pm["ci"][0] == pm["ci"][1] == pytest.approx(0.125, abs=1e-9)
    assert _ratio(result)["dataset"]["windows"]["stats"]["paired_delta_summary"]["degenerate"] is True
    assert _decisions(result, "degenerate_fallback")


def test_fewer_than_two_pairs_is_a_stage_error() -> None:
    base, subj = window_columns(5, seed=1)
    subj = {**subj, "window_id": ["x1", "x2", "x3", "x4", base["window_id"][0]]}
    with pytest.raises(StageError, match="at least 2"):
        run(_spec(), inputs={"baseline": base, "subject": subj})


def test_pairing_is_by_id_not_by_position() -> None:
    pairing = pair_windows(np.array(["c", "a", "b"]), np.array(["b", "c", "z"]))
    assert pairing.baseline_index.tolist() == [0, 2] and pairing.subject_index.tolist() == [1, 0]
    assert pairing.match_fraction == pytest.approx(2 / 4)
    assert pairing.unmatched_baseline == ("a",) and pairing.unmatched_subject == ("z",)


def test_overlap_fraction_counts_both_windows_of_an_overlap() -> None:
    start = np.array([0, 10, 20, 30])
    assert overlap_fraction(start, start + 10) == 0.0
    assert overlap_fraction(start, np.array([10, 25, 30, 40])) == 0.5
    assert overlap_fraction(np.array([0, 5]), np.array([100, 6])) == 1.0  # nested span


# --------------------------------------------------------------------------------------------------
# versions: 1.5.0 (1.4.0's numbers on window tables; exports paired by their identity digests:
# tests/core/stages/test_ppl_ratio_exports.py) is the newest


def _version_spec(version: str | None, scheme: str = "uniform", replicates: int = 1000) -> str:
    use = "paired.ppl_ratio" + (f"@{version}" if version else "")
    return _spec(replicates=replicates, extra=f", scheme: {scheme}").replace("use: paired.ppl_ratio", f"use: {use}")


def test_stage_versions_are_1_0_0_to_1_5_0_newest_last() -> None:
    from certa.engine.core.stages.paired_ratio import KERNELS, STAGE, STAGES

    assert [s.version for s in STAGES] == [k.version for k in KERNELS] == ["1.0.0", "1.1.0", "1.2.0", "1.3.0",
                                                                           "1.4.0", "1.5.0"]
    assert STAGE is STAGES[-1] and all(s.changes for s in STAGES)
    assert (KERNELS[5].bootstrap_ci is KERNELS[4].bootstrap_ci is KERNELS[3].bootstrap_ci is KERNELS[2].bootstrap_ci
            is KERNELS[1].bootstrap_ci)
    assert [k.checks_exports for k in KERNELS] == [False] * 5 + [True]


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_1_2_0_computes_the_numbers_of_1_1_0(scheme: str) -> None:
    """1.2.0 changed what the certificate claims about the data, not the arithmetic: same seed, same interval."""
    base, subj = window_columns(150, seed=3, shift=0.02)
    newest = run(_version_spec("1.2.0", scheme), inputs={"baseline": base, "subject": subj})
    pinned = run(_version_spec("1.1.0", scheme), inputs={"baseline": base, "subject": subj})
    assert [s["version"] for s in newest.certificate["content"]["knobs"]["stages"]] == ["1.2.0"]
    assert _ratio(newest)["primary_metric"] == {k: v for k, v in _ratio(pinned)["primary_metric"].items()
                                                if k != "preview"}
    assert _ratio(newest)["dataset"]["windows"]["stats"]["bootstrap"] == \
        _ratio(pinned)["dataset"]["windows"]["stats"]["bootstrap"]


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_1_1_0_states_its_streams_and_1_0_0_is_unchanged(scheme: str) -> None:
    """1.1.0's bootstrap block names the SFC64 streams of its scheme; a spec pinned to 1.0.0 computes exactly the
    frozen kernel's interval (the golden corpus pins 1.0.0's bytes); both give the same point estimate."""
    from certa.engine.core.stats.bootstrap import weighted_mean as bootstrap, weighted_mean_v1_0_0 as bootstrap_v1_0_0

    base, subj = window_columns(150, seed=3, shift=0.02)
    new = run(_version_spec("1.1.0", scheme), inputs={"baseline": base, "subject": subj})
    old = run(_version_spec("1.0.0", scheme), inputs={"baseline": base, "subject": subj})
    assert [s["version"] for s in new.certificate["content"]["knobs"]["stages"]] == ["1.1.0"]
    assert [s["version"] for s in old.certificate["content"]["knobs"]["stages"]] == ["1.0.0"]
    new_boot = _ratio(new)["dataset"]["windows"]["stats"]["bootstrap"]
    old_boot = _ratio(old)["dataset"]["windows"]["stats"]["bootstrap"]
    assert new_boot["resampling"] == bootstrap.RESAMPLING[scheme] and "resampling" not in old_boot
    assert new_boot["index_streams"] == 4 and old_boot["index_streams"] == 2      # ⌈1000/256⌉ SFC64 streams
    assert _ratio(new)["primary_metric"]["log_ratio"] == _ratio(old)["primary_metric"]["log_ratio"]
    assert new_boot["acceleration"] == old_boot["acceleration"]
    assert _ratio(new)["primary_metric"]["ci"] != _ratio(old)["primary_metric"]["ci"]

    d = np.asarray(subj["mean_nll"]) - np.asarray(base["mean_nll"])
    t = np.asarray(subj["tokens"], dtype=float)
    for result, module in ((new, bootstrap), (old, bootstrap_v1_0_0)):
        ci = module.weighted_mean_bootstrap_ci(d, t, rng=stage_generator(11, "ratio"), replicates=1000, scheme=scheme)
        assert _ratio(result)["primary_metric"]["ci"] == [ci.low, ci.high]


@pytest.mark.slow
def test_newest_ratio_ci_covers_the_true_ratio_end_to_end() -> None:
    """400 seeded data sets through engine.run with the newest version (1.4.0, whose intervals are 1.1.0's on
    files sorted by window id: test_1_2_0_computes_the_numbers_of_1_1_0, test_1_3_0_sorted_reversed_and_shuffled...,
    test_a_plain_table_is_counted_in_tokens_unless_the_knob_says_otherwise) (n = 200 windows, B = 1000, 95% BCa, uniform): the display CI
    covers the true perplexity ratio exp(0.02) at 0.95 within 3 binomial SE (±0.033). Measured 0.9375."""
    true_shift, covered, sims = 0.02, 0, 400
    for k in range(sims):
        base, subj = window_columns(200, seed=10_000 + k, shift=true_shift)
        subj = {**subj, "mean_nll": np.asarray(base["mean_nll"]) + true_shift
                + np.random.default_rng(k).normal(0.0, 0.05, 200)}
        spec = _spec(replicates=1000).replace("seed: 11", f"seed: {k}")
        pm = _ratio(run(spec, inputs={"baseline": base, "subject": subj}))["token_perplexity"]
        covered += pm["display_ci"][0] <= math.exp(true_shift) <= pm["display_ci"][1]
    assert abs(covered / sims - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / sims), covered / sims


def test_a_bad_token_count_is_named_as_a_plain_number() -> None:
    from certa.engine import InputError

    base, subj = window_columns(10, seed=1)
    subj = {**subj, "tokens": np.r_[np.asarray(subj["tokens"])[:-1], 2.5]}
    with pytest.raises(InputError, match=r"row 10: token counts must be positive integers \(got 2\.5\)"):
        run(_spec(), inputs={"baseline": base, "subject": subj})


# --------------------------------------------------------------------------------------------------
# 1.3.0 (issue 30, item 4): the windows in the canonical order of their keys, whatever the file's row order


def _rows(columns: dict, index: np.ndarray) -> dict:
    return {name: np.asarray(values)[index] for name, values in columns.items()}


def _permutations(n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(baseline rows, subject rows) sorted by window id, reversed, and shuffled (each arm its own shuffle)."""
    rng = np.random.default_rng(30)
    ident = np.arange(n)
    return {"sorted": (ident, ident), "reversed": (ident[::-1], ident[::-1]),
            "shuffled": (rng.permutation(n), rng.permutation(n))}


@pytest.mark.parametrize("scheme", ["uniform", "token_weighted"])
def test_1_3_0_sorted_reversed_and_shuffled_files_give_one_certificate_of_numbers(scheme: str) -> None:
    base, subj = window_columns(150, seed=3, shift=0.02)  # ids w00000.. in sorted order
    results = {name: _ratio(run(_version_spec("1.3.0", scheme), inputs={"baseline": _rows(base, b),
                                                                     "subject": _rows(subj, s)}))
               for name, (b, s) in _permutations(150).items()}
    assert results["reversed"] == results["sorted"] == results["shuffled"]
    sorted_1_2_0 = _ratio(run(_version_spec("1.2.0", scheme), inputs={"baseline": base, "subject": subj}))
    assert results["sorted"] == sorted_1_2_0  # a file already in key order: 1.2.0's numbers


def test_1_2_0_stays_frozen_and_follows_the_files_row_order() -> None:
    """Why 1.3.0 exists: 1.2.0 bootstraps the windows in the baseline file's order."""
    base, subj = window_columns(150, seed=3, shift=0.02)
    reverse = np.arange(150)[::-1]
    forward = _ratio(run(_version_spec("1.2.0"), inputs={"baseline": base, "subject": subj}))["primary_metric"]
    backward = _ratio(run(_version_spec("1.2.0"), inputs={"baseline": _rows(base, reverse),
                                                          "subject": _rows(subj, reverse)}))["primary_metric"]
    assert forward["ci"] != backward["ci"]
    assert forward["log_ratio"] == pytest.approx(backward["log_ratio"], rel=1e-12)


def test_a_mean_nll_beyond_the_largest_perplexity_is_one_input_error() -> None:
    """A per-token mean NLL above log(largest double) = 709.78 (a sum given as a mean) overflowed math.exp with a
    traceback; it is an InputError naming the input and the number. So is a difference whose interval reaches
    that far (one absurd window of two), which overflowed the displayed interval."""
    from certa.engine import InputError

    base = {"window_id": ["a", "b"], "tokens": [512, 256], "mean_nll": [3.0, 3.5]}
    summed = {"window_id": ["a", "b"], "tokens": [512, 256], "mean_nll": [3.2 * 512, 3.4 * 256]}
    with pytest.raises(InputError, match=r"input .subject.: the weighted mean NLL of its windows is 1382.4 nats.*"
                                         r"is the column a sum \(give it as nll_sum\)\?"):
        run(_spec(replicates=200), inputs={"baseline": base, "subject": summed})
    one_large = {"window_id": ["a", "b"], "tokens": [512, 256], "mean_nll": [3.0, 800.0]}
    with pytest.raises(InputError, match=r"the interval's upper end of the difference of the subject's and the "
                                         r"baseline's mean NLL is 79\d\.\d+ nats"):
        run(_spec(replicates=200), inputs={"baseline": base, "subject": one_large})
