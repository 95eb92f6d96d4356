"""The shared SFC64 replicate loop (certa.engine.core.stats.kernels.sfc64.resampled_sums) draws the recorded bits.

The paired bootstrap of ``paired.ppl_ratio`` 1.1.0 and the bake-off bootstrap of ``bakeoff.compare`` 1.1.0 each had
their own copy of this loop until both callers moved onto the one in ``kernels/sfc64.py``. The digests below are the
SHA-256 of the replicates (float64 bytes) that the two copies computed (certa at commit 747aeea), on two threads:
the shared loop must reproduce them for both callers, both draws (Lemire and alias) and every weighting.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from certa.engine.core.stats.bakeoff.pairwise_bootstrap import resampled_weighted_means
from certa.engine.core.stats.bootstrap.weighted_mean import weighted_mean_replicates

PAIRED = {  # (seed, n, replicates, scheme): digest of weighted_mean_replicates
    (1, 2, 300, "uniform"): "5c1d8692dd5172c55488174da29b787f26a3d550c53d87f616776752f429bfdc",
    (2, 17, 257, "uniform"): "bf5d17d393a7cafb0f1fb68a96360dd8a1a703c6b544da14dee67c87d8d4dcf6",
    (3, 1001, 1000, "uniform"): "34479277b2553a26e5cf36466f90cc98eeb634be5d355f7711d736d8dc5bc91d",
    (4, 100_000, 40, "uniform"): "b1fcda4b48cde568f97dacf78555491ee87da0bab7975fc983769fca3cc8650d",
    (1, 2, 300, "token_weighted"): "35c9cdabe8021ebc3040a641070908b6421bf84d24e18abdfb0e88613c425264",
    (2, 17, 257, "token_weighted"): "f8e1b19a0a7cbbeb2c0b19f870aab501d31ea4393f27ed42a4cb95c0b0973c63",
    (3, 1001, 1000, "token_weighted"): "ee31f0dca75aac22e32b9e9c46edaff9343315fabd957ff250d364190b8e9b1e",
    (4, 100_000, 40, "token_weighted"): "1eb0f1737c847cf1eb46a43b9a17a723e4d0179dfec984a08492a0b850646294",
}

BAKEOFF = {  # (seed, n, replicates, weights, samples): digest of resampled_weighted_means
    (5, 1, 50, "none", 1): "121e8f24fa20df9a64d14788fac099306b9b399905e256ca0ac1a1a18fba1aad",
    (6, 3, 333, "none", 4): "ee8103f6cc3717c456e503c064c6a2bf09821ee6759b331323c3e6d6afa91dc2",
    (7, 30, 2000, "equal", 3): "57623c67d88eb781d537b6b8b72c8f648af61de29bd5db5a966bb667d04006ca",
    (8, 1001, 200, "varying", 5): "3f070fcd4f5b26a8486733e428a6c3806d46a1f3242969f4674c4e276f1b2fb5",
    (9, 100_000, 20, "varying", 2): "c63737dfc9256590e70e9de9bd9fa7d1eac2e9e296663f7da9ce9620414251d7",
}


def _digest(replicates: np.ndarray) -> str:
    assert replicates.dtype == np.float64
    return hashlib.sha256(replicates.tobytes()).hexdigest()


@pytest.mark.parametrize(("seed", "n", "replicates", "scheme"), list(PAIRED))
def test_paired_bootstrap_replicates_keep_the_recorded_bits(seed, n, replicates, scheme):
    g = np.random.default_rng(seed)
    d = g.normal(0.01, 0.1, n) + g.exponential(0.02, n)
    t = g.integers(64, 2048, n).astype(float)
    theta = weighted_mean_replicates(d, t, rng=np.random.default_rng(seed), replicates=replicates, scheme=scheme,
                                     threads=2)
    assert _digest(theta) == PAIRED[seed, n, replicates, scheme]


@pytest.mark.parametrize(("seed", "n", "replicates", "weights", "samples"), list(BAKEOFF))
def test_bakeoff_bootstrap_replicates_keep_the_recorded_bits(seed, n, replicates, weights, samples):
    g = np.random.default_rng(seed)
    u = np.arctanh(g.uniform(-0.9, 0.9, (samples, n)))
    w = {"none": None, "equal": np.full((samples, n), 2.5)}.get(weights)
    if weights == "varying":
        w = g.uniform(0.1, 3.0, (samples, n))
    means = resampled_weighted_means(u, w, replicates, np.random.default_rng(seed), threads=2)
    assert _digest(means) == BAKEOFF[seed, n, replicates, weights, samples]
