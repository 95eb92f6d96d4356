"""Schema version 1: the ledger as certa 0.1.0 and 0.2.0 create it (frozen; never edit).

Ledgers those versions wrote have exactly these tables but no ``alembic_version``: ``certa.ledger.migrate``
stamps them at this revision instead of running it.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

GENESIS = "0" * 64  # prev_hash of entry 1 (certa.ledger.chain.GENESIS)


def upgrade() -> None:
    ledger_meta = op.create_table(
        "ledger_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "entries",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("payload_sha256", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("entry_hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("entry_hash", name="uq_entries_entry_hash"),
        sa.UniqueConstraint("prev_hash", name="uq_entries_prev_hash"),
        sa.CheckConstraint("kind IN ('run','input','captured','decision','certificate','abort','replay','review')",
                           name="ck_entries_kind"),
    )
    op.create_index("ix_entries_run_id", "entries", ["run_id"])
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=True),
        sa.Column("profile", sa.String(16), nullable=False),
        sa.Column("seed", sa.String(24), nullable=False),
        sa.Column("knobs_hash", sa.String(64), nullable=False),
        sa.Column("spec_sha256", sa.String(64), nullable=False),
        sa.Column("certificate_sha256", sa.String(64), nullable=True),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.Column("first_seq", sa.Integer, nullable=False),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.CheckConstraint("status IN ('completed','aborted')", name="ck_runs_status"),
    )
    op.bulk_insert(ledger_meta, [{"key": "schema_version", "value": "1"}, {"key": "head", "value": f"0:{GENESIS}"}])


def downgrade() -> None:
    raise RuntimeError("revision 0001 is a ledger's first schema: a migration never drops a ledger")
