"""The exact (conditional) McNemar test of H0: p_subject = p_baseline, with the optional mid-p.

McNemar, Q. (1947), Psychometrika 12, 153–157; exact conditional form and mid-p as in Fagerland, Lydersen
& Laake (2013), BMC Medical Research Methodology 13:91. Given the m = n10 + n01 discordant pairs, n10 is
Binomial(m, 1/2) under H0. With F(k) = P(B ≤ k) and G(k) = P(B ≥ k) = F(m − k) (symmetry at 1/2):

    greater   (H1: Δ > 0, the subject better)   p = G(n10)
    less      (H1: Δ < 0, the subject worse)    p = F(n10)
    two-sided                                   p = min(1, 2 min(F(n10), G(n10)))

The mid-p subtracts P(B = n10) / 2 from each one-sided p and P(B = n10) from the doubled tail. With no
discordant pair every p-value is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _shared
from .project_kernels import special
from .table import PairedTable

__all__ = ["McNemarTest", "mcnemar_exact_test"]


@dataclass(frozen=True)
class McNemarTest:
    """The exact McNemar test: ``subject_only`` = n10 of ``discordant`` = n10 + n01 pairs, and its p-value."""

    subject_only: int | np.ndarray
    discordant: int | np.ndarray
    p_value: float | np.ndarray
    alternative: str
    mid_p: bool


def mcnemar_exact_test(table: PairedTable, alternative: str = "two-sided", *, mid_p: bool = False) -> McNemarTest:
    """Exact conditional McNemar test (module docstring), elementwise over the tables."""
    alternative, mid_p = _mcnemar_exact_test_iv(alternative, mid_p)
    k = np.asarray(table.n10)
    m = np.asarray(table.n10 + table.n01)
    at_most = special.bdtr(k, m, 0.5)
    at_least = special.bdtr(m - k, m, 0.5)
    point = np.exp(special.gammaln(m + 1.0) - special.gammaln(k + 1.0) - special.gammaln(m - k + 1.0)
                   - m * np.log(2.0)) if mid_p else 0.0
    if alternative == "greater":
        p = at_least - point / 2.0
    elif alternative == "less":
        p = at_most - point / 2.0
    else:
        p = np.minimum(1.0, 2.0 * np.minimum(at_most, at_least) - point)
    return McNemarTest(_shared.scalar_or_array(k), _shared.scalar_or_array(m), _shared.scalar_or_array(p),
                       alternative, mid_p)


def _mcnemar_exact_test_iv(alternative: str, mid_p: bool) -> tuple[str, bool]:
    if not isinstance(mid_p, bool):
        raise TypeError(f"'mid_p' must be True or False (got {mid_p!r})")
    return _shared.alternative(alternative), mid_p
