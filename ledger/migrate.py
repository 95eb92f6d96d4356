"""Schema migrations of the ledger with Alembic: ``certa migrate`` (``Ledger.migrate``) runs them.

The revisions (``ledger/migrations/versions``) are small, ordered and never edited once released:

- ``0001``: schema version 1, the tables of certa 0.1.0 and 0.2.0;
- ``0002``: schema version 2, indexes on ``entries(run_id, kind)``, ``runs(name)`` and ``runs(recorded_at)``
  for batch replay; ``ledger_meta.schema_version`` becomes ``'2'``;
- ``0003``: schema version 3, the table ``merkle_nodes`` (hashes of the complete perfect subtrees of the
  entries' Merkle tree), filled from the entries in the same transaction; ``schema_version`` becomes ``'3'``;
- ``0004``: schema version 4, indexes so that every read a command makes is an index search: ``runs(first_seq)``,
  a partial index of the batch decisions and, on PostgreSQL, ``entries(run_id, kind,
  seq)``; ``schema_version`` becomes ``'4'``;
- ``0005``: schema version 5, ``entries`` without the indexes no read uses and no write needs (``entries(run_id)``
  and the unique constraints on ``prev_hash`` and ``entry_hash``; ``certa.ledger.schema`` says why), so that recording
  writes fewer pages; ``schema_version`` becomes ``'5'``. SQLite cannot drop a constraint in place, so there
  ``entries`` is copied, every value as it was stored, into a table declared without them;
- ``0006``: schema version 6, ``merkle_nodes`` gains the column ``node_seq`` (the node's number in the order the
  entries complete the nodes), its new key, and keeps no leaves (a leaf is its entry's); the index of a run's
  entries by kind leaves out the decisions (a run's decisions are the seqs of its record); so that recording
  writes fewer pages; ``schema_version`` becomes ``'6'``;
- ``0007``: schema version 7, ``runs.verdict`` of 16 characters instead of 8, so that PostgreSQL takes the verdict
  ``INCONCLUSIVE``; SQLite cannot change a column's type in place, so there ``runs`` is copied, every value as it was
  stored, into a table declared with the wider column; ``schema_version`` becomes ``'7'``.

No revision changes a value in a row of ``entries``, ``blobs``, ``runs`` or ``merkle_nodes`` (0006 adds a column
to the last, computed from two others, and drops its leaf rows, which the entries give), nor the chain head: every
hashed byte stays as it was, so ``certa verify`` and checkpoints signed before a migration still hold. A ledger
written by certa 0.1.0 or 0.2.0 has no ``alembic_version`` table; it is stamped at the revision of its
``schema_version`` before upgrading. Alembic is configured here in code (no ``alembic.ini``), runs on the
caller's connection inside the caller's transaction (both SQLite and PostgreSQL have transactional DDL),
so all steps commit together or not at all. Only this module imports Alembic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection

from certa.engine.foundation.errors import LedgerError

from certa.ledger.schema import HEAD_REVISION, REVISIONS, SCHEMA_VERSION, read_schema_state

__all__ = ["MIGRATIONS_DIR", "Migration", "alembic_config", "script_head", "upgrade_to_head"]

MIGRATIONS_DIR = Path(__file__).resolve().with_name("migrations")


@dataclass(frozen=True)
class Migration:
    """What ``upgrade_to_head`` did: from which schema version and revision to which; ``stamped`` when the
    ledger had no ``alembic_version`` (certa <= 0.2.0) and was first stamped at its revision."""

    from_schema: str
    from_revision: str
    to_schema: str
    to_revision: str
    stamped: bool

    @property
    def changed(self) -> bool:
        return self.stamped or self.from_revision != self.to_revision


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration of the ledger's migrations, without an ini file; ``env.py`` runs them on
    ``connection`` (which should be inside a transaction: Alembic then leaves commit to its owner)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.attributes["connection"] = connection
    return config


def script_head() -> str:
    """The newest revision among the migration scripts (``certa.ledger.schema.HEAD_REVISION`` must equal it)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def upgrade_to_head(conn: Connection) -> Migration:
    """Upgrade the ledger on ``conn`` to the head revision, inside the caller's transaction (the caller
    holds the write lock and commits; on an error it rolls everything back, the stamp included)."""
    before = read_schema_state(conn)
    if before.schema_version not in REVISIONS:
        raise LedgerError(f"cannot migrate: schema version {before.schema_version or '(none)'} is not one this "
                          f"certa knows ({', '.join(REVISIONS)})")
    config = alembic_config(conn)
    from_revision = before.revision or REVISIONS[before.schema_version]
    try:
        if before.revision is None:
            command.stamp(config, from_revision)
        command.upgrade(config, "head")
    except CommandError as exc:
        raise LedgerError(f"cannot migrate from revision {from_revision}: {exc}") from None
    after = read_schema_state(conn)
    if (after.schema_version, after.revision) != (SCHEMA_VERSION, HEAD_REVISION):
        raise LedgerError(f"after the migration the ledger says schema {after.schema_version}, revision "
                          f"{after.revision}, not {SCHEMA_VERSION} and {HEAD_REVISION}: its ledger_meta or "
                          "alembic_version was edited by hand; nothing was changed")
    return Migration(from_schema=before.schema_version, from_revision=from_revision, to_schema=SCHEMA_VERSION,
                     to_revision=HEAD_REVISION, stamped=before.revision is None)
