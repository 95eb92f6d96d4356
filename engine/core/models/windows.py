"""Evaluation windows over a text and their negative log-likelihood under a causal language model.

**Token windows** (both models share one tokenizer). Each document (one row of the text column) is tokenized
on its own (``model.windows`` 1.1.0: with the special tokens the tokenizer's post-processor adds, as transformers
tokenizes, so a beginning-of-sequence token is x_0; 1.0.0: without them): token ids x_0 .. x_{n-1}. Token x_t
(t >= 1) is *scored* when the model predicts it from the tokens before it; x_0 has no context and is never scored.
The scored positions 1 .. n-1 are cut into consecutive blocks of ``stride`` targets (the last block may be
shorter); the block of targets [s, e) is evaluated with the input x_{max(0, e-seq_len)} .. x_{e-1}, so each target
sees up to ``seq_len - (e - s)`` tokens of context before the block and every earlier token of the block. Scored targets
never overlap and cover every token but each document's first one; contexts overlap when
``stride < seq_len - 1``. This is the sliding-window recipe of Hugging Face's "Perplexity of fixed-length
models" guide (https://huggingface.co/docs/transformers/perplexity), with ``stride`` counting scored targets
and ``seq_len`` the model's input length (``stride <= seq_len - 1`` so that every target has one token of
context). A window's ``tokens`` is its target count e - s; its ``nll_sum`` is
Σ_{t=s}^{e-1} −log p(x_t | x_{max(0,e-seq_len)} .. x_{t-1}).

**Byte windows** (the tokenizers differ). Each document's UTF-8 bytes are cut into consecutive pieces of at most
``window_bytes`` bytes, each cut moved back to the start of a UTF-8 character, identically for both models.
Each model tokenizes each piece with its own tokenizer, preceded by its beginning-of-sequence token
(``bos_token_id``, else ``eos_token_id``, of its configuration), and every token of the piece is scored (the
first one predicted from the BOS token alone). A window's ``tokens`` is the piece's UTF-8 byte count (the same
for both models) and ``nll_sum`` the summed NLL of all its tokens, so Σ nll_sum / Σ bytes is a per-byte
log-loss (bits per byte × ln 2) and the ratio of two models' is a byte-level perplexity ratio, comparable across
tokenizers (Gao et al. 2020, "The Pile", §5: bits per UTF-8 byte).

**Numerics.** Windows of equal input length and equal target count are batched (``batch_size`` at a time, in a
fixed order: by input length, target count, then window), so no padding or attention mask ever enters a forward
pass and a window's result does not depend on its neighbours' shapes. Weights and logits are in the model's compute
dtype (float32 unless the stage's ``dtype`` says otherwise); log-softmax and the gather of the targets'
log-probabilities are float32 (``torch.nn.functional.cross_entropy``, which fuses them: no vocabulary-wide
log-softmax tensor is kept), computed for the scored positions only (the output projection of context-only
positions is skipped where the model takes ``logits_to_keep``); each window's NLL is summed in float64. With
``certa.engine.core.models.runtime.deterministic_torch`` (fixed threads, deterministic kernels) the same machine gives
bit-identical sums.

Window ids: the SHA-256 (hex) of the canonical JSON ``[document row, first target offset, input token ids]``
(token windows) or ``[document row, byte offset, piece bytes as hex]`` (byte windows), so both models' windows
pair by id and two identical passages at different places keep distinct ids.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import InputError
from certa.engine.core.models.runtime import model_forward

__all__ = ["Windows", "token_windows", "byte_pieces", "piece_windows", "window_batches", "window_nll", "ScoreProgress"]

ScoreProgress = Callable[[int, int, float], None]
"""``progress(windows done, windows in all, scored targets per second so far)``."""


@dataclass(frozen=True)
class Windows:
    """Windows over one flat token array: window w's input is ``ids[start[w]: start[w] + length[w]]`` and its
    last ``targets[w]`` tokens are scored. ``ids`` identify the windows (hex), ``counts`` are what the table
    states as ``tokens`` (the targets, or the piece's bytes)."""

    flat: np.ndarray
    start: np.ndarray
    length: np.ndarray
    targets: np.ndarray
    ids: list[str]
    counts: np.ndarray


def _digest(document: Any) -> str:
    return hashlib.sha256(canonical_bytes(document)).hexdigest()


def token_windows(documents: Sequence[Sequence[int]], *, seq_len: int, stride: int) -> Windows:
    """Token windows over tokenized documents (module docstring); ``stride <= seq_len - 1``."""
    if not 1 <= stride <= seq_len - 1:
        raise InputError(f"stride {stride} must be between 1 and seq_len - 1 = {seq_len - 1}")
    lengths = np.array([len(d) for d in documents], dtype=np.int64)
    flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in documents]) if documents else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    per_doc = np.where(lengths >= 2, -(-(lengths - 1) // stride), 0)
    doc = np.repeat(np.arange(lengths.size), per_doc)
    k = np.arange(doc.size) - np.repeat(np.cumsum(per_doc) - per_doc, per_doc)
    first = 1 + k * stride                                   # first target, offset within its document
    end = np.minimum(first + stride, lengths[doc])           # one past the last target
    input_start = np.maximum(0, end - seq_len)
    start = offsets[doc] + input_start
    length = end - input_start
    targets = end - first
    ids = [_digest([int(d), int(f), flat[s: s + n].tolist()])
           for d, f, s, n in zip(doc.tolist(), first.tolist(), start.tolist(), length.tolist())]
    return Windows(flat=flat, start=start, length=length, targets=targets, ids=ids, counts=targets.copy())


def byte_pieces(texts: Sequence[str], window_bytes: int) -> list[tuple[int, int, bytes]]:
    """(document row, byte offset, piece) for every piece of at most ``window_bytes`` UTF-8 bytes, cut at
    character starts (module docstring); empty documents give none."""
    if window_bytes < 4:
        raise InputError(f"window_bytes {window_bytes} must be at least 4 (one UTF-8 character)")
    pieces: list[tuple[int, int, bytes]] = []
    for row, text in enumerate(texts):
        data = text.encode("utf-8")
        continuation = (np.frombuffer(data, dtype=np.uint8) & 0xC0) == 0x80
        at = 0
        while at < len(data):
            cut = min(at + window_bytes, len(data))
            while cut < len(data) and continuation[cut]:
                cut -= 1
            pieces.append((row, at, data[at:cut]))
            at = cut
    return pieces


def piece_windows(pieces: Sequence[tuple[int, int, bytes]], encoded: Sequence[Sequence[int]], bos: int) -> Windows:
    """Byte windows: piece i tokenized as ``encoded[i]`` by one model, scored after its ``bos`` token."""
    sequences = [[bos, *ids] for ids in encoded]
    length = np.array([len(s) for s in sequences], dtype=np.int64)
    flat = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences]) if sequences else np.zeros(0, np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    ids = [_digest([row, offset, piece.hex()]) for row, offset, piece in pieces]
    counts = np.array([len(piece) for _, _, piece in pieces], dtype=np.int64)
    return Windows(flat=flat, start=start, length=length, targets=length - 1, ids=ids, counts=counts)


def _last_logits(model: Any) -> Callable[[Any, int], Any]:
    """``logits(inputs, keep)``: the model's logits of the last ``keep`` positions, its output projection computed
    for those alone when its ``forward`` takes ``logits_to_keep`` (transformers >= 4.50), else for every position
    (the caller slices them). Asked of the model once, not per batch."""
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        return lambda inputs, keep: model_forward(model, input_ids=inputs, logits_to_keep=keep).logits
    return lambda inputs, keep: model_forward(model, input_ids=inputs).logits


def window_batches(windows: Windows, batch_size: int) -> list[np.ndarray]:
    """The window indices of each forward pass ``window_nll`` makes, in its order (module docstring, "Numerics"):
    windows of one input length and one target count, ``batch_size`` at a time, sorted by input length, target
    count, then window."""
    order = np.lexsort((np.arange(windows.start.size), windows.targets, windows.length))
    shapes = np.stack([windows.length[order], windows.targets[order]])   # a batch: one input length, one target count
    edges = np.flatnonzero(np.any(np.diff(shapes, axis=1), axis=0)) + 1
    return [group[i: i + batch_size] for group in np.split(order, edges) for i in range(0, group.size, batch_size)]


def window_nll(model: Any, windows: Windows, *, batch_size: int, device: str = "cpu",
               progress: ScoreProgress | None = None) -> np.ndarray:
    """Each window's summed NLL of its targets under ``model`` (float64; module docstring for the numerics)."""
    import torch

    sums = np.zeros(windows.start.size, dtype=np.float64)
    batches = window_batches(windows, batch_size)
    logits_of = _last_logits(model)
    done, scored, began = 0, 0, time.monotonic()
    for batch in batches:
        length = int(windows.length[batch[0]])
        keep = int(windows.targets[batch[0]])                    # the scored positions: the last `keep`
        index = windows.start[batch][:, None] + np.arange(length)[None, :]
        inputs = torch.from_numpy(windows.flat[index]).to(device)
        with torch.inference_mode():
            logits = logits_of(inputs, keep + 1)[:, -(keep + 1):-1, :].float()
            nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    inputs[:, length - keep:].reshape(-1),
                                                    reduction="none").view(batch.size, keep)
        nll64 = nll.to("cpu", torch.float64).numpy()
        sums[batch] = nll64.sum(axis=1)
        done += batch.size
        scored += int(windows.targets[batch].sum())
        if progress:
            progress(done, windows.start.size, scored / max(time.monotonic() - began, 1e-9))
    return sums
