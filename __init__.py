"""certa: declarative YAML run specs in, statistical certificates out, every run in a tamper-evident audit ledger.

The Python API in one namespace::

    from certa import Ledger, run

    with Ledger.open("certa-ledger.db") as ledger:  # the audit ledger (a SQLite file or a PostgreSQL URL)
        result = run("specs/paired-ratio/spec.yaml", ledger=ledger)  # what ``certa run`` does

``certa.engine`` (spec, stages, gates, certificate), ``certa.ledger`` (the hash-chained store),
``certa.schemas`` (the JSON Schemas) and ``certa.cli`` (the ``certa`` command) are its packages. The errors load at
once; every other name loads its module on first use (PEP 562), so ``import certa`` imports neither numpy nor
SQLAlchemy.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from certa.engine.foundation.errors import (CertaError, InputError, LedgerError, LedgerIntegrityError,
                                            ProfileAbort, SpecError, StageError)

__all__ = [
    "CertaError",
    "InputError",
    "Ledger",
    "LedgerError",
    "LedgerIntegrityError",
    "load_plan",
    "Plan",
    "ProfileAbort",
    "run",
    "RunResult",
    "SpecError",
    "StageError",
    "verify_ledger",
]

_LAZY = {"run": "certa.engine", "RunResult": "certa.engine", "load_plan": "certa.engine", "Plan": "certa.engine",
         "Ledger": "certa.ledger", "verify_ledger": "certa.ledger"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
