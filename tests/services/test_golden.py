"""The golden corpus: every run any certa release recorded replays, bit for bit, under this certa.

``tests/golden/<version>/ledger.db`` was recorded by the released certa ``<version>`` (``record.sh``, see the
README there). Each test works on a copy: opening a ledger switches it to WAL mode, which would touch the
committed file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.registry import version_key

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RELEASES = sorted((p.parent.name for p in GOLDEN.glob("*/ledger.db")), key=version_key)


def _manifest(version: str) -> dict:
    return json.loads((GOLDEN / version / "MANIFEST.json").read_text(encoding="utf-8"))


def _certa(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def test_every_release_before_this_one_has_a_golden_ledger() -> None:
    assert {"0.1.0", "0.2.0"} <= set(RELEASES)
    installed = version_key(metadata.version("certa"))
    assert all(version_key(v) <= installed for v in RELEASES), "a golden ledger from a newer certa than installed"


@pytest.mark.parametrize("version", RELEASES)
def test_the_golden_ledger_is_the_file_that_release_recorded(version: str) -> None:
    manifest = _manifest(version)
    assert manifest["certa_version"] == version
    assert hashlib.sha256((GOLDEN / version / "ledger.db").read_bytes()).hexdigest() == manifest["ledger_sha256"]


@pytest.mark.parametrize("version", RELEASES)
def test_every_stage_version_a_release_recorded_is_still_registered(version: str) -> None:
    for run in _manifest(version)["runs"]:
        for stage in run["stages"]:
            assert REGISTRY.find(stage["use"], stage["version"]) is not None, (run["name"], stage)


@pytest.mark.parametrize("version", RELEASES)
def test_every_golden_run_replays_reproduced(version: str, tmp_path: Path) -> None:
    manifest = _manifest(version)
    copy = tmp_path / "ledger.db"
    shutil.copyfile(GOLDEN / version / "ledger.db", copy)
    code, before = _certa("verify", "--ledger", str(copy))
    assert code == 0 and before["intact"], before
    code, _ = _certa("migrate", "--ledger", str(copy))
    assert code == 0
    code, head = _certa("head", "--ledger", str(copy))
    assert head["head"] == manifest["head"]  # migrating rewrote no entry and added none
    code, report = _certa("replay", "--all", "--ledger", str(copy))
    outcomes = {row["run_id"]: (row["outcome"], row["note"]) for row in report["runs"]}
    assert outcomes == {run["run_id"]: ("REPRODUCED", outcomes[run["run_id"]][1]) for run in manifest["runs"]}
    assert code == 0 and report["ok"]
    for row in report["runs"]:  # only the environment stamp may differ, and it is reported
        assert all(change["path"].startswith("versions.") for change in row["environment"])
        assert row["recorded_results_sha256"] == row["replayed_results_sha256"]
    code, after = _certa("verify", "--ledger", str(copy))
    assert code == 0 and after["intact"], after


@pytest.mark.parametrize("version", RELEASES)
def test_every_decision_a_release_recorded_is_recorded_again_byte_for_byte(version: str, tmp_path: Path) -> None:
    """The decision entries are not part of a certificate, so a replay does not compare them; re-executing
    each golden run and recording it in a fresh ledger must give the very payloads that release wrote."""
    from certa.engine.services.audit import reexecute
    from certa.engine.services.run import record_execution
    from certa.ledger import Ledger

    copy = tmp_path / "golden.db"
    shutil.copyfile(GOLDEN / version / "ledger.db", copy)
    with Ledger.open(copy, create=False) as golden, Ledger.open(tmp_path / "again.db") as again:
        runs = [row for row in golden.runs() if row.status == "completed"]
        assert runs
        for row in runs:
            execution = reexecute(golden, row.run_id, golden.certificate(row.run_id))
            record_execution(again, row.run_id, execution)
            recorded = [entry.payload for entry in golden.entries(run_id=row.run_id, kinds=["decision"])]
            assert recorded and [entry.payload for entry in again.entries(run_id=row.run_id, kinds=["decision"])] \
                == recorded, (row.name, version)
