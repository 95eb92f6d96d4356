"""Verification of a ledger: the hash chain, the stored blobs, the runs index and the ledger's metadata.

Certificate-level checks (schema, ``content_sha256``, method identities) belong to the engine and are
passed in as ``check_certificate``; this module knows only entries, blobs, runs and ``ledger_meta``.

Everything outside ``entries`` is derived from the chain, so every column of it is checked against the
chain (a ``Problem`` names the table and column in ``column``, e.g. ``runs.seed``):

* ``runs``: one row per run in the chain, and each column equals what the run's entries say: ``name``,
  ``profile``, ``seed``, ``knobs_hash`` and ``spec_sha256`` from the run entry's payload; ``status``,
  ``verdict`` and ``certificate_sha256`` from its certificate or abort entry; ``recorded_at`` and
  ``first_seq``/``last_seq`` from the entries themselves.
* ``blobs``: ``sha256`` = SHA-256(``content``), ``size`` = len(``content``); every blob an input or
  captured entry names is stored, and every stored blob is named by one.
* ``ledger_meta``: exactly the keys ``schema_version`` (this certa's or an older readable one) and
  ``head`` (= ``seq:entry_hash`` of the last entry); ``alembic_version``, where present, holds the
  revision of that schema version (a schema 1 ledger of certa <= 0.2.0 has none).
* ``merkle_nodes`` (schema 3 and later): exactly one row for every complete perfect subtree of the Merkle
  tree of the entries read (``merkle.perfect_nodes`` of their ``entry_hash`` values), each ``hash`` equal to
  that subtree's root; a row whose ``level`` or ``position`` was edited is recognised by its hash, and a
  deleted or added row is reported by its key.

Reads may interleave with writers (a run is one transaction): the chain is read first, then the tables
derived from it, then the head; if the head moved, the new entries are read and the tables again.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import inspect, select

from engine.foundation.canonical import sha256_hex
from engine.foundation.errors import LedgerError

from ledger import merkle
from ledger.chain import GENESIS, entry_hash, header_template
from ledger.run_record import RECORD_KINDS, payload_problems, runs_row
from ledger.schema import REVISIONS, SCHEMA_VERSION, alembic_version, blobs, ledger_meta, merkle_nodes, runs
from ledger.store import EntryRow, Ledger

__all__ = ["Problem", "VerifyReport", "verify_ledger"]

_META_KEYS = ("schema_version", "head")


@dataclass(frozen=True)
class Problem:
    """One integrity failure: where (entry seq / run / blob / table) and what; ``column`` is the edited
    ``table.column`` when the problem is in a table derived from the chain (``runs.seed``)."""

    where: str
    message: str
    seq: int | None = None
    run_id: str | None = None
    column: str | None = None


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


_MAX_SAFE_INT = 2**53 - 1


_ENTRY_TEMPLATE = header_template('"%s"', '"%s"', '"%s"')  # fields: kind, payload, prev, time, run id, seq
_TEMPLATE_QUOTES = _ENTRY_TEMPLATE.count('"')


def _entry_hash(entry: EntryRow) -> str:
    """``ledger.chain.entry_hash`` of an entry's fields, about 20 times faster for the fields certa writes
    (hex digests, a run id, a kind and an ISO time: printable ASCII), whose RFC 8785 form is a fixed template
    (keys in code-unit order, no escapes); any other value goes through ``entry_hash`` itself.

    The template's text is RFC 8785's exactly when every field is a string of printable ASCII without ``"``
    or ``\\`` (checked once on the whole text: no ``\\``, no quote beyond the template's own) and ``seq`` is
    an int within ±(2**53 − 1)."""
    seq, kind, digest, prev, at, run = (entry.seq, entry.kind, entry.payload_sha256, entry.prev_hash, entry.recorded_at,
                                        entry.run_id)
    if type(seq) is int and -_MAX_SAFE_INT <= seq <= _MAX_SAFE_INT \
            and type(kind) is type(digest) is type(prev) is type(at) is type(run) is str:
        text = _ENTRY_TEMPLATE % (kind, digest, prev, at, run, seq)
        if text.isascii() and text.isprintable() and "\\" not in text and text.count('"') == _TEMPLATE_QUOTES:
            return hashlib.sha256(text.encode("ascii")).hexdigest()
    return entry_hash(seq=seq, run_id=entry.run_id, kind=entry.kind, recorded_at=entry.recorded_at,
                      payload_sha256=entry.payload_sha256, prev_hash=entry.prev_hash)


def _entry_problem(entry: EntryRow, message: str) -> Problem:
    """A problem with one entry, named by its seq, kind and run."""
    return Problem(f"entry {entry.seq} ({entry.kind}, run {entry.run_id})", message, entry.seq, entry.run_id)


_SQL_TYPES = {type(None): "NULL", int: "an integer", float: "a real number", str: "text", bytes: "a blob"}
"""How a cell's value (what the driver returns for each SQLite storage type) is named in a problem."""


def _stored_as(value: Any) -> str:
    """A cell's storage type and value, for a problem: ``a blob (b'15')``."""
    shown = repr(value)
    return f"{_SQL_TYPES.get(type(value), type(value).__name__)} ({shown[:40]}{'…' if len(shown) > 40 else ''})"


def _mistyped_columns(entry: EntryRow) -> list[str]:
    """The columns of an entry whose value is not of the type certa writes (``seq`` an integer, the rest text)."""
    return [f"entries.{name} is {_stored_as(value)}, not {'an integer' if name == 'seq' else 'text'}"
            for name, value in entry.__dict__.items() if type(value) is not (int if name == "seq" else str)]


def _hex_leaves(hashes: list[str]) -> list[bytes]:
    """``merkle.entry_leaves`` of recorded entry hashes; one that is no hex digest (an edited cell, reported at its
    entry) becomes the leaf of its text's SHA-256, so that it matches no stored node."""
    try:
        return merkle.entry_leaves(hashes)
    except (ValueError, TypeError):
        return [merkle.leaf_hash(_digest_bytes(digest)) for digest in hashes]


def _digest_bytes(digest: Any) -> bytes:
    try:
        return bytes.fromhex(digest)
    except (ValueError, TypeError):
        return hashlib.sha256(repr(digest).encode("utf-8")).digest()


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
        self.entry_hashes: list[str] = []  # of every entry, in chain order (the Merkle nodes)

    def check(self, entry: EntryRow) -> None:
        problems = self.problems
        if not (type(entry.seq) is int and type(entry.run_id) is type(entry.kind) is type(entry.recorded_at)
                is type(entry.payload) is type(entry.payload_sha256) is type(entry.prev_hash)
                is type(entry.entry_hash) is str):
            self._mistyped(entry)
            return
        self.seq += 1
        if entry.seq != self.seq:
            problems.append(_entry_problem(entry, f"sequence gap: expected entry {self.seq}, found {entry.seq} "
                                                  "(entries were deleted)"))
            self.seq = entry.seq
        if entry.prev_hash != self.prev:
            problems.append(_entry_problem(entry, "link broken: prev_hash does not match the previous entry's hash "
                                                  "(an entry before it was edited, deleted or moved)"))
        if sha256_hex(entry.payload.encode("utf-8")) != entry.payload_sha256:
            problems.append(_entry_problem(entry, "payload edited: its SHA-256 no longer matches"))
        recomputed = _entry_hash(entry)
        if recomputed != entry.entry_hash:
            problems.append(_entry_problem(entry, "entry edited: its hash no longer matches its fields"))
        self.prev = entry.entry_hash
        self.entry_hashes.append(entry.entry_hash)
        if self.expect_seq is not None and entry.seq <= self.expect_seq:
            self.prefix_hashes.append(entry.entry_hash)
            if entry.seq == self.expect_seq:
                self.hash_at_expected_seq = entry.entry_hash
        span = self.run_spans.get(entry.run_id)
        if span is None:
            span = self.run_spans[entry.run_id] = {"first": entry.seq, "last": entry.seq, "kinds": set(),
                                                   "recorded_at": entry.recorded_at}
        if entry.kind in RECORD_KINDS:
            span["last"] = entry.seq
        span["kinds"].add(entry.kind)
        try:
            data = entry.data()
        except ValueError:
            problems.append(_entry_problem(entry, "payload is not valid JSON"))
            return
        if not isinstance(data, dict):
            problems.append(_entry_problem(entry, "payload is not a JSON object"))
            return
        malformed = payload_problems(entry.kind, data)
        if malformed:
            problems.append(_entry_problem(entry, f"{entry.kind} payload does not match its schema "
                                                  f"(schemas/ledger-entries.schema.json): {malformed[0]}"))
        if entry.kind in ("input", "captured"):
            self.referenced.add(str(data.get("sha256", "")))
        if entry.kind == "run":
            span["run"] = data
        if entry.kind == "certificate":
            span["certificate"] = data
            if self.check_certificate is not None and (self.run_id is None or entry.run_id == self.run_id):
                self.certificates += 1
                problems.extend(_entry_problem(entry, f"certificate: {message}")
                                for message in self.check_certificate(data))

    def _mistyped(self, entry: EntryRow) -> None:
        """An entry with a cell of another type than certa writes (stored by hand; SQLite keeps any type in any
        column): one problem naming it by its place in the chain, which continues after it."""
        self.seq += 1
        run = entry.run_id if type(entry.run_id) is str else None
        self.problems.append(Problem(f"entry {self.seq} (in chain order)",
                                     f"entry edited outside certa: {'; '.join(_mistyped_columns(entry))}",
                                     self.seq, run))
        digest = entry.entry_hash if type(entry.entry_hash) is str else repr(entry.entry_hash)
        self.prev = digest
        self.entry_hashes.append(digest)
        if self.expect_seq is not None and self.seq <= self.expect_seq:
            self.prefix_hashes.append(digest)
            if self.seq == self.expect_seq:
                self.hash_at_expected_seq = digest


@dataclass(frozen=True)
class _BlobRow:
    sha256: str
    size: int
    content_sha256: str | None
    """None: ``content`` is not a blob (``content_size`` then says what it is, as ``_stored_as``)."""
    content_size: int | str


@dataclass(frozen=True)
class _Tables:
    """The tables derived from the chain, read in one transaction after the entries (the head last)."""

    runs: dict[str, dict[str, Any]]
    blobs: list[_BlobRow]
    meta: dict[str, str]
    revisions: list[str] | None  # alembic_version rows; None: no such table
    nodes: list[tuple[int, int, str]] | None  # merkle_nodes rows by key; None: no such table (schema 1 and 2)

    def head(self) -> tuple[int, str] | None:
        value = self.meta.get("head", "")
        if type(value) is not str:
            return None
        seq, _, digest = value.partition(":")
        return (int(seq), digest) if seq.isdigit() and digest else None


def _read_tables(ledger: Ledger) -> _Tables:
    """``runs``, ``blobs`` (hashed as they stream by), ``merkle_nodes``, then ``ledger_meta`` and
    ``alembic_version``.

    On PostgreSQL (read committed) each statement sees its own snapshot, so the order matters: a runs row
    or blob read here was committed before the head read after it, hence its entries are at or before it.
    """
    with ledger.read_transaction() as conn:
        names = list(runs.c.keys())
        run_rows = {row[0]: dict(zip(names, row)) for row in conn.execute(select(*runs.c)).fetchall()}
        blob_rows = []
        for sha, size, content in conn.execute(select(blobs.c.sha256, blobs.c.size, blobs.c.content)
                                               .execution_options(yield_per=64)):
            if isinstance(content, (bytes, bytearray, memoryview)):
                raw = bytes(content)
                blob_rows.append(_BlobRow(sha, size, sha256_hex(raw), len(raw)))
            else:  # stored by hand as another SQLite type
                blob_rows.append(_BlobRow(sha, size, None, _stored_as(content)))
        found = inspect(conn)
        nodes = None
        if found.has_table(merkle_nodes.name):  # 2·10^5 rows for 10^5 entries: plain tuples from the driver
            cursor = conn.connection.driver_connection.cursor()
            try:
                cursor.execute(f"SELECT level, position, hash FROM {merkle_nodes.name} ORDER BY level, position")
                nodes = [tuple(row) for row in cursor.fetchall()]
            finally:
                cursor.close()
        meta = {key: value for key, value in conn.execute(select(ledger_meta.c.key, ledger_meta.c.value))}
        revisions = None
        if found.has_table(alembic_version.name):
            revisions = list(conn.execute(select(alembic_version.c.version_num)).scalars())
    return _Tables(run_rows, blob_rows, meta, revisions, nodes)


def _run_problems(walk: _ChainWalk, indexed: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """Every ``runs`` column of every run against the run's entries; rows without a run, runs without a row."""
    problems = []
    for rid, span in walk.run_spans.items():
        if "run" not in span:
            continue  # no readable run entry: already a problem at that entry
        row = indexed.get(rid)
        if row is None:
            problems.append(Problem(f"run {rid}", f"run is in the chain but missing from the runs index (no runs row "
                                                  f"with run_id {rid!r})", run_id=rid, column="runs.run_id"))
            continue
        expected = {**runs_row(span["run"], certificate=span.get("certificate")), "run_id": rid,
                    "recorded_at": span["recorded_at"], "first_seq": span["first"], "last_seq": span["last"]}
        for key in runs.c.keys():
            found = row.get(key)
            value = expected.get(key)
            if found != value:
                problems.append(Problem(f"run {rid}", f"runs index edited: {key} is {found!r}, the chain says {value!r}",
                                        run_id=rid, column=f"runs.{key}"))
    for rid in indexed:
        if rid not in walk.run_spans:
            problems.append(Problem(f"run {rid}", f"run is in the runs index but has no entries in the chain (runs "
                                                  f"row with run_id {rid!r})", run_id=rid, column="runs.run_id"))
    return problems


def _blob_problems(walk: _ChainWalk, stored: list[_BlobRow]) -> list[Problem]:
    """Each blob's ``sha256`` and ``size`` against its content; referenced blobs stored, stored ones referenced."""
    problems = []
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


def _mistyped_blob(row: _BlobRow) -> list[tuple[str, str]]:
    """(column, message) of each ``blobs`` cell of another type than certa writes."""
    found = []
    if type(row.sha256) is not str:
        found.append(("blobs.sha256", f"blobs.sha256 is {_stored_as(row.sha256)}, not text"))
    if type(row.size) is not int:
        found.append(("blobs.size", f"blobs.size is {_stored_as(row.size)}, not an integer"))
    if row.content_sha256 is None:
        found.append(("blobs.content", f"blobs.content is {row.content_size}, not a blob"))
    return found


def _meta_problems(tables: _Tables, last: tuple[int, str]) -> list[Problem]:
    """``ledger_meta``: known keys only, a readable schema version matching ``alembic_version``, the head."""
    problems = []
    meta = tables.meta
    for key, value in meta.items():
        for column, cell in (("key", key), ("value", value)):
            if type(cell) is not str:
                problems.append(Problem("ledger_meta", f"ledger_meta row {key!r} edited outside certa: "
                                                       f"ledger_meta.{column} is {_stored_as(cell)}, not text",
                                        column=f"ledger_meta.{column}"))
    for key in sorted(set(meta) - set(_META_KEYS), key=repr):
        problems.append(Problem("ledger_meta", f"ledger_meta has an unknown key {key!r} (value {meta[key]!r}); it "
                                               f"holds only {', '.join(_META_KEYS)}", column="ledger_meta.key"))
    for key in _META_KEYS:
        if key not in meta:
            problems.append(Problem("ledger_meta", f"ledger_meta has no {key!r} row (its key was edited or the row "
                                                   "deleted)", column="ledger_meta.key"))
    head = tables.head()
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


_MAX_NODE_PROBLEMS = 20


def _node_name(key: tuple[int, int]) -> str:
    level, position = key
    first = position << level
    return f"merkle node (level {level}, position {position}: entries {first + 1}..{first + (1 << level)})"


def _node_order(key: tuple[Any, Any]) -> tuple[tuple[int, Any], ...]:
    """Sort key of a stored node's (level, position): integers in order, then cells of any other type (edited)."""
    return tuple((0, part) if type(part) is int else (1, repr(part)) for part in key)


def _merkle_problems(walk: _ChainWalk, tables: _Tables) -> list[Problem]:
    """``merkle_nodes`` against the Merkle tree of the entries read: a row for every complete perfect subtree
    (no more), each with its hash. An edited ``level`` or ``position`` shows as a row missing and another
    added with the missing one's hash: reported once, naming the column. At most ``_MAX_NODE_PROBLEMS``
    problems are listed (a rewritten chain changes every node above it), then how many more there are."""
    version = str(tables.meta.get("schema_version", ""))
    if tables.nodes is None:
        if version.isdigit() and int(version) >= 3:
            return [Problem("merkle_nodes", f"ledger_meta value of key 'schema_version' is {version!r} but the "
                                            "ledger has no merkle_nodes table (it was dropped)",
                            column="merkle_nodes.level")]
        return []
    levels = merkle.perfect_levels(_hex_leaves(walk.entry_hashes))
    in_order = [(level, position, digest.hex()) for level, nodes in enumerate(levels)
                for position, digest in enumerate(nodes)]
    if tables.nodes == in_order:  # the usual case, checked in one comparison
        return []
    expected = {(level, position): digest for level, position, digest in in_order}
    stored = {(level, position): digest for level, position, digest in tables.nodes}
    problems = []
    missing = {expected[key]: key for key in expected.keys() - stored.keys()}
    for key in sorted(stored.keys() - expected.keys(), key=_node_order):
        moved_from = missing.pop(stored[key], None)
        level, position = key
        if moved_from is not None:
            column = "level" if level != moved_from[0] else "position"
            problems.append(Problem(_node_name(moved_from), f"merkle_nodes.{column} edited: the row (level {level}, "
                                                            f"position {position}) holds the hash of this node, "
                                                            "which has no row of its own",
                                    column=f"merkle_nodes.{column}"))
        else:
            problems.append(Problem(f"merkle node (level {level}, position {position})",
                                    f"merkle_nodes has a row (level {level}, position {position}) that is no complete "
                                    f"subtree of entries 1..{walk.seq} (a row was added, or its level or position "
                                    "edited)", column="merkle_nodes.position"))
    for key in sorted(missing.values()):
        problems.append(Problem(_node_name(key), f"merkle_nodes has no row (level {key[0]}, position {key[1]}) "
                                                 "for this complete subtree (the row was deleted, or its level or "
                                                 "position edited)", column="merkle_nodes.position"))
    for key in sorted(stored.keys() & expected.keys()):
        if stored[key] != expected[key]:
            problems.append(Problem(_node_name(key), f"merkle_nodes.hash edited: it is {stored[key]!r}, the chain "
                                                     f"gives {expected[key]!r}", column="merkle_nodes.hash"))
    if len(problems) > _MAX_NODE_PROBLEMS:
        more = len(problems) - _MAX_NODE_PROBLEMS
        problems = problems[:_MAX_NODE_PROBLEMS]
        problems.append(Problem("merkle_nodes", f"... and {more} more merkle_nodes problems"))
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


def verify_ledger(ledger: Ledger, *, check_certificate: Callable[[Mapping[str, Any]], list[str]] | None = None,
                  expect_head: tuple[int, str] | None = None, expect_root: str | None = None,
                  run_id: str | None = None, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Re-check the whole chain, every blob, every column of the runs index and ``ledger_meta``;
    certificates via ``check_certificate``.

    With ``run_id`` the chain, blobs and index are still checked in full (a chain is only sound as a
    whole) but certificate checks are limited to that run. ``expect_head`` is a head recorded earlier
    outside the database (``seq``, ``entry_hash``): the chain must still contain it unchanged; with
    ``expect_root`` (hex, from a signed checkpoint) the Merkle root of entries 1..seq must equal it too.
    ``progress(entries checked, entries in the ledger)`` is called after every entry.
    """
    with _cyclic_collector_paused():
        walk = _ChainWalk(check_certificate=check_certificate, run_id=run_id,
                          expect_seq=expect_head[0] if expect_head else None)
        total = _head_seq_hint(ledger)
        while True:  # writers may append while we read: read the chain, then the tables, until the head stays put
            before = walk.seq
            for entry in ledger.entries(after=walk.seq):
                walk.check(entry)
                if progress is not None:
                    progress(walk.seq, max(total, walk.seq))
            tables = _read_tables(ledger)
            head = tables.head()
            if head is None or head[0] <= walk.seq or walk.seq == before:
                break
            total = head[0]
        problems = walk.problems
        expected_seq, prev = walk.seq, walk.prev
        problems.extend(_meta_problems(tables, (expected_seq, prev)))
        if expect_head is not None:
            seq, digest = expect_head
            if seq > expected_seq:
                problems.append(Problem("expected head", f"the ledger ends at entry {expected_seq} but an earlier head "
                                                         f"was at entry {seq}: entries were removed"))
            elif walk.hash_at_expected_seq != digest:
                problems.append(Problem("expected head", f"entry {seq} is not the one recorded in the expected head "
                                                         "(the chain was rewritten)", seq))
            elif expect_root is not None and len(walk.prefix_hashes) == seq \
                    and merkle.root_hash(_hex_leaves(walk.prefix_hashes)).hex() != expect_root:
                problems.append(Problem("expected head", f"the Merkle root of entries 1..{seq} differs from the signed "
                                                         "root (the chain was rewritten)", seq))
        problems.extend(_blob_problems(walk, tables.blobs))
        problems.extend(_run_problems(walk, tables.runs))
        problems.extend(_merkle_problems(walk, tables))
        if run_id is not None and run_id not in walk.run_spans:
            problems.append(Problem(f"run {run_id}", "no entries for this run in the chain", run_id=run_id))
        problems.sort(key=lambda p: (p.seq is None, p.seq or 0))
        return VerifyReport(entries_checked=expected_seq, certificates_checked=walk.certificates,
                            blobs_checked=len(tables.blobs), head=(expected_seq, prev), problems=tuple(problems))
