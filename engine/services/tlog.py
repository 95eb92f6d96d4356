"""A ledger as a transparency log: its head signed as a C2SP tlog checkpoint (``certa checkpoint --format tlog``),
a witness's signature line added to one after checking it against the ledger (``certa cosign``), and an RFC 6962
consistency proof between two checkpoints of the ledger (``certa prove --consistency OLD NEW``), either format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.engine.foundation.atomic_files import write_atomically
from certa.engine.foundation.errors import LedgerError, LedgerIntegrityError
from certa.engine.services.documents import document_text, save_document
from certa.ledger import Ledger
from certa.ledger.bundle import ledger_root
from certa.ledger.checkpoint import read_checkpoint_unverified
from certa.ledger.merkle import NodeKey, entry_leaves, perfect_levels
from certa.ledger.merkle_consistency import consistency_nodes, consistency_proof, verify_consistency
from certa.ledger.signed_note import add_note_signatures, is_signed_note, split_note
from certa.ledger.tlog_checkpoint import (TreeHead, open_tlog_checkpoint, read_tlog_checkpoint_unverified,
                                          sign_tlog_checkpoint)

__all__ = ["SignedNote", "sign_head_note", "cosign_note", "ConsistencyProof", "prove_consistency", "claimed_tree"]

#: (key name, private key): who signs a note line.
NoteSigner = tuple[str, Ed25519PrivateKey]


def _write_note(note: str, out_file: Path) -> None:
    write_atomically(out_file, note.encode("utf-8"), overwrite=False, what="the checkpoint")


def _matching(ledger: Ledger, size: int, root_hash: str) -> None:
    """Check that this ledger's entries 1..``size`` have Merkle root ``root_hash`` (O(log n) rows)."""
    count = ledger.head()[0]
    if size > count:
        raise LedgerError(f"the checkpoint covers {size} entries but this ledger has {count} (another ledger, or "
                          "entries were removed: run 'certa verify')")
    if ledger_root(ledger, size).hex() != root_hash:
        raise LedgerIntegrityError(f"this ledger's entries 1..{size} do not have the checkpoint's Merkle root "
                                   "(another ledger, or the chain was rewritten: run 'certa verify')")


@dataclass(frozen=True)
class SignedNote:
    """A tlog checkpoint (``note``, a signed note) of a ledger's first ``tree_size`` entries, written to ``file``
    (None: printed); ``signers`` the verifier keys of its signature lines, in order."""

    origin: str
    tree_size: int
    root_hash: str
    note: str
    signers: tuple[str, ...]
    file: Path | None

    def as_json(self) -> dict[str, Any]:
        """The head, the signature lines' key names and hashes, the file and the note itself."""
        return {"ok": True, "format": "tlog", "origin": self.origin, "tree_size": self.tree_size,
                "root_hash": self.root_hash, "signers": list(self.signers),
                "file": str(self.file) if self.file else None, "note": self.note}

    def text(self) -> str:
        """Which head went to which file, or the note itself."""
        if self.file is None:
            return self.note.rstrip("\n")
        return (f"tlog checkpoint of {self.origin}: {self.tree_size} entries, root {self.root_hash[:12]}…, "
                f"{len(self.signers)} signature line(s) -> {self.file}")


def _signed(head: TreeHead, note: str, out_file: Path | None) -> SignedNote:
    if out_file is not None:
        _write_note(note, out_file)
    lines = split_note(note)[1]
    return SignedNote(origin=head.origin, tree_size=head.tree_size, root_hash=head.root_hash, note=note,
                      signers=tuple(f"{line.name}+{line.key_hash.hex()}" for line in lines), file=out_file)


def sign_head_note(ledger: Ledger, signers: Sequence[NoteSigner], origin: str,
                   out_file: Path | None = None) -> SignedNote:
    """Sign the ledger's current size and Merkle root as a tlog checkpoint of log ``origin``, a line by each
    (key name, key) of ``signers``; write it to ``out_file`` (a new file) when given."""
    size = ledger.head()[0]
    root = ledger_root(ledger, size).hex()
    note = sign_tlog_checkpoint(origin, size, root, signers)
    return _signed(TreeHead(origin=origin, tree_size=size, root_hash=root), note, out_file)


