"""An Inspect AI task for certa's fixtures: twenty sums, answered by Inspect's mock model and then replaced by a
seeded answer (right with probability ``accuracy``), so two runs with different seeds score differently.

Run by ``make_fixtures.py``: ``inspect eval inspect_task.py@certa_arith --model mockllm/model -T seed=1``.
"""

from __future__ import annotations

import random

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import Score, Target, match, mean, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver


def _samples() -> list[Sample]:
    """Twenty fixed sums; ids ``sum-01`` .. ``sum-20``, with the operands in each sample's metadata."""
    rng = random.Random(20)
    samples = []
    for number in range(1, 21):
        left, right = rng.randint(2, 60), rng.randint(2, 60)
        samples.append(Sample(id=f"sum-{number:02d}", input=f"What is {left} + {right}? Answer with a number.",
                              target=str(left + right),
                              metadata={"kind": "small" if left + right < 60 else "large"}))
    return samples


@solver
def seeded_answer(seed: int, accuracy: float):
    """Replace the model's output with the target (probability ``accuracy``) or the target plus an offset,
    drawn from a generator seeded by (seed, sample id, epoch): reruns give the same answers."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        rng = random.Random(f"{seed}:{state.sample_id}:{state.epoch}")
        target = int(state.target.text)
        answer = target if rng.random() < accuracy else target + rng.choice((-2, -1, 1, 2, 10))
        state.output = ModelOutput.from_content(model=state.output.model, content=str(answer))
        return state

    return solve


@scorer(metrics=[mean()])
def closeness():
    """1 / (1 + |answer - target|): a bounded continuous score beside the letter score of ``match``."""

    async def score(state: TaskState, target: Target) -> Score:
        answer = int(state.output.completion)
        return Score(value=1.0 / (1.0 + abs(answer - int(target.text))), answer=str(answer))

    return score


@task
def certa_arith(seed: int = 0, accuracy: float = 0.8) -> Task:
    """Twenty sums, two epochs, scored by ``match`` (letters C/I) and ``closeness`` (a float)."""
    return Task(dataset=MemoryDataset(_samples(), name="certa_sums"),
                solver=[generate(), seeded_answer(seed, accuracy)],
                scorer=[match(), closeness()], epochs=2)
