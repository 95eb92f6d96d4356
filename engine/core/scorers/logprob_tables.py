"""Built-in scorer ``logprob_tables``: per-prompt score differences from two tables of per-position log-probs.

Each table (reference model, candidate model) has one row per teacher-forced position:
``prompt_id``, ``position`` (integer >= 0) and

* ``logprob``: the log-probability the model gives the teacher-forced token (metric ``delta_ce``), and/or
* ``logp_<token>`` columns: the model's next-token log-distribution over a shared vocabulary (metric
  ``sym_kl``; re-normalised over the listed tokens: by scipy's ``logsumexp`` before ``sequential.diff`` 3.2.0, by
  ``divergences.log_normalised`` with the version's portable exp and log from 3.2.0 on).

Both tables must hold exactly the same (prompt_id, position) pairs. For a prompt, with its first K
positions (by position) i = 1..K' (K' = min(K, positions available)):

    delta_ce = (1/K') sum_i ( logprob_ref,i - logprob_cand,i )          = CE(candidate) - CE(reference)
    sym_kl   = (1/K') sum_i sum_v (p_i(v) - q_i(v)) (ln p_i(v) - ln q_i(v)) = mean of KL(p||q) + KL(q||p)

(p the reference's, q the candidate's distribution; the formulas are ``certa.engine.core.scorers.divergences``', shared
with the ``hf_models`` scorer). The prompt mean is one observation (seed 000:
score_fn(ref, cand, prompt, K) averages over K positions; positions within a prompt are correlated, so
the sample size is the number of prompts, never n·K).

Neither metric has a finite support: delta_ce takes any real value and sym_kl any value >= 0 (unbounded
above), so the scorer declares none (``support()`` returns None) and a bounded method of
``sequential.diff`` needs the spec to declare its range.

Options (``scorer.options``): ``prompt_column``, ``position_column``, ``logprob_column``,
``distribution_prefix`` to rename the columns above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.scorers.divergences import (ZERO_MEANS_IDENTICAL, delta_ce_positions, log_normalised,
                                                   prompt_means, sym_kl_positions)
from certa.engine.core.stats.kernels.lazy_scipy import special
from certa.engine.core.stats.kernels.libm import ElementaryFunctions
from certa.engine.core.tables import Table

__all__ = ["LogprobTablesScorer", "METRICS", "SUPPORT"]

METRICS = ("delta_ce", "sym_kl")
SUPPORT: dict[str, tuple[float, float] | None] = {"delta_ce": None, "sym_kl": None}
"""Each metric's declared finite support (``certa.engine.core.scorers`` module docstring): none, both are unbounded."""
_OPTIONS = {"prompt_column": "prompt_id", "position_column": "position", "logprob_column": "logprob",
            "distribution_prefix": "logp_"}


@dataclass(frozen=True)
class _Prepared:
    prompts: np.ndarray          # sorted unique prompt ids (str)
    group: np.ndarray            # prompt index of each sorted row
    rank: np.ndarray             # 0-based position rank of each row within its prompt
    value: np.ndarray            # per-position score of each sorted row


