"""Memory and loading time of a ~1B-parameter bf16 checkpoint sharded in several files: ``certa run`` of a
``model.windows`` spec and certa's loader against ``transformers``' ``from_pretrained`` on the same folders, each
measured in a fresh process (issue 32, item 3).

    PYTHONPATH=. python3 bench/model_memory.py                       # build two ~1B models (4 GB), measure, delete
    PYTHONPATH=. python3 bench/model_memory.py --folder /tmp/mm --keep   # build once, keep the folders for re-runs
    PYTHONPATH=. python3 bench/model_memory.py --size small --json   # a 2-layer model: checks the plumbing only

Models (nothing is downloaded; random weights are fine): two ``LlamaForCausalLM`` of hidden size 2048, 16 layers
(32 heads), intermediate size 5632, vocabulary 32,000, untied output embedding (953 M parameters, 1.91 GB in
bfloat16), ``baseline`` and ``subject`` drawn from two seeds (N(0, 0.02²), norms 1), written with ``safetensors``
in shards of at most ``--shard-mb`` (500) MB with ``model.safetensors.index.json`` as ``save_pretrained`` writes
them; a byte-level BPE ``tokenizer.json`` trained with ``tokenizers`` on the example's text, whose post-processor
puts ``<s>`` first (Llama's). Text: the first ``--documents`` (4) documents of
``specs/model-perplexity/data/text.jsonl``, token windows of 128 (stride 127), one window per forward pass (as
the reference loop scores them), one torch thread.

Measured, each in its own process (peak RSS is the process's ``ru_maxrss`` from ``os.wait4``; seconds are wall
clock; the files are read once before, so every side finds them in the page cache):

1. ``certa run`` of a spec of one stage, ``model.windows`` 1.1.0 (``dtype: bfloat16``, then ``dtype: float32``),
   recorded in a fresh ledger: peak RSS against one checkpoint's size (goal <= 1.3x with bfloat16), wall time;
2. the same work done the usual way: ``from_pretrained(folder, dtype=...)`` for each model, the Hugging Face
   perplexity loop over the same windows (``labels`` masked, ``loss x targets``), the model deleted before the
   next: peak RSS and wall time, the reference of 1.;
3. loading alone, best of ``--repeats`` processes (wall clock, and the CPU seconds of all the process's threads,
   ``time.process_time``, of the same run): certa (the folder read as ``certa run`` reads the model a
   stage names, ``read_source(keep_weights=True)``: hashed, its weights' bytes kept, the model libraries imported
   while it hashes; then ``load_causal_lm``) against ``from_pretrained`` (goal: certa <= 1.2x), and the RSS each
   adds to its imports. Both sides import torch and transformers before the clock starts; the modules of the
   architecture are imported within it (by ``from_pretrained``, by certa while it hashes).

Figures before a change: run this script with the interpreter of an environment where ``certa`` is the older
checkout (its children use the same interpreter).

The load average is printed before and after (the machine may be shared). ``--json`` adds, as the last line,
``{"rows": [[what, measured, goal]], "figures": {...}}``: the README table's rows (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from figures import met  # noqa: E402  (bench/figures.py)

TEXT = ROOT / "specs" / "model-perplexity" / "data" / "text.jsonl"
CERTA = "import sys; from certa.cli import main; sys.exit(main())"  # what the ``certa`` entry point runs
RSS_GOAL = 1.3
"""Peak RSS of ``certa run`` (bfloat16) over one checkpoint's bytes."""
LOAD_GOAL = 1.2
"""certa's loading time (reading the input: hashing, libraries imported alongside; + ``load_causal_lm``) over
``from_pretrained``'s."""
SIZES = {"1b": {"hidden_size": 2048, "num_hidden_layers": 16, "intermediate_size": 5632, "num_attention_heads": 32,
                "vocab_size": 32000},
         "small": {"hidden_size": 256, "num_hidden_layers": 2, "intermediate_size": 688, "num_attention_heads": 4,
                   "vocab_size": 32000}}
ARMS = ("baseline", "subject")
SEQ_LEN, BATCH, THREADS = 128, 1, 1


# ---------------------------------------------------------------------------------------------- building the models


