"""bakeoff.compare's and bakeoff.gate's per-decision ledger rows are held as columns (``DecisionColumns``, built
on demand) and encoded column by column, yet every ledger entry is byte for byte what certa 0.4.0 recorded:
the payload is ``canonical_bytes`` of the per-row dict the stage used to build (reference builders below), and
the ledger verifies. Also: the lazily built decisions equal those dicts, and a run's decisions pickle compactly (what a
Dask worker returns)."""

from __future__ import annotations

import hashlib
import itertools
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.services.audit import verify
from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.core.inputs import load_tables
from certa.engine.core.interpreter import execute
from certa.engine.core.spec import load_plan
from certa.engine.core.stages import bakeoff, bakeoff_gate
from certa.engine.core.stages.base import Decision, DecisionColumns
from certa.engine.core.stats.bakeoff.calm_gate import LANES
from certa.engine.core.stats.bakeoff.pool import BAND_NAMES
from certa.engine.core.tables import columns_to_csv_bytes
from certa.ledger import Ledger

from tests.conftest import fresh_postgres_databases

SPEC = """certa: 1
name: bakeoff-ledger-rows
seed: 7
profile: dev
inputs:
  with_ids: {path: with_ids.csv}
  plain: {path: plain.csv}
  telemetry: {path: telemetry.csv}
stages:
  - id: calm
    use: bakeoff.gate
    with: {input: telemetry, references: {lat_p50: 300, lat_p95: 500}}
  - id: cmp
    use: bakeoff.compare
    with: {input: with_ids, weights: column, gate: {mode: mul}, bootstrap: {replicates: 200}}
  - id: cmp-2
    use: bakeoff.compare
    with: {input: plain, gate: {mode: u_scale}, bootstrap: {replicates: 200}}
"""


def old_decision_rows(ctx, data, values, knobs_hash) -> list[Decision]:
    """certa 0.4.0's ``_decision_rows``, verbatim: one dict per input row."""
    seed = str(ctx.seed.get("entropy", "")) if ctx.seed else ""
    table, names = ctx.table("input"), ctx.knobs["columns"]
    item_id, req_id = ((table.text(names[key]).tolist() if table.has(names[key]) else itertools.repeat(None))
                       for key in ("item_id", "req_id"))
    vendor = [data.vendor_ids[c] for c in data.vendor_code.tolist()]
    bucket = [data.bucket_ids[c] for c in data.bucket_code.tolist()]
    band = [BAND_NAMES[b] for b in values.band.tolist()]
    columns = zip(range(len(vendor)), vendor, bucket, data.rsi.tolist(), data.w.tolist(), data.g.tolist(),
                  data.g_flagged.tolist(), values.rsi_env.tolist(), band, values.u_dec.tolist(),
                  values.w_dec.tolist(), item_id, req_id)
    return [Decision("bakeoff_decision", {
        "row": row, "vendor": v, "bucket": b, "RSI": r, "w": w, "g": g, "g_flagged": f, "RSI_env": e, "band": bd,
        "U_dec": u, "W_dec": wd, "item_id": item, "req_id": req, "seed": seed, "knobs_hash": knobs_hash,
    }) for row, v, b, r, w, g, f, e, bd, u, wd, item, req in columns]


def old_gate_rows(table, lanes, result, streams) -> list[Decision]:
    """certa 0.4.0's ``gate_lanes`` rows of ``run_bakeoff_gate``, verbatim."""
    def none_if_nan(values):
        return [None if (v is None or math.isnan(v)) else v for v in values]

    lane_lists = {k: none_if_nan(v.tolist()) if k in lanes else [None] * table.n_rows
                  for k, v in ((k, lanes.get(k, np.empty(0))) for k in LANES)}
    g_sev = none_if_nan(result.g_sev.tolist()) if result.g_sev is not None else [None] * table.n_rows
    columns = zip(range(table.n_rows), streams.tolist(), *(lane_lists[k] for k in LANES),
                  none_if_nan(result.mix.tolist()), none_if_nan(result.g_inst.tolist()), g_sev,
                  result.g.tolist(), result.flagged.tolist())
    return [Decision("gate_lanes", {
        "row": row, "stream": s, "F": f, "D": d, "L": lat, "E": e, "V": v, "Q": q, "mix": mix,
        "g_inst": gi, "g_sev": gs, "g": g, "flag": "LANE_MISSING_TELEMETRY" if fl else None,
    }) for row, s, f, d, lat, e, v, q, mix, gi, gs, g, fl in columns]


