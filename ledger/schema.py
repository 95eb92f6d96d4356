"""The ledger's tables (SQLAlchemy Core). Schema version 7.

``entries`` is the append-only, hash-chained log: every run, input, decision, certificate, abort, replay
and review is one entry. ``blobs`` holds content-addressed copies of input tables (and captured tables),
so a replay needs nothing outside the ledger. ``runs`` is an index for listing; ``verify`` checks it
against the entries. ``ledger_meta`` holds the schema version and the chain head (the row that
serialises writers on PostgreSQL via ``SELECT ... FOR UPDATE``). ``merkle_nodes`` (since 3) holds the RFC 6962
hash of every complete perfect subtree of the entries' Merkle tree (``certa.ledger.merkle``; since 6 those of two or
more leaves), written with the entries that complete it, so an inclusion proof reads O(log n) rows; ``verify``
checks it against the chain.
The indexes (those marked "since 4" added by schema 4) make every read a command makes an index search
(``tests/ledger/test_query_plans.py`` checks each command's statements), so that one run's reads, and
``certa list``, take the same time on 10^6 entries as on 10^4 (``bench/ledger_reads.py``).

Every index costs each recording a page written per entry it files at a random place (and copied again by the
next WAL checkpoint). Schema 5 drops three of ``entries`` that no read uses and no write needs (10^6 entries:
62 pages a run before, about 27 after), so recording into a large ledger runs near the rate of an empty one:

- ``ix_entries_run_id`` (``entries(run_id)``, schema 1): every query on a run's entries is answered by
  ``ix_entries_run_id_kind``, whose first column is ``run_id`` (``tests/ledger/test_query_plans.py``; schema 6
  replaced that one too, below).
- ``uq_entries_prev_hash`` (unique ``prev_hash``, schema 1): it would refuse a second entry after the same one, a
  fork of the chain. The primary key refuses that already: entries are appended under the write lock (SQLite
  ``BEGIN IMMEDIATE``; PostgreSQL the head row ``SELECT ... FOR UPDATE``, which a second writer waits on and then
  reads as the first left it) at ``seq`` = head + 1 with ``prev_hash`` = the head's hash, so an appender that
  read a stale head would write an existing ``seq`` and be refused, its whole run with it
  (``tests/ledger/test_ledger.py``). No query reads by ``prev_hash``.
- ``uq_entries_entry_hash`` (unique ``entry_hash``, schema 1): ``entry_hash`` is the SHA-256 of a header holding
  the entry's own ``seq``, unique by the primary key, so two entries certa writes share a hash only through a
  SHA-256 collision. No query reads by ``entry_hash`` (entries are read by ``seq`` and run).

Neither constraint stood against tampering (whoever edits the file can drop them); ``certa verify`` recomputes
every entry's hash and link from its fields (``certa.ledger.verify``), so a repeated or forked hash written around
certa is reported there, with or without them.

Schema 6 keys ``merkle_nodes`` by ``node_seq`` (a column added before ``level`` and ``position``, which keep their
meaning) instead of ``(level, position)``, and stores no leaves. ``node_seq`` numbers the nodes of two or more
leaves 1, 2, 3, ... in the order the entries complete them (those an entry completes bottom-up), as ``seq``
numbers the entries: node (level, position), whose last entry is e = (position + 1)·2^level, is
(e − 1) − popcount(e − 1) + level (``certa.ledger.merkle.node_seq``). Under the old key every level's new nodes went to
the end of that level's own range of the index, so a run wrote one page per level of the tree (10^6 entries:
about 10 of a run's 25 pages, against 2 on an empty ledger); ``node_seq`` is SQLite's rowid (``INTEGER PRIMARY
KEY``), so a run's nodes are appended at the end of the table's one B-tree, which SQLite extends a page at a time
without rebalancing. A leaf, SHA-256(0x00 ‖ entry_hash), is read from its entry by seq (``Ledger.merkle_nodes``),
which halves the table. Readers of a ledger at schema 3 to 5 (read-only until migrated) read every node, leaves
included, by ``(level, position)`` (``Ledger.merkle_leaves_stored``, ``certa.ledger.verify_read``).

Schema 6 also replaces ``ix_entries_run_id_kind`` (``entries(run_id, kind)``, since 2) by
``ix_entries_run_id_kind_but_decisions``, the same of the entries of every kind but ``decision``
(``KINDS_BUT_DECISIONS``; on PostgreSQL ``ix_entries_run_id_kind_seq`` likewise). Run ids are random, so each
run's keys land at a random place of that index, and its decisions were most of them (7 of a small run's 11
entries, a bake-off's 10^6); a run's decisions are read instead as the seqs of its record, ``runs.first_seq`` ..
``last_seq``, a primary-key range (``Ledger.entries``), each entry's run and kind checked.

Schema 7 widens ``runs.verdict`` from ``VARCHAR(8)`` to ``VARCHAR(16)``: a run's verdict may be ``INCONCLUSIVE`` (12
characters), which PostgreSQL refuses in a column of 8 (SQLite never enforces a declared length). No value changes.
Schema 7 also admits the entry kinds ``registration`` (``ck_entries_kind``): a spec registered before its evidence
(``certa register``; ``certa.ledger.run_record.LEDGER_KINDS``), about no run, and indexes those entries
and ``policy``, a trust policy approvals were evaluated against (``certa verify --policy FILE --record``); the
partial index ``ix_entries_about_no_run`` holds those entries (a run finds the newest registration of its spec, a
verification a policy recorded already, among a handful of rows).

The schema moves only by Alembic revisions (``ledger/migrations/versions``, run by ``certa migrate``):
revision 0001 is schema version 1 (certa 0.1.0 and 0.2.0), revision 0002 schema version 2 (the indexes
below marked "since 2"), revision 0003 schema version 3 (``merkle_nodes``, backfilled from the entries),
revision 0004 schema version 4 (the indexes marked "since 4"), revision 0005 schema version 5 (without the
three indexes above), revision 0006 schema version 6 (``merkle_nodes`` keyed by ``node_seq``, without the leaves,
and the index of a run's entries by kind without the decisions), revision 0007 schema version 7 (``runs.verdict``
of 16 characters, the kind ``registration``). A new ledger is created here directly at the
newest schema and stamped with its revision in ``alembic_version`` (the table Alembic keeps, declared here so
that creating a ledger needs no Alembic import).
"""

