"""``certa verify`` at scale: time and peak memory of a full and an incremental verification.

Usage: python bench/verify_scale.py [--entries 100000 1000000] [--huge] [--workdir DIR] [--new 1000]
                                    [--postgres URL] [--json]

Goals (issue "Audit at scale", items 1 and 2): a full ``verify`` of 10^6 entries (per-decision bake-off runs
plus 10^3 ordinary runs) in <= 10 s and <= 200 MB peak memory (all its processes together: the reading one and
the worker processes it forks, ``certa.ledger.verify_pool``, counted by Pss so that pages they share count once),
memory flat from 10^5 to 10^7 entries (``--huge`` adds 10^7, once); ``verify --since-checkpoint`` of 10^3
entries appended after a checkpoint of 10^6 < 1 s. ``--postgres URL`` adds a full verify of the same ledger of 10^6 entries
in that PostgreSQL database (built there when it holds no entries; the server's own memory is not counted).

The ledgers: 10^3 ordinary runs (the tiny spec of ``bench/ledger.py``, 10 entries each) and then runs of 10^4
decision entries each (one entry per decision, as a bake-off with per-decision rows records them) up to the
size asked. Each verification runs in a fresh interpreter (``certa.engine.services.audit.verify``, every
certificate checked, worker processes as ``certa verify`` chooses them), whose wall time and peak RSS
(``VmHWM`` of ``/proc/self/status``: Linux keeps ``ru_maxrss`` across ``exec``, so it would include the bench's
own RSS at the fork) it reports, with its workers' CPU and the peak of all its processes' memory together
(sampled by the bench every 20 ms from ``/proc/PID/smaps_rollup``);
the interpreter's own start-up and imports are measured alone beside it, and the process's CPU time (user +
system, imports included: on a loaded machine the wall time overstates what an idle one would take). Ledgers
are kept in ``--workdir`` and reused when present (a 10^7 ledger takes minutes to build). ``uptime`` is printed
first and last: the machine is shared. ``--json`` adds, as the last line, ``{"rows": [[what, measured, goal], ...],
"full": [...], "incremental": {...}}``: the README table's rows (``bench/figures.py``) from the figures printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from figures import count, met  # noqa: E402  (bench/figures.py)
from certa.ledger import Ledger  # noqa: E402
from certa.ledger.rows import SCHEMA_VERSION  # noqa: E402

GOALS = {"full_s": 10.0, "full_mb": 200.0, "incremental_s": 1.0}
ORDINARY_RUNS = 1000
DECISIONS_PER_BIG_RUN = 10_000

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
    """``ORDINARY_RUNS`` tiny runs, then runs of ``DECISIONS_PER_BIG_RUN`` decision entries up to ``entries``, into
    the SQLite file or database URL ``db``."""
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


def ledger_file(work: Path, entries: int) -> Path:
    """The ``entries``-entry ledger of ``work``: built when missing, migrated to this certa's schema when an
    older certa built it (``certa migrate``: the figures are of the schema a user's ledger has)."""
    db = work / f"verify-{entries}.db"
    if not db.exists():
        build(db, entries, work)
        return db
    with Ledger.open(db) as ledger:
        if ledger.schema_version != SCHEMA_VERSION:
            start, before = time.perf_counter(), ledger.schema_version
            ledger.migrate()
            print(f"  migrated {db.name} from schema {before} to {SCHEMA_VERSION} in "
                  f"{time.perf_counter() - start:.0f} s")
    return db


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--huge", action="store_true", help="also 10^7 entries (builds a ~10 GB ledger once)")
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
    base = measure("imports", ledger_file(work, sizes[0]))
    print(f"\ninterpreter start-up and imports: {base['imports']:.2f} s, {base['peak_mib']:.0f} MiB peak RSS")
    print("\n1. Full verify (certa.engine.services.audit.audit_ledger: chain, blobs, runs, meta, Merkle nodes, every "
          "certificate and review)")
    full = []
    for size in sizes:
        got = measure("full", ledger_file(work, size))
        full.append({**got, "size": size})
        goal = ""
        if size == 1_000_000:
            goal = (f"   goal <= {GOALS['full_s']:g} s: {'met' if got['seconds'] <= GOALS['full_s'] else 'NOT MET'}, "
                    f"<= {GOALS['full_mb']:g} MB (all processes, Pss): "
                    f"{'met' if got['family_pss_mib'] * 1.048576 <= GOALS['full_mb'] else 'NOT MET'}")
        print(f"  {got['entries']:>9} entries: {got['seconds']:7.2f} s wall ({got['seconds'] / got['entries'] * 1e6:5.1f} "
              f"µs/entry), {got['workers']} workers, CPU {got['cpu']:.2f} s (imports included) + workers "
              f"{got['cpu_workers']:.2f} s; peak RSS {got['peak_mib']:.0f} MiB (a worker: {got['worker_peak_mib']:.0f}"
              f" MiB), all processes together {got['family_pss_mib']:.0f} MiB Pss ({got['family_rss_mib']:.0f} MiB Rss)"
              f"  intact={got['ok']}{goal}")
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
    """The README table's rows: the full verify of the largest ledger asked of at most 10^6 entries (the goal's
    size) with its peak RSS against the smallest and the largest ledger's (flat memory), and the incremental
    verify."""
    goal = max((got for got in full if got["size"] <= 1_000_000), key=lambda got: got["size"])
    first, largest = full[0], full[-1]
    flat = "" if len(full) == 1 else (
        f" (from {count(first['entries'])} entries: {first['family_pss_mib']:.0f} MiB"
        + ("" if largest is goal else f"; {count(largest['entries'])}: {largest['family_pss_mib']:.0f} MiB") + ")")
    fast = goal["seconds"] <= GOALS["full_s"]
    small = goal["family_pss_mib"] * 1.048576 <= GOALS["full_mb"]
    return [[f"`verify` of {count(goal['entries'])} entries ({ORDINARY_RUNS} ordinary runs and per-decision runs of "
             f"{count(DECISIONS_PER_BIG_RUN)} decisions; every certificate), fresh process (`bench/verify_scale.py`)",
             f"**{goal['seconds']:.1f} s** wall with {goal['workers']} worker processes (CPU: {goal['cpu']:.1f} s the "
             f"reading process, imports included, + {goal['cpu_workers']:.1f} s the workers); memory of all the "
             f"processes together **{goal['family_pss_mib']:.0f} MiB** Pss at its peak{flat} (Rss "
             f"{goal['family_rss_mib']:.0f} MiB, counting pages the forked workers share once per process; the reading "
             f"process alone {goal['peak_mib']:.0f} MiB); intact: {goal['ok']}",
             f"≤ {GOALS['full_s']:g} s: {met(fast)}; ≤ {GOALS['full_mb']:g} MB: {met(small)}"],
            [f"`verify --since-checkpoint` of {count(since['added'])} entries after a checkpoint of "
             f"{count(since['checkpoint'])}",
             f"**{since['seconds']:.2f} s** after imports (fresh process, {since['peak_mib']:.0f} MiB peak RSS); "
             f"intact: {since['ok']}",
             f"< {GOALS['incremental_s']:g} s: {met(since['seconds'] < GOALS['incremental_s'])}"]]


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
