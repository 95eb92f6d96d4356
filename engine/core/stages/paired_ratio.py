"""Stage ``paired.ppl_ratio``: paired perplexity ratio of a subject model against a baseline (seed 001).

Windows are paired by ``window_id``. For pair i with count t_i (the subject's: tokens, or the bytes or words an
evaluator's export counts, ``unit``) and mean log-loss per counted unit ℓ_i in each arm, Δℓ_i = ℓ_i(subject) −
ℓ_i(baseline); the estimate is the count-weighted mean Δ̄ = Σ t_i Δℓ_i / Σ t_i and ``ratio_vs_baseline =
exp(Δ̄)`` (the ratio of the two arms' perplexities per unit on the paired windows when counts agree). The CI is a
paired bootstrap of Δ̄ (BCa by default) and ``display_ci = exp(ci)`` exactly.

The unit is the estimand's: a perplexity per byte and one per token of the same text are different numbers
(with one tokenizer, ratio per token = (ratio per byte)^(Σ bytes / Σ tokens); at 3 bytes per token a byte ratio
of 1.05 is a token ratio of 1.05³ ≈ 1.16). 1.4.0 states it in every name: outputs under
``<token|byte|word>_perplexity`` and ``<token|byte|word>_count_mismatches``, the knob ``unit`` (which an lm-eval
export's count column or ``model.windows``' unit fixes before anything runs, ``resolve_unit``), and a gate naming
another unit is refused when the spec is loaded (``unit_gate_problem``).

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
rows in another order gives the same certificate (1.2.0's numbers when the file is sorted by window_id). 1.4.0
computes 1.3.0's numbers and names them by the unit of the counts (knob ``unit``): 1.3.0 and older called every
count a token, also the bytes or words of an lm-eval export, and put the ratio under ``primary_metric``.

1.5.0 reads two evaluator exports (lm-evaluation-harness perplexity samples) as ``paired.metric_delta`` reads
them: their documents pair by the tool's key (``doc_id``) with equal identity digests (``doc_hash``,
``prompt_hash``, ``target_hash``; ``certa.engine.core.evidence.pairing.pair_records``), and what is left out is
the profile rule ``items_paired`` (``certa.engine.core.stages.pairing_rules``), in place of
``window_match_fraction``; the outputs record the pairing (``pairing``) and each export's provenance
(``sources``), and a refusal names the failed rules' numbers. 1.4.0 paired an export's documents by the mapped
``window_id`` column alone, so a document whose text differed between the runs (with the same count) was paired
and counted. The pairs are computed in 1.4.0's order (the canonical order of the baseline's window ids): complete
exports, and window tables (which pair by ``window_id`` as before), give 1.4.0's numbers.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, ProfileAbort, StageError
from certa.engine.core.evidence import PairedEvidence, pair_records
from certa.engine.core.evidence.formats import EXPORT_READERS
from certa.engine.core.evidence.lm_eval import NO_TOKEN_COUNT, count_column_unit
from certa.engine.core.metric_paths import format_steps, parse_metric
from certa.engine.core.stats.bootstrap import weighted_mean as bootstrap, weighted_mean_v1_0_0 as bootstrap_v1_0_0
from certa.engine.core.stats.pairing import (WindowPairing, canonical_order, duplicated_ids, overlap_fraction,
                                             pair_windows)
from certa.engine.core.tables import Table
from certa.engine.core.stages.base import DeclaredTable, Decision, KnobProblem, StageContext, StageOutput, StageType
from certa.engine.core.stages.model_windows import produced_unit, window_unit
from certa.engine.core.stages.pairing_rules import failed_rules_text, items_paired_rule
from certa.engine.core.stages.ratio_audit import audit_paired_ratio
from certa.engine.core.stages.ratio_names import UNITS
from certa.engine.core.stages.unused_columns import unused_column_decisions

__all__ = ["KERNELS", "PROFILE_FLOORS", "STAGE", "STAGES", "UNITS", "DataClaims", "PairedRatioKernels",
           "resolve_unit", "unit_gate_problem", "export_gate_problem", "estimate_key", "unused_record_parts"]

PROFILE_FLOORS: dict[str, tuple[int, int] | None] = {"dev": None, "ci": (200, 1200), "release": (400, 3200)}
"""(minimum paired windows, minimum bootstrap replicates) per profile."""

PHASES = ("preview", "final")
NOT_CHECKED = "not checked (no start/end offsets)"
EXAMPLES = 5
"""Unpaired keys listed per kind in the outputs' ``pairing`` block (all are counted), as paired.metric_delta lists."""
EXPORT_FORMATS = (frozenset(reader.name for reader in EXPORT_READERS)
                  - {companion for reader in EXPORT_READERS for companion in reader.companions.values()})
