"""What a Dask worker runs for ``certa batch``: one plan on input bytes, returned as plain data.

The worker never reads an input file and never touches the ledger. It gets the resolved ``Plan`` (which
carries the spec text), each input as an ``InputSource`` (format, bytes and the SHA-256 the client hashed; a
model input also its folder, which the worker reads to evaluate the model, so a model input needs a worker that
sees the same path), and a ``LedgerSnapshot`` with the certificates the plan reads. It reads the inputs as
``certa run`` does (``certa.engine.core.inputs.load_tables``: every format, its read options, the input
limits), so a batch parses each input once, in parallel; runs ``certa.engine.core.interpreter.execute`` (through
``certa.engine.services.registrations.execute_registered``, with the registration record the client found) and
returns a ``WorkerResult``. The client seals and records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from certa.engine.services.batch_ledger import LedgerSnapshot
from certa.engine.foundation.errors import CertaError
from certa.engine.core.inputs import InputSource, load_tables
from certa.engine.core.interpreter import AbortedExecution, RunDecisions
from certa.engine.core.spec import Plan
from certa.engine.core.tables import Table
from certa.engine.services.registrations import execute_registered

__all__ = ["WorkerResult", "compute_run"]


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


def compute_run(plan: Plan, sources: Sequence[InputSource], snapshot: LedgerSnapshot, far: Sequence[str],
                registration: Mapping[str, Any] | None, *raws: bytes) -> WorkerResult:
    """Run ``plan`` on the given inputs, each read by its format as ``certa run`` reads it (``load_tables``), for
    its registration record (``execute_registered``: the client found it in the ledger; None: not registered);
    the sources named in ``far`` travel without their bytes, which ``raws`` give in the same order."""
    worker = _worker_name()
    scattered = dict(zip(far, raws))
    try:
        given = {s.name: replace(s, raw=scattered[s.name]) if s.name in scattered else s for s in sources}
        tables = load_tables(plan, inputs=given)  # each SHA-256 is checked against the client's
        rows = {name: table.n_rows for name, table in tables.items()}
        execution = execute_registered(plan, tables, registration, ledger=snapshot)
    except AbortedExecution as aborted:
        return WorkerResult(status="aborted", decisions=aborted.decisions, reason=str(aborted.abort),
                            rule=aborted.abort.rule, stage_id=aborted.abort.stage_id, rows=rows, worker=worker)
    except CertaError as error:
        return WorkerResult(status="error", reason=str(error), error_type=type(error).__name__,
                            exit_code=error.exit_code, worker=worker)
    return WorkerResult(status="completed", content=execution.content, decisions=execution.decisions,
                        captured=execution.captured, rows=rows, worker=worker)
