"""Repeated trials of a paired binary comparison (Inspect's epochs, a table's repeat column): the sample, not the
(sample, repeat) row, is the unit of analysis.

**Setting.** Samples i = 1..n are each scored R_i ≥ 1 times by both models, the repeats paired by their repeat
key. Row r of sample i holds the outcomes (s_ir, b_ir) ∈ {0, 1}² and the difference d_ir = s_ir − b_ir. The rows
of one sample are not independent (the same question: a hard one is hard in every epoch); the samples are. The
estimand is Δ = E_i[E_r d_ir], the mean over the population of samples of each sample's expected difference;
with equal repeats it is also the expected difference of a row, what an (id, epoch) analysis estimates.

**Per-sample shares.** f_i = (n11_i, n10_i, n01_i, n00_i) / R_i, the shares of sample i's paired repeats in each
cell; d̄_i = f10_i − f01_i and ψ_i = f10_i + f01_i. The estimate is Δ̂ = (1/n) Σ d̄_i: every sample weighs the
same (with equal repeats, the mean over the rows).

**Variance: the cluster-robust one, from the per-sample means.** The row-level variance of the differences
(samples weighted equally) splits into

    W = (1/n) Σ_i (ψ_i − d̄_i²)        within samples (the variance of d_ir about d̄_i; 0 when a sample's
                                       repeats agree, and with one repeat)
    B = (1/n) Σ_i (d̄_i − Δ̂)²          between samples,

and V = B / n is the cluster-robust (sandwich, CR0) variance of Δ̂ (Liang, K.-Y. & Zeger, S. L. (1986).
Longitudinal data analysis using generalized linear models. Biometrika 73, 13–22; for paired proportions of
clustered data Obuchowski, N. A. (1998). On the comparison of correlated proportions for clustered data.
Statistics in Medicine 17, 1495–1507), the variance of the mean of n independent per-sample differences.

**Rao–Scott effective rows.** Rao, J. N. K. & Scott, A. J. (1992). A simple method for the analysis of clustered
binary data. Biometrics 48, 577–585: divide the counts by the design effect and apply the method for independent
data. Independent rows of variance W + B would give Δ̂ this variance V with

    m = (W + B) / V = n + n W / B        effective rows,   capped at N* = n² / Σ_i (1 / R_i)

(N* = Σ R_i with equal repeats: the rows, were they independent; the cap truncates the estimated correlation of a
sample's repeats at 0, as Donner, A. & Klar, N. (2000), Design and Analysis of Cluster Randomization Trials in
Health Research, Arnold, truncate a negative intracluster correlation). Always n ≤ m ≤ N*. With B = 0, m = N*
when W > 0 (the samples agree exactly) and m = n when W = 0 too (every row the same difference: nothing tells
how the repeats correlate, so each sample counts once). The design effect is N* / m ∈ [1, max R_i]. The effective
table is the shares' sum Σ_i f_i (which sums to n) scaled to m rows.

**Degrees of freedom.** V is estimated from n samples, so the (1 − α) interval refers the score statistic to
Student's t with n − 1 degrees of freedom instead of the normal (Korn, E. L. & Graubard, B. I. (1998).
Confidence intervals for proportions with small expected number of positive counts estimated from survey data.
Survey Methodology 24, 193–201: the effective sample size times (z / t_{n−1})²; Cameron, A. C. & Miller, D. L.
(2015). A practitioner's guide to cluster-robust inference. J. Human Resources 50, 317–372: t with G − 1
degrees of freedom for G clusters). A score statistic on counts scaled by c is √c times the statistic, so the
interval at z of the table scaled by c = (z / t_{n−1, 1−α/2})² is exactly {Δ0 : |T_m(Δ0)| < t_{n−1, 1−α/2}},
and a p-value is the t_{n−1} tail of the statistic T_m on the effective table. Tango's and Newcombe's intervals
(``tango``, ``newcombe``) are taken as they are, of the scaled table. With one sample (n = 1) no variance
between samples can be estimated: the interval is [−1, 1] and every p-value 1.

**Reductions.** Repeats that agree within every sample (a deterministic model: W = 0) give m = n and the table of
the samples, each counted once: 1.1.0's analysis of the samples, with t_{n−1} for z. One repeat per sample gives
the same with the rows. Measured coverage and non-inferiority size against the (id, epoch) analysis:
docs/paired_metric.md.

Elementwise over groups (slices, simulated data sets) through ``groups``; every sum is a ``bincount``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _shared
from .multiplicity import SliceResults, adjusted_slices
from .newcombe import newcombe_interval
from .noninferiority import IntervalNoninferiority
from .project_kernels import special
from .table import EffectiveTable
from .tango import DifferenceInterval, ScoreTest, tango_interval, tango_score_statistic

__all__ = ["CLUSTERED_METHODS", "ClusteredTable", "clustered_interval", "clustered_noninferiority",
           "clustered_score_test", "clustered_slices", "clustered_table", "sample_cell_counts", "sample_means",
           "t_factor"]

CLUSTERED_METHODS = {"tango": "tango_score_rao_scott", "newcombe": "newcombe_hybrid_score_rao_scott"}
"""The interval of each method on the design-effect-adjusted table, by the name a ``DifferenceInterval`` carries."""


@dataclass(frozen=True)
class ClusteredTable:
    """The samples of one comparison (or of each group) summarised for the design-effect adjustment (module
    docstring): counts per group as Python scalars for one group, arrays for several."""

    samples: int | np.ndarray
    """n, the samples (units of analysis)."""
    rows: int | np.ndarray
    """Σ R_i, the paired (sample, repeat) rows."""
    shares: EffectiveTable
    """Σ_i f_i: the table in which each sample counts once, split over the cells by its repeats (sums to n)."""
    within: float | np.ndarray
    """W, the mean within-sample variance of a row's difference."""
    between: float | np.ndarray
    """B, the variance of the per-sample mean differences (n V)."""
    full_rows: float | np.ndarray
    """N* = n² / Σ 1/R_i: the effective rows if every row were independent (the cap)."""
    effective_rows: float | np.ndarray
    """m ∈ [n, N*], the Rao–Scott effective number of independent rows."""

    @property
    def estimate(self) -> float | np.ndarray:
        """Δ̂ = (1/n) Σ d̄_i."""
        return _shared.scalar_or_array((self.shares.n10 - self.shares.n01) / self.shares.n)

    @property
    def variance(self) -> float | np.ndarray:
        """V = B / n, the cluster-robust variance of Δ̂."""
        return _shared.scalar_or_array(np.asarray(self.between) / np.asarray(self.samples))

    @property
    def design_effect(self) -> float | np.ndarray:
        """N* / m ∈ [1, max R_i]."""
        return _shared.scalar_or_array(np.asarray(self.full_rows) / np.asarray(self.effective_rows))

    @property
    def degrees_of_freedom(self) -> int | np.ndarray:
        """n − 1."""
        return _shared.scalar_or_array(np.asarray(self.samples) - 1)

    @property
    def table(self) -> EffectiveTable:
        """The effective table: the shares scaled to m rows."""
        return self.scaled(1.0)

    def scaled(self, factor: float | np.ndarray) -> EffectiveTable:
        """The effective table scaled by ``factor`` (the degrees-of-freedom factor of ``t_factor``)."""
        scale = np.asarray(self.effective_rows, dtype=np.float64) / np.asarray(self.samples) * factor
        s = self.shares
        return EffectiveTable(s.n11 * scale, s.n10 * scale, s.n01 * scale, s.n00 * scale)


