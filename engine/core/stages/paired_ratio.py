"""Stage ``paired.ppl_ratio``: paired perplexity ratio of a subject model against a baseline (seed 001).

Windows are paired by ``window_id``. For pair i with unmasked token count t_i (the subject's) and
per-token mean log-loss ℓ_i in each arm, Δℓ_i = ℓ_i(subject) − ℓ_i(baseline); the estimate is the
token-weighted mean Δ̄ = Σ t_i Δℓ_i / Σ t_i and ``ratio_vs_baseline = exp(Δ̄)`` (the ratio of the two
arms' perplexities on the paired windows when token counts agree). The CI is a paired bootstrap of Δ̄
(BCa by default) and ``display_ci = exp(ci)`` exactly.

Profile rules (each recorded as a decision): ``dev`` warns and uses the matched windows; ``ci`` and
``release`` abort when windows do not all match, spans overlap, token counts or preview/final counts
differ between arms, or windows/replicates fall below the floors (ci 200/1200, release 400/3200).
Nothing is ever silently truncated.

Versions (``KERNELS``, oldest first): each is this module's glue run with a ``PairedRatioKernels`` record of
what differs. 1.0.0 draws numpy PCG64 index blocks (``engine/core/stats/bootstrap/weighted_mean_v1_0_0.py``, frozen); 1.1.0
draws them in a compiled SFC64 loop, one stream per block of 256 replicates, and states its streams in
``bootstrap.resampling`` (``engine/core/stats/bootstrap/weighted_mean.py``). 1.2.0 keeps 1.1.0's numbers and states only what the
data hold (``DataClaims``): without a ``phase`` column there are no preview counts, preview coverage, preview
perplexity or drift block (the keys are absent, not null); without token offsets there is no overlap fraction;
a recognised column the knobs leave unused is an ``unused_column`` decision. 1.3.0 computes on each arm's
windows in the canonical order of their keys (``canonical_order`` of window_id and phase), so a file with its
rows in another order gives the same certificate (1.2.0's numbers when the file is sorted by window_id).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, ProfileAbort, StageError
from certa.engine.core.stats.bootstrap import weighted_mean as bootstrap, weighted_mean_v1_0_0 as bootstrap_v1_0_0
from certa.engine.core.stats.pairing import canonical_order, duplicated_ids, overlap_fraction, pair_windows
from certa.engine.core.tables import Table
from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType
from certa.engine.core.stages.unused_columns import unused_column_decisions

__all__ = ["KERNELS", "PROFILE_FLOORS", "STAGE", "STAGES", "DataClaims", "PairedRatioKernels"]

PROFILE_FLOORS: dict[str, tuple[int, int] | None] = {"dev": None, "ci": (200, 1200), "release": (400, 3200)}
"""(minimum paired windows, minimum bootstrap replicates) per profile."""

PHASES = ("preview", "final")
NOT_CHECKED = "not checked (no start/end offsets)"


@dataclass(frozen=True)
class _Arm:
    ids: np.ndarray
    tokens: np.ndarray
    mean_nll: np.ndarray
    phase: np.ndarray | None
    start: np.ndarray | None
    end: np.ndarray | None
    nll_from: str
    """The column(s) the per-token mean NLL was read from: ``mean_nll``, or ``nll_sum / tokens``."""

    def select(self, phase: str) -> _Arm:
        if self.phase is None:
            return self
        mask = self.phase == phase
        pick = (lambda a: None if a is None else a[mask])
        return _Arm(self.ids[mask], self.tokens[mask], self.mean_nll[mask], None, pick(self.start), pick(self.end),
                    self.nll_from)

    def take(self, index: np.ndarray) -> _Arm:
        """The windows at ``index``, in that order."""
        pick = (lambda a: None if a is None else a[index])
        return _Arm(self.ids[index], self.tokens[index], self.mean_nll[index], pick(self.phase), pick(self.start),
                    pick(self.end), self.nll_from)


def _as_read(arm: _Arm) -> _Arm:
    """1.0.0–1.2.0: the windows in the file's order (the bootstrap and the sums follow it)."""
    return arm


def _in_window_order(arm: _Arm) -> _Arm:
    """1.3.0: the windows in the canonical order of their keys (window_id, then phase), so that a reordered file
    gives the same bootstrap draws and the same floating-point sums."""
    keys = (arm.ids,) if arm.phase is None else (arm.ids, arm.phase)
    return arm.take(canonical_order(*keys))


