"""Run the benches one after another and print the README's benchmark table (Markdown) from their figures.

Every row of the table in README.md ("## Benchmarks") comes from one run of this script, so the table and the
figures the README's method sections quote are measured together, on the same machine, under the same load
(printed above the table: the load average before and after each bench, and the date).

    PYTHONPATH=. python3 bench/figures.py                        # every bench at the README's sizes (minutes)
    PYTHONPATH=. python3 bench/figures.py --fast                 # small sizes: checks the plumbing, not figures
    PYTHONPATH=. python3 bench/figures.py --only paired_bootstrap,cli_startup
    PYTHONPATH=. python3 bench/figures.py --save out/ ; PYTHONPATH=. python3 bench/figures.py --from out/
    PYTHONPATH=. python3 bench/figures.py --json                 # the rows and the run's conditions as JSON

How a bench's figures are read. A bench whose ``--help`` offers ``--json`` is run with it, and the last line
of its standard output must be one JSON object; if that object has ``"rows"``, a list of
``[what, measured, goal]`` Markdown cells, those rows are the bench's rows verbatim (the interface a bench
adopts to own its rows); ``bench/paired_bootstrap.py --json`` is read by its keys below. Otherwise the bench's
printed lines are parsed by the few regular expressions below; a figure the expressions cannot find, or a
bench that fails or is missing, gives a row that says so instead of a number (never a stale figure).
Benches run sequentially in fresh processes (``sys.executable``, this checkout first on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

Row = list[str]
"""[what, measured, goal]: three Markdown cells."""


@dataclass(frozen=True)
class Bench:
    script: str
    fast: tuple[str, ...]
    rows: Callable[[str | dict], list[Row]]
    """The bench's rows from its output: the parsed JSON object when it printed one, else its text."""


def _num(text: str, pattern: str, group: int = 1) -> str | None:
    """Group ``group`` of the first match of ``pattern`` in ``text`` (None when absent)."""
    found = re.search(pattern, text)
    return found.group(group) if found else None


def _cell(value: str | None, template: str = "{}") -> str:
    return "not measured (no such figure in the bench's output)" if value is None else template.format(value)


def _fmt(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}"


def _n(text: str | None) -> str:
    """A count the bench printed, as ``count`` writes it ("?" when absent)."""
    return "?" if text is None else count(int(text.replace(",", "")))


def count(n: int) -> str:
    """10⁴ for a power of ten of at least 100, else the number with thousands separators (also used by the benches
    that print ``--json`` rows)."""
    k = len(str(n)) - 1
    if n >= 100 and n == 10 ** k:
        return "10" + str(k).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{n:,}"


def met(ok: bool) -> str:
    """A goal cell's verdict: "met", or "**not met**" in bold."""
    return "met" if ok else "**not met**"


# ----------------------------------------------------------------------------------------------- per bench


