"""One import namespace: everything is ``certa.*``, so files of a user's own in the working folder named like
certa's parts (``ledger.py``, ``engine/``, ``schemas/``, ``cli.py``) change nothing, for the Python API and for
the command alike (before 0.10.0 certa installed those four names at the top of site-packages, and a user's
``ledger.py`` broke ``from ledger import Ledger``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import certa
from tests.conftest import small_spec_folder

# Files a user may well have: each would break certa at import if it shadowed certa's module of that name.
_SHADOWS = {
    "ledger.py": "raise ImportError('the user ledger.py was imported')\n",
    "cli.py": "raise ImportError('the user cli.py was imported')\n",
    "engine/__init__.py": "raise ImportError('the user engine/ was imported')\n",
    "schemas/__init__.py": "raise ImportError('the user schemas/ was imported')\n",
}


@pytest.fixture
def users_folder(tmp_path: Path) -> Path:
    """A working folder with a spec and its data, and ``ledger.py``, ``cli.py``, ``engine/``, ``schemas/`` of the
    user's own that fail when imported."""
    for name, text in _SHADOWS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    small_spec_folder(tmp_path)
    return tmp_path


def _python(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` in ``folder``: the folder is first on ``sys.path`` (``-c`` and ``-m`` put it there)."""
    return subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True, text=True, timeout=300)


def test_the_python_api_ignores_a_users_ledger_py_engine_and_schemas(users_folder: Path) -> None:
    code = ("import json, certa\nfrom certa import Ledger, run\n"
            "with Ledger.open('l.db') as ledger:\n    result = run('spec.yaml', ledger=ledger)\n"
            "print(json.dumps([certa.__file__, result.verdict]))")
    done = _python(users_folder, "-c", code)
    assert done.returncode == 0, done.stderr
    location, verdict = json.loads(done.stdout)
    assert Path(location).resolve() == Path(certa.__file__).resolve() and verdict == "PASS"


def test_the_command_ignores_them_too(users_folder: Path) -> None:
    validated = _python(users_folder, "-m", "certa", "validate", "spec.yaml")
    assert validated.returncode == 0, validated.stderr
    listed = _python(users_folder, "-m", "certa", "list", "--json", "--ledger", "none-yet.db")
    assert "the user" not in listed.stdout + listed.stderr and "Traceback" not in listed.stderr


def test_the_public_api_is_one_namespace() -> None:
    assert certa.__all__ == sorted(certa.__all__, key=str.casefold)
    from certa.engine import run
    from certa.ledger import Ledger

    assert certa.run is run and certa.Ledger is Ledger
    with pytest.raises(AttributeError, match="no attribute 'Run'"):
        certa.Run  # noqa: B018


def test_importing_certa_loads_neither_numpy_nor_sqlalchemy(tmp_path: Path) -> None:
    code = "import sys, certa\nprint(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'sqlalchemy'}))"
    done = _python(tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
