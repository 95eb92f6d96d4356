"""Schema version 4: indexes so that every read a command makes is an index search, whatever the ledger's size.

Adds indexes on ``runs(first_seq)`` (``certa list``: the newest runs without reading and sorting the whole
table), on PostgreSQL ``entries(run_id, kind, seq)`` (one run's entries of a kind in chain order, unsorted; on SQLite
``entries(run_id, kind)`` of schema 2 holds the seq already, as the rowid after its columns), and a
partial index on ``entries(seq)`` holding only the entries whose payload text has the member ``"kind":"batch"``
(the decision that ties a run to its ``certa batch``, so that a batch's runs are found among those few instead
of among every decision). Sets ``ledger_meta.schema_version`` to ``'4'``.
Read-compatible: no column or row of ``entries``, ``blobs``, ``runs`` or ``merkle_nodes`` changes, and the
chain head stays as it was. The partial index's condition is written out here (not imported from
``certa.ledger.schema``) so that this revision stays as released.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

BATCH_DECISIONS = "payload LIKE '%\"kind\":\"batch\"%'"

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def upgrade() -> None:
    op.create_index("ix_runs_first_seq", "runs", ["first_seq"])
    if op.get_bind().dialect.name == "postgresql":  # SQLite's ix_entries_run_id_kind holds seq (the rowid) already
        op.create_index("ix_entries_run_id_kind_seq", "entries", ["run_id", "kind", "seq"])
    op.create_index("ix_entries_batch_decisions", "entries", ["seq"], sqlite_where=sa.text(BATCH_DECISIONS),
                    postgresql_where=sa.text(BATCH_DECISIONS))
    _set_schema_version("4")


def downgrade() -> None:
    op.drop_index("ix_entries_batch_decisions", table_name="entries")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_entries_run_id_kind_seq", table_name="entries")
    op.drop_index("ix_runs_first_seq", table_name="runs")
    _set_schema_version("3")
