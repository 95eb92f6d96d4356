"""Build the example's reference model and write its prompts (deterministic on one machine): python3 make_data.py

Nothing is downloaded. ``models/reference`` is the tiny Llama the served-model tests serve, built by the same
builder as ``specs/served-perplexity`` (``tests/served/tiny_llama.py``'s ``build``, default arguments), so its
``model.safetensors`` and ``tokenizer.json`` are the served folder's, bit for bit, on the machine that built both.

``data/prompts.jsonl`` holds one prompt per JSON Lines row (``{"text": ...}``): the paragraphs of 200 to 600
characters of the help topics of Python's language reference (``pydoc_data.topics``), whitespace collapsed, each
once, in the order of the topics' names: text the model was not trained on. Another Python version has other
topics: the file is committed, and the spec pins its SHA-256.

Needs torch, transformers, tokenizers and safetensors (``pip install 'certa[models]' torch==2.13.0``).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from pydoc_data.topics import topics

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout: the test server's model builder in tests/served/

from tests.served.tiny_llama import build  # noqa: E402

SHORTEST, LONGEST = 200, 600
"""The paragraph lengths kept as prompts, in characters."""


def main() -> None:
    paragraphs = (" ".join(p.split()) for _, text in sorted(topics.items()) for p in re.split(r"\n\s*\n", text))
    prompts = list(dict.fromkeys(p for p in paragraphs if SHORTEST <= len(p) <= LONGEST))
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "data" / "prompts.jsonl").write_text("".join(json.dumps({"text": p}, ensure_ascii=False) + "\n"
                                                         for p in prompts), encoding="utf-8")
    models = HERE / "models"
    shutil.rmtree(models, ignore_errors=True)
    build(models / "reference")
    print(f"wrote {len(prompts)} prompts to data/prompts.jsonl and the tiny Llama to models/reference")


if __name__ == "__main__":
    main()
