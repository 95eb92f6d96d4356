"""Stage ``bakeoff.merge``: pool a bake-off from per-shard (U, W) sums, exactly as the unsharded run.

Each shard is a table of the ``sums`` rows a ``bakeoff.compare`` (or an earlier ``bakeoff.merge``) run
put in its certificate — one row per (bucket, vendor) with fixed-point sums in units of 2^-56 — saved
as JSON Lines or CSV. The stage adds the integers group by group (seed C3/E7: "shards merge by summing
(U, W), never averaged RSI") and then computes pools, bands, ranking and stamps with the same code as
``bakeoff.compare``; because the sums are exact, the pools are bit-identical to a single run over all
decisions. Every row must carry the ``frozen_sha256`` of this stage's own frozen knobs (eps, weights,
bands, gate mode, hysteresis): shards pooled under another manifest are refused.

The shards come from input tables (``shards``), or from runs recorded in this ledger: ``shard_runs``
(run ids) or ``shard_batch`` (every completed run of a ``certa batch`` holding a ``bakeoff.compare``
stage). A recorded shard's certificate is checked first (schema and ``content_sha256``,
``certificate_problems``), then its ``sums`` rows go through the same checks as a table's, manifest
included. A replay reads the same runs from the same ledger.

Not available after a merge: the bootstrap (it needs the decisions) and medians of tokens/lat_ms
(medians do not merge); the tie-break overlay uses the exact means instead. The sums carry no cost, so a
merge reports none.

From 1.2.0, the runs of a ``shard_batch`` without a ``bakeoff.compare`` stage, which are not taken as
shards, are recorded in one ``shard_skipped`` decision, and overlay means without data are absent rather
than null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from certa.engine.core.certificate import certificate_problems
from certa.engine.foundation.errors import InputError, LedgerError, StageError
from certa.engine.core.stats.bakeoff.pool import FIXED_POINT_BITS, GroupSums, merge_group_sums, pools_from_sums
from certa.engine.core.tables import Table, parse_table
from certa.engine.core.stages.bakeoff import (KERNELS, BakeoffKernels, audit_bakeoff, bucket_outputs, config_from_knobs, one_page_table,
                      run_knobs_hash, stage_manifest, sums_rows)
from certa.engine.core.stages.base import Decision, LedgerReferences, StageContext, StageOutput, StageType

__all__ = ["STAGE", "STAGES", "read_sums_table"]

_INT_COLUMNS = ("n", "W_fx", "U_fx", "U_env_fx", "g_fx", "g_flagged", "tokens_fx", "tokens_n", "lat_ms_fx",
                "lat_ms_n", "fixed_point_bits")
_REQUIRED = ("bucket", "vendor", "band_counts", "band_counts_ungated", "frozen_sha256") + _INT_COLUMNS


def _ints(table: Table, column: str) -> list[int]:
    out = []
    for row, cell in enumerate(table.text(column).tolist()):
        try:
            out.append(int(cell))
        except ValueError:
            raise InputError(f"input '{table.name}', column '{column}', row {row + 1}: {cell!r} is not an integer "
                             "(fixed-point sums are decimal integer strings)") from None
    return out


def _band_counts(table: Table, column: str) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    for row, cell in enumerate(table.text(column).tolist()):
        parts = cell.split("/")
        try:
            counts: tuple[int, ...] = tuple(int(p) for p in parts)
        except ValueError:
            counts = ()
        if len(counts) != 5 or min(counts) < 0:
            raise InputError(f"input '{table.name}', column '{column}', row {row + 1}: expected five counts "
                             f"'A++/A+/A0/A-/A--' (got {cell!r})")
        out.append(counts)
    return out


_RESTATED = {"W": "W_fx", "U": "U_fx", "U_env": "U_env_fx"}
"""The float columns a sums row restates its exact sums in (``sums_rows``: ``W = W_fx / 2^56``), for a reader."""


def _check_restated_sums(table: Table, ints: Mapping[str, list[int]]) -> None:
    """Each float restatement a shard carries (``W``, ``U``, ``U_env``) agrees with its exact sum to 1e-9 relative:
    the merge computes with the exact integers, so a float a reader of the shard sees must say the same (an
    edited float is refused, never ignored)."""
    scale = 1 << FIXED_POINT_BITS
    for column, exact in _RESTATED.items():
        if not table.has(column):
            continue
        for row, (shown, fx) in enumerate(zip(table.numeric(column).tolist(), ints[exact])):
            if not math.isclose(shown, fx / scale, rel_tol=1e-9, abs_tol=1e-12):
                raise InputError(f"input '{table.name}', row {row + 1}: column '{column}' is {shown!r} but {exact} "
                                 f"gives {fx / scale!r} ({exact} / 2^{FIXED_POINT_BITS}); the float columns restate "
                                 "the exact sums the merge adds, and must agree with them")


def read_sums_table(table: Table, frozen_sha256: str) -> GroupSums:
    """A shard's sums table as ``GroupSums``; checks columns, integers, manifest and unique groups."""
    missing = [c for c in _REQUIRED if not table.has(c)]
    if missing:
        raise InputError(f"input '{table.name}' is not a bake-off sums table: missing column(s) {', '.join(missing)} "
                         "(write the 'sums' rows of a bakeoff.compare certificate, one JSON object per line)")
    ints = {c: _ints(table, c) for c in _INT_COLUMNS}
    for row, bits in enumerate(ints["fixed_point_bits"]):
        if bits != FIXED_POINT_BITS:
            raise InputError(f"input '{table.name}', row {row + 1}: fixed_point_bits is {bits}, expected "
                             f"{FIXED_POINT_BITS}")
    for row, tag in enumerate(table.text("frozen_sha256").tolist()):
        if tag != frozen_sha256:
            raise StageError(f"input '{table.name}', row {row + 1}: these sums were pooled under frozen knobs "
                             f"{tag[:12]}… but this stage's knobs give {frozen_sha256[:12]}…; eps_a, eps_w, "
                             "weights, bands, gate.mode and hysteresis must equal the shard runs'")
    keys = list(zip(table.text("bucket").tolist(), table.text("vendor").tolist()))
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(f"input '{table.name}': group (bucket={dup[0]!r}, vendor={dup[1]!r}) appears twice")
    _check_restated_sums(table, ints)
    bands = _band_counts(table, "band_counts")
    for row, (counts, n) in enumerate(zip(bands, ints["n"])):
        if sum(counts) != n:
            raise InputError(f"input '{table.name}', row {row + 1}: band_counts add up to {sum(counts)}, not n = {n}")
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    pick = (lambda values: tuple(values[i] for i in order))
    return GroupSums(
        keys=pick(keys), n=pick(ints["n"]), w_fx=pick(ints["W_fx"]), u_fx=pick(ints["U_fx"]),
        u_env_fx=pick(ints["U_env_fx"]), g_fx=pick(ints["g_fx"]), g_flagged=pick(ints["g_flagged"]),
        band_counts=pick(bands), band_counts_ungated=pick(_band_counts(table, "band_counts_ungated")),
        tokens_fx=pick(ints["tokens_fx"]), tokens_n=pick(ints["tokens_n"]), lat_ms_fx=pick(ints["lat_ms_fx"]),
        lat_ms_n=pick(ints["lat_ms_n"]),
    )


