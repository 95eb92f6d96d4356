"""``certa verify`` at scale, on three ledger shapes: time, CPU and peak memory of a full verification against
``sha256sum`` of the same file, and an incremental verification.

Usage: python bench/verify_scale.py [--entries 10000 100000 1000000] [--huge] [--shapes decisions certificates
                                    mixed] [--workdir DIR] [--new 1000] [--postgres URL] [--json]

Goals (issue 36, item 1, "Verify at the floor on every ledger shape"): a full ``verify`` within 3x the wall time of
``sha256sum LEDGERFILE`` (measured in the same run: the floor of reading the file once) on 2 cores, and <= 200 MiB
peak memory (all its processes together: the reading one and the worker processes it forks,
``certa.ledger.verify_pool``, counted by Pss so that pages they share count once), flat from 10^4 to 10^7 entries
(``--huge`` adds 10^7, once), on every shape; and (issue 21) ``verify --since-checkpoint`` of 10^3 entries appended
after a checkpoint of 10^6 < 1 s. ``--postgres URL`` adds a full verify of the decision-heavy ledger of 10^6
entries in that PostgreSQL database (built there when it holds no entries; the server's own memory is not counted).

The shapes (``SHAPES``):

- ``decisions``: 10^3 ordinary runs (the tiny spec of ``bench/ledger.py``, 10 entries each) and then runs of 10^4
  decision entries each (one entry per decision, as a bake-off with per-decision rows records them);
- ``certificates``: ordinary runs only (the tiny spec: run, 2 inputs, 6 decisions, certificate), 10 entries and one
  certificate a run, as a team recording many small evaluations has them (10^5 runs for 10^6 entries);
- ``mixed``: the run shapes of the repository's example specs that run offline (``MIXED_SPECS``: paired ratio,
  sequential, conformal, a vendor bake-off of 1473 decisions, lm-eval and Inspect imports), in turn.

Each run is a real execution of its spec recorded again under a fresh run id (its certificate sealed for that id),
``Ledger.append_runs`` 1000 runs a transaction: a real, verifiable ledger, built in minutes. Each verification runs
in a fresh interpreter (``certa.engine.services.audit.audit_ledger``, every certificate checked, worker processes
as ``certa verify`` chooses them), whose wall time after its imports and peak RSS (``VmHWM`` of
``/proc/self/status``: Linux keeps ``ru_maxrss`` across ``exec``, so it would include the bench's own RSS at the
fork) it reports, with its workers' CPU and the peak of all its processes' memory together (sampled by the bench
every 20 ms from ``/proc/PID/smaps_rollup``); the interpreter's own start-up and imports are measured alone beside
it, and the process's CPU time (user + system, imports included: on a loaded machine the wall time overstates
what an idle one would take). ``sha256sum`` of the ledger file is timed right before each verification (best
wall of 3, with its CPU). Ledgers are kept in ``--workdir`` and reused when present (a 10^7 ledger takes long to
build). ``uptime`` is printed first and last: the machine is shared. ``--json`` adds, as the last line,
``{"rows": [[what, measured, goal], ...], "full": [...], "incremental": {...}}``: the README table's rows
(``bench/figures.py``) from the figures printed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from figures import count, met  # noqa: E402  (bench/figures.py)
from certa.ledger import Ledger  # noqa: E402
from certa.ledger.rows import SCHEMA_VERSION  # noqa: E402

GOALS = {"sha256_ratio": 3.0, "full_mib": 200.0, "incremental_s": 1.0}
ORDINARY_RUNS = 1000
DECISIONS_PER_BIG_RUN = 10_000
RUNS_PER_TRANSACTION = 1000
SHAPES = ("decisions", "certificates", "mixed")
MIXED_SPECS = ("paired-ratio", "sequential-diff", "conformal-pac", "vendor-bakeoff", "lm-eval-accuracy",
               "lm-eval-perplexity", "lm-eval-suite", "inspect-accuracy")
SHAPE_NAMES = {"decisions": f"{ORDINARY_RUNS} ordinary runs, then per-decision runs of {DECISIONS_PER_BIG_RUN:,} "
                            "decisions",
               "certificates": "ordinary runs only, 10 entries and a certificate each",
               "mixed": "the example specs' runs in turn"}

_MEASURE = r"""
import json, resource, sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from certa.ledger import Ledger
from certa.engine.services.audit import audit_ledger
from certa.engine.services.keys import public_keys
from certa.ledger.verify_pool import default_workers
imported = time.perf_counter()
mode, db = sys.argv[2], sys.argv[3]
workers = None
with Ledger.open(db, read_only=True) as ledger:
    if mode == "imports":
        audit = None
    elif mode == "full":
        workers = default_workers(ledger.head()[0])
        audit = audit_ledger(ledger, record=False)
    else:
        from pathlib import Path
        audit = audit_ledger(ledger, checkpoint=Path(sys.argv[4]).read_bytes(),
                             checkpoint_keys=public_keys([Path(sys.argv[5])]), since_checkpoint=True, record=False)
