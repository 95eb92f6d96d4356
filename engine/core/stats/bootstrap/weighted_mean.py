"""Paired, token-weighted bootstrap of a weighted mean, with BCa and percentile intervals (compiled).

This is the kernel of ``paired.ppl_ratio`` 1.1.0; 1.0.0's numpy kernel is frozen in
``engine/core/stats/bootstrap/weighted_mean_v1_0_0.py``. For paired windows i = 1..n with deltas d_i
(per-token log-loss of arm B minus arm A) and token counts t_i > 0, the estimate is the token-weighted mean (seed 001,
"Paired Evaluation Math")

    θ̂ = Σ t_i d_i / Σ t_i.

Two resampling schemes give the bootstrap replicates θ*_1..θ*_B:

``uniform`` (default)
    Draw n window indices uniformly with replacement and recompute the weighted mean of the draw,
    θ* = Σ t_j* d_j* / Σ t_j*: the ordinary nonparametric bootstrap of the ratio estimator θ̂
    (Efron & Tibshirani 1993, ch. 6 and 14), the distribution ``scipy.stats.bootstrap((d, t),
    weighted_mean, paired=True)`` samples.

``token_weighted``
    Draw n window indices with probability p_i = t_i / Σt and take the plain mean of the drawn deltas
    (InvarLock v0.3.7 ``core/bootstrap.py``, kept for comparison with the seed). Its replicates have
    variance Σ p_i (d_i − θ̂)² / n against ≈ Σ p_i² (d_i − θ)² for θ̂, so when d is unrelated to t its
    interval is too narrow by 1/√(1 + CV²(t)) and under-covers (docs/paired_bootstrap.md).

Random streams (part of the frozen numbers of 1.1.0). The B replicates are cut into consecutive blocks
of ``REPLICATE_BLOCK`` = 256 (the last may be shorter); block j = 0..⌈B/256⌉−1 draws from its own
generator, ``SFC64`` seeded with child j of ``rng.bit_generator.seed_seq.spawn(⌈B/256⌉)`` (the seed
sequences of ``rng.spawn(⌈B/256⌉)``), replicate after replicate, draw after draw. Threads take whole
blocks, so the result depends on (d, t, the generator's seed sequence and spawn count, B, scheme, method,
confidence_level) and never on the number of threads or the machine.

* ``uniform``: index k of a replicate is Lemire's (2019) multiply-shift of a 32-bit word by n, rejecting
  the 2³² mod n low products that would bias it; the 32-bit words are the low then the high half of each
  64-bit SFC64 output, carried across replicates. These are, in order, exactly the integers of numpy's
  ``Generator(SFC64(child_j)).integers(0, n, size=(rows_j, n), dtype=np.uint32)`` (tested bit for bit).
* ``token_weighted``: Walker's (1977) alias method. The table is built once by Vose's (1991) algorithm
  in float64: q_i = (t_i · n) / Σt (Σt summed left to right); indices with q < 1 are pushed in
  ascending order on a "small" stack, the others on a "large" stack; while both are non-empty, pop s and
  l, set prob_s = q_s, alias_s = l, q_l ← (q_l + q_s) − 1 and push l back on the stack its new q_l
  selects; whatever remains gets prob = 1 (alias to itself). Each draw takes one 64-bit output x,
  u = (x >> 11) · 2⁻⁵³ (numpy's ``Generator(SFC64).random()``, bit for bit), v = u · n, column
  c = ⌊v⌋, and the index is c when v − c < prob_c, else alias_c.

Each replicate sums its draws left to right in two interleaved float64 accumulators (draws 0, 2, 4, …
and 1, 3, 5, …) added at the end: θ* = (Σ₀ t d + Σ₁ t d) / (Σ₀ t + Σ₁ t) for ``uniform``, with t d
precomputed as ``t * d``, and (Σ₀ d + Σ₁ d) / n for ``token_weighted``, each division done after the loop.
The loop is ``engine/core/stats/kernels/sfc64.py``'s ``resampled_sums``, shared with the bake-off's bootstrap and
compiled without fast-math, so every machine gives the same bits. No index array is ever materialised: the
memory is O(n + B), at most 40 n + 16 B bytes.

Intervals at level 1 − 2α (Efron & Tibshirani 1993, §14.3, eqs. 14.10, 14.14, 14.15):

``percentile``  [Q(α), Q(1 − α)] of the replicates.

``bca``         [Q(α₁), Q(α₂)] with α_k = Φ(z0 + (z0 + z_k) / (1 − a (z0 + z_k))), z_1 = Φ⁻¹(α),
                z_2 = Φ⁻¹(1 − α); z0 = Φ⁻¹((#{θ* < θ̂} + #{θ* ≤ θ̂}) / 2B) (ties count one half, scipy's
                convention); a = Σ U_i³ / (6 (Σ U_i²)^{3/2}) with U_i = θ̄₍.₎ − θ₍ᵢ₎ from the leave-one-out
                estimates θ₍ᵢ₎ = (Σtd − t_i d_i) / (Σt − t_i), computed exactly in O(n) instead of
                scipy's O(n²) jackknife. Q is the linear-interpolation (Hyndman–Fan type 7) quantile.

Edge cases: n < 2, non-finite deltas, and non-finite or non-positive token counts raise ``ValueError``;
all-equal deltas give a degenerate interval [θ̂, θ̂] without touching the generator; when BCa is
undefined (z0 infinite, zero jackknife variance, or 1 − a(z0 + z) ≤ 0) the percentile interval of the
same replicates is returned and ``fallback`` says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from certa.engine.core.stats.kernels.compiled import kernel, on_chunks
from certa.engine.core.stats.kernels.lazy_scipy import special
from certa.engine.core.stats.kernels.sfc64 import resampled_sums, spawned_sfc64_states

__all__ = [
    "REPLICATE_BLOCK",
    "RESAMPLING",
    "BootstrapCI",
    "DISTRIBUTION_PROBABILITIES",
    "alias_table",
    "checked_windows",
    "interval_from_replicates",
    "jackknife_acceleration",
    "resample_indices",
    "token_weighted_mean",
    "weighted_mean_bootstrap_ci",
    "weighted_mean_replicates",
]

METHODS = ("bca", "percentile")
SCHEMES = ("uniform", "token_weighted")

REPLICATE_BLOCK = 256
"""Replicates per random stream (part of the reproducibility contract; see the module docstring)."""

RESAMPLING = {
    "uniform": (
        "replicates in blocks of 256; block j draws from SFC64 seeded with child j of the stage generator's "
        "SeedSequence.spawn(ceil(B/256)); window indices as numpy Generator(SFC64).integers(0, n, dtype=uint32) "
        "(Lemire with rejection, low then high 32-bit half of each output); theta* = sum(t*d)/sum(t) over the "
        "draws, each sum in two interleaved float64 accumulators"),
    "token_weighted": (
        "replicates in blocks of 256; block j draws from SFC64 seeded with child j of the stage generator's "
        "SeedSequence.spawn(ceil(B/256)); one double u = (x >> 11) * 2^-53 per draw (numpy Generator(SFC64)."
        "random()); window index by Walker's alias method on q_i = t_i*n/sum(t) (Vose construction, float64): "
        "column c = floor(u*n), c if u*n - c < prob_c else alias_c; theta* = plain mean of the drawn d, summed "
        "in two interleaved float64 accumulators"),
}
"""How each scheme draws its replicates, as the 1.1.0 certificate states it (``bootstrap.resampling``)."""

_UINT32 = 1 << 32
_SLICE_BLOCKS = 4           # blocks per unit of work handed to a thread (finer units balance a busy machine)
_MIN_THREADED_DRAWS = 1 << 20


@dataclass(frozen=True)
class BootstrapCI:
    """A bootstrap confidence interval for the token-weighted mean Σ t_i d_i / Σ t_i.

    ``replicates`` is the number of bootstrap replicates actually computed (0 when ``degenerate``).
    ``method`` is the method that produced [low, high]: "percentile" when BCa was requested but could
    not be computed, in which case ``fallback`` gives the reason. ``z0`` and ``acceleration`` are
    recorded whenever they were computed and finite (also on a fallback), else None. ``index_streams``
    is the number of SFC64 streams drawn, ⌈replicates / 256⌉ (0 when degenerate).
    """

    estimate: float
    low: float
    high: float
    method: str
    scheme: str
    replicates: int
    confidence_level: float
    z0: float | None
    acceleration: float | None
    degenerate: bool
    degenerate_reason: str | None
    fallback: str | None
    index_streams: int = 0
    distribution: tuple[float, ...] | None = None
    """The replicates' quantiles at ``DISTRIBUTION_PROBABILITIES`` (type 7), so a report can draw the bootstrap
    distribution the interval comes from; None for a degenerate interval (and in 1.0.0, which kept none)."""


DISTRIBUTION_PROBABILITIES = tuple(k / 100 for k in range(101))
"""0, 0.01, ..., 1: the probabilities at which ``BootstrapCI.distribution`` summarises the replicates."""


def token_weighted_mean(deltas: np.ndarray, tokens: np.ndarray) -> float:
    """Σ t_i d_i / Σ t_i (seed 001), evaluated as ``np.sum(t * d) / np.sum(t)``."""
    d, t = checked_windows(deltas, tokens, min_n=1)
    return _weighted_mean(d, t)


def jackknife_acceleration(deltas: np.ndarray, tokens: np.ndarray) -> float | None:
    """BCa acceleration a = Σ U_i³ / (6 (Σ U_i²)^{3/2}) of the token-weighted mean, in O(n).

    U_i = θ̄₍.₎ − θ₍ᵢ₎ with θ₍ᵢ₎ = (Σtd − t_i d_i) / (Σt − t_i) (Efron & Tibshirani 1993, eq. 14.15).
    The leave-one-out estimates are formed as θ̂ + δ_i with δ_i = t_i (θ̂ − d_i) / (Σt − t_i), which is
    algebraically identical and free of cancellation. Returns None when Σ U_i² = 0 (a undefined).
    """
    d, t = checked_windows(deltas, tokens, min_n=2)
    return _acceleration(d, t, _weighted_mean(d, t))


def alias_table(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(prob, alias) of Walker's alias method for p_i ∝ t_i, built by Vose's algorithm (module docstring).

    Index i is drawn with probability (prob_i + Σ_{c: alias_c = i} (1 − prob_c)) / n = t_i / Σt up to
    float64 rounding.
    """
    _, t = checked_windows(np.zeros(np.shape(tokens)), tokens, min_n=1)
    prob = np.empty(t.size, dtype=np.float64)
    alias = np.empty(t.size, dtype=np.int64)
    _build_alias(t, prob, alias)
    return prob, alias


