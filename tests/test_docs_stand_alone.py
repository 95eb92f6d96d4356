"""The product's docs stand alone: they cite papers and upstream projects, never design notes that are not in
the repository, and every relative link in them resolves to a file that is."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_TEXT = (".py", ".md", ".json", ".j2", ".yaml", ".yml", ".css", ".js", ".toml")
_OUTSIDE_NOTES = re.compile(r"shared/(methods|seeds)|\.\./shared\b")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not available to list the project's files")
    return [ROOT / name for name in listed
            if name.endswith(_TEXT) and not name.startswith("tests/golden/") and (ROOT / name).is_file()]


def test_no_file_cites_notes_outside_the_repository() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{number}"
                 for path in _tracked_text_files() if path.name != Path(__file__).name
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if _OUTSIDE_NOTES.search(line)]
    assert offenders == [], f"cite the paper or upstream project instead: {offenders}"


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = []
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _LINK.findall(path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert broken == []
