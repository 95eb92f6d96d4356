"""Vendor bake-off pooling in rapidity (atanh) space: gating, bands, exact (U, W) sums, merge, ranking.

Source: SSM-AI v1.8 (seed 002, ``002_5c45cf6a4fb95056.txt``), Appendix E3/E6 and Sections 2.1–2.4, 3.4,
4.1. For decision i with bounded score RSI_i ∈ (−1, 1),
weight w_i ≥ 0 and gate value g_i ∈ [0, 1]:

    a_i      = clamp(RSI_i, −1 + eps_a, 1 − eps_a)
    U_dec_i  = w_i · atanh(a_i),   W_dec_i = w_i
    RSI_env  = clamp(g_i · a_i)                       (gate mode ``mul``)
             = clamp(tanh(g_i · atanh(a_i)))          (gate mode ``u_scale``)
    U_env_i  = w_i · atanh(RSI_env_i)

and per (bucket, vendor) group: U = Σ U_dec, W = Σ W_dec, U_env = Σ U_env_dec,
RSI_pool = tanh(U / max(W, eps_w)), RSI_pool_env = tanh(U_env / max(W, eps_w)); W = 0 gives 0.

Departures from the seed, each deliberate:

* ``U_dec = w · atanh(RSI)`` and ``U_env`` is weighted by w (the seed writes U_dec := atanh(RSI) and an
  unweighted U_env over a weighted W, consistent only when w = 1).
* Exact, order-free sums. Each per-decision term is rounded once to the fixed-point grid 2^-56
  (``FIXED_POINT_BITS``; half to even, a change of at most 2^-57 ≈ 6.9e-18 per term, none for terms
  ≥ 1/16 in magnitude) and the grid integers are summed exactly, as Python integers assembled from int64
  limb sums that cannot overflow. The pools are therefore bit-identical under any row order and any split
  into shards whose sums are added — the seed's "order-invariant, shard-safe" claim made literally true,
  which floating-point summation cannot give.

Computation. The per-decision work runs in compiled loops (``certa.engine.core.stats.kernels.compiled``) over contiguous row
chunks on threads (``on_chunks``); exact sums make the result independent of the chunking. atanh is
evaluated as ½·log1p(2|a|/(1 − |a|)) with the sign of a, log1p by Goldberg's (1991) formula from ``log``
(see ``rapidity``): about 9.5 ns per value in a compiled loop against 24 ns for libm's ``atanh``, and
within 3 ulp of the exact atanh (2.9 ulp measured; libm's atanh is within 2 ulp, so ``math.atanh`` may
differ in the last 2 bits or so). The loops use IEEE-754 basic operations in source order (no fast-math),
libm ``log`` and, for ``u_scale``, libm ``tanh``: the results are the same on every machine, except where
two platforms' libm ``log`` or ``tanh`` differ, which happens, rarely, in the last bit.

Bands (Section 3.4, inclusivity fixed here): A++ x ≥ 0.90; A+ 0.60 ≤ x < 0.90; A0 −0.60 < x < 0.60;
A− −0.90 < x ≤ −0.60; A−− x ≤ −0.90 — a value exactly on an edge goes to the outer band.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

import numpy as np

from certa.engine.core.stats.kernels.compiled import kernel, on_chunks

__all__ = [
    "BAND_NAMES",
    "FIXED_POINT_BITS",
    "BandTable",
    "Hysteresis",
    "DecisionValues",
    "GroupSums",
    "Pools",
    "rapidity",
    "gate_rsi",
    "decision_values",
    "fixed_point_group_sums",
    "group_sums",
    "merge_group_sums",
    "pools_from_sums",
    "hysteresis_bands",
    "group_medians",
    "group_means",
    "half_even",
    "RankEntry",
    "rank_vendors",
]

BAND_NAMES: tuple[str, ...] = ("A++", "A+", "A0", "A-", "A--")
"""Band names, best first; band indices everywhere in this module index this tuple."""

FIXED_POINT_BITS = 56
"""Sums are exact multiples of 2^-FIXED_POINT_BITS (see module docstring)."""

_SCALE = float(1 << FIXED_POINT_BITS)
_NARROW = float(1 << (62 - FIXED_POINT_BITS))  # |term| < 64: |term · 2^56| < 2^62, summed in int64 limbs
_MEDIUM = float(1 << 36)  # |term| < 2^36: three int64 limbs (see _fixed_sum_kernel)
_TOP = float(1 << 62)
_INV_TOP = 1.0 / _TOP
_LOW31 = (1 << 31) - 1
_LIMB_BITS = 30
_ROWS_PER_PASS = 1 << 21  # 2^21 rows × limbs below 2^31 in magnitude: float64 sums below 2^52, exact
_MIN_CHUNK_ROWS = 1 << 16  # a thread for fewer rows costs more than it saves
_MAX_CHUNK_ROWS = 1 << 30  # the int64 limb sums of one chunk are exact below 2^31 rows
_A0 = BAND_NAMES.index("A0")


@dataclass(frozen=True)
class BandTable:
    """Band edges; ``x`` on an edge goes to the outer band (seed Section 3.4).

    A++ ``x >= a_pp``; A+ ``a_p <= x < a_pp``; A0 ``a_m < x < a_p``; A− ``a_mm < x <= a_m``;
    A−− ``x <= a_mm``. Requires −1 < a_mm < a_m < a_p < a_pp < 1.
    """

    a_pp: float = 0.90
    a_p: float = 0.60
    a_m: float = -0.60
    a_mm: float = -0.90

    def __post_init__(self) -> None:
        edges = (self.a_mm, self.a_m, self.a_p, self.a_pp)
        if not all(math.isfinite(e) for e in edges) or not (-1 < self.a_mm < self.a_m < self.a_p < self.a_pp < 1):
            raise ValueError("band edges must satisfy -1 < A-- < A- < A+ < A++ < 1 "
                             f"(got A++={self.a_pp}, A+={self.a_p}, A-={self.a_m}, A--={self.a_mm})")

    def classify(self, x: np.ndarray) -> np.ndarray:
        """Band index (into ``BAND_NAMES``) of each value, as int8."""
        x = np.asarray(x, dtype=np.float64)
        above = ((x > self.a_mm).astype(np.int8) + (x > self.a_m) + (x >= self.a_p) + (x >= self.a_pp))
        return (4 - above).astype(np.int8)

    def hold_mask(self, x: np.ndarray, h_up: float, h_dn: float) -> np.ndarray:
        """(n, 5) booleans: band k keeps holding at x (its interval widened by h_dn below, h_up above)."""
        x = np.asarray(x, dtype=np.float64)
        return np.stack([
            x >= self.a_pp - h_dn,
            (x >= self.a_p - h_dn) & (x < self.a_pp + h_up),
            (x > self.a_m - h_dn) & (x < self.a_p + h_up),
            (x > self.a_mm - h_dn) & (x <= self.a_m + h_up),
            x <= self.a_mm + h_up,
        ], axis=1)

    def as_dict(self) -> dict[str, float]:
        return {"A++": self.a_pp, "A+": self.a_p, "A-": self.a_m, "A--": self.a_mm}


@dataclass(frozen=True)
class Hysteresis:
    """Optional band hysteresis (seed 3.4): the previous band of a stream holds while x stays inside
    its interval widened by ``h_dn`` below and ``h_up`` above."""

    h_up: float = 0.02
    h_dn: float = 0.02


# --------------------------------------------------------------------------- compiled loops over rows


@kernel
def _decision_kernel(rsi: np.ndarray, w: np.ndarray, g: np.ndarray, u_scale: bool, eps_a: float,
                     edges: tuple[float, float, float, float], rsi_env: np.ndarray, u_dec: np.ndarray,
                     u_env: np.ndarray, u_env_dec: np.ndarray, band: np.ndarray, band_ungated: np.ndarray) -> None:
    """Per decision i (``decision_values``): a = clamp(RSI_i); u = atanh(a); RSI_env = clamp(g_i·a) or, with
    ``u_scale``, clamp(tanh(g_i·u)); u_env = atanh(RSI_env); U_dec = w_i·u, U_env_dec = w_i·u_env; the bands
    of RSI_env and of a. ``atanh`` is the formula of ``rapidity``; ``band_of`` makes ``BandTable.classify``'s
    comparisons (``edges`` = A−−, A−, A+, A++); ``clamp`` keeps NaN, as ``np.clip``."""
    lo, hi = -1.0 + eps_a, 1.0 - eps_a
    a_mm, a_m, a_p, a_pp = edges

    def clamp(x: float) -> float:
        return lo if x < lo else (hi if x > hi else x)

    def atanh(x: float) -> float:
        t = abs(x)
        z = 2.0 * t / (1.0 - t)
        v = 1.0 + z
        return math.copysign(0.5 * (z if v == 1.0 else math.log(v) * z / (v - 1.0)), x)

    def band_of(x: float) -> int:
        return 4 - ((x > a_mm) + (x > a_m) + (x >= a_p) + (x >= a_pp))

    for i in range(rsi.shape[0]):
        a = clamp(rsi[i])
        u = atanh(a)
        env = clamp(math.tanh(g[i] * u) if u_scale else g[i] * a)
        u_of_env = atanh(env)
        rsi_env[i] = env
        u_dec[i] = w[i] * u
        u_env[i] = u_of_env
        u_env_dec[i] = w[i] * u_of_env
        band[i] = band_of(env)
        band_ungated[i] = band_of(a)


@kernel
def _fixed_sum_kernel(codes: np.ndarray, columns: tuple[np.ndarray, ...], low: np.ndarray, mid: np.ndarray,
                      top: np.ndarray, skipped: np.ndarray) -> None:
    """For row i and column j, x = columns[j][i] and s = rint(x · 2^56) (half to even), written as
    s = 2^62·t + 2^31·m + l with 0 ≤ l < 2^31: low[j, code] += l, mid[j, code] += m, top[j, code] += t.

    |x| < 64 (|s| < 2^62): s is an int64; l = s mod 2^31, m = s >> 31 (arithmetic), t = 0.
    64 ≤ |x| < 2^36 (|s| < 2^92, e.g. token counts, latencies, large weights): t = ⌊s / 2^62⌋ (|t| < 2^30)
    and s − 2^62·t ∈ [0, 2^62), both exact in floating point, split like the first case.
    Every limb is below 2^31 in magnitude, so the int64 sums cannot overflow below 2^31 rows. Larger and
    non-finite terms are only counted, in skipped[j], for ``_wide_fixed_sums``.
    """
    n_groups = low.shape[1]
    for i in range(codes.shape[0]):
        code = codes[i]
        if code < 0 or code >= n_groups:
            raise IndexError("group code out of range")
        for j in range(len(columns)):
            x = columns[j][i]
            magnitude = abs(x)
            if magnitude < _NARROW:
                v = np.int64(np.rint(x * _SCALE))
            elif magnitude < _MEDIUM:
                s = np.rint(x * _SCALE)
                t = math.floor(s * _INV_TOP)
                v = np.int64(s - t * _TOP)
                top[j, code] += t
            else:
                skipped[j] += 1
                continue
            low[j, code] += v & _LOW31
            mid[j, code] += v >> 31


@kernel
def _count_kernel(codes: np.ndarray, categories: tuple[np.ndarray, ...], counts: np.ndarray) -> None:
    """counts[j, code, categories[j][i]] += 1 for every row i and column j."""
    n_groups, width = counts.shape[1], counts.shape[2]
    for i in range(codes.shape[0]):
        code = codes[i]
        if code < 0 or code >= n_groups:
            raise IndexError("group code out of range")
        for j in range(len(categories)):
            category = categories[j][i]
            if category < 0 or category >= width:
                raise IndexError("category out of range")
            counts[j, code, category] += 1


# --------------------------------------------------------------------------- per decision


@dataclass(frozen=True)
class DecisionValues:
    """Per-decision ledger values (seed E2/E6 step 5), aligned with the input rows."""

    rsi_env: np.ndarray
    u_dec: np.ndarray
    w_dec: np.ndarray
    u_env_dec: np.ndarray
    u_env: np.ndarray
    """atanh(RSI_env), unweighted (what the bootstrap resamples)."""
    band: np.ndarray
    """Band index of RSI_env (after hysteresis when used)."""
    band_ungated: np.ndarray
    """Band index of RSI itself (for the ungated band histogram)."""


def decision_values(rsi: np.ndarray, w: np.ndarray, g: np.ndarray, *, mode: str, eps_a: float,
                    bands: BandTable, hysteresis: Hysteresis | None = None,
                    streams: np.ndarray | None = None) -> DecisionValues:
    """U_dec, W_dec, RSI_env, U_env_dec and bands for every decision (1-D arrays of equal length).

    a = clamp(RSI) = min(1 − eps_a, max(−1 + eps_a, RSI)) (seed 2.1); U_dec = w·atanh(a), W_dec = w;
    RSI_env = clamp(g·a) (``mul``) or clamp(tanh(g·atanh(a))) (``u_scale``) (seed 4.1); U_env_dec =
    w·atanh(RSI_env). atanh as in ``rapidity``; one compiled pass over the rows, on threads.
    ``streams`` (group codes) is needed only for hysteresis, which runs per stream in row order.
    """
    if mode not in ("mul", "u_scale"):
        raise ValueError(f"gate mode must be 'mul' or 'u_scale' (got {mode!r})")
    rsi, w, g = (np.ascontiguousarray(x, dtype=np.float64) for x in (rsi, w, g))
    n = len(rsi)
    if rsi.ndim != 1 or w.shape != (n,) or g.shape != (n,):
        raise ValueError(f"rsi, w and g must be 1-D arrays of equal length (got shapes {rsi.shape}, {w.shape}, "
                         f"{g.shape})")
    rsi_env, u_dec, u_env, u_env_dec = (np.empty(n) for _ in range(4))
    band, band_ungated = np.empty(n, dtype=np.int8), np.empty(n, dtype=np.int8)
    edges = (float(bands.a_mm), float(bands.a_m), float(bands.a_p), float(bands.a_pp))
    on_chunks(lambda rows: _decision_kernel(
        rsi[rows], w[rows], g[rows], mode == "u_scale", float(eps_a), edges, rsi_env[rows], u_dec[rows], u_env[rows],
        u_env_dec[rows], band[rows], band_ungated[rows]), n, min_rows=_MIN_CHUNK_ROWS, name="certa-bakeoff-pool")
    if hysteresis is not None:
        band = hysteresis_bands(rsi_env, np.zeros(n, dtype=np.intp) if streams is None else streams, bands,
                                hysteresis)
    return DecisionValues(rsi_env=rsi_env, u_dec=u_dec, w_dec=w, u_env_dec=u_env_dec, u_env=u_env, band=band,
                          band_ungated=band_ungated)


def rapidity(rsi: np.ndarray, eps_a: float) -> np.ndarray:
    """u = atanh(clamp(x)) (seed Section 2.1), by the formula every rapidity in this module uses:

        atanh(a) = sign(a) · ½ · log1p(z),   z = 2|a| / (1 − |a|),
        log1p(z) = z if v = 1 else log(v) · z / (v − 1),   v = 1 + z

    (log1p by Goldberg 1991, "What every computer scientist should know about floating-point arithmetic",
    Theorem 4: the rounding error of v cancels between log(v) and v − 1). Taking |a| keeps v ≥ 1: with a
    signed a near −1, v = 1 + z would cancel catastrophically. Error: at most 2.9 ulp from the exact atanh,
    measured on dense grids including |a| < 1e-300 and |a| within 1e-16 of 1; the tests assert 4 ulp.
    """
    return _unit_weight_field(rsi, 1.0, "mul", eps_a, "u_dec")


def gate_rsi(rsi: np.ndarray, g: np.ndarray | float, mode: str, eps_a: float) -> np.ndarray:
    """RSI_env per decision (seed Section 4.1): ``mul`` g·a; ``u_scale`` tanh(g·atanh(a)); clamped again."""
    return _unit_weight_field(rsi, g, mode, eps_a, "rsi_env")


def _unit_weight_field(rsi: np.ndarray, g: np.ndarray | float, mode: str, eps_a: float, field: str) -> np.ndarray:
    """One ``DecisionValues`` field with w = 1, for ``rsi`` of any shape (``g`` broadcast to it)."""
    rsi = np.asarray(rsi, dtype=np.float64)
    values = decision_values(rsi.ravel(), np.ones(rsi.size), np.broadcast_to(g, rsi.shape).ravel(), mode=mode,
                             eps_a=eps_a, bands=BandTable())
    return getattr(values, field).reshape(rsi.shape)


def hysteresis_bands(x: np.ndarray, streams: np.ndarray, bands: BandTable, hysteresis: Hysteresis) -> np.ndarray:
    """Bands with hysteresis, per stream in row order (seed 3.4 / J2), without a loop over rows.

    Step t maps the previous band b to ``b`` if x_t lies in b's widened interval, else to the plain band
    of x_t; the first step of a stream maps everything to its plain band. These maps on the five bands
    compose associatively, so the band of every row is a prefix composition, computed by a
    Hillis–Steele scan in ⌈log2 n⌉ vectorised steps (stopping early once every prefix is constant).
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int8)
    order = np.argsort(streams, kind="stable")
    xs, ss = x[order], np.asarray(streams)[order]
    plain = bands.classify(xs).astype(np.int8)
    hold = bands.hold_mask(xs, hysteresis.h_up, hysteresis.h_dn)
    maps = np.where(hold, np.arange(5, dtype=np.int8)[None, :], plain[:, None]).astype(np.int8)
    first = np.ones(n, dtype=bool)
    first[1:] = ss[1:] != ss[:-1]
    maps[first] = plain[first, None]
    step = 1
    while step < n and not np.all(maps == maps[:, :1]):
        # prefix_t := maps_t ∘ prefix_{t−step}; rows before a stream start are absorbed by its constant map
        composed = np.take_along_axis(maps[step:], maps[:-step].astype(np.intp), axis=1)
        maps = np.concatenate([maps[:step], composed])
        step *= 2
    out = np.empty(n, dtype=np.int8)
    out[order] = maps[:, 0]
    return out


