"""Speed of ``certa batch`` (Dask LocalCluster) against running the same specs one after another.

Usage: python bench/batch.py [--specs 40] [--windows 400] [--replicates 4000] [--cli-runs 6]
                             [--decisions 10000000] [--shards 8] [--workers 2] [--repeats 2] [--skip-bakeoff]

1. ``--specs`` small paired-ratio specs (distinct data and seeds), each recorded in a fresh SQLite ledger:
   serially in one process (``engine.run`` loop), as ``certa run`` subprocesses (``--cli-runs`` of them,
   scaled to ``--specs``: each pays Python's and numpy's start-up), and with ``certa batch``'s engine
   (``certa.engine.services.batch.run_batch``) on a LocalCluster of ``--workers`` processes: cold (the cluster is started
   and stopped inside the timing, as the command does) and warm (a running cluster, as with --scheduler).
   Goal (issue 8): batch >= 1.7x the in-process serial loop on 2 cores. The per-spec overhead of the batch
   path is (warm batch time x workers - serial time) / specs: what each spec costs beyond its computation.
2. A bake-off of ``--decisions`` decisions (3 vendors, 4 buckets) cut into ``--shards`` shard specs
   (``bakeoff.compare``, 100 bootstrap replicates, ``ledger_rows: per_bucket``) plus one merge spec
   (``shard_batch``) run by ``run_batch``, against one process running one ``bakeoff.compare`` over all
   decisions (same knobs); the merged pools and sums must be bit-identical to the single run's.

Times are the best of ``--repeats`` (the machine is shared; ``uptime`` is printed alongside).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from certa.engine import run  # noqa: E402
from certa.engine.services.batch import run_batch  # noqa: E402
from certa.engine.core.tables import columns_to_csv_bytes  # noqa: E402
from certa.ledger import Ledger  # noqa: E402
from timing import best_of  # noqa: E402

PAIRED = """\
certa: 1
name: bench-{i}
seed: {seed}
profile: dev
inputs:
  baseline: {{path: data/baseline.csv}}
  subject: {{path: data/subject.csv}}
stages:
  - id: ratio
    use: paired.ppl_ratio
    with: {{baseline: baseline, subject: subject, replicates: {replicates}}}
"""

COMPARE = """\
certa: 1
name: {name}
seed: 11
inputs:
  decisions: {{path: decisions.csv}}
stages:
  - id: cmp
    use: bakeoff.compare
    with: {{input: decisions, bootstrap: {{replicates: 100}}, ledger_rows: per_bucket, allow_single_vendor: true}}
"""

MERGE = """\
certa: 1
name: merged
seed: 11
stages:
  - id: merged
    use: bakeoff.merge
    with: {{shard_batch: {batch}}}
