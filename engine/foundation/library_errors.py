"""A library's exception quoted inside one of certa's errors (``certa.engine.foundation.errors``), on one line."""

from __future__ import annotations

__all__ = ["error_line"]


def error_line(exc: BaseException) -> str:
    """``Type: message`` of a library's exception on one line, at most 300 characters of the message: how an
    error certa does not name itself is quoted inside one that it does (``transformers`` refusing a configuration,
    ``distributed`` failing to start a worker)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}{'...' if len(text) > 300 else ''}"
