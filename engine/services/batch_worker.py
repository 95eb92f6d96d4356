"""What a Dask worker runs for ``certa batch``: one plan on input bytes, returned as plain data.

The worker never reads a file and never touches the ledger. It gets the resolved ``Plan`` (which carries
the spec text), each input's format, SHA-256 and bytes (the client read and hashed them; parsing them is
the worker's job, so a batch parses each input once, in parallel), and a ``LedgerSnapshot`` with the certificates the
plan reads; it parses the bytes, checks each SHA-256 against the one the client hashed, runs
``certa.engine.core.interpreter.execute`` and returns a ``WorkerResult``. The client seals and records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certa.engine.services.batch_ledger import LedgerSnapshot
from certa.engine.foundation.errors import CertaError, InputError
from certa.engine.core.evidence.formats import EVIDENCE_FORMATS, unparsed_table
from certa.engine.core.interpreter import AbortedExecution, RunDecisions, execute, load_tables
from certa.engine.core.spec import Plan
from certa.engine.core.tables import Table, parse_table

__all__ = ["WorkerResult", "InputBlob", "compute_run"]


@dataclass(frozen=True)
class InputBlob:
    """An input as the worker gets it: name, format, the SHA-256 the client computed, and (inline) bytes;
    ``raw`` is None when the bytes travel as a separate Dask argument (large inputs, scattered once)."""

    name: str
    fmt: str
    sha256: str
    raw: bytes | None = None


@dataclass(frozen=True)
class WorkerResult:
    """``status`` is ``completed`` (content, decisions, captured), ``aborted`` (a profile rule: reason, rule,
    stage, decisions so far) or ``error`` (a ``CertaError``: type, message, exit code; nothing to record)."""

    status: str
    content: Mapping[str, Any] | None = None
    decisions: RunDecisions = field(default_factory=lambda: RunDecisions(()))
    captured: Mapping[str, Mapping[str, Table]] = field(default_factory=dict)
    reason: str = ""
    rule: str = ""
    stage_id: str | None = None
    rows: Mapping[str, int] = field(default_factory=dict)
    error_type: str = ""
    exit_code: int = 0
    worker: str = ""


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return ""


def compute_run(plan: Plan, blobs: Sequence[InputBlob], snapshot: LedgerSnapshot, *raws: bytes) -> WorkerResult:
    """Run ``plan`` on the given input bytes (``raws`` fill, in order, the blobs whose ``raw`` is None)."""
    worker = _worker_name()
    pending = list(raws)
    try:
        tables: dict[str, Table] = {}
        for blob in blobs:
            raw = blob.raw if blob.raw is not None else pending.pop(0)
            table = (unparsed_table(blob.name, raw, blob.fmt) if blob.fmt in EVIDENCE_FORMATS
                     else parse_table(blob.name, raw, blob.fmt))
            if table.sha256 != blob.sha256:
                raise InputError(f"input '{blob.name}': the worker received bytes with SHA-256 {table.sha256}, "
                                 f"not the {blob.sha256} the client hashed (transfer corrupted)")
            tables[blob.name] = table
        tables = load_tables(plan, inputs=tables)  # evaluator exports are read with their declared options
        rows = {name: table.n_rows for name, table in tables.items()}
        execution = execute(plan, tables, ledger=snapshot)
    except AbortedExecution as aborted:
        return WorkerResult(status="aborted", decisions=aborted.decisions, reason=str(aborted.abort),
                            rule=aborted.abort.rule, stage_id=aborted.abort.stage_id, rows=rows, worker=worker)
    except CertaError as error:
        return WorkerResult(status="error", reason=str(error), error_type=type(error).__name__,
                            exit_code=error.exit_code, worker=worker)
    return WorkerResult(status="completed", content=execution.content, decisions=execution.decisions,
                        captured=execution.captured, rows=rows, worker=worker)
