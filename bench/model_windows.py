"""Speed of certa's window evaluation (``certa.engine.core.models.windows.window_nll``) against a plain transformers
loop over the same windows, in one run, for two locally built GPT-2 models.

    PYTHONPATH=. python3 bench/model_windows.py                    # both models, 1 thread, best of 3
    PYTHONPATH=. python3 bench/model_windows.py --threads 2 --repeats 5
    PYTHONPATH=. python3 bench/model_windows.py --models tiny --repeats 1 --json   # seconds; JSON rows last

Models (nothing is downloaded): ``tiny``, the example's baseline (``specs/model-perplexity/models/baseline``:
2 layers, n_embd 64, vocabulary 320, 129 k parameters); ``small``, a GPT-2 of 4 layers, n_embd 256, 4 heads,
vocabulary 50 257 (random weights, seed 0; 16 M parameters), written to a temporary folder and loaded through
``load_causal_lm`` like any model input. Text: the example's ``data/text.jsonl`` tokenized by the example's
tokenizer; token windows of ``--seq-len`` (128) with ``stride = seq_len - 1``.

Reference: the Hugging Face perplexity recipe one window at a time (``labels`` = the input with the context
positions set to -100, ``loss × targets``), the plain loop a user writes. certa is timed at batch size 1 (the
overhead of its bookkeeping: equal-length grouping, float32 log-softmax and gather, float64 sums; goal <= 10 %)
and at its default batch size 8. Each figure is the best of ``--repeats`` wall-clock timings after a warm-up,
in this one process (the machine may be shared: the load average is printed beside the figures). ``--json``
adds, as the last line, ``{"rows": [[what, measured, goal]], "models": {...}}``: the README table's row
(``bench/figures.py``) from the figures printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from figures import met
from timing import best_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "specs" / "model-perplexity"
GOAL = 1.10
"""certa's time at batch 1 over the plain loop's: overhead <= 10 %."""
MODELS = {"tiny": "tiny GPT-2", "small": "4-layer GPT-2"}


def _loaded(folder: Path):
    from certa.engine.core.input_formats import read_input
    from certa.engine.core.input_limits import InputLimits
    from certa.engine.core.models.manifest import folder_manifest
    from certa.engine.core.models.runtime import load_causal_lm

    manifest = folder_manifest(folder.name, folder, InputLimits())
    return load_causal_lm(replace(read_input(folder.name, manifest.raw, "hf-model", limits=InputLimits()), origin=folder))


def _small_model(folder: Path) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=4, n_embd=256, n_head=4, n_positions=512, vocab_size=50257)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    shutil.copyfile(EXAMPLE / "models" / "baseline" / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _plain_loop(model, windows) -> list[float]:
    import torch

    sums = []
    for start, length, targets in zip(windows.start.tolist(), windows.length.tolist(), windows.targets.tolist()):
        inputs = torch.from_numpy(windows.flat[start: start + length][None, :])
        labels = inputs.clone()
        labels[:, : length - targets] = -100
        with torch.no_grad():
            sums.append(float(model(input_ids=inputs, labels=labels).loss) * targets)
    return sums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--models", default="tiny,small", help="comma-separated subset of " + ", ".join(MODELS))
    parser.add_argument("--json", action="store_true", help="last line: the README table's row as JSON")
    args = parser.parse_args()
    chosen = args.models.split(",")
    if not chosen or any(name not in MODELS for name in chosen):
        parser.error(f"--models: choose from {', '.join(MODELS)}")
    from certa.engine.core.models.runtime import deterministic_torch, model_libraries
    from certa.engine.core.models.windows import token_windows, window_nll

    deterministic_torch(args.threads)
    texts = [json.loads(line)["text"] for line in (EXAMPLE / "data" / "text.jsonl").read_text().splitlines()]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.threads} thread(s); {model_libraries()}")
    load = os.getloadavg()[0]
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            folder = EXAMPLE / "models" / "baseline" if name == "tiny" else _small_model(Path(tmp) / "small")
            loaded = _loaded(folder)
            ids = [e.ids for e in loaded.tokenizer.encode_batch(texts, add_special_tokens=False)]
            windows = token_windows(ids, seq_len=args.seq_len, stride=args.seq_len - 1)
            scored = int(windows.targets.sum())
            window_nll(loaded.model, windows, batch_size=8)  # warm-up
            plain, reference = best_of(args.repeats, lambda: _plain_loop(loaded.model, windows))
            one, sums = best_of(args.repeats, lambda: window_nll(loaded.model, windows, batch_size=1))
            eight, _ = best_of(args.repeats, lambda: window_nll(loaded.model, windows, batch_size=8))
            deviation = max(abs(a - b) / abs(b) for a, b in zip(sums.tolist(), reference))
            print(f"{name}: {loaded.parameters:,} parameters, {windows.start.size} windows, {scored:,} tokens scored")
            print(f"  plain transformers loop (batch 1): {plain:.3f} s  {scored / plain:,.0f} tokens/s")
            print(f"  certa window_nll, batch 1:         {one:.3f} s  {scored / one:,.0f} tokens/s  "
                  f"ratio {one / plain:.3f} (goal <= {GOAL:.2f})")
            print(f"  certa window_nll, batch 8:         {eight:.3f} s  {scored / eight:,.0f} tokens/s  "
                  f"ratio {eight / plain:.3f}")
            print(f"  largest relative difference of the sums, certa vs plain: {deviation:.2e}")
            figures[name] = {"parameters": loaded.parameters, "vocabulary": loaded.model.config.vocab_size,
                             "windows": int(windows.start.size), "tokens": scored, "plain_s": plain,
                             "batch1_s": one, "batch8_s": eight, "deviation": deviation}
    if args.json:
        print(json.dumps({"rows": json_rows(figures, args.threads, load), "models": figures}))


def _size(parameters: int) -> str:
    return f"{parameters / 1e3:.0f} k" if parameters < 1e6 else f"{parameters / 1e6:.0f} M"


def json_rows(figures: dict[str, dict], threads: int, load: float) -> list[list[str]]:
    """The README table's row: each model's time at batch 1 and 8 over the plain loop's, and the goal's verdict."""
    tokens = sorted({f["tokens"] for f in figures.values()})
    parts = [f"{MODELS[name]} ({_size(f['parameters'])} parameters, vocabulary {f['vocabulary']:,}): "
             f"**{f['batch1_s'] / f['plain_s']:.2f}×** the loop's time at batch 1 ({f['tokens'] / f['batch1_s']:,.0f} "
             f"vs {f['tokens'] / f['plain_s']:,.0f} tokens/s), {f['batch8_s'] / f['plain_s']:.2f}× at batch 8"
             for name, f in figures.items()]
    deviation = max(f["deviation"] for f in figures.values())
    worst = max(f["batch1_s"] / f["plain_s"] for f in figures.values())
    return [[f"`model.windows`' evaluation vs the Hugging Face perplexity loop one window at a time, same windows "
             f"({' / '.join(f'{t:,}' for t in tokens)} tokens, {threads} thread(s); load average {load:.1f} on "
             f"{os.cpu_count()} CPUs) (`bench/model_windows.py`)",
             "; ".join(parts) + f"; sums equal to {deviation:.1e} relative",
             f"overhead ≤ 10 % (≤ {GOAL:.2f}×): {met(worst <= GOAL)}"]]


if __name__ == "__main__":
    main()
