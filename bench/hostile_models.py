"""Hostile model folders refused in bounded time and memory: each case is one ``certa run --no-record`` of a
``model.windows`` spec in a fresh process, timed, with its peak RSS (``bench/hostile_inputs.py``'s ``measure``:
``os.wait4``, the kernel's accounting of that child alone).

The folder is a tiny GPT-2 built here (``certa.engine.core.models.tiny``: 2 layers, 64 wide, 320 tokens; nothing
is downloaded) with one thing changed in the subject. Issue 31's goal: a configuration the weights cannot hold
(``n_layer: 20000`` beside the weights of 2 layers, ``num_labels: 10000000``) is refused before anything is
built, in about the time of the command's floor (start-up, imports, hashing, the refusal of a missing tensor
after the build of the right architecture) rather than in minutes. The floor is the row of a config naming a
tensor shape the weights do not have (refused after the build of the 2-layer architecture).

    python3 bench/hostile_models.py          # the cases below, about a minute

The last case names 20,000 layers in the weights' header as well (one 1-element tensor each), which the bound by
the tensor names' indices lets through: it is refused by the bound on what building costs (256 layers, then one
per 128 KiB of weights; ``certa.engine.core.models.architecture.LAYER_BUILD_BYTES``), where it took 54 s and 1.3 GB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import hostile_inputs  # noqa: E402
from hostile_inputs import CLI, measure  # noqa: E402
from tests.conftest import TINY_MODEL_TEXT, config_edit  # noqa: E402

SPEC = """\
certa: 1
name: hostile-model
seed: 5
profile: dev
inputs:
  base: {model: baseline}
  subj: {model: subject}
  text: {path: text.jsonl}
stages:
  - {id: w, use: model.windows, with: {baseline: base, subject: subj, text: text, column: body, seq_len: 32,
      stride: 24, batch_size: 8, unit: tokens}}
"""


def _named_layers(layers: int) -> Callable[[Path], None]:
    """``n_layer: layers`` and a header naming one 1-element tensor per layer (``extra.{i}.w``): the weights
    themselves claim the layers; refused by the bound on what building them costs."""
    def change(folder: Path) -> None:
        import safetensors.torch as st
        import torch

        state = st.load((folder / "model.safetensors").read_bytes())
        state.update({f"extra.{i}.w": torch.zeros(1) for i in range(layers)})
        st.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        config_edit(n_layer=layers)(folder)
    return change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    hostile_inputs.TIMEOUT = 300.0  # a case killed at 300 s shows exit -9
    from certa.engine.core.models.tiny import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        built = time.monotonic()
        model = build_tiny_model(work / "model", TINY_MODEL_TEXT, seed=0)
        print(f"tiny model built in {time.monotonic() - built:.1f} s")
        documents = [d for d in TINY_MODEL_TEXT.split("\n\n") if d.strip()][:8]
        cases: list[tuple[str, Callable[[Path], None] | None]] = [
            ("clean subject (evaluated, exit 0)", None),
            ("n_positions 0 (built, then refused)", config_edit(n_positions=0)),
            ("n_layer 20000", config_edit(n_layer=20000)),
            ("num_labels 10^7", config_edit(num_labels=10**7)),
            ("n_head 3 of n_embd 64", config_edit(n_head=3)),
            ("vocab_size 10^9", config_edit(vocab_size=10**9)),
            ("n_layer 20000, header names 20000", _named_layers(20000)),
        ]
        print(f"{'case':38} {'seconds':>8} {'peak MB':>8} {'exit':>4}  message")
        for label, change in cases:
            case = work / "case"
            shutil.rmtree(case, ignore_errors=True)
            case.mkdir()
            for arm in ("baseline", "subject"):
                shutil.copytree(model, case / arm)
            if change is not None:
                change(case / "subject")
            (case / "text.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in documents))
            (case / "spec.yaml").write_text(SPEC)
            seconds, rss, code, message = measure([*CLI, "run", str(case / "spec.yaml"), "--no-record"], case)
            print(f"{label:38} {seconds:8.2f} {rss:8.0f} {code:>4}  {message[:140]}")


if __name__ == "__main__":
    main()
