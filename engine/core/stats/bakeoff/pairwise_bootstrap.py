"""Seeded bootstrap of weighted mean rapidities for every vendor pair, with Holm-adjusted p-values.

Source: SSM-AI v1.8 (seed 002), Appendix E4 "Significance (bootstrap in u-space)". For vendor v with
decisions u_i = atanh(RSI_env_i) and weights w_i, the statistic is the pooled rapidity

    m_v = Σ w_i u_i / max(Σ w_i, eps_w)          (= atanh(RSI_pool_env) of the vendor)

and a replicate m*_v is the same statistic on n_v indices drawn uniformly with replacement from the
vendor's own decisions (independent samples: each vendor is resampled separately, once per replicate,
and every pair reuses those replicates). For a pair (A, B) with d = m_A − m_B and replicates
d*_b = m*_A,b − m*_B,b (Efron & Tibshirani 1993, ch. 13 and 16):

* percentile interval [Q(α/2), Q(1 − α/2)] of d*, α = 1 − confidence_level, Q the linear-interpolation
  (Hyndman–Fan type 7) quantile; displayed also mapped through tanh as the seed suggests (tanh of a
  u-space difference is the bounded contrast of the two pools, not a difference of RSIs);
* ``p_min`` = min(#{d* ≤ 0}, #{d* ≥ 0}) / B — the seed's printed "two-sided p", which is one-tailed;
* ``p_two_sided`` = min(1, 2 · p_min), the two-sided p-value of the percentile-interval test (p ≤ α
  when the equal-tailed 1 − α percentile interval excludes 0, up to quantile interpolation); p = 0 only
  says p < 2/B;
* ``p_holm``: Holm's (1979) step-down adjustment over the pairs of a family, controlling the
  family-wise error rate: with p sorted ascending, p̃_(j) = max_{k≤j} min(1, (m − k + 1) p_(k)).

Resampling (one compiled loop, ``certa.engine.core.stats.kernels.sfc64.resampled_sums``, shared with the paired
bootstrap; no Python loop over replicates or draws): sample s of a call is resampled
from its own stream, ``SFC64`` seeded by ``rng.bit_generator.seed_seq.spawn(S)[s]``, replicate by replicate,
draw by draw. Each index is Lemire's (2019) multiply-shift of a 32-bit word with rejection of the
2^32 mod n low values that would bias it, the 32-bit words being the low then the high half of each
64-bit output — the same integers, in the same order, as numpy's
``Generator(SFC64(seed)).integers(0, n, size=(replicates, n), dtype=np.uint32)``. A replicate's sums are
accumulated left to right in two interleaved accumulators (draws 0, 2, 4, … and 1, 3, 5, …), added at the
end. This is about 2 ns per draw against about 5 ns for the same work as numpy array operations (numpy's
generator alone costs about 3 ns per bounded integer): see ``bench/bakeoff.py``. In
``pairwise_bootstrap`` each vendor has its own spawned generator (``rng.spawn``: one child per vendor, in
the order given), so vendors are resampled on parallel threads and the result depends only on the data,
``replicates`` and the generator's state, never on the number of threads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from certa.engine.core.stats.kernels.compiled import on_chunks
from certa.engine.core.stats.kernels.sfc64 import resampled_sums, spawned_sfc64_states

__all__ = [
    "VendorInterval",
    "PairComparison",
    "PairwiseBootstrap",
    "resampled_weighted_means",
    "percentile_interval",
    "bootstrap_p_values",
    "holm_adjust",
    "significance_level",
    "is_significant",
    "pairwise_bootstrap",
]

_UINT32 = 1 << 32

Resampler = Callable[..., np.ndarray]
"""``resample(u, w, replicates, rng, *, eps_w) -> replicates``: one vendor's bootstrap means."""


