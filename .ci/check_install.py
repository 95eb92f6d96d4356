"""CI: what the README's set-up commands left in the venv's site-packages.

    python3 .ci/check_install.py wheel      after ``pip install .``: every file under site-packages/certa is one
                                            the wheel installed (its RECORD), so running certa wrote nothing there
    python3 .ci/check_install.py editable   after ``pip install -e .``: no certa folder is left in site-packages
                                            (a stray one becomes an empty namespace package that hides the editable
                                            install), and ``import certa`` is the checkout's

Exit 1 naming what is wrong.
"""

from __future__ import annotations

import csv
import importlib.metadata
import sys
import sysconfig
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def check_wheel() -> list[str]:
    site = _site_packages()
    distribution = importlib.metadata.distribution("certa")
    record = distribution.read_text("RECORD") or ""
    listed = {(site / row[0]).resolve() for row in csv.reader(record.splitlines()) if row}
    present = {p.resolve() for p in (site / "certa").rglob("*") if p.is_file()}
    return [f"not installed by the wheel: {p}" for p in sorted(present - listed)]


def check_editable() -> list[str]:
    problems = []
    stray = _site_packages() / "certa"
    if stray.exists():
        problems.append(f"left in site-packages after the editable install: {stray} "
                        f"({sum(1 for _ in stray.rglob('*'))} entries)")
    import certa

    if Path(certa.__file__).resolve() != CHECKOUT / "__init__.py":
        problems.append(f"import certa gives {certa.__file__}, not the checkout's {CHECKOUT / '__init__.py'}")
    return problems


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    checks = {"wheel": check_wheel, "editable": check_editable}
    if mode not in checks:
        sys.exit("usage: check_install.py wheel|editable")
    found = checks[mode]()
    for line in found:
        print(f"check_install: {line}", file=sys.stderr)
    print(f"check_install: {mode}: {'FAILED' if found else 'ok'}")
    sys.exit(1 if found else 0)
