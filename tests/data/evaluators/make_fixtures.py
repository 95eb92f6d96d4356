"""Build the evaluator fixtures under ``tests/data/evaluators/`` by running the real tools offline.

Run with the evaluation-tools venv (see README.md beside this file)::

    evaltools/bin/python tests/data/evaluators/make_fixtures.py --js-tiktoken PATH/TO/package

Steps, all on the CPU and without a model or dataset hub:

1. texts: a perplexity set (docstring paragraphs of ``statistics``) and a multiple-choice set (sums), written
   as JSON Lines beside the task YAML files in ``tasks/``, and the four multiple-choice sets of the suite
   (sums, differences, products, the largest of four numbers) in ``tasks/suite/``; the tokenizer and model train
   on the docstrings of other standard-library modules;
2. models: a byte-level BPE (``tokenizers``) and a two-layer GPT-2 (``transformers``), seed 0, 300 Adam steps;
   the "subject" is the baseline with every 2-D weight fake-quantised to 4 bits (per-tensor absmax);
3. lm-evaluation-harness (``hf`` model on each local folder, tasks ``certa_ppl`` and ``certa_mc``,
   ``--log_samples``) into ``lm_eval/{baseline,subject}/``, and in a second run per model the tasks
   ``certa_ll`` (``loglikelihood``: per-document ``perplexity`` and ``acc``) and ``certa_gen``
   (``generate_until`` with two filters) into ``lm_eval_more/{baseline,subject}/``, and in a third run per model
   the group ``certa_suite`` (its subgroup ``certa_suite_arith``: ``certa_suite_add``, ``_sub``, ``_mul``; and
   ``certa_suite_cmp``) into ``lm_eval_suite/{baseline,subject}/``;
4. Inspect AI (``mockllm/model``, task ``inspect_task.py@certa_arith`` with seeds 1 and 2) into
   ``inspect/{baseline,subject}.eval`` and ``inspect log convert --to json`` into ``.json.gz`` beside them
   (the converted JSON, gzipped byte for byte to keep the repository small).

tiktoken's ``o200k_base`` (which the mock model counts tokens with) is rebuilt from the npm package
``js-tiktoken`` into ``TIKTOKEN_CACHE_DIR`` and checked against the SHA-256 tiktoken expects.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import inspect as pyinspect
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
TRAIN_MODULES = ("collections", "functools", "itertools", "json", "pathlib", "textwrap", "argparse", "decimal",
                 "fractions", "random", "string", "typing", "dataclasses", "enum", "csv", "shutil", "zipfile")


def module_paragraphs(name: str) -> list[str]:
    """The non-empty paragraphs of the docstrings of module ``name`` and its public members, in name order."""
    module = __import__(name)
    docs = [pyinspect.getdoc(module) or ""]
    docs += [pyinspect.getdoc(getattr(module, attr)) or "" for attr in sorted(dir(module)) if not attr.startswith("_")]
    paragraphs = (" ".join(p.split()) for doc in docs for p in doc.split("\n\n"))
    return [p for p in paragraphs if len(p) > 40]


def write_task_data() -> None:
    """The two local datasets the task YAML files name (JSON Lines, one row per document)."""
    texts = [p for p in module_paragraphs("statistics") if len(p) <= 700][:24]
    with open(HERE / "tasks" / "certa_ppl.jsonl", "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in texts)
    rng = random.Random(7)
    with open(HERE / "tasks" / "certa_mc.jsonl", "w", encoding="utf-8") as out:
        for _ in range(24):
            left, right = rng.randint(2, 40), rng.randint(2, 40)
            total = left + right
            row = choice_row(rng, f"what is {left} plus {right}?", total, (total + 1, total - 1, total + 2))
            out.write(json.dumps(row) + "\n")


def choice_row(rng: random.Random, question: str, answer: int, wrong: tuple[int, ...]) -> dict[str, object]:
    """One multiple-choice document: the question, the answer and the wrong choices in an order shuffled by
    ``rng``, and the answer's position (``label``)."""
    choices = [str(number) for number in (answer, *wrong)]
    rng.shuffle(choices)
    return {"question": f"Question: {question}\nAnswer:", "choices": choices, "label": choices.index(str(answer))}


