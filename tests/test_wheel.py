"""The wheel is the product: users run ``pip install .`` (not ``-e``), so every file certa reads at run time must
ship in the wheel. The wheel is built once per session from a copy of the project's files (the work tree is
never touched: no ``build/``, no ``*.egg-info`` left behind), then every file under ``engine/``, ``ledger/``
and ``schemas/`` -- Python modules and everything else (templates, CSS, JavaScript, JSON Schemas, frozen
``name@version`` schemas, Alembic scripts) -- must be in it. A new kind of data file that
``[tool.setuptools.package-data]`` in pyproject.toml does not cover fails here, not in a user's traceback.

The build uses the interpreter's own setuptools without build isolation when it can build this project offline
(setuptools >= 70.1, or >= 68 with ``wheel``); otherwise pip builds in its isolated environment, as
``pip install .`` does, which needs the package index (or pip's cache) for setuptools.
``.ci/wheel_examples.sh`` goes further: it installs the wheel into a clean venv and runs the examples."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "ledger", "schemas")
MODULES = ("__init__.py", "__main__.py", "cli.py")
"""The repository's folders and top-level modules that install under ``certa/`` (pyproject.toml: package-dir
maps the package ``certa`` to the repository's top)."""


def _project_files() -> list[str]:
    """The files the next commit would hold: tracked by git, or new and not ignored; only those on disk."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the project's files are the ones git lists")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, timeout=60)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout ({listed.stderr.decode(errors='replace').strip()})")
    return sorted({name for name in listed.stdout.decode().split("\0") if name and (ROOT / name).is_file()})


def _setuptools_builds_offline() -> bool:
    """Whether this interpreter's setuptools satisfies pyproject's build requirement and can write a wheel."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    from importlib.metadata import version

    numbers = tuple(int(part) for part in version("setuptools").split(".")[:2] if part.isdigit())
    return numbers >= (70, 1) or (numbers >= (68, 0) and importlib.util.find_spec("wheel") is not None)


@pytest.fixture(scope="session")
def project_files() -> list[str]:
    return _project_files()


@pytest.fixture(scope="session")
def wheel(project_files: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the project's files."""
    source = tmp_path_factory.mktemp("wheel-source")
    for name in project_files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("wheel-dist")
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--wheel-dir", str(dist), "-q"]
    if _setuptools_builds_offline():
        command[5:5] = ["--no-build-isolation", "--no-index"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    built = subprocess.run(command, cwd=source, capture_output=True, text=True, timeout=600,
                           env={**env, "PIP_NO_INPUT": "1"})
    assert built.returncode == 0, f"{' '.join(command)} failed:\n{built.stdout}\n{built.stderr}"
    wheels = sorted(dist.glob("certa-*.whl"))
    assert len(wheels) == 1, f"expected one certa wheel in {dist}, found {[w.name for w in dist.iterdir()]}"
    return wheels[0]


@pytest.fixture(scope="session")
def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _under_packages(project_files: list[str]) -> list[str]:
    return [name for name in project_files if name.split("/", 1)[0] in PACKAGES]


def test_every_data_file_ships(project_files: list[str], wheel_names: set[str]) -> None:
    data = [name for name in _under_packages(project_files) if not name.endswith(".py")]
    assert data, "no data files found under engine/, ledger/ or schemas/"
    missing = [name for name in data if f"certa/{name}" not in wheel_names]
    assert not missing, ("not in the wheel (add a glob to [tool.setuptools.package-data] in pyproject.toml):\n  "
                         + "\n  ".join(missing))


def test_every_module_ships(project_files: list[str], wheel_names: set[str]) -> None:
    modules = [name for name in _under_packages(project_files) if name.endswith(".py")] + list(MODULES)
    missing = [name for name in modules if f"certa/{name}" not in wheel_names]
    assert not missing, ("modules not in the wheel (a folder missing from [tool.setuptools] packages in "
                         "pyproject.toml?):\n  " + "\n  ".join(missing))


def test_pyproject_lists_every_package_folder() -> None:
    """The package list is explicit (a mapped package cannot be found by setuptools' find): it names exactly
    ``certa`` and every folder with an ``__init__.py`` under engine/, ledger/ and schemas/."""
    import tomllib

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    folders = {"certa", *("certa." + ".".join(init.parent.relative_to(ROOT).parts)
                         for package in PACKAGES for init in (ROOT / package).rglob("__init__.py"))}
    assert sorted(listed) == sorted(folders)


def test_the_wheel_installs_one_namespace(wheel_names: set[str]) -> None:
    """Everything is under ``certa/``: no ``engine``, ``ledger``, ``schemas`` or ``cli`` at the top of
    site-packages (a user's own ``ledger.py`` cannot shadow certa, nor certa another project's ``schemas``)."""
    top = {name.split("/", 1)[0] for name in wheel_names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"certa"}


def test_the_wheel_holds_no_build_debris(wheel_names: set[str]) -> None:
    debris = sorted(name for name in wheel_names if "__pycache__/" in name or name.endswith((".pyc", ".pyo")))
    assert not debris, f"compiled files in the wheel: {debris}"


def test_the_wheel_installs_the_certa_command(wheel: Path, wheel_names: set[str]) -> None:
    entry_points = [name for name in wheel_names if name.endswith(".dist-info/entry_points.txt")]
    assert len(entry_points) == 1, f"no entry_points.txt in the wheel: {sorted(wheel_names)}"
    with zipfile.ZipFile(wheel) as archive:
        lines = archive.read(entry_points[0]).decode().splitlines()
    assert "certa = certa.cli:main" in [line.strip() for line in lines], lines
