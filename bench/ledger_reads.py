"""Do reads and writes of one run stay flat as the ledger grows? ``certa list``, ``show``, ``diff``, ``prove``,
``replay`` and recording, against the ledger's size.

Usage: python bench/ledger_reads.py [--repeat 5] [--workdir DIR] [--list-runs 1000,10000,100000]
                                    [--entries 10000,1000000] [--record-runs 300] [--json]

Goals (issue 21, "Audit at scale", item 3: indexed reads):

- ``certa list`` on 10^5 runs < 60 ms (wall time of the command, interpreter start-up included, as a user who
  installed the wheel runs it), flat in the number of runs (10^5 runs against 10^3: ratio ~1);
- ``show``, ``diff``, ``prove`` and ``replay`` of one run independent of the ledger's size (10^6 entries
  against 10^4: ratio ~1);
- recording (``certa.engine.services.run.record_execution``: seal and ``Ledger.append_run``) on a 10^6-entry ledger
  within 10% of an empty one (ratio >= 0.9).

What it does:

1. One SQLite ledger (it begins with the two subject runs of 2. and a run of batch ``bench``) grown to each of
   ``--list-runs`` runs (aborted runs of one decision: run, two input, decision and abort entries, written with
   ``Ledger.append_runs`` 1000 runs a transaction) and copied at each size; once the writes are synced, round
   after round, ``certa --version`` (the start-up every command pays) and, on each size in turn, ``certa list``
   in a fresh process from the checkout and ``certa.engine.services.run_list.newest_runs`` in process. Then, on the largest, where a fresh ``certa list``
   spends its time, the cases timed in turn: the interpreter alone (``python -S -c pass``, and ``python -c
   pass``: ``site`` and the ``.pth`` files of its site-packages, whose imports over 1 ms are named), ``certa
   list`` from the checkout (also with its bytecode cached, when ``PYTHONDONTWRITEBYTECODE`` turns the cache
   off), and from this checkout's wheel installed in a venv (``bench/wheel_venv.py``: a clean one, as ``pip
   install`` gives a user, and one with ``--system-site-packages``, which runs those ``.pth`` files), each
   beside ``python -c pass`` of its venv. The goal is judged on the installed wheel (on the checkout when
   the wheel cannot be built).
2. Two ledgers that begin alike (two real runs of a tiny spec, the subjects, and a run of batch ``bench``): the
   small one filled with filler runs (aborted, 10^4 decisions each) up to the first of ``--entries`` entries,
   the big one, the ledger of 1. (10^5 runs), up to the last. On each, in process (each read on one ledger, then
   on the other, round after round), the service each command calls, for the first subject: ``show``
   (``browse.show_run``), ``diff`` (``browse.diff_runs``, against the
   second), ``prove`` (``checkpoints.prove_run`` against a checkpoint of the whole ledger), ``replay --no-record``
   (``audit.replay_runs``), ``export`` (``browse.export_certificate``), a run id prefix resolved, and the runs
   of batch ``bench`` (``Ledger.batch_runs``, what ``certa batch`` reads for a bake-off); the ratio big/small.
3. Recording: ``--record-runs`` × ``--repeat`` tiny runs recorded (the subject's execution re-sealed under new run
   ids) into an empty ledger and into the big ledger of 2., one on each in turn: runs/s over all runs and their
   ratio, the goal's figure (every WAL checkpoint the runs caused included; beside it the ratio of the median runs,
   and how many runs took over 10 ms); then the
   database pages one run writes to the WAL on each (what a commit writes and syncs, and a checkpoint copies into
   the file), by table or index (SQLite's ``dbstat``): a count the machine's load does not move.

Timings of sections 1 and 2 are the best of ``--repeat`` (the least disturbed by other load on a shared machine)
with the median beside; every ratio is of figures measured in this one process; ``uptime`` is printed first and last.
``--json`` adds, as the last line, ``{"rows": [[what, measured, goal], ...], "figures": {...}}``: the README
table's rows (``bench/figures.py``) from the figures printed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from certa.engine.core.inputs import load_tables  # noqa: E402
from certa.engine.core.interpreter import Decision, RunDecisions, execute  # noqa: E402
from certa.engine.core.spec import load_plan  # noqa: E402
from certa.engine.foundation.signing import generate_key_pair, load_private_key  # noqa: E402
from certa.engine.services.audit import replay_runs  # noqa: E402
from certa.engine.services.browse import diff_runs, export_certificate, show_run  # noqa: E402
from certa.engine.services.checkpoints import prove_run, sign_head  # noqa: E402
from certa.engine.services.run import record_execution  # noqa: E402
from certa.engine.services.run_list import newest_runs  # noqa: E402
from certa.ledger import Ledger  # noqa: E402
from certa.ledger.run_record import BATCH_DECISION, RunRecord, aborted_run  # noqa: E402

from tests.conftest import small_spec_folder  # noqa: E402

sys.path.insert(1, str(ROOT / "bench"))
from figures import count, met  # noqa: E402  (bench/figures.py)
from wheel_venv import install_wheel, plain_env  # noqa: E402  (bench/wheel_venv.py)

GOALS = {"list_s": 0.060, "flat_ratio": 1.25, "record_ratio": 0.9}
BATCH_RUNS = 1000
FILLER_DECISIONS = 10_000
PAGE_RUNS = 10


def timed(action: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best, median) wall seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


CERTA = "import sys; from certa.cli import main; sys.exit(main())"  # what the ``certa`` entry point runs


def cli_time(args: list[str], repeat: int) -> tuple[float, float]:
    """(best, median) wall seconds of ``certa ARGS`` in a fresh process."""
    def once() -> None:
        done = subprocess.run([sys.executable, "-c", CERTA, *args], cwd=ROOT, capture_output=True, text=True,
                              env=os.environ.copy())
        assert done.returncode == 0, done.stderr
    return timed(once, repeat)


def site_imports(python: Path | str) -> dict[str, float]:
    """Seconds of each module ``site`` imports at start-up for more than 1 ms (``python -X importtime -c
    pass``, best of 3): the ``.pth`` files' imports of that interpreter's site-packages, e.g. an editable
    install's finder."""
    best: dict[str, float] = {}
    for _ in range(3):
        lines = subprocess.run([str(python), "-X", "importtime", "-c", "pass"], capture_output=True,
                               text=True).stderr.splitlines()
        children: dict[str, float] = {}
        for line in lines:
            if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
                continue
            cumulative, name = line.split("|")[1:3]
            depth = (len(name) - len(name.lstrip()) - 1) // 2  # "| name", "|   name" (imported by the next above)
            if depth == 1:
                children[name.strip()] = int(cumulative) / 1e6
            elif depth > 1:
                continue
            elif name.strip() == "site":
                for child, seconds in children.items():
                    best[child] = min(best.get(child, seconds), seconds)
                break
            else:
                children = {}
    return {name: seconds for name, seconds in best.items() if seconds >= 0.001}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


