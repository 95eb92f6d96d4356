"""The ratio plot drawn on the process's reused figure gives the bytes of a fresh figure, in any order."""

from __future__ import annotations

import random
import re

import pytest

pytest.importorskip("matplotlib")

from certa.engine.services.presentation.html import plots

QUANTILES = [0.97 + 0.0006 * k + 0.0001 * (k % 7) for k in range(101)]


def _inputs() -> list[dict]:
    delta = {"min": -0.05, "max": 0.03, "mean": 0.0004, "std": 0.02, "degenerate": False}
    cases = []
    for distribution in (QUANTILES, None):
        for gates in ([], [("no-regression", 1.01)], [("a", 0.98), ("b", 1.02), ("c", 1.03), ("d", 1.05)]):
            for drift in (0.98, 1.2):
                cases.append({"ratio": 1.0004, "display_ci": [0.991, 1.0066], "confidence_level": 0.95,
                              "gate_lines": gates, "drift_ratio": drift, "drift_band": [0.95, 1.05],
                              "delta": delta, "distribution": distribution})
    cases.append({**cases[0], "ratio": 3.5, "display_ci": [2.0, 5.0], "confidence_level": 0.9,
                  "delta": {"min": 1.0, "max": 2.0, "mean": 1.5, "std": 0.1}})
    return cases


def _fresh(monkeypatch: pytest.MonkeyPatch, case: dict) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(plots._RatioFigure, "fits", staticmethod(lambda *args: False))
        return plots.ratio_plot("r", **case)


@pytest.mark.slow
def test_reused_ratio_figure_gives_the_bytes_of_a_fresh_figure_in_any_order(monkeypatch):
    cases = _inputs()
    fresh = [_fresh(monkeypatch, case) for case in cases]
    order = list(range(len(cases)))
    for seed in (0, 1):
        random.Random(seed).shuffle(order)
        for i in order:
            assert plots.ratio_plot("r", **cases[i]) == fresh[i], f"case {i} after {order}"


def test_partial_numbers_take_the_fresh_path():
    case = {**_inputs()[0], "drift_ratio": None}
    assert not plots._RatioFigure.fits(case["ratio"], case["display_ci"], case["gate_lines"], None,
                                       case["drift_band"], case["delta"])
    assert plots.ratio_plot("r", **case) == plots.ratio_plot("r", **case)


def test_no_drift_ratio_gives_no_drift_panel():
    """paired.ppl_ratio 1.2.0 records no drift without a phase column: the plot then has two panels, not an
    empty third axis."""
    with_drift = plots.ratio_plot("r", **_inputs()[0])
    without = plots.ratio_plot("r", **{**_inputs()[0], "drift_ratio": None, "drift_band": None})
    assert len(re.findall(r'<g id="r-axes_\d+">', with_drift)) == 3
    assert len(re.findall(r'<g id="r-axes_\d+">', without)) == 2


def test_cached_text_layout_gives_the_bytes_of_matplotlibs_own_svg_canvas(monkeypatch):
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    sequence = {"n": [10, 20, 40], "lower": [-0.5, -0.3, -0.1], "upper": [0.6, 0.35, 0.12], "mean": [0.05, 0.02, 0.01],
                "band": 0.2, "min_effect": 0.3, "stop_n": 40, "decision": "SAME", "clip": None}
    warm = [plots.sequence_plot("s", **sequence), plots.ratio_plot("r", **_inputs()[-1])]  # fills the text cache
    with monkeypatch.context() as patch:
        patch.setattr(plots, "_SVGCanvas", FigureCanvasSVG)  # a new renderer, its own text-to-path, no cache
        stock = [plots.sequence_plot("s", **sequence), plots.ratio_plot("r", **_inputs()[-1])]
    assert warm == stock
