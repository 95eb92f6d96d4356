"""The contract between the interpreter and a stage type.

A stage type is a ``StageType``: a name (``family.method``), a version, the JSON Schema files of its
knobs (``schemas/stages/<name>.schema.json``) and of its outputs (``schemas/outputs/<name>.schema.json``), the
knob names whose values are input-table names, and
a function ``run(ctx) -> StageOutput``. The function reads only its context: tables, resolved knobs,
its own seeded ``numpy.random.Generator``, earlier stages' outputs and (read-only) the ledger. It
returns JSON-able outputs (``content.stages.<id>`` in the certificate) and the decisions it made,
which the ledger records one entry each. It never writes anything itself.

A stage with one decision per input row returns them as ``DecisionColumns`` (a kind, constant fields and
per-row columns: each ``Decision`` is built only when read) inside ``DecisionParts``, so that 10^6 decisions
cost their arrays, not 10^6 Python objects, and the ledger encodes them column by column
(``certa.engine.foundation.canonical.canonical_records``).

Numerical work belongs in ``certa.engine.core.stats``: pure functions, arrays in, frozen dataclasses out.

**A stage is declared by its ``StageType``**, so that nothing outside ``certa.engine.core.stages`` switches on a stage
name: its knobs and outputs schemas (by name), its kernels (``run``), its audit checks, what it reads from a
ledger (``ledger_reads``, through ``LedgerReader``) and its presentation. The core renders nothing: the HTML
section, the "how to read this" paragraphs and the Markdown of ``certa show`` are the presentation layer's (they
use the services' view model, plots and display helpers, and the core may not import the services). So
``StageType.presentation`` is the *dotted name* of the presentation module
(``certa.engine.services.presentation.stages.<module>``, defining ``section``, ``how_to_read`` and optionally
``markdown``), which the presentation layer imports when it renders
(``certa.engine.services.presentation.stages.presentation_of`` and ``markdown_of``). Weighed against the alternatives:

- a table keyed by stage name in the presentation layer (what it replaces) makes adding a stage touch a second
  registry and lets the two drift apart; a registration call from each presentation module needs something
  to import those modules first, which is the same table again;
- a short key resolved by convention (``presentation="bakeoff"``) hides the module a reader must open;
- a declarative description of the section in the core (tables and plots as data) would move the report's
  layout into the core and grow a small language for it.

The dotted name keeps the declaration in the stage module, the import direction services → core, and adding a
stage at its module, its presentation module and its one line in ``certa.engine.core.stages._STAGE_MODULES``; a test
imports every named module.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from certa.engine.foundation.canonical import RecordColumns

if TYPE_CHECKING:  # no numpy to name a stage type or read a recorded decision ('certa show')
    import numpy as np

    from certa.engine.core.tables import Table

__all__ = ["Decision", "DecisionColumns", "DecisionParts", "Concatenated", "decision_parts", "StageOutput",
           "StageContext", "StageType", "LedgerReader", "LedgerReferences", "Progress", "DeclaredTable", "KnobProblem"]

T = TypeVar("T")


@dataclass(frozen=True)
class Decision:
    """One decision a stage made, recorded as one ledger entry (in order).

    ``kind`` is a short machine name (``pairing``, ``degenerate_fallback``, ``profile_rule``,
    ``sequential_check``, ...); ``detail`` is a JSON-able mapping with the numbers behind it.
    """

    kind: str
    detail: Mapping[str, Any]


def _position(index: int, length: int) -> int:
    """``index`` of a sequence of ``length`` items as a position from 0 (negative ones count from the end)."""
    if not -length <= index < length:
        raise IndexError(f"index {index} is outside a sequence of {length}")
    return index % length


class DecisionColumns(Sequence[Decision]):
    """Decisions of one ``kind`` held as columns: decision i's detail is ``{name: columns[name][i], ...,
    **constants}`` (numpy arrays give Python scalars, as ``tolist`` does), built when it is read.

    Picklable and compact (its arrays), for Dask workers; the ledger encodes it per column
    (``certa.engine.core.interpreter.StageDecisions.record``)."""

    __slots__ = ("kind", "columns", "constants", "_rows")
    _CHUNK = 65536
    """Rows materialised at a time while iterating (bounds memory)."""

    def __init__(self, kind: str, columns: Mapping[str, np.ndarray | Sequence[Any]],
                 constants: Mapping[str, Any] | None = None) -> None:
        self.kind = kind
        self.columns = dict(columns)
        self.constants = dict(constants or {})
        self._rows = RecordColumns(self.columns, self.constants).rows

    def __len__(self) -> int:
        return self._rows

    @overload
    def __getitem__(self, index: int) -> Decision: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Decision]: ...
    def __getitem__(self, index: int | slice) -> Decision | Sequence[Decision]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._rows)))
        row = _position(index, self._rows)
        return self._decisions(row, row + 1)[0]

    def __iter__(self) -> Iterator[Decision]:
        for start in range(0, self._rows, self._CHUNK):
            yield from self._decisions(start, min(start + self._CHUNK, self._rows))

    def __reduce__(self) -> tuple[Any, ...]:
        return DecisionColumns, (self.kind, self.columns, self.constants)

    def _decisions(self, start: int, stop: int) -> list[Decision]:
        import numpy as np  # loaded: the columns were made by a stage
        names = list(self.columns)
        cells = [column[start:stop].tolist() if isinstance(column, np.ndarray) else list(column[start:stop])
                 for column in self.columns.values()]
        return [Decision(self.kind, {**dict(zip(names, row)), **self.constants}) for row in zip(*cells)]


class Concatenated(Sequence[T]):
    """Sequences read as one, in order, without copying them (``parts``)."""

    __slots__ = ("parts", "_ends")

    def __init__(self, parts: Sequence[Sequence[T]]) -> None:
        self.parts = tuple(part for part in parts if len(part))
        self._ends = list(itertools.accumulate(len(part) for part in self.parts))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        position = _position(index, len(self))
        part = bisect.bisect_right(self._ends, position)
        return self.parts[part][position - (self._ends[part - 1] if part else 0)]

    def __iter__(self) -> Iterator[T]:
        return itertools.chain.from_iterable(self.parts)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.parts,)


class DecisionParts(Concatenated[Decision]):
    """A stage's decisions as the parts it made them in: tuples of ``Decision`` and ``DecisionColumns``."""


