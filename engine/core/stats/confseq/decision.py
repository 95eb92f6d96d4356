"""The DIFFERENT / IDENTICAL / SAME / UNDECIDED decision layer on one two-sided (1 - alpha) sequence [L_t, U_t].

Rules (tests read off a confidence sequence: a level-alpha CS gives level-alpha tests at any stopping
time, Howard, Ramdas, McAuliffe & Sekhon 2021, Ann. Statist.), checked at every check time t >= n_min
(every sample, or every ``batch_size`` samples; the last sample n_max is always a check and is never
overshot), first match wins:

1. IDENTICAL   t >= identical_model_n_min and (every score so far is exactly 0, or, unless
               early_stop_threshold is None, |mean_t| < early_stop_threshold and half_width_t <
               early_stop_threshold). The caller decides what "every score is 0" means: ``sequential.diff``
               3.0.0 passes an all-False path unless the scorer's 0 means identical outputs,
               and early_stop_threshold None;
2. DIFFERENT   L_t > delta* (direction "higher") or U_t < -delta* ("lower"); delta* is ``min_effect``
               if set, else the equivalence band gamma if set (a difference inside the band is not
               material), else 0. With an anytime-valid CS, P(DIFFERENT while |mean| <= delta*) <= alpha;
3. SAME        gamma set and -gamma < L_t and U_t < gamma: P(SAME while |mean| >= gamma) <= alpha;
4. precision   rel_margin_target set and half_width_t <= target · max(|mean_t|, min_effect_floor):
               stop UNDECIDED (the estimate is precise but neither 2 nor 3 holds). It only changes
               when the run stops, not the validity of 2 and 3;
5. UNDECIDED   at t = n_max (or when the data run out before n_max).

One sequence serves all rules: alpha is not split. Everything is computed as boolean paths over t and
the stopping time is the first True of (check & any rule) via ``np.argmax`` on the last axis, so many
streams (leading axes) are decided at once.

Departures from the seed (``docs/sequential.md``): DIFFERENT does not require the relative margin (that made
SAME unreachable and DIFFERENT mean "precisely measured"), and has a minimum effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DecisionRules", "RuleStates", "Stop", "OUTCOMES", "DECISION_OF", "check_mask", "rule_states",
           "first_stop", "all_zero_path", "no_zero_path", "zero_share_upper_bound"]

OUTCOMES: tuple[str, ...] = ("identical_zero", "identical_small", "different_higher", "different_lower", "same",
                             "precision", "n_max", "exhausted")
DECISION_OF: dict[str, str] = {
    "identical_zero": "IDENTICAL", "identical_small": "IDENTICAL", "different_higher": "DIFFERENT",
    "different_lower": "DIFFERENT", "same": "SAME", "precision": "UNDECIDED", "n_max": "UNDECIDED",
    "exhausted": "UNDECIDED",
}


@dataclass(frozen=True)
class DecisionRules:
    """The knobs of the decision layer (seed names and defaults)."""

    n_min: int = 10
    n_max: int = 200
    check_every: str = "sample"
    batch_size: int = 4
    min_effect: float | None = None
    equivalence_band: float | None = None
    rel_margin_target: float | None = 0.05
    min_effect_floor: float = 1e-4
    early_stop_threshold: float | None = 1e-6
    identical_model_n_min: int = 20

    def __post_init__(self) -> None:
        if self.check_every not in ("sample", "batch"):
            raise ValueError(f"check_every must be 'sample' or 'batch' (got {self.check_every!r})")
        if not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"need 1 <= n_min <= n_max (got n_min={self.n_min}, n_max={self.n_max})")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {self.batch_size})")
        if self.equivalence_band is not None and not self.equivalence_band > 0:
            raise ValueError(f"equivalence_band must be > 0 (got {self.equivalence_band})")
        if self.min_effect is not None and not self.min_effect >= 0:
            raise ValueError(f"min_effect must be >= 0 (got {self.min_effect})")

    @property
    def delta_star(self) -> float:
        """delta*: min_effect if set, else the equivalence band if set, else 0."""
        if self.min_effect is not None:
            return float(self.min_effect)
        if self.equivalence_band is not None:
            return float(self.equivalence_band)
        return 0.0


@dataclass(frozen=True)
class RuleStates:
    """Each rule's state at every t (shape ``(..., n)``), and the check times (shape ``(n,)``)."""

    checked: np.ndarray
    identical_zero: np.ndarray
    identical_small: np.ndarray
    different_higher: np.ndarray
    different_lower: np.ndarray
    same: np.ndarray
    precise: np.ndarray
    half_width: np.ndarray
    rel_me: np.ndarray

    def stack(self) -> np.ndarray:
        """Rules 1-4 in precedence order, shape ``(6, ..., n)``."""
        return np.stack([self.identical_zero, self.identical_small, self.different_higher, self.different_lower,
                         self.same, self.precise])


