"""promptfoo results as ``promptfoo eval --output results.jsonl`` writes them, built here (no promptfoo run is among
the fixtures): one line per ``EvalResult``, ``JSON.stringify`` of the instance (``src/models/evalResult.ts``), so
fields promptfoo leaves undefined (a provider's ``label``) are absent.

How promptfoo numbers the results (``src/evaluator.ts``): the columns of an evaluation are built provider by
provider, prompt by prompt (``buildPromptsList``: ``for provider ... for prompt``), and ``promptIdx`` is a result's
column (``promptIndexMap`` keyed by ``<provider label or id>:<prompt id>``), so the same test under the same
prompt has promptIdx ``j`` for the first provider and ``n_prompts + j`` for the second; ``testIdx`` counts tests
(the same for every provider). A result's ``prompt`` is ``{raw, label, config}``: ``raw`` the prompt rendered with
the test's variables, ``label`` the prompt's label (its text when the config gives none), and ``promptId`` the
SHA-256 of the label (``generateIdFromPrompt``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EVAL_ID = "eval-6kq-2026-11-24T12:37:06"


def provider(provider_id: str, label: str | None = None) -> dict[str, str]:
    """A result's ``provider`` as ``sanitizeProvider`` writes it (no ``label`` key when the config gives none)."""
    return {"id": provider_id} if label is None else {"id": provider_id, "label": label}


def result_line(*, provider_: dict[str, str], template: str, label: str | None, question: str, answer: str,
                passed: bool, test_idx: int, prompt_idx: int, eval_id: str = EVAL_ID) -> dict[str, Any]:
    """One ``EvalResult`` of a test with variables ``{question, answer}`` and one ``equals`` assertion."""
    label = template if label is None else label
    rendered = template.replace("{{question}}", question)
    output = answer if passed else f"not {answer}"
    component = {"pass": passed, "score": 1 if passed else 0,
                 "reason": "Assertion passed" if passed else f"Expected output \"{answer}\" to equal \"{output}\"",
                 "assertion": {"type": "equals", "value": answer}}
    return {
        "id": str(uuid.UUID(int=test_idx * 1000 + prompt_idx)),
        "evalId": eval_id,
        "promptIdx": prompt_idx,
        "testIdx": test_idx,
        "testCase": {"vars": {"question": question, "answer": answer},
                     "assert": [{"type": "equals", "value": answer}], "options": {}, "metadata": {}},
        "prompt": {"raw": rendered, "label": label, "config": {}},
        "promptId": hashlib.sha256(label.encode()).hexdigest(),
        "error": None if passed else component["reason"],
        "score": 1 if passed else 0,
        "success": passed,
        "response": {"output": output, "tokenUsage": {"total": 12, "prompt": 9, "completion": 3, "cached": 0,
                                                      "numRequests": 1},
                     "cached": False, "latencyMs": 210},
        "gradingResult": {"pass": passed, "score": 1 if passed else 0, "reason": component["reason"],
                          "namedScores": {}, "tokensUsed": {"total": 0, "prompt": 0, "completion": 0, "cached": 0},
                          "componentResults": [component], "assertion": None},
        "namedScores": {},
        "provider": provider_,
        "latencyMs": 214,
        "cost": 0.000042,
        "metadata": {"sessionId": str(uuid.UUID(int=7 + test_idx))},
        "failureReason": 0 if passed else 1,
        "persisted": True,
    }


PROMPTS = (("Answer the question: {{question}}", None), ("Q: {{question}}\nA:", "terse"))
"""(template, label): the first without a label (promptfoo labels it with its text), the second labelled."""


def evaluation(providers: Sequence[dict[str, str]], passes: Sequence[Sequence[Sequence[bool]]], *,
               prompts: Sequence[tuple[str, str | None]] = PROMPTS, eval_id: str = EVAL_ID) -> list[dict[str, Any]]:
    """The results of one evaluation: ``passes[k][j][t]`` is whether provider ``k`` passed test ``t`` under prompt
    ``j``; promptIdx = k × len(prompts) + j as promptfoo numbers its columns; lines grouped by test, as promptfoo's
    ``fetchResultsBatched`` writes them."""
    n_tests = len(passes[0][0])
    lines = []
    for test in range(n_tests):
        for k, provider_ in enumerate(providers):
            for j, (template, label) in enumerate(prompts):
                lines.append(result_line(provider_=provider_, template=template, label=label,
                                         question=f"What is {test} + {test}?", answer=str(2 * test),
                                         passed=passes[k][j][test], test_idx=test, prompt_idx=k * len(prompts) + j,
                                         eval_id=eval_id))
    return lines


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    """``lines`` as JSON Lines, one ``JSON.stringify`` per line (compact separators), ``\\n`` at the end."""
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines), encoding="utf-8")
    return path
