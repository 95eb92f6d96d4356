"""A certificate as a Hugging Face Hub evaluation-results file (``certa export RUN --format hf-eval-results``).

The Hub reads evaluation scores from YAML files in a model repository's ``.eval_results/`` folder and shows
them on the model page and on the benchmark dataset's leaderboard ("Evaluation Results",
huggingface.co/docs/hub/eval-results; the specification: github.com/huggingface/hub-docs, ``eval_results.yaml``).
A file is a list of results; each names the benchmark (``dataset.id``, a Hub dataset registered as a benchmark,
and ``dataset.task_id``, a task of its ``eval.yaml``) and carries one ``value``, with optional ``date``,
``source`` (``url`` required, ``name``) and ``notes``.

certa writes one result per estimate its stages recorded
(``certa.engine.services.presentation.stages.run_estimates``), in stage order: ``value`` the estimate as
recorded, ``date`` the certificate's issue time, ``source`` the certificate or bundle where it is published
(``source_url``) named by its ``content_sha256``, and ``notes`` the run, the stage, what the number is, its
confidence interval, the verdict and the certificate digest, so that a reader of the leaderboard can find and
check the evidence (``certa verify-bundle``). certa does not know which Hub benchmark a run measured: the
caller names it. Written with ``yaml.safe_dump``: a string is data, never a YAML tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from certa.engine.core.value_text import format_value
from certa.engine.services.presentation.stages import Estimate, run_estimates

__all__ = ["hf_eval_results", "estimate_note"]


def estimate_note(stage_id: str, estimate: Estimate) -> str:
    """What an estimate is, in one line: stage, name, slice, and its confidence interval when recorded."""
    where = f"stage {stage_id}" + (f", {estimate.slice}" if estimate.slice else "")
    interval = ("" if estimate.lower is None else
                f"; {format_value(100 * estimate.level) if estimate.level is not None else '?'}% CI "
                f"[{format_value(estimate.lower)}, {format_value(estimate.upper)}]")
    return f"{where}: {estimate.name} {format_value(estimate.value)}{interval}"


def hf_eval_results(certificate: Mapping[str, Any], *, dataset: str, task_id: str = "default",
                    source_url: str | None = None) -> str:
    """The ``.eval_results/*.yaml`` text of ``certificate``: one result per estimate on the benchmark
    ``dataset`` (a Hub dataset id) and its task ``task_id``, each pointing at ``source_url`` (where the
    certificate or its bundle is published; no ``source`` without it) and naming the certificate's digest.
    Raises nothing on a certificate without estimates: the list is empty."""
    content, digest = certificate["content"], str(certificate["content_sha256"])
    run_id = str(certificate["issued"]["run_id"])
    results = []
    for stage_id, estimate in run_estimates(content):
        result: dict[str, Any] = {"dataset": {"id": dataset, "task_id": task_id}, "value": estimate.value,
                                  "date": str(certificate["issued"]["time_utc"])}
        if source_url is not None:
            result["source"] = {"url": source_url, "name": f"certa certificate sha256:{digest[:12]}"}
        result["notes"] = (f"certa run {run_id}, {estimate_note(stage_id, estimate)}; verdict "
                           f"{content['verdict']}; certificate content_sha256 {digest}")
        results.append(result)
    return yaml.safe_dump(results, sort_keys=False, allow_unicode=True, width=1000)
