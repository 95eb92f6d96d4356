"""The calm gate g ∈ [0, 1] per decision from telemetry lanes (seed 002's SSM-AI Section 4.1/4.2, App. A).

Lanes, each normalised to [0, 1] (seed 002, Section 4.1 and Appendix A2):

    F  contradiction / policy-violation fraction (given)
    D  clamp((1 − cos_sim) / max(1 − cos_ref, 1e-12))
    L  clamp((lat − p50) / max(p95 − p50, 1e-12))
    E  clamp(errors / max(calls, 1))
    V  clamp(edit_distance / max(length, 1))
    Q  clamp(queue / q95)

    mix    = Σ_k w_k·lane_k / max(Σ_k w_k, eps_g)
    g_inst = clamp(1 − mix, 0, 1)
    notch (optional): sev = max(F, D, E), g_sev = clamp(1 − (sev − s_thr) / max(1 − s_thr, eps_g), 0, 1),
                      g_inst = min(g_inst, g_sev)
    smoothing per stream: g_t = clamp(max(g_min, (1 − rho)·g_{t−1} + rho·g_inst_t), 0, 1)

with the cold start g_0 := g_inst_1 (as in the seed's A3 vectors; ``one`` gives the pseudocode's
g_0 := 1). A row whose lanes are missing, NaN or out of range gets g = 1 and a flag
(``LANE_MISSING_TELEMETRY``, seed 4.1/E7) and leaves its stream's smoother untouched.

The smoothing recursion is evaluated without a loop over rows: each step is the map
g ↦ max(c, a·g + b) with a = 1 − rho, b = rho·g_inst, c = g_min, and such maps (a ≥ 0) are closed
under composition — max(c₂, a₂·max(c₁, a₁g + b₁) + b₂) = max(max(c₂, a₂c₁ + b₂), a₂a₁g + a₂b₁ + b₂) —
so every g_t is a prefix composition, computed by a Hillis–Steele scan in ⌈log2 n⌉ vectorised steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LANES", "GateParams", "PRESETS", "GateResult", "lane_d", "lane_l", "lane_e", "lane_v", "lane_q",
           "lanes_mix", "smooth_gate", "calm_gate"]

LANES: tuple[str, ...] = ("F", "D", "L", "E", "V", "Q")
_SEVERITY_LANES = ("F", "D", "E")
_NO_FLOOR = -1.0  # below every g in [0, 1]: max(-1, a·g + b) is the identity floor


@dataclass(frozen=True)
class GateParams:
    """Gate parameters (seed Appendix A1); ``weights`` maps each lane to its weight in the mix."""

    mode: str
    rho: float
    g_min: float
    weights: Mapping[str, float]
    notch: bool = False
    s_thr: float = 0.80
    eps_g: float = 1e-12

    def __post_init__(self) -> None:
        if self.mode not in ("mul", "u_scale"):
            raise ValueError(f"gate mode must be 'mul' or 'u_scale' (got {self.mode!r})")
        if not 0 < self.rho <= 1:
            raise ValueError(f"rho must be in (0, 1] (got {self.rho})")
        if not 0 <= self.g_min <= 1:
            raise ValueError(f"g_min must be in [0, 1] (got {self.g_min})")
        if not 0 <= self.s_thr < 1:
            raise ValueError(f"s_thr must be in [0, 1) (got {self.s_thr})")
        unknown = sorted(set(self.weights) - set(LANES))
        if unknown or any(w < 0 for w in self.weights.values()):
            raise ValueError(f"lane weights must be >= 0 for lanes {LANES} (got {dict(self.weights)})")

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "rho": self.rho, "g_min": self.g_min,
                "weights": {k: float(self.weights.get(k, 0.0)) for k in LANES},
                "notch": self.notch, "s_thr": self.s_thr, "eps_g": self.eps_g}


def _weights(*values: float) -> dict[str, float]:
    return dict(zip(LANES, values))


PRESETS: dict[str, GateParams] = {
    "A": GateParams(mode="mul", rho=0.20, g_min=0.0, weights=_weights(1, 1, 1, 1, 1, 0), notch=False),
    "B": GateParams(mode="mul", rho=0.30, g_min=0.20, weights=_weights(1.5, 1, 1, 1.5, 0.5, 0.5), notch=True,
                    s_thr=0.80),
    "C": GateParams(mode="u_scale", rho=0.50, g_min=0.10, weights=_weights(1.5, 1, 1.5, 1.5, 0.5, 0.5),
                    notch=True, s_thr=0.70),
}
"""Seed Appendix A1 presets: A "Steady", B "Safety-first", C "Incident"."""


@dataclass(frozen=True)
class GateResult:
    """Per-row gate values; ``g`` is 1 where ``flagged``."""

    g: np.ndarray
    g_inst: np.ndarray
    g_sev: np.ndarray | None
    mix: np.ndarray
    flagged: np.ndarray
    lanes: Mapping[str, np.ndarray] = field(default_factory=dict)


def _clamp01(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.0, 1.0)  # NaN stays NaN (missing telemetry)


def lane_d(cos_sim: np.ndarray, cos_ref: float) -> np.ndarray:
    """D = clamp((1 − cos_sim) / max(1 − cos_ref, 1e-12)): drift from the reference answer."""
    return _clamp01((1.0 - cos_sim) / max(1.0 - cos_ref, 1e-12))


def lane_l(lat_ms: np.ndarray, p50: float, p95: float) -> np.ndarray:
    """L = clamp((lat − p50) / max(p95 − p50, 1e-12)): latency above its median, in p50→p95 units."""
    return _clamp01((lat_ms - p50) / max(p95 - p50, 1e-12))


def lane_e(errors: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """E = clamp(errors / max(calls, 1)): tool/call error rate."""
    return _clamp01(errors / np.maximum(calls, 1.0))


def lane_v(edit_distance: np.ndarray, length: np.ndarray) -> np.ndarray:
    """V = clamp(edit_distance / max(length, 1)): volatility of the answer."""
    return _clamp01(edit_distance / np.maximum(length, 1.0))


def lane_q(queue: np.ndarray, q95: float) -> np.ndarray:
    """Q = clamp(queue / q95): queue pressure."""
    return _clamp01(queue / q95)


def lanes_mix(lanes: Mapping[str, np.ndarray], params: GateParams) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(g_inst, g_sev or None, mix) from normalised lanes; lanes with weight 0 may be absent.

    Rows with a NaN in a used lane give NaN (the caller flags them).
    """
    used = [k for k in LANES if params.weights.get(k, 0.0) > 0]
    n = len(next(iter(lanes.values()))) if lanes else 0
    total = sum(params.weights[k] for k in used)
    mix = np.zeros(n)
    for k in used:
        mix = mix + params.weights[k] * lanes[k]
    mix = mix / max(total, params.eps_g)
    g_inst = np.clip(1.0 - mix, 0.0, 1.0)
    g_sev = None
    if params.notch:
        severity_lanes = [lanes[k] for k in _SEVERITY_LANES if k in lanes]
        if not severity_lanes:
            raise ValueError("the safety notch needs at least one of the lanes F, D, E")
        sev = np.max(np.vstack(severity_lanes), axis=0)
        g_sev = np.clip(1.0 - (sev - params.s_thr) / max(1.0 - params.s_thr, params.eps_g), 0.0, 1.0)
        g_inst = np.minimum(g_inst, g_sev)
    return g_inst, g_sev, mix


