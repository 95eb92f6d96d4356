"""Recorded runs of ``paired.suite_delta`` for the report tests and the browser tests.

``suite_spec`` writes two lm-evaluation-harness suites (a ``samples_<task>_<time>.jsonl`` per task, as lm-eval
0.4 lays them out, docs/suites.md) beside a spec comparing them: the same documents and draws on both sides, the
subject's chance of a correct answer moved by each task's effect, so a task with a large negative effect is
INFERIOR, one with a small effect and few items UNDECIDED.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TIME = {"baseline": "2026-11-24T12-00-00.000001", "subject": "2026-11-24T13-00-00.000002"}
TASKS = {"arc_easy": 0.0, "hellaswag": -0.25, "winogrande": 0.02}
"""Three tasks: the subject's change in the chance of a correct answer (hellaswag: much worse)."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_suites(folder: Path, effects: Mapping[str, float], items: int, seed: int = 5) -> None:
    """Both sides' suites under ``folder/runs/{baseline,subject}``: ``items`` documents per task, scored 0/1."""
    rng = random.Random(seed)
    draws = {task: [rng.random() for _ in range(items)] for task in effects}
    for side in ("baseline", "subject"):
        runs = folder / "runs" / side
        runs.mkdir(parents=True, exist_ok=True)
        for task, effect in effects.items():
            chance = 0.7 + (effect if side == "subject" else 0.0)
            lines = [json.dumps({"doc_id": doc, "filter": "none", "doc_hash": _digest(f"{task}-doc-{doc}"),
                                 "prompt_hash": _digest(f"{task}-prompt-{doc}"),
                                 "target_hash": _digest(f"{task}-target-{doc}"), "metrics": ["acc"],
                                 "acc": float(draw < chance)}) for doc, draw in enumerate(draws[task])]
            (runs / f"samples_{task}_{TIME[side]}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def suite_spec(folder: Path, *, effects: Mapping[str, float] = TASKS, items: int = 200, margin: Any = 0.1,
               pooled: str = "micro", gates: bool = True) -> Path:
    """A spec comparing the two suites ``write_suites`` writes in ``folder`` (a gate on the claim and one on the
    pooled interval when ``gates``); returns its path."""
    write_suites(folder, effects, items)
    inputs = {side: {"path": f"runs/{side}", "format": "lm-eval-suite"} for side in ("baseline", "subject")}
    spec = {"certa": 1, "name": "suite", "seed": 3, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "suite", "use": "paired.suite_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "acc", "margin": margin,
                                 "pooled": pooled}}],
            "gates": [{"id": "every-task", "metric": "suite.every_task.decision", "decided": "NONINFERIOR"},
                      {"id": "pooled-above-minus-10-points", "metric": "suite.pooled.ci",
                       "interval": {"min": -0.1}}] if gates and margin is not None else []}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")  # JSON is YAML
    return path
