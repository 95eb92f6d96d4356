"""Where a ledger is, from ``--ledger`` / ``CERTA_LEDGER``: a plain path is a SQLite file, anything with
``://`` a SQLAlchemy URL; how a SQLite ledger file is opened read-only, and whether it can be written; and
the refusal of a database that holds another program's tables. No database library is imported here."""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

from certa.engine.foundation.errors import LedgerError

from certa.ledger import DEFAULT_LEDGER_FILE

__all__ = ["ledger_argument", "plain_sqlite_path", "masked_ledger", "command_hint", "sqlite_read_only_uri",
           "sqlite_write_refusal", "refuse_foreign_database"]

# A URL's password, as SQLAlchemy parses it (``scheme://user:password@host...``), but up to the last ``@``:
# in a string SQLAlchemy cannot parse, or that holds an unencoded ``@``, more is hidden rather than less.
_PASSWORD = re.compile(r"^(?P<head>[\w+.-]*://[^:/@]*:)(?P<password>.*)@")
_READ_ONLY_ADVICE = ("nothing can be recorded in it; the read commands (verify, list, show, export, diff, report, "
                     "site, prove, head, decisions, replay --no-record) work on it")
_TABLES_NAMED = 12  # a foreign database's tables named in the refusal, at most


def ledger_argument(ledger: str | os.PathLike[str] | None) -> str:
    """The ledger as the user gave it: ``ledger``, else ``CERTA_LEDGER``, else ``certa-ledger.db``; a value with a
    NUL byte, which no path or URL holds, is a ``LedgerError``."""
    value = os.fspath(ledger) if ledger is not None else os.environ.get("CERTA_LEDGER") or DEFAULT_LEDGER_FILE
    if "\0" in value:
        raise LedgerError("the ledger's location holds a NUL byte; give a file path or a database URL")
    return value


def plain_sqlite_path(ledger: str | os.PathLike[str] | None) -> Path | None:
    """The absolute path of a ledger given as a plain file path, or None when it is given as a URL."""
    value = ledger_argument(ledger)
    return None if "://" in value else Path(value).expanduser().resolve()


def masked_ledger(ledger: str) -> str:
    """A ledger path or URL fit to print: a URL's password replaced by ``***`` (as SQLAlchemy shows it), also
    in a URL that cannot be parsed (a bad port, a stray ``[``)."""
    if "://" not in ledger:
        return ledger
    return _PASSWORD.sub(r"\g<head>***@", ledger, count=1)


def command_hint(*args: str, ledger: str | None = None) -> str:
    """The command line ``certa ARGS...`` to suggest to the user, quoted for a POSIX shell, with ``--ledger``
    repeated when ``ledger`` names another ledger than the one certa opens without it (``CERTA_LEDGER``, else
    ``certa-ledger.db``); a password in a ledger URL is shown as ``***``."""
    import shlex

    words = ["certa", *args]
    if ledger is not None:
        path = plain_sqlite_path(ledger)
        default = ledger_argument(None)
        if (path != plain_sqlite_path(default)) if path is not None else ledger != default:
            words += ["--ledger", masked_ledger(ledger)]
    return " ".join(shlex.quote(word) for word in words)


def sqlite_read_only_uri(path: Path) -> str:
    """The SQLite URI that opens the ledger file ``path`` read-only (``mode=ro``: nothing is initialised or
    changed, not even the journal mode), with ``immutable=1`` when its folder cannot be written and no
    ``-wal`` file lies beside it: on read-only media SQLite could neither create the ``-shm`` file a WAL
    database needs nor take a lock, and an immutable database needs neither, so nothing is created beside
    it. A ``-wal`` file holds commits not yet in the file itself, so it is never ignored. (Immutable means no
    locks: were another account to write the file while it is read, the read would not see that writer; a
    ledger being written has a ``-wal`` file, so this holds for media that nobody writes.)"""
    path = path.resolve()
    immutable = not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists()
    return f"{path.as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def sqlite_write_refusal(path: Path) -> str | None:
    """Why certa cannot record in the SQLite ledger file ``path`` (or create it), as a one-line message, or
    None when it can: the file or its folder (where SQLite keeps its ``-wal``/``-shm`` or journal files) is
    read-only, e.g. on a read-only mount. (``os.access``: for root only a read-only file system refuses.)"""
    folder = path.parent
    if not folder.is_dir():
        return f"cannot create ledger {path}: its folder {folder} does not exist"
    exists = path.exists()
    if exists and not os.access(path, os.W_OK):
        return f"ledger {path} is read-only: {_READ_ONLY_ADVICE}"
    if not os.access(folder, os.W_OK):
        return (f"ledger {path} is read-only (its folder {folder} cannot be written, and SQLite writes its journal "
                f"there): {_READ_ONLY_ADVICE}" if exists else
                f"cannot create ledger {path}: its folder {folder} is read-only")
    return None


def refuse_foreign_database(schema_version: str | None, tables: Collection[str], location: str) -> None:
    """Raise ``LedgerError`` for a database that holds tables but no certa ledger (no schema version in
    ``ledger_meta``): certa never adds its tables beside another program's. An empty database is no error
    (a new ledger is created in it, or it lists no runs)."""
    if schema_version is not None or not tables:
        return
    names = sorted(tables)
    shown = ", ".join(names[:_TABLES_NAMED]) + (f" and {len(names) - _TABLES_NAMED} more" if len(names) > _TABLES_NAMED
                                                 else "")
    raise LedgerError(f"{masked_ledger(location)} is not a certa ledger: it holds tables {shown}; certa adds "
                      "nothing to it (give --ledger a new file or an empty database)")
