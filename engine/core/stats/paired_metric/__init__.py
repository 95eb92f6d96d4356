"""Paired per-item metrics of a subject and a baseline model: intervals, tests and slices (pure functions).

Binary metrics (accuracy, exact match, pass@1) go through the paired 2×2 table (``table``); the difference
is always Δ = p_subject − p_baseline, negative when the subject is worse.

| question                                   | function                            | module          |
|--------------------------------------------|-------------------------------------|-----------------|
| interval for Δ (recommended)               | ``tango_interval``                  | ``tango``       |
| interval for Δ (closed form)               | ``newcombe_interval``               | ``newcombe``    |
| is the subject at most δ worse?            | ``tango_noninferiority_test``       | ``tango``       |
| ... decided by the reported interval       | ``interval_noninferiority``         | ``noninferiority`` |
| is |Δ| < δ?                                | ``tango_equivalence_test``          | ``tango``       |
| do the proportions differ at all?          | ``mcnemar_exact_test``              | ``mcnemar``     |
| smallest Δ this n detects                  | ``minimum_detectable_difference``   | ``detectable``  |
| bounded continuous metric (F1): interval   | ``bca_mean_difference``             | ``bounded``     |
| ... valid at any stopping time             | ``anytime_mean_difference``         | ``bounded``     |
| per slice, adjusted across slices          | ``binary_slices``, ``adjusted_slices`` | ``slices``, ``multiplicity`` |

Methods, formulas and the simulation figures: docs/paired_metric.md.
"""

from .clustered import (CLUSTERED_METHODS, ClusteredTable, clustered_interval, clustered_noninferiority,
                        clustered_score_test, clustered_slices, clustered_table, sample_cell_counts, sample_means,
                        t_factor)
from .bounded import AnytimeMeanDifference, BootstrapMeanDifference, anytime_mean_difference, bca_mean_difference
from .detectable import DetectableDifference, minimum_detectable_difference
from .mcnemar import McNemarTest, mcnemar_exact_test
from .multiplicity import (SliceResult, SliceResults, adjust_p_values, adjusted_slices, benjamini_hochberg_adjust,
                           holm_adjust)
from .newcombe import newcombe_interval, newcombe_phi, wilson_interval
from .noninferiority import IntervalNoninferiority, interval_noninferiority
from .slices import binary_slices
from .table import CountTable, EffectiveTable, PairedTable, paired_table_from_outcomes, paired_tables_by_slice
from .tango import (DifferenceInterval, EquivalenceTest, ScoreTest, tango_equivalence_test, tango_interval,
                    tango_noninferiority_test, tango_score_statistic, tango_score_test)

__all__ = [
    "CLUSTERED_METHODS", "ClusteredTable", "CountTable", "EffectiveTable", "clustered_interval",
    "clustered_noninferiority", "clustered_score_test", "clustered_slices", "clustered_table", "sample_cell_counts",
    "sample_means", "t_factor",
    "AnytimeMeanDifference", "BootstrapMeanDifference", "DetectableDifference", "DifferenceInterval",
    "EquivalenceTest", "IntervalNoninferiority", "McNemarTest", "PairedTable", "ScoreTest", "SliceResult", "SliceResults",
    "adjust_p_values", "adjusted_slices", "anytime_mean_difference", "bca_mean_difference",
    "benjamini_hochberg_adjust", "binary_slices", "holm_adjust", "interval_noninferiority", "mcnemar_exact_test",
    "minimum_detectable_difference", "newcombe_interval", "newcombe_phi", "paired_table_from_outcomes",
    "paired_tables_by_slice", "tango_equivalence_test", "tango_interval", "tango_noninferiority_test",
    "tango_score_statistic", "tango_score_test", "wilson_interval",
]
