"""Verification of a ledger: the hash chain, the stored blobs, the runs index and the ledger's metadata.

Certificate-level checks (schema, ``content_sha256``, method identities) belong to the engine and are
passed in as ``check_certificate``; this module knows only entries, blobs, runs and ``ledger_meta``.

Everything outside ``entries`` is derived from the chain, so every column of it is checked against the
chain (a ``Problem`` names the table and column in ``column``, e.g. ``runs.seed``). First, every table is checked
as a table: its declared primary key must be the one certa creates (``certa.ledger.verify_read.KeyCheck``), since
each check below reads a table keyed by it; a table recreated without its key, or whose key was dropped, is
reported, and so is each key value more than one of its rows holds (a forged twin of a run's row, with another
verdict, would otherwise hide behind the real one).

* ``runs``: one row per run in the chain, and each column equals what the run's entries say: ``name``,
  ``profile``, ``seed``, ``knobs_hash`` and ``spec_sha256`` from the run entry's payload; ``status``,
  ``verdict`` and ``certificate_sha256`` from its certificate or abort entry; ``recorded_at`` and
  ``first_seq``/``last_seq`` from the entries themselves.
* ``blobs``: ``sha256`` = SHA-256(``content``), ``size`` = len(``content``); every blob an input or
  captured entry names is stored, and every stored blob is named by one.
* ``ledger_meta``: the keys ``schema_version`` (this certa's or an older readable one) and ``head``
  (= ``seq:entry_hash`` of the last entry), and the verification records ``certa.ledger.verify_record`` keeps
  (``VERIFIED_KEYS``: no part of the chain, never hashed; a malformed one is reported);
  ``alembic_version``, where present, holds the revision of that schema version (a schema 1 ledger of
  certa <= 0.2.0 has none).
* ``merkle_nodes`` (schema 3 and later): exactly one row for every complete perfect subtree of the Merkle
  tree of the entries read, each ``hash`` equal to that subtree's root (``certa.ledger.verify_merkle``); a row whose
  ``level`` or ``position`` was edited is recognised by its hash, and a deleted or added row is reported by
  its key.

The ledger is read as one snapshot, streamed in batches (``certa.ledger.verify_read``): memory stays bounded
whatever the number of entries; what is kept is the chain's running state (last seq and hash), the Merkle
frontier (O(log n) nodes), one small summary per run (what its ``runs`` row is checked against) and the
names of the blobs entries reference. What a batch's check needs of no other batch (its chain within it,
column-wise, and its payloads: ``certa.ledger.verify_batch``) runs in worker processes or here
(``certa.ledger.verify_pool``); the walk takes the batches back in chain order, checks each one's links to the
chain before it, merges its summary and folds the Merkle tree. A batch whose chain does not hold is checked
here entry by entry, with the same checks and messages.

``verify_since`` checks only what follows a signed checkpoint (``certa.ledger.checkpoint``): the checkpoint's
entry and Merkle root against the stored entry and the O(log n) stored ``merkle_nodes`` of its frontier, then
the entries after it and the tables derived from them. What it does not check (the entries before the
checkpoint, the runs rows and blobs of earlier runs, unreferenced blobs) it says in ``VerifyReport.scope``.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from certa.engine.foundation.canonical import sha256_hex
from certa.engine.foundation.errors import LedgerError

from certa.ledger.chain import GENESIS, entry_hash
from certa.ledger.merkle import frontier_nodes
from certa.ledger.rows import ENTRY_FIELDS, rows_as
from certa.ledger.schema import REVISIONS, SCHEMA_VERSION, runs
from certa.ledger.store import EntryRow, Ledger
from certa.ledger.verify_batch import (ENTRY_TEMPLATE, MAX_SAFE_INT, TEMPLATE_QUOTES, BatchChecker, BatchSummary,
                                       CheckCertificate, Problem, entry_problem, expected_runs_row)
from certa.ledger.verify_merkle import MerkleCheck, leaves_of
from certa.ledger.verify_pool import BatchPool, default_workers
from certa.ledger.verify_read import BlobRow, EntryBatch, KeyCheck, Tables, read_snapshot, stored_type
from certa.ledger.verify_record import VERIFIED_KEYS, record_problem

__all__ = ["Problem", "VerifyReport", "VerifyScope", "verify_ledger", "verify_since"]

_META_KEYS = ("schema_version", "head")
_MAX_SHARED = 4096
"""Distinct strings ``_ChainWalk`` keeps one copy of (a spec's fields repeated by its runs)."""


@dataclass(frozen=True)
class VerifyScope:
    """What a verification covered: entries ``vouched`` (1..vouched, by a signed checkpoint, not re-read) and
    ``first``..``last`` verified; ``full`` when everything was checked (the runs rows and blobs of every run,
    every stored blob); ``not_checked`` says what an incremental verification left out."""

    full: bool
    vouched: int
    first: int
    last: int
    not_checked: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"mode": "full" if self.full else "incremental", "vouched_by_checkpoint": self.vouched,
                "verified_from": self.first, "verified_through": self.last, "not_checked": list(self.not_checked)}


