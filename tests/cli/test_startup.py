"""The command starts at once: ``certa --help``, every ``certa COMMAND --help`` and the browsing commands
import only what they need (speed is measured in bench/cli_startup.py, not here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from certa.cli import main

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "scipy", "numba", "sqlalchemy", "cryptography", "matplotlib", "jinja2", "pyarrow", "dask",
         "distributed", "alembic", "jsonschema", "yaml", "rfc8785")


def _modules_after(*argv: str, cwd: Path = ROOT) -> set[str]:
    """The top-level packages in ``sys.modules`` after ``certa ARGV`` ran in a fresh interpreter."""
    script = ("import sys, json\nsys.argv = ['certa', *json.loads(sys.argv[1])]\nfrom certa import cli\n"
              "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
              "sys.stderr.write('\\nMODULES ' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(list(argv))], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    return set(json.loads(done.stderr.rsplit("MODULES ", 1)[1]))


def test_help_imports_no_heavy_library() -> None:
    assert not _modules_after("--help") & set(HEAVY)


@pytest.mark.parametrize("command", sorted(main.commands))
def test_each_commands_help_imports_no_heavy_library(command: str) -> None:
    assert not _modules_after(command, "--help") & set(HEAVY)


def test_list_of_a_sqlite_file_reads_it_through_the_standard_library_alone(small_spec: Path, tmp_path: Path) -> None:
    from certa.engine import run
    from certa.ledger import Ledger

    with Ledger.open(tmp_path / "l.db") as ledger:
        run(small_spec, ledger=ledger)
    loaded = _modules_after("list", "--ledger", str(tmp_path / "l.db"))
    assert "sqlite3" in loaded  # it did read the ledger
    assert not loaded & set(HEAVY)


def _modules_imported_by(*argv: str) -> set[str]:
    """Every module (dotted name) that ``certa ARGV`` imported in a fresh interpreter, beyond those the
    interpreter's start-up (``site`` and its ``.pth`` files) had imported already."""
    script = ("import sys\nbefore = set(sys.modules)\nsys.argv = ['certa', *sys.argv[1:]]\n"
              "from certa import cli\ntry:\n    cli.main()\nexcept SystemExit:\n    pass\n"
              "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(set(sys.modules) - before)))\n")
    done = subprocess.run([sys.executable, "-c", script, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    return set(done.stderr.rsplit("MODULES ", 1)[1].split())


# What ``certa list`` needs of certa to print a SQLite ledger's runs: the command line, the listing service, its
# read through sqlite3, the rows, and the one text function with the display helper it calls.
STARTUP_MODULES = {"certa", "certa.cli", "certa.engine", "certa.engine.foundation", "certa.engine.foundation.errors",
                   "certa.ledger"}
LIST_MODULES = STARTUP_MODULES | {"certa.engine.services", "certa.engine.services.run_list",
                                  "certa.engine.services.presentation",
                                  "certa.engine.services.presentation.display_text",
                                  "certa.engine.services.presentation.terminal", "certa.ledger.location",
                                  "certa.ledger.rows", "certa.ledger.sqlite_read"}


def _certa_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] == "certa"}


def test_list_imports_only_what_it_prints_with(small_spec: Path, tmp_path: Path) -> None:
    """``certa list`` (its start-up is the goal of bench/ledger_reads.py): no module of certa beyond
    ``LIST_MODULES``, and of the standard library not even json (the JSON form alone needs it) nor shlex."""
    from certa.engine import run
    from certa.ledger import Ledger

    with Ledger.open(tmp_path / "l.db") as ledger:
        run(small_spec, ledger=ledger)
    imported = _modules_imported_by("list", "--ledger", str(tmp_path / "l.db"))
    assert "sqlite3" in imported  # it did read the ledger
    assert _certa_modules(imported) == LIST_MODULES
    assert not imported & {"json", "shlex", "certa.engine.foundation.jsondiff", "certa.engine.foundation.json_read"}
    assert not {m.split(".")[0] for m in imported} & set(HEAVY)
    as_json = _modules_imported_by("list", "--json", "--ledger", str(tmp_path / "l.db"))
    assert "json" in as_json
    assert _certa_modules(as_json) == LIST_MODULES - {"certa.engine.services.presentation.terminal"}


def test_help_imports_no_json_and_no_display_helpers() -> None:
    """``certa --help`` defines the commands and prints their help: certa's errors and ledger name only."""
    imported = _modules_imported_by("--help")
    assert _certa_modules(imported) == STARTUP_MODULES
    assert "json" not in imported


