"""Non-inferiority of Δ = p_subject − p_baseline decided by the very interval that is reported.

H0: Δ ≤ −δ against H1: Δ > −δ (the subject is at most δ worse) at one-sided level α is rejected when the
lower bound of the two-sided (1 − 2α) interval for Δ exceeds −δ:

    non-inferior  ⇔  low_{1−2α}(table) > −δ.

This is the duality of tests and confidence sets (Lehmann, E. L. & Romano, J. P. (2005). Testing Statistical
Hypotheses, 3rd ed., §3.5): a one-sided test obtained by inverting the interval, so the verdict and the
interval can never contradict each other. For each interval:

* ``tango``: Tango's (1998, §3) score test p = Φ(−T(−δ)) < α is the same statement, because Tango's interval
  is {Δ0 : |T(Δ0)| < z_{1−α}} and T decreases in Δ0; the p-value is reported with the decision (a test pins
  their agreement over every table up to n = 30);
* ``newcombe``: Newcombe's (1998) method-10 square-and-add interval is not the inversion of one test
  statistic, so there is no p-value that agrees with it; the decision is its lower bound alone. (Deciding on
  Tango's test while printing Newcombe's interval contradicts the interval on about 1 % of the tables with
  n ≤ 30, e.g. (n11, n10, n01, n00) = (0, 6, 1, 3) at δ = 0.01: Newcombe's 95 % lower bound +0.0036, yet
  Tango's p = 0.027 > 0.025.)

Elementwise over many tables, like the rest of this package.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _shared
from .slices import INTERVALS
from .table import PairedTable
from .tango import DifferenceInterval, tango_noninferiority_test

__all__ = ["IntervalNoninferiority", "interval_noninferiority"]


@dataclass(frozen=True)
class IntervalNoninferiority:
    """The (1 − 2α) ``interval`` and the verdict it gives on H0: Δ ≤ −``margin``: ``noninferior`` is
    ``interval.low > −margin``; ``p_value`` is Tango's score-test p-value when the interval is Tango's (it
    agrees with the verdict), None for Newcombe's."""

    interval: DifferenceInterval
    margin: float
    noninferior: bool | np.ndarray
    p_value: float | np.ndarray | None


def interval_noninferiority(table: PairedTable, margin: float, confidence_level: float = 0.95,
                            interval: str = "tango") -> IntervalNoninferiority:
    """Non-inferior ⇔ the lower bound of ``interval``'s two-sided ``confidence_level`` interval exceeds
    −``margin`` (module docstring); the one-sided level is α = (1 − ``confidence_level``)/2."""
    margin = _interval_noninferiority_iv(margin, interval)
    ci = INTERVALS[interval](table, confidence_level)
    noninferior = _shared.scalar_or_array(np.asarray(ci.low) > -margin)
    p_value = tango_noninferiority_test(table, margin).p_value if interval == "tango" else None
    return IntervalNoninferiority(ci, margin, noninferior, p_value)


def _interval_noninferiority_iv(margin: float, interval: str) -> float:
    if interval not in INTERVALS:
        raise ValueError(f"'interval' must be one of {tuple(INTERVALS)} (got {interval!r})")
    return _shared.margin(margin, allow_zero=True)
