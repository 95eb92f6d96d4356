"""Speed and peak memory of ``paired.ppl_ratio`` through ``engine.run``, end to end, against scipy, in one run.

Each case runs in its own subprocess (fresh interpreter), so its peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is an honest per-case figure; "baseline" is the same process
doing everything except the timed call (interpreter + numpy + certa's engine and the bootstrap module, which
loads scipy.special + data); only the scipy case imports scipy.stats. "numba-floor" is a process that only
calls one trivial cached Numba function (run twice: the second reads the on-disk cache, as certa's kernels
are read), the floor of any process with a Numba kernel. "alloc MB" is the peak of what one timed call
allocates (``tracemalloc``, which numpy's buffers report to): the run's own working memory.

"limit" times, in one process and in interleaved rounds, on two threads (the stage's default here), the
machine's limit for the uniform scheme's replicate loop beside certa's: a minimal compiled loop that makes the
same B·n SFC64/Lemire draws (the same streams, ⌈B/256⌉ blocks of 256 replicates split over the threads as the
stage splits them) and sums the drawn values of each replicate in two interleaved accumulators, with nothing
else (no rejection test, no weights, no recording): "limit-1" one stream at a time, "limit-2" two streams in
lockstep (the processor overlaps their independent SFC64 chains); the limit is the faster of the two. Beside it:
the replicate loop alone (``weighted_mean_replicates``: checks, streams, threads, θ* = Σtd / Σt), the stage's
kernel (``weighted_mean_bootstrap_ci``: the same plus BCa and the recorded quantiles), and the whole stage
through ``engine.run``; each as a ratio to the limit against the goal of 1.5×. The limit's sums equal the
kernel's numerators bit for bit on every replicate of a stream before its first Lemire rejection (counted and
printed; the limit rejects nothing, so later draws of that stream are shifted): both make the same draws and
additions.

    PYTHONPATH=. python3 bench/paired_bootstrap.py                 # n = 10 000 windows, B = 10 000
    PYTHONPATH=. python3 bench/paired_bootstrap.py --repeats 7 --cases stage-1.1.0-uniform,scipy-batch500
    PYTHONPATH=. python3 bench/paired_bootstrap.py --cases limit --repeats 9   # the limit section alone
    PYTHONPATH=. python3 bench/paired_bootstrap.py --json                      # every figure as one JSON object

Data: baseline mean NLL 2 + Gamma(4, 0.25), subject = baseline + N(0.01, 0.1) + Exp(0.02) per window, token
counts U{64..2047}, seed 20261121; both arms passed to ``engine.run`` as in-memory tables (the engine hashes
their canonical CSV bytes, pairs the windows by id, bootstraps, builds the certificate; no ledger).
The scipy reference is ``scipy.stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True,
method='BCa', batch=500)`` on the same paired deltas and token counts (the ``uniform`` scheme's statistic).

Timing: ``--repeats`` calls per case after one untimed warm-up call (which loads numba and the compiled
kernels from the on-disk cache, or compiles them: reported as "first call"); the best and the median wall
time, and the median process CPU time (all threads). Speed-ups are scipy's time over certa's, best over best
(the wall figure least disturbed by other jobs on a shared machine), median over median, and CPU over CPU
(all threads: what the work costs, whatever the load; on two idle cores certa's 2-thread wall time is about
half its kernel CPU time plus the rest of the run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "baseline": "imports, engine, data; no run",
    "stage-1.1.0-uniform": "engine.run, paired.ppl_ratio@1.1.0, scheme uniform (compiled SFC64)",
    "stage-1.1.0-token_weighted": "engine.run, paired.ppl_ratio@1.1.0, scheme token_weighted (alias method)",
    "stage-1.1.0-uniform-1thread": "as stage-1.1.0-uniform on one thread (same certificate)",
    "stage-1.0.0-uniform": "engine.run, paired.ppl_ratio@1.0.0 (numpy PCG64 blocks), reference",
    "stage-1.0.0-token_weighted": "engine.run, paired.ppl_ratio@1.0.0, scheme token_weighted, reference",
    "kernel-1.1.0-uniform": "weighted_mean_bootstrap_ci only (1.1.0, uniform)",
    "kernel-1.1.0-token_weighted": "weighted_mean_bootstrap_ci only (1.1.0, token_weighted)",
    "scipy-batch500": "scipy.stats.bootstrap BCa, batch=500",
    "numba-floor": "python + numpy + one trivial cached Numba function called: the floor of any Numba process",
    "limit": "a minimal compiled draw-and-sum loop vs the replicate loop, the kernel and the stage, in one process",
}

GOALS = {"stage-1.1.0-uniform": 25.0, "stage-1.1.0-token_weighted": 10.0}
MEMORY_GOAL_MB = 150.0
LIMIT_GOAL = 1.5
"""The stage's kernel (``weighted_mean_bootstrap_ci``, uniform) within this factor of the limit, two threads."""
LIMIT_THREADS = 2