def smooth_gate(g_inst: np.ndarray, streams: np.ndarray, skip: np.ndarray, *, rho: float, g_min: float,
                cold_start: str = "g_inst") -> np.ndarray:
    """g_t = max(g_min, (1 − rho)·g_{t−1} + rho·g_inst_t) per stream in row order; rows in ``skip`` are
    passed over (their own value is returned as NaN). Cold start ``g_inst`` (g_0 := g_inst_1) or ``one``."""
    if cold_start not in ("g_inst", "one"):
        raise ValueError(f"cold_start must be 'g_inst' or 'one' (got {cold_start!r})")
    n = len(g_inst)
    out = np.full(n, np.nan)
    if n == 0:
        return out
    order = np.argsort(streams, kind="stable")
    x = np.asarray(g_inst, dtype=np.float64)[order]
    s = np.asarray(streams)[order]
    active = ~np.asarray(skip, dtype=bool)[order]
    a = np.where(active, 1.0 - rho, 1.0)
    b = np.where(active, rho * x, 0.0)
    c = np.where(active, g_min, _NO_FLOOR)
    # the first active row of each stream starts it: a constant map
    active_idx = np.flatnonzero(active)
    if active_idx.size:
        starts = np.ones(active_idx.size, dtype=bool)
        starts[1:] = s[active_idx[1:]] != s[active_idx[:-1]]
        start_rows = active_idx[starts]
        previous = x[start_rows] if cold_start == "g_inst" else 1.0
        a[start_rows] = 0.0
        b[start_rows] = np.maximum(g_min, (1.0 - rho) * previous + rho * x[start_rows])
        c[start_rows] = g_min
    step = 1
    while step < n:
        a_prev, b_prev, c_prev = a[:-step], b[:-step], c[:-step]
        a_cur, b_cur, c_cur = a[step:], b[step:], c[step:]
        c_new = np.maximum(c_cur, a_cur * c_prev + b_cur)
        b_new = a_cur * b_prev + b_cur
        a_new = a_cur * a_prev
        a = np.concatenate([a[:step], a_new])
        b = np.concatenate([b[:step], b_new])
        c = np.concatenate([c[:step], c_new])
        step *= 2
    # every active prefix now contains its stream's constant start map: F(g) = max(c, b)
    smoothed = np.clip(np.maximum(c, b), 0.0, 1.0)
    smoothed[~active] = np.nan
    out[order] = smoothed
    return out


def calm_gate(lanes: Mapping[str, np.ndarray], invalid: np.ndarray, streams: np.ndarray, params: GateParams, *,
              cold_start: str = "g_inst") -> GateResult:
    """g per row from normalised lanes. ``invalid`` marks rows with missing/out-of-range telemetry."""
    g_inst, g_sev, mix = lanes_mix(lanes, params)
    flagged = np.asarray(invalid, dtype=bool) | ~np.isfinite(g_inst)
    smoothed = smooth_gate(np.where(flagged, 0.0, g_inst), streams, flagged, rho=params.rho, g_min=params.g_min,
                           cold_start=cold_start)
    g = np.where(flagged, 1.0, smoothed)
    return GateResult(g=g, g_inst=g_inst, g_sev=g_sev, mix=mix, flagged=flagged, lanes=dict(lanes))
