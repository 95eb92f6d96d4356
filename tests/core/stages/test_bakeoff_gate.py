"""The calm gate (certa.engine.core.stats.bakeoff.calm_gate and stage bakeoff.gate): lane formulas, mix and notch by
hand, the smoothing scan against the plain recursion, presets, and missing telemetry."""

from __future__ import annotations

import numpy as np
import pytest

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.spec import fill_defaults
from certa.engine.core.stages.bakeoff_gate import STAGE
from certa.engine.core.stages.base import StageContext
from certa.engine.core.stats.bakeoff.calm_gate import (PRESETS, GateParams, calm_gate, lane_d, lane_e, lane_l, lane_q, lane_v,
                                       lanes_mix, smooth_gate)
from certa.engine.core.tables import table_from_columns
from certa.schemas import load_schema


def test_lane_formulas_by_hand():
    assert lane_d(np.array([0.97, 0.90, 0.5]), 0.95).tolist() == pytest.approx([0.6, 1.0, 1.0])
    assert lane_l(np.array([200.0, 350.0, 900.0]), 300.0, 500.0).tolist() == [0.0, 0.25, 1.0]
    assert lane_e(np.array([1.0, 0.0, 3.0]), np.array([4.0, 0.0, 2.0])).tolist() == [0.25, 0.0, 1.0]
    assert lane_v(np.array([30.0, 5.0]), np.array([300.0, 0.0])).tolist() == [0.1, 1.0]
    assert lane_q(np.array([8.0, 40.0]), 32.0).tolist() == [0.25, 1.0]
    assert np.isnan(lane_l(np.array([np.nan]), 1.0, 2.0))[0]  # missing stays missing


def test_mix_and_safety_notch_by_hand():
    lanes = {"F": np.array([0.1, 0.9]), "D": np.array([0.2, 0.1]), "L": np.array([0.4, 0.0]),
             "E": np.array([0.0, 0.0]), "V": np.array([0.3, 0.0]), "Q": np.array([0.5, 0.5])}
    g_inst, g_sev, mix = lanes_mix(lanes, PRESETS["A"])  # weights 1,1,1,1,1,0
    assert mix.tolist() == pytest.approx([(0.1 + 0.2 + 0.4 + 0.0 + 0.3) / 5, (0.9 + 0.1) / 5])
    assert g_inst.tolist() == pytest.approx([0.8, 0.8]) and g_sev is None
    g_inst, g_sev, mix = lanes_mix(lanes, PRESETS["B"])  # 1.5,1,1,1.5,0.5,0.5; notch at 0.80
    w = np.array([1.5, 1, 1, 1.5, 0.5, 0.5])
    expected_mix = [np.dot(w, [0.1, 0.2, 0.4, 0.0, 0.3, 0.5]) / 6, np.dot(w, [0.9, 0.1, 0.0, 0.0, 0.0, 0.5]) / 6]
    assert mix.tolist() == pytest.approx(expected_mix)
    # row 2: sev = 0.9 -> g_sev = 1 - (0.9 - 0.8) / 0.2 = 0.5 < 1 - mix
    assert g_sev.tolist() == pytest.approx([1.0, 0.5])
    assert g_inst.tolist() == pytest.approx([1 - expected_mix[0], 0.5])


def test_presets_are_the_seed_appendix_a1_values():
    assert PRESETS["A"].as_dict() == {"mode": "mul", "rho": 0.2, "g_min": 0.0, "notch": False, "s_thr": 0.8,
                                      "eps_g": 1e-12,
                                      "weights": {"F": 1.0, "D": 1.0, "L": 1.0, "E": 1.0, "V": 1.0, "Q": 0.0}}
    assert (PRESETS["B"].mode, PRESETS["B"].rho, PRESETS["B"].g_min, PRESETS["B"].s_thr) == ("mul", 0.3, 0.2, 0.8)
    assert (PRESETS["C"].mode, PRESETS["C"].rho, PRESETS["C"].g_min, PRESETS["C"].s_thr) == ("u_scale", 0.5, 0.1, 0.7)
    assert list(PRESETS["C"].weights.values()) == [1.5, 1, 1.5, 1.5, 0.5, 0.5]
    with pytest.raises(ValueError, match="rho"):
        GateParams(mode="mul", rho=0.0, g_min=0.0, weights={"F": 1.0})


def test_smoothing_by_hand():
    g_inst = np.array([0.5, 1.0, 0.0])
    none = np.zeros(3, dtype=bool)
    # g1 = max(0, 0.8·0.5 + 0.2·0.5) = 0.5 (cold start on g_inst); g2 = 0.8·0.5 + 0.2·1 = 0.6; g3 = 0.8·0.6 = 0.48
    assert smooth_gate(g_inst, np.zeros(3), none, rho=0.2, g_min=0.0).tolist() == pytest.approx([0.5, 0.6, 0.48])
    assert smooth_gate(g_inst, np.zeros(3), none, rho=0.2, g_min=0.5).tolist() == pytest.approx([0.5, 0.6, 0.5])
    # cold start from 1: g1 = 0.8 + 0.1 = 0.9; g2 = 0.72 + 0.2 = 0.92; g3 = 0.736
    assert smooth_gate(g_inst, np.zeros(3), none, rho=0.2, g_min=0.0, cold_start="one").tolist() == \
        pytest.approx([0.9, 0.92, 0.736])


