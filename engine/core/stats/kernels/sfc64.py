"""Independent SFC64 streams for the compiled bootstrap kernels.

A kernel that resamples several blocks (or samples) in parallel gives each its own stream: child ``j`` of
the caller's generator's ``SeedSequence`` (``seed_seq.spawn(count)``), seeded into numpy's ``SFC64``. The
kernel receives only the raw state words and steps SFC64 itself (Doty-Humphrey's update, as numpy's
``sfc64_next64``), so its draws equal ``Generator(SFC64(child))``'s, whatever the number of threads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["spawned_sfc64_states"]


def spawned_sfc64_states(rng: np.random.Generator, count: int) -> np.ndarray:
    """(count, 4) uint64: SFC64's initial (a, b, c, counter) on each of ``count`` children spawned from the
    seed sequence of ``rng``'s bit generator."""
    states = np.empty((count, 4), dtype=np.uint64)
    for j, child in enumerate(rng.bit_generator.seed_seq.spawn(count)):
        states[j] = np.random.SFC64(child).state["state"]["state"]
    return states