def test_validate_loads_no_kernel_library_no_crypto_no_plotting() -> None:
    loaded = _modules_after("validate", "specs/paired-ratio/spec.yaml")
    assert "jsonschema" in loaded
    assert not loaded & {"scipy", "numba", "cryptography", "sqlalchemy", "matplotlib", "jinja2", "pyarrow", "dask",
                         "alembic"}


def test_show_of_a_sqlite_file_loads_no_database_library_no_numpy_no_stage_module(small_spec: Path,
                                                                                    tmp_path: Path) -> None:
    """``certa show`` reads a SQLite file through ``sqlite3`` (``certa.ledger.sqlite_reader``) and prints a
    paired-ratio run's report without SQLAlchemy, numpy, jsonschema or the stage registry (its catalogue), and,
    its spec pinning no policy, without YAML or the spec reader (``policy_record.spec_approval_pin``)."""
    from certa.engine import run
    from certa.ledger import Ledger

    with Ledger.open(tmp_path / "l.db") as ledger:
        run(small_spec, ledger=ledger)
    imported = _modules_imported_by("show", "latest", "--explain", "--ledger", str(tmp_path / "l.db"))
    assert "sqlite3" in imported and "certa.ledger.sqlite_reader" in imported  # it did read the ledger
    assert "certa.engine.services.presentation.stages.paired_ratio" in imported  # and printed the stage
    assert not {m.split(".")[0] for m in imported} & set(HEAVY) - {"rfc8785"}
    assert not imported & {"certa.engine.core.stages.paired_ratio", "certa.engine.core.interpreter",
                           "certa.ledger.store", "certa.engine.core.spec", "importlib.metadata"}  # no approval pin


@pytest.mark.slow  # three example runs in fresh interpreters: about 10 s
def test_numba_loads_only_in_a_run_whose_stages_compile(tmp_path: Path) -> None:
    """A statistics example that does not bootstrap (conformal-pac: SSBC's binomial tail; lm-eval-accuracy: Tango's
    interval) never imports numba; paired-ratio's bootstrap does, at its kernel's first call (the check works)."""
    ran = {spec: _modules_after("run", f"specs/{spec}/spec.yaml", "--ledger", str(tmp_path / f"{spec}.db"))
           for spec in ("conformal-pac", "lm-eval-accuracy", "paired-ratio")}
    assert all("certa" in modules and "sqlalchemy" in modules for modules in ran.values())  # each ran and recorded
    assert "numba" not in ran["conformal-pac"] | ran["lm-eval-accuracy"]
    assert "numba" in ran["paired-ratio"]


@pytest.mark.slow  # a run and a verification in a fresh interpreter: about 2 s
def test_incremental_verify_loads_no_numpy_no_stage_module_no_replay(small_spec: Path, tmp_path: Path) -> None:
    """``certa verify --since-checkpoint`` checks a paired-ratio run recorded after the checkpoint (its certificate's
    method identities included: ``catalogue.AUDITS``) without numpy, the stage registry or what replaying needs."""
    from certa.engine import run
    from certa.engine.foundation.signing import generate_key_pair, load_private_key
    from certa.engine.services.checkpoints import sign_head
    from certa.ledger import Ledger

    private_pem, public_pem = generate_key_pair()
    (tmp_path / "k.pub").write_bytes(public_pem)
    with Ledger.open(tmp_path / "l.db") as ledger:
        run(small_spec, ledger=ledger)
        sign_head(ledger, [load_private_key(private_pem)], tmp_path / "c.checkpoint")
        run(small_spec, ledger=ledger)
    imported = _modules_imported_by("verify", "--ledger", str(tmp_path / "l.db"), "--checkpoint",
                                    str(tmp_path / "c.checkpoint"), "--public-key", str(tmp_path / "k.pub"),
                                    "--since-checkpoint")
    assert "certa.engine.core.stages.ratio_audit" in imported  # it did check the certificate's identities
    assert not {m.split(".")[0] for m in imported} & {"numpy", "scipy", "numba", "pyarrow", "yaml", "jsonschema"}
    assert not imported & {"certa.engine.core.stages.paired_ratio", "certa.engine.core.interpreter",
                           "certa.engine.core.spec", "certa.engine.core.inputs", "certa.ledger.bundle"}
