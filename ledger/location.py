"""Where a ledger is, from ``--ledger`` / ``CERTA_LEDGER``: a plain path is a SQLite file, anything with
``://`` a SQLAlchemy URL. No database library is imported here."""

from __future__ import annotations

import os
from pathlib import Path

from . import DEFAULT_LEDGER_FILE

__all__ = ["ledger_argument", "plain_sqlite_path"]


def ledger_argument(ledger: str | os.PathLike[str] | None) -> str:
    """The ledger as the user gave it: ``ledger``, else ``CERTA_LEDGER``, else ``certa-ledger.db``."""
    return os.fspath(ledger) if ledger is not None else os.environ.get("CERTA_LEDGER") or DEFAULT_LEDGER_FILE


def plain_sqlite_path(ledger: str | os.PathLike[str] | None) -> Path | None:
    """The absolute path of a ledger given as a plain file path, or None when it is given as a URL."""
    value = ledger_argument(ledger)
    return None if "://" in value else Path(value).expanduser().resolve()
