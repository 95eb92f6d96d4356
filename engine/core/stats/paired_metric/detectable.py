"""The minimum detectable difference of a paired binary comparison at the achieved number of items.

Connor's (1987) normal approximation to the power of McNemar's test (Connor, R. J. (1987). Sample size for
testing differences in proportions for the paired-sample design. Biometrics 43, 207–211): with ψ = p10 + p01
the probability that a pair is discordant, the test at level α detects Δ with power 1 − β when

    sqrt(n) |Δ| = z_a sqrt(ψ) + z_b sqrt(ψ − Δ²),      z_a = z_{1−α/2} (two-sided) or z_{1−α} (one-sided),
                                                       z_b = z_{1−β}.

Squaring gives a quadratic in |Δ| whose root on the right branch is the minimum detectable difference

    Δ_min = sqrt(ψ) (z_a sqrt(n) + z_b sqrt(n + z_b² − z_a²)) / (n + z_b²).

ψ defaults to the observed discordance (n10 + n01) / n; with none observed Δ_min is 0, which only says that
no discordance was seen: pass a planning value instead. A difference needs |Δ| ≤ ψ, so ``attainable`` is
False when Δ_min > ψ (no alternative with that discordance reaches the power). The approximation concerns
the asymptotic test (Tango's score test at Δ0 = 0); its accuracy at the stated power is measured by
simulation in ``tests/core/stats``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _shared
from .project_kernels import special
from .table import CountTable

__all__ = ["DetectableDifference", "minimum_detectable_difference"]

SIDES = ("two-sided", "one-sided")


@dataclass(frozen=True)
class DetectableDifference:
    """Δ_min (``difference``) at n items, discordance ψ, level ``alpha`` and ``power`` (module docstring)."""

    difference: float | np.ndarray
    discordance: float | np.ndarray
    n: int | float | np.ndarray
    alpha: float
    power: float
    sides: str
    attainable: bool | np.ndarray
    approximation: str = "Connor (1987), normal approximation to McNemar's test"


def minimum_detectable_difference(table: CountTable, *, alpha: float = 0.05, power: float = 0.8,
                                  sides: str = "two-sided",
                                  discordance: float | None = None) -> DetectableDifference:
    """Δ_min of Connor's approximation (module docstring), elementwise over the tables."""
    alpha, power, sides, discordance = _minimum_detectable_difference_iv(alpha, power, sides, discordance)
    n = np.asarray(table.n, dtype=np.float64)
    psi = (np.asarray(table.n10 + table.n01, dtype=np.float64) / n) if discordance is None \
        else np.full(n.shape, discordance)
    z_a = float(special.ndtri(1.0 - (alpha / 2.0 if sides == "two-sided" else alpha)))
    z_b = float(special.ndtri(power))
    reach = np.sqrt(np.maximum(n + z_b * z_b - z_a * z_a, 0.0))
    difference = np.sqrt(psi) * (z_a * np.sqrt(n) + z_b * reach) / (n + z_b * z_b)
    attainable = (difference <= psi) & (n + z_b * z_b >= z_a * z_a)
    return DetectableDifference(_shared.scalar_or_array(difference), _shared.scalar_or_array(psi),
                                _shared.scalar_or_array(table.n), alpha, power, sides,
                                _shared.scalar_or_array(attainable))


def _minimum_detectable_difference_iv(alpha: float, power: float, sides: str,
                                      discordance: float | None) -> tuple[float, float, str, float | None]:
    alpha = _shared.open_unit("alpha", alpha)
    power = _shared.open_unit("power", power)
    if power <= 0.5:
        raise ValueError(f"'power' must be in (0.5, 1) for Connor's approximation (got {power!r})")
    if sides not in SIDES:
        raise ValueError(f"'sides' must be one of {SIDES} (got {sides!r})")
    if discordance is not None and (isinstance(discordance, bool) or not isinstance(discordance, (int, float))
                                    or not 0.0 < float(discordance) <= 1.0):
        raise ValueError(f"'discordance' must be a number in (0, 1] or None (got {discordance!r})")
    return alpha, power, sides, None if discordance is None else float(discordance)
