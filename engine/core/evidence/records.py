"""The frozen result every evidence reader returns: per-item records (keys, metrics, counts, weights, slice)
and the provenance the export states.

Arrays are read-only and all of one length (the number of items); mappings are read-only views. A reader
never drops a record: a record it cannot read is an ``InputError`` naming the file, the line or member and the
field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError

__all__ = ["Provenance", "EvidenceRecords", "require_unique_keys", "rows_repeat"]


@dataclass(frozen=True)
class Provenance:
    """What an export says about where its numbers come from (``None`` where it does not say)."""

    tool: str
    """The evaluator: ``lm-evaluation-harness``, ``inspect_ai``, ``promptfoo`` or ``table``."""
    tool_version: str | None = None
    task: str | None = None
    task_version: str | None = None
    task_config_sha256: str | None = None
    """SHA-256 of the RFC 8785 canonical JSON of the task's configuration as the export records it."""
    models: tuple[tuple[str, str], ...] = ()
    """(field, value) pairs naming the model, in the export's own words (e.g. ``("model_args", "pretrained=...")``)."""
    details: tuple[tuple[str, str], ...] = ()
    """Other stated facts worth recording (the tool's own task hash, run status, date, filter)."""
    sources: tuple[tuple[str, str], ...] = ()
    """(file name, SHA-256 of its bytes) for every file read."""

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values, as a certificate records them (each (field, value) pair an object, in the export's order)."""
        return {"tool": self.tool, "tool_version": self.tool_version, "task": self.task,
                "task_version": self.task_version, "task_config_sha256": self.task_config_sha256,
                "models": [{"field": k, "value": v} for k, v in self.models],
                "details": [{"field": k, "value": v} for k, v in self.details],
                "files": [{"name": name, "sha256": digest} for name, digest in self.sources]}


def _frozen_array(values: np.ndarray) -> np.ndarray:
    array = np.array(values)  # a copy: the caller's array stays the caller's
    array.flags.writeable = False
    return array


def _frozen_mapping(columns: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    return MappingProxyType({name: _frozen_array(values) for name, values in columns.items()})


@dataclass(frozen=True, eq=False)
class EvidenceRecords:
    """One side's per-item records, in the order of the export.

    ``keys`` holds one array per field of the tool's item identity (``key_fields``), ``identity`` the digests
    that must agree when two sides are paired (lm-eval's ``doc_hash``, ``prompt_hash``, ``target_hash``),
    ``metrics`` the per-item values (float64, finite), ``counts`` the per-item counts a metric is normalised
    by (int64), ``weights`` the per-item weight (float64) and ``slices`` each item's category (text).
    ``repeat_field`` names the key field that numbers repeated trials of one sample (Inspect's ``epoch``, a
    table's repeat column), when the export has one: the sample is the key without it.
    """

    source: str
    key_fields: tuple[str, ...]
    keys: Mapping[str, np.ndarray]
    metrics: Mapping[str, np.ndarray]
    provenance: Provenance
    identity: Mapping[str, np.ndarray] = field(default_factory=dict)
    counts: Mapping[str, np.ndarray] = field(default_factory=dict)
    weights: np.ndarray | None = None
    slices: np.ndarray | None = None
    keys_across_models: Mapping[str, np.ndarray] = field(default_factory=dict)
    """The item's key whichever model's results it is, for an export whose own key (``keys``) also names the
    model's column: promptfoo's ``promptIdx`` numbers provider × prompt columns, so across providers an item is
    (``testIdx``, ``prompt.label``). Empty where ``keys`` is the item's key for every model, or where the export
    does not state one (``certa.engine.core.evidence.pairing`` uses it only when ``keys`` pair no item)."""
    repeat_field: str | None = None
    """The key field that numbers repeated trials of one sample (Inspect's ``epoch``, a table's repeat column);
    the sample is the key without it. None: every record is its own sample."""

    def __post_init__(self) -> None:
        if tuple(self.keys) != self.key_fields:
            raise ValueError(f"keys {tuple(self.keys)} do not follow key_fields {self.key_fields}")
        if self.repeat_field is not None and (self.repeat_field not in self.key_fields or len(self.key_fields) < 2):
            raise ValueError(f"repeat_field {self.repeat_field!r} must be one of several key_fields {self.key_fields}")
        for name in ("keys", "metrics", "identity", "counts", "keys_across_models"):
            object.__setattr__(self, name, _frozen_mapping(getattr(self, name)))
        for name in ("weights", "slices"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _frozen_array(getattr(self, name)))
        lengths = {len(values) for group in (self.keys, self.metrics, self.identity, self.counts,
                                             self.keys_across_models)
                   for values in group.values()}
        lengths |= {len(values) for values in (self.weights, self.slices) if values is not None}
        if len(lengths) > 1:
            raise ValueError(f"{self.source}: per-item arrays of different lengths {sorted(lengths)}")

    @property
    def n_items(self) -> int:
        """The number of items (records) read."""
        return len(self.keys[self.key_fields[0]])

    def item_keys(self) -> list[tuple]:
        """Each item's key as a tuple of Python values, in the order of ``key_fields``."""
        return list(zip(*(self.keys[name].tolist() for name in self.key_fields)))

    def take(self, index: np.ndarray) -> EvidenceRecords:
        """The records at ``index`` (positions into this side), in that order, with the same provenance."""
        def rows(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {name: values[index] for name, values in columns.items()}

        return replace(self, keys=rows(self.keys), metrics=rows(self.metrics), identity=rows(self.identity),
                       counts=rows(self.counts), weights=None if self.weights is None else self.weights[index],
                       slices=None if self.slices is None else self.slices[index],
                       keys_across_models=rows(self.keys_across_models))


def require_unique_keys(where: str, key_fields: Sequence[str], keys: Sequence[tuple],
                        locations: Sequence[str]) -> None:
    """Raise an ``InputError`` naming both locations of the first item key that occurs twice in ``keys``
    (``locations[i]`` says where record ``i`` was read: a line or a member)."""
    if len(set(keys)) == len(keys):
        return
    first: dict[tuple, int] = {}
    for index, key in enumerate(keys):
        if key in first:
            named = ", ".join(f"{name}={value!r}" for name, value in zip(key_fields, key))
            raise InputError(f"{where}: {locations[index]}: item {named} occurs twice (first at "
                             f"{locations[first[key]]}); each item must appear once per export")
        first[key] = index


def rows_repeat(columns: Sequence[np.ndarray]) -> bool:
    """Whether two rows of the equally long integer ``columns`` are equal: the rows sorted (``np.lexsort``), then
    each compared with the next; a few bytes a row, where a set of key tuples costs about 200."""
    if not len(columns[0]):
        return False
    order = np.lexsort(columns[::-1])
    same = np.ones(len(order) - 1, dtype=bool)
    for column in columns:
        ordered = column[order]
        same &= ordered[1:] == ordered[:-1]
    return bool(same.any())
