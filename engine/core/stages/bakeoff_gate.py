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

From 1.1.0 the stage also records what it did to the data: the flagged rows, with their count per lane
(``lane_fallback``, a warning), and every telemetry column of a lane the parameters leave unused
(``unused_column``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.stats.bakeoff.calm_gate import (LANES, PRESETS, GateParams, GateResult, calm_gate, lane_d, lane_e, lane_l,
                                  lane_q, lane_v)
from certa.engine.core.tables import Table
from certa.engine.core.stages.bakeoff import refuse_if_aborted
from certa.engine.core.stages.base import Decision, DecisionColumns, DecisionParts, StageContext, StageOutput, StageType
from certa.engine.core.stages.unused_columns import unused_column_decisions

__all__ = ["STAGE", "STAGES", "VERSIONS", "GateVersion"]

_FLAG = "LANE_MISSING_TELEMETRY"

_LANE_COLUMNS = {"F": ("F",), "D": ("D", "cos_sim"), "L": ("L", "lat_ms"), "E": ("E", "errors", "calls"),
                 "V": ("V", "edit_distance", "length"), "Q": ("Q", "queue")}
"""The columns each lane is read from: its own, then the raw telemetry it is derived from."""


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


def _read_lanes(params: GateParams) -> list[str]:
    """The lanes a gate reads: those of positive weight, then F, D, E when only the notch uses them."""
    needed = [k for k in LANES if params.weights.get(k, 0.0) > 0]
    return needed + [k for k in ("F", "D", "E") if params.notch and k not in needed]


@dataclass(frozen=True)
class LaneChecks:
    """Per lane read, the rows whose telemetry is missing (empty or NaN) and those whose telemetry lies out
    of range (an own lane column outside [0, 1], a negative raw count or latency)."""

    missing: dict[str, np.ndarray]
    outside: dict[str, np.ndarray]

    def invalid(self, n: int) -> np.ndarray:
        """The rows invalid in any lane: they get g = 1 and the flag (seed E7)."""
        return np.logical_or.reduce([np.zeros(n, dtype=bool), *self.missing.values(), *self.outside.values()])


def _lanes(table: Table, params: GateParams, refs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], LaneChecks,
                                                                             dict[str, str], dict[str, float]]:
    """Normalised lanes, each lane's missing and out-of-range rows, each lane's source, and the references
    used."""
    n = table.n_rows
    checks = LaneChecks(missing={}, outside={})
    lanes: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    used_refs: dict[str, float] = {}

    def raw(lane: str, *names: str) -> list[np.ndarray] | None:
        if not all(table.has(c) for c in names):
            return None
        cols = [_column(table, c) for c in names]
        checks.missing[lane] = np.logical_or.reduce([np.isnan(values) for values in cols])
        checks.outside[lane] = np.logical_or.reduce([np.zeros(n, dtype=bool)] + [
            values < 0 for c, values in zip(names, cols) if c != "cos_sim"])
        return cols

    def quantile(values: np.ndarray, q: float, label: str) -> float:
        present = values[~np.isnan(values)]
        if present.size == 0:
            raise InputError(f"input '{table.name}': column for {label} has no values to take a percentile from")
        return float(np.quantile(present, q))

    for lane in _read_lanes(params):
        if table.has(lane):
            values = _column(table, lane)
            checks.missing[lane], checks.outside[lane] = np.isnan(values), (values < 0) | (values > 1)
            lanes[lane], sources[lane] = values, f"column '{lane}'"
            continue
        built = None
        if lane == "D" and (cols := raw(lane, "cos_sim")) is not None:
            used_refs["cos_ref"] = float(refs["cos_ref"])
            built, sources[lane] = lane_d(cols[0], used_refs["cos_ref"]), "cos_sim, cos_ref"
        elif lane == "L" and (cols := raw(lane, "lat_ms")) is not None:
            p50 = refs.get("lat_p50")
            p95 = refs.get("lat_p95")
            used_refs["lat_p50"] = float(p50) if p50 is not None else quantile(cols[0], 0.50, "L (lat_ms)")
            used_refs["lat_p95"] = float(p95) if p95 is not None else quantile(cols[0], 0.95, "L (lat_ms)")
            built, sources[lane] = lane_l(cols[0], used_refs["lat_p50"], used_refs["lat_p95"]), "lat_ms, p50, p95"
        elif lane == "E" and (cols := raw(lane, "errors", "calls")) is not None:
            built, sources[lane] = lane_e(*cols), "errors, calls"
        elif lane == "V" and (cols := raw(lane, "edit_distance", "length")) is not None:
            built, sources[lane] = lane_v(*cols), "edit_distance, length"
        elif lane == "Q" and (cols := raw(lane, "queue")) is not None:
            q95 = refs.get("q95")
            used_refs["q95"] = float(q95) if q95 is not None else quantile(cols[0], 0.95, "Q (queue)")
            if used_refs["q95"] <= 0:
                raise InputError(f"input '{table.name}': the queue reference q95 must be > 0 (got {used_refs['q95']})")
            built, sources[lane] = lane_q(cols[0], used_refs["q95"]), "queue, q95"
        if built is None:
            if params.weights.get(lane, 0.0) <= 0:  # read for the notch only
                continue
            raw_hint = {"F": "(no raw form)", "D": "or 'cos_sim'", "L": "or 'lat_ms'", "E": "or 'errors' and 'calls'",
                        "V": "or 'edit_distance' and 'length'", "Q": "or 'queue'"}[lane]
            raise InputError(f"input '{table.name}': lane {lane} has weight {params.weights[lane]} but the table has "
                             f"no column '{lane}' {raw_hint}; add the telemetry or give the lane weight 0 "
                             "(preset: custom)")
        checks.missing[lane] |= np.isnan(built)
        lanes[lane] = built
    return lanes, checks, sources, used_refs


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