done = time.perf_counter()
usage, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
status = open("/proc/self/status").read()  # VmHWM: this image's peak (ru_maxrss keeps the parent's across exec)
peak_kib = int(status.split("VmHWM:")[1].split()[0]) if "VmHWM:" in status else usage.ru_maxrss
print(json.dumps({"ok": audit is None or audit.ok, "entries": audit.report.entries_checked if audit else 0,
                  "seconds": done - imported, "imports": imported - start, "cpu": usage.ru_utime + usage.ru_stime,
                  "cpu_workers": children.ru_utime + children.ru_stime, "workers": workers,
                  "worker_peak_mib": children.ru_maxrss / 1024, "peak_mib": peak_kib / 1024}))
"""


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux: ``/proc/PID/task/TID/children``)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except OSError:
                pass
    return found


def _memory_kib(pids: list[int]) -> tuple[int, int]:
    """(Pss, Rss) summed over ``pids`` (``/proc/PID/smaps_rollup``, kB): Pss shares each page among the processes
    mapping it (the workers are forked: their imports are pages shared with the reading process)."""
    pss = rss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            pass
    return pss, rss


def measure(mode: str, db: Path | str, *extra: Path) -> dict:
    """Verify ``db`` in a fresh interpreter: its seconds (imports excluded), imports, CPU (its own and its worker
    processes'), peak RSS of the process and of its largest worker (MiB), and the peak of its and its workers'
    memory together, sampled every 20 ms (Pss and Rss summed over the processes, MiB)."""
    process = subprocess.Popen([sys.executable, "-c", _MEASURE, str(ROOT), mode, str(db), *map(str, extra)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peak_pss = peak_rss = 0
    while process.poll() is None:
        pss, rss = _memory_kib(_family(process.pid))
        peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
        time.sleep(0.02)
    out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"verify {mode} {db} failed: {err[-2000:]}")
    return {**json.loads(out.strip().splitlines()[-1]), "family_pss_mib": peak_pss / 1024,
            "family_rss_mib": peak_rss / 1024}


def _bench_ledger():
    """``bench/ledger.py`` (its tiny spec and recorder), loaded by path: its module name is the ledger package's."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_ledger", ROOT / "bench" / "ledger.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(db: Path | str, entries: int, work: Path) -> None:
    """The decision-heavy shape: ``ORDINARY_RUNS`` tiny runs, then runs of ``DECISIONS_PER_BIG_RUN`` decision
    entries up to ``entries``, into the SQLite file or database URL ``db``."""
    bench = _bench_ledger()
    spec = bench.write_tiny_spec(work / "tiny")
    small, big = bench.TinyRecorder(spec, 6), bench.TinyRecorder(spec, DECISIONS_PER_BIG_RUN)
    start = time.perf_counter()
    with Ledger.open(db) as ledger:
        for _ in range(ORDINARY_RUNS):
            small.record(ledger)
        while ledger.head()[0] + big.entries_per_run <= entries:
            big.record(ledger)
        count, location = ledger.head()[0], ledger.location
    size = f", {db.stat().st_size / 1e6:.0f} MB" if isinstance(db, Path) else ""
    print(f"  built {db.name if isinstance(db, Path) else location}: {count} entries in "
          f"{time.perf_counter() - start:.0f} s{size}")


def _executions(shape: str, work: Path) -> list[Any]:
    """The executions a shape's runs record again: the tiny spec's (``certificates``) or each of ``MIXED_SPECS``'."""
    bench = _bench_ledger()
    if shape == "certificates":
        return [bench.TinyRecorder(bench.write_tiny_spec(work / "tiny"), 6).execution]
    from certa.engine.core.inputs import load_tables
    from certa.engine.core.interpreter import execute
    from certa.engine.core.spec import load_plan

    found = []
    for name in MIXED_SPECS:
        plan = load_plan(ROOT / "specs" / name / "spec.yaml")
        tables = load_tables(plan)
        found.append(execute(plan, tables))
    return found


def _entries_of(execution: Any) -> int:
    """Entries a completed run of ``execution`` records: run, inputs, decisions, captured tables, certificate."""
    return (2 + len(execution.tables) + sum(len(group) for group in execution.decisions.parts)
            + sum(len(group) for group in execution.captured.values()))


def build_shape(db: Path, shape: str, entries: int, work: Path) -> None:
    """A ledger of ``shape`` (``certificates`` or ``mixed``) of at most ``entries`` entries: the shape's executions
    recorded in turn, each under a fresh run id with its certificate sealed for it, ``RUNS_PER_TRANSACTION`` runs
    a transaction (``Ledger.append_runs``)."""
    import uuid

    from certa.engine.core.certificate import seal
    from certa.ledger.run_record import completed_run

    executions = _executions(shape, work)
    turn = itertools.cycle(executions)
    start, written = time.perf_counter(), 0

    def records(budget: int) -> Any:
        nonlocal written
        for _ in range(RUNS_PER_TRANSACTION):
            execution = next(turn)
            if written + _entries_of(execution) > budget:
                return
            run_id = uuid.uuid4().hex
            written += _entries_of(execution)
            yield completed_run(run_id, execution.plan, execution.tables, execution.decisions.parts,
                                execution.captured, seal(execution.content, run_id))

    with Ledger.open(db) as ledger:
        while entries - written >= min(map(_entries_of, executions)):
            before = written
            ledger.append_runs(records(entries))
            if written == before:
                break
        count = ledger.head()[0]
    print(f"  built {db.name}: {count} entries in {time.perf_counter() - start:.0f} s, {db.stat().st_size / 1e6:.0f} MB")


def sha256sum(path: Path, repeat: int = 3) -> dict:
    """``sha256sum PATH``: the best wall seconds of ``repeat`` runs and the CPU seconds of that run."""
    best: dict = {}
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(["sha256sum", str(path)], check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if not best or wall < best["wall"]:
            best = {"wall": wall, "cpu": cpu}
    return best


def postgres_full(url: str, entries: int, work: Path) -> dict:
    """A full verify of the ledger in the PostgreSQL database ``url``, built there first when it holds no entries
    (``--postgres``); ``measure``'s figures (the server's own memory is not among them)."""
    with Ledger.open(url) as ledger:
        empty = ledger.head()[0] == 0
    if empty:
        build(url, entries, work)
    got = measure("full", url)
    print(f"  PostgreSQL, {got['entries']:>9} entries: {got['seconds']:7.2f} s wall, {got['workers']} workers, CPU "
          f"{got['cpu']:.2f} s (imports included) + workers {got['cpu_workers']:.2f} s; all processes together "
          f"{got['family_pss_mib']:.0f} MiB Pss (the server apart)  intact={got['ok']}")
    return got


def ledger_file(work: Path, entries: int, shape: str = "decisions") -> Path:
    """The ``entries``-entry ledger of ``shape`` in ``work``: built when missing, migrated to this certa's schema when
    an older certa built it (``certa migrate``: the figures are of the schema a user's ledger has)."""
    db = work / (f"verify-{entries}.db" if shape == "decisions" else f"verify-{shape}-{entries}.db")
    if not db.exists():
        if shape == "decisions":
            build(db, entries, work)
        else:
            build_shape(db, shape, entries, work)
        return db
    with Ledger.open(db) as ledger:
        if ledger.schema_version != SCHEMA_VERSION:
            start, before = time.perf_counter(), ledger.schema_version
            ledger.migrate()
            print(f"  migrated {db.name} from schema {before} to {SCHEMA_VERSION} in "
                  f"{time.perf_counter() - start:.0f} s")
    return db


def full_verify(work: Path, shape: str, size: int) -> dict:
    """A full verify of the ``size``-entry ledger of ``shape`` beside ``sha256sum`` of its file, printed; the figures
    of ``measure`` with the file's size, the ``sha256sum`` timing and the ratio of the two walls."""
    db = ledger_file(work, size, shape)
    floor = sha256sum(db)
    got = measure("full", db)
    cpu = got["cpu"] + got["cpu_workers"]
    ratio = got["seconds"] / floor["wall"]
    fast, small = ratio <= GOALS["sha256_ratio"], got["family_pss_mib"] <= GOALS["full_mib"]
    print(f"  {shape:>12} {got['entries']:>9} entries ({db.stat().st_size / 2**20:6.0f} MiB): {got['seconds']:7.2f} s "
          f"wall, CPU {cpu:6.2f} s ({got['workers']} workers; imports included) = {ratio:5.1f}x sha256sum "
          f"({floor['wall']:.2f} s wall, {floor['cpu']:.2f} s CPU); {got['family_pss_mib']:4.0f} MiB Pss all "
          f"processes ({got['family_rss_mib']:.0f} MiB Rss, reading process {got['peak_mib']:.0f} MiB)  "
          f"intact={got['ok']}   goals <= {GOALS['sha256_ratio']:g}x: {'met' if fast else 'NOT MET'}, "
          f"<= {GOALS['full_mib']:g} MiB: {'met' if small else 'NOT MET'}")
    return {**got, "size": size, "shape": shape, "file_mib": db.stat().st_size / 2**20, "sha256": floor,
            "ratio": ratio}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--huge", action="store_true", help="also 10^7 entries (builds ~10 GB ledgers once)")
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--new", type=int, default=1000, help="entries appended after the checkpoint")
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the ledgers here")
    parser.add_argument("--postgres", metavar="URL", help="also a full verify of the largest size up to 10^6 in this "
                        "PostgreSQL database (built there when it holds no entries)")
    parser.add_argument("--json", action="store_true", help="last line: the README table's rows as JSON")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    work = args.workdir or Path(tempfile.mkdtemp(prefix="certa-bench-verify-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = sorted(set(args.entries + ([10_000_000] if args.huge else [])))
    base = measure("imports", ledger_file(work, sizes[0], args.shapes[0]))
    print(f"\ninterpreter start-up and imports: {base['imports']:.2f} s, {base['peak_mib']:.0f} MiB peak RSS")
    print("\n1. Full verify (certa.engine.services.audit.audit_ledger: chain, blobs, runs, meta, Merkle nodes, every "
          "certificate and review) against sha256sum of the ledger file")
    full = [full_verify(work, shape, size) for shape in args.shapes for size in sizes]
    if args.postgres:
        postgres_full(args.postgres, max(s for s in sizes if s <= 1_000_000), work)
    since = incremental(work, max(s for s in sizes if s <= 1_000_000), args.new)
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"rows": json_rows(full, since), "full": full, "incremental": since}))
    return 0


def json_rows(full: list[dict], since: dict) -> list[list[str]]:
    """The README table's rows: per shape, the full verify of its largest ledger of at most 10^6 entries (the goal's
    size) against ``sha256sum``, with its memory against the smallest and the largest ledger's (flat memory); and the
    incremental verify."""
    rows = []
    for shape in dict.fromkeys(got["shape"] for got in full):
        mine = [got for got in full if got["shape"] == shape]
        goal = max((got for got in mine if got["size"] <= 1_000_000), key=lambda got: got["size"])
        first, largest = mine[0], mine[-1]
        flat = "" if len(mine) == 1 else (
            f" (from {count(first['entries'])} entries: {first['family_pss_mib']:.0f} MiB"
            + ("" if largest is goal else f"; {count(largest['entries'])}: {largest['family_pss_mib']:.0f} MiB") + ")")
        fast = goal["ratio"] <= GOALS["sha256_ratio"]
        small = all(got["family_pss_mib"] <= GOALS["full_mib"] for got in mine)
        rows.append([f"`verify` of {count(goal['entries'])} entries, {shape} shape ({SHAPE_NAMES[shape]}; "
                     f"{goal['file_mib']:.0f} MiB file; every certificate), fresh process (`bench/verify_scale.py`)",
                     f"**{goal['seconds']:.1f} s** wall with {goal['workers']} worker processes = **{goal['ratio']:.1f}×** "
                     f"`sha256sum` of the file ({goal['sha256']['wall']:.2f} s); CPU {goal['cpu'] + goal['cpu_workers']:.1f}"
                     f" s (imports included); memory of all the processes together **{goal['family_pss_mib']:.0f} MiB** "
                     f"Pss at its peak{flat}; intact: {goal['ok']}",
                     f"≤ {GOALS['sha256_ratio']:g}× `sha256sum`: {met(fast)}; ≤ {GOALS['full_mib']:g} MiB flat: "
                     f"{met(small)}"])
    rows.append([f"`verify --since-checkpoint` of {count(since['added'])} entries after a checkpoint of "
                 f"{count(since['checkpoint'])}",
                 f"**{since['seconds']:.2f} s** after imports (fresh process, {since['peak_mib']:.0f} MiB peak RSS); "
                 f"intact: {since['ok']}",
                 f"< {GOALS['incremental_s']:g} s: {met(since['seconds'] < GOALS['incremental_s'])}"])
    return rows


def incremental(work: Path, size: int, new: int) -> dict:
    """A checkpoint of the ``size``-entry ledger (a copy), ``new`` decision entries appended, then
    ``--since-checkpoint``: the figures of ``measure`` with the checkpoint's ``seq`` and the entries ``added``."""
    from certa.engine.foundation.signing import generate_key_pair, load_private_key
    from certa.engine.services.checkpoints import sign_head

    db = work / f"incremental-{size}.db"
    shutil.copyfile(ledger_file(work, size), db)
    private_pem, public_pem = generate_key_pair()
    checkpoint, pub = work / "incremental.checkpoint", work / "incremental.pub"
    pub.write_bytes(public_pem)
    checkpoint.unlink(missing_ok=True)
    bench = _bench_ledger()
    recorder = bench.TinyRecorder(bench.write_tiny_spec(work / "tiny"), new - 4)
    with Ledger.open(db) as ledger:
        signed = sign_head(ledger, [load_private_key(private_pem)], checkpoint).seq
        recorder.record(ledger)
        added = ledger.head()[0] - signed
    got = measure("incremental", db, checkpoint, pub)
    print(f"\n2. Incremental verify (--since-checkpoint) of {added} entries appended after a checkpoint of {signed}")
    print(f"  {got['seconds']:7.3f} s wall, {got['cpu']:.2f} s CPU (imports included), peak RSS "
          f"{got['peak_mib']:6.0f} MiB  intact={got['ok']}   goal < {GOALS['incremental_s']:g} s: "
          f"{'met' if got['seconds'] < GOALS['incremental_s'] else 'NOT MET'}")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return {**got, "checkpoint": signed, "added": added}


if __name__ == "__main__":
    sys.exit(main())
