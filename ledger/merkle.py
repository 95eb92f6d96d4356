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

The ledger also keeps the hash of every *perfect* subtree, node (level, position) = MTH of the 2^level leaves
from position·2^level, once all of them exist (``merkle_nodes``, schema 3): an append-only log never changes
one. ``completed_nodes`` says which nodes a new leaf completes; any audit path and root of a tree of n leaves
are hashes of at most about 2·log2(n) such nodes (``path_nodes``, ``path_and_root_from_nodes``), so
``certa prove`` reads O(log n) rows instead of n.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter

__all__ = ["leaf_hash", "entry_leaves", "node_hash", "root_hash", "tree_levels", "inclusion_path", "path_from_levels",
           "verify_inclusion", "NodeKey", "frontier_nodes", "node_seq", "node_seq_range", "numbered_nodes",
           "completed_nodes", "perfect_nodes", "completed_levels", "perfect_levels", "path_nodes",
           "path_and_root_from_nodes", "range_hash"]

#: (level, position) of a perfect subtree: the 2^level leaves from position·2^level.
NodeKey = tuple[int, int]


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
    root ``root`` (RFC 9162 §2.1.3.2); False too for an index or size that is no integer (``15.0``, ``True``)."""
    if type(index) is not int or type(tree_size) is not int or not 0 <= index < tree_size:
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


# ------------------------------------------------------------------------------------ perfect subtrees


def frontier_nodes(size: int) -> list[NodeKey]:
    """The perfect nodes a tree of ``size`` leaves splits into, largest first (one per set bit of ``size``):
    MTH(D[size]) is their RFC 6962 fold, and they are the only earlier nodes a next leaf can complete."""
    return [(level, (size >> level) - 1) for level in reversed(range(size.bit_length())) if size >> level & 1]


def node_seq(level: int, position: int) -> int:
    """The number of node (``level`` ≥ 1, ``position``) among the nodes of two or more leaves in the order a growing
    tree completes them (1, 2, 3, ...; those a leaf completes bottom-up): the first e leaves complete
    e − popcount(e) such nodes (one per carry of counting to e in binary), and the node's last leaf, leaf
    e − 1 with e = (position + 1)·2^level, completes it as the ``level``-th of its own, so it is
    (e − 1) − popcount(e − 1) + level. The ``merkle_nodes`` key of schema 6 (``certa.ledger.schema``)."""
    last = ((position + 1) << level) - 1
    return last - last.bit_count() + level


def node_seq_range(start: int, end: int) -> tuple[int, int]:
    """(after, through): the nodes of two or more leaves that leaves ``start`` .. ``end`` − 1 complete are those
    with ``after < node_seq <= through`` (``node_seq``), in order."""
    return start - start.bit_count(), end - end.bit_count()


def numbered_nodes(levels: Iterable[tuple[int, int, list[bytes]]],
                   start: int) -> list[tuple[int, int, int, bytes]]:
    """(node_seq, level, position, hash) of the nodes of two or more leaves among ``levels``, the output of
    ``completed_levels`` for leaves from ``start``, in ``node_seq`` order: by last leaf, then level (a stable sort of
    the levels, which come bottom-up), numbered on from the start − popcount(start) nodes the first ``start`` leaves
    complete."""
    made: list[tuple[int, int, int, bytes]] = []
    for level, first, nodes in levels:
        if level:
            count = len(nodes)
            made += zip(range((first + 1) << level, (first + count + 1) << level, 1 << level), [level] * count,
                        range(first, first + count), nodes)
    made.sort(key=itemgetter(0))
    after = start - start.bit_count()
    return [(after + number, level, position, node) for number, (_, level, position, node) in enumerate(made, 1)]


def completed_nodes(index: int) -> list[NodeKey]:
    """The nodes leaf ``index`` completes, bottom-up: (0, index), then (l + 1, (index + 1) / 2^(l+1) − 1) while
    2^(l+1) divides index + 1. Node (l + 1, p) has children (l, 2p) and (l, 2p + 1)."""
    keys = [(0, index)]
    level, count = 0, index + 1
    while count % 2 == 0:
        level, count = level + 1, count // 2
        keys.append((level, count - 1))
    return keys


def perfect_nodes(leaves: Iterable[bytes], start: int = 0,
                  frontier: Mapping[NodeKey, bytes] | None = None) -> dict[NodeKey, bytes]:
    """Every node completed by appending ``leaves`` (leaf hashes) as leaves ``start``, ``start`` + 1, ...;
    ``frontier`` holds ``frontier_nodes(start)`` (the left children from before ``start``)."""
    made: dict[NodeKey, bytes] = {}
    for level, first, nodes in completed_levels(leaves, start, frontier):
        made.update(zip(zip(itertools.repeat(level), range(first, first + len(nodes))), nodes))
    return made


def completed_levels(leaves: Iterable[bytes], start: int = 0,
                     frontier: Mapping[NodeKey, bytes] | None = None) -> Iterator[tuple[int, int, list[bytes]]]:
    """``perfect_nodes`` level by level, bottom-up: (level l, position of its first new node, the new nodes' hashes).

    The new nodes of level l are positions ``start >> l`` onwards; when the first is a right child, its left
    sibling is the frontier node of that level (a missing one raises ``KeyError`` with its (level, position)).
    Pairing each level's list is about 3 times faster than walking up from every leaf."""
    known = frontier or {}
    sha256 = hashlib.sha256
    nodes, first, level = list(leaves), start, 0
    while nodes:
        yield level, first, nodes
        if first % 2:
            nodes, first = [known[(level, first - 1)], *nodes], first - 1
        nodes = [sha256(b"\x01" + nodes[i] + nodes[i + 1]).digest() for i in range(0, len(nodes) - 1, 2)]
        first, level = first // 2, level + 1


def perfect_levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """The same nodes as ``perfect_nodes(leaves)``, level by level: element p of level l is node (l, p). Level
    l + 1 pairs level l's nodes and drops an unpaired last one (it is no complete subtree); about 3 times
    faster than ``perfect_nodes`` for a whole ledger (``verify``)."""
    levels = [list(leaves)]
    sha256 = hashlib.sha256
    while len(levels[-1]) > 1:
        level = levels[-1]
        levels.append([sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)])
    return levels


