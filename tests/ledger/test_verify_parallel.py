"""``verify`` with worker processes (``certa.ledger.verify_pool``) reports exactly what it reports in one process: on
an intact ledger and on every single-column edit, cell-type edit and forged (re-chained) payload of
``test_verify_columns``, in batches small enough that every walk spans many batches, some checked by the
workers and some by the reading process; a worker that dies leaves its batches to the reading process."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from certa.engine.services import audit
from certa.engine.services.audit import check_certificate
from certa.ledger import Ledger, verify_pool, verify_read
from certa.ledger.verify import verify_ledger, verify_since

from tests.conftest import ROOT, rebuild_merkle_nodes, rechain
from tests.ledger.test_verify_columns import (MUTATIONS, PG_MUTATIONS, STORED_AS, TYPE_CASES,  # noqa: F401
                                             Recorded, edited_on_postgresql, pg_recorded, recorded_ledger)


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_read, "BATCH", 2)


def _copy(db: Path) -> Path:
    target = db.with_name(f"parallel-{uuid.uuid4().hex}.db")
    shutil.copy(db, target)
    return target


def _both(db: Path) -> tuple[Any, Any]:
    """The reports of ``audit.verify`` in one process and with two workers."""
    with Ledger.open(db) as ledger:
        alone = audit.verify(ledger, workers=0)
        parallel = audit.verify(ledger, workers=2)
    return alone, parallel


def test_an_intact_ledger_verifies_the_same_with_workers(recorded_ledger: tuple[Path, Recorded]) -> None:
    alone, parallel = _both(recorded_ledger[0])
    assert alone.intact and alone.entries_checked > 10 * verify_read.BATCH  # many batches, in flight at once
    assert alone.certificates_checked == parallel.certificates_checked == 1
    assert parallel == alone


@pytest.mark.slow  # the sweep of every column edit with workers; in process: test_verify_columns.py
@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_every_column_edit_is_reported_the_same_with_workers(recorded_ledger: tuple[Path, Recorded], mutation) -> None:
    pristine, recorded = recorded_ledger
    db = _copy(pristine)
    where, params = mutation.where(mutation.row(recorded), lambda key: f":{key}")
    with sqlite3.connect(db) as conn:
        current = conn.execute(f"SELECT {mutation.column} FROM {mutation.table} WHERE {where}", params).fetchone()[0]
        conn.execute(f"UPDATE {mutation.table} SET {mutation.column} = :new_value WHERE {where}",
                     {**params, "new_value": mutation.value(current)})
    alone, parallel = _both(db)
    db.unlink()
    assert not alone.intact
    assert parallel == alone


ENTRY_TYPE_CASES = [case for case in TYPE_CASES if case[0].table in ("entries", "merkle_nodes")]


@pytest.mark.slow  # the sweep of every column edit with workers; in process: test_verify_columns.py
@pytest.mark.parametrize(("mutation", "storage"), ENTRY_TYPE_CASES, ids=[f"{m.id}-{t}" for m, t in ENTRY_TYPE_CASES])
def test_a_cell_of_another_type_is_reported_the_same_with_workers(recorded_ledger: tuple[Path, Recorded], mutation,
                                                                  storage: str) -> None:
    pristine, recorded = recorded_ledger
    db = _copy(pristine)
    where, params = mutation.where(mutation.row(recorded), lambda key: f":{key}")
    with sqlite3.connect(db) as conn:
        try:
            conn.execute(f"UPDATE {mutation.table} SET {mutation.column} = "
                         f"{STORED_AS[storage].format(c=mutation.column)} WHERE {where}", params)
        except sqlite3.IntegrityError as refused:
            db.unlink()
            pytest.skip(f"SQLite refuses {storage} in {mutation.id}: {refused}")
    alone, parallel = _both(db)
    db.unlink()
    assert parallel == alone


def _forge(pristine: Path, seq_of: str, payload: str) -> Path:
    """A copy whose entry (chosen by the SQL ``seq_of``) holds ``payload``, re-chained and re-noded as a careful
    forger would: the chain holds, the payload is what is wrong."""
    db = _copy(pristine)
    with sqlite3.connect(db) as conn:
        seq = conn.execute(seq_of).fetchone()[0]
        conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (payload, seq))
    rechain(db, seq)
    with sqlite3.connect(db) as conn:
        rebuild_merkle_nodes(conn)
    return db


# Two forged payloads with workers in the unit tier; the others under ``slow`` (in process: test_ledger.py).
@pytest.mark.parametrize("payload", ['{"edited":true}', "not json",
                                     *(pytest.param(p, marks=pytest.mark.slow) for p in
                                       ("[1,2]", '{"index":12345678901234567,"kind":1}', '{"a":1e400}', " {} ", "\x1e{}"))])
def test_a_forged_decision_payload_is_reported_the_same_with_workers(recorded_ledger: tuple[Path, Recorded],
                                                                      payload: str) -> None:
    db = _forge(recorded_ledger[0], "SELECT min(seq) + 3 FROM entries WHERE kind = 'decision'", payload)
    alone, parallel = _both(db)
    db.unlink()
    assert not alone.intact and any("payload" in p.message for p in alone.problems), alone.problems
    assert parallel == alone


def test_a_forged_certificate_is_reported_the_same_with_workers(recorded_ledger: tuple[Path, Recorded]) -> None:
    pristine = recorded_ledger[0]
    with sqlite3.connect(pristine) as conn:
        certificate = conn.execute("SELECT payload FROM entries WHERE kind = 'certificate'").fetchone()[0]
    db = _forge(pristine, "SELECT seq FROM entries WHERE kind = 'certificate'",
                certificate.replace('"verdict":"PASS"', '"verdict":"FAIL"'))
    alone, parallel = _both(db)
    db.unlink()
    assert any("certificate:" in p.message for p in alone.problems), alone.problems
    assert parallel == alone


def test_a_worker_that_dies_leaves_its_batches_to_the_reading_process(recorded_ledger: tuple[Path, Recorded]) -> None:
    reader = os.getpid()

    def dying_check(certificate: Any) -> list[str]:
        if os.getpid() != reader:
            os._exit(3)  # a worker killed while checking a certificate
        return check_certificate(certificate)

    with Ledger.open(recorded_ledger[0]) as ledger:
        alone = verify_ledger(ledger, check_certificate=check_certificate, workers=0)
        parallel = verify_ledger(ledger, check_certificate=dying_check, workers=2)
    assert alone.intact and alone.certificates_checked == 1
    assert parallel == alone


def test_workers_are_used_for_a_large_ledger_in_a_single_threaded_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_pool, "available_cpus", lambda: 4)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert verify_pool.default_workers(verify_pool.PARALLEL_FROM) == 4
    assert verify_pool.default_workers(verify_pool.PARALLEL_FROM - 1) == 0
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # forking beside another thread can deadlock
    assert verify_pool.default_workers(10 * verify_pool.PARALLEL_FROM) == 0
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(verify_pool, "available_cpus", lambda: 1)
    assert verify_pool.default_workers(10 * verify_pool.PARALLEL_FROM) == 0


def _pid_check(certificate: Any) -> list[str]:
    return [f"checked in process {os.getpid()}"]


def test_a_batch_handed_to_the_pool_is_checked_in_a_worker(recorded_ledger: tuple[Path, Recorded],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_read, "BATCH", 1000)
    with Ledger.open(recorded_ledger[0]) as ledger:
        batch = next(item for item in verify_read.read_snapshot(ledger, tables=lambda: (None, None))
                     if isinstance(item, verify_read.EntryBatch))
    with verify_pool.BatchPool(check_certificate=_pid_check, run_id=None, records_after=None, workers=2) as pool:
        done = [*pool.submit(batch), *pool.drain()]
        assert pool.executor is not None  # not abandoned: the workers answered
    [(same, summary)] = done
    assert same is batch and summary.clean and summary.certificates == 1
    [problem] = summary.problems
    assert problem.message.startswith("certificate: checked in process ")
    assert problem.message != f"certificate: checked in process {os.getpid()}"


_SLOW_VERIFY = """
import sys, time
from certa.engine.services.audit import check_certificate
from certa.ledger import Ledger, verify_read
from certa.ledger.verify import verify_ledger, verify_since

