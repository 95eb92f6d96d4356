"""Recorded runs of ``paired.suite_delta`` for the report tests and the browser tests.

``suite_spec`` writes two lm-evaluation-harness suites (a ``samples_<task>_<time>.jsonl`` per task, as lm-eval
0.4 lays them out, docs/suites.md) beside a spec comparing them: the same documents and draws on both sides, the
subject's chance of a correct answer moved by each task's effect, so a task with a large negative effect is
INFERIOR, one with a small effect and few items UNDECIDED. ``suite_outputs`` makes stored outputs of a chosen
decision per task without a run.
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
                      {"id": "pooled-above-minus-15-points", "metric": "suite.pooled.ci",
                       "interval": {"min": -0.15}}] if gates and margin is not None else []}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")  # JSON is YAML
    return path


def suite_outputs(decisions: list[str | None], margins: list[float] | None = None) -> dict:
    """Stored outputs of ``paired.suite_delta`` 1.0.0 with one task per decision (None: no margin)."""
    claimed = decisions and decisions[0] is not None
    names = [f"task_{i:02d}" for i in range(len(decisions))]
    rows = [{"task": name, "units": 200, "baseline_mean": 0.7, "subject_mean": 0.69, "estimate": -0.01,
             "ci": [-0.04, 0.02], "p_value": 0.5, "adjusted_p_value": 1.0, "differs": False,
             "detectable_difference": 0.05, "detectable_attainable": True,
             **({"margin": (margins or [0.05] * len(names))[i], "decision": decisions[i]} if claimed else {})}
            for i, name in enumerate(names)]
    by = {word: [n for n, d in zip(names, decisions) if d == word] for word in ("NONINFERIOR", "UNDECIDED", "INFERIOR")}
    suite = "INFERIOR" if by["INFERIOR"] else "UNDECIDED" if by["UNDECIDED"] else "NONINFERIOR"
    every = {"claim": "the subject is non-inferior on every task", "margins": "one for every task",
             "rule": "lower bound above −margin", "error_rate": "at most 0.025", "alpha": 0.025, "decision": suite,
             "noninferior": suite == "NONINFERIOR", "noninferior_tasks": by["NONINFERIOR"],
             "undecided_tasks": by["UNDECIDED"], "inferior_tasks": by["INFERIOR"]} if claimed else None
    return {"metric": "acc", "scale": "binary", "direction": "difference = subject − baseline",
            "confidence_level": 0.95, "interval_method": "tango_score", "tasks": len(rows), "n_paired": 200 * len(rows),
            "rows": rows, "every_task": every,
            "which_differ": {"test": "exact McNemar", "adjustment": "benjamini_hochberg", "alpha": 0.05,
                             "controls": "false discovery rate", "differing": [], "any_differs": False,
                             "note": "'not shown to differ' is not a claim that a task is the same"},
            "pooled": {"pooling": "macro", "weights": "macro: every task once", "estimate": -0.01, "ci": [-0.02, 0.0],
                       "confidence_level": 0.95, "baseline_mean": 0.7, "subject_mean": 0.69, "method": "MOVER",
                       "assumption": "independent tasks"},
            "pairing": {}, "sources": {},
            "units": {"unit": "item", "statement": f"unit of analysis: {200 * len(rows)} items (no repeats)",
                      "analysis": "paired 2×2 tables", "repeats": {"min": 1, "max": 1}}}
