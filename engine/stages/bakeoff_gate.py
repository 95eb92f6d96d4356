"""Stage ``bakeoff.gate``: the calm gate g per decision from raw telemetry (seed 002's SSM-AI Section 4).

Input: one row per decision, in the same order as the decisions table a later ``bakeoff.compare``
reads with ``gate: {from: <this stage id>}``. Each lane comes from its own column when present (already
normalised to [0, 1]: ``F``, ``D``, ``L``, ``E``, ``V``, ``Q``) or else from raw telemetry:

    D ← cos_sim (and references.cos_ref)      L ← lat_ms (references.lat_p50/lat_p95, else the data's)
    E ← errors, calls                          V ← edit_distance, length
    Q ← queue (references.q95, else the data's 95th percentile)

Weights, smoothing (rho, g_min), notch and mode come from a preset (A "Steady", B "Safety-first",
C "Incident") or from ``params``. A row whose used lanes are missing, NaN or out of range gets g = 1
and the flag ``LANE_MISSING_TELEMETRY``. Every lane value, g_inst and g is recorded per row in the
ledger (``gate_lanes``); the certificate holds g per row for the compare stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InputError, StageError
from ..stats.bakeoff_gate import (LANES, PRESETS, GateParams, GateResult, calm_gate, lane_d, lane_e, lane_l,
                                  lane_q, lane_v)
from ..tables import Table
from .base import DecisionColumns, DecisionParts, StageContext, StageOutput, StageType

__all__ = ["STAGE", "STAGES"]

_FLAG = "LANE_MISSING_TELEMETRY"


def _params(knobs: Mapping[str, Any]) -> GateParams:
    preset = knobs["preset"]
    if preset != "custom":
        if knobs.get("params"):
            raise StageError(f"'params' is only used with preset: custom (preset is {preset!r})")
        return PRESETS[preset]
    given = knobs.get("params")
    if not given:
        raise StageError("preset: custom needs 'params' (mode, rho, g_min, weights, notch, s_thr)")
    try:
        return GateParams(mode=given["mode"], rho=float(given["rho"]), g_min=float(given["g_min"]),
                          weights={k: float(v) for k, v in given["weights"].items()},
                          notch=bool(given["notch"]), s_thr=float(given["s_thr"]))
    except ValueError as exc:
        raise StageError(f"'params': {exc}") from None


def _column(table: Table, name: str) -> np.ndarray:
    return table.numeric(name, allow_missing=True)


def _lanes(table: Table, params: GateParams, refs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], np.ndarray,
                                                                             dict[str, str], dict[str, float]]:
    """Normalised lanes, rows with invalid telemetry, each lane's source, and the references used."""
    n = table.n_rows
    invalid = np.zeros(n, dtype=bool)
    lanes: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    used_refs: dict[str, float] = {}
    needed = [k for k in LANES if params.weights.get(k, 0.0) > 0]
    optional = [k for k in ("F", "D", "E") if params.notch and k not in needed]

    def raw(*names: str) -> list[np.ndarray] | None:
        if not all(table.has(c) for c in names):
            return None
        cols = [_column(table, c) for c in names]
        for c, values in zip(names, cols):
            invalid[:] |= np.isnan(values) | (values < 0 if c != "cos_sim" else False)
        return cols

    def quantile(values: np.ndarray, q: float, label: str) -> float:
        present = values[~np.isnan(values)]
        if present.size == 0:
            raise InputError(f"input '{table.name}': column for {label} has no values to take a percentile from")
        return float(np.quantile(present, q))

    for lane in needed + optional:
        if table.has(lane):
            values = _column(table, lane)
            invalid |= np.isnan(values) | (values < 0) | (values > 1)
            lanes[lane], sources[lane] = values, f"column '{lane}'"
            continue
        built = None
        if lane == "D" and (cols := raw("cos_sim")) is not None:
            used_refs["cos_ref"] = float(refs["cos_ref"])
            built, sources[lane] = lane_d(cols[0], used_refs["cos_ref"]), "cos_sim, cos_ref"
        elif lane == "L" and (cols := raw("lat_ms")) is not None:
            p50 = refs.get("lat_p50")
            p95 = refs.get("lat_p95")
            used_refs["lat_p50"] = float(p50) if p50 is not None else quantile(cols[0], 0.50, "L (lat_ms)")
            used_refs["lat_p95"] = float(p95) if p95 is not None else quantile(cols[0], 0.95, "L (lat_ms)")
            built, sources[lane] = lane_l(cols[0], used_refs["lat_p50"], used_refs["lat_p95"]), "lat_ms, p50, p95"
        elif lane == "E" and (cols := raw("errors", "calls")) is not None:
            built, sources[lane] = lane_e(*cols), "errors, calls"
        elif lane == "V" and (cols := raw("edit_distance", "length")) is not None:
            built, sources[lane] = lane_v(*cols), "edit_distance, length"
        elif lane == "Q" and (cols := raw("queue")) is not None:
            q95 = refs.get("q95")
            used_refs["q95"] = float(q95) if q95 is not None else quantile(cols[0], 0.95, "Q (queue)")
            if used_refs["q95"] <= 0:
                raise InputError(f"input '{table.name}': the queue reference q95 must be > 0 (got {used_refs['q95']})")
            built, sources[lane] = lane_q(cols[0], used_refs["q95"]), "queue, q95"
        if built is None:
            if lane in optional:
                continue
            raw_hint = {"F": "(no raw form)", "D": "or 'cos_sim'", "L": "or 'lat_ms'", "E": "or 'errors' and 'calls'",
                        "V": "or 'edit_distance' and 'length'", "Q": "or 'queue'"}[lane]
            raise InputError(f"input '{table.name}': lane {lane} has weight {params.weights[lane]} but the table has "
                             f"no column '{lane}' {raw_hint}; add the telemetry or give the lane weight 0 "
                             "(preset: custom)")
        invalid |= np.isnan(built)
        lanes[lane] = built
    return lanes, invalid, sources, used_refs