def suite_row(task: str, rng: random.Random) -> dict[str, object]:
    """One document of the suite task ``task`` (``add``, ``sub``, ``mul`` or ``cmp``), four choices."""
    if task == "cmp":
        numbers = rng.sample(range(2, 100), 4)
        largest = max(numbers)
        listed = ", ".join(map(str, numbers[:3])) + f" and {numbers[3]}"
        return choice_row(rng, f"which is the largest of {listed}?", largest,
                          tuple(n for n in numbers if n != largest))
    if task == "mul":
        left, right = rng.randint(2, 12), rng.randint(2, 12)
        product = left * right
        return choice_row(rng, f"what is {left} times {right}?", product, (product + left, product - left, product + 1))
    left = rng.randint(20, 80)
    right = rng.randint(2, 40) if task == "add" else rng.randint(2, left - 2)
    result, word = (left + right, "plus") if task == "add" else (left - right, "minus")
    return choice_row(rng, f"what is {left} {word} {right}?", result, (result + 1, result - 1, result + 2))


SUITE_TASKS = {"add": (120, 11), "sub": (100, 12), "mul": (80, 13), "cmp": (60, 14)}
"""The suite's tasks (``certa_suite_<task>``): each one's number of documents and the seed of its data."""


def write_suite_data() -> None:
    """The data of the suite's four tasks, ``tasks/suite/certa_suite_<task>.jsonl`` (one row per document)."""
    for task, (documents, seed) in SUITE_TASKS.items():
        rng = random.Random(seed)
        with open(HERE / "tasks" / "suite" / f"certa_suite_{task}.jsonl", "w", encoding="utf-8") as out:
            out.writelines(json.dumps(suite_row(task, rng)) + "\n" for _ in range(documents))


