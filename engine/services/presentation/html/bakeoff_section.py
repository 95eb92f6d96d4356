"""The bake-off sections: ``bakeoff.compare`` and ``bakeoff.merge`` (pooled values per bucket and vendor, one
colour per vendor in every plot of the run, the lead and its significance, Δu with its interval, overlays) and
``bakeoff.gate`` (the calm gate per decision row). Builders read the stored outputs only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.services.presentation.explain import bucket_lead, lead_sentence, p_value_text
from engine.services.presentation.html import plots
from engine.services.presentation.html.view import Cell, Plot, StageInput, StageSection, Table, fmt, mapping, table

__all__ = ["run_vendors", "bakeoff_section", "bakeoff_merge_section", "calm_gate_section"]


_OVERLAYS = (("tokens", "tokens"), ("lat_ms", "latency ms"), ("cost", "cost"))


def run_vendors(stages: Mapping[str, Any]) -> list[str]:
    """Every vendor id of a run's bake-off stages (``input.vendors`` and ``buckets.<id>.vendors``), sorted: the
    colour order."""
    found = {str(vendor) for outputs in stages.values() if isinstance(outputs, Mapping)
             for bucket in mapping(outputs.get("buckets")).values() if isinstance(bucket, Mapping)
             for vendor in mapping(bucket.get("vendors"))}
    found.update(str(vendor) for outputs in stages.values() if isinstance(outputs, Mapping)
                 for vendor in mapping(outputs.get("input")).get("vendors") or () if "buckets" in outputs)
    return sorted(found)


def _overlay_table(name: str, vendors: Mapping[str, Any], order: Sequence[str]) -> Table | None:
    """Tokens, latency and cost per vendor (median / mean), only the overlays some vendor has a value for."""
    shown = [(key, label) for key, label in _OVERLAYS
             if any(mapping(vendors.get(v)).get(f"{key}_{stat}") is not None for v in order
                    for stat in ("median", "mean"))]
    if not shown:
        return None
    headers = ["vendor", *(f"{label} {stat}" for _, label in shown for stat in ("median", "mean"))]
    rows = [(v, *(mapping(vendors.get(v)).get(f"{key}_{stat}") for key, _ in shown for stat in ("median", "mean")))
            for v in order]
    return table(f"Bucket {name}: tokens, latency and cost per vendor (reported, not part of the index)", headers,
                 rows, numeric=tuple(range(1, len(headers))))


def _pair_table(name: str, pairs: Sequence[Mapping[str, Any]], level: Any, replicates: Any) -> Table:
    """Δu (the estimand the bootstrap tests) with its interval and p-values; the tanh-mapped display apart."""
    rows = []
    for p in pairs:
        display = mapping(p.get("display"))
        ci_tanh = display.get("ci_tanh", p.get("ci_tanh"))  # 1.2.0 under display; 1.0/1.1 flat
        if p.get("reason") is not None:
            rows.append((p.get("a"), p.get("b"), None, None, None, None, Cell(str(p.get("reason"))), None, None))
            continue
        rows.append((p.get("a"), p.get("b"), fmt(p.get("diff_u"), 4), fmt(p.get("ci_u"), 4),
                     _p_text(p.get("p_two_sided"), replicates), _p_text(p.get("p_holm"), replicates),
                     Cell(fmt(p.get("significant")), bool(p.get("significant"))),
                     fmt(display.get("diff_tanh"), 4), fmt(ci_tanh, 4)))
    return table(f"Bucket {name}: pairwise Δu = m_a − m_b, the difference of pooled rapidities that the bootstrap "
                 "tests (Holm-adjusted within the bucket); tanh-mapped values for display only",
                 ("a", "b", "Δu", f"{fmt(level)} CI of Δu", "p two-sided", "p Holm", "significant",
                  "display: tanh(Δu)", "display: tanh(CI)"), rows, numeric=(2, 4, 5, 7), nowrap=(0, 1, 3, 8))


def _p_text(p: Any, replicates: Any) -> str:
    """A bootstrap p for a table cell: 0 is shown as ``< 2/B``."""
    return fmt(p) if p is None else p_value_text(p, replicates).removeprefix("= ")


def bakeoff_section(stage: StageInput, use: str = "bakeoff.compare") -> StageSection:
    """The section of a ``bakeoff.compare`` stage (``use`` names a merge, which has no bootstrap)."""
    outputs = stage.outputs
    buckets = mapping(outputs.get("buckets"))
    bands = mapping(mapping(outputs.get("manifest")).get("bands"))
    boot = mapping(outputs.get("bootstrap"))
    plot_rows = []
    tables: list[Table] = []
    headlines: list[str] = []
    rank_by = "RSI_pool_env"
    for name, bucket in buckets.items():
        bucket = mapping(bucket)
        rank_by = str(bucket.get("rank_by") or rank_by)
        vendors = mapping(bucket.get("vendors"))
        order = [str(v) for v in bucket.get("ranking") or vendors]
        plot_rows.append((name, [(v, mapping(vendors.get(v)).get(rank_by), mapping(vendors.get(v)).get("ci_rsi"))
                                 for v in order]))
        lead = bucket_lead(bucket)
        headlines.append(lead_sentence(name, lead, boot.get("replicates")) if lead is not None else
                         f"{bucket.get('leader')} leads {name}." if bucket.get("leader") is not None else
                         f"No vendor leads {name} (tied at the top or nothing compared).")
        tables.append(table(f"Bucket {name}: ranking by {rank_by} (leader {fmt(bucket.get('leader'))})",
                            ("rank", "vendor", "n", rank_by, "interval", "band", "band shares", "g mean", "reason"),
                            [(mapping(vendors.get(v)).get("rank"), v, mapping(vendors.get(v)).get("n"),
                               mapping(vendors.get(v)).get(rank_by), mapping(vendors.get(v)).get("ci_rsi"),
                               mapping(vendors.get(v)).get("band_pool_env"),
                               [round(s, 3) for s in mapping(vendors.get(v)).get("band_shares") or []],
                               mapping(vendors.get(v)).get("g_mean"), mapping(vendors.get(v)).get("reason"))
                              for v in order], numeric=(0, 2, 3, 7)))
        overlays = _overlay_table(name, vendors, order)
        if overlays is not None:
            tables.append(overlays)
        pairs = [p for p in bucket.get("pairs") or () if isinstance(p, Mapping)]
        if pairs:
            tables.append(_pair_table(name, pairs, boot.get("confidence_level"), boot.get("replicates")))
    svg = plots.bakeoff_plot(f"{stage.stage_id}-pools", buckets=plot_rows, band_edges=mapping(bands.get("edges")),
                             value_label=f"pooled {rank_by}", colours=stage.vendor_colours)
    if bands:
        tables.append(table("Band rule", ("band on", "rule"), [(bands.get("band_on"), bands.get("rule"))]))
    notes = [str(note) for note in mapping(outputs.get("input")).get("data_notes") or ()]
    if notes:  # 1.2.0: every warning about the data, as certa run printed it
        tables.insert(0, table("What was done to the data (the run's recorded warnings)", ("note",),
                               [(note,) for note in notes]))
    if outputs.get("shards"):
        shards = outputs["shards"]
        tables.append(table("Merged shards", ("shard", "value"),
                            [(str(i), s) for i, s in enumerate(shards)] if isinstance(shards, list)
                            else list(shards.items())))
    leads = [lead for lead in (bucket_lead(mapping(b)) for b in buckets.values()) if lead is not None]
    decision = (f"lead significant in {sum(lead.significant for lead in leads)} of {len(buckets)} buckets" if leads else
                "leaders " + ", ".join(f"{name}: {fmt(mapping(b).get('leader'))}" for name, b in buckets.items()))
    summary = (
        f"Intervals: {fmt(boot.get('confidence_level'))} bootstrap, {fmt(boot.get('replicates'))} replicates; "
        f"pairwise p-values Holm-adjusted within each bucket." if boot else
        "A merge of shard sums: pooled values without bootstrap intervals, no lead tested.")
    caption = ("Pooled value per vendor and bucket (points, ranking order) with its bootstrap interval (bars) over "
               "the band regions; one colour per vendor throughout the report." if boot else
               "Pooled value per vendor and bucket over the band regions; one colour per vendor throughout the report.")
    return StageSection(stage.stage_id, use, "", decision=decision, ok=None, summary=summary,
                        facts=tuple(headlines), plots=(Plot(svg, caption),), tables=tuple(tables))


def bakeoff_merge_section(stage: StageInput) -> StageSection:
    """The section of a ``bakeoff.merge`` stage."""
    return bakeoff_section(stage, use="bakeoff.merge")


# -- bakeoff.gate ---------------------------------------------------------------------------------------------

def calm_gate_section(stage: StageInput) -> StageSection:
    """The section of a ``bakeoff.gate`` stage."""
    stage_id, outputs = stage.stage_id, stage.outputs
    params = outputs.get("params") or {}
    summary_out = outputs.get("summary") or {}
    g = [float(v) for v in outputs.get("g") or [] if isinstance(v, (int, float))]
    svg = plots.calm_gate_plot(f"{stage_id}-gate", g=g, g_min=params.get("g_min"),
                               flagged_rows=outputs.get("flagged_rows") or [])
    weights = params.get("weights") or {}
    lanes = outputs.get("lanes") or {}
    tables = [
        table("Lanes", ("lane", "telemetry", "weight"), [(k, v, weights.get(k)) for k, v in lanes.items()],
              numeric=(2,)),
        table("Gate summary", ("quantity", "value"),
              [(k, summary_out.get(k)) for k in summary_out] +
              [("rows", outputs.get("n_rows")), ("mode", outputs.get("mode")), ("preset", outputs.get("preset")),
                ("cold start", outputs.get("cold_start")), ("streams by", outputs.get("stream_by"))]),
        table("Parameters and references", ("knob", "value"),
              [(k, v) for k, v in params.items() if k != "weights"] +
              [(f"reference {k}", v) for k, v in (outputs.get("references") or {}).items()]),
    ]
    flag = summary_out.get("flag")
    summary = (f"Calm gate over {fmt(outputs.get('n_rows'))} rows: g from {fmt(summary_out.get('g_min'))} to "
               f"{fmt(summary_out.get('g_max'))} (mean {fmt(summary_out.get('g_mean'))}), "
               f"{fmt(summary_out.get('flagged'))} rows flagged" + (f" ({flag})." if flag else "."))
    return StageSection(stage_id, "bakeoff.gate", "", decision=f"{fmt(summary_out.get('flagged'))} flagged", ok=None,
                        summary=summary,
                        plots=(Plot(svg, "The calm gate g of each decision row against its floor g_min; flagged "
                                         "rows are marked."),), tables=tuple(tables))