def weighted_mean_replicates(deltas: np.ndarray, tokens: np.ndarray, *, rng: np.random.Generator,
                             replicates: int = 2000, scheme: str = "uniform",
                             threads: int | None = None) -> np.ndarray:
    """The B bootstrap replicates θ*_1..θ*_B of the token-weighted mean under ``scheme``.

    See the module docstring for the schemes and the random streams. ``threads`` caps the worker
    threads (default: the CPU count, at most 8); it never changes the values.
    """
    d, t = checked_windows(deltas, tokens, min_n=2)
    replicates = _check_options(rng, replicates, scheme, threads)
    return _replicates(d, t, rng, replicates, scheme, threads)


def resample_indices(tokens: np.ndarray, *, rng: np.random.Generator, replicates: int,
                     scheme: str = "uniform", threads: int | None = None) -> np.ndarray:
    """The (replicates, n) uint32 window indices that ``weighted_mean_replicates`` draws from the same
    generator state (the same compiled loop, recording its draws; for audits and tests: B·n·4 bytes)."""
    _, t = checked_windows(np.zeros(np.shape(tokens)), tokens, min_n=2)
    replicates = _check_options(rng, replicates, scheme, threads)
    indices = np.empty((replicates, t.size), dtype=np.uint32)
    _replicates(np.zeros(t.size), t, rng, replicates, scheme, threads, indices)
    return indices


