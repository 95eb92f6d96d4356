"""Write the example data of specs/vendor-bakeoff deterministically (run from anywhere).

data/decisions.csv  one row per decision: bucket, vendor, rsi, g, tokens, lat_ms, ids and raw telemetry.
                    Bucket ``e5`` is the seed's worked example E5 (vendors A and B, 3 decisions each,
                    g = 0.80); buckets ``decode_hour_14`` and ``rag_docs`` hold 120 synthetic decisions
                    per vendor for three vendors.
data/shard_1.jsonl  the ``sums`` rows of bakeoff.compare over the even rows of decisions.csv,
data/shard_2.jsonl  and over the odd rows: what two shards would publish. ``bakeoff.merge`` on them
                    gives exactly the pools of the full run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from certa.engine.foundation.canonical import to_jsonable  # noqa: E402
from certa.engine.core.spec import fill_defaults  # noqa: E402
from certa.engine.core.stages.base import StageContext  # noqa: E402
from certa.engine.core.stages.bakeoff import STAGE  # noqa: E402
from certa.engine.core.tables import columns_to_csv_bytes, table_from_columns  # noqa: E402
from certa.schemas import load_schema  # noqa: E402

E5 = {  # seed 002, E5: printed per-decision RSI (6 dp), w = 1, g = 0.80
    "vendor-a": [0.604368, 0.291313, 0.910425],
    "vendor-b": [0.691069, 0.462117, 0.291313],
}
# (bucket, vendor) -> (mean rapidity, spread, median tokens, median latency ms, gate stress)
SYNTHETIC = {
    ("decode_hour_14", "vendor-a"): (0.62, 0.45, 410, 310, 0.10),
    ("decode_hour_14", "vendor-b"): (0.42, 0.45, 450, 345, 0.15),
    ("decode_hour_14", "vendor-c"): (0.58, 0.50, 380, 290, 0.30),
    ("rag_docs", "vendor-a"): (0.35, 0.40, 820, 540, 0.12),
    ("rag_docs", "vendor-b"): (0.37, 0.40, 760, 505, 0.12),
    ("rag_docs", "vendor-c"): (0.20, 0.55, 700, 480, 0.25),
}
PER_GROUP = 120
SHARD_KNOBS = {"input": "decisions", "bootstrap": {"replicates": 100}, "ledger_rows": "per_bucket"}


def decisions(rng: np.random.Generator) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in ("req_id", "item_id", "bucket", "vendor", "rsi", "g", "tokens", "lat_ms",
                                             "F", "cos_sim", "errors", "calls", "edit_distance", "length", "queue")}

    def add(bucket: str, vendor: str, rsi: float, g: float | str, tokens: int | str, lat: float | str, f: float,
            cos: float,
            errors: int, calls: int, edit: int, length: int, queue: int) -> None:
        i = len(cols["req_id"])
        for key, value in (("req_id", f"r{i:05d}"), ("item_id", f"{bucket}-{i % 60:03d}"), ("bucket", bucket),
                           ("vendor", vendor), ("rsi", rsi), ("g", g), ("tokens", tokens), ("lat_ms", lat),
                           ("F", f), ("cos_sim", cos), ("errors", errors), ("calls", calls),
                           ("edit_distance", edit), ("length", length), ("queue", queue)):
            cols[key].append(value)

    for vendor, values in E5.items():
        for rsi in values:
            add("e5", vendor, rsi, 0.8, "", "", 0.0, 1.0, 0, 1, 0, 1, 0)  # E5 prints no tokens / latency
    for (bucket, vendor), (mu, spread, tok, lat, stress) in SYNTHETIC.items():
        u = rng.normal(mu, spread, PER_GROUP)
        rsi = np.round(np.tanh(u), 6).clip(-0.999999, 0.999999)
        g = np.round(np.clip(1.0 - rng.beta(2.0, 2.0 / stress, PER_GROUP), 0.0, 1.0), 6)
        tokens = np.round(tok * rng.lognormal(0.0, 0.25, PER_GROUP)).astype(int)
        latency = np.round(lat * rng.lognormal(0.0, 0.3, PER_GROUP), 1)
        f = np.round(rng.beta(1.0, 1.0 / stress, PER_GROUP) * 0.5, 4)
        cos = np.round(1.0 - rng.gamma(2.0, 0.02 * (1 + stress), PER_GROUP), 4)
        calls = rng.integers(1, 6, PER_GROUP)
        errors = rng.binomial(calls, stress / 3)
        length = rng.integers(200, 900, PER_GROUP)
        edit = rng.binomial(length, stress / 5)
        queue = rng.poisson(20 * (1 + stress), PER_GROUP)
        for k in range(PER_GROUP):
            cell: float | str = float(g[k])
            if k % 40 == 7:
                cell = ""  # missing telemetry: the stage uses g = 1 and flags the row
            add(bucket, vendor, float(rsi[k]), cell, int(tokens[k]), float(latency[k]), float(f[k]), float(cos[k]),
                int(errors[k]), int(calls[k]), int(edit[k]), int(length[k]), int(queue[k]))
    return cols


def shard_sums(cols: dict[str, list], rows: list[int]) -> list[dict]:
    part = {k: [v[i] for i in rows] for k, v in cols.items()}
    knobs = fill_defaults(dict(SHARD_KNOBS), load_schema("stages/bakeoff.compare.schema.json"))
    ctx = StageContext(stage_id="shard", knobs=knobs, tables={"decisions": table_from_columns("decisions", part)},
                       rng=np.random.default_rng(0), profile="dev", upstream={}, seed={})
    return to_jsonable(STAGE.run(ctx).outputs)["sums"]


def main() -> None:
    cols = decisions(np.random.default_rng(20261121))
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    (data / "decisions.csv").write_bytes(columns_to_csv_bytes(cols))
    n = len(cols["req_id"])
    for name, rows in (("shard_1.jsonl", list(range(0, n, 2))), ("shard_2.jsonl", list(range(1, n, 2)))):
        lines = [json.dumps(row, sort_keys=True, separators=(",", ":")) for row in shard_sums(cols, rows)]
        (data / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