@dataclass(frozen=True)
class VerifyReport:
    entries_checked: int
    certificates_checked: int
    blobs_checked: int
    head: tuple[int, str]
    problems: tuple[Problem, ...] = field(default=())
    scope: VerifyScope | None = None
    """None: a full verification of entries 1..head."""

    @property
    def intact(self) -> bool:
        return not self.problems

    @property
    def first_broken(self) -> Problem | None:
        return self.problems[0] if self.problems else None


def _entry_hash(entry: EntryRow) -> str:
    """``certa.ledger.chain.entry_hash`` of an entry's fields, about 20 times faster for the fields certa writes
    (hex digests, a run id, a kind and an ISO time: printable ASCII), whose RFC 8785 form is a fixed template
    (keys in code-unit order, no escapes); any other value goes through ``entry_hash`` itself.

    The template's text is RFC 8785's exactly when every field is a string of printable ASCII without ``"``
    or ``\\`` (checked once on the whole text: no ``\\``, no quote beyond the template's own) and ``seq`` is
    an int within ±(2**53 − 1)."""
    seq, kind, digest, prev, at, run = (entry.seq, entry.kind, entry.payload_sha256, entry.prev_hash, entry.recorded_at,
                                        entry.run_id)
    if type(seq) is int and -MAX_SAFE_INT <= seq <= MAX_SAFE_INT \
            and type(kind) is type(digest) is type(prev) is type(at) is type(run) is str:
        text = ENTRY_TEMPLATE % (kind, digest, prev, at, run, seq)
        if text.isascii() and text.isprintable() and "\\" not in text and text.count('"') == TEMPLATE_QUOTES:
            return hashlib.sha256(text.encode("ascii")).hexdigest()
    return entry_hash(seq=seq, run_id=entry.run_id, kind=entry.kind, recorded_at=entry.recorded_at,
                      payload_sha256=entry.payload_sha256, prev_hash=entry.prev_hash)


def _mistyped_columns(entry: EntryRow) -> list[str]:
    """The columns of an entry whose value is not of the type certa writes (``seq`` an integer, the rest text)."""
    return [f"entries.{name} is {stored_type(value)}, not {'an integer' if name == 'seq' else 'text'}"
            for name, value in zip(ENTRY_FIELDS, entry) if type(value) is not (int if name == "seq" else str)]


