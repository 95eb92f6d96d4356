"""Stage ``bakeoff.compare``: vendor bake-off on per-decision bounded scores (seed 002, Appendix E).

Input: one row per decision with ``vendor``, ``rsi`` ∈ (−1, 1) and optionally ``bucket`` (default
``all``), ``w`` (with ``weights: column``), ``g`` (gate value in [0, 1]; a missing, NaN or out-of-range
cell gives g = 1 and flags the row), ``tokens``, ``lat_ms``, ``cost`` (from 1.2.0), ``item_id``, ``req_id``.
Alternatively g comes from an upstream ``bakeoff.gate`` stage (``gate.from``).

Per (bucket, vendor): U, W, U_env and the pools RSI_pool = tanh(U / max(W, eps_w)) and RSI_pool_env,
computed from exact fixed-point sums (``certa.engine.core.stats.bakeoff.pool``); band counts and shares on RSI_env;
median (and mean) tokens and lat_ms beside the index. Per bucket: a ranking with the seed's tie-breaks
(ties reported), a bootstrap interval per vendor and, for every vendor pair, a u-space bootstrap of the
difference of pooled rapidities with the seed's one-tailed ``p_min``, the two-sided p and Holm-adjusted
p-values (``certa.engine.core.stats.bakeoff.pairwise_bootstrap``); and one stamp line ``SSMBO|bucket=…|…|manifest=<knobs_hash>``.

Outputs also carry ``sums``: the mergeable (U, W) sufficient statistics per group, as rows a
``bakeoff.merge`` stage reads back (``certa.engine.core.stages.bakeoff_merge``). Every decision is recorded as one
ledger row (``bakeoff_decision``) unless ``ledger_rows: per_bucket``.

From 1.2.0 (``RecordedReporting``) the stage also records what it did to the data (recognised columns the
knobs leave unused, gate cells replaced by g = 1, clamped scores, zero weights, missing overlay cells: one
decision each, with counts), names the tanh-mapped pair values as display values beside the u-space
difference they map, summarises a ``cost`` column, and states per bucket whether the leader's lead over the
runner-up is significant (``lead``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.foundation.errors import InputError, ProfileAbort, StageError
from certa.engine.core.stats.bakeoff import v1_0_0 as bakeoff_v1_0_0
from certa.engine.core.stats.bakeoff.pairwise_bootstrap import (PairwiseBootstrap, Resampler, is_significant, pairwise_bootstrap,
                                       resampled_weighted_means, significance_level)
from certa.engine.core.stats.bakeoff.pool import (BAND_NAMES, FIXED_POINT_BITS, BandTable, DecisionValues, GroupSums, Hysteresis,
                                  Pools, decision_values, group_means, group_medians, group_sums, half_even,
                                  pools_from_sums, rank_vendors)
from certa.engine.core.tables import Table
from certa.engine.core.stages.base import Decision, DecisionColumns, DecisionParts, StageContext, StageOutput, StageType
from certa.engine.core.stages.unused_columns import unused_column_decisions

__all__ = ["STAGE", "STAGES", "BakeoffKernels", "KERNELS", "Reporting", "RecordedReporting", "BakeoffConfig",
           "config_from_knobs", "frozen_manifest", "run_knobs_hash", "stage_manifest", "bucket_outputs", "sums_rows",
           "one_page_table", "audit_bakeoff", "stamp_line", "format6", "refuse_if_aborted"]

_FORBIDDEN_ID_CHARS = ("|", "=", "\n", "\r")
_INSUFFICIENT = "insufficient_evidence"


# --------------------------------------------------------------------------- versions


def refuse_if_aborted(decisions: tuple[Decision, ...]) -> tuple[Decision, ...]:
    """``decisions``, or ``ProfileAbort`` with the first one whose ``outcome`` is ``abort`` (a profile refused
    the data; every decision is recorded with the abort)."""
    refused = next((d for d in decisions if d.detail.get("outcome") == "abort"), None)
    if refused is not None:
        raise ProfileAbort(refused.detail["message"], rule=refused.kind, decisions=decisions)
    return decisions


class Reporting:
    """What a version records about its handling of the data and states beyond the pooled numbers. This base
    records and adds nothing: versions 1.0.0 and 1.1.0, whose decisions and outputs must not move."""

    extra_overlays: tuple[str, ...] = ()
    """Overlay columns summarised per (bucket, vendor) beside tokens and lat_ms, used by nothing else."""
    bootstrap_text: Mapping[str, str] = {}
    """Descriptions that replace those of the certificate's ``bootstrap`` block."""

    def data_decisions(self, ctx: StageContext, data: _Decisions, config: BakeoffConfig) -> tuple[Decision, ...]:
        """The decisions that record what ``bakeoff.compare`` did to its input (may raise ``ProfileAbort``)."""
        return ()

    def skipped_shards(self, skipped: Sequence[Mapping[str, str]]) -> tuple[Decision, ...]:
        """The decisions that record the batch runs ``bakeoff.merge`` did not take as shards."""
        return ()

    def input_notes(self, decisions: Sequence[Decision]) -> dict[str, Any]:
        """Keys added to the certificate's ``input`` block from those decisions."""
        return {}

    def annotate(self, buckets: dict[str, Any], confidence_level: float | None) -> None:
        """Restate the per-bucket outputs in place (``confidence_level`` None: no bootstrap, a merge)."""


