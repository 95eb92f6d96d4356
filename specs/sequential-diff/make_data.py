"""Write the example's data files deterministically: ``python specs/sequential-diff/make_data.py``.

* ``data/finetune_scores.csv``: per-prompt delta-CE of a fine-tuned model against its base (mean 0.03).
* ``data/reference_logprobs.csv`` / ``data/quantized_logprobs.csv``: per-position log-probabilities of the
  teacher-forced token under a reference model and its int8-quantized copy (200 prompts x 8 positions);
  the quantized copy differs by noise of about 0.004 nats per position.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _write(name: str, header: list[str], rows: list[list[str]]) -> None:
    lines = [",".join(header)] + [",".join(r) for r in rows]
    (HERE / "data" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    rng = np.random.default_rng(20261121)
    (HERE / "data").mkdir(exist_ok=True)

    finetune = rng.normal(0.03, 0.01, size=200)
    _write("finetune_scores.csv", ["prompt_id", "score"],
           [[f"ft{i:04d}", f"{s:.6f}"] for i, s in enumerate(finetune)])

    prompts, positions = 200, 8
    reference = -rng.gamma(2.0, 1.0, size=(prompts, positions))
    quantized = reference + rng.normal(-0.001, 0.004, size=(prompts, positions))
    for name, values in (("reference_logprobs.csv", reference), ("quantized_logprobs.csv", quantized)):
        _write(name, ["prompt_id", "position", "logprob"],
               [[f"q{p:04d}", str(k), f"{values[p, k]:.6f}"] for p in range(prompts) for k in range(positions)])


if __name__ == "__main__":
    main()
