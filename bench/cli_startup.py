"""The ``certa`` command as a user meets it, each case in fresh processes: wall time (median and best), CPU time
(user + system) and peak RSS of ``--help``, ``list``, ``validate``, ``show``, incremental ``verify`` on a big
ledger, a statistics example's run and a model example's run, beside ``python -c 'import numpy, scipy'`` (the
floor of any numerical Python command) and the interpreter alone (issue 36, item 3).
Goals: ``--help``, ``list``, ``show`` and ``verify --since-checkpoint`` under 0.2 s wall (the last three on a
ledger of 10^6 entries: ``--big-ledger``).

    python3 bench/cli_startup.py [--repeats 11] [--run-repeats 3] [--big-ledger WORKDIR/verify-1000000.db]
                                 [--new 1000] [--no-runs] [--wheel] [--certa 'COMMAND'] [--json]

By default the command is this checkout's ``cli.main`` under this interpreter (``python -c "import sys; from
certa.cli import main; sys.exit(main())"``: what the ``certa`` entry point runs). ``--certa`` times another command
instead (e.g. an installed entry point; note that a pyenv shim adds a shell to every start). ``--wheel`` also
times the quick commands through the ``certa`` entry point of this checkout's wheel installed in a clean venv
(bench/wheel_venv.py: compiled bytecode, no editable finder, none of site-packages' ``.pth`` files), beside that
venv's ``python -c pass``.

``--big-ledger FILE``: a ledger of 10^6 entries as ``bench/verify_scale.py --workdir WORKDIR`` builds and keeps
(``verify-1000000.db``). It is copied, its head signed (a checkpoint), ``--new`` entries recorded after it (the
tiny spec of ``bench/ledger.py``, as ``verify_scale.py`` appends them), and ``list``, ``show latest`` and ``verify
--checkpoint ... --since-checkpoint`` are timed on the copy.

The runs (``--run-repeats`` each, into a fresh ledger each time, ``--no-runs`` skips them): ``paired-ratio`` (a
bootstrap: Numba loads), ``conformal-pac`` (no bootstrap: no Numba) and, when torch and transformers are
installed, ``model-perplexity`` (two tiny GPT-2 models scored by ``model.windows``) beside the plain Hugging Face
loop doing that work (``_HF_LOOP``; goal: the run's peak RSS within 1.2× the loop's).

Measurement: one untimed run of each case first (files in the page cache, bytecode compiled), then fresh
processes; each process's CPU time and peak RSS are its ``os.wait4`` resource usage (``ru_maxrss``: Linux
counts the pages this bench's own small process had at the fork, about 10 MiB, the same for every case). When
``PYTHONDONTWRITEBYTECODE`` is set, the children run without it and with ``PYTHONPYCACHEPREFIX`` in a temporary
folder: bytecode is compiled once and read after, as in an installed certa. The load average is printed before
and after (the machine may be shared: compare the CPU column across machines). ``--json`` adds, as the last line,
``{"rows": [[what, measured, goal]], "cases": {...}}``: the README table's rows (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from figures import count, met  # noqa: E402  (bench/figures.py)
from wheel_venv import install_wheel, plain_env  # noqa: E402  (bench/wheel_venv.py)

CERTA = "import sys; from certa.cli import main; sys.exit(main())"  # what the ``certa`` entry point runs
GOAL_S = 0.2
REFERENCE = "python -c 'import numpy, scipy'"
HF_LOOP = "HF loop, model-perplexity's work (from_pretrained)"

_PREPARE = r"""
import importlib.util, json, shutil, sys
from pathlib import Path
root, source, work, new = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
from certa.ledger import Ledger
from certa.engine.foundation.signing import generate_key_pair, load_private_key
from certa.engine.services.checkpoints import sign_head
loader = importlib.util.spec_from_file_location("bench_ledger", root / "bench" / "ledger.py")
bench = importlib.util.module_from_spec(loader)
loader.loader.exec_module(bench)
db = work / "big.db"
shutil.copyfile(source, db)
private_pem, public_pem = generate_key_pair()
(work / "big.pub").write_bytes(public_pem)
recorder = bench.TinyRecorder(bench.write_tiny_spec(work / "tiny"), max(new - 4, 1))
with Ledger.open(db) as ledger:
    signed = sign_head(ledger, [load_private_key(private_pem)], work / "big.checkpoint").seq
    recorder.record(ledger)
    print(json.dumps({"checkpoint": signed, "added": ledger.head()[0] - signed}))
