"""certa's audit ledger: append-only, hash-chained entries with content-addressed inputs (SQLAlchemy).

The names below load their modules on first use (PEP 562), so ``import certa.ledger`` (e.g. for
``DEFAULT_LEDGER_FILE`` at ``certa --help``) does not import SQLAlchemy.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["DEFAULT_LEDGER_FILE", "EntryRow", "Ledger", "Problem", "RunRow", "VerifyReport", "resolve_ledger_url",
           "verify_ledger"]

DEFAULT_LEDGER_FILE = "certa-ledger.db"

_LAZY = {"EntryRow": "store", "Ledger": "store", "RunRow": "store", "resolve_ledger_url": "store",
         "Problem": "verify", "VerifyReport": "verify", "verify_ledger": "verify"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
