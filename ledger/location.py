"""Where a ledger is, from ``--ledger`` / ``CERTA_LEDGER``: a plain path is a SQLite file, anything with
``://`` a SQLAlchemy URL. No database library is imported here."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from . import DEFAULT_LEDGER_FILE

__all__ = ["ledger_argument", "plain_sqlite_path", "masked_ledger", "command_hint"]


def ledger_argument(ledger: str | os.PathLike[str] | None) -> str:
    """The ledger as the user gave it: ``ledger``, else ``CERTA_LEDGER``, else ``certa-ledger.db``."""
    return os.fspath(ledger) if ledger is not None else os.environ.get("CERTA_LEDGER") or DEFAULT_LEDGER_FILE


def plain_sqlite_path(ledger: str | os.PathLike[str] | None) -> Path | None:
    """The absolute path of a ledger given as a plain file path, or None when it is given as a URL."""
    value = ledger_argument(ledger)
    return None if "://" in value else Path(value).expanduser().resolve()


def masked_ledger(ledger: str) -> str:
    """A ledger path or URL fit to print: a URL's password replaced by ``***`` (as SQLAlchemy shows it)."""
    if "://" not in ledger:
        return ledger
    parts = urlsplit(ledger)
    if parts.password is None:
        return ledger
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def command_hint(*args: str, ledger: str | None = None) -> str:
    """The command line ``certa ARGS...`` to suggest to the user, quoted for a POSIX shell, with ``--ledger``
    repeated when ``ledger`` names another ledger than the one certa opens without it (``CERTA_LEDGER``, else
    ``certa-ledger.db``); a password in a ledger URL is shown as ``***``."""
    words = ["certa", *args]
    if ledger is not None:
        path = plain_sqlite_path(ledger)
        default = ledger_argument(None)
        if (path != plain_sqlite_path(default)) if path is not None else ledger != default:
            words += ["--ledger", masked_ledger(ledger)]
    return " ".join(shlex.quote(word) for word in words)
