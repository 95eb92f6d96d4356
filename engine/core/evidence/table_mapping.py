"""Any per-record table (CSV, JSON Lines or Parquet) read as evidence through a declared mapping of its columns.

The table is parsed by ``certa.engine.core.tables.parse_table`` (the reader of every certa input, within the same input
limits); the mapping names the item id column, the metric columns, and optionally a weight, a slice, a repeat and a
task column. Item key: the id column's text, or (id, repeat) when a repeat column numbers repeated trials of one item
(then the repeat is the key's ``repeat_field`` and each (id, repeat) occurs once). With a task column the table is a
suite, read as ``certa.engine.core.evidence.suite`` reads a folder of exports: the key is (task, id[, repeat]), so an
id may recur across tasks but occurs once per task, every row names its task (a blank one is refused), and the task
is the slice (a slice column besides is refused). Metrics and weights: finite numbers (weights ≥ 0); slice, repeat
and task: text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits, read_input_file
from certa.engine.core.tables import FORMATS, Table, format_for_path, parse_table

from .records import EvidenceRecords, Provenance, require_unique_keys
from .sources import Source

__all__ = ["TableMapping", "read_mapped_table", "mapped_records"]


@dataclass(frozen=True)
class TableMapping:
    """Which columns of a per-record table are what."""

    item_id: str
    """The column naming each item; its values must be unique and are paired across the two sides."""
    metrics: tuple[str, ...]
    """The columns of per-item metric values (each becomes a metric of the same name)."""
    weight: str | None = None
    """A column of per-item weights (e.g. token or byte counts), finite and ≥ 0."""
    slice: str | None = None
    """A column of per-item categories, for results per slice."""
    repeat: str | None = None
    """A column naming each row's repeat (epoch, trial, seed) of its item: rows are keyed by (item, repeat)."""
    task: str | None = None
    """A column naming each row's task, for a table of several tasks (a suite): rows are keyed by (task, item[,
    repeat]) and the task is the slice, so ``slice`` is not given with it."""

    def __post_init__(self) -> None:
        if not self.metrics:
            raise InputError("a table mapping names at least one metric column")
        named = [self.item_id, *self.metrics,
                 *(c for c in (self.weight, self.slice, self.repeat, self.task) if c is not None)]
        repeated = sorted({column for column in named if named.count(column) > 1})
        if repeated:
            raise InputError(f"a table mapping names column(s) {', '.join(repeated)} more than once")
        if self.slice is not None and self.task is not None:
            raise InputError(f"a table mapping names a slice column ('{self.slice}') and a task column "
                             f"('{self.task}'): the task is the slice (results per task), so name only the task")


def read_mapped_table(table: Source, mapping: TableMapping, *, fmt: str | None = None,
                      name: str | None = None, limits: InputLimits | None = None) -> EvidenceRecords:
    """The records of a table under ``mapping``; ``fmt`` (``csv``, ``jsonl``, ``parquet``) defaults to the
    file's suffix and must be given for bytes."""
    limits = limits or InputLimits.from_env()
    if isinstance(table, (bytes, bytearray, memoryview)):
        if fmt not in FORMATS:
            raise InputError(f"a table given as bytes needs its format: one of {', '.join(FORMATS)} (got {fmt!r})")
        where, raw = name or "<bytes>", bytes(table)
    else:
        path = Path(table)
        fmt = fmt or format_for_path(path)
        where = name or path.name
        raw = read_input_file(where, path, fmt, limits)
    return mapped_records(parse_table(where, raw, fmt, limits), mapping)


def mapped_records(parsed: Table, mapping: TableMapping) -> EvidenceRecords:
    """The records of an input table already parsed (``certa.engine.core.tables.Table``) under ``mapping``."""
    where, fmt = parsed.name, parsed.fmt
    ids = parsed.text(mapping.item_id)
    located = [f"row {row}" for row in range(1, len(ids) + 1)]
    if not len(ids):
        raise InputError(f"input '{where}': the table has no rows")
    tasks = None if mapping.task is None else _named_tasks(parsed, mapping.task)
    keys = {**({mapping.task: tasks} if mapping.task is not None else {}), mapping.item_id: ids}
    if mapping.repeat is not None:
        keys[mapping.repeat] = parsed.text(mapping.repeat)
    require_unique_keys(f"input '{where}'", tuple(keys), list(zip(*(column.tolist() for column in keys.values()))),
                        located)
    metrics = {column: parsed.numeric(column) for column in mapping.metrics}
    weights = None
    if mapping.weight is not None:
        weights = parsed.numeric(mapping.weight)
        negative = np.flatnonzero(weights < 0)
        if negative.size:
            raise InputError(f"input '{where}', column '{mapping.weight}', row {negative[0] + 1}: weight "
                             f"{float(weights[negative[0]])!r} is negative ({negative.size} such row(s))")
    slices = parsed.text(mapping.slice) if mapping.slice is not None else tasks
    provenance = Provenance(tool="table", details=(("format", fmt),), sources=((where, parsed.sha256),))
    return EvidenceRecords(source=where, key_fields=tuple(keys), keys=keys, metrics=metrics, provenance=provenance,
                           weights=weights, slices=slices, repeat_field=mapping.repeat)


def _named_tasks(parsed: Table, column: str) -> np.ndarray:
    """The task column's text, refused (``InputError`` naming the first row and the count) where a row's task is
    empty or only spaces: a missing cell (CSV, JSON Lines or a Parquet null) reads as empty."""
    tasks = parsed.text(column)
    blanks = [task for task in set(tasks.tolist()) if not task.strip()]  # over the distinct tasks, not the rows
    if blanks:
        blank = np.flatnonzero(np.isin(tasks, blanks))
        raise InputError(f"input '{parsed.name}', column '{column}', row {blank[0] + 1}: the task is missing "
                         f"({blank.size} such row(s)); every row of a table with a task column names its task")
    return tasks
