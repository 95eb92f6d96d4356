"""Frozen: the paired bootstrap of ``paired.ppl_ratio`` 1.0.0 (certa 0.1.0 to 0.3.0).

Kept, unchanged in what it computes, so that every 1.0.0 certificate replays bit for bit (see
``docs/contributing.md``, "Versioned stages"; ``tests/services/test_golden.py`` replays them). Do not edit.
1.1.0 (``engine/core/stats/bootstrap/weighted_mean.py``) replaced the index streams: numpy PCG64 blocks on
``rng.spawn(2)`` gathered with ``np.take`` here, a compiled SFC64 loop per fixed block of replicates there. Only the
resampling lives here; validation, the estimate and the BCa/percentile interval are shared with 1.1.0
(``weighted_mean.checked_windows``, ``token_weighted_mean``, ``interval_from_replicates``), which compute the
same bytes for both (the golden replay is the proof).

The module as released in certa 0.3.0 (commit a5c9d03; last changed in 50ee047), its docstring below:

Paired, token-weighted bootstrap of a weighted mean, with BCa and percentile intervals.

For paired windows i = 1..n with deltas d_i (per-token log-loss of arm B minus arm A) and token counts
t_i > 0, the estimate is the token-weighted mean (seed 001, "Paired Evaluation Math")

    θ̂ = Σ t_i d_i / Σ t_i.

Two resampling schemes give the bootstrap replicates θ*_1..θ*_B:

``uniform`` (default)
    Resample n window indices uniformly with replacement and recompute the weighted mean of the
    resample, θ* = Σ t_j* d_j* / Σ t_j*. This is the ordinary nonparametric bootstrap of the ratio
    estimator θ̂ (Efron & Tibshirani 1993, ch. 6 and 14); it is what ``scipy.stats.bootstrap((d, t),
    weighted_mean, paired=True)`` computes, and this module draws the very same index stream so that the
    two agree bit for bit (see "Index stream" below).

``token_weighted``
    Resample n window indices with probability p_i = t_i / Σt and take the plain mean of the resampled
    deltas (InvarLock v0.3.7 ``core/bootstrap.py``, kept for comparison with the seed). Its replicates
    have variance Σ p_i (d_i − θ̂)² / n, whereas θ̂ has variance ≈ Σ p_i² (d_i − θ)²; when d is unrelated
    to t the ratio is n Σ p_i² = 1 + CV²(t) > 1, so the interval is too narrow and under-covers
    (docs/paired_bootstrap.md gives measured figures). The two variances agree when Var(d_i) ∝ 1/t_i
    (independent per-token noise). With all t_i equal, p is uniform and the ``uniform`` code path is
    used (the same distribution, and the same draws as scipy's plain-mean bootstrap).

Intervals at level 1 − 2α (Efron & Tibshirani 1993, §14.3, eqs. 14.10, 14.14, 14.15):

``percentile``  [Q(α), Q(1 − α)] of the replicates.

``bca``         [Q(α₁), Q(α₂)] with α_k = Φ(z0 + (z0 + z_k) / (1 − a (z0 + z_k))), z_1 = Φ⁻¹(α),
                z_2 = Φ⁻¹(1 − α); z0 = Φ⁻¹((#{θ* < θ̂} + #{θ* ≤ θ̂}) / 2B) (ties count one half, scipy's
                convention); a = Σ U_i³ / (6 (Σ U_i²)^{3/2}) with U_i = θ̄₍.₎ − θ₍ᵢ₎ from the leave-one-out
                estimates θ₍ᵢ₎ = (Σtd − t_i d_i) / (Σt − t_i), computed exactly in O(n) instead of
                scipy's O(n²) jackknife. Q is the linear-interpolation (Hyndman–Fan type 7) quantile.

Index streams. The replicates are computed in consecutive blocks of ``resample_block_rows(n)`` rows (a
fixed function of n). Block j draws its indices from stream j mod S: with the default S = 2 the streams
are ``rng.spawn(2)`` (independent children of the caller's generator, NumPy's SeedSequence spawning),
and each stream draws its own blocks in order, so the two run on two threads and the result depends only
on (d, t, the generator's state, S, replicates, scheme, method, confidence_level): never on the number of
threads, ``batch_size`` or the machine. Uniform indices are ``integers(0, n, size=(rows, n))``;
token-weighted indices are an inverse-CDF lookup of ``random``. Every index is an independent uniform
(or ∝ t) draw either way; the streams only decide which generator supplies which block.

With S = 1 the caller's generator draws every block itself, exactly as ``scipy.stats.bootstrap`` draws
them, and the result equals ``scipy.stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True,
method='BCa', batch=resample_block_rows(n), rng=<same state>)``: the replicates bit for bit, the
interval up to rounding in the acceleration (~1e-16). The tests use S = 1 to pin the arithmetic to
scipy's and S = 2 (the default: about twice as fast on two cores) against the same arithmetic on the
spawned streams, and against scipy to Monte Carlo error.

Edge cases: n < 2, non-finite deltas, and non-finite or non-positive token counts raise ``ValueError``;
all-equal deltas give a degenerate interval [θ̂, θ̂] without touching the generator; when BCa is
undefined (z0 infinite, zero jackknife variance, or 1 − a(z0 + z) ≤ 0) the percentile interval of the
same replicates is returned and ``fallback`` says why.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from certa.engine.core.stats.bootstrap.weighted_mean import (METHODS, SCHEMES, BootstrapCI, checked_windows,
                                                        interval_from_replicates, token_weighted_mean)

__all__ = [
    "resample_block_rows",
    "weighted_mean_bootstrap_ci",
    "weighted_mean_replicates",
]

BLOCK_INDICES = 2**16
"""Indices drawn per generator call (rounded up to whole replicate rows): 512 KiB of int64.

