"""Windows over a text and their NLL: what is scored is exactly what the docstring says, the sums equal a plain
per-window transformers computation, and the same machine gives bit-identical sums."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from certa.engine.foundation.errors import InputError
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models.manifest import folder_manifest
from certa.engine.core.models.windows import byte_pieces, piece_windows, token_windows, window_nll


@pytest.mark.parametrize("seq_len, stride", [(8, 7), (8, 3), (5, 1), (64, 63)])
def test_token_windows_score_every_token_but_each_documents_first_once(seq_len, stride):
    rng = np.random.default_rng(seq_len * 10 + stride)
    documents = [list(rng.integers(0, 50, size=n)) for n in (0, 1, 2, 7, 8, 9, 30, 100)]
    w = token_windows(documents, seq_len=seq_len, stride=stride)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in documents])])
    targets = np.concatenate([np.arange(s + n - t, s + n) for s, n, t in zip(w.start, w.length, w.targets)])
    expected = np.concatenate([np.arange(offsets[i] + 1, offsets[i + 1]) for i, d in enumerate(documents) if len(d) >= 2])
    assert np.array_equal(np.sort(targets), expected)               # each scored once, none twice
    assert (w.length <= seq_len).all() and (w.targets <= stride).all() and (w.targets < w.length).all()
    doc_of = np.searchsorted(offsets, w.start, side="right") - 1    # a window never crosses a document
    assert (w.start + w.length <= offsets[doc_of + 1]).all()
    assert len(set(w.ids)) == len(w.ids) and np.array_equal(w.counts, w.targets)


def test_identical_passages_keep_distinct_ids_and_stride_is_bounded():
    w = token_windows([[1, 2, 3, 4], [1, 2, 3, 4]], seq_len=4, stride=3)
    assert len(set(w.ids)) == 2
    with pytest.raises(InputError, match="stride 4 must be between 1 and seq_len - 1 = 3"):
        token_windows([[1, 2]], seq_len=4, stride=4)


def test_byte_pieces_cut_at_character_starts_and_cover_the_text():
    texts = ["héllo wörld €€€ 😀😀 ascii", "", "ab"]
    pieces = byte_pieces(texts, 5)
    for row, text in enumerate(texts):
        mine = [p for r, _, p in pieces if r == row]
        assert b"".join(mine) == text.encode("utf-8")
        assert all(len(p) <= 5 for p in mine) and all(p.decode("utf-8") for p in mine)
    assert [offset for r, offset, _ in pieces if r == 0][:2] == [0, 5]


def _loaded(folder):
    from certa.engine.core.models.runtime import deterministic_torch, load_causal_lm

    deterministic_torch(1)
    manifest = folder_manifest("m", folder, InputLimits())
    return load_causal_lm(replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder))


def _reference_nll(model, ids: list[int], targets: int) -> float:
    """HF's perplexity recipe, one window at a time: labels -100 except the last ``targets`` tokens; the loss is
    their mean NLL, times their count."""
    import torch

    inputs = torch.tensor([ids])
    labels = inputs.clone()
    labels[:, : len(ids) - targets] = -100
    with torch.no_grad():
        loss = model(input_ids=inputs, labels=labels).loss
    return float(loss) * targets


def test_window_sums_equal_a_plain_transformers_loop_and_repeat_bit_for_bit(tiny_models):
    from tests.conftest import TINY_MODEL_TEXT

    loaded = _loaded(tiny_models["subject"])
    documents = [e.ids for e in loaded.tokenizer.encode_batch(TINY_MODEL_TEXT.split("\n\n")[:12],
                                                              add_special_tokens=False)]
    w = token_windows(documents, seq_len=32, stride=20)
    sums = window_nll(loaded.model, w, batch_size=4)
    reference = [_reference_nll(loaded.model, w.flat[s: s + n].tolist(), int(t))
                 for s, n, t in zip(w.start, w.length, w.targets)]
    np.testing.assert_allclose(sums, reference, rtol=2e-5)
    assert np.array_equal(window_nll(loaded.model, w, batch_size=4), sums)          # same machine: bit for bit
    fresh = _loaded(tiny_models["subject"])                                             # a fresh load too
    assert np.array_equal(window_nll(fresh.model, w, batch_size=4), sums)


def test_byte_windows_score_every_token_of_each_piece_after_bos(tiny_models):
    loaded = _loaded(tiny_models["other"])
    pieces = byte_pieces(["certa scores bytes: é and €"], 8)
    encoded = [loaded.tokenizer.encode(p.decode(), add_special_tokens=False).ids for _, _, p in pieces]
    w = piece_windows(pieces, encoded, bos=0)
    assert np.array_equal(w.counts, [len(p) for _, _, p in pieces])
    assert np.array_equal(w.targets, [len(e) for e in encoded])
    sums = window_nll(loaded.model, w, batch_size=3)
    reference = [_reference_nll(loaded.model, [0, *e], len(e)) for e in encoded]
    np.testing.assert_allclose(sums, reference, rtol=2e-5)