def weighted_mean_bootstrap_ci(deltas: np.ndarray, tokens: np.ndarray, *, rng: np.random.Generator,
                               replicates: int = 2000, confidence_level: float = 0.95,
                               method: str = "bca", scheme: str = "uniform",
                               threads: int | None = None) -> BootstrapCI:
    """Paired bootstrap CI of the token-weighted mean Σ t_i d_i / Σ t_i (two-sided).

    Args:
        deltas: per-window paired differences d_i (finite), length n ≥ 2.
        tokens: per-window token counts t_i (finite, > 0), length n.
        rng: the only source of randomness (its seed sequence spawns the block streams); it is not
            touched when the deltas are all equal.
        replicates: bootstrap replicates B (≥ 1).
        confidence_level: 1 − 2α, in (0, 1).
        method: "bca" (default) or "percentile".
        scheme: "uniform" (default; resample windows) or "token_weighted" (resample ∝ t_i, InvarLock).
        threads: worker threads (default the CPU count, at most 8; never changes the result).

    Raises:
        ValueError: n < 2, mismatched lengths, non-finite deltas, non-finite or non-positive token
            counts, or an invalid option.
        TypeError: ``rng`` is not a ``numpy.random.Generator``.
    """
    d, t = checked_windows(deltas, tokens, min_n=2)
    replicates = _check_options(rng, replicates, scheme, threads)
    if method not in METHODS:
        raise ValueError(f"'method' must be one of {METHODS} (got {method!r})")
    level = float(confidence_level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"'confidence_level' must be in (0, 1) (got {confidence_level!r})")

    estimate = _weighted_mean(d, t)
    if np.all(d == d[0]):
        return BootstrapCI(estimate, estimate, estimate, method, scheme, 0, level, None, None,
                           True, "all deltas equal", None, 0)

    theta = _replicates(d, t, rng, replicates, scheme, threads)
    interval = interval_from_replicates(d, t, estimate, theta, method=method, scheme=scheme, confidence_level=level,
                                        index_streams=_block_count(replicates))
    quantiles = np.quantile(theta, DISTRIBUTION_PROBABILITIES, method="linear")
    return replace(interval, distribution=tuple(float(q) for q in quantiles))


