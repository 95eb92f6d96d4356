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
  ``count_unit: tokens`` is refused: the harness counts no tokens (certa's ``model.windows`` stage does).
- Loglikelihood tasks (``output_type: loglikelihood``, e.g. LAMBADA): the per-document value the harness logs
  under ``perplexity`` is the document's log-likelihood (its ``perplexity`` aggregation is exp(−mean) over
  documents), so it is read as metric ``loglikelihood``, never as a perplexity, and required to equal the
  log-likelihood in ``filtered_resps`` (``[loglikelihood, is_greedy]``).
- Other tasks: every metric the record lists in ``metrics`` (``acc``, ``acc_norm``, ``exact_match``, ...),
  each a finite number per document; a metric logged as a list (a corpus-level metric such as BLEU) is refused.

``samples_task_hash`` recomputes the harness's ``task_hashes.<task>`` (the SHA-256 of every line's
``doc_hash + prompt_hash + target_hash``, every filter's lines, in the file's order) to check a results file
against its samples.

Source: the harness's ``EvaluationTracker.save_results_samples`` and ``Task.process_results``
(``lm_eval/loggers/evaluation_tracker.py``, ``lm_eval/api/task.py``).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np

from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits

from .records import EvidenceRecords, Provenance, require_unique_keys, rows_repeat
from .sources import (Declined, JsonObject, Labels, Source, field_of, json_lines, number_column, read_source,
                      joined_numbers, sha256_hex, stated_text, strict_floats, typed_json_lines, typed_line_blocks,
                      value_digest)

__all__ = ["ROLLING_METRICS", "IDENTITY_FIELDS", "COUNT_UNITS", "NO_TOKEN_COUNT", "LOGLIKELIHOOD_METRIC",
           "read_lm_eval_samples", "count_column_unit", "samples_task_hash", "SAMPLES_NAME"]

ROLLING_METRICS = {"word_perplexity": "words", "byte_perplexity": "bytes", "bits_per_byte": "bytes"}
"""The harness's perplexity metrics and the count each logs beside the loglikelihood."""

COUNT_UNITS = ("bytes", "words")
"""The units a perplexity task's samples count (``count_unit``; the samples table's count columns)."""

NO_TOKEN_COUNT = ("lm-evaluation-harness logs no token count in its samples (a perplexity task's record holds the "
                  "document's log-likelihood with its UTF-8 bytes and its words), so certa can certify a perplexity "
                  "per byte or per word from them (count_unit: bytes or words), not per token; for a perplexity per "
                  "token score the two models with certa's own model.windows stage, which counts tokens "
                  "(docs/models.md)")
"""Why ``count_unit: tokens`` is refused (the spec schema's ``x-certa-refused`` says the same)."""

LOGLIKELIHOOD_METRIC = {"perplexity": "loglikelihood"}
"""A loglikelihood task's per-document metric as the harness names it -> as certa names it: the value logged as
``perplexity`` is the document's log-likelihood."""

IDENTITY_FIELDS = ("doc_hash", "prompt_hash", "target_hash")
"""The harness's per-document digests, which must agree between two paired sides."""
_RESULTS_FIELDS = ("configs", "config", "results", "task_hashes", "versions", "lm_eval_version", "model_name",
                   "model_name_sanitized", "transformers_version", "date", "n-samples")
"""The fields of a results file certa parses (the others, e.g. ``higher_is_better`` and ``samples``, are checked as
JSON, never built)."""

SAMPLES_NAME = re.compile(r"samples_(?P<task>.+)_(?P<time>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl")
"""The name lm-eval 0.4 gives a task's samples file: ``samples_<task>_<time>.jsonl`` (``<time>`` also names the
run's ``results_<time>.json``)."""
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX_DIGITS = b"0123456789abcdef"
_INT64_MAX = 2**63 - 1


