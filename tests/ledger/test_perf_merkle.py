"""``merkle.tree_levels`` / ``path_from_levels``, and the perfect-subtree nodes the ledger stores
(``perfect_nodes``, ``path_and_root_from_nodes``), give RFC 6962's root and audit paths (``root_hash``,
``inclusion_path``) for every leaf of every tree size up to 70, and spot checks of larger ones."""

from __future__ import annotations

import hashlib

import pytest

from certa.ledger.merkle import (completed_nodes, entry_leaves, frontier_nodes, inclusion_path, leaf_hash,
                           path_and_root_from_nodes, path_from_levels, path_nodes, perfect_levels, perfect_nodes, root_hash,
                           tree_levels, verify_inclusion)


def leaves(n: int) -> list[bytes]:
    return [leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(n)]


@pytest.mark.parametrize("n", range(1, 71))
def test_levels_give_the_rfc6962_root_and_every_audit_path(n: int) -> None:
    tree = leaves(n)
    levels = tree_levels(tree)
    assert levels[-1] == [root_hash(tree)]
    for index in range(n):
        path = path_from_levels(index, levels)
        assert path == inclusion_path(index, tree)
        assert verify_inclusion(index, n, tree[index], path, root_hash(tree))


@pytest.mark.parametrize("n", [1023, 1024, 1025, 3000])
def test_larger_trees_spot_checks(n: int) -> None:
    tree = leaves(n)
    levels = tree_levels(tree)
    for index in (0, 1, n // 2, n - 2, n - 1):
        assert path_from_levels(index, levels) == inclusion_path(index, tree)


def test_entry_leaves_are_leaf_hashes() -> None:
    digests = [hashlib.sha256(bytes([i])).hexdigest() for i in range(5)]
    assert entry_leaves(digests) == [leaf_hash(bytes.fromhex(d)) for d in digests]


def test_index_outside_the_tree_is_refused() -> None:
    with pytest.raises(ValueError):
        path_from_levels(3, tree_levels(leaves(3)))


def _from_nodes(index: int, n: int, nodes: dict) -> tuple[list[bytes], bytes]:
    """Path and root read from only the nodes ``path_nodes`` names (as ``prove`` reads them)."""
    return path_and_root_from_nodes(index, n, {key: nodes[key] for key in path_nodes(index, n)})


@pytest.mark.parametrize("n", range(1, 71))
def test_stored_nodes_give_the_rfc6962_root_and_every_audit_path(n: int) -> None:
    tree = leaves(n)
    nodes = perfect_nodes(tree)
    assert len(nodes) == 2 * n - n.bit_count()  # every complete perfect subtree, once
    assert nodes == {(level, position): digest for level, row in enumerate(perfect_levels(tree))
                     for position, digest in enumerate(row)}
    root = root_hash(tree)
    for index in range(n):
        path, found_root = _from_nodes(index, n, nodes)
        assert found_root == root and path == inclusion_path(index, tree)


@pytest.mark.parametrize("n", [1023, 1024, 1025, 3000, 65_537])
def test_stored_nodes_larger_trees_spot_checks(n: int) -> None:
    tree = leaves(n)
    nodes = perfect_nodes(tree)
    levels = tree_levels(tree)
    for index in (0, 1, n // 3, n // 2, n - 2, n - 1):
        path, root = _from_nodes(index, n, nodes)
        assert root == levels[-1][0] and path == path_from_levels(index, levels)
        assert len(path_nodes(index, n)) <= 2 * n.bit_length()


def test_nodes_appended_batch_by_batch_are_the_nodes_of_the_whole_tree() -> None:
    """As ``Ledger._append`` writes them: each batch reads only the frontier left by the ones before."""
    tree = leaves(300)
    written: dict = {}
    start = 0
    for size in (1, 2, 13, 1, 64, 7, 100, 112):
        batch = tree[start:start + size]
        made = perfect_nodes(batch, start, {key: written[key] for key in frontier_nodes(start)})
        assert set(made) == {key for index in range(start, start + size) for key in completed_nodes(index)}
        assert not set(made) & set(written)  # a node is written once, never changed
        written |= made
        start += size
    assert written == perfect_nodes(tree)


def test_a_missing_node_is_named() -> None:
    nodes = perfect_nodes(leaves(8))
    del nodes[(2, 1)]
    with pytest.raises(KeyError, match=r"\(2, 1\)"):
        path_and_root_from_nodes(0, 8, nodes)
