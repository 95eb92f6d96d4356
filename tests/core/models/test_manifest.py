"""A model folder's manifest: every file's SHA-256 in RFC 8785 canonical JSON; pickles, links out, missing
config or weights refused; read back from its bytes alone; pinned in a spec."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.inputs import load_tables
from certa.engine.core.models.manifest import MANIFEST_FORMAT, folder_manifest, read_manifest
from certa.engine.core.spec import load_plan
from tests.conftest import write_spec


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "gpt2"}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 100)
    (folder / "sub" / "extra.txt").write_text("x")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref")
    (folder / "model.sig").write_text("{}")
    return folder


def test_manifest_lists_every_file_with_its_digest_sorted_and_canonical(tmp_path):
    folder = _folder(tmp_path)
    manifest = folder_manifest("m", folder, InputLimits())
    assert [f.path for f in manifest.files] == ["config.json", "model.safetensors", "sub/extra.txt"]
    for f in manifest.files:
        raw = (folder / f.path).read_bytes()
        assert f.sha256 == hashlib.sha256(raw).hexdigest() and f.size == len(raw)
    document = json.loads(manifest.raw)
    assert document["format"] == MANIFEST_FORMAT and canonical_bytes(document) == manifest.raw
    assert manifest.sha256 == hashlib.sha256(manifest.raw).hexdigest()
    assert read_manifest("m", manifest.raw) == manifest


def test_any_file_change_changes_the_identity(tmp_path):
    folder = _folder(tmp_path)
    before = folder_manifest("m", folder, InputLimits()).sha256
    (folder / "sub" / "extra.txt").write_text("y")
    assert folder_manifest("m", folder, InputLimits()).sha256 != before


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".pth", ".ckpt", ".pkl", ".npy"])
def test_pickle_based_files_are_refused(tmp_path, suffix):
    folder = _folder(tmp_path)
    (folder / f"pytorch_model{suffix}").write_bytes(b"\x80\x04")
    with pytest.raises(InputError, match=rf"pytorch_model\{suffix} is pickle-based"):
        folder_manifest("m", folder, InputLimits())


def test_a_link_leaving_the_folder_is_refused(tmp_path):
    folder = _folder(tmp_path)
    (tmp_path / "outside.json").write_text("{}")
    os.symlink(tmp_path / "outside.json", folder / "tokenizer.json")
    with pytest.raises(InputError, match="tokenizer.json is a link to .* outside the model folder"):
        folder_manifest("m", folder, InputLimits())


@pytest.mark.parametrize("missing, message", [("config.json", "has no config.json"),
                                              ("model.safetensors", "has neither model.safetensors nor model.safetensors"
                                                                    r"\.index\.json")])
def test_a_folder_without_config_or_safetensors_is_refused(tmp_path, missing, message):
    folder = _folder(tmp_path)
    (folder / missing).unlink()
    with pytest.raises(InputError, match=message):
        folder_manifest("m", folder, InputLimits())


def test_the_size_limit_is_checked_before_reading(tmp_path):
    with pytest.raises(InputError, match="model_bytes"):
        folder_manifest("m", _folder(tmp_path), InputLimits(model_bytes=10))


@pytest.mark.parametrize("raw", [b"{}", b"not json", b'{"files":[],"format":"certa-model-manifest/1"} '])
def test_stored_manifests_that_certa_did_not_write_are_refused(raw):
    with pytest.raises(InputError, match="stored model manifest"):
        read_manifest("m", raw)


def test_a_spec_pins_the_manifest_and_a_replay_reads_it_back_without_the_folder(tmp_path):
    folder = _folder(tmp_path)
    sha = folder_manifest("m", folder, InputLimits()).sha256
    spec = write_spec(tmp_path, f"""\
        certa: 1
        name: pin
        seed: 1
        inputs:
          base: {{model: model, sha256: "{sha}"}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: base, subject: base, text: text}}}}
        """)
    (tmp_path / "text.jsonl").write_text('{"text": "a"}\n')
    tables = load_tables(load_plan(spec))
    assert tables["base"].sha256 == sha and tables["base"].origin == folder.resolve()
    assert tables["base"].signature.status == "not_checked"  # the folder holds a model.sig, the spec names no key
    (folder / "config.json").write_text('{"model_type": "gpt2", "n_layer": 3}')
    with pytest.raises(InputError, match="SHA-256 is .* but the spec pins"):
        load_tables(load_plan(spec))
    # the ledger's copy: the manifest bytes alone, read as a table of the files (no origin)
    from certa.engine.core.inputs import InputSource

    stored = load_tables(load_plan(spec), inputs={"base": InputSource("base", "hf-model", tables["base"].raw)})
    assert stored["base"].sha256 == sha and stored["base"].origin is None
    assert list(stored["base"].text("path")) == ["config.json", "model.safetensors", "sub/extra.txt"]


def test_a_model_input_takes_neither_format_nor_read(tmp_path):
    from certa.engine.foundation.errors import SpecError

    spec = write_spec(tmp_path, """\
        certa: 1
        name: both
        seed: 1
        inputs:
          base: {model: model, format: csv}
        stages:
          - {id: w, use: model.windows, with: {baseline: base, subject: base, text: base}}
        """)
    with pytest.raises(SpecError, match="either a table file .* or a model folder"):
        load_plan(spec)
    shutil.rmtree(tmp_path / "model", ignore_errors=True)


# ------------------------------------------------------------------ the weights: the files the checkpoint declares


def _index(folder: Path, weight_map: dict) -> None:
    """``model.safetensors.index.json`` as transformers' ``save_pretrained`` writes it."""
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 200},
                                                                    "weight_map": weight_map}))


