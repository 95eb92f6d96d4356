"""bench/figures.py turns the benches' outputs into the README's table: each row carries the figures the bench
printed, a figure the bench no longer prints becomes "not measured" (never a stale number), a failed bench says
so, and a bench that prints ``--json`` rows owns its rows. The outputs below are excerpts of real runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("bench_figures", ROOT / "bench" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


TABLES = """\
1. CSV: 100,000 rows x 3 columns (id, x, y), 4.8 MB
   certa 0.3.0 (csv module + float() per cell):    0.232 s
   certa now, numeric(x), numeric(y):              0.021 s    11.0x faster  (goal >= 10x)
4. bakeoff.compare through engine.run: 100,000 decisions (6 MB CSV, 8 columns), 100 replicates
   whole run, ledger_rows: per_decision   0.148 s  (goal < 1 s; verdict PASS)
   whole run, ledger_rows: per_bucket     0.114 s  (goal < 1 s; verdict PASS)
   recording the per_decision run into a fresh SQLite ledger (100,008 entries):   3.707 s
"""

LEDGER = """\
  SQLite    : engine.run(tiny spec) end to end       33.9 runs/s best (29.7 median)   goal >= 100: NOT MET
  SQLite    : Ledger.record_run alone                69.4 runs/s best (67.7 median)
2. Big ledger: 500 runs, 5000 entries (10 a run), built with Ledger.record_run in 7.8 s (64 runs/s); 9 MB
  verify, in process (engine.services.audit.verify, 500 certificates) best    1710.6 ms   median    1815.7 ms
  list, in process (Ledger.runs)                             best       7.6 ms   median      11.2 ms
  prove, in process (ledger.bundle.build_bundle)             best       6.3 ms   median       7.5 ms
  certa list (500 runs)                                      best     291.4 ms   median     291.9 ms
  certa prove (against a checkpoint of 5000 entries)         best    1684.0 ms   median    1846.0 ms
  certa verify (5000 entries, once)                          best    5113.9 ms   median    5113.9 ms
"""

EVIDENCE = """\
import 2×10,000 records + pair + certify: 0.329 s (median 0.625 s; json.loads of the same lines 1.424 s, \
median 1.512 s)
  the same through the stage's input path (formats.evidence_table: the input's digest and table columns too): 0.131 s \
(median 0.131 s)
"""

LEDGER_READS = """\
1. certa list (50 newest runs) against the number of runs (best of 5, median)
     1000 runs (grown in   1.0 s): certa list   300.00 ms (  310.00 median)   in process     5.00 ms (    6.00 median)
  goal certa list on 100000 runs < 60 ms:    45.12 ms, met (beyond start-up: 10.00 ms)
  flat: 100000 runs / 1000 runs: certa list x1.05, in process x1.10 (goal <= x1.25: met)

2. One run's reads against the ledger's size (in process, best of 20, median)
  ratio 1000000 entries / 10000 entries (goal: independent of size, <= x1.25):
    show                       x  1.02  met
    replay --no-record         x  1.31  NOT MET
    batch's runs (batch_runs)  x  0.98  met

3. Recording (50 tiny runs a timing, alternately, best of 5, median)
  empty ledger:              120.0 runs/s (118.0 median)
  ledger of 1000000 entries:   115.0 runs/s (110.0 median)
  ratio big/empty x0.958 (median x0.932); goal >= x0.9: met
