"""Evidence: per-item results of the evaluation tools people already run, read into one frozen form.

Each reader takes an export's bytes or path and returns ``EvidenceRecords`` (item keys, per-item metrics as
numpy arrays, counts, weights, slices, and the provenance the export states); ``pair_records`` pairs two sides
by the tool's own item identity and reports what it could not pair. Readers are pure: no network, no writes.

======================================  =============================================
export                                  reader
======================================  =============================================
lm-evaluation-harness ``--log_samples``  ``read_lm_eval_samples`` (``lm_eval.py``)
Inspect AI ``.eval``                    ``read_inspect_eval`` (``inspect_log.py``)
Inspect AI JSON log                     ``read_inspect_json`` (``inspect_log.py``)
promptfoo JSON Lines                    ``read_promptfoo_jsonl`` (``promptfoo.py``)
CSV / JSON Lines / Parquet + mapping    ``read_mapped_table`` (``table_mapping.py``)
======================================  =============================================

``docs/evidence.md`` says which field of each export becomes what.
"""

from __future__ import annotations

from .inspect_log import read_inspect_eval, read_inspect_json
from .lm_eval import read_lm_eval_samples
from .pairing import PairedEvidence, PairingReport, pair_records
from .promptfoo import read_promptfoo_jsonl
from .records import EvidenceRecords, Provenance
from .table_mapping import TableMapping, read_mapped_table

__all__ = ["EvidenceRecords", "Provenance", "PairedEvidence", "PairingReport", "TableMapping", "pair_records",
           "read_inspect_eval", "read_inspect_json", "read_lm_eval_samples", "read_mapped_table",
           "read_promptfoo_jsonl"]