# --------------------------------------------------------------------------- what a version claims about the data


class _Absent:
    """An output about data the input lacks (``ABSENT``): written as null or left out, as the version does."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


def _absent_as_null(tree: Mapping[str, Any]) -> dict[str, Any]:
    """1.0.0 and 1.1.0: an output about missing data is written as null."""
    return {k: None if v is ABSENT else _absent_as_null(v) if isinstance(v, Mapping) else v for k, v in tree.items()}


def _absent_left_out(tree: Mapping[str, Any]) -> dict[str, Any]:
    """1.2.0: an output about missing data is not written at all (docs/contributing.md: a certificate says only
    what the data support)."""
    return {k: _absent_left_out(v) if isinstance(v, Mapping) else v for k, v in tree.items() if v is not ABSENT}


def _count(arm: _Arm, phase: str) -> int:
    return int(arm.ids.size if arm.phase is None else np.count_nonzero(arm.phase == phase))


def _counts_every_phase(arm: _Arm) -> dict[str, int]:
    """1.0.0 and 1.1.0: preview and final counts; an arm without a phase column counts every window as both."""
    return {p: _count(arm, p) for p in PHASES}


def _counts_of_its_phases(arm: _Arm) -> dict[str, int]:
    """1.2.0: preview and final counts of an arm with a phase column; only ``final`` (every window) without one."""
    return {p: _count(arm, p) for p in (PHASES if arm.phase is not None else ("final",))}


def _overlap_of_both_arms(baseline: _Arm, subject: _Arm) -> tuple[float | None, dict[str, Any]]:
    """1.0.0 and 1.1.0: max of the arms' overlap fractions when both have offsets; else null, "not checked"."""
    if subject.start is None or baseline.start is None:
        return None, {"window_overlap_fraction": None, "overlap_checked": False}
    fraction = max(overlap_fraction(subject.start, subject.end), overlap_fraction(baseline.start, baseline.end))
    return fraction, {"window_overlap_fraction": fraction, "overlap_checked": True}


def _overlap_of_arms_with_offsets(baseline: _Arm, subject: _Arm) -> tuple[float | None, dict[str, Any]]:
    """1.2.0: max of the overlap fractions of the arms that have offsets, naming them; no fraction without any."""
    checked = {name: overlap_fraction(arm.start, arm.end)
               for name, arm in (("baseline", baseline), ("subject", subject)) if arm.start is not None}
    if not checked:
        return None, {"overlap_checked": False}
    fraction = max(checked.values())
    return fraction, {"window_overlap_fraction": fraction, "overlap_checked": True,
                      "overlap_checked_arms": list(checked)}


def _no_input_claims(arms: Mapping[str, tuple[Table, _Arm]],
                     columns: Mapping[str, str]) -> tuple[dict[str, Any], tuple[Decision, ...]]:
    """1.0.0 and 1.1.0 state nothing about the columns they read or leave unused."""
    return {}, ()


def _unused_columns(table: Table, columns: Mapping[str, str], arm: _Arm) -> dict[str, str]:
    """Columns of ``table`` the stage recognises but the knobs leave unused -> the knob setting that would use each.

    A column under its default name (the ``columns`` key itself) that the knobs remap elsewhere; ``nll_sum`` when
    ``mean_nll`` is read (it is read only without a ``mean_nll`` column); a ``start`` without an ``end`` (or the
    reverse), since the overlap check needs both.
    """
    mapped = set(columns.values())
    unused = {key: f"columns.{key}: {key}" for key, name in columns.items() if name != key and key not in mapped}
    if arm.nll_from == columns["mean_nll"]:
        unused[columns["nll_sum"]] = "drop the mean_nll column (nll_sum is read only when there is none)"
    start, end = columns["start"], columns["end"]
    if table.has(start) != table.has(end):
        lone, missing = (start, "end") if table.has(start) else (end, "start")
        unused[lone] = f"add the {missing} offset column (columns.{missing} names it)"
    return unused


