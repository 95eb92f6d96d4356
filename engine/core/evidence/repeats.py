"""Repeated trials: the samples of two sides' records whose key holds a repeat field (Inspect's ``epoch``, a table's
repeat column), the paired rows grouped by sample, and everything pairing left unpaired, counted by sample.

A record's key is (sample fields, repeat field); its sample is the key without the repeat field
(``EvidenceRecords.repeat_field``). Without a repeat field every record is its own sample. Samples are numbered
0..n−1 in the canonical order of their keys (``certa.engine.core.stats.pairing.group_codes``), so a computation
over samples does not depend on the order of the export's records (without a repeat field every paired record is
a sample of its own, numbered in the paired order, and the pairing report's counts are the samples').

What is counted (``SampleUnits``), each a fact a profile rule reads:

* samples of each side, and the samples found on one side only;
* samples with an identity-mismatched row (the same sample key, another input or target digest);
* repeats (rows) of a sample found on both sides that have no partner: an epoch present in one arm only;
* samples on both sides none of whose repeats paired;
* the paired repeats of each paired sample (``repeats``): equal, or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from certa.engine.core.stats.pairing import group_codes
from certa.engine.foundation.errors import InputError

from .pairing import PairedEvidence
from .records import EvidenceRecords

__all__ = ["SampleUnits", "sample_units"]


@dataclass(frozen=True)
class SampleUnits:
    """The samples of a pairing (module docstring). Keys are tuples of the sample fields' values."""

    sample_fields: tuple[str, ...]
    repeat_field: str | None
    repeat_position: int | None
    """Where the repeat field is in a record's key (None: no repeat field)."""
    codes: np.ndarray
    """Per paired row (in the paired records' order), its sample's number 0..n−1 (canonical key order)."""
    first_row: np.ndarray
    """Per sample, the position of its first paired row: the order in which the samples arrived."""
    repeats: np.ndarray
    """Per sample, its paired repeats (rows)."""
    keys: tuple[tuple, ...]
    """Per sample, its key."""
    baseline_samples: int
    subject_samples: int
    only_baseline: tuple[tuple, ...]
    """Keys of samples found in the baseline only (in the baseline's order)."""
    only_subject: tuple[tuple, ...]
    """Keys of samples found in the subject only (in the subject's order)."""
    identity_mismatched: tuple[tuple, ...]
    """Keys of samples with a row whose identity digests differ between the sides."""
    unpaired_repeats_baseline: tuple[tuple, ...]
    """Full keys of baseline rows without a partner whose sample is on both sides."""
    unpaired_repeats_subject: tuple[tuple, ...]
    """Full keys of subject rows without a partner whose sample is on both sides."""
    without_paired_repeat: tuple[tuple, ...]
    """Keys of samples on both sides none of whose rows paired (an identity mismatch aside)."""

    @property
    def n_samples(self) -> int:
        """The paired samples: the units of analysis."""
        return int(self.repeats.size)

    @property
    def has_repeats(self) -> bool:
        """Some paired sample has more than one paired repeat."""
        return bool(self.repeats.size and self.repeats.max() > 1)

    @property
    def samples_with_unpaired_repeats(self) -> int:
        """Samples on both sides with a repeat in one arm only."""
        return len({*map(self._sample_of, self.unpaired_repeats_baseline),
                    *map(self._sample_of, self.unpaired_repeats_subject)})

    def repeat_counts(self) -> list[dict[str, int]]:
        """How many samples have each number of paired repeats, fewest repeats first."""
        values, counts = np.unique(self.repeats, return_counts=True)
        return [{"repeats": int(r), "samples": int(k)} for r, k in zip(values.tolist(), counts.tolist())]

    def _sample_of(self, key: tuple) -> tuple:
        return _without(key, self.repeat_position)


def _without(key: tuple, position: int | None) -> tuple:
    return key if position is None else key[:position] + key[position + 1:]


def sample_units(baseline: EvidenceRecords, subject: EvidenceRecords, paired: PairedEvidence) -> SampleUnits:
    """The samples of ``paired`` (the pairing of ``baseline`` with ``subject``), and what pairing left unpaired,
    by sample (module docstring)."""
    if baseline.repeat_field != subject.repeat_field:
        raise InputError(f"cannot pair {baseline.source} (repeats: {baseline.repeat_field or 'none'}) with "
                         f"{subject.source} (repeats: {subject.repeat_field or 'none'}); both sides must number "
                         "their repeats the same way")
    repeat_field = baseline.repeat_field
    report = paired.report
    rows = paired.baseline
    if repeat_field is None:  # every record is its own sample: the pairing report says everything
        every = np.arange(rows.n_items, dtype=np.intp)
        return SampleUnits(
            sample_fields=baseline.key_fields, repeat_field=None, repeat_position=None, codes=every,
            first_row=every, repeats=np.ones(rows.n_items, dtype=np.intp), keys=tuple(rows.item_keys()),
            baseline_samples=report.n_baseline, subject_samples=report.n_subject,
            only_baseline=report.unmatched_baseline, only_subject=report.unmatched_subject,
            identity_mismatched=report.mismatched_keys, unpaired_repeats_baseline=(), unpaired_repeats_subject=(),
            without_paired_repeat=())
    position = baseline.key_fields.index(repeat_field)
    sample_fields = tuple(f for f in baseline.key_fields if f != repeat_field)
    codes, n = group_codes(*(rows.keys[f] for f in sample_fields)) if rows.n_items else (np.zeros(0, np.intp), 0)
    first_row = np.full(n, rows.n_items, dtype=np.intp)
    np.minimum.at(first_row, codes, np.arange(rows.n_items))
    repeats = np.bincount(codes, minlength=n)
    row_keys = rows.item_keys()
    keys = tuple(_without(row_keys[i], position) for i in first_row.tolist())

    base_samples = _samples(baseline, position)
    subject_samples = _samples(subject, position)
    both = set(base_samples) & set(subject_samples)
    mismatched = {_without(key, position) for key in report.mismatched_keys}
    paired_samples = set(keys)
    return SampleUnits(
        sample_fields=sample_fields, repeat_field=repeat_field, repeat_position=position, codes=codes,
        first_row=first_row, repeats=repeats, keys=keys, baseline_samples=len(base_samples),
        subject_samples=len(subject_samples),
        only_baseline=tuple(k for k in base_samples if k not in both),
        only_subject=tuple(k for k in subject_samples if k not in both),
        identity_mismatched=tuple(sorted(mismatched, key=repr)),
        unpaired_repeats_baseline=_in_samples(report.unmatched_baseline, both, position),
        unpaired_repeats_subject=_in_samples(report.unmatched_subject, both, position),
        without_paired_repeat=tuple(k for k in base_samples
                                    if k in both and k not in paired_samples and k not in mismatched))


def _samples(records: EvidenceRecords, position: int | None) -> list[tuple]:
    """The distinct sample keys of ``records``, in the order they first occur."""
    return list(dict.fromkeys(_without(key, position) for key in records.item_keys()))


def _in_samples(keys: Sequence[tuple], samples: set[tuple], position: int | None) -> tuple[tuple, ...]:
    return tuple(key for key in keys if _without(key, position) in samples)
