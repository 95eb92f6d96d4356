"""The contract between the interpreter and a stage type.

A stage type is a ``StageType``: a name (``family.method``), a version, the JSON Schema file of its
knobs (``schemas/stages/<name>.schema.json``), the knob names whose values are input-table names, and
a function ``run(ctx) -> StageOutput``. The function reads only its context: tables, resolved knobs,
its own seeded ``numpy.random.Generator``, earlier stages' outputs and (read-only) the ledger. It
returns JSON-able outputs (``content.stages.<id>`` in the certificate) and the decisions it made,
which the ledger records one entry each. It never writes anything itself.

Numerical work belongs in ``engine.stats``: pure functions, arrays in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..tables import Table

__all__ = ["Decision", "StageOutput", "StageContext", "StageType", "LedgerReader", "Progress"]


@dataclass(frozen=True)
class Decision:
    """One decision a stage made, recorded as one ledger entry (in order).

    ``kind`` is a short machine name (``pairing``, ``degenerate_fallback``, ``profile_rule``,
    ``sequential_check``, ...); ``detail`` is a JSON-able mapping with the numbers behind it.
    """

    kind: str
    detail: Mapping[str, Any]


@dataclass(frozen=True)
class StageOutput:
    """What a stage returns.

    ``outputs`` goes into the certificate under ``content.stages.<stage id>`` (JSON-able, finite floats
    preferred). ``decisions`` go to the ledger. ``captured`` holds tables the stage produced from
    outside sources (e.g. scores from a scorer plugin): the ledger stores them like inputs and a replay
    hands them back in ``StageContext.captured`` so the stage recomputes without the outside source.
    """

    outputs: Mapping[str, Any]
    decisions: tuple[Decision, ...] = ()
    captured: Mapping[str, Table] = field(default_factory=dict)


class LedgerReader(Protocol):
    """Read-only view of the ledger a stage may use (e.g. to read a recorded certificate)."""

    def certificate(self, run_id: str) -> dict[str, Any]:
        """The stored certificate of ``run_id``; raises ``LedgerError`` if unknown."""
        ...


Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)``: report progress of long work; cheap to call."""


def _no_progress(done: int, total: int, label: str) -> None:
    return None


@dataclass(frozen=True)
class StageContext:
    """Everything a stage may read."""

    stage_id: str
    knobs: Mapping[str, Any]
    tables: Mapping[str, Table]
    rng: np.random.Generator
    profile: str
    upstream: Mapping[str, Mapping[str, Any]]
    seed: Mapping[str, Any]
    ledger: LedgerReader | None = None
    captured: Mapping[str, Table] | None = None
    progress: Progress = _no_progress

    def table(self, knob: str) -> Table:
        """The input table named by knob ``knob`` (e.g. ``ctx.table("baseline")``)."""
        return self.tables[self.knobs[knob]]


@dataclass(frozen=True)
class StageType:
    """A registered stage type. ``input_knobs`` name the knobs whose values are input names (a string,
    or a list of strings for stages that read several tables); the spec loader checks them."""

    name: str
    version: str
    input_knobs: tuple[str, ...]
    run: Callable[[StageContext], StageOutput]
    summary: str = ""
    render_markdown: Callable[[Mapping[str, Any]], str] | None = None
    """Optional: a Markdown rendering of this stage's outputs for ``certa show``."""
    audit_checks: Callable[[Mapping[str, Any]], list[str]] | None = None
    """Optional: method identities ``certa verify`` re-checks on stored outputs (returns problems found)."""
    changes: str = ""
    """What this version changed in the numbers against the previous one (``certa stages`` shows it)."""

    @property
    def ref(self) -> str:
        """``name@version``, the spelling that pins this version in a spec."""
        return f"{self.name}@{self.version}"

    @property
    def schema_file(self) -> str:
        """``stages/<name>@<version>.schema.json`` when a version froze its own knob schema (its knobs
        differ from the newest version's), else the shared ``stages/<name>.schema.json``."""
        from schemas import schema_exists

        frozen = f"stages/{self.ref}.schema.json"
        return frozen if schema_exists(frozen) else f"stages/{self.name}.schema.json"
