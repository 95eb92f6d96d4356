"""Write the example's window tables (deterministic): python3 make_data.py

Each arm has 400 preview and 400 final windows of 128–1024 unmasked tokens with non-overlapping token
spans. The subject's per-token log-loss is the baseline's plus a small regression (+0.01 nats on average)
and window-level noise, so the certified ratio is about 1.01.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

N_PER_PHASE = 400
HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(20261121)
    rows_base, rows_subj = [], []
    offset = 0
    for phase in ("preview", "final"):
        tokens = rng.integers(128, 1025, size=N_PER_PHASE)
        difficulty = rng.normal(2.5, 0.3, size=N_PER_PHASE)
        base = difficulty + rng.normal(0.0, 0.05, size=N_PER_PHASE)
        subj = base + 0.01 + rng.normal(0.0, 0.04, size=N_PER_PHASE)
        for i in range(N_PER_PHASE):
            window = {"window_id": f"{phase[0]}{i:04d}", "phase": phase, "tokens": int(tokens[i]),
                      "start": offset, "end": offset + int(tokens[i])}
            offset += int(tokens[i])
            rows_base.append({**window, "mean_nll": f"{base[i]:.6f}"})
            rows_subj.append({**window, "mean_nll": f"{subj[i]:.6f}"})
    (HERE / "data").mkdir(exist_ok=True)
    for name, rows in (("baseline.csv", rows_base), ("subject.csv", rows_subj)):
        with open(HERE / "data" / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
