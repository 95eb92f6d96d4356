"""Stage ``sequential.diff``: are two models DIFFERENT, IDENTICAL, SAME (equivalent) or UNDECIDED? (seed 000)

Observations are per-prompt score differences in arrival order, either from an input table (``input``;
column ``score``, optional ``prompt_id`` and ``position``: with positions, the mean over a prompt's first
``positions_per_prompt`` positions is one observation) or from a scorer plugin (``scorer`` with the
input tables ``reference`` and ``candidate``, see ``certa.engine.core.scorers``). A (1 - alpha) confidence sequence
(``method``, ``certa.engine.core.stats.confseq.methods``) is computed for every prefix and the decision rules of
``certa.engine.core.stats.confseq.decision`` are checked after every observation (or batch), stopping at the
first rule that fires and never after ``n_max``. Every check is one ``sequential_check`` decision in the
ledger (n, mean, bounds, p-value, rule states); the certificate holds the stopping time, the final
sequence values, the method, its validity statement and the score range with what was done to the scores.

Scorer runs are recorded: the stage returns the scores it obtained in ``captured['scores']`` and, given
``ctx.captured`` (a replay), recomputes everything from them without calling the scorer. The outputs
depend only on the knobs and the scores, so a replay reproduces the certificate bit for bit. A scorer that
reports its ``usage()`` (e.g. ``hf_models``: forward passes and model calls) has it recorded as the captured
table ``scorer_usage`` and one ``scorer_usage`` decision (with the prompts scored and ``n_max``), which a replay
restates from the table; the outputs do not change.

Profile rule ``optional_stopping_validity``: ``dev`` warns when the method is not (non-asymptotically)
anytime-valid; ``ci`` aborts for the fixed-n methods and warns for ``asymptotic_cs``; ``release``
aborts unless the method is anytime-valid.

Versions (``KERNELS``, oldest first): each is this module's glue run with a ``SequentialKernels`` record of
what differs. 1.0.0 computes exp, log, log1p and logaddexp with numpy's ufuncs, whose kernels numpy picks
by CPU at run time; 1.1.0 with libm in compiled loops (``certa.engine.core.stats.kernels.libm``), so its numbers do not
depend on numpy's SIMD choice. Both take the score range of the bounded methods from ``clip_low`` /
``clip_high`` (defaults [0, 0.2]) and clip scores outside it silently (``ClipKnobs``). 2.0.0 keeps libm and
follows "a certificate says only what the data support" (``DeclaredRange``): the range has no default (it is
declared, or the scorer metric's finite support, or the run is refused), a score outside it is refused in
profiles ci and release, and clipping happens only on ``out_of_range: clip`` and is stated as the estimand;
numbers derived from decimal knobs (the betting bounds, which are grid points on the range; 1 - alpha; the
betting grid step) are computed exactly and rounded once. 3.0.0 decides IDENTICAL only from a scorer whose 0 means
identical distributions and permutes a table's rows by the stage's generator. 3.1.0 computes what 3.0.0 computes
and states which models a scorer ran (``source.models``: its ``describe()``, a served model's identity with its
server's claims, captured as ``scorer_models`` for a replay) and keeps what their runtimes captured (a served
model's transcript, as ``scorer_<role>_<name>``); its replay derives the scores again from that evidence
(``certa.engine.core.scorers.rederived_scores``: a served model's recorded answers and a local model's captured
log-probs) and refuses recorded scores that are not those, bit for bit, before it recomputes anything. 3.2.0
computes what 3.1.0 computes with exp, log, log1p and logaddexp from IEEE 754 basic operations alone
(``certa.engine.core.stats.kernels.portable``), in its statistics and in its scorers' sym_kl, so its numbers are
the same bits on every machine, whatever the C library (libm's variants differ by CPU family and by library).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import InputError, ProfileAbort, StageError
from certa.engine.core.scorers import (Scorer, declared_identity, declared_support, described_models, load_scorer,
                                       rederived_scores, reported_usage, score_prompts, scorer_evidence)
from certa.engine.core.stats.confseq.methods import BOUNDED_METHODS, VALIDITY, CSSettings, PValuePath, confidence_sequence, null_p_value
from certa.engine.core.stats.confseq.common import (ConfidenceSequence, GridValues, exact_grid_values, float_grid_values,
                                    prefix_mean)
from certa.engine.core.stats.kernels.libm import LIBM, NUMPY_UFUNCS, PORTABLE, ElementaryFunctions
from certa.engine.core.stats.confseq.decision import (DECISION_OF, OUTCOMES, DecisionRules, RuleStates, Stop, all_zero_path,
                                         first_stop, no_zero_path, rule_states, zero_share_upper_bound)
from certa.engine.core.tables import Table, table_from_columns
from certa.engine.core.stages.base import Decision, StageContext, StageOutput, StageType

__all__ = ["STAGE", "STAGES", "SequentialKernels", "KERNELS", "CAPTURED_SCORES", "CAPTURED_SUPPORT", "CAPTURED_USAGE",
           "CAPTURED_IDENTITY", "analyse_scores", "canonical_order",
           "Analysis", "Observations", "ScoreRange", "RangeRule", "ClipKnobs", "DeclaredRange",
           "IdentityRule", "ZerosSoFar", "IdentityFact", "OrderRule", "FileOrder", "SeededPermutation"]

CAPTURED_SCORES = "scores"
"""Name of the captured table (columns ``draw``, ``prompt_id``, ``score``) of a scorer run."""
CAPTURED_SUPPORT = "scorer_support"
"""Name of the captured table (columns ``low``, ``high``; one row) holding the finite support a scorer declared
for its metric, when a 2.0.0 run used it as the score range (a replay needs it without the scorer)."""
CAPTURED_USAGE = "scorer_usage"
"""Name of the captured table (one row, a column per count) of what a scorer reported with ``usage()``."""
CAPTURED_MODELS = "scorer_models"
"""Name of the captured table (columns ``role``, ``description``: canonical JSON) of the models a 3.1.0 scorer run's
scorer described (a replay states them without the scorer)."""
EVIDENCE_PREFIX = "scorer_evidence_"
"""A 3.1.0 scorer run captures each table its scorer's ``evidence()`` gives as ``scorer_evidence_<name>``."""
CAPTURED_IDENTITY = "scorer_identity"
"""Name of the captured table (column ``zero_means_identical``, one row: 1) of a 3.0.0 scorer run whose scorer
declared that its metric is 0 only for identical next-token distributions (a replay needs it without the scorer)."""

NULL_MEAN = 0.0

_VALIDITY_RULE: dict[str, dict[str, str]] = {
    # profile -> validity -> outcome
    "dev": {"anytime-valid": "pass", "asymptotic anytime-valid": "warn", "not valid under optional stopping": "warn"},
    "ci": {"anytime-valid": "pass", "asymptotic anytime-valid": "warn", "not valid under optional stopping": "abort"},
    "release": {"anytime-valid": "pass", "asymptotic anytime-valid": "abort",
                "not valid under optional stopping": "abort"},
}


# ------------------------------------------------------------------------------------------ score range

NO_RANGE = "none: unbounded method"
DECLARED = "declared"
SCORER_SUPPORT = "scorer metric support"


@dataclass(frozen=True)
class Observations:
    """The observations in arrival order, each with its origin: the 1-based row of the input table where it
    starts (``unit`` "row") or its draw number in a scorer run (``unit`` "draw"); ``name`` says where from."""

    scores: np.ndarray
    origins: np.ndarray
    unit: str
    name: str
    keys: np.ndarray | None = None
    """The prompt_id of each observation of a table with a prompt_id column (None without one, or for draws)."""

    def first(self, n: int) -> Observations:
        """The first ``n`` observations (all of them if there are fewer)."""
        return self.taken(np.arange(min(n, self.scores.size)))

    def taken(self, order: np.ndarray) -> Observations:
        """The observations at the indices ``order``, in that order."""
        return Observations(self.scores[order], self.origins[order], self.unit, self.name,
                            None if self.keys is None else self.keys[order])


@dataclass(frozen=True)
class ScoreRange:
    """The range [low, high] a bounded method works on (None: the method needs none), where it comes from
    (``source``), what a score outside it does (``out_of_range``: "refuse" or "clip"), and a range the spec
    gave to a method that needs none (``ignored``)."""

    low: float | None
    high: float | None
    source: str
    out_of_range: str
    ignored: tuple[float, float] | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        """(low, high) for the kernels; (-inf, inf) when the method needs no range (it never reads them)."""
        return (-math.inf if self.low is None else self.low, math.inf if self.high is None else self.high)


