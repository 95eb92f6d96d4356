"""Schema version 5: ``entries`` loses three indexes that no read uses and no append needs, so that recording a
run writes fewer pages (``bench/ledger_reads.py``: 62 database pages a run on 10^6 entries, about 27 after).

Drops ``ix_entries_run_id`` (``entries(run_id)``: every query on a run's entries is served by
``ix_entries_run_id_kind``, which begins with ``run_id``) and the unique constraints ``uq_entries_prev_hash`` and
``uq_entries_entry_hash``. Neither is read by any query, and neither can refuse an entry certa appends: the chain
is extended under the write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL the head row ``FOR UPDATE``) at
``seq`` = head + 1, the primary key, with ``prev_hash`` = the head's hash, so a second entry after the same
head is refused by the primary key; ``entry_hash`` hashes its own ``seq``, so two entries share one only
through a SHA-256 collision. ``certa verify`` recomputes every hash and link, so a row written around certa
with a repeated hash is found there (``certa.ledger.schema``'s docstring).
Sets ``ledger_meta.schema_version`` to ``'5'``.

Read-compatible: no value of any row of ``entries``, ``blobs``, ``runs`` or ``merkle_nodes`` changes, and the
chain head stays as it was. On PostgreSQL the constraints are dropped in place. SQLite cannot drop a table's
constraint in place: ``entries`` is copied into a table declared without them (``INSERT ... SELECT`` in seq
order, every value as it was stored, ``seq`` the rowid as before), the old table dropped, the copy renamed and
its two other indexes built; in the migration's one transaction (a crash leaves the ledger at schema 4). That
takes time and space in proportion to the entries (10^6 entries: about a minute, and the table's size again
in the WAL until the next checkpoint). Everything is written out here (not imported from ``certa.ledger.schema``) so
that this revision stays as released.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BATCH_DECISIONS = "payload LIKE '%\"kind\":\"batch\"%'"
KINDS = "kind IN ('run','input','captured','decision','certificate','abort','replay','review')"
COLUMNS = "seq, run_id, kind, recorded_at, payload, payload_sha256, prev_hash, entry_hash"
UNIQUE = {"uq_entries_entry_hash": "entry_hash", "uq_entries_prev_hash": "prev_hash"}

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def _copy_entries(unique: dict[str, str]) -> None:
    """SQLite: replace ``entries`` by a copy declared with the ``unique`` constraints (name: column) and no others,
    every row copied as stored, then the indexes of schema 4 but ``ix_entries_run_id`` built on it."""
    op.create_table(
        "_entries_copy",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("payload_sha256", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("entry_hash", sa.String(64), nullable=False),
        *(sa.UniqueConstraint(column, name=name) for name, column in unique.items()),
        sa.CheckConstraint(KINDS, name="ck_entries_kind"),
    )
    op.execute(f"INSERT INTO _entries_copy ({COLUMNS}) SELECT {COLUMNS} FROM entries ORDER BY seq")
    op.drop_table("entries")  # and its indexes
    op.rename_table("_entries_copy", "entries")
    op.create_index("ix_entries_batch_decisions", "entries", ["seq"], sqlite_where=sa.text(BATCH_DECISIONS))
    op.create_index("ix_entries_run_id_kind", "entries", ["run_id", "kind"])


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _copy_entries({})
    else:
        op.drop_index("ix_entries_run_id", table_name="entries")
        for name in UNIQUE:
            op.drop_constraint(name, "entries", type_="unique")
    _set_schema_version("5")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _copy_entries(UNIQUE)
    else:
        for name, column in UNIQUE.items():
            op.create_unique_constraint(name, "entries", [column])
    op.create_index("ix_entries_run_id", "entries", ["run_id"])
    _set_schema_version("4")
