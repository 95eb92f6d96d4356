"""Category of the adversarial sweep: SIGKILL of a real ``certa`` process during ``run``, ``review``,
``migrate``, ``site`` and ``batch``, at several moments each.

Each case starts ``certa`` as its own process (in its own process group, so that a batch's Dask workers die with
it) and kills it with SIGKILL, no clean-up possible, at one moment:

- after a delay (a spread over the command's duration): ``python -m certa ...``, exactly as a user runs it;
- at a named point, deterministically: the same command started through ``PROBE``, which wraps one function of
  certa (or of the standard library) so that the process stops itself (SIGSTOP) before or after its N-th call;
  the test sees it stopped and kills it there. Nothing in certa knows about it (no test hook in product code).

After each kill: ``certa verify`` says intact; the run count is the one before or at most the command's new runs
more (no partial run); no ``*.certa-tmp`` file and no partial output (an output file is absent or complete); the
next ``certa migrate`` / ``certa site`` / ``certa batch`` completes what the killed one began. Points inside an
atomic write (a temporary file written, not yet renamed) are killed only for ``certa site``, which removes such
leftovers of its own; anywhere else a SIGKILL at that instant leaves one ``.NAME.RANDOM.certa-tmp`` beside the
target (never a partial target), which README "Hostile environments" documents.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from certa.ledger.schema import SCHEMA_VERSION
from tests.conftest import small_spec_folder
from .conftest import World, assert_ledger_kept, check, count, invoke, leftovers, run_count, sql_rows

pytestmark = [pytest.mark.adversarial,
              pytest.mark.skipif(not hasattr(signal, "SIGKILL") or os.name != "posix", reason="needs POSIX signals")]

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_OLD_SCHEMA = ROOT / "tests" / "golden" / "0.1.0" / "ledger.db"

PROBE = r"""
import importlib, os, signal, sys

module, attribute, nth, when = sys.argv[1:5]
owner = importlib.import_module(module)
*parents, name = attribute.split(".")
for parent in parents:
    owner = getattr(owner, parent)
real, calls = getattr(owner, name), [0]


def probe(*args, **kwargs):
    calls[0] += 1
    hit = calls[0] == int(nth)
    if hit and when == "before":
        os.kill(os.getpid(), signal.SIGSTOP)
    result = real(*args, **kwargs)
    if hit and when == "after":
        os.kill(os.getpid(), signal.SIGSTOP)
    return result


setattr(owner, name, probe)
sys.argv = ["certa", *sys.argv[5:]]
from certa.cli import main