class Subject:
    """The tiny spec (the test suite's small paired spec, 200 replicates), executed once: recorded as real runs,
    re-sealed under new run ids for the recording figures, and its plan and tables reused for filler runs."""

    def __init__(self, folder: Path) -> None:
        spec = small_spec_folder(folder)
        text = spec.read_text(encoding="utf-8")
        spec.write_text(text.replace("replicates: 500", "replicates: 200"), encoding="utf-8")
        self.plan = load_plan(spec)
        self.tables = load_tables(self.plan)
        self.execution = execute(self.plan, self.tables)

    def record(self, ledger: Ledger) -> str:
        run_id = uuid.uuid4().hex
        record_execution(ledger, run_id, self.execution)  # type: ignore[arg-type]
        return run_id

    def filler(self, decisions: int, *, batch: str | None = None) -> RunRecord:
        """An aborted run of this plan with ``decisions`` decisions (one group), the last tying it to ``batch``
        as ``certa batch`` does when given."""
        made = [Decision("bench", {"i": i}) for i in range(decisions)]
        if batch is not None:
            made.append(Decision(BATCH_DECISION, {"batch_id": batch, "idempotency_key": uuid.uuid4().hex}))
        group = RunDecisions.of("filler", tuple(made))
        return aborted_run(uuid.uuid4().hex, self.plan, self.tables, group.parts, reason="bench filler",
                           rule="bench", stage_id=None)


