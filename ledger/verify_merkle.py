"""The ``merkle_nodes`` check of ``ledger.verify``, streamed: the perfect nodes of the entries' Merkle tree are
computed batch by batch from the frontier (``ledger.merkle.completed_levels``, O(log n) nodes kept) and compared
with the stored rows the same leaves complete (``ledger.verify_read``); what differs is kept (at most
``MAX_KEPT`` rows of each kind, the rest counted) and worded at the end exactly as a whole-table comparison
would: an edited ``level`` or ``position`` shows as a row missing and another added with the missing one's
hash, reported once naming the column."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ledger import merkle
from ledger.merkle import NodeKey

__all__ = ["MerkleCheck", "leaves_of", "frontier_root", "MAX_NODE_PROBLEMS"]

MAX_NODE_PROBLEMS = 20
MAX_KEPT = 10_000


def _digest_bytes(digest: Any) -> bytes:
    try:
        return bytes.fromhex(digest)
    except (ValueError, TypeError):
        return hashlib.sha256(repr(digest).encode("utf-8")).digest()


def leaves_of(hashes: Sequence[Any]) -> list[bytes]:
    """``merkle.entry_leaves`` of recorded entry hashes; one that is no hex digest (an edited cell, reported at its
    entry) becomes the leaf of its text's SHA-256, so that it matches no stored node."""
    try:
        return merkle.entry_leaves(hashes)
    except (ValueError, TypeError):
        return [merkle.leaf_hash(_digest_bytes(digest)) for digest in hashes]


def frontier_root(frontier: Mapping[NodeKey, bytes], size: int) -> bytes:
    """MTH(D[size]) from the frontier nodes of ``size`` leaves (``merkle.frontier_nodes``): RFC 6962's fold,
    the smallest (rightmost) node first."""
    keys = merkle.frontier_nodes(size)
    if not keys:
        return hashlib.sha256(b"").digest()
    root = frontier[keys[-1]]
    for key in reversed(keys[:-1]):
        root = merkle.node_hash(frontier[key], root)
    return root


def _node_name(key: tuple[int, int]) -> str:
    level, position = key
    first = position << level
    return f"merkle node (level {level}, position {position}: entries {first + 1}..{first + (1 << level)})"


def _node_order(key: tuple[Any, Any]) -> tuple[tuple[int, Any], ...]:
    """Sort key of a stored node's (level, position): integers in order, then cells of any other type (edited)."""
    return tuple((0, part) if type(part) is int else (1, repr(part)) for part in key)


class MerkleCheck:
    """The tree of the leaves added so far: its frontier, the roots asked for at given sizes, and the stored rows
    that differ from it."""

    def __init__(self, size: int = 0, frontier: Mapping[NodeKey, bytes] | None = None,
                 root_at: int | None = None) -> None:
        self.size = size
        self.frontier = dict(frontier or {})
        self.root_at, self.root = root_at, None  # MTH of the first ``root_at`` leaves, once reached
        self.missing: dict[NodeKey, str] = {}  # expected, no stored row
        self.extra: list[tuple[Any, Any, Any]] = []  # stored, no such node
        self.edited: list[tuple[NodeKey, Any, str]] = []  # stored hash differs
        self.counts = [0, 0, 0]

    def add(self, leaves: list[bytes], stored: list[tuple[Any, Any, Any]] | None) -> None:
        """Append ``leaves``; compare the nodes they complete with ``stored`` (None: no table to compare)."""
        if self.root_at is not None and self.size < self.root_at <= self.size + len(leaves):
            cut = self.root_at - self.size
            made = self._append(leaves[:cut])
            self.root = frontier_root(self.frontier, self.size)
            made += self._append(leaves[cut:])
        else:
            made = self._append(leaves)
        if stored is not None and stored != made:
            self._compare(made, stored)

    def _append(self, leaves: list[bytes]) -> list[tuple[int, int, str]]:
        """The nodes ``leaves`` complete, in (level, position) order; the frontier moved past them."""
        if not leaves:
            return []
        made: list[tuple[int, int, str]] = []
        newest: dict[NodeKey, bytes] = {}
        for level, first, nodes in merkle.completed_levels(leaves, self.size, self.frontier):
            made += zip([level] * len(nodes), range(first, first + len(nodes)), map(bytes.hex, nodes))
            newest[(level, first + len(nodes) - 1)] = nodes[-1]
            if len(nodes) > 1:
                newest[(level, first + len(nodes) - 2)] = nodes[-2]
        self.size += len(leaves)
        self.frontier = {key: newest.get(key) or self.frontier[key] for key in merkle.frontier_nodes(self.size)}
        return made

    def _compare(self, made: list[tuple[int, int, str]], stored: list[tuple[Any, Any, Any]]) -> None:
        expected = {(level, position): digest for level, position, digest in made}
        found = {}
        for level, position, digest in stored:
            key = (level, position)
            if key in expected and type(level) is int and type(position) is int:
                found[key] = digest
            else:
                self.note_extra(level, position, digest)
        for key, digest in expected.items():
            if key not in found:
                self.counts[0] += 1
                if len(self.missing) < MAX_KEPT:
                    self.missing[key] = digest
            elif found[key] != digest:
                self.counts[2] += 1
                if len(self.edited) < MAX_KEPT:
                    self.edited.append((key, found[key], digest))

    def note_extra(self, level: Any, position: Any, digest: Any) -> None:
        """A stored row that is no node of the tree (or not where the tree has it)."""
        self.counts[1] += 1
        if len(self.extra) < MAX_KEPT:
            self.extra.append((level, position, digest))

    def problems(self, problem: Any, entries: int) -> list[Any]:
        """The differences as ``problem(where, message, column=...)``s, at most ``MAX_NODE_PROBLEMS`` of them and
        then how many more there are."""
        found = []
        missing = {digest: key for key, digest in self.missing.items()}
        moved = 0
        for level, position, digest in sorted(self.extra, key=lambda row: _node_order(row[:2])):
            moved_from = missing.pop(digest, None)
            if moved_from is not None:
                moved += 1
                column = "level" if level != moved_from[0] else "position"
                found.append(problem(_node_name(moved_from), f"merkle_nodes.{column} edited: the row (level {level}, "
                                                             f"position {position}) holds the hash of this node, "
                                                             "which has no row of its own",
                                     column=f"merkle_nodes.{column}"))
            else:
                found.append(problem(f"merkle node (level {level}, position {position})",
                                     f"merkle_nodes has a row (level {level}, position {position}) that is no "
                                     f"complete subtree of entries 1..{entries} (a row was added, or its level or "
                                     "position edited)", column="merkle_nodes.position"))
        for key in sorted(missing.values()):
            found.append(problem(_node_name(key), f"merkle_nodes has no row (level {key[0]}, position {key[1]}) "
                                                  "for this complete subtree (the row was deleted, or its level or "
                                                  "position edited)", column="merkle_nodes.position"))
        for key, stored, expected in sorted(self.edited):
            found.append(problem(_node_name(key), f"merkle_nodes.hash edited: it is {stored!r}, the chain "
                                                  f"gives {expected!r}", column="merkle_nodes.hash"))
        total = sum(self.counts) - moved
        if total > MAX_NODE_PROBLEMS:
            found = found[:MAX_NODE_PROBLEMS]
            found.append(problem("merkle_nodes", f"... and {total - MAX_NODE_PROBLEMS} more merkle_nodes problems"))
        return found
