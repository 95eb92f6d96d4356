"""This checkout as a user installs it: its wheel in a new virtual environment, for the benches that time the
``certa`` command in fresh processes (bench/ledger_reads.py, bench/cli_startup.py).

A run from the checkout is not what a user meets: an editable install adds its import finder to every start
of the interpreter (a ``.pth`` file in site-packages), and with ``PYTHONDONTWRITEBYTECODE`` set no module of
the checkout is ever cached as bytecode, so each start compiles them all again. Here the wheel is built from a
copy of the package's files (nothing is written into the checkout: ``pip wheel --no-deps
--no-build-isolation``) and installed with ``pip install --no-deps --no-index``, which compiles every module
to bytecode as it does for a user. The dependencies are those of the interpreter running the bench:

- ``clean``: a venv whose one ``.pth`` file names that interpreter's site-packages folders as paths only, so
  the dependencies import but none of those folders' ``.pth`` files runs (no editable finder, nothing the
  environment added there): what ``pip install certa-*.whl`` into a venv gives;
- ``system``: a venv made with ``--system-site-packages``, whose ``site`` runs those ``.pth`` files too.

Python's ``venv`` and ``site`` are documented at https://docs.python.org/3/library/venv.html and
https://docs.python.org/3/library/site.html (path lines and ``import`` lines of ``.pth`` files).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

__all__ = ["PACKAGE_FILES", "install_wheel", "venv_python", "plain_env"]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FILES = ("pyproject.toml", "README.md", "cli.py", "engine", "ledger", "schemas")
"""What the wheel is built from (``pyproject.toml``: ``py-modules`` and ``packages.find``, the readme)."""


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def plain_env() -> dict[str, str]:
    """This process's environment without ``PYTHONPATH`` (it would import the checkout instead of the wheel)
    and without ``PYTHONDONTWRITEBYTECODE`` (pip compiles the installed modules, as for a user)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}


def install_wheel(work: Path) -> dict[str, Path]:
    """Build this checkout's wheel in ``work`` and install it into the venvs ``work/clean`` and
    ``work/system``; their interpreters by name. ``subprocess.CalledProcessError`` if pip or venv fails."""
    source = work / "source"
    for name in PACKAGE_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    quiet = {"check": True, "capture_output": True, "env": plain_env()}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(work / "wheel"), str(source)], cwd=work, **quiet)
    wheel = next((work / "wheel").glob("certa-*.whl"))
    folders = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if Path(p).is_dir()]
    pythons = {}
    for name, options in (("clean", []), ("system", ["--system-site-packages"])):
        venv = work / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", *options, str(venv)], **quiet)
        python = venv_python(venv)
        if name == "clean":
            own = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                                 text=True, **quiet).stdout.strip()
            Path(own, "_bench_dependencies.pth").write_text("".join(f"{p}\n" for p in folders), encoding="utf-8")
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                        "-q", str(wheel)], **quiet)
        pythons[name] = python
    return pythons
