"""Stages bakeoff.compare and bakeoff.merge: E5 end to end, stamps, ledger rows, manifest, input errors,
order and shard invariance through the stages, verify checks, Markdown, and the example spec."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from certa.engine import run
from certa.engine.foundation.canonical import to_jsonable
from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.spec import fill_defaults
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.bakeoff import STAGE as COMPARE
from certa.engine.core.stages.bakeoff import audit_bakeoff
from certa.engine.services.presentation.stages.bakeoff import markdown
from certa.engine.core.stages.bakeoff_merge import STAGE as MERGE
from certa.engine.core.stages.base import StageContext
from certa.engine.core.tables import parse_table, table_from_columns
from certa.schemas import load_schema

ROOT = Path(__file__).resolve().parents[3]
HASH = "f" * 64
E5 = {"vendor": ["A"] * 3 + ["B"] * 3,
      "rsi": [0.604368, 0.291313, 0.910425, 0.691069, 0.462117, 0.291313],
      "g": [0.8] * 6}


def run_stage(stage, tables, knobs, *, upstream=None, knobs_hash=HASH):
    schema = load_schema(stage.schema_file)
    resolved = fill_defaults(knobs, schema)
    ctx = StageContext(stage_id="s", knobs=resolved, tables=tables, rng=np.random.default_rng(1), profile="dev",
                       upstream=upstream or {}, seed={"knobs_hash": knobs_hash, "entropy": "42"})
    out = stage.run(ctx)
    return to_jsonable(out.outputs), out.decisions


def compare(columns, **knobs):
    knobs = {"input": "d", "bootstrap": {"replicates": 500}, **knobs}
    return run_stage(COMPARE, {"d": table_from_columns("d", columns)}, knobs)


def test_registered_with_their_schemas():
    for name in ("bakeoff.compare", "bakeoff.gate", "bakeoff.merge"):
        schema = load_schema(REGISTRY[name].schema_file)
        assert schema["$id"] == f"urn:certa:schema:stages:{name}" and schema["additionalProperties"] is False


def test_e5_through_the_stage():
    out, decisions = compare(E5)
    bucket = out["buckets"]["all"]
    a, b = bucket["vendors"]["A"], bucket["vendors"]["B"]
    assert a["RSI_pool"] == pytest.approx(0.687571, abs=1e-6) and a["band_pool"] == "A+"
    assert a["RSI_pool_env"] == pytest.approx(0.510478, abs=1e-6) and a["band_pool_env"] == "A0"
    assert b["RSI_pool"] == pytest.approx(0.500520, abs=1e-6) and b["band_pool"] == "A0"
    assert b["RSI_pool_env"] == pytest.approx(0.393545, abs=1e-6) and b["band_pool_env"] == "A0"
    assert a["band_counts"] == [0, 1, 2, 0, 0] and b["band_counts"] == [0, 0, 3, 0, 0]
    assert bucket["ranking"] == ["A", "B"] and bucket["leader"] == "A"
    pair = bucket["pairs"][0]
    assert (pair["a"], pair["b"]) == ("A", "B") and pair["diff_rsi"] == pytest.approx(0.116933, abs=2e-6)
    assert not pair["significant"]


def test_stamp_line_has_fixed_fields_six_decimals_and_the_knobs_hash():
    out, _ = compare(E5)
    stamp = out["buckets"]["all"]["stamp"]
    assert stamp == ("SSMBO|bucket=all|A.U=2.530003|A.W=3.000000|A.RSI_pool=0.687571|A.U_env=1.690130|"
                     "A.RSI_pool_env=0.510479|B.U=1.649999|B.W=3.000000|B.RSI_pool=0.500520|B.U_env=1.247965|"
                     f"B.RSI_pool_env=0.393545|g=0.800000|mode=mul|manifest={HASH}")
    assert out["stamps"] == [stamp]
    # every number recomputes from the recorded outputs (seed C7: "every stamp parses and recomputes")
    fields = dict(part.split("=", 1) for part in stamp.split("|")[1:])
    assert float(fields["A.RSI_pool"]) == pytest.approx(out["buckets"]["all"]["vendors"]["A"]["RSI_pool"], abs=5e-7)


def test_manifest_lists_the_frozen_knobs_and_the_run_hash():
    out, _ = compare(E5, eps_a=1e-9, gate={"mode": "u_scale"})
    manifest = out["manifest"]
    assert manifest["knobs_hash"] == HASH and manifest["knobs_hash_source"] == "run"
    assert manifest["eps_a"] == 1e-9 and manifest["eps_w"] == 1e-12 and manifest["weights"] == "uniform"
    assert manifest["gate_mode"] == "u_scale" and manifest["gate_source"] == "column 'g'"
    assert manifest["bands"]["edges"] == {"A++": 0.9, "A+": 0.6, "A-": -0.6, "A--": -0.9}
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["frozen_sha256"])


def test_one_ledger_row_per_decision_plus_one_stamp_per_bucket():
    columns = {**E5, "item_id": [f"i{k}" for k in range(6)], "req_id": [f"r{k}" for k in range(6)]}
    out, decisions = compare(columns)
    rows = [d.detail for d in decisions if d.kind == "bakeoff_decision"]
    assert len(rows) == 6 and [d.kind for d in decisions].count("bakeoff_stamp") == 1
    first = rows[0]
    assert set(first) >= {"RSI", "w", "g", "RSI_env", "band", "U_dec", "W_dec", "seed", "knobs_hash", "vendor",
                          "bucket", "row"}
    assert (first["row"], first["vendor"], first["bucket"], first["item_id"], first["req_id"]) == (0, "A", "all", "i0",
                                                                                                  "r0")
    assert first["RSI"] == 0.604368 and first["g"] == 0.8 and first["band"] == "A0" and first["W_dec"] == 1.0
    assert first["U_dec"] == pytest.approx(0.7, abs=5e-6) and first["RSI_env"] == pytest.approx(0.483494, abs=1e-6)
    assert first["seed"] == "42" and first["knobs_hash"] == HASH
    _, few = compare(E5, ledger_rows="per_bucket")
    assert [d.kind for d in few] == ["bakeoff_stamp"]


@pytest.mark.parametrize("column, value, message", [
    ("rsi", "nan", r"column 'rsi', row 2: value 'nan' is missing or not finite"),
    ("rsi", "", r"column 'rsi', row 2: value '' is missing"),
    ("rsi", "1.0", r"row 2: RSI must lie in \(-1, 1\) \(got 1.0"),
    ("rsi", "-1.5", r"row 2: RSI must lie in \(-1, 1\) \(got -1.5"),
    ("w", "-0.5", r"column 'w', row 2: weights must be in \[0, 1e15\] \(got -0.5\)"),
    ("w", "nan", r"column 'w', row 2: value 'nan' is missing or not finite"),
    ("vendor", "A|B", r"column 'vendor', row 2: id 'A\|B' must be non-empty and contain no '\|'"),
])
def test_bad_inputs_raise_errors_naming_row_column_and_value(column, value, message):
    columns = {**E5, "w": [1.0] * 6}
    columns[column] = list(columns[column])
    columns[column][1] = value
    with pytest.raises(InputError, match=message):
        compare(columns, weights="column")


def test_unknown_or_repeated_vendors_in_pairs_and_single_vendor_inputs_are_refused():
    with pytest.raises(StageError, match=r"'pairs\[1\]': unknown vendor 'C'; vendors in the data: A, B"):
        compare(E5, pairs=[["A", "B"], ["A", "C"]])
    with pytest.raises(StageError, match="compared with itself"):
        compare(E5, pairs=[["A", "A"]])
    with pytest.raises(StageError, match="at least 2 vendors .* allow_single_vendor"):
        compare({"vendor": ["A", "A"], "rsi": [0.1, 0.2]})
    single, decisions = compare({"vendor": ["A", "A"], "rsi": [0.1, 0.2]}, allow_single_vendor=True)
    assert single["buckets"]["all"]["leader"] is None and single["input"]["single_vendor"] is True
    assert decisions[0].kind == "single_vendor" and "pairs" in single["buckets"]["all"]
    with pytest.raises(StageError, match="band edges"):
        compare(E5, bands={"A+": 0.95})


def test_bad_gate_cells_fall_back_to_one_and_are_flagged():
    columns = {**E5, "g": [0.8, "", 1.7, -0.1, "nan", 0.8]}
    out, decisions = compare(columns)
    rows = [d.detail for d in decisions if d.kind == "bakeoff_decision"]
    assert [r["g_flagged"] for r in rows] == [False, True, True, True, True, False]
    assert [r["g"] for r in rows] == [0.8, 1.0, 1.0, 1.0, 1.0, 0.8]
    assert out["input"]["g_flagged"] == 4 and out["buckets"]["all"]["vendors"]["A"]["g_flagged"] == 2


def test_weights_column_pools_by_hand():
    columns = {"vendor": ["A", "A", "B", "B"], "rsi": [0.5, -0.2, 0.3, 0.3], "w": [3.0, 1.0, 1.0, 0.0]}
    out, _ = compare(columns, weights="column")
    a = out["buckets"]["all"]["vendors"]["A"]
    assert a["RSI_pool"] == pytest.approx(np.tanh((3 * np.arctanh(0.5) + np.arctanh(-0.2)) / 4), abs=1e-15)
    assert out["buckets"]["all"]["vendors"]["B"]["W"] == 1.0


def test_missing_vendor_in_a_bucket_is_reported_not_compared():
    columns = {"vendor": ["A", "B", "C", "A", "B"], "bucket": ["x", "x", "x", "y", "y"],
               "rsi": [0.1, 0.2, 0.3, 0.4, 0.5]}
    out, _ = compare(columns)
    pairs_y = out["buckets"]["y"]["pairs"]
    assert [(p["a"], p["b"]) for p in pairs_y if "diff_u" in p] == [("A", "B")]
    assert {(p["a"], p["b"], p["reason"]) for p in pairs_y if "diff_u" not in p} == {
        ("A", "C", "vendor_absent_in_bucket"), ("B", "C", "vendor_absent_in_bucket")}


def _bakeoff_table(seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    return {"vendor": rng.choice(["a", "b", "c"], n).tolist(), "bucket": rng.choice(["h1", "h2"], n).tolist(),
            "rsi": np.round(np.tanh(rng.normal(0.3, 0.6, n)), 6).clip(-0.999999, 0.999999).tolist(),
            "g": np.round(rng.uniform(0.5, 1.0, n), 4).tolist(), "tokens": rng.integers(100, 900, n).tolist(),
            "lat_ms": np.round(rng.uniform(100, 900, n), 1).tolist()}


def _pool_view(out):
    return {(b, v): (x["U"], x["W"], x["U_env"], x["RSI_pool"], x["RSI_pool_env"], x["band_counts"])
            for b, e in out["buckets"].items() for v, x in e["vendors"].items()}


def test_shuffled_rows_give_identical_pools_and_stamps():
    columns = _bakeoff_table(1)
    order = np.random.default_rng(2).permutation(len(columns["rsi"]))
    shuffled = {k: [v[i] for i in order] for k, v in columns.items()}
    out, _ = compare(columns)
    out2, _ = compare(shuffled)
    assert _pool_view(out) == _pool_view(out2) and out["stamps"] == out2["stamps"] and out["sums"] == out2["sums"]


def _sums_table(name, rows):
    raw = ("\n".join(json.dumps(r) for r in rows) + "\n").encode()
    return parse_table(name, raw, "jsonl")


def test_merged_shards_give_exactly_the_unsharded_run():
    columns = _bakeoff_table(3)
    full, _ = compare(columns)
    n = len(columns["rsi"])
    cuts = [0, 70, 71, 400, n]
    tables = {}
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        part, _ = compare({c: v[lo:hi] for c, v in columns.items()}, allow_single_vendor=True)
        tables[f"shard{k}"] = _sums_table(f"shard{k}", part["sums"])
    merged, decisions = run_stage(MERGE, tables, {"shards": list(tables)})
    assert _pool_view(merged) == _pool_view(full)
    assert merged["stamps"] == full["stamps"]  # same pools, same knobs_hash -> same stamp lines
    assert merged["sums"] == full["sums"]
    assert [s["decisions"] for s in merged["shards"]] == [70, 1, 329, n - 400]
    assert decisions[0].kind == "bakeoff_merge" and merged["buckets"]["h1"]["tie_break_overlay"] == "mean"
    # shards by vendor (each vendor's traffic logged apart) merge the same way
    by_vendor = {}
    for vendor in ("a", "b", "c"):
        rows = [i for i, v in enumerate(columns["vendor"]) if v == vendor]
        part, _ = compare({c: [v[i] for i in rows] for c, v in columns.items()}, allow_single_vendor=True)
        by_vendor[vendor] = _sums_table(vendor, part["sums"])
    merged_v, _ = run_stage(MERGE, by_vendor, {"shards": ["c", "a", "b"]})
    assert _pool_view(merged_v) == _pool_view(full) and merged_v["stamps"] == full["stamps"]
    # a merge of merges is a merge
    again, _ = run_stage(MERGE, {"m": _sums_table("m", merged["sums"])}, {"shards": ["m"]})
    assert _pool_view(again) == _pool_view(full)


def test_merge_refuses_shards_pooled_under_other_knobs_and_malformed_tables():
    part, _ = compare(E5)
    table = _sums_table("s", part["sums"])
    with pytest.raises(StageError, match="pooled under frozen knobs"):
        run_stage(MERGE, {"s": table}, {"shards": ["s"], "eps_a": 1e-9})
    with pytest.raises(InputError, match="appears twice"):
        run_stage(MERGE, {"s": _sums_table("s", part["sums"] * 2)}, {"shards": ["s"]})
    with pytest.raises(InputError, match="not a bake-off sums table"):
        run_stage(MERGE, {"d": table_from_columns("d", E5)}, {"shards": ["d"]})


def test_verify_identities_hold_and_catch_tampering():
    out, _ = compare(_bakeoff_table(4))
    assert audit_bakeoff(out) == []
    tampered = json.loads(json.dumps(out))
    tampered["buckets"]["h1"]["vendors"]["a"]["RSI_pool"] += 1e-12
    assert any("RSI_pool != tanh" in p for p in audit_bakeoff(tampered))
    tampered = json.loads(json.dumps(out))
    tampered["buckets"]["h2"]["stamp"] = tampered["buckets"]["h2"]["stamp"].replace("mode=mul", "mode=u_scale")
    assert any("stamp does not recompute" in p for p in audit_bakeoff(tampered))
    tampered = json.loads(json.dumps(out))
    tampered["buckets"]["h2"]["pairs"][0]["p_two_sided"] = tampered["buckets"]["h2"]["pairs"][0]["p_min"]
    assert any("p_two_sided" in p for p in audit_bakeoff(tampered))


def test_markdown_shows_the_one_page_table_pairs_and_stamp():
    out, _ = compare(E5)
    text = markdown(out, COMPARE.version)
    header = "| rank | vendor | n | RSI_pool_env | band | 95% CI (RSI) | A++/A+/A0/A-/A-- shares | tokens | lat_ms |"
    assert header in text
    assert "| 1 | A | 3 | 0.510479 | A0 |" in text and "| A − B | 0.147388 |" in text
    assert out["stamps"][0] in text
    assert out["table"][0] == {"bucket": "all", "vendor": "A", "rank": 1, "RSI_pool_env": out["buckets"]["all"][
        "vendors"]["A"]["RSI_pool_env"], "band_pool_env": "A0", "ci_rsi": out["buckets"]["all"]["vendors"]["A"][
        "ci_rsi"], "band_shares": [0.0, 1 / 3, 2 / 3, 0.0, 0.0]}  # no tokens or lat_ms column: no such cells


def test_gate_from_an_upstream_stage_must_match_rows_and_mode():
    upstream = {"calm": {"g": [0.8] * 6, "flagged_rows": [2], "mode": "mul"}}
    table = {"d": table_from_columns("d", {k: v for k, v in E5.items() if k != "g"})}
    out, decisions = run_stage(COMPARE, table, {"input": "d", "gate": {"from": "calm"},
                                                "bootstrap": {"replicates": 200}}, upstream=upstream)
    assert out["buckets"]["all"]["vendors"]["A"]["RSI_pool_env"] == pytest.approx(0.510478, abs=1e-6)
    assert out["manifest"]["gate_source"] == "stage 'calm'" and out["input"]["g_flagged"] == 1
    with pytest.raises(StageError, match="set gate.mode: mul"):
        run_stage(COMPARE, table, {"input": "d", "gate": {"from": "calm", "mode": "u_scale"}}, upstream=upstream)
    with pytest.raises(StageError, match="5 gate values but input 'd' has 6 rows"):
        run_stage(COMPARE, table, {"input": "d", "gate": {"from": "calm"}},
                  upstream={"calm": {"g": [0.8] * 5, "mode": "mul"}})
    with pytest.raises(StageError, match="no earlier bakeoff.gate stage"):
        run_stage(COMPARE, table, {"input": "d", "gate": {"from": "nope"}})


def test_hysteresis_knob_changes_band_counts_but_not_pools():
    columns = {"vendor": ["A"] * 4 + ["B"], "rsi": [0.65, 0.59, 0.585, 0.57, 0.1]}
    plain, _ = compare(columns)
    held, _ = compare(columns, hysteresis={})
    a, a_held = plain["buckets"]["all"]["vendors"]["A"], held["buckets"]["all"]["vendors"]["A"]
    assert a["band_counts"] == [0, 1, 3, 0, 0] and a_held["band_counts"] == [0, 3, 1, 0, 0]
    assert a["RSI_pool"] == a_held["RSI_pool"]
    assert held["manifest"]["hysteresis"] == {"h_up": 0.02, "h_dn": 0.02}


def test_example_spec_runs_end_to_end_and_the_merge_agrees_with_the_full_run():
    result = run(ROOT / "specs" / "vendor-bakeoff" / "spec.yaml", ledger=None)
    assert result.verdict == "PASS"
    stages = result.certificate["content"]["stages"]
    e5 = stages["cmp"]["buckets"]["e5"]["vendors"]
    assert e5["vendor-a"]["RSI_pool_env"] == pytest.approx(0.510478, abs=1e-6)
    assert e5["vendor-b"]["band_counts"] == [0, 0, 3, 0, 0]
    assert _pool_view(stages["merged"]) == _pool_view(stages["cmp"])
    assert stages["merged"]["stamps"] == stages["cmp"]["stamps"]
    knobs_hash = result.certificate["content"]["knobs_hash"]
    assert all(s.endswith(f"manifest={knobs_hash}") for s in stages["live"]["stamps"])
    assert stages["live"]["manifest"]["gate_source"] == "stage 'calm'"
    assert audit_bakeoff(stages["cmp"]) == [] and audit_bakeoff(stages["merged"]) == []
    kinds = [d.decision.kind for d in result.decisions]
    assert kinds.count("bakeoff_decision") == stages["cmp"]["input"]["rows"]
    assert kinds.count("gate_lanes") == stages["calm"]["n_rows"]