class _ChainWalk:
    """Takes the checked batches in chain order (``certa.ledger.verify_pool``): checks each one's links to the chain
    before it, or the whole batch entry by entry when they or its own chain checks fail, and keeps what the
    run/blob/Merkle checks need: per run [first seq, last record seq, recorded_at, its run entry's ``RUN_FIELDS``,
    its certificate's slim form] (``certa.ledger.verify_batch.RunPart``)."""

    def __init__(self, *, checker: BatchChecker, expect_seq: int | None, start: int = 0, prev: str = GENESIS,
                 merkle: MerkleCheck | None = None) -> None:
        self.checker, self.expect_seq = checker, expect_seq
        self.problems: list[Problem] = []
        self.seq = start
        self.leaves = start
        self.prev = prev
        self.certificates = 0
        self.run_spans: dict[Any, list[Any]] = {}
        self.shared: dict[str, str] = {}  # one copy of a spec's name, seed, profile and digests for all its runs
        self.referenced: set[str] = set()
        self.hash_at_expected_seq: str | None = None
        self.expected_leaf: int | None = None
        self.merkle = merkle or MerkleCheck(start, root_at=expect_seq)
        self.orphan_records: dict[Any, int] = {}  # incremental: run -> first record entry after the checkpoint

    def check_batch(self, batch: EntryBatch, summary: BatchSummary) -> None:
        """Take ``batch``, whose ``summary`` ``BatchChecker.check_columns`` made: when its chain holds within
        it and it continues the chain so far, its summary; otherwise its every entry checked here."""
        rows = batch.rows
        first, last = rows[0], rows[-1]
        if summary.clean and first[0] == self.seq + 1 and first[6] == self.prev:
            if self.expect_seq is not None and first[0] <= self.expect_seq <= last[0]:
                self.hash_at_expected_seq = rows[self.expect_seq - first[0]][7]
                self.expected_leaf = self.leaves + self.expect_seq - first[0] + 1
            self.seq, self.prev = last[0], last[7]
            leaves = summary.leaves
        else:
            summary = BatchSummary(clean=False)
            leaves = leaves_of([self._check_one(entry, self.leaves + i + 1, summary)
                                for i, entry in enumerate(rows_as(EntryRow, rows))])
        self._merge(summary)
        self.leaves += len(rows)
        self.merkle.add(leaves, batch.nodes, schema_6_nodes=batch.schema_6_nodes)

    def _merge(self, summary: BatchSummary) -> None:
        """A batch's summary, after those of the batches before it (``verify_batch.RunPart``)."""
        self.problems += summary.problems
        self.referenced |= summary.referenced
        self.certificates += summary.certificates
        spans, shared = self.run_spans, self.shared
        for rid, (first, recorded_at, last_record, run, certificate, orphan) in summary.runs.items():
            span = spans.get(rid)
            if span is None:
                span = spans[rid] = [first, first, recorded_at, None, None]
            if orphan is not None and span[3] is None:
                self.orphan_records.setdefault(rid, orphan)
            if last_record is not None:
                span[1] = last_record
            if run is not None:  # the run id as the span's key, the spec's fields shared with other runs of it
                span[3] = (rid if run[0] == rid else run[0],
                           *(shared.setdefault(value, value) if type(value) is str and len(shared) < _MAX_SHARED
                             else shared.get(value, value) if type(value) is str else value for value in run[1:]))
            if certificate is not None:
                span[4] = certificate

    def _check_one(self, entry: EntryRow, leaf: int, summary: BatchSummary) -> str:
        """The chain checks of one entry, then its payload's; returns the hash it adds to the Merkle tree."""
        problems = summary.problems
        if not (type(entry.seq) is int and type(entry.run_id) is type(entry.kind) is type(entry.recorded_at)
                is type(entry.payload) is type(entry.payload_sha256) is type(entry.prev_hash)
                is type(entry.entry_hash) is str):
            return self._mistyped(entry, leaf, problems)
        self.seq += 1
        if entry.seq != self.seq:
            problems.append(entry_problem(entry.seq, entry.kind, entry.run_id,
                                          f"sequence gap: expected entry {self.seq}, found {entry.seq} "
                                          "(entries were deleted)"))
            self.seq = entry.seq
        if entry.prev_hash != self.prev:
            problems.append(entry_problem(entry.seq, entry.kind, entry.run_id,
                                          "link broken: prev_hash does not match the previous entry's hash "
                                          "(an entry before it was edited, deleted or moved)"))
        if sha256_hex(entry.payload.encode("utf-8")) != entry.payload_sha256:
            problems.append(entry_problem(entry.seq, entry.kind, entry.run_id,
                                          "payload edited: its SHA-256 no longer matches"))
        if _entry_hash(entry) != entry.entry_hash:
            problems.append(entry_problem(entry.seq, entry.kind, entry.run_id,
                                          "entry edited: its hash no longer matches its fields"))
        self.prev = entry.entry_hash
        if self.expect_seq is not None and entry.seq == self.expect_seq:
            self.hash_at_expected_seq, self.expected_leaf = entry.entry_hash, leaf
        self.checker.check_payload(summary, entry.seq, entry.run_id, entry.kind, entry.recorded_at, entry.payload)
        return entry.entry_hash

    def _mistyped(self, entry: EntryRow, leaf: int, problems: list[Problem]) -> str:
        """An entry with a cell of another type than certa writes (stored by hand; SQLite keeps any type in any
        column): one problem naming it by its place in the chain, which continues after it."""
        self.seq += 1
        run = entry.run_id if type(entry.run_id) is str else None
        problems.append(Problem(f"entry {self.seq} (in chain order)",
                                f"entry edited outside certa: {'; '.join(_mistyped_columns(entry))}",
                                self.seq, run))
        digest = entry.entry_hash if type(entry.entry_hash) is str else repr(entry.entry_hash)
        self.prev = digest
        if self.expect_seq is not None and self.seq == self.expect_seq:
            self.hash_at_expected_seq, self.expected_leaf = digest, leaf
        return digest


