"""certa's engine: spec → plan → stages → gates → certificate. ``run`` is the Python API of ``certa run``."""

from __future__ import annotations

from .errors import (CertaError, InputError, LedgerError, LedgerIntegrityError, ProfileAbort, ReplayDivergence,
                     SpecError, StageError)
from .interpreter import RunResult, run
from .spec import Plan, load_plan

__all__ = [
    "CertaError",
    "InputError",
    "LedgerError",
    "LedgerIntegrityError",
    "load_plan",
    "Plan",
    "ProfileAbort",
    "ReplayDivergence",
    "run",
    "RunResult",
    "SpecError",
    "StageError",
]