main()
"""
"""``python -c PROBE MODULE ATTRIBUTE N before|after CERTA-ARGS...``: certa, stopping itself (SIGSTOP) before or
after the N-th call of ``MODULE.ATTRIBUTE`` (``Class.method`` allowed)."""


@dataclass(frozen=True)
class Moment:
    """When to kill: after ``delay`` seconds, or at a ``probe`` point (module, attribute, N, before|after)."""

    name: str
    delay: float | None = None
    probe: tuple[str, str, int, str] | None = None


def _delays(*seconds: float) -> list[Moment]:
    return [Moment(f"after-{s:g}s", delay=s) for s in seconds]


def _at(name: str, module: str, attribute: str, nth: int, when: str) -> Moment:
    return Moment(name, probe=(module, attribute, nth, when))


IN_TRANSACTION = _at("in-its-transaction", "certa.ledger.store", "Ledger._append", 1, "after")
"""Entries inserted and the head moved, not committed."""


def _kill(args: tuple[object, ...], moment: Moment) -> int | None:
    """Run certa with ``args`` and SIGKILL it (with its process group) at ``moment``. Returns None if it was
    killed, its exit code if it ended first (possible only for a delay: a probe point must be reached). Counts
    nothing: several run at once (``killed``)."""
    command = ([sys.executable, "-c", PROBE, *map(str, moment.probe)] if moment.probe
               else [sys.executable, "-m", "certa"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    process = subprocess.Popen([*command, *map(str, args)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + (moment.delay if moment.delay is not None else 120)
    killed = True
    try:
        while True:
            pid, status = os.waitpid(process.pid, os.WNOHANG | os.WUNTRACED)
            if pid and os.WIFSTOPPED(status):  # at the probe point
                break
            if pid:
                process.returncode, killed = os.waitstatus_to_exitcode(status), False
                break
            if time.monotonic() >= deadline:
                assert moment.probe is None, f"certa never reached {moment.name} in 120 s"
                break
            time.sleep(0.003)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # also a batch's Dask workers, whatever happened
        except ProcessLookupError:
            pass
        if process.returncode is None:
            os.waitpid(process.pid, 0)
            process.returncode = -signal.SIGKILL
    assert killed or moment.probe is None, f"certa ended before {moment.name}"
    return None if killed else process.returncode


def _after_kill(case: str, *, ledger: Path, runs: int, new_runs: int, folders: tuple[Path, ...],
                writes_files: bool = False) -> int:
    """Assert that the ledger verifies and holds ``runs`` to ``runs + new_runs`` runs, and that ``folders`` hold
    no temporary file (counting lost runs and partial files). Returns the run count.

    A command that ``writes_files`` (``run -o``, ``batch --junit``) may leave one ``.NAME.RANDOM.certa-tmp`` when
    the kill lands between that file's fsync and its rename (README, "Hostile environments": never a partial
    target); such a file is counted as a kill leftover, not a partial file, and the callers check the targets."""
    assert_ledger_kept(case, ledger, runs, new_runs)
    left = leftovers(*folders)
    if left and writes_files:
        count("kill leftovers", len(left))
        return run_count(ledger)
    if left:
        count("partial files", len(left))
    assert not left, f"{case}: left behind {left}"
    return run_count(ledger)


# ------------------------------------------------------------------------------------------------ the moments

RUN_MOMENTS = [
    *_delays(0.4, 0.8, 1.2, 1.6),
    _at("before-the-run", "certa.engine.services.run", "run_plan", 1, "before"),
    _at("transaction-open", "certa.ledger.store", "Ledger._append", 1, "before"),
    IN_TRANSACTION,
    _at("recorded-before-its-files", "certa.engine.foundation.atomic_files", "write_atomically", 1, "before"),
    _at("certificate-written-not-junit", "certa.engine.foundation.atomic_files", "write_atomically", 2, "before"),
]
REVIEW_MOMENTS = [*_delays(0.3, 0.6), _at("transaction-open", "certa.ledger.store", "Ledger._append", 1, "before"),
                  IN_TRANSACTION]
MIGRATE_MOMENTS = [
    *_delays(0.25, 0.45, 0.6),
    *(_at(f"index-{n}-created", "alembic.operations", "Operations.create_index", n, "after") for n in (1, 2, 3)),
    _at("merkle-table-created", "alembic.operations", "Operations.create_table", 1, "after"),
    _at("merkle-nodes-inserted", "alembic.operations", "Operations.bulk_insert", 1, "after"),
]
SITE_MOMENTS = [
    *_delays(0.5, 0.9, 1.3),
    *(_at(f"before-file-{n}", "certa.engine.foundation.atomic_files", "write_atomically", n, "before") for n in (3, 5)),
    *(_at(f"file-{n}-fsynced-not-renamed", "os", "fsync", n, "after") for n in (1, 4)),
    _at("file-2-renamed", "os", "replace", 2, "after"),
]
BATCH_MOMENTS = [
    *_delays(1.5, 2.5),
    IN_TRANSACTION,
    _at("first-run-committed", "certa.ledger.store", "Ledger._append", 2, "before"),
    _at("all-recorded-before-junit", "certa.engine.services.presentation.junit", "write_junit", 1, "before"),
]
KILLS = {"run": RUN_MOMENTS, "review": REVIEW_MOMENTS, "review-signed": [m for m in REVIEW_MOMENTS if m.probe],
         "migrate": MIGRATE_MOMENTS if GOLDEN_OLD_SCHEMA.exists() else [], "site": SITE_MOMENTS,
         "batch": BATCH_MOMENTS}
"""Every case: the command killed and its moments."""


# ----------------------------------------------------------------------------------------- the kills, at once


@dataclass(frozen=True)
class Killed:
    """A case's folder after its command was killed: the ledger, the arguments, what was there before the kill
    (``before``: the rows a case compares) and the exit code if the command ended before the kill."""

    folder: Path
    ledger: Path
    args: tuple[object, ...]
    before: list[tuple]
    exit_code: int | None


def _prepare(command: str, folder: Path, world: World, scheduler: str | None) -> tuple[Path, tuple[object, ...]]:
    """The case's own ledger (a copy) and the command line to kill."""
    folder.mkdir(parents=True)
    (folder / "out").mkdir()
    db = folder / "ledger.db"
    shutil.copyfile(GOLDEN_OLD_SCHEMA if command == "migrate" else world.ledger, db)
    review = ("review", "latest", "--by", "kim", "--decision", "approved")
    if command == "batch":
        args: tuple[object, ...] = ("batch", _batch_specs(folder / "specs"), "--scheduler", str(scheduler),
                                    "--junit", folder / "out" / "junit.xml")
    else:
        args = {"run": ("run", world.spec, "-o", folder / "out" / "cert.json", "--junit", folder / "out" / "junit.xml"),
                "review": review, "review-signed": (*review, "--key", world.key), "migrate": ("migrate",),
                "site": ("site", "-o", folder / "site")}[command]
    return db, (*args, "--ledger", db)


