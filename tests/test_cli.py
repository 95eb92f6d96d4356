"""The certa command: exit codes, --json output, help texts, and the audit commands end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main

COMMANDS = ["attest", "batch", "checkpoint", "cosign", "diff", "export", "head", "keygen", "list", "migrate", "prove", "replay", "report", "review", "run", "show", "site",
            "stages", "validate", "verify", "verify-attestation", "verify-bundle"]
NO_LEDGER = {"keygen", "verify-attestation", "verify-bundle"}


def invoke(*args: str, ledger: Path | None = None):
    extra = ["--ledger", str(ledger)] if ledger is not None else []
    return CliRunner().invoke(main, [*args, *extra], catch_exceptions=False)


def test_command_list_is_pinned() -> None:
    assert sorted(main.commands) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example_and_json(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output and "--json" in result.output
    assert ("--ledger" in result.output) == (command not in NO_LEDGER)


def test_validate_exit_codes(small_spec: Path) -> None:
    assert invoke("validate", str(small_spec)).exit_code == 0
    small_spec.write_text(small_spec.read_text().replace("replicates", "replicatez"))
    result = invoke("validate", str(small_spec), "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and "did you mean 'replicates'" in payload["error"]["message"]


def test_run_records_and_the_audit_commands_work(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    result = invoke("run", str(small_spec), "--json", ledger=db)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "PASS" and set(payload) >= {"run_id", "certificate_sha256", "knobs_hash"}
    run_id = payload["run_id"]

    listed = json.loads(invoke("list", "--json", ledger=db).stdout)
    assert [r["run_id"] for r in listed] == [run_id]
    shown = json.loads(invoke("show", run_id[:8], "--json", ledger=db).stdout)
    assert shown["content_sha256"] == payload["certificate_sha256"]
    report = invoke("show", run_id, ledger=db).output
    assert report.startswith("# small-paired: PASS") and payload["certificate_sha256"] in report
    assert "| ratio vs baseline | 95% CI |" in report and "## Gates" in report

    out = tmp_path / "cert.json"
    assert invoke("export", run_id, "-o", str(out), ledger=db).exit_code == 0
    assert json.loads(out.read_text())["content_sha256"] == payload["certificate_sha256"]

    replayed = invoke("replay", run_id, "--json", ledger=db)
    assert replayed.exit_code == 0 and json.loads(replayed.stdout)["outcome"] == "REPRODUCED"

    assert invoke("review", run_id, "--by", "auditor", "--decision", "approved", ledger=db).exit_code == 0
    head = invoke("head", ledger=db).output.strip()
    verified = invoke("verify", "--expect-head", head, "--json", ledger=db)
    assert verified.exit_code == 0 and json.loads(verified.stdout)["intact"] is True


def test_run_exit_code_1_on_fail_and_diff_shows_changed_fields(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    first = json.loads(invoke("run", str(small_spec), "--json", ledger=db).stdout)["run_id"]
    small_spec.write_text(small_spec.read_text().replace("max: 1.05", "max: 1.0"))
    result = invoke("run", str(small_spec), "--json", ledger=db)
    assert result.exit_code == 1 and json.loads(result.stdout)["verdict"] == "FAIL"
    second = json.loads(result.stdout)["run_id"]
    changes = json.loads(invoke("diff", first, second, "--json", ledger=db).stdout)["changes"]
    paths = {c["path"] for c in changes}
    assert "verdict" in paths and "knobs.gates[0].max" in paths and "gates[0].passed" in paths
    assert not any(p.startswith("stages.") for p in paths)  # same seed and data: same stage outputs


def test_invalid_spec_exits_2_and_writes_nothing(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    small_spec.write_text(small_spec.read_text().replace("seed: 7", "seed: -1"))
    result = invoke("run", str(small_spec), ledger=db)
    assert result.exit_code == 2 and "seed" in result.output
    assert not db.exists()


def test_profile_abort_exits_3_and_is_listed(example_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    example_spec.write_text(example_spec.read_text().replace("replicates: 3200", "replicates: 1000"))
    result = invoke("run", str(example_spec), "--json", ledger=db)
    assert result.exit_code == 3
    payload = json.loads(result.stdout)
    assert payload["error"]["type"] == "ProfileAbort" and payload["run_id"]
    assert json.loads(invoke("list", "--json", ledger=db).stdout)[0]["status"] == "aborted"
    assert "ABORTED" in invoke("show", payload["run_id"], ledger=db).output


def test_verify_exits_1_and_names_the_first_broken_entry(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), ledger=db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET payload = replace(payload, '\"outcome\":\"pass\"', '\"outcome\":\"warn\"') "
                     "WHERE seq = 5")
    result = invoke("verify", ledger=db)
    assert result.exit_code == 1 and "TAMPERED: first broken: entry 5" in result.output


def test_input_override_reads_an_absolute_path_outside_the_spec_folder(small_spec: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "subject.csv"
    (small_spec.parent / "data" / "subject.csv").rename(moved)
    result = invoke("run", str(small_spec), "--no-record", "--input", f"subject={moved}", "--json")
    assert result.exit_code == 0, result.output
    assert invoke("run", str(small_spec), "--no-record").exit_code == 2


def test_unknown_run_id_is_a_clear_error(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), ledger=db)
    result = invoke("show", "ffffffff", ledger=db)
    assert result.exit_code == 2 and "no run with id" in result.output
    assert "no ledger at" in invoke("list", ledger=tmp_path / "missing.db").output


def test_latest_names_the_newest_run(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), "--no-record", ledger=db)
    from ledger import Ledger
    Ledger.open(db).close()
    assert "no runs recorded" in invoke("replay", "latest", ledger=db).output
    invoke("run", str(small_spec), ledger=db)
    newest = json.loads(invoke("run", str(small_spec), "--json", ledger=db).stdout)["run_id"]
    assert json.loads(invoke("show", "latest", "--json", ledger=db).stdout)["issued"]["run_id"] == newest
