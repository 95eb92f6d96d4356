"""Adjusted p-values for a family of m hypotheses (pure functions, along the last axis; leading axes are
independent families). With p(1) ≤ … ≤ p(m) sorted:

``bonferroni``: p̃(i) = min(1, m p(i)). Rejecting every p̃ ≤ α controls the familywise error rate (the chance of
rejecting any true hypothesis) at α under any dependence (Bonferroni's inequality; Dunn, O. J. (1961). Multiple
comparisons among means. JASA 56, 52–64).

``holm`` (Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scand. J. Statist. 6,
65–70): p̃(i) = max_{j ≤ i} min(1, (m − j + 1) p(j)). Rejecting every p̃ ≤ α controls the familywise error
rate at α under any dependence, and rejects everything Bonferroni rejects.

``benjamini_hochberg`` (Benjamini, Y. & Hochberg, Y. (1995). Controlling the false discovery rate. JRSS-B
57, 289–300): p̃(i) = min_{j ≥ i} min(1, m p(j) / j). Rejecting every p̃ ≤ α controls the false discovery
rate at m0 α / m ≤ α for independent (or positively regression dependent) p-values.

Ties keep their input order (a stable sort), which does not change the adjusted values. Adjusted p-values in
the sense of Wright, S. P. (1992). Adjusted p-values for simultaneous inference. Biometrics 48, 1005–1013.
"""

from __future__ import annotations

import numpy as np

__all__ = ["benjamini_hochberg_adjust", "bonferroni_adjust", "holm_adjust"]


def bonferroni_adjust(p_values: np.ndarray) -> np.ndarray:
    """Bonferroni adjusted p-values along the last axis: min(1, m p) (module docstring)."""
    p, _ = _sorted_iv(p_values)
    return np.minimum(1.0, np.asarray(p_values, dtype=np.float64) * p.shape[-1])


def holm_adjust(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values along the last axis (module docstring)."""
    p, order = _sorted_iv(p_values)
    m = p.shape[-1]
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p), axis=-1)
    return _unsorted(adjusted, order)


def benjamini_hochberg_adjust(p_values: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values along the last axis (module docstring)."""
    p, order = _sorted_iv(p_values)
    m = p.shape[-1]
    scaled = np.minimum(1.0, p * (m / np.arange(1, m + 1)))  # m/k ≥ 1 exactly, so each scaled value ≥ its p
    adjusted = np.minimum.accumulate(scaled[..., ::-1], axis=-1)[..., ::-1]
    return _unsorted(adjusted, order)


def _sorted_iv(p_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim == 0 or p.shape[-1] == 0:
        raise ValueError(f"'p_values' must have at least one p-value along the last axis (got shape {p.shape})")
    bad = ~((p >= 0.0) & (p <= 1.0))
    if bad.any():
        raise ValueError(f"'p_values' must lie in [0, 1] (got {p[bad].flat[0].item()!r})")
    order = np.argsort(p, axis=-1, kind="stable")
    return np.take_along_axis(p, order, axis=-1), order


def _unsorted(sorted_values: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(sorted_values)
    np.put_along_axis(out, order, sorted_values, axis=-1)
    return out
