"""Inline SVG plots of each method's decision (matplotlib, SVG backend, byte-deterministic, public API only).

Every function takes plain numbers already read from a certificate (or its ledger decisions) and returns
one ``<svg>`` element as a string, ready to inline in HTML: no XML prologue, no metadata, no external
reference. Determinism, from matplotlib's documented settings only (so any matplotlib the ``report`` extra
allows draws the same way): a fixed ``svg.hashsalt``, no ``Date`` metadata, glyphs drawn as paths
(``svg.fonttype = 'path'``: the same picture in every viewer and in print, no font needed) and every ``id``
prefixed by the caller's ``key`` so several plots share one page without id clashes.
Text drawn in a plot becomes paths, never markup, so names from a spec cannot inject anything; control and
bidi characters (U+202E ...) are removed from every string a plot is given before it is drawn (``_shown``).

matplotlib is imported on the first plot (``_matplotlib``), not with this module: the stage presentation
modules that import it also hold ``certa show --explain``'s texts, which need no extra.

Speed (``certa site`` draws thousands of plots in a process): the ratio plot is drawn on one reused figure per
layout (``_RatioFigure``), which changes no byte (``tests/services/presentation/test_plots_reuse.py``).
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from certa.engine.services.presentation.display_text import plain_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ratio_plot", "sequence_plot", "bakeoff_plot", "calm_gate_plot", "pac_bounds_plot", "monitor_plot",
           "difference_plot", "DifferenceRow", "DECISION_COLOURS", "vendor_colours", "VENDOR_GID"]

PASS, FAIL, INK, MUTED, ACCENT, BAND = "#1a7f37", "#cf222e", "#24292f", "#8c959f", "#0969da", "#ddf4ff"
MARGIN = "#bc4c00"
"""The non-inferiority limit −δ (orange: not a gate threshold, which is red)."""
UNDECIDED = "#bf8700"
"""Amber: the report's colour of an inconclusive outcome (report.css ``--inconclusive-line``)."""
DECISION_COLOURS = {"NONINFERIOR": PASS, "UNDECIDED": UNDECIDED, "INFERIOR": FAIL}
"""A task's non-inferiority decision as a forest plot colours its marks (the report's PASS, INCONCLUSIVE and FAIL
colours)."""
PALETTE = ("#0969da", "#bc4c00", "#8250df", "#1a7f37", "#cf222e", "#6e7781")
VENDOR_PALETTE = ("#0969da", "#bc4c00", "#8250df", "#1a7f37", "#bf3989", "#4d2d00", "#1b7c83", "#6e7781")
"""Vendor colours (blue, orange, purple, green, pink, brown, teal, grey): distinct for up to 8 vendors."""

VENDOR_GID = "vendor{index}-row{row}"
"""The ``id`` (before the plot's prefix) of the SVG group of one vendor's marks in a bake-off plot: ``index`` is
the vendor's position in the run's sorted vendor list, ``row`` counts the plot's rows (unique ids)."""


def vendor_colours(vendors: Sequence[str]) -> dict[str, str]:
    """One colour per vendor, assigned in sorted order of the run's vendor ids, so that a vendor has the same
    colour in every bucket and every bake-off plot of a run (colours repeat beyond ``VENDOR_PALETTE``)."""
    return {v: VENDOR_PALETTE[i % len(VENDOR_PALETTE)] for i, v in enumerate(sorted(set(vendors)))}

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


@functools.cache
def _matplotlib() -> Any:
    """matplotlib (the ``report`` extra), imported on the first plot, with the SVG backend unless a backend
    was already chosen."""
    import matplotlib

    matplotlib.use("svg", force=False)
    return matplotlib


def _style() -> Any:
    """The plots' style (``_STYLE``) as a context: every figure is built and saved inside it."""
    return _matplotlib().rc_context(_STYLE)


