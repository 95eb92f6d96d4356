"""certa's audit ledger: append-only, hash-chained entries with content-addressed inputs (SQLAlchemy)."""

from __future__ import annotations

from .store import DEFAULT_LEDGER_FILE, EntryRow, Ledger, RunRow, resolve_ledger_url
from .verify import Problem, VerifyReport, verify_ledger

__all__ = ["DEFAULT_LEDGER_FILE", "EntryRow", "Ledger", "Problem", "RunRow", "VerifyReport", "resolve_ledger_url",
           "verify_ledger"]
