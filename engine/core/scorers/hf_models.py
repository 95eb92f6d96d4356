"""Built-in scorer ``hf_models``: runs the reference and candidate models itself (seed 000's ``score_fn``, live).

``reference`` and ``candidate`` are model inputs (``model:`` folders, format ``hf-model``; loaded by
``certa.engine.core.models.runtime.load_causal_lm`` from the bytes their manifests hash). The prompts are the text
column of a third declared input named in the options::

    scorer: {name: hf_models, metric: delta_ce, options: {prompts: prompts, text_column: text}}

Teacher forcing (per prompt, ``K`` = the stage's ``positions_per_prompt``): the prompt is encoded with the two
models' tokenizer (``tokenizer.json``, its post-processor included) into tokens x_0..x_{n-1}; K' = min(K, n - 1)
positions are scored, and only x_0..x_{K'} are fed (a causal model's logits at t depend on x_0..x_t alone). The
logits at t give the next-token distributions p_{t+1} (reference) and q_{t+1} (candidate) of x_{t+1}
(targets shifted by one: never logits[t] against x_t). Log-distributions are ``log_softmax`` of the float32
logits over the full vocabulary; the metrics are ``certa.engine.core.scorers.divergences``' in float64, the same
definitions as the ``logprob_tables`` scorer:

    delta_ce = (1/K') sum_{t=1..K'} ( ln p_t(x_t) - ln q_t(x_t) )                 = CE(candidate) - CE(reference)
    sym_kl   = (1/K') sum_{t=1..K'} sum_v (p_t(v) - q_t(v)) (ln p_t(v) - ln q_t(v)) = mean of KL(p||q) + KL(q||p)

Nothing is clipped, smoothed or substituted: a prompt that cannot be scored is an error naming it.

The two tokenizers must be the same file (equal ``tokenizer.json`` SHA-256): per-position comparisons need the
same tokens, so different tokenizers are refused, as are a model without ``tokenizer.json``, models whose
vocabularies differ in size, a prompt of fewer than 2 tokens and ``K + 1`` above the models' context length.

Batching: ``sequential.diff`` calls ``score_batch`` with ``batch_size`` prompts at a time, only when its rules
ask for more (so evaluation stops at the decision). The prompts of a call are grouped by their fed length and
each group is one forward pass per model, without padding: padded rows with an attention mask change the
logits in the last bits (measured: 1e-6), equal-length rows do not, so a prompt's score does not depend on
which prompts share its batch (tested). With ``deterministic_torch`` (``threads`` intra-op threads, default 1,
deterministic kernels) the same spec on the same machine gives bit-identical scores.

``usage()`` reports ``forward_passes`` (sequences run through a model: 2 per prompt scored), ``model_calls``
(batched forward calls: 2 per length group of a call) and ``tokens`` (tokens fed, both models), which the stage
records. Neither metric has a finite support (delta_ce is any real, sym_kl any value >= 0), so ``support()`` is
None: a bounded method needs a declared ``range``.

Options: ``prompts`` (required: the input holding the prompts), ``text_column`` (default ``text``), ``threads``
(default 1), ``dtype`` (the dtype the models compute in: ``float32``, the default, ``bfloat16`` or ``float16``;
``load_causal_lm``; log-softmax stays float32 and the metrics float64 whatever it is). The certificate records the
options as the spec gives them (the stage's ``scorer.options``): an absent ``dtype`` is float32, a default that
does not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.models.architecture import COMPUTE_DTYPES
from certa.engine.core.models.runtime import (LoadedModel, deterministic_torch, load_causal_lm, model_forward,
                                              require_model_libraries)
from certa.engine.core.scorers.divergences import (ZERO_MEANS_IDENTICAL, delta_ce_positions, prompt_means,
                                                   sym_kl_positions)
from certa.engine.core.stats.kernels.libm import LIBM
from certa.engine.core.tables import Table

__all__ = ["HfModelsScorer", "METRICS", "ModelPair", "load_pair"]

METRICS = ("delta_ce", "sym_kl")
_DEFAULTS: dict[str, Any] = {"text_column": "text", "threads": 1, "dtype": "float32"}
_NAME = "scorer 'hf_models'"


@dataclass(frozen=True)
class ModelPair:
    """The two loaded models of a run and what they share: the tokenizer (same SHA-256), the vocabulary size and
    the context length."""

    reference: LoadedModel
    candidate: LoadedModel
    vocabulary: int
    context: int | None


def _vocabulary(loaded: LoadedModel) -> int:
    return int(loaded.model.get_output_embeddings().weight.shape[0])


def _context(loaded: LoadedModel) -> int | None:
    config = loaded.model.config
    value = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return int(value) if value else None


def load_pair(reference: Table, candidate: Table, *, dtype: str = "float32") -> ModelPair:
    """Both models, computed in ``dtype``, refused unless they share a tokenizer file and a vocabulary size (module
    docstring)."""
    ref, cand = load_causal_lm(reference, dtype=dtype), load_causal_lm(candidate, dtype=dtype)
    for loaded in (ref, cand):
        if loaded.tokenizer is None:
            raise InputError(f"input '{loaded.name}': the model folder has no tokenizer.json; {_NAME} encodes the "
                             "prompts with the models' tokenizer")
    if ref.tokenizer_sha256 != cand.tokenizer_sha256:
        raise InputError(f"inputs '{ref.name}' and '{cand.name}' have different tokenizers (tokenizer.json SHA-256 "
                         f"{ref.tokenizer_sha256} and {cand.tokenizer_sha256}); {_NAME} compares the two models "
                         "position by position on the same tokens, so both must use the same tokenizer.json")
    if _vocabulary(ref) != _vocabulary(cand):
        raise InputError(f"inputs '{ref.name}' and '{cand.name}' predict over {_vocabulary(ref)} and "
                         f"{_vocabulary(cand)} tokens; the distributions must share one vocabulary")
    contexts = [c for c in (_context(ref), _context(cand)) if c is not None]
    return ModelPair(reference=ref, candidate=cand, vocabulary=_vocabulary(ref),
                     context=min(contexts) if contexts else None)


class HfModelsScorer:
    """The built-in live scorer (module docstring); ``HfModelsScorer(metric=..., options=..., tables=...)``."""

    def __init__(self, *, metric: str | None = None, options: Mapping[str, Any] | None = None,
                 tables: Mapping[str, Table] | None = None) -> None:
        self.metric = metric or "delta_ce"
        if self.metric not in METRICS:
            raise StageError(f"{_NAME}: metric must be one of {', '.join(METRICS)} (got {self.metric!r})")
        options = dict(options or {})
        unknown = sorted(set(options) - {"prompts", *_DEFAULTS})
        if unknown:
            raise StageError(f"{_NAME}: unknown option(s) {unknown}; known: prompts, {', '.join(_DEFAULTS)}")
        settings = {**_DEFAULTS, **options}
        name, threads = settings.get("prompts"), settings["threads"]
        if not isinstance(name, str):
            raise StageError(f"{_NAME} needs options.prompts: the name of the declared input holding the prompts")
        tables = dict(tables or {})
        if name not in tables:
            raise StageError(f"{_NAME}: options.prompts names '{name}', which is not a declared input (declared: "
                             f"{', '.join(sorted(tables)) or 'none'})")
        if not (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1):
            raise StageError(f"{_NAME}: options.threads must be an integer >= 1 (got {threads!r})")
        if settings["dtype"] not in COMPUTE_DTYPES:
            raise StageError(f"{_NAME}: options.dtype must be one of {', '.join(COMPUTE_DTYPES)} "
                             f"(got {settings['dtype']!r})")
        self.dtype = str(settings["dtype"])
        self.prompt_table: Table = tables[name]
        self.text_column = str(settings["text_column"])
        self.threads = threads
        self._pairs: dict[tuple[str, str], ModelPair] = {}
        self._tokens: dict[str, list[int]] = {}
        self._usage = {"forward_passes": 0, "model_calls": 0, "tokens": 0}

    def _pair(self, reference: Table, candidate: Table) -> ModelPair:
        key = (reference.sha256, candidate.sha256)
        if key not in self._pairs:
            deterministic_torch(self.threads)
            self._pairs[key] = load_pair(reference, candidate, dtype=self.dtype)
        return self._pairs[key]

    def _encode(self, pair: ModelPair, prompts: Sequence[str]) -> list[list[int]]:
        missing = [p for p in dict.fromkeys(prompts) if p not in self._tokens]
        if missing:
            encoded = pair.reference.tokenizer.encode_batch(missing)
            self._tokens.update({p: list(e.ids) for p, e in zip(missing, encoded)})
            ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encoded])
            for model in (pair.reference, pair.candidate):
                model.check_token_ids(ids, f"the prompts of input '{self.prompt_table.name}'")
        short = next((p for p in prompts if len(self._tokens[p]) < 2), None)
        if short is not None:
            raise InputError(f"input '{self.prompt_table.name}': the prompt {short!r} has "
                             f"{len(self._tokens[short])} token(s); teacher forcing needs at least 2")
        return [self._tokens[p] for p in prompts]

    def support(self) -> tuple[float, float] | None:
        """None: neither metric has a finite support (module docstring)."""
        return None

    def zero_means_identical(self) -> bool:
        """Whether the metric's 0 means identical distributions (``ZERO_MEANS_IDENTICAL``: sym_kl yes, delta_ce no)."""
        return ZERO_MEANS_IDENTICAL[self.metric]

    def usage(self) -> dict[str, int]:
        """Forward passes (sequences through a model), batched model calls and tokens fed, so far."""
        return dict(self._usage)

    def prompts(self, reference: Table, candidate: Table) -> Sequence[str]:
        """The prompt input's text column in row order; every prompt is checked to have at least 2 tokens."""
        texts = [str(t) for t in self.prompt_table.text(self.text_column).tolist()]
        if not texts:
            raise InputError(f"input '{self.prompt_table.name}' has no prompts")
        self._encode(self._pair(reference, candidate), texts)
        return texts

    def _log_probs(self, loaded: LoadedModel, batch: Any) -> Any:
        """log_softmax (float32) of the model's logits for the rows of ``batch`` (one forward call)."""
        torch = require_model_libraries()["torch"]
        with torch.inference_mode():
            logits = model_forward(loaded.model, input_ids=batch).logits
        rows, length = batch.shape
        loaded.check_finite(logits.to(torch.float64).sum(dim=(1, 2)).numpy(), "logit", "prompts of a batch")
        self._usage["forward_passes"] += rows
        self._usage["model_calls"] += 1
        self._usage["tokens"] += rows * length
        return torch.log_softmax(logits.to(torch.float32), dim=-1)

    def _group_positions(self, pair: ModelPair, ids: list[list[int]]) -> np.ndarray:
        """Per-position values (rows, K') of prompts whose fed tokens ``ids`` all have length K' + 1."""
        torch = require_model_libraries()["torch"]
        batch = torch.tensor(ids, dtype=torch.long)
        log_p = self._log_probs(pair.reference, batch)[:, :-1]       # position t predicts token t + 1
        log_q = self._log_probs(pair.candidate, batch)[:, :-1]
        if self.metric == "delta_ce":
            targets = batch[:, 1:].unsqueeze(-1)
            return delta_ce_positions(log_p.gather(-1, targets).squeeze(-1).numpy(),
                                      log_q.gather(-1, targets).squeeze(-1).numpy())
        return sym_kl_positions(log_p.numpy(), log_q.numpy(), exp=LIBM.exp)

    def score_batch(self, reference: Table, candidate: Table, prompts: Sequence[str], K: int) -> np.ndarray:
        """Scores of ``prompts`` over their first K teacher-forced positions (module docstring)."""
        if K < 1:
            raise StageError(f"positions_per_prompt must be >= 1 (got {K})")
        pair = self._pair(reference, candidate)
        if pair.context is not None and K + 1 > pair.context:
            raise StageError(f"positions_per_prompt = {K} feeds up to {K + 1} tokens, more than the models' context "
                             f"of {pair.context}; lower positions_per_prompt")
        fed = [tokens[: K + 1] for tokens in self._encode(pair, list(prompts))]
        lengths = np.array([len(tokens) for tokens in fed])
        group_of = np.empty(0, dtype=np.int64)
        values = np.empty(0)
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length)
            per_position = self._group_positions(pair, [fed[i] for i in rows.tolist()])
            group_of = np.concatenate([group_of, np.repeat(rows, length - 1)])
            values = np.concatenate([values, per_position.reshape(-1)])
        return prompt_means(group_of, values, len(fed))

    def score(self, reference: Table, candidate: Table, prompt: str, K: int) -> float:
        """One prompt's score (``score_batch`` of one)."""
        return float(self.score_batch(reference, candidate, [prompt], K)[0])
