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
1. CSV: 100,000 rows x 3 columns (id, x, y), 4.8 MB; pyarrow 26.0.1, 2 Arrow CPU threads
   certa 0.3.0 (csv module + float() per cell):     0.232 s
   pyarrow.csv.read_csv, multi-threaded:            0.006 s
   hashlib.sha256 of the bytes:                     0.003 s
   certa now, parse + sha256, numeric(x, y):        0.011 s    1.22x the reference (goal <= 1.3x: met);  21.1x faster than 0.3.0; 1.83x pyarrow alone
4. bakeoff.compare through engine.run: 100,000 decisions (6 MB CSV, 8 columns), 100 replicates
   whole run, ledger_rows: per_decision   0.148 s  (goal < 1 s; verdict PASS)
   whole run, ledger_rows: per_bucket     0.114 s  (goal < 1 s; verdict PASS)
   recording the per_decision run into a fresh SQLite ledger (100,008 entries):   3.707 s
"""

LEDGER = """\
  SQLite    : engine.run(tiny spec) end to end       33.9 runs/s best (29.7 median)   goal >= 100: NOT MET
  SQLite    : Ledger.record_run alone                69.4 runs/s best (67.7 median)
2. Big ledger: 500 runs, 5000 entries (10 a run), built with Ledger.record_run in 7.8 s (64 runs/s); 9 MB
  verify, in process (certa.engine.services.audit.verify, 500 certificates) best    1710.6 ms   median    1815.7 ms
  list, in process (Ledger.runs)                             best       7.6 ms   median      11.2 ms
  prove, in process (certa.ledger.bundle.build_bundle)             best       6.3 ms   median       7.5 ms
  certa list (500 runs)                                      best     291.4 ms   median     291.9 ms
  certa prove (against a checkpoint of 5000 entries)         best    1684.0 ms   median    1846.0 ms
  certa verify (5000 entries, once)                          best    5113.9 ms   median    5113.9 ms
"""

EVIDENCE = """\
import 2×10,000 records + pair + certify: 0.329 s (median 0.625 s; json.loads of the same lines 1.424 s, \
median 1.512 s)
  the same through the stage's input path (input_formats.read_input: the input's digest and table columns too): 0.131 s \
(median 0.131 s)
"""

def _result(stdout: str, *, json_mode: bool = False, code: int = 0) -> dict:
    return {"name": "x", "argv": [], "json": json_mode, "code": code, "stdout": stdout, "stderr": "Boom: bad\n"}


def test_text_parsers_carry_the_printed_figures(figures):
    csv, per_bucket, per_decision, record = figures.rows_of("tables", _result(TABLES))
    assert csv == ["CSV, 10⁵ rows × 3 columns: parsed, hashed, both float columns read",
                   "**0.011 s: 1.22×** `pyarrow.csv.read_csv` (threads, 0.006 s) + `hashlib.sha256` (0.003 s); 21.1× "
                   "faster than certa 0.3.0's parser (0.232 s); values bit-identical",
                   "≤ 1.3× pyarrow + sha256: met"]
    slow = figures.rows_of("tables", _result(TABLES.replace("1.22x the reference", "1.31x the reference")))[0]
    assert slow[2] == "≤ 1.3× pyarrow + sha256: **not met**"
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
    assert csv[1].startswith("**0.011 s: 1.22×**")
    assert per_bucket[1].startswith("not measured")
    assert all(row[1].startswith("not measured") for row in figures.rows_of("ledger", _result("")))


def test_a_failed_bench_says_so_and_json_rows_are_taken_verbatim(figures):
    (row,) = figures.rows_of("ledger", _result(LEDGER, code=2))
    assert row == ["`bench/ledger.py` (ledger)", "not measured: the bench failed (exit 2: Boom: bad)", ""]
    rows = [["`certa verify`, 10⁵ entries", "**3.1 s**", "< 5 s"]]
    out = "progress line\n" + json.dumps({"rows": rows, "other": 1}) + "\n"
    assert figures.rows_of("tables", _result(out, json_mode=True)) == rows


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


@pytest.fixture()
def bench_module(monkeypatch):
    """Load ``bench/NAME.py`` as a module (its row builders are pure; no bench runs)."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    before = set(sys.modules)

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in ("figures", "timing", "sequential"):       # bench/ modules imported by the benches
        if name not in before:
            sys.modules.pop(name, None)


