"""Model queries the live sequential scorer saves (issue 20, item 7): ``sequential.diff`` with ``hf_models``.

Run: ``PYTHONPATH=. python3 bench/model_sequential.py [--replicates 300] [--models DIR] [--json]``

Setting (seed 000): alpha = 0.01, K = 32 teacher-forced positions, batch_size 4, n_min 10, n_max 200, checks
after every prompt, DIFFERENT when the confidence sequence excludes 0 (delta* = 0, no band), IDENTICAL when all
of >= 20 scores are exactly 0. Models: a tiny GPT-2 (``certa.engine.core.models.tiny``, trained on standard-library
docstrings) against three candidates: the null (a bit-identical copy), a small effect (every weight matrix times
1 + 0.02·ε) and a large one (1 + 0.10·ε), ε ~ N(0, 1). Prompts: a pool of lines of other docstrings.

1. Each prompt of the pool is scored once per candidate with the live scorer (timed: prompts/s with 2 forward
   passes each). A prompt's score does not depend on the batch it is scored in (tested in
   tests/core/scorers/test_hf_models.py), so a run of the stage is its draws' pool scores: replicate r draws
   n_max prompts with ``default_rng(r).integers`` exactly as the stage does, the replicates are analysed at once
   (``analyse_scores`` on an (R, n_max) array), and the prompts a run scores are whole batches up to its stop:
   min(n_max, 4·ceil(N / 4)), forward passes 2 per prompt. Replicate 0 of every row is also run through the
   real stage with the real scorer, and its prompts scored and forward passes (counted by the scorer) must
   equal the emulation's: the bench stops otherwise.
2. Fixed-n reference of equal power: the smallest n whose two-sided one-sample t-test at alpha = 0.01 has, at the
   pool's standardised effect d = mu / sigma (population mean and standard deviation of the pool's scores: the
   replicates draw from the pool), power >= the sequential test's observed power (share of replicates
   DIFFERENT, capped at 0.999): power(n) = P(|T| > t_{1-alpha/2, n-1}), T ~ noncentral t(n - 1, d·sqrt(n))
   (``bench/sequential.py``'s ``fixed_n_t_test_size``). A fixed-n plan spends its n whatever the truth, so the
   null row is compared with the n planned for the small effect. Forward passes of the fixed-n test: 2n.

Methods: betting (non-asymptotically anytime-valid; needs a declared range) and asymptotic_cs (no range;
asymptotically anytime-valid). Each candidate's betting range is declared from a pilot on other text (the
models' training text), as a user would: r = 4·max |pilot score| rounded up to one significant digit, [-r, r]
for delta_ce and [0, r] for sym_kl (the null, whose pilot is all zeros, gets the small effect's); the bench
stops if a pool score leaves it. Prints uptime/load: the machine may be shared. ``--json`` adds, as the last line,
``{"rows": [[what, measured, goal], ...], "figures": [...]}``: the README table's rows (``bench/figures.py``), one
per candidate and metric, from the figures of the printed table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import textwrap
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import met  # noqa: E402  (bench/figures.py)
from sequential import fixed_n_t_test_size  # noqa: E402  (bench/sequential.py)

from certa.engine.core.input_formats import read_input  # noqa: E402
from certa.engine.core.input_limits import InputLimits  # noqa: E402
from certa.engine.core.models.manifest import MODEL_FORMAT, folder_manifest  # noqa: E402
from certa.engine.core.models.tiny import build_tiny_model, perturbed_copy  # noqa: E402
from certa.engine.core.scorers import ENTRY_POINT_GROUP, available_scorers  # noqa: E402
from certa.engine.core.scorers.hf_models import HfModelsScorer  # noqa: E402
from certa.engine.core.spec import fill_defaults, load_schema  # noqa: E402
from certa.engine.core.stages import REGISTRY  # noqa: E402
from certa.engine.core.stages.base import StageContext  # noqa: E402
from certa.engine.core.scorers.divergences import ZERO_MEANS_IDENTICAL  # noqa: E402
from certa.engine.core.stages.sequential_diff import analyse_scores  # noqa: E402
from certa.engine.core.tables import Table, table_from_columns  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STAGE = REGISTRY["sequential.diff"]
ALPHA, K, BATCH = 0.01, 32, 4
METHODS = (("betting", 200), ("betting", 1000), ("asymptotic_cs", 200))
"""(method, n_max): the seed's n_max 200, and 1000 for betting, which needs more at small standardised effects."""
EFFECTS = (("small (weights x 1 + 0.02 eps)", 0.02), ("large (weights x 1 + 0.10 eps)", 0.10),
           ("null (identical copy)", 0.0))
"""In this order: the null rows are compared with the fixed n planned for the small effect, computed first."""


def _docstrings(names: tuple[str, ...]) -> str:
    return "\n".join(textwrap.dedent(__import__(name).__doc__ or "") for name in names)


TRAINING = _docstrings(("textwrap", "os", "shutil", "hashlib", "sqlite3", "uuid"))
def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if len(line.strip()) >= 30]