def resampled_weighted_means(u: np.ndarray, w: np.ndarray | None, replicates: int, rng: np.random.Generator,
                             *, eps_w: float = 1e-12, threads: int | None = None) -> np.ndarray:
    """Bootstrap replicates of Σ w u / max(Σ w, eps_w) along the last axis.

    ``u`` has shape (n,) or (S, n) — S independent samples of equal size, each resampled independently
    from its own spawned stream (used to vectorise simulations). ``w`` has the shape of ``u``, or is None
    for unit weights. Returns shape (replicates,) or (S, replicates). ``threads`` (default: the CPU count)
    splits the samples between threads without changing the result.
    """
    u = np.asarray(u, dtype=np.float64)
    squeeze = u.ndim == 1
    values = u[None, :] if squeeze else u
    if values.ndim != 2 or values.shape[1] < 1:
        raise ValueError(f"u must have shape (n,) or (S, n) with n >= 1 (got {u.shape})")
    if replicates < 1:
        raise ValueError(f"replicates must be >= 1 (got {replicates})")
    n_sets, n = values.shape
    if n >= _UINT32:
        raise ValueError(f"a sample of {n} values is too large to resample with 32-bit indices")
    if w is None:
        weighted, weights, totals = values, None, np.full(n_sets, float(n))
    else:
        full = np.broadcast_to(np.asarray(w, dtype=np.float64), u.shape).reshape(values.shape)
        first = full[:, :1]
        if np.all(full == first):
            # equal weights within each sample: Σw* is n·w exactly; resample only the values
            weighted, weights, totals = values * first, None, first[:, 0] * n
        else:
            weighted, weights, totals = values * full, np.ascontiguousarray(full), None
    weighted = np.ascontiguousarray(weighted)
    states = spawned_sfc64_states(rng, n_sets)
    numerator = np.empty(n_sets * replicates, dtype=np.float64)
    denominator = None if weights is None else np.empty(n_sets * replicates, dtype=np.float64)

    def run(rows: slice) -> None:
        flat = slice(rows.start * replicates, rows.stop * replicates)
        resampled_sums(weighted[rows], None if weights is None else weights[rows], None, None, states[rows],
                       replicates, numerator[flat], None if denominator is None else denominator[flat], None)

    on_chunks(run, n_sets, threads=threads, name="certa-bootstrap")
    sums = numerator.reshape(n_sets, replicates)
    if weights is None:
        out = sums / np.maximum(totals, eps_w)[:, None]
    else:
        out = sums / np.maximum(denominator.reshape(n_sets, replicates), eps_w)
    return out[0] if squeeze else out


