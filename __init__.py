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

from certa import engine

_LEDGER_NAMES = ("Ledger", "verify_ledger")
__all__ = sorted([*engine.__all__, *_LEDGER_NAMES], key=str.casefold)


def __getattr__(name: str) -> Any:
    """``certa.engine``'s names (its own lazy ones load there) and the ledger's, each loaded on first use."""
    if name in engine.__all__ or name in _LEDGER_NAMES:
        value = getattr(engine if name in engine.__all__ else import_module("certa.ledger"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
