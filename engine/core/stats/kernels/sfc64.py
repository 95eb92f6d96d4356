"""Independent SFC64 streams, and the one compiled loop that draws bootstrap replicates from them.

Streams. A kernel that resamples several blocks (or samples) in parallel gives each its own stream: child ``j``
of the caller's generator's ``SeedSequence`` (``seed_seq.spawn(count)``), seeded into numpy's ``SFC64``. The
loop receives only the raw state words (a, b, c, counter) and steps SFC64 itself (Doty-Humphrey's update, as
numpy's ``sfc64_next64``):

    x = a + b + counter;  a ← b ^ (b >> 11);  b ← c + (c << 3);  c ← rotl(c, 24) + x;  counter ← counter + 1

(all mod 2⁶⁴), so its draws equal ``Generator(SFC64(child))``'s, whatever the number of threads.

Replicates (``resampled_sums``). Stream s fills its run of ``rows_per_stream`` consecutive replicates (the last
run may be shorter), replicate after replicate, draw after draw; each replicate draws n indices i_1..i_n from
the stream and sums the drawn values (and weights) left to right in two interleaved float64 accumulators,
draws 0, 2, 4, … and 1, 3, 5, …, added at the end: num = Σ₀ v_i + Σ₁ v_i, den = Σ₀ w_i + Σ₁ w_i.
Two draws:

* uniform (no alias table): index i is Lemire's (2019) multiply-shift of a 32-bit word u by n, i = (u · n) >> 32,
  rejecting the 2³² mod n low products (u · n mod 2³² < 2³² mod n) that would bias it; the 32-bit words are
  the low then the high half of each 64-bit output, a half left over carried into the next replicate. These
  are, in order, exactly the integers of numpy's ``Generator(SFC64(child)).integers(0, n, dtype=np.uint32)``.
* alias (Walker 1977, table (prob, alias) built by the caller): one 64-bit output x per draw,
  u = (x >> 11) · 2⁻⁵³ (numpy's ``Generator(SFC64).random()``, bit for bit), v = u · n, column c = ⌊v⌋, and
  the index is c when v − c < prob_c, else alias_c. The caller lays the table out as rows
  (prob_c, value_c, value_{alias_c}), so that a draw reads one 24-byte row and picks its value without a
  branch (reading prob, alias and the value from three arrays and choosing by a branch measured four times
  slower in ``bench/paired_bootstrap.py``).

This one loop serves ``bootstrap.weighted_mean`` (streams = blocks of 256 replicates sharing one table of
t·d and t, or of d for the alias draws) and ``bakeoff.pairwise_bootstrap`` (streams = vendors' samples, one
table each): both stage versions' certificates were computed by its two copies, which it replaced bit for
bit (``tests/core/stats/test_sfc64_replicates.py`` pins the replicates of both callers, recorded before the merge). The
loop is compiled without fast-math (``kernels.compiled``), so every machine gives the same bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from certa.engine.core.stats.kernels.compiled import kernel

__all__ = ["resampled_sums", "spawned_sfc64_states"]

_UINT32 = 1 << 32


def spawned_sfc64_states(rng: np.random.Generator, count: int) -> np.ndarray:
    """(count, 4) uint64: SFC64's initial (a, b, c, counter) on each of ``count`` children spawned from the
    seed sequence of ``rng``'s bit generator."""
    states = np.empty((count, 4), dtype=np.uint64)
    seed_sequence: Any = rng.bit_generator.seed_seq  # a SeedSequence (typed as the ISeedSequence protocol)
    for j, child in enumerate(seed_sequence.spawn(count)):
        states[j] = np.random.SFC64(child).state["state"]["state"]
    return states