def test_a_stale_weight_file_in_a_subfolder_is_listed_not_loaded_and_the_rule_is_written(tmp_path):
    """Issue 31: a second *.safetensors below the folder (a stale copy) was loaded too, and the file sorting last
    won. The weights are model.safetensors alone; the other file stays in the identity and the manifest says so."""
    folder = _folder(tmp_path)
    (folder / "zz_old").mkdir()
    (folder / "zz_old" / "model.safetensors").write_bytes(b"\x01" * 100)
    manifest = folder_manifest("m", folder, InputLimits())
    assert manifest.weights == ("model.safetensors",)
    assert manifest.unused_weights == ("zz_old/model.safetensors",)
    assert "zz_old/model.safetensors" in [f.path for f in manifest.files]
    document = json.loads(manifest.raw)
    assert document["format"] == "certa-model-manifest/2"
    assert document["weights"] == ["model.safetensors"] and document["unused_weights"] == ["zz_old/model.safetensors"]
    assert document["weights_rule"].startswith("model.safetensors, else the shards model.safetensors.index.json")
    assert read_manifest("m", manifest.raw) == manifest


def test_a_folder_whose_safetensors_are_its_weights_keeps_format_1_and_its_identity(tmp_path):
    """The identity of a folder without unused weight files is the format 1 document, byte for byte (pins and
    recorded runs stay valid)."""
    folder = _folder(tmp_path)
    manifest = folder_manifest("m", folder, InputLimits())
    files = sorted(["config.json", "model.safetensors", "sub/extra.txt"])
    expected = {"format": "certa-model-manifest/1",
                "files": [{"path": p, "sha256": hashlib.sha256((folder / p).read_bytes()).hexdigest(),
                           "size": (folder / p).stat().st_size} for p in files]}
    assert manifest.raw == canonical_bytes(expected)
    assert manifest.weights == ("model.safetensors",) and manifest.unused_weights == ()