def cosign_note(ledger: Ledger, note: bytes, signers: Sequence[NoteSigner], signer_keys: Sequence[Ed25519PublicKey],
                out_file: Path) -> SignedNote:
    """Add a signature line by each (key name, key) of ``signers`` to the tlog checkpoint ``note`` once every key
    of ``signer_keys`` has a line on it that verifies and this ledger has its size and root; write it to
    ``out_file`` (new). Lines of keys not given are kept as they are (a verifier ignores what it cannot check)."""
    head = open_tlog_checkpoint(note, signer_keys)
    _matching(ledger, head.tree_size, head.root_hash)
    return _signed(head, add_note_signatures(note, signers), out_file)


def claimed_tree(checkpoint: bytes) -> tuple[int, str]:
    """(tree size, root hash hex) a checkpoint of either format claims, its signatures NOT checked: a tlog signed
    note, or certa's DSSE checkpoint (``certa.ledger.checkpoint``)."""
    if is_signed_note(checkpoint):
        head = read_tlog_checkpoint_unverified(checkpoint)
        return head.tree_size, head.root_hash
    claimed = read_checkpoint_unverified(checkpoint)
    return claimed.seq, claimed.root_hash


@dataclass(frozen=True)
class ConsistencyProof:
    """An RFC 6962 consistency proof from the tree of ``old`` entries to that of ``new``; ``file`` where it was
    written (None: printed)."""

    document: dict[str, Any]
    file: Path | None

    def as_json(self) -> dict[str, Any]:
        """The sizes, roots and proof, and the file."""
        return {"ok": True, **self.document, "file": str(self.file) if self.file else None}

    def text(self) -> str:
        """Which proof went to which file, or the proof document itself."""
        if self.file is None:
            return document_text(self.document)
        old, new = self.document["old"]["tree_size"], self.document["new"]["tree_size"]
        return (f"consistency proof: entries 1..{old} are the first {old} of entries 1..{new} "
                f"({len(self.document['proof'])} hashes) -> {self.file}")


def _node_reader(ledger: Ledger, old: int, new: int) -> Callable[[NodeKey], bytes]:
    """How to read the perfect nodes of the proof: from ``merkle_nodes`` (O(log n) rows), or on a ledger without
    it from every entry hash of 1..``new``."""
    if ledger.has_merkle_nodes:
        return ledger.merkle_nodes(consistency_nodes(old, new)).__getitem__
    levels = perfect_levels(entry_leaves(ledger.entry_hashes(new)))
    return lambda key: levels[key[0]][key[1]]


def prove_consistency(ledger: Ledger, old_checkpoint: bytes, new_checkpoint: bytes,
                      out_file: Path | None = None) -> ConsistencyProof:
    """The RFC 6962 consistency proof between two checkpoints of this ledger (either format; their signatures are
    not checked here: whoever relies on the proof checks them), after checking that the ledger has both heads'
    roots; the proof is verified (``verify_consistency``) before it is given out. Written to ``out_file`` (a new
    file) when given.

    The document: ``{"certa_consistency_proof": 1, "old": {"tree_size", "root_hash"}, "new": {...},
    "proof": [hex, ...]}``, the hashes in RFC 6962's order."""
    (old, old_root), (new, new_root) = claimed_tree(old_checkpoint), claimed_tree(new_checkpoint)
    if not 1 <= old <= new:
        raise LedgerError(f"the old checkpoint covers {old} entries and the new one {new}: a consistency proof needs "
                          "1 <= old <= new (give the older checkpoint first)")
    _matching(ledger, old, old_root)
    _matching(ledger, new, new_root)
    try:
        proof = consistency_proof(old, new, _node_reader(ledger, old, new))
    except KeyError as missing:
        raise LedgerIntegrityError(f"merkle_nodes has no node {missing.args[0]} although entries 1..{new} are "
                                   "recorded (it was edited: run 'certa verify')") from None
    if not verify_consistency(old, new, bytes.fromhex(old_root), bytes.fromhex(new_root), proof):
        raise LedgerIntegrityError("the consistency proof read from merkle_nodes does not lead to the checkpoints' "
                                   "roots (merkle_nodes was edited: run 'certa verify')")
    document = {"certa_consistency_proof": 1, "old": {"tree_size": old, "root_hash": old_root},
                "new": {"tree_size": new, "root_hash": new_root}, "proof": [node.hex() for node in proof]}
    if out_file is not None:
        save_document(document, out_file)
    return ConsistencyProof(document=document, file=out_file)
