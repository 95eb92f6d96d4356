"""The package's public names are pinned, so that adding or removing one is a deliberate change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from certa.engine.core.stats import paired_metric

ROOT = Path(__file__).resolve().parents[4]

PUBLIC = {
    "AnytimeMeanDifference", "BootstrapMeanDifference", "DetectableDifference", "DifferenceInterval",
    "EquivalenceTest", "IntervalNoninferiority", "McNemarTest", "PairedTable", "ScoreTest", "SliceResult", "SliceResults",
    "adjust_p_values", "adjusted_slices", "anytime_mean_difference", "bca_mean_difference",
    "benjamini_hochberg_adjust", "binary_slices", "holm_adjust", "interval_noninferiority", "mcnemar_exact_test",
    "minimum_detectable_difference", "newcombe_interval", "newcombe_phi", "paired_table_from_outcomes",
    "paired_tables_by_slice", "tango_equivalence_test", "tango_interval", "tango_noninferiority_test",
    "tango_score_statistic", "tango_score_test", "wilson_interval",
    "CLUSTERED_METHODS", "ClusteredTable", "CountTable", "EffectiveTable", "clustered_interval",
    "clustered_noninferiority", "clustered_score_test", "clustered_slices", "clustered_table", "sample_cell_counts",
    "sample_means", "t_factor",
}


def test_public_names_are_pinned_and_importable():
    assert set(paired_metric.__all__) == PUBLIC
    assert all(hasattr(paired_metric, name) for name in PUBLIC)


def test_importing_the_package_loads_neither_scipy_nor_numba():
    """The stage registry imports every kernel at every command; scipy and Numba load at first use."""
    code = ("import sys; import certa.engine.core.stats.paired_metric; "
            "print(sorted(m for m in ('scipy.special', 'scipy.optimize', 'scipy.stats', 'numba') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()
    assert loaded == "[]"
