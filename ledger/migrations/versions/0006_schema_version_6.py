"""Schema version 6: ``merkle_nodes`` keyed by the last entry a node covers, so that recording a run writes its
nodes on one or two pages (``bench/ledger_reads.py``: of the 25 database pages a run wrote on 10^6 entries,
about 8 were the old key's index).

The table gains the column ``last_seq`` = (position + 1)·2^level, the seq of the subtree's last entry, computed
from the row's ``level`` and ``position``, and ``(last_seq, level)`` becomes its primary key instead of ``(level,
position)``: under the old key each level's new nodes went to the end of that level's own range of the index, a
page per level of the tree; under the new one the nodes that a run's entries complete are adjacent and last.
On SQLite the table is ``WITHOUT ROWID`` (its rows are the key's B-tree). ``last_seq`` is declared first, as the
key begins with it (SQLite 3.40's ``PRAGMA integrity_check`` misreads the NOT NULL columns of a ``WITHOUT ROWID``
table whose key's columns are not declared first). Sets ``ledger_meta.schema_version`` to ``'6'``.

Read-compatible: no value of any row of ``entries``, ``blobs`` or ``runs`` changes, nor ``level``, ``position``
or ``hash`` of a node, and the chain head stays as it was. Neither database replaces a key or reorders columns
in place, so on both the table is renamed, the new one created, every row copied (``INSERT ... SELECT`` in the
new key's order, every value as it was stored) and the old table dropped, in the migration's one transaction (a
crash leaves the ledger at schema 5); 10^6 entries' 2·10^6 nodes take a few seconds. Everything is written out
here (not imported from ``ledger.schema``) so that this revision stays as released.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

OLD = "_merkle_nodes_before"

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def _replace_nodes(*, keyed_by_last_seq: bool) -> None:
    """Replace ``merkle_nodes`` by a table keyed by ``(last_seq, level)`` (schema 6) or by ``(level, position)``
    without ``last_seq`` (schema 3 to 5), every row copied as stored."""
    op.rename_table("merkle_nodes", OLD)
    if op.get_bind().dialect.name == "postgresql":  # a constraint's name is its index's, unique in the schema
        op.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT pk_merkle_nodes TO pk{OLD}")
    columns = [sa.Column("level", sa.Integer, nullable=False), sa.Column("position", sa.Integer, nullable=False),
               sa.Column("hash", sa.CHAR(64), nullable=False)]
    if keyed_by_last_seq:
        op.create_table("merkle_nodes", sa.Column("last_seq", sa.Integer, nullable=False), *columns,
                        sa.PrimaryKeyConstraint("last_seq", "level", name="pk_merkle_nodes"), sqlite_with_rowid=False)
        last_seq = "(position + 1) << level"
        op.execute(f"INSERT INTO merkle_nodes (last_seq, level, position, hash) SELECT {last_seq}, level, position, "
                   f"hash FROM {OLD} ORDER BY {last_seq}, level")
    else:
        op.create_table("merkle_nodes", *columns, sa.PrimaryKeyConstraint("level", "position", name="pk_merkle_nodes"))
        op.execute(f"INSERT INTO merkle_nodes (level, position, hash) SELECT level, position, hash FROM {OLD} "
                   "ORDER BY level, position")
    op.drop_table(OLD)


def upgrade() -> None:
    _replace_nodes(keyed_by_last_seq=True)
    _set_schema_version("6")


def downgrade() -> None:
    _replace_nodes(keyed_by_last_seq=False)
    _set_schema_version("5")