_COMPARED = ("compared",)
"""A span's run fields once its ``runs`` row was compared (``_run_problems``): the fields are no longer needed."""


def _run_problems(walk: _ChainWalk, rows: Iterable[Mapping[str, Any]], keyed: bool) -> list[Problem]:
    """Every ``runs`` column of every run against the run's entries; rows without a run, runs without a row: in the
    order of the runs in the chain, then the rows without a run in the table's order.

    The rows stream by (``certa.ledger.verify_read.Tables.runs``), each compared with its run's span, whose run
    fields are then dropped (``_COMPARED``): no run's row is held beyond its check. ``keyed``: the table has its
    primary key on ``run_id``; otherwise (a problem of its own) a run id may have several rows, of which the last
    is compared, as an index would keep one."""
    if not keyed:
        rows = {row["run_id"]: row for row in rows}.values()
    spans = walk.run_spans
    found: dict[Any, list[Problem]] = {}
    unknown = []
    for row in rows:
        rid = row.get("run_id")
        span = spans.get(rid)
        if span is None:
            unknown.append(Problem(f"run {rid}", f"run is in the runs index but has no entries in the chain (runs "
                                                 f"row with run_id {rid!r})", run_id=rid, column="runs.run_id"))
            continue
        first, last, recorded_at, run, certificate = span
        if run is None:
            continue  # no readable run entry: already a problem at that entry (or, incremental: before it)
        span[3] = _COMPARED
        expected = {**expected_runs_row(run, certificate), "run_id": rid, "recorded_at": recorded_at,
                    "first_seq": first, "last_seq": last}
        for key in runs.c.keys():
            value, stored = expected.get(key), row.get(key)
            if stored != value:
                found.setdefault(rid, []).append(
                    Problem(f"run {rid}", f"runs index edited: {key} is {stored!r}, the chain says {value!r}",
                            run_id=rid, column=f"runs.{key}"))
    problems: list[Problem] = []
    for rid, span in spans.items():
        if span[3] is _COMPARED:
            problems += found.pop(rid, ())
        elif span[3] is not None:
            problems.append(Problem(f"run {rid}", f"run is in the chain but missing from the runs index (no runs row "
                                                  f"with run_id {rid!r})", run_id=rid, column="runs.run_id"))
    return problems + unknown


def _key_problems(checks: tuple[KeyCheck, ...]) -> list[Problem]:
    """A table whose primary key is not certa's (recreated without it, or the key dropped) can hold two rows of
    one key, of which every other check would see only one: the missing key is reported, and each duplicated
    key value by name."""
    problems = []
    for check in checks:
        if check.declared == check.expected:
            continue
        key = ", ".join(check.expected)
        declared = f"on ({', '.join(check.declared)})" if check.declared else "none"
        problems.append(Problem(check.table, f"{check.table} has lost its primary key on ({key}) (the database declares "
                                             f"{declared}): the table was altered outside certa, and its rows can be "
                                             "duplicated", column=f"{check.table}.{check.expected[0]}"))
        for value, count in check.duplicates:
            problems.append(Problem(check.table, f"{check.table} has {count} rows with {key} = {value!r}: rows were "
                                                 "added outside certa (certa writes one)",
                                    run_id=value if check.table == "runs" and isinstance(value, str) else None,
                                    column=f"{check.table}.{check.expected[0]}"))
        if check.duplicated_keys > len(check.duplicates):
            problems.append(Problem(check.table, f"{check.table} has {check.duplicated_keys - len(check.duplicates)} "
                                                 "more duplicated key values", column=f"{check.table}.{check.expected[0]}"))
    return problems


