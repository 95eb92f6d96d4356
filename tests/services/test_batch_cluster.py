"""certa batch on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on 127.0.0.1):
a worker SIGKILLed mid-batch loses nothing and duplicates nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main

from certa.engine.services.audit import verify as verify_ledger
from certa.engine.services.batch import run_batch
from certa.ledger import Ledger

from tests.conftest import small_spec_folder
from tests.services.test_batch import assert_same_as_certa_run, write_tiny_specs

distributed = pytest.importorskip("distributed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dask(*args: str, log: Path) -> subprocess.Popen:
    handle = log.open("wb")
    return subprocess.Popen([str(Path(sys.executable).with_name("dask")), *args], stdout=handle,
                            stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture
def dask_cluster(tmp_path: Path):
    """A scheduler and two workers (1 thread, 1 GiB each, no nanny: a killed worker stays dead); yields
    (address, worker processes); every process is stopped afterwards, also on failure."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard",
                   log=tmp_path / "scheduler.log")]
    try:
        workers = [_dask("worker", address, "--nthreads", "1", "--memory-limit", "1GiB", "--no-nanny",
                         "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{i}", log=tmp_path / f"worker{i}.log")
                   for i in range(2)]
        procs += workers
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_and_duplicates_nothing(tmp_path: Path, dask_cluster) -> None:
    address, workers = dask_cluster
    specs = write_tiny_specs(tmp_path / "specs", 20)
    killed: list[int] = []
    recorded: list = []

    def kill_a_worker_after_three(row) -> None:
        recorded.append(row)
        if len(recorded) == 3:
            os.kill(workers[0].pid, signal.SIGKILL)
            killed.append(workers[0].pid)

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        report = run_batch([tmp_path / "specs"], ledger=ledger, scheduler=address, retries=2,
                           on_recorded=kill_a_worker_after_three)
        assert killed and workers[0].wait(timeout=10) == -signal.SIGKILL
        assert [row.status for row in report.rows] == ["recorded"] * 20, [r.error for r in report.rows]
        runs = ledger.runs()
        assert len(runs) == 20 and sorted(r.run_id for r in runs) == sorted(r.run_id for r in report.rows)
        assert sorted(r.name for r in runs) == sorted(f"tiny-{i}" for i in range(20))
        assert verify_ledger(ledger).intact
        assert CliRunner().invoke(main, ["verify", "--ledger", str(tmp_path / "ledger.db")]).exit_code == 0
        assert_same_as_certa_run(ledger, report.rows)
        assert report.exit_code == 1 and [r.verdict for r in report.rows] == ["PASS", "FAIL"] * 10
    assert len(specs) == 20


def test_a_scheduler_without_workers_is_refused_after_a_bounded_wait(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """certa batch --scheduler on a scheduler with no worker waited silently for ever; it waits
    WORKER_WAIT_SECONDS for the first worker, then refuses in one line naming the scheduler and what to start."""
    from click.testing import CliRunner

    from certa.cli import main
    from certa.engine.services import batch

    monkeypatch.setattr(batch, "WORKER_WAIT_SECONDS", 2.0)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = _dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard",
                      log=tmp_path / "scheduler.log")
    try:
        with distributed.Client(address, timeout="30s"):
            pass  # the scheduler is up
        small_spec_folder(tmp_path / "specs")
        started = time.monotonic()
        result = CliRunner().invoke(main, ["batch", str(tmp_path / "specs"), "--scheduler", address,
                                           "--ledger", str(tmp_path / "ledger.db")])
        assert result.exit_code == 2 and time.monotonic() - started < 30, result.output
        assert f"the Dask scheduler at {address} has no worker (waited 2 s): start one with 'dask worker " \
               f"{address}'" in result.stderr
        assert "Traceback" not in result.output
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=10)


def test_a_local_cluster_that_cannot_start_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """Why: a worker that died while the local cluster started ended certa batch with distributed's traceback
    (``RuntimeError: Nanny failed to start.``), exit 1, which also means FAIL. Made to happen for sure: the workers
    are told to preload a module that does not exist."""
    small_spec_folder(tmp_path / "specs")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__PRELOAD": '["certa_no_such_module"]'}
    result = subprocess.run([sys.executable, "-m", "certa.cli", "batch", str(tmp_path / "specs"), "--workers", "1",
                             "--ledger", str(tmp_path / "ledger.db")], capture_output=True, text=True, env=env,
                            timeout=240, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: the local Dask cluster of 1 worker process(es) could not start (RuntimeError: Nanny failed to "
        "start.); nothing was run: run the batch again, with fewer --workers or with --scheduler ADDRESS")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) <= 2, result.stderr
    assert not list(tmp_path.glob("ledger.db*"))