BEFORE = {"review": "SELECT count(*) FROM entries WHERE kind = 'review'",
          "review-signed": "SELECT count(*) FROM entries WHERE kind = 'review'",
          "migrate": "SELECT seq, entry_hash FROM entries ORDER BY seq"}
"""What a case compares after the kill, read before it."""


@pytest.fixture(scope="module")
def scheduler(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The address of one small Dask LocalCluster that every killed batch uses (a batch's own cluster would
    cost seconds per case); None without Dask (the batch cases skip) or when no batch case is selected."""
    try:
        import distributed
    except ImportError:
        distributed = None
    if distributed is None or not any(command == "batch" for command, _ in _selected(request.session.items)):
        yield None
        return
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       memory_limit="1GiB")
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def killed(world: World, scheduler: str | None, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[dict[tuple[str, str], Future[Killed]]]:
    """Every selected case's command started and killed, two at a time (the kills are processes: on two cores
    this halves the category's time); each case's test then checks its own folder. A case whose kill failed
    raises in its test (``Future.result``)."""
    root = tmp_path_factory.mktemp("kills")
    selected = _selected(request.session.items)

    def one(command: str, moment: Moment) -> Killed:
        folder = root / f"{command}-{moment.name}"
        db, args = _prepare(command, folder, world, scheduler)
        before = sql_rows(db, BEFORE[command]) if command in BEFORE else []
        return Killed(folder, db, args, before, _kill(args, moment))

    cases = [(command, moment) for command, moments in KILLS.items() for moment in moments
             if (command, moment.name) in selected and (command != "batch" or scheduler is not None)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {(command, moment.name): pool.submit(one, command, moment) for command, moment in cases}


def _selected(items: list[pytest.Item]) -> set[tuple[str, str]]:
    """The (command, moment) of each kill case pytest is to run (``-k`` may choose a few)."""
    chosen = set()
    for item in items:
        callspec, name = getattr(item, "callspec", None), getattr(item, "originalname", "")
        if callspec is not None and name.startswith("test_kill_"):
            params = callspec.params
            chosen.add((params.get("command", name.removeprefix("test_kill_")), params["moment"].name))
    return chosen


def _killed(killed: dict[tuple[str, str], Future[Killed]], command: str, moment: Moment) -> Killed:
    """The case's kill (waiting for it), counted in the case's category."""
    case = killed[command, moment.name].result()
    count("tried")
    count("sigkills" if case.exit_code is None else "accepted" if case.exit_code == 0 else "refused")
    return case


def _cases(command: str) -> list:  # type: ignore[type-arg]
    return [pytest.param(m, id=m.name) for m in KILLS[command]]


# ------------------------------------------------------------------------------------------------- the checks


@pytest.mark.parametrize("moment", _cases("run"))
def test_kill_run(moment: Moment, killed: dict[tuple[str, str], Future[Killed]], world: World) -> None:
    """``certa run -o cert.json --junit junit.xml``: no run or one whole run; each file absent or complete (the
    certificate the one ``certa export`` gives of the recorded run)."""
    case = _killed(killed, "run", moment)
    cert, junit = case.folder / "out" / "cert.json", case.folder / "out" / "junit.xml"
    now = _after_kill(f"run killed {moment.name}", ledger=case.ledger, runs=world.runs, new_runs=1,
                      folders=(case.folder,), writes_files=True)
    if now == world.runs:
        assert not cert.exists() and not junit.exists(), "an output of a run that was not recorded"
    if cert.exists():
        export = case.folder / "export.json"
        assert invoke("export", "latest", "-o", export, "--ledger", case.ledger).exit_code == 0
        assert json.loads(cert.read_bytes()) == json.loads(export.read_bytes()), "a partial certificate"  # 1.0 == 1
    if junit.exists():
        ET.parse(junit)


@pytest.mark.parametrize(("command", "moment"), [
    *(pytest.param(c, m, id=f"{'signed-' if c == 'review-signed' else ''}{m.name}")
      for c in ("review", "review-signed") for m in KILLS[c])])
def test_kill_review(command: str, moment: Moment, killed: dict[tuple[str, str], Future[Killed]],
                     world: World) -> None:
    """``certa review`` (unsigned, and signed with a key): the review is there whole or not at all; no run
    changes."""
    case = _killed(killed, command, moment)
    _after_kill(f"{command} killed {moment.name}", ledger=case.ledger, runs=world.runs, new_runs=0,
                folders=(case.folder,))
    [(reviews,)] = case.before
    assert sql_rows(case.ledger, BEFORE[command])[0][0] in (reviews, reviews + 1)


@pytest.mark.parametrize("moment", _cases("migrate"))
def test_kill_migrate(moment: Moment, killed: dict[tuple[str, str], Future[Killed]]) -> None:
    """``certa migrate`` of a certa 0.1.0 ledger: the ledger still verifies with every entry unchanged, and the
    next ``certa migrate`` completes it."""
    case = _killed(killed, "migrate", moment)
    runs = run_count(GOLDEN_OLD_SCHEMA)
    _after_kill(f"migrate killed {moment.name}", ledger=case.ledger, runs=runs, new_runs=0, folders=(case.folder,))
    assert sql_rows(case.ledger, BEFORE["migrate"]) == case.before
    check(f"migrate after a kill {moment.name}", invoke(*case.args), allowed={0})
    assert invoke("verify", "--ledger", case.ledger).exit_code == 0
    assert sql_rows(case.ledger, BEFORE["migrate"]) == case.before
    assert sql_rows(case.ledger, "SELECT value FROM ledger_meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]


@pytest.fixture(scope="module")
def reference_site(world: World, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The site of the world's ledger built whole, file by file (the same ledger gives the same bytes)."""
    out = tmp_path_factory.mktemp("reference-site")
    assert invoke("site", "-o", out / "site", "--ledger", world.ledger).exit_code == 0
    return _files(out / "site")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("moment", _cases("site"))
def test_kill_site(moment: Moment, killed: dict[tuple[str, str], Future[Killed]], world: World,
                   reference_site: dict[str, bytes]) -> None:
    """``certa site``: the next ``certa site`` completes the folder (its own leftovers removed) to the same
    files, byte for byte, as a site built whole."""
    case = _killed(killed, "site", moment)
    check(f"site after a kill {moment.name}", invoke(*case.args), allowed={0})
    _after_kill(f"site killed {moment.name}, then rebuilt", ledger=case.ledger, runs=world.runs, new_runs=0,
                folders=(case.folder,))
    assert _files(case.folder / "site") == reference_site


def _batch_specs(folder: Path) -> Path:
    """Two small specs (both PASS), one folder each, with their data."""
    for seed in (21, 22):
        small_spec_folder(folder / f"s{seed}", seed=seed)
    return folder


@pytest.mark.parametrize("moment", _cases("batch"))
def test_kill_batch(moment: Moment, killed: dict[tuple[str, str], Future[Killed]], world: World,
                    scheduler: str | None) -> None:
    """``certa batch --junit``: every recorded run whole; the same batch again records each spec exactly once."""
    if scheduler is None:
        pytest.skip("certa batch needs Dask (distributed)")
    case = _killed(killed, "batch", moment)
    junit = case.folder / "out" / "junit.xml"
    _after_kill(f"batch killed {moment.name}", ledger=case.ledger, runs=world.runs, new_runs=2,
                folders=(case.folder,), writes_files=True)
    if junit.exists():
        ET.parse(junit)
    check(f"batch after a kill {moment.name}", invoke(*case.args), allowed={0})
    assert run_count(case.ledger) == world.runs + 2 and invoke("verify", "--ledger", case.ledger).exit_code == 0