def _blob_problems(walk: _ChainWalk, stored: list[BlobRow]) -> list[Problem]:
    """Each blob's ``sha256`` and ``size`` against its content; referenced blobs stored, stored ones referenced."""
    problems: list[Problem] = []
    keys = {row.sha256 for row in stored}
    for row in stored:
        where = f"blob {str(row.sha256)[:12]}…"
        mistyped = _mistyped_blob(row)
        if mistyped:
            problems.extend(Problem(where, f"blob row edited outside certa: {message}", column=column)
                            for column, message in mistyped)
            continue
        if row.content_sha256 != row.sha256:
            if row.sha256 in walk.referenced:
                problems.append(Problem(where, f"stored input bytes edited: their SHA-256 no longer matches (SHA-256 of "
                                               f"blobs.content is {row.content_sha256}, blobs.sha256 is {row.sha256})",
                                        column="blobs.content"))
            else:
                problems.append(Problem(where, f"blobs.sha256 edited: it is {row.sha256}, the SHA-256 of the content "
                                               f"is {row.content_sha256}", column="blobs.sha256"))
        if row.size != row.content_size:
            problems.append(Problem(where, f"blobs.size edited: it is {row.size!r}, the content has {row.content_size} "
                                           f"bytes", column="blobs.size"))
        elif row.sha256 not in walk.referenced:
            problems.append(Problem(where, f"blob {row.sha256} (blobs.sha256) is stored but no input or captured entry "
                                           "names it (a blob was added)", column="blobs.sha256"))
    for sha in sorted(walk.referenced - keys):
        problems.append(Problem(f"blob {sha[:12]}…", f"an input recorded in the chain has no stored copy (deleted; no "
                                                     f"blobs row with sha256 {sha})", column="blobs.sha256"))
    return problems


def _mistyped_blob(row: BlobRow) -> list[tuple[str, str]]:
    """(column, message) of each ``blobs`` cell of another type than certa writes."""
    found = []
    if type(row.sha256) is not str:
        found.append(("blobs.sha256", f"blobs.sha256 is {stored_type(row.sha256)}, not text"))
    if type(row.size) is not int:
        found.append(("blobs.size", f"blobs.size is {stored_type(row.size)}, not an integer"))
    if row.content_sha256 is None:
        found.append(("blobs.content", f"blobs.content is {row.content_size}, not a blob"))
    return found


def _meta_problems(tables: Tables, last: tuple[int, str],
                   entry_hash_at: Callable[[int], str | None] | None = None) -> list[Problem]:
    """``ledger_meta``: known keys only, a readable schema version matching ``alembic_version``, the head."""
    problems = []
    meta = tables.meta
    for key, value in meta.items():
        for column, cell in (("key", key), ("value", value)):
            if type(cell) is not str:
                problems.append(Problem("ledger_meta", f"ledger_meta row {key!r} edited outside certa: "
                                                       f"ledger_meta.{column} is {stored_type(cell)}, not text",
                                        column=f"ledger_meta.{column}"))
    for key in VERIFIED_KEYS:
        wrong = record_problem(key, meta[key], last[0], entry_hash_at) if key in meta else None
        if wrong is not None:
            problems.append(Problem("ledger_meta", f"ledger_meta value of key {key!r} (a verification record) is "
                                                   f"edited: {wrong}", column="ledger_meta.value"))
    for key in sorted(set(meta) - set(_META_KEYS) - set(VERIFIED_KEYS), key=repr):
        problems.append(Problem("ledger_meta", f"ledger_meta has an unknown key {key!r} (value {meta[key]!r}); it "
                                               f"holds only {', '.join(_META_KEYS)}", column="ledger_meta.key"))
    for key in _META_KEYS:
        if key not in meta:
            problems.append(Problem("ledger_meta", f"ledger_meta has no {key!r} row (its key was edited or the row "
                                                   "deleted)", column="ledger_meta.key"))
    head = _recorded_head(meta)
    if "head" in meta and head != last:
        problems.append(Problem("chain head", f"the recorded head (ledger_meta value of key 'head') "
                                              f"{str(meta['head'])[:20]}… does not match the last entry "
                                              f"{last[0]}:{last[1][:12]}… (entries were removed or added)",
                                column="ledger_meta.value"))
    version = meta.get("schema_version")
    if version is not None and version not in REVISIONS:
        problems.append(Problem("ledger_meta", f"ledger_meta value of key 'schema_version' is {version!r}: not a "
                                               f"schema this certa reads ({', '.join(REVISIONS)}; it writes "
                                               f"{SCHEMA_VERSION})", column="ledger_meta.value"))
    revisions = tables.revisions
    if revisions is None:
        if version is not None and version != "1":
            problems.append(Problem("ledger_meta", f"ledger_meta value of key 'schema_version' is {version!r} but the "
                                                   "ledger has no alembic_version table (only a schema 1 ledger of "
                                                   "certa <= 0.2.0 has none)", column="ledger_meta.value"))
    elif len(revisions) != 1:
        problems.append(Problem("alembic_version", f"alembic_version holds {len(revisions)} rows {revisions!r}, not "
                                                   "one revision", column="alembic_version.version_num"))
    elif version in REVISIONS and revisions[0] != REVISIONS[version]:
        known = {rev: schema for schema, rev in REVISIONS.items()}
        says = f"schema version {known[revisions[0]]}" if revisions[0] in known else "a revision this certa does not know"
        problems.append(Problem("ledger_meta", f"ledger_meta value of key 'schema_version' is {version!r} but "
                                               f"alembic_version.version_num is {revisions[0]!r} ({says}; schema "
                                               f"{version} is revision {REVISIONS[version]!r}; one of the "
                                               "two was edited)", column="ledger_meta.value"))
    return problems