SPEC = """\
certa: 1
name: bench-paired
seed: 1
profile: dev
inputs:
  baseline: {{path: baseline.csv}}
  subject: {{path: subject.csv}}
stages:
  - id: ratio
    use: paired.ppl_ratio@{version}
    with: {{baseline: baseline, subject: subject, replicates: {replicates}, scheme: {scheme}}}
"""


def _data(n: int):
    import numpy as np

    g = np.random.default_rng(20261121)
    tokens = g.integers(64, 2048, n)
    base = 2.0 + g.gamma(4.0, 0.25, n)
    subj = base + g.normal(0.01, 0.1, n) + g.exponential(0.02, n)
    ids = [f"w{i:06d}" for i in range(n)]
    inputs = {"baseline": {"window_id": ids, "tokens": tokens, "mean_nll": base},
              "subject": {"window_id": ids, "tokens": tokens, "mean_nll": subj}}
    return inputs, subj - base, tokens.astype(np.float64)


def run_case(case: str, n: int, replicates: int, repeats: int) -> dict:
    """Run one case in this process and return its figures (called in the subprocess)."""
    import resource
    import tracemalloc

    import numpy as np

    if case == "numba-floor":
        return _numba_floor()
    if case == "limit":
        return _limit(n, replicates, repeats)

    from certa import engine
    from certa.engine.core.stats.bootstrap import weighted_mean as bootstrap

    inputs, d, t = _data(n)

    def weighted_mean(d, t, axis=-1):
        return (t * d).sum(axis) / t.sum(axis)

    if case.endswith("-1thread"):
        from certa.engine.core.stats.kernels import compiled

        compiled.THREADS = 1

    def call():
        if case == "baseline":
            return None
        if case.startswith("stage-"):
            _, version, scheme = case.removesuffix("-1thread").split("-", 2)
            spec = SPEC.format(version=version, replicates=replicates, scheme=scheme)
            ci = engine.run(spec, inputs=inputs).certificate["content"]["stages"]["ratio"]["primary_metric"]["ci"]
            return ci[0], ci[1]
        if case.startswith("kernel-"):
            ci = bootstrap.weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1), replicates=replicates,
                                                      scheme=case.split("-", 2)[2])
            return ci.low, ci.high
        from scipy import stats  # only this case imports scipy.stats (75 MB resident)

        res = stats.bootstrap((d, t), weighted_mean, paired=True, vectorized=True, method="BCa",
                              n_resamples=replicates, batch=500, rng=np.random.default_rng(1))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    start = time.perf_counter()
    call()                                             # warm-up: numba import, kernel cache load or compile
    first = time.perf_counter() - start
    times, cpu, ci = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        ci = call()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)   # all threads of the process, user + system
    tracemalloc.start()  # numpy reports its buffers to tracemalloc: the run's own allocations, at their peak
    call()
    allocated = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"case": case, "seconds": statistics.median(times), "min_seconds": min(times), "first_seconds": first,
            "cpu_seconds": statistics.median(cpu), "peak_rss_mb": peak_kib * 1024 / 1e6, "ci": ci,
            "allocated_mb": allocated / 1e6}


_FLOOR_KERNEL = """
import numba

@numba.njit(cache=True, nogil=True)
def total(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s
"""


def _numba_floor() -> dict:
    """Peak RSS of a process that imports numpy and Numba and calls one trivial cached compiled loop: what
    any certa stage with a Numba kernel costs before its own data (the kernel module lives in a temporary
    folder, so its on-disk cache does too; the second process run reads it, as certa's kernels are read)."""
    import resource

    import numpy as np

    start = time.perf_counter()
    _cached_module("floor_kernel", _FLOOR_KERNEL).total(np.ones(10))
    first = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"case": "numba-floor", "seconds": first, "min_seconds": first, "first_seconds": first, "cpu_seconds": 0.0,
            "peak_rss_mb": peak_kib * 1024 / 1e6, "ci": None, "allocated_mb": 0.0}