def _paired_bootstrap(out: str | dict) -> list[Row]:
    if not isinstance(out, dict):
        return [["`paired.ppl_ratio`", "not measured (bench/paired_bootstrap.py printed no JSON)", ""]]
    cases, summary = out["cases"], out["summary"]
    size = f"n = B = {count(out['n'])}" if out["n"] == out["replicates"] else \
        f"n = {count(out['n'])}, B = {count(out['replicates'])}"
    rows = []
    uniform = summary["speedups"].get("stage-1.1.0-uniform")
    scipy = cases.get("scipy-batch500")
    if uniform and scipy:
        stage = cases["stage-1.1.0-uniform"]
        rows.append([f"`paired.ppl_ratio` 1.1.0 through `engine.run`, {size}, `uniform`",
                     f"{stage['min_seconds']:.3f} s: **{_fmt(uniform['best'])}×** `scipy.stats.bootstrap` BCa "
                     f"`batch=500` ({scipy['min_seconds']:.2f} s); {_fmt(uniform['cpu'])}× in CPU time (two threads)",
                     "≥ 25×"])
    weighted = summary["speedups"].get("stage-1.1.0-token_weighted")
    if weighted:
        rows.append(["the same, `token_weighted`", f"**{_fmt(weighted['best'])}×** ({_fmt(weighted['cpu'])}× in CPU "
                     "time)", "≥ 10×"])
    frozen = summary["speedups"].get("stage-1.0.0-uniform")
    if frozen:
        rows.append(["the same, 1.0.0 (frozen, kept for replay: numpy PCG64 index blocks), `uniform`",
                     f"{cases['stage-1.0.0-uniform']['min_seconds']:.3f} s: {_fmt(frozen['best'])}× "
                     f"({_fmt(frozen['cpu'])}× in CPU time)", ""])
    limit = summary.get("limit")
    if limit:
        r = cases["limit"]
        wall, cpu = limit["wall_ratio"], limit["cpu_ratio"]
        rows.append([f"its bootstrap against the machine's limit, `uniform`, {count(r['draws'])} draws on "
                     f"{r['threads']} threads: a minimal compiled loop making the same SFC64/Lemire draws and summing "
                     "the drawn values",
                     f"limit {limit['seconds']:.3f} s ({limit['cpu_seconds'] / r['draws'] * 1e9:.2f} ns per draw "
                     f"CPU); the kernel (`weighted_mean_bootstrap_ci`) **{wall['kernel']:.2f}×** the limit in wall "
                     f"time, {cpu['kernel']:.2f}× in CPU; the stage through `engine.run` {wall['stage']:.2f}× "
                     f"({r['wall']['stage']:.3f} s)",
                     f"≤ {limit['goal']:g}× (kernel): {met(wall['kernel'] <= limit['goal'])}"])
    memory = summary["memory"].get("stage-1.1.0-uniform")
    if memory:
        floor = cases.get("numba-floor")
        floor_text = "" if floor is None else (f", where a process that only calls one trivial cached Numba "
                                               f"function already peaks at {floor['peak_rss_mb']:.0f} MB")
        goal = memory["goal_mb"]
        rows.append(["peak memory of that run: its own allocations (`tracemalloc`, numpy buffers included) / the "
                     "whole process",
                     f"**{memory['allocated_mb']:.1f} MB** (O(n + B): no B × n index array) / "
                     f"{memory['peak_rss_mb']:.0f} MB{floor_text}",
                     f"≤ {goal:g} MB: {met(memory['allocated_mb'] <= goal)} for the run's "
                     f"memory; {met(memory['peak_rss_mb'] <= goal)} for the process"])
    return rows


def _tables(out: str | dict) -> list[Row]:
    text = str(out)
    rows_n = _num(text, r"1\. CSV: ([\d,]+) rows")
    old = _num(text, r"certa 0\.3\.0 \(csv module[^:]*:\s+([\d.]+) s")
    threaded = _num(text, r"pyarrow\.csv\.read_csv, multi-threaded:\s+([\d.]+) s")
    sha = _num(text, r"hashlib\.sha256 of the bytes:\s+([\d.]+) s")
    now = re.search(r"certa now, parse \+ sha256, numeric\(x, y\):\s+([\d.]+) s\s+([\d.]+)x the reference"
                    r"[^;]*;\s+([\d.]+)x faster than 0\.3\.0", text)
    decisions = _num(text, r"4\. bakeoff\.compare through engine\.run: ([\d,]+) decisions")
    per_bucket = _num(text, r"ledger_rows: per_bucket\s+([\d.]+) s")
    per_decision = _num(text, r"ledger_rows: per_decision\s+([\d.]+) s")
    entries = _num(text, r"fresh SQLite ledger \(([\d,]+) entries\)")
    record = _num(text, r"fresh SQLite ledger \([\d,]+ entries\):\s+([\d.]+) s")
    csv = "not measured" if None in (now, old, threaded, sha) else (
        f"**{now[1]} s: {now[2]}×** `pyarrow.csv.read_csv` (threads, {threaded} s) + `hashlib.sha256` ({sha} s); "
        f"{now[3]}× faster than certa 0.3.0's parser ({old} s); values bit-identical")
    ratio = float(now[2]) if now else None
    return [[f"CSV, {_n(rows_n)} rows × 3 columns: parsed, hashed, both float columns read", csv,
             f"≤ 1.3× pyarrow + sha256: {met(ratio is not None and ratio <= 1.3)}"],
            [f"`bakeoff.compare`, {_n(decisions)} decisions, `ledger_rows: per_bucket`",
             _cell(per_bucket, "**{} s**"), "< 1 s"],
            ["the same with `ledger_rows: per_decision` (one ledger decision per row, held as columns)",
             _cell(per_decision, "**{} s**"), "< 1 s"],
            [f"recording that `per_decision` run ({_n(entries)} entries) into a fresh SQLite ledger",
             _cell(record, "{} s"), ""]]


