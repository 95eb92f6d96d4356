"""What the modules of this package share: the argument checks of their ``_..._iv`` validation steps, and the
form of an elementwise result (a Python scalar for one table, an array for many).

Each check returns the normalised value or raises ``ValueError`` naming the field, the expectation and the value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

ALTERNATIVES = ("two-sided", "greater", "less")
"""``greater``: H1 says the subject is better than the null value (Δ > Δ0); ``less``: worse (Δ < Δ0)."""


def open_unit(name: str, value: float) -> float:
    """``value`` as a float in (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ValueError(f"'{name}' must be a number in (0, 1) (got {value!r})")
    return float(value)


def alternative(value: str) -> str:
    """``value`` if it names one of ``ALTERNATIVES``."""
    if value not in ALTERNATIVES:
        raise ValueError(f"'alternative' must be one of {ALTERNATIVES} (got {value!r})")
    return value


def margin(value: float, *, allow_zero: bool) -> float:
    """A difference margin δ in [0, 1) (``allow_zero``) or (0, 1)."""
    number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not (number and (value >= 0.0 if allow_zero else value > 0.0) and value < 1.0):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"'margin' must be a number in {interval} (got {value!r})")
    return float(value)


def scalar_or_array(x: np.ndarray | float) -> Any:
    """A 0-d result as the Python scalar of its type (float, int or bool), anything else as an array."""
    return np.asarray(x).item() if np.ndim(x) == 0 else np.asarray(x)
