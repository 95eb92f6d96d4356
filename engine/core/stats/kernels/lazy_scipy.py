"""``scipy.stats`` and ``scipy.special``, each imported on first attribute access.

The stage registry imports every stage module, and with them their kernels, at every command that reads a
spec or a certificate (``certa validate``, ``certa show``); importing ``scipy.special`` takes about 0.18 s and
``scipy.stats`` about 0.6 s, which only a run needs. Modules write
``from certa.engine.core.stats.kernels.lazy_scipy import special, stats`` and call ``special.ndtri(...)`` or
``stats.beta.ppf(...)`` as usual: the same functions, loaded when first called.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["LazyModule", "special", "stats"]


class LazyModule:
    """A module that is imported when one of its attributes is first read."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazily imported module {self._name!r}>"


special = LazyModule("scipy.special")
stats = LazyModule("scipy.stats")