@dataclass(frozen=True)
class Stop:
    """Stopping index (0-based; n_used = index + 1) and outcome (index into ``OUTCOMES``) per stream."""

    index: np.ndarray
    outcome: np.ndarray

    @property
    def n_used(self) -> np.ndarray:
        return self.index + 1

    def decisions(self) -> np.ndarray:
        """The decision names (object array shaped like ``index``)."""
        names = np.array([DECISION_OF[o] for o in OUTCOMES], dtype=object)
        return names[self.outcome]


def check_mask(n: int, rules: DecisionRules) -> np.ndarray:
    """Whether t = 1..n is a check time; the last checked t is min(n, n_max), which is always a check."""
    t = np.arange(1, n + 1)
    end = min(n, rules.n_max)
    on_schedule = np.ones(n, dtype=bool) if rules.check_every == "sample" else (t % rules.batch_size == 0)
    return ((t >= rules.n_min) & on_schedule & (t <= end)) | (t == end)


def all_zero_path(scores: np.ndarray) -> np.ndarray:
    """Whether every score up to t is exactly 0 (for IDENTICAL)."""
    return ~np.logical_or.accumulate(np.asarray(scores) != 0, axis=-1)


def no_zero_path(scores: np.ndarray) -> np.ndarray:
    """All False, shaped like ``scores``: zeros that may never decide IDENTICAL (their 0 is not identity)."""
    return np.zeros(np.shape(scores), dtype=bool)


def zero_share_upper_bound(alpha: float, n: int) -> float:
    """The exact one-sided (1 - alpha) upper confidence bound on a binomial proportion w when none of n
    independent trials is a success: 1 - alpha^(1/n), computed as -expm1(ln(alpha)/n) (Clopper & Pearson 1934;
    the "rule of three" 3/n is its approximation at alpha = 0.05). P(no success in n | w) = (1 - w)^n <= alpha
    exactly when w >= the bound."""
    return -math.expm1(math.log(alpha) / n)


def rule_states(lower: np.ndarray, upper: np.ndarray, mean: np.ndarray, all_zero: np.ndarray,
                rules: DecisionRules) -> RuleStates:
    """Evaluate rules 1-4 at every t (module docstring); inputs shaped ``(..., n)``."""
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    n = lower.shape[-1]
    t = np.arange(1, n + 1)
    abs_mean = np.abs(mean)
    with np.errstate(invalid="ignore"):
        half_width = np.subtract(upper, lower)
        half_width /= 2.0
        np.maximum(half_width, 0.0, out=half_width)
        rel_me = half_width / np.maximum(abs_mean, rules.min_effect_floor)
    thr = rules.early_stop_threshold
    old_enough = t >= rules.identical_model_n_min
    identical_zero = old_enough & all_zero
    if thr is not None:
        identical_small = (abs_mean < thr) & (half_width < thr) & old_enough
    else:
        identical_small = np.zeros(lower.shape, dtype=bool)
    delta = rules.delta_star
    different_higher = lower > delta
    different_lower = upper < -delta
    if rules.equivalence_band is not None:
        gamma = rules.equivalence_band
        same = (lower > -gamma) & (upper < gamma)
    else:
        same = np.zeros(lower.shape, dtype=bool)
    if rules.rel_margin_target is not None:
        precise = rel_me <= rules.rel_margin_target
    else:
        precise = np.zeros(lower.shape, dtype=bool)
    return RuleStates(checked=check_mask(n, rules), identical_zero=identical_zero, identical_small=identical_small,
                      different_higher=different_higher, different_lower=different_lower, same=same,
                      precise=precise, half_width=half_width, rel_me=rel_me)


def first_stop(states: RuleStates, rules: DecisionRules) -> Stop:
    """The first check at which a rule fires, else the end (n_max, or the data's end if shorter)."""
    fired = states.stack()                                   # (6, ..., n)
    n = fired.shape[-1]
    end = min(n, rules.n_max) - 1
    stop_path = fired.any(axis=0) & states.checked
    stop_path[..., end] = True
    index = np.argmax(stop_path, axis=-1)
    at_stop = np.take_along_axis(fired, index[None, ..., None], axis=-1)[..., 0]   # (6, ...)
    rule = np.argmax(at_stop, axis=0)
    ended = OUTCOMES.index("n_max") if n >= rules.n_max else OUTCOMES.index("exhausted")
    outcome = np.where(at_stop.any(axis=0), rule, ended)
    return Stop(index=index, outcome=outcome)
