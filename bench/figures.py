"""Run the benches one after another and write the README's benchmark table (Markdown) from their figures.

Every row of the table in README.md ("## Benchmarks") comes from one run of this script, so the table and the
figures the README's method sections quote are measured together, on the same machine, under the same load
(written above the table: the date, each bench's command, its seconds and the load average before and after it).

    PYTHONPATH=. python3 bench/figures.py --workdir ~/.cache/certa/figures --vllm ~/.cache/certa/figures/serve \
        --save runs/ --write-readme                    # the README's run: every bench at the README's sizes
    PYTHONPATH=. python3 bench/figures.py --from runs/ --write-readme   # render a saved run again; runs nothing
    PYTHONPATH=. python3 bench/figures.py --fast                 # small sizes: checks the plumbing, not figures
    PYTHONPATH=. python3 bench/figures.py --only paired_bootstrap,cli_startup
    PYTHONPATH=. python3 bench/figures.py --json                 # the rows and the run's conditions as JSON

Sizes. Each bench runs with the arguments ``BENCHES`` spells out (not the bench's defaults): the sizes the issues'
goals name where the run allows (ledgers of 10⁶ entries in three shapes, exports of 2·10⁶ records, two ~1B
models), fewer repeats where a figure is a best of several; a row says where its size is below the goal's.
Ledgers, exports and models are built in ``--workdir`` (default: a temporary folder) and reused when a later run
names the same folder. Progress (each bench's name, its seconds and the run's elapsed minutes) goes to stderr.

Served benches. ``--vllm DIR`` starts the two vLLM test servers (``bash .ci/vllm start DIR``: reused when they
already answer from DIR; stopped after the run when it started them); without it, ``CERTA_TEST_VLLM_*`` set in the
environment name running servers. With neither, the served rows say "not measured (no vLLM server)".

How a bench's figures are read. A bench whose ``--help`` offers ``--json`` is run with it, and the last line
of its standard output must be one JSON object; if that object has ``"rows"``, a list of
``[what, measured, goal]`` Markdown cells, those rows are the bench's rows (the interface a bench adopts to own
its rows), with the shape notes of ``BENCHES`` added and a missed goal's shortfall (``shortfall``);
``bench/paired_bootstrap.py --json`` is read by its keys below. Otherwise the bench's printed lines are parsed by
the few regular expressions below; a figure the expressions cannot find, or a bench that fails or is missing,
gives a row that says so instead of a number (never a stale figure). Benches run sequentially in fresh processes
(``sys.executable``, this checkout first on ``PYTHONPATH``). ``--write-readme`` replaces what lies between the
README's markers (``BEGIN``, ``END``) atomically; a run that changes nothing leaves the file as it is.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
    args: tuple[str, ...]
    """The README run's arguments (``{work}``: the run's work folder)."""
    fast: tuple[str, ...]
    """``--fast``'s arguments: small sizes that check the plumbing."""
    rows: Callable[[str | dict], list[Row]]
    """The bench's rows from its output: the parsed JSON object when it printed one, else its text."""
    notes: tuple[tuple[str, str], ...] = ()
    """(text, note): the ledger or export shape a row is measured on, added to the first cell of each row whose
    first cell holds the text ("" for every row) where the bench's own cell does not name it."""
    served: bool = False
    """Measures the vLLM test servers (``SERVED_ENV``): without them, its rows say ``NO_SERVER``."""
    needs: str = ""
    """A file another bench builds in the work folder (``{work}/...``): without it the bench is not run."""


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


def _judged(goal: str, ok: bool | None) -> str:
    """``goal`` with its verdict, or alone when the figure it judges was not measured (``ok`` None)."""
    return goal if ok is None else f"{goal}: {met(ok)}"