def _tokenizer(documents: list[str]) -> Any:
    import tokenizers

    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=2000, show_progress=False, special_tokens=["<unk>", "<s>", "</s>"],
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(documents, trainer=trainer)
    tokenizer.post_processor = tokenizers.processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                                        special_tokens=[("<s>", 1)])
    return tokenizer


def build_model(folder: Path, size: str, seed: int, shard_bytes: int, tokenizer: Any) -> int:
    """Write a random bfloat16 ``LlamaForCausalLM`` of ``SIZES[size]`` into ``folder`` (module docstring); its
    weights' bytes."""
    import safetensors.torch
    import torch
    import transformers

    config = transformers.LlamaConfig(**SIZES[size], max_position_embeddings=2048, bos_token_id=1, eos_token_id=2,
                                      tie_word_embeddings=False, dtype="bfloat16")
    with torch.device("meta"):
        shapes = {key: tuple(value.shape) for key, value in transformers.LlamaForCausalLM(config).state_dict().items()}
    folder.mkdir(parents=True)
    plan: list[list[str]] = [[]]
    sizes = [0]
    for key in sorted(shapes):
        nbytes = math.prod(shapes[key]) * 2
        if sizes[-1] and sizes[-1] + nbytes > shard_bytes:
            plan.append([])
            sizes.append(0)
        plan[-1].append(key)
        sizes[-1] += nbytes
    generator = torch.Generator().manual_seed(seed)
    weight_map = {}
    for i, keys in enumerate(plan, start=1):  # one shard in memory at a time
        name = f"model-{i:05d}-of-{len(plan):05d}.safetensors"
        shard = {key: (torch.ones(shapes[key]) if key.endswith("norm.weight")
                       else torch.randn(shapes[key], generator=generator) * 0.02).to(torch.bfloat16) for key in keys}
        safetensors.torch.save_file(shard, str(folder / name), metadata={"format": "pt"})
        weight_map.update({key: name for key in keys})
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    config.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    return sum(sizes)


def _parameters(size: str) -> int:
    """Parameters of a ``SIZES[size]`` Llama (untied embeddings, as many key/value heads as heads)."""
    c = SIZES[size]
    hidden, layers, inner, vocab = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"], c["vocab_size"]
    return 2 * vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * inner + 2 * hidden) + hidden


def _documents(count: int) -> list[str]:
    return [json.loads(line)["text"] for line in TEXT.read_text(encoding="utf-8").splitlines()][:count]


def _spec(folder: Path, dtype: str) -> Path:
    spec = folder / f"spec-{dtype}.yaml"
    spec.write_text(textwrap.dedent(f"""\
        certa: 1
        name: model-memory-{dtype}
        seed: 1
        profile: dev
        inputs:
          baseline: {{model: baseline}}
          subject: {{model: subject}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: baseline, subject: subject, text: text, unit: tokens,
              seq_len: {SEQ_LEN}, stride: {SEQ_LEN - 1}, batch_size: {BATCH}, threads: {THREADS}, dtype: {dtype}}}}}
        """), encoding="utf-8")
    return spec


# --------------------------------------------------------------------------------------------- measured processes


def _rss_mb() -> float:
    """This process's resident set now, MB (``/proc/self/statm``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _child_certa_load(folder: Path, dtype: str) -> dict[str, float]:
    from dataclasses import replace

    from certa.engine.core.input_formats import read_input
    from certa.engine.core.input_limits import InputLimits
    from certa.engine.core.inputs import read_source
    from certa.engine.core.models.manifest import MODEL_FORMAT
    from certa.engine.core.models.runtime import deterministic_torch, load_causal_lm
    from certa.engine.core.spec import InputSpec

    deterministic_torch(THREADS)
    imports = _rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    # what certa run does with the model a stage names (an older certa has no keep_weights: figures before it)
    kept = "keep_weights" in inspect.signature(read_source).parameters
    source = read_source(InputSpec(folder.name, str(folder), None, MODEL_FORMAT), profile="dev", limits=InputLimits(),
                         **({"keep_weights": True} if kept else {}))
    hashed = time.perf_counter()
    table = replace(read_input(folder.name, source.raw, MODEL_FORMAT, limits=InputLimits()), origin=folder,
                    **({"weights": source.weights} if kept else {}))
    loaded = load_causal_lm(table, dtype=dtype)
    done, cpu = time.perf_counter(), time.process_time() - cpu
    assert loaded.parameters > 0
    return {"manifest_s": hashed - start, "load_s": done - hashed, "total_s": done - start, "cpu_s": cpu,
            "imports_mb": imports, "forward_s": _first_forward(loaded.model)}


def _first_forward(model: Any) -> float:
    """Seconds of the model's first forward pass over 128 tokens (a lazily mapped checkpoint reads its pages here)."""
    import torch

    start = time.perf_counter()
    with torch.inference_mode():
        model(input_ids=torch.arange(1, SEQ_LEN + 1)[None, :])
    return time.perf_counter() - start


