"""Which files ``certa batch DIR`` runs: the run specs below DIR (a top-level ``certa:`` key); every other YAML
file is skipped with its reason, and a folder with no spec at all is refused, listing what it skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from certa.engine.foundation.errors import SpecError
from certa.engine.services.batch import SkippedFile, discover_specs

NO_KEY = "no top-level certa: key (a run spec starts with 'certa: 1')"


def test_a_folder_yields_its_specs_and_names_each_file_it_skips(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "spec.yaml").write_text("certa: 1\nname: a\n")
    (tmp_path / "a" / "broken.yml").write_text("certa: 1\nname: [\n")  # a broken spec is run, and fails loudly
    (tmp_path / "a" / "task.yaml").write_text("task: arc_easy\n")
    (tmp_path / "notes.txt").write_text("certa: 1\n")  # not YAML by name: not looked at
    named = tmp_path / "elsewhere.yaml"
    named.write_text("task: x\n")  # a file named on the command line is taken as a spec whatever it holds
    specs, skipped = discover_specs([tmp_path, named, tmp_path / "a" / "spec.yaml"])
    assert specs == [tmp_path / "a" / "broken.yml", tmp_path / "a" / "spec.yaml", named]
    assert skipped == (SkippedFile(str(tmp_path / "a" / "task.yaml"), NO_KEY),)  # named: not skipped


def test_a_folder_without_a_spec_is_refused_listing_what_it_skipped(tmp_path: Path) -> None:
    (tmp_path / "task.yaml").write_text("task: arc_easy\n")
    (tmp_path / "bomb.yaml").write_text("a: &x [1]\nb: *x\n")
    with pytest.raises(SpecError) as refused:
        discover_specs([tmp_path])
    message = str(refused.value)
    assert "no run specs found" in message
    assert f"skipped {tmp_path / 'task.yaml'}: {NO_KEY}" in message
    assert f"skipped {tmp_path / 'bomb.yaml'}: not a run spec: " in message
