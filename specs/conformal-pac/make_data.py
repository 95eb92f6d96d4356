"""Write the example's calibration and production tables (deterministic): python3 make_data.py

A binary classifier scores two populations with a 70/30 class split: p1 ~ Beta(2, 5) for true class 0
and p1 ~ Beta(5, 2) for true class 1, rounded to 4 decimals (so there are ties). ``calibration.csv``
(1,200 labelled rows) feeds ``conformal.pac_report``; ``production.csv`` (2,000 labelled rows drawn
later from the same populations) feeds ``conformal.monitor``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIZES = {"calibration.csv": 1200, "production.csv": 2000}


def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = (rng.random(n) < 0.3).astype(int)
    p1 = np.where(labels == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))
    return labels, np.round(p1, 4)


def main() -> None:
    rng = np.random.default_rng(20261121)
    (HERE / "data").mkdir(exist_ok=True)
    for name, n in SIZES.items():
        labels, p1 = draw(rng, n)
        with open(HERE / "data" / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["label", "p1"])
            writer.writerows((int(y), f"{p:.4f}") for y, p in zip(labels, p1))


if __name__ == "__main__":
    main()
