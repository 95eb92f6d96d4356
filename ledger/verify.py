"""Verification of a ledger: the hash chain, the stored blobs and the runs index.

Certificate-level checks (schema, ``content_sha256``, method identities) belong to the engine and are
passed in as ``check_certificate``; this module knows only entries, blobs and runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.canonical import sha256_hex

from . import merkle
from .chain import GENESIS, entry_hash
from .store import EntryRow, Ledger

__all__ = ["Problem", "VerifyReport", "verify_ledger"]


@dataclass(frozen=True)
class Problem:
    """One integrity failure: where (entry seq / run / blob) and what."""

    where: str
    message: str
    seq: int | None = None
    run_id: str | None = None


@dataclass(frozen=True)
class VerifyReport:
    entries_checked: int
    certificates_checked: int
    blobs_checked: int
    head: tuple[int, str]
    problems: tuple[Problem, ...] = field(default=())

    @property
    def intact(self) -> bool:
        return not self.problems

    @property
    def first_broken(self) -> Problem | None:
        return self.problems[0] if self.problems else None


class _ChainWalk:
    """Checks entries one by one in chain order and collects what the run/blob checks need."""

    def __init__(self, *, check_certificate: Callable[[Mapping[str, Any]], list[str]] | None,
                 run_id: str | None, expect_seq: int | None) -> None:
        self.check_certificate, self.run_id, self.expect_seq = check_certificate, run_id, expect_seq
        self.problems: list[Problem] = []
        self.seq = 0
        self.prev = GENESIS
        self.certificates = 0
        self.run_spans: dict[str, dict[str, Any]] = {}
        self.referenced: set[str] = set()
        self.hash_at_expected_seq: str | None = None
        self.prefix_hashes: list[str] = []  # entry hashes of entries 1..expect_seq (for the Merkle root)

    def check(self, entry: EntryRow) -> None:
        problems = self.problems
        self.seq += 1
        where = f"entry {entry.seq} ({entry.kind}, run {entry.run_id})"
        if entry.seq != self.seq:
            problems.append(Problem(where, f"sequence gap: expected entry {self.seq}, found {entry.seq} "
                                           "(entries were deleted)", entry.seq, entry.run_id))
            self.seq = entry.seq
        if entry.prev_hash != self.prev:
            problems.append(Problem(where, "link broken: prev_hash does not match the previous entry's hash "
                                           "(an entry before it was edited, deleted or moved)", entry.seq, entry.run_id))
        if sha256_hex(entry.payload.encode("utf-8")) != entry.payload_sha256:
            problems.append(Problem(where, "payload edited: its SHA-256 no longer matches", entry.seq, entry.run_id))
        recomputed = entry_hash(seq=entry.seq, run_id=entry.run_id, kind=entry.kind, recorded_at=entry.recorded_at,
                                payload_sha256=entry.payload_sha256, prev_hash=entry.prev_hash)
        if recomputed != entry.entry_hash:
            problems.append(Problem(where, "entry edited: its hash no longer matches its fields", entry.seq, entry.run_id))
        self.prev = entry.entry_hash
        if self.expect_seq is not None and entry.seq <= self.expect_seq:
            self.prefix_hashes.append(entry.entry_hash)
            if entry.seq == self.expect_seq:
                self.hash_at_expected_seq = entry.entry_hash
        span = self.run_spans.setdefault(entry.run_id, {"first": entry.seq, "last": entry.seq, "kinds": set()})
        if entry.kind in ("run", "input", "captured", "decision", "certificate", "abort"):
            span["last"] = entry.seq
        span["kinds"].add(entry.kind)
        try:
            data = entry.data()
        except ValueError:
            problems.append(Problem(where, "payload is not valid JSON", entry.seq, entry.run_id))
            return
        if not isinstance(data, dict):
            problems.append(Problem(where, "payload is not a JSON object", entry.seq, entry.run_id))
            return
        if entry.kind in ("input", "captured"):
            self.referenced.add(str(data.get("sha256", "")))
        if entry.kind == "run":
            span["run"] = data
        if entry.kind == "certificate":
            content = data.get("content")
            span["certificate_sha256"] = data.get("content_sha256")
            span["verdict"] = content.get("verdict") if isinstance(content, dict) else None
            if self.check_certificate is not None and (self.run_id is None or entry.run_id == self.run_id):
                self.certificates += 1
                problems.extend(Problem(where, f"certificate: {message}", entry.seq, entry.run_id)
                                for message in self.check_certificate(data))


def verify_ledger(ledger: Ledger, *, check_certificate: Callable[[Mapping[str, Any]], list[str]] | None = None,
                  expect_head: tuple[int, str] | None = None, expect_root: str | None = None,
                  run_id: str | None = None, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Re-check the whole chain, every blob and the runs index; certificates via ``check_certificate``.

    With ``run_id`` the chain, blobs and index are still checked in full (a chain is only sound as a
    whole) but certificate checks are limited to that run. ``expect_head`` is a head recorded earlier
    outside the database (``seq``, ``entry_hash``): the chain must still contain it unchanged; with
    ``expect_root`` (hex, from a signed checkpoint) the Merkle root of entries 1..seq must equal it too.
    ``progress(entries checked, entries in the ledger)`` is called after every entry.
    """
    walk = _ChainWalk(check_certificate=check_certificate, run_id=run_id,
                      expect_seq=expect_head[0] if expect_head else None)
    head = ledger.head()
    while True:  # writers may append while we read: keep reading until a pass finds nothing new
        before = walk.seq
        for entry in ledger.entries(after=walk.seq):
            walk.check(entry)
            if progress is not None:
                progress(walk.seq, max(head[0], walk.seq))
        head = ledger.head()
        if walk.seq == before or head[0] <= walk.seq:
            break
    problems = walk.problems
    expected_seq, prev, run_spans = walk.seq, walk.prev, walk.run_spans
    if head != (expected_seq, prev):
        problems.append(Problem("chain head", f"the recorded head {head[0]}:{head[1][:12]}… does not match the last "
                                              f"entry {expected_seq}:{prev[:12]}… (entries were removed or added)"))
    if expect_head is not None:
        seq, digest = expect_head
        if seq > expected_seq:
            problems.append(Problem("expected head", f"the ledger ends at entry {expected_seq} but an earlier head "
                                                     f"was at entry {seq}: entries were removed"))
        elif walk.hash_at_expected_seq != digest:
            problems.append(Problem("expected head", f"entry {seq} is not the one recorded in the expected head "
                                                     "(the chain was rewritten)", seq))
        elif expect_root is not None and len(walk.prefix_hashes) == seq \
                and merkle.root_hash(merkle.entry_leaves(walk.prefix_hashes)).hex() != expect_root:
            problems.append(Problem("expected head", f"the Merkle root of entries 1..{seq} differs from the signed "
                                                     "root (the chain was rewritten)", seq))

    blobs_checked = 0
    stored: set[str] = set()
    for sha, content in ledger.blob_shas():
        blobs_checked += 1
        stored.add(sha)
        if sha256_hex(content) != sha:
            problems.append(Problem(f"blob {sha[:12]}…", "stored input bytes edited: their SHA-256 no longer matches"))
    for sha in sorted(walk.referenced - stored):
        problems.append(Problem(f"blob {sha[:12]}…", "an input recorded in the chain has no stored copy (deleted)"))

    indexed = {row.run_id: row for row in ledger.runs() if row.first_seq <= expected_seq}
    for rid, span in run_spans.items():
        if "run" not in span:
            continue
        row = indexed.pop(rid, None)
        if row is None:
            problems.append(Problem(f"run {rid}", "run is in the chain but missing from the runs index", run_id=rid))
            continue
        expected = {"first_seq": span["first"], "last_seq": span["last"], "knobs_hash": span["run"].get("knobs_hash"),
                    "spec_sha256": span["run"].get("spec_sha256"), "certificate_sha256": span.get("certificate_sha256"),
                    "verdict": span.get("verdict"), "status": "completed" if "certificate" in span["kinds"] else "aborted"}
        for key, value in expected.items():
            if getattr(row, key) != value:
                problems.append(Problem(f"run {rid}", f"runs index edited: {key} is {getattr(row, key)!r}, the chain "
                                                      f"says {value!r}", run_id=rid))
    for rid in indexed:
        problems.append(Problem(f"run {rid}", "run is in the runs index but has no entries in the chain", run_id=rid))
    if run_id is not None and run_id not in run_spans:
        problems.append(Problem(f"run {run_id}", "no entries for this run in the chain", run_id=run_id))
    problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
    return VerifyReport(entries_checked=expected_seq, certificates_checked=walk.certificates, blobs_checked=blobs_checked,
                        head=(expected_seq, prev), problems=tuple(problems))