@pytest.fixture
def old_rows(monkeypatch: pytest.MonkeyPatch) -> list[list[Decision]]:
    """The reference rows of every per-decision stage run while the fixture is active, stage by stage."""
    made: list[list[Decision]] = []
    for module, name, reference in ((bakeoff, "_decision_rows", old_decision_rows),
                                    (bakeoff_gate, "_lane_rows", old_gate_rows)):
        def both(*args, new=getattr(module, name), reference=reference):
            made.append(reference(*args))
            return new(*args)

        monkeypatch.setattr(module, name, both)
    return made


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    """Values at the encoder's edges: RSI 0, tiny and huge-exponent-free, weights integral and not, g missing
    (flagged), ids with quotes, escapes, '%' and non-ASCII."""
    rng = np.random.default_rng(3)
    n = 600
    rsi = np.round(np.tanh(rng.normal(0.1, 0.5, n)), 6)
    rsi[:6] = [0.0, 1e-5, -3e-7, 0.5, -0.999999, 2.5e-5]
    w = np.where(np.arange(n) % 3 == 0, 1.0, np.round(rng.uniform(0, 4, n), 3))
    g = np.array([repr(x) for x in np.round(rng.uniform(0.2, 1, n), 4).tolist()], dtype=object)
    g[::50] = ""
    with_ids = {"vendor": np.array(["vendor-a", "vendör b", "c%s"])[np.arange(n) % 3],
                "bucket": np.array(["all", "naïve \"q\"", "b\\1"])[rng.integers(0, 3, n)], "rsi": rsi, "w": w, "g": g,
                "item_id": [f"i{k % 7}\u00e9\"\t" for k in range(n)], "req_id": [f"r{k}%d\U0001f600" for k in range(n)]}
    (tmp_path / "with_ids.csv").write_bytes(columns_to_csv_bytes(with_ids))
    (tmp_path / "plain.csv").write_bytes(columns_to_csv_bytes({"vendor": with_ids["vendor"], "rsi": rsi}))
    f_lane = np.array([repr(x) for x in np.round(rng.uniform(0, 0.3, n), 3).tolist()], dtype=object)
    f_lane[::40] = ""
    (tmp_path / "telemetry.csv").write_bytes(columns_to_csv_bytes({
        "vendor": with_ids["vendor"], "F": f_lane, "cos_sim": np.round(rng.uniform(0.8, 1, n), 4),
        "lat_ms": np.round(rng.uniform(250, 600, n), 1), "errors": rng.integers(0, 2, n),
        "calls": rng.integers(1, 4, n), "edit_distance": rng.integers(0, 30, n), "length": rng.integers(50, 200, n)}))
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path):
    """A fresh SQLite file, or a fresh database on the PostgreSQL test server."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    with fresh_postgres_databases("bake-off ledger-row tests") as new_database:
        yield new_database()


def expected_payloads(decisions, old_rows: list[list[Decision]]) -> list[str]:
    """The decision entries certa 0.4.0 wrote: every decision as it was built, its row dicts from the reference."""
    rows = iter(itertools.chain.from_iterable(old_rows))
    expected = []
    for index, made in enumerate(decisions):
        decision = next(rows) if made.decision.kind in ("bakeoff_decision", "gate_lanes") else made.decision
        expected.append(canonical_bytes({"stage": made.stage, "index": index, "kind": decision.kind,
                                         "detail": decision.detail}).decode("utf-8"))
    assert next(rows, None) is None
    return expected


def test_per_decision_rows_are_recorded_byte_for_byte(spec: Path, old_rows, ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        result = run(spec, ledger=ledger)
        recorded = list(ledger.entries(run_id=result.run_id, kinds=["decision"]))
        assert verify(ledger).intact
    assert [len(rows) for rows in old_rows] == [600, 600, 600]
    assert [entry.payload for entry in recorded] == expected_payloads(result.decisions, old_rows)
    assert all(entry.payload_sha256 == hashlib.sha256(entry.payload.encode()).hexdigest() for entry in recorded)
    verified = CliRunner().invoke(main, ["verify", "--ledger", ledger_url])
    assert verified.exit_code == 0, verified.output


def test_lazy_decisions_equal_the_old_dicts(spec: Path, old_rows) -> None:
    result = run(spec)
    rows = [d.decision for d in result.decisions if d.decision.kind in ("bakeoff_decision", "gate_lanes")]
    assert rows == list(itertools.chain.from_iterable(old_rows))
    flat = list(result.decisions)
    assert [result.decisions[k] for k in (0, 1, 599, 600, 601, -1)] == [flat[k] for k in (0, 1, 599, 600, 601, -1)]
    columns = next(part.decisions for part in result.decisions.parts if isinstance(part.decisions, DecisionColumns))
    assert columns[-1] == old_rows[0][-1] and list(columns[2:5]) == old_rows[0][2:5] and columns.kind == "gate_lanes"


def test_run_decisions_pickle_compactly(spec: Path) -> None:
    plan = load_plan(spec)
    decisions = execute(plan, load_tables(plan)).decisions
    packed = pickle.dumps(decisions)
    assert [(d.stage, d.decision) for d in pickle.loads(packed)] == [(d.stage, d.decision) for d in decisions]
    assert len(packed) < len(pickle.dumps(list(decisions))) / 2
