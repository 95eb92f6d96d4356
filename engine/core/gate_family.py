"""What a run's gates claim together (its family), and the decision of each member of a corrected family.

A spec's ``family:`` says how its gates combine into one verdict, and the certificate states it in words
(``content.family``, content format 2):

``all`` (the default)
    The run PASSes only when every gate passes; each gate is decided at its own level, uncorrected. When each
    gate claims something that must hold (the subject is non-inferior on task 1 *and* on task 2 ...) this is an
    intersection–union test, and its chance of a false PASS is at most the largest single gate's: no correction
    is needed (Berger, R. L. (1982). Multiparameter hypothesis testing and acceptance sampling. Technometrics
    24, 295–300). It does not bound the chance that *some* gate fails by chance: m gates that each claim "does
    not differ" at level α fail together up to m·α of the time (10 McNemar gates at 0.05: about 0.33).

``any-differs`` and ``which-differ`` (with ``alpha`` and ``correction``: ``holm`` or ``bonferroni``)
    The members are the gates written with ``differs: true|false`` on a p-value. Their p-values are adjusted
    across the m members (``certa.engine.core.stats.multiplicity``: Holm's step-down or Bonferroni), and a
    member *differs* when its adjusted p-value is ≤ ``alpha``. Both control the familywise error rate: the
    chance that any member that does not truly differ is said to differ is at most ``alpha``, under any
    dependence between the p-values. ``any-differs`` reads the family as one question (does any member differ?
    ``any_differs``), ``which-differ`` as m answers; the numbers are the same. A member gate passes when its
    member's decision is the one it expects; the run still PASSes only when every gate passes.

A member's p-value that is missing or not in [0, 1] fails its gate (fail-closed) and enters the adjustment as
1, which never rejects more than the valid p-values alone would: the family keeps its level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from certa.engine.core.gates import GateResult, lookup_metric

if TYPE_CHECKING:  # numpy loads where a corrected family is decided, not where a recorded one is stated
    import numpy as np
    import numpy.typing as npt

__all__ = ["CLAIMS", "DEFAULT_FAMILY", "FamilySpec", "FamilyOutcome", "evaluate_family",
           "family_statement", "stated_family"]

CLAIMS = ("all", "any-differs", "which-differ")
CORRECTION_WORDS = {"holm": "Holm's step-down adjustment (Holm 1979)",
                    "bonferroni": "Bonferroni's adjustment (m × p)"}


@dataclass(frozen=True)
class FamilySpec:
    """A spec's ``family:``: the claim, and for a corrected family its level and correction."""

    claim: str = "all"
    alpha: float | None = None
    correction: str | None = None

    @property
    def corrected(self) -> bool:
        return self.claim != "all"

    def record(self) -> dict[str, Any]:
        """The spec's family as its knobs hold it (only the keys that apply)."""
        return {"claim": self.claim, **({"alpha": self.alpha, "correction": self.correction}
                                        if self.corrected else {})}


DEFAULT_FAMILY = FamilySpec()


@dataclass(frozen=True)
class FamilyOutcome:
    """The family's record for the certificate, and each member gate decided on its adjusted p-value."""

    record: Mapping[str, Any]
    member_results: Mapping[str, GateResult]


