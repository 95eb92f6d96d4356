"""Time and memory of certifying a whole benchmark suite (issue 34, item 6): two folders of lm-evaluation-harness
samples files, one per task (``lm-eval-suite`` inputs, docs/suites.md), read, paired per (task, item) and certified
by ``paired.suite_delta`` (every task, non-inferior on every task, which tasks differ, the pooled difference),
against reading the same files with ``json.loads`` alone.

    PYTHONPATH=. python3 bench/suite_import.py                      # 60 tasks, 10^5 items per side
    PYTHONPATH=. python3 bench/suite_import.py --tasks 6 --items 6000 --json   # small: checks the plumbing

The folders are written once into a temporary folder (nothing is downloaded): ``--tasks`` samples files per side
named as lm-eval 0.4 names them (``samples_<task>_<time>.jsonl``), ``--items`` documents in all, split evenly, each
line shaped as lm-eval writes a multiple-choice task's (doc id, filter, hashes, ``acc``); the subject's answers
differ from the baseline's on about 5 % of documents (seeded). Each measurement runs in a fresh process: certa is
``certa run SPEC --no-record`` in-process (``certa.engine.services.run.run`` of a dev spec, no ledger;
its imports included): read
both inputs (every file hashed into the input's bundle), pair, certify every task (Tango interval, McNemar, Holm
across tasks), the suite (every task against the margin, the micro pooled interval) and build the certificate; the reference reads every line of every file with ``json.loads``. Wall
seconds best of ``--repeats`` processes, and each process's peak RSS (``ru_maxrss`` from ``os.wait4``). Goal: certa
< 5 s and < 1 GB on the 2-core machine. ``--json`` adds ``{"rows": [[what, measured, goal]], ...}`` as the last
line (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TIME = {"baseline": "2026-11-24T12-00-00.000001", "subject": "2026-11-24T13-00-00.000002"}
GOAL_SECONDS, GOAL_MB = 5.0, 1024.0

CERTA = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    start = time.perf_counter()
    from certa.engine.services.run import run
    result = run(Path(sys.argv[1]))
    print(time.perf_counter() - start, result.certificate["content"]["verdict"])
    """)
REFERENCE = textwrap.dedent("""\
    import json, sys, time
    from pathlib import Path
    start = time.perf_counter()
    count = 0
    for folder in sys.argv[1:]:
        for path in sorted(Path(folder).glob("samples_*.jsonl")):
            count += len([json.loads(line) for line in path.read_bytes().splitlines() if line])
    print(time.perf_counter() - start, count)
    """)


def write_suite(root: Path, tasks: int, items: int) -> Path:
    """Both sides' folders and a spec certifying ``acc`` per task; returns the spec's path."""
    per_task = np.full(tasks, items // tasks)
    per_task[: items % tasks] += 1
    for side in ("baseline", "subject"):
        folder = root / "runs" / side
        folder.mkdir(parents=True)
        for t, n in enumerate(per_task.tolist()):
            task = f"suite_task_{t:02d}"
            truth = np.random.default_rng(1000 + t).random(n) < 0.7
            flips = np.random.default_rng(t).random(n) < 0.05
            acc = truth if side == "baseline" else truth ^ flips
            lines = []
            for doc in range(n):
                digest = hashlib.sha256(f"{task}-{doc}".encode()).hexdigest()
                lines.append(json.dumps({"doc_id": doc, "filter": "none", "doc_hash": digest, "prompt_hash": digest,
                                         "target_hash": digest, "metrics": ["acc"], "acc": float(acc[doc])}))
            (folder / f"samples_{task}_{TIME[side]}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = {"certa": 1, "name": "suite-bench", "seed": 3, "profile": "dev",
            "inputs": {side: {"path": f"runs/{side}", "format": "lm-eval-suite"} for side in ("baseline", "subject")},
            "stages": [{"id": "acc", "use": "paired.suite_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "acc", "margin": 0.05,
                                 "pooled": "micro"}}],
            "gates": [{"id": "every-task", "metric": "acc.every_task.decision", "decided": "NONINFERIOR"}]}
    path = root / "spec.yaml"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def measure(code: str, *args: str) -> tuple[float, float, str]:
    """(seconds the child reports, its peak RSS in MB, the rest of its line) of ``code`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    out, err = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    if status != 0:
        raise SystemExit(f"the measured process failed: {err[-2000:]}")
    seconds, _, rest = out.strip().splitlines()[-1].partition(" ")
    return float(seconds), usage.ru_maxrss / 1024, rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--items", type=int, default=100_000, help="documents per side, over all tasks")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="certa-suite-bench-") as folder:
        spec = write_suite(Path(folder), args.tasks, args.items)
        size = sum(p.stat().st_size for p in Path(folder).rglob("*.jsonl")) / 1e6
        certa = min((measure(CERTA, str(spec)) for _ in range(args.repeats)), key=lambda m: m[0])
        sides = [str(Path(folder) / "runs" / side) for side in ("baseline", "subject")]
        reference = min((measure(REFERENCE, *sides) for _ in range(args.repeats)), key=lambda m: m[0])
    print(f"{args.tasks} tasks, {args.items:,} items per side ({size:.1f} MB of samples files in all), best of "
          f"{args.repeats} processes", flush=True)
    print(f"  certa (read both folders, pair per task and item, certify every task and the suite; verdict {certa[2]}): "
          f"{certa[0]:.2f} s, peak RSS {certa[1]:,.0f} MB (goal < {GOAL_SECONDS:g} s, < {GOAL_MB:,.0f} MB)")
    print(f"  json.loads of every line: {reference[0]:.2f} s, peak RSS {reference[1]:,.0f} MB; ratio "
          f"{certa[0] / reference[0]:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        met = certa[0] < GOAL_SECONDS and certa[1] < GOAL_MB
        rows = [[f"a {args.tasks}-task lm-eval suite of {args.items:,} items per side (`lm-eval-suite` inputs, "
                 "`paired.suite_delta`: every task and the suite; fresh processes, best of "
                 f"{args.repeats}) (`bench/suite_import.py`)",
                 f"**{certa[0]:.2f} s, {certa[1]:,.0f} MB** peak RSS; `json.loads` of the same lines "
                 f"{reference[0]:.2f} s ({certa[0] / reference[0]:.1f}×)",
                 f"< 5 s and < 1 GB: {'met' if met else '**not met**'}"]]
        print(json.dumps({"rows": rows, "certa_s": certa[0], "certa_mb": certa[1], "reference_s": reference[0]}))


if __name__ == "__main__":
    main()