@dataclass(frozen=True)
class Outside:
    """Observations outside [low, high]: how many, the observed min and max, the first one's origin."""

    count: int
    total: int
    minimum: float
    maximum: float
    first: int


def _outside_mask(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """True where a score lies outside [low, high]."""
    return (scores < low) | (scores > high)


def _outside_range(obs: Observations, low: float, high: float) -> Outside | None:
    """The observations of ``obs`` outside [low, high], or None when every one lies inside."""
    outside = _outside_mask(obs.scores, low, high)
    count = int(np.count_nonzero(outside))
    if count == 0:
        return None
    # the smallest origin: the first row of the file (or draw) whatever order the observations are taken in
    return Outside(count=count, total=int(obs.scores.size), minimum=float(obs.scores.min()),
                   maximum=float(obs.scores.max()), first=int(obs.origins[outside].min()))


class RangeRule(Protocol):
    """How a version finds the score range, checks the scores against it and states it in the certificate."""

    def check_knobs(self, knobs: Mapping[str, Any]) -> None:
        """Raise ``StageError`` for range knobs the schema cannot refuse."""

    def resolve(self, knobs: Mapping[str, Any], observed: Observations | None,
                support: Callable[[], tuple[float, float] | None]) -> ScoreRange:
        """The range the run uses (``observed``: the table's observations; None before a scorer run)."""

    def screen(self, obs: Observations, score_range: ScoreRange, profile: str) -> tuple[Decision, ...]:
        """Decisions about observations outside the range; raises ``InputError`` where the profile refuses."""

    def report(self, a: Analysis, knobs: Mapping[str, Any], score_range: ScoreRange,
               n_used: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """(entries added to ``results``, output blocks) stating the range and what was done to the scores."""

    def audit(self, outputs: Mapping[str, Any]) -> list[str]:
        """Problems with the stored range statement that ``certa verify`` reports."""


class ClipKnobs:
    """Versions 1.x: the range is ``clip_low``/``clip_high`` (schema defaults [0, 0.2]), handed to every
    method; the bounded methods clip scores outside it without a decision. Frozen: replays only."""

    def check_knobs(self, knobs: Mapping[str, Any]) -> None:
        if not knobs["clip_low"] < knobs["clip_high"]:
            raise StageError(f"'clip_low' must be < 'clip_high' (got {knobs['clip_low']} and {knobs['clip_high']})")

    def resolve(self, knobs: Mapping[str, Any], observed: Observations | None,
                support: Callable[[], tuple[float, float] | None]) -> ScoreRange:
        return ScoreRange(low=float(knobs["clip_low"]), high=float(knobs["clip_high"]), source="clip_low/clip_high",
                          out_of_range="clip")

    def screen(self, obs: Observations, score_range: ScoreRange, profile: str) -> tuple[Decision, ...]:
        return ()

    def report(self, a: Analysis, knobs: Mapping[str, Any], score_range: ScoreRange,
               n_used: int) -> tuple[dict[str, Any], dict[str, Any]]:
        used = a.scores[:n_used]
        n_clipped = int(np.count_nonzero(np.clip(used, knobs["clip_low"], knobs["clip_high"]) != used))
        statement = (f"scores are assumed to lie in [{_num(knobs['clip_low'])}, {_num(knobs['clip_high'])}]; "
                     "values outside are clipped and the estimand is the mean of the clipped scores"
                     if a.bounded else "no bound is assumed; scores are used unclipped")
        return {}, {"clip": {"applies": a.bounded, "low": knobs["clip_low"], "high": knobs["clip_high"],
                             "assumption": statement, "n_clipped": n_clipped if a.bounded else 0,
                             "n_outside_range": n_clipped}}

    def audit(self, outputs: Mapping[str, Any]) -> list[str]:
        return []


class DeclaredRange:
    """Version 2.0.0: no default transforms data into a verdict (module docstring; ``docs/sequential.md``).

    A bounded method's range is ``range`` if declared, else the scorer metric's declared finite support, else
    the run is refused (``StageError``) naming the observed min and max. A score outside it is an
    ``InputError`` in profiles ci and release and a recorded ``out_of_range`` warning in dev, which goes on
    with the scores clipped; ``out_of_range: clip`` opts in to clipping. Whenever scores are (or may be)
    clipped, the estimand is the mean of the clipped scores and the certificate says so. The unbounded
    methods ignore a range, with a recorded ``range_ignored`` warning.
    """

    def check_knobs(self, knobs: Mapping[str, Any]) -> None:
        declared = knobs.get("range")
        if declared is not None and not (math.isfinite(declared[0]) and math.isfinite(declared[1])
                                         and declared[0] < declared[1]):
            raise StageError(f"'range' must be [low, high] with finite low < high (got [{declared[0]}, {declared[1]}])")

    def resolve(self, knobs: Mapping[str, Any], observed: Observations | None,
                support: Callable[[], tuple[float, float] | None]) -> ScoreRange:
        declared, policy = knobs.get("range"), knobs["out_of_range"]
        if knobs["method"] not in BOUNDED_METHODS:
            ignored = None if declared is None else (float(declared[0]), float(declared[1]))
            return ScoreRange(low=None, high=None, source=NO_RANGE, out_of_range=policy, ignored=ignored)
        if declared is not None:
            return ScoreRange(low=float(declared[0]), high=float(declared[1]), source=DECLARED, out_of_range=policy)
        supported = support()
        if supported is not None:
            return ScoreRange(low=supported[0], high=supported[1], source=SCORER_SUPPORT, out_of_range=policy)
        raise StageError(_no_range_message(knobs, observed))

    def screen(self, obs: Observations, score_range: ScoreRange, profile: str) -> tuple[Decision, ...]:
        if score_range.low is None or score_range.high is None:
            return _ignored_range_decisions(score_range)
        outside = _outside_range(obs, score_range.low, score_range.high)
        if outside is None:
            return ()
        if score_range.out_of_range == "refuse" and profile != "dev":
            raise InputError(_outside_message(obs, score_range, outside, profile))
        return (_out_of_range_decision(obs, score_range, outside),)

    def report(self, a: Analysis, knobs: Mapping[str, Any], score_range: ScoreRange,
               n_used: int) -> tuple[dict[str, Any], dict[str, Any]]:
        used = a.scores[:n_used]
        low, high = score_range.bounds
        n_clipped = int(np.count_nonzero(_outside_mask(used, low, high)))
        n_outside = int(np.count_nonzero(_outside_mask(a.scores, low, high)))
        clipped = score_range.low is not None and (score_range.out_of_range == "clip" or n_outside > 0)
        estimand = f"mean of the scores clipped to [{_num(low)}, {_num(high)}]" if clipped else "mean score difference"
        block = {"low": score_range.low, "high": score_range.high, "source": score_range.source,
                 "out_of_range": score_range.out_of_range, "n_outside": n_outside, "n_clipped": n_clipped,
                 "statement": _range_statement(knobs, score_range, n_outside, n_clipped, int(a.scores.size), n_used)}
        # the raw mean by the same prefix sums as ``mean``: the two are equal to the bit when nothing is clipped
        return {"estimand": estimand, "raw_mean": float(prefix_mean(used)[-1])}, {"range": block}

    def audit(self, outputs: Mapping[str, Any]) -> list[str]:
        """The estimand agrees with the range block (clipped iff bounded and clipping was opted in or
        happened), an unclipped estimand has mean == raw_mean, and n_clipped <= min(n_outside, n_used)."""
        try:
            r, block = outputs["results"], outputs["range"]
            clipped = block["low"] is not None and (block["out_of_range"] == "clip" or block["n_outside"] > 0)
            problems = []
            if (r["estimand"] != "mean score difference") != clipped:
                problems.append("results.estimand does not match the range block (what was clipped)")
            if not clipped and r["mean"] != r["raw_mean"]:
                problems.append("results.mean != results.raw_mean although no score was clipped")
            if not 0 <= block["n_clipped"] <= min(block["n_outside"], r["n_used"]):
                problems.append("range.n_clipped is outside [0, min(n_outside, n_used)]")
            return problems
        except (KeyError, TypeError):
            return ["results or range is missing estimand, mean, raw_mean, n_used, low, out_of_range, n_outside "
                    "or n_clipped"]


# ------------------------------------------------------------------------------------- identity and order


class IdentityRule(Protocol):
    """When a run of exactly-0 scores may decide IDENTICAL, and what the certificate says about it."""

    def for_table(self) -> bool:
        """Whether an input table's zeros may decide IDENTICAL."""

    def declared(self, scorer: Scorer) -> bool:
        """Whether a live scorer's zeros may decide IDENTICAL."""

    def replayed(self, captured: Mapping[str, Table]) -> bool:
        """The same for a replayed scorer run, from its captured tables."""

    def captured(self, zero_means_identical: bool) -> dict[str, Table]:
        """The captured tables a replay needs to answer ``replayed`` without the scorer."""

    def reason(self, outcome: str, n: int, rules: DecisionRules) -> str | None:
        """The reason of an IDENTICAL outcome (None: the wording of 1.x and 2.0.0)."""

    def interpretation(self, decision: str) -> str | None:
        """The interpretation of ``decision`` (None: the wording of 1.x and 2.0.0)."""

    def report(self, decision: str, n_used: int, knobs: Mapping[str, Any], source: Mapping[str, Any],
               zero_means_identical: bool, confidence_level: float) -> dict[str, Any]:
        """Output blocks stating what IDENTICAL means in this run."""

    def audit(self, outputs: Mapping[str, Any]) -> list[str]:
        """Problems with a stored IDENTICAL decision that ``certa verify`` reports."""


class ZerosSoFar:
    """Versions 1.x and 2.0.0: IDENTICAL once the first ``identical_model_n_min`` scores are all exactly 0 (or
    |mean| and the half-width fall below ``early_stop_threshold``), whatever the scores are. A discrete scorer's
    zeros (both models right, or both wrong) made a 3 % regression IDENTICAL in (1 - 0.03)^20 = 0.54 of runs
    (issue 30). Frozen: replays only."""

    def for_table(self) -> bool:
        return True

    def declared(self, scorer: Scorer) -> bool:
        return True

    def replayed(self, captured: Mapping[str, Table]) -> bool:
        return True

    def captured(self, zero_means_identical: bool) -> dict[str, Table]:
        return {}

    def reason(self, outcome: str, n: int, rules: DecisionRules) -> str | None:
        return None

    def interpretation(self, decision: str) -> str | None:
        return None

    def report(self, decision: str, n_used: int, knobs: Mapping[str, Any], source: Mapping[str, Any],
               zero_means_identical: bool, confidence_level: float) -> dict[str, Any]:
        return {}

    def audit(self, outputs: Mapping[str, Any]) -> list[str]:
        return []


class IdentityFact:
    """Version 3.0.0: IDENTICAL is a fact about the prompts scored, never an inference from a run of zeros.

    IDENTICAL is decided only from a scorer that declares ``zero_means_identical()`` (its metric is 0 only for
    identical next-token distributions: ``sym_kl``, not ``delta_ce``), and only when every prompt scored up to the
    first check at or after ``identical_model_n_min`` is exactly 0 (once a score is nonzero it never fires). The
    certificate says "identical on the n prompts scored, not a statistical claim about unseen prompts", and, the
    prompts being drawn uniformly with replacement, bounds the share of the prompt population on which the models
    differ below 1 - alpha^(1/n) at confidence 1 - alpha (``zero_share_upper_bound``): the rule fires only at that
    one fixed n, so the exact binomial bound holds. A table's zeros, or those of a scorer that declares nothing,
    never decide IDENTICAL: such a run goes on to DIFFERENT, SAME or UNDECIDED by the confidence sequence. The
    ``early_stop_threshold`` rule (|mean| and half-width below a threshold) is gone with its knob.
    """

    def for_table(self) -> bool:
        return False

    def declared(self, scorer: Scorer) -> bool:
        return declared_identity(scorer)

    def replayed(self, captured: Mapping[str, Table]) -> bool:
        table = captured.get(CAPTURED_IDENTITY)
        return table is not None and bool(table.numeric("zero_means_identical")[0] == 1)

    def captured(self, zero_means_identical: bool) -> dict[str, Table]:
        if not zero_means_identical:
            return {}
        return {CAPTURED_IDENTITY: table_from_columns(CAPTURED_IDENTITY, {"zero_means_identical": [1]})}

    def reason(self, outcome: str, n: int, rules: DecisionRules) -> str | None:
        if outcome != "identical_zero":
            return None
        return (f"the two models gave identical next-token distributions on all {n} prompts scored: every score is "
                "exactly 0 and the scorer's metric is 0 only for identical distributions (n >= "
                f"identical_model_n_min = {rules.identical_model_n_min})")

    def interpretation(self, decision: str) -> str | None:
        if decision != "IDENTICAL":
            return None
        return ("The models gave identical next-token distributions on every prompt scored: a fact about those "
                "prompts, not a statistical claim about unseen prompts (identity states the bound on the share of "
                "prompts on which they may differ).")

    def report(self, decision: str, n_used: int, knobs: Mapping[str, Any], source: Mapping[str, Any],
               zero_means_identical: bool, confidence_level: float) -> dict[str, Any]:
        block: dict[str, Any] = {"zero_means_identical": zero_means_identical}
        if decision == "IDENTICAL":
            upper = zero_share_upper_bound(knobs["alpha"], n_used)
            block["differing_share_upper"] = upper
            block["statement"] = (
                f"identical on the {n_used} prompts scored, not a statistical claim about unseen prompts: every "
                f"score is exactly 0 and {_scorer_text(source)} is 0 only for identical next-token distributions. "
                f"The prompts were drawn uniformly with replacement, so the share of the prompt population on which "
                f"the models' distributions differ is below {_num(upper)} at confidence {_num(confidence_level)} "
                f"(exact binomial bound with no differing prompt in {n_used}: 1 - alpha^(1/n))")
        elif zero_means_identical:
            block["statement"] = (
                f"{_scorer_text(source)} is 0 only for identical next-token distributions, so IDENTICAL is decided "
                f"when every prompt scored up to the first check at n >= identical_model_n_min = "
                f"{knobs['identical_model_n_min']} is exactly 0; that did not happen here")
        else:
            whose = ("the scores come from an input table, whose zeros need not mean identical outputs"
                     if source["kind"] == "table" else
                     f"{_scorer_text(source)} is not declared to be 0 only for identical outputs "
                     "(zero_means_identical)")
            block["statement"] = (
                f"{whose} (a difference of accuracies is 0 whenever both models are right, or both wrong), so zeros "
                "never decide IDENTICAL: the decision is DIFFERENT, SAME or UNDECIDED by the confidence sequence")
        return {"identity": block}

    def audit(self, outputs: Mapping[str, Any]) -> list[str]:
        """An IDENTICAL decision needs a scorer whose 0 means identical, the outcome identical_zero and the
        stated bound 1 - alpha^(1/n_used); any other decision states no bound."""
        try:
            r, block = outputs["results"], outputs["identity"]
            if r["decision"] != "IDENTICAL":
                return (["identity.differing_share_upper is stated for a decision other than IDENTICAL"]
                        if "differing_share_upper" in block else [])
            problems = []
            if block["zero_means_identical"] is not True or r["outcome"] != "identical_zero":
                problems.append("decision IDENTICAL without a scorer whose 0 means identical outputs")
            if block.get("differing_share_upper") != zero_share_upper_bound(outputs["config"]["alpha"], r["n_used"]):
                problems.append("identity.differing_share_upper != 1 - alpha^(1/n_used) for decision IDENTICAL")
            return problems
        except (KeyError, TypeError, ValueError):
            return ["results or identity is missing decision, outcome, n_used or zero_means_identical"]


def _scorer_text(source: Mapping[str, Any]) -> str:
    """The scorer and metric of a scorer run, as a phrase."""
    metric = source.get("metric")
    return f"scorer '{source.get('scorer')}'" + (f" (metric {metric})" if metric else "")


def canonical_order(scores: np.ndarray, keys: np.ndarray | None) -> np.ndarray:
    """Indices that sort observations by prompt id (when given), then score, then the score's bits (so that
    -0.0 and 0.0 have a fixed order): the order of a table's rows that no file order can change."""
    bits = np.asarray(scores, dtype=np.float64).view(np.int64)
    columns = (bits, scores) if keys is None else (bits, scores, keys)
    return np.lexsort(columns)


class OrderRule(Protocol):
    """In which order a table's observations are taken, and what the certificate says about it."""

    def arrange(self, obs: Observations, rng: np.random.Generator) -> Observations:
        """The observations of an input table in the order the stage takes them."""

    def report(self, source: Mapping[str, Any], obs: Observations) -> dict[str, Any]:
        """Output blocks stating the order rule (``obs``: the observations as taken)."""


class FileOrder:
    """Versions 1.x and 2.0.0: a table's rows are taken in file order (its prompts by first appearance), so a
    sorted copy of a table decides otherwise than a shuffled one (issue 30). Frozen: replays only."""

    def arrange(self, obs: Observations, rng: np.random.Generator) -> Observations:
        return obs

    def report(self, source: Mapping[str, Any], obs: Observations) -> dict[str, Any]:
        return {}


class SeededPermutation:
    """Version 3.0.0: a table's observations are sorted canonically (``canonical_order``) and then permuted by
    ranking one raw 64-bit draw per observation from the stage's seeded generator (ties, of probability about
    n^2/2^65, keep the canonical order). The order depends on the run seed and the rows, never on their order in
    the file: sorted, reversed and shuffled copies of a table give the same certificate. If the rows are iid
    draws of prompts, a permutation independent of them keeps them iid, which a data-dependent file order (sorted,
    grouped) does not. Scorer runs keep the order in which the stage drew their prompts."""

    def arrange(self, obs: Observations, rng: np.random.Generator) -> Observations:
        canonical = canonical_order(obs.scores, obs.keys)
        draws = rng.bit_generator.random_raw(obs.scores.size)
        return obs.taken(canonical[np.argsort(draws, kind="stable")])

    def report(self, source: Mapping[str, Any], obs: Observations) -> dict[str, Any]:
        if source["kind"] != "table":
            return {"order": {"rule": "draw order", "statement": (
                "prompts in the order the stage's seeded generator drew them, uniformly with replacement from the "
                "scorer's prompt population")}}
        by = "prompt_id, then score" if obs.keys is not None else "score"
        return {"order": {"rule": "seeded permutation", "statement": (
            f"the observations are sorted by {by} and then permuted by the stage's seeded generator (one raw 64-bit "
            "draw per observation, ranked), and the first n_max in that order are used: the order comes from the run "
            "seed and does not depend on the order of the rows in the file")}}


def _no_range_message(knobs: Mapping[str, Any], observed: Observations | None) -> str:
    """The refusal of a bounded method without a range: the observed min and max, and the knobs to set."""
    method = knobs["method"]
    if observed is None:
        spec = knobs["scorer"]
        seen = (f"scorer '{spec['name']}' (metric {spec.get('metric') or 'default'}) declares no finite support "
                "for its scores")
    else:
        seen = (f"the {observed.scores.size} observation(s) of {observed.name} lie in "
                f"[{_num(float(observed.scores.min()))}, {_num(float(observed.scores.max()))}] (observed min, max)")
    return (f"method '{method}' needs the range the scores lie in, and none is declared; {seen}. Declare "
            "'range: [low, high]' from what the metric can take (not from these data), add 'out_of_range: clip' "
            "only to certify the mean of the clipped scores, or use method 'asymptotic_cs', which needs no range")


def _outside_message(obs: Observations, score_range: ScoreRange, outside: Outside, profile: str) -> str:
    """The refusal of observations outside the range: count, observed min and max, the first offender."""
    return (f"{obs.name}: {outside.count} of {outside.total} observation(s) lie outside the score range "
            f"[{_num(score_range.bounds[0])}, {_num(score_range.bounds[1])}] ({score_range.source}): observed min "
            f"{_num(outside.minimum)}, max {_num(outside.maximum)}, the first at {obs.unit} {outside.first}. The "
            f"method's guarantee holds only inside the range, so profile {profile} refuses them: widen 'range' to "
            "a bound the scores cannot leave, set 'out_of_range: clip' to certify the mean of the clipped scores, "
            "or use profile dev to go on with a warning")


def _out_of_range_decision(obs: Observations, score_range: ScoreRange, outside: Outside) -> Decision:
    """The ``out_of_range`` decision: a warning unless the spec opted in to clipping (``out_of_range: clip``)."""
    low, high = score_range.bounds
    opted_in = score_range.out_of_range == "clip"
    message = (f"{outside.count} of {outside.total} observation(s) of {obs.name} lie outside the score range "
               f"[{_num(low)}, {_num(high)}] ({score_range.source}; observed min {_num(outside.minimum)}, max "
               f"{_num(outside.maximum)}, the first at {obs.unit} {outside.first}); they are clipped and the "
               "estimand is the mean of the clipped scores"
               + ("" if opted_in else ", because profile dev lets the run go on (ci and release refuse)"))
    return Decision("out_of_range", {
        "low": low, "high": high, "source": score_range.source, "n_outside": outside.count,
        "observations": outside.total, "min": outside.minimum, "max": outside.maximum, "first": outside.first,
        "first_unit": obs.unit, "action": "clip", "outcome": "pass" if opted_in else "warn", "message": message})


def _ignored_range_decisions(score_range: ScoreRange) -> tuple[Decision, ...]:
    """A ``range_ignored`` warning when the spec gave a range to a method that needs none."""
    if score_range.ignored is None:
        return ()
    low, high = score_range.ignored
    return (Decision("range_ignored", {
        "low": low, "high": high, "outcome": "warn",
        "message": f"the method needs no score range; 'range: [{_num(low)}, {_num(high)}]' was ignored and the "
                   "scores are used unclipped (remove it, or use a bounded method to rely on it)"}),)


def _range_statement(knobs: Mapping[str, Any], score_range: ScoreRange, n_outside: int, n_clipped: int,
                     available: int, n_used: int) -> str:
    """One sentence: the range, where it comes from, and what was done to the scores."""
    if score_range.low is None:
        ignored = score_range.ignored
        note = "" if ignored is None else f" (the range [{_num(ignored[0])}, {_num(ignored[1])}] given was ignored)"
        return f"method {knobs['method']} needs no score range; the scores are used unclipped{note}"
    where = f"[{_num(score_range.bounds[0])}, {_num(score_range.bounds[1])}] ({score_range.source})"
    if n_outside == 0 and score_range.out_of_range == "refuse":
        return (f"the scores are assumed to lie in {where}; all {available} observation(s) do, none was clipped "
                "and the estimand is the mean score difference")
    why = ("out_of_range: clip" if score_range.out_of_range == "clip"
           else "profile dev let the run go on; profiles ci and release refuse such data")
    return (f"scores outside {where} are clipped to it ({why}): {n_outside} of {available} observation(s) lie "
            f"outside and {n_clipped} of the {n_used} used were clipped; the estimand is the mean of the clipped "
            "scores, not the mean score difference")


# ---------------------------------------------------------------------------------------- knob arithmetic


def float_confidence_level(alpha: float) -> float:
    """1 - alpha in floating point (1.x: 1 - 0.01 gives 0.99, but e.g. 1 - 0.07 gives 0.9299999999999999)."""
    return 1.0 - alpha


def exact_confidence_level(alpha: float) -> float:
    """1 - alpha computed on the decimal the knob was written as, rounded once:
    float(1 - Fraction(str(alpha))) (``docs/contributing.md``: numbers derived from decimal knobs are exact)."""
    return float(1 - Fraction(str(alpha)))


def computed_parameters(parameters: Mapping[str, Any], score_range: ScoreRange) -> dict[str, Any]:
    """The method's parameters as its kernel reports them (1.x)."""
    return dict(parameters)


def exact_parameters(parameters: Mapping[str, Any], score_range: ScoreRange) -> dict[str, Any]:
    """The method's parameters with the betting grid step (high - low) / G computed exactly on the decimal
    range, rounded once (e.g. [0.1, 0.3] gives 0.0002, not 0.00019999999999999998)."""
    out = dict(parameters)
    if "grid_step" in out and score_range.low is not None and score_range.high is not None:
        span = Fraction(str(score_range.high)) - Fraction(str(score_range.low))
        out["grid_step"] = float(span / out["grid_size"])
    return out


# -------------------------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class SequentialKernels:
    """What one version of ``sequential.diff`` computes with: the elementary functions (exp, log, log1p,
    logaddexp) of its confidence sequences, p-values, e-value and stopping decisions; its score-range rule;
    and how it derives values from decimal knobs: the betting bounds (grid points on the range), the
    confidence level and the method parameters."""

    version: str
    elementary: ElementaryFunctions
    range_rule: RangeRule
    grid_values: GridValues
    confidence_level: Callable[[float], float]
    method_parameters: Callable[[Mapping[str, Any], ScoreRange], dict[str, Any]]
    changes: str
    identity: IdentityRule = ZerosSoFar()
    order: OrderRule = FileOrder()
    describes_models: bool = False
    """Whether a scorer run states its models' identities and keeps their evidence (3.1.0 on)."""
    scorer_elementary: ElementaryFunctions | None = None
    """The functions given to a scorer that declares ``elementary`` (3.2.0 on: ``PORTABLE``); None: the
    scorer's own (``certa.engine.core.scorers`` module docstring)."""


KERNELS: tuple[SequentialKernels, ...] = (
    SequentialKernels(version="1.0.0", elementary=NUMPY_UFUNCS, range_rule=ClipKnobs(), grid_values=float_grid_values,
                      confidence_level=float_confidence_level, method_parameters=computed_parameters,
                      changes="first version (certa 0.1.0)"),
    SequentialKernels(
        version="1.1.0", elementary=LIBM, range_rule=ClipKnobs(), grid_values=float_grid_values,
        confidence_level=float_confidence_level, method_parameters=computed_parameters,
        changes="certa 0.3.0: exp, log, log1p (and logaddexp from them) by libm in compiled loops, independent "
                "of numpy's run-time SIMD choice; p-values, e-values and bounds may move in the last bits"),
    SequentialKernels(
        version="2.0.0", elementary=LIBM, range_rule=DeclaredRange(), grid_values=exact_grid_values,
        confidence_level=exact_confidence_level, method_parameters=exact_parameters,
        changes="the score range has no default: 'range: [low, high]' (or the scorer metric's declared support) "
                "replaces clip_low/clip_high (defaults [0, 0.2]); scores outside it are refused in ci and release "
                "and clipped only on 'out_of_range: clip' or with a dev warning, stated as the estimand; a 'range' "
                "block replaces 'clip'; the betting bounds (grid points), confidence_level and grid_step are "
                "computed exactly from the decimal knobs"),
    SequentialKernels(
        version="3.0.0", elementary=LIBM, range_rule=DeclaredRange(), grid_values=exact_grid_values,
        confidence_level=exact_confidence_level, method_parameters=exact_parameters,
        identity=IdentityFact(), order=SeededPermutation(),
        changes="issue 30: IDENTICAL only from a scorer whose metric is 0 only for identical next-token "
                "distributions (zero_means_identical; sym_kl, not delta_ce) when every prompt scored is 0, stated as "
                "identical on the n prompts scored with the bound 1 - alpha^(1/n) on the share that differs; a "
                "table's or a discrete scorer's zeros never decide IDENTICAL; early_stop_threshold is removed; a "
                "table's observations are sorted canonically and permuted by the stage's seeded generator, so the "
                "file's row order never changes the certificate; 'identity' and 'order' blocks"),
    SequentialKernels(
        version="3.1.0", elementary=LIBM, range_rule=DeclaredRange(), grid_values=exact_grid_values,
        confidence_level=exact_confidence_level, method_parameters=exact_parameters,
        identity=IdentityFact(), order=SeededPermutation(), describes_models=True,
        changes="issue 33: 3.0.0's numbers; a scorer run states the models its scorer ran (source.models: a local "
                "folder's manifest digest, a served model's declaration digest and its server's claims) and keeps "
                "their runtimes' evidence (a served model's transcript) as captured tables"),
    SequentialKernels(
        version="3.2.0", elementary=PORTABLE, range_rule=DeclaredRange(), grid_values=exact_grid_values,
        confidence_level=exact_confidence_level, method_parameters=exact_parameters,
        identity=IdentityFact(), order=SeededPermutation(), describes_models=True, scorer_elementary=PORTABLE,
        changes="exp, log, log1p and logaddexp from IEEE 754 basic operations alone (within 1 ulp), in the "
                "confidence sequences, p-values, e-values and stopping decisions and in the scorers' sym_kl (its "
                "probabilities and, for logprob_tables, the re-normalisation): the same bits on every machine, "
                "where the C library's variants (glibc's FMA and SSE2 builds, another C library) may differ in the "
                "last bit; p-values, e-values, bounds and sym_kl scores may move in the last bits"),
)
"""Every version, oldest first; the last is what an unpinned spec runs."""


# ----------------------------------------------------------------------------------------------- knobs


def _rules(knobs: Mapping[str, Any]) -> DecisionRules:
    return DecisionRules(
        n_min=knobs["n_min"], n_max=knobs["n_max"], check_every=knobs["check_every"], batch_size=knobs["batch_size"],
        min_effect=knobs.get("min_effect"), equivalence_band=knobs.get("equivalence_band"),
        rel_margin_target=knobs.get("rel_margin_target"), min_effect_floor=knobs["min_effect_floor"],
        early_stop_threshold=knobs.get("early_stop_threshold"), identical_model_n_min=knobs["identical_model_n_min"],
    )


def _settings(knobs: Mapping[str, Any], grid_values: GridValues) -> CSSettings:
    betting, stitching, asymptotic = knobs["betting"], knobs["stitching"], knobs["asymptotic"]
    t_opt = asymptotic.get("t_opt")
    return CSSettings(grid_size=betting["grid_size"], truncation=betting["truncation"], theta=betting["theta"],
                      stitch_m=stitching["m"], stitch_s=stitching["s"], stitch_eta=stitching["eta"],
                      t_opt=float(knobs["n_max"] if t_opt is None else t_opt), grid_values=grid_values)


def _iv_knobs(knobs: Mapping[str, Any]) -> None:
    """Cross-field checks the JSON Schema cannot express (messages name the knob, expectation, value)."""
    has_input, has_scorer = knobs.get("input") is not None, knobs.get("scorer") is not None
    if has_input == has_scorer:
        raise StageError("give either 'input' (a table of per-prompt scores) or 'scorer' with 'reference' and "
                         f"'candidate' (input tables the scorer reads), not {'both' if has_input else 'neither'}")
    if has_scorer and (knobs.get("reference") is None or knobs.get("candidate") is None):
        raise StageError("'scorer' needs 'reference' and 'candidate': the names of the input tables it reads")
    if knobs["n_min"] > knobs["n_max"]:
        raise StageError(f"'n_min' must be <= 'n_max' (got n_min={knobs['n_min']}, n_max={knobs['n_max']})")


# ------------------------------------------------------------------------------------------ observations


def _table_observations(table: Table, knobs: Mapping[str, Any]) -> tuple[Observations, dict[str, Any]]:
    """Per-prompt observations in arrival order from the input table (the ``_iv`` step of table mode), each
    with the 1-based row where it starts (its prompt's first row when positions are averaged)."""
    cols = knobs["columns"]
    score = table.numeric(cols["score"])
    if score.size == 0:
        raise InputError(f"input '{table.name}' has no rows")
    info: dict[str, Any] = {"kind": "table", "input": knobs["input"], "rows": int(score.size)}
    name = f"input '{table.name}'"
    if not table.has(cols["position"]):
        keys = table.text(cols["prompt_id"]).astype(str) if table.has(cols["prompt_id"]) else None
        return Observations(score, np.arange(1, score.size + 1), "row", name, keys), info
    if not table.has(cols["prompt_id"]):
        raise InputError(f"input '{table.name}' has a '{cols['position']}' column but no '{cols['prompt_id']}' column; "
                         "per-position rows are averaged per prompt, so the prompt must be named")
    prompts = table.text(cols["prompt_id"]).astype(str)
    positions = table.numeric(cols["position"])
    uniq, first_row, group = np.unique(prompts, return_index=True, return_inverse=True)
    order = np.lexsort((positions, group))                       # rows by prompt, then position
    g_sorted, pos_sorted = group[order], positions[order]
    if np.any((g_sorted[1:] == g_sorted[:-1]) & (pos_sorted[1:] == pos_sorted[:-1])):
        raise InputError(f"input '{table.name}': a (prompt_id, position) pair appears twice")
    starts = np.searchsorted(g_sorted, np.arange(uniq.size))
    rank = np.arange(order.size) - starts[g_sorted]
    keep = rank < knobs["positions_per_prompt"]
    counts = np.bincount(g_sorted[keep], minlength=uniq.size)
    means = np.bincount(g_sorted[keep], weights=score[order][keep], minlength=uniq.size) / counts
    arrival = np.argsort(first_row, kind="stable")               # prompts in order of first appearance
    info.update({"prompts": int(uniq.size), "positions_used": {"min": int(counts.min()), "max": int(counts.max())},
                 "positions_available": {"min": int(np.bincount(group).min()), "max": int(np.bincount(group).max())}})
    return Observations(means[arrival], first_row[arrival] + 1, "row", name, uniq[arrival]), info


@dataclass(frozen=True)
class Analysis:
    """Everything computed from one score array (pure function of scores and knobs)."""

    scores: np.ndarray
    cs: ConfidenceSequence
    estimand: np.ndarray          # clipped scores (bounded methods) or raw scores
    mean: np.ndarray
    p_value: PValuePath | None
    states: RuleStates
    stop: Stop
    bounded: bool


def analyse_scores(scores: np.ndarray, knobs: Mapping[str, Any], bounds: tuple[float, float], *,
                   with_p_value: bool = True, elementary: ElementaryFunctions = NUMPY_UFUNCS,
                   grid_values: GridValues = float_grid_values, zero_means_identical: bool = True) -> Analysis:
    """Confidence sequence, p-value, rule states and stopping time of ``scores`` (first n_max used).

    ``bounds``: the score range (low, high) of the bounded methods, which clip to it (``ScoreRange.bounds``;
    the unbounded methods never read it). Works on one stream (shape ``(n,)``) or many (``(streams, n)``,
    e.g. in simulations). ``elementary``: the exp/log/log1p/logaddexp of the stage version (``KERNELS``;
    default 1.0.0's numpy ufuncs); ``grid_values``: how it maps betting grid points to scores (default 1.x's
    floating point; 2.0.0's is exact). ``zero_means_identical``: whether a run of exactly-0 scores may decide
    IDENTICAL (always in 1.x and 2.0.0; in 3.0.0 only for a scorer that declares it, ``IdentityFact``).
    """
    scores = np.asarray(scores, dtype=np.float64)[..., : knobs["n_max"]]
    method, alpha = knobs["method"], knobs["alpha"]
    low, high = float(bounds[0]), float(bounds[1])
    settings = _settings(knobs, grid_values)
    rules = _rules(knobs)
    bounded = method in BOUNDED_METHODS
    estimand = np.clip(scores, low, high) if bounded else scores
    cs = confidence_sequence(scores, method, alpha, low, high, settings, elementary=elementary)
    mean = prefix_mean(estimand)
    p_value = (null_p_value(scores, method, NULL_MEAN, alpha, low, high, settings, start=knobs["n_min"],
                            elementary=elementary)
               if with_p_value else None)
    zeros = all_zero_path(scores) if zero_means_identical else no_zero_path(scores)
    states = rule_states(cs.lower, cs.upper, mean, zeros, rules)
    return Analysis(scores=scores, cs=cs, estimand=estimand, mean=mean, p_value=p_value,
                    states=states, stop=first_stop(states, rules), bounded=bounded)


def _scorer_observations(ctx: StageContext, knobs: Mapping[str, Any], scorer: Scorer, bounds: tuple[float, float],
                         screen: Callable[[Observations], object], kernels: SequentialKernels,
                         zero_means_identical: bool) -> tuple[Observations, Table]:
    """Draw prompts with the stage's generator and score them batch by batch until a rule fires (from n_min on)
    or n_max; ``screen`` sees the scores so far after every batch (and may refuse them before more are scored).

    The rules are not checked before n_min scores: ``check_mask`` makes the last score of a stream a check, so a
    rule firing on the first batches used to stop scoring below n_min, and the run was refused for too few
    observations (no certificate was issued that way, so no recorded number changes)."""
    spec = knobs["scorer"]
    reference, candidate = ctx.table("reference"), ctx.table("candidate")
    population = list(scorer.prompts(reference, candidate))
    if not population:
        raise StageError(f"scorer '{spec['name']}' found no prompts in '{knobs['reference']}' and "
                         f"'{knobs['candidate']}'")
    n_max, batch, k = knobs["n_max"], knobs["batch_size"], knobs["positions_per_prompt"]
    draws = ctx.rng.integers(0, len(population), size=n_max)    # with replacement: iid prompts
    prompts = [str(population[i]) for i in draws.tolist()]
    values = np.empty(0)
    while values.size < n_max:
        chunk = prompts[values.size: values.size + batch]
        values = np.concatenate([values, score_prompts(scorer, reference, candidate, chunk, k)])
        ctx.progress(int(values.size), n_max, "prompts scored")
        screen(_drawn(values, spec["name"]))
        if values.size < knobs["n_min"]:    # the scores' last one always counts as a check: none before n_min
            continue
        analysis = analyse_scores(values, knobs, bounds, with_p_value=False, elementary=kernels.elementary,
                                  grid_values=kernels.grid_values, zero_means_identical=zero_means_identical)
        if OUTCOMES[int(analysis.stop.outcome)] != "exhausted":
            break
    captured = table_from_columns(CAPTURED_SCORES, {
        "draw": np.arange(1, values.size + 1), "prompt_id": prompts[: values.size], "score": values})
    return _drawn(captured.numeric("score"), spec["name"]), captured


def _drawn(values: np.ndarray, scorer_name: str) -> Observations:
    """Scores of a scorer run, numbered by draw (1-based)."""
    return Observations(values, np.arange(1, values.size + 1), "draw", f"scorer '{scorer_name}'")


def _replayed_observations(captured: Table, scorer_name: str) -> Observations:
    if not captured.has("score"):
        raise InputError(f"captured table '{captured.name}' has no 'score' column")
    return _drawn(captured.numeric("score"), scorer_name)


def _replayed_support(captured: Table | None) -> tuple[float, float] | None:
    """The scorer metric support a run recorded (``CAPTURED_SUPPORT``), or None if it recorded none."""
    if captured is None:
        return None
    return float(captured.numeric("low")[0]), float(captured.numeric("high")[0])


def _check_evidence(ctx: StageContext, obs: Observations, captured: Mapping[str, Table],
                    kernels: SequentialKernels) -> None:
    """A replay's check that the recorded scores follow from the evidence the run captured (3.1.0: a served model's
    transcript; ``rederived_scores``): an ``InputError`` naming the first draw whose score differs, bit for bit."""
    evidence = {name[len(EVIDENCE_PREFIX):]: table for name, table in captured.items()
                if name.startswith(EVIDENCE_PREFIX)}
    if not evidence:
        return
    spec = ctx.knobs["scorer"]
    scorer = load_scorer(spec["name"], metric=spec.get("metric"), options=spec.get("options"), tables=ctx.tables,
                         elementary=kernels.scorer_elementary)
    derived = rederived_scores(scorer, ctx.table("reference"), ctx.table("candidate"), evidence)
    if derived is None:
        return
    if derived.shape != obs.scores.shape:
        raise InputError(f"the run captured {obs.scores.size} scores, but its evidence gives {derived.size}: the "
                         "scores do not follow from the captured evidence")
    differ = np.flatnonzero(derived != obs.scores)
    if differ.size:
        at = int(differ[0])
        raise InputError(f"the captured score of draw {at + 1} is {float(obs.scores[at])!r}, but the captured evidence "
                         f"(the served model's transcript) gives {float(derived[at])!r}: the scores do not follow from "
                         "the server's recorded answers")


def _models_tables(scorer: Scorer) -> dict[str, Table]:
    """The captured ``scorer_models`` table of the models the scorer described (none when it describes none) and
    its models' evidence, each as ``scorer_evidence_<name>`` (3.1.0)."""
    described = described_models(scorer)
    tables = {f"{EVIDENCE_PREFIX}{name}": replace(t, name=f"{EVIDENCE_PREFIX}{name}")
              for name, t in scorer_evidence(scorer).items()}
    if described:
        roles = sorted(described)
        tables[CAPTURED_MODELS] = table_from_columns(CAPTURED_MODELS, {
            "role": roles, "description": [canonical_bytes(described[role]).decode("utf-8") for role in roles]})
    return tables


def _usage_table(usage: Mapping[str, int] | None) -> dict[str, Table]:
    """The captured ``scorer_usage`` table (one row) of the counts a scorer reported, if it reported any."""
    if not usage:
        return {}
    return {CAPTURED_USAGE: table_from_columns(CAPTURED_USAGE, {key: [value] for key, value in usage.items()})}


def _usage_decisions(usage: Table | None, source: Mapping[str, Any], knobs: Mapping[str, Any]) -> tuple[Decision, ...]:
    """The ``scorer_usage`` decision: the scorer's counts beside the prompts scored and n_max (none without)."""
    if usage is None:
        return ()
    counts = {column: int(usage.numeric(column)[0]) for column in usage.columns}
    scored = int(source["prompts_scored"])
    return (Decision("scorer_usage", {"scorer": source["scorer"], "prompts_scored": scored, "n_max": knobs["n_max"],
                                      "stopped_before_n_max": scored < knobs["n_max"], **counts}),)


def _support_table(score_range: ScoreRange) -> dict[str, Table]:
    """The captured support table when the range is the scorer metric's support (a replay needs it)."""
    if score_range.source != SCORER_SUPPORT:
        return {}
    return {CAPTURED_SUPPORT: table_from_columns(CAPTURED_SUPPORT, {"low": [score_range.low],
                                                                    "high": [score_range.high]})}


# ---------------------------------------------------------------------------------------------- outputs


def _num(value: float) -> str:
    return f"{value:.6g}"


def _reason(outcome: str, n: int, lo: float, hi: float, mean: float, half: float, rel_me: float,
            rules: DecisionRules) -> str:
    ci = f"[{_num(lo)}, {_num(hi)}]"
    delta = rules.delta_star
    if outcome == "identical_zero":
        return f"all {n} scores are exactly 0 (n >= identical_model_n_min = {rules.identical_model_n_min})"
    if outcome == "identical_small":
        return (f"|mean| = {_num(abs(mean))} and half-width = {_num(half)} are below early_stop_threshold = "
                f"{_num(rules.early_stop_threshold)}")
    if outcome == "different_higher":
        return f"the confidence sequence {ci} lies above the minimum effect {_num(delta)}"
    if outcome == "different_lower":
        return f"the confidence sequence {ci} lies below minus the minimum effect -{_num(delta)}"
    if outcome == "same":
        return f"the confidence sequence {ci} lies inside the equivalence band ±{_num(rules.equivalence_band or 0.0)}"
    straddles = f"the confidence sequence {ci} " + ("includes 0" if lo <= 0.0 <= hi else
                                                    f"does not clear the minimum effect ±{_num(delta)}")
    if outcome == "precision":
        return (f"precision target reached: rel_me = {_num(rel_me)} <= rel_margin_target = "
                f"{_num(rules.rel_margin_target or 0.0)}, and {straddles}")
    if outcome == "n_max":
        return f"n_max = {rules.n_max} reached and {straddles}"
    return f"the input ran out after {n} of n_max = {rules.n_max} observations and {straddles}"


_INTERPRETATION = {
    "DIFFERENT": "The models differ by more than the minimum effect, at the stated error rate.",
    "IDENTICAL": "The models' scores show no difference at all (identity, not a statistical test).",
    "SAME": "Any difference between the models lies inside the equivalence band, at the stated error rate.",
    "UNDECIDED": "The data do not support DIFFERENT or SAME yet; raise n_max, widen the band or reduce score noise.",
}


def _check_decisions(a: Analysis, outcome: str) -> tuple[Decision, ...]:
    """One ``sequential_check`` decision per check up to and including the stop."""
    assert a.p_value is not None
    stop = int(a.stop.index)
    checks = np.flatnonzero(a.states.checked[: stop + 1]).tolist()
    s = a.states
    rows = {
        "n": (np.asarray(checks) + 1).tolist(), "mean": a.mean[checks].tolist(), "lower": a.cs.lower[checks].tolist(),
        "upper": a.cs.upper[checks].tolist(), "half_width": s.half_width[checks].tolist(),
        "rel_me": s.rel_me[checks].tolist(), "p_value": a.p_value.p[checks].tolist(),
        "identical": (s.identical_zero | s.identical_small)[checks].tolist(),
        "different": (s.different_higher | s.different_lower)[checks].tolist(), "same": s.same[checks].tolist(),
        "precise": s.precise[checks].tolist(),
    }
    decisions = []
    for j, t in enumerate(checks):
        detail: dict[str, Any] = {
            "n": rows["n"][j], "mean": rows["mean"][j], "lower": rows["lower"][j], "upper": rows["upper"][j],
            "half_width": rows["half_width"][j], "rel_me": rows["rel_me"][j], "p_value": rows["p_value"][j],
            "rules": {"identical": rows["identical"][j], "different": rows["different"][j], "same": rows["same"][j],
                      "precision": rows["precise"][j]},
            "stop": t == stop,
        }
        if t == stop:
            detail["decision"] = DECISION_OF[outcome]
            detail["outcome"] = outcome
        decisions.append(Decision("sequential_check", detail))
    return tuple(decisions)


def _summary(values: np.ndarray) -> dict[str, float]:
    q25, median, q75 = np.quantile(values, [0.25, 0.5, 0.75])
    return {"min": float(values.min()), "max": float(values.max()), "median": float(median), "q25": float(q25),
            "q75": float(q75), "iqr": float(q75 - q25)}


def _outputs(a: Analysis, knobs: Mapping[str, Any], source: dict[str, Any], score_range: ScoreRange,
             kernels: SequentialKernels, obs: Observations,
             zero_means_identical: bool) -> tuple[dict[str, Any], str]:
    """The certificate outputs (the version's range, identity and order rules add their own blocks) and the
    outcome."""
    assert a.p_value is not None
    rules = _rules(knobs)
    stop = int(a.stop.index)
    n_used = stop + 1
    outcome = OUTCOMES[int(a.stop.outcome)]
    decision = DECISION_OF[outcome]
    lo, hi = float(a.cs.lower[stop]), float(a.cs.upper[stop])
    mean = float(a.mean[stop])
    half = float(a.states.half_width[stop])
    rel_me = float(a.states.rel_me[stop])
    used = a.scores[:n_used]
    variance = float(np.var(a.estimand[:n_used], ddof=1)) if n_used > 1 else 0.0
    direction = {"different_higher": "higher", "different_lower": "lower"}.get(outcome)
    e_value = (float(kernels.elementary.exp(np.max(a.p_value.log_evalue[:n_used]))) if a.p_value.log_evalue is not None
               else None)
    reason = kernels.identity.reason(outcome, n_used, rules) or _reason(outcome, n_used, lo, hi, mean, half, rel_me,
                                                                          rules)
    confidence_level = kernels.confidence_level(knobs["alpha"])
    results = {
        "decision": decision, "reason": reason,
        "direction": direction, "outcome": outcome, "n_used": n_used, "mean": mean,
        "raw_mean": float(np.mean(used)), "variance": variance, "std_dev": math.sqrt(variance),
        "ci": [lo, hi], "confidence_level": confidence_level, "half_width": half,
        "rel_me": rel_me, "p_value": float(a.p_value.p[stop]), "e_value": e_value,
    }
    range_results, range_blocks = kernels.range_rule.report(a, knobs, score_range, n_used)
    results.update(range_results)
    outputs = {
        "results": results,
        "method": {"name": a.cs.method, "validity": a.cs.validity, "alpha": knobs["alpha"],
                   "parameters": kernels.method_parameters(a.cs.parameters, score_range), "p_value": a.p_value.kind},
        **range_blocks,
        **kernels.identity.report(decision, n_used, knobs, source, zero_means_identical, confidence_level),
        **kernels.order.report(source, obs),
        "sequence": {"stopping_time": n_used, "checks": int(np.count_nonzero(a.states.checked[: stop + 1])),
                     "check_every": knobs["check_every"], "observations_available": int(a.scores.size),
                     "lower": lo, "upper": hi, "trajectory": "one sequential_check decision per check in the ledger"},
        "config": {
            "alpha": knobs["alpha"], "rel_margin_target": knobs.get("rel_margin_target"),
            "min_effect_floor": knobs["min_effect_floor"], "method": knobs["method"], "n_min": knobs["n_min"],
            "n_max": knobs["n_max"], "batch_size": knobs["batch_size"],
            "positions_per_prompt": knobs["positions_per_prompt"], "equivalence_band": knobs.get("equivalence_band"),
            "min_effect": knobs.get("min_effect"), "delta_star": rules.delta_star,
            # a knob up to 2.0.0 only (its schema fills it there); 3.0.0 has no such knob and states none
            **({"early_stop_threshold": knobs["early_stop_threshold"]} if "early_stop_threshold" in knobs else {}),
            "identical_model_n_min": knobs["identical_model_n_min"], "check_every": knobs["check_every"],
        },
        "source": source,
        "scores_summary": _summary(used),
        "interpretation": kernels.identity.interpretation(decision) or _INTERPRETATION[decision],
    }
    return outputs, outcome


def _validity_rule(validity: str, profile: str) -> Decision:
    outcome = _VALIDITY_RULE.get(profile, _VALIDITY_RULE["release"])[validity]
    return Decision("profile_rule", {"rule": "optional_stopping_validity", "value": validity,
                                     "required": "anytime-valid", "outcome": outcome, "profile": profile})


def _no_support() -> None:
    """An input table declares no support: its range is declared or the run is refused."""
    return None


def _enough(obs: Observations, knobs: Mapping[str, Any]) -> Observations:
    """The first n_max observations; a ``StageError`` when there are fewer than n_min."""
    if obs.scores.size < knobs["n_min"]:
        raise StageError(f"{obs.scores.size} observation(s) but n_min = {knobs['n_min']}; add data or lower n_min")
    return obs.first(knobs["n_max"])


Observed = tuple[Observations, ScoreRange, dict[str, Any], dict[str, Table], bool]
"""What a run mode gives: the observations, the range, the source block, the captured tables, and whether a run
of exactly-0 scores may decide IDENTICAL."""


def _table_run(ctx: StageContext, kernels: SequentialKernels) -> Observed:
    """Observations of the input table in the version's order (the first n_max), its range and source; nothing
    is captured."""
    obs, source = _table_observations(ctx.table("input"), ctx.knobs)
    obs = _enough(kernels.order.arrange(obs, ctx.rng), ctx.knobs)
    return (obs, kernels.range_rule.resolve(ctx.knobs, obs, _no_support), source, {},
            kernels.identity.for_table())


def _scorer_run(ctx: StageContext, kernels: SequentialKernels) -> Observed:
    """Observations of a scorer run (live, or from the captured tables in a replay), its range, source and
    captured tables. The range is resolved before the first prompt is scored."""
    knobs, rule = ctx.knobs, kernels.range_rule
    spec = knobs["scorer"]
    source: dict[str, Any] = {"kind": "scorer", "scorer": spec["name"], "metric": spec.get("metric"),
                              "options": dict(spec.get("options") or {}), "reference": knobs["reference"],
                              "candidate": knobs["candidate"], "prompt_draws": "uniform with replacement, stage rng"}
    recorded = ctx.captured or {}
    models: dict[str, Table] = {}
    if CAPTURED_SCORES in recorded:
        table = recorded[CAPTURED_SCORES]
        score_range = rule.resolve(knobs, None, lambda: _replayed_support(recorded.get(CAPTURED_SUPPORT)))
        obs = _replayed_observations(table, spec["name"])
        usage = {CAPTURED_USAGE: recorded[CAPTURED_USAGE]} if CAPTURED_USAGE in recorded else {}
        zero_means_identical = kernels.identity.replayed(recorded)
        if kernels.describes_models:
            models = {name: t for name, t in recorded.items() if name == CAPTURED_MODELS or name.startswith(EVIDENCE_PREFIX)}
            _check_evidence(ctx, obs, models, kernels)
    else:
        scorer = load_scorer(spec["name"], metric=spec.get("metric"), options=spec.get("options"), tables=ctx.tables,
                             elementary=kernels.scorer_elementary)
        score_range = rule.resolve(knobs, None, lambda: declared_support(scorer))
        zero_means_identical = kernels.identity.declared(scorer)
        obs, table = _scorer_observations(ctx, knobs, scorer, score_range.bounds,
                                          lambda seen: rule.screen(seen, score_range, ctx.profile), kernels,
                                          zero_means_identical)
        usage = _usage_table(reported_usage(scorer))
        if kernels.describes_models:
            models = _models_tables(scorer)
        close = getattr(scorer, "close", None)
        if callable(close):  # the scores are in: free the models (scorers module docstring)
            close()
    source["prompts_scored"] = int(obs.scores.size)
    source["captured_sha256"] = table.sha256
    if CAPTURED_MODELS in models:
        described = models[CAPTURED_MODELS]
        source["models"] = {str(role): json.loads(str(text)) for role, text in zip(described.text("role"),
                                                                                  described.text("description"))}
    obs = _enough(obs, knobs)
    captured = {CAPTURED_SCORES: table, **_support_table(score_range), **usage,
                **kernels.identity.captured(zero_means_identical), **models}
    return obs, score_range, source, captured, zero_means_identical


def run_sequential_diff(ctx: StageContext, kernels: SequentialKernels = KERNELS[-1]) -> StageOutput:
    """The stage at ``kernels.version``."""
    knobs = ctx.knobs
    rule = kernels.range_rule
    _iv_knobs(knobs)
    rule.check_knobs(knobs)
    validity = VALIDITY[knobs["method"]]
    validity_rule = _validity_rule(validity, ctx.profile)
    if validity_rule.detail["outcome"] == "abort":  # before any scoring: a refused method never calls a scorer
        raise ProfileAbort(f"profile '{ctx.profile}' requires an anytime-valid method; '{knobs['method']}' is "
                           f"{validity} (use betting, eb_cs or stitched, or profile dev to compare)",
                           rule="optional_stopping_validity", decisions=(validity_rule,))
    observe = _scorer_run if knobs.get("scorer") is not None else _table_run
    obs, score_range, source, captured, zero_means_identical = observe(ctx, kernels)
    range_decisions = rule.screen(obs, score_range, ctx.profile)
    analysis = analyse_scores(obs.scores, knobs, score_range.bounds, elementary=kernels.elementary,
                              grid_values=kernels.grid_values, zero_means_identical=zero_means_identical)
    outputs, outcome = _outputs(analysis, knobs, source, score_range, kernels, obs, zero_means_identical)
    decisions = (validity_rule, *range_decisions, *_usage_decisions(captured.get(CAPTURED_USAGE), source, knobs),
                 *_check_decisions(analysis, outcome))
    return StageOutput(outputs=outputs, decisions=decisions, captured=captured)


# ---------------------------------------------------------------------------------------------- audit


def audit_sequential_diff(outputs: Mapping[str, Any]) -> list[str]:
    """Identities ``certa verify`` re-checks on stored outputs: half-width, rel_me and the decision vs the CS."""
    problems: list[str] = []
    try:
        r, cfg = outputs["results"], outputs["config"]
        lo, hi = (float(v) for v in r["ci"])                # float() also reads "Infinity" / "-Infinity"
        half, rel_me = float(r["half_width"]), float(r["rel_me"])
        if half != max((hi - lo) / 2.0, 0.0):
            problems.append("results.half_width != max((ci[1] - ci[0]) / 2, 0)")
        if rel_me != half / max(abs(r["mean"]), cfg["min_effect_floor"]):
            problems.append("results.rel_me != half_width / max(|mean|, min_effect_floor)")
        if not 1 <= r["n_used"] <= cfg["n_max"]:
            problems.append("results.n_used is outside [1, n_max]")
        delta, band = cfg["delta_star"], cfg["equivalence_band"]
        if r["decision"] == "DIFFERENT" and not (lo > delta or hi < -delta):
            problems.append("decision DIFFERENT but the CS does not clear the minimum effect")
        if r["decision"] == "SAME" and not (band is not None and -band < lo and hi < band):
            problems.append("decision SAME but the CS is not inside the equivalence band")
    except (KeyError, TypeError, ValueError):
        problems.append("results or config is missing ci, half_width, rel_me, mean, n_used or decision")
    return problems


SUMMARY = "Sequential DIFFERENT/IDENTICAL/SAME/UNDECIDED decision on anytime-valid confidence sequences (seed 000)."


def diff_stage(kernels: SequentialKernels) -> StageType:
    """``sequential.diff`` at ``kernels.version``."""
    return StageType(
        name="sequential.diff",
        version=kernels.version,
        input_knobs=("input", "reference", "candidate"),
        run=lambda ctx: run_sequential_diff(ctx, kernels),
        summary=SUMMARY,
        presentation="certa.engine.services.presentation.stages.sequential_diff",
        audit_checks=lambda outputs: (audit_sequential_diff(outputs) + kernels.range_rule.audit(outputs)
                                      + kernels.identity.audit(outputs)),
        changes=kernels.changes,
    )


STAGES = tuple(diff_stage(kernels) for kernels in KERNELS)
STAGE = STAGES[-1]
