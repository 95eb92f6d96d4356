"""Inline SVG plots of each method's decision (matplotlib, SVG backend, byte-deterministic).

Every function takes plain numbers already read from a certificate (or its ledger decisions) and returns
one ``<svg>`` element as a string, ready to inline in HTML: no XML prologue, no metadata, no external
reference. Determinism: a fixed ``svg.hashsalt``, no ``Date`` metadata, glyphs drawn as paths
(``svg.fonttype = 'path'``: the same picture in every viewer and in print, no font needed) and every ``id``
prefixed by the caller's ``key`` so several plots share one page without id clashes.
Text drawn in a plot becomes paths, never markup, so names from a spec cannot inject anything.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("svg", force=False)

from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)

__all__ = ["ratio_plot", "sequence_plot", "bakeoff_plot", "calm_gate_plot", "pac_bounds_plot", "monitor_plot"]

PASS, FAIL, INK, MUTED, ACCENT, BAND = "#1a7f37", "#cf222e", "#24292f", "#8c959f", "#0969da", "#ddf4ff"
PALETTE = ("#0969da", "#bc4c00", "#8250df", "#1a7f37", "#cf222e", "#6e7781")

_STYLE = {
    "svg.hashsalt": "certa-report",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "legend.frameon": False,
    "legend.fontsize": 7.5,
    "path.simplify": False,
}

_WIDTH = 7.2  # inches: the report column at 96 dpi is about 690 px


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _to_svg(fig: Figure, key: str) -> str:
    """The figure as one inline ``<svg>`` element with ids prefixed by ``key``."""
    buffer = io.StringIO()
    with matplotlib.rc_context(_STYLE):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r"<style[^>]*>.*?</style>\s*", "", text, flags=re.S)  # a global '*' rule: moved to the CSS
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", key) + "-"
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    return text.replace("<svg ", '<svg role="img" ', 1).strip()


def _figure(height: float, rows: int = 1, *, left: float = 0.45, top: float = 0.35, bottom: float = 0.45,
            hspace: float = 0.55, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure of ``rows`` stacked axes with fixed margins in inches (a layout engine would draw the figure
    several times: too slow for a report of many plots)."""
    with matplotlib.rc_context(_STYLE):
        fig = Figure(figsize=(_WIDTH, height))
        axes = fig.subplots(rows, 1, squeeze=False, **kwargs)[:, 0]
        axes_height = max(height - top - bottom - (rows - 1) * hspace, 0.3 * rows) / rows
        fig.subplots_adjust(left=left / _WIDTH, right=1 - 0.2 / _WIDTH, top=1 - top / height, bottom=bottom / height,
                            hspace=hspace / axes_height)
    return fig, axes


def _label_margin(labels: Sequence[str]) -> float:
    """Inches needed left of the axes for y tick labels (DejaVu Sans 8.5 pt: about 0.068 in a character)."""
    return 0.25 + 0.068 * max((len(label) for label in labels), default=0)