_LIMIT_KERNELS = """
import numpy as np
import numba

M32 = np.uint64(0xFFFFFFFF)
S32 = np.uint64(32)


@numba.njit(nogil=True, cache=True)
def one_stream(values, states, rows_per_stream, out):
    n = values.shape[0]
    n64 = np.uint64(n)
    for s in range(states.shape[0]):
        a, b, c, counter = states[s, 0], states[s, 1], states[s, 2], states[s, 3]
        for r in range(s * rows_per_stream, min((s + 1) * rows_per_stream, out.shape[0])):
            sum0 = 0.0
            sum1 = 0.0
            for _ in range(n // 2):
                x = a + b + counter
                a = b ^ (b >> np.uint64(11))
                b = c + (c << np.uint64(3))
                c = ((c << np.uint64(24)) | (c >> np.uint64(40))) + x
                counter += np.uint64(1)
                sum0 += values[((x & M32) * n64) >> S32]
                sum1 += values[((x >> S32) * n64) >> S32]
            out[r] = sum0 + sum1


@numba.njit(nogil=True, cache=True)
def two_streams(values, states, rows_per_stream, out):
    n = values.shape[0]
    n64 = np.uint64(n)
    rows = out.shape[0]
    for s in range(0, states.shape[0], 2):
        a, b, c, counter = states[s, 0], states[s, 1], states[s, 2], states[s, 3]
        t = min(s + 1, states.shape[0] - 1)
        e, f, g, counter2 = states[t, 0], states[t, 1], states[t, 2], states[t, 3]
        for q in range(rows_per_stream):
            r = s * rows_per_stream + q
            r2 = r + rows_per_stream
            if r >= rows:
                break
            sum0 = 0.0
            sum1 = 0.0
            sum2 = 0.0
            sum3 = 0.0
            if t > s and r2 < rows:
                for _ in range(n // 2):
                    x = a + b + counter
                    a = b ^ (b >> np.uint64(11))
                    b = c + (c << np.uint64(3))
                    c = ((c << np.uint64(24)) | (c >> np.uint64(40))) + x
                    counter += np.uint64(1)
                    y = e + f + counter2
                    e = f ^ (f >> np.uint64(11))
                    f = g + (g << np.uint64(3))
                    g = ((g << np.uint64(24)) | (g >> np.uint64(40))) + y
                    counter2 += np.uint64(1)
                    sum0 += values[((x & M32) * n64) >> S32]
                    sum1 += values[((x >> S32) * n64) >> S32]
                    sum2 += values[((y & M32) * n64) >> S32]
                    sum3 += values[((y >> S32) * n64) >> S32]
                out[r2] = sum2 + sum3
            else:
                for _ in range(n // 2):
                    x = a + b + counter
                    a = b ^ (b >> np.uint64(11))
                    b = c + (c << np.uint64(3))
                    c = ((c << np.uint64(24)) | (c >> np.uint64(40))) + x
                    counter += np.uint64(1)
                    sum0 += values[((x & M32) * n64) >> S32]
                    sum1 += values[((x >> S32) * n64) >> S32]
            out[r] = sum0 + sum1
"""


