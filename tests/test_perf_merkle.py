"""``merkle.tree_levels`` / ``path_from_levels`` give RFC 6962's root and audit paths (``root_hash``,
``inclusion_path``) for every leaf of every tree size up to 70, and spot checks of larger ones."""

from __future__ import annotations

import hashlib

import pytest

from ledger.merkle import entry_leaves, inclusion_path, leaf_hash, path_from_levels, root_hash, tree_levels, verify_inclusion


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
