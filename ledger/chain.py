"""The hash chain: pure functions, no database.

Entry ``i`` stores ``payload`` (RFC 8785 canonical JSON), ``payload_sha256`` = SHA-256(payload) and

    entry_hash_i = SHA-256( JCS({seq, run_id, kind, recorded_at, payload_sha256, prev_hash}) ),
    prev_hash_i  = entry_hash_{i-1},   prev_hash_1 = 64 zeros.

Editing any field of any entry changes its hash and breaks the link to the next entry; deleting or
reordering entries breaks the ``seq`` sequence or a link. Truncating the tail is detected against a head
(``seq:entry_hash``) kept outside the database (``certa head``, ``certa verify --expect-head``), or signed
(``certa.ledger.checkpoint``: ``certa checkpoint``, ``certa verify --checkpoint``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from certa.engine.foundation.canonical import canonical_bytes, canonical_sha256, sha256_hex

__all__ = ["GENESIS", "NewEntry", "EncodedEntries", "encode_payload", "entry_hash", "header_template", "payload_digests",
           "chain_hashes"]

GENESIS = "0" * 64


@dataclass(frozen=True)
class NewEntry:
    """An entry to append: its kind and JSON-able payload (run id and time are the transaction's)."""

    kind: str
    payload: Any


@dataclass(frozen=True)
class EncodedEntries:
    """Consecutive entries of one kind whose payloads are already RFC 8785 canonical JSON text (e.g. from
    ``certa.engine.foundation.canonical.canonical_records``)."""

    kind: str
    payloads: Sequence[str]


def encode_payload(payload: Any) -> tuple[str, str]:
    """(canonical JSON text, its SHA-256) of an entry payload."""
    raw = canonical_bytes(payload)
    return raw.decode("utf-8"), sha256_hex(raw)


def entry_hash(*, seq: int, run_id: str, kind: str, recorded_at: str, payload_sha256: str, prev_hash: str) -> str:
    """The chained hash of one entry (see module docstring)."""
    return canonical_sha256({"seq": seq, "run_id": run_id, "kind": kind, "recorded_at": recorded_at,
                             "payload_sha256": payload_sha256, "prev_hash": prev_hash})


def header_template(kind: str, recorded_at: str, run_id: str) -> str:
    """``entry_hash``'s RFC 8785 header text as a ``%`` template: ``kind``, ``recorded_at`` and ``run_id`` are JSON
    texts put in as they are, and ``%s`` (payload digest), ``%s`` (prev hash) and ``%d`` (seq) are left to fill,
    in that order; keys in RFC 8785's (code-unit) order. Filled with values RFC 8785 writes unchanged between
    quotes (hex digests) and a safe integer, its text is the canonical one."""
    return (f'{{"kind":{kind},"payload_sha256":"%s","prev_hash":"%s","recorded_at":{recorded_at},"run_id":{run_id},'
            f'"seq":%d}}')


def payload_digests(payloads: Sequence[str]) -> list[str]:
    """SHA-256 (hex) of each canonical payload text's UTF-8 bytes (``encode_payload``'s second half)."""
    sha256 = hashlib.sha256
    return [sha256(text.encode("utf-8")).hexdigest() for text in payloads]


def chain_hashes(*, first_seq: int, run_id: str, kinds: Sequence[str], recorded_at: str,
                 payload_sha256s: Sequence[str], prev_hash: str) -> list[str]:
    """``entry_hash`` of consecutive entries ``first_seq``, ``first_seq`` + 1, ... of one transaction, each
    chained to the one before (the first to ``prev_hash``). The header's RFC 8785 text is a template per
    kind: run id, kind and time encoded once by ``canonical_bytes``, keys in their fixed order; the digests
    are ASCII letters and digits and ``seq`` a safe integer (both checked), so the text is ``entry_hash``'s."""
    digests = prev_hash + "".join(payload_sha256s)
    if not (len(digests) == 64 * (len(kinds) + 1) == 64 * (len(payload_sha256s) + 1) and digests.isascii()
            and digests.encode("ascii").isalnum()):  # bytes.isalnum: a plain byte loop, unlike str's
        raise ValueError("one payload digest per kind, and every digest 64 ASCII letters or digits (hex)")
    last = first_seq + len(kinds) - 1
    if type(first_seq) is not int or not 1 <= first_seq <= last <= 2**53 - 1:
        raise ValueError(f"seq must be an integer in [1, 2**53 - 1] (got {first_seq}..{last})")
    distinct_kinds = set(kinds)
    text = {value: canonical_bytes(value).decode("utf-8").replace("%", "%%")
            for value in (run_id, recorded_at, *distinct_kinds)}
    templates = {kind: header_template(text[kind], text[recorded_at], text[run_id]) for kind in distinct_kinds}
    sha256 = hashlib.sha256
    hashes = []
    prev = prev_hash
    for seq, kind, digest in zip(range(first_seq, last + 1), kinds, payload_sha256s):
        prev = sha256((templates[kind] % (digest, prev, seq)).encode("utf-8")).hexdigest()
        hashes.append(prev)
    return hashes