PROMPTS = _lines(_docstrings(("json", "csv", "argparse", "logging", "pickle", "zipfile", "subprocess", "threading")))
PILOT = _lines(TRAINING)


def model_table(name: str, folder: Path) -> Table:
    return replace(read_input(name, folder_manifest(name, folder, InputLimits()).raw, MODEL_FORMAT, limits=InputLimits()), origin=folder)


def register_hf_models(site: Path) -> None:
    """Make ``hf_models`` findable by name in a checkout not re-installed since pyproject.toml declared it."""
    if "hf_models" in available_scorers():
        return
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    info = site / "certa_bench_scorers-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: certa-bench-scorers\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nhf_models = {declared['hf_models']}\n")
    sys.path.insert(0, str(site))


def knobs(metric: str, method: str, n_max: int, declared: list[float]) -> dict:
    given = {"scorer": {"name": "hf_models", "metric": metric, "options": {"prompts": "prompts"}},
             "reference": "base", "candidate": "cand", "positions_per_prompt": K, "batch_size": BATCH, "n_min": 10,
             "n_max": n_max, "alpha": ALPHA, "method": method, "rel_margin_target": None}
    if method == "betting":
        given["range"] = declared
    return fill_defaults(given, load_schema(STAGE.schema_file))


def pilot_range(metric: str, pilot: np.ndarray) -> list[float] | None:
    """[-r, r] (delta_ce) or [0, r] (sym_kl), r = 4·max|pilot| rounded up to one significant digit; None if 0."""
    top = 4 * float(np.max(np.abs(pilot)))
    if top == 0:
        return None
    unit = 10.0 ** math.floor(math.log10(top))
    r = math.ceil(top / unit) * unit
    return [-r, r] if metric == "delta_ce" else [0.0, r]


def emulate(pool: np.ndarray, k: dict, replicates: int) -> tuple[np.ndarray, np.ndarray]:
    """(decisions, prompts scored) of ``replicates`` stage runs on the pool's scores (module docstring, 1)."""
    n_max = k["n_max"]
    draws = np.stack([np.random.default_rng(r).integers(0, pool.size, size=n_max) for r in range(replicates)])
    bounds = tuple(k["range"]) if k.get("range") else (-math.inf, math.inf)
    # sequential.diff 3.0.0: zeros decide IDENTICAL only for a metric whose 0 means identical (sym_kl, not delta_ce)
    analysis = analyse_scores(pool[draws], k, bounds, with_p_value=False,
                              zero_means_identical=ZERO_MEANS_IDENTICAL[k["scorer"]["metric"]])
    used = analysis.stop.n_used
    return analysis.stop.decisions(), np.minimum(n_max, BATCH * np.ceil(used / BATCH)).astype(int)


def live_stage(tables: dict[str, Table], k: dict) -> tuple[int, int]:
    """(prompts scored, forward passes counted by the scorer) of the real stage with seed 0."""
    ctx = StageContext(stage_id="diff", knobs=k, tables=tables, rng=np.random.default_rng(0), profile="dev",
                       upstream={}, seed={})
    out = STAGE.run(ctx)
    usage = next(d.detail for d in out.decisions if d.kind == "scorer_usage")
    return int(out.outputs["source"]["prompts_scored"]), int(usage["forward_passes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=300)
    parser.add_argument("--models", type=Path, default=None, help="folder to build the models in (default: temp)")
    parser.add_argument("--json", action="store_true", help="last line: the README table's rows as JSON")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="certa-bench-models-")) if args.models is None else args.models
    register_hf_models(work / "site")
    print(f"uptime/load: {os.getloadavg()}; torch threads 1; {len(PROMPTS)} prompts in the pool; "
          f"{args.replicates} replicates per row")
    base = work / "base"
    if not base.exists():
        build_tiny_model(base, TRAINING, seed=0)
    prompts = table_from_columns("prompts", {"text": PROMPTS})
    rows = []
    ranges: dict[str, list[float]] = {}
    for label, scale in EFFECTS:
        folder = work / f"cand-{scale}"
        if not folder.exists():
            perturbed_copy(base, folder, scale=scale, seed=1)
        tables = {"base": model_table("base", base), "cand": model_table("cand", folder), "prompts": prompts}
        for metric in ("delta_ce", "sym_kl"):
            scorer = HfModelsScorer(metric=metric, options={"prompts": "prompts"}, tables={"prompts": prompts})
            population = scorer.prompts(tables["base"], tables["cand"])
            start = time.perf_counter()
            pool = scorer.score_batch(tables["base"], tables["cand"], population, K)
            rate = pool.size / (time.perf_counter() - start)
            pilot = scorer.score_batch(tables["base"], tables["cand"], PILOT, K)
            declared = pilot_range(metric, pilot) or ranges[metric]      # the null: the small effect's
            ranges.setdefault(metric, declared)
            if not (declared[0] <= pool.min() and pool.max() <= declared[1]):
                sys.exit(f"{label}: the pool's {metric} scores [{pool.min()}, {pool.max()}] leave the range {declared}")
            for method, n_max in METHODS:
                k = knobs(metric, method, n_max, declared)
                decisions, scored = emulate(pool, k, args.replicates)
                live = live_stage(tables, k)
                if live != (int(scored[0]), 2 * int(scored[0])):
                    sys.exit(f"{label} {metric} {method}: the live stage scored {live}, the emulation {scored[0]}")
                name = f"{method} n_max {n_max}" + (f" {declared}" if method == "betting" else "")
                rows.append((label, metric, name, pool, decisions, scored, rate))
    figures = row_figures(rows)
    print_table(figures)
    if args.json:
        print(json.dumps({"rows": json_rows(figures, args.replicates), "figures": figures}))


