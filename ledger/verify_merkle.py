"""The ``merkle_nodes`` check of ``certa.ledger.verify``, streamed: the perfect nodes of the entries' Merkle tree are
computed batch by batch from the frontier (``certa.ledger.merkle.completed_levels``, O(log n) nodes kept) and compared
with the stored rows the same leaves complete (``certa.ledger.verify_read``); what differs is kept (at most
``MAX_KEPT`` rows of each kind, the rest counted) and worded at the end exactly as a whole-table comparison
would: an edited ``level``, ``position`` or ``node_seq`` shows as a row missing and another added with the
missing one's hash, reported once naming the column.

The rows are compared in the table's key order: (level, position) for schema 3 to 5, ``node_seq`` for schema 6 and
later, whose rows carry it as a fourth value (``certa.ledger.merkle.node_seq``) and are the nodes of two or more leaves
only (a leaf is its entry's: ``certa.ledger.schema``)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from certa.ledger import merkle
from certa.ledger.merkle import NodeKey

__all__ = ["MerkleCheck", "StoredNode", "leaves_of", "frontier_root", "MAX_NODE_PROBLEMS"]

MAX_NODE_PROBLEMS = 20
MAX_KEPT = 10_000

#: A ``merkle_nodes`` row as stored: (level, position, hash) or, schema 6 and later, (level, position, hash,
#: node_seq); any cell may hold another type when the table was edited.
StoredNode = tuple[Any, ...]


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


def _row_name(row: StoredNode) -> str:
    """How a problem names a stored row: ``(level 1, position 3)``, with ``, node_seq 4`` from schema 6."""
    return f"(level {row[0]}, position {row[1]}{f', node_seq {row[3]}' if len(row) > 3 else ''})"


def _row_order(row: StoredNode) -> tuple[tuple[int, Any], ...]:
    """Sort key of a stored row by its level, position and node_seq: integers in order, then cells of any other
    type (edited)."""
    return tuple((0, part) if type(part) is int else (1, repr(part)) for part in (*row[:2], *row[3:]))


class MerkleCheck:
    """The tree of the leaves added so far: its frontier, the roots asked for at given sizes, and the stored rows
    that differ from it."""

    def __init__(self, size: int = 0, frontier: Mapping[NodeKey, bytes] | None = None,
                 root_at: int | None = None) -> None:
        self.size = size
        self.frontier = dict(frontier or {})
        self.root_at = root_at
        self.root: bytes | None = None  # MTH of the first ``root_at`` leaves, once reached
        self.missing: dict[NodeKey, str] = {}  # expected, no stored row
        self.extra: list[StoredNode] = []  # stored, no such node (or not where the tree has it)
        self.edited: list[tuple[NodeKey, Any, str]] = []  # stored hash differs
        self.counts = [0, 0, 0]
        self.schema_6_nodes = False  # rows of schema 6 and later seen

    def add(self, leaves: list[bytes], stored: list[StoredNode] | None, *, schema_6_nodes: bool) -> None:
        """Append ``leaves``; compare the nodes they complete with ``stored``, the rows of the table in key order
        (None: no table to compare; ``schema_6_nodes``: rows of schema 6 and later, no leaves among them)."""
        self.schema_6_nodes |= schema_6_nodes
        if self.root_at is not None and self.size < self.root_at <= self.size + len(leaves):
            cut = self.root_at - self.size
            made = self._append(leaves[:cut], schema_6_nodes)
            self.root = frontier_root(self.frontier, self.size)
            made += self._append(leaves[cut:], schema_6_nodes)
        else:
            made = self._append(leaves, schema_6_nodes)
        if stored is not None and stored != made:
            self._compare(made, stored)

    def _append(self, leaves: list[bytes], schema_6_nodes: bool) -> list[StoredNode]:
        """The rows of the nodes ``leaves`` complete, in key order; the frontier moved past them."""
        if not leaves:
            return []
        made: list[StoredNode] = []
        newest: dict[NodeKey, bytes] = {}
        levels = list(merkle.completed_levels(leaves, self.size, self.frontier))
        for level, first, nodes in levels:
            count = len(nodes)
            if not schema_6_nodes:
                made += zip([level] * count, range(first, first + count), map(bytes.hex, nodes))
            newest[(level, first + count - 1)] = nodes[-1]
            if count > 1:
                newest[(level, first + count - 2)] = nodes[-2]
        if schema_6_nodes:  # no leaves (a leaf is its entry's), in node_seq order
            made = [(level, position, node.hex(), number)
                    for number, level, position, node in merkle.numbered_nodes(levels, self.size)]
        self.size += len(leaves)
        self.frontier = {key: newest.get(key) or self.frontier[key] for key in merkle.frontier_nodes(self.size)}
        return made

    def _compare(self, made: list[StoredNode], stored: list[StoredNode]) -> None:
        expected = {(row[0], row[1]): row for row in made}
        found = {}
        for row in stored:
            key = (row[0], row[1])
            if key in expected and type(key[0]) is int and type(key[1]) is int and row[3:] == expected[key][3:] \
                    and all(type(part) is int for part in row[3:]):
                found[key] = row[2]
            else:
                self.note_extra(row)
        for key, row in expected.items():
            digest = row[2]
            if key not in found:
                self.counts[0] += 1
                if len(self.missing) < MAX_KEPT:
                    self.missing[key] = digest
            elif found[key] != digest:
                self.counts[2] += 1
                if len(self.edited) < MAX_KEPT:
                    self.edited.append((key, found[key], digest))

    def note_extra(self, row: StoredNode) -> None:
        """A stored row that is no node of the tree (or not where the tree has it)."""
        self.counts[1] += 1
        self.schema_6_nodes |= len(row) > 3
        if len(self.extra) < MAX_KEPT:
            self.extra.append(row)

    def problems(self, problem: Any, entries: int) -> list[Any]:
        """The differences as ``problem(where, message, column=...)``s, at most ``MAX_NODE_PROBLEMS`` of them and
        then how many more there are."""
        found = []
        missing = {digest: key for key, digest in self.missing.items()}
        moved = 0
        keys = "level, position or node_seq" if self.schema_6_nodes else "level or position"
        stored = "two or more of " if self.schema_6_nodes else ""  # the subtrees the table holds
        for row in sorted(self.extra, key=_row_order):
            moved_from = missing.pop(row[2], None)
            if moved_from is not None:
                moved += 1
                column = "level" if row[0] != moved_from[0] else "position" if row[1] != moved_from[1] else "node_seq"
                found.append(problem(_node_name(moved_from), f"merkle_nodes.{column} edited: the row {_row_name(row)} "
                                                             "holds the hash of this node, which has no row of its own",
                                     column=f"merkle_nodes.{column}"))
            else:
                found.append(problem(f"merkle node (level {row[0]}, position {row[1]})",
                                     f"merkle_nodes has a row {_row_name(row)} that is no complete subtree of "
                                     f"{stored}entries 1..{entries} (a row was added, or its {keys} edited)",
                                     column="merkle_nodes.position"))
        for key in sorted(missing.values()):
            found.append(problem(_node_name(key), f"merkle_nodes has no row (level {key[0]}, position {key[1]}) "
                                                  f"for this complete subtree (the row was deleted, or its {keys} "
                                                  "edited)", column="merkle_nodes.position"))
        for key, stored, expected in sorted(self.edited):
            found.append(problem(_node_name(key), f"merkle_nodes.hash edited: it is {stored!r}, the chain "
                                                  f"gives {expected!r}", column="merkle_nodes.hash"))
        total = sum(self.counts) - moved
        if total > MAX_NODE_PROBLEMS:
            found = found[:MAX_NODE_PROBLEMS]
            found.append(problem("merkle_nodes", f"... and {total - MAX_NODE_PROBLEMS} more merkle_nodes problems"))
        return found