def sample_cell_counts(subject: np.ndarray, baseline: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Per sample, the counts (n11, n10, n01, n00) of its paired rows: an int64 array of shape (n, 4), n =
    max(samples) + 1. ``subject`` and ``baseline`` hold 0/1 outcomes of the rows, ``samples`` each row's sample
    number (0..n−1, every number used)."""
    s, b, codes = _sample_cell_counts_iv(subject, baseline, samples)
    n = int(codes.max()) + 1
    counts = np.bincount(codes * 4 + (3 - (2 * s + b)), minlength=4 * n).reshape(n, 4)
    if (counts.sum(axis=1) == 0).any():
        raise ValueError("'samples' must number the samples 0..n−1 with no number unused")
    return counts.astype(np.int64)


def sample_means(values: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Per sample, the mean of its rows' ``values`` (samples numbered 0..n−1, every number used): one
    ``bincount`` for the sums (in row order) and one for the counts."""
    codes = _codes_iv(samples, np.asarray(values).shape)
    x = np.asarray(values, dtype=np.float64)
    counts = np.bincount(codes)
    if (counts == 0).any():
        raise ValueError("'samples' must number the samples 0..n−1 with no number unused")
    return np.bincount(codes, weights=x) / counts


def clustered_table(counts: np.ndarray, groups: np.ndarray | None = None) -> ClusteredTable:
    """The design-effect summary (module docstring) of per-sample cell counts (shape (n, 4): n11, n10, n01, n00,
    every sample with at least one row), for all samples, or per group of samples (``groups``: each sample's
    group number 0..G−1, every group with at least one sample)."""
    c, g, n_groups = _clustered_table_iv(counts, groups)
    repeats = c.sum(axis=1).astype(np.float64)
    f = c / repeats[:, None]
    d = f[:, 1] - f[:, 2]
    within_each = np.maximum(f[:, 1] + f[:, 2] - d * d, 0.0)
    n = np.bincount(g, minlength=n_groups)
    sums = [np.bincount(g, weights=f[:, k], minlength=n_groups) for k in range(4)]
    estimate = (sums[1] - sums[2]) / n
    deviation = d - estimate[g]
    between = np.bincount(g, weights=deviation * deviation, minlength=n_groups) / n
    within = np.bincount(g, weights=within_each, minlength=n_groups) / n
    fewest, most = np.full(n_groups, np.inf), np.zeros(n_groups)
    np.minimum.at(fewest, g, repeats)
    np.maximum.at(most, g, repeats)
    harmonic = n.astype(np.float64) ** 2 / np.bincount(g, weights=1.0 / repeats, minlength=n_groups)
    full = np.where(fewest == most, n * most, harmonic)  # n R exactly when the repeats are equal
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = n + n * within / np.where(between > 0.0, between, 1.0)
    effective = np.where(between > 0.0, np.minimum(ratio, full), np.where(within > 0.0, full, n.astype(np.float64)))
    one = groups is None
    pick = (lambda x: _shared.scalar_or_array(x[0])) if one else _shared.scalar_or_array
    shares = EffectiveTable(*(s[0] if one else s for s in sums))
    rows = np.bincount(g, weights=repeats, minlength=n_groups).astype(np.int64)
    return ClusteredTable(samples=pick(n), rows=pick(rows), shares=shares, within=pick(within),
                          between=pick(between), full_rows=pick(full), effective_rows=pick(effective))


def t_factor(degrees_of_freedom: int | np.ndarray, confidence_level: float) -> float | np.ndarray:
    """c = (z / t_{df, 1−α/2})² at two-sided ``confidence_level`` (module docstring); 1 where df < 1 (no
    variance can be estimated; the callers report [−1, 1] there)."""
    level = _shared.open_unit("confidence_level", confidence_level)
    df = np.asarray(degrees_of_freedom, dtype=np.float64)
    z = float(special.ndtri(0.5 + level / 2.0))
    t = special.stdtrit(np.where(df >= 1.0, df, 1.0), 0.5 + level / 2.0)
    return _shared.scalar_or_array(np.where(df >= 1.0, (z / t) ** 2, 1.0))


def clustered_interval(table: ClusteredTable, confidence_level: float = 0.95,
                       interval: str = "tango") -> DifferenceInterval:
    """Tango's or Newcombe's interval of the effective table scaled by ``t_factor`` (module docstring);
    [−1, 1] for a group of one sample. ``method`` names the interval with the ``_rao_scott`` suffix."""
    if interval not in CLUSTERED_METHODS:
        raise ValueError(f"'interval' must be one of {tuple(CLUSTERED_METHODS)} (got {interval!r})")
    level = _shared.open_unit("confidence_level", confidence_level)
    df = np.asarray(table.degrees_of_freedom)
    ci = (tango_interval if interval == "tango" else newcombe_interval)(
        table.scaled(np.asarray(t_factor(df, level))), level)
    alone = df < 1
    low = np.where(alone, -1.0, ci.low)
    high = np.where(alone, 1.0, ci.high)
    return DifferenceInterval(_shared.scalar_or_array(np.asarray(table.estimate)), _shared.scalar_or_array(low),
                              _shared.scalar_or_array(high), level, CLUSTERED_METHODS[interval])


def clustered_score_test(table: ClusteredTable, null_difference: float = 0.0,
                         alternative: str = "two-sided") -> ScoreTest:
    """Tango's score statistic T_m(Δ0) on the effective table, referred to Student's t with n − 1 degrees of
    freedom: p = F_t(−T) (``greater``: H1 Δ > Δ0), F_t(T) (``less``) or 2 F_t(−|T|); 1 for one sample. It
    rejects at level α exactly where ``clustered_interval`` at 1 − 2α (one-sided) or 1 − α excludes Δ0.
    At Δ0 = 0 it is McNemar's asymptotic test on the effective table."""
    if isinstance(null_difference, bool) or not isinstance(null_difference, (int, float)) \
            or not -1.0 <= float(null_difference) <= 1.0:
        raise ValueError(f"'null_difference' must be a number in [-1, 1] (got {null_difference!r})")
    alternative = _shared.alternative(alternative)
    delta0 = float(null_difference)
    statistic = tango_score_statistic(table.table, delta0)
    df = np.asarray(table.degrees_of_freedom, dtype=np.float64)
    usable = np.where(df >= 1.0, df, 1.0)
    if alternative == "greater":
        p = special.stdtr(usable, -statistic)
    elif alternative == "less":
        p = special.stdtr(usable, statistic)
    else:
        p = 2.0 * special.stdtr(usable, -np.abs(statistic))
    p = np.where(df >= 1.0, np.minimum(p, 1.0), 1.0)
    return ScoreTest(_shared.scalar_or_array(statistic), _shared.scalar_or_array(p), delta0, alternative)


def clustered_noninferiority(table: ClusteredTable, margin: float, confidence_level: float = 0.95,
                             interval: str = "tango") -> IntervalNoninferiority:
    """Non-inferior ⇔ the lower bound of ``clustered_interval`` exceeds −``margin`` (the printed interval decides,
    as ``interval_noninferiority``); with Tango's interval the p-value of ``clustered_score_test`` at −margin
    (``greater``), which agrees."""
    margin = _shared.margin(margin, allow_zero=True)
    ci = clustered_interval(table, confidence_level, interval)
    noninferior = _shared.scalar_or_array(np.asarray(ci.low) > -margin)
    p_value = clustered_score_test(table, -margin, "greater").p_value if interval == "tango" else None
    return IntervalNoninferiority(ci, margin, noninferior, p_value)


def clustered_slices(counts: np.ndarray, labels: np.ndarray, *, margin: float | None = None,
                     confidence_level: float = 0.95, interval: str = "tango",
                     adjustment: str = "holm") -> SliceResults:
    """Per slice (``labels``: one per sample), the estimate, ``clustered_interval`` and p-value (the
    non-inferiority p-value of ``clustered_score_test`` at −margin with a margin, else its two-sided test of
    Δ = 0), adjusted across slices (``adjusted_slices``)."""
    names, codes = np.unique(np.asarray(labels), return_inverse=True)
    table = clustered_table(counts, codes.ravel())
    ci = clustered_interval(table, confidence_level, interval)
    if margin is None:
        p = clustered_score_test(table).p_value
    else:
        p = clustered_score_test(table, -_shared.margin(margin, allow_zero=True), "greater").p_value
    return adjusted_slices(tuple(names.tolist()), np.asarray(ci.estimate), np.asarray(ci.low),
                           np.asarray(ci.high), np.asarray(p), adjustment=adjustment)


def _codes_iv(samples: object, shape: tuple[int, ...]) -> np.ndarray:
    codes = np.asarray(samples)
    if codes.shape != shape or codes.ndim != 1 or codes.size == 0 or not np.issubdtype(codes.dtype, np.integer) \
            or codes.min() < 0:
        raise ValueError(f"'samples' must give each of the {shape} rows a sample number ≥ 0 "
                         f"(got shape {codes.shape}, dtype {codes.dtype})")
    return codes.astype(np.intp)


def _sample_cell_counts_iv(subject: object, baseline: object,
                           samples: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s, b = np.asarray(subject), np.asarray(baseline)
    if s.shape != b.shape or s.ndim != 1:
        raise ValueError(f"'subject' and 'baseline' must pair row by row (got shapes {s.shape} and {b.shape})")
    for name, x in (("subject", s), ("baseline", b)):
        if x.dtype != bool and not np.isin(x, (0, 1)).all():
            raise ValueError(f"'{name}' must hold 0/1 outcomes")
    return s.astype(np.intp), b.astype(np.intp), _codes_iv(samples, s.shape)


def _clustered_table_iv(counts: object, groups: object) -> tuple[np.ndarray, np.ndarray, int]:
    c = np.asarray(counts)
    if c.ndim != 2 or c.shape[1] != 4 or c.shape[0] == 0 or not np.issubdtype(c.dtype, np.integer) \
            or (c < 0).any() or (c.sum(axis=1) == 0).any():
        raise ValueError("'counts' must be an integer array of shape (n, 4) with n ≥ 1, counts ≥ 0 and at least one "
                         f"row per sample (got shape {c.shape}, dtype {c.dtype})")
    if groups is None:
        return c, np.zeros(c.shape[0], dtype=np.intp), 1
    g = _codes_iv(groups, (c.shape[0],))
    n_groups = int(g.max()) + 1
    if (np.bincount(g, minlength=n_groups) == 0).any():
        raise ValueError("'groups' must number the groups 0..G−1 with no number unused")
    return c, g, n_groups