def _ms_line(text: str, label: str) -> str | None:
    """The best time (ms) of a ``line(...)`` of bench/ledger.py whose label starts with ``label``."""
    return _num(text, re.escape(label) + r"[^\n]*?best\s+([\d.]+) ms")


def _ledger(out: str | dict) -> list[Row]:
    text = str(out)
    e2e = _num(text, r"SQLite\s*: engine\.run\(tiny spec\) end to end\s+([\d.]+) runs/s")
    record = _num(text, r"SQLite\s*: Ledger\.record_run alone\s+([\d.]+) runs/s")
    pg = _num(text, r"PostgreSQL\s*: engine\.run\(tiny spec\) end to end\s+([\d.]+) runs/s")
    pg_record = _num(text, r"PostgreSQL\s*: Ledger\.record_run alone\s+([\d.]+) runs/s")
    entries = _num(text, r"2\. Big ledger: \d+ runs, (\d+) entries")
    runs = _num(text, r"2\. Big ledger: (\d+) runs")
    verify = _ms_line(text, "verify, in process")
    certificates = _num(text, r"verify, in process \([^)]*?(\d+) certificates\)")
    verify_cli = _ms_line(text, "certa verify (")
    listing, list_cli = _ms_line(text, "list, in process"), _ms_line(text, "certa list (")
    prove, prove_cli = _ms_line(text, "prove, in process"), _ms_line(text, "certa prove")
    sec = (lambda ms: None if ms is None else f"{float(ms) / 1000:.2f}")
    rate = "not measured" if e2e is None else f"**{float(e2e):.0f}/s** (`record_run` alone {float(record or 0):.0f}/s)"
    if pg:
        rate += f" / PostgreSQL {float(pg):.0f}/s (`record_run` {float(pg_record or 0):.0f}/s)"
    return [["runs recorded per second, tiny spec, through `engine.run`: SQLite" + (" / PostgreSQL" if pg else ""),
             rate, "≥ 100/s on SQLite"],
            [f"`verify` of {_n(entries)} entries ({_n(certificates)} certificates), in process / `certa verify`",
             "not measured" if verify is None else f"**{sec(verify)} s** / {sec(verify_cli) or '?'} s", "< 5 s"],
            [f"`certa list` on {_n(runs)} runs / in process",
             "not measured" if list_cli is None else f"**{sec(list_cli)} s** / **{float(listing or 0):.0f} ms**",
             "< 0.3 s"],
            [f"`prove` on a {_n(entries)}-entry ledger, in process / `certa prove`",
             "not measured" if prove is None else f"**{float(prove):.1f} ms** / {sec(prove_cli) or '?'} s",
             "< 50 ms"]]


def _json_rows(script: str) -> Callable[[str | dict], list[Row]]:
    """The rows of a bench that owns its rows (``--json`` rows): when it printed none, one row saying so."""
    def rows(out: str | dict) -> list[Row]:
        return [[f"`bench/{script}`", "not measured (the bench printed no JSON rows)", ""]]
    return rows


