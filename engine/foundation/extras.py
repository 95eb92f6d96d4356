"""certa's optional extras, and the one error a command gives when the extra it needs is not installed.

Each extra of ``pyproject.toml`` is named here with the top-level modules it brings (and, for ``models``, torch,
which the user installs beside it). A command that needs an extra calls ``require_extra`` before it starts its
work; ``missing_extra`` turns a ``ModuleNotFoundError`` raised later (by a library that imports a module of
the extra itself) into the same error. Either way the command prints one line and exits 2::

    error: certa report needs the 'report' extra (jinja2 is not installed): python3 -m pip install 'certa[report]'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from certa.engine.foundation.errors import MissingExtraError

__all__ = ["EXTRAS", "require_extra", "missing_extra", "extra_of_module", "install_command"]

EXTRAS: Mapping[str, tuple[str, ...]] = {
    "report": ("matplotlib", "jinja2", "markupsafe"),
    "postgres": ("psycopg",),
    "dask": ("dask", "distributed"),
    "models": ("torch", "transformers", "tokenizers", "safetensors", "model_signing", "OpenSSL"),
}
"""Each optional extra: the top-level modules certa imports from it (the distributions' import names)."""

_INSTALL: Mapping[str, str] = {
    # torch is not in the extra (an unpinned torch pulls a multi-GB CUDA build): the build for the machine, beside it
    "models": "python3 -m pip install 'certa[models]' torch==2.13.0",
}


def install_command(extra: str) -> str:
    """The pip command that installs ``extra``."""
    return _INSTALL.get(extra, f"python3 -m pip install 'certa[{extra}]'")


def extra_of_module(module: str | None) -> str | None:
    """The extra whose modules include ``module`` (a dotted name: its top level decides), or None."""
    top = (module or "").partition(".")[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def _message(extra: str, needed_by: str, module: str) -> str:
    return f"{needed_by} needs the '{extra}' extra ({module.partition('.')[0]} is not installed): {install_command(extra)}"


def require_extra(extra: str, needed_by: str, modules: tuple[str, ...] | None = None) -> None:
    """Import ``modules`` of ``extra`` (all of them by default) now; a ``MissingExtraError`` naming the extra and
    its install command, for ``needed_by`` (``"certa report"``), when one is not installed."""
    for module in EXTRAS[extra] if modules is None else modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise MissingExtraError(_message(extra, needed_by, error.name or module), extra=extra) from None


def missing_extra(error: ImportError, needed_by: str) -> MissingExtraError | None:
    """The ``MissingExtraError`` for a ``ModuleNotFoundError`` of a module an extra brings, or None for any other
    ``ImportError``: a module certa always has, one no extra installs, or a name a module lacks (an installed
    version below the declared bound) is a bug or a broken install, not a missing extra."""
    if not isinstance(error, ModuleNotFoundError):
        return None
    extra = extra_of_module(error.name)
    return None if extra is None or error.name is None else MissingExtraError(_message(extra, needed_by, error.name),
                                                                                   extra=extra)