def row_figures(rows: list) -> list[dict]:
    """Each row's figures: standardised effect d, decisions' shares, power, E[prompts], median prompts, the fixed n
    of equal power (module docstring, 2) and the ratio E[prompts] / fixed n (None without a fixed n)."""
    planned: dict[tuple[str, str], int] = {}
    out = []
    for label, metric, method, pool, decisions, scored, rate in rows:
        sd = float(pool.std())
        d = float(pool.mean()) / sd if sd > 0 else 0.0
        values, counts = np.unique(decisions, return_counts=True)
        power = float(np.mean(decisions == "DIFFERENT"))
        if power > 0 and d > 0:
            fixed = fixed_n_t_test_size(d, min(power, 0.999), ALPHA)
            planned.setdefault((metric, method), fixed)          # the small effect comes first
        else:
            fixed = planned.get((metric, method), 0)
        out.append({"candidate": label, "metric": metric, "method": method, "d": d,
                    "decided": {str(v): int(c) / decisions.size for v, c in zip(values, counts)}, "power": power,
                    "prompts": float(scored.mean()), "median_prompts": float(np.median(scored)), "fixed_n": int(fixed),
                    "ratio": float(scored.mean() / fixed) if fixed else None, "prompts_per_s": float(rate)})
    return out


def json_rows(figures: list[dict], replicates: int) -> list[list[str]]:
    """One row per candidate and metric: each method's E[prompts] (forward passes = 2 x prompts) against the fixed-n
    test of equal power; goal: fewer model queries than that test."""
    rows = []
    for key in dict.fromkeys((f["candidate"], f["metric"]) for f in figures):
        cells = [f for f in figures if (f["candidate"], f["metric"]) == key]
        parts = [f"{f['method']}: E[prompts] {f['prompts']:.1f} ({2 * f['prompts']:.0f} passes), power "
                 f"{f['power']:.2f}, " + (f"**{f['ratio']:.2f}×** the fixed n {f['fixed_n']}" if f["ratio"] is not None
                                          else "no fixed n (nothing decided)") for f in cells]
        compared = [f for f in cells if f["ratio"] is not None]
        fewer = sum(f["ratio"] < 1 for f in compared)
        rows.append([f"`sequential.diff` with `hf_models`, {key[0]}, `{key[1]}`: prompts of the live sequential test "
                     f"vs a fixed-n t-test of equal power (alpha {ALPHA}, K {K}, {replicates} replicates; "
                     "`bench/model_sequential.py`)",
                     "; ".join(parts),
                     f"fewer prompts than fixed n: {met(bool(compared) and fewer == len(compared))} "
                     f"({fewer} of {len(compared)} methods with a fixed n)"])
    return rows


def print_table(figures: list[dict]) -> None:
    print(f"\nalpha = {ALPHA}, K = {K}, batch {BATCH}; forward passes = 2 x prompts; "
          "fixed-n: two-sided one-sample t-test, same alpha, power = the sequential test's")
    header = (f"{'candidate':<31} {'metric':<8} {'method':<36} {'d=mu/sd':>8} {'decided':<30} {'power':>6} "
              f"{'E[prompts]':>10} {'median':>6} {'E[passes]':>9} {'fixed n':>7} {'passes':>6} {'seq/fixed':>9} "
              f"{'prompts/s':>9}")
    print(header)
    for f in figures:
        decided = ", ".join(f"{v} {share:.0%}" for v, share in f["decided"].items())
        ratio = f"{f['ratio']:9.2f}" if f["ratio"] is not None else f"{'-':>9}"
        print(f"{f['candidate']:<31} {f['metric']:<8} {f['method']:<36} {f['d']:8.3f} {decided:<30} "
              f"{f['power']:6.3f} {f['prompts']:10.1f} {f['median_prompts']:6.0f} {2 * f['prompts']:9.1f} "
              f"{f['fixed_n']:7d} {2 * f['fixed_n']:6d} {ratio} {f['prompts_per_s']:9.0f}")
    print("null rows: the fixed n is the one planned for the small effect (a fixed-n plan spends it whatever the "
          "truth); seq/fixed = E[prompts] / fixed n = E[passes] / fixed passes")
    print(f"uptime/load at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