def _reports(out: str | dict) -> list[Row]:
    text = str(out)
    renders = [float(x) for x in re.findall(r"^\S+\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+\d+\s+\d+\s+(?:True|False)$", text,
                                            re.M)]
    first = _num(text, r"site: first build ([\d.]+) s")
    runs = _num(text, r"site: built a ledger of (\d+) runs")
    again = _num(text, r"site: unchanged re-run ([\d.]+) s")
    return [["one HTML report per example, after imports (best of 7)",
             f"**{min(renders):.2f}–{max(renders):.2f} s**" if renders else "not measured", "< 0.5 s"],
            [f"`certa site` of {_n(runs)} runs, first build / unchanged re-run",
             "not measured" if first is None else f"**{first} s** / **{again} s**", "< 30 s / < 2 s"]]


def _batch(out: str | dict) -> list[Row]:
    text = str(out)
    specs = _num(text, r"(\d+) paired-ratio specs")
    serial = _num(text, r"serial, one process \(engine\.run loop\):\s+([\d.]+) s")
    cli = _num(text, r"serial, certa run subprocesses:\s+([\d.]+) s")
    warm = _num(text, r"certa batch, running cluster x\d+:\s+([\d.]+) s")
    workers = _num(text, r"certa batch, running cluster x(\d+)")
    decisions = _num(text, r"bake-off of ([\d,]+) decisions")
    single = _num(text, r"one process, bakeoff\.compare over all:\s+([\d.]+) s")
    sharded = re.search(r"certa batch, (\d+) shards \+ merge, x(\d+):\s+([\d.]+) s\s+speed-up ([\d.]+)x.*"
                        r"bit-identical: (\w+)", text)
    rows = [[f"`certa batch`, {specs or '?'} specs on a LocalCluster of {workers or '?'} workers",
             "not measured" if None in (warm, cli, serial) else
             f"{warm} s: **{float(cli) / float(warm):.1f}×** `certa run` one after another ({cli} s); "
             f"{float(serial) / float(warm):.2f}× a loop of `engine.run` in one process", "≥ 1.7×"]]
    rows.append([f"a {_n(decisions)}-decision bake-off as {sharded.group(1) if sharded else '?'} shards + merge on "
                 f"{sharded.group(2) if sharded else '?'} workers",
                 "not measured" if sharded is None or single is None else
                 f"{sharded.group(3)} s vs {single} s in one process (**{sharded.group(4)}×**), pools "
                 f"{'bit-identical' if sharded.group(5) == 'True' else '**differ**'}", "faster"])
    return rows


def _evidence_import(out: str | dict) -> list[Row]:
    text = str(out)
    found = re.search(r"import (?:\d+×)?([\d,⁰¹²³⁴⁵⁶⁷⁸⁹]+) records \+ pair \+ certify: ([\d.]+) s .*?median ([\d.]+) s; "
                      r"json\.loads of the same lines ([\d.]+) s", text)
    stage = _num(text, r"through the stage's input path[^:]*:[^:]*?: ([\d.]+) s")
    return [["two lm-eval multiple-choice exports: read, paired, certified (`paired.metric_delta`'s binary path)"
             + (f", {found.group(1)} records each" if found else ""),
             "not measured" if found is None else
             f"**{found.group(2)} s** best, median {found.group(3)} s (`json.loads` of the same lines alone "
             f"{found.group(4)} s); {stage or '?'} s through the stage's input path", "< 2 s"]]


