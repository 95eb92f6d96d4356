"""Build the example's two tiny models and its prompt set (deterministic on one machine): python3 make_data.py

Nothing is downloaded. ``certa.engine.core.models.tiny`` trains a 2-layer GPT-2 (byte-level BPE tokenizer of 320
tokens, 64-dimensional embeddings) for 60 Adam steps on standard-library docstrings (textwrap, os, shutil,
hashlib, sqlite3, uuid) and writes ``models/base``; ``models/candidate`` is the same model with every weight
matrix multiplied by (1 + 0.05·ε), ε ~ N(0, 1) (seed 1): same tokenizer, same architecture, slightly different
weights, like a model after a light fine-tune or a lossy re-quantisation. ``data/prompts.jsonl`` holds one
prompt per line (``{"text": ...}``): the lines of 30 characters or more of other modules' docstrings (json, csv,
argparse, logging), text the models were not trained on.

The same Python and torch on the same machine give bit-identical files; another platform may give different
weights in the last bits, so spec.yaml pins only the prompts' SHA-256 and the models are identified in the
certificate by their manifests (every file's SHA-256). Needs torch, transformers, tokenizers and safetensors
(``pip install 'certa[models]' torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import sys
import textwrap
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout: the engine next to specs/

from certa.engine.core.models.tiny import build_tiny_model, perturbed_copy  # noqa: E402

TRAINING_TEXT = "\n".join(filter(None, (textwrap.dedent(m.__doc__ or "")
                                        for m in (textwrap, os, shutil, hashlib, sqlite3, uuid))))
PROMPT_TEXT = "\n".join(textwrap.dedent(m.__doc__ or "") for m in (json, csv, argparse, logging))


def main() -> None:
    models = HERE / "models"
    shutil.rmtree(models, ignore_errors=True)
    base = build_tiny_model(models / "base", TRAINING_TEXT, seed=0)
    perturbed_copy(base, models / "candidate", scale=0.05, seed=1)
    prompts = [line.strip() for line in PROMPT_TEXT.splitlines() if len(line.strip()) >= 30]
    lines = "".join(json.dumps({"text": p}, ensure_ascii=False) + "\n" for p in prompts)
    (HERE / "data").mkdir(exist_ok=True)
    (HERE / "data" / "prompts.jsonl").write_text(lines, encoding="utf-8")
    print(f"wrote {models / 'base'}, {models / 'candidate'} and {len(prompts)} prompts in data/prompts.jsonl")


if __name__ == "__main__":
    main()
