"""The ledger's Alembic revisions, oldest first; a released revision is never edited."""
