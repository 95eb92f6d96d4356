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
import site
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


def _read_only(*folders: Path) -> list[str]:
    """A command prefix under which ``folders`` are read-only: for root (who writes anywhere whatever the modes
    say), a private mount namespace with each folder bound read-only onto itself; for anyone else, nothing (the
    caller removes write permission instead)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("root needs unshare and mount (util-linux) to make a folder read-only")
    binds = " && ".join(f'mount --bind "${i}" "${i}" && mount -o remount,bind,ro "${i}"'
                        for i in range(1, len(folders) + 1))
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{binds} && shift {len(folders)} && exec "$@"',
            "sh", *map(str, folders)]


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="session")
def installed_wheel(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A venv holding the wheel (its dependencies seen from this interpreter's site-packages), and the venv's
    ``certa`` package folder.

    ``venv --system-site-packages`` would not do: made from a venv's interpreter (CI's), the new venv's "system" is
    the base Python's site-packages, not that venv's, and a fresh machine's base Python lacks certa's
    dependencies. So the venv is plain and a ``.pth`` file lists this interpreter's site-packages folders (after the
    venv's own, so the wheel's ``certa`` comes first; a listed folder's own ``.pth`` files, such as an editable
    install's finder, are not run)."""
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    seen = [folder for folder in (*site.getsitepackages(), site.getusersitepackages()) if Path(folder).is_dir()]
    venv_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(venv_site) / "certa-test-dependencies.pth").write_text("".join(f"{folder}\n" for folder in seen))
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    where = subprocess.run([str(python), "-c", "import certa; print(certa.__file__)"], cwd=venv,
                           capture_output=True, text=True, timeout=60)
    package = Path(where.stdout.strip()).parent
    assert package.is_relative_to(venv), f"certa imported from {package}, not the venv's wheel"
    return venv, package


def _run_example(venv: Path, folder: Path, cache_home: Path, *read_only: Path) -> subprocess.CompletedProcess[str]:
    shutil.copytree(ROOT / "specs" / "paired-ratio", folder)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "NUMBA_CACHE_DIR")}
    env |= {"XDG_CACHE_HOME": str(cache_home), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    command = [*_read_only(*read_only), str(venv / "bin" / "certa"), "run", "spec.yaml", "--ledger",
               str(folder / "ledger.db")]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900, env=env)


def test_the_installed_wheel_runs_from_a_read_only_site_packages_and_writes_nothing_there(
        installed_wheel: tuple[Path, Path], tmp_path: Path) -> None:
    """The README's first command runs an example from the wheel: Numba's compiled kernels go to the user's cache
    folder (``$XDG_CACHE_HOME/certa/numba``), never into site-packages, which may be read-only (and where stray
    files once hid a later editable install of certa behind an empty namespace package)."""
    venv, package = installed_wheel
    before = _files_under(package)
    site_packages = package.parent
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(site_packages)], check=True)
    try:
        done = _run_example(venv, tmp_path / "example", tmp_path / "cache", site_packages)
    finally:
        if os.geteuid() != 0:
            subprocess.run(["chmod", "-R", "u+w", str(site_packages)], check=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    assert _files_under(package) == before
    assert any(p.suffix == ".nbi" for p in (tmp_path / "cache" / "certa" / "numba").rglob("*"))


def test_with_a_read_only_cache_folder_too_the_example_still_passes_uncached(
        installed_wheel: tuple[Path, Path], tmp_path: Path) -> None:
    venv, package = installed_wheel
    before = _files_under(package)
    cache_home = tmp_path / "cache"
    cache_home.mkdir()
    if os.geteuid() != 0:
        cache_home.chmod(0o555)
    done = _run_example(venv, tmp_path / "example", cache_home, package.parent, cache_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    assert _files_under(package) == before and _files_under(cache_home) == []