def _through_figures(figures, name: str, rows: list) -> list:
    """The rows as bench/figures.py reads them from the bench's last stdout line."""
    out = "progress\n" + json.dumps({"rows": rows, "figures": {}}) + "\n"
    return figures.rows_of(name, _result(out, json_mode=True))


def test_verify_scale_json_rows_carry_its_figures(figures, bench_module):
    verify_scale = bench_module("verify_scale")
    figures_of = {"workers": 2, "cpu_workers": 9.5, "worker_peak_mib": 61.0, "shape": "certificates"}

    def measured(size, entries, seconds, pss, sha256_wall):
        return {"ok": True, "size": size, "entries": entries, "seconds": seconds, "cpu": seconds - 2.0,
                "family_pss_mib": pss, "file_mib": entries / 800, "sha256": {"wall": sha256_wall},
                "ratio": seconds / sha256_wall, **figures_of}

    full = [measured(100_000, 100_000, 4.0, 131.6, 0.37), measured(1_000_000, 1_000_000, 41.5, 212.4, 3.74),
            measured(10_000_000, 9_990_004, 400.0, 240.0, 37.0),
            {**measured(1_000_000, 990_392, 8.5, 139.0, 1.09), "shape": "decisions"}]
    since = {"ok": True, "seconds": 0.051, "peak_mib": 77.0, "checkpoint": 1_000_000, "added": 1000}
    rows = verify_scale.json_rows(full, since)
    certificates, decisions, incremental = _through_figures(figures, "verify_scale", rows)
    assert certificates[0].startswith("`verify` of 10⁶ entries, certificates shape (ordinary runs only")
    assert certificates[1] == ("**41.5 s** wall with 2 worker processes = **11.1×** `sha256sum` of the file (3.74 s); "
                               "CPU 49.0 s (imports included); memory of all the processes together **212 MiB** Pss "
                               "at its peak (from 10⁵ entries: 132 MiB; 9,990,004: 240 MiB); intact: True")
    assert certificates[2] == ("≤ 3× `sha256sum`: **not met** (11.1×: 3.70× the bound); ≤ 200 MiB flat: **not met** "
                               "(212 MiB: 1.06× the bound)")
    assert decisions[0].startswith("`verify` of 990,392 entries, decisions shape (1000 ordinary runs")
    assert decisions[2] == "≤ 3× `sha256sum`: **not met** (7.8×: 2.60× the bound); ≤ 200 MiB flat: met"
    assert incremental[0] == "`verify --since-checkpoint` of 10³ entries after a checkpoint of 10⁶"
    assert incremental[1].startswith("**0.05 s** after imports") and incremental[2] == "< 1 s: met"
    full[3].update(seconds=3.0, ratio=2.75)
    assert verify_scale.json_rows(full, since)[1][2] == "≤ 3× `sha256sum`: met; ≤ 200 MiB flat: met"


def test_ledger_reads_json_rows_carry_its_figures(figures, bench_module):
    report = {"list": {"small": 1000, "big": 100_000, "cli_s": 0.04512, "inproc_s": 0.005, "cli_ratio": 1.05,
                       "inproc_ratio": 1.1},
              "reads": {"small": 10_000, "big": 1_000_000, "ratios": {"show": 1.02, "replay --no-record": 1.31}},
              "record": {"entries": 1_000_017, "runs": 1500, "empty_rate": 120.0, "big_rate": 115.0,
                         "ratio": 0.9583, "median_ratio": 0.9404}}
    listing, flat, reads, record = _through_figures(figures, "ledger_reads",
                                                    bench_module("ledger_reads").json_rows(report))
    assert listing[0].startswith("`certa list` (50 newest runs) on 10⁵ runs")
    assert listing[0].endswith("[aborted runs of one decision, 5 entries each]")  # the ledger's shape, by figures.py
    flat[0], reads[0], record[0] = (cell.split(" [")[0] for cell in (flat[0], reads[0], record[0]))
    assert listing[1] == "**45.1 ms** (in process 5.00 ms)" and listing[2] == "< 60 ms: met"
    assert flat == ["`certa list` on 10⁵ runs against 10³ runs", "in process **×1.10** (`certa list` ×1.05)",
                    "≤ ×1.25 in process: met"]
    assert reads[0] == "one run's reads (show, replay --no-record) on 10⁶ entries against 10⁴"
    assert reads[1] == "at most **×1.31** (replay --no-record)"
    assert reads[2] == "≤ ×1.25 each: **not met** (×1.31: 1.05× the bound)"
    assert record[0] == "recording runs into a ledger of 1,000,017 entries against an empty one"
    assert record[1] == ("**×0.958** the rate over 1500 runs on each, one on each in turn (115.0 vs 120.0 runs/s; "
                         "median runs ×0.940)") and record[2] == "≥ ×0.9: met"


