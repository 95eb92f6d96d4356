"""Schema version 7: ``runs.verdict`` widened from ``VARCHAR(8)`` to ``VARCHAR(16)``, so that a run whose verdict
is ``INCONCLUSIVE`` (12 characters; ``docs/gates.md``) can be recorded on PostgreSQL, which refuses a longer value
than its column declares (SQLite never enforces a declared length). Sets ``ledger_meta.schema_version`` to ``'7'``.

Read-compatible: no value of any row of ``entries``, ``blobs``, ``runs`` or ``merkle_nodes`` changes, and the
chain head stays as it was. On PostgreSQL the column's type is altered in place (``ALTER COLUMN ... TYPE``: a longer
``varchar`` rewrites no row). SQLite cannot change a column's declared type in place: ``runs`` is copied into a table
declared with the wider column (``INSERT ... SELECT``, every value as it was stored, each row with its rowid), the
old table dropped, the copy renamed and its three indexes built, so that a migrated ledger's schema is exactly that
of one created at 7; in the migration's one transaction (a crash leaves the ledger at schema 6). ``runs`` has a row
a run: 10^5 runs take 0.7-0.8 s. The downgrade narrows the column again: PostgreSQL refuses it while a run's
verdict is ``INCONCLUSIVE`` (and the migration changes nothing), SQLite keeps such a value.

Schema 7 also admits the entry kinds ``registration`` (``certa register``: a spec registered before its evidence)
and ``policy`` (a trust policy approvals were evaluated against: ``certa verify --policy --record``)
in ``entries``' check ``ck_entries_kind``, and builds the partial index ``ix_entries_about_no_run`` (``entries(seq)``
of those entries; a read of the whole table, no row written). A check that admits one kind more refuses no stored
row, so on SQLite, which cannot alter a constraint in place, the table's declaration in ``sqlite_schema`` is
rewritten where it stands (SQLite's own procedure for a change that leaves every stored row valid: "Making Other
Kinds Of Table Schema Changes", https://www.sqlite.org/lang_altertable.html, with ``PRAGMA writable_schema`` and the
schema cookie advanced): no row of ``entries`` is copied. On PostgreSQL the check is dropped and added again. The
downgrade refuses while a registration or a policy is recorded (schema 6 cannot hold them) and changes nothing then.
Everything is written out here (not imported from ``certa.ledger.schema``) so that this revision stays as released.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = ("run_id, name, status, verdict, profile, seed, knobs_hash, spec_sha256, certificate_sha256, recorded_at, "
           "first_seq, last_seq")
INDEXES = {"ix_runs_name": "name", "ix_runs_recorded_at": "recorded_at", "ix_runs_first_seq": "first_seq"}
KINDS_6 = "kind IN ('run','input','captured','decision','certificate','abort','replay','review')"
KINDS_7 = ("kind IN ('run','input','captured','decision','certificate','abort','replay','review','registration',"
           "'policy')")
ABOUT_NO_RUN = "kind IN ('registration', 'policy')"
ABOUT_NO_RUN_INDEX = "ix_entries_about_no_run"

ledger_meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.Text))


def _set_schema_version(value: str) -> None:
    op.execute(ledger_meta.update().where(ledger_meta.c.key == "schema_version").values(value=value))


def _copy_runs(verdict_length: int) -> None:
    """SQLite: replace ``runs`` by a copy whose ``verdict`` is ``VARCHAR(verdict_length)``, every row copied as stored
    with its rowid, then the indexes of schema 4 to 6 built on it."""
    op.create_table(
        "_runs_copy",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(verdict_length), nullable=True),
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
    op.execute(f"INSERT INTO _runs_copy (rowid, {COLUMNS}) SELECT rowid, {COLUMNS} FROM runs ORDER BY rowid")
    op.drop_table("runs")  # and its indexes
    op.rename_table("_runs_copy", "runs")
    for name, column in INDEXES.items():
        op.create_index(name, "runs", [column])


def _resize_verdict(before: int, after: int) -> None:
    """``runs.verdict`` from ``VARCHAR(before)`` to ``VARCHAR(after)``."""
    if op.get_bind().dialect.name == "sqlite":
        _copy_runs(after)
    else:
        op.alter_column("runs", "verdict", type_=sa.String(after), existing_type=sa.String(before),
                        existing_nullable=True)


def _entry_kinds(before: str, after: str) -> None:
    """``ck_entries_kind`` from ``before`` to ``after`` (SQLite: the declaration rewritten in place, module docstring)."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint("ck_entries_kind", "entries", type_="check")
        op.create_check_constraint("ck_entries_kind", "entries", after)
        return
    cookie = int(bind.exec_driver_sql("PRAGMA schema_version").scalar() or 0)
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        changed = bind.exec_driver_sql("UPDATE sqlite_master SET sql = replace(sql, ?, ?) "
                                       "WHERE type = 'table' AND name = 'entries' AND instr(sql, ?) > 0",
                                       (before, after, before)).rowcount
        if changed != 1:
            raise RuntimeError(f"entries' declaration does not hold the check {before!r}: not a certa ledger")
        bind.exec_driver_sql(f"PRAGMA schema_version = {cookie + 1}")
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def upgrade() -> None:
    _resize_verdict(8, 16)
    _entry_kinds(KINDS_6, KINDS_7)
    op.create_index(ABOUT_NO_RUN_INDEX, "entries", ["seq"], sqlite_where=sa.text(ABOUT_NO_RUN),
                    postgresql_where=sa.text(ABOUT_NO_RUN))
    _set_schema_version("7")


def downgrade() -> None:
    registered = op.get_bind().exec_driver_sql(f"SELECT COUNT(*) FROM entries WHERE {ABOUT_NO_RUN}").scalar()
    if registered:
        raise RuntimeError(f"the ledger holds {registered} registration or policy entr{'y' if registered == 1 else 'ies'}, "
                           "which schema 6 cannot hold: it stays at schema 7")
    op.drop_index(ABOUT_NO_RUN_INDEX, table_name="entries")
    _entry_kinds(KINDS_7, KINDS_6)
    _resize_verdict(16, 8)
    _set_schema_version("6")
