"""Pairing two sides' records by the tool's own item identity, with a report of everything left unpaired.

Items pair when their keys are equal (lm-eval: ``doc_id``; Inspect: (``id``, ``epoch``); promptfoo:
(``testIdx``, ``promptIdx``); a mapped table: its id column, after its task column and with its repeat column when
mapped). A pair whose identity digests differ (lm-eval's ``doc_hash``, ``prompt_hash``, ``target_hash``; Inspect's
input and target; promptfoo's variables and prompt), or whose slices differ, is not the same item on both sides: it
is left out of the pairs and named in the report, as are the items of each side that have no partner. Nothing is
dropped without being reported; whether an incomplete pairing is acceptable is a profile's decision (recorded in
``dev``, an abort in ``ci`` and ``release``), taken upstream from ``PairingReport``.

An export whose key also names the model's column (promptfoo: ``promptIdx`` numbers provider × prompt columns,
so two providers of one evaluation never share a key) states the item's key across models
(``EvidenceRecords.keys_across_models``: ``testIdx`` and ``prompt.label``). When the two sides' own keys pair no
item and both sides state that key, they are paired by it instead, with the same identity checks; the report's
``key_fields`` says which key paired them. Sides whose own keys pair some item are paired by those keys, as
before, so a pairing that ever produced a certificate is unchanged.

Two sides that are the same records are refused: one input on both sides, or an evaluator's export read twice
from the same bytes with the same selection. A model's results compared with themselves certify nothing, and
there is no option to allow it. (Two plain tables with equal bytes are not refused: a table of ids and scores
holds only the results, which two models that agree on every item share.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from types import MappingProxyType
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError

from .records import EvidenceRecords

__all__ = ["PairingReport", "PairedEvidence", "key_text", "pair_records", "unpaired_text"]


@dataclass(frozen=True)
class PairingReport:
    """What pairing two sides found: counts, and the keys of unmatched and mismatched items (in each side's
    order)."""

    key_fields: tuple[str, ...]
    n_baseline: int
    n_subject: int
    n_paired: int
    unmatched_baseline: tuple[tuple, ...]
    """Keys of baseline items with no subject item of the same key."""
    unmatched_subject: tuple[tuple, ...]
    """Keys of subject items with no baseline item of the same key."""
    identity_mismatches: Mapping[str, tuple[tuple, ...]]
    """For each identity field (e.g. ``prompt_hash``, ``slice``), the keys whose values differ between sides."""

    @property
    def mismatched_keys(self) -> tuple[tuple, ...]:
        """Keys present on both sides but not paired, because at least one identity field differs."""
        keys = {key for mismatched in self.identity_mismatches.values() for key in mismatched}
        return tuple(sorted(keys, key=repr))

    @property
    def complete(self) -> bool:
        """Every item of both sides is paired."""
        return self.n_paired == self.n_baseline == self.n_subject

    def summary(self, examples: int) -> dict[str, Any]:
        """The report as a certificate's ``pairing`` block: the key used, the counts of items read, paired and left
        unpaired (by kind), the identity fields that differed, and the first ``examples`` keys of each kind."""
        return {"key_fields": list(self.key_fields), "baseline_items": self.n_baseline,
                "subject_items": self.n_subject, "paired": self.n_paired,
                "unmatched_baseline": len(self.unmatched_baseline), "unmatched_subject": len(self.unmatched_subject),
                "identity_mismatched": len(self.mismatched_keys),
                "identity_fields_mismatched": sorted(self.identity_mismatches),
                "examples": {"unmatched_baseline": [list(k) for k in self.unmatched_baseline[:examples]],
                             "unmatched_subject": [list(k) for k in self.unmatched_subject[:examples]],
                             "identity_mismatched": [list(k) for k in self.mismatched_keys[:examples]]}}

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON values (for a certificate or a recorded decision): counts, then keys."""
        return {"key_fields": list(self.key_fields), "n_baseline": self.n_baseline, "n_subject": self.n_subject,
                "n_paired": self.n_paired, "n_unmatched_baseline": len(self.unmatched_baseline),
                "n_unmatched_subject": len(self.unmatched_subject),
                "n_identity_mismatched": len(self.mismatched_keys),
                "unmatched_baseline": [list(key) for key in self.unmatched_baseline],
                "unmatched_subject": [list(key) for key in self.unmatched_subject],
                "identity_mismatches": {field: [list(key) for key in keys]
                                        for field, keys in self.identity_mismatches.items()}}


@dataclass(frozen=True, eq=False)
class PairedEvidence:
    """The paired items of two sides: ``baseline`` and ``subject`` hold the same items in the same order
    (the baseline's), so ``subject.metrics[m] - baseline.metrics[m]`` is the per-item difference;
    ``baseline_index`` and ``subject_index`` are their positions in the two sides as read (a table built from
    the records, row for row, pairs by them)."""

    baseline: EvidenceRecords
    subject: EvidenceRecords
    report: PairingReport
    baseline_index: np.ndarray
    subject_index: np.ndarray


def key_text(fields: Sequence[str], key: tuple) -> str:
    """An item's key in a message: ``doc_id=23``, ``id='q1', epoch=2``."""
    return ", ".join(f"{f}={v!r}" for f, v in zip(fields, key))


