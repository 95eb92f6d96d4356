"""Hostile inputs refused in bounded time and memory: each case is one ``certa run --no-record`` in a fresh
process, timed, with its peak RSS from ``os.wait4`` (the kernel's accounting of that child alone).

Goals (issue "hostile environments", bounded resources): ``/dev/zero``, ``/dev/urandom`` and a FIFO with no
writer refused within 1 s; a Parquet bomb refused within 1 s and 300 MB peak RSS; every case one ``error:``
line and exit 2. The wall time is the whole command's; its floor, start-up and spec validation up to the input
check, is the row of a missing file (refused at the same point, by ``os.stat``).

Inspect AI logs (issue 31, item 5: memory bounded by what the limits say), run through
``specs/inspect-accuracy`` with the subject replaced: a ``.eval`` of about 100 KB whose one sample member is
64 MiB of JSON (``tests/core/evidence/inspect_bombs.py``), refused within 1 s and 300 MB where it is not a
sample; read within 300 MB where it is a genuine sample with a 64 MiB event transcript (``.eval`` and JSON form);
a genuine log of 10^4 samples with their transcripts, its peak beside its decompressed size.

    python3 bench/hostile_inputs.py                 # the cases below, a few seconds
    python3 bench/hostile_inputs.py --only Inspect  # only the cases whose label holds "Inspect"
    python3 bench/hostile_inputs.py --full          # also the user's bomb at full size: 4·10^8 identical rows, zstd
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import SMALL_SPEC, columns_to_csv_bytes, window_columns  # noqa: E402
from tests.core.evidence.inspect_bombs import grown_json_log, grown_log, many_samples_log  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from certa.cli import main; sys.exit(main())"]
TIMEOUT = 30.0


LAUNCHER = """
import json, os, sys, time
started = time.monotonic()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() - started > float(os.environ["BENCH_TIMEOUT"]):
        os.kill(pid, 9)
        done, status, usage = os.wait4(pid, 0)
        break
    time.sleep(0.005)
print(json.dumps([time.monotonic() - started, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)]))
"""
"""Spawns one command and prints (seconds, peak RSS MB, exit code). It is a small process of its own because
Linux carries a parent's peak RSS over into a child's ``ru_maxrss`` across fork and exec: measured from this
(large) bench process, every child would report at least the bench's own peak."""


def measure(args: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit code, last stderr line) of one command in a fresh process."""
    launched = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *args], cwd=cwd, capture_output=True,
                              env={**os.environ, "BENCH_TIMEOUT": str(TIMEOUT)}, check=True)
    seconds, rss, code = json.loads(launched.stdout)
    lines = [line for line in launched.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return seconds, rss, code, lines[-1] if lines else ""


def write_parquet_bomb(path: Path, rows: int, *, chunk: int = 10**7) -> None:
    """``rows`` identical rows (window_id, tokens, mean_nll), zstd: the user's bomb shape."""
    schema = pa.schema([("window_id", pa.string()), ("tokens", pa.int64()), ("mean_nll", pa.float64())])
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            writer.write_table(pa.table({"window_id": pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(n, dtype=np.int32)), pa.array(["w0"])).dictionary_decode(),
                "tokens": np.full(n, 100, dtype=np.int64), "mean_nll": np.full(n, 2.0)}, schema=schema))


