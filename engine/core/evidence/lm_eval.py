"""lm-evaluation-harness 0.4 per-sample logs (``--log_samples``): ``samples_<task>_<time>.jsonl``, with the
sibling ``results_<time>.json`` read for provenance.

One JSON object per document and filter. Item key ``doc_id``; identity ``doc_hash``, ``prompt_hash`` and
``target_hash`` (the harness's SHA-256 of the document, of the first request's context and of the target).

- Perplexity tasks (``loglikelihood_rolling``; metrics ``word_perplexity``, ``byte_perplexity``,
  ``bits_per_byte``, each logged as ``[loglikelihood, count]``): metric ``nll`` = −loglikelihood, read from
  ``filtered_resps`` (a number stored as text, parsed strictly) and required to equal the first element of
  every logged pair; counts ``bytes`` (UTF-8 bytes) and ``words`` (whitespace-separated words) from the pairs.
  The harness logs no token count. ``weights`` is the count chosen by ``count_unit`` (bytes by default), so a
  weighted mean of ``nll`` per unit is the log of the harness's byte (or word) perplexity.
- Other tasks: every metric the record lists in ``metrics`` (``acc``, ``acc_norm``, ``exact_match``, ...),
  each a finite number per document; a metric logged as a list (a corpus-level metric such as BLEU) is refused.

Source: the harness's ``EvaluationTracker.save_results_samples`` and ``Task.process_results``
(``lm_eval/loggers/evaluation_tracker.py``, ``lm_eval/api/task.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from engine.foundation.errors import InputError
from engine.core.input_limits import InputLimits

from .records import EvidenceRecords, Provenance, require_unique_keys
from .sources import (Source, field_of, json_document, json_lines, number_of, read_source, sha256_hex,
                      stated_text, strict_floats, value_digest)

__all__ = ["ROLLING_METRICS", "IDENTITY_FIELDS", "read_lm_eval_samples"]

ROLLING_METRICS = {"word_perplexity": "words", "byte_perplexity": "bytes", "bits_per_byte": "bytes"}
"""The harness's perplexity metrics and the count each logs beside the loglikelihood."""

IDENTITY_FIELDS = ("doc_hash", "prompt_hash", "target_hash")
"""The harness's per-document digests, which must agree between two paired sides."""

_SAMPLES_NAME = re.compile(r"samples_(?P<task>.+)_(?P<time>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def read_lm_eval_samples(samples: Source, results: Source | None = None, *, task: str | None = None,
                         results_name: str | None = None,
                         filter_name: str | None = None, count_unit: str = "bytes", name: str | None = None,
                         limits: InputLimits | None = None) -> EvidenceRecords:
    """The per-document records of one task's samples file (and provenance from its results file).

    ``task`` defaults to the name in ``samples_<task>_<time>.jsonl``; ``filter_name`` must be given when the
    file holds more than one filter's records; ``count_unit`` (``bytes`` or ``words``) picks the weights of a
    perplexity task."""
    limits = limits or InputLimits.from_env()
    if count_unit not in ("bytes", "words"):
        raise InputError(f"count_unit must be 'bytes' or 'words' (got {count_unit!r})")
    where, raw = read_source(samples, name, limits)
    records, lines = json_lines(where, raw, limits)
    if not records:
        raise InputError(f"{where}: no records; is it the samples file of a run with --log_samples?")
    if task is None and not isinstance(samples, (bytes, bytearray, memoryview)):
        match = _SAMPLES_NAME.fullmatch(Path(samples).name)
        task = match["task"] if match else None
    chosen, records, lines = _one_filter(where, records, lines, filter_name)
    located = [f"line {line}" for line in lines]
    doc_ids = np.array([_doc_id(record, f"{where}, {at}") for record, at in zip(records, located)], dtype=np.int64)
    require_unique_keys(where, ("doc_id",), [(doc_id,) for doc_id in doc_ids.tolist()], located)
    identity = {field: np.array([_hex_digest(record, field, f"{where}, {at}") for record, at in zip(records, located)],
                                dtype=object) for field in IDENTITY_FIELDS}
    names = _metric_names(where, records, located)
    rolling = [metric for metric in names if metric in ROLLING_METRICS]
    metrics = {metric: np.array([number_of(record.get(metric), f"{where}, {at}: metric '{metric}'")
                                 for record, at in zip(records, located)], dtype=np.float64)
               for metric in names if metric not in ROLLING_METRICS}
    counts, weights = {}, None
    if rolling:
        nll, counts = _perplexity(where, records, located, rolling)
        if count_unit not in counts:
            raise InputError(f"{where}: count_unit '{count_unit}' is not logged (metrics {', '.join(rolling)}); "
                             f"use {' or '.join(sorted(counts))}")
        metrics["nll"], weights = nll, counts[count_unit]
    provenance = _provenance(where, raw, (results, results_name), task, chosen, limits)
    return EvidenceRecords(source=where, key_fields=("doc_id",), keys={"doc_id": doc_ids}, metrics=metrics,
                           provenance=provenance, identity=identity, counts=counts,
                           weights=None if weights is None else weights.astype(np.float64))