def _no_decisions(table: Table, params: GateParams, checks: LaneChecks, flagged: np.ndarray,
                  profile: str) -> tuple[Decision, ...]:
    """1.0.0 records nothing beyond the per-row ``gate_lanes``."""
    return ()


def _unused_lane_columns(params: GateParams) -> dict[str, str]:
    """Telemetry columns of the lanes this gate does not read -> the knob setting that would read them."""
    read = set(_read_lanes(params))
    return {column: f"params.weights.{lane} > 0 (preset: custom)"
            for lane, columns in _LANE_COLUMNS.items() if lane not in read for column in columns}


def _lane_fallback(table: Table, checks: LaneChecks, flagged: np.ndarray, profile: str) -> tuple[Decision, ...]:
    """Rows given g = 1 and ``LANE_MISSING_TELEMETRY`` (seed E7): one ``lane_fallback`` decision with their
    count, the first, and per lane the rows whose telemetry is missing and those out of range. Out-of-range
    telemetry is a logging error, not missing telemetry: profiles ``ci`` and ``release`` refuse it."""
    if not flagged.any():
        return ()
    rows, first = int(np.count_nonzero(flagged)), int(np.flatnonzero(flagged)[0]) + 1
    by_lane = {lane: {"missing": int(np.count_nonzero(checks.missing[lane])),
                      "out_of_range": int(np.count_nonzero(checks.outside[lane]))} for lane in checks.missing}
    by_lane = {lane: counts for lane, counts in by_lane.items() if counts["missing"] or counts["out_of_range"]}
    outside = sum(counts["out_of_range"] for counts in by_lane.values())
    lanes_text = ", ".join(f"{lane}: {c['missing']} missing, {c['out_of_range']} out of range"
                           for lane, c in by_lane.items())
    found = (f"input '{table.name}': {rows} row(s) have missing or out-of-range telemetry ({lanes_text}; "
             f"first row {first})")
    refuse = profile != "dev" and outside > 0
    message = (f"{found}; profile '{profile}' refuses out-of-range telemetry (lane columns in [0, 1], raw counts "
               "and latencies >= 0): correct it, leave the cells empty (g = 1, flagged) or use profile dev"
               if refuse else
               f"{found}; they get g = 1 and the flag {_FLAG} and do not move their stream's smoother")
    return (Decision("lane_fallback", {"input": table.name, "rows": rows, "first_row": first, "by_lane": by_lane,
                                       "flag": _FLAG, "g_used": 1.0, "outcome": "abort" if refuse else "warn",
                                       "profile": profile, "message": message}),)


def _recorded_decisions(table: Table, params: GateParams, checks: LaneChecks, flagged: np.ndarray,
                        profile: str) -> tuple[Decision, ...]:
    """1.1.0: the unused telemetry columns and the rows that fell back to g = 1 (``ProfileAbort`` when a
    profile refuses them)."""
    return refuse_if_aborted((*unused_column_decisions(table, _unused_lane_columns(params)),
                              *_lane_fallback(table, checks, flagged, profile)))


@dataclass(frozen=True)
class GateVersion:
    """What one version of ``bakeoff.gate`` records beyond its per-row ``gate_lanes`` (g is the same in all)."""

    version: str
    data_decisions: Callable[[Table, GateParams, LaneChecks, np.ndarray, str], tuple[Decision, ...]]
    changes: str


VERSIONS: tuple[GateVersion, ...] = (
    GateVersion("1.0.0", _no_decisions, "first version (certa 0.1.0)"),
    GateVersion("1.1.0", _recorded_decisions,
                "certa 0.6.0: g unchanged; records the rows that fell back to g = 1, with counts per lane "
                "(lane_fallback; ci/release refuse out-of-range telemetry), and the telemetry columns of lanes "
                "it does not read (unused_column)"),
)
"""Every version, oldest first."""


def run_bakeoff_gate(ctx: StageContext, version: GateVersion = VERSIONS[-1]) -> StageOutput:
    table = ctx.table("input")
    if table.n_rows == 0:
        raise InputError(f"input '{table.name}' has no rows")
    params = _params(ctx.knobs)
    lanes, checks, sources, refs = _lanes(table, params, ctx.knobs["references"])
    streams = _streams(table, list(ctx.knobs["stream_by"]))
    try:
        result = calm_gate(lanes, checks.invalid(table.n_rows), streams, params, cold_start=ctx.knobs["cold_start"])
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
    recorded = version.data_decisions(table, params, checks, result.flagged, ctx.profile)
    decisions = DecisionParts([recorded, *([_lane_rows(table, lanes, result, streams)] if per_decision else [])])
    return StageOutput(outputs=outputs, decisions=decisions)


def gate_stage(version: GateVersion) -> StageType:
    """``bakeoff.gate`` at ``version.version``."""
    return StageType(
        name="bakeoff.gate",
        version=version.version,
        input_knobs=("input",),
        run=lambda ctx: run_bakeoff_gate(ctx, version),
        summary="Calm gate g per decision from telemetry lanes F, D, L, E, V, Q (weighted mix, safety notch, "
                "smoothing; presets A/B/C), for bakeoff.compare's gate.from.",
        presentation="certa.engine.services.presentation.stages.bakeoff_gate",
        changes=version.changes,
    )


STAGES = tuple(gate_stage(version) for version in VERSIONS)
"""Every version of this stage type, oldest first."""
STAGE = STAGES[-1]