"""


_HF_LOOP = r"""
import json, sys
from pathlib import Path
import tokenizers, torch, transformers
example = Path(sys.argv[1])
torch.set_num_threads(1)
tokenizer = tokenizers.Tokenizer.from_file(str(example / "models" / "baseline" / "tokenizer.json"))
documents = [json.loads(line)["text"] for line in (example / "data" / "text.jsonl").read_text().splitlines()]
for arm in ("baseline", "subject"):
    model = transformers.AutoModelForCausalLM.from_pretrained(example / "models" / arm).eval()
    total = 0.0
    for ids in (tokenizer.encode(text).ids for text in documents):
        for begin in range(0, max(len(ids) - 32, 1), 32):
            window = torch.tensor([ids[begin:begin + 64]])
            labels = window.clone()
            labels[:, :32 if begin else 0] = -100
            if window.shape[1] > 1 and (labels != -100).sum() > 1:
                with torch.no_grad():
                    total += float(model(input_ids=window, labels=labels).loss)
    print(arm, total)
    del model
"""
"""The plain Hugging Face perplexity loop a user writes for the model example's work: ``from_pretrained`` of each
model, its documents in windows of 64 tokens, stride 32 (the spec's ``seq_len`` and ``stride``), one window per
forward pass, ``labels`` masking each window's context: the reference of ``certa run model-perplexity``'s RSS."""


def _child_env(tmp: Path) -> dict[str, str]:
    """The environment of the timed processes: bytecode cached (module docstring)."""
    env = dict(os.environ)
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None or sys.flags.dont_write_bytecode:
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


def _once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit status) of one fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, process.returncode


def _measure(argv: list[str], cwd: Path, env: dict[str, str], repeats: int,
             fresh: Path | None = None) -> dict[str, float]:
    """Median and best wall, best CPU and the largest peak RSS over ``repeats`` processes after one untimed one;
    ``fresh``: a ledger file removed before each process (a run records into a new ledger)."""
    samples = []
    for i in range(repeats + 1):
        if fresh is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{fresh}{suffix}").unlink(missing_ok=True)
        sample = _once(argv, cwd, env)
        if i:
            samples.append(sample)
    walls = [s[0] for s in samples]
    return {"median_s": statistics.median(walls), "best_s": min(walls), "cpu_s": min(s[1] for s in samples),
            "peak_mib": max(s[2] for s in samples), "status": max(s[3] for s in samples)}


def _quick_cases(certa: list[str], python: str, ledger: Path) -> dict[str, list[str]]:
    return {
        REFERENCE: [python, "-c", "import numpy, scipy"],
        "python -c pass (interpreter alone)": [python, "-c", "pass"],
        "certa --help": [*certa, "--help"],
        "certa run --help": [*certa, "run", "--help"],
        "certa list (1 run)": [*certa, "list", "--ledger", str(ledger)],
        "certa validate": [*certa, "validate", str(ROOT / "specs/paired-ratio/spec.yaml")],
        "certa show latest (1 run)": [*certa, "show", "latest", "--ledger", str(ledger)],
    }


def _big_cases(certa: list[str], work: Path, big: dict) -> dict[str, list[str]]:
    db, size = str(work / "big.db"), count(big["checkpoint"])
    return {
        f"certa list ({size} entries)": [*certa, "list", "--ledger", db],
        f"certa show latest ({size} entries)": [*certa, "show", "latest", "--ledger", db],
        f"certa verify --since-checkpoint ({big['added']} entries after {size})":
            [*certa, "verify", "--ledger", db, "--checkpoint", str(work / "big.checkpoint"), "--public-key",
             str(work / "big.pub"), "--since-checkpoint"],
    }


def _run_cases(certa: list[str], work: Path) -> dict[str, tuple[list[str], Path]]:
    specs = {"paired-ratio": "a bootstrap: Numba", "conformal-pac": "no bootstrap"}
    if all(importlib.util.find_spec(name) for name in ("torch", "transformers")):
        specs["model-perplexity"] = "two tiny GPT-2 models"
    cases = {f"certa run {name} ({what})": ([*certa, "run", str(ROOT / "specs" / name / "spec.yaml"), "--ledger",
                                             str(work / f"{name}.db")], work / f"{name}.db")
             for name, what in specs.items()}
    if "model-perplexity" in specs:
        cases[HF_LOOP] = ([sys.executable, "-c", _HF_LOOP, str(ROOT / "specs" / "model-perplexity")], work / "none")
    return cases


def _goal(name: str) -> bool:
    """Whether the issue sets ``name`` the 0.2 s goal (``--help``; ``list``, ``show`` and incremental ``verify``)."""
    return name == "certa --help" or name.startswith(("certa list", "certa show", "certa verify"))


def _print(title: str, results: dict[str, dict[str, float]]) -> None:
    reference = results.get(REFERENCE)
    print(title)
    print(f"{'command':<58} {'median s':>9} {'best s':>8} {'CPU s':>7} {'RSS MiB':>8} {'x numpy+scipy':>14}")
    for name, got in results.items():
        ratio = f"{got['best_s'] / reference['best_s']:.1f}x" if reference else ""
        goal = f"  goal < {GOAL_S:g} s: {met(got['median_s'] < GOAL_S)}" if _goal(name) else ""
        failed = f"  (exit status {got['status']})" if got["status"] else ""
        print(f"{name:<58} {got['median_s']:>9.3f} {got['best_s']:>8.3f} {got['cpu_s']:>7.2f} "
              f"{got['peak_mib']:>8.0f} {ratio:>14}{goal}{failed}")


def _rows(results: dict[str, dict[str, float]]) -> list[list[str]]:
    reference = results[REFERENCE]
    rows = [[f"`{REFERENCE}`, fresh process (the floor of a numerical command)",
             f"{reference['median_s']:.3f} s, {reference['cpu_s']:.2f} s CPU, {reference['peak_mib']:.0f} MiB", ""]]
    model_run = next((got for name, got in results.items() if name.startswith("certa run model-perplexity")), None)
    if model_run is not None and HF_LOOP in results:
        hf = results[HF_LOOP]
        rows.append(["peak RSS of `certa run model-perplexity` against the plain Hugging Face loop doing its work "
                     "(`from_pretrained`, the same documents and windows), fresh processes",
                     f"**{model_run['peak_mib'] / hf['peak_mib']:.2f}×** ({model_run['peak_mib']:.0f} vs "
                     f"{hf['peak_mib']:.0f} MiB; {model_run['median_s']:.2f} s vs {hf['median_s']:.2f} s)",
                     f"≤ 1.2×: {met(model_run['peak_mib'] <= 1.2 * hf['peak_mib'])}"])
    for name, got in results.items():
        if name.startswith("certa"):
            ratio = got["best_s"] / reference["best_s"]
            rows.append([f"`{name}` (median of fresh processes; best's CPU, largest peak RSS)",
                         f"**{got['median_s']:.3f} s** ({got['cpu_s']:.2f} s CPU, {got['peak_mib']:.0f} MiB; "
                         f"{ratio:.1f}× `import numpy, scipy`)",
                         f"< {GOAL_S:g} s: {met(got['median_s'] < GOAL_S)}" if _goal(name) else ""])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11, help="processes per quick command")
    parser.add_argument("--run-repeats", type=int, default=3, help="processes per example run")
    parser.add_argument("--big-ledger", type=Path, help="a 10^6-entry ledger of bench/verify_scale.py (copied)")
    parser.add_argument("--new", type=int, default=1000, help="entries recorded after the big ledger's checkpoint")
    parser.add_argument("--no-runs", action="store_true", help="skip the example runs")
    parser.add_argument("--certa", help="the command to time (default: this checkout's cli.main under this "
                                        "interpreter)")
    parser.add_argument("--wheel", action="store_true", help="also time this checkout's wheel installed in a "
                                                             "clean venv")
    parser.add_argument("--json", action="store_true", help="print the README rows as JSON on the last line")
    args = parser.parse_args()
    certa = shlex.split(args.certa) if args.certa else [sys.executable, "-c", CERTA]
    cwd = Path.cwd() if args.certa else ROOT  # the checkout's folder puts its cli first on sys.path
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = _child_env(tmp)
        ledger = tmp / "l.db"
        subprocess.run([*certa, "run", str(ROOT / "specs/paired-ratio/spec.yaml"), "--ledger", str(ledger)],
                       cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; bytecode "
              f"{'cached under PYTHONPYCACHEPREFIX' if 'PYTHONPYCACHEPREFIX' in env else 'cached'}")
        results = {name: _measure(argv, cwd, env, args.repeats)
                   for name, argv in _quick_cases(certa, sys.executable, ledger).items()}
        if args.big_ledger:
            done = subprocess.run([sys.executable, "-c", _PREPARE, str(ROOT), str(args.big_ledger), str(tmp),
                                   str(args.new)], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
            big = json.loads(done.stdout.strip().splitlines()[-1])
            results |= {name: _measure(argv, cwd, env, args.repeats)
                        for name, argv in _big_cases(certa, tmp, big).items()}
        if not args.no_runs:
            results |= {name: _measure(argv, cwd, env, args.run_repeats, fresh=db)
                        for name, (argv, db) in _run_cases(certa, tmp).items()}
        _print(f"{' '.join(certa) if args.certa else 'this checkout (python -c ...)'}:", results)
        if args.wheel:
            try:
                pythons = install_wheel(tmp / "wheel")
            except (subprocess.CalledProcessError, StopIteration) as error:
                print(f"installed wheel: not measured ({error})")
            else:
                entry = pythons["clean"].parent / ("certa.exe" if os.name == "nt" else "certa")
                _print("\nwheel installed in a clean venv (its certa entry point, its python):",
                       {name: _measure(argv, tmp, plain_env(), args.repeats)
                        for name, argv in _quick_cases([str(entry)], str(pythons["clean"]), ledger).items()})
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        if args.json:
            print(json.dumps({"rows": _rows(results), "cases": results}))
        shutil.rmtree(tmp / "pycache", ignore_errors=True)


if __name__ == "__main__":
    main()