@kernel
def resampled_sums(values: np.ndarray, weights: np.ndarray | None, alias_rows: np.ndarray | None,
                   alias: np.ndarray | None, states: np.ndarray, rows_per_stream: int, numerator: np.ndarray,
                   denominator: np.ndarray | None, indices: np.ndarray | None) -> None:
    """Bootstrap sums of replicates r drawn from the SFC64 states ``states`` (S, 4) (module docstring).

    Stream s fills rows s·rows_per_stream .. min((s + 1)·rows_per_stream, len(numerator)) − 1 with
    numerator[r] = Σ_k values[row, i_k] and, unless ``weights`` is None, denominator[r] = Σ_k weights[row, i_k],
    over n = values.shape[1] draws; row = s when ``values`` has one row per stream, 0 when its one row is shared.
    Uniform draws when ``alias_rows`` is None; else the alias method, reading the values to sum from the rows
    (prob_c, values[0, c], values[0, alias_c]) of ``alias_rows`` (n, 3) (``values`` then only gives n). Unless
    ``indices`` is None, the drawn indices are recorded there too (``alias`` maps a column to its alias).
    Each None argument is a separate compiled specialisation without its branches (Numba prunes
    ``arg is None`` tests on arguments typed None), so the bake-off's loop carries no recording code.
    """
    n = values.shape[1]
    rows = numerator.shape[0]
    per_stream = values.shape[0] > 1
    n64 = np.uint64(n)
    low32 = np.uint64(0xFFFFFFFF)
    shift32 = np.uint64(32)
    shift11 = np.uint64(11)
    threshold = np.uint64(_UINT32 % n)
    scale = 1.0 / 9007199254740992.0
    n_float = float(n)

    def sfc64_next(a, b, c, counter):  # one SFC64 step (Doty-Humphrey), as numpy's sfc64_next64
        value = a + b + counter
        rotated = (c << np.uint64(24)) | (c >> np.uint64(40))
        return value, b ^ (b >> np.uint64(11)), c + (c << np.uint64(3)), rotated + value, counter + np.uint64(1)

    for s in range(states.shape[0]):
        a, b, c, counter = states[s, 0], states[s, 1], states[s, 2], states[s, 3]
        row = s if per_stream else 0
        first_row = s * rows_per_stream
        last_row = min(first_row + rows_per_stream, rows)
        if alias_rows is not None:
            for r in range(first_row, last_row):
                sum0 = 0.0
                sum1 = 0.0
                for k in range(n):
                    value, a, b, c, counter = sfc64_next(a, b, c, counter)
                    v = float(value >> shift11) * scale * n_float
                    column = int(v)
                    if column >= n:
                        column = n - 1
                    other = 1 + int(v - column >= alias_rows[column, 0])    # 1: the column, 2: its alias
                    drawn = alias_rows[column, other]
                    if indices is not None:
                        indices[r, k] = column if other == 1 else alias[column]
                    if k & 1:
                        sum1 += drawn
                    else:
                        sum0 += drawn
                numerator[r] = sum0 + sum1
            continue
        spare = np.uint64(0)
        have_spare = False
        for r in range(first_row, last_row):
            num0 = 0.0
            num1 = 0.0
            den0 = 0.0
            den1 = 0.0
            k = 0
            while k < n:
                if not have_spare and k + 1 < n:
                    # fast path: both 32-bit halves of one SFC64 output, low half first
                    value, a, b, c, counter = sfc64_next(a, b, c, counter)
                    first = (value & low32) * n64
                    second = (value >> shift32) * n64
                    if (first & low32) >= threshold and (second & low32) >= threshold:
                        i = first >> shift32
                        j = second >> shift32
                        if k & 1:
                            num1 += values[row, i]
                            num0 += values[row, j]
                            if weights is not None:
                                den1 += weights[row, i]
                                den0 += weights[row, j]
                        else:
                            num0 += values[row, i]
                            num1 += values[row, j]
                            if weights is not None:
                                den0 += weights[row, i]
                                den1 += weights[row, j]
                        if indices is not None:
                            indices[r, k] = i
                            indices[r, k + 1] = j
                        k += 2
                        continue
                    # a half was rejected: replay this output one half at a time
                    spare = value >> shift32
                    have_spare = True
                    product = first
                elif have_spare:
                    product = spare * n64
                    have_spare = False
                else:
                    value, a, b, c, counter = sfc64_next(a, b, c, counter)
                    spare = value >> shift32
                    have_spare = True
                    product = (value & low32) * n64
                if (product & low32) < threshold:
                    continue  # rejected (Lemire): draw the next 32-bit word
                i = product >> shift32
                if k & 1:
                    num1 += values[row, i]
                    if weights is not None:
                        den1 += weights[row, i]
                else:
                    num0 += values[row, i]
                    if weights is not None:
                        den0 += weights[row, i]
                if indices is not None:
                    indices[r, k] = i
                k += 1
            numerator[r] = num0 + num1
            if weights is not None:
                denominator[r] = den0 + den1
