"""A Merkle tree over the ledger's entries (RFC 6962 / RFC 9162 §2.1): pure functions over bytes.

Leaf i (0-based) is entry seq i + 1; its leaf input is the 32 raw bytes of that entry's ``entry_hash``.
With SHA-256:

    MTH({})            = SHA-256()
    MTH({d0})          = SHA-256(0x00 ‖ d0)
    MTH(D[n])          = SHA-256(0x01 ‖ MTH(D[0:k]) ‖ MTH(D[k:n])),   k the largest power of two < n

(an odd subtree is promoted, never duplicated). The 0x00 / 0x01 prefixes separate leaves from interior
nodes, so no interior node can pass for a leaf. An inclusion proof of leaf m in D[n] is RFC 6962's audit
path PATH(m, D[n]); ``verify_inclusion`` is RFC 9162 §2.1.3.2's algorithm. A signed checkpoint carries the
root of the first ``tree_size`` entries, so one certificate can be proven part of the ledger with its entry
and about log2(n) hashes, offline (``certa prove``, ``certa verify-bundle``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["leaf_hash", "entry_leaves", "node_hash", "root_hash", "tree_levels", "inclusion_path", "path_from_levels",
           "verify_inclusion"]


def leaf_hash(leaf_input: bytes) -> bytes:
    """SHA-256(0x00 ‖ leaf_input)."""
    return hashlib.sha256(b"\x00" + leaf_input).digest()


def entry_leaves(entry_hashes: Sequence[str]) -> list[bytes]:
    """The leaf hashes of ledger entries, from their hex ``entry_hash`` values in chain order."""
    sha256, fromhex = hashlib.sha256, bytes.fromhex
    return [sha256(b"\x00" + fromhex(digest)).digest() for digest in entry_hashes]


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 ‖ left ‖ right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n ≥ 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_hash(leaves: Sequence[bytes]) -> bytes:
    """MTH of the given leaf hashes (already ``leaf_hash``-ed), bottom-up in O(n) hashes.

    Pairing adjacent nodes level by level and carrying an unpaired last node up unchanged gives the
    same tree as the recursive definition (the left subtree of every split is complete).
    """
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def tree_levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree bottom-up (``root_hash``'s pairing, kept): level 0 is ``leaves``, the last
    level holds the root alone. Node j of level l is the MTH of leaves j·2^l .. min((j+1)·2^l, n) − 1."""
    levels = [list(leaves)]
    sha256 = hashlib.sha256
    while len(levels[-1]) > 1:
        level = levels[-1]
        paired = [sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        levels.append(paired)
    return levels


def path_from_levels(index: int, levels: Sequence[Sequence[bytes]]) -> list[bytes]:
    """``inclusion_path(index, levels[0])`` read off ``tree_levels``: the sibling at each level, nearest
    first, skipping a level where the node is an unpaired last node (carried up: no split there)."""
    n = len(levels[0]) if levels else 0
    if not 0 <= index < n:
        raise ValueError(f"leaf index {index} is outside a tree of {n} leaves")
    path = []
    for level in levels[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling])
        index >>= 1
    return path


def inclusion_path(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[n]) of RFC 6962 §2.1.1 for leaf hashes ``leaves``, nearest sibling first."""
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf index {index} is outside a tree of {n} leaves")
    path: list[bytes] = []
    lo, hi = 0, n
    siblings: list[tuple[int, int]] = []
    while hi - lo > 1:  # descend; record the sibling subtree at each split
        k = _split(hi - lo)
        if index < lo + k:
            siblings.append((lo + k, hi))
            hi = lo + k
        else:
            siblings.append((lo, lo + k))
            lo = lo + k
    for start, stop in reversed(siblings):
        path.append(root_hash(leaves[start:stop]))
    return path


def verify_inclusion(index: int, tree_size: int, leaf: bytes, path: Sequence[bytes], root: bytes) -> bool:
    """True if ``path`` proves leaf hash ``leaf`` is leaf ``index`` of the tree of ``tree_size`` leaves with
    root ``root`` (RFC 9162 §2.1.3.2)."""
    if not 0 <= index < tree_size:
        return False
    fn, sn, r = index, tree_size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root