def _one_filter(where: str, records: list[dict[str, Any]], lines: list[int],
                filter_name: str | None) -> tuple[str, list[dict[str, Any]], list[int]]:
    """The records of one filter (the harness writes one record per document and filter)."""
    filters = [field_of(record, "filter", (str,), f"{where}, line {line}") for record, line in zip(records, lines)]
    present = sorted(set(filters))
    if filter_name is None:
        if len(present) > 1:
            raise InputError(f"{where}: records of {len(present)} filters ({', '.join(present)}); name the one to "
                             "certify (filter_name)")
        return present[0], records, lines
    if filter_name not in present:
        raise InputError(f"{where}: no records of filter {filter_name!r} (filters: {', '.join(present)})")
    kept = [index for index, value in enumerate(filters) if value == filter_name]
    return filter_name, [records[i] for i in kept], [lines[i] for i in kept]


def _doc_id(record: dict[str, Any], where: str) -> int:
    doc_id = field_of(record, "doc_id", (int,), where)
    if doc_id < 0:
        raise InputError(f"{where}: field 'doc_id' must be ≥ 0 (got {doc_id})")
    return doc_id


def _hex_digest(record: dict[str, Any], field: str, where: str) -> str:
    value = field_of(record, field, (str,), where)
    if _HEX64.fullmatch(value) is None:
        raise InputError(f"{where}: field '{field}' must be a hex SHA-256 (64 lower-case hex digits; "
                         f"got {value[:70]!r})")
    return value


def _metric_names(where: str, records: list[dict[str, Any]], located: list[str]) -> tuple[str, ...]:
    """The metric names every record lists (``metrics``), which must be the same list on every line."""
    names = None
    for record, at in zip(records, located):
        listed = field_of(record, "metrics", (list,), f"{where}, {at}")
        if names is None:
            if not listed or not all(type(metric) is str for metric in listed):
                raise InputError(f"{where}, {at}: field 'metrics' must be a non-empty list of metric names")
            names = listed
        elif listed != names:
            raise InputError(f"{where}, {at}: field 'metrics' is {listed}, not {names} as on the first record")
    return tuple(names)