def _child_hf_load(folder: Path, dtype: str) -> dict[str, float]:
    import torch
    import transformers

    torch.set_num_threads(THREADS)
    transformers.logging.set_verbosity_error()
    imports = _rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype))
    done, cpu = time.perf_counter(), time.process_time() - cpu
    assert sum(p.numel() for p in model.parameters()) > 0
    return {"total_s": done - start, "cpu_s": cpu, "imports_mb": imports, "forward_s": _first_forward(model.eval())}


def _child_reference(folder: Path, dtype: str) -> dict[str, float]:
    """What a user writes without certa: each model loaded with from_pretrained and scored by the Hugging Face
    perplexity loop on the windows certa scores, then deleted."""
    import tokenizers
    import torch
    import transformers

    from certa.engine.core.models.windows import token_windows

    torch.set_num_threads(THREADS)
    transformers.logging.set_verbosity_error()
    texts = [json.loads(line)["text"] for line in (folder / "text.jsonl").read_text().splitlines()]
    loading = scoring = 0.0
    for arm in ARMS:
        tokenizer = tokenizers.Tokenizer.from_file(str(folder / arm / "tokenizer.json"))
        windows = token_windows([e.ids for e in tokenizer.encode_batch(texts)], seq_len=SEQ_LEN, stride=SEQ_LEN - 1)
        start = time.perf_counter()
        model = transformers.AutoModelForCausalLM.from_pretrained(folder / arm, dtype=getattr(torch, dtype))
        loading += time.perf_counter() - start
        model.eval()
        total = 0.0
        start = time.perf_counter()
        for first, length, targets in zip(windows.start.tolist(), windows.length.tolist(), windows.targets.tolist()):
            inputs = torch.from_numpy(windows.flat[first: first + length][None, :])
            labels = inputs.clone()
            labels[:, : length - targets] = -100
            with torch.no_grad():
                total += float(model(input_ids=inputs, labels=labels).loss) * targets
        assert math.isfinite(total)
        scoring += time.perf_counter() - start
        del model
    return {"load_s": loading, "score_s": scoring}


def _child_build(root: Path, how: str) -> dict[str, float]:
    size, shard_mb = how.split(",")
    tokenizer = _tokenizer([json.loads(line)["text"] for line in TEXT.read_text(encoding="utf-8").splitlines()])
    written = [build_model(root / arm, size, seed, int(shard_mb) * 10**6, tokenizer) for seed, arm in enumerate(ARMS)]
    return {"bytes": float(sum(written))}


CHILDREN = {"build": _child_build, "certa-load": _child_certa_load, "hf-load": _child_hf_load, "reference": _child_reference}


def _measure(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, standard output) of ``argv`` run as a fresh process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if process.returncode not in (0, 1):  # certa run: 1 is a FAIL, still a whole run
        raise SystemExit(f"{' '.join(map(str, argv))} exited {process.returncode}:\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss * 1024 / 1e6, stdout


def _child(kind: str, folder: Path, dtype: str, cwd: Path) -> tuple[float, float, dict[str, float]]:
    wall, peak, out = _measure([sys.executable, __file__, "--child", kind, str(folder), dtype], cwd)
    return wall, peak, json.loads(out.strip().splitlines()[-1])


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} / {five:.2f}"