def _input_claims(arms: Mapping[str, tuple[Table, _Arm]],
                  columns: Mapping[str, str]) -> tuple[dict[str, Any], tuple[Decision, ...]]:
    """1.2.0: which column each arm's NLL came from (``nll_from``), and an ``unused_column`` decision for each
    recognised column the knobs leave unused (``certa.engine.core.stages.unused_columns``)."""
    decisions = tuple(decision for table, arm in arms.values()
                      for decision in unused_column_decisions(table, _unused_columns(table, columns, arm)))
    return {"nll_from": {name: arm.nll_from for name, (_, arm) in arms.items()}}, decisions


@dataclass(frozen=True)
class DataClaims:
    """How a version states what the input data hold (what 1.2.0 changed; its numbers are 1.1.0's).

    ``counts`` gives one arm's window counts per phase; ``overlap`` the overlap fraction (None: not checked) and
    the ``stats`` entries that state it; ``overlap_unchecked`` is the outcome of the overlap profile rule when no
    offsets were given; ``inputs`` the outputs and decisions about the columns read; ``finish`` writes the outputs
    about data the input lacks (``ABSENT``) as null or leaves them out.
    """

    counts: Callable[[_Arm], dict[str, int]]
    overlap: Callable[[_Arm, _Arm], tuple[float | None, dict[str, Any]]]
    overlap_unchecked: str
    inputs: Callable[[Mapping[str, tuple[Table, _Arm]], Mapping[str, str]],
                     tuple[dict[str, Any], tuple[Decision, ...]]]
    finish: Callable[[Mapping[str, Any]], dict[str, Any]]


NULL_CLAIMS = DataClaims(counts=_counts_every_phase, overlap=_overlap_of_both_arms, overlap_unchecked="pass",
                         inputs=_no_input_claims, finish=_absent_as_null)
"""1.0.0 and 1.1.0: every output key always present, null (or every window counted) where the data lack it."""

TRUE_CLAIMS = DataClaims(counts=_counts_of_its_phases, overlap=_overlap_of_arms_with_offsets,
                         overlap_unchecked="not_checked", inputs=_input_claims, finish=_absent_left_out)
"""1.2.0: only what the data hold."""


# --------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class PairedRatioKernels:
    """What one version of ``paired.ppl_ratio`` computes with: its bootstrap CI (``certa.engine.core.stats.bootstrap.weighted_mean`` or
    the frozen ``bootstrap_v1_0_0``; the point estimates are shared), how its certificate describes the resampling
    of each scheme (None: that version stated nothing beyond the scheme and ``index_streams``), how it states what
    the data hold (``DataClaims``), and what changed."""

    version: str
    bootstrap_ci: Callable[..., Any]
    resampling: Mapping[str, str] | None
    claims: DataClaims
    changes: str
    arm_order: Callable[[_Arm], _Arm] = _as_read
    """The order each arm's windows are computed in: the file's (1.0.0–1.2.0) or their keys' (1.3.0)."""