def _perplexity(where: str, records: list[dict[str, Any]], located: list[str],
                rolling: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(−loglikelihood, counts by unit) of a loglikelihood_rolling task."""
    texts = []
    for record, at in zip(records, located):
        resps = field_of(record, "filtered_resps", (list,), f"{where}, {at}")
        texts.append(resps[0] if len(resps) == 1 else None)
    loglik = strict_floats(texts, lambda i: f"{where}, {located[i]}: field 'filtered_resps' (one loglikelihood)")
    counts: dict[str, np.ndarray] = {}
    for metric in rolling:
        pairs = [_rolling_pair(record, metric, f"{where}, {at}") for record, at in zip(records, located)]
        logged = np.array([pair[0] for pair in pairs], dtype=np.float64)
        differs = np.flatnonzero(logged != loglik)
        if differs.size:
            at = located[int(differs[0])]
            raise InputError(f"{where}, {at}: metric '{metric}' logs loglikelihood {float(logged[differs[0]])!r}, but "
                             f"'filtered_resps' holds {float(loglik[differs[0]])!r}; the record is inconsistent")
        unit = ROLLING_METRICS[metric]
        values = np.array([pair[1] for pair in pairs], dtype=np.int64)
        if unit in counts and not np.array_equal(counts[unit], values):
            at = located[int(np.flatnonzero(counts[unit] != values)[0])]
            raise InputError(f"{where}, {at}: metric '{metric}' logs another {unit} count than the other "
                             "perplexity metrics")
        counts[unit] = values
    return -loglik, counts


def _rolling_pair(record: dict[str, Any], metric: str, where: str) -> tuple[float, int]:
    """A perplexity metric's ``[loglikelihood, count]``: a finite number and a positive integer."""
    pair = field_of(record, metric, (list,), where)
    if len(pair) != 2 or type(pair[1]) is not int or pair[1] < 1:
        raise InputError(f"{where}: metric '{metric}' must be [loglikelihood, positive count] (got {pair!r:.60})")
    return number_of(pair[0], f"{where}: metric '{metric}' loglikelihood"), pair[1]


def _provenance(where: str, raw: bytes, named_results: tuple[Source | None, str | None], task: str | None,
                filter_name: str, limits: InputLimits) -> Provenance:
    """Tool version, task version and configuration digest, and the model, from ``results_<time>.json`` (given
    with the name it is shown by)."""
    results, results_name = named_results
    sources = [(where, sha256_hex(raw))]
    details = [("filter", filter_name)]
    if results is None:
        return Provenance(tool="lm-evaluation-harness", task=task, details=tuple(details), sources=tuple(sources))
    results_where, results_raw = read_source(results, results_name, limits)
    sources.append((results_where, sha256_hex(results_raw)))
    document = json_document(results_where, results_raw)
    configs = document.get("configs")
    if type(configs) is not dict or not configs:
        raise InputError(f"{results_where}: field 'configs' (the task configurations) is missing or empty")
    if task is None:
        if len(configs) != 1:
            raise InputError(f"{results_where}: tasks {', '.join(sorted(configs))}; name the samples file's task "
                             "(an input's read.task)")
        task = next(iter(configs))
    if task not in configs or type(configs[task]) is not dict:
        raise InputError(f"{results_where}: no configuration of task '{task}' (tasks: {', '.join(sorted(configs))}); "
                         "is it the samples file's sibling?")
    digest = value_digest(configs[task], f"{results_where}: configs.{task}")
    config = document.get("config") if type(document.get("config")) is dict else {}
    models = [(key, stated_text(config[key])) for key in ("model", "model_args", "model_num_parameters", "model_dtype",
                                                   "model_revision", "model_sha") if config.get(key) not in (None, "")]
    models += [(key, stated_text(document[key])) for key in ("model_name", "model_name_sanitized")
               if document.get(key) not in (None, "")]
    task_hashes = document.get("task_hashes") if type(document.get("task_hashes")) is dict else {}
    details += [(key, stated_text(value)) for key, value in (("task_hash", task_hashes.get(task)),
                                                       ("transformers_version", document.get("transformers_version")),
                                                       ("date", document.get("date"))) if value not in (None, "")]
    versions = document.get("versions") if type(document.get("versions")) is dict else {}
    version = versions.get(task)
    tool_version = document.get("lm_eval_version")
    return Provenance(tool="lm-evaluation-harness", tool_version=stated_text(tool_version),
                      task=task, task_version=stated_text(version),
                      task_config_sha256=digest, models=tuple(models), details=tuple(details), sources=tuple(sources))