def _cached_module(name: str, source: str):
    """Import ``source`` as module ``name`` from a temporary folder (rewritten only when changed: Numba's
    on-disk cache is keyed on the file's modification time)."""
    import importlib
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), "certa-bench-kernels")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".py")
    if not os.path.exists(path) or Path(path).read_text(encoding="utf-8") != source:
        Path(path).write_text(source, encoding="utf-8")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def _limit(n: int, replicates: int, repeats: int) -> dict:
    """The limit, the replicate loop, the kernel and the stage (uniform, 1.1.0), timed in interleaved rounds in
    this process on ``LIMIT_THREADS`` threads: best wall and best CPU (all threads) of ``repeats`` calls each."""
    import numpy as np

    from certa import engine
    from certa.engine.core.stats.bootstrap import weighted_mean as bootstrap
    from certa.engine.core.stats.kernels import compiled
    from certa.engine.core.stats.kernels.sfc64 import resampled_sums, spawned_sfc64_states

    compiled.THREADS = LIMIT_THREADS       # the stage's default thread count on this bench's two-core machine
    limits = _cached_module("certa_bench_limit", _LIMIT_KERNELS)
    inputs, d, t = _data(n)
    block = bootstrap.REPLICATE_BLOCK
    blocks = -(-replicates // block)
    values = t * d
    states = spawned_sfc64_states(np.random.default_rng(1), blocks)  # the streams the calls below draw
    out = np.empty(replicates)

    def limit(loop):
        def call() -> None:
            def work(part: slice) -> None:
                loop(values, states[part], block, out[part.start * block:min(part.stop * block, replicates)])
            compiled.on_chunks(work, blocks, max_rows=4, threads=LIMIT_THREADS)
        return call

    spec = SPEC.format(version="1.1.0", replicates=replicates, scheme="uniform")
    calls = {
        "limit-1": limit(limits.one_stream),
        "limit-2": limit(limits.two_streams),
        "replicates": lambda: bootstrap.weighted_mean_replicates(d, t, rng=np.random.default_rng(1),
                                                                 replicates=replicates, threads=LIMIT_THREADS),
        "kernel": lambda: bootstrap.weighted_mean_bootstrap_ci(d, t, rng=np.random.default_rng(1),
                                                               replicates=replicates, threads=LIMIT_THREADS),
        "stage": lambda: engine.run(spec, inputs=inputs),
    }
    for call in calls.values():
        call()                                       # compile or load from the on-disk cache
    wall = {name: [] for name in calls}
    cpu = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)

    calls["limit-1"]()
    numerator, denominator = np.empty(replicates), np.empty(replicates)
    resampled_sums(values[None, :], t[None, :], None, None, states, block, numerator, denominator, None)
    same = int(np.count_nonzero(out == numerator))
    draws = n * replicates
    return {"case": "limit", "n": n, "replicates": replicates, "threads": LIMIT_THREADS, "draws": draws,
            "goal": LIMIT_GOAL, "sums_equal": same,
            "wall": {name: min(v) for name, v in wall.items()},
            "median_wall": {name: statistics.median(v) for name, v in wall.items()},
            "cpu": {name: min(v) for name, v in cpu.items()}}


def _limit_lines(r: dict) -> list[str]:
    """The limit section as text: figures, ns per draw, ratios to the limit and the goal's verdict."""
    limit = min(r["wall"]["limit-1"], r["wall"]["limit-2"])
    limit_cpu = min(r["cpu"]["limit-1"], r["cpu"]["limit-2"])
    lines = [f"limit: n = {r['n']}, B = {r['replicates']} ({r['draws'] / 1e6:.0f}M draws), {r['threads']} threads, "
             f"best of interleaved rounds in one process",
             f"{'':<12} {'best wall s':>11} {'median s':>9} {'CPU s':>7} {'ns/draw CPU':>12} {'wall/limit':>11} "
             f"{'CPU/limit':>10}"]
    for name in r["wall"]:
        lines.append(f"{name:<12} {r['wall'][name]:11.4f} {r['median_wall'][name]:9.4f} {r['cpu'][name]:7.4f} "
                     f"{r['cpu'][name] / r['draws'] * 1e9:12.2f} {r['wall'][name] / limit:10.2f}x "
                     f"{r['cpu'][name] / limit_cpu:9.2f}x")
    kernel = r["wall"]["kernel"] / limit
    lines.append(f"the limit is the faster of limit-1 and limit-2; its sums equal the kernel's numerators bit for "
                 f"bit on {r['sums_equal']} of {r['replicates']} replicates (the others come after a Lemire "
                 "rejection in their stream, which the limit does not make, so their draws are shifted)")
    lines.append(f"kernel (weighted_mean_bootstrap_ci) / limit: {kernel:.2f}x wall, "
                 f"{r['cpu']['kernel'] / limit_cpu:.2f}x CPU; goal <= {r['goal']:g}x (wall, {r['threads']} threads): "
                 f"{'met' if kernel <= r['goal'] else 'NOT met'}; the stage through engine.run: "
                 f"{r['wall']['stage'] / limit:.2f}x wall")
    return lines


def summary(results: dict) -> dict:
    """The headline figures of a run: speed-ups over scipy (best wall, median wall, CPU) with their goals,
    peak RSS against the memory goal, and the limit section's ratios (``bench/figures.py`` reads these)."""
    out: dict = {"speedups": {}, "memory": {}}
    ref = results.get("scipy-batch500")
    for case, r in results.items():
        if ref and case not in ("scipy-batch500", "baseline", "numba-floor", "limit"):
            out["speedups"][case] = {"best": ref["min_seconds"] / r["min_seconds"],
                                     "median": ref["seconds"] / r["seconds"],
                                     "cpu": ref["cpu_seconds"] / r["cpu_seconds"], "goal": GOALS.get(case)}
    for case in GOALS:
        if case in results:
            out["memory"][case] = {"peak_rss_mb": results[case]["peak_rss_mb"],
                                   "allocated_mb": results[case]["allocated_mb"], "goal_mb": MEMORY_GOAL_MB}
    if "limit" in results:
        r = results["limit"]
        limit = min(r["wall"]["limit-1"], r["wall"]["limit-2"])
        limit_cpu = min(r["cpu"]["limit-1"], r["cpu"]["limit-2"])
        out["limit"] = {"seconds": limit, "cpu_seconds": limit_cpu, "goal": r["goal"],
                        "wall_ratio": {k: v / limit for k, v in r["wall"].items()},
                        "cpu_ratio": {k: v / limit_cpu for k, v in r["cpu"].items()}}
    return out