def decision_parts(decisions: Sequence[Decision]) -> tuple[Sequence[Decision], ...]:
    """The parts of a stage's decisions (``DecisionParts``), or the decisions as one part."""
    return decisions.parts if isinstance(decisions, DecisionParts) else (tuple(decisions),)


@dataclass(frozen=True)
class StageOutput:
    """What a stage returns.

    ``outputs`` goes into the certificate under ``content.stages.<stage id>`` (JSON-able, finite floats
    preferred). ``decisions`` go to the ledger (a tuple, or ``DecisionParts`` holding ``DecisionColumns``).
    ``captured`` holds tables the stage produced from outside sources (e.g. scores from a scorer plugin): the
    ledger stores them like inputs and a replay hands them back in ``StageContext.captured`` so the stage
    recomputes without the outside source.
    """

    outputs: Mapping[str, Any]
    decisions: Sequence[Decision] = ()
    captured: Mapping[str, Table] = field(default_factory=dict)


class LedgerReader(Protocol):
    """Everything a stage may read from a ledger, read-only: recorded certificates and the runs of a batch. The
    services implement it (the ledger itself, and the snapshot a batch hands its workers)."""

    def certificate(self, run_id: str) -> dict[str, Any]:
        """The stored certificate of ``run_id``; raises ``LedgerError`` if unknown."""
        ...

    def batch_runs(self, batch_id: str) -> list[str]:
        """The run ids recorded by ``certa batch`` with ``batch_id``, sorted (empty if none)."""
        ...


@dataclass(frozen=True)
class LedgerReferences:
    """What a stage's knobs name in the ledger: recorded runs (ids or prefixes) and batches (their ids)."""

    runs: tuple[str, ...] = ()
    batches: tuple[str, ...] = ()


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
class DeclaredTable:
    """What a spec declares about a table a stage reads, known before anything is read: an input's format and
    ``read:`` options, or the type and resolved knobs of the earlier stage that produces it
    (``StageType.resolve_knobs``)."""

    name: str
    fmt: str | None = None
    read: Mapping[str, Any] = field(default_factory=dict)
    producer: str | None = None
    """The stage type (``model.windows``) of the stage that produces the table, when a stage does."""
    producer_knobs: Mapping[str, Any] = field(default_factory=dict)


