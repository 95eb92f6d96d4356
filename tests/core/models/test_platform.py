"""``issued.platform`` names torch's CPU kernels (and CUDA GPUs) when a run evaluated models, and nothing about
torch otherwise (torch is never imported to say so)."""

from __future__ import annotations

import sys

import pytest

from certa.engine.core.certificate import computing_platform, validate_certificate

pytestmark = pytest.mark.models


def test_torch_kernels_are_named_only_when_torch_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch", reason="needs torch: pip install torch==2.13.0 'certa[models]'")
    loaded = computing_platform()
    assert loaded["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert ("cuda_devices" in loaded) == torch.cuda.is_initialized()
    monkeypatch.delitem(sys.modules, "torch")
    assert not {"torch_cpu_capability", "cuda_devices"} & set(computing_platform())


def test_the_model_example_certificate_records_torch_kernels(tmp_path) -> None:
    pytest.importorskip("torch", reason="needs torch: pip install torch==2.13.0 'certa[models]'")
    from certa.engine import run
    from tests.conftest import ROOT

    certificate = run(ROOT / "specs" / "model-perplexity" / "spec.yaml").certificate
    validate_certificate(certificate)
    assert certificate["issued"]["platform"]["torch_cpu_capability"]
