"""Compiled kernels (certa.engine.core.stats.kernels.compiled): compiled on first call, cached in the user's cache
folder (never beside the module), and still compiled where no cache can be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from certa.engine.core.stats.kernels.compiled import kernel, numba_cache_folder


def _weighted_total(values, weights):
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i] * weights[i]
    return total


def test_a_kernel_compiles_on_first_call_and_keeps_the_python_function():
    compiled = kernel(_weighted_total)
    assert compiled.__wrapped__ is _weighted_total and compiled.__name__ == "_weighted_total"
    values, weights = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 2.0])
    assert compiled(values, weights) == _weighted_total(values, weights) == 7.0


def test_the_cache_folder_is_numbas_setting_else_certas_under_xdg_cache_home_else_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert numba_cache_folder() == str(tmp_path / "home" / ".cache" / "certa" / "numba")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert numba_cache_folder() == str(tmp_path / "xdg" / "certa" / "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    assert numba_cache_folder() == str(tmp_path / "numba")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "numba", "xdg"]  # each made, and left empty
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_folder_that_cannot_be_written_gives_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "a-file" / "numba"))  # under a file: cannot be made
    assert numba_cache_folder() is None


# A child process compiles one kernel afresh (a module of its own in a temporary folder, as an installed certa's
# modules are): where its cache lands, and that it computes the same without one.
_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from kernel_module import total
print(json.dumps(total(np.arange(5.0))))
"""
_KERNEL_MODULE = """
from certa.engine.core.stats.kernels.compiled import kernel

@kernel
def total(values):
    result = 0.0
    for i in range(values.shape[0]):
        result += values[i]
    return result
"""


def _compile_in_a_child(tmp_path: Path, env: dict[str, str]) -> float:
    source = tmp_path / "source"
    source.mkdir(exist_ok=True)
    (source / "kernel_module.py").write_text(_KERNEL_MODULE, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")} | env
    done = subprocess.run([sys.executable, "-c", _CHILD, str(source)], capture_output=True, text=True, timeout=300,
                          env=environment)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _cache_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc"))


def test_compiled_code_is_cached_in_the_users_folder_never_beside_the_module(tmp_path: Path) -> None:
    assert _compile_in_a_child(tmp_path, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == 10.0
    assert _cache_files(tmp_path / "xdg" / "certa" / "numba")  # index and code, in a subfolder per source file
    assert _cache_files(tmp_path / "source") == []  # nothing next to the module (site-packages, for a user)


def test_where_the_cache_folder_cannot_be_written_the_kernel_compiles_uncached(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    assert _compile_in_a_child(tmp_path, {"XDG_CACHE_HOME": str(tmp_path / "a-file")}) == 10.0
    assert _cache_files(tmp_path) == []  # neither next to the module nor anywhere else