def _bakeoff(out: str | dict) -> list[Row]:
    text = str(out)
    decisions = _num(text, r"pooling ([\d,]+) decisions")
    kernel = _num(text, r"certa kernel \(codes given\)\s+([\d.]+) ms")
    reference = _num(text, r"pure-Python reference\s+([\d.]+) ms")
    pool_ratio = _num(text, r"ratio:\s+([\d.]+)x \(kernel\)")
    per_vendor = _num(text, r"bootstrap ([\d,]+) decisions per vendor")
    replicates = _num(text, r"decisions per vendor, 2 vendors, (\d+) replicates")
    boot = _num(text, r"certa pairwise_bootstrap\s+([\d.]+) s")
    one = re.search(r"certa on one thread\s+([\d.]+) s\s+\(([\d.]+) ns per draw\)", text)
    boot_ratio = re.search(r"ratio:\s+([\d.]+)x\s+one thread:\s+([\d.]+)x", text)
    return [[f"`bakeoff.compare`'s pooling of {_n(decisions)} decisions (group codes given)",
             "not measured" if None in (kernel, reference, pool_ratio) else
             f"{kernel} ms: **{pool_ratio}×** a pure-Python rendering of the seed's steps ({reference} ms)",
             "≥ 100×" + ("" if pool_ratio is None else f": {met(float(pool_ratio) >= 100)}")],
            [f"its pairwise bootstrap, {_n(per_vendor)} decisions per vendor × {replicates or '?'} replicates",
             "not measured" if boot is None or boot_ratio is None else
             f"{boot} s: **{boot_ratio.group(1)}×** the seed's `diff_ci` in plain Python (one thread "
             f"{one.group(1) if one else '?'} s, {one.group(2) if one else '?'} ns per draw, "
             f"{boot_ratio.group(2)}×)", "≥ 100×" + ("" if boot_ratio is None else
                                                  f": {met(float(boot_ratio.group(1)) >= 100)}")]]


BENCHES: dict[str, Bench] = {
    "paired_bootstrap": Bench("paired_bootstrap.py", ("--repeats", "2", "--n", "2000", "--replicates", "2000"),
                              _paired_bootstrap),
    "bakeoff": Bench("bakeoff.py", ("--decisions", "100000", "--per-vendor", "10000", "--replicates", "200",
                                    "--repeats", "2", "--ref-repeats", "1", "--ref-replicates", "4"), _bakeoff),
    "tables": Bench("tables.py", ("--rows", "100000", "--decisions", "100000", "--repeats", "2",
                                  "--record-repeats", "1"), _tables),
    "cli_startup": Bench("cli_startup.py", ("--repeats", "3", "--run-repeats", "1"), _json_rows("cli_startup.py")),
    "ledger": Bench("ledger.py", ("--runs", "500", "--small", "20", "--repeat", "2"), _ledger),
    "ledger_reads": Bench("ledger_reads.py", ("--list-runs", "100,1000", "--entries", "1000,10000", "--repeat", "2",
                                              "--record-runs", "10"), _json_rows("ledger_reads.py")),
    "verify_scale": Bench("verify_scale.py", ("--entries", "10000", "30000"), _json_rows("verify_scale.py")),
    "reports": Bench("reports.py", ("--site-runs", "50"), _reports),
    "batch": Bench("batch.py", ("--specs", "6", "--cli-runs", "2", "--decisions", "200000", "--shards", "2",
                                "--repeats", "1"), _batch),
    "evidence_import": Bench("evidence_import.py", ("--records", "10000", "--repeats", "2"), _evidence_import),
    "suite_import": Bench("suite_import.py", ("--tasks", "6", "--items", "6000", "--repeats", "1"),
                          _json_rows("suite_import.py")),
    "model_windows": Bench("model_windows.py", ("--models", "tiny", "--repeats", "1"), _json_rows("model_windows.py")),
    "model_sequential": Bench("model_sequential.py", ("--replicates", "5"), _json_rows("model_sequential.py")),
    "model_memory": Bench("model_memory.py", ("--size", "small", "--repeats", "1"), _json_rows("model_memory.py")),
    "served_client": Bench("served_client.py", ("--requests", "500", "--served-prompts", "32", "--repeats", "1"),
                           _json_rows("served_client.py")),
    "served_decision": Bench("served_decision.py", (), _json_rows("served_decision.py")),
    "served_windows": Bench("served_windows.py", ("--documents", "2", "--repeats", "1", "--no-defaults"),
                            _json_rows("served_windows.py")),
}
"""The benches whose figures make the table, in the table's order (a bench not in this checkout gives no rows).
Without ``--fast`` a bench runs with its own defaults, the README's sizes (verify_scale: 10⁵ and 10⁶ entries;
ledger_reads: ``certa list`` on 10³..10⁵ runs, reads and recording at 10⁴ vs 10⁶ entries)."""


