"""Shared machinery of the adversarial sweep (tests/adversarial): the counts its summary prints, one small
world (a ledger of two runs, a key pair, a checkpoint, a bundle and an attestation) and ``check``, which asserts
the sweep's invariants on one command's result (see test_sweep.py).

Each test function is a category (its name without ``test_``); ``count`` adds to the counts of the category
that runs, ``test_zz_summary.py`` prints them all last.
"""

from __future__ import annotations

import re
import sqlite3
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from certa.cli import main

from tests.conftest import two_run_ledger

COUNTS: Counter[str] = Counter()
"""Commands tried, refused (exit 1-4), accepted (exit 0), tracebacks, lost runs, partial files, SIGKILLs."""

BY_CATEGORY: Counter[tuple[str, str]] = Counter()
"""Commands tried, refused and accepted, and SIGKILLs, by category."""
CASES_BY_CATEGORY: Counter[str] = Counter()
"""Cases that ran at least one command, by category (the test function's name); a case may run several."""

_RUNNING = ["", ""]
"""The category and node id of the case that runs."""
_COUNTED: set[str] = set()


@pytest.fixture(autouse=True)
def _category(request: pytest.FixtureRequest) -> None:
    """Note the category of the case that runs (its test function's name) and its id, for the counts."""
    _RUNNING[:] = [request.function.__name__.removeprefix("test_"), request.node.nodeid]


def count(what: str, n: int = 1) -> None:
    """Add ``n`` to the count ``what``, in total and for the running case's category (a skipped case, which
    runs no command, is no case)."""
    category, case = _RUNNING
    if case not in _COUNTED:
        _COUNTED.add(case)
        CASES_BY_CATEGORY[category] += 1
    COUNTS[what] += n
    if what in ("tried", "refused", "accepted", "sigkills"):
        BY_CATEGORY[category, what] += n


TMP_SUFFIX = ".certa-tmp"
MUST_BE_ZERO = ("tracebacks", "lost runs", "partial files")
PROGRESS = re.compile(r"^(\[\d+/\d+\] stage |recording run [0-9a-f]{32}: |[a-z]+: [a-z ]+ \d+/\d+$|    \S+: .* \d+/\d+$)")
"""Progress lines on stderr before a refusal (documented), not error lines: ``certa run``'s one per stage and
``recording run ID: ...``, ``verify: entries 1/22``, ``site: pages 4/8``, and a stage's own progress, indented
(``    w: subject: 50,156 scored tokens/s; windows 45/45``)."""
VERIFY_LINE = ("error:", "NOT VERIFIED", "TAMPERED", "tampered")
INTERNAL_ERROR = "error: internal error, a bug in certa"
"""How the command line reports an exception that is no ``CertaError`` (a bug) in one line: a traceback for the
sweep's counts, whatever its exit code."""


# ---------------------------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class World:
    folder: Path
    ledger: Path
    spec: Path
    key: Path
    pub: Path
    checkpoint: Path
    bundle: Path
    attestation: Path
    runs: int


HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
"""The warning categories Python's default filters hide; every other one is printed on a command's stderr (certa
installs no filter), which pytest would capture instead: ``invoke`` records them (``shown_warnings``)."""


