"""Evaluator exports as input formats: a spec declares ``format: lm-eval-samples`` (or ``inspect-eval``,
``inspect-json``, ``promptfoo-jsonl``, ``lm-eval-results``) on an input, and the input is read by that tool's
reader into a ``Table`` that carries its ``EvidenceRecords``. Each export is an ``ExportReader``, registered
with the other input formats in ``certa.engine.core.input_formats``.

The input's bytes are the export's own, so its SHA-256 is the file's and the ledger stores the file as it is:
a replay reads the same bytes with the same reader and the same options. Options are declared with the input
(``read:``), never guessed:

==================  ============================================================================================
format              options (``read:``)
==================  ============================================================================================
lm-eval-samples     ``results`` (the name of another input, of format ``lm-eval-results``: the run's
                    ``results_<time>.json``, read for the tool version, task configuration and model) with
                    ``task`` (the samples' task, required with ``results``: the samples' lines do not name it),
                    ``filter`` (required when the file holds several), ``count_unit`` (``bytes``, default, or
                    ``words``: the counts a perplexity is normalised by)
lm-eval-results     none (read through the samples input that names it)
inspect-eval/-json  ``slice`` (a key of each sample's ``metadata`` whose value is the item's slice)
promptfoo-jsonl     ``provider`` (a provider's label or id, required when the file holds several providers'
                    results; a value naming several is refused)
==================  ============================================================================================

An option that only makes a part of the records a stage may leave unused (``slice``: the slices; ``count_unit``:
the weights; ``task`` without ``results``: the provenance's task) is listed by its reader's ``option_parts``, and
the spec refuses it where no stage reading the input would use it (``certa.engine.core.spec``,
``RECORD_PARTS``).

A results file is checked against its samples: lm-eval's ``task_hashes.<task>`` must be the digest of the
samples' identity over every line of the file, whichever filter is read (``_check_results_sibling``).

The table's columns show the records: the key fields (``doc_id``; ``id`` and ``epoch``; ...), the identity
digests, every metric, the counts, and ``weight`` and ``slice`` when present.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from certa.engine.core.evidence.inspect_log import read_inspect_eval, read_inspect_json
from certa.engine.core.evidence.lm_eval import SAMPLES_NAME, read_lm_eval_samples, samples_task_hash
from certa.engine.core.evidence.promptfoo import read_promptfoo_jsonl
from certa.engine.core.evidence.records import EvidenceRecords
from certa.engine.core.evidence.sources import JsonObject
from certa.engine.core.evidence.suite import bundle_files, results_sibling, stated_groups, suite_records
from certa.engine.core.evidence.table_mapping import TableMapping, mapped_records
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.tables import Columns, Table, column_of_cells, column_of_numbers
from certa.engine.foundation.canonical import sha256_hex
from certa.engine.foundation.errors import InputError

__all__ = ["EXPORT_READERS", "RECORD_PARTS", "records_of_table"]


def _lm_eval_samples(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                     limits: InputLimits) -> EvidenceRecords:
    if "results" in options and "task" not in options:  # never guessed: a results file may describe any task
        raise InputError(f"input '{name}': read.results needs read.task, the task of these samples (the file "
                         f"name samples_<task>_<time>.jsonl says it; input '{options['results']}' is read for "
                         "that task's configuration)")
    records = read_lm_eval_samples(raw, companions.get("results"), task=options.get("task"),
                                   results_name=f"input '{options['results']}'" if "results" in options else None,
                                   filter_name=options.get("filter"),
                                   count_unit=options.get("count_unit", "bytes"), name=f"input '{name}'",
                                   limits=limits)
    if "results" in options:
        _check_results_sibling(name, raw, records, options, limits)
    return records


def _lm_eval_suite(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                   limits: InputLimits) -> EvidenceRecords:
    """A folder's samples files (the bundle ``raw``: ``certa.engine.core.evidence.suite``), each read as an
    ``lm-eval-samples`` input named ``<name>/<path>`` with its task from its file name and, when the bundle holds
    it, its ``results_<time>.json`` (checked against the samples as ``read.results`` is), as one table."""
    files = {file.path: file.raw for file in bundle_files(name, raw)}
    siblings = {path: results_sibling(path) for path in files}
    results = {sibling for sibling in siblings.values() if sibling in files}
    stray = sorted(path for path, sibling in siblings.items() if sibling is None and path not in results)
    if stray:
        raise InputError(f"input '{name}': {', '.join(stray[:3])} not named samples_<task>_<time>.jsonl (the task "
                         "of a suite's file is taken from its name); narrow read.glob to the samples files")
    groups = {child: parent for path in sorted(results)
              for child, parent in stated_groups(JsonObject.document(f"{name}/{path}", files[path])).items()}
    parts = []
    for path, sibling in siblings.items():
        if sibling is None:
            continue
        task = SAMPLES_NAME.fullmatch(PurePosixPath(path).name)["task"]  # type: ignore[index]  # a sibling: named so
        given = {**{key: options[key] for key in ("filter", "count_unit") if key in options}, "task": task,
                 **({"results": f"{name}/{sibling}"} if sibling in files else {})}
        parts.append((task, _lm_eval_samples(f"{name}/{path}", files[path], given,
                                             {"results": files[sibling]} if sibling in files else {}, limits)))
    return suite_records(name, parts, groups)


_INSPECT_LOGS = {".eval": read_inspect_eval, ".json": read_inspect_json}
"""An Inspect log's reader by its file's suffix: the ``.eval`` archive, or its JSON form."""


def _inspect_suite(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                   limits: InputLimits) -> EvidenceRecords:
    """A folder's Inspect logs (the bundle ``raw``: ``certa.engine.core.evidence.suite``), each read by its suffix
    as an ``inspect-eval`` or ``inspect-json`` input named ``<name>/<path>``, its task the one the log states
    (``eval.task``), as one table."""
    parts = []
    for file in bundle_files(name, raw):
        reader = _INSPECT_LOGS.get(PurePosixPath(file.path).suffix)
        if reader is None:
            raise InputError(f"input '{name}': {file.path} is neither an Inspect .eval log nor its .json form; "
                             "narrow read.glob to the logs")
        records = reader(file.raw, slice_metadata=None, name=f"input '{name}/{file.path}'", limits=limits)
        if records.provenance.task is None:
            raise InputError(f"input '{name}/{file.path}': the log states no task (eval.task)")
        parts.append((records.provenance.task, records))
    return suite_records(name, parts, {})


def _lm_eval_results(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                     limits: InputLimits) -> None:
    JsonObject.document(name, raw)  # a JSON object, read for provenance by the samples input that names it


def _inspect_eval(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                  limits: InputLimits) -> EvidenceRecords:
    return read_inspect_eval(raw, slice_metadata=options.get("slice"), name=f"input '{name}'", limits=limits)


def _inspect_json(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                  limits: InputLimits) -> EvidenceRecords:
    return read_inspect_json(raw, slice_metadata=options.get("slice"), name=f"input '{name}'", limits=limits)


def _promptfoo_jsonl(name: str, raw: bytes, options: Mapping[str, Any], companions: Mapping[str, bytes],
                     limits: InputLimits) -> EvidenceRecords:
    return read_promptfoo_jsonl(raw, provider=options.get("provider"), name=f"input '{name}'", limits=limits)


RecordsReader = Callable[[str, bytes, Mapping[str, Any], Mapping[str, bytes], InputLimits], EvidenceRecords | None]

RECORD_PARTS: Mapping[str, str | None] = {"slices": "slice", "weights": "weight", "provenance": None}
"""The parts of an export's records that a ``read:`` option may make and a stage may leave unused, each with the
table column that shows it (``_columns``): ``slices`` (``read.slice``), ``weights`` (``read.count_unit``) and
``provenance`` (``read.task`` without ``read.results``: only the task name a certificate's ``sources`` state).
Every other option selects or checks the records themselves (``filter``, ``provider``, ``results``), so every
stage that reads the input uses it."""


def _no_parts(options: Mapping[str, Any]) -> dict[str, str]:
    return {}


def _lm_eval_samples_parts(options: Mapping[str, Any]) -> dict[str, str]:
    """``count_unit`` makes the weights; ``task`` without ``results`` only the provenance's task (with ``results``
    it picks the configuration the results file is checked for)."""
    return {**({"count_unit": "weights"} if "count_unit" in options else {}),
            **({"task": "provenance"} if "task" in options and "results" not in options else {})}


def _inspect_parts(options: Mapping[str, Any]) -> dict[str, str]:
    return {"slice": "slices"} if "slice" in options else {}


@dataclass(frozen=True)
class ExportReader:
    """An evaluator's export as an input format (``certa.engine.core.input_formats.InputFormat``): its name, the
    ``read:`` options it takes, the options naming another input (with that input's format), its reader, and
    ``option_parts``: of the options given, those that make a part of the records a stage may leave unused
    (option -> part of ``RECORD_PARTS``), which the spec checks against the stages reading the input
    (``certa.engine.core.spec``)."""

    name: str
    records: RecordsReader = field(repr=False)
    read_options: frozenset[str] = frozenset()
    companions: Mapping[str, str] = field(default_factory=dict)
    option_parts: Callable[[Mapping[str, Any]], Mapping[str, str]] = field(default=_no_parts, repr=False)

    def read(self, name: str, raw: bytes, *, options: Mapping[str, Any], companions: Mapping[str, bytes],
             limits: InputLimits) -> Table:
        """The input ``name``: the export ``raw`` read with ``options`` (``companions``: the bytes of the
        inputs the options name, by option); the table's columns show its records."""
        limits.check_size(name, self.name, len(raw))  # bytes: the readers bound the rest (sources.EXPORT)
        records = self.records(name, raw, options, companions, limits)
        columns = Columns({}) if records is None else _columns(records)
        return Table(name=name, columns=columns, sha256=sha256_hex(raw), fmt=self.name, raw=raw, evidence=records)


EXPORT_READERS: tuple[ExportReader, ...] = (
    ExportReader("lm-eval-samples", _lm_eval_samples, frozenset({"task", "filter", "count_unit", "results"}),
                 {"results": "lm-eval-results"}, _lm_eval_samples_parts),
    ExportReader("lm-eval-results", _lm_eval_results),
    ExportReader("lm-eval-suite", _lm_eval_suite, frozenset({"glob", "filter", "count_unit"}),
                 option_parts=_lm_eval_samples_parts),
    ExportReader("inspect-eval", _inspect_eval, frozenset({"slice"}), option_parts=_inspect_parts),
    ExportReader("inspect-json", _inspect_json, frozenset({"slice"}), option_parts=_inspect_parts),
    ExportReader("inspect-suite", _inspect_suite, frozenset({"glob"})),
    ExportReader("promptfoo-jsonl", _promptfoo_jsonl, frozenset({"provider"})),
)
"""The evaluator exports certa reads (module docstring), registered by ``certa.engine.core.input_formats``."""


def _check_results_sibling(name: str, raw: bytes, records: EvidenceRecords, options: Mapping[str, Any],
                           limits: InputLimits) -> None:
    """Refuse a results file that is not the samples' own run of the task: lm-evaluation-harness 0.4 states, in
    ``task_hashes.<task>``, the SHA-256 of the task's samples' ``doc_hash + prompt_hash + target_hash``
    concatenated over every line of the samples file, every filter's, in its order (``samples_task_hash``).
    Checked whenever the results file states it, also when the samples hold several filters and only one is read."""
    stated = dict(records.provenance.details).get("task_hash")
    if stated is None:
        return
    digest = samples_task_hash(raw, f"input '{name}'", limits)
    if digest != stated:
        lines = sum(1 for line in raw.splitlines() if line.strip())
        every = f" over its {lines} lines (every filter's)" if lines != records.n_items else ""
        raise InputError(f"input '{options['results']}' does not describe the samples of input '{name}' as task "
                         f"'{options['task']}': its task_hashes.{options['task']} is {stated}, the samples' "
                         f"digests{every} give {digest}; give the samples' own results_<time>.json "
                         f"(--input {options['results']}=PATH) and their task (read.task)")


def _columns(records: EvidenceRecords) -> Columns:
    """The records as table columns: key fields and identity digests as text, metrics, counts and weights as
    numbers, the slice as text."""
    text = {**records.keys, **records.identity, **({"slice": records.slices} if records.slices is not None else {})}
    numbers = {**records.metrics, **records.counts,
               **({"weight": records.weights} if records.weights is not None else {})}
    clash = sorted(set(text) & set(numbers))
    if clash:
        raise InputError(f"{records.source}: field(s) {', '.join(clash)} are both a key and a metric")
    return Columns({**{n: column_of_cells(np.asarray(v).astype(str).astype(object)) for n, v in text.items()},
                    **{n: column_of_numbers(np.asarray(v, dtype=np.float64)) for n, v in numbers.items()}})


def records_of_table(table: Table, *, item: str, metrics: Sequence[str], slice_column: str | None,
                     weight_column: str | None = None, repeat_column: str | None = None,
                     task_column: str | None = None) -> EvidenceRecords:
    """The records of an input: an evaluator export's own (its items keyed by the tool's identity; ``item``
    does not apply), or a plain table's rows under the mapping ``item`` / ``metrics`` / ``slice_column`` /
    ``repeat_column`` / ``task_column`` (``TableMapping``: with a task column, keyed by (task, item[, repeat])
    with the task as the slice)."""
    if table.evidence is not None:
        if slice_column is not None:
            raise InputError(f"input '{table.name}' is a {table.fmt} export: its slices come from the input's "
                             f"read.slice, not from a column (columns.slice: {slice_column!r})")
        if repeat_column is not None:
            raise InputError(f"input '{table.name}' is a {table.fmt} export: its repeats are the tool's own "
                             f"({table.evidence.repeat_field or 'none'}), not a column ({repeat_column!r})")
        if task_column is not None:
            raise InputError(f"input '{table.name}' is a {table.fmt} export: its tasks are the tool's own (a folder "
                             f"of exports is read as lm-eval-suite or inspect-suite), not a column "
                             f"(columns.task: {task_column!r})")
        return table.evidence
    if table.fmt in {reader.name for reader in EXPORT_READERS}:
        raise InputError(f"input '{table.name}' (format {table.fmt}) holds no per-item records; it is read through "
                         "the samples input that names it")
    return mapped_records(table, TableMapping(item_id=item, metrics=tuple(metrics), weight=weight_column,
                                              slice=slice_column, repeat=repeat_column, task=task_column))
