"""Hostile model folders (issue 31): each is a copy of a tiny local model with one thing wrong, run through
``certa run`` in-process. Every refusal is one ``error:`` line that names the input, the file and the problem,
exit 2 (an ``InputError``: never 1, which means FAIL), with no traceback and no ledger file left behind; a stale
weight file is refused in ci and release and, in dev, recorded and warned while the checkpoint's own weights are
evaluated; a configuration asking for 20,000 layers next to the weights of 2 is refused in milliseconds.

Each case is counted in the sweep's summary (``tests/adversarial/conftest.py``); the models are built once per
session by the ``tiny_models`` fixture (so these cases also carry the ``models`` marker)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TINY_MODEL_TEXT, config_edit, write_spec
from .conftest import check, invoke

pytestmark = pytest.mark.adversarial

DOCUMENTS = [d for d in TINY_MODEL_TEXT.split("\n\n") if d.strip()][:8]


def _spec(folder: Path, tiny_models: dict[str, Path], *, profile: str = "dev", signature: str = "") -> Path:
    for arm in ("baseline", "subject"):
        shutil.copytree(tiny_models[arm], folder / arm)
    (folder / "text.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in DOCUMENTS), encoding="utf-8")
    return write_spec(folder, f"""\
        certa: 1
        name: hostile-model
        seed: 5
        profile: {profile}
        inputs:
          base: {{model: baseline}}
          subj: {{model: subject{signature}}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: base, subject: subj, text: text, column: body,
              seq_len: 32, stride: 24, batch_size: 8, unit: tokens}}}}
          - {{id: ratio, use: paired.ppl_ratio, with: {{baseline: w.baseline, subject: w.subject, replicates: 200}}}}
        gates:
          - {{id: upper, metric: "ratio.token_perplexity.display_ci[1]", max: 2.0}}
        """)


def _weights(change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def rewrite(folder: Path) -> None:
        import safetensors.torch as st

        state = st.load((folder / "model.safetensors").read_bytes())
        st.save_file(change(state), str(folder / "model.safetensors"), metadata={"format": "pt"})
    return rewrite


def _torch():  # type: ignore[no-untyped-def]
    import torch
    return torch


def _text(relative: str, text: str | bytes) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        (folder / relative).write_bytes(text if isinstance(text, bytes) else text.encode())
    return write


def _link_loop(folder: Path) -> None:
    os.symlink("loop_b", folder / "loop_a")
    os.symlink("loop_a", folder / "loop_b")


def _larger_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.add_tokens(["the", "and", "of"])  # words of the text: ids past the weights' 320 rows
    tokenizer.save(str(folder / "tokenizer.json"))


def _index_without_shard(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-00001-of-00002.safetensors"}}')


def _truncated(folder: Path) -> None:
    raw = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(raw[: len(raw) // 2])


def _nan(state: dict) -> dict:
    state["transformer.ln_f.weight"] = _torch().full_like(state["transformer.ln_f.weight"], float("nan"))
    return state


def _overflowing(state: dict) -> dict:
    state["transformer.ln_f.weight"] = _torch().full_like(state["transformer.ln_f.weight"], 3e38)
    return state


def _reshaped(state: dict) -> dict:
    state["transformer.h.0.mlp.c_fc.weight"] = _torch().zeros(64, 255)
    return state


def _named_layers(folder: Path) -> None:
    """20,000 layers named by the weights' header too (one 1-element tensor each, ``extra.{i}.w``), which the
    bound by the names' indices lets through."""
    _weights(lambda state: {**state, **{f"extra.{i}.w": _torch().zeros(1) for i in range(20000)}})(folder)
    config_edit(n_layer=20000)(folder)


def _integers(state: dict) -> dict:
    state["transformer.ln_f.weight"] = state["transformer.ln_f.weight"].to(_torch().int32)
    return state


