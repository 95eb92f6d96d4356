"""The tiny model fixture builds, and its folders are read as model inputs."""

from __future__ import annotations

from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import folder_manifest


def test_tiny_models_have_manifests(tiny_models):
    digests = {name: folder_manifest(name, folder, InputLimits()) for name, folder in tiny_models.items()}
    assert digests["baseline"].digest_of("model.safetensors") == digests["same"].digest_of("model.safetensors")
    assert digests["baseline"].digest_of("model.safetensors") != digests["subject"].digest_of("model.safetensors")
    assert digests["baseline"].digest_of("tokenizer.json") == digests["subject"].digest_of("tokenizer.json")
    assert digests["baseline"].digest_of("tokenizer.json") != digests["other"].digest_of("tokenizer.json")
