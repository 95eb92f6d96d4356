"""A third-party runtime for the seam's tests: a bigram "model" in pure numpy, its log-probs known by hand.

An input of format ``toy-model`` is a table of V = 5 rows and columns ``w0`` .. ``w4``: row u holds the logits of the
token after u, so ln p(x_t = v | x_<t) = W[x_{t-1}, v] - logsumexp(W[x_{t-1}]). The tokenizer maps the letters
``a`` .. ``e`` to ids 0 .. 4 (anything else is dropped) and adds no special token. ``ToyRuntime`` has no
``next_token_logprobs`` (like a served model); ``ToyFullRuntime`` (format ``toy-full-model``) has it. Each counts
``requests`` and ``tokens`` and captures one evidence table, as a served model's runtime would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from certa.engine.foundation.errors import InputError
from certa.engine.core.tables import Table, table_from_columns

V = 5
LETTERS = "abcde"


@dataclass(frozen=True)
class Encoding:
    ids: list[int]


class LetterTokenizer:
    """``a`` .. ``e`` to 0 .. 4, the rest dropped (the ``tokenizers.Tokenizer`` methods the stages call)."""

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        return Encoding([LETTERS.index(c) for c in text if c in LETTERS])

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[Encoding]:
        return [self.encode(text, add_special_tokens) for text in texts]


def toy_table(name: str, weights: np.ndarray, fmt: str = "toy-model") -> Table:
    """A toy model input: the V x V logits ``weights`` as a table of format ``fmt``."""
    from dataclasses import replace

    table = table_from_columns(name, {f"w{v}": [repr(float(x)) for x in weights[:, v]] for v in range(V)})
    return replace(table, fmt=fmt)


def log_probs(weights: np.ndarray) -> np.ndarray:
    """ln p(v | u) = W[u, v] - logsumexp(W[u])."""
    return weights - logsumexp(weights, axis=1, keepdims=True)


class ToyRuntime:
    formats = ("toy-model",)

    def __init__(self, table: Table, *, device: str = "cpu", dtype: str = "float32", threads: int = 1) -> None:
        self.log_p = log_probs(np.stack([table.numeric(f"w{v}") for v in range(V)], axis=1))
        self.name, self.sha256 = table.name, table.sha256
        self.tokenizer, self.tokenizer_sha256 = LetterTokenizer(), "letters-a-to-e"
        self.positions, self.vocabulary, self.resident = 64, V, False
        self.options = {"device": device, "dtype": dtype, "threads": threads}

    def first_token(self) -> int:
        return 0

    def check_token_ids(self, ids: np.ndarray, text: str) -> None:
        if np.asarray(ids).size and not 0 <= int(np.min(ids)) <= int(np.max(ids)) < V:
            raise InputError(f"input '{self.name}': {text} has a token id outside 0 .. {V - 1}")

    def open(self) -> OpenToy:
        return OpenToy(self)


class OpenToy:
    def __init__(self, runtime: ToyRuntime) -> None:
        self.runtime = runtime
        self.counts = {"requests": 0, "tokens": 0}
        self.closed = False

    def __enter__(self) -> OpenToy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True

    def _scored(self, flat: np.ndarray) -> np.ndarray:
        """ln p(flat[i] | flat[i - 1]) at every i >= 1 (index 0: 0)."""
        lp = np.zeros(flat.size)
        lp[1:] = self.runtime.log_p[flat[:-1], flat[1:]]
        return lp

    def window_nll(self, windows: Any, *, batch_size: int, progress: Any = None) -> np.ndarray:
        lp = np.concatenate([[0.0], np.cumsum(self._scored(windows.flat))])
        end = windows.start + windows.length
        self.counts["requests"] += int(windows.start.size)
        self.counts["tokens"] += int(windows.length.sum())
        return -(lp[end] - lp[end - windows.targets])

    def token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        self.counts["requests"] += len(sequences)
        self.counts["tokens"] += sum(len(s) for s in sequences)
        return [self._scored(np.asarray(s, dtype=np.int64))[1:] for s in sequences]

    def describe(self) -> Mapping[str, Any]:
        return {"kind": "endpoint", "input": self.runtime.name, "sha256": self.runtime.sha256, "model_type": "bigram",
                "parameters": V * V, "tokenizer_sha256": self.runtime.tokenizer_sha256,
                "special_tokens": {"before": [], "after": []}, "signature": {"status": "not_read"},
                "claims": {"served_by": "toy"}, "device": "remote", "dtype": "float64", "libraries": {"numpy": "any"}}

    def usage(self) -> dict[str, int]:
        return dict(self.counts)

    def evidence(self) -> Mapping[str, Table]:
        return {"transcripts": table_from_columns("transcripts", {"requests": [self.counts["requests"]]})}


class ToyFullRuntime(ToyRuntime):
    formats = ("toy-full-model",)

    def open(self) -> OpenToyFull:
        return OpenToyFull(self)


class OpenToyFull(OpenToy):
    def next_token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        self.counts["requests"] += len(sequences)
        return [self.runtime.log_p[np.asarray(s, dtype=np.int64)[:-1]] for s in sequences]


def not_a_runtime(table: Table, **options: Any) -> Encoding:
    """A factory that returns something else than a runtime."""
    return Encoding([])
