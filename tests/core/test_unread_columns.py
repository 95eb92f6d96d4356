"""An input column no stage reads is listed in the certificate and warned about (issue 30, item 8).

Why: a table carrying a second score (``mean_nll_v2``) or a weight under a name no stage knows entered no number,
yet the certificate named the table's columns as if it had been read whole.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.core.interpreter import execute
from certa.engine.core.inputs import load_tables
from certa.engine.core.spec import load_plan
from certa.engine.core.stages.bakeoff import sums_rows
from certa.engine.core.stages.bakeoff_merge import read_sums_table
from certa.engine.core.stats.bakeoff.pool import GroupSums
from certa.engine.core.tables import columns_to_csv_bytes, table_from_columns
from certa.engine.foundation.errors import InputError
from tests.conftest import window_columns


def _spec(profile: str = "dev") -> dict[str, Any]:
    return {"certa": 1, "name": "unread", "seed": 3, "profile": profile,
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": "ratio", "use": "paired.ppl_ratio",
                        "with": {"baseline": "baseline", "subject": "subject", "replicates": 1200}}]}


def _tables() -> dict[str, dict[str, Any]]:
    base, subj = window_columns(200, seed=4)
    subj = {**subj, "mean_nll_v2": subj["mean_nll"] + 0.5, "notes": ["x"] * 200}
    return {"baseline": base, "subject": subj}


@pytest.mark.parametrize("profile", ["dev", "ci"])
def test_a_column_no_stage_reads_is_listed_in_the_certificate_and_warned_about(profile: str) -> None:
    result = run(_spec(profile), inputs=_tables())
    inputs = {i["name"]: i for i in result.certificate["content"]["inputs"]}
    assert result.certificate["content"]["certa_format"] == 3
    assert inputs["baseline"]["unread_columns"] == []
    assert inputs["subject"]["unread_columns"] == ["mean_nll_v2", "notes"]
    assert inputs["subject"]["columns"] == ["window_id", "tokens", "mean_nll", "mean_nll_v2", "notes"]
    details = [d.decision.detail for d in result.decisions if d.decision.kind == "unread_columns"]
    assert details == [{"input": "subject", "columns": ["mean_nll_v2", "notes"], "outcome": "warn",
                        "message": details[0]["message"]}]
    assert result.warnings == ("inputs: input 'subject' has 2 column(s) no stage read: 'mean_nll_v2', 'notes'; they "
                               "enter no number of this certificate (remove them from the input, or name them in a "
                               "stage's with:)",)


def test_the_same_table_in_two_runs_is_read_afresh_by_each() -> None:
    """The record of columns read belongs to one run: a table read whole by one run does not hide a column from
    the next run's list (``execute`` reads a copy, ``dataclasses.replace``)."""
    plan = load_plan(_spec())
    tables = load_tables(plan, inputs=_tables())
    first = execute(plan, tables)
    tables["subject"].numeric("mean_nll_v2")  # read outside any run
    second = execute(plan, tables)
    assert first.content == second.content
    assert [i.get("unread_columns") for i in second.content["inputs"]] == [[], ["mean_nll_v2", "notes"]]
    copy = replace(tables["subject"])
    assert copy.columns_read == set() and "mean_nll_v2" in tables["subject"].columns_read


def test_a_replay_builds_the_format_its_run_recorded() -> None:
    """A format-2 certificate (certa before unread columns) has neither the list nor the warning; its replay
    builds format 2 again, so its results digest is reproduced."""
    plan = load_plan(_spec())
    tables = load_tables(plan, inputs=_tables())
    old = execute(plan, tables, content_format=2)
    assert old.content["certa_format"] == 2 and all("unread_columns" not in i for i in old.content["inputs"])
    assert not [d for d in old.decisions if d.decision.kind == "unread_columns"]