def _streams(table: Table, columns: list[str]) -> np.ndarray:
    if not columns:
        return np.zeros(table.n_rows, dtype=np.intp)
    missing = [c for c in columns if not table.has(c)]
    if missing:
        raise InputError(f"input '{table.name}' has no column(s) {', '.join(missing)} named in 'stream_by'; "
                         "set stream_by: [] to smooth all rows as one stream")
    joined = np.array(["\x1f".join(parts) for parts in zip(*(table.text(c).tolist() for c in columns))], dtype=str)
    return np.unique(joined, return_inverse=True)[1].astype(np.intp)


def _none_if_nan(values: np.ndarray) -> np.ndarray:
    """``values`` with None where NaN (an object array then; the float array itself when nothing is NaN)."""
    missing = np.isnan(values)
    if not missing.any():
        return values
    cells = values.astype(object)
    cells[missing] = None
    return cells


def _lane_rows(table: Table, lanes: Mapping[str, np.ndarray], result: GateResult,
               streams: np.ndarray) -> DecisionColumns:
    """One ``gate_lanes`` ledger row per input row, as columns (lanes a preset does not use are null)."""
    columns = {"row": np.arange(table.n_rows), "stream": streams,
               **{k: _none_if_nan(lanes[k]) for k in LANES if k in lanes}, "mix": _none_if_nan(result.mix),
               "g_inst": _none_if_nan(result.g_inst),
               **({"g_sev": _none_if_nan(result.g_sev)} if result.g_sev is not None else {}),
               "g": result.g, "flag": np.where(result.flagged, _FLAG, None)}
    absent = {k: None for k in (*LANES, "g_sev") if k not in columns}
    return DecisionColumns("gate_lanes", columns, absent)


def run_bakeoff_gate(ctx: StageContext) -> StageOutput:
    table = ctx.table("input")
    if table.n_rows == 0:
        raise InputError(f"input '{table.name}' has no rows")
    params = _params(ctx.knobs)
    lanes, invalid, sources, refs = _lanes(table, params, ctx.knobs["references"])
    streams = _streams(table, list(ctx.knobs["stream_by"]))
    try:
        result = calm_gate(lanes, invalid, streams, params, cold_start=ctx.knobs["cold_start"])
    except ValueError as exc:
        raise StageError(str(exc)) from None
    flagged_rows = np.flatnonzero(result.flagged)
    g_ok = result.g[~result.flagged]
    outputs = {
        "input": ctx.knobs["input"], "table_sha256": table.sha256, "n_rows": table.n_rows,
        "preset": ctx.knobs["preset"], "params": params.as_dict(), "mode": params.mode,
        "cold_start": ctx.knobs["cold_start"], "stream_by": list(ctx.knobs["stream_by"]),
        "lanes": sources, "references": refs,
        "summary": {"flagged": int(flagged_rows.size), "flag": _FLAG,
                    "g_mean": float(np.mean(g_ok)) if g_ok.size else None,
                    "g_min": float(np.min(g_ok)) if g_ok.size else None,
                    "g_max": float(np.max(g_ok)) if g_ok.size else None},
        "g": result.g,
        "flagged_rows": flagged_rows,
    }
    per_decision = ctx.knobs["ledger_rows"] == "per_decision"
    decisions = DecisionParts([_lane_rows(table, lanes, result, streams)] if per_decision else [])
    return StageOutput(outputs=outputs, decisions=decisions)


STAGE = StageType(
    name="bakeoff.gate",
    version="1.0.0",
    input_knobs=("input",),
    run=run_bakeoff_gate,
    summary="Calm gate g per decision from telemetry lanes F, D, L, E, V, Q (weighted mix, safety notch, "
            "smoothing; presets A/B/C), for bakeoff.compare's gate.from.",
)

STAGES = (STAGE,)
"""Every version of this stage type (one so far)."""
