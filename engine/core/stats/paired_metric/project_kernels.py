"""The one place this package reaches into certa's existing kernels (``certa.engine.core.stats``).

What is reused rather than rewritten, with its import path fixed here only:

* the compiled paired bootstrap of ``certa.engine.core.stats.bootstrap.weighted_mean`` (SFC64 block streams spawned from the caller's
  generator, Lemire's bounded integers, BCa with an O(n) jackknife; Efron & Tibshirani 1993, ch. 14). With
  every weight t_i = 1 its weighted mean Σ t_i d_i / Σ t_i is the plain mean of the differences;
* the confidence sequences of Waudby-Smith & Ramdas (2023) in ``certa.engine.core.stats.confseq.betting`` (hedged
  betting, Theorem 3) and ``certa.engine.core.stats.confseq.eb`` (predictable plug-in empirical Bernstein, Theorem 2);
* the lazy loader of ``certa.engine.core.stats.kernels.lazy_scipy``: ``special`` (``scipy.special``) imports on first use, so
  importing this package (as the stage registry does for every command) does not load scipy.
"""

from __future__ import annotations

import numpy as np

from certa.engine.core.stats.bootstrap.weighted_mean import BootstrapCI, weighted_mean_bootstrap_ci
from certa.engine.core.stats.confseq.betting import betting_cs
from certa.engine.core.stats.confseq.eb import eb_cs
from certa.engine.core.stats.kernels.lazy_scipy import special

__all__ = ["BootstrapCI", "CONFIDENCE_SEQUENCES", "bca_bootstrap_of_mean", "confidence_sequence_at_end", "special"]

CONFIDENCE_SEQUENCES = ("betting", "empirical_bernstein")


def bca_bootstrap_of_mean(d: np.ndarray, *, rng: np.random.Generator, replicates: int,
                          confidence_level: float) -> BootstrapCI:
    """The BCa bootstrap interval of mean(d) from the project's compiled replicate kernel (unit weights)."""
    return weighted_mean_bootstrap_ci(d, np.ones(d.size), rng=rng, replicates=replicates,
                                      confidence_level=confidence_level, method="bca", scheme="uniform")


def confidence_sequence_at_end(d: np.ndarray, *, alpha: float, low: float, high: float, method: str,
                               grid_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the running-intersection confidence sequence for the mean of d ∈ [low, high] after
    the last item (last axis = item order; leading axes are independent streams)."""
    if method == "betting":
        sequence = betting_cs(d, alpha, low, high, grid_size=grid_size)
    else:
        sequence = eb_cs(d, alpha, low, high)
    return sequence.lower[..., -1], sequence.upper[..., -1]
