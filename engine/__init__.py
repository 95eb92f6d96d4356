"""certa's engine: spec → plan → stages → gates → certificate. ``run`` is the Python API of ``certa run``.

The errors load at once; ``run``, ``load_plan``, ``Plan`` and ``RunResult`` load their modules (numpy, the
stage registry, jsonschema) on first use (PEP 562), so a command that needs only the errors starts fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from certa.engine.foundation.errors import (CertaError, InputError, LedgerError, LedgerIntegrityError, ProfileAbort,
                                      SpecError, StageError)

__all__ = [
    "CertaError",
    "InputError",
    "LedgerError",
    "LedgerIntegrityError",
    "load_plan",
    "Plan",
    "ProfileAbort",
    "run",
    "RunResult",
    "SpecError",
    "StageError",
]

_LAZY = {"run": "services.run", "RunResult": "services.run", "load_plan": "core.spec", "Plan": "core.spec"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