def _legend(fig: Figure, axes: Sequence[Any]) -> None:
    """One legend for the whole figure, above the plots (labels deduplicated, first occurrence kept)."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="upper center", bbox_to_anchor=(0.5, 1.0),
                   ncols=min(4, len(seen)), borderaxespad=0.2)


def ratio_plot(key: str, *, ratio: float | None, display_ci: Sequence[float] | None, confidence_level: float | None,
               gate_lines: Sequence[tuple[str, float]], drift_ratio: float | None,
               drift_band: Sequence[float] | None, delta: Mapping[str, Any] | None,
               distribution: Sequence[float] | None = None) -> str:
    """paired.ppl_ratio: the bootstrap distribution of the ratio (its CDF from the recorded quantiles, when the
    stage version records them), the CI and point estimate against the gate thresholds (ratio axis), the
    preview/final ratio against its drift band, and the paired log-loss deltas (min, mean +- sd, max)."""
    with matplotlib.rc_context(_STYLE):
        has_cdf = len([q for q in (distribution or []) if _finite(q) is not None]) > 1
        fig, (top, middle, bottom) = _figure(4.4 if has_cdf else 3.7, rows=3, left=0.75 if has_cdf else 0.2,
                                             top=0.6, hspace=0.6, height_ratios=[1.8 if has_cdf else 1.2, 1, 1])
        level = f"{100 * confidence_level:g}% CI" if confidence_level else "CI"
        top.axvline(1.0, color=MUTED, lw=0.8, ls=":")
        quantiles = [q for q in (distribution or []) if _finite(q) is not None]
        if has_cdf:
            probabilities = [k / (len(quantiles) - 1) for k in range(len(quantiles))]
            top.plot(quantiles, probabilities, color=INK, lw=1.2, label="bootstrap distribution of the ratio (CDF)")
        if display_ci and all(_finite(v) is not None for v in display_ci):
            lo, hi = display_ci
            if has_cdf:
                top.axvspan(lo, hi, color=ACCENT, alpha=0.18, label=f"{level} of the ratio")
            else:
                top.hlines(0, lo, hi, color=ACCENT, lw=5, alpha=0.45, label=f"{level} of the ratio")
        if _finite(ratio) is not None:
            top.plot([ratio], [0.5 if has_cdf else 0], "o", color=ACCENT, ms=6, label="ratio (point estimate)")
        for i, (name, value) in enumerate(gate_lines):
            top.axvline(value, color=FAIL, lw=1.2, ls="--", label=f"gate {name}" if i < 3 else None)
        if has_cdf:
            top.set_ylim(0, 1)
            top.set_yticks([0, 0.5, 1])
            top.set_ylabel("cum. prob.")
        else:
            top.set_yticks([])
        top.set_xlabel("perplexity ratio subject / baseline (final windows)")
        _pad_axis(top, [v for v in [ratio, *(display_ci or []), *(v for _, v in gate_lines), 1.0, *quantiles]])

        if drift_band and all(_finite(v) is not None for v in drift_band):
            middle.axvspan(drift_band[0], drift_band[1], color=BAND, label="drift band")
        if _finite(drift_ratio) is not None:
            inside = drift_band is not None and drift_band[0] <= drift_ratio <= drift_band[1]
            middle.plot([drift_ratio], [0], "D", color=PASS if inside else FAIL, ms=6, label="preview / final ratio")
        middle.set_yticks([])
        middle.set_xlabel("preview / final perplexity ratio")
        _pad_axis(middle, [drift_ratio, *(drift_band or [])])

        if delta:
            lo, hi = _finite(delta.get("min")), _finite(delta.get("max"))
            mean, sd = _finite(delta.get("mean")), _finite(delta.get("std"))
            if lo is not None and hi is not None:
                bottom.hlines(0, lo, hi, color=MUTED, lw=1)
                bottom.plot([lo, hi], [0, 0], "|", color=MUTED, ms=10, label="min / max")
            if mean is not None and sd is not None:
                bottom.hlines(0, mean - sd, mean + sd, color=INK, lw=6, alpha=0.35, label="mean +- sd")
            if mean is not None:
                bottom.plot([mean], [0], "o", color=INK, ms=5, label="token-weighted mean")
            bottom.axvline(0, color=MUTED, lw=0.8, ls=":")
        bottom.set_yticks([])
        bottom.set_xlabel("paired delta of mean log-loss per window (subject - baseline)")
        _legend(fig, (top, middle, bottom))
    return _to_svg(fig, key)


def _pad_axis(ax: Any, values: Sequence[Any]) -> None:
    finite = [v for v in (_finite(x) for x in values) if v is not None]
    if finite:
        lo, hi = min(finite), max(finite)
        pad = (hi - lo) * 0.15 or abs(hi) * 0.01 or 0.01
        ax.set_xlim(lo - pad, hi + pad)


def sequence_plot(key: str, *, n: Sequence[float], lower: Sequence[float], upper: Sequence[float],
                  mean: Sequence[float], band: float | None, min_effect: float | None, stop_n: float | None,
                  decision: str, clip: Sequence[float] | None) -> str:
    """sequential.diff: the confidence sequence [L_n, U_n] at each recorded check, the running mean, the
    equivalence band +-gamma, the minimum effect +-delta*, and the stopping point with its decision."""
    with matplotlib.rc_context(_STYLE):
        fig, (ax,) = _figure(2.8, left=0.8, top=0.3)
        if band is not None:
            ax.axhspan(-band, band, color=BAND, label=f"equivalence band +-{band:g}")
        if min_effect is not None:
            for sign in (1, -1):
                ax.axhline(sign * min_effect, color=FAIL, lw=1, ls="--",
                           label=f"delta* +-{min_effect:g} (DIFFERENT beyond)" if sign == 1 else None)
        ax.axhline(0, color=MUTED, lw=0.8, ls=":")
        if n:
            ax.fill_between(n, lower, upper, step="post", color=ACCENT, alpha=0.25, lw=0, label="confidence sequence")
            ax.step(n, lower, where="post", color=ACCENT, lw=1)
            ax.step(n, upper, where="post", color=ACCENT, lw=1)
            ax.plot(n, mean, color=INK, lw=1, marker=".", ms=3, label="running mean")
        if stop_n is not None:
            colour = PASS if decision in ("SAME", "DIFFERENT") else MUTED
            ax.axvline(stop_n, color=colour, lw=1.4)
            ax.annotate(f"stop at n = {stop_n:g}: {decision}", xy=(stop_n, 1), xycoords=("data", "axes fraction"),
                        xytext=(-4, -2), textcoords="offset points", ha="right", va="top", color=colour,
                        fontweight="bold")
        ax.set_xlabel("observations n (one point per recorded check)")
        ax.set_ylabel("mean score difference")
        _legend(fig, (ax,))
    return _to_svg(fig, key)


def bakeoff_plot(key: str, *, buckets: Sequence[tuple[str, Sequence[tuple[str, float | None, Sequence[float] | None]]]],
                 band_edges: Mapping[str, float], value_label: str) -> str:
    """bakeoff.compare / merge: per bucket, each vendor's pooled value (ranking order, top first) with its
    bootstrap interval when the stage has one, over the band regions (edges of the band rule)."""
    rows = max(1, len(buckets))
    with matplotlib.rc_context(_STYLE):
        heights = [max(1, len(vendors)) for _, vendors in buckets] or [1]
        labels = [f"{i + 1}. {v[0]}" for _, vendors in buckets for i, v in enumerate(vendors)]
        fig, axes = _figure(0.75 + 0.3 * sum(heights) + 0.3 * rows, rows=rows, left=_label_margin(labels), top=0.45,
                            hspace=0.3, height_ratios=heights, sharex=True)
        edges = sorted(float(v) for v in band_edges.values() if _finite(v) is not None)
        for ax, (bucket, vendors) in zip(axes, buckets):
            bounds = [-1.0, *edges, 1.0]
            for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
                ax.axvspan(lo, hi, color="#f6f8fa" if i % 2 else "#eaeef2", lw=0)
            for edge in edges:
                ax.axvline(edge, color=MUTED, lw=0.6)
            ax.axvline(0, color=MUTED, lw=0.6, ls=":")
            for row, (vendor, value, interval) in enumerate(vendors):
                y = len(vendors) - 1 - row
                colour = PALETTE[row % len(PALETTE)]
                if interval and all(_finite(v) is not None for v in interval):
                    ax.hlines(y, interval[0], interval[1], color=colour, lw=4, alpha=0.45)
                if _finite(value) is not None:
                    ax.plot([value], [y], "o", color=colour, ms=5)
            ax.set_yticks(range(len(vendors)), [f"{i + 1}. {v[0]}" for i, v in enumerate(vendors)][::-1])
            ax.set_ylim(-0.7, max(len(vendors), 1) - 0.3)
            ax.set_title(f"bucket {bucket}", loc="left", fontsize=8.5, fontweight="bold")
        axes[-1].set_xlim(-1, 1)
        axes[-1].set_xlabel(f"{value_label} (shaded regions: the band rule's edges)")
        if edges:
            top = axes[0].secondary_xaxis("top")
            names = _band_names_at(band_edges)
            top.set_xticks([(a + b) / 2 for a, b in zip([-1.0, *edges], [*edges, 1.0])], names)
            top.tick_params(length=0)
    return _to_svg(fig, key)


def _band_names_at(band_edges: Mapping[str, float]) -> list[str]:
    """Band names from the lowest region to the highest (an edge names the outer band it opens)."""
    edges = sorted((float(v), k) for k, v in band_edges.items() if _finite(v) is not None)
    negative = [name for value, name in edges if value < 0]
    positive = [name for value, name in edges if value >= 0]
    return [*negative, "A0", *positive]


def calm_gate_plot(key: str, *, g: Sequence[float], g_min: float | None, flagged_rows: Sequence[int],
                   streams: Sequence[str] | None = None) -> str:
    """bakeoff.gate: the calm gate g per decision row (in table order), its floor g_min and the flagged rows."""
    with matplotlib.rc_context(_STYLE):
        fig, (ax,) = _figure(2.2, left=0.6, top=0.3)
        rows = list(range(len(g)))
        ax.plot(rows, g, color=ACCENT, lw=0.8, label="gate g per row")
        if g_min is not None:
            ax.axhline(g_min, color=FAIL, lw=1, ls="--", label=f"g_min {g_min:g}")
        flagged = [r for r in flagged_rows if isinstance(r, int) and 0 <= r < len(g)]
        if flagged:
            ax.plot(flagged, [g[r] for r in flagged], "x", color=FAIL, ms=5, label="flagged rows")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("decision row")
        ax.set_ylabel("g")
        _legend(fig, (ax,))
    return _to_svg(fig, key)


def pac_bounds_plot(key: str, *, metrics: Sequence[str], scopes: Sequence[str],
                    bounds: Mapping[tuple[str, str], tuple[float | None, float | None, float | None]],
                    thresholds: Sequence[tuple[str, str, float]] = ()) -> str:
    """conformal.pac_report: per metric and scope (class or marginal) the leave-one-out rate and its PAC
    bound [lower, upper]; gate thresholds on a metric are dashed red ticks."""
    return _interval_panel(key, metrics=metrics, scopes=scopes, intervals=bounds, point_label="calibration rate (LOO)",
                           interval_label="PAC bound", thresholds=thresholds)


def monitor_plot(key: str, *, metrics: Sequence[str], scopes: Sequence[str],
                 bounds: Mapping[tuple[str, str], tuple[float | None, float | None, float | None]],
                 inside: Mapping[tuple[str, str], bool]) -> str:
    """conformal.monitor: each production rate (point: green inside, red outside) against the bound it is
    compared to (bar)."""
    return _interval_panel(key, metrics=metrics, scopes=scopes, intervals=bounds, point_label="production rate",
                           interval_label="bound compared to", inside=inside)


def _interval_panel(key: str, *, metrics: Sequence[str], scopes: Sequence[str],
                    intervals: Mapping[tuple[str, str], tuple[float | None, float | None, float | None]],
                    point_label: str, interval_label: str, thresholds: Sequence[tuple[str, str, float]] = (),
                    inside: Mapping[tuple[str, str], bool] | None = None) -> str:
    with matplotlib.rc_context(_STYLE):
        fig, axes = _figure(0.75 + (0.2 * len(scopes) + 0.55) * len(metrics), rows=len(metrics),
                            left=_label_margin(scopes), top=0.3, hspace=0.55)
        for ax, metric in zip(axes, metrics):
            values: list[Any] = []
            for row, scope in enumerate(scopes):
                y = len(scopes) - 1 - row
                point, lo, hi = intervals.get((metric, scope), (None, None, None))
                colour = PALETTE[row % len(PALETTE)]
                if _finite(lo) is not None and _finite(hi) is not None:
                    ax.hlines(y, lo, hi, color=colour, lw=5, alpha=0.4, label=interval_label if row == 0 else None)
                    ax.plot([lo, hi], [y, y], "|", color=colour, ms=9)
                if _finite(point) is not None:
                    marker_colour = colour
                    if inside is not None:
                        marker_colour = PASS if inside.get((metric, scope), False) else FAIL
                    ax.plot([point], [y], "o", color=marker_colour, ms=5, label=point_label if row == 0 else None)
                values += [point, lo, hi]
            for scope, gated_metric, value in thresholds:
                if gated_metric == metric and scope in scopes:
                    y = len(scopes) - 1 - list(scopes).index(scope)
                    ax.vlines(value, y - 0.4, y + 0.4, color=FAIL, lw=1.4, ls="--", label="gate threshold")
                    values.append(value)
            ax.set_yticks(range(len(scopes)), list(scopes)[::-1])
            ax.set_ylim(-0.6, len(scopes) - 0.4)
            ax.set_title(metric, loc="left", fontsize=8.5, fontweight="bold")
            _pad_axis(ax, [*values, 0.0] if metric in ("abstention", "doublet", "error_given_singleton") else values)
        axes[-1].set_xlabel("rate")
        _legend(fig, axes)
    return _to_svg(fig, key)