def begin(db: Path, subject: Subject) -> tuple[str, str]:
    """A new ledger at ``db`` holding two real runs of the subject and a run of batch ``bench``; their ids."""
    with Ledger.open(fresh(db)) as ledger:
        first, second = subject.record(ledger), subject.record(ledger)
        ledger.append_run(subject.filler(1, batch="bench"))
    return first, second


def grow(ledger: Ledger, records: Iterator[RunRecord], count: int) -> None:
    """Append ``count`` records, ``BATCH_RUNS`` a transaction."""
    while count > 0:
        n = min(count, BATCH_RUNS)
        ledger.append_runs(next(records) for _ in range(n))
        count -= n


def fresh(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def bench_list(db: Path, subject: Subject, sizes: list[int], repeat: int, report: dict) -> tuple[str, str]:
    """Section 1 on the ledger ``db`` (left at the largest size, for section 2); the subjects' run ids. Its figures
    go into ``report["list"]``. ``db`` is grown to each size and copied there page for page (SQLite's backup),
    then, once the fill's writes are on disk (``os.sync``: the kernel flushing them would land in whatever is
    timed first), ``certa list`` and ``newest_runs`` are timed on every size in turn, round after round, so that
    the machine's drift falls on all sizes alike."""
    print(f"\n1. certa list (50 newest runs) against the number of runs (each size in turn, best of {repeat}, "
          "median)")
    ids = begin(db, subject)
    fillers = iter(lambda: subject.filler(1), None)
    files: dict[int, Path] = {}
    with Ledger.open(db) as ledger:
        for size in sizes:
            start = time.perf_counter()
            grow(ledger, fillers, size - len(ledger.runs()))
            print(f"  {size:>7} runs: grown in {time.perf_counter() - start:5.1f} s")
            if size != sizes[-1]:
                files[size] = db.with_name(f"list-{size}.db")
                with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(fresh(files[size]))) as copy:
                    source.backup(copy)
    files[sizes[-1]] = db
    os.sync()
    version: list[float] = []
    cli: dict[int, list[float]] = {size: [] for size in sizes}
    inproc: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeat + 1):
        version.append(cli_time(["--version"], 1)[0])
        for size, path in files.items():
            cli[size].append(cli_time(["list", "--ledger", str(path)], 1)[0])
            inproc[size].append(timed(lambda path=path: newest_runs(str(path), 50), 4)[0])
    version = version[1:]  # the first round warms, untimed
    cli = {size: values[1:] for size, values in cli.items()}
    inproc = {size: values[1:] for size, values in inproc.items()}
    print(f"  certa --version (interpreter and CLI start-up, the floor of any command): {ms(min(version))} "
          f"({ms(statistics.median(version))} median)")
    for size in sizes:
        print(f"  {size:>7} runs: certa list {ms(min(cli[size]))} ({ms(statistics.median(cli[size]))} median)"
              f"   in process {ms(min(inproc[size]))} ({ms(statistics.median(inproc[size]))} median)")
    figures = {size: (min(cli[size]), min(inproc[size])) for size in sizes}
    small, big = sizes[0], sizes[-1]
    shares = start_up_shares(db, repeat * 2)
    cli_ratio, inproc_ratio = figures[big][0] / figures[small][0], figures[big][1] / figures[small][1]
    wheel = shares.get("wheel")
    judged, how = (wheel, "installed wheel") if wheel else (figures[big][0], "from the checkout")
    print(f"  goal certa list on {big} runs < {GOALS['list_s'] * 1000:.0f} ms ({how}): {ms(judged).strip()}, "
          f"{verdict(judged < GOALS['list_s'])}; from the checkout {ms(figures[big][0]).strip()} (beyond its "
          f"python -c pass, timed in turn: {ms(shares['checkout'] - shares['python']).strip()})")
    print(f"  flat: {big} runs / {small} runs: certa list x{cli_ratio:.2f}, in process x{inproc_ratio:.2f} "
          f"(goal <= x{GOALS['flat_ratio']}: {verdict(inproc_ratio <= GOALS['flat_ratio'])})")
    report["list"] = {"small": small, "big": big, "cli_s": figures[big][0], "inproc_s": figures[big][1],
                      "cli_ratio": cli_ratio, "inproc_ratio": inproc_ratio, "start_up": shares}
    return ids


