"""The newest recorded runs (``certa list``), read without SQLAlchemy when the ledger is a SQLite file.

A SQLite file is read through the standard library's ``sqlite3`` (``certa.ledger.sqlite_read``), so that ``certa
list`` answers at once (52–55 ms for a fresh process from an installed wheel, half of it importing click;
``bench/ledger_reads.py``); a database URL through the ledger store. This module imports neither, nor the text
form's module until ``text`` is called (``--json`` does not need it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from certa.ledger.location import plain_sqlite_path
from certa.ledger.rows import RunRow

__all__ = ["RunList", "newest_runs"]


class RunList(NamedTuple):
    """The newest runs of a ledger, newest first."""

    rows: tuple[RunRow, ...]

    def as_json(self) -> list[dict[str, Any]]:
        """One object per run: identity, status, verdict, profile, time and digests."""
        return [{"run_id": r.run_id, "name": r.name, "status": r.status, "verdict": r.verdict, "profile": r.profile,
                 "recorded_at": r.recorded_at, "knobs_hash": r.knobs_hash, "certificate_sha256": r.certificate_sha256}
                for r in self.rows]


def newest_runs(ledger_url: str, limit: int) -> RunList:
    """The ``limit`` newest runs of the ledger at ``ledger_url`` (opened read-only)."""
    path = plain_sqlite_path(ledger_url)
    if path is not None:
        from certa.ledger.sqlite_read import newest_runs as newest_in_file
        return RunList(rows=tuple(newest_in_file(path, limit)))
    from certa.ledger import Ledger  # SQLAlchemy: only for a database URL
    with Ledger.open(ledger_url, create=False, read_only=True) as ledger:
        return RunList(rows=tuple(ledger.runs(limit=limit)))