class KnobProblem(ValueError):
    """A knob value the spec's declared tables rule out (``StageType.resolve_knobs``); ``knob`` is its path under
    ``with:`` (``("unit",)``, ``("columns", "tokens")``), which the spec loader points at."""

    def __init__(self, message: str, knob: tuple[str, ...]) -> None:
        super().__init__(message)
        self.knob = knob


@dataclass(frozen=True)
class StageType:
    """A registered stage type. ``input_knobs`` name the knobs whose values are input names (a string,
    or a list of strings for stages that read several tables); the spec loader checks them."""

    name: str
    version: str
    input_knobs: tuple[str, ...]
    run: Callable[[StageContext], StageOutput]
    summary: str = ""
    audit_checks: Callable[[Mapping[str, Any]], list[str]] | None = None
    """Optional: method identities ``certa verify`` re-checks on stored outputs (returns problems found)."""
    ledger_reads: Callable[[Mapping[str, Any]], LedgerReferences] | None = None
    """Optional: the runs and batches this type's resolved knobs name, which it reads through ``LedgerReader``
    (a batch fetches them for its workers, and runs a spec that reads the batch itself after the batch's other
    runs); None: it reads nothing from a ledger."""
    presentation: str | None = None
    """Optional: the dotted name of the module that presents this type's outputs in the HTML report, in "how to
    read this" paragraphs and in ``certa show``'s Markdown (``certa.engine.services.presentation.stages.<module>``);
    None: a generic outputs table. A name, not a function: see the module docstring."""
    changes: str = ""
    """What this version changed in the numbers against the previous one (``certa stages`` shows it)."""
    resolve_knobs: Callable[[Mapping[str, Any], Mapping[str, DeclaredTable]], Mapping[str, Any]] | None = None
    """Optional: the knobs (defaults filled) completed and checked against what the spec declares about the
    tables the input knobs name (``DeclaredTable`` by table name), when the spec is loaded and before anything is
    read: a knob whose value follows from an input (the unit of a count column) is filled, one that contradicts
    it raises ``KnobProblem``. None: the knob schema's defaults are the knobs."""
    gate_problem: Callable[[str, Mapping[str, Any], Mapping[str, DeclaredTable]], str | None] | None = None
    """Optional: why a gate's metric path (``<stage id>.<output path>``, ``certa.engine.core.metric_paths``) that the
    output schema allows cannot exist for these resolved knobs and declared tables (a ratio per byte gated under a
    name per token), or None."""
    produces: tuple[str, ...] = ()
    """Names of tables in ``StageOutput.captured`` that later stages of a spec may read as inputs, named
    ``<stage id>.<table>`` in their input knobs (the spec loader accepts those names only after the producing
    stage; the interpreter adds each table once the stage has run, and a replay hands the stage its recorded
    tables back, so later stages read the same bytes)."""
    unused_record_parts: Callable[[Mapping[str, Any], Mapping[str, frozenset[str]]],
                                  list[tuple[str, str, str]]] | None = None
    """Optional, for a stage that reads evaluator exports' records: given its resolved knobs and, by input knob,
    the parts of the records the input's ``read:`` options make (``slices``, ``weights``, ``provenance``:
    ``certa.engine.core.evidence.formats.RECORD_PARTS``), the (input knob, part, why) of each part it would not
    use; the spec loader refuses the option that makes it (``certa.engine.core.spec``). None: the stage reads
    tables by column, so it uses a part only where its knobs name the part's column, and records no export's
    provenance."""

    @property
    def ref(self) -> str:
        """``name@version``, the spelling that pins this version in a spec."""
        return f"{self.name}@{self.version}"

    @property
    def schema_file(self) -> str:
        """``stages/<name>@<version>.schema.json`` when a version froze its own knob schema (its knobs
        differ from the newest version's), else the shared ``stages/<name>.schema.json``."""
        return self._versioned_schema("stages")

    @property
    def output_schema_file(self) -> str:
        """The JSON Schema of this version's outputs (``content.stages.<id>``):
        ``outputs/<name>@<version>.schema.json`` when a version froze its own (its outputs differ from the
        newest version's), else the shared ``outputs/<name>.schema.json``. The file lists the versions it
        describes (``x-certa-stage.versions``)."""
        return self._versioned_schema("outputs")

    def _versioned_schema(self, folder: str) -> str:
        from certa.schemas import schema_exists

        frozen = f"{folder}/{self.ref}.schema.json"
        return frozen if schema_exists(frozen) else f"{folder}/{self.name}.schema.json"
