"""Schema version 2: indexes for batch replay (``certa replay --all --name NAME --since DATE``).

Adds indexes on ``entries(run_id, kind)`` (one run's entries of some kinds), ``runs(name)`` and
``runs(recorded_at)``, and sets ``ledger_meta.schema_version`` to ``'2'``. Read-compatible: no column or
row of ``entries``, ``blobs`` or ``runs`` changes, and the chain head stays as it was.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

INDEXES = {"ix_entries_run_id_kind": ("entries", ["run_id", "kind"]),
           "ix_runs_name": ("runs", ["name"]),
           "ix_runs_recorded_at": ("runs", ["recorded_at"])}

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def upgrade() -> None:
    for name, (table, columns) in INDEXES.items():
        op.create_index(name, table, columns)
    _set_schema_version("2")


def downgrade() -> None:
    for name, (table, _) in INDEXES.items():
        op.drop_index(name, table_name=table)
    _set_schema_version("1")
