"""Mondrian (class-conditional) conformal thresholds, binary prediction sets and their summaries.

Scores (seed 003, §2): the nonconformity score of class c is s_c(x) = 1 - p(c|x). For each class c
the threshold q_c is the k_c-th smallest score among the class-c calibration points (k_c from SSBC);
k_c = n_c + 1 means "always include" (q_c = +inf). The prediction set is C(x) = {c : s_c(x) <= q_c}
(inclusive): empty = abstention, both labels = doublet, one label = singleton.

Summaries (``summarise_sets``) count singletons, doublets, abstentions and singleton errors with the
deployed Mondrian sets, marginally and conditionally on the true class. (The reference
implementation, phzwart/ssbc 1.4.0 (``build_conditional_prediction_sets``), summarises each class with one
threshold for both labels, which disagrees with the deployed sets under class imbalance: bug B7 in
docs/conformal.md.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "SetCounts",
    "SetSummary",
    "nonconformity_scores",
    "class_threshold",
    "prediction_sets",
    "summarise_sets",
]


@dataclass(frozen=True)
class SetCounts:
    """Counts of prediction-set outcomes over ``n`` points.

    ``singleton_error`` counts singletons that miss the true label; ``covered`` counts sets that
    contain it; ``singleton_pred_c`` counts singletons equal to {c}.
    """

    n: int
    singleton: int
    doublet: int
    abstention: int
    singleton_correct: int
    singleton_error: int
    covered: int
    singleton_pred_0: int
    singleton_pred_1: int


@dataclass(frozen=True)
class SetSummary:
    """Set-outcome counts over all points and over the points of each true class."""

    marginal: SetCounts
    class_0: SetCounts
    class_1: SetCounts

    def by_class(self, c: int) -> SetCounts:
        return self.class_0 if c == 0 else self.class_1


def nonconformity_scores(p0: np.ndarray, p1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s_0, s_1) = (1 - p0, 1 - p1), computed exactly this way so ties reproduce."""
    return 1.0 - np.asarray(p0, dtype=np.float64), 1.0 - np.asarray(p1, dtype=np.float64)


def class_threshold(sorted_scores: np.ndarray, k: int, *, clamp: bool = False) -> np.ndarray:
    """The k-th smallest score along the last axis of ``sorted_scores`` (ascending), batched.

    With n scores, k = n+1 (or more) gives +inf: the class is always included. ``clamp=True``
    reproduces the reference implementation, which uses min(k, n) instead (bug B1).
    """
    scores = np.asarray(sorted_scores, dtype=np.float64)
    n = scores.shape[-1]
    if k < 1:
        raise ValueError(f"'k' must be >= 1 (got {k})")
    if k > n:
        if not clamp:
            return np.full(scores.shape[:-1], np.inf)
        k = n
    return scores[..., k - 1]


def prediction_sets(s0: np.ndarray, s1: np.ndarray, q0: float | np.ndarray,
                    q1: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Membership of labels 0 and 1 in the Mondrian set: (s_0 <= q_0, s_1 <= q_1)."""
    return np.asarray(s0) <= q0, np.asarray(s1) <= q1


def _counts(labels: np.ndarray, include0: np.ndarray, include1: np.ndarray) -> SetCounts:
    singleton = include0 != include1
    pred1 = singleton & include1
    pred0 = singleton & include0
    correct = (pred1 & (labels == 1)) | (pred0 & (labels == 0))
    covered = np.where(labels == 1, include1, include0)
    n_single = int(np.count_nonzero(singleton))
    n_correct = int(np.count_nonzero(correct))
    return SetCounts(
        n=int(labels.size),
        singleton=n_single,
        doublet=int(np.count_nonzero(include0 & include1)),
        abstention=int(np.count_nonzero(~include0 & ~include1)),
        singleton_correct=n_correct,
        singleton_error=n_single - n_correct,
        covered=int(np.count_nonzero(covered)),
        singleton_pred_0=int(np.count_nonzero(pred0)),
        singleton_pred_1=int(np.count_nonzero(pred1)),
    )


def summarise_sets(labels: np.ndarray, include0: np.ndarray, include1: np.ndarray) -> SetSummary:
    """Counts of set outcomes, marginally and for each true class, from the deployed sets."""
    labels = np.asarray(labels)
    include0, include1 = np.asarray(include0, dtype=bool), np.asarray(include1, dtype=bool)
    parts = []
    for c in (0, 1):
        mask = labels == c
        parts.append(_counts(labels[mask], include0[mask], include1[mask]))
    return SetSummary(marginal=_counts(labels, include0, include1), class_0=parts[0], class_1=parts[1])