# --------------------------------------------------------------------------- exact sums


def fixed_point_group_sums(codes: np.ndarray, terms: np.ndarray, n_groups: int) -> tuple[int, ...]:
    """Σ round(term · 2^56) per group, exactly, as Python integers (the sums in units of 2^-56).

    ``round`` is half to even, after an exact power-of-two scaling. A compiled pass over row chunks (on
    threads) splits the scaled value of each term below 2^36 in magnitude into int64 limbs and sums them
    per group (``_fixed_sum_kernel``); ``_wide_fixed_sums`` adds the rare larger terms and rejects
    non-finite ones (ValueError). ``codes`` must lie in [0, n_groups) (IndexError otherwise).
    """
    return _group_totals(codes, (terms,), (), n_groups)[0][0]


def _group_totals(codes: np.ndarray, columns: Sequence[np.ndarray], categories: Sequence[np.ndarray],
                  n_groups: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """``fixed_point_group_sums`` of each float column and the (n_groups, 5) row counts per value 0..4 of
    each int8 column, in one pass of the compiled kernels per row chunk, on threads."""
    codes = np.ascontiguousarray(codes, dtype=np.intp)
    columns = [np.ascontiguousarray(c, dtype=np.float64) for c in columns]
    categories = [np.ascontiguousarray(c, dtype=np.int8) for c in categories]
    width = len(BAND_NAMES)

    def chunk(rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        low, mid, top = (np.zeros((len(columns), n_groups), dtype=np.int64) for _ in range(3))
        skipped = np.zeros(len(columns), dtype=np.int64)
        _fixed_sum_kernel(codes[rows], tuple(c[rows] for c in columns), low, mid, top, skipped)
        counts = np.zeros((len(categories), n_groups, width), dtype=np.int64)
        if categories:
            _count_kernel(codes[rows], tuple(c[rows] for c in categories), counts)
        return low, mid, top, skipped, counts

    parts = on_chunks(chunk, len(codes), min_rows=_MIN_CHUNK_ROWS, max_rows=_MAX_CHUNK_ROWS,
                      name="certa-bakeoff-pool")
    sums = []
    for j, column in enumerate(columns):
        totals = [0] * n_groups
        for low, mid, top, _, _ in parts:
            for group, (lo, mi, to) in enumerate(zip(low[j].tolist(), mid[j].tolist(), top[j].tolist())):
                totals[group] += lo + (mi << 31) + (to << 62)
        if any(skipped[j] for _, _, _, skipped, _ in parts):
            wide = ~(np.abs(column) < _MEDIUM)  # the rows the kernel skipped
            for group, value in enumerate(_wide_fixed_sums(codes[wide], column[wide], n_groups)):
                totals[group] += value
        sums.append(tuple(totals))
    return sums, np.sum([counts for *_, counts in parts], axis=0)


def _wide_fixed_sums(codes: np.ndarray, terms: np.ndarray, n_groups: int) -> list[int]:
    """``fixed_point_group_sums`` for any finite terms, without the int64 limbs: each scaled term is split
    into 30-bit float limbs (the top limb signed), and each limb is summed per group with ``np.bincount``
    over at most 2^21 rows at a time, where the float64 sums stay below 2^52 and are exact."""
    totals = [0] * n_groups
    for start in range(0, len(terms), _ROWS_PER_PASS):
        part_codes = codes[start:start + _ROWS_PER_PASS]
        part = terms[start:start + _ROWS_PER_PASS]
        if not np.all(np.isfinite(part)):
            raise ValueError("per-decision terms must be finite")
        with np.errstate(over="ignore"):  # checked next
            scaled = np.rint(part * _SCALE)  # exact: a power-of-two scaling, then rounding half to even
        if not np.all(np.isfinite(scaled)):
            raise ValueError("a per-decision term is too large for the fixed-point sums (|w·u| ≥ 2^968)")
        largest = int(np.max(np.abs(scaled)))
        n_limbs = max(1, -(-largest.bit_length() // _LIMB_BITS))
        rest = scaled
        for limb in range(n_limbs):
            if limb < n_limbs - 1:
                high = np.floor(np.ldexp(rest, -_LIMB_BITS))
                low = rest - np.ldexp(high, _LIMB_BITS)  # exact: the remainder mod 2^30
            else:
                high, low = rest, rest
            sums = np.bincount(part_codes, weights=low, minlength=n_groups).tolist()
            for group, value in enumerate(sums):
                totals[group] += int(value) << (limb * _LIMB_BITS)
            rest = high
    return totals


def _to_float(fixed: int) -> float:
    """A fixed-point integer (units of 2^-56) as the nearest float64 (Python's int division rounds correctly)."""
    return fixed / (1 << FIXED_POINT_BITS)


@dataclass(frozen=True)
class GroupSums:
    """Mergeable sufficient statistics per (bucket, vendor) group: the only things shards may carry.

    Fixed-point fields are exact integers in units of 2^-56 (see module docstring). ``keys[i]`` is the
    (bucket, vendor) of group i; keys are sorted and unique.
    """

    keys: tuple[tuple[str, str], ...]
    n: tuple[int, ...]
    w_fx: tuple[int, ...]
    u_fx: tuple[int, ...]
    u_env_fx: tuple[int, ...]
    g_fx: tuple[int, ...]
    g_flagged: tuple[int, ...]
    band_counts: tuple[tuple[int, ...], ...]
    band_counts_ungated: tuple[tuple[int, ...], ...]
    tokens_fx: tuple[int, ...]
    tokens_n: tuple[int, ...]
    lat_ms_fx: tuple[int, ...]
    lat_ms_n: tuple[int, ...]


def _tuple_ints(values: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(values).tolist())


def group_sums(keys: Sequence[tuple[str, str]], codes: np.ndarray, values: DecisionValues, g: np.ndarray,
               g_flagged: np.ndarray, tokens: np.ndarray | None = None,
               lat_ms: np.ndarray | None = None) -> GroupSums:
    """Per-group exact sums of one table of decisions; ``codes[i]`` indexes ``keys`` (sorted, unique).

    ``tokens`` and ``lat_ms`` may hold NaN for missing cells; they are summed (exactly) over the
    non-missing ones for mergeable means.
    """
    codes = np.ascontiguousarray(codes, dtype=np.intp)
    k = len(keys)

    def optional_sum(column: np.ndarray | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return ((0,) * k, (0,) * k) if column is None else _present_sums(codes, column, k)

    tokens_fx, tokens_n = optional_sum(tokens)
    lat_fx, lat_n = optional_sum(lat_ms)
    (w_fx, u_fx, u_env_fx, g_fx), counts = _group_totals(
        codes, (values.w_dec, values.u_dec, values.u_env_dec, g),
        (values.band, values.band_ungated, np.asarray(g_flagged, dtype=bool)), k)
    band_counts, band_counts_ungated = (tuple(tuple(row) for row in table) for table in counts[:2].tolist())
    return GroupSums(
        keys=tuple((str(b), str(v)) for b, v in keys),
        n=tuple(sum(row) for row in band_counts),  # every row has exactly one band
        w_fx=w_fx, u_fx=u_fx, u_env_fx=u_env_fx, g_fx=g_fx,
        g_flagged=_tuple_ints(counts[2][:, 1]),
        band_counts=band_counts, band_counts_ungated=band_counts_ungated,
        tokens_fx=tokens_fx, tokens_n=tokens_n, lat_ms_fx=lat_fx, lat_ms_n=lat_n,
    )


def _present_sums(codes: np.ndarray, column: np.ndarray, n_groups: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(Σ x in units of 2^-56, count) per group over the non-NaN cells of ``column`` (NaN = a missing cell)."""
    present = ~np.isnan(column)
    return (fixed_point_group_sums(codes[present], column[present], n_groups),
            _tuple_ints(np.bincount(codes[present], minlength=n_groups)))


def merge_group_sums(parts: Sequence[GroupSums]) -> GroupSums:
    """Add shards' sums group by group (exact integer addition; keys are the sorted union)."""
    if not parts:
        raise ValueError("merge_group_sums needs at least one part")
    keys = tuple(sorted({key for part in parts for key in part.keys}))
    index = {key: i for i, key in enumerate(keys)}
    scalar_fields = ("n", "w_fx", "u_fx", "u_env_fx", "g_fx", "g_flagged", "tokens_fx", "tokens_n",
                     "lat_ms_fx", "lat_ms_n")
    totals: dict[str, list[int]] = {name: [0] * len(keys) for name in scalar_fields}
    bands = [[0] * 5 for _ in keys]
    bands_ungated = [[0] * 5 for _ in keys]
    for part in parts:
        for j, key in enumerate(part.keys):
            i = index[key]
            for name in scalar_fields:
                totals[name][i] += getattr(part, name)[j]
            for b in range(5):
                bands[i][b] += part.band_counts[j][b]
                bands_ungated[i][b] += part.band_counts_ungated[j][b]
    return GroupSums(keys=keys, band_counts=tuple(map(tuple, bands)),
                     band_counts_ungated=tuple(map(tuple, bands_ungated)),
                     **{name: tuple(values) for name, values in totals.items()})


@dataclass(frozen=True)
class Pools:
    """Pooled values per group, derived from ``GroupSums`` (all arrays of length = number of groups)."""

    keys: tuple[tuple[str, str], ...]
    n: np.ndarray
    W: np.ndarray
    U: np.ndarray
    U_env: np.ndarray
    rsi_pool: np.ndarray
    rsi_pool_env: np.ndarray
    band_pool: np.ndarray
    band_pool_env: np.ndarray
    insufficient: np.ndarray
    """True where W = 0: pools are 0, bands A0, reason ``insufficient_evidence`` (seed 3.3)."""
    band_counts: np.ndarray
    band_counts_ungated: np.ndarray
    g_mean: np.ndarray
    tokens_mean: np.ndarray
    lat_ms_mean: np.ndarray


def _mean(fx: tuple[int, ...], count: tuple[int, ...]) -> np.ndarray:
    return np.array([_to_float(s) / c if c else math.nan for s, c in zip(fx, count)], dtype=np.float64)


def pools_from_sums(sums: GroupSums, *, eps_w: float, bands: BandTable) -> Pools:
    """RSI_pool = tanh(U / max(W, eps_w)), RSI_pool_env likewise; W = 0 → 0, band A0 (seed E3, 2.2)."""
    W = np.array([_to_float(v) for v in sums.w_fx], dtype=np.float64)
    U = np.array([_to_float(v) for v in sums.u_fx], dtype=np.float64)
    U_env = np.array([_to_float(v) for v in sums.u_env_fx], dtype=np.float64)
    insufficient = np.array([v == 0 for v in sums.w_fx], dtype=bool)
    # math.tanh per group (libm, as a hand check would compute it); the group count is small
    rsi_pool = np.array([0.0 if empty else math.tanh(u / max(w, eps_w))
                         for u, w, empty in zip(U.tolist(), W.tolist(), insufficient.tolist())])
    rsi_pool_env = np.array([0.0 if empty else math.tanh(u / max(w, eps_w))
                             for u, w, empty in zip(U_env.tolist(), W.tolist(), insufficient.tolist())])
    band_pool = np.where(insufficient, _A0, bands.classify(rsi_pool)).astype(np.int8)
    band_pool_env = np.where(insufficient, _A0, bands.classify(rsi_pool_env)).astype(np.int8)
    return Pools(
        keys=sums.keys, n=np.array(sums.n, dtype=np.int64), W=W, U=U, U_env=U_env, rsi_pool=rsi_pool,
        rsi_pool_env=rsi_pool_env, band_pool=band_pool, band_pool_env=band_pool_env, insufficient=insufficient,
        band_counts=np.array(sums.band_counts, dtype=np.int64).reshape(-1, 5),
        band_counts_ungated=np.array(sums.band_counts_ungated, dtype=np.int64).reshape(-1, 5),
        g_mean=_mean(sums.g_fx, sums.n), tokens_mean=_mean(sums.tokens_fx, sums.tokens_n),
        lat_ms_mean=_mean(sums.lat_ms_fx, sums.lat_ms_n),
    )


def group_means(codes: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Mean of the non-NaN ``values`` per group (NaN where a group has none): the exact sum of the values,
    each rounded once to 2^-56 (``fixed_point_group_sums``), divided by their count, as ``pools_from_sums``
    computes the tokens and lat_ms means."""
    return _mean(*_present_sums(np.ascontiguousarray(codes, dtype=np.intp), values, n_groups))


def group_medians(codes: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Median of the non-NaN ``values`` per group (NaN where a group has none): ½ (x_(⌊(m−1)/2⌋) + x_(⌊m/2⌋))
    of each group's m sorted values, found by ``np.partition`` (linear time) after a stable grouping of the
    rows by code (a radix sort of the integer codes)."""
    codes = np.asarray(codes, dtype=np.intp)
    present = ~np.isnan(values)
    codes, values = codes[present], values[present]
    grouped = values[np.argsort(codes, kind="stable")]
    counts = np.bincount(codes, minlength=n_groups)
    ends = np.cumsum(counts)
    out = np.full(n_groups, math.nan)
    for group in np.flatnonzero(counts).tolist():  # one partition per group, not per row
        m, end = int(counts[group]), int(ends[group])
        middle = np.partition(grouped[end - m:end], ((m - 1) // 2, m // 2))
        out[group] = 0.5 * (middle[(m - 1) // 2] + middle[m // 2])
    return out


# --------------------------------------------------------------------------- display and ranking

_SIX_PLACES = Decimal("0.000001")
_WIDE = Context(prec=400)


def half_even(x: float, places: Decimal = _SIX_PLACES) -> Decimal:
    """``x`` rounded half-even to 6 decimals, from its shortest round-trip decimal ``repr``.

    The seed's Brief asks for "half-even at export". Rounding the shortest decimal that identifies the
    float (``repr``) makes ties those a reader sees: 1.0000005 → 1.000000 (half to even), whereas
    ``f"{x:.6f}"`` rounds the binary value 1.00000050000000007… up to 1.000001 — and rounds other printed
    ties down, depending on the binary expansion. Negative zero prints as 0.000000.
    """
    if not math.isfinite(x):
        raise ValueError(f"cannot format a non-finite value ({x!r})")
    quantized = Decimal(repr(float(x))).quantize(places, rounding=ROUND_HALF_EVEN, context=_WIDE)
    return quantized.copy_abs() if quantized.is_zero() else quantized


@dataclass(frozen=True)
class RankEntry:
    """One vendor's place in a bucket's ranking; equal ``rank`` means a tie on every criterion."""

    vendor: str
    rank: int
    tied_with: tuple[str, ...]


def rank_vendors(vendors: Sequence[str], score: Sequence[float], band_counts: np.ndarray,
                 tokens: Sequence[float], lat_ms: Sequence[float]) -> tuple[RankEntry, ...]:
    """Rank vendors (seed E4): higher ``score`` (compared at 6 decimals, half-even — as stamped), then
    higher A++ share, then higher A+ share, then lower tokens, then lower lat_ms (missing = worst).
    Vendors equal on all of these share a rank ("1, 2, 2, 4") and are listed by vendor id.
    """
    def key(i: int) -> tuple:
        total = int(np.sum(band_counts[i]))
        share = (lambda b: Fraction(int(band_counts[i][b]), total) if total else Fraction(0))
        tok = tokens[i] if math.isfinite(tokens[i]) else math.inf
        lat = lat_ms[i] if math.isfinite(lat_ms[i]) else math.inf
        return (-half_even(score[i]), -share(0), -share(1), tok, lat)

    keys = [key(i) for i in range(len(vendors))]
    order = sorted(range(len(vendors)), key=lambda i: (keys[i], vendors[i]))
    entries: list[RankEntry] = []
    for position, i in enumerate(order):
        rank = position + 1
        if position and keys[order[position - 1]] == keys[i]:
            rank = entries[-1].rank
        tied = tuple(vendors[j] for j in order if j != i and keys[j] == keys[i])
        entries.append(RankEntry(vendor=vendors[i], rank=rank, tied_with=tied))
    return tuple(entries)