def run_bakeoff_merge(ctx: StageContext, kernels: BakeoffKernels = KERNELS[-1]) -> StageOutput:
    config = config_from_knobs(ctx.knobs)
    knobs_hash, hash_source = run_knobs_hash(ctx)
    manifest = stage_manifest(config, knobs_hash, hash_source, "shard sums", kernels)
    if ctx.knobs.get("shards"):
        names = list(ctx.knobs["shards"])
        parts = [read_sums_table(ctx.tables[name], manifest["frozen_sha256"]) for name in names]
        shard_records = [{"name": name, "sha256": ctx.tables[name].sha256, "groups": len(part.keys),
                          "decisions": sum(part.n)} for name, part in zip(names, parts)]
        skipped: list[dict[str, str]] = []
    else:
        recorded, skipped = _recorded_shards(ctx)
        parts = [read_sums_table(table, manifest["frozen_sha256"]) for _, table in recorded]
        shard_records = [{**record, "groups": len(part.keys), "decisions": sum(part.n)}
                         for (record, _), part in zip(recorded, parts)]
    skip_decisions = kernels.reporting.skipped_shards(skipped)
    merged = merge_group_sums(parts)
    vendors = sorted({vendor for _, vendor in merged.keys})
    if len(vendors) < 2:
        raise StageError(f"a bake-off needs at least 2 vendors (the shards hold {len(vendors)}: {', '.join(vendors)})")
    pools = pools_from_sums(merged, eps_w=config.eps_w, bands=config.bands)
    buckets = bucket_outputs(pools, config, knobs_hash=knobs_hash, g_sums=merged)
    kernels.reporting.annotate(buckets, None)
    outputs: dict[str, Any] = {
        "manifest": manifest,
        "shards": shard_records,
        "input": {"rows": sum(merged.n), "vendors": vendors, "buckets": sorted({b for b, _ in merged.keys}),
                  "g_flagged": sum(merged.g_flagged), **kernels.reporting.input_notes(skip_decisions)},
        "buckets": buckets,
        "stamps": [entry["stamp"] for entry in buckets.values()],
        "table": one_page_table(buckets),
        "sums": sums_rows(merged, manifest["frozen_sha256"]),
    }
    decisions = [Decision("bakeoff_merge", {"shards": outputs["shards"], "frozen_sha256": manifest["frozen_sha256"]}),
                 *skip_decisions]
    decisions.extend(Decision("bakeoff_stamp", {"bucket": b, "stamp": e["stamp"]}) for b, e in buckets.items())
    return StageOutput(outputs=outputs, decisions=tuple(decisions))