def write_string_bomb(path: Path, rows: int, cell_bytes: int) -> None:
    """``rows`` rows of one identical string of ``cell_bytes`` bytes: a few KB on disk, decoded
    ``rows * cell_bytes`` bytes (dictionary-encoded, zstd)."""
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * cell_bytes]))
    pq.write_table(pa.table({"window_id": column}), path, compression="zstd")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="also build and refuse the 4·10^8-row Parquet bomb")
    parser.add_argument("--only", default="", help="only the cases whose label holds this text")
    arguments = parser.parse_args()
    full = arguments.full
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        baseline, subject = window_columns(30, seed=1)
        (work / "data").mkdir()
        (work / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(baseline))
        (work / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subject))
        specs = {}
        for fmt in ("csv", "jsonl", "parquet"):  # the format declared: no file suffix needed
            specs[fmt] = work / f"spec-{fmt}.yaml"
            specs[fmt].write_text(SMALL_SPEC.replace("data/subject.csv", f"data/subject.csv, format: {fmt}"))
        shutil.copytree(ROOT / "specs" / "lm-eval-accuracy", work / "lm-eval")
        specs["lm-eval-results"] = work / "lm-eval" / "spec.yaml"
        shutil.copytree(ROOT / "specs" / "inspect-accuracy", work / "inspect")
        specs["eval"] = work / "inspect" / "spec.yaml"
        specs["inspect-json"] = work / "inspect" / "spec-json.yaml"
        specs["inspect-json"].write_text(specs["eval"].read_text().replace(
            "subject: {path: data/subject.eval, format: inspect-eval}",
            "subject: {path: data/subject.eval, format: inspect-json}"))

        def fifo() -> Path:
            os.mkfifo(work / "fifo")
            return work / "fifo"

        def sparse(name: str, size: int) -> Callable[[], Path]:
            def make() -> Path:
                with open(work / name, "wb") as file:
                    file.truncate(size)  # a sparse file: no disk, no write time; all NUL bytes
                return work / name
            return make

        def jsonl_number() -> Path:
            path = work / "number.jsonl"
            path.write_bytes(b'{"window_id": "w0", "tokens": ' + b"7" * 10**8 + b', "mean_nll": 1.0}\n')
            return path

        def csv_cell() -> Path:
            path = work / "cell.csv"
            path.write_bytes(b"window_id,tokens,mean_nll\nw0,1,1.0\nw1,1," + b"9" * 100 * 10**6 + b"\n")
            return path

        def string_bomb() -> Path:
            write_string_bomb(work / "strings.parquet", 10**7, 1024)
            return work / "strings.parquet"

        def rows_bomb() -> Path:
            write_parquet_bomb(work / "rows.parquet", 4 * 10**8 if full else 120_000_000)
            return work / "rows.parquet"

        def built(name: str, make: Callable[[], bytes]) -> Callable[[], Path]:
            def write() -> Path:
                (work / name).write_bytes(make())
                return work / name
            return write

        def padded_results(size: int) -> bytes:
            """The fixture subject's lm-eval results file with its pretty_env_info (a field certa does not read)
            a list of empty objects, the file ``size`` bytes."""
            (path,) = (work / "lm-eval" / "data" / "subject").glob("results_*.json")
            results = json.loads(path.read_text(encoding="utf-8"))
            head, tail = json.dumps({**results, "pretty_env_info": "@"}).encode().split(b'"@"')
            count = (size - len(head) - len(tail) - 1) // 3
            return head + b"[" + b"{}," * (count - 1) + b"{}]" + tail

        mib64 = 64 << 20
        legit: dict[str, int] = {}

        def many(json_form: bool) -> Callable[[], bytes]:
            def make() -> bytes:
                raw, legit["decoded"] = many_samples_log("subject", 10**4, json_form=json_form)
                return raw
            return make

        cases: list[tuple[str, str, str | Callable[[], Path], tuple[float, float] | None]] = [
            ("a missing file (the command's floor)", "csv", "/nonexistent/subject.csv", None),
            ("/dev/zero", "csv", "/dev/zero", (1.0, 0)),
            ("/dev/urandom", "csv", "/dev/urandom", (1.0, 0)),
            ("FIFO, no writer", "csv", fifo, (1.0, 0)),
            ("a folder", "csv", tmp, None),
            ("3 GiB CSV (sparse)", "csv", sparse("big.csv", 3 << 30), None),
            ("1 GB JSON Lines (sparse)", "jsonl", sparse("big.jsonl", 10**9), None),
            ("1 GB CSV of NUL bytes", "csv", sparse("nul.csv", 10**9), None),
            ("JSONL number of 10^8 digits", "jsonl", jsonl_number, None),
            ("CSV cell of 100 MB", "csv", csv_cell, None),
            ("Parquet: 10^7 x 1 KiB same string", "parquet", string_bomb, (1.0, 300)),
            (f"Parquet: {'4e8' if full else '1.2e8'} identical rows", "parquet", rows_bomb, (1.0, 300)),
            ("Inspect .eval: the fixture (its floor)", "eval", str(work / "inspect" / "data" / "subject.eval"), None),
            ("Inspect .eval: 64 MiB member, no sample", "eval", built("pad.eval", lambda: grown_log("subject", mib64,
                                                                                          "padding")), (1.0, 300)),
            ("Inspect .eval: member inflating >64 MiB", "eval", built("lie.eval", lambda: grown_log("subject", mib64,
                                                                                             "lie")), (1.0, 300)),
            ("Inspect .eval: 64 MiB sample input", "eval", built("input.eval", lambda: grown_log("subject", mib64, "input")),
             (1.0, 300)),
            ("Inspect .eval: 16 MiB input, read", "eval",
             built("input16.eval", lambda: grown_log("subject", 16 << 20, "input")), None),
            ("Inspect .eval: 64 MiB transcript, read", "eval", built("events.eval", lambda: grown_log("subject", mib64)),
             (0, 300)),
            ("Inspect JSON: 64 MiB transcript, read", "inspect-json",
             built("events.json", lambda: grown_json_log("subject", mib64)), (0, 300)),
            ("lm-eval results: 64 MiB unread field, read", "lm-eval-results",
             built("results.json", lambda: padded_results(mib64)), (0, 300)),
            ("Inspect .eval: 10^4 samples, read", "eval", built("many.eval", many(False)), None),
            ("Inspect JSON: 10^4 samples, read", "inspect-json", built("many.json", many(True)), None),
        ]
        cases = [case for case in cases if arguments.only in case[0] or "the command's floor" in case[0]]
        print(f"{'case':40} {'file':>10} {'build':>7} {'seconds':>8} {'peak MB':>8} {'exit':>4}  goal      message")
        for label, fmt, source, goal in cases:
            built = time.monotonic()
            path = source() if callable(source) else Path(source)
            built = time.monotonic() - built
            size = path.stat().st_size if path.is_file() else 0
            seconds, rss, code, message = measure(
                [*CLI, "run", str(specs[fmt]), "--no-record", "--input",
                 f"{'subject_results' if fmt == 'lm-eval-results' else 'subject'}={path}"], work)
            refused = goal is not None and goal[0] > 0  # a goal of 0 s: the input is read, only memory counts
            met = "" if goal is None else (
                "met" if (code == 2 or not refused) and (not refused or seconds <= goal[0])
                and (not goal[1] or rss <= goal[1]) else "MISSED")
            target = "" if goal is None else (f"<{goal[0]:.0f} s" if refused else "") + (
                f"{',' if refused else '<'}{goal[1]:.0f} MB" if goal[1] else "")
            if "10^4" in label:
                message = f"{legit['decoded'] / 1e6:.0f} MB of JSON; {message}"
            print(f"{label:40} {size / 1e6:9.1f}M {built:6.1f}s {seconds:8.2f} {rss:8.0f} {code:>4}  "
                  f"{target:9} {met:6} {message[:150]}")
            if path.is_file() and path.parent == work:
                path.unlink()


if __name__ == "__main__":
    main()