def _below(value: str | None, bound: float, scale: float = 1.0) -> bool | None:
    """Whether the printed figure ``value`` (times ``scale``) is below ``bound`` (None when it was not printed)."""
    return None if value is None else float(value) * scale < bound


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
                     _judged("≥ 25×", uniform["best"] >= 25)])
    weighted = summary["speedups"].get("stage-1.1.0-token_weighted")
    if weighted:
        rows.append(["the same, `token_weighted`", f"**{_fmt(weighted['best'])}×** ({_fmt(weighted['cpu'])}× in CPU "
                     "time)", _judged("≥ 10×", weighted["best"] >= 10)])
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
             _cell(per_bucket, "**{} s**"), _judged("< 1 s", _below(per_bucket, 1))],
            ["the same with `ledger_rows: per_decision` (one ledger decision per row, held as columns)",
             _cell(per_decision, "**{} s**"), _judged("< 1 s", _below(per_decision, 1))],
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
    slow = _below(e2e, 100)
    return [["runs recorded per second, tiny spec, through `engine.run`: SQLite" + (" / PostgreSQL" if pg else ""),
             rate, _judged("≥ 100/s on SQLite", None if slow is None else not slow)],
            [f"`verify` of {_n(entries)} entries ({_n(certificates)} certificates), in process / `certa verify`",
             "not measured" if verify is None else f"**{sec(verify)} s** / {sec(verify_cli) or '?'} s",
             _judged("< 5 s", _below(verify, 5, 1e-3))],
            [f"`certa list` on {_n(runs)} runs / in process",
             "not measured" if list_cli is None else f"**{sec(list_cli)} s** / **{float(listing or 0):.0f} ms**",
             _judged("< 0.3 s", _below(list_cli, 0.3, 1e-3))],
            [f"`prove` on a {_n(entries)}-entry ledger, in process / `certa prove`",
             "not measured" if prove is None else f"**{float(prove):.1f} ms** / {sec(prove_cli) or '?'} s",
             _judged("< 50 ms", _below(prove, 50))]]


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
    site = None if first is None or again is None else float(first) < 30 and float(again) < 2
    return [["one HTML report per example, after imports (best of 7)",
             f"**{min(renders):.2f}–{max(renders):.2f} s**" if renders else "not measured",
             _judged("< 0.5 s", max(renders) < 0.5 if renders else None)],
            [f"`certa site` of {_n(runs)} runs, first build / unchanged re-run",
             "not measured" if first is None else f"**{first} s** / **{again} s**",
             _judged("< 30 s / < 2 s", site)]]


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
             f"{float(serial) / float(warm):.2f}× a loop of `engine.run` in one process",
             _judged("≥ 1.7×", None if None in (warm, cli) else float(cli) / float(warm) >= 1.7)]]
    rows.append([f"a {_n(decisions)}-decision bake-off as {sharded.group(1) if sharded else '?'} shards + merge on "
                 f"{sharded.group(2) if sharded else '?'} workers",
                 "not measured" if sharded is None or single is None else
                 f"{sharded.group(3)} s vs {single} s in one process (**{sharded.group(4)}×**), pools "
                 f"{'bit-identical' if sharded.group(5) == 'True' else '**differ**'}",
                 _judged("faster", None if sharded is None else float(sharded.group(4)) > 1)])
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
             f"{found.group(4)} s); {stage or '?'} s through the stage's input path",
             _judged("< 2 s", None if found is None else float(found.group(2)) < 2)]]


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


def _evidence_scale(out: str | dict) -> list[Row]:
    """The row of ``bench/evidence_import.py --scale``: each export's reader CPU against the orjson floor and its
    peak RSS against the file, from the table it prints; the goal cell names each export that misses a goal and by
    how much."""
    text = str(out)
    head = re.search(r"^([\d,]+) records per export, best of (\d+) fresh processes", text, re.M)
    lines = re.findall(r"^(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+(\d+)\s+\d+"
                       r"\s+([\d.]+)\s+\d+\s*$", text, re.M)
    what = ("evaluator exports" + (f" of {_n(head.group(1))} records" if head else "") + " read from a file in a fresh "
            "process: CPU against an orjson streaming floor, peak RSS (imports included) against the file "
            f"(`bench/evidence_import.py --scale`, best of {head.group(2) if head else '?'})")
    if not lines:
        return [[what, "not measured (no such figure in the bench's output)", ""]]
    measured = "; ".join(f"{label} ({float(mb):.0f} MB): **{float(ratio):.2f}×** the floor ({float(cpu):.2f} s vs "
                         f"{float(floor):.2f} s CPU), **{float(rss):.2f}×** the file ({int(peak):,} MB)"
                         for label, mb, cpu, floor, ratio, peak, rss in lines)
    goals = []
    for name, goal, column in (("CPU", 2.0, 4), ("RSS", 1.5, 6)):
        missed = [f"{line[0]} {float(line[column]):.2f}×" for line in lines if float(line[column]) > goal]
        goals.append(f"≤ {goal:g}× {name}: " + (met(True) if not missed else f"{met(False)} ({', '.join(missed)})"))
    return [[what, measured, "; ".join(goals)]]