class RecordedReporting(Reporting):
    """1.2.0: a certificate says only what the data support (docs/contributing.md). Every recognised column
    the knobs leave unused, gate cell replaced by g = 1, clamped score, zero weight and missing overlay cell
    is one decision with counts (a warning; ``ci``/``release`` refuse gate values outside [0, 1]); the
    tanh-mapped pair values are named as display values (``display``); a ``cost`` column is summarised; each
    bucket says whether its leader's lead is significant (``lead``); overlays without data are absent."""

    extra_overlays = ("cost",)
    bootstrap_text = {
        "interval": "percentile, linear interpolation (type 7), of the u-space difference diff_u; display: "
                    "diff_tanh = tanh(diff_u), ci_tanh = tanh(ci_u)",
        "p_values": "p_min = min(#(d<=0), #(d>=0))/B (seed, one-tailed); p_two_sided = min(1, 2 p_min); "
                    "p_holm: Holm over the pairs of a bucket; significant: p_holm <= 1 - confidence_level, "
                    "the level computed in rational arithmetic and rounded once",
    }

    def data_decisions(self, ctx: StageContext, data: _Decisions, config: BakeoffConfig) -> tuple[Decision, ...]:
        table, columns = ctx.table("input"), ctx.knobs["columns"]
        decisions = (
            *unused_column_decisions(table, _unused_columns(ctx.knobs)),
            *_gate_fallback(table, columns["g"], data, ctx.profile),
            *_clamped_scores(table, columns["rsi"], data, config.eps_a),
            *(_zero_weights(table, columns["w"], data) if config.weights == "column" else ()),
            *(decision for name, values in data.overlays.items()
              for decision in _missing_overlay(table, columns[name], values, data, name)),
        )
        return refuse_if_aborted(decisions)

    def skipped_shards(self, skipped: Sequence[Mapping[str, str]]) -> tuple[Decision, ...]:
        if not skipped:
            return ()
        message = (f"{len(skipped)} run(s) of the shard batch were not taken as shards: "
                   + "; ".join(f"{s['run_id']} ({s['reason']})" for s in skipped))
        return (Decision("shard_skipped", {"runs": len(skipped), "skipped": [dict(s) for s in skipped],
                                           "message": message}),)

    def input_notes(self, decisions: Sequence[Decision]) -> dict[str, Any]:
        return {"data_notes": [d.detail["message"] for d in decisions if "message" in d.detail]}

    def annotate(self, buckets: dict[str, Any], confidence_level: float | None) -> None:
        for entry in buckets.values():
            for block in entry["vendors"].values():
                _drop_absent_overlays(block)
            if confidence_level is None:
                continue
            for pair in entry.get("pairs", []):
                if "diff_u" in pair:
                    _restate_pair(pair, confidence_level)
            lead = _lead(entry, confidence_level)
            if lead is not None:
                entry["lead"] = lead


_FORMULAS_1_1 = {"atanh": "sign(a) * 0.5 * log1p(2|a| / (1 - |a|)), log1p(z) = z if 1 + z == 1 else "
                          "log(1 + z) * z / ((1 + z) - 1) (Goldberg 1991), float64"}
_RESAMPLING_1_1 = ("vendor v: child v of rng.spawn(vendors); SFC64 on that child's SeedSequence spawn(1)[0]; "
                   "indices as numpy Generator(SFC64).integers(0, n, dtype=uint32) (Lemire, with rejection)")


@dataclass(frozen=True)
class BakeoffKernels:
    """What one version of ``bakeoff.compare``/``bakeoff.merge`` computes with: its per-decision kernel, its
    bootstrap resampler, the formulas its frozen manifest states (hashed into ``frozen_sha256``, so sums
    pooled by one version are refused by another's merge), how it describes its resampling, and what it
    records and states beyond the pooled numbers (``reporting``)."""

    version: str
    decision_values: Callable[..., DecisionValues]
    resample: Resampler
    formulas: Mapping[str, str]
    resampling: str | None
    changes: str
    reporting: Reporting = Reporting()


KERNELS: tuple[BakeoffKernels, ...] = (
    BakeoffKernels(
        version="1.0.0", decision_values=bakeoff_v1_0_0.decision_values,
        resample=bakeoff_v1_0_0.resampled_weighted_means, formulas={}, resampling=None,
        changes="first version (certa 0.1.0): numpy arctanh, numpy PCG64 bootstrap indices"),
    BakeoffKernels(
        version="1.1.0", decision_values=decision_values, resample=resampled_weighted_means,
        formulas=_FORMULAS_1_1, resampling=_RESAMPLING_1_1,
        changes="certa 0.2.0: compiled log1p atanh (pools move in the last bits, CPU-independent); compiled SFC64 "
                "bootstrap (p-values and intervals move by Monte Carlo error)"),
    BakeoffKernels(
        version="1.2.0", decision_values=decision_values, resample=resampled_weighted_means,
        formulas=_FORMULAS_1_1, resampling=_RESAMPLING_1_1, reporting=RecordedReporting(),
        changes="certa 0.6.0: pools, intervals and p-values as 1.1.0; records what it did to the data (unused "
                "columns, g = 1 fallbacks, clamped scores, zero weights, missing overlay cells), refuses gate "
                "values outside [0, 1] under ci/release, names tanh-mapped pair values (display), adds the cost "
                "overlay and each bucket's lead test; alpha = 1 - level exact; overlays without data absent"),
)
"""Every version, oldest first; the last is what an unpinned spec runs. 1.2.0 pools, resamples and hashes its
frozen manifest exactly as 1.1.0, so each merges the other's sums."""


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class BakeoffConfig:
    """The frozen bake-off knobs (seed E1) shared by ``bakeoff.compare`` and ``bakeoff.merge``."""

    eps_a: float
    eps_w: float
    weights: str
    gate_mode: str
    bands: BandTable
    hysteresis: Hysteresis | None
    rank_by: str


def config_from_knobs(knobs: Mapping[str, Any]) -> BakeoffConfig:
    """Check and freeze the shared knobs (schema-validated already; here the cross-field rules)."""
    bands_knob = knobs["bands"]
    try:
        bands = BandTable(a_pp=float(bands_knob["A++"]), a_p=float(bands_knob["A+"]), a_m=float(bands_knob["A-"]),
                          a_mm=float(bands_knob["A--"]))
    except ValueError as exc:
        raise StageError(f"'bands': {exc}") from None
    hysteresis = None
    if knobs.get("hysteresis") is not None:
        h = knobs["hysteresis"]
        hysteresis = Hysteresis(h_up=float(h["h_up"]), h_dn=float(h["h_dn"]))
    return BakeoffConfig(eps_a=float(knobs["eps_a"]), eps_w=float(knobs["eps_w"]), weights=knobs["weights"],
                         gate_mode=knobs["gate"]["mode"], bands=bands, hysteresis=hysteresis,
                         rank_by=knobs["rank_by"])


def _band_rule(bands: BandTable) -> str:
    return (f"A++: x >= {bands.a_pp}; A+: {bands.a_p} <= x < {bands.a_pp}; A0: {bands.a_m} < x < {bands.a_p}; "
            f"A-: {bands.a_mm} < x <= {bands.a_m}; A--: x <= {bands.a_mm}")


