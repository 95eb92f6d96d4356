"""What a certificate says about each input (content format 3, issue 32 items 4 and 6): a model folder's files as
``sha256sum`` prints them, and an input given on the command line instead of the spec's path."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.interpreter import input_record
from certa.engine.core.models.manifest import MODEL_FORMAT, folder_manifest
from certa.engine.core.tables import Table
from certa.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "specs" / "model-perplexity" / "models" / "baseline"


def _model_table(folder: Path) -> Table:
    manifest = folder_manifest("base", folder, InputLimits())
    return Table(name="base", columns=manifest.columns(), sha256=manifest.sha256, fmt=MODEL_FORMAT, raw=manifest.raw)


def test_a_model_inputs_record_lists_every_file_as_sha256sum_prints_it(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(MODEL, folder)
    (folder / "README.md").write_text("a model card\n")
    record = input_record(_model_table(folder), None)
    files = {f["path"]: f for f in record["files"]}
    assert sorted(files) == sorted(p.name for p in folder.iterdir())
    for path in folder.iterdir():
        raw = path.read_bytes()
        assert files[path.name] == {"path": path.name, "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    assert record["weights"] == ["model.safetensors"] and "unread_columns" not in record
    assert "overridden" not in record


def test_a_plain_table_record_has_no_files() -> None:
    table = Table(name="t", columns={"a": []}, sha256="0" * 64, fmt="csv", raw=b"a\n")
    assert input_record(table, ["a"]) == {"name": "t", "sha256": "0" * 64, "rows": 0, "format": "csv",
                                          "columns": ["a"], "unread_columns": ["a"]}


def _paired_folder(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "specs" / "paired-ratio", tmp_path / "ex")
    return tmp_path / "ex"


def test_an_input_given_on_the_command_line_is_recorded_shown_and_replayed(tmp_path: Path) -> None:
    """Why: ``--input subject=int4.csv`` on a spec whose description says "int8" certified the int4 table under
    the int8 words, and nothing in the certificate said the spec's path had been replaced."""
    example = _paired_folder(tmp_path)
    spec = example / "spec.yaml"
    text = spec.read_text()
    spec.write_text("\n".join(line for line in text.splitlines() if "sha256:" not in line) + "\n")
    other = tmp_path / "other.csv"
    shutil.copy(example / "data" / "subject.csv", other)
    db = str(tmp_path / "ledger.db")
    ran = CliRunner().invoke(main, ["run", str(spec), "--ledger", db, "--input", f"subject={other}", "--json"])
    assert ran.exit_code in (0, 1), ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    with Ledger.open(db, create=False) as ledger:
        inputs = {i["name"]: i for i in ledger.certificate(run_id)["content"]["inputs"]}
    assert inputs["subject"]["overridden"] is True and "overridden" not in inputs["baseline"]
    shown = CliRunner().invoke(main, ["show", run_id, "--ledger", db])
    assert ("Input(s) 'subject' were given on the command line (--input NAME=PATH, or NAME=URL for a served model) "
            "instead of the spec's: " in shown.output), shown.output
    from certa.engine.services.presentation.html import render_report
    from certa.engine.services.report_data import gather_report
    with Ledger.open(db, create=False) as ledger:
        page = render_report(gather_report(ledger, run_id))
    description = page[page.index('<section class="description">'):]
    description = description[:description.index("</section>")]
    assert "were given on the command line (--input NAME=PATH, or NAME=URL for a served model) instead of the spec&#39;s" \
        in description
    replayed = CliRunner().invoke(main, ["replay", run_id, "--ledger", db])
    assert replayed.exit_code == 0 and "REPRODUCED" in replayed.output, replayed.output
    plain = CliRunner().invoke(main, ["run", str(spec), "--ledger", db, "--json"])
    with Ledger.open(db, create=False) as ledger:
        again = ledger.certificate(json.loads(plain.stdout)["run_id"])["content"]["inputs"]
    assert not [i for i in again if "overridden" in i]


@pytest.mark.models
def test_show_and_the_report_list_a_model_runs_files(example_runs) -> None:
    db, runs = example_runs
    run_id = runs["model-perplexity"]
    shown = CliRunner().invoke(main, ["show", run_id, "--ledger", str(db)])
    assert "Files of model input `baseline`" in shown.output, shown.output
    raw = (ROOT / "specs" / "model-perplexity" / "models" / "subject" / "model.safetensors").read_bytes()
    line = f"| `model.safetensors` | {len(raw)} | `{hashlib.sha256(raw).hexdigest()}` | weights |"
    assert line in shown.output
    from certa.engine.services.presentation.html import render_report
    from certa.engine.services.report_data import gather_report
    with Ledger.open(str(db), create=False) as ledger:
        page = render_report(gather_report(ledger, run_id))
    assert "<h3>Files of model input subject</h3>" in page and hashlib.sha256(raw).hexdigest() in page