def family_statement(family: FamilySpec, gates: int, members: int) -> str:
    """What the run's gates claim together, in words a reviewer reads."""
    if not family.corrected:
        if gates <= 1:
            return ("All gates: the run passes only when its gate passes." if gates else
                    "No gates: the verdict is PASS unless a stage refuses the data.")
        return (f"All gates: the run passes only when each of its {gates} gates passes, each decided at its own "
                "level without correction. For gates that each claim something must hold (non-inferior on every "
                "task), the chance of a false PASS is at most the largest single gate's (intersection-union "
                f"test). It does not bound the chance that some gate fails by chance: {gates} gates that each "
                f"claim 'does not differ' at level α can fail together up to {gates}·α of the time; declare "
                "family claim 'any-differs' or 'which-differ' for those.")
    how = CORRECTION_WORDS[str(family.correction)]
    question = ("Does any member differ? (any_differs)" if family.claim == "any-differs" else
                "Which members differ?")
    others = gates - members
    rest = (f" The other {others} gate(s) are decided at their own levels; the run passes only when every gate "
            "passes." if others else " The run passes only when every member's gate passes.")
    return (f"{question} {members} gate(s) on p-values form one family: each p-value is adjusted across the "
            f"{members} with {how}, and a member differs when its adjusted p-value is ≤ α = {family.alpha!r}. The "
            f"chance that any member that does not truly differ is said to differ is at most {family.alpha!r}, "
            "whatever the dependence between the p-values. 'Not shown to differ' is not a claim that it is the "
            f"same.{rest}")


def _p_value(stages: Mapping[str, Any], metric: str) -> tuple[float | None, str | None]:
    """The p-value at ``metric`` or None with the reason it is not one."""
    try:
        value = lookup_metric(stages, metric)
    except KeyError as exc:
        return None, f"metric not found: no output at '{exc.args[0]}'"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0.0 <= value <= 1.0):
        return None, f"value {value!r} is not a p-value (a number in [0, 1])"
    return float(value), None


def _adjusted(correction: str, raw: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The p-values ``raw`` adjusted by ``correction`` (``CORRECTION_WORDS``' names)."""
    from certa.engine.core.stats.multiplicity import bonferroni_adjust, holm_adjust
    return {"holm": holm_adjust, "bonferroni": bonferroni_adjust}[correction](raw)


def evaluate_family(family: FamilySpec, gates: Sequence[Any], stages: Mapping[str, Any]) -> FamilyOutcome:
    """The family's record and, for a corrected family, each member gate (a gate with ``differs`` in its
    threshold) decided on its p-value adjusted across the members (module docstring)."""
    members = [g for g in gates if "differs" in g.threshold]
    record: dict[str, Any] = {**family.record(), "gates": len(gates),
                              "statement": family_statement(family, len(gates), len(members))}
    if not family.corrected:
        return FamilyOutcome(record, {})
    import numpy as np
    found = [_p_value(stages, g.metric) for g in members]
    raw = np.array([1.0 if p is None else p for p, _ in found], dtype=np.float64)
    adjusted = _adjusted(str(family.correction), raw) if members else raw
    alpha = float(family.alpha)  # type: ignore[arg-type]
    results: dict[str, GateResult] = {}
    rows = []
    for gate, (p, problem), adj in zip(members, found, adjusted.tolist()):
        differs = p is not None and adj <= alpha
        expected = bool(gate.threshold["differs"])
        if p is None:
            results[gate.id] = GateResult(gate.id, gate.metric, None, gate.threshold, False, str(problem))
        else:
            word = "differs" if differs else "not shown to differ"
            results[gate.id] = GateResult(
                gate.id, gate.metric, adj, gate.threshold, differs == expected,
                f"p = {p!r}, adjusted p = {adj!r} {'<=' if differs else '>'} alpha {alpha!r}: {word}; "
                f"expected {'differs' if expected else 'not shown to differ'}")
        rows.append({"gate": gate.id, "metric": gate.metric, "p_value": p, "adjusted_p_value": adj if p is not None
                     else None, "differs": differs})
    record["members"] = rows
    record["any_differs"] = any(row["differs"] for row in rows)
    return FamilyOutcome(record, results)


def stated_family(content: Mapping[str, Any]) -> Mapping[str, Any]:
    """A certificate content's ``family`` block; for a format-1 certificate (before families were stated), the
    default family's block computed from its gates, which is what those gates claimed together."""
    recorded = content.get("family")
    if isinstance(recorded, Mapping):
        return recorded
    gates = content.get("gates")
    count = len(gates) if isinstance(gates, list) else 0
    return {**DEFAULT_FAMILY.record(), "gates": count, "statement": family_statement(DEFAULT_FAMILY, count, 0)}