def read_lm_eval_samples(samples: Source, results: Source | None = None, *, task: str | None = None,
                         results_name: str | None = None,
                         filter_name: str | None = None, count_unit: str = "bytes", name: str | None = None,
                         limits: InputLimits | None = None) -> EvidenceRecords:
    """The per-document records of one task's samples file (and provenance from its results file).

    ``task`` defaults to the name in ``samples_<task>_<time>.jsonl``; ``filter_name`` must be given when the
    file holds more than one filter's records; ``count_unit`` (``bytes`` or ``words``) picks the weights of a
    perplexity task. They are a spec's ``read.task``, ``read.filter`` and ``read.count_unit``, the names the
    error messages use. The lines are decoded by msgspec into the fields read (``sources.typed_json_lines``), or,
    where that path declines, by ``json`` with a check of every field (``sources.json_lines``)."""
    limits = limits or InputLimits.from_env()
    if count_unit not in COUNT_UNITS:
        why = f": {NO_TOKEN_COUNT}" if count_unit in ("tokens", "token") else ""
        raise InputError(f"read.count_unit must be 'bytes' or 'words' (got {count_unit!r}){why}")
    where, raw = read_source(samples, name, limits)
    if task is None and not isinstance(samples, (bytes, bytearray, memoryview)):
        match = SAMPLES_NAME.fullmatch(Path(samples).name)
        task = match["task"] if match else None
    fields, (doc_ids, identity, metrics, counts, weights) = _read(where, raw, limits, filter_name, count_unit)
    provenance = _provenance(where, raw, (results, results_name), task, fields.filter, limits, metrics)
    return EvidenceRecords(source=where, key_fields=("doc_id",), keys={"doc_id": doc_ids}, metrics=metrics,
                           provenance=provenance, identity=identity, counts=counts, weights=weights)


_Columns = tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray | None]
"""(doc ids, identity, metrics, counts, weights) of one side."""


def _read(where: str, raw: bytes, limits: InputLimits, filter_name: str | None,
          count_unit: str) -> tuple[_Fields, _Columns]:
    """The fields read and their checked columns: from the fast path, or, where it declines or its columns
    fail a check, from the reference path, whose error is then the one raised."""
    fast = _typed_fields(raw, limits, filter_name)
    if fast is not None:
        with contextlib.suppress(InputError):
            return fast, _columns(where, fast, count_unit)
    fields = _checked_fields(where, raw, limits, filter_name)
    return fields, _columns(where, fields, count_unit)


class _Fields(NamedTuple):
    """The fields read of one filter's records, a list per field, each value of the type the export must
    give it (its value not yet checked)."""

    filter: str
    located: Sequence[str]
    doc_ids: list[int]
    identity: dict[str, list[str]]
    names: tuple[str, ...]
    """The metric names (``metrics``, the same list on every record)."""
    values: dict[str, list[Any]]
    """Each metric's value per record, but for the perplexity metrics."""
    pairs: dict[str, tuple[list[Any], list[int]]]
    """Each perplexity metric's ``[loglikelihood, count]`` per record, as (loglikelihoods, counts)."""
    loglik_texts: list[Any]
    """The log-likelihood in ``filtered_resps`` of a perplexity task's records (its one element) or of a
    loglikelihood task's (``[[loglikelihood, is_greedy]]``); ``None`` where it is not of that shape."""


def _checked_fields(where: str, raw: bytes, limits: InputLimits, filter_name: str | None) -> _Fields:
    """The reference path: every line through ``json``, every field checked record by record."""
    records, lines = json_lines(where, raw, limits)
    if not records:
        raise InputError(f"{where}: no records; is it the samples file of a run with --log_samples?")
    chosen, records, lines = _one_filter(where, records, lines, filter_name)
    located = Labels("line {}", lines)
    doc_ids = [field_of(record, "doc_id", (int,), f"{where}, {at}") for record, at in zip(records, located)]
    identity = {field: [field_of(record, field, (str,), f"{where}, {at}") for record, at in zip(records, located)]
                for field in IDENTITY_FIELDS}
    names = _metric_names(where, [field_of(record, "metrics", (list,), f"{where}, {at}")
                                  for record, at in zip(records, located)], located)
    values = {metric: [record.get(metric) for record in records] for metric in names if metric not in ROLLING_METRICS}
    pairs = {metric: tuple(map(list, zip(*[_rolling_pair(record, metric, f"{where}, {at}")
                                          for record, at in zip(records, located)])))
             for metric in names if metric in ROLLING_METRICS}
    texts = []
    if any(metric in ROLLING_METRICS for metric in names):
        for record, at in zip(records, located):
            resps = field_of(record, "filtered_resps", (list,), f"{where}, {at}")
            texts.append(resps[0] if len(resps) == 1 else None)
    elif any(metric in LOGLIKELIHOOD_METRIC for metric in names):
        for record, at in zip(records, located):
            resps = field_of(record, "filtered_resps", (list,), f"{where}, {at}")
            pair = resps[0] if len(resps) == 1 else None
            texts.append(pair[0] if type(pair) is list and len(pair) == 2 else None)
    # each pair is two lists (the zip of (loglik, count) pairs), which mypy sees as a tuple of any length
    return _Fields(chosen, located, doc_ids, identity, names, values, pairs, texts)  # type: ignore[arg-type]


