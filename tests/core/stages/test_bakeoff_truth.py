"""bakeoff.compare 1.2.0, bakeoff.gate 1.1.0, bakeoff.merge 1.2.0: the bake-off says only what the data support.

Every recognised column the knobs leave unused and every cell the stage replaced, clamped or left out is a
recorded decision with counts (and a warning); the tanh-mapped pair values are named as display values beside
the u-space difference the bootstrap resamples; a cost column is summarised; each bucket says whether its
leader's lead is significant. The older versions record and state none of it (their bytes are pinned by the
golden corpus; here their shape)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from certa.engine import run
from certa.engine.foundation.canonical import to_jsonable
from certa.engine.foundation.errors import InputError, ProfileAbort
from certa.engine.core.spec import fill_defaults
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.bakeoff import KERNELS, Reporting, RecordedReporting, audit_bakeoff
from certa.engine.core.stages.base import StageContext
from certa.engine.services.presentation.stages.bakeoff import markdown
from certa.engine.core.stats.bakeoff.pairwise_bootstrap import holm_adjust, is_significant, pairwise_bootstrap, significance_level
from certa.engine.core.stats.bakeoff.pool import BandTable, decision_values
from certa.engine.core.tables import table_from_columns
from certa.schemas import load_schema

COMPARE = REGISTRY.get("bakeoff.compare", "1.2.0")
COMPARE_1_1 = REGISTRY.get("bakeoff.compare", "1.1.0")
MERGE = REGISTRY.get("bakeoff.merge", "1.2.0")
GATE = REGISTRY.get("bakeoff.gate", "1.1.0")
GATE_1_0 = REGISTRY.get("bakeoff.gate", "1.0.0")

E5 = {"vendor": ["A"] * 3 + ["B"] * 3,
      "rsi": [0.604368, 0.291313, 0.910425, 0.691069, 0.462117, 0.291313],
      "g": [0.8] * 6}

# weighting by w flips the leader: uniform, A pools (atanh 0.8 + atanh 0.1) / 2 > atanh 0.4; by w, B leads
FLIPPING_W = {"vendor": ["A", "A", "B", "B"], "rsi": [0.8, 0.1, 0.4, 0.4], "w": [1.0, 5.0, 1.0, 1.0]}


def run_stage(stage, columns, knobs, *, profile="dev", rng_seed=1):
    resolved = fill_defaults({"input": "d", **knobs}, load_schema(stage.schema_file))
    ctx = StageContext(stage_id="s", knobs=resolved, tables={"d": table_from_columns("d", columns)},
                       rng=np.random.default_rng(rng_seed), profile=profile, upstream={},
                       seed={"knobs_hash": "f" * 64, "entropy": "42"})
    out = stage.run(ctx)
    return to_jsonable(out.outputs), list(out.decisions)


def compare(data, stage=COMPARE, profile="dev", **knobs):
    return run_stage(stage, data, {"bootstrap": {"replicates": 500}, **knobs}, profile=profile)


def recorded(decisions, kind):
    return [d.detail for d in decisions if d.kind == kind]


# --------------------------------------------------------------------------- columns and cells


def test_an_unused_weight_column_that_would_flip_the_leader_is_a_recorded_warning():
    out, decisions = compare(FLIPPING_W)
    weighted, _ = compare(FLIPPING_W, weights="column")
    assert out["buckets"]["all"]["leader"] == "A" and weighted["buckets"]["all"]["leader"] == "B"
    (unused,) = recorded(decisions, "unused_column")
    assert unused["column"] == "w" and unused["use_with"] == "weights: column" and unused["outcome"] == "warn"
    assert out["input"]["data_notes"] == [unused["message"]]
    assert not recorded(compare(FLIPPING_W, weights="column")[1], "unused_column")


def test_the_warning_reaches_the_run_and_version_1_1_0_stays_silent():
    spec = ("certa: 1\nname: w-unused\nseed: 7\ninputs:\n  d: {{path: d.csv}}\nstages:\n"
            "  - id: cmp\n    use: {use}\n    with: {{input: d, bootstrap: {{replicates: 200}}}}\n")
    newest = run(spec.format(use="bakeoff.compare"), inputs={"d": FLIPPING_W})
    assert newest.warnings == ("stage 'cmp': input 'd' has a column 'w' that this stage recognises but the knobs "
                               "leave unused; it was ignored (to use it: weights: column)",)
    pinned = run(spec.format(use="bakeoff.compare@1.1.0"), inputs={"d": FLIPPING_W})
    # 1.1.0 says nothing of the column it recognises; the run itself still names a column no stage read
    assert pinned.warnings == ("inputs: input 'd' has 1 column(s) no stage read: 'w'; they enter no number of this "
                               "certificate (remove them from the input, or name them in a stage's with:)",)
    kinds = [d.decision.kind for d in pinned.decisions]
    assert kinds == ["bakeoff_decision"] * 4 + ["bakeoff_stamp", "unread_columns"]
    cmp_1_1 = pinned.certificate["content"]["stages"]["cmp"]
    assert "data_notes" not in cmp_1_1["input"] and "lead" not in cmp_1_1["buckets"]["all"]


def test_version_1_1_0_outputs_keep_their_shape():
    out, decisions = compare({**E5, "cost": [1, 2, 3, 4, 5, 6], "w": [1] * 6}, stage=COMPARE_1_1)
    pair = out["buckets"]["all"]["pairs"][0]
    assert "ci_tanh" in pair and "display" not in pair and "cost_mean" not in out["buckets"]["all"]["vendors"]["A"]
    assert out["buckets"]["all"]["vendors"]["A"]["tokens_mean"] is None  # 1.1.0 wrote null; 1.2.0 leaves it out
    assert {d.kind for d in decisions} == {"bakeoff_decision", "bakeoff_stamp"}


def test_a_g_column_shadowed_by_an_upstream_gate_is_recorded():
    upstream = {"calm": {"g": np.full(6, 0.5), "mode": "mul", "flagged_rows": []}}
    resolved = fill_defaults({"input": "d", "gate": {"from": "calm"}, "bootstrap": {"replicates": 200}},
                             load_schema(COMPARE.schema_file))
    ctx = StageContext(stage_id="s", knobs=resolved, tables={"d": table_from_columns("d", E5)},
                       rng=np.random.default_rng(1), profile="dev", upstream=upstream, seed={})
    (unused,) = recorded(COMPARE.run(ctx).decisions, "unused_column")
    assert unused["column"] == "g" and unused["use_with"] == "gate.from: null"


def test_gate_cells_replaced_by_one_are_counted_and_ci_refuses_out_of_range_values():
    columns = {**E5, "g": [0.8, "", 1.7, -0.1, "inf", 0.8]}
    out, decisions = compare(columns)
    (fallback,) = recorded(decisions, "gate_fallback")
    assert (fallback["rows"], fallback["missing"], fallback["below_0"], fallback["above_1"]) == (4, 2, 1, 1)
    assert (fallback["smallest"], fallback["largest"], fallback["first_row"]) == (-0.1, 1.7, 2)
    assert fallback["by_vendor"] == {"A": 2, "B": 2} and fallback["outcome"] == "warn"
    assert "smallest -0.1, largest 1.7" in fallback["message"] and "np.float64" not in fallback["message"]
    assert out["input"]["g_flagged"] == 4
    with pytest.raises(ProfileAbort, match=r"profile 'ci' refuses gate values outside \[0, 1\]") as caught:
        compare(columns, profile="ci")
    assert [d.kind for d in caught.value.decisions] == ["gate_fallback"]
    # missing telemetry is the method's own rule (g = 1, flagged): ci records it and goes on
    _, missing_only = compare({**E5, "g": [0.8, "", 0.8, 0.8, 0.8, 0.8]}, profile="ci")
    assert recorded(missing_only, "gate_fallback")[0]["outcome"] == "warn"


def test_clamped_scores_and_zero_weights_are_counted():
    columns = {"vendor": ["A", "A", "B", "B"], "rsi": [0.9999995, 0.2, -0.99999999, 0.1], "w": [1.0, 0.0, 2.0, 0.0]}
    _, decisions = compare(columns, weights="column")
    (clamped,) = recorded(decisions, "rsi_clamped")
    assert (clamped["rows"], clamped["smallest"], clamped["largest"]) == (2, -0.99999999, 0.9999995)
    assert clamped["by_vendor"] == {"A": 1, "B": 1} and clamped["eps_a"] == 1e-6
    (zero,) = recorded(decisions, "zero_weight")
    assert (zero["rows"], zero["first_row"], zero["by_vendor"]) == (2, 2, {"A": 1, "B": 1})
    assert not recorded(compare(columns, eps_a=1e-9, weights="column")[1], "rsi_clamped")


def test_cost_is_summarised_like_tokens_and_used_by_nothing_else():
    columns = {**E5, "cost": [1.0, 2.0, 10.0, 3.0, "", 5.0]}
    out, decisions = compare(columns)
    a, b = out["buckets"]["all"]["vendors"]["A"], out["buckets"]["all"]["vendors"]["B"]
    assert (a["cost_median"], a["cost_mean"]) == (2.0, 13 / 3) and (b["cost_median"], b["cost_mean"]) == (4.0, 4.0)
    assert [row["cost"] for row in out["table"]] == [2.0, 4.0]
    (missing,) = recorded(decisions, "overlay_missing")
    assert (missing["column"], missing["rows"], missing["first_row"], missing["by_vendor"]) == ("cost", 1, 5, {"B": 1})
    plain, _ = compare(E5)  # nothing else moves: ranking, pairs, lead and stamps are those without cost
    for key in ("ranking", "pairs", "lead", "stamp"):
        assert out["buckets"]["all"][key] == plain["buckets"]["all"][key]
    with pytest.raises(InputError, match="column 'cost', row 2: must be >= 0"):
        compare({**E5, "cost": [1, -2, 1, 1, 1, 1]})
    renamed, _ = compare({**E5, "usd": [1, 2, 3, 4, 5, 6]}, columns={"cost": "usd"})
    assert renamed["buckets"]["all"]["vendors"]["B"]["cost_median"] == 5.0


def test_overlays_without_data_are_absent_not_null():
    out, _ = compare(E5)
    block = out["buckets"]["all"]["vendors"]["A"]
    assert not {"tokens_mean", "tokens_median", "lat_ms_mean", "lat_ms_median", "cost_mean"} & set(block)
    assert "tokens" not in out["table"][0]
    partly, _ = compare({**E5, "tokens": [100, 200, 300, "", "", ""]})
    assert partly["buckets"]["all"]["vendors"]["A"]["tokens_median"] == 200.0
    assert "tokens_median" not in partly["buckets"]["all"]["vendors"]["B"]


# --------------------------------------------------------------------------- estimands


def _e5_bootstrap(replicates: int):
    """The stage's bootstrap of E5, recomputed from the stats module with the stage's generator."""
    rsi, g = np.array(E5["rsi"]), np.array(E5["g"])
    values = decision_values(rsi, np.ones(6), g, mode="mul", eps_a=1e-6, bands=BandTable(0.9, 0.6, -0.6, -0.9))
    samples = [(values.u_env[:3], None), (values.u_env[3:], None)]
    estimates = [float(np.mean(values.u_env[:3])), float(np.mean(values.u_env[3:]))]
    return pairwise_bootstrap(samples, [(0, 1)], replicates=replicates, confidence_level=0.95,
                              rng=np.random.default_rng(1), estimates=estimates)


def test_the_pair_carries_the_bootstrapped_u_difference_and_names_its_tanh_images_display():
    out, _ = compare(E5)
    (pair,) = out["buckets"]["all"]["pairs"]
    expected = _e5_bootstrap(500).pairs[0]
    assert pair["ci_u"] == list(expected.ci_u) and pair["p_two_sided"] == expected.p_two_sided
    assert pair["diff_u"] == pytest.approx(expected.diff_u, abs=1e-15)
    display = pair["display"]
    assert display["ci_tanh"] == [math.tanh(pair["ci_u"][0]), math.tanh(pair["ci_u"][1])]  # exactly
    assert display["diff_tanh"] == math.tanh(pair["diff_u"])
    assert "not for diff_rsi" in display["note"] and "ci_tanh" not in pair
    # diff_rsi is a different quantity: the difference of the pooled indices, not tanh(diff_u)
    assert pair["diff_rsi"] != pytest.approx(display["diff_tanh"], abs=1e-3)
    # the numbers are those 1.1.0 computed; only their naming moved
    old, _ = compare(E5, stage=COMPARE_1_1)
    (old_pair,) = old["buckets"]["all"]["pairs"]
    assert (old_pair["diff_u"], old_pair["ci_u"], old_pair["ci_tanh"], old_pair["p_holm"]) == (
        pair["diff_u"], pair["ci_u"], display["ci_tanh"], pair["p_holm"])
    assert out["bootstrap"]["interval"].endswith("display: diff_tanh = tanh(diff_u), ci_tanh = tanh(ci_u)")


def test_verify_checks_the_display_values_and_show_prints_them():
    out, _ = compare(E5)
    assert audit_bakeoff(out) == []
    text = markdown(out, COMPARE.version)
    ci_tanh = out["buckets"]["all"]["pairs"][0]["display"]["ci_tanh"]
    assert f"{ci_tanh[0]:.6f}" in text and "Leader A, lead over B not significant (p_Holm = " in text
    out["buckets"]["all"]["pairs"][0]["display"]["diff_tanh"] += 1e-9
    assert any("diff_tanh != tanh(diff_u)" in p for p in audit_bakeoff(out))


# --------------------------------------------------------------------------- the leader's lead


def test_significance_compares_p_with_one_minus_the_level_exactly():
    assert significance_level(0.95) == Fraction(1, 20) and 1 - 0.95 != 0.05
    assert is_significant(0.05, 0.95) and is_significant(0.1, 0.9)
    above = math.nextafter(0.05, 1.0)  # 0.05000000000000001 < 1 - 0.95 = 0.050000000000000044 in floats
    assert above <= 1 - 0.95 and not is_significant(above, 0.95)


def test_e5_leader_a_has_a_lead_that_is_not_significant():
    out, _ = compare(E5, bootstrap={"replicates": 10_000})
    lead = out["buckets"]["all"]["lead"]
    pair = out["buckets"]["all"]["pairs"][0]
    assert (lead["leader"], lead["runner_up"], lead["alpha"]) == ("A", "B", 0.05)
    # two vendors: Holm over one pair is the two-sided p itself, 2 * p_min ≈ 0.4 (docs/bakeoff.md: p_min ≈ 0.2)
    assert lead["p_holm"] == pair["p_two_sided"] == 2 * pair["p_min"] and 0.3 < lead["p_holm"] < 0.6
    assert lead["significant"] is False and lead["diff_u"] == pair["diff_u"] > 0


def test_the_lead_uses_the_holm_p_of_the_leader_and_runner_up_pair_computed_by_hand():
    rng = np.random.default_rng(3)
    n = 40
    columns = {"vendor": ["A"] * n + ["B"] * n + ["C"] * n,
               "rsi": np.concatenate([np.tanh(rng.normal(mu, 0.4, n)) for mu in (0.50, 0.45, 0.0)]).tolist()}
    out, _ = compare(columns, pairs=[["C", "A"], ["B", "A"], ["B", "C"]], bootstrap={"replicates": 2000})
    entry = out["buckets"]["all"]
    assert entry["ranking"][:2] == ["A", "B"]
    raw = [p["p_two_sided"] for p in entry["pairs"]]
    # Holm by hand: sort, multiply by m - k + 1, running maximum, capped at 1
    order = sorted(range(3), key=lambda k: raw[k])
    adjusted, running = [0.0] * 3, 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[k]))
        adjusted[k] = running
    assert [p["p_holm"] for p in entry["pairs"]] == adjusted == holm_adjust(raw).tolist()
    lead = entry["lead"]
    b_minus_a = entry["pairs"][1]
    assert (lead["leader"], lead["runner_up"]) == ("A", "B") and lead["p_holm"] == adjusted[1]
    assert lead["diff_u"] == -b_minus_a["diff_u"] > 0  # oriented leader minus runner-up
    assert lead["significant"] == (adjusted[1] <= 0.05)
    c_minus_a = entry["pairs"][0]
    assert c_minus_a["significant"] is True and c_minus_a["p_holm"] < 0.05


def test_a_clear_lead_is_significant_and_no_lead_block_without_a_tested_single_leader():
    columns = {"vendor": ["A"] * 20 + ["B"] * 20, "rsi": [0.7, 0.6] * 10 + [0.1, 0.0] * 10}
    lead = compare(columns)[0]["buckets"]["all"]["lead"]
    assert lead["significant"] is True and lead["p_holm"] == 0.0
    assert "lead" not in compare(columns, pairs=[])[0]["buckets"]["all"]  # the pair was not tested
    tied = {"vendor": ["A", "B"] * 3, "rsi": [0.3] * 6}
    assert "lead" not in compare(tied)[0]["buckets"]["all"]  # tied at the top: no leader
    assert "lead" not in compare(columns, rank_by="RSI_pool")[0]["buckets"]["all"]  # the test is of RSI_pool_env


# --------------------------------------------------------------------------- gate and merge


TELEMETRY = {"F": [0.0, 0.1, 1.4, ""], "cos_sim": [0.99, 0.96, 0.9, 0.95], "lat_ms": [300, 400, 500, 350],
             "errors": [0, 1, 0, 0], "calls": [2, 2, 1, 1], "edit_distance": [0, 10, 20, 5],
             "length": [100, 100, 100, 100], "queue": [1, 2, 3, 4], "vendor": ["a", "a", "b", "b"]}


def test_the_gate_records_its_fallback_rows_per_lane_and_its_unused_telemetry():
    out, decisions = run_stage(GATE, TELEMETRY, {"preset": "A", "references": {"lat_p50": 300, "lat_p95": 500}})
    (fallback,) = recorded(decisions, "lane_fallback")
    assert (fallback["rows"], fallback["first_row"]) == (2, 3)
    assert fallback["by_lane"] == {"F": {"missing": 1, "out_of_range": 1}}
    assert fallback["outcome"] == "warn" and out["summary"]["flagged"] == 2
    # F = 1.4 is a logging error, not missing telemetry: ci refuses it; a missing cell alone it records
    with pytest.raises(ProfileAbort, match="profile 'ci' refuses out-of-range telemetry") as caught:
        run_stage(GATE, TELEMETRY, {"preset": "A", "references": {"lat_p50": 300, "lat_p95": 500}}, profile="ci")
    assert "lane_fallback" in [d.kind for d in caught.value.decisions]
    _, missing_only = run_stage(GATE, {**TELEMETRY, "F": [0.0, 0.1, 0.2, ""]},
                                {"preset": "A", "references": {"lat_p50": 300, "lat_p95": 500}}, profile="ci")
    assert recorded(missing_only, "lane_fallback")[0]["by_lane"] == {"F": {"missing": 1, "out_of_range": 0}}
    # preset A gives lane Q weight 0: its column is unused
    assert [(d["column"], d["use_with"]) for d in recorded(decisions, "unused_column")] == [
        ("queue", "params.weights.Q > 0 (preset: custom)")]
    old_out, old_decisions = run_stage(GATE_1_0, TELEMETRY, {"preset": "A",
                                                             "references": {"lat_p50": 300, "lat_p95": 500}})
    assert {d.kind for d in old_decisions} == {"gate_lanes"}
    np.testing.assert_array_equal(old_out["g"], out["g"])  # g does not move


def test_merge_leaves_overlay_means_without_data_out_and_records_skipped_batch_runs():
    out, _ = compare(E5, allow_single_vendor=False)
    table = table_from_columns("s", {k: [row[k] for row in out["sums"]] for k in out["sums"][0]})
    resolved = fill_defaults({"shards": ["s"]}, load_schema(MERGE.schema_file))
    ctx = StageContext(stage_id="m", knobs=resolved, tables={"s": table}, rng=np.random.default_rng(0),
                       profile="dev", upstream={}, seed={"knobs_hash": "f" * 64})
    merged = to_jsonable(MERGE.run(ctx).outputs)
    assert "tokens_mean" not in merged["buckets"]["all"]["vendors"]["A"] and merged["input"]["data_notes"] == []
    skipped = [{"run_id": "r1", "reason": "no bakeoff.compare stage"}]
    (decision,) = RecordedReporting().skipped_shards(skipped)
    assert decision.kind == "shard_skipped" and decision.detail["runs"] == 1 and "r1" in decision.detail["message"]
    assert Reporting().skipped_shards(skipped) == ()


def test_versions_are_registered_with_their_knob_schemas():
    assert [k.version for k in KERNELS] == ["1.0.0", "1.1.0", "1.2.0"]
    assert [s.version for s in REGISTRY.versions("bakeoff.gate")] == ["1.0.0", "1.1.0"]
    assert COMPARE_1_1.schema_file == "stages/bakeoff.compare@1.1.0.schema.json"
    assert "cost" not in load_schema(COMPARE_1_1.schema_file)["properties"]["columns"]["properties"]
    assert "cost" in load_schema(COMPARE.schema_file)["properties"]["columns"]["properties"]
    assert KERNELS[-1].formulas == KERNELS[1].formulas  # the same frozen manifest: each merges the other's sums