BENCHES: dict[str, Bench] = {
    "paired_bootstrap": Bench("paired_bootstrap.py", ("--n", "10000", "--replicates", "10000", "--repeats", "3"),
                              ("--repeats", "2", "--n", "2000", "--replicates", "2000"), _paired_bootstrap),
    "bakeoff": Bench("bakeoff.py", ("--decisions", "1000000", "--per-vendor", "100000", "--replicates", "2000",
                                    "--repeats", "5", "--ref-repeats", "2"),
                     ("--decisions", "100000", "--per-vendor", "10000", "--replicates", "200", "--repeats", "2",
                      "--ref-repeats", "1", "--ref-replicates", "4"), _bakeoff),
    "tables": Bench("tables.py", ("--rows", "1000000", "--decisions", "1000000", "--repeats", "3",
                                  "--record-repeats", "1"),
                    ("--rows", "100000", "--decisions", "100000", "--repeats", "2", "--record-repeats", "1"), _tables),
    "verify_scale": Bench("verify_scale.py", ("--entries", "10000", "1000000", "--workdir", "{work}/verify"),
                          ("--entries", "10000", "30000", "--workdir", "{work}/verify"), _json_rows("verify_scale.py")),
    "cli_startup": Bench("cli_startup.py", ("--repeats", "7", "--run-repeats", "2", "--big-ledger",
                                            "{work}/verify/verify-1000000.db"),
                         ("--repeats", "3", "--run-repeats", "1", "--big-ledger", "{work}/verify/verify-30000.db"),
                         _json_rows("cli_startup.py"), needs="{work}/verify/verify-1000000.db",
                         notes=(("entries", "the decisions-shape ledger of `bench/verify_scale.py` above, copied: "
                                            "10³ ordinary runs, then per-decision runs of 10⁴ decisions"),
                                ("(1 run)", "a ledger of one `paired-ratio` run"))),
    "ledger": Bench("ledger.py", ("--runs", "10000", "--small", "50", "--repeat", "3"),
                    ("--runs", "500", "--small", "20", "--repeat", "2"), _ledger,
                    notes=(("entr", "certificates shape: tiny-spec runs of 10 entries and a certificate each"),
                           ("`certa list` on", "certificates shape: tiny-spec runs of 10 entries and a certificate "
                                               "each"))),
    "ledger_reads": Bench("ledger_reads.py", ("--list-runs", "1000,100000", "--entries", "10000,1000000",
                                              "--record-runs", "300", "--repeat", "3"),
                          ("--list-runs", "100,1000", "--entries", "1000,10000", "--repeat", "2", "--record-runs",
                           "10"), _json_rows("ledger_reads.py"),
                          notes=(("`certa list`", "aborted runs of one decision, 5 entries each"),
                                 ("entries", "small: two tiny-spec runs, then aborted runs of 10⁴ decisions; big: the "
                                             "same two runs, then aborted runs of one decision"))),
    "reports": Bench("reports.py", ("--site-runs", "1000"), ("--site-runs", "50"), _reports,
                     notes=(("`certa site`", "small `paired-ratio` runs under 25 spec names, every 10th reviewed"),)),
    "batch": Bench("batch.py", ("--specs", "40", "--cli-runs", "6", "--decisions", "10000000", "--shards", "8",
                                "--repeats", "1"),
                   ("--specs", "6", "--cli-runs", "2", "--decisions", "200000", "--shards", "2", "--repeats", "1"),
                   _batch),
    "evidence_import": Bench("evidence_import.py", ("--records", "100000", "--repeats", "3"),
                             ("--records", "10000", "--repeats", "2"), _evidence_import),
    "evidence_scale": Bench("evidence_import.py", ("--scale", "--records", "200000", "--repeats", "3", "--dir",
                                                   "{work}/evidence"),
                            ("--scale", "--records", "2000", "--repeats", "1", "--dir", "{work}/evidence"),
                            _evidence_scale),
    "evidence_scale_promptfoo": Bench("evidence_import.py", ("--scale", "--records", "2000000", "--repeats", "1",
                                                             "--only", "promptfoo", "--dir", "{work}/evidence"),
                                      ("--scale", "--records", "4000", "--repeats", "1", "--only", "promptfoo",
                                       "--dir", "{work}/evidence"), _evidence_scale),
    "evidence_scale_lm_eval": Bench("evidence_import.py", ("--scale", "--records", "2000000", "--repeats", "1",
                                                           "--only", "lm-eval", "--dir", "{work}/evidence"),
                                    ("--scale", "--records", "4000", "--repeats", "1", "--only", "lm-eval", "--dir",
                                     "{work}/evidence"), _evidence_scale,
                                    notes=(("", "the Inspect formats at 2·10⁶ are left out to keep the run within "
                                                "about 30 minutes: measured at 2·10⁵ above"),)),
    "suite_import": Bench("suite_import.py", ("--tasks", "60", "--items", "100000", "--repeats", "3"),
                          ("--tasks", "6", "--items", "6000", "--repeats", "1"), _json_rows("suite_import.py")),
    "model_windows": Bench("model_windows.py", ("--models", "tiny,small", "--repeats", "2"),
                           ("--models", "tiny", "--repeats", "1"), _json_rows("model_windows.py")),
    "model_sequential": Bench("model_sequential.py", ("--replicates", "300"), ("--replicates", "5"),
                              _json_rows("model_sequential.py")),
    "model_memory": Bench("model_memory.py", ("--size", "1b", "--repeats", "3", "--folder", "{work}/models", "--keep"),
                          ("--size", "small", "--repeats", "1", "--folder", "{work}/models-small", "--keep"),
                          _json_rows("model_memory.py")),
    "served_client": Bench("served_client.py", ("--requests", "2000", "--served-prompts", "128", "--repeats", "3"),
                           ("--requests", "500", "--served-prompts", "32", "--repeats", "1"),
                           _json_rows("served_client.py"), served=True),
    "served_windows": Bench("served_windows.py", ("--repeats", "3"), ("--documents", "2", "--repeats", "1",
                                                                      "--no-defaults"),
                            _json_rows("served_windows.py"), served=True),
    "served_decision": Bench("served_decision.py", (), (), _json_rows("served_decision.py"), served=True),
}
"""The benches whose figures make the table, in the table's order (a bench not in this checkout gives no rows),
each with the arguments of the README's run and of ``--fast``, spelled out here rather than left to the benches'
defaults: the sizes the issues' goals name (10⁶-entry ledgers, 2·10⁶-record exports, ~1B-parameter models), but
where a row says otherwise. ``{work}`` is the run's work folder (``--workdir``): ``verify_scale``'s ledgers, which
``cli_startup`` reads, the exports and the models are built there once and reused by a later run."""