verify_read.BATCH = 2
def slow_check(certificate):
    time.sleep(0.3)  # in a worker: the verification lasts until the signal comes
    return check_certificate(certificate)

with Ledger.open(sys.argv[1]) as ledger:
    verify_ledger(ledger, check_certificate=slow_check, workers=2)
print("finished")
"""


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").glob("*/children") for child in task.read_text().split()]


@pytest.mark.crash
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT], ids=["TERM", "KILL", "INT"])
def test_a_verification_stopped_by_a_signal_leaves_no_worker_behind(recorded_ledger: tuple[Path, Recorded],
                                                                    tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "ledger.db"
    shutil.copy(recorded_ledger[0], db)
    with sqlite3.connect(db) as conn:  # every entry's batch slow to check: certificates in every other batch
        assert conn.execute("SELECT count(*) FROM entries WHERE kind = 'certificate'").fetchone()[0] >= 1
    process = subprocess.Popen([sys.executable, "-c", _SLOW_VERIFY, str(db)], cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    deadline = time.monotonic() + 30
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
        workers = _children(process.pid)
        time.sleep(0.02)
    assert len(workers) == 2, (workers, process.poll())
    if sig == signal.SIGINT:  # Ctrl-C: the terminal signals the whole process group
        os.killpg(process.pid, sig)
    else:  # the reading process alone: its workers must not outlive it
        process.send_signal(sig)
    out, err = process.communicate(timeout=30)
    assert "finished" not in out and process.returncode != 0
    if sig == signal.SIGINT:  # the reading process stops the pool; the workers ignored Ctrl-C
        assert "KeyboardInterrupt" in err and err.count("Traceback") == 1, err
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in workers) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "zombie"


@pytest.mark.postgres
@pytest.mark.parametrize("mutation", [None, *PG_MUTATIONS], ids=["intact", *[m.id for m in PG_MUTATIONS]])
def test_postgresql_verifies_the_same_with_workers(pg_recorded, mutation) -> None:
    """The workers are forked beside the reading process's open PostgreSQL connection (they never use it)."""
    engine, recorded = pg_recorded
    url = engine.url.render_as_string(hide_password=False)
    with nullcontext() if mutation is None else edited_on_postgresql(engine, mutation, recorded):
        with Ledger.open(url) as ledger:
            alone, parallel = audit.verify(ledger, workers=0), audit.verify(ledger, workers=2)
    assert alone.intact == (mutation is None)
    assert parallel == alone