def interval_from_replicates(d: np.ndarray, t: np.ndarray, estimate: float, theta: np.ndarray, *, method: str,
                             scheme: str, confidence_level: float, index_streams: int) -> BootstrapCI:
    """The BCa or percentile interval at ``confidence_level`` from replicates ``theta`` of θ̂ = ``estimate``
    (the formulas of the module docstring); shared by every version's resampling."""
    alpha = (1.0 - confidence_level) / 2.0
    z0 = acceleration = None
    fallback = None
    levels = (alpha, 1.0 - alpha)
    if method == "bca":
        z0_value = float(special.ndtri((np.count_nonzero(theta < estimate) + np.count_nonzero(theta <= estimate))
                               / (2.0 * theta.size)))
        z0 = z0_value if math.isfinite(z0_value) else None
        acceleration = _acceleration(d, t, estimate)
        if z0 is None:
            fallback = "percentile: BCa bias correction undefined (all replicates on one side of the estimate)"
        elif acceleration is None:
            fallback = "percentile: jackknife acceleration undefined (zero jackknife variance)"
        else:
            adjusted = _bca_levels(z0, acceleration, alpha)
            if adjusted is None:
                fallback = "percentile: BCa adjustment undefined (1 - a(z0 + z) <= 0)"
            else:
                levels = adjusted
    low, high = np.quantile(theta, levels, method="linear")
    return BootstrapCI(
        estimate=estimate,
        low=float(low),
        high=float(high),
        method="percentile" if (method == "percentile" or fallback) else "bca",
        scheme=scheme,
        replicates=int(theta.size),
        confidence_level=confidence_level,
        z0=z0,
        acceleration=acceleration,
        degenerate=False,
        degenerate_reason=None,
        fallback=fallback,
        index_streams=index_streams,
    )


