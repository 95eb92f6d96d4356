"""How fast is the ledger? Recording, ``verify``, ``certa list``, ``certa prove`` and ``verify-bundle``.

Usage: python bench/ledger.py [--runs 10000] [--decisions 6] [--repeat 5] [--workdir DIR]

Goals (issue "Ledger measured and held"): >= 100 small runs/s recorded on SQLite, ``verify`` of 10^5 entries
< 5 s, ``certa list`` on 10^4 runs < 0.3 s, ``certa prove`` < 50 ms.

What it does:

1. Runs/s. A tiny spec (the test suite's paired ratio on 60 windows, dev profile, 200 replicates) run end to
   end with ``engine.run(spec, ledger=...)`` (validate, load, bootstrap, seal, record), and the recording
   alone (``certa.engine.services.run.record_execution`` of that run's execution again under new run ids), on SQLite (WAL,
   ``synchronous=FULL``, as certa opens it) and on PostgreSQL when CERTA_BENCH_POSTGRES_URL or
   CERTA_TEST_POSTGRES_URL is set (a URL to a server where the bench may create a database).
2. A big ledger: ``--runs`` runs recorded through ``certa.engine.services.run.record_execution``, each the tiny run's real spec,
   inputs (the same two blobs, stored once) and certificate (re-sealed under its own run id), with its
   decisions padded to ``--decisions``: 1 run + 2 input + 6 decision + 1 certificate entry = 10 entries a
   run, so 10^4 runs give 10^5 entries and 10^4 certificates (every one checked by ``verify``).
3. On it: ``verify`` (the engine's, with certificate checks, and ``ledger.verify_ledger`` alone), ``list``,
   ``prove`` of the oldest run against a checkpoint of the whole ledger, and ``verify-bundle``; each as a user
   would run it (``certa ...`` in a subprocess: wall time, interpreter start-up included) and in-process.

Timings are the best of ``--repeat`` (the minimum is the least disturbed by other load on a shared machine)
with the median beside it; ``uptime`` is printed first and last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certa.engine import run  # noqa: E402
from certa.engine.services.audit import verify, verify_bundle  # noqa: E402
from certa.engine.services.run import record_execution
from certa.engine.core.inputs import load_tables  # noqa: E402
from certa.engine.core.interpreter import RunDecisions, StageDecisions, execute  # noqa: E402
from certa.engine.core.spec import load_plan  # noqa: E402
from certa.engine.core.tables import columns_to_csv_bytes  # noqa: E402
from certa.ledger import Ledger, merkle, verify_ledger  # noqa: E402
from certa.ledger.bundle import build_bundle  # noqa: E402
from certa.ledger.checkpoint import sign_checkpoint  # noqa: E402
from certa.engine.foundation.signing import generate_key_pair, load_private_key, load_public_key  # noqa: E402

GOALS = {"runs_per_s": 100.0, "verify_s": 5.0, "list_s": 0.3, "prove_s": 0.05}


def timed(action: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(best, median) wall seconds of ``repeat`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def cli_time(args: list[str], repeat: int, env: dict[str, str] | None = None,
             before: Callable[[], None] | None = None) -> tuple[float, float]:
    """(best, median) wall seconds of ``certa ARGS`` in a fresh process (as a user runs it)."""
    times = []
    for _ in range(repeat):
        if before:
            before()
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", "import sys; from certa.cli import main; sys.exit(main())", *args],
                              cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(f"certa {' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}")
    return min(times), statistics.median(times)


def line(label: str, best: float, median: float, *, goal: float | None = None, unit: str = "s") -> None:
    verdict = "" if goal is None else ("  goal < %g s: %s" % (goal, "met" if best < goal else "NOT MET"))
    print(f"  {label:<58} best {best * 1000:9.1f} ms   median {median * 1000:9.1f} ms{verdict}")


def write_tiny_spec(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import SMALL_SPEC, window_columns  # the test suite's paired-ratio spec and synthetic windows

    base, subj = window_columns(60, seed=3)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(base))
    (folder / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subj))
    spec = folder / "spec.yaml"
    spec.write_text(SMALL_SPEC.replace("name: small-paired", "name: bench-tiny")
                    .replace("replicates: 500", "replicates: 200"), encoding="utf-8")
    return spec


class TinyRecorder:
    """Records the tiny spec's real execution again and again under new run ids (no recomputation)."""

    def __init__(self, spec: Path, decisions: int) -> None:
        plan = load_plan(spec)
        tables = load_tables(plan)
        execution = execute(plan, tables)
        real = list(execution.decisions)
        padded = RunDecisions([StageDecisions(d.stage, (d.decision,))
                               for d in ([real[i % len(real)] for i in range(decisions)] if decisions else real)])
        self.execution = SimpleNamespace(plan=plan, tables=tables, decisions=padded, captured=execution.captured,
                                         content=execution.content)
        self.content = execution.content
        self.entries_per_run = 1 + len(tables) + len(padded) + sum(len(g) for g in execution.captured.values()) + 1

    def record(self, ledger: Ledger) -> str:
        run_id = uuid.uuid4().hex
        record_execution(ledger, run_id, self.execution)  # type: ignore[arg-type]
        return run_id


def bench_recording(url: str, spec: Path, recorder: TinyRecorder, n: int, repeat: int, label: str) -> float:
    with Ledger.open(url) as ledger:
        run(spec, ledger=ledger)  # warm: imports, schema, caches
        best_e2e, med_e2e, _ = timed(lambda: [run(spec, ledger=ledger) for _ in range(n)], repeat)
        best_rec, med_rec, _ = timed(lambda: [recorder.record(ledger) for _ in range(n)], repeat)
    e2e = n / best_e2e
    print(f"  {label}: engine.run(tiny spec) end to end   {e2e:8.1f} runs/s best ({n / med_e2e:.1f} median)"
          f"   goal >= 100: {'met' if e2e >= GOALS['runs_per_s'] else 'NOT MET'}")
    print(f"  {label}: Ledger.record_run alone            {n / best_rec:8.1f} runs/s best ({n / med_rec:.1f} median)")
    return e2e