from __future__ import annotations

from sqlalchemy import (CHAR, CheckConstraint, Column, Connection, Index, Integer, LargeBinary, MetaData,
                        PrimaryKeyConstraint, String, Table, Text, inspect, select, text)

from certa.ledger.rows import HEAD_REVISION, REVISIONS, SCHEMA_VERSION, SchemaState
from certa.ledger.run_record import ABOUT_NO_RUN, KINDS_BUT_DECISIONS, LEDGER_KINDS, RUN_KINDS

__all__ = ["SCHEMA_VERSION", "REVISIONS", "HEAD_REVISION", "metadata", "entries", "blobs", "runs", "ledger_meta",
           "merkle_nodes", "alembic_version", "ENTRY_KINDS", "BATCH_DECISIONS", "KINDS_BUT_DECISIONS", "ABOUT_NO_RUN",
           "read_schema_state"]

ENTRY_KINDS = RUN_KINDS + LEDGER_KINDS
BATCH_DECISIONS = "payload LIKE '%\"kind\":\"batch\"%'"
"""The entries ``ix_entries_batch_decisions`` holds: those whose canonical payload text has the member
``"kind":"batch"``, the batch decisions (``run_record.BATCH_DECISION``; hardly any other entry), which
``Ledger.batch_runs`` reads with this very condition (SQLite serves a query from a partial index when the
query's condition contains the index's, written the same; no other index may compete, so the query names no
``kind``)."""

metadata = MetaData()

