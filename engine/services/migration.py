"""Upgrade a ledger's schema in place (``certa migrate``): ``Ledger.migrate`` and what it did, for people."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Alembic loads when the ledger migrates
    from certa.ledger import Ledger
    from certa.ledger.migrate import Migration

__all__ = ["LedgerMigration", "migrate_ledger"]


@dataclass(frozen=True)
class LedgerMigration:
    """The ``migration`` of the ledger at ``location`` (as ``Ledger.location`` names it)."""

    location: str
    migration: Migration

    def as_json(self) -> dict[str, Any]:
        """Whether anything changed, from which schema version and revision to which."""
        done = self.migration
        return {"ok": True, "ledger": self.location, "changed": done.changed, "stamped": done.stamped,
                "from_schema": done.from_schema, "from_revision": done.from_revision,
                "to_schema": done.to_schema, "to_revision": done.to_revision}

    def text(self) -> str:
        """Already at the newest schema, or from which version to which (no value of any entry changed)."""
        done = self.migration
        if not done.changed:
            return (f"{self.location}: already at the newest schema (version {done.to_schema}, revision "
                    f"{done.to_revision}); nothing to do")
        stamp = ", stamped: it had no alembic_version table" if done.stamped else ""
        return (f"migrated {self.location} from schema version {done.from_schema} (revision {done.from_revision}"
                f"{stamp}) to version {done.to_schema} (revision {done.to_revision}); no value of any entry, stored "
                f"input or run changed")


def migrate_ledger(ledger: Ledger) -> LedgerMigration:
    """Upgrade ``ledger`` (opened for writing) to this certa's schema, in one transaction."""
    return LedgerMigration(location=ledger.location, migration=ledger.migrate())
