"""What a batch leaves in the ledger, and how stages find it again (no Dask here: the workers import this).

A run recorded by ``certa batch`` carries one extra decision, of kind ``batch`` (stage None, the last of
the run's decisions): ``{"batch_id": NAME, "idempotency_key": KEY}``. Decisions are recorded in the ledger
but are not part of the certificate's content, so a batch run's certificate is byte-identical to
``certa run``'s.

The **idempotency key** is SHA-256 of the RFC 8785 canonical JSON of
``{"batch_id", "spec_sha256", "inputs": [input SHA-256s in declaration order], "seed"}``, and the run id is
its first 32 hex digits: recording the same spec twice in the same batch hits the runs table's primary key,
and a re-run of the batch skips the keys already recorded (resume).

Stages read a ledger through ``certa.engine.core.stages.base.LedgerReader`` (certificates, the runs of a batch for
``bakeoff.merge``'s ``shard_batch``), implemented by ``ledger.Ledger`` and here by ``LedgerSnapshot``, the
read-only ledger a Dask worker gets: the certificates and batch listings the client
fetched for it (``ledger_references`` says which, from the stage types).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certa.engine.core.spec import StagePlan
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.base import LedgerReferences
from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.foundation.errors import LedgerError

__all__ = ["idempotency_key", "run_id_for_key", "LedgerSnapshot",
           "ledger_references"]

def idempotency_key(batch_id: str, spec_sha256: str, input_sha256s: Sequence[str], seed: int | str) -> str:
    """SHA-256 (hex) of JCS ``{"batch_id", "spec_sha256", "inputs", "seed"}``: one key per spec of a batch."""
    return canonical_sha256({"batch_id": batch_id, "spec_sha256": spec_sha256, "inputs": list(input_sha256s),
                             "seed": str(seed)})


def run_id_for_key(key: str) -> str:
    """The run id a batch gives the run of ``key``: its first 32 hex digits (the shape of a random run id)."""
    return key[:32]


@dataclass(frozen=True)
class LedgerSnapshot:
    """A read-only ``LedgerReader`` over certificates and batch listings fetched by the client (picklable).

    ``certificates`` maps the run ids (or prefixes) a spec names to certificates; an id it does not hold is
    a ``LedgerError``, as in the ledger itself.
    """

    certificates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    batches: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def certificate(self, run_id: str) -> dict[str, Any]:
        key = run_id.strip().lower()
        if key in self.certificates:
            return dict(self.certificates[key])
        matches = [rid for rid in self.certificates if rid.startswith(key) and len(key) >= 4]
        if len(matches) == 1:
            return dict(self.certificates[matches[0]])
        raise LedgerError(f"run {run_id!r} has no certificate in the ledger (or is not recorded)")

    def batch_runs(self, batch_id: str) -> list[str]:
        return sorted(self.batches.get(batch_id, ()))


def ledger_references(stages: Iterable[StagePlan]) -> LedgerReferences:
    """The runs and batches a plan's stages read from the ledger, as each stage type declares them
    (``StageType.ledger_reads``), in stage order."""
    found = [reads(stage.knobs) for stage in stages
             if (reads := REGISTRY.get(stage.use, stage.version).ledger_reads) is not None]
    return LedgerReferences(runs=tuple(run for refs in found for run in refs.runs),
                            batches=tuple(batch for refs in found for batch in refs.batches))
