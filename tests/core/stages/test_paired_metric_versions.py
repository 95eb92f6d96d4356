"""``paired.metric_delta`` 1.1.0 against the frozen 1.0.0 (issue 30): the non-inferiority verdict comes from the
printed interval, and the bootstrap does not depend on the order of the export's rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from certa.engine import run
from certa.engine.core.stages.paired_metric import STAGE
from certa.engine.core.stats.paired_metric import PairedTable, newcombe_interval, tango_interval

STAGE_ID = "delta"


def spec(knobs: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """A one-stage spec on in-memory per-item tables, pinned to ``version`` when given."""
    use = "paired.metric_delta" + (f"@{version}" if version else "")
    return {"certa": 1, "name": "metric-delta", "seed": 11, "profile": "dev",
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": STAGE_ID, "use": use,
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "correct", **knobs}}]}


def stage_outputs(knobs: dict[str, Any], tables: dict[str, dict[str, np.ndarray]],
                  version: str | None = None) -> dict[str, Any]:
    result = run(spec(knobs, version), inputs=tables)
    (stage,) = result.certificate["content"]["knobs"]["stages"]
    assert stage["version"] == (version or STAGE.version)
    return result.certificate["content"]["stages"][STAGE_ID]


def items_of(table: PairedTable) -> dict[str, dict[str, np.ndarray]]:
    """Per-item tables whose paired 2×2 table is ``table`` (ids i000, ...)."""
    cells = np.repeat([(1, 1), (1, 0), (0, 1), (0, 0)], [table.n11, table.n10, table.n01, table.n00], axis=0)
    ids = np.array([f"i{i:03d}" for i in range(len(cells))], dtype=object)
    return {"baseline": {"item_id": ids, "correct": cells[:, 1].astype(float)},
            "subject": {"item_id": ids, "correct": cells[:, 0].astype(float)}}


# ------------------------------------------------------------------------ item 6: interval and verdict agree


REPORTED = PairedTable(0, 6, 1, 3)
"""Issue 30's table (n11, n10, n01, n00): Newcombe's 95 % lower bound +0.0036, Tango's p = 0.027 at δ = 0.01."""


def test_1_1_0_declares_noninferior_when_the_printed_newcombe_interval_clears_the_margin() -> None:
    out = stage_outputs({"method": "newcombe", "margin": 0.01}, items_of(REPORTED), version="1.1.0")
    low = float(newcombe_interval(REPORTED, 0.95).low)
    assert out["difference"]["ci"][0] == low == out["noninferiority"]["lower_bound"] and low > -0.01
    assert out["noninferiority"]["noninferior"] is True
    assert "Newcombe" in out["noninferiority"]["method"] and "p_value" not in out["noninferiority"]


def test_1_0_0_stays_frozen_and_decides_by_tangos_test_against_its_printed_interval() -> None:
    """The contradiction issue 30 reports, kept for replay: lower bound +0.0036 printed, verdict NO."""
    out = stage_outputs({"method": "newcombe", "margin": 0.01}, items_of(REPORTED), version="1.0.0")
    assert round(out["difference"]["ci"][0], 4) == 0.0036
    assert out["noninferiority"] == {"margin": 0.01, "null": "subject worse by 0.01 or more (Δ ≤ −0.01)",
                                     "method": "Tango score test", "alpha": 0.025,
                                     "p_value": pytest.approx(0.02713, abs=5e-6), "noninferior": False}


@pytest.mark.parametrize("cells", [(0, 6, 1, 3), (20, 12, 2, 16), (4, 9, 3, 16), (1, 1, 7, 12)])
@pytest.mark.parametrize("margin", [0.0, 0.03, 0.2])
def test_1_1_0_tango_verdict_p_value_and_printed_interval_say_the_same(cells: tuple[int, ...],
                                                                       margin: float) -> None:
    table = PairedTable(*cells)
    out = stage_outputs({"margin": margin}, items_of(table), version="1.1.0")
    ni = out["noninferiority"]
    assert out["difference"]["ci"][0] == float(tango_interval(table, 0.95).low) == ni["lower_bound"]
    assert ni["noninferior"] is (ni["lower_bound"] > -margin) is (ni["p_value"] < ni["alpha"])
    assert ni["method"].startswith("Tango score test, inverting the printed Tango interval")


# ------------------------------------------------------------------ item 4: the bootstrap ignores row order


def permuted(tables: dict[str, dict[str, np.ndarray]], order: str, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Copies of both sides' rows sorted by id, reversed, or shuffled (each side on its own)."""
    out = {}
    for offset, (side, columns) in enumerate(tables.items()):
        ids = columns["item_id"]
        index = {"sorted": np.argsort(ids.astype(str)), "reversed": np.argsort(ids.astype(str))[::-1],
                 "shuffled": np.random.default_rng(seed + offset).permutation(ids.size)}[order]
        out[side] = {name: values[index] for name, values in columns.items()}
    return out


def scored_items(n: int = 60, seed: int = 4) -> dict[str, dict[str, np.ndarray]]:
    """F1-like scores on {0, 0.25, ..., 1}, ids in a scrambled order (q-ids drawn without replacement)."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"q{i:03d}" for i in rng.permutation(n)], dtype=object)
    baseline = rng.integers(0, 5, n) / 4
    subject = np.clip(baseline + rng.choice([-0.25, 0.0, 0.25], n, p=[0.3, 0.5, 0.2]), 0, 1)
    return {"baseline": {"item_id": ids, "correct": baseline}, "subject": {"item_id": ids, "correct": subject}}


BCA = {"scale": "bounded", "range": [0, 1], "replicates": 400, "margin": 0.05}


def test_1_1_0_sorted_reversed_and_shuffled_copies_give_one_bootstrap_interval_and_verdict() -> None:
    items = scored_items()
    runs = [stage_outputs(BCA, permuted(items, order, seed), version="1.1.0")
            for order in ("sorted", "reversed", "shuffled") for seed in (1, 2)]
    runs.append(stage_outputs(BCA, items, version="1.1.0"))
    for other in runs[1:]:
        assert other["difference"] == runs[0]["difference"]
        assert other["noninferiority"] == runs[0]["noninferiority"]
        assert (other["baseline_mean"], other["subject_mean"]) == (runs[0]["baseline_mean"], runs[0]["subject_mean"])


def test_1_0_0_bootstrap_follows_the_rows_order_and_stays_frozen() -> None:
    """Why 1.1.0 exists: the same items reversed move 1.0.0's BCa interval (the estimate stays)."""
    items = scored_items()
    forward = stage_outputs(BCA, permuted(items, "sorted", 0), version="1.0.0")["difference"]
    backward = stage_outputs(BCA, permuted(items, "reversed", 0), version="1.0.0")["difference"]
    assert forward["estimate"] == pytest.approx(backward["estimate"], abs=1e-15)
    assert forward["ci"] != backward["ci"]


@pytest.mark.parametrize("method", ["tango", "newcombe"])
def test_binary_outputs_of_1_1_0_do_not_depend_on_the_rows_order(method: str) -> None:
    items = items_of(PairedTable(30, 7, 4, 19))
    knobs = {"method": method, "margin": 0.05}
    runs = [stage_outputs(knobs, permuted(items, order, 3), version="1.1.0")
            for order in ("sorted", "reversed", "shuffled")]
    assert all({k: v for k, v in run_.items() if k != "sources"} == {k: v for k, v in runs[0].items()
                                                                    if k != "sources"} for run_ in runs)
