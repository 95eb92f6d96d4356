"""``certa replay RUN --recompute-evidence``: re-run the models of a recorded run and compare the evidence.

A plain replay recomputes a run's statistics from the tables the ledger stores, including the tables a stage
captured (``model.windows``' per-window NLL sums), without the models. This re-computes those captured tables
themselves:

1. the run's spec is read from the ledger with the stage versions it recorded; its table inputs are the bytes
   the ledger stores; its model inputs are read from folders: ``--input NAME=FOLDER``, else the path the spec
   names (``model: models/base``) resolved against the current directory (so run it from the spec's folder);
2. each folder's manifest (``certa.engine.core.models.manifest``) must be the manifest the run recorded (the input's
   SHA-256): a folder whose files changed is refused, naming the input, before any model is run;
3. every stage runs live (no captured table is handed back), and each table it captures is compared with the
   recorded one: ``reproduced`` when the bytes are identical (same SHA-256); otherwise, per column, the largest
   absolute deviation of a number column (rows in order) or the count of differing cells of a text column, and
   any difference in the row count.

A served model (an ``endpoint`` input) is queried again: at the URL the run recorded, or the one ``--input
NAME=URL`` gives. A serving engine is not bit-deterministic (batching, kernels), so its tables are compared as the
others are, row by row, and the report says how many rows reproduced exactly and the largest deviation: the spread
is measured, not hidden. Its transcripts (every request and response, with their timing) are re-recorded, never
equal by nature, and so listed apart (``transcripts``), outside the verdict.

Nothing is written to the ledger. On one machine, with the same libraries and thread count, the evidence of
``model.windows`` reproduces bit for bit (``certa.engine.core.models.windows``: deterministic kernels, float64 sums);
elsewhere the deviations say by how much it moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from certa.ledger import Ledger
from certa.ledger.run_record import read_stored_run

from certa.engine.foundation.errors import InputError
from certa.engine.core.inputs import load_tables
from certa.engine.core.interpreter import Notify, execute
from certa.engine.core.endpoint_input import ENDPOINT_FORMAT
from certa.engine.core.models.manifest import MODEL_FORMAT
from certa.engine.core.runtimes.endpoint import TRANSCRIPT
from certa.engine.core.spec import load_plan
from certa.engine.core.tables import Table
from certa.engine.services.stored_inputs import stored_source, stored_table

__all__ = ["TableComparison", "RecomputedEvidence", "recompute_evidence"]


@dataclass(frozen=True)
class TableComparison:
    """One captured table: recorded against recomputed."""

    stage: str
    name: str
    recorded_sha256: str
    recomputed_sha256: str
    rows: tuple[int, int]
    deviations: Mapping[str, Any]
    """column -> largest absolute deviation (number column) or differing cells (text column)."""
    rows_reproduced: int = 0
    """Rows (of the first min(rows) in order) whose every cell is the recorded one."""

    @property
    def reproduced(self) -> bool:
        return self.recorded_sha256 == self.recomputed_sha256

    def as_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "table": self.name, "reproduced": self.reproduced,
                "recorded_sha256": self.recorded_sha256, "recomputed_sha256": self.recomputed_sha256,
                "rows": {"recorded": self.rows[0], "recomputed": self.rows[1]}, "rows_reproduced": self.rows_reproduced,
                "deviations": dict(self.deviations)}


@dataclass(frozen=True)
class RecomputedEvidence:
    """The comparison of every table the run captured (``certa replay --recompute-evidence``)."""

    run_id: str
    folders: Mapping[str, str]
    tables: tuple[TableComparison, ...]
    transcripts: tuple[TableComparison, ...] = ()
    """A served model's re-recorded transcripts (module docstring): listed, outside the verdict."""

    @property
    def reproduced(self) -> bool:
        return all(t.reproduced for t in self.tables)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.reproduced, "run_id": self.run_id, "model_folders": dict(self.folders),
                "tables": [t.as_json() for t in self.tables],
                "transcripts": [{"stage": t.stage, "table": t.name,
                                 "requests": {"recorded": t.rows[0], "recomputed": t.rows[1]}}
                                for t in self.transcripts]}

    def text(self) -> str:
        verdict = "REPRODUCED" if self.reproduced else "DIVERGED"
        lines = [f"{verdict}: run {self.run_id}: evidence recomputed from "
                 + ", ".join(f"{name}={folder}" for name, folder in self.folders.items())]
        for t in self.tables:
            if t.reproduced:
                lines.append(f"  {t.stage}.{t.name}: bit for bit ({t.rows[1]} rows, sha256 {t.recomputed_sha256[:16]})")
                continue
            moved = ", ".join(f"{column} {value:.3g}" if isinstance(value, float) else f"{column} {value}"
                              for column, value in t.deviations.items()) or "no column differs"
            rows = "" if t.rows[0] == t.rows[1] else f"; rows {t.rows[0]} recorded, {t.rows[1]} recomputed"
            lines.append(f"  {t.stage}.{t.name}: differs ({t.rows_reproduced} of {min(t.rows)} rows reproduced "
                         f"exactly; largest deviation per column: {moved}{rows})")
        lines += [f"  {t.stage}.{t.name}: a served model's transcript, re-recorded ({t.rows[0]} requests recorded, "
                  f"{t.rows[1]} now; timing differs by nature, outside the verdict)" for t in self.transcripts]
        return "\n".join(lines)