HOSTILE_FOLDERS: dict[str, tuple[Callable[[Path], None], str]] = {  # case: (change to the subject, the message)
    "tokenizer-malformed": (_text("tokenizer.json", '{"version": "1.0", "model": {"type": "BPE"'),
                            "input 'subj': tokenizer.json cannot be read by tokenizers .* .EOF while parsing"),
    "tokenizer-not-utf8": (_text("tokenizer.json", b"\xff\xfe{}"),
                           "input 'subj': tokenizer.json is not UTF-8 text .byte 0xff at position 0."),
    "tokenizer-beyond-weights": (_larger_tokenizer, "input '(base|subj)': tokenizer.json gives the text of input 'text' the "
                                                    "token id 32[0-9], but the model's weights embed 320 tokens"),
    "heads-not-dividing": (config_edit(n_head=3), "input 'subj': transformers .* cannot build the 'gpt2' architecture "
                                              "config.json describes .ValueError: `embed_dim` must be divisible"),
    "tensor-shape": (_weights(_reshaped), r"input 'subj': tensor transformer.h.0.mlp.c_fc.weight is \[64, 255\] in "
                                          r"model.safetensors, but the 'gpt2' architecture .* has it \[64, 256\]"),
    "tensor-integers": (_weights(_integers), "input 'subj': tensor transformer.ln_f.weight in model.safetensors holds "
                                             "I32 numbers"),
    "model-type-t5": (config_edit(model_type="t5"), "input 'subj': config.json's model_type 't5' is not a causal "
                                                "language model"),
    "model-type-unknown": (config_edit(model_type="nosuch"), "config.json's model_type 'nosuch' is not an architecture"),
    "activation-unknown": (config_edit(activation_function="nosuch"), "input 'subj': config.json's activation_function "
                                                                  "'nosuch' is not an activation"),
    "vocabulary-smaller": (config_edit(vocab_size=100), "input 'subj': config.json's vocab_size is 100, which is no "
                                                    r"dimension of any tensor of the weights \(model.safetensors"),
    "layers-20000": (config_edit(n_layer=20000), "input 'subj': config.json's n_layer is 20,000, but the weights "
                                             r"\(model.safetensors\) hold only 2"),
    "layers-20000-named": (_named_layers, "input 'subj': config.json's n_layer is 20,000: building that many costs "
                                          "about 2,500 MiB in Python objects, but the weights"),
    "labels-10-million": (config_edit(num_labels=10**7), "input 'subj': config.json's num_labels is 10,000,000"),
    "layers-not-a-number": (config_edit(n_layer="two"), "input 'subj': config.json's n_layer is 'two', not a count"),
    "config-nan": (_text("config.json", '{"model_type": "gpt2", "n_embd": NaN}'),
                   "input 'subj': config.json is not JSON .NaN is not a JSON number."),
    "positions-zero": (config_edit(n_positions=0), r"tensor transformer.wpe.weight is \[128, 64\] in model.safetensors"),
    "weights-truncated": (_truncated, "input 'subj': model.safetensors is not a valid safetensors file"),
    "weights-nan": (_weights(_nan), "input 'subj': tensor transformer.ln_f.weight in model.safetensors holds 64 NaN "
                                    "or infinite value"),
    "outputs-not-finite": (_weights(_overflowing), "input 'subj': the model computes a non-finite log-likelihood "
                                                   r"\(nan\) for \d+ of \d+ windows"),
    "link-loop": (_link_loop, "input 'subj': model file loop_a is a symbolic link that cannot be followed"),
    "link-dangling": (lambda f: os.symlink("absent.json", f / "extra.json"),
                      "input 'subj': model file extra.json is a symbolic link that cannot be followed"),
    "index-absent-shard": (_index_without_shard, "input 'subj': model.safetensors.index.json lists shard.s. the "
                                                 "folder .* does not hold: model-00001-of-00002.safetensors"),
    "stale-weights-ci": (lambda f: None, "input 'subj': the model folder holds 1 \\*.safetensors file.s. that are not "
                                         "its weights .zz_old/model.safetensors.; .* profile ci refuses"),
}
SLOW_BEFORE = {"layers-20000": 2.0, "layers-20000-named": 4.0, "labels-10-million": 2.0}
"""Cases that cost minutes (112 s, 54 s, 22 s) before they were refused: their refusal must take under these
seconds (the named layers' header takes longer to read and hash)."""


def _no_ledger(db: Path) -> tuple[Path, ...]:
    return db, Path(f"{db}-wal"), Path(f"{db}-journal"), Path(f"{db}-shm")


