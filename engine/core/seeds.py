"""Per-stage random streams derived from the spec's root seed.

Each stage gets ``numpy.random.SeedSequence(entropy=root_seed, spawn_key=K)`` where ``K`` is the first
8 bytes of SHA-256(stage id) read as two big-endian uint32 words, and a ``PCG64`` generator on it. The
stream depends only on the root seed and the stage id, not on stage order, so adding a stage does not
change the others' draws. The certificate records the derivation so anyone can rebuild a stream.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

__all__ = ["stage_seed_record", "stage_generator"]

DERIVATION = "SeedSequence(entropy=root, spawn_key=sha256(stage_id)[:8] as 2 big-endian uint32) -> PCG64"


def _spawn_key(stage_id: str) -> tuple[int, int]:
    digest = hashlib.sha256(stage_id.encode("utf-8")).digest()
    return int.from_bytes(digest[0:4], "big"), int.from_bytes(digest[4:8], "big")


def stage_seed_record(root_seed: int, stage_id: str) -> dict[str, Any]:
    """The JSON record of a stage's seed: root entropy (as a string), spawn key, bit generator."""
    return {"entropy": str(root_seed), "spawn_key": list(_spawn_key(stage_id)), "bit_generator": "PCG64"}


def stage_generator(root_seed: int, stage_id: str) -> np.random.Generator:
    """A fresh generator for ``stage_id``: the same root seed and id always give the same stream."""
    sequence = np.random.SeedSequence(entropy=root_seed, spawn_key=_spawn_key(stage_id))
    return np.random.Generator(np.random.PCG64(sequence))