ledger_meta = Table(
    "ledger_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

entries = Table(
    "entries", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False, doc="1, 2, 3, ... with no gaps"),
    Column("run_id", String(32), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("recorded_at", String(32), nullable=False, doc="UTC, ISO 8601; part of the entry hash"),
    Column("payload", Text, nullable=False, doc="RFC 8785 canonical JSON"),
    Column("payload_sha256", String(64), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("entry_hash", String(64), nullable=False),
    CheckConstraint("kind IN ('run','input','captured','decision','certificate','abort','replay','review',"
                    "'registration','policy')", name="ck_entries_kind"),  # since 7: 'registration', 'policy'
    # since 6: one run's entries of a kind but decision (before: ix_entries_run_id_kind, of every kind, since 2);
    # a run's decisions are the seqs of its record (runs.first_seq .. last_seq)
    Index("ix_entries_run_id_kind_but_decisions", "run_id", "kind", sqlite_where=text(KINDS_BUT_DECISIONS),
          postgresql_where=text(KINDS_BUT_DECISIONS)),
    # since 6, PostgreSQL only: the same in chain order, without sorting them (a SQLite index holds the rowid, here
    # seq, after its columns: the index above is this one there); before, ix_entries_run_id_kind_seq (since 4)
    Index("ix_entries_run_id_kind_seq_but_decisions", "run_id", "kind", "seq",
          postgresql_where=text(KINDS_BUT_DECISIONS)).ddl_if(dialect="postgresql"),
    Index("ix_entries_batch_decisions", "seq", sqlite_where=text(BATCH_DECISIONS),
          postgresql_where=text(BATCH_DECISIONS)),  # since 4: the decisions that tie runs to batches
    Index("ix_entries_about_no_run", "seq", sqlite_where=text(ABOUT_NO_RUN),
          postgresql_where=text(ABOUT_NO_RUN)),  # since 7: the registrations and policies
)

blobs = Table(
    "blobs", metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("content", LargeBinary, nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("run_id", String(32), primary_key=True),
    Column("name", String(100), nullable=False),
    Column("status", String(16), nullable=False),
    Column("verdict", String(16), nullable=True),  # since 7 (before: 8): INCONCLUSIVE
    Column("profile", String(16), nullable=False),
    Column("seed", String(24), nullable=False),
    Column("knobs_hash", String(64), nullable=False),
    Column("spec_sha256", String(64), nullable=False),
    Column("certificate_sha256", String(64), nullable=True),
    Column("recorded_at", String(32), nullable=False),
    Column("first_seq", Integer, nullable=False),
    Column("last_seq", Integer, nullable=False),
    CheckConstraint("status IN ('completed','aborted')", name="ck_runs_status"),
    Index("ix_runs_name", "name"),  # since 2: batch replay by spec name
    Index("ix_runs_recorded_at", "recorded_at"),  # since 2: batch replay since a date
    Index("ix_runs_first_seq", "first_seq"),  # since 4: certa list, the newest runs first
)

merkle_nodes = Table(  # since 3
    "merkle_nodes", metadata,
    # since 6, the key (before: (level, position)); INTEGER PRIMARY KEY: SQLite's rowid, so the nodes a run completes
    # are appended at the end of the table's own B-tree
    Column("node_seq", Integer, nullable=False, autoincrement=False,
           doc="1, 2, 3, ...: the node's number in the order the entries complete the nodes (merkle.node_seq)"),
    Column("level", Integer, nullable=False, doc="the subtree has 2^level leaves; since 6 at least 1 (no leaves)"),
    Column("position", Integer, nullable=False, doc="its first leaf is position·2^level (leaf i is entry i + 1)"),
    Column("hash", CHAR(64), nullable=False, doc="hex MTH of the subtree; level 0: SHA-256(0x00 ‖ entry_hash)"),
    PrimaryKeyConstraint("node_seq", name="pk_merkle_nodes"),
)

# Alembic's version table (its own definition: one VARCHAR(32) primary key), outside ``metadata`` so
# that creating the ledger's tables never creates it in an old ledger.
alembic_version = Table(
    "alembic_version", MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def read_schema_state(conn: Connection) -> SchemaState:
    """The ledger schema state of the database on ``conn`` (inspects first: a missing table is no error)."""
    inspector = inspect(conn)
    if not inspector.has_table(ledger_meta.name):
        return SchemaState(None, None)
    version = conn.execute(select(ledger_meta.c.value).where(ledger_meta.c.key == "schema_version")).scalar()
    revision = None
    if inspector.has_table(alembic_version.name):
        revision = conn.execute(select(alembic_version.c.version_num)).scalar()
    return SchemaState(version, revision)
