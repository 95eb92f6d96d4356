"""Final width of the bounded confidence sequences at n = 10^4 (issue 30, item 7): is ``betting`` as tight as
``eb_cs``?

Run: ``cd /work/main && PYTHONPATH=. python3 bench/confseq_width.py``

Scores in [0, 1] from four distributions (seed 1; one stream each, the same for every method), alpha 0.05 and
0.01: the width U_n - L_n after the last observation of ``betting`` with the default grid (1000 candidate
means) and with a grid of 10^4, and of ``eb_cs`` (the reference: the ratio printed is betting / eb_cs).
docs/sequential.md ("Which is tighter") tabulates one run.
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.confseq.betting import betting_cs
from certa.engine.core.stats.confseq.eb import eb_cs

N = 10_000


def streams(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The score streams, in [0, 1]."""
    return {"Beta(2, 5)": rng.beta(2, 5, N), "Bernoulli(0.1)": (rng.random(N) < 0.1).astype(np.float64),
            "Uniform(0, 1)": rng.random(N), "N(0.5, 0.05^2) clipped": np.clip(rng.normal(0.5, 0.05, N), 0, 1)}


def main() -> None:
    print(f"final width at n = {N:,} (scores in [0, 1], seed 1); ratio = betting / eb_cs")
    print(f"  {'scores':<24} {'alpha':>5}  {'betting 1000':>12}  {'betting 1e4':>12}  {'eb_cs':>8}  ratios")
    for name, scores in streams(np.random.default_rng(1)).items():
        for alpha in (0.05, 0.01):
            widths = [float(cs.upper[-1] - cs.lower[-1]) for cs in (
                betting_cs(scores, alpha, 0.0, 1.0, grid_size=1000),
                betting_cs(scores, alpha, 0.0, 1.0, grid_size=10_000), eb_cs(scores, alpha, 0.0, 1.0))]
            ratios = " / ".join(f"{w / widths[2]:.2f}" for w in widths[:2])
            print(f"  {name:<24} {alpha:>5}  {widths[0]:>12.4f}  {widths[1]:>12.4f}  {widths[2]:>8.4f}  {ratios}")


if __name__ == "__main__":
    main()