def start_up_shares(db: Path, repeat: int) -> dict[str, Any]:
    """Where a fresh ``certa list`` on ``db`` spends its time: this interpreter without ``site`` and with it
    (the ``.pth`` files of its site-packages run there: an editable install's finder, whatever the environment
    added), ``certa list`` from the checkout (bytecode cached or not) and from the wheel installed in a venv
    (bench/wheel_venv.py), each beside ``python -c pass`` of its interpreter. The cases are timed in turn,
    ``repeat`` rounds (best, median); printed, and the best seconds returned by key (with ``site_imports``:
    the modules ``site`` imports for more than 1 ms)."""
    print(f"  where the time goes, on the largest ledger (cases in turn, best of {repeat}, median):")
    imports = site_imports(sys.executable)
    if imports:
        print("    site's imports over 1 ms (python -X importtime -c pass; those of site-packages' .pth files among "
              "them): "
              + ", ".join(f"{name} {seconds * 1000:.1f} ms" for name, seconds in imports.items()))
    listing = ["list", "--ledger", str(db)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases: dict[str, tuple[str, list[str], Path, dict[str, str] | None]] = {
            "python_no_site": (f"{Path(sys.executable).name} -S -c pass (no site)", [sys.executable, "-S", "-c", "pass"],
                               work, None),
            "python": (f"{Path(sys.executable).name} -c pass (site and its .pth files)", [sys.executable, "-c", "pass"],
                       work, None),
            "checkout": ("certa list from the checkout" + (" (no bytecode cache: PYTHONDONTWRITEBYTECODE)"
                                                           if sys.flags.dont_write_bytecode else ""),
                         [sys.executable, "-c", CERTA, *listing], ROOT, None)}
        if sys.flags.dont_write_bytecode:
            cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            cases["checkout_cached"] = ("certa list from the checkout, bytecode cached",
                                        [sys.executable, "-c", CERTA, *listing], ROOT,
                                        cached | {"PYTHONPYCACHEPREFIX": str(work / "pycache")})
        try:
            pythons = install_wheel(work / "wheel")
        except (subprocess.CalledProcessError, StopIteration) as error:
            detail = (getattr(error, "stderr", b"") or b"").decode(errors="replace").strip()[-300:]
            print(f"    installed wheel: not measured ({error}; {detail})")
            pythons = {}
        names = {"clean": "venv", "system": "venv --system-site-packages"}
        for name, python in pythons.items():
            cases[f"{name}_python"] = (f"{names[name]}: python -c pass", [str(python), "-c", "pass"], work, plain_env())
            if name == "clean":
                cases["clean_click"] = (f"{names[name]}: python -c 'import click' (the CLI framework alone)",
                                        [str(python), "-c", "import click"], work, plain_env())
            cases["wheel" if name == "clean" else f"wheel_{name}"] = (
                f"{names[name]}: certa list (installed wheel)", [str(python), "-c", CERTA, *listing], work, plain_env())
        times: dict[str, list[float]] = {key: [] for key in cases}
        for round_ in range(repeat + 1):  # the first round warms (and writes the bytecode cache), untimed
            for key, (_, argv, cwd, env) in cases.items():
                start = time.perf_counter()
                done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
                if round_:
                    times[key].append(time.perf_counter() - start)
                assert done.returncode == 0, done.stderr
    for key, (label, *_) in cases.items():
        print(f"    {label:<72} {ms(min(times[key]))} ({ms(statistics.median(times[key]))} median)")
    best = {key: min(values) for key, values in times.items()}
    if pythons:  # in the clean venv only: the other's .pth files import some of what certa needs, before it
        wheel, python, click = best["wheel"], best["clean_python"], best["clean_click"]
        print(f"    venv: certa list - python -c pass {ms(wheel - python).strip()}, of which import click "
              f"{ms(click - python).strip()} and certa's own {ms(wheel - click).strip()}")
    return {**best, "site_imports": imports}


def fill_to(db: Path, subject: Subject, entries: int) -> None:
    """Filler runs of ``FILLER_DECISIONS`` decisions appended to ``db`` up to about ``entries`` entries."""
    with Ledger.open(db) as ledger:
        per_run = FILLER_DECISIONS + 1 + len(subject.tables) + 1
        missing = max(0, entries - ledger.head()[0])
        grow(ledger, iter(lambda: subject.filler(FILLER_DECISIONS), None), -(-missing // per_run))


def one_run_reads(ledger: Ledger, first: str, second: str, checkpoint: bytes,
                  work: Path) -> dict[str, Callable[[], Any]]:
    out = work / "export.json"

    def export() -> None:
        out.unlink(missing_ok=True)
        export_certificate(ledger, first, out)

    return {
        "show": lambda: show_run(ledger, first, ledger_name=str(ledger.location)),
        "diff": lambda: diff_runs(ledger, first, second),
        "prove": lambda: prove_run(ledger, first, checkpoint),
        "replay --no-record": lambda: replay_runs(ledger, first, record=False),
        "export": export,
        "resolve a run id prefix": lambda: ledger.resolve_run_id(first[:8]),
        "batch's runs (batch_runs)": lambda: ledger.batch_runs("bench"),
    }


def bench_one_run(ledgers: dict[int, tuple[Path, tuple[str, str]]], subject: Subject, repeat: int,
                  report: dict) -> None:
    """Section 2 on ``ledgers`` (entries wanted: (file, the subjects' run ids)), each filled up to its size, then
    each read timed on every ledger in turn, round after round (so that the machine's state, e.g. the fill's
    writes still being flushed when ``export`` syncs its file, falls on all alike); the ratios big/small into
    ``report["reads"]``."""
    print(f"\n2. One run's reads against the ledger's size (in process, each ledger in turn, best of {repeat * 4}, "
          "median)")
    private = load_private_key(generate_key_pair()[0])
    for size, (db, _) in ledgers.items():
        start = time.perf_counter()
        fill_to(db, subject, size)
        print(f"  ledger of about {size} entries filled in {time.perf_counter() - start:.1f} s")
    os.sync()
    results: dict[int, dict[str, list[float]]] = {size: {} for size in ledgers}
    with contextlib.ExitStack() as stack:
        reads: dict[int, dict[str, Callable[[], Any]]] = {}
        for size, (db, (first, second)) in ledgers.items():
            ledger = stack.enter_context(Ledger.open(db, read_only=True))
            checkpoint = json.dumps(sign_head(ledger, [private]).envelope).encode()
            print(f"  ledger of {ledger.head()[0]} entries, {len(ledger.runs())} runs")
            folder = db.parent / f"reads-{size}"
            folder.mkdir(exist_ok=True)
            reads[size] = one_run_reads(ledger, first, second, checkpoint, folder)
        for name in reads[min(reads)]:
            for size in reads:
                reads[size][name]()  # warm
                results[size][name] = []
            for _ in range(repeat * 4):
                for size in reads:
                    begun = time.perf_counter()
                    reads[size][name]()
                    results[size][name].append(time.perf_counter() - begun)
    for size, timings in results.items():
        print(f"  ledger of about {size} entries:")
        for name, values in timings.items():
            print(f"    {name:<26} {ms(min(values))} ({ms(statistics.median(values))} median)")
    small, big = min(results), max(results)
    print(f"  ratio {big} entries / {small} entries (goal: independent of size, <= x{GOALS['flat_ratio']}):")
    ratios = {name: min(results[big][name]) / min(results[small][name]) for name in results[small]}
    for name, ratio in ratios.items():
        print(f"    {name:<26} x{ratio:6.2f}  {verdict(ratio <= GOALS['flat_ratio'])}")
    report["reads"] = {"small": small, "big": big, "ratios": ratios}


def bench_recording(work: Path, subject: Subject, big: Path, runs: int, repeat: int, report: dict) -> None:
    """Section 3, timings: ``runs`` × ``repeat`` tiny runs recorded on each ledger, one on each in turn (the order
    swapped every other pair: empty, big, big, empty, ...), each run timed. Judged on the rate over all runs, every
    WAL checkpoint included (SQLite copies the WAL into the file every 1000 pages, a run writing 13 to 17), as a user
    recording many runs pays them. One run on each in turn is a paired comparison: the machine's speed drifts by
    several percent over seconds on this VM, and timings of whole blocks of runs on one ledger, then on the other,
    put that drift into the ratio (two runs of the same code gave ×0.88 and ×0.94 in blocks of 50 runs, ×0.965 to
    ×0.971 in turn). The median run and the runs over 10 ms (mostly those that checkpointed) are printed beside."""
    total = runs * repeat
    print(f"\n3. Recording ({total} tiny runs on each ledger, one on each in turn)")
    empty = fresh(work / "empty.db")
    with Ledger.open(empty) as small_ledger, Ledger.open(big) as big_ledger:
        size = big_ledger.head()[0]
        subject.record(small_ledger), subject.record(big_ledger)  # warm
        each: dict[str, list[float]] = {"empty": [], "big": []}
        pair = [("empty", small_ledger), ("big", big_ledger)]
        clock = time.perf_counter
        for number in range(total):
            for name, ledger in (pair if number % 2 == 0 else pair[::-1]):
                begun = clock()
                subject.record(ledger)
                each[name].append(clock() - begun)
    overall = {name: len(values) / sum(values) for name, values in each.items()}
    median_run = {name: statistics.median(values) for name, values in each.items()}
    slow = {name: sum(value > 0.010 for value in values) for name, values in each.items()}
    for name, label in (("empty", "empty ledger:           "), ("big", f"ledger of {size} entries:")):
        print(f"  {label} {overall[name]:7.1f} runs/s over all {total} runs (median run {median_run[name] * 1000:.2f} "
              f"ms, {slow[name]} runs over 10 ms)")
    ratio = overall["big"] / overall["empty"]
    print(f"  ratio big/empty x{ratio:.3f} over all runs (median runs x{median_run['empty'] / median_run['big']:.3f}); "
          f"goal >= x{GOALS['record_ratio']}: {verdict(ratio >= GOALS['record_ratio'])}")
    report["record"] = {"entries": size, "runs": total, "empty_rate": overall["empty"], "big_rate": overall["big"],
                        "ratio": ratio, "median_ratio": median_run["empty"] / median_run["big"]}
    print_pages_written(work, subject, big)


def print_pages_written(work: Path, subject: Subject, big: Path) -> None:
    print("  database pages a run writes (WAL frames, whatever the machine's load), by table or index:")
    empty = fresh(work / "pages.db")
    with Ledger.open(empty) as ledger:
        subject.record(ledger)  # the first run creates the pages every later one finds
    for name, db in (("empty", empty), ("big", big)):
        pages, owners = pages_written(db, subject, PAGE_RUNS)
        shown = ", ".join(f"{owner} {count / PAGE_RUNS:.1f}" for owner, count in owners.most_common(6))
        print(f"    {name:<5} {pages / PAGE_RUNS:5.1f} a run: {shown}")


def pages_written(db: Path, subject: Subject, runs: int) -> tuple[int, collections.Counter[str]]:
    """(pages, pages by table or index) that recording ``runs`` tiny runs writes to the WAL of ``db``: the WAL is
    checkpointed and emptied first, and ``runs`` is small enough that no automatic checkpoint (at 1000 pages)
    empties it again; each WAL frame is a 24-byte header (its page number first) and one page."""
    wal = Path(f"{db}-wal")
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    with Ledger.open(db) as ledger:
        for _ in range(runs):
            subject.record(ledger)
        frames = wal.read_bytes()[32:]  # after the WAL header; read while the ledger is open (no checkpoint yet)
    numbers = [struct.unpack(">I", frames[at:at + 4])[0] for at in range(0, len(frames), 24 + page_size)]
    with closing(sqlite3.connect(db)) as conn:
        wanted = ",".join(map(str, set(numbers)))
        owner = dict(conn.execute(f"SELECT pageno, name FROM dbstat WHERE pageno IN ({wanted})"))
    return len(numbers), collections.Counter(owner.get(number, "freelist") for number in numbers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timings per figure; the best is reported")
    parser.add_argument("--workdir", type=Path, help="keep the ledgers here (default: a temporary folder, removed)")
    parser.add_argument("--list-runs", default="1000,10000,100000", help="ledger sizes in runs for 1.")
    parser.add_argument("--entries", default="10000,1000000", help="ledger sizes in entries for 2. and 3.")
    parser.add_argument("--record-runs", type=int, default=300, help="runs recorded on each ledger, times --repeat")
    parser.add_argument("--json", action="store_true", help="last line: the README table's rows as JSON")
    args = parser.parse_args()

    print("uptime:", uptime())
    work = args.workdir or Path(tempfile.mkdtemp(prefix="certa-bench-reads-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    try:
        subject = Subject(work / "tiny")
        sizes = sorted(int(n) for n in args.entries.split(","))
        small = work / f"entries-{sizes[0]}.db"
        ledgers = {sizes[0]: (small, begin(small, subject))}
        big = work / "big.db"
        ledgers[sizes[-1]] = (big, bench_list(big, subject, [int(n) for n in args.list_runs.split(",")], args.repeat,
                                                report))
        bench_one_run(ledgers, subject, args.repeat, report)
        bench_recording(work, subject, big, args.record_runs, args.repeat, report)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\nuptime:", uptime())
    if args.json:
        print(json.dumps({"rows": json_rows(report), "figures": report}))
    return 0


def json_rows(report: dict) -> list[list[str]]:
    """The README table's rows from the figures sections 1-3 put into ``report``."""
    listing, reads, record = report["list"], report["reads"], report["record"]
    worst = max(reads["ratios"], key=reads["ratios"].get)
    flat = GOALS["flat_ratio"]
    start = listing.get("start_up", {})
    wheel = start.get("wheel")
    judged = listing["cli_s"] if wheel is None else wheel
    checkout = f"{listing['cli_s'] * 1000:.1f} ms"
    if wheel is None:
        measured = f"**{checkout}** (in process {listing['inproc_s'] * 1000:.2f} ms)"
    else:
        measured = (f"**{wheel * 1000:.1f} ms** installed wheel ({start['clean_python'] * 1000:.1f} ms of it "
                    f"`python -c pass`, {(start['clean_click'] - start['clean_python']) * 1000:.1f} ms "
                    f"`import click`); from the checkout {checkout} ({start['python'] * 1000:.1f} ms of it "
                    f"`python -c pass`, site-packages' .pth files included); in process "
                    f"{listing['inproc_s'] * 1000:.2f} ms")
    return [[f"`certa list` (50 newest runs) on {count(listing['big'])} runs, fresh process (`bench/ledger_reads.py`)",
             measured, f"< {GOALS['list_s'] * 1000:.0f} ms: {met(judged < GOALS['list_s'])}"],
            [f"`certa list` on {count(listing['big'])} runs against {count(listing['small'])} runs",
             f"in process **×{listing['inproc_ratio']:.2f}** (`certa list` ×{listing['cli_ratio']:.2f})",
             f"≤ ×{flat} in process: {met(listing['inproc_ratio'] <= flat)}"],
            [f"one run's reads ({', '.join(reads['ratios'])}) on {count(reads['big'])} entries against "
             f"{count(reads['small'])}",
             f"at most **×{reads['ratios'][worst]:.2f}** ({worst})",
             f"≤ ×{flat} each: {met(reads['ratios'][worst] <= flat)}"],
            [f"recording runs into a ledger of {count(record['entries'])} entries against an empty one",
             f"**×{record['ratio']:.3f}** the rate over {record['runs']} runs on each, one on each in turn "
             f"({record['big_rate']:.1f} vs {record['empty_rate']:.1f} runs/s; median runs "
             f"×{record['median_ratio']:.3f})",
             f"≥ ×{GOALS['record_ratio']}: {met(record['ratio'] >= GOALS['record_ratio'])}"]]


if __name__ == "__main__":
    raise SystemExit(main())