# --------------------------------------------------------------------------------------------------
# compiled alias table (the replicate loop is kernels.sfc64.resampled_sums)


@kernel
def _build_alias(t: np.ndarray, prob: np.ndarray, alias: np.ndarray) -> None:
    """Vose's (1991) alias table for p_i ∝ t_i, in float64, in the order the module docstring states."""
    n = t.size
    total = 0.0
    for i in range(n):
        total += t[i]
    q = np.empty(n, dtype=np.float64)
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    n_small = 0
    n_large = 0
    for i in range(n):
        q[i] = (t[i] * n) / total
        if q[i] < 1.0:
            small[n_small] = i
            n_small += 1
        else:
            large[n_large] = i
            n_large += 1
    while n_small > 0 and n_large > 0:
        n_small -= 1
        s = small[n_small]
        n_large -= 1
        g = large[n_large]
        prob[s] = q[s]
        alias[s] = g
        q[g] = (q[g] + q[s]) - 1.0
        if q[g] < 1.0:
            small[n_small] = g
            n_small += 1
        else:
            large[n_large] = g
            n_large += 1
    while n_large > 0:
        n_large -= 1
        prob[large[n_large]] = 1.0
        alias[large[n_large]] = large[n_large]
    while n_small > 0:             # only rounding leaves a column here: its q is 1 up to a few ulp
        n_small -= 1
        prob[small[n_small]] = 1.0
        alias[small[n_small]] = small[n_small]


# --------------------------------------------------------------------------------------------------
# internals


