"""Stage model.windows: two model folders and a text to the per-window tables paired.ppl_ratio reads, in one
spec; token windows with one tokenizer, byte windows otherwise; replayed from the ledger without the models."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from certa.engine.foundation.errors import InputError, SpecError
from certa.engine.core.spec import load_plan
from certa.engine.services.audit import replay
from certa.engine.services.run import run
from certa.ledger import Ledger
from tests.conftest import TINY_MODEL_TEXT, write_spec

DOCUMENTS = [d for d in TINY_MODEL_TEXT.split("\n\n") if d.strip()][:30]


def _spec(folder: Path, models: dict[str, Path], subject: str = "subject", *, knobs: str = "", profile: str = "dev",
          ratio: bool = True) -> Path:
    for name in ("baseline", subject):
        if not (folder / name).exists():
            shutil.copytree(models[name], folder / name)
    (folder / "text.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in DOCUMENTS), encoding="utf-8")
    # model.windows' unit is auto (tokens for one tokenizer, decided when it runs): the ratio says it certifies
    # a ratio per token, which it checks when it runs
    stage = ("\n          - {id: ratio, use: paired.ppl_ratio, with: {baseline: w.baseline, subject: w.subject, "
             "unit: tokens, replicates: 200}}") if ratio else ""
    return write_spec(folder, f"""\
        certa: 1
        name: model-windows
        seed: 3
        profile: {profile}
        inputs:
          base: {{model: baseline}}
          subj: {{model: {subject}}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: base, subject: subj, text: text, column: body,
              seq_len: 32, stride: 24, batch_size: 5{knobs}}}}}{stage}
        """)


def test_one_spec_from_two_model_folders_and_a_text_to_a_perplexity_ratio(tiny_models, tmp_path):
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_spec(tmp_path, tiny_models), ledger=ledger)
        stages = result.certificate["content"]["stages"]
        w, ratio = stages["w"], stages["ratio"]
        assert w["unit"] == "tokens" and w["tokenizers_match"] is True
        assert w["models"]["baseline"]["signature"] == {"status": "unsigned"}
        assert w["models"]["baseline"]["manifest_sha256"] == result.certificate["content"]["inputs"][0]["sha256"]
        assert w["runtime"]["dtype"] == "float32" and w["runtime"]["accumulation"] == "float64"
        assert set(w["runtime"]["libraries"]) == {"torch", "transformers", "safetensors", "tokenizers"}
        # the windows: every token of each document but the first, scored once
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tiny_models["baseline"] / "tokenizer.json"))
        lengths = [len(e.ids) for e in tokenizer.encode_batch(DOCUMENTS, add_special_tokens=False)]
        assert w["windows"]["scored"] == sum(n - 1 for n in lengths if n >= 2)
        assert w["windows"]["count"] == sum(math.ceil((n - 1) / 24) for n in lengths if n >= 2)
        # the ratio stage read the produced tables: its ratio is exp of the token-weighted mean NLL difference
        assert ratio["dataset"]["windows"]["stats"]["window_match_fraction"] == 1.0
        delta = w["nll_per_unit"]["subject"] - w["nll_per_unit"]["baseline"]
        assert ratio["token_perplexity"]["ratio_vs_baseline"] == pytest.approx(math.exp(delta), rel=1e-9)
        assert {c["name"] for c in result.certificate["content"]["captured"]} == {"baseline", "subject", "models"}
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_one_model_is_in_memory_at_a_time_the_one_read_with_its_hash_first(tiny_models, tmp_path, monkeypatch):
    """Both models are checked first; then each is loaded, scored and freed before the next is loaded, starting
    with the one whose weights were kept when its folder was hashed (the first model input a stage names: here
    the subject, declared first); the tables are those of the usual order."""
    import gc
    import weakref

    import certa.engine.core.models.runtime as runtime
    from certa.engine.core.inputs import load_tables

    spec = _spec(tmp_path, tiny_models, ratio=False)
    expected = run(spec).certificate["content"]
    text = spec.read_text()
    lines = text.splitlines(keepends=True)
    base = next(i for i, line in enumerate(lines) if "base: {model: baseline}" in line)
    lines[base], lines[base + 1] = lines[base + 1], lines[base]  # subj declared before base
    spec.write_text("".join(lines))
    tables = load_tables(load_plan(spec))
    assert tables["subj"].weights and tables["base"].weights is None and tables["text"].weights is None
    del tables
    loads, alive = [], []
    original = runtime.PreparedModel.load

    def load(self):  # type: ignore[no-untyped-def]
        gc.collect()
        alive.append([ref() is not None for ref in loads])
        loaded = original(self)
        loads.append(weakref.ref(loaded.model))
        alive[-1].append(self.name)
        return loaded

    monkeypatch.setattr(runtime.PreparedModel, "load", load)
    content = run(spec).certificate["content"]
    assert alive == [["subj"], [False, "base"]]
    assert content["captured"] == expected["captured"]
    assert content["stages"]["w"]["nll_per_unit"] == expected["stages"]["w"]["nll_per_unit"]


def test_a_model_input_no_stage_names_keeps_no_weights(tiny_models, tmp_path):
    """A model declared for its identity alone (named by no stage) is hashed as it streams by: nothing is held."""
    from certa.engine.core.inputs import load_tables

    spec = _spec(tmp_path, tiny_models, ratio=False)
    spec.write_text(spec.read_text().replace("text: {path: text.jsonl}", "text: {path: text.jsonl}\n  spare: {model: baseline}"))
    tables = load_tables(load_plan(spec))
    assert tables["base"].weights and not tables["subj"].weights and not tables["spare"].weights


def test_a_replay_loads_no_model(tiny_models, tmp_path, monkeypatch):
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(_spec(tmp_path, tiny_models, ratio=False), ledger=ledger)
        import certa.engine.core.models.runtime as runtime

        def refuse(*args, **kwargs):
            raise AssertionError("a replay loaded a model")

        monkeypatch.setattr(runtime, "load_causal_lm", refuse)
        monkeypatch.setattr(runtime, "prepare_causal_lm", refuse)
        assert replay(ledger, result.run_id).outcome == "REPRODUCED"


def test_differing_tokenizers_give_byte_windows_counted_in_utf8_bytes(tiny_models, tmp_path):
    result = run(_spec(tmp_path, tiny_models, "other", knobs=", window_bytes: 64", ratio=False))
    w = result.certificate["content"]["stages"]["w"]
    assert w["unit"] == "bytes" and w["tokenizers_match"] is False and "seq_len" not in w["windows"]
    assert w["windows"]["scored"] == sum(len(d.encode("utf-8")) for d in DOCUMENTS)
    assert w["windows"]["count"] == sum(math.ceil(len(d.encode("utf-8")) / 64) for d in DOCUMENTS)
    with pytest.raises(InputError, match="unit: tokens needs one tokenizer"):
        run(_spec(tmp_path, tiny_models, "other", knobs=", unit: tokens", ratio=False))


def test_the_same_machine_gives_bit_identical_tables(tiny_models, tmp_path):
    spec = _spec(tmp_path, tiny_models, ratio=False)
    first, second = run(spec), run(spec)
    assert first.certificate["content"]["captured"] == second.certificate["content"]["captured"]
    assert first.certificate["content"]["stages"] == second.certificate["content"]["stages"]


def test_seq_len_beyond_the_models_positions_is_refused(tiny_models, tmp_path):
    spec = _spec(tmp_path, tiny_models, ratio=False)
    spec.write_text(spec.read_text().replace("seq_len: 32, stride: 24", "seq_len: 4096"))
    with pytest.raises(InputError, match="seq_len 4096 exceeds input 'base''s 128 positions"):
        run(spec)


def _loader_spec(tmp_path: Path, ratio_first: bool, extra_input: str = "") -> Path:
    ratio = "  - {id: ratio, use: paired.ppl_ratio, with: {baseline: w.baseline, subject: w.subject}}\n"
    windows = "  - {id: w, use: model.windows, with: {baseline: base, subject: base, text: text, unit: tokens}}\n"
    (tmp_path / "m").mkdir(exist_ok=True)
    text = ("certa: 1\nname: order\nseed: 1\ninputs:\n  base: {model: m}\n  text: {path: t.jsonl}\n" + extra_input +
            "stages:\n" + (ratio + windows if ratio_first else windows + ratio))
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_the_loader_accepts_produced_tables_only_after_their_stage(tmp_path):
    plan = load_plan(_loader_spec(tmp_path, ratio_first=False))
    assert plan.stages[1].knobs["baseline"] == "w.baseline"
    with pytest.raises(SpecError, match=r"spec.yaml:8:57: stages\[0\].with.baseline: 'w.baseline' is a table stage "
                                        "'w' produces, which runs at or after this stage"):
        load_plan(_loader_spec(tmp_path, ratio_first=True))
    with pytest.raises(SpecError, match="input 'w.baseline' has the name of a table stage 'w' produces"):
        load_plan(_loader_spec(tmp_path, ratio_first=False, extra_input="  w.baseline: {path: t.jsonl}\n"))


def test_an_unknown_table_name_lists_the_produced_ones(tmp_path):
    path = _loader_spec(tmp_path, ratio_first=False)
    path.write_text(path.read_text().replace("subject: w.subject", "subject: w.subjet"))
    with pytest.raises(SpecError, match=r"'w.subjet' is not a declared input \(declared: base, text; produced by "
                                        r"earlier stages: w.baseline, w.subject\)"):
        load_plan(path)


def test_the_stage_refuses_a_table_input_as_a_model(tmp_path):
    from certa.engine.foundation.errors import StageError

    (tmp_path / "t.csv").write_text("text\nabc\n")
    spec = write_spec(tmp_path, """\
        certa: 1
        name: notmodel
        seed: 1
        inputs:
          t: {path: t.csv}
        stages:
          - {id: w, use: model.windows, with: {baseline: t, subject: t, text: t}}
        """)
    with pytest.raises(StageError, match="'t' \\(baseline\\) is not a model input"):
        run(spec)


def _pinned(spec: Path, version: str) -> Path:
    spec.write_text(spec.read_text().replace("use: model.windows,", f"use: model.windows@{version},"))
    return spec


def test_gpt2s_windows_are_the_same_in_1_0_0_and_1_1_0(tiny_models, tmp_path):
    """GPT-2's tokenizer adds no special token, so 1.1.0 scores exactly 1.0.0's windows: the same tables, bit for
    bit (the golden runs of 1.0.0 replay as recorded; a new run of the example gives the same numbers)."""
    results = {}
    for version in ("1.0.0", "1.1.0"):
        (tmp_path / version).mkdir()
        results[version] = run(_pinned(_spec(tmp_path / version, tiny_models, ratio=False), version)).certificate
    captured = {v: {c["name"]: c["sha256"] for c in cert["content"]["captured"]} for v, cert in results.items()}
    assert captured["1.0.0"]["baseline"] == captured["1.1.0"]["baseline"]
    assert captured["1.0.0"]["subject"] == captured["1.1.0"]["subject"]
    old, new = (results[v]["content"]["stages"]["w"] for v in ("1.0.0", "1.1.0"))
    assert old["nll_per_unit"] == new["nll_per_unit"] and old["windows"] == new["windows"]
    assert "special_tokens" not in old["models"]["baseline"]
    assert new["models"]["baseline"]["special_tokens"] == {"before": [], "after": []}
    knobs = {v: next(s for s in cert["content"]["knobs"]["stages"] if s["id"] == "w") for v, cert in results.items()}
    assert "dtype" not in json.dumps(knobs["1.0.0"]) and '"dtype": "float32"' in json.dumps(knobs["1.1.0"])


def test_1_0_0_takes_no_dtype_knob(tiny_models, tmp_path):
    spec = _pinned(_spec(tmp_path, tiny_models, knobs=", dtype: bfloat16", ratio=False), "1.0.0")
    with pytest.raises(SpecError, match="dtype"):
        load_plan(spec)


RECIPE_TEXTS = ["The quick brown fox jumps over the lazy dog.",
                "Return a list of the words in the string, using sep as the delimiter string.",
                "Remove any common leading whitespace from every line in text.",
                "a"]


@pytest.mark.parametrize("model_type", ["llama", "gemma", "opt", "qwen2", "gpt2"])
def test_token_windows_score_the_tokens_of_hugging_faces_perplexity_recipe(model_type, tiny_architectures, tmp_path):
    """Hugging Face's perplexity recipe (https://huggingface.co/docs/transformers/perplexity) tokenizes with the
    model's tokenizer (a Llama-style one puts <s> first) and scores every token after the first with
    model(input_ids, labels=input_ids).loss. With each document in one window, 1.1.0 scores the same tokens and its
    NLL sums equal the recipe's (to float32 rounding of the recipe's mean); 1.0.0 left the special tokens out, so
    for a family that adds one it scored one token fewer per document (none of a one-token document), and without
    the <s> context."""
    import torch
    import transformers

    folder = tiny_architectures(model_type)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    scored, nll = 0, 0.0
    for text in RECIPE_TEXTS:
        ids = tokenizer(text, return_tensors="pt").input_ids
        if ids.shape[1] < 2:
            continue
        with torch.inference_mode():
            loss = model(input_ids=ids, labels=ids).loss
        scored += ids.shape[1] - 1
        nll += float(loss) * (ids.shape[1] - 1)
    (tmp_path / "text.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in RECIPE_TEXTS))
    shutil.copytree(folder, tmp_path / "model")
    outputs = {}
    for version in ("1.0.0", "1.1.0"):
        spec = write_spec(tmp_path, f"""\
            certa: 1
            name: recipe
            seed: 1
            inputs:
              m: {{model: model}}
              text: {{path: text.jsonl}}
            stages:
              - {{id: w, use: model.windows@{version}, with: {{baseline: m, subject: m, text: text, unit: tokens,
                  seq_len: 128}}}}
            """)
        outputs[version] = run(spec).certificate["content"]["stages"]["w"]
    new, old = outputs["1.1.0"], outputs["1.0.0"]
    begins = model_type in ("llama", "gemma", "opt")
    assert new["windows"]["scored"] == scored and new["windows"]["count"] == (4 if begins else 3)  # "a": 1 token
    assert new["nll_per_unit"]["baseline"] * scored == pytest.approx(nll, rel=2e-6)
    if begins:  # 1.0.0 scored neither the first token of a document nor "a" (one token, no context)
        from certa.engine.services.presentation.stages.model_windows import how_to_read, markdown

        first = tokenizer.convert_ids_to_tokens(tokenizer("a").input_ids[0])
        assert old["windows"]["scored"] == scored - 4 and old["windows"]["count"] == 3
        assert new["models"]["baseline"]["special_tokens"] == {"before": [first], "after": []}
        assert f"Special tokens (baseline): {first} before." in markdown(new, "1.1.0")
        assert f"after the special tokens its tokenizer puts before it ({first} before)" in how_to_read(new)[0]
        assert "Special tokens" not in markdown(old, "1.0.0")
    else:
        assert old["windows"] == new["windows"] and old["nll_per_unit"] == new["nll_per_unit"]
