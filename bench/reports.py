"""Speed of the HTML report (``certa report``, ``certa.engine.services.presentation.html``).

Run: ``cd /work/main && PYTHONPATH=. python3 bench/reports.py``

1. Import time of the plotting library (matplotlib with the SVG backend) and of Jinja2, each in a fresh
   interpreter (best of 5, ``-X importtime`` totals are not used: a plain wall clock around the import).
2. For each example spec (``specs/*/spec.yaml`` but a served model's, run once into a temporary ledger): the
   time to gather the report data from the ledger (certificate, checks, ``verify`` of the chain, replay,
   reviews) and the time to render it to HTML (plots and template), after imports and one warm-up render;
   best and median of 7.
   Goal: render < 0.5 s per report. Also the page size and whether two renders give the same bytes.
3. ``certa site`` (``certa.engine.services.site.build_site``) of a ledger of 1,000 runs (``--site-runs N``): small
   paired-ratio runs (60 windows, 100 bootstrap replicates, 25 spec names so that every run but the first of
   a name has a diff page, every 10th run reviewed) recorded through the engine API. Timed: the first build
   (all pages, ``jobs`` = CPU count), an unchanged re-run (in this process, and ``certa site`` as a new
   process, imports included), and a re-run after one new review. Goals: first build < 30 s, unchanged
   re-run < 2 s. ``--site-only`` skips parts 1 and 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import OFFLINE_EXAMPLES  # noqa: E402


def import_seconds(statement: str, repeats: int = 5) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    return min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     cwd=ROOT).stdout) for _ in range(repeats))


def paired_ratio_tables(i: int) -> tuple[dict[str, list], dict[str, list]]:
    """Baseline and subject window tables of the i-th bench run (30 preview + 30 final windows)."""
    import numpy as np

    rng = np.random.default_rng(i)
    n = 30
    ids = [f"w{k:03d}" for k in range(2 * n)]
    phase = ["preview"] * n + ["final"] * n
    tokens = rng.integers(200, 800, 2 * n)
    start = np.concatenate([[0], np.cumsum(tokens)[:-1]])
    base = rng.normal(2.4, 0.1, 2 * n)
    subject = base + rng.normal(0.004 * (i % 5), 0.02, 2 * n)

    def table(nll):
        return {"window_id": ids, "phase": phase, "tokens": tokens.tolist(), "start": start.tolist(),
                "end": (start + tokens).tolist(), "mean_nll": nll.round(6).tolist()}

    return table(base), table(subject)


def bench_spec(i: int) -> dict:
    return {"certa": 1, "name": f"model-{i % 25:02d}-edit", "seed": 1000 + i, "profile": "dev",
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": "ratio", "use": "paired.ppl_ratio",
                        "with": {"baseline": "baseline", "subject": "subject", "replicates": 100}}],
            "gates": [{"id": "no-regression", "metric": "ratio.token_perplexity.display_ci[1]", "max": 1.01}]}


def build_bench_ledger(db: Path, runs: int) -> None:
    """``runs`` small paired-ratio runs, every 10th reviewed (unsigned)."""
    from certa.engine import run
    from certa.engine.services.reviews import review_payload
    from certa.ledger import Ledger

    with Ledger.open(str(db)) as ledger:
        for i in range(runs):
            baseline, subject = paired_ratio_tables(i)
            result = run(bench_spec(i), inputs={"baseline": baseline, "subject": subject}, ledger=ledger)
            if i % 10 == 0:
                ledger.record_note(result.run_id, "review", review_payload(
                    reviewer="bench@example.org", decision="approved", note="bench", certificate=result.certificate))


def bench_site(runs: int) -> None:
    from certa.engine.services.site import build_site
    from certa.engine.services.reviews import review_payload
    from certa.ledger import Ledger

    with tempfile.TemporaryDirectory() as folder:
        db, site = Path(folder) / "ledger.db", Path(folder) / "site"
        t0 = time.perf_counter()
        build_bench_ledger(db, runs)
        print(f"site: built a ledger of {runs} runs in {time.perf_counter() - t0:.1f} s "
              f"({db.stat().st_size / 2**20:.1f} MiB)")
        jobs = os.cpu_count() or 1
        with Ledger.open(str(db), create=False) as ledger:
            load_before = os.getloadavg()[0]
            t0 = time.perf_counter()
            first = build_site(ledger, site, jobs=jobs)
            t1 = time.perf_counter()
            load_after = os.getloadavg()[0]
            again = build_site(ledger, site, jobs=jobs)
            t2 = time.perf_counter()
            newest = ledger.runs()[0]
            ledger.record_note(newest.run_id, "review", review_payload(
                reviewer="late@example.org", decision="comment", note="one more", certificate=ledger.certificate(newest.run_id)))
            t3 = time.perf_counter()
            review = build_site(ledger, site, jobs=jobs)
            t4 = time.perf_counter()
        size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        print(f"site: first build {t1 - t0:.1f} s ({first.pages_written} pages, {size / 2**20:.0f} MiB, jobs={jobs}; "
              f"goal < 30 s; load average {load_before:.2f} before, {load_after:.2f} after)")
        print(f"site: unchanged re-run {t2 - t1:.2f} s ({again.pages_written} written, {again.pages_unchanged} unchanged; "
              f"goal < 2 s)")
        print(f"site: re-run after one new review {t4 - t3:.2f} s ({review.pages_written} written: the run page, "
              f"the index and the chain page)")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cli", "site", "-o", str(site), "--ledger", str(db), "--json"],
                       cwd=ROOT, check=True, capture_output=True)
        print(f"site: unchanged re-run as a new process (certa site, imports included) {time.perf_counter() - t0:.2f} s")
        shutil.rmtree(site)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site-runs", type=int, default=1000)
    parser.add_argument("--site-only", action="store_true")
    args = parser.parse_args()
    if not args.site_only:
        bench_reports()
    bench_site(args.site_runs)


def bench_reports() -> None:
    mpl = import_seconds("import matplotlib; matplotlib.use('svg'); from matplotlib.figure import Figure; "
                         "import matplotlib.backends.backend_svg")
    jinja = import_seconds("import jinja2")
    package = import_seconds("import certa.engine.services.presentation.html")
    print(f"import: matplotlib (svg backend) {mpl:.3f} s, jinja2 {jinja:.3f} s, certa.engine.services.presentation.html (all of it, with "
          f"engine and ledger) {package:.3f} s")

    from click.testing import CliRunner

    from certa.cli import main as cli_main
    from certa.engine.services.presentation.html import render_report
    from certa.engine.services.report_data import gather_report
    from certa.ledger import Ledger

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "ledger.db"
        for spec in (ROOT / "specs" / name / "spec.yaml" for name in OFFLINE_EXAMPLES):  # not a served one
            result = CliRunner().invoke(cli_main, ["run", str(spec), "--ledger", str(db), "--json"])
            assert result.exit_code == 0, result.output
        with Ledger.open(str(db), create=False) as ledger:
            rows = list(reversed(ledger.runs()))
            print(f"{'example':<26} {'gather s':>9} {'render best':>12} {'median':>8} {'plots':>6} {'KiB':>6}  same")
            for row in rows:
                gathered, rendered = [], []
                data = gather_report(ledger, row.run_id)
                first = render_report(data)  # warm-up: fonts, templates
                for _ in range(7):
                    t0 = time.perf_counter()
                    data = gather_report(ledger, row.run_id)
                    t1 = time.perf_counter()
                    page = render_report(data)
                    t2 = time.perf_counter()
                    gathered.append(t1 - t0)
                    rendered.append(t2 - t1)
                plots = page.count('<figure class="plot"')
                print(f"{row.name:<26} {min(gathered):>9.3f} {min(rendered):>12.3f} {statistics.median(rendered):>8.3f} "
                      f"{plots:>6} {len(page.encode()) / 1024:>6.0f}  {page == first}")


if __name__ == "__main__":
    main()