def test_sharded_weights_are_the_shards_the_index_lists(tmp_path):
    folder = _folder(tmp_path)
    (folder / "model.safetensors").unlink()
    for i in (1, 2):
        (folder / f"model-0000{i}-of-00002.safetensors").write_bytes(bytes([i]) * 100)
    _index(folder, {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"})
    (folder / "adapter_model.safetensors").write_bytes(b"\x03" * 10)
    manifest = folder_manifest("m", folder, InputLimits())
    assert manifest.weights == ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    assert manifest.unused_weights == ("adapter_model.safetensors",)


def test_model_safetensors_wins_over_an_index_whose_shards_are_then_unused(tmp_path):
    """As from_pretrained: model.safetensors is the checkpoint when present; an index's shards beside it are unused."""
    folder = _folder(tmp_path)
    (folder / "shard.safetensors").write_bytes(b"\x01" * 10)
    _index(folder, {"a.weight": "shard.safetensors"})
    manifest = folder_manifest("m", folder, InputLimits())
    assert manifest.weights == ("model.safetensors",) and manifest.unused_weights == ("shard.safetensors",)


@pytest.mark.parametrize("index, message", [
    ("not json", "model.safetensors.index.json is not JSON"),
    ('{"metadata": {}}', "has no weight_map"),
    ('{"weight_map": {"a": "../outside.safetensors"}}', "not a \\*.safetensors file inside the model folder"),
    ('{"weight_map": {"a": "model.bin.txt"}}', "not a \\*.safetensors file inside the model folder"),
    ('{"weight_map": {"a": "absent.safetensors"}}', "lists shard.s. the folder .* does not hold: absent.safetensors"),
])
def test_an_index_that_declares_no_weights_in_the_folder_is_refused(tmp_path, index, message):
    folder = _folder(tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(index)
    with pytest.raises(InputError, match=message):
        folder_manifest("m", folder, InputLimits())


def test_weight_files_no_checkpoint_declares_are_refused_by_name(tmp_path):
    folder = _folder(tmp_path)
    (folder / "model.safetensors").rename(folder / "weights.safetensors")
    with pytest.raises(InputError, match="has neither model.safetensors nor .*it holds weights.safetensors, which no "
                                         "checkpoint file names"):
        folder_manifest("m", folder, InputLimits())


def test_a_stored_format_2_manifest_naming_weights_it_does_not_list_is_refused(tmp_path):
    folder = _folder(tmp_path)
    (folder / "old.safetensors").write_bytes(b"\x01")
    document = json.loads(folder_manifest("m", folder, InputLimits()).raw)
    for weights in (["nowhere.safetensors"], []):
        forged = canonical_bytes({**document, "weights": weights})
        with pytest.raises(InputError, match="stored model manifest"):
            read_manifest("m", forged)


def _stray_spec(tmp_path: Path, profile: str) -> Path:
    folder = _folder(tmp_path)
    (folder / "model.sig").unlink()
    (folder / "zz_old").mkdir()
    (folder / "zz_old" / "model.safetensors").write_bytes(b"\x01" * 100)
    (tmp_path / "text.jsonl").write_text('{"text": "a"}\n')
    return write_spec(tmp_path, f"""\
        certa: 1
        name: stray
        seed: 1
        profile: {profile}
        inputs:
          base: {{model: model}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: base, subject: base, text: text}}}}
        """)


@pytest.mark.parametrize("profile", ["ci", "release"])
def test_ci_and_release_refuse_a_folder_with_unused_weights_naming_them(tmp_path, profile):
    with pytest.raises(InputError, match=f"input 'base': the model folder holds 1 \\*.safetensors file.s. that are not "
                                         f"its weights .zz_old/model.safetensors.; the weights are model.safetensors "
                                         f".*profile {profile} refuses"):
        load_tables(load_plan(_stray_spec(tmp_path, profile)))


def test_dev_records_an_unused_weights_decision_before_the_stages(tmp_path):
    from certa.engine.core.interpreter import input_decisions

    plan = load_plan(_stray_spec(tmp_path, "dev"))
    tables = load_tables(plan)
    [decision] = input_decisions(plan, tables)
    assert decision.kind == "unused_weights"
    assert decision.detail["input"] == "base" and decision.detail["outcome"] == "warn"
    assert decision.detail["weights"] == ["model.safetensors"]
    assert decision.detail["unused_weights"] == ["zz_old/model.safetensors"]
    from certa.engine.services.presentation.warnings import warning_line

    line = warning_line(None, decision)
    assert line.startswith("inputs: input 'base': the model folder holds 1 *.safetensors file(s)")
    assert "zz_old/model.safetensors" in line and "only the weights were loaded" in line


# ------------------------------------------------------------------------------------------------- links


def test_a_link_loop_inside_the_folder_is_refused_by_name(tmp_path):
    """Issue 31: a loop passed the link check and failed later with 'Too many levels of symbolic links'."""
    folder = _folder(tmp_path)
    os.symlink("loop_b", folder / "loop_a")
    os.symlink("loop_a", folder / "loop_b")
    with pytest.raises(InputError, match="model file loop_a is a symbolic link that cannot be followed"):
        folder_manifest("m", folder, InputLimits())


def test_a_dangling_link_is_refused_by_name(tmp_path):
    folder = _folder(tmp_path)
    os.symlink("absent.json", folder / "tokenizer.json")
    with pytest.raises(InputError, match="model file tokenizer.json is a symbolic link that cannot be followed "
                                         ".No such file or directory."):
        folder_manifest("m", folder, InputLimits())


def test_a_link_to_a_file_inside_the_folder_is_hashed_as_that_file(tmp_path):
    folder = _folder(tmp_path)
    os.symlink("sub/extra.txt", folder / "tokenizer.json")
    manifest = folder_manifest("m", folder, InputLimits())
    assert manifest.digest_of("tokenizer.json") == manifest.digest_of("sub/extra.txt")


# ---------------------------------------------------------------------------------- hashing: threads, meanwhile


def _sized_folder(tmp_path: Path) -> Path:
    """A folder of files of several sizes (random bytes), its weights sharded in three files."""
    rng = np.random.default_rng(7)
    folder = _folder(tmp_path)
    (folder / "model.safetensors").unlink()
    shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    for shard, size in zip(shards, (50_001, 4_096, 12_345)):
        (folder / shard).write_bytes(rng.bytes(size))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {f"t{i}": s for i, s in
                                                                                    enumerate(shards)}}))
    (folder / "tokenizer.json").write_bytes(rng.bytes(9_999))
    return folder


