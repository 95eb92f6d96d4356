"""How far the last full and the last incremental verification of a ledger reached, kept in ``ledger_meta``.

Two keys, each written in its own transaction after an intact verification, never part of the chain and never
hashed (so recording one changes no entry, no Merkle node and no golden ledger's replay)::

    verified_full         {"seq": N, "entry_hash": "…", "verified_at": "…Z"}
    verified_incremental  {"seq": N, "entry_hash": "…", "verified_at": "…Z", "from": K}

(RFC 8785 JSON; ``from``: the first entry the incremental verification read, the one after its checkpoint).
``certa.ledger.verify`` accepts exactly these keys beside its own and reports one whose value is not of this form or
that names an entry beyond the head. A ledger opened read-only, or a database role that may not write, records
nothing: ``record_verification`` raises ``LedgerError`` and the caller says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, UTC
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, insert, select

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.json_read import parse_json

from certa.ledger.schema import ledger_meta
from certa.ledger.store import Ledger

__all__ = ["VERIFIED_FULL", "VERIFIED_INCREMENTAL", "VERIFIED_KEYS", "VerificationRecord", "record_verification",
           "read_verifications", "record_problem", "stale_record_problem"]

VERIFIED_FULL, VERIFIED_INCREMENTAL = "verified_full", "verified_incremental"
VERIFIED_KEYS = (VERIFIED_FULL, VERIFIED_INCREMENTAL)
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class VerificationRecord:
    """An intact verification: entries up to ``seq`` (hash ``entry_hash``) checked at ``verified_at``; an
    incremental one read entries ``first`` .. ``seq`` (a full one: 1 .. ``seq``)."""

    key: str
    seq: int
    entry_hash: str
    verified_at: str
    first: int

    def as_json(self) -> dict[str, Any]:
        return {"mode": "full" if self.key == VERIFIED_FULL else "incremental", "seq": self.seq,
                "entry_hash": self.entry_hash, "verified_at": self.verified_at, "from": self.first}


def _parsed(key: str, value: Any) -> VerificationRecord | str:
    """The record a ``ledger_meta`` value holds, or what is wrong with it."""
    if type(value) is not str:
        return "not text"
    try:
        body = parse_json(value)
    except ValueError:
        return "not JSON"
    wanted = {"seq", "entry_hash", "verified_at"} | ({"from"} if key == VERIFIED_INCREMENTAL else set())
    if type(body) is not dict or set(body) != wanted:
        return f"not an object with exactly the members {', '.join(sorted(wanted))}"
    first = body.get("from", 1)
    if type(body["seq"]) is not int or body["seq"] < 0 or type(first) is not int or not 0 < first <= body["seq"] + 1:
        return "its seq or from is not an entry number"
    if type(body["entry_hash"]) is not str or not _HEX64.fullmatch(body["entry_hash"]) \
            or type(body["verified_at"]) is not str:
        return "its entry_hash or verified_at is malformed"
    return VerificationRecord(key, body["seq"], body["entry_hash"], body["verified_at"], first)


def record_problem(key: str, value: Any, head_seq: int, entry_hash_at: Callable[[int], str | None] | None = None,
                   now: datetime | None = None) -> str | None:
    """What is wrong with the verification record ``value`` of ``key`` in a ledger whose head is ``head_seq``: not of
    its form, an entry beyond the head, a time after ``now`` (default: the clock), or (given ``entry_hash_at``, the
    ledger's hash of an entry) an entry whose hash is not the one recorded: the chain was rewritten since the
    verification, or the record was forged. A record is kept in the ledger itself, unsigned: it is a note of what
    a verification found, never evidence that the ledger is sound."""
    found = _parsed(key, value)
    return found if isinstance(found, str) else stale_record_problem(found, head_seq, entry_hash_at, now)


def stale_record_problem(found: VerificationRecord, head_seq: int,
                         entry_hash_at: Callable[[int], str | None] | None = None,
                         now: datetime | None = None) -> str | None:
    """``record_problem`` of a well-formed record: beyond the head, in the future, or naming a rewritten entry."""
    if found.seq > head_seq:
        return f"it names entry {found.seq}, beyond the head {head_seq} (entries were removed)"
    when = _utc_time(found.verified_at)
    if when is None:
        return f"its verified_at {found.verified_at!r} is not a UTC time"
    if when > (now or datetime.now(UTC)):
        return f"it is dated {found.verified_at}, in the future (forged)"
    if entry_hash_at is not None and found.seq:
        actual = entry_hash_at(found.seq)
        if actual != found.entry_hash:
            return (f"it names entry {found.seq} with hash {found.entry_hash[:12]}…, but that entry's hash is "
                    f"{str(actual)[:12]}… (the chain was rewritten since that verification, or the record was forged)")
    return None


def _utc_time(text: str) -> datetime | None:
    """An ISO 8601 time with a ``Z`` or an offset, as an aware datetime; None otherwise."""
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def read_verifications(ledger: Ledger) -> dict[str, VerificationRecord]:
    """The well-formed verification records of ``ledger`` by key (``verify`` reports any other)."""
    with ledger.read_transaction() as conn:
        rows = conn.execute(select(ledger_meta.c.key, ledger_meta.c.value)
                            .where(ledger_meta.c.key.in_(VERIFIED_KEYS))).fetchall()
    found = {key: _parsed(key, value) for key, value in rows}
    return {key: record for key, record in found.items() if isinstance(record, VerificationRecord)}


def record_verification(ledger: Ledger, *, full: bool, seq: int, entry_hash: str, first: int) -> VerificationRecord:
    """Record an intact verification that reached entry ``seq`` (``entry_hash``), reading from ``first``, in a
    transaction of its own (replacing the previous record of its kind). ``LedgerError`` when the ledger cannot
    be written (opened read-only, read-only media, a role without write access, an older schema)."""
    ledger.require_writable()
    key = VERIFIED_FULL if full else VERIFIED_INCREMENTAL
    at = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    body: dict[str, Any] = {"seq": seq, "entry_hash": entry_hash, "verified_at": at}
    if not full:
        body["from"] = first
    # read_transaction is the store's only public transaction; its first statement here is a write, so SQLite
    # takes the write lock at once (waiting for a writer like any append), PostgreSQL a row lock
    with ledger.read_transaction() as conn:
        conn.execute(delete(ledger_meta).where(ledger_meta.c.key == key))
        conn.execute(insert(ledger_meta).values(key=key, value=canonical_bytes(body).decode("utf-8")))
    return VerificationRecord(key, seq, entry_hash, at, 1 if full else first)