def _warm(folders: list[Path]) -> None:
    for folder in folders:
        for path in sorted(folder.iterdir()):
            with open(path, "rb") as file:
                while file.read(1 << 20):
                    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="1b")
    parser.add_argument("--shard-mb", type=int, default=500)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="processes per loading figure (best of)")
    parser.add_argument("--folder", type=Path, help="where the models are built (default: a new folder in /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep --folder's models for the next run")
    parser.add_argument("--parts", default="runs,load", help="runs (certa run vs the reference), load, or both")
    parser.add_argument("--json", action="store_true", help="last line: the README table's rows as JSON")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "FOLDER", "DTYPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, folder, dtype = args.child
        print(json.dumps(CHILDREN[kind](Path(folder), dtype)))
        return
    root = args.folder or Path(tempfile.mkdtemp(prefix="certa-model-memory-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        figures = _run(root, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"rows": json_rows(figures), "figures": figures}))


def _run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    documents = _documents(args.documents)
    folders = [root / arm for arm in ARMS]
    if not all((folder / "model.safetensors.index.json").is_file() for folder in folders):
        free = shutil.disk_usage(root).free
        needed = 2 * 2 * _parameters(args.size)  # two models of bf16 weights
        if free < 1.5 * needed:
            raise SystemExit(f"{root} has {free / 1e9:.1f} GB free; two {args.size} models need {needed / 1e9:.1f} GB")
        print(f"building two {args.size} models in {root} ({free / 1e9:.0f} GB free)", flush=True)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        # in a child: this process imports no model library, so that a child's peak RSS is its own (Linux keeps
        # the high-water mark of the process that forked it)
        _measure([sys.executable, __file__, "--child", "build", str(root), f"{args.size},{args.shard_mb}"], root)
    (root / "text.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in documents), encoding="utf-8")
    checkpoint = sum(p.stat().st_size for p in folders[0].glob("*.safetensors"))
    shards = len(list(folders[0].glob("*.safetensors")))
    _warm(folders)
    print(f"load average before: {_load()} on {os.cpu_count()} CPUs; checkpoint {checkpoint / 1e9:.3f} GB in {shards} "
          f"shards (each model); {THREADS} torch thread(s)", flush=True)
    figures: dict[str, Any] = {"checkpoint_gb": checkpoint / 1e9, "shards": shards, "size": args.size,
                               "load_before": os.getloadavg()[0], "repeats": args.repeats}
    for dtype in ("bfloat16", "float32") if "runs" in args.parts else ():
        db = root / f"ledger-{dtype}.db"
        db.unlink(missing_ok=True)
        wall, peak, _ = _measure([sys.executable, "-c", CERTA, "run", str(_spec(root, dtype)), "--ledger", str(db)], root)
        ref_wall, ref_peak, ref = _child("reference", root, dtype, root)
        figures[dtype] = {"certa_run_s": wall, "certa_run_rss_mb": peak, "reference_s": ref_wall,
                          "reference_rss_mb": ref_peak, "reference_load_s": ref["load_s"],
                          "reference_score_s": ref["score_s"]}
        print(f"{dtype}: certa run {wall:.1f} s, peak RSS {peak:,.0f} MB = {peak / (checkpoint / 1e6):.2f}x the "
              f"checkpoint | from_pretrained + HF loop {ref_wall:.1f} s (loading {ref['load_s']:.1f} s, scoring "
              f"{ref['score_s']:.1f} s), peak RSS "
              f"{ref_peak:,.0f} MB = {ref_peak / (checkpoint / 1e6):.2f}x | certa/reference: time "
              f"{wall / ref_wall:.2f}x, RSS {peak / ref_peak:.2f}x", flush=True)
    for dtype in ("bfloat16",) if "load" in args.parts else ():
        best: dict[str, tuple[float, float, dict[str, float]]] = {}
        for _ in range(args.repeats):
            for kind in ("certa-load", "hf-load"):
                measured = _child(kind, folders[0], dtype, root)
                if kind not in best or measured[2]["total_s"] < best[kind][2]["total_s"]:
                    best[kind] = measured
        (_, certa_peak, certa), (_, hf_peak, hf) = best["certa-load"], best["hf-load"]
        figures[f"load_{dtype}"] = {"certa_s": certa["total_s"], "certa_cpu_s": certa["cpu_s"], "hf_cpu_s": hf["cpu_s"],
                                    "certa_manifest_s": certa["manifest_s"],
                                    "certa_load_s": certa["load_s"], "certa_rss_mb": certa_peak,
                                    "certa_imports_mb": certa["imports_mb"], "certa_forward_s": certa["forward_s"],
                                    "hf_s": hf["total_s"], "hf_rss_mb": hf_peak, "hf_imports_mb": hf["imports_mb"],
                                    "hf_forward_s": hf["forward_s"]}
        print(f"loading one model ({dtype}, best of {args.repeats} processes): certa {certa['total_s']:.2f} s, "
              f"CPU {certa['cpu_s']:.2f} s (reading the input {certa['manifest_s']:.2f} s + load_causal_lm {certa['load_s']:.2f} s), peak RSS "
              f"{certa_peak:,.0f} MB ({certa_peak - certa['imports_mb']:,.0f} MB over its imports) | from_pretrained "
              f"{hf['total_s']:.2f} s, CPU {hf['cpu_s']:.2f} s, peak RSS {hf_peak:,.0f} MB ({hf_peak - hf['imports_mb']:,.0f} MB over its "
              f"imports) | ratio {certa['total_s'] / hf['total_s']:.2f}x (goal <= {LOAD_GOAL}x); with the first "
              f"forward pass (128 tokens) {certa['total_s'] + certa['forward_s']:.2f} s vs "
              f"{hf['total_s'] + hf['forward_s']:.2f} s, ratio "
              f"{(certa['total_s'] + certa['forward_s']) / (hf['total_s'] + hf['forward_s']):.2f}x", flush=True)
    figures["load_after"] = os.getloadavg()[0]
    print(f"load average after: {_load()}")
    return figures


def json_rows(figures: dict[str, Any]) -> list[list[str]]:
    """The README table's rows from the figures printed (those of the parts measured)."""
    gb = figures["checkpoint_gb"]
    what = (f"two Llama models of {gb:.2f} GB each (bf16, {figures['shards']} shards; `bench/model_memory.py`, "
            f"load average {figures['load_before']:.1f}–{figures['load_after']:.1f} on {os.cpu_count()} CPUs)")
    rows = []
    if "bfloat16" in figures:
        bf16, f32 = figures["bfloat16"], figures["float32"]
        rss = bf16["certa_run_rss_mb"] / 1e3 / gb
        rows.append([f"peak RSS of `certa run` (`model.windows`, dtype bfloat16) against one checkpoint, {what}",
                     f"**{rss:.2f}×** ({bf16['certa_run_rss_mb']:,.0f} MB; from_pretrained and the HF loop "
                     f"{bf16['reference_rss_mb']:,.0f} MB); dtype float32 {f32['certa_run_rss_mb']:,.0f} MB "
                     f"({f32['certa_run_rss_mb'] / 1e3 / gb:.2f}×); the run {bf16['certa_run_s']:.1f} s vs "
                     f"{bf16['reference_s']:.1f} s", f"≤ {RSS_GOAL}×: {met(rss <= RSS_GOAL)}"])
    if "load_bfloat16" in figures:
        load = figures["load_bfloat16"]
        ratio = load["certa_s"] / load["hf_s"]
        ready = (load["certa_s"] + load["certa_forward_s"]) / (load["hf_s"] + load["hf_forward_s"])
        rows.append([f"loading one of those models: hashing its folder (the model libraries imported meanwhile) + "
                     f"`load_causal_lm` vs `from_pretrained(dtype=bfloat16)`, fresh processes, best of "
                     f"{figures['repeats']}",
                     f"**{ratio:.2f}×** ({load['certa_s']:.2f} s = {load['certa_manifest_s']:.2f} s reading the input + "
                     f"{load['certa_load_s']:.2f} s loading, vs {load['hf_s']:.2f} s, which reads no weight yet); "
                     f"{ready:.2f}× to the end of the first forward pass", f"≤ {LOAD_GOAL}×: {met(ratio <= LOAD_GOAL)}"])
    return rows


if __name__ == "__main__":
    main()