def build_models(folder: Path) -> tuple[Path, Path]:
    """Train the tokenizer and the baseline model; save the baseline and its 4-bit fake-quantised copy."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    corpus = [p for name in TRAIN_MODULES for p in module_paragraphs(name)]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=1024, min_frequency=2, special_tokens=["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    tokenizer.pad_token = tokenizer.eos_token

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=256, vocab_size=len(tokenizer),
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config)
    ids = torch.tensor(tokenizer("<|endoftext|>".join(corpus))["input_ids"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    generator = torch.Generator().manual_seed(0)
    window = 128
    model.train()
    for step in range(1, 301):
        starts = torch.randint(0, len(ids) - window - 1, (16,), generator=generator)
        batch = torch.stack([ids[s:s + window] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    model.eval()

    baseline, subject = folder / "baseline", folder / "subject"
    for target in (baseline, subject):
        tokenizer.save_pretrained(target)
    model.save_pretrained(baseline, safe_serialization=True)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                step = parameter.abs().max() / 7
                parameter.copy_(torch.round(parameter / step).clamp(-7, 7) * step)
    model.save_pretrained(subject, safe_serialization=True)
    return baseline, subject


def provide_o200k(js_tiktoken: Path, cache: Path) -> None:
    """Rebuild tiktoken's ``o200k_base`` file from js-tiktoken's ranks (``dist/ranks/o200k_base.cjs``: lines of
    "<ignored> <first rank> <base64 token> ..."), placed where tiktoken looks for its download."""
    text = (js_tiktoken / "dist" / "ranks" / "o200k_base.cjs").read_text(encoding="utf-8")
    ranks = json.loads(text[text.index("{"):text.rindex("}") + 1])["bpe_ranks"]
    lines = []
    for row in filter(None, ranks.split("\n")):
        _, first, *tokens = row.split(" ")
        lines += [f"{token} {int(first) + i}" for i, token in enumerate(tokens)]
    data = ("\n".join(lines) + "\n").encode("ascii")
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        sys.exit("the ranks rebuilt from js-tiktoken do not match tiktoken's o200k_base SHA-256")
    base64.b64decode(lines[0].split()[0])  # the tokens are base64, as tiktoken reads them
    cache.mkdir(parents=True, exist_ok=True)
    (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(data)


def run(command: list[str], env: dict[str, str]) -> None:
    """Run a tool from this folder (its task files name their data relative to it), failing loudly."""
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=HERE, env=env, check=True)


LM_EVAL_RUNS = {"lm_eval": "certa_ppl,certa_mc", "lm_eval_more": "certa_ll,certa_gen",
                "lm_eval_suite": "certa_suite"}
"""The fixture folder of each lm-eval run and its tasks."""


def run_lm_eval(models: dict[str, Path], work: Path, env: dict[str, str], folder: str = "lm_eval") -> None:
    """lm-eval on both models, the tasks of ``LM_EVAL_RUNS[folder]``; keep each model's results and samples files
    under ``<folder>/<side>/``."""
    for side, model in models.items():
        output = work / f"{folder}_{side}"
        shutil.rmtree(output, ignore_errors=True)  # a previous run's files in --work would be kept beside these
        run([sys.executable, "-m", "lm_eval", "--model", "hf",
             "--model_args", f"pretrained={model},dtype=float32", "--tasks", LM_EVAL_RUNS[folder],
             "--include_path", "tasks", "--device", "cpu", "--batch_size", "4", "--seed", "0",
             "--log_samples", "--output_path", str(output)], env)
        kept = HERE / folder / side
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for produced in sorted(output.rglob("*.json*")):
            shutil.copy2(produced, kept / produced.name)


def run_inspect(work: Path, env: dict[str, str]) -> None:
    """Inspect's mock model, seeds 1 (baseline) and 2 (subject); the native ``.eval`` and its JSON form (gzipped)
    kept."""
    kept = HERE / "inspect"
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir()
    inspect = str(Path(sys.executable).with_name("inspect"))
    for side, seed, accuracy in (("baseline", 1, 0.8), ("subject", 2, 0.7)):
        logs = work / f"inspect_{side}"
        run([inspect, "eval", "inspect_task.py@certa_arith", "--model", "mockllm/model", "-T", f"seed={seed}",
             "-T", f"accuracy={accuracy}", "--log-dir", str(logs), "--log-format", "eval", "--display", "none"],
            env)
        (produced,) = logs.glob("*.eval")
        shutil.copy2(produced, kept / f"{side}.eval")
        run([inspect, "log", "convert", "--to", "json", "--output-dir", str(logs / "json"), str(produced)], env)
        (converted,) = (logs / "json").rglob("*.json")
        with gzip.GzipFile(kept / f"{side}.json.gz", "wb", mtime=0) as out:  # 570 KB of JSON, 25 KB gzipped
            out.write(converted.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--js-tiktoken", type=Path,
                        help="the unpacked npm package js-tiktoken (the folder holding dist/)")
    parser.add_argument("--work", type=Path, help="where models and raw outputs go (default: a temporary folder)")
    parser.add_argument("--only", choices=sorted(LM_EVAL_RUNS),
                        help="build the models and make only this lm-eval run's fixtures (no --js-tiktoken needed)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="certa-fixtures-"))
    env = {**os.environ, **OFFLINE, "TIKTOKEN_CACHE_DIR": str(work / "tiktoken"), "PYTHONHASHSEED": "0",
           "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    if args.only is None and args.js_tiktoken is None:
        parser.error("--js-tiktoken is required to make every fixture (or give --only)")
    if args.only is None:
        write_task_data()
    if args.only in (None, "lm_eval_suite"):
        write_suite_data()
    baseline, subject = build_models(work / "models")
    for folder in [args.only] if args.only else LM_EVAL_RUNS:
        run_lm_eval({"baseline": baseline, "subject": subject}, work, env, folder)
    if args.only:
        return
    provide_o200k(args.js_tiktoken, work / "tiktoken")
    run_inspect(work, env)
    print(f"fixtures written under {HERE}; models and raw outputs in {work}")


if __name__ == "__main__":
    main()