@pytest.mark.parametrize("case", list(HOSTILE_FOLDERS))
def test_hostile_model_folder(case: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    change, message = HOSTILE_FOLDERS[case]
    profile = "ci" if case == "stale-weights-ci" else "dev"
    spec = _spec(tmp_path, tiny_models, profile=profile)
    subject = tmp_path / "subject"
    change(subject)
    if case == "stale-weights-ci":
        (subject / "zz_old").mkdir()
        shutil.copyfile(tiny_models["baseline"] / "model.safetensors", subject / "zz_old" / "model.safetensors")
    if case == "tokenizer-beyond-weights":
        _larger_tokenizer(tmp_path / "baseline")  # one tokenizer for both: token windows
    db, cert = tmp_path / "ledger.db", tmp_path / "cert.json"
    started = time.monotonic()
    result = invoke("run", spec, "--ledger", db, "-o", cert)
    seconds = time.monotonic() - started
    check(f"model folder {case}", result, allowed={2}, folders=(tmp_path,), no_files=(*_no_ledger(db), cert))
    assert re.search(message, result.stderr), f"{case}: {result.stderr!r}"
    assert "internal error" not in result.stderr and "b'" not in result.stderr
    if case in SLOW_BEFORE:
        assert seconds < SLOW_BEFORE[case], f"{case}: refused after {seconds:.1f} s"


def test_stale_weights_in_dev_are_recorded_and_warned_and_the_checkpoint_is_evaluated(tiny_models, tmp_path):
    """The subject holds the baseline's weights in zz_old/: dev evaluates subject/model.safetensors (the ratio is
    that of the clean subject, not exactly 1), warns once naming the stale file, and records the decision."""
    clean = tmp_path / "clean"
    clean.mkdir()
    spec = _spec(clean, tiny_models)
    reference = invoke("run", spec, "--ledger", clean / "ledger.db", "-o", clean / "cert.json")
    check("clean subject", reference, allowed={0, 1}, folders=(clean,), verdict_command=True)
    stale = tmp_path / "stale"
    stale.mkdir()
    spec = _spec(stale, tiny_models)
    (stale / "subject" / "zz_old").mkdir()
    shutil.copyfile(tiny_models["baseline"] / "model.safetensors", stale / "subject" / "zz_old" / "model.safetensors")
    result = invoke("run", spec, "--ledger", stale / "ledger.db", "-o", stale / "cert.json")
    check("stale weights in dev", result, allowed={0, 1}, folders=(stale,), verdict_command=True)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "zz_old/model.safetensors" in warnings[0], result.stderr
    nll = [json.loads((folder / "cert.json").read_text())["content"]["stages"]["w"]["nll_per_unit"]
           for folder in (clean, stale)]
    assert nll[0] == nll[1] and nll[1]["subject"] != nll[1]["baseline"]
    rows = sqlite3.connect(stale / "ledger.db").execute(
        "SELECT payload FROM entries WHERE kind = 'decision'").fetchall()
    decisions = [json.loads(row[0]) for row in rows]
    [stale_decision] = [d for d in decisions if d["kind"] == "unused_weights"]
    assert stale_decision["stage"] is None and stale_decision["detail"]["unused_weights"] == ["zz_old/model.safetensors"]


def test_a_signature_that_no_longer_matches_is_one_line_with_hex_digests(tiny_models, tmp_path):
    """A file changed after signing, checked in ci: the reason names the file and both SHA-256 digests in hex,
    never the library's Python byte literals."""
    model_signing = pytest.importorskip("model_signing", reason="needs model-signing (certa[models])")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "signer.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption()))
    (tmp_path / "signer.pub.pem").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    spec = _spec(tmp_path, tiny_models, profile="ci", signature=", signature: {public_key: signer.pub.pem}")
    subject = tmp_path / "subject"
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"])
    model_signing.signing.Config().use_elliptic_key_signer(private_key=tmp_path / "signer.pem").set_hashing_config(
        hashing).sign(subject, subject / "model.sig")
    (subject / "generation_config.json").write_text("{}")
    db = tmp_path / "ledger.db"
    result = invoke("run", spec, "--ledger", db)
    check("signature mismatch", result, allowed={2}, folders=(tmp_path,), no_files=_no_ledger(db))
    changed = hashlib.sha256(b"{}").hexdigest()
    assert f"generation_config.json has SHA-256 {changed} but the signature states" in result.stderr, result.stderr
    assert "b'" not in result.stderr and "\\x" not in result.stderr


def _live_spec(folder: Path, tiny_models: dict[str, Path], profile: str) -> Path:
    for arm in ("baseline", "subject"):
        shutil.copytree(tiny_models[arm], folder / arm)
    (folder / "prompts.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCUMENTS), encoding="utf-8")
    return write_spec(folder, f"""\
        certa: 1
        name: hostile-live-model
        seed: 5
        profile: {profile}
        inputs:
          base: {{model: baseline}}
          subj: {{model: subject}}
          prompts: {{path: prompts.jsonl}}
        stages:
          - id: ce
            use: sequential.diff
            with:
              scorer: {{name: hf_models, metric: delta_ce, options: {{prompts: prompts, text_column: text}}}}
              reference: base
              candidate: subj
              positions_per_prompt: 16
              batch_size: 4
              n_max: 10
              method: betting
              alpha: 0.05
              range: [-1, 1]
              equivalence_band: 0.5
        """)


LIVE_CASES = {  # the live scorer (sequential.diff's hf_models) loads and runs the same folders
    "outputs-not-finite": (_weights(_overflowing), r"input 'subj': the model computes a non-finite logit \(nan\) for "
                                                   r"\d+ of \d+ prompts of a batch"),
    "tokenizer-beyond-weights": (_larger_tokenizer, "input '(base|subj)': tokenizer.json gives the prompts of input "
                                                    "'prompts' the token id 32[0-9]"),
    "layers-20000": HOSTILE_FOLDERS["layers-20000"],
    "stale-weights-ci": HOSTILE_FOLDERS["stale-weights-ci"],
}


@pytest.mark.parametrize("case", list(LIVE_CASES))
def test_hostile_model_folder_for_the_live_scorer(case: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    change, message = LIVE_CASES[case]
    spec = _live_spec(tmp_path, tiny_models, "ci" if case == "stale-weights-ci" else "dev")
    change(tmp_path / "subject")
    if case == "stale-weights-ci":
        (tmp_path / "subject" / "zz_old").mkdir()
        shutil.copyfile(tiny_models["baseline"] / "model.safetensors",
                        tmp_path / "subject" / "zz_old" / "model.safetensors")
    if case == "tokenizer-beyond-weights":
        _larger_tokenizer(tmp_path / "baseline")
    db = tmp_path / "ledger.db"
    result = invoke("run", spec, "--ledger", db)
    check(f"live scorer, model folder {case}", result, allowed={2}, folders=(tmp_path,), no_files=_no_ledger(db))
    assert re.search(message, result.stderr), f"{case}: {result.stderr!r}"
    assert "internal error" not in result.stderr


def _rope_fraction(fraction: float) -> Callable[[Path], None]:
    """GPT-NeoX's rotary fraction (rotary_pct; transformers 5's rope_parameters.partial_rotary_factor)."""
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config["rotary_pct"] = fraction
        if isinstance(config.get("rope_parameters"), dict):
            config["rope_parameters"]["partial_rotary_factor"] = fraction
        (folder / "config.json").write_text(json.dumps(config))
    return change


def _untied_output(state: dict) -> dict:
    state["lm_head.weight"] = state["model.embed_tokens.weight"] * 2
    return state


ARCHITECTURE_FOLDERS: dict[str, tuple[str, Callable[[Path], None], str]] = {  # case: (architecture, change, message)
    "llama-layers-20000": ("llama", config_edit(num_hidden_layers=20000),
                           r"input 'subj': config.json's num_hidden_layers is 20,000, but the weights "
                           r"\(model.safetensors\) hold only 2"),
    "llama-model-code": ("llama", config_edit(auto_map={"AutoModelForCausalLM": "modeling_mine.Mine"}),
                         r"input 'subj': config.json asks for the model's own code \(auto_map\)"),
    "llama-kv-heads": ("llama", config_edit(num_key_value_heads=1),
                       r"input 'subj': tensor model.layers.0.self_attn.k_proj.weight is \[16, 32\] in "
                       r"model.safetensors, but the 'llama' architecture config.json describes has it \[8, 32\]"),
    "llama-output-missing": ("llama", _weights(lambda s: {k: v for k, v in s.items() if k != "lm_head.weight"}),
                             "input 'subj': the weights lack 1 tensor.s. of the 'llama' architecture: lm_head.weight"),
    "gemma-activation": ("gemma", config_edit(hidden_activation="nosuch", hidden_act="nosuch"),
                         "input 'subj': config.json's hidden_act 'nosuch' is not an activation"),
    "neox-rotary-1e8": ("gpt_neox", _rope_fraction(1e8),
                        r"input 'subj': the 'gpt_neox' architecture config.json describes computes [\d,]+ bytes of "
                        r"buffers when it is built"),
    "qwen2-tied-output-differs": ("qwen2", _weights(_untied_output),
                                  "input 'subj': the architecture ties lm_head.weight to model.embed_tokens.weight"),
}


@pytest.mark.parametrize("case", list(ARCHITECTURE_FOLDERS))
def test_hostile_architecture_folder(case: str, tiny_architectures: Callable[..., Path], tmp_path: Path) -> None:
    """The refusals hold for the architectures beyond GPT-2 (their layers named model.layers.N, their rotary
    buffers computed, their tied embeddings): one line, exit 2, no ledger; 20,000 layers refused in seconds."""
    model_type, change, message = ARCHITECTURE_FOLDERS[case]
    source = tiny_architectures(model_type)
    spec = _spec(tmp_path, {"baseline": source, "subject": source})
    change(tmp_path / "subject")
    db = tmp_path / "ledger.db"
    started = time.monotonic()
    result = invoke("run", spec, "--ledger", db)
    seconds = time.monotonic() - started
    check(f"{model_type} folder {case}", result, allowed={2}, folders=(tmp_path,), no_files=_no_ledger(db))
    assert re.search(message, result.stderr), f"{case}: {result.stderr!r}"
    assert "internal error" not in result.stderr
    assert seconds < 5, f"{case}: refused after {seconds:.1f} s"
