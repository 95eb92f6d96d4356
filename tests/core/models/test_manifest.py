"""A model folder's manifest: every file's SHA-256 in RFC 8785 canonical JSON; pickles, links out, missing
config or weights refused; read back from its bytes alone; pinned in a spec."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

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
                                              ("model.safetensors", r"has no \*.safetensors weights")])
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
