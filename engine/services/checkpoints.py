"""Signed heads of a ledger: sign one (``certa checkpoint``), add a signature to one after checking it
against the ledger (``certa cosign``), and prove a run's certificate against one (``certa prove``: a bundle
anyone checks offline with ``certa.engine.services.audit.verify_bundle_file``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from certa.ledger import Ledger
from certa.ledger.bundle import build_bundle, ledger_root, ledger_root_matching
from certa.ledger.checkpoint import cosign_checkpoint, read_checkpoint_unverified, sign_checkpoint
from certa.ledger.verify_record import VERIFIED_KEYS, VerificationRecord, read_verifications, stale_record_problem
from certa.engine.services.documents import document_text, save_document

__all__ = ["SignedHead", "sign_head", "verification_line", "Cosigned", "cosign", "RunProof", "prove_run"]


@dataclass(frozen=True)
class SignedHead:
    """A checkpoint of head ``seq:entry_hash`` with Merkle root ``root_hash``; ``file`` where it was written
    (None: it is printed)."""

    seq: int
    entry_hash: str
    root_hash: str
    envelope: dict[str, Any]
    file: Path | None
    verifications: tuple[VerificationRecord, ...] = ()
    """The last full and incremental verifications recorded in the ledger (``certa.ledger.verify_record``)."""
    verified_hashes: tuple[tuple[int, str | None], ...] = ()
    """The ledger's hash of each entry a verification record names (compared with the record)."""

    def as_json(self) -> dict[str, Any]:
        """The head, the signing keys' ids, the file, the envelope itself and the recorded verifications."""
        return {"ok": True, "seq": self.seq, "entry_hash": self.entry_hash, "root_hash": self.root_hash,
                "key_ids": [sig["keyid"] for sig in self.envelope["signatures"]],
                "file": str(self.file) if self.file else None, "envelope": self.envelope,
                "verifications": [record.as_json() for record in self.verifications]}

    def text(self) -> str:
        """Which head went to which file, and how far the last verifications reached; or the envelope itself
        (``verification_text`` then goes to standard error)."""
        if not self.file:
            return document_text(self.envelope)
        return "\n".join([f"signed head {self.seq}:{self.entry_hash} -> {self.file}", self.verification_text()])

    def verification_text(self) -> str:
        """How far the last full and incremental verification reached, against this head."""
        records = {r.key: r for r in self.verifications}
        hashes = dict(self.verified_hashes)
        return "\n".join(verification_line(key, records.get(key), (self.seq, self.entry_hash), hashes.get)
                         for key in VERIFIED_KEYS)


def verification_line(key: str, record: VerificationRecord | None, head: tuple[int, str],
                      entry_hash_at: Callable[[int], str | None]) -> str:
    """One line on the last verification of a kind (``certa.ledger.verify_record`` key) of a ledger whose head is
    ``head`` (seq, entry hash). The record is the ledger's own unsigned note: it is compared with the entry it names
    (``entry_hash_at``), and the head is said not to have moved only when its hash is the one verified."""
    what = "full" if key == VERIFIED_KEYS[0] else "incremental"
    if record is None:
        return (f"last {what} verification: none recorded ('certa verify --record' records one when the ledger "
                "verifies intact)")
    wrong = stale_record_problem(record, head[0], entry_hash_at)
    if wrong is not None:
        return f"last {what} verification: the record vouches for nothing: {wrong}"
    said = f"last {what} verification (an unsigned note in the ledger): entries {record.first}..{record.seq} intact " \
           f"at {record.verified_at}"
    behind = head[0] - record.seq
    if behind > 0:
        return f"{said}; {behind} entries recorded since"
    return f"{said}; the head {head[0]}:{head[1][:12]}… is the entry it verified"


def sign_head(ledger: Ledger, private_keys: Sequence[Ed25519PrivateKey], out_file: Path | None = None) -> SignedHead:
    """Sign the ledger's current head and Merkle root with each of ``private_keys``; write the envelope to
    ``out_file`` (a new file) when given."""
    seq, digest = ledger.head()
    root = ledger_root(ledger, seq).hex()
    envelope = sign_checkpoint(private_keys, seq, digest, root)
    if out_file is not None:
        save_document(envelope, out_file)
    records = tuple(read_verifications(ledger).values())
    return SignedHead(seq=seq, entry_hash=digest, root_hash=root, envelope=envelope, file=out_file,
                      verifications=records,
                      verified_hashes=tuple((r.seq, ledger.entry_hash_at(r.seq)) for r in records))


@dataclass(frozen=True)
class Cosigned:
    """A checkpoint of head ``seq:entry_hash`` that matched the ledger, with all its ``key_ids`` now, written to
    ``file``."""

    seq: int
    entry_hash: str
    key_ids: tuple[str, ...]
    file: Path

    def as_json(self) -> dict[str, Any]:
        """The head's seq, every signer's key id and the file."""
        return {"ok": True, "seq": self.seq, "key_ids": list(self.key_ids), "file": str(self.file)}

    def text(self) -> str:
        """The head matched, how many signatures, where."""
        return (f"head {self.seq}:{self.entry_hash} matches this ledger; {len(self.key_ids)} signature(s) "
                f"-> {self.file}")


def cosign(ledger: Ledger, checkpoint: bytes, private_keys: Sequence[Ed25519PrivateKey],
           signer_keys: Sequence[Ed25519PublicKey], out_file: Path) -> Cosigned:
    """Add a signature by each of ``private_keys`` to ``checkpoint`` once the ledger holds exactly its head and
    Merkle root and every signature it carries verifies with ``signer_keys``; write it to ``out_file`` (new)."""
    claimed = read_checkpoint_unverified(checkpoint)
    ledger_root_matching(ledger, claimed)
    envelope = cosign_checkpoint(checkpoint, private_keys, signer_keys)
    save_document(envelope, out_file)
    return Cosigned(seq=claimed.seq, entry_hash=claimed.entry_hash,
                    key_ids=tuple(sig["keyid"] for sig in envelope["signatures"]), file=out_file)


@dataclass(frozen=True)
class RunProof:
    """A run's certificate bundled with its inclusion proof; ``file`` where it was written (None: printed)."""

    bundle: dict[str, Any]
    file: Path | None

    def as_json(self) -> dict[str, Any]:
        """The run, its entry, the tree size, the file, and the bundle itself when it went to no file."""
        return {"ok": True, "run_id": self.bundle["entry"]["run_id"], "entry_seq": self.bundle["entry"]["seq"],
                "tree_size": self.bundle["inclusion"]["tree_size"], "file": str(self.file) if self.file else None,
                **({} if self.file else {"bundle": self.bundle})}

    def text(self) -> str:
        """Which certificate went to which file, or the bundle itself."""
        if self.file is None:
            return document_text(self.bundle)
        return (f"certificate of run {self.bundle['entry']['run_id']} (entry {self.bundle['entry']['seq']} of "
                f"{self.bundle['inclusion']['tree_size']}) -> {self.file}")


def prove_run(ledger: Ledger, run_id: str, checkpoint: bytes, out_file: Path | None = None) -> RunProof:
    """Bundle ``run_id``'s certificate with a Merkle inclusion proof against the signed ``checkpoint``; write
    it to ``out_file`` (a new file) when given."""
    bundle = build_bundle(ledger, run_id, checkpoint)
    if out_file is not None:
        save_document(bundle, out_file)
    return RunProof(bundle=bundle, file=out_file)
