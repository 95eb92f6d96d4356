"""``verify`` keeps bounded state: the Python memory it allocates at its peak (``tracemalloc``) does not grow with
the number of entries (issue "Audit at scale": per-entry state is what made 10^6 entries take 2 GiB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from certa.engine import run
from certa.ledger import Ledger
from certa.ledger.chain import EncodedEntries, NewEntry
from certa.ledger.run_record import RunRecord, runs_row

from tests.conftest import ROOT, small_spec_folder


def _ledger_with(folder: Path, decisions: int) -> Path:
    """A ledger of one real run, then an aborted run of ``decisions`` decision entries (a bake-off's per-decision
    rows), its payloads those of the real run's first decision with its index counted on."""
    db = folder / f"ledger-{decisions}.db"
    with Ledger.open(db) as ledger:
        run(small_spec_folder(folder / "spec"), ledger=ledger)
        entries = list(ledger.entries())
        run_payload = next(e.data() for e in entries if e.kind == "run")
        first = next(e for e in entries if e.kind == "decision").payload
        head, _, tail = first.partition('"index":0')
        assert tail, first
        run_id = uuid.uuid4().hex
        opened = {**run_payload, "run_id": run_id}
        ledger.append_run(RunRecord(run_id, [NewEntry("run", opened),
                                             EncodedEntries("decision", [f'{head}"index":{i}{tail}'
                                                                         for i in range(decisions)]),
                                             NewEntry("abort", {"reason": "test", "rule": "test", "stage": None})],
                                    [], runs_row(opened, certificate=None)))
    return db


_MEASURE = """
import json, sys, tracemalloc
from certa.ledger import Ledger, verify_ledger, verify_read
verify_read.BATCH = int(sys.argv[2])
with Ledger.open(sys.argv[1], read_only=True) as ledger:
    tracemalloc.start()
    report = verify_ledger(ledger, workers=int(sys.argv[3]))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
print(json.dumps([report.intact, report.entries_checked, peak]))
"""


def _peak(db: Path, batch: int, workers: int) -> tuple[int, int]:
    """(entries verified, peak bytes Python allocated during ``verify_ledger`` in the reading process), measured in
    a fresh interpreter (as ``certa verify`` runs: in a long test session other threads and caches allocate during
    the walk too)."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(db), str(batch), str(workers)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    intact, entries, peak = json.loads(done.stdout.strip().splitlines()[-1])
    assert intact
    return entries, peak


def _assert_flat(folder: Path, small: int, large: int, batch: int, workers: int, repeats: int = 1) -> None:
    """The peaks of ``repeats`` verifications of each ledger, the highest of each: with workers, a peak is lower
    when fewer batches happened to be in flight at once, never higher than its bound, so the highest is the
    bound."""
    ledgers = [_ledger_with(folder, n) for n in (small, large)]
    (n_small, peak_small), (n_large, peak_large) = (max(_peak(db, batch, workers) for _ in range(repeats))
                                                    for db in ledgers)
    assert n_large - n_small == large - small
    # per-entry state (a hash, a leaf, a node: ~400 bytes an entry) would add 400 * (large - small) bytes; the
    # bound leaves room for one batch more or less in flight at the peak (the workers' timing: ~0.5 MB at batches
    # of 500), which is noise, not growth
    assert peak_large < peak_small * 1.25, (peak_small, peak_large)
    assert peak_large - peak_small < 60 * (large - small), (peak_small, peak_large)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "2-workers"])
def test_verify_memory_does_not_grow_with_the_entries(tmp_path: Path, workers: int) -> None:
    # the same walk in smaller batches: a few 10^3 suffice; 36,000 entries apart, so that per-entry state of even 60
    # bytes (2.2 MB) stands out from the batches in flight with workers, which vary by up to two (1.1 MB) under load
    _assert_flat(tmp_path, 4_000, 40_000, batch=500, workers=workers)


@pytest.mark.slow
def test_verify_memory_is_flat_from_2e4_to_1e5_entries_with_workers(tmp_path: Path) -> None:
    # batches of 2000: both ledgers span many batches, so both peaks hold the most batches a walk holds at once
    _assert_flat(tmp_path, 20_000, 100_000, batch=2_000, workers=2, repeats=2)