Small blocks keep the draw, the gathers and the row sums in cache. The constant fixes the call
boundaries of the index stream, so it is part of the reproducibility contract. With current NumPy the
drawn values do not depend on call boundaries, but certa does not rely on that.
"""

INDEX_STREAMS = 2
"""Default number of independent index streams (part of the reproducibility contract; see above)."""


def resample_block_rows(n: int) -> int:
    """Replicate rows per generator call for n windows: ⌈2**16 / n⌉ (at least 1).

    ``scipy.stats.bootstrap(..., batch=resample_block_rows(n))`` draws the same index stream.
    """
    if n < 1:
        raise ValueError(f"'n' must be a positive integer (got {n!r})")
    return max(1, -(-BLOCK_INDICES // int(n)))


def weighted_mean_replicates(deltas: np.ndarray, tokens: np.ndarray, *, rng: np.random.Generator,
                             replicates: int = 2000, scheme: str = "uniform", batch_size: int | None = None,
                             streams: int = INDEX_STREAMS, threads: int | None = None) -> np.ndarray:
    """The B bootstrap replicates θ*_1..θ*_B of the token-weighted mean under ``scheme``.

    See the module docstring for the schemes and the index streams. ``batch_size`` caps the replicate
    rows gathered at once and ``threads`` the worker threads (default: one per stream, at most the CPU
    count); neither ever changes the values. ``streams`` does (1 reproduces scipy's index stream).
    """
    d, t = checked_windows(deltas, tokens, min_n=2)
    replicates, batch_size = _check_counts(replicates, batch_size)
    _check_rng(rng)
    _check_streams(streams, threads)
    if scheme not in SCHEMES:
        raise ValueError(f"'scheme' must be one of {SCHEMES} (got {scheme!r})")
    return _replicates(d, t, rng, replicates, scheme, batch_size, streams, threads)


def weighted_mean_bootstrap_ci(deltas: np.ndarray, tokens: np.ndarray, *, rng: np.random.Generator,
                               replicates: int = 2000, confidence_level: float = 0.95,
                               method: str = "bca", scheme: str = "uniform", batch_size: int | None = None,
                               streams: int = INDEX_STREAMS, threads: int | None = None) -> BootstrapCI:
    """Paired bootstrap CI of the token-weighted mean Σ t_i d_i / Σ t_i (two-sided).

    Args:
        deltas: per-window paired differences d_i (finite), length n ≥ 2.
        tokens: per-window token counts t_i (finite, > 0), length n.
        rng: the only source of randomness; it is not touched when the deltas are all equal.
        replicates: bootstrap replicates B (≥ 1).
        confidence_level: 1 − 2α, in (0, 1).
        method: "bca" (default) or "percentile".
        scheme: "uniform" (default; resample windows) or "token_weighted" (resample ∝ t_i, InvarLock).
        batch_size: cap on replicate rows reduced at once (memory only; never changes the result).
        streams: independent index streams (module docstring); 1 reproduces scipy.stats.bootstrap.
        threads: worker threads (default one per stream, at most the CPU count; never changes the result).

    Raises:
        ValueError: n < 2, mismatched lengths, non-finite deltas, non-finite or non-positive token
            counts, or an invalid option.
        TypeError: ``rng`` is not a ``numpy.random.Generator``.
    """
    d, t = checked_windows(deltas, tokens, min_n=2)
    replicates, batch_size = _check_counts(replicates, batch_size)
    _check_rng(rng)
    _check_streams(streams, threads)
    if method not in METHODS:
        raise ValueError(f"'method' must be one of {METHODS} (got {method!r})")
    if scheme not in SCHEMES:
        raise ValueError(f"'scheme' must be one of {SCHEMES} (got {scheme!r})")
    level = float(confidence_level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"'confidence_level' must be in (0, 1) (got {confidence_level!r})")

    estimate = token_weighted_mean(d, t)
    if np.all(d == d[0]):
        return BootstrapCI(estimate, estimate, estimate, method, scheme, 0, level, None, None,
                           True, "all deltas equal", None, streams)
    theta = _replicates(d, t, rng, replicates, scheme, batch_size, streams, threads)
    return interval_from_replicates(d, t, estimate, theta, method=method, scheme=scheme, confidence_level=level,
                                    index_streams=streams)


# --------------------------------------------------------------------------------------------------
# internals


def _check_counts(replicates: int, batch_size: int | None) -> tuple[int, int | None]:
    if isinstance(replicates, bool) or int(replicates) != replicates or replicates < 1:
        raise ValueError(f"'replicates' must be a positive integer (got {replicates!r})")
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) != batch_size
                                   or batch_size < 1):
        raise ValueError(f"'batch_size' must be a positive integer or None (got {batch_size!r})")
    return int(replicates), None if batch_size is None else int(batch_size)


def _check_streams(streams: int, threads: int | None) -> None:
    if isinstance(streams, bool) or int(streams) != streams or streams < 1:
        raise ValueError(f"'streams' must be a positive integer (got {streams!r})")
    if threads is not None and (isinstance(threads, bool) or int(threads) != threads or threads < 1):
        raise ValueError(f"'threads' must be a positive integer or None (got {threads!r})")


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"'rng' must be a numpy.random.Generator (got {type(rng).__name__})")


def _blocks(replicates: int, rows: int) -> list[tuple[int, int]]:
    return [(k, min(rows, replicates - k)) for k in range(0, replicates, rows)]


BlockReducer = Callable[[np.random.Generator, int, int, np.ndarray], None]
"""reduce(generator, first replicate, rows, out): draw one block of indices and write its replicates."""


def _uniform_reducer(d: np.ndarray, t: np.ndarray, chunk: int) -> Callable[[], BlockReducer]:
    """Uniform resampling (and token_weighted with equal token counts, where p_i = 1/n: the same law).

    One 16-byte gather of (t_i d_i, t_i) packed as a complex number; the strided row sums of the real and
    imaginary parts are numpy's pairwise sums in the same order as for contiguous arrays, so each θ*
    equals (t[idx] * d[idx]).sum(-1) / t[idx].sum(-1) bit for bit (what scipy computes).
    """
    n = d.size
    packed = np.empty(n, dtype=np.complex128)
    packed.real = t * d
    packed.imag = t

    def make() -> BlockReducer:
        gathered = np.empty((chunk, n), dtype=np.complex128)       # one buffer per worker thread

        def reduce(generator: np.random.Generator, start: int, rows: int, out: np.ndarray) -> None:
            idx = generator.integers(0, n, size=(rows, n))
            for s in range(0, rows, chunk):
                part = idx[s:s + chunk]
                g = np.take(packed, part, out=gathered[:part.shape[0]])
                out[start + s:start + s + part.shape[0]] = g.real.sum(axis=1) / g.imag.sum(axis=1)

        return reduce

    return make


def _token_weighted_reducer(d: np.ndarray, t: np.ndarray, rows: int, chunk: int) -> Callable[[], BlockReducer]:
    """Resampling with probability ∝ t_i by inverse-CDF lookup of uniforms; statistic = plain mean."""
    n = d.size

    def make() -> BlockReducer:
        lookup = _InverseCDF(t, rows=rows)                          # its work buffers are per worker
        uniforms = np.empty((rows, n), dtype=np.float64)
        index = np.empty((rows, n), dtype=np.intp)
        gathered = np.empty((chunk, n), dtype=np.float64)

        def reduce(generator: np.random.Generator, start: int, block_rows: int, out: np.ndarray) -> None:
            idx = lookup(generator.random(out=uniforms[:block_rows]), out=index[:block_rows])
            for s in range(0, block_rows, chunk):
                part = idx[s:s + chunk]
                g = gathered[:part.shape[0]]
                out[start + s:start + s + part.shape[0]] = np.take(d, part, out=g).sum(axis=1) / n

        return reduce

    return make


def _replicates(d: np.ndarray, t: np.ndarray, rng: np.random.Generator, replicates: int, scheme: str,
                batch_size: int | None, streams: int, threads: int | None) -> np.ndarray:
    """All B replicates: block j comes from stream j mod ``streams``; one worker per stream (module doc)."""
    rows = resample_block_rows(d.size)
    chunk = rows if batch_size is None else min(rows, batch_size)
    if scheme == "token_weighted" and not np.all(t == t[0]):
        make_reducer = _token_weighted_reducer(d, t, rows, chunk)
    else:
        make_reducer = _uniform_reducer(d, t, chunk)
    generators = [rng] if streams == 1 else rng.spawn(streams)
    blocks = _blocks(replicates, rows)
    out = np.empty(replicates, dtype=np.float64)

    def run_stream(k: int) -> None:
        reduce = make_reducer()
        for start, block_rows in blocks[k::streams]:
            reduce(generators[k], start, block_rows, out)

    workers = min(streams, len(blocks), threads if threads is not None else (os.cpu_count() or 1))
    if workers <= 1:
        for k in range(streams):
            run_stream(k)
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="certa-bootstrap") as pool:
            list(pool.map(run_stream, range(streams)))
    return out


class _InverseCDF:
    """Window index for uniform u ∈ [0, 1): i = #{k : C_k ≤ u·C_n} with C the cumulative token counts.

    Equal to ``np.searchsorted(C, u * C[-1], side="right")`` (index i has probability t_i / Σt), but
    6-9x faster (measured at n = 200 to 10**4). A guide table G_j = #{k : C_k ≤ j·C_n/m} over m equal
    buckets gives a lower bound G_{j−1} for a key in bucket j = ⌊u·m⌋ (one bucket of slack absorbs
    rounding), and the exact index is reached by at most R = max_j (G_{j+2} − G_{j−1}) unit steps
    "i += (x ≥ C_i)" (Chen & Asau 1974, indexed search). m = min(3 Σt / min t, 64 n, 2**20) (at least n) keeps R small; when R still exceeds
    24 (extremely uneven token counts), plain binary search is used instead (same result).
    """

    _MAX_BUCKETS = 2**20
    _MAX_STEPS = 24

    def __init__(self, t: np.ndarray, rows: int = 0) -> None:
        self.cumulative = np.cumsum(t)
        self.total = float(self.cumulative[-1])
        n = t.size
        m = int(min(self._MAX_BUCKETS, 64 * n, max(n, math.ceil(3.0 * self.total / float(t.min())))))
        edges = np.searchsorted(self.cumulative, np.arange(m + 3) * (self.total / m), side="right")
        edges = np.minimum(edges, n)
        self.buckets = m
        self.start = np.concatenate(([0], edges[:m]))          # G_{j−1} for j = 0..m (j = m: rounding)
        self.steps = int(np.max(edges[2:m + 3] - self.start))   # R = max_j G_{j+2} − G_{j−1}
        self.padded = np.append(self.cumulative, np.inf)      # sentinel: never step past n − 1
        # work arrays for up to `rows` rows of n keys, reused by every call (calls must not overlap)
        self._work = (np.empty((rows, n)), np.empty((rows, n), dtype=np.intp),
                      np.empty((rows, n)), np.empty((rows, n), dtype=bool))

    def __call__(self, u: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(u.shape, dtype=np.intp)
        if u.ndim == 2 and u.shape[0] <= self._work[0].shape[0] and u.shape[1] == self._work[0].shape[1]:
            x, bucket, bound, step = (w[:u.shape[0]] for w in self._work)
        else:
            x, bucket, bound, step = (np.empty(u.shape, dtype=w.dtype) for w in self._work)
        np.multiply(u, self.total, out=x)
        if self.steps > self._MAX_STEPS:
            out[...] = np.searchsorted(self.cumulative, x, side="right")
        else:
            np.multiply(u, self.buckets, out=bucket, casting="unsafe")
            np.take(self.start, bucket, out=out)  # type: ignore[arg-type]  # integer indices (numpy's stub is wide)
            for _ in range(self.steps):                       # ≤ 24 vectorised passes, not per sample
                np.greater_equal(x, np.take(self.padded, out, out=bound), out=step)
                out += step
        return np.minimum(out, self.cumulative.size - 1, out=out)