def test_ledger_reads_list_row_judges_the_installed_wheel_and_shows_the_start_up(figures, bench_module):
    start = {"python_no_site": 0.009, "python": 0.0375, "checkout": 0.08, "clean_python": 0.0106,
             "clean_click": 0.0405, "wheel": 0.0586, "site_imports": {"certifi": 0.009}}
    report = {"list": {"small": 1000, "big": 100_000, "cli_s": 0.0826, "inproc_s": 0.00046, "cli_ratio": 0.8,
                       "inproc_ratio": 1.0, "start_up": start},
              "reads": {"small": 10_000, "big": 1_000_000, "ratios": {"show": 1.02}},
              "record": {"entries": 1_000_017, "runs": 1500, "empty_rate": 120.0, "big_rate": 115.0,
                         "ratio": 0.9583, "median_ratio": 0.9404}}
    listing = _through_figures(figures, "ledger_reads", bench_module("ledger_reads").json_rows(report))[0]
    assert listing[1] == ("**58.6 ms** installed wheel (10.6 ms of it `python -c pass`, 29.9 ms `import click`); from "
                          "the checkout 82.6 ms (37.5 ms of it `python -c pass`, site-packages' .pth files included); "
                          "in process 0.46 ms")
    assert listing[2] == "< 60 ms: met"  # the wheel's figure, not the checkout's
    start["wheel"] = 0.0612
    assert bench_module("ledger_reads").json_rows(report)[0][2] == "< 60 ms: **not met**"


def test_model_windows_json_row_carries_its_figures(figures, bench_module):
    models = {"tiny": {"parameters": 128_768, "vocabulary": 320, "tokens": 19_473, "plain_s": 1.43, "batch1_s": 1.19,
                       "batch8_s": 0.8, "deviation": 2e-7},
              "small": {"parameters": 16_000_000, "vocabulary": 50_257, "tokens": 19_473, "plain_s": 63.0,
                        "batch1_s": 72.0, "batch8_s": 64.0, "deviation": 1e-7}}
    (row,) = _through_figures(figures, "model_windows", bench_module("model_windows").json_rows(models, 1, 6.0))
    assert "(19,473 tokens, 1 thread(s); load average 6.0" in row[0]
    assert row[1].startswith("tiny GPT-2 (129 k parameters, vocabulary 320): **0.83×** the loop's time at batch 1 "
                             "(16,364 vs 13,617 tokens/s), 0.56× at batch 8; 4-layer GPT-2 (16 M parameters")
    assert row[1].endswith("**1.14×** the loop's time at batch 1 (270 vs 309 tokens/s), 1.02× at batch 8; sums "
                           "equal to 2.0e-07 relative")
    assert row[2] == "overhead ≤ 10 % (≤ 1.10×): **not met**"


def test_model_sequential_json_rows_carry_its_figures(figures, bench_module):
    def cell(candidate: str, method: str, power: float, prompts: float, fixed: int) -> dict:
        return {"candidate": candidate, "metric": "delta_ce", "method": method, "power": power, "prompts": prompts,
                "fixed_n": fixed, "ratio": prompts / fixed if fixed else None}

    cells = [cell("small", "betting n_max 200", 0.9, 40.0, 50), cell("small", "asymptotic_cs n_max 200", 0.9, 60.0, 50),
             cell("null", "betting n_max 200", 0.0, 200.0, 50), cell("null", "asymptotic_cs n_max 200", 0.0, 20.0, 0)]
    small, null = _through_figures(figures, "model_sequential",
                                   bench_module("model_sequential").json_rows(cells, 300))
    assert small[0].startswith("`sequential.diff` with `hf_models`, small, `delta_ce`") and "300 replicates" in small[0]
    assert small[1] == ("betting n_max 200: E[prompts] 40.0 (80 passes), power 0.90, **0.80×** the fixed n 50; "
                        "asymptotic_cs n_max 200: E[prompts] 60.0 (120 passes), power 0.90, **1.20×** the fixed n 50")
    assert small[2] == "fewer prompts than fixed n: **not met** (1 of 2 methods with a fixed n)"
    assert null[1].endswith("no fixed n (nothing decided)") and null[2].endswith("(0 of 1 methods with a fixed n)")


