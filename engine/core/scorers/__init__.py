"""Scorer plugins for ``sequential.diff``: found by name in the ``certa.scorers`` entry-point group.

A spec names a scorer (``scorer: {name: logprob_tables, metric: delta_ce}``), never an import path. The
name is looked up with ``importlib.metadata.entry_points(group="certa.scorers")``; a package registers
its scorers in its own metadata, e.g. in ``pyproject.toml``::

    [project.entry-points."certa.scorers"]
    my_scorer = "my_package.scoring:make_scorer"

The entry point's object is a factory called as ``factory(metric=..., options=...)`` (``metric`` a string
or None, ``options`` the spec's free-form mapping) that returns a ``Scorer``:

* ``prompts(reference, candidate) -> Sequence[str]``: the prompt population (deterministic order);
* ``score(reference, candidate, prompt, K) -> float``: one prompt's score difference, averaged over its
  K teacher-forced positions (the prompt is the unit of observation, never n·K);
* optional ``score_batch(reference, candidate, prompts, K) -> array``: the same for many prompts;
* optional ``support() -> tuple[float, float] | None``: the closed range [low, high] that every score of
  the scorer's metric lies in by construction (its known finite support, e.g. [-1, 1] for a difference of
  two accuracies in [0, 1]), or None when the metric is unbounded. ``sequential.diff`` (2.0.0 on) uses it
  as the score range of a bounded method when the spec declares none; a scorer that omits ``support``
  declares none;
* optional ``zero_means_identical() -> bool``: True when a prompt's score is exactly 0 only if the two models'
  next-token distributions are identical at every scored position of the prompt (a divergence such as
  symmetric KL, a sum of terms (p - q)(ln p - ln q) >= 0, is; a difference of accuracies or of the
  teacher-forced token's log-prob, which is 0 whenever the two models agree on that one number, is not).
  ``sequential.diff`` (3.0.0 on) decides IDENTICAL only for a scorer that declares it, and only when every
  prompt scored is 0; a scorer that omits it declares False;
* optional ``usage() -> Mapping[str, int]``: what the scorer has spent so far, as named non-negative counts
  (e.g. ``forward_passes``, ``model_calls``). ``sequential.diff`` records it after a live run as the captured
  table ``scorer_usage`` and a ``scorer_usage`` decision beside the prompts scored and ``n_max``, so the ledger
  states how much evaluation the run cost and a replay restates it without the scorer;
* optional ``describe() -> Mapping[str, Mapping]``: the identity of each model it ran, by role (``reference``,
  ``candidate``), JSON-able: what it verified (a folder's manifest digest) and, for a served model, what its server
  claims. ``sequential.diff`` (3.1.0 on) states it in its outputs (``source.models``) and captures it for a replay;
* optional ``close()``: called by ``sequential.diff`` once a live run has scored its last prompt and read the
  scorer's usage, models and evidence (never after a failure), to free what the scorer holds;
* optional ``evidence() -> Mapping[str, Table]``: tables the scorer's models captured (a served model's transcript of
  every request and response), which ``sequential.diff`` (3.1.0 on) captures as ``scorer_<name>`` so the ledger
  keeps them with the scores;
* optional ``scores_from_evidence(reference, candidate, evidence) -> array | None``: every score of a run, in order,
  derived again from the tables its ``evidence()`` gave (a replay: no model run, no server queried), or None when
  the evidence holds nothing to derive them from. ``sequential.diff`` (3.1.0 on) calls it when it replays a run
  that captured evidence and refuses the recorded scores unless they are these, bit for bit: so the certificate's
  numbers are shown to follow from a served model's recorded answers, not only stored beside them.

A factory that declares a keyword parameter ``tables`` is also given ``tables=``: every input table of the run
by input name, for a scorer that reads a further declared input its options name (``hf_models`` reads its
prompt set from ``options.prompts``). A factory without the parameter is called as before.

A factory that declares a keyword parameter ``elementary`` is given ``elementary=``: the exp, log, log1p and
logaddexp (``certa.engine.core.stats.kernels.libm.ElementaryFunctions``) of the ``sequential.diff`` version that
runs it, when that version names them (3.2.0 on: ``PORTABLE``, the same bits on every machine), for a scorer whose
metric needs them (``sym_kl``'s probabilities); otherwise it is not given one and keeps its own choice, as before.

``reference`` and ``candidate`` are the input tables the spec names (``certa.engine.core.tables.Table``), so a
scorer reads nothing outside the paths the spec declares. The scores it returns are recorded by the
stage (``StageOutput.captured``) and a replay recomputes every decision from them without calling it.

The scorers shipped with certa are registered in certa's own ``pyproject.toml`` like any other plugin.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

import numpy as np

from certa.engine.foundation.errors import StageError
from certa.engine.core.stats.kernels.libm import ElementaryFunctions
from certa.engine.core.tables import Table

__all__ = ["ENTRY_POINT_GROUP", "Scorer", "ScorerFactory", "available_scorers", "declared_identity",
           "declared_support", "described_models", "load_scorer", "reported_usage", "rederived_scores", "score_prompts",
           "scorer_evidence"]

ENTRY_POINT_GROUP = "certa.scorers"


@runtime_checkable
class Scorer(Protocol):
    """What a scorer plugin provides (module docstring)."""

    def prompts(self, reference: Table, candidate: Table) -> Sequence[str]:
        """The prompt population, in a deterministic order."""
        ...

    def score(self, reference: Table, candidate: Table, prompt: str, K: int) -> float:
        """The score difference of one prompt over its first K positions."""
        ...


ScorerFactory = Callable[..., Scorer]

def _registered() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_scorers() -> tuple[str, ...]:
    """Names of every registered scorer, sorted."""
    return tuple(sorted(_registered()))


def _declares(factory: Callable[..., Any], parameter: str) -> bool:
    """True when ``factory`` declares the keyword ``parameter`` (module docstring)."""
    try:
        return parameter in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a callable without an inspectable signature declares nothing
        return False


def load_scorer(name: str, *, metric: str | None = None, options: Mapping[str, Any] | None = None,
                tables: Mapping[str, Table] | None = None, elementary: ElementaryFunctions | None = None) -> Scorer:
    """Build the scorer registered as ``name``; a ``StageError`` lists the registered names if unknown.
    ``tables`` (the run's input tables by name) is passed on to a factory that declares a ``tables``
    parameter, and ``elementary`` (unless None) to one that declares ``elementary`` (module docstring)."""
    registered = _registered()
    if name in registered:
        factory = registered[name].load()
    else:
        known = available_scorers()
        hint = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        raise StageError(f"scorer '{name}' is not registered in the '{ENTRY_POINT_GROUP}' entry-point group"
                         + (f"; did you mean '{hint[0]}'?" if hint else f" (registered: {', '.join(known) or 'none'})")
                         + "; install the package that provides it")
    extra: dict[str, Any] = {"tables": dict(tables or {})} if _declares(factory, "tables") else {}
    if elementary is not None and _declares(factory, "elementary"):
        extra["elementary"] = elementary
    scorer = factory(metric=metric, options=dict(options or {}), **extra)
    if not (callable(getattr(scorer, "score", None)) and callable(getattr(scorer, "prompts", None))):
        raise StageError(f"scorer '{name}' does not provide score(reference, candidate, prompt, K) and "
                         "prompts(reference, candidate)")
    return scorer


def declared_support(scorer: Scorer) -> tuple[float, float] | None:
    """The finite support [low, high] the scorer declares for its metric (optional ``support()``), or None.

    A declared support must be two finite numbers with low < high; anything else is a ``StageError``,
    since a bounded method's guarantee would rest on it.
    """
    support = getattr(scorer, "support", None)
    declared = support() if callable(support) else None
    if declared is None:
        return None
    try:
        low, high = (float(v) for v in declared)
    except (TypeError, ValueError):
        raise StageError(f"the scorer's support() must return (low, high) or None (got {declared!r})") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise StageError(f"the scorer declares the support [{low!r}, {high!r}]; a support needs finite low < high")
    return low, high


def declared_identity(scorer: Scorer) -> bool:
    """Whether the scorer declares that its metric's score is 0 only for identical next-token distributions
    (optional ``zero_means_identical()``, module docstring); False when it declares nothing.

    The answer must be a bool; anything else is a ``StageError``, since an IDENTICAL decision would rest on it.
    """
    declare = getattr(scorer, "zero_means_identical", None)
    if not callable(declare):
        return False
    declared = declare()
    if not isinstance(declared, bool):
        raise StageError(f"the scorer's zero_means_identical() must return True or False (got {declared!r})")
    return declared


def reported_usage(scorer: Scorer) -> dict[str, int] | None:
    """The counts the scorer reports with its optional ``usage()`` (module docstring), or None without one.

    Names must be identifiers and counts non-negative integers; anything else is a ``StageError``.
    """
    usage = getattr(scorer, "usage", None)
    if not callable(usage):
        return None
    reported = usage()
    try:
        counts = {str(key): value for key, value in dict(reported).items()}
    except (TypeError, ValueError):
        raise StageError(f"the scorer's usage() must return a mapping of counts (got {reported!r})") from None
    for key, value in counts.items():
        if not (key.isidentifier() and isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise StageError(f"the scorer's usage() must map names to counts >= 0 (got {key!r}: {value!r})")
    return counts


def score_prompts(scorer: Scorer, reference: Table, candidate: Table, prompts: Sequence[str], K: int) -> np.ndarray:
    """Scores of ``prompts`` (``score_batch`` when the scorer has it, else one ``score`` call per prompt).

    Each call is the plugin's own (e.g. a model forward pass), so calling per prompt is inherent here.
    Non-finite or non-numeric scores are a ``StageError``: certa never substitutes a value.
    """
    batch = getattr(scorer, "score_batch", None)
    if callable(batch):
        values = np.asarray(batch(reference, candidate, list(prompts), K), dtype=np.float64)
    else:
        values = np.array([float(scorer.score(reference, candidate, p, K)) for p in prompts], dtype=np.float64)
    if values.shape != (len(prompts),):
        raise StageError(f"the scorer returned {values.shape} scores for {len(prompts)} prompt(s)")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise StageError(f"the scorer returned a non-finite score ({values[bad[0]]!r}) for prompt "
                         f"{prompts[int(bad[0])]!r}; fix the scorer or its inputs (no value is substituted)")
    return values


def described_models(scorer: Scorer) -> dict[str, Any] | None:
    """The models' identities the scorer gives with its optional ``describe()`` (module docstring), or None without
    one. It must be a mapping of role to a mapping that canonical JSON can write; anything else is a
    ``StageError``."""
    describe = getattr(scorer, "describe", None)
    if not callable(describe):
        return None
    described = describe()
    if not (isinstance(described, Mapping) and all(isinstance(k, str) and isinstance(v, Mapping)
                                                   for k, v in described.items())):
        raise StageError(f"the scorer's describe() must map roles to mappings (got {type(described).__name__})")
    return {str(role): dict(value) for role, value in described.items()}


def scorer_evidence(scorer: Scorer) -> dict[str, Table]:
    """The tables the scorer's optional ``evidence()`` gives (module docstring), by name; none without one. Names
    must be identifiers and values tables, or it is a ``StageError``."""
    evidence = getattr(scorer, "evidence", None)
    if not callable(evidence):
        return {}
    tables = evidence()
    if not (isinstance(tables, Mapping) and all(isinstance(k, str) and k.isidentifier() and isinstance(v, Table)
                                                for k, v in tables.items())):
        raise StageError("the scorer's evidence() must map names (identifiers) to tables")
    return dict(tables)


def rederived_scores(scorer: Scorer, reference: Table, candidate: Table,
                     evidence: Mapping[str, Table]) -> np.ndarray | None:
    """The scores the scorer's optional ``scores_from_evidence`` derives from a run's captured ``evidence`` (module
    docstring) as float64, or None (no such method, or nothing to derive them from)."""
    derive = getattr(scorer, "scores_from_evidence", None)
    if not callable(derive):
        return None
    derived = derive(reference, candidate, evidence)
    return None if derived is None else np.asarray(derived, dtype=np.float64)