@pytest.mark.parametrize("edit", ["intact", "payload after", "entry hash after"])
def test_an_incremental_verification_is_the_same_with_workers(recorded_ledger: tuple[Path, Recorded],
                                                              tmp_path: Path, edit: str) -> None:
    from certa.engine import run
    from certa.engine.foundation.signing import generate_key_pair, load_private_key
    from certa.engine.services.checkpoints import sign_head
    from certa.ledger.checkpoint import read_checkpoint_unverified
    from tests.conftest import small_spec_folder

    db = tmp_path / "ledger.db"
    shutil.copy(recorded_ledger[0], db)
    with Ledger.open(db) as ledger:
        sign_head(ledger, [load_private_key(generate_key_pair()[0])], tmp_path / "head.checkpoint")
        run(small_spec_folder(tmp_path / "spec", seed=11), ledger=ledger)
    checkpoint = read_checkpoint_unverified((tmp_path / "head.checkpoint").read_bytes())
    with sqlite3.connect(db) as conn:
        if edit == "payload after":
            conn.execute("UPDATE entries SET payload = '{\"edited\":true}' WHERE seq = ?", (checkpoint.seq + 4,))
        elif edit == "entry hash after":
            conn.execute("UPDATE entries SET entry_hash = ? WHERE seq = ?", ("ab" * 32, checkpoint.seq + 2))
    with Ledger.open(db) as ledger:
        alone, parallel = (verify_since(ledger, checkpoint.seq, checkpoint.entry_hash, checkpoint.root_hash,
                                        check_certificate=check_certificate, workers=workers) for workers in (0, 2))
    assert alone.intact == (edit == "intact") and alone.certificates_checked == 1
    assert parallel == alone
