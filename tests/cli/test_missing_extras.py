"""Every command that needs an optional extra says so in one line when the extra is missing: ``error: ... needs
the 'EXTRA' extra (MODULE is not installed): python3 -m pip install 'certa[EXTRA]'``, exit 2 (never a traceback,
never exit 1, which means FAIL). Absence is simulated in a fresh process by a ``sys.meta_path`` finder that
refuses the extra's modules, as an interpreter without them would; ``certa show --explain`` needs no extra."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from certa.engine.foundation.extras import EXTRAS, extra_of_module, install_command

from tests.conftest import ROOT, small_spec_folder

# Refuses every module whose top-level name is in $CERTA_TEST_ABSENT (comma-separated), then runs the command.
PRELUDE = """
import os, sys
absent = set(os.environ["CERTA_TEST_ABSENT"].split(","))
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in absent:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
from certa.cli import main
sys.argv[0] = "certa"
main()
"""


def _certa(args: list[str], *, absent: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CERTA_TEST_ABSENT": ",".join(absent), "CERTA_LEDGER": str(cwd / "ledger.db")}
    return subprocess.run([sys.executable, "-c", PRELUDE, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def _assert_one_line(result: subprocess.CompletedProcess[str], extra: str, command: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("[")]  # but progress: [1/2] stage
    assert len(lines) == 1 and result.stderr.endswith(lines[0] + "\n"), result.stderr
    assert lines[0].startswith(f"error: {command} needs the '{extra}' extra (")
    assert lines[0].endswith(f"is not installed): {install_command(extra)}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small paired-ratio spec and a ledger (``ledger.db``) holding one run of it."""
    from certa import Ledger, run

    folder = tmp_path_factory.mktemp("extras")
    spec = small_spec_folder(folder)
    with Ledger.open(folder / "ledger.db") as ledger:
        run(spec, ledger=ledger)
    return folder


# Each command with jinja2 and with matplotlib missing in the unit tier; markupsafe (jinja2's) under ``slow``.
@pytest.mark.parametrize("module", ["jinja2", "matplotlib", pytest.param("markupsafe", marks=pytest.mark.slow)])
@pytest.mark.parametrize("command", ["report", "site"])
def test_report_and_site_name_the_report_extra(folder: Path, command: str, module: str) -> None:
    out = ["-o", "page.html"] if command == "report" else ["-o", "site"]
    args = [command, *(["latest"] if command == "report" else []), *out]
    _assert_one_line(_certa(args, absent=(module,), cwd=folder), "report", f"certa {command}")
    assert not (folder / "page.html").exists() and not (folder / "site").exists()


def test_the_json_form_names_the_error_and_its_exit_code(folder: Path) -> None:
    result = _certa(["report", "latest", "-o", "page.html", "--json"], absent=EXTRAS["report"], cwd=folder)
    error = json.loads(result.stdout)["error"]
    assert (result.returncode, error["type"], error["exit_code"]) == (2, "MissingExtraError", 2)
    assert error["message"].endswith("python3 -m pip install 'certa[report]'")


def test_show_explain_needs_no_extra(folder: Path) -> None:
    everything = tuple(module for modules in EXTRAS.values() for module in modules)
    bare = _certa(["show", "latest", "--explain"], absent=everything, cwd=folder)
    full = _certa(["show", "latest", "--explain"], absent=(), cwd=folder)
    plain = _certa(["show", "latest"], absent=everything, cwd=folder)
    assert bare.returncode == full.returncode == plain.returncode == 0, bare.stderr[-2000:]
    assert bare.stdout == full.stdout and len(bare.stdout) > len(plain.stdout)  # the paragraphs are there


@pytest.mark.parametrize("module", ["dask", pytest.param("distributed", marks=pytest.mark.slow)])
def test_batch_names_the_dask_extra(folder: Path, module: str) -> None:
    specs = folder / "batch-specs"
    if not specs.exists():
        small_spec_folder(specs)
    _assert_one_line(_certa(["batch", str(specs), "--ledger", str(folder / "batch.db")], absent=(module,), cwd=folder),
                     "dask", "certa batch")


# One command in the unit tier (the ledger URL is opened the same way by each); the others under ``slow``.
@pytest.mark.parametrize("command", [["list"], *(pytest.param(c, marks=pytest.mark.slow)
                                                 for c in (["verify"], ["run", "spec.yaml"]))])
def test_a_postgres_ledger_names_the_postgres_extra(folder: Path, command: list[str]) -> None:
    url = "postgresql+psycopg://certa@127.0.0.1:9/certa"
    result = _certa([*command, "--ledger", url], absent=("psycopg",), cwd=folder)
    _assert_one_line(result, "postgres", "the ledger postgresql+psycopg://certa@127.0.0.1:9/certa")


# torch in the unit tier; the other libraries (each about 2 s: the spec gets as far as loading the model) slow.
@pytest.mark.parametrize("module", ["torch", *(pytest.param(m, marks=pytest.mark.slow)
                                               for m in ("transformers", "tokenizers", "safetensors"))])
def test_a_model_spec_names_the_models_extra(tmp_path: Path, module: str) -> None:
    shutil.copytree(ROOT / "specs" / "model-perplexity", tmp_path / "example",
                    ignore=shutil.ignore_patterns("make_data.py"))
    result = _certa(["run", "spec.yaml"], absent=(module,), cwd=tmp_path / "example")
    _assert_one_line(result, "models", "evaluating a model")


def test_only_modules_of_an_extra_are_called_missing_extras() -> None:
    assert extra_of_module("matplotlib.backends.backend_svg") == "report"
    assert extra_of_module("model_signing.verifying") == "models"
    assert extra_of_module("numpy") is None and extra_of_module(None) is None