@pytest.mark.parametrize("keep, lease", [(False, False), (True, False), (True, True)])
def test_files_hashed_at_once_give_the_manifest_of_one_file_at_a_time(tmp_path, monkeypatch, keep, lease):
    """HASH_THREADS files are read and hashed at once, in blocks: the manifest is the one of one file at a time,
    each digest is hashlib's of the whole file, and the bytes kept are the file's (copied, or mapped under a read
    lease where one can be had)."""
    from certa.engine.core.models import manifest as module

    folder = _sized_folder(tmp_path)
    if not lease:
        monkeypatch.setattr(module, "leases_possible", lambda: False)
    monkeypatch.setattr(module, "_BLOCK", 1_000)  # several blocks a file, in both modes
    monkeypatch.setattr(module, "_KEPT_BLOCK", 3_000)
    monkeypatch.setattr(module, "HASH_THREADS", 1)
    alone = folder_manifest("m", folder, InputLimits(), keep_weights=keep)
    monkeypatch.setattr(module, "HASH_THREADS", 3)
    together = folder_manifest("m", folder, InputLimits(), keep_weights=keep)
    assert together.raw == alone.raw and len(together.files) == 7
    for file in together.files:
        raw = (folder / file.path).read_bytes()
        assert file.sha256 == hashlib.sha256(raw).hexdigest() and file.size == len(raw)
    assert together.weights == tuple(sorted(path.name for path in folder.glob("*.safetensors")))
    for path in together.weights if keep else ():
        kept = together.held.peek(path, together.digest_of(path))
        assert bytes(kept.buffer[:]) == (folder / path).read_bytes() and (kept.lease is not None) <= lease
    assert (together.held is None) is not keep


def test_meanwhile_runs_while_the_files_hash_and_what_it_raises_is_raised(tmp_path):
    """``meanwhile`` is called once the files are being hashed, before any is collected, and changes nothing of
    the manifest; what it raises is raised (once the hashing threads have stopped)."""
    folder = _sized_folder(tmp_path)
    events: list[str] = []
    manifest = folder_manifest("m", folder, InputLimits(), keep_weights=True, meanwhile=lambda: events.append("now"),
                               progress=lambda i, n, what: events.append(what))
    assert events[0] == "now" and sorted(events[1:]) == [f"hashing {file.path}" for file in manifest.files]
    assert manifest.raw == folder_manifest("m", folder, InputLimits()).raw

    def refuse() -> None:
        raise InputError("refused meanwhile")

    with pytest.raises(InputError, match="refused meanwhile"):
        folder_manifest("m", folder, InputLimits(), keep_weights=True, meanwhile=refuse)


def test_examine_sees_each_kept_weight_file_once_hashed_in_a_hashing_thread(tmp_path):
    """``examine`` is called in a hashing thread with each kept weight file's entry and the bytes hashed, and what
    it returns is kept with them (``Kept.examined``); a file not kept is not examined."""
    import threading

    folder = _sized_folder(tmp_path)
    seen: dict[str, tuple[int, bytes]] = {}

    def examine(file, kept):
        seen[file.path] = (threading.get_ident(), bytes(kept.buffer[: file.size]))
        return file.sha256

    manifest = folder_manifest("m", folder, InputLimits(), keep_weights=True, examine=examine)
    assert sorted(seen) == sorted(manifest.weights) and manifest.raw == folder_manifest("m", folder, InputLimits()).raw
    for path in manifest.weights:
        assert manifest.held.peek(path, manifest.digest_of(path)).examined == manifest.digest_of(path)
        assert seen[path][0] != threading.get_ident() and seen[path][1] == (folder / path).read_bytes()
    seen.clear()
    assert folder_manifest("m", folder, InputLimits(), examine=examine).held is None and not seen


def test_the_model_a_run_loads_has_its_libraries_imported_while_it_hashes(tmp_path, monkeypatch):
    """load_tables: the model whose weights are kept (the first a stage names) warms the model libraries during
    its hashing; a second model, and a model no stage names, do not."""
    import certa.engine.core.inputs as inputs

    warmed: list[Path] = []
    monkeypatch.setattr(inputs, "warm_model_libraries", warmed.append)
    for name in ("one", "two", "unused"):
        shutil.copytree(_folder(tmp_path / name), tmp_path / f"model-{name}")
    spec = write_spec(tmp_path, """\
        certa: 1
        name: warm
        seed: 1
        inputs:
          unused: {model: model-unused}
          base: {model: model-one}
          sub: {model: model-two}
          text: {path: text.jsonl}
        stages:
          - {id: w, use: model.windows, with: {baseline: base, subject: sub, text: text}}
        """)
    (tmp_path / "text.jsonl").write_text('{"text": "a"}\n')
    tables = load_tables(load_plan(spec))
    assert warmed == [tmp_path / "model-one"] and tables["base"].weights and not tables["sub"].weights