def postgres_server() -> str | None:
    return os.environ.get("CERTA_BENCH_POSTGRES_URL") or os.environ.get("CERTA_TEST_POSTGRES_URL")


def with_postgres_database(server: str, action: Callable[[str], None]) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"certa_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        action(make_url(server).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def build_big_ledger(db: Path, recorder: TinyRecorder, runs: int) -> tuple[str, float]:
    start = time.perf_counter()
    with Ledger.open(db) as ledger:
        first = recorder.record(ledger)
        for _ in range(runs - 1):
            recorder.record(ledger)
    return first, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the big ledger (default 10000)")
    parser.add_argument("--decisions", type=int, default=6, help="decision entries per run in the big ledger")
    parser.add_argument("--small", type=int, default=50, help="runs per runs/s measurement (default 50)")
    parser.add_argument("--repeat", type=int, default=5, help="timings per figure; the best is reported")
    parser.add_argument("--workdir", type=Path, help="keep the ledgers here (default: a temporary folder)")
    args = parser.parse_args()

    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    work = args.workdir or Path(tempfile.mkdtemp(prefix="certa-bench-ledger-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = write_tiny_spec(work / "tiny")
    recorder = TinyRecorder(spec, args.decisions)

    print(f"\n1. Small runs recorded per second ({args.small} runs a timing, best of {args.repeat})")
    small_db = work / "small.db"
    bench_recording(str(small_db), spec, recorder, args.small, args.repeat, "SQLite    ")
    server = postgres_server()
    if server:
        with_postgres_database(server, lambda url: bench_recording(url, spec, recorder, args.small, args.repeat,
                                                                   "PostgreSQL"))
    else:
        print("  PostgreSQL: skipped; set CERTA_BENCH_POSTGRES_URL (or CERTA_TEST_POSTGRES_URL) to a server URL, "
              "e.g. postgresql+psycopg://postgres@127.0.0.1:5432/postgres, where the bench may create a database")

    big = work / "big.db"
    if big.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{big}{suffix}").unlink(missing_ok=True)
    first, seconds = build_big_ledger(big, recorder, args.runs)
    with Ledger.open(big) as ledger:
        n_entries, n_runs = ledger.entry_count(), len(ledger.runs())
    print(f"\n2. Big ledger: {n_runs} runs, {n_entries} entries ({recorder.entries_per_run} a run), built with "
          f"Ledger.record_run in {seconds:.1f} s ({n_runs / seconds:.0f} runs/s); {big.stat().st_size / 1e6:.0f} MB")

    repeat = args.repeat
    print(f"\n3. On it (best and median of {repeat})")
    with Ledger.open(big) as ledger:
        best, median, report = timed(lambda: verify(ledger), min(repeat, 3))
        assert report.intact, report.problems[:3]
        line(f"verify, in process (certa.engine.services.audit.verify, {report.certificates_checked} certificates)", best, median,
             goal=GOALS["verify_s"])
        best, median, _ = timed(lambda: verify_ledger(ledger), min(repeat, 3))
        line("verify, chain/blobs/index/meta only (ledger.verify_ledger)", best, median)
        best, median, _ = timed(lambda: ledger.runs(), repeat)
        line("list, in process (Ledger.runs)", best, median, goal=GOALS["list_s"])

        private_pem, public_pem = generate_key_pair()
        seq, digest = ledger.head()
        root = merkle.root_hash(merkle.entry_leaves(ledger.entry_hashes(seq))).hex()
        envelope = json.dumps(sign_checkpoint([load_private_key(private_pem)], seq, digest, root))
        best, median, bundle = timed(lambda: build_bundle(ledger, first, envelope), repeat)
        line("prove, in process (certa.ledger.bundle.build_bundle)", best, median, goal=GOALS["prove_s"])
        public_key = load_public_key(public_pem)
        best, median, checked = timed(lambda: verify_bundle(bundle, [public_key]), repeat)
        assert checked.verified
        line("verify-bundle, in process (certa.engine.services.audit.verify_bundle)", best, median)

    checkpoint, pub = work / "big.checkpoint", work / "certa.pub"
    checkpoint.write_text(envelope, encoding="utf-8")
    pub.write_bytes(public_pem)
    bundle_file = work / "first.bundle.json"
    bundle_file.write_text(json.dumps(bundle), encoding="utf-8")
    best, median = cli_time(["--version"], repeat)
    line("certa --version (interpreter and CLI start-up)", best, median)
    best, median = cli_time(["list", "--ledger", str(big)], repeat)
    line(f"certa list ({n_runs} runs)", best, median, goal=GOALS["list_s"])
    out = work / "cli.bundle.json"
    best, median = cli_time(["prove", first, "--checkpoint", str(checkpoint), "-o", str(out), "--ledger", str(big)],
                            repeat, before=lambda: out.unlink(missing_ok=True))
    line(f"certa prove (against a checkpoint of {n_entries} entries)", best, median, goal=GOALS["prove_s"])
    best, median = cli_time(["verify-bundle", str(bundle_file), "--public-key", str(pub)], repeat)
    line("certa verify-bundle", best, median)
    best, median = cli_time(["verify", "--ledger", str(big)], 1)
    line(f"certa verify ({n_entries} entries, once)", best, median, goal=GOALS["verify_s"])

    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
