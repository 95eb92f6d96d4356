"""Frozen: the two bake-off kernels of ``bakeoff.compare``/``bakeoff.merge`` 1.0.0 (certa 0.1.0).

Kept, unchanged in what they compute, so that every 1.0.0 certificate replays bit for bit (see
``docs/contributing.md``, "Versioned stages"). Do not edit; 1.1.0 replaced both:

* ``decision_values``: rapidities by numpy's ``arctanh`` (and ``tanh`` for ``u_scale``), whose SIMD kernels
  numpy picks by CPU at run time. 1.1.0 uses a compiled log1p formula within 3 ulp of atanh.
* ``resampled_weighted_means``: index blocks ``rng.integers(0, n, (S, rows, n), dtype=int64)`` from the
  vendor's PCG64 generator, gathered with ``np.take`` and summed along rows (numpy's pairwise summation).
  1.1.0 draws from SFC64 in a compiled loop.

Everything else the 1.0.0 stages compute (exact fixed-point group sums, pools, bands, ranking, percentile
intervals, p-values, Holm) is shared with 1.1.0 and gives the same numbers (the golden corpus in
``tests/golden/`` replays 0.1.0 certificates with it).
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.bakeoff.pool import BandTable, DecisionValues, Hysteresis, hysteresis_bands

__all__ = ["decision_values", "resampled_weighted_means"]

_BLOCK_ELEMENTS = 1 << 20
"""Indices drawn per block (1 Mi int64 = 8 MiB, plus 8 MiB of gathered float64 values)."""


def _clamp(rsi: np.ndarray, eps_a: float) -> np.ndarray:
    return np.clip(np.asarray(rsi, dtype=np.float64), -1.0 + eps_a, 1.0 - eps_a)


def decision_values(rsi: np.ndarray, w: np.ndarray, g: np.ndarray, *, mode: str, eps_a: float,
                    bands: BandTable, hysteresis: Hysteresis | None = None,
                    streams: np.ndarray | None = None) -> DecisionValues:
    """1.0.0: a = clamp(RSI); RSI_env = clamp(g·a) (``mul``) or clamp(tanh(g·arctanh(a))) (``u_scale``);
    U_dec = w·arctanh(a), U_env_dec = w·arctanh(RSI_env), with numpy's ``arctanh``/``tanh`` (seed 2.1, 4.1)."""
    a = _clamp(rsi, eps_a)
    if mode == "mul":
        env = g * a
    elif mode == "u_scale":
        env = np.tanh(g * np.arctanh(a))
    else:
        raise ValueError(f"gate mode must be 'mul' or 'u_scale' (got {mode!r})")
    rsi_env = _clamp(env, eps_a)
    u_env = np.arctanh(rsi_env)
    if hysteresis is None:
        band = bands.classify(rsi_env)
    else:
        band = hysteresis_bands(rsi_env, np.zeros(len(a), dtype=np.intp) if streams is None else streams, bands,
                                hysteresis)
    return DecisionValues(rsi_env=rsi_env, u_dec=w * np.arctanh(a), w_dec=np.asarray(w, dtype=np.float64),
                          u_env_dec=w * u_env, u_env=u_env, band=band, band_ungated=bands.classify(a))


def resampled_weighted_means(u: np.ndarray, w: np.ndarray | None, replicates: int, rng: np.random.Generator,
                             *, eps_w: float = 1e-12) -> np.ndarray:
    """1.0.0: bootstrap replicates of Σ w u / max(Σ w, eps_w) of a 1-D sample, from ``rng``'s own integers,
    in blocks of at most 2^20 indices (the block size is part of the stream's use, hence frozen)."""
    values = np.asarray(u, dtype=np.float64)
    n = values.shape[0]
    weights = None
    if w is not None:
        weights = np.asarray(w, dtype=np.float64)
        if np.all(weights == weights[0]):  # equal weights: Σw* is n·w exactly; gather only the values
            totals = max(weights[0] * n, eps_w)
            weighted, weights = values * weights[0], None
        else:
            weighted = values * weights
    else:
        weighted, totals = values, float(n)
    out = np.empty(replicates, dtype=np.float64)
    rows = max(1, _BLOCK_ELEMENTS // max(1, n))
    for start in range(0, replicates, rows):
        count = min(rows, replicates - start)
        index = rng.integers(0, n, size=(1, count, n), dtype=np.int64)
        numerator = np.take(weighted, index).sum(axis=2)[0]
        if weights is None:
            out[start:start + count] = numerator / totals
        else:
            out[start:start + count] = numerator / np.maximum(np.take(weights, index).sum(axis=2)[0], eps_w)
    return out
