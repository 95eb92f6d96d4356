"""Schema version 6: ``merkle_nodes`` keyed by ``node_seq`` and without the leaves, and the index of a run's
entries by kind without the decisions, so that recording a run writes fewer pages (``bench/ledger_reads.py``: of
the 25 database pages a run wrote on 10^6 entries, about 10 were ``merkle_nodes`` and its key's index).

The table gains the column ``node_seq``, first, and it becomes the primary key instead of ``(level, position)``:
the node's number among the nodes of two or more leaves in the order the entries complete them, (e − 1) −
popcount(e − 1) + level for node (level, position) whose last entry is e = (position + 1)·2^level (computed here
from each row's ``level`` and ``position``). Under the old key each level's new nodes went to the end of that
level's own range of the index, a page per level of the tree; ``node_seq`` is SQLite's rowid, so the nodes a run
completes are appended at the end of the table's one B-tree. The leaves (level 0), half of the rows, are no longer
stored: a leaf is SHA-256(0x00 ‖ entry_hash) of its entry, which a reader takes from ``entries`` by seq.

``ix_entries_run_id_kind`` (and PostgreSQL's ``ix_entries_run_id_kind_seq``) give way to the same indexes of the
entries of every kind but ``decision`` (``..._but_decisions``, partial): decisions are the bulk of the entries (7
of a small run's 11, a bake-off's 10^6), each run's at a random place of the index (run ids are random), and a
run's decisions are read as the seqs of its record instead (``runs.first_seq`` .. ``last_seq``, a primary-key
range). Sets ``ledger_meta.schema_version`` to ``'6'``.

Read-compatible: no value of any row of ``entries``, ``blobs`` or ``runs`` changes, nor ``level``, ``position``
or ``hash`` of a node of two or more leaves, and the chain head stays as it was. Neither database replaces a key
or reorders columns in place, so on both the table is renamed, the new one created, every node of level 1 and
above copied (in batches, every value as it was stored, ``node_seq`` computed) and the old table dropped, in
the migration's one transaction (a crash leaves the ledger at schema 5); 10^6 entries' 10^6 such nodes take a few
seconds. The downgrade computes the leaves again from the entries. Everything is written out here (not imported
from ``certa.ledger.schema`` or ``certa.ledger.merkle``) so that this revision stays as released.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

OLD = "_merkle_nodes_before"
BUT_DECISIONS = "kind IN ('run', 'input', 'captured', 'certificate', 'abort', 'replay', 'review')"

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def _leaves() -> None:
    """Insert the leaves of schema 3 to 5's ``merkle_nodes``: (0, seq − 1, SHA-256(0x00 ‖ entry_hash)) of every
    entry, read and written in batches."""
    bind, last = op.get_bind(), 0
    while True:
        rows = bind.exec_driver_sql(f"SELECT seq, entry_hash FROM entries WHERE seq > {last} ORDER BY seq "
                                    "LIMIT 50000").fetchall()
        if not rows:
            return
        op.bulk_insert(sa.table("merkle_nodes", sa.column("level"), sa.column("position"), sa.column("hash")),
                       [{"level": 0, "position": seq - 1,
                         "hash": hashlib.sha256(b"\x00" + bytes.fromhex(digest)).hexdigest()} for seq, digest in rows])
        last = rows[-1][0]


def _copy_nodes() -> None:
    """Copy the nodes of two or more leaves from ``OLD`` into schema 6's table, each numbered by its ``node_seq``,
    level by level in position order (the old key's order), a batch at a time."""
    bind = op.get_bind()
    table = sa.table("merkle_nodes", *(sa.column(name) for name in ("node_seq", "level", "position", "hash")))
    top = bind.exec_driver_sql(f"SELECT MAX(level) FROM {OLD}").scalar() or 0
    for level in range(1, int(top) + 1):
        last = -1
        while True:
            rows = bind.exec_driver_sql(f"SELECT position, hash FROM {OLD} WHERE level = {level} AND position > {last} "
                                        "ORDER BY position LIMIT 50000").fetchall()
            if not rows:
                break
            numbered = []
            for position, digest in rows:
                before = ((position + 1) << level) - 1  # entries before the node's last one
                numbered.append({"node_seq": before - bin(before).count("1") + level, "level": level,
                                 "position": position, "hash": digest})
            op.bulk_insert(table, numbered)
            last = rows[-1][0]


def _replace_nodes(*, keyed_by_node_seq: bool) -> None:
    """Replace ``merkle_nodes`` by a table keyed by ``node_seq`` without the leaves (schema 6) or by ``(level,
    position)`` with them (schema 3 to 5), every other value copied as stored."""
    op.rename_table("merkle_nodes", OLD)
    if op.get_bind().dialect.name == "postgresql":  # a constraint's name is its index's, unique in the schema
        op.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT pk_merkle_nodes TO pk{OLD}")
    columns: list[sa.schema.SchemaItem] = [sa.Column("level", sa.Integer, nullable=False),
                                           sa.Column("position", sa.Integer, nullable=False),
                                           sa.Column("hash", sa.CHAR(64), nullable=False)]
    if keyed_by_node_seq:
        op.create_table("merkle_nodes", sa.Column("node_seq", sa.Integer, nullable=False, autoincrement=False),
                        *columns, sa.PrimaryKeyConstraint("node_seq", name="pk_merkle_nodes"))
        _copy_nodes()
    else:
        op.create_table("merkle_nodes", *columns, sa.PrimaryKeyConstraint("level", "position", name="pk_merkle_nodes"))
        _leaves()
        op.execute(f"INSERT INTO merkle_nodes (level, position, hash) SELECT level, position, hash FROM {OLD} "
                   "ORDER BY level, position")
    op.drop_table(OLD)


def _run_indexes(*, but_decisions: bool) -> None:
    """The indexes of a run's entries by kind: of every kind (schema 2 to 5) or of every kind but ``decision``."""
    postgresql = op.get_bind().dialect.name == "postgresql"
    suffix, where = ("_but_decisions", sa.text(BUT_DECISIONS)) if but_decisions else ("", None)
    op.create_index(f"ix_entries_run_id_kind{suffix}", "entries", ["run_id", "kind"], sqlite_where=where,
                    postgresql_where=where)
    if postgresql:
        op.create_index(f"ix_entries_run_id_kind_seq{suffix}", "entries", ["run_id", "kind", "seq"],
                        postgresql_where=where)


def _drop_run_indexes(*, but_decisions: bool) -> None:
    suffix = "_but_decisions" if but_decisions else ""
    op.drop_index(f"ix_entries_run_id_kind{suffix}", table_name="entries")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index(f"ix_entries_run_id_kind_seq{suffix}", table_name="entries")


def upgrade() -> None:
    _replace_nodes(keyed_by_node_seq=True)
    _drop_run_indexes(but_decisions=False)
    _run_indexes(but_decisions=True)
    _set_schema_version("6")


def downgrade() -> None:
    _replace_nodes(keyed_by_node_seq=False)
    _drop_run_indexes(but_decisions=True)
    _run_indexes(but_decisions=False)
    _set_schema_version("5")
