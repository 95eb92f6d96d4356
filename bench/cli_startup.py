"""Wall time of the ``certa`` command as a user meets it: ``--help``, ``list`` on a small ledger, ``validate``,
``show`` and ``COMMAND --help`` (median and best of N fresh processes). Goal: median < 0.2 s for ``--help`` and
``list``.

    python3 bench/cli_startup.py [--repeats 11]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _wall(argv: list[str], cwd: Path, repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    certa = shutil.which("certa") or f"{sys.executable} -m cli"
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "l.db"
        subprocess.run([certa, "run", str(ROOT / "specs/paired-ratio/spec.yaml"), "--ledger", str(ledger)],
                       cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        cases = {
            "certa --help": [certa, "--help"],
            "certa run --help": [certa, "run", "--help"],
            "certa list (1 run)": [certa, "list", "--ledger", str(ledger)],
            "certa validate": [certa, "validate", str(ROOT / "specs/paired-ratio/spec.yaml")],
            "certa show latest": [certa, "show", "latest", "--ledger", str(ledger)],
            "python3 -c pass (interpreter alone)": [sys.executable, "-c", "pass"],
        }
        print(f"load average {os.getloadavg()[0]:.2f}; {args.repeats} fresh processes each")
        print(f"{'command':<40} {'median s':>9} {'best s':>9}")
        for name, argv in cases.items():
            median, best = _wall(argv, Path(tmp), args.repeats)
            goal = "  (goal < 0.2 s)" if name in ("certa --help", "certa list (1 run)") else ""
            print(f"{name:<40} {median:>9.3f} {best:>9.3f}{goal}")


if __name__ == "__main__":
    main()
