"""``certa replay --recompute-evidence``: the models re-run from their folders reproduce the captured tables bit
for bit on one machine; a changed folder is refused; a different evaluation shows the largest deviation."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.foundation.errors import InputError
from certa.engine.services.evidence_recompute import recompute_evidence
from certa.engine.services.run import run
from certa.ledger import Ledger
from tests.core.stages.test_model_windows import _spec


@pytest.fixture
def recorded(tiny_models, tmp_path) -> tuple[Path, str, Path]:
    (tmp_path / "spec").mkdir()
    spec = _spec(tmp_path / "spec", tiny_models)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        run_id = run(spec, ledger=ledger).run_id
    return tmp_path / "ledger.db", run_id, spec.parent


def test_the_evidence_reproduces_bit_for_bit_from_the_recorded_paths(recorded, monkeypatch):
    db, run_id, folder = recorded
    monkeypatch.chdir(folder)  # the spec's model: paths, relative to the current directory
    with Ledger.open(db, create=False, read_only=True) as ledger:
        result = recompute_evidence(ledger, run_id)
    assert result.reproduced and {t.name for t in result.tables} == {"baseline", "subject", "models"}
    assert all(t.deviations == {} for t in result.tables)
    assert "REPRODUCED" in result.text() and "bit for bit" in result.text()


def test_a_changed_model_folder_is_refused_and_other_folders_are_named_with_input(recorded, tmp_path):
    db, run_id, folder = recorded
    moved = Path(shutil.copytree(folder / "subject", tmp_path / "elsewhere"))
    runner = CliRunner()
    ok = runner.invoke(main, ["replay", run_id[:8], "--recompute-evidence", "--input", f"base={folder / 'baseline'}",
                              "--input", f"subj={moved}", "--json", "--ledger", str(db)], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    (moved / "generation_config.json").write_text("{}")
    refused = runner.invoke(main, ["replay", run_id[:8], "--recompute-evidence", "--input",
                                   f"base={folder / 'baseline'}", "--input", f"subj={moved}", "--ledger", str(db)])
    assert refused.exit_code == 2
    assert "input 'subj': the model folder" in refused.output and "the model changed since the run" in refused.output
    usage = runner.invoke(main, ["replay", run_id[:8], "--input", f"subj={moved}", "--ledger", str(db)])
    assert usage.exit_code == 2 and "--input gives model folders to --recompute-evidence" in usage.output


def test_evidence_computed_otherwise_reports_the_largest_deviation_per_column(recorded, monkeypatch):
    """Another thread count may move the last bits of the sums; whatever moved, the report names the columns
    and their largest absolute deviation (here forced: the recomputed sums shifted by a known amount)."""
    import certa.engine.core.models.windows as windows

    db, run_id, folder = recorded
    real = windows.window_nll
    monkeypatch.setattr(windows, "window_nll", lambda *a, **k: real(*a, **k) + 0.25)
    monkeypatch.chdir(folder)
    with Ledger.open(db, create=False, read_only=True) as ledger:
        result = recompute_evidence(ledger, run_id)
    moved = {t.name: t for t in result.tables}
    assert not result.reproduced and moved["models"].reproduced
    assert moved["baseline"].deviations == {"nll_sum": pytest.approx(0.25, abs=1e-9)}
    assert "largest deviation per column: nll_sum 0.25" in result.text()


def test_a_folder_for_a_table_input_is_refused(recorded):
    db, run_id, folder = recorded
    with Ledger.open(db, create=False, read_only=True) as ledger, pytest.raises(InputError, match="not a model input"):
        recompute_evidence(ledger, run_id, folders={"text": folder})
    assert os.path.exists(db)
