"""A writer killed at any moment (SIGKILL, no clean-up) never costs the ledger a committed run and never
leaves a partial one: the ledger verifies intact and holds every run whose commit returned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from certa.engine.services.audit import verify
from certa.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from certa.engine import run
from certa.ledger import Ledger
with Ledger.open(sys.argv[1]) as ledger:
    while True:
        print(run(sys.argv[2], ledger=ledger).run_id, flush=True)  # printed only after the commit returned
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("delay", [0.0, 0.013, 0.041])
def test_a_killed_writer_loses_no_committed_run_and_leaves_no_partial_one(small_spec: Path, tmp_path: Path,
                                                                         delay: float) -> None:
    db = tmp_path / "ledger.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(small_spec)], stdout=subprocess.PIPE,
                              text=True, env=env, cwd=ROOT)
    acknowledged = []
    try:
        while len(acknowledged) < 3:  # let it commit a few runs, then kill it in the middle of the next ones
            line = writer.stdout.readline()
            assert line, "the writer stopped before committing three runs"
            acknowledged.append(line.strip())
        time.sleep(delay)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    with Ledger.open(db, create=False) as ledger:
        report = verify(ledger)
        recorded = [row.run_id for row in ledger.runs()]
        assert report.intact, report.problems
        assert set(acknowledged) <= set(recorded)
        assert all(row.status == "completed" for row in ledger.runs())
        for run_id in recorded:  # every recorded run is whole: its certificate is there
            assert ledger.certificate(run_id)["issued"]["run_id"] == run_id


IN_TRANSACTION_WRITER = """
import sys, time
from certa.engine import run
from certa.ledger import Ledger
from certa.ledger.store import Ledger as Store

real_append = Store._append

def slow_append(self, conn, run_id, new_entries):
    result = real_append(self, conn, run_id, new_entries)  # entries inserted, head moved, not committed
    print("in-transaction", run_id, flush=True)
    time.sleep(30)
    return result

with Ledger.open(sys.argv[1]) as ledger:
    for _ in range(2):
        print(run(sys.argv[2], ledger=ledger).run_id, flush=True)
    Store._append = slow_append
    run(sys.argv[2], ledger=ledger)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_inside_its_transaction_leaves_no_trace_of_that_run(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", IN_TRANSACTION_WRITER, str(db), str(small_spec)],
                              stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines = []
    try:
        while not (lines and lines[-1].startswith("in-transaction")):
            line = writer.stdout.readline()
            assert line, "the writer stopped before its third run"
            lines.append(line.strip())
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    committed, in_flight = lines[:2], lines[-1].split()[1]
    with Ledger.open(db, create=False) as ledger:
        assert verify(ledger).intact
        assert sorted(row.run_id for row in ledger.runs()) == sorted(committed)
        assert not list(ledger.entries(run_id=in_flight))  # the killed transaction rolled back whole
        assert ledger.head()[0] == max(e.seq for e in ledger.entries())