def invoke(*args: object, env: dict[str, str] | None = None) -> Result:
    """``certa ARGS`` in-process; the Python warnings a real process would print on stderr (numpy's
    ``RuntimeWarning``s, say) are kept in ``shown_warnings(result)``, as ``Category: message`` lines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    shown = [f"{w.category.__name__}: {w.message}" for w in caught if not issubclass(w.category, HIDDEN_WARNINGS)]
    result.shown_warnings = list(dict.fromkeys(shown))  # type: ignore[attr-defined]  # Python prints each once
    return result


def shown_warnings(result: Result) -> list[str]:
    return list(getattr(result, "shown_warnings", []))


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """One small ledger (two runs), a key pair, a checkpoint, a bundle and an attestation of the latest run."""
    folder = tmp_path_factory.mktemp("adversarial")
    spec, db = two_run_ledger(folder)
    assert invoke("keygen", "--out-dir", folder / "keys").exit_code == 0
    key, pub = folder / "keys" / "certa.key", folder / "keys" / "certa.pub"
    cp, bundle, att = folder / "head.checkpoint", folder / "bundle.json", folder / "attestation.json"
    assert invoke("checkpoint", "--key", key, "--out", cp, "--ledger", db).exit_code == 0
    assert invoke("prove", "latest", "--checkpoint", cp, "-o", bundle, "--ledger", db).exit_code == 0
    assert invoke("attest", "latest", "--key", key, "-o", att, "--ledger", db).exit_code == 0
    world = World(folder, db, spec, key, pub, cp, bundle, att, run_count(db))
    assert world.runs == 2
    for doc in (cp, bundle, att):  # the pristine documents verify
        assert doc_command(world, doc.name, doc).exit_code == 0
    return world


def sql_rows(db: Path, query: str) -> list[tuple]:
    """The rows of ``query`` on the SQLite file ``db``, opened read-only; after a SIGKILL the WAL may need the
    recovery only a writer can do ("attempt to write a readonly database"), and then a plain connection reads."""
    try:
        return _rows(sqlite3.connect(f"file:{db}?mode=ro", uri=True), query)
    except sqlite3.OperationalError:
        return _rows(sqlite3.connect(db), query)


def _rows(conn: sqlite3.Connection, query: str) -> list[tuple]:
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def run_count(ledger: Path | str) -> int:
    """The runs in a SQLite ledger file or, given a URL, in that database."""
    if isinstance(ledger, Path):
        return int(sql_rows(ledger, "SELECT count(*) FROM runs")[0][0])
    from sqlalchemy import create_engine, text
    engine = create_engine(ledger)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM runs")).scalar_one())
    finally:
        engine.dispose()


def leftovers(*folders: Path) -> list[Path]:
    found: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            found += [p for p in folder.rglob("*") if p.name.endswith(TMP_SUFFIX)]
    return found


# ------------------------------------------------------------------------------------------- the invariants


def check(case: str, result: Result, *, allowed: set[int], folders: tuple[Path, ...] = (),
          verify_command: bool = False, verdict_command: bool = False, no_files: tuple[Path, ...] = (),
          ledger: Path | None = None, runs: int | None = None) -> None:
    """Record ``result`` in COUNTS and assert the sweep's invariants (see the module docstring)."""
    count("tried")
    out = (result.stdout or "") + (result.stderr or "")
    traceback = ("Traceback" in out or INTERNAL_ERROR in out
                 or (result.exception is not None and not isinstance(result.exception, SystemExit)))
    if traceback:
        count("tracebacks")
    count("accepted" if result.exit_code == 0 else "refused")
    partial = leftovers(*folders) + [p for p in no_files if p.exists()]
    if partial:
        count("partial files", len(partial))
    detail = (f"{case}: exit {result.exit_code}, exception {result.exception!r}\n"
              f"stdout {result.stdout!r}\nstderr {result.stderr!r}")
    if ledger is not None and result.exit_code != 0:
        assert_ledger_kept(detail, ledger, runs)
    assert not traceback, detail
    assert result.exit_code in allowed, detail
    assert not partial, f"{detail}\nleft behind: {partial}"
    if result.exit_code != 0:  # a warning Python prints is a line on stderr too
        lines = [line for line in result.stderr.splitlines() + shown_warnings(result) if not PROGRESS.match(line)]
        if verdict_command and result.exit_code == 1:  # `certa run`: a FAIL verdict, recorded, not a refusal
            assert "FAIL" in result.stdout, detail
        elif verify_command and result.exit_code == 1:
            assert any(line.startswith(VERIFY_LINE) for line in (result.stdout + result.stderr).splitlines()), detail
        elif result.exit_code == 2 and lines and lines[0].startswith("Usage:"):  # click's usage error (exit 2)
            count("usage errors")
            assert sum(line.startswith("Error:") for line in lines) == 1, detail
        else:
            assert len(lines) == 1 and lines[0].startswith("error:"), detail


def doc_command(world: World, doc: str, path: Path) -> Result:
    if doc == "bundle.json":
        return invoke("verify-bundle", path, "--public-key", world.pub)
    if doc == "attestation.json":
        return invoke("verify-attestation", path, "--public-key", world.pub)
    return invoke("verify", "--checkpoint", path, "--public-key", world.pub, "--ledger", world.ledger)


def assert_ledger_kept(case: str, ledger: Path | str, runs: int | None, new_runs: int = 0) -> None:
    """Assert that ``ledger`` verifies intact and holds ``runs`` to ``runs + new_runs`` runs (any number when
    ``runs`` is None): no committed run lost, no partial one. A failure counts as a lost run."""
    intact = invoke("verify", "--ledger", ledger)
    now = run_count(ledger) if runs is not None else None
    lost = intact.exit_code != 0 or (now is not None and not runs <= now <= runs + new_runs)
    if lost:
        count("lost runs")
    assert not lost, (f"{case}\nthe ledger lost committed runs or no longer verifies: verify exit "
                      f"{intact.exit_code} {intact.output!r}, {now} runs (were {runs})")