"""


def _result(stdout: str, *, json_mode: bool = False, code: int = 0) -> dict:
    return {"name": "x", "argv": [], "json": json_mode, "code": code, "stdout": stdout, "stderr": "Boom: bad\n"}


def test_text_parsers_carry_the_printed_figures(figures):
    csv, per_bucket, per_decision, record = figures.rows_of("tables", _result(TABLES))
    assert csv == ["CSV, 10⁵ rows × 3 columns",
                   "**11.0×** faster than certa 0.3.0's parser (0.021 s against 0.232 s), values bit-identical",
                   "≥ 10×"]
    assert per_bucket[1] == "**0.114 s**" and per_decision[1] == "**0.148 s**"
    assert "100,008 entries" in record[0] and record[1] == "3.707 s"
    rate, verify, listing, prove = figures.rows_of("ledger", _result(LEDGER))
    assert rate[1] == "**34/s** (`record_run` alone 69/s)"
    assert verify[0].startswith("`verify` of 5,000 entries (500 certificates)") and verify[1] == "**1.71 s** / 5.11 s"
    assert listing[1] == "**0.29 s** / **8 ms**" and prove[1] == "**6.3 ms** / 1.68 s"
    (evidence,) = figures.rows_of("evidence_import", _result(EVIDENCE))
    assert evidence[0].endswith(", 10,000 records each")
    assert evidence[1].startswith("**0.329 s** best, median 0.625 s (`json.loads` of the same lines alone 1.424 s)")
    full = "import 2×10⁵ records + pair + certify: 2.221 s (goal < 2 s; median 2.358 s; json.loads of the same lines \
10.601 s, median 11.955 s)"
    (evidence,) = figures.rows_of("evidence_import", _result(full))
    assert evidence[0].endswith(", 10⁵ records each") and evidence[1].startswith("**2.221 s** best, median 2.358 s")


def test_a_figure_the_bench_no_longer_prints_is_not_measured(figures):
    csv, per_bucket, _, _ = figures.rows_of("tables", _result(TABLES.replace("per_bucket", "per_bin")))
    assert csv[1].startswith("**11.0×**")
    assert per_bucket[1].startswith("not measured")
    assert all(row[1].startswith("not measured") for row in figures.rows_of("ledger", _result("")))


def test_a_failed_bench_says_so_and_json_rows_are_taken_verbatim(figures):
    (row,) = figures.rows_of("ledger", _result(LEDGER, code=2))
    assert row[1] == "not measured: the bench failed (exit 2: Boom: bad)"
    rows = [["`certa verify`, 10⁵ entries", "**3.1 s**", "< 5 s"]]
    out = "progress line\n" + json.dumps({"rows": rows, "other": 1}) + "\n"
    assert figures.rows_of("ledger", _result(out, json_mode=True)) == rows


def test_paired_bootstrap_rows_come_from_its_json(figures):
    limit = {"case": "limit", "n": 10_000, "replicates": 10_000, "threads": 2, "draws": 10**8, "goal": 1.5,
             "wall": {"limit-1": 0.06, "limit-2": 0.05, "kernel": 0.07, "stage": 0.1}}
    out = {"n": 10_000, "replicates": 10_000,
           "cases": {"scipy-batch500": {"min_seconds": 2.5}, "stage-1.1.0-uniform": {"min_seconds": 0.1},
                     "limit": limit},
           "summary": {"speedups": {"stage-1.1.0-uniform": {"best": 25.0, "cpu": 16.0}}, "memory": {},
                       "limit": {"seconds": 0.05, "cpu_seconds": 0.08, "goal": 1.5,
                                 "wall_ratio": {"kernel": 1.4, "stage": 2.0}, "cpu_ratio": {"kernel": 1.6}}}}
    uniform, against_limit = figures.rows_of("paired_bootstrap", _result(json.dumps(out), json_mode=True))
    assert uniform[0] == "`paired.ppl_ratio` 1.1.0 through `engine.run`, n = B = 10⁴, `uniform`"
    assert uniform[1].startswith("0.100 s: **25.0×** `scipy.stats.bootstrap` BCa `batch=500` (2.50 s)")
    assert "10⁸ draws on 2 threads" in against_limit[0]
    assert "**1.40×** the limit in wall time, 1.60× in CPU" in against_limit[1]
    assert against_limit[2] == "≤ 1.5× (kernel): met"


def test_markdown_escapes_pipes(figures):
    assert figures.markdown([["a|b", "c", "d"]]).splitlines()[-1] == "| a\\|b | c | d |"


def test_ledger_reads_rows_are_parsed_from_its_printed_lines(figures):
    listing, flat, reads, record = figures.rows_of("ledger_reads", _result(LEDGER_READS))
    assert listing == ["`certa list` (50 newest runs) on 100000 runs", "**45.1 ms**", "< 60 ms"]
    assert flat[1] == "×1.05 (in process ×1.10)"
    assert reads[1] == "at most **×1.31** (replay --no-record)" and reads[2] == "≤ ×1.25"
    assert record[1] == "**×0.958** the rate" and record[2] == "≥ ×0.9"