def _head_seq_hint(ledger: Ledger) -> int:
    """The head's seq before the walk, for progress only (a malformed head is reported later, not here)."""
    try:
        return ledger.head()[0]
    except (LedgerError, ValueError, TypeError):  # TypeError: a head cell stored as another type
        return 0


@contextmanager
def _cyclic_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (reference counting still frees all that ``verify`` drops):
    checking 10^5 entries allocates millions of small containers, whose count keeps triggering collections
    over everything alive, about a tenth of the time. The collector's state is restored afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()




def _recorded_head(meta: Mapping[Any, Any]) -> tuple[int, str] | None:
    """The head ``ledger_meta`` records (``seq:entry_hash``), or None when its value is malformed."""
    value = meta.get("head", "")
    if type(value) is not str:
        return None
    seq, _, digest = value.partition(":")
    return (int(seq), digest) if seq.isdigit() and digest else None


def _merkle_problems(walk: _ChainWalk, tables: Tables) -> list[Problem]:
    """``merkle_nodes`` against the Merkle tree of the entries read (``certa.ledger.verify_merkle``); a schema 3 or
    later ledger without the table is a problem of its own."""
    version = str(tables.meta.get("schema_version", ""))
    if tables.node_count is None:
        if version.isdigit() and int(version) >= 3:
            return [Problem("merkle_nodes", f"ledger_meta value of key 'schema_version' is {version!r} but the "
                                            "ledger has no merkle_nodes table (it was dropped)",
                            column="merkle_nodes.level")]
        return []
    for row in tables.outside:
        walk.merkle.note_extra(row)
    walk.merkle.counts[1] += tables.outside_count - len(tables.outside)
    found = walk.merkle.problems(Problem, walk.seq)
    if tables.missing_node_seq:
        found.insert(0, Problem("merkle_nodes", f"ledger_meta value of key 'schema_version' is {version!r} but "
                                                "merkle_nodes has no column node_seq (the table was replaced)",
                                column="merkle_nodes.node_seq"))
    return found


@dataclass(frozen=True)
class _Start:
    """Where a walk begins: after entry ``seq`` (its hash ``prev``), its Merkle frontier known."""

    seq: int = 0
    prev: str = GENESIS
    frontier: Mapping[tuple[int, int], bytes] | None = None


