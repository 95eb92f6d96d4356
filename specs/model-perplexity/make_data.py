"""Write the example's text and build its two tiny models (deterministic on one machine): python3 make_data.py

Nothing is downloaded. The text is the docstrings of Python standard-library modules, one document per JSON
Lines row: the first modules' docstrings train the models (``certa.engine.core.models.tiny.build_tiny_model``: a
byte-level BPE tokenizer and a 2-layer GPT-2, a few hundred kB), the others are the evaluation text
``data/text.jsonl``. ``models/baseline`` is the trained model; ``models/subject`` is a copy with every weight
matrix multiplied by (1 + 0.2·ε), ε ~ N(0, 1) (``perturbed_copy``): a slightly damaged model whose perplexity
ratio the spec certifies. The folders are committed (a model built on another machine may differ in its last
bits: the spec pins nothing, the certificate records every file's SHA-256).

Needs the models extra: pip install torch==2.13.0 'certa[models]'.
"""

from __future__ import annotations

import importlib
import json
import shutil
import textwrap
from pathlib import Path

from certa.engine.core.models.tiny import build_tiny_model, perturbed_copy

HERE = Path(__file__).resolve().parent
TRAIN = ("textwrap", "shutil", "hashlib", "sqlite3", "uuid", "os", "json", "csv", "argparse", "logging")
EVALUATE = ("collections", "pathlib", "datetime", "decimal", "fractions", "functools", "itertools", "random",
            "statistics", "string", "tarfile", "zipfile", "heapq", "bisect", "difflib", "email", "fnmatch",
            "glob", "gzip", "inspect", "ipaddress", "locale", "mimetypes", "numbers", "pickle", "pprint",
            "queue", "sched", "secrets", "selectors", "shlex", "signal", "socket", "struct", "subprocess",
            "tempfile", "threading", "timeit", "typing", "unittest", "urllib", "warnings", "weakref", "zlib")


def _docstrings(names: tuple[str, ...]) -> list[str]:
    texts = (textwrap.dedent(importlib.import_module(name).__doc__ or "").strip() for name in names)
    return [text for text in texts if text]


def main() -> None:
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    documents = _docstrings(EVALUATE)
    (data / "text.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in documents), encoding="utf-8")
    models = HERE / "models"
    shutil.rmtree(models, ignore_errors=True)
    baseline = build_tiny_model(models / "baseline", "\n".join(_docstrings(TRAIN)), seed=0, steps=120)
    perturbed_copy(baseline, models / "subject", scale=0.2, seed=1)
    print(f"wrote {len(documents)} documents to data/text.jsonl and models/baseline, models/subject")


if __name__ == "__main__":
    main()