"""The input formats that hold an evaluator's per-item records (``certa.engine.core.evidence.formats``; not a
companion such as ``lm-eval-results``, read through the input that names it)."""


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
    named_by_unit: bool = False
    """Whether the knob ``unit`` names the outputs (1.4.0: ``byte_perplexity``...), or every count is a token and
    the ratio is ``primary_metric`` (1.0.0–1.3.0)."""
    checks_exports: bool = False
    """1.5.0: two evaluator exports pair by the tool's item key with equal identity digests (``pair_records``, the
    ``items_paired`` rule), the certificate records what each states (``sources``) and how they paired
    (``pairing``), and a refusal names the failed rules' numbers. 1.0.0–1.4.0 pair an export's documents by the
    mapped window_id column alone and record no provenance."""


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
    PairedRatioKernels(
        version="1.4.0", bootstrap_ci=bootstrap.weighted_mean_bootstrap_ci,
        resampling=bootstrap.RESAMPLING, claims=TRUE_CLAIMS, arm_order=_in_window_order, named_by_unit=True,
        changes="issue 30: 1.3.0's numbers, named by the unit the windows are counted in (knob unit: tokens, "
                "bytes or words, fixed by an lm-eval export's count column or model.windows' unit): the ratio "
                "under <unit>_perplexity (was primary_metric), <unit>_count_mismatches, the <unit>_counts_match "
                "rule; a gate naming another unit is refused when the spec is loaded"),
    PairedRatioKernels(
        version="1.5.0", bootstrap_ci=bootstrap.weighted_mean_bootstrap_ci,
        resampling=bootstrap.RESAMPLING, claims=TRUE_CLAIMS, arm_order=_in_window_order, named_by_unit=True,
        checks_exports=True,
        changes="issue 32: two lm-evaluation-harness exports pair their documents by doc_id with equal doc_hash, "
                "prompt_hash and target_hash, as paired.metric_delta pairs them: a document on one side only, or "
                "on both with other digests (another text, the same byte count), is the profile rule items_paired "
                "(dev: left out, recorded and warned; ci and release: refused naming the numbers), which replaces "
                "window_match_fraction for exports; one export on both sides, or an export against a plain table, "
                "is refused; the outputs record each export's provenance (sources: tool, version, task, model, "
                "files with SHA-256) and the pairing. Complete exports and plain tables give 1.4.0's numbers; "
                "exports with a document whose digests differ move (1.4.0 counted it)"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


def _load_arm(table: Table, columns: Mapping[str, str], word: str = "token") -> _Arm:
    """Validate and type one arm's window table (the stage's ``_iv`` step); ``word`` names the counted unit."""
    ids = table.text(columns["window_id"])
    tokens = table.numeric(columns["tokens"])
    if np.any(tokens <= 0) or np.any(tokens != np.round(tokens)):
        row = int(np.flatnonzero((tokens <= 0) | (tokens != np.round(tokens)))[0])
        raise InputError(f"input '{table.name}', column '{columns['tokens']}', row {row + 1}: {word} counts must be "
                         f"positive integers (got {float(tokens[row]):g}); windows with no unmasked {word}s must be "
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
    unit = knobs["unit"] if kernels.named_by_unit else "tokens"
    word = UNITS[unit]
    if kernels.named_by_unit:
        _check_produced_units(ctx, unit)
    tables = {arm: ctx.table(arm) for arm in ("baseline", "subject")}
    exports = _paired_exports(tables, columns) if kernels.checks_exports else None
    arm_order = kernels.arm_order if exports is None else _as_read  # an export's rows are its records, as read
    loaded = {arm: (table, arm_order(_load_arm(table, columns, word))) for arm, table in tables.items()}
    baseline_all, subject_all = loaded["baseline"][1], loaded["subject"][1]
    baseline, subject = baseline_all.select("final"), subject_all.select("final")
    pairing = (pair_windows(baseline.ids, subject.ids) if exports is None
               else _export_windows(exports, baseline.ids))
    if pairing.n_pairs < 2:
        by = "window_id" if exports is None else ", ".join(exports.report.key_fields) + " with equal identity digests"
        raise StageError(f"only {pairing.n_pairs} window(s) pair by {by} between '{knobs['baseline']}' and "
                         f"'{knobs['subject']}'; a paired ratio needs at least 2")
    bi, si = pairing.baseline_index, pairing.subject_index
    tokens = subject.tokens[si]
    deltas = subject.mean_nll[si] - baseline.mean_nll[bi]
    token_mismatches = int(np.count_nonzero(baseline.tokens[bi] != tokens))
    mismatches = f"{word}_count_mismatches"
    overlap, overlap_stats = claims.overlap(baseline, subject)
    input_outputs, input_decisions = claims.inputs(loaded, columns)

    items = None if exports is None else exports.report.summary(EXAMPLES)
    decisions = [*input_decisions, Decision("pairing", {
        "paired_windows": pairing.n_pairs, "window_match_fraction": pairing.match_fraction,
        "unmatched_baseline": len(pairing.unmatched_baseline), "unmatched_subject": len(pairing.unmatched_subject),
        "unmatched_examples": list(pairing.unmatched_baseline[:5] + pairing.unmatched_subject[:5]),
        mismatches: token_mismatches, "weights": f"subject {unit}", **(items or {})})]

    floors = PROFILE_FLOORS[ctx.profile]
    strict = floors is not None
    min_windows, min_replicates = floors if floors else (None, None)
    has_phases = subject_all.phase is not None or baseline_all.phase is not None
    counts = {"baseline": claims.counts(baseline_all), "subject": claims.counts(subject_all)}
    previews = min((c["preview"] for c in counts.values() if "preview" in c), default=None)
    rules = [
        (_rule("window_match_fraction", pairing.match_fraction == 1.0, pairing.match_fraction, 1.0, ctx.profile, strict)
         if exports is None else items_paired_rule(exports.report, ctx.profile, strict)),
        _rule(f"{word}_counts_match", token_mismatches == 0, token_mismatches, 0, ctx.profile, strict),
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
        numbers = f": {failed_rules_text(rules)}" if kernels.checks_exports else ""
        raise ProfileAbort(f"profile '{ctx.profile}' rule(s) failed: {', '.join(failed)}{numbers} "
                           "(see the recorded profile_rule decisions; fix the data or use profile dev to explore)",
                           rule=failed[0], decisions=tuple(decisions))

    # before the bootstrap: a mean NLL whose exp overflows (a sum given as a mean) is refused before replicates of
    # such numbers are summed (their quantiles would be inf - inf, a numpy warning on the way to the refusal)
    final_ppl = _perplexity(bootstrap.token_weighted_mean(subject.mean_nll[si], tokens), knobs["subject"])
    baseline_final_ppl = _perplexity(bootstrap.token_weighted_mean(baseline.mean_nll[bi], baseline.tokens[bi]),
                                     knobs["baseline"])
    ci = kernels.bootstrap_ci(deltas, tokens, rng=ctx.rng, replicates=knobs["replicates"],
                              confidence_level=knobs["confidence_level"], method=knobs["method"],
                              scheme=knobs["scheme"])
    if ci.degenerate:
        decisions.append(Decision("degenerate_fallback", {"reason": ci.degenerate_reason, "ci": [ci.low, ci.high]}))
    if ci.fallback:
        decisions.append(Decision("bootstrap_fallback", {"reason": ci.fallback}))

    preview_ppl: Any = ABSENT
    drift: Any = ABSENT
    if subject_all.phase is not None and counts["subject"]["preview"] > 0:
        preview = subject_all.select("preview")
        preview_ppl = _perplexity(bootstrap.token_weighted_mean(preview.mean_nll, preview.tokens), knobs["subject"])
        subject_final_ppl = _perplexity(bootstrap.token_weighted_mean(subject.mean_nll, subject.tokens),
                                        knobs["subject"])
        ratio = subject_final_ppl / preview_ppl
        lo, hi = knobs["drift_band"]
        drift = {"preview_final_ratio": ratio, "band": [lo, hi], "within_band": bool(lo <= ratio <= hi)}
        decisions.append(Decision("drift_check", drift))

    outputs = {
        estimate_key(kernels, unit): {
            **({"unit": unit} if kernels.named_by_unit else {}),
            "kind": "ppl",
            "analysis_basis": f"mean_logloss_per_{word}" if kernels.named_by_unit else "mean_logloss",
            "direction": "lower_is_better",
            "paired": True,
            "preview": preview_ppl,
            "final": final_ppl,
            "baseline_final": baseline_final_ppl,
            "log_ratio": ci.estimate,
            "ratio_vs_baseline": _ratio(ci.estimate, "difference"),
            "ci": [ci.low, ci.high],
            "display_ci": [_ratio(ci.low, "interval's lower end of the difference"),
                           _ratio(ci.high, "interval's upper end of the difference")],
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
                mismatches: token_mismatches,
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
                        "ratio_quantiles": [_ratio(q, "bootstrap quantile of the difference")
                                            for q in ci.distribution],
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
        **({} if exports is None else {  # 1.5.0, two exports: how they paired, what each states
            "pairing": items, "sources": {"baseline": exports.baseline.provenance.as_dict(),
                                          "subject": exports.subject.provenance.as_dict()}}),
    }
    return StageOutput(outputs=claims.finish(outputs), decisions=tuple(decisions))


# --------------------------------------------------------------------------- evaluator exports (1.5.0)


def _paired_exports(tables: Mapping[str, Table], columns: Mapping[str, str]) -> PairedEvidence | None:
    """1.5.0: the two arms' records paired by the tool's item key with equal identity digests (``pair_records``,
    as paired.metric_delta pairs them), when the arms are evaluator exports; None for two plain tables (they pair
    by window_id). Refused (``InputError``): an export against a plain table (the digests cannot be compared),
    a ``columns.window_id`` other than the export's key, and the same records on both sides (``pair_records``)."""
    baseline, subject = tables["baseline"].evidence, tables["subject"].evidence
    if baseline is None and subject is None:
        return None
    if baseline is None or subject is None:
        export, other = ("subject", "baseline") if baseline is None else ("baseline", "subject")
        raise InputError(f"input '{tables[export].name}' is an {tables[export].fmt} export and input "
                         f"'{tables[other].name}' a table: an export's documents pair by their key with the tool's "
                         "identity digests, which a table does not hold, so the pairing could not be checked; give "
                         "both arms as exports of one tool, or both as tables (or pin paired.ppl_ratio@1.4.0, which "
                         "pairs by window_id alone)")
    for arm, evidence in (("baseline", baseline), ("subject", subject)):
        if (columns["window_id"],) != evidence.key_fields:
            key = ", ".join(evidence.key_fields)
            raise InputError(f"input '{tables[arm].name}' is an {tables[arm].fmt} export, whose documents pair by "
                             f"{key} with their identity digests ({', '.join(evidence.identity) or 'none'}); "
                             f"columns.window_id is '{columns['window_id']}': set columns.window_id: {key}")
    return pair_records(baseline, subject)


def _export_windows(paired: PairedEvidence, baseline_ids: np.ndarray) -> WindowPairing:
    """The windows of two paired exports (``baseline_ids``: the baseline's window ids, row for row its records):
    the pairs in the canonical order of the baseline's window ids (the order 1.4.0 computed in, so complete
    exports give its numbers), and the match fraction paired / (documents on either side), a document with other
    digests counting as not matched."""
    report = paired.report
    order = canonical_order(baseline_ids[paired.baseline_index])
    either = report.n_subject + len(report.unmatched_baseline)
    return WindowPairing(baseline_index=paired.baseline_index[order], subject_index=paired.subject_index[order],
                         match_fraction=report.n_paired / either if either else 0.0,
                         unmatched_baseline=tuple(str(key[0]) for key in report.unmatched_baseline),
                         unmatched_subject=tuple(str(key[0]) for key in report.unmatched_subject))


def unused_record_parts(knobs: Mapping[str, Any], parts: Mapping[str, frozenset[str]]) -> list[tuple[str, str, str]]:
    """Validation (``StageType.unused_record_parts``), 1.5.0: of the parts of an export's records that the inputs'
    ``read:`` options make, those this stage would not use. It records the provenance (``sources``); it reads the
    weights only where ``columns`` name the ``weight`` column; it reads no slices."""
    named = set(knobs["columns"].values())
    unused = []
    for arm, given in parts.items():
        if "weights" in given and "weight" not in named:
            unused.append((arm, "weights", "reads no column 'weight' (its knobs name the columns it reads)"))
        if "slices" in given:
            unused.append((arm, "slices", "computes no per-slice results"))
    return unused


# --------------------------------------------------------------------------- the unit (1.4.0)


def estimate_key(kernels: PairedRatioKernels, unit: str) -> str:
    """The output that holds the ratio: ``<token|byte|word>_perplexity`` (1.4.0), ``primary_metric`` before."""
    return f"{UNITS[unit]}_perplexity" if kernels.named_by_unit else "primary_metric"


_UNIT_NAMED = {f"{word}_{suffix}": unit for unit, word in UNITS.items() for suffix in ("perplexity",
                                                                                       "count_mismatches")}
"""The 1.4.0 outputs whose name says a unit -> that unit."""


def _declared_unit(table: DeclaredTable, column: str) -> tuple[str | None, str]:
    """(the unit the spec says the table's count column ``column`` holds, or None where only the knob can say;
    where it comes from, in words). An lm-eval export without such a column is a ``KnobProblem``."""
    if table.fmt == "lm-eval-samples":
        unit = count_column_unit(column, table.read.get("count_unit"))
        if unit is None:
            raise KnobProblem(f"input '{table.name}' is an lm-eval-samples export: its windows' counts are the columns "
                              f"bytes and words (weight: count_unit's), not '{column}' (columns.tokens); set "
                              f"columns.tokens: bytes (or words): {NO_TOKEN_COUNT}",
                              ("columns", "tokens"))
        return unit, f"input '{table.name}', an lm-eval-samples export read for its count column '{column}',"
    if table.producer == "model.windows":
        return (window_unit(table.producer_knobs),
                f"table '{table.name}', made by model.windows with unit: {table.producer_knobs.get('unit')},")
    return None, "the knob unit (tokens unless it says otherwise, for tables whose counts the spec does not describe),"


_LARGEST_LOG = math.log(sys.float_info.max)
"""709.78...: the largest mean NLL (nats) whose perplexity exp(·) is a finite double."""


def _perplexity(mean_nll: float, name: str) -> float:
    """exp(``mean_nll``), the perplexity of input ``name``'s windows (``_finite_exp``)."""
    return _finite_exp(mean_nll, f"input '{name}': the weighted mean NLL of its windows")


def _ratio(log_ratio: float, what: str) -> float:
    """exp(``log_ratio``), a ratio of perplexities (``_finite_exp``)."""
    return _finite_exp(log_ratio, f"the {what} of the subject's and the baseline's mean NLL")


def _finite_exp(log_value: float, what: str) -> float:
    """exp(``log_value``); ``InputError`` naming ``what`` and the number when its size is beyond the largest
    double's log (exp would overflow, or round to 0): a mean NLL (or a difference of two) that large is no
    language model's, most likely a sum given as a mean."""
    if abs(log_value) > _LARGEST_LOG:
        raise InputError(f"{what} is {log_value:.6g} nats, whose exp({log_value:.6g}) is beyond the largest number "
                         f"(exp({_LARGEST_LOG:.2f})); a per-token mean NLL that large is no model's: is the column a "
                         "sum (give it as nll_sum)?")
    return math.exp(log_value)


def _arm_units(knobs: Mapping[str, Any], declared: Mapping[str, DeclaredTable]) -> dict[str, tuple[str | None, str]]:
    return {arm: _declared_unit(declared[knobs[arm]], knobs["columns"]["tokens"]) for arm in ("baseline", "subject")}


def resolve_unit(knobs: Mapping[str, Any], declared: Mapping[str, DeclaredTable]) -> dict[str, Any]:
    """1.4.0's knobs with ``unit`` resolved before anything is read: the unit the arms' declared tables count in
    (an lm-eval export's count column; model.windows' unit: tokens or bytes), which a given ``unit`` must equal;
    else the given ``unit``, or ``tokens`` (a table of counts the spec does not describe). Refused
    (``KnobProblem``): arms counted in two units, a ``unit`` that contradicts an arm, and model.windows with
    ``unit: auto`` (it picks tokens or bytes when it runs) without a ``unit`` here."""
    arms = _arm_units(knobs, declared)
    known = {arm: found for arm, found in arms.items() if found[0] is not None}
    units = {unit for unit, _ in known.values()}
    if len(units) > 1:
        raise KnobProblem("the two arms are counted in different units: "
                          + "; ".join(f"{why} counts {unit}" for unit, why in known.values())
                          + "; a ratio of perplexities compares one unit: read both arms with the same counts",
                          ("columns", "tokens"))
    given = knobs.get("unit")
    if units:
        (unit,) = units
        if given is not None and given != unit:
            why = next(why for found, why in known.values() if found == unit)
            raise KnobProblem(f"unit: {given}, but {why} counts {unit}: leave unit out or set unit: {unit}",
                              ("unit",))
        return {**knobs, "unit": unit}
    picked_later = [declared[knobs[arm]].name for arm in arms if declared[knobs[arm]].producer == "model.windows"]
    if given is None and picked_later:
        raise KnobProblem(f"table '{picked_later[0]}' is made by model.windows with unit: auto, which counts tokens "
                          "or bytes as the models' tokenizers decide at run time, and a gate names one unit: set "
                          "unit: tokens or unit: bytes on that stage, or unit on this one (checked when it runs)",
                          ("unit",))
    return {**knobs, "unit": given or "tokens"}


def unit_gate_problem(metric: str, knobs: Mapping[str, Any], declared: Mapping[str, DeclaredTable]) -> str | None:
    """Why gate path ``metric`` names a unit the windows are not counted in (``token_perplexity`` on bytes), or
    1.3.0's ``primary_metric``: the message says the unit, where it comes from and the name to write; None when
    the path names no other unit."""
    stage_id, steps = parse_metric(metric)
    unit = knobs["unit"]
    why = next((why for found, why in _arm_units(knobs, declared).values() if found == unit),
               f"the knob unit: {unit},")
    for position, (kind, key) in enumerate(steps):
        if kind != "key":
            continue
        if position == 0 and key == "primary_metric":
            fixed = format_steps([("key", f"{UNITS[unit]}_perplexity"), *steps[1:]], stage_id)
            return (f"'primary_metric' is what paired.ppl_ratio 1.3.0 and older called the ratio; 1.4.0 names it by "
                    f"the unit the windows are counted in, here {unit} ({why.rstrip(',')}): write '{fixed}', or keep 1.3.0's "
                    "names with use: paired.ppl_ratio@1.3.0")
        named = _UNIT_NAMED.get(key)
        if named is not None and named != unit:
            fixed = format_steps([*steps[:position], ("key", key.replace(UNITS[named], UNITS[unit], 1)),
                                  *steps[position + 1:]], stage_id)
            return (f"no output '{key}': the windows are counted in {unit} ({why.rstrip(',')}), not in {named}, so the "
                    f"outputs are named per {UNITS[unit]}: '{fixed}'. A ratio per {UNITS[unit]} is not a ratio per "
                    f"{UNITS[named]}: the same gate threshold means another limit (docs/paired_bootstrap.md, "
                    "\"Units\")")
    return None


EXPORT_OUTPUTS = ("pairing", "sources")
"""The outputs 1.5.0 records only for two evaluator exports."""


def export_gate_problem(metric: str, knobs: Mapping[str, Any], declared: Mapping[str, DeclaredTable]) -> str | None:
    """1.5.0: ``unit_gate_problem``, and a gate on ``pairing`` or ``sources`` where neither arm is an evaluator
    export (those outputs then do not exist: window tables pair by window_id, and state no provenance)."""
    problem = unit_gate_problem(metric, knobs, declared)
    if problem is not None:
        return problem
    _, steps = parse_metric(metric)
    if not steps or steps[0][0] != "key" or steps[0][1] not in EXPORT_OUTPUTS:
        return None
    tables = [declared[knobs[arm]] for arm in ("baseline", "subject")]
    if any(table.fmt in EXPORT_FORMATS for table in tables):
        return None
    return (f"no output '{steps[0][1]}': paired.ppl_ratio records '{steps[0][1]}' only for two evaluator exports "
            f"({', '.join(sorted(EXPORT_FORMATS))}), and tables '{tables[0].name}' and '{tables[1].name}' are window "
            "tables, which pair by window_id (gate on dataset.windows.stats.window_match_fraction instead)")


def _check_produced_units(ctx: StageContext, unit: str) -> None:
    """Refuse a table made by an earlier model.windows stage (``unit: auto``) whose run counted another unit than
    ``unit``, before anything is computed."""
    for arm in ("baseline", "subject"):
        producer = ctx.knobs[arm].partition(".")[0] if "." in ctx.knobs[arm] else None
        picked = produced_unit(ctx.upstream.get(producer)) if producer else None
        if picked is not None and picked != unit:
            raise InputError(f"stage '{producer}' (model.windows) counted its windows in {picked} (the models' "
                             f"tokenizers decided), but this stage certifies a ratio per {UNITS[unit]} (unit: {unit}); "
                             f"set unit: {picked} and name the gates' outputs per {UNITS[picked]}, or fix the unit "
                             "on that stage")


def ratio_stage(kernels: PairedRatioKernels) -> StageType:
    """``paired.ppl_ratio`` at ``kernels.version``."""
    return StageType(
        name="paired.ppl_ratio",
        version=kernels.version,
        input_knobs=("baseline", "subject"),
        run=lambda ctx: run_paired_ratio(ctx, kernels),
        summary=("Paired perplexity ratio vs a baseline per token, byte or word (knob unit, which names the "
                 "outputs), weighted by those counts, with a paired BCa bootstrap CI (seed 001)."
                 if kernels.named_by_unit else
                 "Paired perplexity ratio vs a baseline, weighted by the windows' counts (called tokens, whatever "
                 "the mapped column counts), with a paired BCa bootstrap CI (seed 001)."),
        audit_checks=audit_paired_ratio,
        presentation="certa.engine.services.presentation.stages.paired_ratio",
        changes=kernels.changes,
        resolve_knobs=resolve_unit if kernels.named_by_unit else None,
        gate_problem=(export_gate_problem if kernels.checks_exports else
                      unit_gate_problem if kernels.named_by_unit else None),
        unused_record_parts=unused_record_parts if kernels.checks_exports else None,
    )


STAGES = tuple(ratio_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