def test_json_benches_without_json_rows_say_so(figures):
    for name in ("verify_scale", "ledger_reads", "model_windows", "model_sequential"):
        (row,) = figures.rows_of(name, _result("no json here\n", json_mode=True))
        assert row == [f"`bench/{name}.py`", "not measured (the bench printed no JSON rows)", ""]


SCALE = """\
2,000,000 records per export, best of 1 fresh processes; 2 cores, load average 2.00 1.50 1.00
export              MB reader CPU s  wall s floor CPU s  wall s  ratio  peak MB (imports) peak/input floor peak MB
lm-eval         2230.1        27.40   28.01       12.50   12.90   2.19     3702        75       1.66            90
promptfoo       2320.4        27.90   28.50       12.40   12.80   2.25     3434        75       1.48            88
"""


def test_evidence_scale_rows_name_the_exports_and_what_each_misses(figures):
    (row,) = figures.rows_of("evidence_scale", _result(SCALE))
    assert row[0].startswith("evaluator exports of 2,000,000 records read from a file in a fresh process")
    assert "(`bench/evidence_import.py --scale`, best of 1)" in row[0]
    assert row[1].startswith("lm-eval (2230 MB): **2.19×** the floor (27.40 s vs 12.50 s CPU), **1.66×** the file "
                             "(3,702 MB); promptfoo (2320 MB)")
    assert row[2] == "≤ 2× CPU: **not met** (lm-eval 2.19×, promptfoo 2.25×); ≤ 1.5× RSS: **not met** (lm-eval 1.66×)"
    (lm_eval,) = figures.rows_of("evidence_scale_lm_eval", _result(SCALE.replace("2.19 ", "1.90 ")))
    assert "[the Inspect formats at 2·10⁶ are left out" in lm_eval[0]  # a size below the goal's, said in the row
    assert lm_eval[2].startswith("≤ 2× CPU: **not met** (promptfoo 2.25×)")
    (missing,) = figures.rows_of("evidence_scale", _result("Traceback-free but empty\n"))
    assert missing[1].startswith("not measured")


def test_a_missed_goal_says_by_how_much_where_the_row_does_not(figures):
    assert figures.shortfall("**0.503 s** (0.47 s CPU)", "< 0.2 s: **not met**") == \
        "< 0.2 s: **not met** (0.503 s: 2.51× the bound)"
    assert figures.shortfall("**80.0×** the seed", "≥ 100×: **not met**") == \
        "≥ 100×: **not met** (80.0×: 0.80× the bound)"
    assert figures.shortfall("in process **×1.31**", "≤ ×1.25 in process: **not met**") == \
        "≤ ×1.25 in process: **not met** (×1.31: 1.05× the bound)"
    kept = "≤ 1.2×: **not met** (1.25× for the windows alone)"
    assert figures.shortfall("**1.24×**", kept) == kept
    # the first figure of the unit meets the bound: the clause misses on another figure, not guessed at
    assert figures.shortfall("**139 MiB** Pss", "≤ 200 MiB flat: **not met**") == "≤ 200 MiB flat: **not met**"
    assert figures.shortfall("**3.1 s**", "< 5 s: met") == "< 5 s: met"


def test_shape_notes_and_no_server_rows(figures):
    rows = [["`certa list (990,392 entries)` (median)", "**0.05 s**", "< 0.2 s: met"],
            ["`certa list (1 run)` (median)", "**0.05 s**", "< 0.2 s: met"], ["`--help`", "0.04 s", ""]]
    big, small, other = figures.annotate(rows, figures.BENCHES["cli_startup"].notes)
    assert big[0].endswith("[the decisions-shape ledger of `bench/verify_scale.py` above, copied: 10³ ordinary runs, "
                           "then per-decision runs of 10⁴ decisions]")
    assert small[0].endswith("[a ledger of one `paired-ratio` run]") and other == rows[2]
    served = [["client vs loop", "**1.03×**", "≤ 1.10×: met"],
              ["the same against the vLLM test server", "not measured (no server: `bash .ci/vllm`)", ""]]
    out = "x\n" + json.dumps({"rows": served}) + "\n"
    fake, real = figures.rows_of("served_client", {**_result(out, json_mode=True), "served": False})
    assert fake == served[0] and real[1] == "not measured (no vLLM server)"
    assert figures.rows_of("served_client", {**_result(out, json_mode=True), "served": True})[1] == served[1]


