"""The model libraries load only when a model is evaluated: never at ``certa --help``, ``certa stages`` or
``certa validate`` of a spec with model inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_startup import _modules_after

MODEL_LIBRARIES = {"torch", "transformers", "tokenizers", "safetensors", "model_signing", "cryptography"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [("--help",), ("stages",), ("replay", "--help"),
                                  ("validate", str(ROOT / "specs" / "model-perplexity" / "spec.yaml"))])
def test_no_model_library_is_imported(argv):
    assert not _modules_after(*argv) & MODEL_LIBRARIES