class _Names(msgspec.Struct):
    """The first record's metric names, which decide the fields the fast path decodes."""

    metrics: list[str]


class _RollingPair(msgspec.Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """A perplexity metric's ``[loglikelihood, count]`` (an array of exactly two: msgspec ignores an array-like
    struct's extra elements unless ``forbid_unknown_fields``; a struct, never a container the garbage collector
    walks)."""

    loglik: Any
    count: int


class _OneResponse(msgspec.Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """``filtered_resps`` of a perplexity record: an array of exactly one value (the loglikelihood as text; a
    longer array is left to the reference path, which refuses it)."""

    text: Any


class _LoglikelihoodPair(msgspec.Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """A loglikelihood task's response: ``[loglikelihood, is_greedy]`` (both as text)."""

    text: Any
    greedy: Any


class _OneLoglikelihood(msgspec.Struct, array_like=True, gc=False, forbid_unknown_fields=True):
    """``filtered_resps`` of a loglikelihood task's record: an array of exactly one ``[loglikelihood, is_greedy]``."""

    pair: _LoglikelihoodPair


_FIXED_FIELDS = ("filter", "doc_id", *IDENTITY_FIELDS, "metrics", "filtered_resps")


def _decoder_for(first: bytes) -> msgspec.json.Decoder | None:
    """A decoder of the fields read, for records listing the same metrics as the first record ``first``:
    ``filter``, ``doc_id``, the digests and ``metrics`` by their types, each metric as it is (a perplexity
    metric as [value, integer]), ``filtered_resps`` for a perplexity task. ``None`` where the names do not
    make a struct (none, twice the same, one of the fixed fields)."""
    try:
        names = msgspec.json.decode(first, type=_Names).metrics
    except (msgspec.DecodeError, RecursionError):
        return None
    if not names or len(set(names)) != len(names) or set(names) & set(_FIXED_FIELDS):
        return None
    metrics = [(f"m{index}", _RollingPair if metric in ROLLING_METRICS else Any, msgspec.field(name=metric))
               for index, metric in enumerate(names)]
    rolling = ([("filtered_resps", _OneResponse)] if set(names) & set(ROLLING_METRICS) else
               [("filtered_resps", _OneLoglikelihood)] if set(names) & set(LOGLIKELIHOOD_METRIC) else [])
    record = msgspec.defstruct("LmEvalRecord", [("filter", str), ("doc_id", int),
                                                *((field, str) for field in IDENTITY_FIELDS),
                                                ("metrics", list[str]), *metrics, *rolling], gc=False)
    return msgspec.json.Decoder(record)


def _typed_fields(raw: bytes, limits: InputLimits, filter_name: str | None) -> _Fields | None:
    """The fast path: the fields read, decoded by msgspec into typed structs a block of lines at a time
    (``sources.typed_line_blocks``), of which only the values read are kept (each record's ``metrics`` as
    whether it lists the first record's); ``None`` where ``_checked_fields`` must read the file."""
    blocks = typed_line_blocks(raw, limits, _decoder_for)
    texts: dict[str, str] = {}
    try:
        records, numbers = next(blocks)
        names = tuple(records[0].metrics)
        rolling_task = bool(set(names) & set(ROLLING_METRICS))
        getters: dict[str, Callable[[Any], Any]] = {"filter": lambda record: texts.setdefault(record.filter, record.filter),  # a few texts, once each
                   "doc_id": attrgetter("doc_id"),
                   **{field: attrgetter(field) for field in IDENTITY_FIELDS}}
        for index, metric in enumerate(names):
            if metric in ROLLING_METRICS:
                getters |= {f"m{index}.loglik": attrgetter(f"m{index}.loglik"),
                            f"m{index}.count": attrgetter(f"m{index}.count")}
            else:
                getters[f"m{index}"] = attrgetter(f"m{index}")
        if "filtered_resps" in records[0].__struct_fields__:
            getters["texts"] = attrgetter("filtered_resps.text" if rolling_task else "filtered_resps.pair.text")
        columns: dict[str, list[Any]] = {field: [] for field in (*getters, "metrics")}
        numbered: list[Sequence[int]] = []
        while True:
            for field, getter in getters.items():
                columns[field].extend(map(getter, records))
            columns["metrics"].extend(map(list(names).__eq__, map(attrgetter("metrics"), records)))
            numbered.append(numbers)
            records, numbers = next(blocks, (None, None))
            if records is None:
                break
    except (Declined, StopIteration):
        return None
    filters = columns.pop("filter")
    lines = joined_numbers(numbered)
    present = set(filters)
    chosen = next(iter(present)) if filter_name is None else filter_name
    if (len(present) > 1 and filter_name is None) or chosen not in present:
        return None
    if len(present) > 1:
        kept = [index for index, value in enumerate(filters) if value == chosen]
        lines = [lines[i] for i in kept]
        columns = {field: [column[i] for i in kept] for field, column in columns.items()}
    if not all(columns["metrics"]):
        return None
    values = {metric: columns[f"m{index}"] for index, metric in enumerate(names) if metric not in ROLLING_METRICS}
    pairs = {metric: (columns[f"m{index}.loglik"], columns[f"m{index}.count"])
             for index, metric in enumerate(names) if metric in ROLLING_METRICS}
    return _Fields(chosen, Labels("line {}", lines), columns["doc_id"], {field: columns[field] for field in IDENTITY_FIELDS},
                   names, values, pairs, columns.get("texts", []))


def _one_filter(where: str, records: list[dict[str, Any]], lines: list[int],
                filter_name: str | None) -> tuple[str, list[dict[str, Any]], list[int]]:
    """The records of one filter (the harness writes one record per document and filter)."""
    filters = [field_of(record, "filter", (str,), f"{where}, line {line}") for record, line in zip(records, lines)]
    present = sorted(set(filters))
    if filter_name is None:
        if len(present) > 1:
            raise InputError(f"{where}: records of {len(present)} filters ({', '.join(present)}); name the one to "
                             "certify with read.filter")
        return present[0], records, lines
    if filter_name not in present:
        raise InputError(f"{where}: no records of filter {filter_name!r} (read.filter; filters: "
                         f"{', '.join(present)})")
    kept = [index for index, value in enumerate(filters) if value == filter_name]
    return filter_name, [records[i] for i in kept], [lines[i] for i in kept]


def _columns(where: str, fields: _Fields, count_unit: str) -> _Columns:
    """(doc ids, identity, metrics, counts, weights) of the fields read, every value checked column by column;
    the first bad value is an ``InputError`` naming its line and field."""
    located = fields.located
    doc_ids = _doc_ids(where, fields.doc_ids, located)
    if rows_repeat((doc_ids,)):
        require_unique_keys(where, ("doc_id",), [(doc_id,) for doc_id in fields.doc_ids], located)
    identity = {field: _hex_digests(where, field, values, located) for field, values in fields.identity.items()}
    # a lambda with a default-bound name, whose type mypy cannot infer
    metrics = {metric: number_column(values,
                                     lambda i, m=metric: f"{where}, {located[i]}: metric '{m}'")  # type: ignore[misc]
               for metric, values in fields.values.items()}
    rolling = list(fields.pairs)
    if not rolling:
        return doc_ids, identity, _loglikelihoods_named(where, fields, metrics), {}, None
    nll, counts = _perplexity(where, fields, rolling)
    if count_unit not in counts:
        raise InputError(f"{where}: read.count_unit '{count_unit}' is not logged (metrics {', '.join(rolling)}); "
                         f"use {' or '.join(sorted(counts))}")
    metrics["nll"] = nll
    return doc_ids, identity, metrics, counts, counts[count_unit].astype(np.float64)


def _loglikelihoods_named(where: str, fields: _Fields, metrics: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The metrics with a loglikelihood task's per-document ``perplexity`` renamed ``loglikelihood``
    (``LOGLIKELIHOOD_METRIC``), after checking that it is the log-likelihood the record's ``filtered_resps``
    holds (``[[loglikelihood, is_greedy]]``); a ``perplexity`` that is not is refused, never read as one."""
    logged = [name for name in LOGLIKELIHOOD_METRIC if name in metrics]
    if not logged:
        return metrics
    located = fields.located
    for name in logged:
        renamed = LOGLIKELIHOOD_METRIC[name]
        if renamed in metrics:
            raise InputError(f"{where}: metrics '{name}' and '{renamed}' both logged; certa reads a loglikelihood "
                             f"task's '{name}' as the document's log-likelihood, '{renamed}'")
        loglik = _log_probabilities(strict_floats(
            fields.loglik_texts, lambda i: f"{where}, {located[i]}: field 'filtered_resps' ([loglikelihood, is_greedy] "
                                           f"of a loglikelihood task, whose '{name}' is that log-likelihood)"),
            where, located)
        differs = np.flatnonzero(metrics[name] != loglik)
        if differs.size:
            at = int(differs[0])
            raise InputError(f"{where}, {located[at]}: metric '{name}' is {float(metrics[name][at])!r}, not the "
                             f"log-likelihood {float(loglik[at])!r} in 'filtered_resps'; lm-eval logs a "
                             f"loglikelihood task's per-document '{name}' as that log-likelihood, and certa reads it "
                             "only as one")
    return {LOGLIKELIHOOD_METRIC.get(name, name): values for name, values in metrics.items()}


def _log_probabilities(loglik: np.ndarray, where: str, located: Sequence[str]) -> np.ndarray:
    """``loglik``, each a log-probability: at most 0 (a probability at most 1). A positive one is no model's
    (lm-eval sums log-softmax outputs) and would read as a perplexity below 1: refused, naming the record."""
    above = np.flatnonzero(loglik > 0)
    if above.size:
        at = int(above[0])
        raise InputError(f"{where}, {located[at]}: field 'filtered_resps' holds the log-likelihood "
                         f"{float(loglik[at])!r}, above 0 (a probability above 1), which no model computes "
                         f"({above.size} such record(s))")
    return loglik


def _doc_ids(where: str, values: list[int], located: Sequence[str]) -> np.ndarray:
    """The doc ids as int64: each ≥ 0 and within int64."""
    if min(values) < 0 or max(values) > _INT64_MAX:
        bad = next(index for index, value in enumerate(values) if not 0 <= value <= _INT64_MAX)
        raise InputError(f"{where}, {located[bad]}: field 'doc_id' must be ≥ 0 and < 2^63 (got {values[bad]})")
    return np.array(values, dtype=np.int64)


def _hex_digests(where: str, field: str, values: list[str], located: Sequence[str]) -> np.ndarray:
    """The values of an identity field, each a hex SHA-256 (64 lower-case hex digits)."""
    # surrogatepass: a lone surrogate (a JSON escape) is a non-hex byte here, so the value is named below
    if set(map(len, values)) != {64} or "".join(values).encode("utf-8", "surrogatepass").translate(None, _HEX_DIGITS):
        bad = next(index for index, value in enumerate(values) if _HEX64.fullmatch(value) is None)
        raise InputError(f"{where}, {located[bad]}: field '{field}' must be a hex SHA-256 (64 lower-case hex "
                         f"digits; got {values[bad][:70]!r})")
    return np.array(values, dtype=object)


def _metric_names(where: str, listed: list[list[Any]], located: Sequence[str]) -> tuple[str, ...]:
    """The metric names every record lists (``metrics``), which must be the same list on every line."""
    names = listed[0]
    if not names or not all(type(metric) is str for metric in names):
        raise InputError(f"{where}, {located[0]}: field 'metrics' must be a non-empty list of metric names")
    for metrics, at in zip(listed, located):
        if metrics != names:
            raise InputError(f"{where}, {at}: field 'metrics' is {metrics}, not {names} as on the first record")
    return tuple(names)


def _perplexity(where: str, fields: _Fields, rolling: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(−loglikelihood, counts by unit) of a loglikelihood_rolling task."""
    located = fields.located
    loglik = _log_probabilities(strict_floats(fields.loglik_texts, lambda i: f"{where}, {located[i]}: field "
                                                                              "'filtered_resps' (one loglikelihood)"),
                                where, located)
    counts: dict[str, np.ndarray] = {}
    for metric in rolling:
        logliks, values = fields.pairs[metric]
        logged = number_column(logliks,
                               lambda i, m=metric: f"{where}, {located[i]}: metric '{m}' loglikelihood")  # type: ignore[misc]
        if min(values) < 1 or max(values) > _INT64_MAX:
            bad = next(index for index, value in enumerate(values) if not 1 <= value <= _INT64_MAX)
            raise InputError(f"{where}, {located[bad]}: metric '{metric}' must be [loglikelihood, positive count] "
                             f"(got {[logliks[bad], values[bad]]!r:.60})")
        differs = np.flatnonzero(logged != loglik)
        if differs.size:
            at = located[int(differs[0])]
            raise InputError(f"{where}, {at}: metric '{metric}' logs loglikelihood {float(logged[differs[0]])!r}, but "
                             f"'filtered_resps' holds {float(loglik[differs[0]])!r}; the record is inconsistent")
        unit = ROLLING_METRICS[metric]
        column = np.array(values, dtype=np.int64)
        if unit in counts and not np.array_equal(counts[unit], column):
            at = located[int(np.flatnonzero(counts[unit] != column)[0])]
            raise InputError(f"{where}, {at}: metric '{metric}' logs another {unit} count than the other "
                             "perplexity metrics")
        counts[unit] = column
    return -loglik, counts


def _rolling_pair(record: dict[str, Any], metric: str, where: str) -> list[Any]:
    """A perplexity metric's ``[loglikelihood, count]`` as logged: a list of two, the count an integer (the
    values are checked column by column, ``_perplexity``)."""
    pair = field_of(record, metric, (list,), where)
    if len(pair) != 2 or type(pair[1]) is not int:
        raise InputError(f"{where}: metric '{metric}' must be [loglikelihood, positive count] (got {pair!r:.60})")
    return pair


def count_column_unit(column: str, count_unit: str | None) -> str | None:
    """The unit of column ``column`` of a perplexity task's samples table read with ``count_unit`` (None: the
    default, bytes): ``bytes`` and ``words`` are the count columns of those names, ``weight`` holds
    ``count_unit``'s counts; None for any other column (no count is logged under that name, and no token count
    at all: ``NO_TOKEN_COUNT``)."""
    if column in COUNT_UNITS:
        return column
    return (count_unit or COUNT_UNITS[0]) if column == "weight" else None


class _Identity(msgspec.Struct, gc=False):
    """The harness's three digests of one record (every other field skipped)."""

    doc_hash: str
    prompt_hash: str
    target_hash: str


def samples_task_hash(raw: bytes, where: str, limits: InputLimits) -> str:
    """lm-evaluation-harness 0.4's ``task_hashes.<task>`` recomputed from a samples file: the SHA-256 (hex) of
    the UTF-8 concatenation of every record's ``doc_hash + prompt_hash + target_hash``, every line of the file
    (all filters) in its order (``EvaluationTracker.save_results_aggregated``,
    ``lm_eval/loggers/evaluation_tracker.py``)."""
    decoded = typed_json_lines(raw, limits, lambda first: msgspec.json.Decoder(_Identity))
    if decoded is not None:
        digests = ["".join((r.doc_hash, r.prompt_hash, r.target_hash)) for r in decoded[0]]
    else:
        records, lines = json_lines(where, raw, limits)
        digests = ["".join(field_of(record, field, (str,), f"{where}, line {line}") for field in IDENTITY_FIELDS)
                   for record, line in zip(records, lines)]
    # surrogatepass: a lone surrogate in a line of a filter not read (whose digests are not checked) gives a digest
    # lm-eval cannot have written, so the results file is refused as not describing these samples
    return sha256_hex("".join(digests).encode("utf-8", "surrogatepass"))


def _provenance(where: str, raw: bytes, named_results: tuple[Source | None, str | None], task: str | None,
                filter_name: str, limits: InputLimits,
                metrics: Mapping[str, np.ndarray] | None = None) -> Provenance:
    """Tool version, task version and configuration digest, and the model, from ``results_<time>.json`` (given
    with the name it is shown by)."""
    results, results_name = named_results
    sources = [(where, sha256_hex(raw))]
    details = [("filter", filter_name)]
    if results is None:
        return Provenance(tool="lm-evaluation-harness", task=task, details=tuple(details), sources=tuple(sources))
    results_where, results_raw = read_source(results, results_name, limits)
    sources.append((results_where, sha256_hex(results_raw)))
    document = JsonObject.document(results_where, results_raw).values(
        _RESULTS_FIELDS, limits, f"the JSON text of the results file's fields {', '.join(_RESULTS_FIELDS)} in bytes")
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
    _check_reported(results_where, document, task, filter_name, configs[task], metrics or {}, where)
    config = document.get("config") if type(document.get("config")) is dict else {}
    digest = value_digest(task_configuration(configs[task], config.get("model_args")),
                          f"{results_where}: configs.{task}")
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


def _check_reported(results_where: str, document: dict[str, Any], task: str, filter_name: str,
                    task_config: dict[str, Any], metrics: Mapping[str, np.ndarray], where: str) -> None:
    """The results file's own figures of the task against the samples read: its ``sample_len`` and
    ``n-samples.<task>.effective`` must be their number of documents (``n-samples.<task>.original``, the task's
    documents before ``--limit``, at least it), and each metric the task aggregates by ``mean`` must be their mean
    (to 1e-9). A results file of another model or run of the same task (the same task hash: the same documents)
    is refused so, naming both numbers, never recorded as the samples' provenance."""
    documents = len(next(iter(metrics.values()))) if metrics else None
    counted = document.get("n-samples", {}).get(task) if type(document.get("n-samples")) is dict else None
    stated_counts = [(f"n-samples.{task}.{count}", counted.get(count), count == "original")
                     for count in ("effective", "original")] if type(counted) is dict else []
    reported = document.get("results", {}).get(task) if type(document.get("results")) is dict else None
    if type(reported) is dict:
        stated_counts.insert(0, (f"results.{task}.sample_len", reported.get("sample_len"), False))
    for field, stated, at_least in stated_counts:
        if documents is not None and type(stated) is int and (stated < documents if at_least else stated != documents):
            raise InputError(f"{results_where}: {field} is {stated}, but {where} holds {documents} documents of the "
                             "task: the results file is not these samples'")
    if type(reported) is not dict:
        return
    listed = task_config.get("metric_list") if type(task_config.get("metric_list")) is list else []
    by_mean = {entry.get("metric") for entry in listed if type(entry) is dict and entry.get("aggregation") == "mean"}
    for metric in sorted(by_mean & set(metrics)):
        value, values = reported.get(f"{metric},{filter_name}"), metrics[metric]
        if type(value) not in (int, float) or isinstance(value, bool) or not len(values):
            continue
        mean = float(np.mean(values))
        if not math.isclose(mean, value, rel_tol=1e-9, abs_tol=1e-12):
            raise InputError(f"{results_where}: results.{task}.'{metric},{filter_name}' is {value!r}, but the mean "
                             f"of the {len(values)} documents' '{metric}' in {where} is {mean!r}: the results file is "
                             "not these samples' (another model's or another run's?)")


def model_argument_names(model_args: Any) -> set[str]:
    """The argument names in lm-eval's ``config.model_args``: a mapping, its JSON text, or ``k=v,k=v`` text."""
    if isinstance(model_args, dict):
        return set(model_args)
    if not isinstance(model_args, str):
        return set()
    try:
        parsed = json.loads(model_args)
    except ValueError:
        return {part.partition("=")[0].strip() for part in model_args.split(",") if "=" in part}
    return set(parsed) if isinstance(parsed, dict) else set()


def task_configuration(task_config: dict[str, Any], model_args: Any) -> dict[str, Any]:
    """The task's own configuration: lm-eval 0.4 copies the model's arguments (``pretrained``, ``dtype``, ...) into
    each task's ``metadata``, so two models' runs of one task differ there; those members are left out, so that
    ``task_config_sha256`` is equal exactly when the two sides ran the same task configuration."""
    metadata = task_config.get("metadata")
    if not isinstance(metadata, dict):
        return task_config
    names = model_argument_names(model_args)
    return {**task_config, "metadata": {k: v for k, v in metadata.items() if k not in names}}