def _block_count(replicates: int) -> int:
    return -(-replicates // REPLICATE_BLOCK)


def _replicates(d: np.ndarray, t: np.ndarray, rng: np.random.Generator, replicates: int, scheme: str,
                threads: int | None, indices: np.ndarray | None = None) -> np.ndarray:
    """All B replicates; threads take whole blocks (each with its own stream), so they never matter."""
    n = d.size
    if scheme == "token_weighted":
        prob = np.empty(n, dtype=np.float64)
        alias = np.empty(n, dtype=np.int64)
        _build_alias(t, prob, alias)
        alias_rows = np.empty((n, 3), dtype=np.float64)
        alias_rows[:, 0], alias_rows[:, 1], alias_rows[:, 2] = prob, d, d[alias]
        values, weights, denominator = d[None, :], None, None
    else:
        alias_rows = alias = None
        values, weights, denominator = (t * d)[None, :], t[None, :], np.empty(replicates, dtype=np.float64)
    blocks = _block_count(replicates)
    states = spawned_sfc64_states(rng, blocks)
    numerator = np.empty(replicates, dtype=np.float64)

    def run(part: slice) -> None:
        rows = slice(part.start * REPLICATE_BLOCK, min(part.stop * REPLICATE_BLOCK, replicates))
        resampled_sums(values, weights, alias_rows, alias, states[part], REPLICATE_BLOCK, numerator[rows],
                       None if denominator is None else denominator[rows], None if indices is None else indices[rows])

    if threads is None and n * replicates < _MIN_THREADED_DRAWS:
        threads = 1                     # too little work to repay starting threads
    on_chunks(run, blocks, max_rows=_SLICE_BLOCKS, threads=threads, name="certa-paired-bootstrap")
    return numerator / float(n) if denominator is None else numerator / denominator


def checked_windows(deltas: np.ndarray, tokens: np.ndarray, *, min_n: int) -> tuple[np.ndarray, np.ndarray]:
    """(d, t) as contiguous float64 arrays; ``ValueError`` naming the window for anything the bootstrap cannot
    take (fewer than ``min_n`` windows, mismatched lengths, a non-finite delta, a token count that is not a
    finite positive number)."""
    d = np.asarray(deltas, dtype=np.float64)
    t = np.asarray(tokens, dtype=np.float64)
    if d.ndim != 1 or t.ndim != 1:
        raise ValueError(f"'deltas' and 'tokens' must be 1-D (got shapes {d.shape} and {t.shape})")
    if d.size != t.size:
        raise ValueError(f"'deltas' and 'tokens' must have the same length (got {d.size} and {t.size})")
    if d.size < min_n:
        raise ValueError(f"need at least {min_n} paired windows (got {d.size})")
    if d.size >= _UINT32:
        raise ValueError(f"{d.size} windows are too many to resample with 32-bit indices")
    bad = ~np.isfinite(d)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"'deltas' must be finite (window {i} is {float(d[i])!r})")
    bad = ~(np.isfinite(t) & (t > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"'tokens' must be finite and > 0 (window {i} has {float(t[i])!r}); "
                         "a window without scored tokens has no log-loss and must be dropped")
    return np.ascontiguousarray(d), np.ascontiguousarray(t)


def _weighted_mean(d: np.ndarray, t: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        estimate = float(np.sum(t * d) / np.sum(t))
    if not math.isfinite(estimate):
        raise ValueError(f"the token-weighted mean is not finite ({estimate!r}): deltas or token counts "
                         "are too large to sum in float64")
    return estimate


def _check_options(rng: np.random.Generator, replicates: int, scheme: str, threads: int | None) -> int:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"'rng' must be a numpy.random.Generator (got {type(rng).__name__})")
    if isinstance(replicates, bool) or int(replicates) != replicates or replicates < 1:
        raise ValueError(f"'replicates' must be a positive integer (got {replicates!r})")
    if scheme not in SCHEMES:
        raise ValueError(f"'scheme' must be one of {SCHEMES} (got {scheme!r})")
    if threads is not None and (isinstance(threads, bool) or int(threads) != threads or threads < 1):
        raise ValueError(f"'threads' must be a positive integer or None (got {threads!r})")
    return int(replicates)


def _acceleration(d: np.ndarray, t: np.ndarray, estimate: float) -> float | None:
    """a from the exact leave-one-out deviations δ_i = θ₍ᵢ₎ − θ̂ = t_i (θ̂ − d_i) / (Σt − t_i)."""
    delta = t * (estimate - d) / (np.sum(t) - t)
    u = np.mean(delta) - delta                      # θ̄₍.₎ − θ₍ᵢ₎
    scale = float(np.max(np.abs(u)))                # a is scale-free; rescaling avoids under/overflow
    if not (scale > 0.0 and math.isfinite(scale)):
        return None
    u = u / scale
    a = float(np.sum(u * u * u)) / (6.0 * float(np.sum(u * u)) ** 1.5)
    return a if math.isfinite(a) else None


def _bca_levels(z0: float, a: float, alpha: float) -> tuple[float, float] | None:
    """(α₁, α₂) = Φ(z0 + (z0 + z) / (1 − a (z0 + z))) for z = Φ⁻¹(α), Φ⁻¹(1 − α); None if undefined."""
    z = float(special.ndtri(alpha))
    out = []
    for zk in (z, -z):
        num = z0 + zk
        den = 1.0 - a * num
        if not den > 0.0:
            return None
        out.append(float(special.ndtr(z0 + num / den)))
    return out[0], out[1]