def test_a_recorded_run_lists_its_unread_columns_in_show_and_replays(tmp_path: Path) -> None:
    for name, columns in _tables().items():
        (tmp_path / f"{name}.csv").write_bytes(columns_to_csv_bytes(columns))
    (tmp_path / "spec.json").write_text(json.dumps(_spec("ci")))
    db = str(tmp_path / "ledger.db")
    ran = CliRunner().invoke(main, ["run", str(tmp_path / "spec.json"), "--ledger", db, "--json"])
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)
    assert any("no stage read: 'mean_nll_v2', 'notes'" in line for line in report["warnings"])
    replayed = CliRunner().invoke(main, ["replay", report["run_id"], "--ledger", db])
    assert replayed.exit_code == 0 and "REPRODUCED" in replayed.output, replayed.output


def test_a_column_an_unused_column_decision_names_is_listed_but_warned_about_once() -> None:
    """paired.ppl_ratio reads mean_nll where a table has both it and nll_sum, and says so (``unused_column``); the
    unread list names nll_sum too, without a second warning."""
    base, subj = window_columns(50, seed=6)
    subj = {**subj, "nll_sum": np.asarray(subj["mean_nll"]) * np.asarray(subj["tokens"])}
    result = run(_spec(), inputs={"baseline": base, "subject": subj})
    inputs = {i["name"]: i for i in result.certificate["content"]["inputs"]}
    assert inputs["subject"]["unread_columns"] == ["nll_sum"]
    kinds = [d.decision.kind for d in result.decisions if d.decision.kind in ("unused_column", "unread_columns")]
    assert kinds == ["unused_column"] and len([w for w in result.warnings if "nll_sum" in w]) == 1


def _sums() -> list[dict[str, Any]]:
    scale = 1 << 56
    sums = GroupSums(keys=(("b", "v1"), ("b", "v2")), n=(3, 2), w_fx=(3 * scale, 2 * scale),
                     u_fx=(scale // 2, -scale // 4), u_env_fx=(scale // 3, 0), g_fx=(3 * scale, 2 * scale),
                     g_flagged=(0, 0), band_counts=((0, 1, 2, 0, 0), (0, 0, 2, 0, 0)),
                     band_counts_ungated=((0, 1, 2, 0, 0), (0, 0, 2, 0, 0)), tokens_fx=(0, 0), tokens_n=(0, 0),
                     lat_ms_fx=(0, 0), lat_ms_n=(0, 0))
    return sums_rows(sums, "f" * 64)


def _sums_table(rows: list[dict[str, Any]]) -> Any:
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    return table_from_columns("shard", columns)


def test_a_shard_whose_float_sums_restate_its_exact_sums_is_read_whole() -> None:
    table = _sums_table(_sums())
    read_sums_table(table, "f" * 64)
    assert {"W", "U", "U_env", "W_fx", "U_fx", "U_env_fx"} <= table.columns_read


@pytest.mark.parametrize("column", ["W", "U", "U_env"])
def test_a_shard_whose_float_sum_contradicts_its_exact_sum_is_refused(column: str) -> None:
    """Why: the merge adds the exact integers; a float edited to say otherwise would be what a reader of the
    shard sees, and was ignored."""
    rows = _sums()
    rows[1][column] = rows[1][column] + 0.25
    with pytest.raises(InputError, match=rf"row 2: column '{column}' is .* but {column}_fx gives"):
        read_sums_table(_sums_table(rows), "f" * 64)


def test_show_and_the_report_name_the_unread_columns(tmp_path: Path) -> None:
    from certa.engine.services.presentation.html import render_report
    from certa.engine.services.report_data import gather_report
    from certa.ledger import Ledger

    db = str(tmp_path / "ledger.db")
    run_id = run(_spec(), inputs=_tables(), ledger=db).run_id
    shown = CliRunner().invoke(main, ["show", run_id, "--ledger", db])
    assert "Input subject: column(s) no stage read, which enter no number of this certificate: mean_nll_v2, " \
           "notes." in shown.output, shown.output
    with Ledger.open(db, create=False) as ledger:
        page = render_report(gather_report(ledger, run_id))
    assert ("Input subject: column(s) no stage read, which enter no number of this certificate: mean_nll_v2, "
            "notes.") in page
