"""The ``hf`` runtime keeps the protocol: a model folder prepared, opened, scored and closed through the seam gives
the numbers of the loader and the window code it adapts, bit for bit."""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import folder_manifest
from certa.engine.core.runtimes import DistributionRuntime, OpenRuntime, Runtime, load_runtime, runtime_for
from certa.engine.core.tables import Table
from tests.conftest import TINY_MODEL_TEXT

TEXTS = [line.strip() for line in TINY_MODEL_TEXT.splitlines() if len(line.strip()) >= 40][:9]


def _table(folder: Path) -> Table:
    manifest = folder_manifest("m", folder, InputLimits())
    return replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder)


def test_a_folder_through_the_seam_scores_as_the_loader_does(tiny_models) -> None:
    import torch

    from certa.engine.core.models.runtime import load_causal_lm
    from certa.engine.core.models.windows import token_windows, window_nll

    table = _table(tiny_models["baseline"])
    runtime = load_runtime(runtime_for(table), table, device="cpu", dtype="float32", threads=1)
    assert isinstance(runtime, Runtime) and runtime.positions == 128 and runtime.vocabulary > 0
    assert runtime.sha256 == table.sha256 and not runtime.resident and runtime.first_token() >= 0
    sequences = [ids[:17] for ids in (e.ids for e in runtime.tokenizer.encode_batch(TEXTS))]
    windows = token_windows(sequences, seq_len=12, stride=7)
    reference = load_causal_lm(table)
    with runtime.open() as opened:
        assert isinstance(opened, OpenRuntime) and isinstance(opened, DistributionRuntime)
        sums = opened.window_nll(windows, batch_size=3)
        given = opened.token_logprobs(sequences)
        full = opened.next_token_logprobs(sequences)
        assert opened.usage()["forward_passes"] == windows.start.size + 2 * len(sequences)
        described = opened.describe()
        model = weakref.ref(opened.loaded.model)
    gc.collect()
    assert model() is None                                              # closed: the weights' memory is returned
    assert sums.tobytes() == window_nll(reference.model, windows, batch_size=3).tobytes()
    assert described["kind"] == "local" and described["sha256"] == table.sha256 and described["claims"] == {}
    assert described["parameters"] == reference.parameters and described["special_tokens"] == {"before": [],
                                                                                              "after": []}
    for ids, logprobs, distributions in zip(sequences, given, full):
        with torch.inference_mode():
            logits = reference.model(input_ids=torch.tensor([ids])).logits[0].float()
        expected = torch.log_softmax(logits, dim=-1)[:-1]
        assert logprobs.dtype == np.float64 and logprobs.shape == (len(ids) - 1,)
        assert distributions.tobytes() == expected.double().numpy().tobytes()
        assert logprobs.tobytes() == distributions[np.arange(len(ids) - 1), ids[1:]].tobytes()  # x_t read at t - 1


def test_an_unknown_dtype_is_refused_as_the_loader_refuses_it(tiny_models) -> None:
    from certa.engine.foundation.errors import StageError

    with pytest.raises(StageError, match="dtype 'float64' is not one certa computes a model in"):
        load_runtime("hf", _table(tiny_models["baseline"]), dtype="float64")
