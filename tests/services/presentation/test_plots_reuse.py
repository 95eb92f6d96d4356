"""The ratio plot drawn on the process's reused figure gives the bytes of a fresh figure, in any order."""

from __future__ import annotations

import ast
import os
import random
import re
import subprocess
import sys
from pathlib import Path

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


def test_plots_use_no_private_matplotlib_name():
    """The plots use matplotlib's public API only (the report extra's lower bound is then what the code needs):
    no name starting with an underscore is imported from matplotlib or read as an attribute, and no class
    of matplotlib's is subclassed."""
    tree = ast.parse(Path(plots.__file__).read_text(encoding="utf-8"))
    imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("matplotlib") for alias in node.names}
    assert not [name for name in imported if name.startswith("_")]
    private = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and node.attr.startswith("_") and not node.attr.startswith("__")]
    assert not private, private
    bases = [ast.unparse(base) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for base in node.bases]
    assert not [base for base in bases if base in imported or base.startswith("matplotlib")], bases


def test_the_same_plots_have_the_same_bytes_in_another_process():
    """Two processes with different hash seeds draw byte-identical plots (no salt, date or id from the process)."""
    code = ("from certa.engine.services.presentation.html import plots; import hashlib; "
            "svg = plots.sequence_plot('s', n=[10, 20, 40], lower=[-0.5, -0.3, -0.1], upper=[0.6, 0.35, 0.12], "
            "mean=[0.05, 0.02, 0.01], band=0.2, min_effect=0.3, stop_n=40, decision='SAME', clip=None) + "
            "plots.bakeoff_plot('b', buckets=[('x', [('v1', 0.1, [0.0, 0.2]), ('v2', -0.2, None)])], "
            "band_edges={'A1': 0.1, 'B1': -0.1}, value_label='pooled', colours=plots.vendor_colours(['v1', 'v2'])); "
            "print(hashlib.sha256(svg.encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(digests) == 1 and len(digests.pop()) == 65