README = """# certa

## Benchmarks

Prose.

<!-- figures: begin (written by bench/figures.py --write-readme) -->
old table
<!-- figures: end -->

## Layout
"""


def test_write_readme_replaces_only_the_table_atomically_and_idempotently(figures, tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    block = "Measured 2026-11-30 01:00–01:30 UTC ...\n\n| what | measured | goal |\n|---|---|---|\n| a | b | c |"
    assert figures.write_readme(readme, block) is True
    text = readme.read_text(encoding="utf-8")
    assert text == README.replace("old table", block)
    assert figures.write_readme(readme, block) is False and readme.read_text(encoding="utf-8") == text
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]  # no temporary file left

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(figures.os, "replace", crash)
    with pytest.raises(OSError):
        figures.write_readme(readme, "another table")
    assert readme.read_text(encoding="utf-8") == text and [p.name for p in tmp_path.iterdir()] == ["README.md"]
    for broken in (README.replace(figures.END, ""), README + figures.BEGIN,
                   README.replace(figures.BEGIN, "@").replace(figures.END, figures.BEGIN).replace("@", figures.END)):
        with pytest.raises(ValueError, match="markers"):
            figures.replace_between_markers(broken, block)


def _readme_block(figures) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(figures.BEGIN)[1].split(figures.END)[0]


def test_every_bench_the_readme_table_names_is_run_by_figures(figures):
    """The README's table (between its markers) names only benches bench/figures.py runs, and each of those
    exists and accepts the arguments figures.py gives it (its argparse options, read from its source)."""
    import re

    scripts = {bench.script for bench in figures.BENCHES.values()}
    named = set(re.findall(r"bench/(\w+\.py)", _readme_block(figures))) - {"figures.py"}  # the runner itself
    assert named and named <= scripts, named - scripts
    table = [line for line in _readme_block(figures).splitlines() if line.startswith("| ") and "---" not in line]
    assert len(table) > 40  # the whole table lies between the markers
    for name, bench in figures.BENCHES.items():
        source = (ROOT / "bench" / bench.script).read_text(encoding="utf-8")
        options = set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", source))
        given = {arg for arg in bench.args + bench.fast if arg.startswith("--")}
        assert given <= options, (name, given - options)


def test_served_benches_get_the_servers_variables_or_say_there_is_none(figures, monkeypatch, tmp_path):
    for name in figures.SERVED_ENV:
        monkeypatch.delenv(name, raising=False)
    assert figures.served_env(None) == ({}, False)
    calls = []

    def vllm(argv, **kwargs):
        calls.append(argv)
        out = ("vllm: already running; reusing it (0 s)\nexport CERTA_TEST_VLLM_URL=http://127.0.0.1:1/v1\n"
               "export CERTA_TEST_VLLM_NAME=tiny-llama\n")
        return figures.subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(figures.subprocess, "run", vllm)
    env, started = figures.served_env(tmp_path)
    assert calls[0][-2:] == ["start", str(tmp_path)] and not started  # reused: this run does not stop them
    assert env == {"CERTA_TEST_VLLM_URL": "http://127.0.0.1:1/v1", "CERTA_TEST_VLLM_NAME": "tiny-llama"}
    monkeypatch.setattr(figures.subprocess, "run",
                        lambda argv, **kwargs: figures.subprocess.CompletedProcess(argv, 1, "vllm: failed\n", ""))
    assert figures.served_env(tmp_path) == ({}, False)
    monkeypatch.setenv("CERTA_TEST_VLLM_URL", "http://127.0.0.1:2/v1")
    assert figures.served_env(tmp_path) == ({"CERTA_TEST_VLLM_URL": "http://127.0.0.1:2/v1"}, False)


def test_a_bench_whose_ledger_was_not_built_is_not_run(figures, tmp_path):
    result = figures.run_bench("cli_startup", figures.BENCHES["cli_startup"], False, tmp_path)
    assert result["code"] == 2 and result["seconds"] == 0.0
    (row,) = figures.rows_of("cli_startup", result)
    assert row[1].startswith(f"not measured: the bench failed (exit 2: needs {tmp_path}/verify/verify-1000000.db")
