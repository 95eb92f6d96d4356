"""RFC 6962 consistency proofs (certa.ledger.merkle_consistency): the worked examples of RFC 6962 §2.1.3, the
builder and the RFC 9162 verifier against each other on every pair of sizes of seeded trees, and every tampering
refused. Go's golang.org/x/mod/sumdb/tlog checks the same proofs in test_tlog_go.py."""

from __future__ import annotations

import numpy as np
import pytest

from certa.ledger.merkle import leaf_hash, node_hash, perfect_levels, root_hash
from certa.ledger.merkle_consistency import consistency_nodes, consistency_proof, verify_consistency


def _leaves(n: int, seed: int) -> list[bytes]:
    raw = np.random.default_rng(seed).integers(0, 256, size=(n, 32), dtype=np.uint8)
    return [leaf_hash(row.tobytes()) for row in raw]


def _reader(leaves: list[bytes]):
    levels = perfect_levels(leaves)
    return lambda key: levels[key[0]][key[1]]


def test_the_rfc_6962_examples():
    # RFC 6962 §2.1.3: seven leaves d0..d6; a..f, j their leaf hashes, g h i k l interior nodes
    a, b, c, d, e, f, j = _leaves(7, seed=1)
    g, h, i = node_hash(a, b), node_hash(c, d), node_hash(e, f)
    k, l = node_hash(g, h), node_hash(i, j)  # noqa: E741 (the RFC's names)
    read = _reader([a, b, c, d, e, f, j])
    assert consistency_proof(3, 7, read) == [c, d, g, l]
    assert consistency_proof(4, 7, read) == [l]
    assert consistency_proof(6, 7, read) == [i, j, k]
    assert consistency_proof(7, 7, read) == []
    root7 = node_hash(k, l)
    assert verify_consistency(3, 7, node_hash(g, c), root7, [c, d, g, l])
    assert verify_consistency(4, 7, k, root7, [l])
    assert verify_consistency(6, 7, node_hash(k, i), root7, [i, j, k])


def test_every_pair_of_sizes_proves_and_verifies():
    leaves = _leaves(40, seed=2)
    read = _reader(leaves)
    roots = [b""] + [root_hash(leaves[:n]) for n in range(1, 41)]
    for new in range(1, 41):
        for old in range(1, new + 1):
            proof = consistency_proof(old, new, read)
            assert verify_consistency(old, new, roots[old], roots[new], proof), (old, new)
            assert len(consistency_nodes(old, new)) <= 2 * new.bit_length()


def test_the_proof_reads_only_the_nodes_it_names():
    leaves = _leaves(1000, seed=3)
    levels = perfect_levels(leaves)
    wanted = consistency_nodes(300, 1000)
    nodes = {key: levels[key[0]][key[1]] for key in wanted}
    assert consistency_proof(300, 1000, nodes.__getitem__) == consistency_proof(300, 1000, _reader(leaves))
    with pytest.raises(KeyError):
        consistency_proof(301, 1000, nodes.__getitem__)


def test_any_change_is_refused():
    leaves = _leaves(23, seed=4)
    read = _reader(leaves)
    old_root, new_root = root_hash(leaves[:11]), root_hash(leaves)
    proof = consistency_proof(11, 23, read)
    assert verify_consistency(11, 23, old_root, new_root, proof)
    other = root_hash(_leaves(11, seed=5))
    assert not verify_consistency(11, 23, other, new_root, proof)  # another old tree
    assert not verify_consistency(11, 23, old_root, other, proof)
    for index in range(len(proof)):
        changed = list(proof)
        changed[index] = bytes([changed[index][0] ^ 1]) + changed[index][1:]
        assert not verify_consistency(11, 23, old_root, new_root, changed)
    assert not verify_consistency(11, 23, old_root, new_root, proof[:-1])
    assert not verify_consistency(11, 23, old_root, new_root, [*proof, proof[0]])
    assert not verify_consistency(10, 23, old_root, new_root, proof)  # other sizes
    assert not verify_consistency(12, 23, old_root, new_root, proof)
    rewritten = [*leaves[:5], leaf_hash(b"rewritten"), *leaves[6:]]  # entry 6 changed after the old checkpoint
    assert not verify_consistency(11, 23, old_root, root_hash(rewritten), consistency_proof(11, 23, _reader(rewritten)))


def test_sizes_that_are_not_a_pair_are_refused():
    root = root_hash(_leaves(4, seed=6))
    assert verify_consistency(4, 4, root, root, [])
    assert not verify_consistency(4, 4, root, root, [root])
    for old, new in ((0, 4), (5, 4), (True, 4), (4.0, 4)):
        assert not verify_consistency(old, new, root, root, [])  # type: ignore[arg-type]
    for old, new in ((0, 4), (5, 4)):
        with pytest.raises(ValueError):
            consistency_nodes(old, new)