def _shown(text: Any) -> str:
    """A string as a plot draws it: without control and bidi characters (``plain_text``). Every string a plot
    shows that comes from a spec or its data (stage, gate, vendor, bucket, band, metric, scope and slice names)
    passes here before matplotlib sees it, so none of those characters reaches the glyph paths nor the comment
    matplotlib writes before them."""
    return plain_text(str(text))


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _to_svg(fig: Figure, key: str) -> str:
    """The figure as one inline ``<svg>`` element with ids prefixed by ``key``."""
    buffer = io.StringIO()
    with _style():
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
    with _style():
        from matplotlib.figure import Figure

        fig = Figure(figsize=(_WIDTH, height))
        axes = fig.subplots(rows, 1, squeeze=False, **kwargs)[:, 0]
        axes_height = max(height - top - bottom - (rows - 1) * hspace, 0.3 * rows) / rows
        fig.subplots_adjust(left=left / _WIDTH, right=1 - 0.2 / _WIDTH, top=1 - top / height, bottom=bottom / height,
                            hspace=hspace / axes_height)
    return fig, axes


def _label_margin(labels: Sequence[str]) -> float:
    """Inches needed left of the axes for y tick labels (DejaVu Sans 8.5 pt: about 0.068 in a character)."""
    return 0.25 + 0.068 * max((len(label) for label in labels), default=0)


