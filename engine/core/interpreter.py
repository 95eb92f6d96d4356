"""The interpreter: a resolved ``Plan`` and its tables in, certificate content and decisions out.

``certa.engine.core.inputs.load_tables`` loads and hashes the inputs; ``execute`` runs the stages in order, each with its own seeded
stream, and evaluates the gates. Nothing here seals or records: that is the run service
(``certa.engine.services.run``), which the Python API ``engine.run`` and ``certa run`` call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any


from certa.engine.foundation.canonical import RecordColumns, to_jsonable
from certa.engine.core.certificate import CONTENT_FORMAT, library_versions
from certa.engine.core.gate_family import evaluate_family
from certa.engine.foundation.errors import InputError, ProfileAbort, SpecError, StageError
from certa.engine.core.gates import evaluate_gate, run_verdict
from certa.engine.core.inputs import UNUSED_WEIGHTS, unused_weights_detail
from certa.engine.core.endpoint_input import ENDPOINT_FORMAT, read_declaration
from certa.engine.core.models.lease import broken_leases
from certa.engine.core.models.manifest import MODEL_FORMAT, read_manifest
from certa.engine.core.metric_paths import KeyColumn, closest, format_steps, key_column, key_values, parse_metric
from certa.engine.core.seeds import DERIVATION, stage_generator, stage_seed_record
from certa.engine.core.spec import Plan, knob_strings
from certa.engine.core.stages import REGISTRY, Decision, StageContext
from certa.engine.core.stages.base import Concatenated, DecisionColumns, LedgerReader, decision_parts
from certa.engine.core.stages.unused_columns import unread_column_decisions, unread_columns
from certa.engine.core.tables import Table
from certa.engine.core.progress import Notify, throttled_progress

__all__ = ["execute", "Execution", "StageDecision", "StageDecisions", "RunDecisions",
           "AbortedExecution", "check_data_keys", "input_decisions", "throttled_progress", "Notify"]


@dataclass(frozen=True)
class StageDecision:
    """A decision together with the stage that made it (``stage`` is None for gate decisions)."""

    stage: str | None
    decision: Decision


class StageDecisions(Sequence[StageDecision]):
    """One part of one stage's decisions (a tuple of ``Decision`` or a ``DecisionColumns``), each read as a
    ``StageDecision``; the ledger reads ``stage`` and ``decisions`` whole instead."""

    __slots__ = ("stage", "decisions")

    def __init__(self, stage: str | None, decisions: Sequence[Decision]) -> None:
        self.stage = stage
        self.decisions = decisions

    def __len__(self) -> int:
        return len(self.decisions)

    def __getitem__(self, index: int) -> StageDecision:  # type: ignore[override]
        return StageDecision(self.stage, self.decisions[index])

    def __iter__(self) -> Iterator[StageDecision]:
        return (StageDecision(self.stage, d) for d in self.decisions)

    def __reduce__(self) -> tuple[Any, ...]:
        return StageDecisions, (self.stage, self.decisions)

    def record(self) -> RecordColumns:
        """The decisions as ``{"kind", "detail"}`` records for ``certa.engine.foundation.canonical.canonical_records`` (how the
        ledger encodes them): ``DecisionColumns`` stay columns, other decisions are one cell each."""
        if isinstance(self.decisions, DecisionColumns):
            detail = RecordColumns(self.decisions.columns, self.decisions.constants)
            return RecordColumns({"detail": detail}, {"kind": self.decisions.kind})
        return RecordColumns({"kind": [d.kind for d in self.decisions], "detail": [d.detail for d in self.decisions]})


class RunDecisions(Concatenated[StageDecision]):
    """A run's decisions in order, kept grouped (``parts``: ``StageDecisions``) rather than wrapped one by one,
    so that a stage's 10^6 columnar decisions stay arrays until something reads them."""

    @classmethod
    def of(cls, stage: str | None, decisions: Sequence[Decision]) -> RunDecisions:
        """``decisions`` of ``stage``, one group per part (``certa.engine.core.stages.base.decision_parts``)."""
        return cls([StageDecisions(stage, part) for part in decision_parts(decisions)])

    def __add__(self, other: RunDecisions) -> RunDecisions:
        return RunDecisions([*self.parts, *other.parts])


@dataclass(frozen=True)
class Execution:
    """Everything a run produced before it is sealed and recorded."""

    plan: Plan
    tables: Mapping[str, Table]
    content: Mapping[str, Any]
    decisions: RunDecisions
    captured: Mapping[str, Mapping[str, Table]]

    @property
    def verdict(self) -> str:
        return str(self.content["verdict"])


