"""Recorded runs of ``paired.metric_delta`` for the report tests, the browser tests and the documentation screenshot.

Two specs, written into a folder: ``lm_eval_spec`` reads the real lm-evaluation-harness fixtures
(tests/data/evaluators/lm_eval: the samples of task ``certa_mc`` with their results companion, which states the
tool, task and model), ``sliced_spec`` a per-item CSV table with a category column (four slices, one item
unpaired on each side, a gate on the interval's lower end).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LM_EVAL = ROOT / "tests" / "data" / "evaluators" / "lm_eval"
SLICES = ("arithmetic", "geography", "reading comprehension", "logic")
SLICE_EFFECTS = (0.08, 0.0, 0.03, -0.07)
"""The subject's change in the chance of a correct answer, per slice (logic: worse)."""
LM_EVAL_GATE, SLICED_GATE = ("interval-above-minus-10-points", -0.1), ("interval-above-minus-3-points", -0.03)


def _one(side: str, pattern: str) -> str:
    """The fixture of ``side`` matching ``pattern``, relative to the fixture folder."""
    (found,) = sorted((LM_EVAL / side).glob(pattern))
    return found.relative_to(LM_EVAL).as_posix()


def lm_eval_spec(folder: Path) -> Path:
    """A spec comparing the lm-eval fixtures' accuracy on ``certa_mc`` (margin 0.05, a gate on the verdict and
    one on the interval's lower end), with the fixtures copied beside it (a spec reads inside its folder);
    returns its path."""
    shutil.copytree(LM_EVAL, folder, dirs_exist_ok=True)
    inputs = {}
    for side in ("baseline", "subject"):
        inputs[side] = {"path": _one(side, "samples_certa_mc_*.jsonl"), "format": "lm-eval-samples",
                        "read": {"results": f"{side}_results", "task": "certa_mc"}}
        inputs[f"{side}_results"] = {"path": _one(side, "results_*.json"), "format": "lm-eval-results"}
    spec = {"certa": 1, "name": "lm-eval-accuracy", "seed": 11, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "acc", "use": "paired.metric_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "acc", "margin": 0.05}}],
            "gates": [{"id": "no-worse-than-5-points", "metric": "acc.noninferiority.noninferior", "equals": True},
                      {"id": LM_EVAL_GATE[0], "metric": "acc.difference.ci[0]", "min": LM_EVAL_GATE[1]}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")  # JSON is YAML
    return path


def sliced_csv(seed: int, *, subject: bool, per_slice: int = 150) -> str:
    """One side's per-item table (item_id, acc, category): the same items and draws on both sides, the subject's
    chance of a correct answer moved by ``SLICE_EFFECTS``; item 8 only in the baseline, item 5 only in the
    subject."""
    rng = random.Random(seed)
    lines = ["item_id,acc,category"]
    for i in range(per_slice * len(SLICES)):
        slot = i % len(SLICES)
        draw = rng.random()
        chance = 0.7 + (SLICE_EFFECTS[slot] if subject else 0.0)
        if i != (8 if subject else 5):
            lines.append(f"q{i:04d},{int(draw < chance)},{SLICES[slot]}")
    return "\n".join(lines) + "\n"


def sliced_spec(folder: Path) -> Path:
    """A spec comparing two per-item CSV tables by slice (margin 0.05, Holm, a gate on the interval's lower
    end); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    for side in ("baseline", "subject"):
        (folder / f"{side}.csv").write_text(sliced_csv(3, subject=side == "subject"), encoding="utf-8")
    spec = {"certa": 1, "name": "sliced-accuracy", "seed": 11, "profile": "dev",
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": "acc", "use": "paired.metric_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "acc", "margin": 0.05,
                                 "columns": {"slice": "category"}}}],
            "gates": [{"id": SLICED_GATE[0], "metric": "acc.difference.ci[0]", "min": SLICED_GATE[1]}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def run_spec(spec: Path, db: Path) -> str:
    """Run ``spec`` into the ledger ``db`` (``certa run``); returns the run id."""
    from click.testing import CliRunner

    from certa.cli import main

    result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(db), "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output  # 1: a gate failed, the run is recorded
    return str(json.loads(result.stdout)["run_id"])