def _legend(fig: Figure, axes: Sequence[Any], columns: int = 4) -> int:
    """One legend for the whole figure, above the plots (labels deduplicated, first occurrence kept), in at
    most ``columns`` columns; returns its number of rows."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="upper center", bbox_to_anchor=(0.5, 1.0),
                   ncols=min(columns, len(seen)), borderaxespad=0.2)
    return -(-len(seen) // columns)


def ratio_plot(key: str, *, ratio: float | None, display_ci: Sequence[float] | None, confidence_level: float | None,
               gate_lines: Sequence[tuple[str, float]], drift_ratio: float | None,
               drift_band: Sequence[float] | None, delta: Mapping[str, Any] | None,
               distribution: Sequence[float] | None = None, per: str | None = None) -> str:
    """paired.ppl_ratio: the bootstrap distribution of the ratio (its CDF from the recorded quantiles, when the
    stage version records them), the CI and point estimate against the gate thresholds (ratio axis), the
    preview/final ratio against its drift band (a panel only when the stage recorded a drift ratio), and the
    paired log-loss deltas (min, mean +- sd, max) per counted ``per`` (``token``, ``byte``, ``word``; None: a
    version that records no unit, whose counts are named only "count")."""
    weighted, delta_label = _delta_labels(per)
    gate_lines = [(_shown(name), value) for name, value in gate_lines]
    with _style():
        has_cdf = len([q for q in (distribution or []) if _finite(q) is not None]) > 1
        has_drift = _finite(drift_ratio) is not None
        if _RatioFigure.fits(ratio, display_ci, gate_lines, drift_ratio, drift_band, delta):
            figure = _RATIO_FIGURES.get(has_cdf)
            if figure is None:
                figure = _RATIO_FIGURES[has_cdf] = _RatioFigure(has_cdf)
            figure.update(ratio=ratio, display_ci=display_ci, confidence_level=confidence_level, gate_lines=gate_lines,
                          drift_ratio=drift_ratio, drift_band=drift_band, delta=delta,
                          quantiles=[q for q in (distribution or []) if _finite(q) is not None], per=per)
            return _to_svg(figure.fig, key)
        heights = [1.8 if has_cdf else 1.2, *([1] if has_drift else []), 1]
        fig, axes = _figure((4.4 if has_cdf else 3.7) - (0 if has_drift else 0.85), rows=len(heights),
                            left=0.75 if has_cdf else 0.2, top=0.6, hspace=0.6, height_ratios=heights)
        top, bottom = axes[0], axes[-1]
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
        _ratio_axis(top, has_cdf)
        _pad_axis(top, [v for v in [ratio, *(display_ci or []), *(v for _, v in gate_lines), 1.0, *quantiles]])

        if has_drift:
            middle = axes[1]
            if drift_band and all(_finite(v) is not None for v in drift_band):
                middle.axvspan(drift_band[0], drift_band[1], color=BAND, label="drift band")
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
                bottom.plot([mean], [0], "o", color=INK, ms=5, label=weighted)
            bottom.axvline(0, color=MUTED, lw=0.8, ls=":")
        bottom.set_yticks([])
        bottom.set_xlabel(delta_label)
        _legend(fig, axes)
    return _to_svg(fig, key)


class _RatioFigure:
    """The ``ratio_plot`` figure of one layout (with or without the CDF), kept for the whole process.

    Building a figure (axes, ticks, spines, artists) is about a third of a plot's time; ``certa site`` draws
    thousands of ratio plots. When every number is there (``fits``), the plot is drawn on this figure: the
    artists are made once, in the order ``ratio_plot`` makes them, and each call sets their data, labels and
    limits (data limits are recomputed from this call's points only, the legend is made again), so the bytes
    are those of a fresh figure whatever was drawn before (tested against the fresh path).
    """

    def __init__(self, has_cdf: bool) -> None:
        self.has_cdf = has_cdf
        fig, (top, middle, bottom) = _figure(4.4 if has_cdf else 3.7, rows=3, left=0.75 if has_cdf else 0.2,
                                             top=0.6, hspace=0.6, height_ratios=[1.8 if has_cdf else 1.2, 1, 1])
        self.fig, self.axes = fig, (top, middle, bottom)
        top.axvline(1.0, color=MUTED, lw=0.8, ls=":")
        if has_cdf:
            self.cdf = top.plot([0.0, 1.0], [0.0, 1.0], color=INK, lw=1.2,
                                label="bootstrap distribution of the ratio (CDF)")[0]
            self.ci = top.axvspan(0.0, 1.0, color=ACCENT, alpha=0.18)
        else:
            self.ci = top.hlines(0, 0.0, 1.0, color=ACCENT, lw=5, alpha=0.45)
        self.point = top.plot([1.0], [0.5 if has_cdf else 0], "o", color=ACCENT, ms=6, label="ratio (point estimate)")[0]
        self.gates: list[Any] = []
        _ratio_axis(top, has_cdf)
        self.band = middle.axvspan(0.0, 1.0, color=BAND, label="drift band")
        self.drift = middle.plot([1.0], [0], "D", color=PASS, ms=6, label="preview / final ratio")[0]
        middle.set_yticks([])
        middle.set_xlabel("preview / final perplexity ratio")
        self.range_line = bottom.hlines(0, 0.0, 1.0, color=MUTED, lw=1)
        self.range_ticks = bottom.plot([0.0, 1.0], [0, 0], "|", color=MUTED, ms=10, label="min / max")[0]
        self.sd = bottom.hlines(0, 0.0, 1.0, color=INK, lw=6, alpha=0.35, label="mean +- sd")
        self.mean = bottom.plot([0.0], [0], "o", color=INK, ms=5, label=_delta_labels(None)[0])[0]
        bottom.axvline(0, color=MUTED, lw=0.8, ls=":")
        bottom.set_yticks([])
        bottom.set_xlabel("paired delta of mean log-loss per window (subject - baseline)")

    @staticmethod
    def fits(ratio: Any, display_ci: Any, gate_lines: Sequence[tuple[str, Any]], drift_ratio: Any, drift_band: Any,
             delta: Mapping[str, Any] | None) -> bool:
        """True when every number of the plot is finite (the fresh path covers the partial cases)."""
        pairs = [display_ci, drift_band]
        return (_finite(ratio) is not None and _finite(drift_ratio) is not None
                and all(p is not None and len(p) == 2 and all(_finite(v) is not None for v in p) for p in pairs)
                and all(_finite(v) is not None for _, v in gate_lines)
                and bool(delta) and all(_finite(delta.get(k)) is not None for k in ("min", "max", "mean", "std")))

    def update(self, *, ratio: float, display_ci: Sequence[float], confidence_level: float | None,
               gate_lines: Sequence[tuple[str, float]], drift_ratio: float, drift_band: Sequence[float],
               delta: Mapping[str, Any], quantiles: Sequence[float], per: str | None) -> None:
        top, middle, bottom = self.axes
        weighted, delta_label = _delta_labels(per)
        self.mean.set_label(weighted)
        bottom.set_xlabel(delta_label)
        level = f"{100 * confidence_level:g}% CI" if confidence_level else "CI"
        lo, hi = display_ci
        top_points = [(1.0, 0.0), (lo, 0.0), (hi, 0.0), (ratio, 0.0)]
        if self.has_cdf:
            probabilities = [k / (len(quantiles) - 1) for k in range(len(quantiles))]
            self.cdf.set_data(quantiles, probabilities)
            _move_span(self.ci, lo, hi)
            top_points += list(zip(quantiles, probabilities))
        else:
            self.ci.set_segments([[(lo, 0), (hi, 0)]])
        self.ci.set_label(f"{level} of the ratio")
        self.point.set_data([ratio], [0.5 if self.has_cdf else 0])
        while len(self.gates) < len(gate_lines):
            self.gates.append(top.axvline(0.0, color=FAIL, lw=1.2, ls="--"))
        for i, line in enumerate(self.gates):
            shown = i < len(gate_lines)
            line.set_visible(shown)
            line.set_label(f"gate {gate_lines[i][0]}" if shown and i < 3 else "_nolegend_")
            if shown:
                line.set_xdata([gate_lines[i][1]] * 2)
                top_points.append((gate_lines[i][1], 0.0))
        _pad_axis(top, [ratio, *display_ci, *(v for _, v in gate_lines), 1.0, *quantiles])

        _move_span(self.band, drift_band[0], drift_band[1])
        self.drift.set_data([drift_ratio], [0])
        self.drift.set_color(PASS if drift_band[0] <= drift_ratio <= drift_band[1] else FAIL)
        _pad_axis(middle, [drift_ratio, *drift_band])

        d_lo, d_hi, mean, sd = (float(delta[k]) for k in ("min", "max", "mean", "std"))
        self.range_line.set_segments([[(d_lo, 0), (d_hi, 0)]])
        self.range_ticks.set_data([d_lo, d_hi], [0, 0])
        self.sd.set_segments([[(mean - sd, 0), (mean + sd, 0)]])
        self.mean.set_data([mean], [0])
        bottom_points = [(d_lo, 0.0), (d_hi, 0.0), (mean - sd, 0.0), (mean + sd, 0.0), (mean, 0.0), (0.0, 0.0)]

        for ax, points in ((top, top_points), (middle, [(drift_ratio, 0.0), *((v, 0.0) for v in drift_band)]),
                           (bottom, bottom_points)):
            ax.ignore_existing_data_limits = True  # only this call's data, as on a new figure
            ax.update_datalim(points)
            ax.autoscale_view()
        for legend in list(self.fig.legends):
            legend.remove()
        _legend(self.fig, self.axes)


_RATIO_FIGURES: dict[bool, _RatioFigure] = {}


def _delta_labels(per: str | None) -> tuple[str, str]:
    """(legend of the weighted mean, x label) of the deltas panel, for windows counted in ``per``."""
    if per is None:
        return "count-weighted mean", "paired delta of mean log-loss per window (subject - baseline)"
    return f"{per}-weighted mean", f"paired delta of mean log-loss per {per}, per window (subject - baseline)"


def _move_span(span: Any, lo: float, hi: float) -> None:
    """Move a patch ``axvspan`` made to cover [``lo``, ``hi``] in x (the full height of its axes): a ``Rectangle``
    since matplotlib 3.9, a closed ``Polygon`` of the same corners before (the ``report`` extra allows 3.8)."""
    if hasattr(span, "set_width"):
        span.set_x(lo)
        span.set_width(hi - lo)
    else:
        span.set_xy([(lo, 0.0), (lo, 1.0), (hi, 1.0), (hi, 0.0)])


def _ratio_axis(top: Any, has_cdf: bool) -> None:
    """The ratio panel's y axis (cumulative probability of the bootstrap CDF, or none) and its x label."""
    if has_cdf:
        top.set_ylim(0, 1)
        top.set_yticks([0, 0.5, 1])
        top.set_ylabel("cum. prob.")
    else:
        top.set_yticks([])
    top.set_xlabel("perplexity ratio subject / baseline (final windows)")


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
    with _style():
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
            ax.annotate(f"stop at n = {stop_n:g}: {_shown(decision)}", xy=(stop_n, 1), xycoords=("data", "axes fraction"),
                        xytext=(-4, -2), textcoords="offset points", ha="right", va="top", color=colour,
                        fontweight="bold")
        ax.set_xlabel("observations n (one point per recorded check)")
        ax.set_ylabel("mean score difference")
        _legend(fig, (ax,))
    return _to_svg(fig, key)


def bakeoff_plot(key: str, *, buckets: Sequence[tuple[str, Sequence[tuple[str, float | None, Sequence[float] | None]]]],
                 band_edges: Mapping[str, float], value_label: str, colours: Mapping[str, str]) -> str:
    """bakeoff.compare / merge: per bucket, each vendor's pooled value (ranking order, top first) with its
    bootstrap interval when the stage has one, over the band regions (edges of the band rule). ``colours``
    (``vendor_colours`` of the run) gives each vendor its colour; a legend names them, and each vendor's marks
    are one SVG group with the id ``VENDOR_GID`` (its index in the sorted ``colours``)."""
    rows = max(1, len(buckets))
    index = {vendor: i for i, vendor in enumerate(sorted(colours))}
    with _style():
        heights = [max(1, len(vendors)) for _, vendors in buckets] or [1]
        labels = [f"{i + 1}. {_shown(v[0])}" for _, vendors in buckets for i, v in enumerate(vendors)]
        fig, axes = _figure(1.05 + 0.3 * sum(heights) + 0.3 * rows, rows=rows, left=_label_margin(labels), top=0.45,
                            bottom=0.75, hspace=0.3, height_ratios=heights, sharex=True)
        edges = sorted(float(v) for v in band_edges.values() if _finite(v) is not None)
        row_count = 0
        for ax, (bucket, vendors) in zip(axes, buckets):
            bounds = [-1.0, *edges, 1.0]
            for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
                ax.axvspan(lo, hi, color="#f6f8fa" if i % 2 else "#eaeef2", lw=0)
            for edge in edges:
                ax.axvline(edge, color=MUTED, lw=0.6)
            ax.axvline(0, color=MUTED, lw=0.6, ls=":")
            for row, (vendor, value, interval) in enumerate(vendors):
                y = len(vendors) - 1 - row
                colour = colours.get(vendor, MUTED)
                gid = VENDOR_GID.format(index=index.get(vendor, -1), row=row_count)
                row_count += 1
                if interval and all(_finite(v) is not None for v in interval):
                    ax.hlines(y, interval[0], interval[1], color=colour, lw=4, alpha=0.45, gid=f"{gid}-interval")
                if _finite(value) is not None:
                    ax.plot([value], [y], "o", color=colour, ms=5, gid=gid)
            ax.set_yticks(range(len(vendors)), [f"{i + 1}. {_shown(v[0])}" for i, v in enumerate(vendors)][::-1])
            ax.set_ylim(-0.7, max(len(vendors), 1) - 0.3)
            ax.set_title(f"bucket {_shown(bucket)}", loc="left", fontsize=8.5, fontweight="bold")
        axes[-1].set_xlim(-1, 1)
        axes[-1].set_xlabel(f"{_shown(value_label)} (shaded regions: the band rule's edges)")
        if edges:
            top = axes[0].secondary_xaxis("top")
            names = _band_names_at(band_edges)
            top.set_xticks([(a + b) / 2 for a, b in zip([-1.0, *edges], [*edges, 1.0])], names)
            top.tick_params(length=0)
        shown = sorted({vendor for _, vendors in buckets for vendor, _, _ in vendors})
        if shown:
            from matplotlib.lines import Line2D

            handles = [Line2D([], [], ls="none", marker="o", ms=5, color=colours.get(v, MUTED)) for v in shown]
            fig.legend(handles, [_shown(v) for v in shown], loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=min(6, len(shown)),
                       borderaxespad=0.2, title="vendor (one colour each in every plot of the run)",
                       title_fontsize=7.5)
    return _to_svg(fig, key)


def _band_names_at(band_edges: Mapping[str, float]) -> list[str]:
    """Band names from the lowest region to the highest (an edge names the outer band it opens)."""
    edges = sorted((float(v), k) for k, v in band_edges.items() if _finite(v) is not None)
    negative = [name for value, name in edges if value < 0]
    positive = [name for value, name in edges if value >= 0]
    return [_shown(name) for name in (*negative, "A0", *positive)]


def model_nll_plot(key: str, *, nll: Mapping[str, float | None], unit: str) -> str:
    """model.windows: each model's mean log-loss per token (or byte) on the same windows, one bar per model."""
    names = list(nll)
    labels = [_shown(name) for name in names]
    with _style():
        fig, (ax,) = _figure(0.9 + 0.35 * max(1, len(names)), left=_label_margin(labels), top=0.2)
        values = [_finite(nll[name]) for name in names]
        ax.barh(range(len(names)), [v or 0.0 for v in values], color=ACCENT, height=0.5)
        for y, v in enumerate(values):
            if v is not None:
                ax.text(v, y, f" {v:.4g}", va="center", fontsize=7.5)
        ax.set_yticks(range(len(names)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(f"mean negative log-likelihood per {_shown(unit)} (nats)")
    return _to_svg(fig, key)


def calm_gate_plot(key: str, *, g: Sequence[float], g_min: float | None, flagged_rows: Sequence[int],
                   streams: Sequence[str] | None = None) -> str:
    """bakeoff.gate: the calm gate g per decision row (in table order), its floor g_min and the flagged rows."""
    with _style():
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
    labels = [_shown(scope) for scope in scopes]
    with _style():
        fig, axes = _figure(0.75 + (0.2 * len(scopes) + 0.55) * len(metrics), rows=len(metrics),
                            left=_label_margin(labels), top=0.3, hspace=0.55)
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
            ax.set_yticks(range(len(scopes)), labels[::-1])
            ax.set_ylim(-0.6, len(scopes) - 0.4)
            ax.set_title(_shown(metric), loc="left", fontsize=8.5, fontweight="bold")
            _pad_axis(ax, [*values, 0.0] if metric in ("abstention", "doublet", "error_given_singleton") else values)
        axes[-1].set_xlabel("rate")
        _legend(fig, axes)
    return _to_svg(fig, key)


DifferenceRow = tuple[str, float | None, Sequence[float] | None]
"""One row of a forest plot: (label, point estimate, [low, high])."""

_LABEL_CHARS = 36
"""Names from a spec or its data (slices, gates) longer than this are cut with an ellipsis in a forest plot's
row labels and legend, so the plot keeps its width."""


def difference_plot(key: str, *, overall: DifferenceRow, slices: Sequence[DifferenceRow] = (),
                    confidence_level: float | None, margin: float | None,
                    gate_lines: Sequence[tuple[str, float]] = (), value_label: str,
                    names: tuple[str, str] = ("overall", "slice"), row_margins: Sequence[float | None] = (),
                    decisions: Sequence[str | None] = ()) -> str:
    """paired.metric_delta, paired.suite_delta: a forest plot of the paired difference subject − baseline, the
    overall estimate with its interval (diamond, first row) and, below it, each slice's estimate with its
    unadjusted interval; a line at 0 (no difference), a dashed line at −``margin`` (the non-inferiority limit,
    when a margin was set) and the gate thresholds on the difference or its interval (dashed red). The legend,
    in three columns above the plot, takes the rows it needs.

    ``names`` words the first row and the others in the legend (``("pooled", "task")``); ``row_margins`` draws
    each slice's own −margin as a dashed tick on its row (per-task margins: ``margin`` None); ``decisions`` colours
    each slice's marks by its non-inferiority decision (``DECISION_COLOURS``: NONINFERIOR green, UNDECIDED amber,
    INFERIOR red; None or another word: ink)."""
    rows = [overall, *slices]
    labels = [_short_label(name) for name, _, _ in rows]
    level = f"{100 * confidence_level:g}% CI" if _finite(confidence_level) is not None else "CI"
    first_name, row_name = names
    body, bottom = 0.35 + 0.27 * len(rows), 0.5
    with _style():
        fig, (ax,) = _figure(body + 0.5 + bottom, left=_label_margin(labels), top=0.5, bottom=bottom)
        values: list[Any] = [0.0]
        shown: set[str] = set()
        for row, (_, estimate, interval) in enumerate(rows):
            y = len(rows) - 1 - row
            first = row == 0
            decision = None if first or row > len(decisions) else decisions[row - 1]
            colour = ACCENT if first else DECISION_COLOURS.get(str(decision), INK)
            named = decision in DECISION_COLOURS
            if interval is not None and len(interval) == 2 and all(_finite(v) is not None for v in interval):
                label = (f"{level}, {first_name}" if first else f"{level}, {row_name} {decision}" if named
                         else f"{level} per {row_name} (unadjusted)")
                ax.hlines(y, interval[0], interval[1], color=colour, lw=4 if first else 2.5, alpha=0.45,
                          label=label if (row < 2 or named) and label not in shown else None)
                shown.add(label)
                ax.plot(list(interval), [y, y], "|", color=colour, ms=9 if first else 7)
                values += list(interval)
            if _finite(estimate) is not None:
                label = f"difference, {first_name}" if first else f"difference per {row_name}"
                ax.plot([estimate], [y], "D" if first else "o", color=INK if named else colour, ms=7 if first else 4.5,
                        label=label if row < 2 else None)
                values.append(estimate)
            own = None if first or row > len(row_margins) else _finite(row_margins[row - 1])
            if own is not None:
                ax.vlines(-own, y - 0.38, y + 0.38, color=MARGIN, lw=1.3, ls="--",
                          label=f"−margin of each {row_name} (non-inferiority)" if row == 1 else None)
                values.append(-own)
        if slices:
            ax.axhline(len(rows) - 1.5, color=MUTED, lw=0.6)
        ax.axvline(0.0, color=MUTED, lw=1, label="0: no difference")
        if _finite(margin) is not None:
            ax.axvline(-margin, color=MARGIN, lw=1.3, ls="--", label=f"−margin −{margin:g} (non-inferiority)")
            values.append(-margin)
        for i, (name, value) in enumerate(gate_lines):
            ax.axvline(value, color=FAIL, lw=1.2, ls="--", label=f"gate {_short_label(name)}" if i < 3 else None)
            values.append(value)
        ax.set_yticks(range(len(rows)), labels[::-1])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        _pad_axis(ax, values)
        ax.set_xlabel(_shown(value_label))
        top = 0.2 + 0.17 * _legend(fig, (ax,), columns=3)
        height = body + top + bottom
        fig.set_size_inches(_WIDTH, height)
        fig.subplots_adjust(top=1 - top / height, bottom=bottom / height)
    return _to_svg(fig, key)


def _short_label(name: str) -> str:
    """A name as a forest plot draws it (``_shown``), cut to ``_LABEL_CHARS`` characters."""
    text = _shown(name)
    return text if len(text) <= _LABEL_CHARS else text[:_LABEL_CHARS - 1] + "…"
