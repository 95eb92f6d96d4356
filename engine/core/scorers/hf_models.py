"""Built-in scorer ``hf_models``: runs the reference and candidate models itself (seed 000's ``score_fn``, live).

``reference`` and ``candidate`` are model inputs, each run by the runtime of its input's format
(``certa.engine.core.runtimes``: a ``model:`` folder, format ``hf-model``, by ``hf``, which loads it from the bytes
its manifest hashes; any pairing of runtimes works). The prompts are the text column of a third declared input named
in the options::

    scorer: {name: hf_models, metric: delta_ce, options: {prompts: prompts, text_column: text}}

Teacher forcing (per prompt, ``K`` = the stage's ``positions_per_prompt``): the prompt is encoded with the two
models' tokenizer (``tokenizer.json``, its post-processor included) into tokens x_0..x_{n-1}; K' = min(K, n - 1)
positions are scored, and only x_0..x_{K'} are fed (a causal model's logits at t depend on x_0..x_t alone). Each
runtime gives the next-token distributions p_t (reference) and q_t (candidate) of x_t, t = 1..K', or only their
values at the teacher-forced x_t (``OpenRuntime.token_logprobs``; for a folder, ``log_softmax`` of the float32
logits at t - 1: targets shifted by one, never logits[t] against x_t); the metrics are
``certa.engine.core.scorers.divergences``' in float64, the same definitions as the ``logprob_tables`` scorer:

    delta_ce = (1/K') sum_{t=1..K'} ( ln p_t(x_t) - ln q_t(x_t) )                 = CE(candidate) - CE(reference)
    abs_delta_lp = (1/K') sum_{t=1..K'} | ln p_t(x_t) - ln q_t(x_t) |             (0 only for equal log-probs)
    sym_kl   = (1/K') sum_{t=1..K'} sum_v (p_t(v) - q_t(v)) (ln p_t(v) - ln q_t(v)) = mean of KL(p||q) + KL(q||p)

Generated-token mode (``generated_kl``), for a served candidate that gives log-probs only of what it generates:
the candidate continues the whole encoded prompt by up to K tokens y_1..y_K' sampled from its own distributions
(``generate``: temperature 1, no truncation, the seed ``options.seed + i`` for the i-th prompt the scorer scores,
i = 0, 1, ... in call order), with its log-probs ln q_t(y_t); the reference scores the same tokens by teacher
forcing (the prompt followed by y_1..y_K'), and

    generated_kl = (1/K') sum_{t=1..K'} ( ln q_t(y_t) - ln p_t(y_t) )   (an unbiased estimate of KL(q||p) per token)

(``certa.engine.core.scorers.divergences``: its assumptions). It requires the candidate's runtime to generate and
its log-probs to be those of the distribution sampled from (vLLM's raw log-probs at temperature 1); a continuation
that stops at the end-of-sequence token is shorter (K' < K), one that generates nothing is refused.

Nothing is clipped, smoothed or substituted: a prompt that cannot be scored is an error naming it.

Served models (an ``endpoint`` input, ``certa.engine.core.runtimes.endpoint``): one served model scores the local
reference's tokens, its server checked to tokenize every prompt into the same ids (``BorrowsTokenizer``); two served
models (a vendor comparison) score the tokens of the reference's server (``use_server_tokenizer``: ``POST
/tokenize``), the candidate's server checked to give the same ids. When a model is served, the scorer keeps the
local model's teacher-forced log-probs (``evidence()``: ``<role>_logprobs``, beside the served model's
``<role>_transcript``), and ``scores_from_evidence`` derives every score again from the two (a replay: no model run,
no server queried), by the same formulas.

The two tokenizers must be the same file (equal ``tokenizer.json`` SHA-256): per-position comparisons need the
same tokens, so different tokenizers are refused, as are a model without ``tokenizer.json``, models whose
vocabularies differ in size, a prompt of fewer than 2 tokens and ``K + 1`` above the models' context length.
``sym_kl`` needs both models' full next-token distributions (``OpenRuntime.next_token_logprobs``), which a served
model does not return: a runtime without them is refused for it (``delta_ce`` needs the teacher-forced tokens'
log-probs only).

Batching: ``sequential.diff`` calls ``score_batch`` with ``batch_size`` prompts at a time, only when its rules
ask for more (so evaluation stops at the decision), and the call's prompts go to each runtime together. A model
folder's runtime groups them by their fed length, each group one forward pass, without padding: padded rows with an
attention mask change the logits in the last bits (measured: 1e-6), equal-length rows do not, so a prompt's score
does not depend on which prompts share its batch (tested). With ``deterministic_torch`` (``threads`` intra-op
threads, default 1, deterministic kernels) the same spec on the same machine gives bit-identical scores.

``usage()`` reports what the two runtimes spent, summed (``OpenRuntime.usage``; for two folders
``forward_passes``, sequences run through a model: 2 per prompt scored, ``model_calls``, batched forward calls: 2
per length group of a call, and ``tokens``, tokens fed, both models), which the stage records. No metric has a finite support (delta_ce and generated_kl are any real, sym_kl and
abs_delta_lp any value >= 0), so ``support()`` is None: a bounded method needs a declared ``range``.

Options: ``prompts`` (required: the input holding the prompts), ``text_column`` (default ``text``), ``seed``
(``generated_kl`` only: the first sampling seed, default 0), ``threads
(default 1), ``dtype`` (the dtype the models compute in: ``float32``, the default, ``bfloat16`` or ``float16``;
the runtime's ``dtype``; log-softmax stays float32 and the metrics float64 whatever it is). The certificate records the
options as the spec gives them (the stage's ``scorer.options``): an absent ``dtype`` is float32, a default that
does not change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.models.architecture import COMPUTE_DTYPES
from certa.engine.core.runtimes import BorrowsTokenizer, DistributionRuntime, OpenRuntime, Runtime, load_runtime, runtime_for
from certa.engine.core.runtimes.endpoint import TRANSCRIPT, transcript_generations, transcript_logprobs
from certa.engine.core.scorers.divergences import (ZERO_MEANS_IDENTICAL, abs_delta_lp_positions, delta_ce_positions,
                                                   generated_kl_positions, prompt_means, sym_kl_positions)
from certa.engine.core.stats.kernels.libm import LIBM, ElementaryFunctions
from certa.engine.core.tables import Table, table_from_columns

__all__ = ["HfModelsScorer", "METRICS", "RuntimePair", "open_pair"]

METRICS = ("delta_ce", "sym_kl", "generated_kl", "abs_delta_lp")
_DEFAULTS: dict[str, Any] = {"text_column": "text", "threads": 1, "dtype": "float32", "seed": 0}
NEEDS_GENERATION = frozenset({"generated_kl"})
"""The metrics whose candidate generates the scored tokens (``generate``: a served model's runtime)."""
_NAME = "scorer 'hf_models'"
ROLES = ("reference", "candidate")
LOGPROBS = "logprobs"
"""A local model's captured teacher-forced log-probs, when the other model is served, are ``<role>_logprobs``
(columns ``sequence``, 0-based in the order scored, ``position``, 1-based, and ``logprob``)."""
NEEDS_DISTRIBUTIONS = frozenset({"sym_kl"})
"""The metrics computed from full next-token distributions (``OpenRuntime.next_token_logprobs``), not from the
teacher-forced tokens' log-probs alone."""


@dataclass(frozen=True)
class RuntimePair:
    """The two models of a run, prepared (``runtimes``: reference, candidate) and opened (``opened``), and the
    context length they share (None: neither states one)."""

    runtimes: tuple[Runtime, Runtime]
    opened: tuple[OpenRuntime, OpenRuntime]
    context: int | None


def open_pair(reference: Table, candidate: Table, *, metric: str, dtype: str = "float32",
              threads: int = 1) -> RuntimePair:
    """Both models, each prepared by the runtime of its input's format (``runtime_for``) and opened, computed in
    ``dtype`` with ``threads`` threads; refused unless they share a tokenizer file and a vocabulary size, and, for a
    metric of ``NEEDS_DISTRIBUTIONS``, unless both give full next-token distributions (module docstring)."""
    names = (runtime_for(reference), runtime_for(candidate))
    ref, cand = (load_runtime(name, table, device="cpu", dtype=dtype, threads=threads)
                 for name, table in zip(names, (reference, candidate)))
    served = [runtime for runtime in (ref, cand) if isinstance(runtime, BorrowsTokenizer)]
    for borrower in served if len(served) == 1 else ():  # a served model scores the local reference's tokens
        borrower.share_tokenizer(cand if borrower is ref else ref)
    for runtime in (ref, cand):
        if runtime.tokenizer is None and len(served) < 2:
            raise InputError(f"input '{runtime.name}': the model folder has no tokenizer.json; {_NAME} encodes the "
                             "prompts with the models' tokenizer")
    if ref.tokenizer_sha256 != cand.tokenizer_sha256 and len(served) < 2:
        raise InputError(f"inputs '{ref.name}' and '{cand.name}' have different tokenizers (tokenizer.json SHA-256 "
                         f"{ref.tokenizer_sha256} and {cand.tokenizer_sha256}); {_NAME} compares the two models "
                         "position by position on the same tokens, so both must use the same tokenizer.json")
    if ref.vocabulary and cand.vocabulary and ref.vocabulary != cand.vocabulary:
        raise InputError(f"inputs '{ref.name}' and '{cand.name}' predict over {ref.vocabulary} and "
                         f"{cand.vocabulary} tokens; the distributions must share one vocabulary")
    opened = (ref.open(), cand.open())
    if len(served) == 2:  # two served models: the reference's server tokenizes, the candidate's is checked against it
        cast(BorrowsTokenizer, ref).use_server_tokenizer(opened[0])
        cast(BorrowsTokenizer, cand).share_tokenizer(ref)
    lacking = [(name, runtime.name) for name, runtime, model in zip(names, (ref, cand), opened)
               if not isinstance(model, DistributionRuntime)]
    if metric in NEEDS_DISTRIBUTIONS and lacking:
        for model in opened:
            model.close()
        raise StageError(f"{_NAME}: metric {metric} needs the full next-token distributions of both models, but "
                         f"input '{lacking[0][1]}' (runtime '{lacking[0][0]}') gives the log-probs of given tokens "
                         "only, as a served model does; use metric delta_ce")
    if metric in NEEDS_GENERATION and not callable(getattr(opened[1], "generate", None)):
        for model in opened:
            model.close()
        raise StageError(f"{_NAME}: metric {metric} needs a candidate that generates the scored tokens with their "
                         f"log-probs (a served model), but input '{cand.name}' (runtime '{names[1]}') does not; use "
                         "metric delta_ce or sym_kl")
    contexts = [runtime.positions for runtime in (ref, cand) if runtime.positions]
    return RuntimePair(runtimes=(ref, cand), opened=opened, context=min(contexts) if contexts else None)


def _check_counts(scored: Sequence[np.ndarray], expected: int, role: str, what: str) -> None:
    """An ``InputError`` unless the run captured one sequence of ``role``'s log-probs per ``what``."""
    if len(scored) != expected:
        raise InputError(f"the run captured the {role}'s log-probs of {len(scored)} sequences for {expected} {what}: "
                         "the captured evidence does not belong together")


class HfModelsScorer:
    """The built-in live scorer (module docstring); ``HfModelsScorer(metric=..., options=..., tables=...)``."""

    def __init__(self, *, metric: str | None = None, options: Mapping[str, Any] | None = None,
                 tables: Mapping[str, Table] | None = None, elementary: ElementaryFunctions | None = None) -> None:
        self.metric = metric or "delta_ce"
        self.exp = (elementary or LIBM).exp
        """sym_kl's exp: the stage version's (3.2.0 on: portable), else libm's as before (``divergences``)."""
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
        seed = settings["seed"]
        if "seed" in options and self.metric not in NEEDS_GENERATION:
            raise StageError(f"{_NAME}: options.seed seeds the sampling of metric generated_kl; metric {self.metric} "
                             "samples nothing (remove it)")
        if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**31):
            raise StageError(f"{_NAME}: options.seed must be an integer from 0 to 2^31 - 1 (got {seed!r})")
        self.seed = seed
        self._generated = 0
        self._pairs: dict[tuple[str, str], RuntimePair] = {}
        self._tokens: dict[str, list[int]] = {}
        self._kept: dict[str, list[np.ndarray]] = {}
        """A local model's teacher-forced log-probs by role, in call order, when the other is served (``evidence``)."""

    def _pair(self, reference: Table, candidate: Table) -> RuntimePair:
        key = (reference.sha256, candidate.sha256)
        if key not in self._pairs:
            self._pairs[key] = open_pair(reference, candidate, metric=self.metric, dtype=self.dtype,
                                         threads=self.threads)
        return self._pairs[key]

    def _encode(self, pair: RuntimePair, prompts: Sequence[str]) -> list[list[int]]:
        missing = [p for p in dict.fromkeys(prompts) if p not in self._tokens]
        if missing:
            encoded = pair.runtimes[0].tokenizer.encode_batch(missing)
            self._tokens.update({p: list(e.ids) for p, e in zip(missing, encoded)})
            ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encoded])
            for runtime in pair.runtimes:
                runtime.check_token_ids(ids, f"the prompts of input '{self.prompt_table.name}'")
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
        """What both models' runtimes have spent so far, summed by name (``OpenRuntime.usage``: for a model folder,
        forward passes, batched model calls and tokens fed)."""
        spent: dict[str, int] = {}
        for pair in self._pairs.values():
            for model in pair.opened:
                for name, count in model.usage().items():
                    spent[name] = spent.get(name, 0) + count
        return spent

    def prompts(self, reference: Table, candidate: Table) -> Sequence[str]:
        """The prompt input's text column in row order; every prompt is checked to have at least 2 tokens, and a
        served model to tokenize every prompt into the reference tokenizer's ids (with its special tokens)."""
        texts = [str(t) for t in self.prompt_table.text(self.text_column).tolist()]
        if not texts:
            raise InputError(f"input '{self.prompt_table.name}' has no prompts")
        pair = self._pair(reference, candidate)
        self._encode(pair, texts)
        for model in pair.opened:
            check = getattr(model, "check_tokenization", None)
            if check is not None:
                distinct = list(dict.fromkeys(texts))
                check(distinct, [self._tokens[text] for text in distinct], add_special_tokens=True)
        return texts

    def describe(self) -> dict[str, Any]:
        """Both models' identities (``OpenRuntime.describe``: a served model's with its server's claims), by role."""
        described: dict[str, Any] = {}
        for pair in self._pairs.values():
            described.update(zip(ROLES, (model.describe() for model in pair.opened)))
        return described

    def close(self) -> None:
        """Close both models' runtimes (a model's memory returned; a served model's answers kept for a resume
        removed, the run having completed)."""
        for pair in self._pairs.values():
            for model in pair.opened:
                model.close()

    def evidence(self) -> dict[str, Table]:
        """What the models' runtimes captured (a served model's transcript), named ``<role>_<name>``."""
        captured: dict[str, Table] = {}
        for pair in self._pairs.values():
            for role, model in zip(ROLES, pair.opened):
                captured.update({f"{role}_{name}": table for name, table in model.evidence().items()})
        for role, kept in self._kept.items():
            lengths = np.array([lp.size for lp in kept], dtype=np.int64)
            starts = np.cumsum(lengths) - lengths
            captured[f"{role}_{LOGPROBS}"] = table_from_columns(f"{role}_{LOGPROBS}", {
                "sequence": np.repeat(np.arange(lengths.size), lengths),
                "position": np.arange(int(lengths.sum())) - np.repeat(starts, lengths) + 1,
                "logprob": np.concatenate(kept) if kept else np.empty(0)})
        return captured

    def scores_from_evidence(self, reference: Table, candidate: Table,
                             evidence: Mapping[str, Table]) -> np.ndarray | None:
        """Every score a run gave, in order, derived again from what it captured (``evidence()``, a replay: no model
        is run and no server queried), or None when no model was served (nothing but the scores was captured). A
        served model's log-probs are read from its transcript, each answer checked again against the ids its request
        sent (``transcript_logprobs``, ``transcript_generations``); a local model's from its captured
        ``<role>_logprobs``; then the metric as ``score_batch`` computes it (module docstring), so a replay that
        reproduces the scores shows they follow from the server's recorded answers."""
        inputs = dict(zip(ROLES, (reference, candidate)))
        served = [role for role in ROLES if f"{role}_{TRANSCRIPT}" in evidence]
        if not served:
            return None
        if self.metric in NEEDS_GENERATION:
            generated = transcript_generations(candidate, evidence[f"candidate_{TRANSCRIPT}"])
            lengths = np.array([tokens.size for tokens, _ in generated], dtype=np.int64)
            scored = self._evidence_logprobs("reference", inputs, evidence)
            _check_counts(scored, lengths.size, "reference", "continuations the candidate generated")
            short = next((i for i, (lp, n) in enumerate(zip(scored, lengths)) if lp.size < n), None)
            if short is not None:
                raise InputError(f"the captured reference log-probs of sequence {short + 1} are fewer than the "
                                 f"{lengths[short]} tokens the candidate generated after it")
            values = generated_kl_positions(np.concatenate([lp for _, lp in generated] or [np.empty(0)]),
                                            np.concatenate([lp[lp.size - n:] for lp, n in zip(scored, lengths)]
                                                           or [np.empty(0)]))
            return prompt_means(np.repeat(np.arange(lengths.size), lengths), values, int(lengths.size))
        ref, cand = (self._evidence_logprobs(role, inputs, evidence) for role in ROLES)
        _check_counts(cand, len(ref), "candidate", "sequences the reference scored")
        lengths = np.array([lp.size for lp in ref], dtype=np.int64)
        differ = next((i for i, (a, b) in enumerate(zip(ref, cand)) if a.size != b.size), None)
        if differ is not None:
            raise InputError(f"sequence {differ + 1}: the reference's captured log-probs cover {ref[differ].size} "
                             f"tokens and the candidate's {cand[differ].size}: they did not score the same tokens")
        positions = abs_delta_lp_positions if self.metric == "abs_delta_lp" else delta_ce_positions
        values = positions(np.concatenate(ref or [np.empty(0)]), np.concatenate(cand or [np.empty(0)]))
        return prompt_means(np.repeat(np.arange(lengths.size), lengths), values, int(lengths.size))

    @staticmethod
    def _evidence_logprobs(role: str, inputs: Mapping[str, Table], evidence: Mapping[str, Table]) -> list[np.ndarray]:
        """The teacher-forced log-probs of each sequence ``role``'s model scored: from its transcript when served,
        else from its captured ``<role>_logprobs`` table (``evidence``)."""
        if f"{role}_{TRANSCRIPT}" in evidence:
            return transcript_logprobs(inputs[role], evidence[f"{role}_{TRANSCRIPT}"])
        table = evidence.get(f"{role}_{LOGPROBS}")
        if table is None:
            raise InputError(f"the run captured no log-probs of its local {role} model ({role}_{LOGPROBS}), which a "
                             "replay needs to derive the scores from the served model's transcript")
        sequence = table.numeric("sequence").astype(np.int64)
        logprob = table.numeric("logprob")
        if sequence.size and (np.any(np.diff(sequence) < 0) or sequence[0] != 0):
            raise InputError(f"the captured {role}_{LOGPROBS} table is not in sequence order")
        counts = np.bincount(sequence) if sequence.size else np.zeros(0, dtype=np.int64)
        return np.split(logprob, np.cumsum(counts)[:-1]) if counts.size else []

    def _token_logprobs(self, pair: RuntimePair, index: int, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """``token_logprobs`` of the pair's model ``index`` (0 reference, 1 candidate); a local model's kept as
        evidence when the other is served (``evidence``), so that a replay derives the scores from the transcript."""
        logprobs = pair.opened[index].token_logprobs(sequences)
        served = [isinstance(runtime, BorrowsTokenizer) for runtime in pair.runtimes]
        if any(served) and not served[index]:
            self._kept.setdefault(ROLES[index], []).extend(np.asarray(lp, dtype=np.float64) for lp in logprobs)
        return logprobs

    def score_batch(self, reference: Table, candidate: Table, prompts: Sequence[str], K: int) -> np.ndarray:
        """Scores of ``prompts`` over their first K teacher-forced positions (module docstring)."""
        if K < 1:
            raise StageError(f"positions_per_prompt must be >= 1 (got {K})")
        pair = self._pair(reference, candidate)
        if pair.context is not None and K + 1 > pair.context:
            raise StageError(f"positions_per_prompt = {K} feeds up to {K + 1} tokens, more than the models' context "
                             f"of {pair.context}; lower positions_per_prompt")
        if self.metric in NEEDS_GENERATION:
            return self._generated_scores(pair, list(prompts), K)
        fed = [tokens[: K + 1] for tokens in self._encode(pair, list(prompts))]
        ref, cand = pair.opened
        if self.metric in NEEDS_DISTRIBUTIONS:
            values = sym_kl_positions(np.concatenate(cast(DistributionRuntime, ref).next_token_logprobs(fed)),
                                      np.concatenate(cast(DistributionRuntime, cand).next_token_logprobs(fed)),
                                      exp=self.exp)
        else:
            positions = abs_delta_lp_positions if self.metric == "abs_delta_lp" else delta_ce_positions
            values = positions(np.concatenate(self._token_logprobs(pair, 0, fed)),
                               np.concatenate(self._token_logprobs(pair, 1, fed)))
        group_of = np.repeat(np.arange(len(fed)), [len(tokens) - 1 for tokens in fed])
        return prompt_means(group_of, values, len(fed))

    def _generated_scores(self, pair: RuntimePair, prompts: list[str], K: int) -> np.ndarray:
        """``generated_kl`` of each prompt (module docstring)."""
        encoded = self._encode(pair, prompts)
        too_long = next((p for p, ids in zip(prompts, encoded) if pair.context and len(ids) + K > pair.context), None)
        if too_long is not None:
            raise InputError(f"input '{self.prompt_table.name}': the prompt {too_long[:60]!r} continued by "
                             f"positions_per_prompt = {K} tokens exceeds the models' context of {pair.context}")
        cand = pair.opened[1]
        seeds = [self.seed + self._generated + i for i in range(len(prompts))]
        self._generated += len(prompts)
        generated = cast(Any, cand).generate(encoded, max_tokens=K, seeds=seeds)
        lengths = np.array([int(tokens.size) for tokens, _ in generated], dtype=np.int64)
        if lengths.size and int(lengths.min()) == 0:
            empty = prompts[int(np.argmin(lengths))]
            raise StageError(f"{_NAME}: input '{pair.runtimes[1].name}' generated no token after the prompt "
                             f"{empty[:60]!r}")
        reference = self._token_logprobs(pair, 0, [ids + tokens.tolist() for ids, (tokens, _) in zip(encoded, generated)])
        values = generated_kl_positions(np.concatenate([logprobs for _, logprobs in generated]),
                                        np.concatenate([lp[lp.size - n:] for lp, n in zip(reference, lengths)]))
        return prompt_means(np.repeat(np.arange(len(prompts)), lengths), values, len(prompts))

    def score(self, reference: Table, candidate: Table, prompt: str, K: int) -> float:
        """One prompt's score (``score_batch`` of one)."""
        return float(self.score_batch(reference, candidate, [prompt], K)[0])
