"""Where ``certa.ledger.verify`` checks its batches: in worker processes beside the one that reads the ledger, or in
that one alone; the answer is the same (``certa.ledger.verify_batch`` needs nothing from other batches).

Checking an entry is Python work (JSON, the entry schema, three SHA-256s of ~150-byte texts, for which
hashlib keeps the GIL), so threads do not run it in parallel; processes do. The reading process keeps one
snapshot of the ledger (``certa.ledger.verify_read``), sends each batch's columns to a worker and takes the summaries
back in chain order; it checks a batch itself when every worker is busy and the oldest batch is not done, so no
core waits. At most ``IN_FLIGHT_PER_WORKER`` batches per worker are in flight: memory stays bounded. A worker
that dies leaves its batch to the reading process: no batch goes unchecked.

The workers are forked when the pool is made, before the pool starts its own threads (and verify reads in the
calling thread when it has workers): they start at once with everything imported (a spawned interpreter would
take half a second to import the certificate checks, and would run the caller's main module again). Forking a process that has other threads can deadlock the
child on a lock one of them held, so ``default_workers`` uses workers only when the calling process has a
single thread (as ``certa verify`` has); otherwise, or where ``fork`` does not exist, batches are checked in
the calling process.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from certa.ledger.verify_batch import BatchChecker, BatchSummary, CheckCertificate
from certa.ledger.verify_read import EntryBatch

__all__ = ["BatchPool", "default_workers", "available_cpus", "PARALLEL_FROM", "IN_FLIGHT_PER_WORKER"]

PARALLEL_FROM = 50_000
"""Entries from which ``default_workers`` uses worker processes: below it, forking them and sending the
batches costs about what it saves."""
IN_FLIGHT_PER_WORKER = 2

_CHECKER: BatchChecker | None = None


def _start_worker(check_certificate: CheckCertificate | None, run_id: str | None, records_after: int | None,
                  reader: int) -> None:
    """A worker's set-up: its checker; Ctrl-C left to the reading process (which stops the pool; a worker
    interrupted in the middle of a batch would print a traceback); and, on Linux, the worker killed when the
    reading process dies (``PR_SET_PDEATHSIG``): killed by a signal, it cannot stop its workers, which would
    otherwise wait for batches forever."""
    global _CHECKER
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(reader)
    _CHECKER = BatchChecker(check_certificate=check_certificate, run_id=run_id, records_after=records_after)


def _die_with_parent(parent: int) -> None:
    """Ask Linux to send this process SIGKILL when its parent exits (prctl ``PR_SET_PDEATHSIG`` = 1); elsewhere
    nothing. A parent (pid ``parent``) that died before the call is caught by the pid check after it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # imported by the parent before it forks the workers (BatchPool): about 30 ms it pays only then

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _check_in_worker(columns: list[tuple[Any, ...]]) -> BatchSummary:
    assert _CHECKER is not None
    return _CHECKER.check_columns(columns)


def available_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_workers(entries: int) -> int:
    """Worker processes for a verification of about ``entries`` entries: one per CPU from ``PARALLEL_FROM``
    entries on a machine of several CPUs, when this process has a single thread and can fork; none otherwise."""
    cpus = available_cpus()
    if entries < PARALLEL_FROM or cpus < 2 or threading.active_count() > 1 \
            or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return cpus


class BatchPool:
    """Checks batches in ``workers`` processes (0: in this one); ``submit`` hands a batch over and returns the
    batches checked so far in chain order, ``drain`` the rest."""

    def __init__(self, *, check_certificate: CheckCertificate | None, run_id: str | None, records_after: int | None,
                 workers: int) -> None:
        self.local = BatchChecker(check_certificate=check_certificate, run_id=run_id, records_after=records_after)
        self.pending: deque[tuple[EntryBatch, Future[BatchSummary] | BatchSummary]] = deque()
        self.bound = IN_FLIGHT_PER_WORKER * workers
        self.executor: ProcessPoolExecutor | None = None
        if workers > 0:
            import ctypes  # noqa: F401  (for _die_with_parent in each worker: imported once, before the fork)

            self.executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                                                initializer=_start_worker,
                                                initargs=(check_certificate, run_id, records_after, os.getpid()))
            try:
                self.executor.submit(int).result()  # fork the workers now, before this process starts a thread
            except (BrokenProcessPool, OSError):  # they could not start: check every batch here
                self._abandon_workers()

    def __enter__(self) -> BatchPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)

    def submit(self, batch: EntryBatch) -> Iterator[tuple[EntryBatch, BatchSummary]]:
        """Check ``batch`` here or in a worker; then yield the batches done, oldest first, while any is (and
        while more than the bound are in flight)."""
        columns = list(zip(*batch.rows))
        if self.executor is None or (len(self.pending) >= self.bound and not self._oldest_done()):
            self.pending.append((batch, self.local.check_columns(columns)))
        else:
            try:
                self.pending.append((batch, self.executor.submit(_check_in_worker, columns)))
            except (BrokenProcessPool, RuntimeError):  # the pool is gone: check here from now on
                self._abandon_workers()
                self.pending.append((batch, self.local.check_columns(columns)))
        while self.pending and (len(self.pending) > self.bound or self._oldest_done()):
            yield self._pop()

    def drain(self) -> Iterator[tuple[EntryBatch, BatchSummary]]:
        """Every batch still in flight, in chain order."""
        while self.pending:
            yield self._pop()

    def _oldest_done(self) -> bool:
        item = self.pending[0][1]
        return not isinstance(item, Future) or item.done()

    def _pop(self) -> tuple[EntryBatch, BatchSummary]:
        batch, item = self.pending.popleft()
        if not isinstance(item, Future):
            return batch, item
        try:
            return batch, item.result()
        except (BrokenProcessPool, CancelledError, pickle.PicklingError, EOFError, OSError):
            self._abandon_workers()
            return batch, self.local.check_columns(list(zip(*batch.rows)))

    def _abandon_workers(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = None