class AbortedExecution(Exception):
    """A ProfileAbort raised inside ``execute``, with the decisions made before it."""

    def __init__(self, abort: ProfileAbort, decisions: RunDecisions) -> None:
        super().__init__(str(abort))
        self.abort = abort
        self.decisions = decisions


def execute(plan: Plan, tables: Mapping[str, Table], *, ledger: LedgerReader | None = None,
            captured: Mapping[str, Mapping[str, Table]] | None = None,
            notify: Notify | None = None, content_format: int = CONTENT_FORMAT,
            registration: Mapping[str, Any] | None = None) -> Execution:
    """Run the plan's stages and gates on loaded tables; nothing is recorded.

    ``content_format`` is the structure of the certificate's content to build: the newest for a run, the one a
    run recorded for its replay (format 1 has no ``family`` block, formats 1 and 2 no ``unread_columns``, no
    ``unread_columns`` decisions and no gate ``outcome``; ``certa.engine.core.certificate``).
    ``captured`` (a replay) hands each stage the tables it captured in the original run. A table a stage
    declares in ``StageType.produces`` is readable by the later stages as ``<stage id>.<table>`` once the stage has
    run (the certificate's ``inputs`` stay the declared inputs; the table is listed under ``captured``).
    Raises ``AbortedExecution`` wrapping a ``ProfileAbort``, or ``SpecError`` before any stage runs when a gate
    names a key its input does not hold (``check_data_keys``).
    ``registration`` is what format 3 records of the run's registration (``certa.engine.services.registrations``;
    None: not registered); a replay passes the one its run recorded.
    """
    check_data_keys(plan, tables)
    read = {name: replace(table) for name, table in tables.items()}  # this run's own record of columns read
    readable = dict(read)  # the inputs, then each table a stage produces (StageType.produces) once it has run
    outputs: dict[str, Mapping[str, Any]] = {}
    decisions = RunDecisions(())
    inputs = input_decisions(plan, tables)
    if inputs:
        decisions += RunDecisions.of(None, inputs)
    captured_out: dict[str, Mapping[str, Table]] = {}
    scorer_read: set[str] = set()  # inputs a capturing stage reads outside the tables in a run, not in its replay
    seeds: dict[str, Any] = {}
    for index, stage in enumerate(plan.stages, start=1):
        stage_type = REGISTRY.get(stage.use, stage.version)
        if notify:
            notify(f"[{index}/{len(plan.stages)}] stage '{stage.id}' ({stage.use} v{stage.version})")
        seeds[stage.id] = stage_seed_record(plan.seed, stage.id)
        ctx = StageContext(
            stage_id=stage.id, knobs=stage.knobs, tables=readable, rng=stage_generator(plan.seed, stage.id),
            profile=plan.profile, upstream=dict(outputs),
            seed={**seeds[stage.id], "knobs_hash": plan.knobs_hash},
            ledger=ledger, captured=(captured or {}).get(stage.id),
            **({"progress": throttled_progress(notify, f"    {stage.id}: ")} if notify else {}),
        )
        try:
            result = stage_type.run(ctx)
        except ProfileAbort as abort:
            abort.stage_id = abort.stage_id or stage.id
            decisions += RunDecisions.of(stage.id, abort.decisions)
            raise AbortedExecution(abort, decisions) from None
        except StageError as exc:
            raise StageError(f"stage '{stage.id}' ({stage.use}): {exc}") from None
        if result.captured or ctx.captured:  # a replay reads the captured tables instead of these inputs
            scorer_read.update(name for name in knob_strings(stage.knobs) if name in read)
        outputs[stage.id] = to_jsonable(result.outputs)
        decisions += RunDecisions.of(stage.id, result.decisions)
        if result.captured:
            captured_out[stage.id] = dict(result.captured)
            readable.update({f"{stage.id}.{name}": result.captured[name] for name in stage_type.produces
                             if name in result.captured})

    unread = {name: None if name in scorer_read else unread_columns(table) for name, table in read.items()}
    if content_format >= 3:
        decisions += RunDecisions.of(None, unread_column_decisions(
            unread, (d.decision for d in decisions)))
    family = evaluate_family(plan.family, plan.gates, outputs)
    gate_results = tuple(family.member_results.get(gate.id) or evaluate_gate(gate, outputs) for gate in plan.gates)
    gate_records = [{"id": g.id, "metric": g.metric, "value": g.value, "threshold": dict(g.threshold),
                     "passed": g.passed, "reason": g.reason,
                     **({"outcome": g.outcome} if content_format >= 3 else {})} for g in gate_results]
    decisions += RunDecisions.of(None, tuple(Decision("gate", record) for record in gate_records))
    content: dict[str, Any] = {
        "certa_format": content_format,
        "spec": {"name": plan.name, "description": plan.description, "sha256": plan.spec_sha256,
                 "profile": plan.profile},
        "knobs_hash": plan.knobs_hash,
        "knobs": plan.knobs,
        **({"registration": registration} if content_format >= 3 else {}),
        "seed": {"root": str(plan.seed), "derivation": DERIVATION, "stages": seeds},
        "inputs": [input_record(t, unread[name]) if content_format >= 3 else
                   {"name": t.name, "sha256": t.sha256, "rows": t.n_rows, "format": t.fmt, "columns": list(t.columns)}
                   for name, t in tables.items()],
        "stages": outputs,
        "gates": gate_records,
        **({"family": family.record} if content_format >= 2 else {}),
        "verdict": run_verdict(g.outcome for g in gate_results),
        "versions": library_versions(),
    }
    if captured_out:
        content["captured"] = [{"stage": sid, "name": name, "sha256": t.sha256, "rows": t.n_rows}
                               for sid, group in captured_out.items() for name, t in group.items()]
    broken = broken_leases()
    if broken:  # a stage's model files scored where they lie, opened for writing meanwhile (models.lease)
        raise InputError(f"model file(s) {', '.join(broken[:3])} were opened for writing while certa scored them; "
                         "nothing is recorded: copy the model to a folder nothing writes to")
    return Execution(plan=plan, tables=tables, content=to_jsonable(content), decisions=decisions,
                     captured=captured_out)


