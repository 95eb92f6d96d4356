"""Published worked examples, reproduced to the decimals the source prints.

Counts are (n11, n10, n01, n00) with n10 = "condition 1 (our subject) only", so Δ = (n10 − n01) / n.
Sources:
- Tango, T. (1998), Statistics in Medicine 17, 891–908: the examples of its Tables V and VII.
- Agresti, A. & Min, Y. (2005), Statistics in Medicine 24, 729–740: the example of their §4 (Tango's interval).
- Newcombe, R. G. (1998), Statistics in Medicine 17, 2635–2650: the worked example for method 10 (n = 50).
- Fagerland, M. W., Lydersen, S. & Laake, P. (2014), Statistics in Medicine 33, 2850–2875 (and their book
  "Statistical Analysis of Contingency Tables", 2017, ch. 8): airway hyper-responsiveness before and after
  stem cell transplantation (Bentur et al. 2009), and complete response before and after consolidation
  therapy (Cavo et al. 2012).
The Tango and Newcombe values quoted from Tango (1998), Agresti & Min (2005), Newcombe (1998) and the Bentur
example are those the test suite of the R package ratesci (tests/testthat/test3.R) checks against these papers;
the Cavo example's values are those printed by the authors' own R package contingencytables
(tests/testthat/test-ch8.R). Nothing here was computed by certa to make an expectation.
"""

from __future__ import annotations

import pytest

from certa.engine.core.stats.paired_metric import PairedTable, mcnemar_exact_test, newcombe_interval, tango_interval

TANGO = [
    # (source, counts, confidence level, published (low, high), decimals printed)
    ("Tango 1998, Table VII", (4, 9, 3, 16), 0.95, (-0.027, 0.390), 3),
    ("Tango 1998, Table V", (43, 0, 1, 0), 0.90, (-0.096, 0.037), 3),
    ("Agresti & Min 2005", (53, 16, 8, 9), 0.95, (-0.020, 0.207), 3),
    ("Fagerland et al. 2014, Bentur et al. data", (1, 1, 7, 12), 0.95, (-0.517, -0.026), 3),
    ("Fagerland et al. 2017 ch. 8, Cavo et al. data", (59, 6, 16, 80), 0.95, (-0.1240, -0.0054), 4),
]

NEWCOMBE = [
    ("Newcombe 1998, method 10 worked example", (20, 12, 2, 16), 0.95, (0.0562, 0.3292), 4),
    ("Fagerland et al. 2014, Bentur et al. data", (1, 1, 7, 12), 0.95, (-0.507, -0.026), 3),
    ("Fagerland et al. 2017 ch. 8, Cavo et al. data", (59, 6, 16, 80), 0.95, (-0.1186, -0.0046), 4),
]


@pytest.mark.parametrize("source, counts, level, published, decimals", TANGO, ids=[row[0] for row in TANGO])
def test_tango_interval_reproduces_published_example(source, counts, level, published, decimals):
    ci = tango_interval(PairedTable(*counts), level)
    assert (round(ci.low, decimals), round(ci.high, decimals)) == published


@pytest.mark.parametrize("source, counts, level, published, decimals", NEWCOMBE, ids=[row[0] for row in NEWCOMBE])
def test_newcombe_interval_reproduces_published_example(source, counts, level, published, decimals):
    ci = newcombe_interval(PairedTable(*counts), level)
    assert (round(ci.low, decimals), round(ci.high, decimals)) == published


def test_exact_mcnemar_and_mid_p_reproduce_the_cavo_example():
    """Fagerland et al. (2017, ch. 8; 2014): exact conditional P = 0.052479, mid-P = 0.034690."""
    table = PairedTable(59, 6, 16, 80)
    assert round(mcnemar_exact_test(table).p_value, 6) == 0.052479
    assert round(mcnemar_exact_test(table, mid_p=True).p_value, 6) == 0.034690