KERNELS: tuple[PairedRatioKernels, ...] = (
    PairedRatioKernels(
        version="1.0.0", bootstrap_ci=bootstrap_v1_0_0.weighted_mean_bootstrap_ci,
        resampling=None, claims=NULL_CLAIMS,
        changes="first version (certa 0.1.0): numpy PCG64 index blocks on rng.spawn(2), gathered with np.take"),
    PairedRatioKernels(
        version="1.1.0", bootstrap_ci=bootstrap.weighted_mean_bootstrap_ci,
        resampling=bootstrap.RESAMPLING, claims=NULL_CLAIMS,
        changes="certa 0.4.0: compiled SFC64 bootstrap, one stream per block of 256 replicates (Lemire indices "
                "for uniform, Walker alias for token_weighted); CI bounds, z0 and index_streams move by Monte "
                "Carlo error, point estimates and acceleration do not"),
    PairedRatioKernels(
        version="1.2.0", bootstrap_ci=bootstrap.weighted_mean_bootstrap_ci,
        resampling=bootstrap.RESAMPLING, claims=TRUE_CLAIMS,
        changes="certa 0.6.0: states only what the data hold (1.1.0's numbers): without a phase column no preview "
                "counts, preview coverage, preview perplexity or drift (absent, not null); without offsets no "
                "overlap fraction and the overlap rule 'not_checked'; overlap checked in each arm that has offsets "
                "(overlap_checked_arms); nll_from names the NLL column of each arm; unused_column decisions"),
    PairedRatioKernels(
        version="1.3.0", bootstrap_ci=bootstrap.weighted_mean_bootstrap_ci,
        resampling=bootstrap.RESAMPLING, claims=TRUE_CLAIMS, arm_order=_in_window_order,
        changes="issue 30: each arm's windows are taken in the canonical order of their keys (window_id, phase) "
                "before pairing, so the bootstrap draws and the sums no longer depend on the file's row order; "
                "CI bounds and z0 move by Monte Carlo error for files not already sorted by window_id"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


def _load_arm(table: Table, columns: Mapping[str, str]) -> _Arm:
    """Validate and type one arm's window table (the stage's ``_iv`` step)."""
    ids = table.text(columns["window_id"])
    tokens = table.numeric(columns["tokens"])
    if np.any(tokens <= 0) or np.any(tokens != np.round(tokens)):
        row = int(np.flatnonzero((tokens <= 0) | (tokens != np.round(tokens)))[0])
        raise InputError(f"input '{table.name}', column '{columns['tokens']}', row {row + 1}: token counts must be "
                         f"positive integers (got {float(tokens[row]):g}); windows with no unmasked tokens must be "
                         "dropped")
    if table.has(columns["mean_nll"]):
        mean_nll, nll_from = table.numeric(columns["mean_nll"]), columns["mean_nll"]
    elif table.has(columns["nll_sum"]):
        mean_nll = table.numeric(columns["nll_sum"]) / tokens
        nll_from = f"{columns['nll_sum']} / {columns['tokens']}"
    else:
        raise InputError(f"input '{table.name}' needs a '{columns['mean_nll']}' (per-token mean NLL) or "
                         f"'{columns['nll_sum']}' (summed NLL) column")
    phase = None
    if table.has(columns["phase"]):
        phase = table.text(columns["phase"]).astype(str)
        unknown = sorted(set(np.unique(phase).tolist()) - set(PHASES))
        if unknown:
            raise InputError(f"input '{table.name}', column '{columns['phase']}': unknown phase(s) {unknown}; "
                             "use preview or final")
    start = end = None
    if table.has(columns["start"]) and table.has(columns["end"]):
        start, end = table.numeric(columns["start"]), table.numeric(columns["end"])
        if np.any(end <= start):
            raise InputError(f"input '{table.name}': every window needs end > start")
    for name in (PHASES if phase is not None else ("final",)):
        keys = ids if phase is None else ids[phase == name]
        dupes = duplicated_ids(keys)
        if dupes:
            raise InputError(f"input '{table.name}': duplicate window_id(s) {dupes[:5]} in phase '{name}'; "
                             "each window must appear once per phase")
    return _Arm(ids.astype(str), tokens, mean_nll, phase, start, end, nll_from)


def _rule(name: str, ok: bool, value: Any, required: Any, profile: str, strict: bool) -> Decision:
    outcome = "pass" if ok else ("abort" if strict else "warn")
    return Decision("profile_rule", {"rule": name, "value": value, "required": required, "outcome": outcome,
                                     "profile": profile})


def _overlap_rule(overlap: float | None, claims: DataClaims, profile: str, strict: bool) -> Decision:
    """The overlap profile rule: 0 overlapping windows required; without offsets ``claims.overlap_unchecked``."""
    if overlap is None:
        return Decision("profile_rule", {"rule": "window_overlap_fraction", "value": NOT_CHECKED, "required": 0.0,
                                         "outcome": claims.overlap_unchecked, "profile": profile})
    return _rule("window_overlap_fraction", overlap == 0.0, overlap, 0.0, profile, strict)


def _floor_block(used: int, required: int | None) -> dict[str, Any]:
    return {"used": used, "required": required, "ok": required is None or used >= required}


def run_paired_ratio(ctx: StageContext, kernels: PairedRatioKernels = KERNELS[-1]) -> StageOutput:
    knobs = ctx.knobs
    columns = knobs["columns"]
    claims = kernels.claims
    tables = {arm: ctx.table(arm) for arm in ("baseline", "subject")}
    loaded = {arm: (table, kernels.arm_order(_load_arm(table, columns))) for arm, table in tables.items()}
    baseline_all, subject_all = loaded["baseline"][1], loaded["subject"][1]
    baseline, subject = baseline_all.select("final"), subject_all.select("final")
    pairing = pair_windows(baseline.ids, subject.ids)
    if pairing.n_pairs < 2:
        raise StageError(f"only {pairing.n_pairs} window(s) pair by window_id between '{knobs['baseline']}' and "
                         f"'{knobs['subject']}'; a paired ratio needs at least 2")
    bi, si = pairing.baseline_index, pairing.subject_index
    tokens = subject.tokens[si]
    deltas = subject.mean_nll[si] - baseline.mean_nll[bi]
    token_mismatches = int(np.count_nonzero(baseline.tokens[bi] != tokens))
    overlap, overlap_stats = claims.overlap(baseline, subject)
    input_outputs, input_decisions = claims.inputs(loaded, columns)

    decisions = [*input_decisions, Decision("pairing", {
        "paired_windows": pairing.n_pairs, "window_match_fraction": pairing.match_fraction,
        "unmatched_baseline": len(pairing.unmatched_baseline), "unmatched_subject": len(pairing.unmatched_subject),
        "unmatched_examples": list(pairing.unmatched_baseline[:5] + pairing.unmatched_subject[:5]),
        "token_count_mismatches": token_mismatches, "weights": "subject tokens"})]

    floors = PROFILE_FLOORS[ctx.profile]
    strict = floors is not None
    min_windows, min_replicates = floors if floors else (None, None)
    has_phases = subject_all.phase is not None or baseline_all.phase is not None
    counts = {"baseline": claims.counts(baseline_all), "subject": claims.counts(subject_all)}
    previews = min((c["preview"] for c in counts.values() if "preview" in c), default=None)
    rules = [
        _rule("window_match_fraction", pairing.match_fraction == 1.0, pairing.match_fraction, 1.0, ctx.profile, strict),
        _rule("token_counts_match", token_mismatches == 0, token_mismatches, 0, ctx.profile, strict),
        _overlap_rule(overlap, claims, ctx.profile, strict),
        _rule("min_paired_windows", min_windows is None or pairing.n_pairs >= min_windows, pairing.n_pairs,
              min_windows, ctx.profile, strict),
        _rule("min_replicates", min_replicates is None or knobs["replicates"] >= min_replicates, knobs["replicates"],
              min_replicates, ctx.profile, strict),
    ]
    if has_phases:
        same = all(c.get("preview") == c["final"] for c in counts.values())
        rules.append(_rule("preview_final_counts_match", same, counts, "equal per arm", ctx.profile, strict))
        if min_windows is not None:
            rules.append(_rule("min_preview_windows", previews >= min_windows, previews, min_windows, ctx.profile,
                               strict))
    decisions.extend(rules)
    failed = [d.detail["rule"] for d in rules if d.detail["outcome"] == "abort"]
    if failed:
        raise ProfileAbort(f"profile '{ctx.profile}' rule(s) failed: {', '.join(failed)} "
                           "(see the recorded profile_rule decisions; fix the data or use profile dev to explore)",
                           rule=failed[0], decisions=tuple(decisions))

    ci = kernels.bootstrap_ci(deltas, tokens, rng=ctx.rng, replicates=knobs["replicates"],
                              confidence_level=knobs["confidence_level"], method=knobs["method"],
                              scheme=knobs["scheme"])
    if ci.degenerate:
        decisions.append(Decision("degenerate_fallback", {"reason": ci.degenerate_reason, "ci": [ci.low, ci.high]}))
    if ci.fallback:
        decisions.append(Decision("bootstrap_fallback", {"reason": ci.fallback}))

    final_ppl = math.exp(bootstrap.token_weighted_mean(subject.mean_nll[si], tokens))
    baseline_final_ppl = math.exp(bootstrap.token_weighted_mean(baseline.mean_nll[bi], baseline.tokens[bi]))
    preview_ppl: Any = ABSENT
    drift: Any = ABSENT
    if subject_all.phase is not None and counts["subject"]["preview"] > 0:
        preview = subject_all.select("preview")
        preview_ppl = math.exp(bootstrap.token_weighted_mean(preview.mean_nll, preview.tokens))
        subject_final_ppl = math.exp(bootstrap.token_weighted_mean(subject.mean_nll, subject.tokens))
        ratio = subject_final_ppl / preview_ppl
        lo, hi = knobs["drift_band"]
        drift = {"preview_final_ratio": ratio, "band": [lo, hi], "within_band": bool(lo <= ratio <= hi)}
        decisions.append(Decision("drift_check", drift))

    outputs = {
        "primary_metric": {
            "kind": "ppl",
            "analysis_basis": "mean_logloss",
            "direction": "lower_is_better",
            "paired": True,
            "preview": preview_ppl,
            "final": final_ppl,
            "baseline_final": baseline_final_ppl,
            "log_ratio": ci.estimate,
            "ratio_vs_baseline": math.exp(ci.estimate),
            "ci": [ci.low, ci.high],
            "display_ci": [math.exp(ci.low), math.exp(ci.high)],
            "confidence_level": ci.confidence_level,
        },
        "drift": drift,
        "dataset": {"windows": {
            "counts": counts,
            **input_outputs,
            "stats": {
                "window_match_fraction": pairing.match_fraction,
                **overlap_stats,
                "paired_windows": pairing.n_pairs,
                "token_count_mismatches": token_mismatches,
                "paired_delta_summary": {
                    "mean": ci.estimate,
                    "mean_unweighted": float(np.mean(deltas)),
                    "std": float(np.std(deltas, ddof=1)),
                    "min": float(np.min(deltas)),
                    "max": float(np.max(deltas)),
                    "degenerate": ci.degenerate,
                    "degenerate_reason": ci.degenerate_reason,
                },
                "bootstrap": {
                    "method": ci.method,
                    "requested_method": knobs["method"],
                    "scheme": ci.scheme,
                    "replicates": ci.replicates,
                    "index_streams": ci.index_streams,
                    **({"resampling": kernels.resampling[ci.scheme]} if kernels.resampling else {}),
                    "confidence_level": ci.confidence_level,
                    "seed": {k: v for k, v in ctx.seed.items() if k != "knobs_hash"},
                    "z0": ci.z0,
                    "acceleration": ci.acceleration,
                    "fallback": ci.fallback,
                    **({"distribution": {
                        "probabilities": "0, 0.01, ..., 1 (101 points; type 7 quantiles of the replicates)",
                        "ratio_quantiles": [math.exp(q) for q in ci.distribution],
                    }} if ci.distribution is not None else {}),
                },
                "coverage": {
                    "preview": (ABSENT if previews is None
                                else _floor_block(previews, min_windows if has_phases else None)),
                    "final": _floor_block(pairing.n_pairs, min_windows),
                    "replicates": _floor_block(knobs["replicates"], min_replicates),
                },
            },
        }},
    }
    return StageOutput(outputs=claims.finish(outputs), decisions=tuple(decisions))


def audit_paired_ratio(outputs: Mapping[str, Any]) -> list[str]:
    """Identities ``certa verify`` re-checks: display_ci == exp(ci) and ratio == exp(log_ratio), exactly."""
    problems = []
    pm = outputs.get("primary_metric", {})
    try:
        if pm["display_ci"] != [math.exp(pm["ci"][0]), math.exp(pm["ci"][1])]:
            problems.append("primary_metric.display_ci != exp(primary_metric.ci)")
        if pm["ratio_vs_baseline"] != math.exp(pm["log_ratio"]):
            problems.append("primary_metric.ratio_vs_baseline != exp(primary_metric.log_ratio)")
        if not pm["ci"][0] <= pm["ci"][1]:
            problems.append("primary_metric.ci is not ordered (low > high)")
    except (KeyError, TypeError, IndexError, OverflowError):
        problems.append("primary_metric is missing ci, display_ci, log_ratio or ratio_vs_baseline")
    return problems


def ratio_stage(kernels: PairedRatioKernels) -> StageType:
    """``paired.ppl_ratio`` at ``kernels.version``."""
    return StageType(
        name="paired.ppl_ratio",
        version=kernels.version,
        input_knobs=("baseline", "subject"),
        run=lambda ctx: run_paired_ratio(ctx, kernels),
        summary="Paired perplexity ratio vs a baseline, token-weighted, with a paired BCa bootstrap CI (seed 001).",
        audit_checks=audit_paired_ratio,
        presentation="certa.engine.services.presentation.stages.paired_ratio",
        changes=kernels.changes,
    )


STAGES = tuple(ratio_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