def frozen_manifest(config: BakeoffConfig, kernels: BakeoffKernels = KERNELS[-1]) -> dict[str, Any]:
    """The knobs a bake-off freezes (seed E1) and the formulas they feed (``kernels``: the stage version's);
    its hash tags mergeable sums."""
    return {
        "eps_a": config.eps_a,
        "eps_w": config.eps_w,
        "weights": config.weights,
        "gate_mode": config.gate_mode,
        "bands": {"names": list(BAND_NAMES), "edges": config.bands.as_dict(), "rule": _band_rule(config.bands),
                  "band_on": "RSI_env"},
        "hysteresis": None if config.hysteresis is None else {"h_up": config.hysteresis.h_up,
                                                              "h_dn": config.hysteresis.h_dn},
        "u_dec": "w * atanh(clamp(RSI, -1 + eps_a, 1 - eps_a))",
        **kernels.formulas,
        "pool": "tanh(U / max(W, eps_w)); W = 0 -> 0, band A0, insufficient_evidence",
        "accumulator": f"exact sums of per-decision terms rounded to 2^-{FIXED_POINT_BITS}",
    }


def run_knobs_hash(ctx: StageContext) -> tuple[str, str]:
    """The knobs hash stamps carry: the run's (``ctx.seed``), else the stage knobs' own hash; and which."""
    value = ctx.seed.get("knobs_hash") if ctx.seed else None
    if value:
        return str(value), "run"
    return canonical_sha256(dict(ctx.knobs)), "stage_knobs"


def stage_manifest(config: BakeoffConfig, knobs_hash: str, source: str, gate_source: str,
                   kernels: BakeoffKernels) -> dict[str, Any]:
    """The certificate's ``manifest``: the frozen manifest, its ``frozen_sha256``, the knobs hash and sources."""
    frozen = frozen_manifest(config, kernels)
    return {"knobs_hash": knobs_hash, "knobs_hash_source": source, **frozen, "gate_source": gate_source,
            "rounding": "stamps: 6 decimals, half-even on the shortest repr of each float",
            "frozen_sha256": canonical_sha256(frozen)}


# --------------------------------------------------------------------------- input validation


@dataclass(frozen=True)
class _Decisions:
    vendor_ids: tuple[str, ...]
    bucket_ids: tuple[str, ...]
    vendor_code: np.ndarray
    bucket_code: np.ndarray
    rsi: np.ndarray
    w: np.ndarray
    g: np.ndarray
    g_flagged: np.ndarray
    g_cells: np.ndarray | None
    """The g column as read (NaN where missing), when g comes from the input; None otherwise."""
    overlays: Mapping[str, np.ndarray]
    """Overlay columns the input has (tokens, lat_ms and the version's ``extra_overlays``), NaN where missing."""
    gate_source: str

    @property
    def tokens(self) -> np.ndarray | None:
        return self.overlays.get("tokens")

    @property
    def lat_ms(self) -> np.ndarray | None:
        return self.overlays.get("lat_ms")


def _factorize(table: Table, column: str) -> tuple[tuple[str, ...], np.ndarray]:
    ids, codes = table.factorize(column)
    for k, label in enumerate(ids):
        if label == "" or any(ch in label for ch in _FORBIDDEN_ID_CHARS):
            row = int(np.flatnonzero(codes == k)[0])
            raise InputError(f"input '{table.name}', column '{column}', row {row + 1}: id {label!r} must be non-empty "
                             "and contain no '|', '=' or line break (ids appear in stamp lines)")
    return ids, codes


def _optional_numeric(table: Table, column: str) -> np.ndarray | None:
    if not table.has(column):
        return None
    values = table.numeric(column, allow_missing=True)
    bad = np.flatnonzero(values < 0)
    if bad.size:
        raise InputError(f"input '{table.name}', column '{column}', row {bad[0] + 1}: must be >= 0 "
                         f"(got {float(values[bad[0]])!r})")
    return values


