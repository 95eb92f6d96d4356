"""RFC 6962 consistency proofs between two sizes of the ledger's Merkle tree: pure functions over bytes.

A consistency proof shows that the tree of the first ``old`` leaves is a prefix of the tree of ``new`` leaves
(``old`` ≤ ``new``): nothing signed at the old checkpoint was changed, removed or reordered by the time of the
new one. RFC 6962 §2.1.2 (RFC 9162 §2.1.4.1) defines it as PROOF(m, D[n]) = SUBPROOF(m, D[n], true) with

    SUBPROOF(m, D[m], true)  = {}
    SUBPROOF(m, D[m], false) = {MTH(D[m])}
    SUBPROOF(m, D[n], b)     = SUBPROOF(m, D[0:k], b) : MTH(D[k:n])          if m ≤ k
                             = SUBPROOF(m − k, D[k:n], false) : MTH(D[0:k])   if m > k

k the largest power of two smaller than n. Every hash in it is the hash of a range RFC 6962's recursion visits,
so it is read from the ledger's perfect subtrees (``certa.ledger.merkle.range_hash``): ``consistency_nodes`` names
the O(log n) nodes, ``consistency_proof`` folds them. ``verify_consistency`` is RFC 9162 §2.1.4.2's verification
algorithm, a different computation from the one that builds the proof (the tests check each against the other, and
both against Go's ``golang.org/x/mod/sumdb/tlog``). The proof is the same list Certificate Transparency logs and
the Go checksum database serve, so any RFC 6962 verifier checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from certa.ledger.merkle import NodeKey, node_hash, range_hash

__all__ = ["consistency_nodes", "consistency_proof", "verify_consistency"]


def _subproof(old: int, start: int, stop: int, complete: bool, node: Callable[[NodeKey], bytes]) -> list[bytes]:
    """SUBPROOF(old − start, D[start:stop], complete) of RFC 6962 §2.1.2, iteratively, in the RFC's order."""
    outer: list[bytes] = []  # the hashes appended on the way back up, innermost last
    while old != stop:
        size = stop - start
        k = 1 << ((size - 1).bit_length() - 1)
        if old <= start + k:
            outer.append(range_hash(start + k, stop, node))
            stop = start + k
        else:
            outer.append(range_hash(start, start + k, node))
            start, complete = start + k, False
    inner = [] if complete else [range_hash(start, stop, node)]
    return inner + outer[::-1]


def _checked_sizes(old: int, new: int) -> None:
    if not 1 <= old <= new:
        raise ValueError(f"no consistency proof from a tree of {old} leaves to one of {new} (needs 1 <= old <= new)")


def consistency_nodes(old: int, new: int) -> set[NodeKey]:
    """The perfect nodes ``consistency_proof(old, new, ...)`` reads (O(log new), about 2·log2(new) at most)."""
    _checked_sizes(old, new)
    wanted: set[NodeKey] = set()

    def note(key: NodeKey) -> bytes:
        wanted.add(key)
        return b""

    _subproof(old, 0, new, True, note)
    return wanted


def consistency_proof(old: int, new: int, node: Callable[[NodeKey], bytes]) -> list[bytes]:
    """PROOF(old, D[new]) of RFC 6962 §2.1.2, reading each perfect node's hash with ``node`` (asked for
    ``consistency_nodes`` only; a ``KeyError`` it raises passes through); ``ValueError`` unless 1 ≤ old ≤ new."""
    _checked_sizes(old, new)
    return _subproof(old, 0, new, True, node)


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """True if ``proof`` proves that the tree of ``old`` leaves with root ``old_root`` is a prefix of the tree of
    ``new`` leaves with root ``new_root`` (RFC 9162 §2.1.4.2); False for sizes that are no integers (``3.0``,
    ``True``), outside 1 ≤ old ≤ new, or a proof of the wrong length or hashes."""
    if type(old) is not int or type(new) is not int or not 1 <= old <= new:
        return False
    if old == new:
        return not proof and old_root == new_root
    hashes = list(proof)
    if old & (old - 1) == 0:  # the old tree is a perfect subtree: its root starts the walk
        hashes.insert(0, old_root)
    if not hashes:
        return False
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = hashes[0]
    for c in hashes[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == old_root and sr == new_root
