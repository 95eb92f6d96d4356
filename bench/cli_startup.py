"""Wall time of the ``certa`` command as a user meets it: ``--help``, ``list`` on a small ledger, ``validate``,
``show`` and ``COMMAND --help`` (median and best of N fresh processes), beside the interpreter's own start-up.
Goal: median < 0.2 s for ``--help`` and ``list``.

    python3 bench/cli_startup.py [--repeats 11] [--wheel] [--certa 'COMMAND']

By default the command is this checkout's ``cli.main`` under this interpreter (``python -c "import sys; from
cli import main; sys.exit(main())"`` in the checkout: what the ``certa`` entry point runs). ``--certa`` times
another command instead (e.g. an installed entry point; note that a pyenv shim adds a shell to every start).
``--wheel`` also times the ``certa`` entry point of this checkout's wheel installed in a clean venv
(bench/wheel_venv.py: compiled bytecode, no editable finder, none of site-packages' ``.pth`` files), as a user
who ran ``pip install`` meets it, beside that venv's ``python -c pass``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from wheel_venv import install_wheel, plain_env  # noqa: E402  (bench/wheel_venv.py)

CERTA = "import sys; from certa.cli import main; sys.exit(main())"  # what the ``certa`` entry point runs
GOAL_CASES = ("certa --help", "certa list (1 run)")


def _wall(argv: list[str], cwd: Path, repeats: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def _cases(certa: list[str], python: str, ledger: Path) -> dict[str, list[str]]:
    return {
        "certa --help": [*certa, "--help"],
        "certa run --help": [*certa, "run", "--help"],
        "certa list (1 run)": [*certa, "list", "--ledger", str(ledger)],
        "certa validate": [*certa, "validate", str(ROOT / "specs/paired-ratio/spec.yaml")],
        "certa show latest": [*certa, "show", "latest", "--ledger", str(ledger)],
        "python3 -c pass (interpreter alone)": [python, "-c", "pass"],
    }


def _print_cases(title: str, cases: dict[str, list[str]], cwd: Path, repeats: int,
                 env: dict[str, str] | None = None) -> None:
    print(title)
    print(f"{'command':<40} {'median s':>9} {'best s':>9}")
    for name, argv in cases.items():
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)  # warm: files cached
        median, best = _wall(argv, cwd, repeats, env)
        goal = "  (goal < 0.2 s)" if name in GOAL_CASES else ""
        print(f"{name:<40} {median:>9.3f} {best:>9.3f}{goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--certa", help="the command to time (default: this checkout's cli.main under this "
                                        "interpreter)")
    parser.add_argument("--wheel", action="store_true", help="also time this checkout's wheel installed in a "
                                                             "clean venv")
    args = parser.parse_args()
    certa = shlex.split(args.certa) if args.certa else [sys.executable, "-c", CERTA]
    cwd = Path.cwd() if args.certa else ROOT  # the checkout's folder puts its cli first on sys.path
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "l.db"
        subprocess.run([*certa, "run", str(ROOT / "specs/paired-ratio/spec.yaml"), "--ledger", str(ledger)],
                       cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        bytecode = "off (PYTHONDONTWRITEBYTECODE)" if sys.flags.dont_write_bytecode else "on"
        print(f"load average {os.getloadavg()[0]:.2f}; {args.repeats} fresh processes each; bytecode cache "
              f"{bytecode}")
        _print_cases(f"{' '.join(certa) if args.certa else 'this checkout (python -c ...)'}:",
                     _cases(certa, sys.executable, ledger), cwd, args.repeats)
        if args.wheel:
            try:
                pythons = install_wheel(Path(tmp) / "wheel")
            except (subprocess.CalledProcessError, StopIteration) as error:
                print(f"installed wheel: not measured ({error})")
                return
            entry = pythons["clean"].parent / ("certa.exe" if os.name == "nt" else "certa")
            _print_cases("\nwheel installed in a clean venv (its certa entry point, its python):",
                         _cases([str(entry)], str(pythons["clean"]), ledger), Path(tmp), args.repeats, plain_env())


if __name__ == "__main__":
    main()
