"""The per-position formulas of the scorer metrics ``delta_ce`` and ``sym_kl``, and the per-prompt mean: one
definition for every built-in scorer (``logprob_tables`` reads the log-probs from tables, ``hf_models`` computes
them with the two models), so the same prompt gets the same score whichever scorer produced the log-probs.

For a prompt's teacher-forced positions i = 1..K' (p_i the reference's and q_i the candidate's next-token
distribution, x_i the teacher-forced token; seed 000's ``score_fn(ref, cand, prompt, K)``):

    delta_ce_i = ln p_i(x_i) - ln q_i(x_i)                                (its mean: CE(candidate) - CE(reference))
    abs_delta_lp_i = | ln p_i(x_i) - ln q_i(x_i) |                      (how far apart, whichever model is better)
    sym_kl_i   = sum_v (p_i(v) - q_i(v)) (ln p_i(v) - ln q_i(v))  = KL(p_i||q_i) + KL(q_i||p_i)   (Jeffreys 1946)

and the prompt's score is the mean over its K' positions (the prompt is the unit of observation, never n·K).
``abs_delta_lp`` needs only the teacher-forced tokens' log-probs, as ``delta_ce`` does (so a served model can be
scored with it), but its positions cannot cancel: its mean is 0 only when the two models give every scored token
the same log-probability, and a weight change that leaves the mean cross-entropy unchanged (delta_ce near 0)
still moves it. It is the metric of a substitution audit ("is the endpoint serving these weights?"), where the
equivalence band is a tolerance far above the two runtimes' arithmetic noise.

``generated_kl`` (generated-token mode, for a candidate that gives log-probs only of what it generates: a served
model): the candidate continues the prompt by tokens y_1..y_K' sampled from its own distributions q (temperature 1,
no truncation), with ln q(y_i); the reference scores the same tokens by teacher forcing, ln p(y_i | prompt, y_<i):

    generated_kl_i = ln q_i(y_i) - ln p_i(y_i)

Given the prompt, E[sum_i generated_kl_i] = KL(q(y_1..y_K' | prompt) || p(y_1..y_K' | prompt)) >= 0 (the chain
rule of KL divergence; Cover & Thomas, *Elements of Information Theory*, 2nd ed., Thm. 2.5.3), with equality iff
the two models give the same distributions along the sampled continuations; the prompt's score (the mean of the
K' terms) is an unbiased estimate of that KL per generated token. One draw's value can be negative, and 0 does not
mean identical (a single sample), so the metric declares no support and no identity.
All arithmetic is float64; the sum over the vocabulary is numpy's pairwise sum along the last axis, so a row's
value does not depend on the other rows of the array. ``exp`` is a parameter: numpy's ``np.exp`` picks its kernel
by CPU at run time (its last bits depend on the machine's SIMD features), and the C library's ``exp`` picks a
variant per CPU family (glibc: an FMA build or an SSE2 build). From ``sequential.diff`` 3.2.0 both scorers are
given the version's portable functions (``certa.engine.core.stats.kernels.libm.PORTABLE``: IEEE 754 basic
operations only, the same bits on every machine, checked by ``tests/core/test_simd_independence.py``); before it
``hf_models`` used libm's ``exp`` and ``logprob_tables`` numpy's (and scipy's ``logsumexp``), and still does
for a run pinned to those versions, so their scores do not move.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["ZERO_MEANS_IDENTICAL", "abs_delta_lp_positions", "delta_ce_positions", "generated_kl_positions",
           "log_normalised", "sym_kl_positions", "prompt_means"]

ZERO_MEANS_IDENTICAL: dict[str, bool] = {"delta_ce": False, "sym_kl": True, "generated_kl": False,
                                         "abs_delta_lp": False}
"""Whether a metric's score is 0 only for identical next-token distributions (``certa.engine.core.scorers``
module docstring). sym_kl: each term (p - q)(ln p - ln q) is >= 0 (exp is monotone, also in floating point: libm's
is all but correctly rounded, and the portable exp of 3.2.0 is tested monotone on 2·10^6 pairs of adjacent
doubles, ``tests/core/stats/test_portable_elementary.py``; a negative term would show as a score below the range
[0, ...] a spec declares, which ci and release refuse), so a
zero mean means every term is 0, i.e. p = q at every listed token of every position (as float64 probabilities;
a term of two different probabilities can round to 0 only when they lie below about 1e-290). delta_ce: 0 whenever
the two models give the teacher-forced token the same log-prob, or when positions cancel."""


def delta_ce_positions(ref_logprob: np.ndarray, cand_logprob: np.ndarray) -> np.ndarray:
    """ln p_i(x_i) - ln q_i(x_i) per position (float64)."""
    return np.asarray(ref_logprob, dtype=np.float64) - np.asarray(cand_logprob, dtype=np.float64)


def abs_delta_lp_positions(ref_logprob: np.ndarray, cand_logprob: np.ndarray) -> np.ndarray:
    """| ln p_i(x_i) - ln q_i(x_i) | per position (float64)."""
    return np.abs(delta_ce_positions(ref_logprob, cand_logprob))


def generated_kl_positions(cand_logprob: np.ndarray, ref_logprob: np.ndarray) -> np.ndarray:
    """ln q_i(y_i) - ln p_i(y_i) per generated token (float64; module docstring)."""
    return np.asarray(cand_logprob, dtype=np.float64) - np.asarray(ref_logprob, dtype=np.float64)


def sym_kl_positions(log_p: np.ndarray, log_q: np.ndarray,
                     exp: Callable[[np.ndarray], np.ndarray] = np.exp) -> np.ndarray:
    """sum_v (p(v) - q(v)) (ln p(v) - ln q(v)) over the last axis (normalised log-distributions, float64), with
    p = ``exp``(ln p) (module docstring: which ``exp``)."""
    log_p = np.asarray(log_p, dtype=np.float64)
    log_q = np.asarray(log_q, dtype=np.float64)
    return np.sum((exp(log_p) - exp(log_q)) * (log_p - log_q), axis=-1)


def log_normalised(log_p: np.ndarray, exp: Callable[[np.ndarray], np.ndarray],
                   log: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """ln p(v) - ln sum_w p(w) over the last axis (float64), as ln p(v) - (m + ln sum_w e^(ln p(w) - m)) with m the
    row's largest log-prob, so no term overflows (the log-sum-exp; the sum numpy's pairwise sum)."""
    log_p = np.asarray(log_p, dtype=np.float64)
    top = np.max(log_p, axis=-1, keepdims=True)
    return log_p - (top + log(np.sum(exp(log_p - top), axis=-1, keepdims=True)))


def prompt_means(group: np.ndarray, values: np.ndarray, prompts: int) -> np.ndarray:
    """The mean of ``values`` per prompt index ``group`` (0..prompts-1), each sum taken in row order."""
    counts = np.bincount(group, minlength=prompts)
    sums = np.bincount(group, weights=values, minlength=prompts)
    return sums / counts
