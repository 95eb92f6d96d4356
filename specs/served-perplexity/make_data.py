"""Build the example's reference model and write its text (deterministic on one machine): python3 make_data.py

Nothing is downloaded. ``models/reference`` is the tiny Llama the served-model tests serve, built by the same
builder (``tests/served/tiny_llama.py``'s ``build``, default arguments: a 2-layer ``LlamaForCausalLM`` with a
300-token byte-level BPE tokenizer, trained for 120 Adam steps on standard-library docstrings). On the machine that
built the test server's folder its ``model.safetensors`` and ``tokenizer.json`` are bit-identical to the served ones
(``sha256sum models/reference/* $CERTA_TEST_VLLM_MODEL/*``); ``config.json`` and ``generation_config.json`` record the
transformers version that wrote them, so they differ when the server's venv pins another.

``data/text.jsonl`` holds one document per JSON Lines row (``{"text": ...}``): the help topics of Python's language
reference that ``help()`` shows (``pydoc_data.topics``) of at most 1,500 characters, in the order of their names,
each text once (``if`` and ``else`` share one): text the model was not trained on. Another Python version has other topics: the file is committed, and the spec
pins its SHA-256.

Needs torch, transformers, tokenizers and safetensors (``pip install 'certa[models]' torch==2.13.0``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from pydoc_data.topics import topics

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout: the test server's model builder in tests/served/

from tests.served.tiny_llama import build  # noqa: E402

MAX_CHARACTERS = 1500
"""The longest help topic kept as a document."""


def main() -> None:
    documents = list(dict.fromkeys(text for _, text in sorted(topics.items()) if len(text) <= MAX_CHARACTERS))
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "data" / "text.jsonl").write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n"
                                                      for d in documents), encoding="utf-8")
    models = HERE / "models"
    shutil.rmtree(models, ignore_errors=True)
    build(models / "reference")
    print(f"wrote {len(documents)} documents to data/text.jsonl and the tiny Llama to models/reference")


if __name__ == "__main__":
    main()