def _walk(ledger: Ledger, start: _Start, *, check_certificate: CheckCertificate | None, run_id: str | None,
          expect_seq: int | None, progress: Callable[[int, int], None] | None,
          incremental: bool, workers: int | None) -> tuple[_ChainWalk, Tables, list[Problem]]:
    """Stream the entries after ``start`` through a ``_ChainWalk`` (their batches checked by ``workers``
    processes, ``certa.ledger.verify_pool``; None: ``default_workers``), then read the tables it needs (incremental:
    the runs rows of runs beginning after ``expect_seq``, the blobs named after it), checking the ``runs`` rows as
    they stream from the snapshot (``_run_problems``, returned beside the walk and the tables)."""
    records_after = expect_seq if incremental else None
    total = _head_seq_hint(ledger)
    if workers is None:
        workers = default_workers(total - start.seq)
    tables: Tables | None = None
    run_problems: list[Problem] = []
    with BatchPool(check_certificate=check_certificate, run_id=run_id, records_after=records_after,
                   workers=workers) as pool:
        walk = _ChainWalk(checker=pool.local, expect_seq=expect_seq, start=start.seq, prev=start.prev,
                          merkle=MerkleCheck(start.seq, start.frontier, root_at=expect_seq))

        def wanted() -> tuple[Any | None, list[str] | None]:
            if not incremental:
                return None, None
            return runs.c.first_seq > (expect_seq or 0), sorted(walk.referenced)

        def take(done: Iterator[tuple[EntryBatch, BatchSummary]]) -> None:
            for batch, summary in done:
                walk.check_batch(batch, summary)
                if progress is not None:
                    progress(walk.seq, max(total, walk.seq))

        for item in read_snapshot(ledger, after=start.seq, tables=wanted):
            if isinstance(item, Tables):
                tables = item
                keyed = all(check.declared == check.expected for check in item.keys if check.table == runs.name)
                run_problems = _run_problems(walk, item.runs, keyed)
            elif isinstance(item, EntryBatch):
                take(pool.submit(item))
            else:  # ENTRIES_READ: every batch checked before the tables are chosen
                take(pool.drain())
    if tables is None:  # read_snapshot ends with the tables, or raises
        raise LedgerError(f"cannot read ledger {ledger.location}: its tables were not read")
    return walk, tables, run_problems


def _report(walk: _ChainWalk, tables: Tables, *, expect_head: tuple[int, str] | None, expect_root: str | None,
            run_id: str | None, scope: VerifyScope | None, extra: list[Problem], run_problems: list[Problem],
            entry_hash_at: Callable[[int], str | None] | None = None) -> VerifyReport:
    problems = [*extra, *walk.problems]
    expected_seq, prev = walk.seq, walk.prev
    problems.extend(_key_problems(tables.keys))
    problems.extend(_meta_problems(tables, (expected_seq, prev), entry_hash_at))
    if expect_head is not None:
        seq, digest = expect_head
        if seq > expected_seq:
            problems.append(Problem("expected head", f"the ledger ends at entry {expected_seq} but an earlier head "
                                                     f"was at entry {seq}: entries were removed"))
        elif walk.hash_at_expected_seq != digest:
            problems.append(Problem("expected head", f"entry {seq} is not the one recorded in the expected head "
                                                     "(the chain was rewritten)", seq))
        elif expect_root is not None and walk.expected_leaf == seq and walk.merkle.root is not None \
                and walk.merkle.root.hex() != expect_root:
            problems.append(Problem("expected head", f"the Merkle root of entries 1..{seq} differs from the signed "
                                                     "root (the chain was rewritten)", seq))
    problems.extend(_blob_problems(walk, tables.blobs))
    problems.extend(run_problems)
    problems.extend(_merkle_problems(walk, tables))
    if run_id is not None and run_id not in walk.run_spans and scope is None:
        problems.append(Problem(f"run {run_id}", "no entries for this run in the chain", run_id=run_id))
    problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
    return VerifyReport(entries_checked=expected_seq - (scope.vouched if scope else 0),
                        certificates_checked=walk.certificates, blobs_checked=len(tables.blobs),
                        head=(expected_seq, prev), problems=tuple(problems), scope=scope)


def verify_ledger(ledger: Ledger, *, check_certificate: CheckCertificate | None = None,
                  expect_head: tuple[int, str] | None = None, expect_root: str | None = None,
                  run_id: str | None = None, progress: Callable[[int, int], None] | None = None,
                  workers: int | None = None) -> VerifyReport:
    """Re-check the whole chain, every blob, every column of the runs index and ``ledger_meta``;
    certificates via ``check_certificate``.

    With ``run_id`` the chain, blobs and index are still checked in full (a chain is only sound as a
    whole) but certificate checks are limited to that run. ``expect_head`` is a head recorded earlier
    outside the database (``seq``, ``entry_hash``): the chain must still contain it unchanged; with
    ``expect_root`` (hex, from a signed checkpoint) the Merkle root of entries 1..seq must equal it too.
    ``progress(entries checked, entries in the ledger)`` is called after every batch. ``workers``: processes
    checking batches beside this one (0: none; None: one per CPU for a large ledger, ``certa.ledger.verify_pool``);
    the report is the same whatever their number.
    """
    with _cyclic_collector_paused():
        walk, tables, run_problems = _walk(ledger, _Start(), check_certificate=check_certificate, run_id=run_id,
                             expect_seq=expect_head[0] if expect_head else None, progress=progress, incremental=False,
                             workers=workers)
        return _report(walk, tables, expect_head=expect_head, expect_root=expect_root, run_id=run_id, scope=None,
                       extra=[], run_problems=run_problems, entry_hash_at=ledger.entry_hash_at)