SERVED_ENV = ("CERTA_TEST_VLLM_URL", "CERTA_TEST_VLLM_NAME", "CERTA_TEST_VLLM_MODEL", "CERTA_TEST_VLLM_IMPOSTOR_URL")
"""The variables ``bash .ci/vllm`` exports (docs/serving.md): the served benches measure when they are set."""

NO_SERVER = "not measured (no vLLM server)"


def _offers_json(script: Path, env: dict[str, str]) -> bool:
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=False)
    return "--json" in done.stdout


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return dict(os.environ, **(extra or {}),
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def argv_of(bench: Bench, fast: bool, work: Path) -> list[str]:
    """The bench's arguments for this run, ``{work}`` replaced by the run's work folder."""
    return [arg.replace("{work}", str(work)) for arg in (bench.fast if fast else bench.args)]


def run_bench(name: str, bench: Bench, fast: bool, work: Path, served: dict[str, str] | None = None) -> dict:
    """Run one bench in a fresh process: its output, exit code, seconds and the load average around it.
    ``served``: the vLLM test servers' variables (``SERVED_ENV``), passed to the served benches only."""
    script = ROOT / "bench" / bench.script
    if not script.exists():
        return {"name": name, "missing": True}
    env = _env(served if bench.served else None)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    needed = Path(bench.needs.replace("{work}", str(work))) if bench.needs and not fast else None
    if needed is not None and not needed.exists():
        return {"name": name, "started": started, "argv": [bench.script, *argv_of(bench, fast, work)], "json": False,
                "code": 2, "stdout": "", "stderr": f"needs {needed} (not built: run verify_scale in the same --workdir)",
                "seconds": 0.0, "load_before": _load(), "load_after": _load(), "served": None, "fast": fast}
    json_mode = _offers_json(script, env)
    argv = [sys.executable, str(script), *argv_of(bench, fast, work), *(["--json"] if json_mode else [])]
    before, start = _load(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    return {"name": name, "started": started, "argv": [Path(a).name if a == str(script) else a for a in argv[1:]],
            "json": json_mode, "code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-2000:],
            "seconds": time.perf_counter() - start, "load_before": before, "load_after": _load(),
            "served": bool(served) if bench.served else None, "fast": fast}


def annotate(rows: list[Row], notes: tuple[tuple[str, str], ...]) -> list[Row]:
    """Each row with the note of the first ``(text, note)`` whose text its first cell holds added in brackets."""
    out = []
    for what, *rest in rows:
        note = next((note for text, note in notes if text in what), None)
        out.append([what if note is None else f"{what} [{note}]", *rest])
    return out


_BOUND = re.compile(r"([≤<≥>])\s*(×?)([\d.]+)\s*(×|ms|s|MiB|MB|GB|%)?")


def shortfall(measured: str, goal: str) -> str:
    """The goal cell with how far each "**not met**" clause misses: a clause (between semicolons) that bounds a
    figure (``≤ 3×``, ``< 0.2 s``, ``≥ 100×``) and says **not met** with no figure of its own gets the first bold
    figure of that unit in the measured cell, when that figure misses the bound, and its ratio to the bound, e.g.
    "**not met** (0.503 s: 2.51× the bound)" or, for a lower bound, "(80.0×: 0.80× the bound)". Clauses that end
    in a bracket already say by how much and are kept."""
    clauses = goal.split("; ")
    for i, clause in enumerate(clauses):
        bound = _BOUND.search(clause)
        if "**not met**" not in clause or clause.rstrip().endswith(")") or bound is None:
            continue
        sign, before, unit = bound.group(1), bound.group(2), bound.group(4) or ""
        if not (before or unit) or (before and unit):
            continue
        shown = (r"\*\*×([\d.,]+)\*\*" if before else r"\*\*([\d.,]+)\s*" + re.escape(unit) + r"\*\*")
        figure = re.search(shown, measured)
        limit = float(bound.group(3))
        if figure is None or limit <= 0:
            continue
        value = float(figure.group(1).replace(",", ""))
        if (value <= limit) if sign in "≤<" else (value >= limit):
            continue  # that figure meets the bound: the clause misses on another one, which it names (or not)
        text = f"×{figure.group(1)}" if before else f"{figure.group(1)}{'' if unit == '×' else ' '}{unit}"
        clauses[i] = f"{clause} ({text}: {value / limit:.2f}× the bound)"
    return "; ".join(clauses)


def rows_of(name: str, result: dict) -> list[Row]:
    """The table rows of one bench's run (or rows saying why there are none): the bench's rows with the shape
    notes of ``BENCHES``, a "not met" goal with its shortfall, and ``NO_SERVER`` for a served row that measured
    nothing without a server."""
    if result.get("missing"):
        return []
    bench = BENCHES[name]
    if result["code"] != 0:
        last = (result["stderr"].strip().splitlines() or ["no message"])[-1]
        absent = re.search(r"No module named '([\w.]+)'", result["stderr"])
        why = f"needs `{absent.group(1)}`, not installed" if absent else last[:160]
        return [[f"`bench/{bench.script}` ({name})", f"not measured: the bench failed (exit {result['code']}: {why})",
                 ""]]
    out: str | dict = result["stdout"]
    rows: list[Row] | None = None
    if result["json"]:
        lines = result["stdout"].strip().splitlines()
        try:
            out = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            out = result["stdout"]
        if isinstance(out, dict) and "rows" in out:
            rows = [[str(cell) for cell in row] for row in out["rows"]]
    if rows is None:
        rows = bench.rows(out)
    if bench.served and result.get("served") is False:
        rows = [[what, NO_SERVER if measured.startswith("not measured") else measured, goal]
                for what, measured, goal in rows]
    return [[what, measured, shortfall(measured, goal)] for what, measured, goal in annotate(rows, bench.notes)]


def markdown(rows: list[Row]) -> str:
    lines = ["| what | measured | goal |", "|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def header(started: datetime.datetime, ended: datetime.datetime | None, ran: dict[str, dict], command: str,
           missing: list[str]) -> str:
    """The lines above the table: when, where and how it was measured, and each bench's command, start (UTC), duration
    and the load average around it."""
    span = f"{started:%Y-%m-%d %H:%M}" + ("" if ended is None else f"–{ended:%H:%M}")
    lines = [f"Measured {span} UTC on {os.cpu_count()} CPUs by `{command}`; each bench, its start, its seconds and the "
             "one-, five- and fifteen-minute load averages before and after it:", ""]
    for r in ran.values():
        served = {True: ", vLLM test servers running", False: ", no vLLM server"}.get(r.get("served"), "")
        at = f"{datetime.datetime.fromisoformat(r['started']):%H:%M}, " if "started" in r else ""
        lines.append(f"- `bench/{' '.join(r['argv'])}`: {at}{r['seconds']:.0f} s, load {r['load_before']} → "
                     f"{r['load_after']}{served}" + ("" if r["code"] == 0 else f", exit {r['code']}"))
    lines += [f"- `bench/{BENCHES[name].script}` ({name}): no output (not in this checkout, or not in the saved run)"
              for name in missing]
    return "\n".join(lines)


BEGIN, END = "<!-- figures: begin (written by bench/figures.py --write-readme) -->", "<!-- figures: end -->"
"""The markers around the README's table: ``--write-readme`` replaces what lies between them."""


def replace_between_markers(text: str, block: str) -> str:
    """``text`` with what lies between ``BEGIN`` and ``END`` replaced by ``block`` (the markers kept): the same
    text again when the block is unchanged. ValueError unless each marker is there once, in that order."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"README.md must hold the markers {BEGIN!r} and {END!r} once each, in that order")
    head, rest = text.split(BEGIN)
    return f"{head}{BEGIN}\n{block.strip()}\n{END}{rest.split(END)[1]}"


def write_readme(path: Path, block: str) -> bool:
    """Replace the table of ``path`` (``replace_between_markers``) atomically: a temporary file beside it, synced,
    renamed over it. False (nothing written) when the file already holds ``block``."""
    text = path.read_text(encoding="utf-8")
    new = replace_between_markers(text, block)
    if new == text:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as file:
            file.write(new)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def served_env(start: Path | None) -> tuple[dict[str, str], bool]:
    """The vLLM test servers' variables, and whether this call started the servers: from the environment when
    ``CERTA_TEST_VLLM_URL`` is set (servers already running), else, with ``start``, from ``bash .ci/vllm start
    START`` (which reuses servers already answering from that folder); empty when neither gives them (the served
    rows then say ``NO_SERVER``)."""
    if os.environ.get("CERTA_TEST_VLLM_URL"):
        return {k: os.environ[k] for k in SERVED_ENV if k in os.environ}, False
    if start is None:
        return {}, False
    print(f"starting the vLLM test servers: bash .ci/vllm start {start} ...", file=sys.stderr, flush=True)
    done = subprocess.run(["bash", str(ROOT / ".ci" / "vllm"), "start", str(start)], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    if done.returncode != 0:
        print(f"  the vLLM test servers did not start (exit {done.returncode}): the served rows say "
              f"{NO_SERVER!r}\n{done.stdout[-1000:]}", file=sys.stderr, flush=True)
        return {}, False
    return dict(re.findall(r"^export (CERTA_TEST_VLLM_\w+)=(\S*)$", done.stdout, re.M)), \
        "already running" not in done.stdout


def _progress(i: int, total: int, name: str, result: dict, since: float) -> None:
    took = "not present" if result.get("missing") else (
        f"{result['seconds']:.0f} s" + ("" if result["code"] == 0 else f", exit {result['code']}"))
    print(f"[{i}/{total}] {name}: {took}; {(time.perf_counter() - since) / 60:.1f} min elapsed", file=sys.stderr,
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help="small sizes (checks the plumbing; not the README's)")
    parser.add_argument("--only", help="comma-separated subset of " + ", ".join(BENCHES))
    parser.add_argument("--save", type=Path, help="also write each bench's raw output to this folder")
    parser.add_argument("--from", dest="source", type=Path, help="render from a folder written by --save; run nothing")
    parser.add_argument("--json", action="store_true", help="print the rows and the run's conditions as JSON")
    parser.add_argument("--workdir", type=Path, help="where ledgers, exports and models are built and kept for the "
                                                     "next run (default: a temporary folder, removed)")
    parser.add_argument("--vllm", type=Path, metavar="DIR", help="start the vLLM test servers with `bash .ci/vllm "
                        "start DIR` (or reuse them) for the served benches, and stop them after if this run started "
                        "them; without it the served benches use CERTA_TEST_VLLM_* when set")
    parser.add_argument("--write-readme", action="store_true", help="replace the table between the markers of "
                        "README.md with this run's (atomically); refused with --fast or --only")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown bench(es) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    if args.write_readme and (args.fast or args.only):
        parser.error("--write-readme writes the whole table: not with --fast or --only")

    started = datetime.datetime.now(datetime.UTC)
    results = {}
    work = args.workdir or Path(tempfile.mkdtemp(prefix="certa-figures-"))
    served: dict[str, str] | None = None  # started before the first served bench: idle servers take memory
    ran_vllm = False
    clock = time.perf_counter()
    try:
        for i, name in enumerate(names, 1):
            if args.source:
                path = args.source / f"{name}.json"
                results[name] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"missing": True}
                continue
            if BENCHES[name].served and served is None:
                served, ran_vllm = served_env(args.vllm)
            print(f"[{i}/{len(names)}] {name}: bench/{BENCHES[name].script} "
                  f"{' '.join(argv_of(BENCHES[name], args.fast, work))} ...", file=sys.stderr, flush=True)
            results[name] = run_bench(name, BENCHES[name], args.fast, work, served)
            _progress(i, len(names), name, results[name], clock)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{name}.json").write_text(json.dumps(results[name]), encoding="utf-8")
    finally:
        if ran_vllm and served:
            subprocess.run(["bash", str(ROOT / ".ci" / "vllm"), "stop", str(args.vllm)], capture_output=True,
                           cwd=ROOT, check=False)
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    rows = [row for name in names for row in rows_of(name, results[name])]
    ran = {n: r for n, r in results.items() if not r.get("missing")}
    if args.write_readme and any(r.get("fast") is not False for r in ran.values()):
        parser.error(f"--write-readme: {args.source} holds outputs of a --fast run (or of an older figures.py)")
    unsaved = [n for n in names if n not in ran and (ROOT / "bench" / BENCHES[n].script).exists()]
    if args.write_readme and unsaved:
        parser.error(f"--write-readme: no output of {', '.join(unsaved)} in {args.source}: the table would lack rows")
    starts = [datetime.datetime.fromisoformat(r["started"]) for r in ran.values() if "started" in r]
    ended = None if args.source else datetime.datetime.now(datetime.UTC)
    if args.source and starts:  # a saved run (a bench may have been run again into it): its first start, last end
        started = min(starts)
        ended = max(datetime.datetime.fromisoformat(r["started"]) + datetime.timedelta(seconds=r["seconds"])
                    for r in ran.values() if "started" in r)
    if args.json:
        print(json.dumps({"started": started.isoformat(timespec="seconds"), "fast": args.fast, "cpus": os.cpu_count(),
                          "benches": {n: {k: r[k] for k in ("argv", "code", "seconds", "load_before", "load_after")}
                                      for n, r in ran.items()},
                          "missing": [n for n in names if n not in ran], "rows": rows}))
        return
    command = "python3 bench/figures.py" + (" --fast" if args.fast else "") + (f" --only {args.only}" if args.only
                                                                                else "")
    block = header(started, ended, ran, command, [n for n in names if n not in ran]) + "\n\n" + markdown(rows)
    if args.fast:
        block = "FAST MODE: small sizes, not the README's figures.\n\n" + block
    if args.write_readme:
        changed = write_readme(ROOT / "README.md", block)
        print(f"README.md: {'table replaced' if changed else 'unchanged'}", file=sys.stderr)
    print(block)


if __name__ == "__main__":
    main()