def _print_text(results: dict, figures: dict, args: argparse.Namespace, load: tuple[str, str]) -> None:
    cases = {case: r for case, r in results.items() if case != "limit"}
    print(f"paired.ppl_ratio end to end: n = {args.n} windows, B = {args.replicates} replicates, BCa 95%, "
          f"best and median of {args.repeats} calls after a warm-up, one subprocess per case ({os.cpu_count()} CPUs)")
    print(f"load average (1, 5, 15 min) before: {load[0]}; after: {load[1]} "
          "(other jobs inflate wall times, the 2-thread cases most)")
    if cases:
        print(f"{'case':<28} {'best s':>7} {'median s':>9} {'CPU s':>7} {'first s':>8} {'peak RSS MB':>12} "
              f"{'alloc MB':>9}  CI")
    for case, r in cases.items():
        ci = "" if r["ci"] is None else f"[{r['ci'][0]:.8f}, {r['ci'][1]:.8f}]"
        print(f"{case:<28} {r['min_seconds']:7.3f} {r['seconds']:9.3f} {r['cpu_seconds']:7.3f} "
              f"{r['first_seconds']:8.3f} {r['peak_rss_mb']:12.1f} {r['allocated_mb']:9.1f}  {ci}")
    if cases:
        print("alloc MB: peak of the memory one call allocates (tracemalloc, numpy buffers included); peak RSS: the "
              "whole process, libraries included")
    for case, f in figures["speedups"].items():
        verdict = "" if f["goal"] is None else \
            f"   goal >= {f['goal']:g}x: {'met' if f['best'] >= f['goal'] else 'NOT met'} (best)"
        print(f"speed-up {case:<28} vs scipy batch=500: best {f['best']:5.1f}x, median {f['median']:5.1f}x, "
              f"CPU {f['cpu']:5.1f}x{verdict}")
    base = results.get("baseline")
    for case, m in figures["memory"].items():
        extra = "" if base is None else f" ({m['peak_rss_mb'] - base['peak_rss_mb']:+.1f} MB over the baseline process)"
        print(f"peak RSS {case}: {m['peak_rss_mb']:.1f} MB{extra}, of which the run allocates "
              f"{m['allocated_mb']:.1f} MB; goal <= {MEMORY_GOAL_MB:g} MB: "
              f"{'met' if m['peak_rss_mb'] <= MEMORY_GOAL_MB else 'NOT met'}")
    if "numba-floor" in results:
        print(f"floor: a process that calls one trivial cached Numba function peaks at "
              f"{results['numba-floor']['peak_rss_mb']:.1f} MB (numpy, Numba, llvmlite and LLVM's code)")
    if "limit" in results:
        print()
        print("\n".join(_limit_lines(results["limit"])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="paired windows")
    parser.add_argument("--replicates", type=int, default=10_000, help="bootstrap replicates B")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per case (best and median reported)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES))
    parser.add_argument("--json", action="store_true", help="print one JSON object (cases, summary, load) instead")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case and print JSON
    args = parser.parse_args()

    if args.case:
        print(json.dumps(run_case(args.case, args.n, args.replicates, args.repeats)))
        return

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results = {}
    for case in args.cases.split(","):
        for _ in range(2 if case == "numba-floor" else 1):  # numba-floor: the second run reads the cache
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", case, "--n", str(args.n),
                                   "--replicates", str(args.replicates), "--repeats", str(args.repeats)],
                                  capture_output=True, text=True, env=env, check=True)
        results[case] = json.loads(proc.stdout.strip().splitlines()[-1])
    load = (load_before, " ".join(f"{x:.2f}" for x in os.getloadavg()))
    figures = summary(results)
    if args.json:
        print(json.dumps({"n": args.n, "replicates": args.replicates, "repeats": args.repeats,
                          "cpus": os.cpu_count(), "load_before": load[0], "load_after": load[1],
                          "cases": results, "summary": figures}))
    else:
        _print_text(results, figures, args, load)


if __name__ == "__main__":
    main()
