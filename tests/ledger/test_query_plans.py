"""Every read a command makes is an index search (schema 4): no statement of ``certa list``, ``show``, ``diff``,
``export``, ``prove``, ``replay``, ``review``, ``checkpoint``, ``head``, ``decisions``, ``run`` (recording) or of
what ``certa batch`` asks the ledger reads a whole table or walks the chain, so their time does not grow with
the ledger (``bench/ledger_reads.py`` measures it). ``verify`` (and ``report``, which verifies) walk it on
purpose and are not checked here.

The statements are the ones the commands really send: on SQLite every statement a connection executes is
traced (``sqlite3``'s trace callback: the text with its values), then explained with ``EXPLAIN QUERY PLAN``; on
PostgreSQL every statement SQLAlchemy executes is explained with its parameters, with sequential scans disabled
(``enable_seqscan = off``), so that a table the planner still scans is one no index can serve (tiny test
tables are otherwise always scanned).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from certa.cli import main
from certa.engine import LedgerError, run
from certa.engine.foundation.errors import LedgerIntegrityError
from certa.engine.core.inputs import load_tables
from certa.engine.core.interpreter import RunDecisions
from certa.engine.core.spec import load_plan
from certa.engine.core.stages.base import Decision
from certa.engine.services.run import record_abort
from certa.ledger import Ledger
from certa.ledger.run_record import BATCH_DECISION
from certa.ledger.schema import KINDS_BUT_DECISIONS, entries, runs

from tests.conftest import fresh_postgres_databases

LEDGER_TABLES = ("entries", "runs", "blobs", "merkle_nodes")
PARTIAL_INDEXES = {index.name for table in (entries, runs) for index in table.indexes
                   if index.dialect_options["sqlite"]["where"] is not None}
"""Indexes that hold only the rows a statement asks for (``ix_entries_batch_decisions``): reading one whole is
reading those rows."""
_PLAN_TABLE = re.compile(r"^(SCAN|SEARCH) (\w+)")
_KIND_FILTER = re.compile(r"\bkind (=|IN) ", re.I)


def sqlite_plan_problems(db: Path, statements: list[str]) -> list[str]:
    """What reads a ledger table whole, walks the chain or sorts, among ``statements`` (SQLite, values inlined):
    a ``SCAN`` of a ledger table, unless it follows an index to read the first rows of its order (``_reads_an_end``:
    ``certa list``, the newest runs) or reads a partial index (``PARTIAL_INDEXES``); a ``SEARCH`` of entries by a
    seq range open at its end (a walk from a seq to the end of the chain); entries of a run or of a kind found by
    an index without the run or the kind (walking other runs' entries, or the run's other kinds: a bake-off's 10^6
    decisions; a partial index of the kinds holds it: ``ix_entries_about_no_run``), unless found by a seq range closed at both ends (a run's record, ``runs.first_seq`` .. ``last_seq``:
    its decisions, the bulk of it); a temporary B-tree (a sort or a DISTINCT of whatever the statement read)."""
    problems = []
    with sqlite3.connect(db) as conn:
        for statement in statements:
            for *_, line in conn.execute(f"EXPLAIN QUERY PLAN {statement}"):
                found = _PLAN_TABLE.match(line)
                table = found and found[2]
                partial = " INDEX " in line and line.split(" INDEX ")[1].split()[0] in PARTIAL_INDEXES
                scans = found is not None and found[1] == "SCAN" and not (
                    " INDEX " in line and (_reads_an_end(statement) or partial))
                walks = table == "entries" and line.endswith("USING INTEGER PRIMARY KEY (rowid>?)")
                record = line.endswith("USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)")
                others = table == "entries" and not record and (
                    ("run_id = " in statement and "run_id=?" not in line)
                    or (_KIND_FILTER.search(statement) and "kind=?" not in line and not partial))
                if (table in LEDGER_TABLES and (scans or walks or others)) or "TEMP B-TREE" in line:
                    problems.append(f"{line}  <-  {statement[:300]}")
    return problems


def _reads_an_end(statement: str) -> bool:
    """Whether ``statement`` asks for the first rows of an order and nothing else (no WHERE: every row it passes
    in the index's order is one it returns, so it stops after LIMIT rows)."""
    flat = " ".join(statement.upper().split())
    return re.search(r"\bORDER BY\b.*\bLIMIT\b", flat) is not None and " WHERE " not in flat


_PG_SCAN = re.compile(r"(Seq Scan|Index Scan|Index Only Scan|Bitmap Index Scan)( Backward)?"
                      r"(?: using \w+)? on (\w+)")


def postgres_plan_problems(plan: list[str], statement: str) -> list[str]:
    """What reads a ledger table whole in a PostgreSQL ``EXPLAIN`` (``plan``: its lines) of ``statement``, made with
    ``enable_seqscan = off``: a sequential scan of a ledger table (no index can serve the statement), or an index
    scan with no ``Index Cond`` (the whole index read in its order instead), unless the statement reads the first
    rows of the index's order (``_reads_an_end``) with no sort or reads a partial index; entries of a run or a kind
    found by an index without it (a ``Filter`` on run_id or kind), unless by a seq range closed at both ends (a
    run's record). A sort after an index search is allowed: it sorts what the search found."""
    problems = []
    for number, line in enumerate(plan):
        found = _PG_SCAN.search(line)
        if found is None or found[3] not in LEDGER_TABLES:
            continue
        depth = len(line) - len(line.lstrip(" -"))
        details = []
        for below in plan[number + 1:]:
            if "->" in below or len(below) - len(below.lstrip()) < depth:
                break
            details.append(below.strip())
        searched = any(detail.startswith(("Index Cond:", "Recheck Cond:")) for detail in details)
        record = any(detail.startswith("Index Cond:") and re.search(r"\(seq > \S+\) AND \(seq <= ", detail)
                     for detail in details)
        others = not record and any(detail.startswith("Filter:") and re.search(r"\((run_id|kind)\)::text = ", detail)
                                    for detail in details)
        first_rows = _reads_an_end(statement) and not any("Sort" in other for other in plan)
        partial = (line.split(" using ")[1].split()[0] if " using " in line else None) in PARTIAL_INDEXES
        if found[1] == "Seq Scan" or others or not (searched or first_rows or partial):
            problems.append(f"{line.strip()}  <-  {statement[:300]}")
    return problems


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement every new ``sqlite3`` connection executes (SQLAlchemy's and ``certa.ledger.sqlite_read``'s)."""
    log: list[str] = []
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        conn.set_trace_callback(log.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(sqlite3.dbapi2, "connect", connect)
    return log


def selects(log: list[str]) -> list[str]:
    """The distinct reads in ``log`` (SQLite's own catalogue and pragmas left out)."""
    return [s for s in dict.fromkeys(" ".join(x.split()) for x in log)
            if s.upper().startswith("SELECT") and "sqlite_master" not in s]


def _cli(ledger: str, *args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--ledger", ledger], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _batch_reads(ledger: Ledger, run_ids: list[str]) -> None:
    """What ``certa batch`` asks the ledger besides recording: the runs of a batch (a bake-off's reference), which
    of its spec's runs are recorded already, and their rows and certificates."""
    assert ledger.batch_runs("nightly") == sorted(run_ids[-1:])
    assert ledger.recorded_run_ids([*run_ids, "0" * 32]) == set(run_ids)
    for run_id in run_ids:
        ledger.run(run_id)
    ledger.certificate(run_ids[0])


def _record_aborted(ledger: Ledger, spec: Path, run_id: str, decisions: tuple[Decision, ...]) -> str:
    """Record an aborted run of ``spec`` with id ``run_id`` and ``decisions``."""
    plan = load_plan(spec)
    record_abort(ledger, run_id, plan, load_tables(plan), RunDecisions.of(None, decisions), reason="test", rule="test",
                 stage_id=None)
    return run_id


def _record_batch_run(ledger: Ledger, spec: Path) -> str:
    """An aborted run whose last decision ties it to batch ``nightly`` (as ``certa batch`` records it)."""
    tie = Decision(BATCH_DECISION, {"batch_id": "nightly", "idempotency_key": "k"})
    return _record_aborted(ledger, spec, "f" * 32, (tie,))


COMMANDS: list[Callable[[str, list[str], Path], tuple[str, ...]]] = [
    lambda ledger, ids, work: ("list",),
    lambda ledger, ids, work: ("list", "--json"),
    lambda ledger, ids, work: ("show", "latest"),
    lambda ledger, ids, work: ("show", ids[0][:8]),
    lambda ledger, ids, work: ("show", ids[0], "--json"),
    lambda ledger, ids, work: ("diff", ids[0][:6], ids[1]),
    lambda ledger, ids, work: ("export", ids[1], "-o", str(work / f"export-{len(list(work.iterdir()))}.json")),
    lambda ledger, ids, work: ("head",),
    lambda ledger, ids, work: ("decisions", ids[0]),
    lambda ledger, ids, work: ("replay", ids[0], "--no-record"),
    lambda ledger, ids, work: ("replay", ids[0]),
    lambda ledger, ids, work: ("review", ids[1], "--by", "alice", "--decision", "approved"),
    lambda ledger, ids, work: ("checkpoint", "--key", str(work.parent / "keys" / "certa.key"),
                               "--out", str(work / f"head-{len(list(work.iterdir()))}.checkpoint")),
]


def _exercise(url: str, spec: Path, tmp_path: Path, on_command: Callable[[str], None]) -> None:
    """Record two runs and a batch run, then run every command of ``COMMANDS``, ``prove`` and the batch reads,
    calling ``on_command(name)`` after each (the caller checks the statements since the last call)."""
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(tmp_path / "keys")]).exit_code == 0
    work = tmp_path / "out"
    work.mkdir()
    with Ledger.open(url) as ledger:
        for _ in range(2):
            run(spec, ledger=ledger)
        on_command("run")
    ids = [row["run_id"] for row in json.loads(_cli(url, "list", "--json"))][::-1]
    for command in COMMANDS:
        args = command(url, ids, work)
        _cli(url, *args)
        on_command(" ".join(args[:2]))
    checkpoint = next(work.glob("*.checkpoint"))
    _cli(url, "prove", ids[0], "--checkpoint", str(checkpoint), "-o", str(work / "proof.json"))
    on_command("prove")
    with Ledger.open(url) as ledger:
        batch_run = _record_batch_run(ledger, spec)
        on_command("batch: recording")
        _batch_reads(ledger, [*ids, batch_run])
        on_command("batch: reads")


def test_every_read_of_a_command_is_an_index_search_on_sqlite(tmp_path: Path, small_spec: Path,
                                                              traced: list[str]) -> None:
    db = tmp_path / "ledger.db"
    problems: list[str] = []
    checked: list[str] = []

    def check(name: str) -> None:
        statements = selects(traced)
        checked.append(name)
        assert statements or name == "head", name
        problems.extend(f"{name}: {problem}" for problem in sqlite_plan_problems(db, statements))
        traced.clear()

    _exercise(str(db), small_spec, tmp_path, check)
    assert len(checked) == len(COMMANDS) + 4
    assert problems == []


def test_the_plan_check_finds_a_scan_a_chain_walk_and_a_sort(tmp_path: Path, small_spec: Path) -> None:
    """The checker is not vacuous: the statements of schema 3 (no ``runs(first_seq)`` index), a kind filter
    written as one ``IN``, a run's entries of a kind without the partial index's condition, its decisions without
    the end of its record, and an unindexed payload search are each reported."""
    db = tmp_path / "ledger.db"
    with Ledger.open(db) as ledger:
        run(small_spec, ledger=ledger)
    good = ["SELECT run_id FROM runs ORDER BY first_seq DESC LIMIT 50",
            f"SELECT seq FROM entries WHERE run_id = 'ab' AND kind = 'input' AND {KINDS_BUT_DECISIONS} AND seq > 0 "
            "ORDER BY seq LIMIT 2000",
            "SELECT seq FROM entries WHERE run_id = 'ab' AND kind = 'decision' AND seq > 3 AND seq <= 9 ORDER BY seq "
            "LIMIT 2000"]  # a run's decisions: its record's seqs
    assert sqlite_plan_problems(db, good) == []
    bad = ["SELECT run_id FROM runs WHERE run_id LIKE 'ab%' ESCAPE '/' LIMIT 2",
           "SELECT seq FROM entries WHERE seq > 0 AND payload LIKE '%x%' ORDER BY seq LIMIT 2000",
           "SELECT seq FROM entries WHERE run_id = 'ab' AND kind IN ('run', 'input') AND seq > 0 ORDER BY seq LIMIT 9",
           "SELECT seq FROM entries WHERE run_id = 'ab' AND kind = 'input' AND seq > 0 ORDER BY seq LIMIT 9",
           "SELECT seq FROM entries WHERE run_id = 'ab' AND kind = 'decision' AND seq > 3 ORDER BY seq LIMIT 9",
           "SELECT sha256 FROM blobs ORDER BY size"]
    found = sqlite_plan_problems(db, bad)
    assert [problem.split("<-")[1].strip() for problem in found] == bad[:5] + bad[5:] * 2  # SCAN, then the sort
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX ix_runs_first_seq")
    assert len(sqlite_plan_problems(db, good[:1])) == 2  # SCAN runs, and the sort


@pytest.mark.postgres
def test_every_read_of_a_command_can_be_an_index_search_on_postgresql(tmp_path: Path, small_spec: Path) -> None:
    with fresh_postgres_databases("query plan tests") as new_database:
        url = new_database()
        log: list[tuple[str, Any]] = []

        def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
            if statement.lstrip().upper().startswith("SELECT") and not executemany:
                log.append((statement, parameters))

        event.listen(Engine, "before_cursor_execute", before)
        problems: list[str] = []
        explain = create_engine(url)

        def check(name: str) -> None:
            with explain.connect() as conn:
                for statement, parameters in log:
                    if not re.search(r"\b(entries|runs|blobs|merkle_nodes)\b", statement):
                        continue
                    transaction = conn.begin()
                    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
                    plan = [row[0] for row in conn.exec_driver_sql(f"EXPLAIN {statement}", parameters)]
                    transaction.rollback()
                    problems.extend(f"{name}: {problem}" for problem in postgres_plan_problems(plan, statement))
            log.clear()

        try:
            _exercise(url, small_spec, tmp_path, check)
            assert problems == []
            log.extend((statement, {}) for statement in (  # the checker is not vacuous
                "SELECT run_id FROM runs WHERE status = 'aborted'",
                "SELECT seq FROM entries WHERE payload LIKE '%%x%%' ORDER BY seq LIMIT 2000",
                "SELECT seq FROM entries WHERE entries.run_id = 'ab' AND kind = 'decision' AND payload LIKE '%%x%%'"))
            with explain.connect() as conn:
                conn.exec_driver_sql("DROP INDEX ix_entries_run_id_kind_seq_but_decisions")
                conn.exec_driver_sql("DROP INDEX ix_entries_run_id_kind_but_decisions")
                conn.commit()
            check("bad")
        finally:
            event.remove(Engine, "before_cursor_execute", before)
            explain.dispose()
        assert len(problems) == 3 and all(problem.startswith("bad: ") for problem in problems), problems


@pytest.fixture
def two_runs(tmp_path: Path, small_spec: Path) -> Iterator[tuple[Ledger, list[str]]]:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ids = [run(small_spec, ledger=ledger).run_id for _ in range(2)]
        yield ledger, ids


def test_entries_of_several_kinds_come_merged_in_chain_order(two_runs: tuple[Ledger, list[str]]) -> None:
    """``Ledger.entries`` reads each kind by its own index search: the merged stream is the chain's order and
    content, for one run and for all, in batches smaller than the answer."""
    ledger, ids = two_runs
    every = list(ledger.entries())
    for run_id in (None, *ids):
        for kinds in (["run", "input", "captured"], ["certificate", "run"], ["decision", "decision", "input"]):
            expected = [e for e in every if e.kind in kinds and run_id in (None, e.run_id)]
            assert list(ledger.entries(run_id=run_id, kinds=kinds, batch=2)) == expected
            after = expected[1].seq
            assert list(ledger.entries(run_id=run_id, kinds=kinds, after=after, batch=3)) == \
                [e for e in expected if e.seq > after]


def test_a_runs_decisions_are_its_records_and_its_notes_are_found_after_it(two_runs: tuple[Ledger, list[str]],
                                                                           tmp_path: Path) -> None:
    """A run's decisions come from the seqs of its record (its ``runs`` row), its other kinds from the partial
    index, notes recorded later among them: every kind of a run (``kinds`` None) is the chain's entries of the run,
    from any ``after``; a run without a ``runs`` row has none; a row whose seqs were edited into text is refused."""
    ledger, ids = two_runs
    ledger.record_note(ids[0], "review", {"reviewer": "alice", "decision": "approved", "note": ""})
    every = list(ledger.entries())
    for run_id in ids:
        mine = [e for e in every if e.run_id == run_id]
        assert [e.kind for e in mine].count("decision") > 2
        for after in (0, mine[0].seq, mine[3].seq, mine[-1].seq, every[-1].seq):
            assert list(ledger.entries(run_id=run_id, after=after, batch=2)) == [e for e in mine if e.seq > after]
    assert [e.kind for e in ledger.entries(run_id=ids[0], kinds=["review", "decision"])][-1] == "review"
    assert list(ledger.entries(run_id="0" * 32, kinds=["decision"])) == []
    db = Path(ledger.location)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET first_seq = 'one' WHERE run_id = ?", (ids[1],))
    with pytest.raises(LedgerIntegrityError, match=f"the runs row of run {ids[1]} has first_seq 'one'"):
        list(ledger.entries(run_id=ids[1], kinds=["decision"]))


def test_a_run_id_prefix_is_found_by_its_range(tmp_path: Path, small_spec: Path) -> None:
    """``resolve_run_id`` reads the primary key's range [prefix, prefix + "g"): every id with the prefix (at the
    ends of the hex digits too), and no other."""
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        for run_id in ("abcd" + "0" * 28, "abcd" + "f" * 28, "abce" + "0" * 28, "abcf" + "f" * 28, "abc" + "0" * 29):
            _record_aborted(ledger, small_spec, run_id, ())
        with pytest.raises(LedgerError, match="ambiguous"):
            ledger.resolve_run_id("abcd")
        assert ledger.resolve_run_id("ABCD0") == "abcd" + "0" * 28
        assert ledger.resolve_run_id("abcdf") == "abcd" + "f" * 28
        assert ledger.resolve_run_id("abce") == "abce" + "0" * 28
        assert ledger.resolve_run_id("abcff") == "abcf" + "f" * 28
        assert ledger.resolve_run_id("abc0") == "abc" + "0" * 29
        for missing in ("abcc", "abcd1", "abcf0", "abce" + "0" * 27 + "1"):
            with pytest.raises(LedgerError, match="no run with id"):
                ledger.resolve_run_id(missing)


def test_append_runs_writes_all_runs_in_one_transaction_or_none(tmp_path: Path, small_spec: Path) -> None:
    """``Ledger.append_runs``: runs in chain order, one after the other, and verified intact; a run that cannot be
    written (here: its id is taken) leaves none of the batch, not even the runs before it."""
    from certa.engine.services.audit import verify
    from certa.ledger.run_record import aborted_run

    plan = load_plan(small_spec)
    tables = load_tables(plan)

    def record(run_id: str) -> Any:
        return aborted_run(run_id, plan, tables, RunDecisions.of(None, (Decision("d", {"i": 1}),)).parts,
                           reason="test", rule="test", stage_id=None)

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ledger.append_runs(record(run_id) for run_id in ("a" * 32, "b" * 32))
        head, rows = ledger.head(), ledger.runs()
        assert [row.run_id for row in rows] == ["b" * 32, "a" * 32]
        assert (rows[1].first_seq, rows[0].first_seq, rows[0].last_seq) == (1, rows[1].last_seq + 1, head[0])
        with pytest.raises(LedgerError, match="nothing was recorded"):
            ledger.append_runs([record("c" * 32), record("a" * 32)])
        assert ledger.head() == head and ledger.runs() == rows
        assert verify(ledger).intact