def _smoothing_reference(g_inst, streams, skip, rho, g_min, cold_start):
    out = np.full(len(g_inst), np.nan)
    state: dict[int, float] = {}
    for i, x in enumerate(g_inst):
        if skip[i]:
            continue
        prev = state.get(streams[i], x if cold_start == "g_inst" else 1.0)
        state[streams[i]] = out[i] = min(1.0, max(g_min, (1 - rho) * prev + rho * x))
    return out


@pytest.mark.parametrize("cold_start", ["g_inst", "one"])
@pytest.mark.parametrize("rho, g_min", [(0.2, 0.0), (0.3, 0.2), (0.5, 0.1), (1.0, 0.3)])
def test_smoothing_scan_equals_the_recursion(rho, g_min, cold_start):
    rng = np.random.default_rng(int(rho * 10 + g_min * 100))
    n = 3000
    g_inst, streams, skip = rng.uniform(0, 1, n), rng.integers(0, 5, n), rng.uniform(size=n) < 0.1
    skip[:3] = True  # a stream may start with skipped rows
    got = smooth_gate(g_inst, streams, skip, rho=rho, g_min=g_min, cold_start=cold_start)
    expected = _smoothing_reference(g_inst, streams, skip, rho, g_min, cold_start)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.array_equal(np.isnan(got), skip)


def test_invalid_rows_get_g_one_and_leave_the_smoother_untouched():
    lanes = {k: np.array([0.5, np.nan, 0.5, 0.0]) if k == "F" else np.zeros(4) for k in "FDLEV"}
    result = calm_gate(lanes, np.array([False, False, False, True]), np.zeros(4), PRESETS["A"])
    assert result.flagged.tolist() == [False, True, False, True]
    assert result.g[1] == 1.0 and result.g[3] == 1.0
    # rows 0 and 2 form the stream: g_inst = 0.9 both times -> 0.9 then 0.9
    assert result.g[[0, 2]].tolist() == pytest.approx([0.9, 0.9])


# --------------------------------------------------------------------------- the stage

KNOBS = load_schema("stages/bakeoff.gate.schema.json")


def run_gate(columns, **knobs):
    resolved = fill_defaults({"input": "t", **knobs}, KNOBS)
    ctx = StageContext(stage_id="calm", knobs=resolved, tables={"t": table_from_columns("t", columns)},
                       rng=np.random.default_rng(0), profile="dev", upstream={}, seed={})
    return STAGE.run(ctx)


TELEMETRY = {"vendor": ["a", "a", "b", "b"], "F": [0.0, 0.1, 0.2, ""], "cos_sim": [0.99, 0.96, 0.9, 0.95],
             "lat_ms": [300, 400, 500, 350], "errors": [0, 1, 0, 0], "calls": [2, 2, 1, 1],
             "edit_distance": [0, 10, 20, 5], "length": [100, 100, 100, 100]}


def test_stage_records_every_lane_and_flags_missing_telemetry():
    out = run_gate(TELEMETRY, references={"lat_p50": 300, "lat_p95": 500})
    assert out.outputs["flagged_rows"].tolist() == [3] and out.outputs["g"][3] == 1.0
    rows = [d.detail for d in out.decisions if d.kind == "gate_lanes"]
    assert [d.kind for d in out.decisions] == ["lane_fallback"] + ["gate_lanes"] * 4  # 1.1.0 records the fallback
    assert rows[3]["flag"] == "LANE_MISSING_TELEMETRY"
    # row 1 (vendor a, second row): F 0.1, D 0.8, L 0.5, E 0.5, V 0.1 -> mix 0.4, g_inst 0.6;
    # row 0: D 0.2, others 0 -> g_inst 0.96; smoothed: 0.8·0.96 + 0.2·0.6 = 0.888
    assert rows[1]["D"] == pytest.approx(0.8) and rows[1]["L"] == 0.5 and rows[1]["g_inst"] == pytest.approx(0.6)
    assert out.outputs["g"][1] == pytest.approx(0.888)
    assert out.outputs["mode"] == "mul" and out.outputs["references"]["lat_p95"] == 500


def test_stage_errors_name_the_missing_lane_and_the_fix():
    with pytest.raises(InputError, match="lane Q has weight 0.5 .* 'queue'"):
        run_gate(TELEMETRY, preset="B")
    with pytest.raises(StageError, match="needs 'params'"):
        run_gate(TELEMETRY, preset="custom")
    with pytest.raises(InputError, match="stream_by"):
        run_gate(TELEMETRY, stream_by=["region"])


def test_custom_params_drive_the_gate():
    params = {"mode": "u_scale", "rho": 1.0, "g_min": 0.0, "weights": {"F": 1.0}, "notch": False, "s_thr": 0.5}
    out = run_gate({"F": [0.25, 0.5]}, preset="custom", params=params, stream_by=[])
    assert out.outputs["g"].tolist() == [0.75, 0.5] and out.outputs["mode"] == "u_scale"