def _offers_json(script: Path) -> bool:
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, env=_env(),
                          cwd=ROOT, check=False)
    return "--json" in done.stdout


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_bench(name: str, bench: Bench, fast: bool) -> dict:
    """Run one bench in a fresh process: its output, exit code, seconds and the load average around it."""
    script = ROOT / "bench" / bench.script
    if not script.exists():
        return {"name": name, "missing": True}
    json_mode = _offers_json(script)
    argv = [sys.executable, str(script), *(bench.fast if fast else ()), *(["--json"] if json_mode else [])]
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    before, start = _load(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=ROOT, check=False)
    return {"name": name, "started": started, "argv": [Path(a).name if a == str(script) else a for a in argv[1:]],
            "json": json_mode, "code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-2000:],
            "seconds": time.perf_counter() - start, "load_before": before, "load_after": _load()}


def rows_of(name: str, result: dict) -> list[Row]:
    """The table rows of one bench's run (or rows saying why there are none)."""
    if result.get("missing"):
        return []
    if result["code"] != 0:
        last = (result["stderr"].strip().splitlines() or ["no message"])[-1]
        return [[f"`bench/{BENCHES[name].script}`", f"not measured: the bench failed (exit {result['code']}: "
                 f"{last[:160]})", ""]]
    out: str | dict = result["stdout"]
    if result["json"]:
        lines = result["stdout"].strip().splitlines()
        try:
            out = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            out = result["stdout"]
        if isinstance(out, dict) and "rows" in out:
            return [[str(cell) for cell in row] for row in out["rows"]]
    return BENCHES[name].rows(out)


def markdown(rows: list[Row]) -> str:
    lines = ["| what | measured | goal |", "|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="small sizes (checks the plumbing; not the README's)")
    parser.add_argument("--only", help="comma-separated subset of " + ", ".join(BENCHES))
    parser.add_argument("--save", type=Path, help="also write each bench's raw output to this folder")
    parser.add_argument("--from", dest="source", type=Path, help="render from a folder written by --save; run nothing")
    parser.add_argument("--json", action="store_true", help="print the rows and the run's conditions as JSON")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown bench(es) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")

    started = datetime.datetime.now(datetime.UTC)
    results = {}
    for name in names:
        if args.source:
            path = args.source / f"{name}.json"
            results[name] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"missing": True}
            continue
        print(f"running bench/{BENCHES[name].script} ...", file=sys.stderr, flush=True)
        results[name] = run_bench(name, BENCHES[name], args.fast)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.json").write_text(json.dumps(results[name]), encoding="utf-8")
    rows = [row for name in names for row in rows_of(name, results[name])]
    ran = {n: r for n, r in results.items() if not r.get("missing")}
    starts = [datetime.datetime.fromisoformat(r["started"]) for r in ran.values() if "started" in r]
    if args.source and starts:
        started = min(starts)
    if args.json:
        print(json.dumps({"started": started.isoformat(timespec="seconds"), "fast": args.fast, "cpus": os.cpu_count(),
                          "benches": {n: {k: r[k] for k in ("argv", "code", "seconds", "load_before", "load_after")}
                                      for n, r in ran.items()},
                          "missing": [n for n in names if n not in ran], "rows": rows}))
        return
    fast = " (FAST MODE: small sizes, not the README figures)" if args.fast else ""
    print(f"Measured {started:%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs by `python3 bench/figures.py"
          f"{' --fast' if args.fast else ''}`{fast}")
    for name, r in ran.items():
        print(f"- bench/{' '.join(r['argv'])}: {r['seconds']:.0f} s, load average "
              f"{r['load_before']} before, {r['load_after']} after" + ("" if r["code"] == 0 else f", exit {r['code']}"))
    for name in names:
        if name not in ran:
            print(f"- bench/{BENCHES[name].script}: not present in this checkout (no rows)")
    print()
    print(markdown(rows))


if __name__ == "__main__":
    main()