def range_hash(start: int, stop: int, node: Callable[[NodeKey], bytes]) -> bytes:
    """MTH(D[start:stop]) for a range whose left end is aligned to the largest power of two ≤ its size (every
    range RFC 6962's recursion visits is): a perfect node, or the fold of its split."""
    size = stop - start
    if size & (size - 1) == 0:
        level = size.bit_length() - 1
        return node((level, start >> level))
    k = _split(size)
    return node_hash(range_hash(start, start + k, node), range_hash(start + k, stop, node))


def _path_and_root(index: int, size: int, node: Callable[[NodeKey], bytes]) -> tuple[list[bytes], bytes]:
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is outside a tree of {size} leaves")
    siblings: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:  # RFC 6962 §2.1.1's descent, as ``inclusion_path``
        k = _split(hi - lo)
        if index < lo + k:
            siblings.append(range_hash(lo + k, hi, node))
            hi = lo + k
        else:
            siblings.append(range_hash(lo, lo + k, node))
            lo = lo + k
    return siblings[::-1], range_hash(0, size, node)


def path_nodes(index: int, size: int) -> set[NodeKey]:
    """The perfect nodes ``path_and_root_from_nodes(index, size, ...)`` reads (at most about 2·log2(size))."""
    wanted: set[NodeKey] = set()

    def note(key: NodeKey) -> bytes:
        wanted.add(key)
        return b""

    _path_and_root(index, size, note)
    return wanted


def path_and_root_from_nodes(index: int, size: int, nodes: Mapping[NodeKey, bytes]) -> tuple[list[bytes], bytes]:
    """(PATH(index, D[size]), MTH(D[size])) from perfect node hashes ``nodes`` (at least ``path_nodes``): each
    sibling is a perfect node or a right-edge range folded from perfect nodes by RFC 6962's split. A missing
    node raises ``KeyError`` with its (level, position)."""
    return _path_and_root(index, size, nodes.__getitem__)