_SHARD_TYPES = ("bakeoff.compare", "bakeoff.merge")


def shard_sources(knobs: Mapping[str, Any]) -> LedgerReferences:
    """The recorded shard runs (``shard_runs``) and the batch (``shard_batch``) this stage merges, if named."""
    batch = knobs.get("shard_batch")
    return LedgerReferences(runs=tuple(knobs.get("shard_runs") or ()), batches=(batch,) if batch else ())


def _recorded_shards(ctx: StageContext) -> tuple[list[tuple[dict[str, Any], Table]], list[dict[str, str]]]:
    """The shards named by ``shard_runs`` or ``shard_batch``, read from the ledger: (record, sums table)
    per shard run, in run id order for a batch, and the batch's runs of other specs (``run_id``, ``reason``),
    not taken; runs merging the batch are no shards and not listed (the merge itself is one on replay).
    Each certificate must be intact (schema, content_sha256)."""
    knobs = ctx.knobs
    batch = knobs.get("shard_batch")
    source = f"shard_batch '{batch}'" if batch else "shard_runs"
    if ctx.ledger is None:
        raise StageError(f"{source} reads shard runs from the ledger, but this run has no ledger; run it with the "
                         "ledger that recorded the shards, or export their sums and use shards:")
    if batch:
        run_ids = ctx.ledger.batch_runs(batch)
        allowed: tuple[str, ...] = ("bakeoff.compare",)
    else:
        run_ids = list(knobs["shard_runs"])
        allowed = _SHARD_TYPES
    out: list[tuple[dict[str, Any], Table]] = []
    skipped: list[dict[str, str]] = []
    for run_id in run_ids:
        try:
            certificate = ctx.ledger.certificate(run_id)
        except LedgerError as exc:
            raise StageError(f"{source}: shard run {run_id}: {exc}") from None
        problems = certificate_problems(certificate)
        if problems:
            raise StageError(f"{source}: the certificate of shard run {run_id} is not intact: {'; '.join(problems[:3])}")
        stages = certificate["content"]["knobs"]["stages"]
        full_id = certificate["issued"]["run_id"]
        if batch and any(s["use"] == "bakeoff.merge" and s["with"].get("shard_batch") == batch for s in stages):
            continue  # a run merging this batch (this one, on replay) is not one of its shards
        found = [s["id"] for s in stages if s["use"] in allowed]
        if batch and not found:
            skipped.append({"run_id": full_id, "reason": "no bakeoff.compare stage"})  # another kind of spec
            continue
        if len(found) != 1:
            raise StageError(f"{source}: shard run {run_id} has {len(found)} stages of type "
                             f"{' or '.join(allowed)} ({', '.join(found) or 'none'}); a shard run holds exactly one "
                             "(export the sums of the one to merge and use shards:)")
        stage_id = found[0]
        rows = certificate["content"]["stages"][stage_id].get("sums") or []
        raw = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows).encode("utf-8")
        table = parse_table(f"run:{full_id}", raw, "jsonl")
        out.append(({"name": f"run:{full_id}", "run_id": full_id, "stage": stage_id,
                     "certificate_sha256": certificate["content_sha256"], "sha256": table.sha256}, table))
    if not out:
        raise StageError(f"{source}: no shard run found in the ledger"
                         + (" (no completed run with a bakeoff.compare stage was recorded with this batch id)"
                            if batch else ""))
    return out, skipped


def merge_stage(kernels: BakeoffKernels) -> StageType:
    """``bakeoff.merge`` at ``kernels.version``: it accepts only sums tagged with that version's manifest."""
    return StageType(
        name="bakeoff.merge",
        version=kernels.version,
        input_knobs=("shards",),
        run=lambda ctx: run_bakeoff_merge(ctx, kernels),
        summary="Vendor bake-off from per-shard (U, W) sums: exact merge, pools, bands, ranking and stamps "
                "identical to the unsharded bakeoff.compare.",
        ledger_reads=shard_sources,
        presentation="certa.engine.services.presentation.stages.bakeoff",
        audit_checks=audit_bakeoff,
        changes=_CHANGES[kernels.version],
    )


_CHANGES = {
    "1.0.0": "first version (certa 0.1.0): merges sums pooled by bakeoff.compare 1.0.0",
    "1.1.0": "certa 0.2.0: merges only sums pooled by bakeoff.compare 1.1.0 (its frozen manifest names the atanh "
             "formula); the merge itself is unchanged",
    "1.2.0": "certa 0.6.0: merges sums pooled by bakeoff.compare 1.1.0 or 1.2.0 (the same frozen manifest); records "
             "the batch runs it skips (shard_skipped) and leaves overlay means without data absent, not null",
}

STAGES = tuple(merge_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