def _deviations(recorded: Table, recomputed: Table) -> tuple[dict[str, Any], int]:
    """Per column, the largest absolute deviation (numbers) or the differing cells (text) over the first
    min(rows) rows, in order; and how many of those rows reproduced in every column."""
    out: dict[str, Any] = {}
    n = min(recorded.n_rows, recomputed.n_rows)
    same = np.ones(n, dtype=bool)
    for column in recorded.columns:
        if not recomputed.has(column):
            out[column] = "missing"
            same[:] = False
            continue
        try:
            a, b = recorded.numeric(column)[:n], recomputed.numeric(column)[:n]
            out[column] = float(np.max(np.abs(a - b))) if n else 0.0
            same &= a == b
        except InputError:  # a text column
            differs = recorded.text(column)[:n] != recomputed.text(column)[:n]
            out[column] = int(np.count_nonzero(differs))
            same &= ~differs
    return {column: value for column, value in out.items() if value not in (0, 0.0)}, int(same.sum())


def recompute_evidence(ledger: Ledger, run_id: str, *, folders: Mapping[str, Path | str] | None = None,
                       notify: Notify | None = None) -> RecomputedEvidence:
    """Re-run ``run_id``'s stages from its model folders and compare the captured tables (module docstring).
    ``InputError`` when a folder's manifest is not the recorded one, or names an input that is not a model."""
    full = ledger.resolve_run_id(run_id)
    stored = read_stored_run(ledger, full)
    recorded = ledger.certificate(full)
    versions = {str(s["id"]): str(s["version"]) for s in recorded["content"]["knobs"]["stages"]}
    plan = load_plan(stored.spec_text, stage_versions=versions)
    folders = dict(folders or {})
    models = [name for name, declared in plan.inputs.items() if declared.fmt == MODEL_FORMAT]
    served = [name for name, declared in plan.inputs.items() if declared.fmt == ENDPOINT_FORMAT]
    for name in folders:
        if name not in (*models, *served):
            raise InputError(f"--input {name}=...: '{name}' is not a model input of run {full} "
                             f"(its model inputs: {', '.join((*models, *served)) or 'none'})")
    paths: dict[str, Path | str] = {name: folders.get(name, Path(plan.inputs[name].path)) for name in models}
    paths.update({name: folders[name] for name in served if name in folders})  # else the URL the run recorded
    stored_inputs = {record["name"]: record for record in stored.inputs}
    sources = {name: stored_source(ledger, record) for name, record in stored_inputs.items() if name not in paths}
    loaded = load_tables(plan, inputs=sources, input_paths=paths)
    for name in models:
        if loaded[name].sha256 != stored_inputs[name]["sha256"]:
            raise InputError(f"input '{name}': the model folder {paths[name]} has manifest SHA-256 "
                             f"{loaded[name].sha256}, but run {full} recorded {stored_inputs[name]['sha256']}: "
                             "the model changed since the run (or give its folder with --input NAME=FOLDER)")
    execution = execute(plan, loaded, ledger=ledger, notify=notify)
    comparisons, transcripts = [], []
    for record in stored.captured:
        recorded_table = stored_table(ledger, record)
        recomputed = execution.captured.get(record["stage"], {}).get(record["name"])
        if recomputed is None:
            raise InputError(f"stage '{record['stage']}' captured no table '{record['name']}' when re-run")
        deviations, rows_reproduced = ({}, recomputed.n_rows) if recomputed.sha256 == record["sha256"] else \
            _deviations(recorded_table, recomputed)
        comparison = TableComparison(
            stage=record["stage"], name=record["name"], recorded_sha256=record["sha256"],
            recomputed_sha256=recomputed.sha256, rows=(recorded_table.n_rows, recomputed.n_rows),
            deviations=deviations, rows_reproduced=rows_reproduced)
        (transcripts if record["name"].endswith(TRANSCRIPT) else comparisons).append(comparison)
    return RecomputedEvidence(run_id=full, folders={n: str(p) for n, p in paths.items()}, tables=tuple(comparisons),
                              transcripts=tuple(transcripts))
