"""How ``bakeoff.compare`` and ``bakeoff.merge`` read: pooled values per bucket and vendor (one colour per vendor
in every plot of the run), the lead and its significance, Δu with its interval, the overlays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from certa.engine.core.stages.bakeoff import format6
from certa.engine.core.stats.bakeoff.pool import BAND_NAMES
from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.explain import finite_number, number_text
from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.html.view import Cell, Plot, StageInput, StageSection, Table, fmt, mapping, table

__all__ = ["section", "reading", "estimates", "how_to_read", "markdown", "Lead", "bucket_lead", "lead_sentence",
           "p_value_text"]


_OVERLAYS = (("tokens", "tokens"), ("lat_ms", "latency ms"), ("cost", "cost"))


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


def _headline(name: str, bucket: Mapping[str, Any], replicates: Any) -> str:
    """Who leads bucket ``name``, and how surely (``lead_sentence``) when its lead was tested."""
    lead = bucket_lead(bucket)
    return (lead_sentence(name, lead, replicates) if lead is not None else
            f"{bucket.get('leader')} leads {name}." if bucket.get("leader") is not None else
            f"No vendor leads {name} (tied at the top or nothing compared).")


def _method_note(boot: Mapping[str, Any]) -> str:
    """How the intervals were computed (the report section's summary)."""
    return (f"Intervals: {fmt(boot.get('confidence_level'))} bootstrap, {fmt(boot.get('replicates'))} replicates; "
            f"pairwise p-values Holm-adjusted within each bucket." if boot else
            "A merge of shard sums: pooled values without bootstrap intervals, no lead tested.")


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (a CI summary's line): who leads each bucket, then how the intervals were computed."""
    boot = mapping(outputs.get("bootstrap"))
    return " ".join([*(_headline(str(name), mapping(bucket), boot.get("replicates"))
                       for name, bucket in mapping(outputs.get("buckets")).items()), _method_note(boot)])


def section(stage: StageInput) -> StageSection:
    """The section of a ``bakeoff.compare`` or ``bakeoff.merge`` stage (a merge has no bootstrap)."""
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
        headlines.append(_headline(name, bucket, boot.get("replicates")))
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
    caption = ("Pooled value per vendor and bucket (points, ranking order) with its bootstrap interval (bars) over "
               "the band regions; one colour per vendor throughout the report." if boot else
               "Pooled value per vendor and bucket over the band regions; one colour per vendor throughout the report.")
    return StageSection(stage.stage_id, "", "", decision=decision, ok=None, summary=_method_note(boot),
                        facts=tuple(headlines), plots=(Plot(svg, caption),), tables=tuple(tables))


@dataclass(frozen=True)
class Lead:
    """A bake-off bucket's leader against the runner-up: the Holm-adjusted p of their pair and its significance."""

    leader: str
    runner_up: str
    diff_u: float | None
    p_holm: float | None
    significant: bool


def bucket_lead(bucket: Mapping[str, Any]) -> Lead | None:
    """The lead of one ``bakeoff.compare`` bucket: its ``lead`` block (1.2.0), or for older versions the pair of
    the leader and the runner-up (second in the ranking) with its Holm p; None when there is no leader, no
    runner-up, that pair was not tested, or the ranking is by ``RSI_pool`` (the bootstrap tests the gated pools,
    not that ranking key: 1.2.0 records no lead then either)."""
    lead = bucket.get("lead")
    if isinstance(lead, Mapping):
        if lead.get("leader") is None or lead.get("runner_up") is None:
            return None
        return Lead(str(lead["leader"]), str(lead["runner_up"]), finite_number(lead.get("diff_u")), finite_number(lead.get("p_holm")),
                    bool(lead.get("significant")))
    leader, ranking = bucket.get("leader"), bucket.get("ranking")
    if (leader is None or not isinstance(ranking, list) or len(ranking) < 2 or ranking[0] != leader
            or bucket.get("rank_by", "RSI_pool_env") != "RSI_pool_env"):
        return None
    runner_up = ranking[1]
    for pair in bucket.get("pairs") or ():
        if not isinstance(pair, Mapping) or pair.get("reason") is not None or {pair.get("a"), pair.get("b")} != {
                leader, runner_up}:
            continue
        diff = finite_number(pair.get("diff_u"))
        diff_u = None if diff is None else (diff if pair.get("a") == leader else -diff)
        return Lead(str(leader), str(runner_up), diff_u, finite_number(pair.get("p_holm")),
                    bool(pair.get("significant")) and diff_u is not None and diff_u > 0)
    return None


def p_value_text(p: Any, replicates: Any = None) -> str:
    """A bootstrap p-value for reading: 0 means only that no replicate crossed 0, i.e. p < 2/B."""
    b = finite_number(replicates)
    if finite_number(p) == 0.0 and b is not None and b > 0:
        return f"< {format_value(2 / b, digits=2)}"
    return f"= {number_text(p)}"


def lead_sentence(bucket_id: str, lead: Lead, replicates: Any = None) -> str:
    """"vendor-a leads e5, but the lead over vendor-b is not significant (p_Holm = 0.61)" and its positive form."""
    p = p_value_text(lead.p_holm, replicates)
    if lead.significant:
        return f"{lead.leader} leads {bucket_id}; the lead over {lead.runner_up} is significant (p_Holm {p})."
    return f"{lead.leader} leads {bucket_id}, but the lead over {lead.runner_up} is not significant (p_Holm {p})."


def _leads_paragraph(buckets: Mapping[str, Any]) -> str | None:
    """Which buckets' leads are established in this run, and which are not."""
    leads = {str(name): bucket_lead(bucket) for name, bucket in sorted(buckets.items()) if isinstance(bucket, Mapping)}
    established = [name for name, lead in leads.items() if lead is not None and lead.significant]
    open_ = [name for name, lead in leads.items() if lead is not None and not lead.significant]
    if not established and not open_:
        return None
    texts = []
    if open_:
        texts.append(f"In this run the lead is NOT significant in {', '.join(open_)}: there the data do not establish "
                     "which of the top two vendors is better, whatever the ranking shows.")
    if established:
        texts.append(f"The lead is significant in {', '.join(established)}.")
    return " ".join(texts)


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """Each vendor's pooled value in each bucket (the ranking key) with its bootstrap interval (none for a
    merge); the slice is ``bucket/vendor``."""
    level = mapping(outputs.get("bootstrap")).get("confidence_level")
    found: list[Estimate | None] = []
    for name, bucket in mapping(outputs.get("buckets")).items():
        rank_by = str(mapping(bucket).get("rank_by") or "RSI_pool_env")
        for vendor, row in mapping(mapping(bucket).get("vendors")).items():
            found.append(Estimate.read(rank_by, mapping(row).get(rank_by), mapping(row).get("ci_rsi"), level,
                                       slice=f"{name}/{vendor}"))
    return tuple(found)


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``bakeoff.compare`` or ``bakeoff.merge`` stage\'s outputs."""
    texts = [
        "What was tested: every vendor answered the same prompts; each decision got a bounded score RSI in (-1, 1). "
        "Per bucket, the scores are pooled per vendor (in rapidity space u = atanh(RSI), mapped back by tanh) and the "
        "vendors are ranked by the pooled value, with token use and latency only as tie-breaks.",
        "What the ranking means: the leader has the highest pooled score on these prompts. A lead is a claim only "
        "when the bootstrap test of the difference in pooled rapidity (delta-u) against the runner-up is significant "
        "after Holm's correction over the pairs of the bucket. A non-significant lead does NOT show the leader is "
        "better; nor does any ranking say how the vendors compare on other prompts or tasks.",
    ]
    if outputs.get("bootstrap") is None and "shards" in outputs:
        texts[1] = ("What the ranking means: this is a merge of shard sums: the pooled values equal one comparison "
                    "over all decisions, but a merge has no bootstrap, so no lead is tested here.")
    leads = _leads_paragraph(mapping(outputs.get("buckets")))
    if leads:
        texts.append(leads)
    texts.append("Assumptions: the prompts are a fair sample of the workload, decisions are independent, and the "
                 "scores of different vendors are comparable. Tanh-mapped intervals are displays of the u-space "
                 "interval, not intervals of the difference of two pooled scores.")
    return tuple(texts)


def _one_decimal(x: Any) -> str:
    """An overlay value in the Markdown table: a float with one decimal, "–" for none."""
    if x is None:
        return "–"
    return f"{x:.1f}" if isinstance(x, float) else str(x)


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``bakeoff.compare`` or ``bakeoff.merge`` stage (every ``version``): one page
    per bucket: the vendor table, the pairwise tests and the stamp line."""
    manifest = outputs.get("manifest", {})
    names = manifest.get("bands", {}).get("names", list(BAND_NAMES))
    lines = [f"manifest {manifest.get('knobs_hash', '?')} · gate {manifest.get('gate_mode', '?')} "
             f"({manifest.get('gate_source', 'sums')}) · weights {manifest.get('weights', '?')}", ""]
    level = outputs.get("bootstrap", {}).get("confidence_level")
    ci_head = f"{round(100 * level)}% CI (RSI)" if level else "CI"
    for bucket, entry in outputs.get("buckets", {}).items():
        lines += [f"**bucket `{bucket}`** — ranked by {entry.get('rank_by')}; tie-break overlay: "
                  f"{entry.get('tie_break_overlay')}", "",
                  f"| rank | vendor | n | RSI_pool_env | band | {ci_head} | {'/'.join(names)} shares "
                  "| tokens | lat_ms |",
                  "|---:|---|---:|---:|---|---|---|---:|---:|"]
        for vendor in entry["ranking"]:
            v = entry["vendors"][vendor]
            ci = v.get("ci_rsi")
            ci_text = f"[{format6(ci[0])}, {format6(ci[1])}]" if ci else "–"
            shares = "/".join(f"{s:.2f}" for s in v["band_shares"])
            tokens = v.get("tokens_median", v.get("tokens_mean"))
            lat = v.get("lat_ms_median", v.get("lat_ms_mean"))
            tie = " (tie)" if v.get("tied_with") else ""
            lines.append(f"| {v['rank']}{tie} | {vendor} | {v['n']} | {format6(v['RSI_pool_env'])} | "
                         f"{v['band_pool_env']} | {ci_text} | {shares} | {_one_decimal(tokens)} | {_one_decimal(lat)} |")
        pairs = [p for p in entry.get("pairs", []) if "diff_u" in p]
        if pairs:
            lines += ["", "| pair | Δu | CI (u) | CI (tanh) | p one-tailed | p two-sided | p Holm |",
                      "|---|---:|---|---|---:|---:|---:|"]
            replicates = outputs.get("bootstrap", {}).get("replicates") or 0

            def p_text(value: float, floor: float) -> str:
                # p = 0 only says that no replicate crossed 0: p < floor
                return f"< {floor:.2g}" if value == 0 and floor else f"{value:.4f}"

            for p in pairs:
                ci_tanh = p.get("display", p)["ci_tanh"]  # under display from 1.2.0
                lines.append(f"| {p['a']} − {p['b']} | {format6(p['diff_u'])} | [{format6(p['ci_u'][0])}, "
                             f"{format6(p['ci_u'][1])}] | [{format6(ci_tanh[0])}, {format6(ci_tanh[1])}] | "
                             f"{p_text(p['p_min'], 1 / replicates if replicates else 0)} | "
                             f"{p_text(p['p_two_sided'], 2 / replicates if replicates else 0)} | "
                             f"{p_text(p['p_holm'], 2 * len(pairs) / replicates if replicates else 0)} |")
        lead = entry.get("lead")
        if lead:
            verdict = "significant" if lead["significant"] else "not significant"
            lines += ["", f"Leader {lead['leader']}, lead over {lead['runner_up']} {verdict} "
                          f"(p_Holm = {lead['p_holm']:.4g}, level {lead['alpha']:g})"]
        lines += ["", "```", entry["stamp"], "```", ""]
    return "\n".join(lines).rstrip() + "\n"