NOT_CHECKED_INCREMENTAL = ("entries before the checkpoint (vouched for by its signature, its entry and its Merkle "
                           "root, which the stored entry and merkle_nodes still give)",
                           "runs rows and blobs of runs recorded before the checkpoint",
                           "stored blobs that no entry after the checkpoint names",
                           "signed reviews recorded before the checkpoint",
                           "merkle_nodes rows of subtrees within the entries before the checkpoint (beyond the "
                           "frontier that gives its root)")


def verify_since(ledger: Ledger, seq: int, entry_hash_at_seq: str, root_hash: str, *,
                 check_certificate: CheckCertificate | None = None, run_id: str | None = None,
                 progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> VerifyReport:
    """Verify what follows a checkpoint of entries 1..``seq`` (entry ``seq`` had ``entry_hash_at_seq``, entries
    1..seq Merkle root ``root_hash``), whose signature the caller has checked.

    The anchor: entry ``seq`` is read again with the entry before it (its fields must still give its hash,
    that hash must be the signed one) and the Merkle root of entries 1..seq is folded from the stored
    ``merkle_nodes`` of the frontier of entries 1..seq − 1 (O(log n) rows) and entry ``seq``'s leaf: it must be
    the signed root, so entries or nodes before the checkpoint rewritten since show here. Then every entry
    after ``seq`` is checked as ``verify_ledger`` checks it (chain continuity from entry ``seq``, payloads,
    certificates, the Merkle nodes they complete), the runs rows of runs that begin after it, the blobs its
    entries name, and ``ledger_meta``. ``VerifyReport.scope`` says what was not checked."""
    if not ledger.has_merkle_nodes:
        raise LedgerError(f"ledger {ledger.location} has schema version {ledger.schema_version}, without "
                          "merkle_nodes: verify it in full (or migrate it first)")
    extra: list[Problem] = []
    before = max(seq - 1, 0)
    prev = GENESIS if before == 0 else (ledger.entry_hash_at(before) or "")
    keys = frontier_nodes(before)
    frontier = ledger.merkle_nodes(keys)
    for level, position in sorted(set(keys) - set(frontier)):
        extra.append(Problem("checkpoint", f"merkle_nodes has no row (level {level}, position {position}) of "
                                           f"the frontier of entries 1..{before}: the checkpoint's root cannot "
                                           "be recomputed (rows were deleted; run a full verify)", seq,
                             column="merkle_nodes.position"))
        frontier[(level, position)] = b"\0" * 32
    if before and not prev:
        extra.append(Problem("checkpoint", f"the ledger has no entry {before}: entries were removed", before))
    with _cyclic_collector_paused():
        walk, tables, run_problems = _walk(ledger, _Start(before, prev, frontier), check_certificate=check_certificate,
                             run_id=run_id, expect_seq=seq or None, progress=progress, incremental=True,
                             workers=workers)
        extra += [Problem(f"run {rid}", f"run {rid} has entries of its record after the checkpoint (from entry "
                                        f"{first}) but no run entry after it: a run is recorded in one transaction, "
                                        "so its record cannot span a checkpoint (run a full verify)", first, rid)
                  for rid, first in walk.orphan_records.items() if walk.run_spans[rid][3] is None]
        scope = VerifyScope(full=False, vouched=seq, first=seq + 1, last=walk.seq, not_checked=NOT_CHECKED_INCREMENTAL)
        if seq == 0:
            return _report(walk, tables, expect_head=None, expect_root=None, run_id=run_id, scope=scope, extra=extra,
                           run_problems=run_problems, entry_hash_at=ledger.entry_hash_at)
        return _report(walk, tables, expect_head=(seq, entry_hash_at_seq), expect_root=root_hash, run_id=run_id,
                       scope=scope, extra=extra, run_problems=run_problems, entry_hash_at=ledger.entry_hash_at)
