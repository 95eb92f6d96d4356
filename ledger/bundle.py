"""Certificate bundles: one certificate with what proves it was recorded in a signed ledger, checkable
offline — no database, no certa ledger access, only the bundle and the signer's public key.

A bundle (JSON, ``certa_bundle: 2``; format 1, written by certa 0.9.0 and earlier, has no ``reviews``) holds:

* ``certificate``: the certificate exactly as recorded (its ledger entry's payload);
* ``entry``: that entry's other fields (seq, run_id, kind, recorded_at, payload_sha256, prev_hash);
* ``inclusion``: the RFC 6962 audit path of the entry's leaf in the Merkle tree of entries 1..tree_size;
* ``checkpoint``: the signed checkpoint (DSSE envelope) whose root that tree must have;
* ``reviews`` (format 2): each ``review`` entry of the run at or before the checkpoint's head, in chain order, as
  ``{"entry", "payload", "inclusion"}``: its fields, its payload (a signed review carries its DSSE envelope and
  its signers' public keys, ``certa.engine.services.reviews``) and its own audit path to the same root.

``check_bundle`` recomputes: the checkpoint signature; the certificate's own checks (schema,
``content_sha256``: passed in by the engine); payload_sha256 = SHA-256(JCS(certificate)); the entry hash
from its fields (``certa.ledger.chain``); the leaf hash; and the path up to the signed root (RFC 6962, section
2.1.1). Each review entry goes through the same recomputation, and must be a ``review`` entry of the
certificate's run; the entries proven so are returned for the engine to check the reviews themselves (their
signatures, and that each signs this certificate). Any edit to the certificate, a review, an entry or a path,
or a checkpoint from another ledger or key, fails one of these. What a bundle cannot show is a review left
out of it: only the ledger lists every review of a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certa.engine.foundation.canonical import sha256_hex
from certa.engine.foundation.errors import BundleError, LedgerError, LedgerIntegrityError
from certa.engine.foundation.json_read import check_document_depth
from certa.engine.foundation.schema_validator import Draft202012Validator
from certa.schemas import load_schema

from certa.ledger.chain import encode_payload, entry_hash
from certa.ledger.checkpoint import Checkpoint, open_checkpoint, read_checkpoint_unverified
from certa.ledger.merkle import (entry_leaves, leaf_hash, path_and_root_from_nodes, path_from_levels, path_nodes, root_hash,
                     tree_levels, verify_inclusion)
from certa.ledger.store import EntryRow, Ledger

__all__ = ["BUNDLE_FORMAT", "BUNDLE_FORMATS", "BundleReport", "build_bundle", "check_bundle", "check_bundle_shape",
           "entry_proof_problem", "ledger_leaves_matching", "ledger_root", "ledger_root_matching"]

BUNDLE_FORMAT = 2
"""The format ``build_bundle`` writes (2: with the run's reviews)."""
BUNDLE_FORMATS = (1, 2)
"""The formats ``check_bundle`` reads: 1 (no reviews) verifies as it always did."""
_ENTRY_FIELDS = ("seq", "run_id", "kind", "recorded_at", "payload_sha256", "prev_hash")


def _levels_matching(ledger: Ledger, claimed: Checkpoint) -> list[list[bytes]]:
    """The Merkle tree levels (``merkle.tree_levels``) of entries 1..claimed.seq, after checking that this
    ledger has that head and root; errors as ``ledger_leaves_matching``. Reads and hashes every entry: the
    way for a ledger without ``merkle_nodes`` (schema 1 and 2, read-only until migrated)."""
    hashes = ledger.entry_hashes(claimed.seq)
    if len(hashes) < claimed.seq:
        raise LedgerError(f"the checkpoint's head is entry {claimed.seq} but this ledger has {len(hashes)} entries "
                          "(another ledger, or entries were removed: run 'certa verify --checkpoint')")
    levels = tree_levels(entry_leaves(hashes))
    if claimed.seq and (hashes[-1] != claimed.entry_hash or levels[-1][0].hex() != claimed.root_hash):
        raise LedgerIntegrityError(f"this ledger's entries 1..{claimed.seq} do not match the checkpoint (another "
                                   "ledger, or the chain was rewritten: run 'certa verify --checkpoint')")
    return levels


def _paths_matching(ledger: Ledger, claimed: Checkpoint, indices: Sequence[int]) -> list[list[bytes]]:
    """The audit path of each leaf in ``indices`` in the tree of entries 1..claimed.seq, after checking that this
    ledger has the checkpoint's head entry and root (also with no ``indices``); errors as
    ``ledger_leaves_matching``.

    From ``merkle_nodes`` where the ledger has it: the head's entry hash and at most about 2·log2(seq) nodes
    per leaf (``merkle.path_nodes``), read in two statements each; else from every entry, hashed once
    (``_levels_matching``)."""
    if not ledger.has_merkle_nodes:
        levels = _levels_matching(ledger, claimed)
        return [path_from_levels(index, levels) for index in indices]
    seq = claimed.seq
    if not seq:
        return []
    head_hash = ledger.entry_hash_at(seq)
    if head_hash is None:
        raise LedgerError(f"the checkpoint's head is entry {seq} but this ledger has {ledger.entry_count()} entries "
                          "(another ledger, or entries were removed: run 'certa verify --checkpoint')")
    found = [_stored_path_and_root(ledger, index, seq) for index in (indices or [seq - 1])]
    if head_hash != claimed.entry_hash or any(root.hex() != claimed.root_hash for _, root in found):
        raise LedgerIntegrityError(f"this ledger's entries 1..{seq} do not match the checkpoint (another ledger, the "
                                   "chain was rewritten, or merkle_nodes was edited: run 'certa verify --checkpoint')")
    return [path for path, _ in found] if indices else []


def _stored_path_and_root(ledger: Ledger, leaf: int, seq: int) -> tuple[list[bytes], bytes]:
    """(PATH(leaf, entries 1..seq), MTH(entries 1..seq)) from ``merkle_nodes``: at most about 2·log2(seq) rows."""
    try:
        return path_and_root_from_nodes(leaf, seq, ledger.merkle_nodes(path_nodes(leaf, seq)))
    except KeyError as missing:
        level, position = missing.args[0]
        if level == 0 and not ledger.merkle_leaves_stored:  # a leaf read from its entry
            raise LedgerIntegrityError(f"the ledger has no entry {position + 1} although its head is entry {seq} "
                                       "(entries were removed: run 'certa verify')") from None
        raise LedgerIntegrityError(f"merkle_nodes has no row (level {level}, position {position}) although entries "
                                   f"1..{seq} are recorded (it was edited: run 'certa verify')") from None


def entry_proof_problem(ledger: Ledger, entry: EntryRow, checkpoint: Checkpoint) -> str | None:
    """Why ``entry`` is not proven to be entry ``entry.seq`` of the entries 1..``checkpoint.seq`` a signed checkpoint
    covers, or None when it is: its payload gives its ``payload_sha256``, its fields give its entry hash
    (``certa.ledger.chain``), and that hash's leaf with the audit path read from ``merkle_nodes`` recomputes the
    signed root (RFC 6962 inclusion; the stored path is untrusted, collision resistance does the rest). What an
    incremental verification reads about an entry before its checkpoint is read from entries proven so."""
    if not (type(entry.seq) is int and 1 <= entry.seq <= checkpoint.seq):
        return f"entry {entry.seq!r} is not within the checkpoint's entries 1..{checkpoint.seq}"
    if not isinstance(entry.payload, str) or sha256_hex(entry.payload.encode("utf-8")) != entry.payload_sha256:
        return f"entry {entry.seq}: its payload does not give its payload_sha256 (edited)"
    recomputed = entry_hash(seq=entry.seq, run_id=entry.run_id, kind=entry.kind, recorded_at=entry.recorded_at,
                            payload_sha256=entry.payload_sha256, prev_hash=entry.prev_hash)
    if recomputed != entry.entry_hash:
        return f"entry {entry.seq}: its fields do not give its recorded entry hash (edited)"
    try:
        path, _ = _stored_path_and_root(ledger, entry.seq - 1, checkpoint.seq)
    except LedgerIntegrityError as error:
        return f"entry {entry.seq}: no audit path: {error}"
    if not verify_inclusion(entry.seq - 1, checkpoint.seq, leaf_hash(bytes.fromhex(recomputed)), path,
                            bytes.fromhex(checkpoint.root_hash)):
        return (f"entry {entry.seq}: its hash and the stored audit path do not give the checkpoint's signed root "
                "(the entry, or the entries before it, were rewritten)")
    return None


def ledger_root(ledger: Ledger, seq: int) -> bytes:
    """MTH(entries 1..seq) as this ledger stores them, for signing a checkpoint of head ``seq``: from
    ``merkle_nodes`` (O(log n) rows) where the ledger has it, else from every entry hash. ``seq`` must not
    exceed the ledger's entry count (the caller read it from the head)."""
    if seq and ledger.has_merkle_nodes:
        return _stored_path_and_root(ledger, seq - 1, seq)[1]
    return root_hash(entry_leaves(ledger.entry_hashes(seq)))


def ledger_leaves_matching(ledger: Ledger, claimed: Checkpoint) -> list[bytes]:
    """The Merkle leaves of entries 1..claimed.seq, after checking that this ledger has that head and root
    (``ledger_root_matching``).

    Raises ``LedgerError`` if the ledger is shorter (another ledger, or a truncation) and
    ``LedgerIntegrityError`` if its entries do not give the claimed head or root.
    """
    if not ledger.has_merkle_nodes:
        return _levels_matching(ledger, claimed)[0]
    ledger_root_matching(ledger, claimed)
    return entry_leaves(ledger.entry_hashes(claimed.seq))


def ledger_root_matching(ledger: Ledger, claimed: Checkpoint) -> None:
    """Check that this ledger has the checkpoint's head entry and Merkle root, reading O(log n) rows (the
    root from ``merkle_nodes``; from every entry on a ledger without it). Errors as ``ledger_leaves_matching``."""
    _paths_matching(ledger, claimed, ())


def build_bundle(ledger: Ledger, run_id: str, envelope_text: str | bytes) -> dict[str, Any]:
    """The bundle of ``run_id``'s certificate and reviews against the checkpoint ``envelope_text``.

    The checkpoint must describe this ledger (``ledger_leaves_matching``) and the certificate must have
    been recorded at or before its head; so are the reviews the bundle carries (those recorded after the head
    are left out: a newer checkpoint proves them). The root and the audit paths come from ``merkle_nodes``
    (O(log n) rows each; ``merkle.path_and_root_from_nodes``), or on a ledger without it from the whole tree
    hashed once (``merkle.tree_levels``); the root is checked against the checkpoint, and each path against its
    entry and that root.
    """
    claimed = read_checkpoint_unverified(envelope_text)
    full = ledger.resolve_run_id(run_id)
    recorded = list(ledger.entries(run_id=full, kinds=["certificate"]))
    entry = recorded[-1] if recorded else None
    proven = [entry] if entry is not None and entry.seq <= claimed.seq else []
    reviews = [review for review in ledger.entries(run_id=full, kinds=["review"]) if review.seq <= claimed.seq]
    paths = _paths_matching(ledger, claimed, [e.seq - 1 for e in proven + reviews] if proven else [])
    if entry is None:
        raise LedgerError(f"run {full} has no certificate (status: {ledger.run(full).status})")
    if not proven:
        raise LedgerError(f"run {full}'s certificate is entry {entry.seq}, after the checkpoint's head "
                          f"{claimed.seq}: sign a newer checkpoint ('certa checkpoint') and prove against it")
    return {
        "certa_bundle": BUNDLE_FORMAT,
        "certificate": entry.data(),
        **_proven_entry(entry, paths[0], claimed),
        "checkpoint": json.loads(envelope_text),
        "reviews": [{**_proven_entry(review, path, claimed), "payload": review.data()}
                    for review, path in zip(reviews, paths[1:], strict=True)],
    }


def _proven_entry(entry: EntryRow, path: list[bytes], claimed: Checkpoint) -> dict[str, Any]:
    """``{"entry", "inclusion"}`` of an entry at or before the checkpoint's head, once ``path`` (read from the
    ledger, so untrusted) leads from its leaf to the checkpoint's root."""
    index = entry.seq - 1
    if not verify_inclusion(index, claimed.seq, leaf_hash(bytes.fromhex(entry.entry_hash)), path,
                            bytes.fromhex(claimed.root_hash)):
        raise LedgerIntegrityError(f"the audit path of entry {entry.seq} read from merkle_nodes does not lead to the "
                                   "checkpoint's root (merkle_nodes was edited: run 'certa verify')")
    return {"entry": {name: getattr(entry, name) for name in _ENTRY_FIELDS},
            "inclusion": {"leaf_index": index, "tree_size": claimed.seq, "path": [node.hex() for node in path]}}


@dataclass(frozen=True)
class BundleReport:
    """Outcome of ``check_bundle``: ``verified`` when ``problems`` is empty. ``reviews``: the review entries the
    bundle carries that are proven included in the signed ledger as reviews of this run, in chain order, their
    payload as recorded (canonical JSON); ``format`` is the bundle's (1 carries no reviews)."""

    run_id: str
    content_sha256: str
    seq: int
    checkpoint: Checkpoint
    problems: tuple[str, ...]
    format: int = BUNDLE_FORMAT
    reviews: tuple[EntryRow, ...] = ()

    @property
    def verified(self) -> bool:
        return not self.problems


_SHA256 = re.compile("[0-9a-f]{64}")
_RUN_ID = re.compile("[0-9a-f]{32}")
_INTEGERS = (("certa_bundle",), ("entry", "seq"), ("inclusion", "leaf_index"), ("inclusion", "tree_size"))
"""The bundle's integer members: JSON Schema's ``integer`` also admits ``14.0``, which certa never writes."""


def _proven_parts(bundle: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, part) of the certificate's part (the bundle itself) and each review's: what carries an
    ``entry`` and an ``inclusion``."""
    return [("", bundle), *((f"reviews/{i}/", review) for i, review in enumerate(bundle.get("reviews", [])))]


def check_bundle_shape(bundle: Any) -> None:
    """Raise ``BundleError`` (naming where) unless ``bundle`` is shaped as a certa bundle: ``bundle.schema.json``,
    integers that are JSON integers and digests that are lower-case hex. Nothing is verified."""
    wrong = _shape_problem(bundle)
    if wrong:
        raise BundleError(f"not a certa bundle (format {' or '.join(map(str, BUNDLE_FORMATS))}): {wrong}")


def _shape_problem(bundle: Any) -> str | None:
    """Where and how ``bundle`` is not a certa bundle (``bundle.schema.json``, then exact integers), or None."""
    if type(bundle) is not dict:
        return f"(top): a JSON {type(bundle).__name__}, not an object"
    try:
        check_document_depth(bundle, "the bundle")
    except ValueError as error:
        return str(error)
    errors = sorted(Draft202012Validator(load_schema("bundle.schema.json")).iter_errors(bundle),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        return f"{'/'.join(map(str, errors[0].absolute_path)) or '(top)'}: {errors[0].message}"
    for where, part in _proven_parts(bundle):
        for path in _INTEGERS[1:] if where else _INTEGERS:
            value: Any = part
            for name in path:
                value = value[name]
            if type(value) is not int:
                return f"{where}{'/'.join(path)}: {value!r} is not an integer"
        digests = [(f"{where}entry/run_id", part["entry"]["run_id"], _RUN_ID),
                   *((f"{where}entry/{name}", part["entry"][name], _SHA256) for name in ("payload_sha256", "prev_hash")),
                   *((f"{where}inclusion/path/{i}", node, _SHA256) for i, node in enumerate(part["inclusion"]["path"]))]
        for at, value, pattern in digests:
            if not pattern.fullmatch(value):  # the schema's pattern admits a final newline ($)
                return f"{at}: {value[:80]!r} is not {pattern.pattern}"
    return None


def _entry_problems(payload: Any, part: Mapping[str, Any], checkpoint: Checkpoint, *, kind: str, run_id: str,
                    named: str) -> tuple[list[str], EntryRow | None]:
    """(problems, the entry rebuilt) of one proven part of a bundle: its ``payload`` must give the entry's
    payload_sha256, the entry must be a ``kind`` entry of ``run_id``, and its fields' hash with the audit path
    must recompute the checkpoint's signed root. ``named`` names the payload in the messages ("the
    certificate"); the entry is None when it is not proven."""
    fields = {name: part["entry"][name] for name in _ENTRY_FIELDS}
    index, size = part["inclusion"]["leaf_index"], part["inclusion"]["tree_size"]
    problems = []
    try:
        text, payload_sha = encode_payload(payload)
    except ValueError as error:  # e.g. an integer beyond 2^53, which RFC 8785 cannot encode
        text, payload_sha = "", f"(not canonical JSON: {error})"
    if payload_sha != fields["payload_sha256"]:
        problems.append(f"{named} is not the one recorded in the entry (its canonical SHA-256 differs)")
    if fields["kind"] != kind or fields["run_id"] != run_id:
        problems.append(f"the entry is a {fields['kind']!r} entry of run {fields['run_id']}, not "
                        f"{'the certificate' if kind == 'certificate' else 'a ' + kind} of run {run_id}")
    if size != checkpoint.seq or index != fields["seq"] - 1:
        problems.append(f"the proof is for leaf {index} of {size} entries, not entry {fields['seq']} under the "
                        f"checkpoint's {checkpoint.seq}")
    recomputed = entry_hash(**fields)
    path = [bytes.fromhex(node) for node in part["inclusion"]["path"]]
    if not verify_inclusion(fields["seq"] - 1, checkpoint.seq, leaf_hash(bytes.fromhex(recomputed)), path,
                            bytes.fromhex(checkpoint.root_hash)):
        problems.append("the inclusion proof does not lead to the signed Merkle root: this entry is not part of "
                        "the signed ledger")
    return problems, None if problems else EntryRow(**fields, payload=text, entry_hash=recomputed)


def check_bundle(bundle: Mapping[str, Any], public_keys: Sequence[Ed25519PublicKey], *,
                 check_certificate: Callable[[Mapping[str, Any]], list[str]]) -> BundleReport:
    """Verify a bundle offline (see module docstring). A checkpoint that is not signed by every one of
    ``public_keys`` raises ``SignatureVerificationError``; everything else found wrong is listed in ``problems``; a
    ``bundle`` of another shape (``bundle.schema.json``, integers that are JSON integers) raises ``BundleError``.
    A review entry that is not proven (each reason is a problem naming its entry) is not in ``reviews``."""
    check_bundle_shape(bundle)
    certificate = bundle["certificate"]
    issued = certificate.get("issued")
    run_id = str(issued.get("run_id", "")) if isinstance(issued, Mapping) else ""
    content_sha = str(certificate.get("content_sha256", ""))
    checkpoint = open_checkpoint(json.dumps(bundle["checkpoint"]), public_keys)
    problems = [f"certificate: {message}" for message in check_certificate(certificate)]
    problems += _entry_problems(certificate, bundle, checkpoint, kind="certificate", run_id=run_id,
                                named="the certificate")[0]
    reviews = []
    for review in bundle.get("reviews", []):
        wrong_review, entry = _entry_problems(review["payload"], review, checkpoint, kind="review", run_id=run_id,
                                              named="the review")
        problems += [f"review entry {review['entry']['seq']}: {message}" for message in wrong_review]
        reviews += [entry] if entry is not None else []
    return BundleReport(run_id=run_id, content_sha256=content_sha, seq=int(bundle["entry"]["seq"]),
                        checkpoint=checkpoint, problems=tuple(problems), format=bundle["certa_bundle"],
                        reviews=tuple(reviews))
