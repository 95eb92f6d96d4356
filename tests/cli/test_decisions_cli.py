"""Diagnosable runs: certa run prints the run id, each failed profile rule's value and requirement, and the
run's warnings; certa decisions lists a run's recorded decisions (filtered, paged, streamed); every printed
hint repeats the --ledger the command used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.ledger.location import command_hint, masked_ledger


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _drop_subject_windows(spec: Path, count: int) -> None:
    """Leave the last ``count`` baseline windows without a subject partner (a ``warn`` in profile dev)."""
    subject = spec.parent / "data" / "subject.csv"
    lines = subject.read_text().splitlines(keepends=True)
    subject.write_text("".join(lines[:-count]))


def test_run_prints_warnings_on_stderr_and_in_json(small_spec: Path, tmp_path: Path) -> None:
    _drop_subject_windows(small_spec, 5)
    db = str(tmp_path / "ledger.db")
    text = invoke("run", str(small_spec), "--ledger", db)
    assert text.exit_code == 0
    warnings = [line for line in text.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings and "window_match_fraction" in warnings[0] and "warning:" not in text.stdout
    payload = json.loads(invoke("run", str(small_spec), "--json", "--ledger", db).stdout)
    assert any("window_match_fraction" in line for line in payload["warnings"])


def test_an_aborted_run_prints_its_id_and_each_failed_rule(example_spec: Path, tmp_path: Path) -> None:
    example_spec.write_text(example_spec.read_text().replace("replicates: 3200", "replicates: 1000"))
    db = str(tmp_path / "elsewhere.db")
    result = invoke("run", str(example_spec), "--ledger", db)
    assert result.exit_code == 3
    assert "failed: min_replicates = 1000, required 3200" in result.stderr
    run_id = json.loads(invoke("list", "--json", "--ledger", db).stdout)[0]["run_id"]
    assert f"recorded aborted run {run_id}" in result.stdout
    assert f"certa decisions {run_id[:12]} --kind profile_rule --ledger {db}" in result.stdout

    payload = json.loads(invoke("run", str(example_spec), "--json", "--ledger", db).stdout)
    assert payload["run_id"] and payload["stage"] == "ratio" and payload["warnings"] == []
    assert payload["failed_rules"] == [{"rule": "min_replicates", "value": 1000, "required": 3200,
                                        "profile": "release"}]
    shown = invoke("show", payload["run_id"], "--ledger", db)
    assert "failed: min_replicates = 1000, required 3200" in shown.stdout
    assert json.loads(invoke("show", payload["run_id"], "--json", "--ledger", db).stdout)["failed_rules"][0][
        "rule"] == "min_replicates"


def test_decisions_lists_filters_and_pages(small_spec: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    run_id = json.loads(invoke("run", str(small_spec), "--json", "--ledger", db).stdout)["run_id"]
    every = json.loads(invoke("decisions", run_id, "--json", "--limit", "0", "--ledger", db).stdout)
    kinds = [d["kind"] for d in every["decisions"]]
    assert kinds[0] == "pairing" and "profile_rule" in kinds and kinds[-1] == "gate"
    assert every["next_after"] is None and every["run_id"] == run_id
    assert [d["seq"] for d in every["decisions"]] == sorted(d["seq"] for d in every["decisions"])

    rules = json.loads(invoke("decisions", run_id[:8], "--kind", "profile_rule", "--json", "--ledger", db).stdout)
    assert {d["kind"] for d in rules["decisions"]} == {"profile_rule"} and len(rules["decisions"]) == kinds.count(
        "profile_rule")

    first = invoke("decisions", run_id, "--limit", "2", "--ledger", db)
    lines = first.stdout.splitlines()
    assert len(lines) == 3 and " pairing " in lines[0] and '"window_match_fraction": 1' in lines[0]
    second_seq = every["decisions"][1]["seq"]
    assert lines[2] == f"... more: certa decisions {run_id[:12]} --limit 2 --after {second_seq} --ledger {db}"
    page = json.loads(invoke("decisions", run_id, "--limit", "2", "--after", str(second_seq), "--json",
                             "--ledger", db).stdout)
    assert page["decisions"] == every["decisions"][2:4] and page["next_after"] == every["decisions"][3]["seq"]
    none = invoke("decisions", run_id, "--kind", "no_such_kind", "--ledger", db)
    assert none.exit_code == 0 and "no no_such_kind decisions recorded" in none.stdout


def test_the_run_hint_repeats_a_non_default_ledger(small_spec: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CERTA_LEDGER", raising=False)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    result = invoke("run", str(small_spec), "--ledger", "../my ledger.db")
    hint = result.stdout.rsplit("the full report: ", 1)[1].strip()
    assert hint.startswith("certa show ") and hint.endswith(" --ledger '../my ledger.db'")
    assert invoke(*hint.split()[1:3], "--ledger", "../my ledger.db").exit_code == 0
    default = invoke("run", str(small_spec)).stdout.rsplit("the full report: ", 1)[1].split()
    assert default[:2] == ["certa", "show"] and len(default) == 3


def test_hints_mask_a_password_and_omit_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CERTA_LEDGER", raising=False)
    url = "postgresql+psycopg://certa:s3cret@db.example.org:5432/ledger"
    assert masked_ledger(url) == "postgresql+psycopg://certa:***@db.example.org:5432/ledger"
    assert command_hint("show", "abc", ledger=url) == f"certa show abc --ledger '{masked_ledger(url)}'"
    assert command_hint("verify", ledger="certa-ledger.db") == "certa verify"
    monkeypatch.setenv("CERTA_LEDGER", url)
    assert command_hint("verify", ledger=url) == "certa verify"  # the same shell finds it again
    assert "s3cret" not in command_hint("verify", ledger="postgresql+psycopg://certa:s3cret@other/ledger")