def _gate_values(ctx: StageContext, table: Table, columns: Mapping[str, str],
                 config: BakeoffConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """(g, flagged, the g cells as read or None, source): from ``gate.from``, the g column, or g = 1."""
    n = table.n_rows
    source_stage = ctx.knobs["gate"].get("from")
    if source_stage:
        upstream = ctx.upstream.get(source_stage)
        if upstream is None or "g" not in upstream:
            raise StageError(f"'gate.from': no earlier bakeoff.gate stage with id '{source_stage}' "
                             f"(earlier stages: {', '.join(ctx.upstream) or 'none'})")
        if upstream.get("mode") != config.gate_mode:
            raise StageError(f"'gate.mode' is {config.gate_mode!r} but gate stage '{source_stage}' computed g for "
                             f"mode {upstream.get('mode')!r}; set gate.mode: {upstream.get('mode')}")
        g = np.asarray(upstream["g"], dtype=np.float64)
        if len(g) != n:
            raise StageError(f"gate stage '{source_stage}' produced {len(g)} gate values but input "
                             f"'{table.name}' has {n} rows; both must describe the same decisions in the same order")
        flagged = np.zeros(n, dtype=bool)
        flagged[np.asarray(upstream.get("flagged_rows", []), dtype=np.intp)] = True
        return g, flagged, None, f"stage '{source_stage}'"
    if table.has(columns["g"]):
        g = table.numeric(columns["g"], allow_missing=True)
        flagged = ~np.isfinite(g) | (g < 0) | (g > 1)
        return np.where(flagged, 1.0, g), flagged, g, f"column '{columns['g']}'"
    return np.ones(n), np.zeros(n, dtype=bool), None, "none (g = 1)"


def _load_decisions(ctx: StageContext, config: BakeoffConfig, extra_overlays: Sequence[str] = ()) -> _Decisions:
    """The stage's ``_iv`` step: columns present, RSI in (−1, 1), weights finite and ≥ 0, ids clean; overlays
    tokens, lat_ms and ``extra_overlays`` ≥ 0 where present."""
    table = ctx.table("input")
    columns = ctx.knobs["columns"]
    if table.n_rows == 0:
        raise InputError(f"input '{table.name}' has no rows")
    vendor_ids, vendor_code = _factorize(table, columns["vendor"])
    if table.has(columns["bucket"]):
        bucket_ids, bucket_code = _factorize(table, columns["bucket"])
    else:
        bucket_ids, bucket_code = ("all",), np.zeros(table.n_rows, dtype=np.intp)
    rsi = table.numeric(columns["rsi"])
    outside = np.flatnonzero(np.abs(rsi) >= 1)
    if outside.size:
        row = int(outside[0])
        raise InputError(f"input '{table.name}', column '{columns['rsi']}', row {row + 1}: RSI must lie in (-1, 1) "
                         f"(got {float(rsi[row])!r}; {outside.size} such row(s)); the index is bounded, "
                         "|RSI| >= 1 is a logging error")
    if config.weights == "column":
        w = table.numeric(columns["w"])
        bad = np.flatnonzero((w < 0) | (w > 1e15))
        if bad.size:
            row = int(bad[0])
            raise InputError(f"input '{table.name}', column '{columns['w']}', row {row + 1}: weights must be in "
                             f"[0, 1e15] (got {float(w[row])!r})")
    else:
        w = np.ones(table.n_rows)
    g, flagged, g_cells, gate_source = _gate_values(ctx, table, columns, config)
    overlays = {name: _optional_numeric(table, columns[name]) for name in ("tokens", "lat_ms", *extra_overlays)}
    return _Decisions(vendor_ids=vendor_ids, bucket_ids=bucket_ids, vendor_code=vendor_code, bucket_code=bucket_code,
                      rsi=rsi, w=w, g=g, g_flagged=flagged, g_cells=g_cells,
                      overlays={name: values for name, values in overlays.items() if values is not None},
                      gate_source=gate_source)


def _requested_pairs(knob: Sequence[Sequence[str]] | None, vendor_ids: Sequence[str]) -> list[tuple[str, str]]:
    if knob is None:
        return list(itertools.combinations(vendor_ids, 2))
    known = set(vendor_ids)
    pairs = []
    for i, pair in enumerate(knob):
        a, b = pair
        for vendor in (a, b):
            if vendor not in known:
                raise StageError(f"'pairs[{i}]': unknown vendor {vendor!r}; vendors in the data: "
                                 f"{', '.join(vendor_ids)}")
        if a == b:
            raise StageError(f"'pairs[{i}]': a vendor cannot be compared with itself ({a!r})")
        pairs.append((a, b))
    return pairs


# --------------------------------------------------------------------------- what 1.2.0 records about the data

_OVERLAY_ROLE = {"tokens": "and ranks as worst on the tokens tie-break",
                 "lat_ms": "and ranks as worst on the lat_ms tie-break",
                 "cost": "(cost is used by nothing else)"}
"""The overlays a vendor block summarises, and what a vendor without values is on each."""


def _unused_columns(knobs: Mapping[str, Any]) -> dict[str, str]:
    """Recognised columns the knobs leave unused -> the knob setting that would use each."""
    columns, unused = knobs["columns"], {}
    if knobs["weights"] != "column":
        unused[columns["w"]] = "weights: column"
    if knobs["gate"].get("from"):
        unused[columns["g"]] = "gate.from: null"
    return unused


def _rows(mask: np.ndarray, data: _Decisions) -> dict[str, Any]:
    """How many rows ``mask`` selects, the first (numbered from 1, as errors number rows) and the count per
    vendor (vendors with none left out)."""
    rows = np.flatnonzero(mask)
    per_vendor = np.bincount(data.vendor_code[rows], minlength=len(data.vendor_ids)).tolist()
    return {"rows": int(rows.size), "first_row": int(rows[0]) + 1,
            "by_vendor": {vendor: count for vendor, count in zip(data.vendor_ids, per_vendor) if count}}


def _span(values: np.ndarray) -> dict[str, float]:
    """The smallest and largest of (finite) ``values``, as Python floats."""
    return {"smallest": float(np.min(values)), "largest": float(np.max(values))}


def _gate_fallback(table: Table, column: str, data: _Decisions, profile: str) -> tuple[Decision, ...]:
    """Gate cells missing, NaN or outside [0, 1], replaced by g = 1 (seed E7: missing telemetry means g = 1):
    one ``gate_fallback`` decision; ``ci``/``release`` refuse values outside [0, 1] (a logging error, not
    missing telemetry)."""
    g = data.g_cells
    if g is None or not data.g_flagged.any():
        return ()
    missing = ~np.isfinite(g)
    below, above = (g < 0) & ~missing, (g > 1) & ~missing
    outside = g[below | above]
    counts = {"missing": int(np.count_nonzero(missing)), "below_0": int(np.count_nonzero(below)),
              "above_1": int(np.count_nonzero(above))}
    detail = {"input": table.name, "column": column, **_rows(data.g_flagged, data), **counts,
              **(_span(outside) if outside.size else {}), "g_used": 1.0}
    refuse = profile != "dev" and outside.size > 0
    found = (f"{detail['rows']} row(s) have no gate value in [0, 1] ({counts['missing']} missing or not finite, "
             f"{counts['below_0']} below 0, {counts['above_1']} above 1"
             + (f"; smallest {detail['smallest']!r}, largest {detail['largest']!r}" if outside.size else "")
             + f"; first row {detail['first_row']})")
    if refuse:
        message = (f"input '{table.name}', column '{column}': {found}; profile '{profile}' refuses gate values "
                   "outside [0, 1]: correct them, leave the cells empty (g = 1, flagged) or use profile dev")
    else:
        message = (f"input '{table.name}', column '{column}': {found}; g = 1 was used for them and they are "
                   "flagged (g_flagged), so their gated scores equal their ungated ones")
    return (Decision("gate_fallback", {**detail, "outcome": "abort" if refuse else "warn", "profile": profile,
                                       "message": message}),)


def _clamped_scores(table: Table, column: str, data: _Decisions, eps_a: float) -> tuple[Decision, ...]:
    """Scores moved by the clamp a = clamp(RSI, −1 + eps_a, 1 − eps_a) before atanh (seed 2.1): one
    ``rsi_clamped`` decision with their count and range."""
    clamped = (data.rsi > 1.0 - eps_a) | (data.rsi < -1.0 + eps_a)
    if not clamped.any():
        return ()
    detail = {"input": table.name, "column": column, "eps_a": eps_a, **_rows(clamped, data),
              **_span(data.rsi[clamped])}
    message = (f"input '{table.name}', column '{column}': {detail['rows']} score(s) lie within eps_a = {eps_a!r} "
               f"of -1 or 1 (smallest {detail['smallest']!r}, largest {detail['largest']!r}; first row "
               f"{detail['first_row']}) and were clamped to -1 + eps_a or 1 - eps_a before atanh, which caps their "
               f"rapidity at {math.atanh(1.0 - eps_a):.4f} in magnitude; a smaller eps_a keeps more of them")
    return (Decision("rsi_clamped", {**detail, "outcome": "warn", "message": message}),)


def _zero_weights(table: Table, column: str, data: _Decisions) -> tuple[Decision, ...]:
    """Rows of weight 0 (``weights: column``): counted in n and the band counts, absent from U, W, the pools
    and the bootstrap statistic. One ``zero_weight`` decision."""
    zero = data.w == 0
    if not zero.any():
        return ()
    detail = {"input": table.name, "column": column, **_rows(zero, data)}
    message = (f"input '{table.name}', column '{column}': {detail['rows']} row(s) have weight 0 (first row "
               f"{detail['first_row']}); they count in n and in the band counts but not in U, W, the pools or "
               "the bootstrap")
    return (Decision("zero_weight", {**detail, "outcome": "warn", "message": message}),)


def _missing_overlay(table: Table, column: str, values: np.ndarray, data: _Decisions,
                     overlay: str) -> tuple[Decision, ...]:
    """Overlay cells that are missing: left out of the median and mean. One ``overlay_missing`` decision."""
    missing = np.isnan(values)
    if not missing.any():
        return ()
    detail = {"input": table.name, "column": column, "overlay": overlay, **_rows(missing, data)}
    message = (f"input '{table.name}', column '{column}': {detail['rows']} row(s) have no {overlay} value (first "
               f"row {detail['first_row']}); the {overlay} median and mean use the rows that have one, and a "
               f"vendor with none in a bucket has no {overlay} summary there {_OVERLAY_ROLE[overlay]}")
    return (Decision("overlay_missing", {**detail, "outcome": "warn", "message": message}),)


_OVERLAY_KEYS = frozenset(f"{overlay}_{summary}" for overlay in _OVERLAY_ROLE for summary in ("median", "mean"))

_DISPLAY_NOTE = ("diff_tanh = tanh(diff_u) and ci_tanh = tanh(ci_u): the u-space difference and its percentile "
                 "interval mapped through tanh for display; the interval is for tanh(diff_u), not for diff_rsi "
                 "(RSI_pool_env of a minus that of b), which has no interval")


def _drop_absent_overlays(block: dict[str, Any]) -> None:
    """No claim about data that do not exist: overlay summaries without values are removed, not null."""
    for key in [key for key in block if key in _OVERLAY_KEYS and block[key] is None]:
        del block[key]


def _restate_pair(pair: dict[str, Any], confidence_level: float) -> None:
    """The u-space difference and interval stay the estimand (``diff_u``, ``ci_u``); their tanh images move
    to ``display`` with ``diff_tanh``; ``significant`` is p_holm ≤ α with α = 1 − confidence_level computed
    exactly and rounded once (``is_significant``), where 1.1.0 compared with the float 1 − confidence_level."""
    pair["display"] = {"diff_tanh": math.tanh(pair["diff_u"]), "ci_tanh": pair.pop("ci_tanh"), "note": _DISPLAY_NOTE}
    pair["significant"] = is_significant(pair["p_holm"], confidence_level) and pair["reason"] is None


def _lead(entry: Mapping[str, Any], confidence_level: float) -> dict[str, Any] | None:
    """Whether the leader's lead over the runner-up (rank order) is significant: the pair's Holm-adjusted
    two-sided p against α = 1 − confidence_level (``is_significant``), and Δu = m_leader − m_runner_up > 0.

    None (no ``lead`` block) when there is no single leader, when the ranking is not by RSI_pool_env (the
    bootstrap tests the gated pools only) or when the pair was not tested (``pairs:``)."""
    leader, ranking = entry["leader"], entry["ranking"]
    if leader is None or entry["rank_by"] != "RSI_pool_env" or len(ranking) < 2:
        return None
    runner_up = ranking[1]
    pair = next((p for p in entry.get("pairs", []) if "diff_u" in p and {p["a"], p["b"]} == {leader, runner_up}),
                None)
    if pair is None:
        return None
    diff_u = pair["diff_u"] if pair["a"] == leader else -pair["diff_u"]
    return {"leader": leader, "runner_up": runner_up, "diff_u": diff_u, "p_holm": pair["p_holm"],
            "alpha": float(significance_level(confidence_level)), "significant": pair["significant"] and diff_u > 0,
            "reason": pair["reason"]}


# --------------------------------------------------------------------------- outputs (shared with bakeoff.merge)


def format6(x: float) -> str:
    """6 decimals, half-even on the shortest repr (``certa.engine.core.stats.bakeoff.pool.half_even``)."""
    return format(half_even(x), "f")


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def stamp_line(bucket: str, vendors: Sequence[Mapping[str, Any]], g_mean: float, mode: str, knobs_hash: str) -> str:
    """``SSMBO|bucket=…|<v>.U=…|<v>.W=…|<v>.RSI_pool=…|<v>.U_env=…|<v>.RSI_pool_env=…|…|g=…|mode=…|manifest=…``

    Vendors in id order; every number at 6 decimals, half-even. ``U_env``/``RSI_pool_env`` extend the
    seed's E6 line (which stamps only the ungated pools) so that the gated ranking is stamped too;
    ``g`` is the bucket's mean gate value.
    """
    fields = [f"SSMBO|bucket={bucket}"]
    for v in sorted(vendors, key=lambda item: item["vendor"]):
        name = v["vendor"]
        fields += [f"{name}.U={format6(v['U'])}", f"{name}.W={format6(v['W'])}",
                   f"{name}.RSI_pool={format6(v['RSI_pool'])}", f"{name}.U_env={format6(v['U_env'])}",
                   f"{name}.RSI_pool_env={format6(v['RSI_pool_env'])}"]
    fields += [f"g={format6(g_mean)}", f"mode={mode}", f"manifest={knobs_hash}"]
    return "|".join(fields)


def _shares(counts: Sequence[int]) -> list[float]:
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def bucket_outputs(pools: Pools, config: BakeoffConfig, *, knobs_hash: str, g_sums: GroupSums,
                   medians: Mapping[str, np.ndarray] | None = None,
                   bootstrap: Mapping[str, tuple[PairwiseBootstrap, list[str], list[tuple[str, str]]]] | None = None,
                   requested_pairs: Sequence[tuple[str, str]] = (),
                   extra_overlays: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None) -> dict[str, Any]:
    """The per-bucket output blocks: vendors, ranking, pairs and the stamp line.

    With ``medians`` (compare) the tokens/lat_ms tie-breaks use medians; without (merge) the means.
    ``extra_overlays`` maps an overlay used by nothing else (``cost``) to its (medians, means) per group.
    """
    out: dict[str, Any] = {}
    by_bucket: dict[str, list[int]] = {}
    for i, (bucket, _) in enumerate(pools.keys):
        by_bucket.setdefault(bucket, []).append(i)
    for bucket, rows in by_bucket.items():
        vendors = [pools.keys[i][1] for i in rows]
        overlay = "median" if medians is not None else "mean"
        tokens = [float(medians["tokens"][i]) if medians is not None else float(pools.tokens_mean[i]) for i in rows]
        lat = [float(medians["lat_ms"][i]) if medians is not None else float(pools.lat_ms_mean[i]) for i in rows]
        score = pools.rsi_pool_env if config.rank_by == "RSI_pool_env" else pools.rsi_pool
        ranking = rank_vendors(vendors, [float(score[i]) for i in rows], pools.band_counts[rows], tokens, lat)
        rank_of = {entry.vendor: entry for entry in ranking}
        boot = bootstrap.get(bucket) if bootstrap else None
        intervals = {}
        if boot is not None:
            result, boot_vendors, _ = boot
            intervals = {name: result.vendors[k] for k, name in enumerate(boot_vendors)}
        vendor_blocks: dict[str, Any] = {}
        for k, i in enumerate(rows):
            name = vendors[k]
            counts = [int(c) for c in pools.band_counts[i]]
            block: dict[str, Any] = {
                "vendor": name, "rank": rank_of[name].rank, "tied_with": list(rank_of[name].tied_with),
                "n": int(pools.n[i]), "W": float(pools.W[i]), "U": float(pools.U[i]), "U_env": float(pools.U_env[i]),
                "RSI_pool": float(pools.rsi_pool[i]), "band_pool": BAND_NAMES[pools.band_pool[i]],
                "RSI_pool_env": float(pools.rsi_pool_env[i]), "band_pool_env": BAND_NAMES[pools.band_pool_env[i]],
                "reason": _INSUFFICIENT if pools.insufficient[i] else None,
                "band_counts": counts, "band_shares": _shares(counts),
                "band_counts_ungated": [int(c) for c in pools.band_counts_ungated[i]],
                "g_mean": _finite_or_none(pools.g_mean[i]), "g_flagged": int(g_sums.g_flagged[i]),
                "tokens_mean": _finite_or_none(pools.tokens_mean[i]),
                "lat_ms_mean": _finite_or_none(pools.lat_ms_mean[i]),
            }
            if medians is not None:
                block["tokens_median"] = _finite_or_none(medians["tokens"][i])
                block["lat_ms_median"] = _finite_or_none(medians["lat_ms"][i])
            for overlay, (overlay_medians, overlay_means) in (extra_overlays or {}).items():
                block[f"{overlay}_median"] = _finite_or_none(overlay_medians[i])
                block[f"{overlay}_mean"] = _finite_or_none(overlay_means[i])
            if name in intervals:
                iv = intervals[name]
                block["ci_u"] = [iv.u_low, iv.u_high]
                block["ci_rsi"] = [iv.rsi_low, iv.rsi_high]
            vendor_blocks[name] = block
        order = [entry.vendor for entry in ranking]
        top = ranking[0]
        entry: dict[str, Any] = {
            "bucket": bucket, "ranking": order, "ranks": [e.rank for e in ranking],
            "leader": None if top.tied_with else top.vendor, "tied_at_top": list((top.vendor,) + top.tied_with)
            if top.tied_with else [], "rank_by": config.rank_by, "tie_break_overlay": overlay,
            "vendors": vendor_blocks,
        }
        if boot is not None:
            result, boot_vendors, pair_names = boot
            alpha = 1 - result.confidence_level
            pairs = []
            for comparison, (a, b) in zip(result.pairs, pair_names):
                insufficient = pools.insufficient[rows[vendors.index(a)]] or pools.insufficient[rows[vendors.index(b)]]
                pairs.append({
                    "a": a, "b": b, "diff_u": comparison.diff_u,
                    "diff_rsi": vendor_blocks[a]["RSI_pool_env"] - vendor_blocks[b]["RSI_pool_env"],
                    "ci_u": list(comparison.ci_u), "ci_tanh": list(comparison.ci_tanh),
                    "p_min": comparison.p_min, "p_two_sided": comparison.p_two_sided, "p_holm": comparison.p_holm,
                    "significant": bool(comparison.p_holm <= alpha) and not insufficient,
                    "reason": _INSUFFICIENT if insufficient else None,
                })
            present = set(vendors)
            for a, b in requested_pairs:
                if a not in present or b not in present:
                    pairs.append({"a": a, "b": b, "reason": "vendor_absent_in_bucket"})
            entry["pairs"] = pairs
        flat_g = sum(g_sums.g_fx[i] for i in rows) / (1 << FIXED_POINT_BITS) / max(1, sum(g_sums.n[i] for i in rows))
        entry["g_mean"] = flat_g
        entry["stamp"] = stamp_line(bucket, list(vendor_blocks.values()), flat_g, config.gate_mode, knobs_hash)
        out[bucket] = entry
    return out


def sums_rows(sums: GroupSums, frozen_sha256: str) -> list[dict[str, Any]]:
    """The mergeable sums as flat rows (JSON Lines or CSV) for ``bakeoff.merge``; fixed-point integers as
    decimal strings (units of 2^-56), band counts as ``"A++/A+/A0/A-/A--"`` strings."""
    scale = 1 << FIXED_POINT_BITS
    rows = []
    for i, (bucket, vendor) in enumerate(sums.keys):
        rows.append({
            "bucket": bucket, "vendor": vendor, "n": sums.n[i],
            "W": sums.w_fx[i] / scale, "U": sums.u_fx[i] / scale, "U_env": sums.u_env_fx[i] / scale,
            "W_fx": str(sums.w_fx[i]), "U_fx": str(sums.u_fx[i]), "U_env_fx": str(sums.u_env_fx[i]),
            "g_fx": str(sums.g_fx[i]), "g_flagged": sums.g_flagged[i],
            "band_counts": "/".join(str(c) for c in sums.band_counts[i]),
            "band_counts_ungated": "/".join(str(c) for c in sums.band_counts_ungated[i]),
            "tokens_fx": str(sums.tokens_fx[i]), "tokens_n": sums.tokens_n[i],
            "lat_ms_fx": str(sums.lat_ms_fx[i]), "lat_ms_n": sums.lat_ms_n[i],
            "fixed_point_bits": FIXED_POINT_BITS, "frozen_sha256": frozen_sha256,
        })
    return rows


def one_page_table(buckets: Mapping[str, Any]) -> list[dict[str, Any]]:
    """bucket | vendor | RSI_pool_env | CI | band shares | tokens | lat_ms (| cost), in ranking order (seed E6
    step 10). An overlay is the median, else the mean; a vendor block without the overlay's mean has no cell."""
    table = []
    for bucket, entry in buckets.items():
        for vendor in entry["ranking"]:
            v = entry["vendors"][vendor]
            row = {"bucket": bucket, "vendor": vendor, "rank": v["rank"], "RSI_pool_env": v["RSI_pool_env"],
                   "band_pool_env": v["band_pool_env"], "ci_rsi": v.get("ci_rsi"), "band_shares": v["band_shares"]}
            for overlay in _OVERLAY_ROLE:
                if f"{overlay}_mean" in v:
                    row[overlay] = v.get(f"{overlay}_median", v[f"{overlay}_mean"])
            table.append(row)
    return table


# --------------------------------------------------------------------------- the stage


def _bootstrap_buckets(ctx: StageContext, data: _Decisions, values: DecisionValues, pools: Pools, codes: np.ndarray,
                       pairs: Sequence[tuple[str, str]], config: BakeoffConfig,
                       resample: Resampler) -> dict[str, Any]:
    boot = ctx.knobs["bootstrap"]
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=len(pools.keys))
    starts = np.concatenate([[0], np.cumsum(counts)])
    u_env = values.u_env
    estimates_all = np.where(pools.insufficient, 0.0, pools.U_env / np.maximum(pools.W, config.eps_w))
    weighted = config.weights == "column"
    results: dict[str, Any] = {}
    by_bucket: dict[str, list[int]] = {}
    for i, (bucket, _) in enumerate(pools.keys):
        by_bucket.setdefault(bucket, []).append(i)
    for bucket, groups in by_bucket.items():
        names = [pools.keys[i][1] for i in groups]
        samples = []
        for i in groups:
            rows = order[starts[i]:starts[i + 1]]
            samples.append((u_env[rows], data.w[rows] if weighted else None))
        present = [(a, b) for a, b in pairs if a in names and b in names]
        index_pairs = [(names.index(a), names.index(b)) for a, b in present]
        result = pairwise_bootstrap(samples, index_pairs, replicates=int(boot["replicates"]),
                                    confidence_level=float(ctx.knobs["confidence_level"]), rng=ctx.rng,
                                    eps_w=config.eps_w, estimates=[float(estimates_all[i]) for i in groups],
                                    resample=resample)
        results[bucket] = (result, names, present)
    return results