def percentile_interval(replicates: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """[Q(α/2), Q(1 − α/2)] along the last axis, α = 1 − confidence_level (type-7 quantiles)."""
    alpha = 1.0 - confidence_level
    low, high = np.quantile(replicates, [alpha / 2, 1 - alpha / 2], axis=-1)
    return low, high


def bootstrap_p_values(differences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p_min, p_two_sided) along the last axis: p_min = min(#{d ≤ 0}, #{d ≥ 0}) / B (seed E4, one-tailed),
    p_two_sided = min(1, 2 p_min)."""
    b = differences.shape[-1]
    p_min = np.minimum((differences <= 0).sum(axis=-1), (differences >= 0).sum(axis=-1)) / b
    return p_min, np.minimum(1.0, 2.0 * p_min)


def holm_adjust(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values, in the input order."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def significance_level(confidence_level: float) -> Fraction:
    """α = 1 − confidence_level in rational arithmetic from the knob as written (``Fraction(str(level))``):
    0.95 gives exactly 1/20, where the float 1 − 0.95 is 0.050000000000000044 (docs/contributing.md, rule 5)."""
    return 1 - Fraction(str(confidence_level))


def is_significant(p: float, confidence_level: float) -> bool:
    """p ≤ α with α = ``significance_level`` rounded once to the nearest float (0.05 for 0.95, not
    0.050000000000000044), so that p = 0.05 is significant at level 0.95 and the next float above it is not."""
    return p <= float(significance_level(confidence_level))


@dataclass(frozen=True)
class VendorInterval:
    """A vendor's bootstrap percentile interval of its pooled rapidity, and its tanh image (RSI scale)."""

    estimate_u: float
    u_low: float
    u_high: float
    rsi_low: float
    rsi_high: float


@dataclass(frozen=True)
class PairComparison:
    """Vendor ``a`` minus vendor ``b`` (indices into the samples) in u-space."""

    a: int
    b: int
    diff_u: float
    ci_u: tuple[float, float]
    ci_tanh: tuple[float, float]
    p_min: float
    p_two_sided: float
    p_holm: float


@dataclass(frozen=True)
class PairwiseBootstrap:
    replicates: int
    confidence_level: float
    vendors: tuple[VendorInterval, ...]
    pairs: tuple[PairComparison, ...]


def pairwise_bootstrap(samples: Sequence[tuple[np.ndarray, np.ndarray | None]], pairs: Sequence[tuple[int, int]],
                       *, replicates: int, confidence_level: float, rng: np.random.Generator,
                       eps_w: float = 1e-12, estimates: Sequence[float] | None = None,
                       threads: int | None = None,
                       resample: Resampler | None = None) -> PairwiseBootstrap:
    """Bootstrap every vendor once, each from its own stream ``rng.spawn(len(samples))[v]``, then compare
    the requested pairs.

    ``samples[v]`` is (u_env, w) of vendor v (w None for unit weights); ``estimates[v]`` the pooled
    rapidity to report (default: computed here in floating point). Holm adjusts over ``pairs``.
    ``threads`` caps the worker threads (default: the CPU count); it never changes the result.
    ``resample`` (default ``resampled_weighted_means``) draws one vendor's replicates: a frozen stage
    version passes the resampler its certificates were computed with.
    """
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1) (got {confidence_level})")
    streams = rng.spawn(len(samples))

    draw = resample or resampled_weighted_means

    def vendor_means(v: int) -> np.ndarray:
        u, w = samples[v]
        return draw(u, w, replicates, streams[v], eps_w=eps_w)

    means = [m for part in on_chunks(lambda vendors: [vendor_means(v) for v in range(vendors.start, vendors.stop)],
                                      len(samples), threads=threads, name="certa-bakeoff-bootstrap") for m in part]
    if estimates is None:
        estimates = [float(np.sum(u if w is None else w * u) / max(float(len(u) if w is None else np.sum(w)), eps_w))
                     for u, w in samples]
    stacked = np.vstack(means) if means else np.empty((0, replicates))
    low, high = percentile_interval(stacked, confidence_level) if means else (np.empty(0), np.empty(0))
    vendors = tuple(VendorInterval(float(estimates[v]), float(low[v]), float(high[v]), math.tanh(low[v]),
                                   math.tanh(high[v])) for v in range(len(samples)))
    if not pairs:
        return PairwiseBootstrap(replicates, confidence_level, vendors, ())
    a_idx = np.array([a for a, _ in pairs])
    b_idx = np.array([b for _, b in pairs])
    differences = stacked[a_idx] - stacked[b_idx]
    d_low, d_high = percentile_interval(differences, confidence_level)
    p_min, p_two = bootstrap_p_values(differences)
    p_holm = holm_adjust(p_two)
    comparisons = tuple(
        PairComparison(a=int(a), b=int(b), diff_u=float(estimates[a]) - float(estimates[b]),
                       ci_u=(float(d_low[k]), float(d_high[k])),
                       ci_tanh=(math.tanh(d_low[k]), math.tanh(d_high[k])),
                       p_min=float(p_min[k]), p_two_sided=float(p_two[k]), p_holm=float(p_holm[k]))
        for k, (a, b) in enumerate(pairs))
    return PairwiseBootstrap(replicates, confidence_level, vendors, comparisons)