def input_record(table: Table, unread: list[str] | None) -> dict[str, Any]:
    """An input as content format 3 records it: name, SHA-256, rows, format and columns; a plain table's
    ``unread_columns``; a model folder's ``files`` (path, size, SHA-256: what ``sha256sum`` prints for each, bound
    by the manifest's SHA-256, the input's) and ``weights`` (the files loaded as weights); a served model's
    ``endpoint`` (its declaration: URL, served name, the key's variable name, client settings; never the key);
    ``overridden`` when it was read from a path (or URL) given instead of the spec's."""
    record: dict[str, Any] = {"name": table.name, "sha256": table.sha256, "rows": table.n_rows, "format": table.fmt,
                              "columns": list(table.columns)}
    if unread is not None:
        record["unread_columns"] = unread
    if table.fmt == MODEL_FORMAT:
        manifest = read_manifest(table.name, table.raw)
        record["files"] = [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in manifest.files]
        record["weights"] = list(manifest.weights)
    if table.fmt == ENDPOINT_FORMAT:
        record["endpoint"] = read_declaration(table.name, table.raw).record()
    if table.overridden:
        record["overridden"] = True
    return record


def input_decisions(plan: Plan, tables: Mapping[str, Table]) -> tuple[Decision, ...]:
    """The decisions the inputs themselves call for, recorded before any stage's (with no stage): one
    ``unused_weights`` decision per model input whose folder holds ``*.safetensors`` files that are not its
    weights (``certa.engine.core.inputs.unused_weights_detail``; dev only, ci and release refuse such a folder)."""
    details = (unused_weights_detail(table.name, read_manifest(table.name, table.raw), plan.profile)
               for table in tables.values() if table.fmt == MODEL_FORMAT)
    return tuple(Decision(UNUSED_WEIGHTS, detail) for detail in details if detail is not None)


def check_data_keys(plan: Plan, tables: Mapping[str, Table]) -> None:
    """Check each gate's keys that only the data know (a bucket, a vendor within that bucket:
    ``GateSpec.data_keys``) against the input the stage reads them from, before anything is computed: a key the
    input does not hold is a ``SpecError`` naming the gate's metric (file, line, column) and the closest real key."""
    knobs = {stage.id: stage.knobs for stage in plan.stages}
    for i, gate in enumerate(plan.gates):
        if not gate.data_keys:
            continue
        stage_id, steps = parse_metric(gate.metric)
        within: list[tuple[KeyColumn, str]] = []
        for data_key in gate.data_keys:
            where = key_column(data_key.source, knobs[stage_id])
            if where is None:
                continue
            values = key_values(where, tables, within)
            if data_key.key not in values:
                hint = closest(data_key.key, values, cutoff=0.5)
                rows = "".join(f" where column '{outer.column}' is '{key}'" for outer, key in within
                               if outer.inputs == where.inputs)
                shown = ", ".join(values[:10]) + (f", ... ({len(values)} in all)" if len(values) > 10 else "")
                held = "" if where.lacks_column(tables) else f" (it holds: {shown or 'nothing'})"
                raise SpecError(f"'{data_key.key}' in '{format_steps(steps[:data_key.step + 1], stage_id)}' is not in "
                                f"{where.describe(tables)}{rows}{held}"
                                + (f"; did you mean '{hint}'?" if hint else ""),
                                file=plan.source, line=gate.line, column=gate.column, path=f"gates[{i}].metric")
            within.append((where, data_key.key))