def run_bakeoff_compare(ctx: StageContext, kernels: BakeoffKernels = KERNELS[-1]) -> StageOutput:
    config = config_from_knobs(ctx.knobs)
    reporting = kernels.reporting
    data = _load_decisions(ctx, config, reporting.extra_overlays)
    shard_only = len(data.vendor_ids) < 2
    if shard_only and not ctx.knobs["allow_single_vendor"]:
        raise StageError(f"a bake-off needs at least 2 vendors (input has {len(data.vendor_ids)}: "
                         f"{', '.join(data.vendor_ids)}); to publish one vendor's shard sums for bakeoff.merge, "
                         "set allow_single_vendor: true")
    data_decisions = reporting.data_decisions(ctx, data, config)
    pairs = _requested_pairs(ctx.knobs.get("pairs"), data.vendor_ids)
    knobs_hash, hash_source = run_knobs_hash(ctx)
    manifest = stage_manifest(config, knobs_hash, hash_source, data.gate_source, kernels)

    n_vendors = len(data.vendor_ids)
    full_code = data.bucket_code * n_vendors + data.vendor_code
    present = np.flatnonzero(np.bincount(full_code, minlength=len(data.bucket_ids) * n_vendors))
    remap = np.full(len(data.bucket_ids) * n_vendors, -1, dtype=np.intp)
    remap[present] = np.arange(present.size)
    codes = remap[full_code]
    keys = [(data.bucket_ids[p // n_vendors], data.vendor_ids[p % n_vendors]) for p in present.tolist()]

    values = kernels.decision_values(data.rsi, data.w, data.g, mode=config.gate_mode, eps_a=config.eps_a, bands=config.bands,
                             hysteresis=config.hysteresis, streams=codes)
    sums = group_sums(keys, codes, values, data.g, data.g_flagged, data.tokens, data.lat_ms)
    pools = pools_from_sums(sums, eps_w=config.eps_w, bands=config.bands)
    nan_column = np.full(len(codes), np.nan)
    medians = {
        "tokens": group_medians(codes, data.tokens if data.tokens is not None else nan_column, len(keys)),
        "lat_ms": group_medians(codes, data.lat_ms if data.lat_ms is not None else nan_column, len(keys)),
    }
    extra = {name: (group_medians(codes, data.overlays[name], len(keys)),
                    group_means(codes, data.overlays[name], len(keys)))
             for name in reporting.extra_overlays if name in data.overlays}
    boot = _bootstrap_buckets(ctx, data, values, pools, codes, pairs, config, kernels.resample)
    buckets = bucket_outputs(pools, config, knobs_hash=knobs_hash, g_sums=sums, medians=medians, bootstrap=boot,
                             requested_pairs=pairs, extra_overlays=extra)
    if shard_only:
        for entry in buckets.values():
            entry["leader"] = None  # nothing was compared: gates on the leader fail closed
    confidence_level = float(ctx.knobs["confidence_level"])
    reporting.annotate(buckets, confidence_level)
    outputs: dict[str, Any] = {
        "manifest": manifest,
        "input": {"name": ctx.knobs["input"], "rows": int(len(codes)), "vendors": list(data.vendor_ids),
                  "buckets": list(data.bucket_ids), "g_flagged": int(np.sum(data.g_flagged)),
                  **reporting.input_notes(data_decisions)},
        "bootstrap": {"replicates": int(ctx.knobs["bootstrap"]["replicates"]),
                      "confidence_level": confidence_level,
                      "statistic": "pooled rapidity sum(w*u_env)/max(sum(w), eps_w) per vendor, resampled "
                                   "independently per vendor; pair difference a - b",
                      **({"resampling": kernels.resampling} if kernels.resampling else {}),
                      "interval": "percentile, linear interpolation (type 7); ci_tanh = tanh(ci_u)",
                      "p_values": "p_min = min(#(d<=0), #(d>=0))/B (seed, one-tailed); "
                                  "p_two_sided = min(1, 2 p_min); p_holm: Holm over the pairs of a bucket",
                      **reporting.bootstrap_text},
        "buckets": buckets,
        "stamps": [entry["stamp"] for entry in buckets.values()],
        "table": one_page_table(buckets),
        "sums": sums_rows(sums, manifest["frozen_sha256"]),
    }
    if shard_only:
        outputs["input"]["single_vendor"] = True
    rows = (_decision_rows(ctx, data, values, knobs_hash),) if ctx.knobs["ledger_rows"] == "per_decision" else ()
    single = ((Decision("single_vendor", {"vendor": data.vendor_ids[0], "note": "pools and sums only; no ranking or "
                                          "comparison (a shard for bakeoff.merge)"}),) if shard_only else ())
    stamps = tuple(Decision("bakeoff_stamp", {"bucket": b, "stamp": e["stamp"]}) for b, e in buckets.items())
    return StageOutput(outputs=outputs, decisions=DecisionParts([single, data_decisions, *rows, stamps]))


def _decision_rows(ctx: StageContext, data: _Decisions, values: DecisionValues, knobs_hash: str) -> DecisionColumns:
    """One ``bakeoff_decision`` ledger row per input row (seed E2), as columns: labels are gathered by code,
    nothing is built per row until the ledger encodes them."""
    seed = str(ctx.seed.get("entropy", "")) if ctx.seed else ""
    table, names = ctx.table("input"), ctx.knobs["columns"]
    ids = {key: table.text(names[key]) for key in ("item_id", "req_id") if table.has(names[key])}  # read only here
    columns = {
        "row": np.arange(len(data.rsi)), "vendor": np.asarray(data.vendor_ids, dtype=object)[data.vendor_code],
        "bucket": np.asarray(data.bucket_ids, dtype=object)[data.bucket_code], "RSI": data.rsi, "w": data.w,
        "g": data.g, "g_flagged": data.g_flagged, "RSI_env": values.rsi_env,
        "band": np.asarray(BAND_NAMES, dtype=object)[values.band], "U_dec": values.u_dec, "W_dec": values.w_dec, **ids,
    }
    absent = {key: None for key in ("item_id", "req_id") if key not in ids}
    return DecisionColumns("bakeoff_decision", columns, {**absent, "seed": seed, "knobs_hash": knobs_hash})


# --------------------------------------------------------------------------------- verify


def audit_bakeoff(outputs: Mapping[str, Any]) -> list[str]:
    """Identities ``certa verify`` re-checks (seed E9/C7): pools = tanh(U / max(W, eps_w)) exactly, every
    value in (−1, 1), bands match their values, p_two_sided = min(1, 2 p_min), ci_tanh = tanh(ci_u) (and
    diff_tanh = tanh(diff_u) from 1.2.0), and every stamp line recomputes from the recorded numbers."""
    problems: list[str] = []
    try:
        manifest = outputs["manifest"]
        eps_w = manifest["eps_w"]
        edges = manifest["bands"]["edges"]
        bands = BandTable(a_pp=edges["A++"], a_p=edges["A+"], a_m=edges["A-"], a_mm=edges["A--"])
        for bucket, entry in outputs["buckets"].items():
            for name, v in entry["vendors"].items():
                where = f"buckets.{bucket}.vendors.{name}"
                for field, u_field in (("RSI_pool", "U"), ("RSI_pool_env", "U_env")):
                    expected = 0.0 if v["W"] == 0 else math.tanh(v[u_field] / max(v["W"], eps_w))
                    if v[field] != expected:
                        problems.append(f"{where}.{field} != tanh({u_field} / max(W, eps_w))")
                    if not -1 < v[field] < 1:
                        problems.append(f"{where}.{field} is outside (-1, 1)")
                    band = "A0" if v["W"] == 0 else BAND_NAMES[int(bands.classify(np.array([v[field]]))[0])]
                    if v["band_pool" if field == "RSI_pool" else "band_pool_env"] != band:
                        problems.append(f"{where}: band of {field} does not match its value")
                if sum(v["band_counts"]) != v["n"]:
                    problems.append(f"{where}.band_counts do not add up to n")
            for p in entry.get("pairs", []):
                if "diff_u" not in p:
                    continue
                if p["p_two_sided"] != min(1.0, 2 * p["p_min"]):
                    problems.append(f"buckets.{bucket}: pair {p['a']}-{p['b']} p_two_sided != min(1, 2 p_min)")
                shown = p.get("display", p)  # the tanh images sit under display from 1.2.0
                if shown["ci_tanh"] != [math.tanh(p["ci_u"][0]), math.tanh(p["ci_u"][1])]:
                    problems.append(f"buckets.{bucket}: pair {p['a']}-{p['b']} ci_tanh != tanh(ci_u)")
                if "diff_tanh" in shown and shown["diff_tanh"] != math.tanh(p["diff_u"]):
                    problems.append(f"buckets.{bucket}: pair {p['a']}-{p['b']} diff_tanh != tanh(diff_u)")
            recomputed = stamp_line(bucket, list(entry["vendors"].values()), entry["g_mean"], manifest["gate_mode"],
                                    manifest["knobs_hash"])
            if recomputed != entry["stamp"]:
                problems.append(f"buckets.{bucket}.stamp does not recompute from the recorded values")
    except (KeyError, TypeError, IndexError, ValueError, ZeroDivisionError) as exc:
        problems.append(f"bake-off outputs are incomplete or malformed ({type(exc).__name__}: {exc})")
    return problems


SUMMARY = ("Vendor bake-off (seed 002): atanh-space pools per bucket and vendor, calm-gated pools, bands, "
           "ranking with tie-breaks, u-space bootstrap significance with Holm, stamped bucket summaries.")


def compare_stage(kernels: BakeoffKernels) -> StageType:
    """``bakeoff.compare`` at ``kernels.version``."""
    return StageType(
        name="bakeoff.compare",
        version=kernels.version,
        input_knobs=("input",),
        run=lambda ctx: run_bakeoff_compare(ctx, kernels),
        summary=SUMMARY,
        presentation="certa.engine.services.presentation.stages.bakeoff",
        audit_checks=audit_bakeoff,
        changes=kernels.changes,
    )


STAGES = tuple(compare_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
