"""The ledger's Merkle tree (certa.ledger.merkle) against the RFC 6962 reference vectors (Certificate
Transparency's test data), and inclusion proofs for every leaf of every tree size up to 40."""

from __future__ import annotations

import hashlib

import pytest

from certa.ledger.merkle import inclusion_path, leaf_hash, node_hash, root_hash, verify_inclusion

# RFC 6962 reference inputs and tree heads for sizes 0..8 (CT's merkle tree test data)
CT_INPUTS = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = [  # (leaf index, tree size, audit path)
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
]
LEAVES = [leaf_hash(bytes.fromhex(x)) for x in CT_INPUTS]


def _recursive_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1's recursive MTH, written literally (the reference for the bottom-up version)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return node_hash(_recursive_root(leaves[:k]), _recursive_root(leaves[k:]))


def test_roots_match_the_rfc_6962_reference_heads():
    for size, expected in enumerate(CT_ROOTS):
        assert root_hash(LEAVES[:size]).hex() == expected, size


def test_inclusion_paths_match_the_reference_proofs():
    for index, size, expected in CT_INCLUSION:
        path = inclusion_path(index, LEAVES[:size])
        assert [node.hex() for node in path] == expected
        assert verify_inclusion(index, size, LEAVES[index], path, bytes.fromhex(CT_ROOTS[size]))


def test_every_leaf_of_every_tree_up_to_40_proves_and_nothing_else_does():
    leaves = [leaf_hash(i.to_bytes(2, "big")) for i in range(40)]
    for size in range(1, 41):
        root = root_hash(leaves[:size])
        assert root == _recursive_root(leaves[:size])
        for index in range(size):
            path = inclusion_path(index, leaves[:size])
            assert len(path) <= (size - 1).bit_length()
            assert verify_inclusion(index, size, leaves[index], path, root)
            assert not verify_inclusion(index, size, leaves[(index + 1) % 40], path, root)  # another leaf
            if size > 1:
                assert not verify_inclusion((index + 1) % size, size, leaves[index], path, root)  # another place
                assert not verify_inclusion(index, size, leaves[index], path[:-1], root)  # a shortened path
                assert not verify_inclusion(index, size, leaves[index], [*path, path[-1]], root)  # a longer one
                forged = [bytes(32), *path[1:]]
                assert not verify_inclusion(index, size, leaves[index], forged, root)


def test_a_leaf_cannot_pose_as_an_interior_node():
    """The 0x00/0x01 prefixes: the hash of two children is not the leaf hash of their concatenation."""
    left, right = LEAVES[1], LEAVES[2]
    assert node_hash(left, right) != leaf_hash(left + right)


def test_out_of_range_indices_are_refused():
    with pytest.raises(ValueError, match="outside a tree of 3 leaves"):
        inclusion_path(3, LEAVES[:3])
    assert not verify_inclusion(3, 3, LEAVES[0], [], root_hash(LEAVES[:3]))
    assert not verify_inclusion(-1, 3, LEAVES[0], [], root_hash(LEAVES[:3]))


def test_node_seq_numbers_the_nodes_of_two_or_more_leaves_in_completion_order():
    """``node_seq`` (schema 6's key) against counting: the nodes each leaf completes bottom-up, leaves in turn, are
    1, 2, 3, ...; ``node_seq_range`` gives those leaves start..end − 1 complete; ``numbered_nodes`` numbers the
    nodes of any batch of leaves so, each with its hash."""
    from certa.ledger.merkle import completed_levels, completed_nodes, node_seq, node_seq_range, numbered_nodes, perfect_nodes

    order = [key for index in range(300) for key in completed_nodes(index) if key[0]]
    assert [node_seq(*key) for key in order] == list(range(1, len(order) + 1))
    assert node_seq(1, 0) == 1 and node_seq(2, 0) == 3 and node_seq(1, 2) == 4  # leaves 2; 4 (1, 1 then 2, 0); 6
    leaves = [hashlib.sha256(bytes([i])).digest() for i in range(64)]
    every = perfect_nodes(leaves)
    for start in range(0, 40, 3):
        for end in range(start, 64, 7):
            after, through = node_seq_range(start, end)
            made = numbered_nodes(completed_levels(leaves[start:end], start, every), start)
            assert [row[0] for row in made] == list(range(after + 1, through + 1))
            assert all(row[0] == node_seq(row[1], row[2]) and every[row[1:3]] == row[3] for row in made)