def _sorted_keys(table: Table, prompt_col: str, position_col: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    prompts = table.text(prompt_col).astype(str)
    positions = table.numeric(position_col)
    if np.any(positions < 0) or np.any(positions != np.round(positions)):
        row = int(np.flatnonzero((positions < 0) | (positions != np.round(positions)))[0])
        raise InputError(f"input '{table.name}', column '{position_col}', row {row + 1}: positions must be integers "
                         f">= 0 (got {positions[row]!r})")
    order = np.lexsort((positions, prompts))
    p_sorted, pos_sorted = prompts[order], positions[order]
    dup = np.flatnonzero((p_sorted[1:] == p_sorted[:-1]) & (pos_sorted[1:] == pos_sorted[:-1]))
    if dup.size:
        i = int(dup[0])
        raise InputError(f"input '{table.name}': prompt {p_sorted[i]!r} has position {int(pos_sorted[i])} twice; "
                         "each (prompt_id, position) must appear once")
    return order, p_sorted, pos_sorted


class LogprobTablesScorer:
    """The built-in scorer (module docstring); create with ``LogprobTablesScorer(metric=..., options=...)``."""

    def __init__(self, *, metric: str | None = None, options: Mapping[str, Any] | None = None,
                 elementary: ElementaryFunctions | None = None) -> None:
        self.metric = metric or "delta_ce"
        self.elementary = elementary
        """sym_kl's exp and log: the stage version's (3.2.0 on: portable), else numpy's and scipy's as before."""
        if self.metric not in METRICS:
            raise StageError(f"scorer 'logprob_tables': metric must be one of {', '.join(METRICS)} "
                             f"(got {self.metric!r})")
        options = dict(options or {})
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise StageError(f"scorer 'logprob_tables': unknown option(s) {unknown}; known: {', '.join(_OPTIONS)}")
        self.columns = {**_OPTIONS, **{k: str(v) for k, v in options.items()}}
        self._cache: dict[tuple[str, str], _Prepared] = {}

    def _prepare(self, reference: Table, candidate: Table) -> _Prepared:
        key = (reference.sha256, candidate.sha256)
        if key in self._cache:
            return self._cache[key]
        cols = self.columns
        ref_order, ref_prompts, ref_pos = _sorted_keys(reference, cols["prompt_column"], cols["position_column"])
        cand_order, cand_prompts, cand_pos = _sorted_keys(candidate, cols["prompt_column"], cols["position_column"])
        same = ref_prompts.shape == cand_prompts.shape and np.all(ref_prompts == cand_prompts)
        if not (same and np.all(ref_pos == cand_pos)):
            raise InputError(f"inputs '{reference.name}' and '{candidate.name}' do not hold the same "
                             "(prompt_id, position) pairs; the scorer compares the two models position by position")
        if ref_prompts.size == 0:
            raise InputError(f"input '{reference.name}' has no rows to score")
        if self.metric == "delta_ce":
            ref_lp = reference.numeric(cols["logprob_column"])[ref_order]
            cand_lp = candidate.numeric(cols["logprob_column"])[cand_order]
            value = delta_ce_positions(ref_lp, cand_lp)
        else:
            value = self._sym_kl(reference, candidate, ref_order, cand_order)
        prompts, start, group = np.unique(ref_prompts, return_index=True, return_inverse=True)
        rank = np.arange(ref_prompts.size) - start[group]
        prepared = _Prepared(prompts=prompts, group=group, rank=rank, value=value)
        self._cache[key] = prepared
        return prepared

    def _sym_kl(self, reference: Table, candidate: Table, ref_order: np.ndarray, cand_order: np.ndarray) -> np.ndarray:
        prefix = self.columns["distribution_prefix"]
        ref_cols = sorted(c for c in reference.columns if c.startswith(prefix))
        cand_cols = sorted(c for c in candidate.columns if c.startswith(prefix))
        if not ref_cols or ref_cols != cand_cols:
            raise InputError(f"metric sym_kl needs the same '{prefix}<token>' log-distribution columns in "
                             f"'{reference.name}' and '{candidate.name}' (got {ref_cols[:5]} and {cand_cols[:5]})")
        log_p = np.column_stack([reference.numeric(c) for c in ref_cols])[ref_order]
        log_q = np.column_stack([candidate.numeric(c) for c in cand_cols])[cand_order]
        if self.elementary is None:
            log_p = log_p - special.logsumexp(log_p, axis=1, keepdims=True)
            log_q = log_q - special.logsumexp(log_q, axis=1, keepdims=True)
            return sym_kl_positions(log_p, log_q)
        exp, log = self.elementary.exp, self.elementary.log
        return sym_kl_positions(log_normalised(log_p, exp, log), log_normalised(log_q, exp, log), exp=exp)

    def support(self) -> tuple[float, float] | None:
        """The metric's declared finite support: None (``SUPPORT``; both metrics are unbounded)."""
        return SUPPORT[self.metric]

    def zero_means_identical(self) -> bool:
        """Whether the metric's 0 means identical distributions (``ZERO_MEANS_IDENTICAL``: sym_kl yes, delta_ce no)."""
        return ZERO_MEANS_IDENTICAL[self.metric]

    def prompts(self, reference: Table, candidate: Table) -> Sequence[str]:
        """Every prompt_id present in the tables, sorted."""
        return self._prepare(reference, candidate).prompts.tolist()

    def score_batch(self, reference: Table, candidate: Table, prompts: Sequence[str], K: int) -> np.ndarray:
        """Per-prompt mean over the first K positions, for many prompts at once."""
        if K < 1:
            raise StageError(f"positions_per_prompt must be >= 1 (got {K})")
        prepared = self._prepare(reference, candidate)
        keep = prepared.rank < K
        means = prompt_means(prepared.group[keep], prepared.value[keep], prepared.prompts.size)
        wanted = np.asarray(prompts, dtype=str)
        where = np.searchsorted(prepared.prompts, wanted)
        size = prepared.prompts.size
        found = (where < size) & (prepared.prompts[np.minimum(where, size - 1)] == wanted)
        if not np.all(found):
            raise StageError(f"prompt {wanted[~found][0]!r} is not in the log-prob tables")
        return means[where]

    def score(self, reference: Table, candidate: Table, prompt: str, K: int) -> float:
        """One prompt's score (``score_batch`` of one)."""
        return float(self.score_batch(reference, candidate, [prompt], K)[0])