def unpaired_text(noun: str, fields: Sequence[str], only_baseline: Sequence[tuple], only_subject: Sequence[tuple],
                  mismatched: Sequence[tuple], n_paired: int) -> str:
    """What a pairing left out, in words, as the ``items_paired`` and ``samples_paired`` rules state it: the
    ``noun``s found on one side only and those whose identity digests differ, counted, with the first of them by
    key (``fields``), and how many the estimate covers."""
    first = ([("only in the baseline", k) for k in only_baseline[:1]]
             + [("only in the subject", k) for k in only_subject[:1]]
             + [("with another identity digest", k) for k in mismatched[:1]])
    return (f"{len(only_baseline)} {noun}(s) only in the baseline, {len(only_subject)} only in the subject, "
            f"{len(mismatched)} with another input or target digest"
            + (f" (first {first[0][0]}: {key_text(fields, first[0][1])})" if first else "")
            + f"; the estimate covers the {n_paired} {noun}(s) paired")


def pair_records(baseline: EvidenceRecords, subject: EvidenceRecords) -> PairedEvidence:
    """Pair ``baseline`` and ``subject`` items by key, requiring equal identity digests and slices (by the key
    across models when the sides' own keys pair no item: module docstring). Refuses two sides that are the same
    records (``InputError``)."""
    if baseline.key_fields != subject.key_fields:
        raise InputError(f"cannot pair {baseline.source} (items keyed by {', '.join(baseline.key_fields)}) with "
                         f"{subject.source} (keyed by {', '.join(subject.key_fields)}); export both sides with "
                         "the same tool, or map both tables' id columns to the same name")
    _refuse_the_same_records(baseline, subject)
    paired = _pair_by(baseline, subject, baseline.key_fields, baseline.keys, subject.keys)
    across = tuple(baseline.keys_across_models)
    if paired.report.n_paired or not across or across != tuple(subject.keys_across_models):
        return paired
    return _pair_by(baseline, subject, across, baseline.keys_across_models, subject.keys_across_models)


def _refuse_the_same_records(baseline: EvidenceRecords, subject: EvidenceRecords) -> None:
    """An ``InputError`` when the two sides are the same records, read from the same bytes (every file read, by
    SHA-256) with the same selection (the same models and details stated) and holding the same item keys: one
    input on both sides (the same ``source``), or an evaluator's export read twice. An export holds the model's
    own outputs and identifiers, so two models' exports are never the same bytes; a plain table of ids and scores
    holds only the results, and two models that agree on every item write the same table, so two table inputs
    with equal bytes are not refused."""
    a, b = baseline.provenance, subject.provenance
    digests = sorted(digest for _, digest in a.sources)
    if (not digests or digests != sorted(digest for _, digest in b.sources) or a.models != b.models
            or a.details != b.details or baseline.item_keys() != subject.item_keys()):
        return
    nothing = ("a comparison of results with themselves certifies nothing, and certa has no option to allow it; "
               "give the baseline's and the subject's results")
    if baseline.source == subject.source:
        raise InputError(f"{baseline.source} is both the baseline and the subject: {nothing}")
    if a.tool == "table":
        return
    raise InputError(f"{baseline.source} and {subject.source} are the same records (the same bytes, SHA-256 "
                     f"{', '.join(digests)}, read the same way): {nothing}")


def _pair_by(baseline: EvidenceRecords, subject: EvidenceRecords, key_fields: tuple[str, ...],
             base_columns: Mapping[str, np.ndarray], subject_columns: Mapping[str, np.ndarray]) -> PairedEvidence:
    """The pairing of the two sides by the key ``key_fields`` whose values are ``base_columns`` and
    ``subject_columns``."""
    base_keys = list(zip(*(base_columns[name].tolist() for name in key_fields)))
    subject_keys = list(zip(*(subject_columns[name].tolist() for name in key_fields)))
    position = {key: index for index, key in enumerate(subject_keys)}
    partner = np.fromiter(map(position.get, base_keys, repeat(-1)), dtype=np.intp, count=len(base_keys))
    has_partner = partner >= 0
    base_index, subject_index = np.flatnonzero(has_partner), partner[has_partner]
    claimed = np.zeros(len(subject_keys), dtype=bool)
    claimed[subject_index] = True

    compared = {field: (baseline.identity[field], subject.identity[field])
                for field in baseline.identity if field in subject.identity}
    if baseline.slices is not None and subject.slices is not None:
        compared["slice"] = (baseline.slices, subject.slices)
    agrees = np.ones(len(base_index), dtype=bool)
    mismatches: dict[str, tuple[tuple, ...]] = {}
    for field, (base_values, subject_values) in compared.items():
        differs = np.asarray(base_values[base_index] != subject_values[subject_index], dtype=bool)
        if differs.any():
            mismatches[field] = tuple(base_keys[i] for i in base_index[differs].tolist())
        agrees &= ~differs

    report = PairingReport(
        key_fields=key_fields, n_baseline=baseline.n_items, n_subject=subject.n_items,
        n_paired=int(agrees.sum()),
        unmatched_baseline=tuple(base_keys[i] for i in np.flatnonzero(~has_partner).tolist()),
        unmatched_subject=tuple(subject_keys[i] for i in np.flatnonzero(~claimed).tolist()),
        identity_mismatches=MappingProxyType(mismatches))
    kept_base, kept_subject = base_index[agrees], subject_index[agrees]
    return PairedEvidence(baseline=baseline.take(kept_base), subject=subject.take(kept_subject), report=report,
                          baseline_index=kept_base, subject_index=kept_subject)