"""

CERTA = [str(Path(sys.executable).with_name("certa"))]
"""The `certa` command of the interpreter running this bench (its venv's script, whatever PATH says)."""


def write_paired_specs(root: Path, count: int, windows: int, replicates: int) -> list[Path]:
    paths = []
    for i in range(count):
        rng = np.random.default_rng(500 + i)
        base = np.round(2.0 + rng.gamma(4.0, 0.25, windows), 6)
        subj = np.round(base + 0.01 + rng.normal(0, 0.05, windows), 6)
        ids = [f"w{j:05d}" for j in range(windows)]
        tokens = rng.integers(64, 512, windows)
        folder = root / f"s{i:03d}"
        (folder / "data").mkdir(parents=True)
        (folder / "data" / "baseline.csv").write_bytes(
            columns_to_csv_bytes({"window_id": ids, "tokens": tokens, "mean_nll": base}))
        (folder / "data" / "subject.csv").write_bytes(
            columns_to_csv_bytes({"window_id": ids, "tokens": tokens, "mean_nll": subj}))
        (folder / "spec.yaml").write_text(PAIRED.format(i=i, seed=9000 + i, replicates=replicates))
        paths.append(folder / "spec.yaml")
    return paths


def bench_specs(args, work: Path) -> None:
    from distributed import Client, LocalCluster

    specs = write_paired_specs(work / "specs", args.specs, args.windows, args.replicates)
    run(specs[0])  # warm the in-process caches (numba, schemas) outside the timing

    def serial() -> None:
        with Ledger.open(work / f"serial-{time.monotonic_ns()}.db") as ledger:
            for spec in specs:
                run(spec, ledger=ledger)

    t_serial, _ = best_of(args.repeats, serial)
    print(f"{args.specs} paired-ratio specs ({args.windows} windows, {args.replicates} replicates), recorded:")
    print(f"  serial, one process (engine.run loop): {t_serial:7.2f} s  ({1000 * t_serial / args.specs:.0f} ms/spec)")

    def cli_runs() -> None:
        db = work / f"cli-{time.monotonic_ns()}.db"
        for spec in specs[:args.cli_runs]:
            subprocess.run([*CERTA, "run", str(spec), "--ledger", str(db), "--json"], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    if args.cli_runs:
        t_cli, _ = best_of(1, cli_runs)
        print(f"  serial, certa run subprocesses:        {t_cli * args.specs / args.cli_runs:7.2f} s  "
              f"({1000 * t_cli / args.cli_runs:.0f} ms/spec, {args.cli_runs} run, scaled)")

    def cold() -> None:
        with Ledger.open(work / f"cold-{time.monotonic_ns()}.db") as ledger:
            report = run_batch([work / "specs"], ledger=ledger, workers=args.workers)
            assert all(r.status == "recorded" for r in report.rows)

    t_cold, _ = best_of(args.repeats, cold)
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    try:
        client.run(lambda: run(specs[0]))  # warm each worker's imports and compiled kernels

        def warm() -> None:
            with Ledger.open(work / f"warm-{time.monotonic_ns()}.db") as ledger:
                report = run_batch([work / "specs"], ledger=ledger, client=client)
                assert all(r.status == "recorded" for r in report.rows)

        t_warm, _ = best_of(args.repeats, warm)
    finally:
        client.close()
        cluster.close()
    overhead = (t_warm * args.workers - t_serial) / args.specs
    print(f"  certa batch, LocalCluster x{args.workers}, cold:   {t_cold:7.2f} s  speed-up {t_serial / t_cold:.2f}x "
          "(cluster start-up included)")
    print(f"  certa batch, running cluster x{args.workers}:     {t_warm:7.2f} s  speed-up {t_serial / t_warm:.2f}x "
          f"(goal >= 1.7x); batch overhead {1000 * overhead:.0f} ms/spec")


def bench_bakeoff(args, work: Path) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    n, shards = args.decisions, args.shards
    rng = np.random.default_rng(77)
    t0 = time.perf_counter()
    vendor = rng.choice(np.array(["vendor-a", "vendor-b", "vendor-c"]), n)
    bucket = rng.choice(np.array(["h1", "h2", "h3", "h4"]), n)
    rsi = np.round(np.tanh(rng.normal(0.3, 0.6, n)), 6).clip(-0.999999, 0.999999)
    g = np.round(rng.uniform(0.5, 1.0, n), 4)

    def write(path: Path, lo: int, hi: int) -> None:
        table = pa.table({"vendor": vendor[lo:hi], "bucket": bucket[lo:hi], "rsi": rsi[lo:hi], "g": g[lo:hi]})
        pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(quoting_style="none"))

    root = work / "bakeoff"
    cuts = np.linspace(0, n, shards + 1).astype(int)
    for k in range(shards):
        folder = root / f"shard{k:02d}"
        folder.mkdir(parents=True)
        write(folder / "decisions.csv", cuts[k], cuts[k + 1])
        (folder / "spec.yaml").write_text(COMPARE.format(name=f"shard-{k}"))
    (root / "zz-merge").mkdir()
    (root / "zz-merge" / "spec.yaml").write_text(MERGE.format(batch="bench-bakeoff"))
    whole = work / "whole"
    whole.mkdir()
    write(whole / "decisions.csv", 0, n)
    (whole / "spec.yaml").write_text(COMPARE.format(name="whole"))
    size = (whole / "decisions.csv").stat().st_size
    print(f"\nbake-off of {n:,} decisions ({size / 1e6:.0f} MB CSV), {shards} shards + merge; data built in "
          f"{time.perf_counter() - t0:.1f} s")

    def single():
        with Ledger.open(work / f"single-{time.monotonic_ns()}.db") as ledger:
            return run(whole / "spec.yaml", ledger=ledger).certificate["content"]["stages"]["cmp"]

    run_small = write_paired_specs(work / "warm", 1, 50, 200)[0]
    run(run_small)
    t_single, full = best_of(args.repeats, single)
    print(f"  one process, bakeoff.compare over all:   {t_single:7.2f} s")

    def batched():
        with Ledger.open(work / f"batch-{time.monotonic_ns()}.db") as ledger:
            report = run_batch([root], ledger=ledger, workers=args.workers, batch_id="bench-bakeoff")
            assert all(r.status == "recorded" for r in report.rows), report.rows
            return ledger.certificate(report.rows[-1].run_id)["content"]["stages"]["merged"]

    t_batch, merged = best_of(args.repeats, batched)

    def view(out):
        return {(b, v): (x["U"], x["W"], x["U_env"], x["RSI_pool"], x["RSI_pool_env"], x["band_counts"])
                for b, e in out["buckets"].items() for v, x in e["vendors"].items()}

    identical = view(merged) == view(full) and merged["sums"] == full["sums"]
    print(f"  certa batch, {shards} shards + merge, x{args.workers}: {t_batch:7.2f} s  speed-up "
          f"{t_single / t_batch:.2f}x (cluster start-up included); pools and sums bit-identical: {identical}")
    if not identical:
        raise SystemExit("merged pools differ from the single run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", type=int, default=40)
    parser.add_argument("--windows", type=int, default=400)
    parser.add_argument("--replicates", type=int, default=4000)
    parser.add_argument("--cli-runs", type=int, default=6)
    parser.add_argument("--decisions", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-bakeoff", action="store_true")
    parser.add_argument("--skip-specs", action="store_true")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    work = Path(tempfile.mkdtemp(prefix="certa-bench-batch-"))
    try:
        if not args.skip_specs:
            bench_specs(args, work)
        if not args.skip_bakeoff:
            bench_bakeoff(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
