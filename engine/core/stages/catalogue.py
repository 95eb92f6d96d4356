"""Every stage type's versions and presentation module, known without importing the stage modules (which load
numpy and the statistics): what ``certa show`` needs to print a recorded stage
(``certa.engine.services.presentation.stages.markdown_of``) and ``--explain`` to know which types it explains.

The stage modules remain the definition (``certa.engine.core.stages.REGISTRY``); this table repeats two facts of
each type so that reading a certificate costs no import of the code that computed it, and
tests/core/test_stage_catalogue.py fails, printing the expected entry, until a new type or version is listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from certa.engine.core.stages.ratio_audit import audit_paired_ratio

__all__ = ["Shown", "CATALOGUE", "AUDITS", "shown_version"]


class Shown(NamedTuple):
    """A stage type's ``presentation`` module (``StageType.presentation``; every version of a type shares it) and
    its versions, oldest first."""

    presentation: str | None
    versions: tuple[str, ...]


_PRESENTATION = "certa.engine.services.presentation.stages"

CATALOGUE: dict[str, Shown] = {
    "bakeoff.compare": Shown(f"{_PRESENTATION}.bakeoff", ("1.0.0", "1.1.0", "1.2.0")),
    "bakeoff.gate": Shown(f"{_PRESENTATION}.bakeoff_gate", ("1.0.0", "1.1.0")),
    "bakeoff.merge": Shown(f"{_PRESENTATION}.bakeoff", ("1.0.0", "1.1.0", "1.2.0")),
    "conformal.monitor": Shown(f"{_PRESENTATION}.conformal_monitor", ("1.0.0", "1.1.0")),
    "conformal.pac_report": Shown(f"{_PRESENTATION}.conformal", ("1.0.0", "1.1.0")),
    "model.windows": Shown(f"{_PRESENTATION}.model_windows", ("1.0.0", "1.1.0", "1.2.0")),
    "paired.metric_delta": Shown(f"{_PRESENTATION}.paired_metric", ("1.0.0", "1.1.0", "1.2.0")),
    "paired.ppl_ratio": Shown(f"{_PRESENTATION}.paired_ratio", ("1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0")),
    "paired.suite_delta": Shown(f"{_PRESENTATION}.suite_delta", ("1.0.0",)),
    "sequential.diff": Shown(f"{_PRESENTATION}.sequential_diff", ("1.0.0", "1.1.0", "2.0.0", "3.0.0", "3.1.0", "3.2.0")),
}
"""Stage type name -> how it is shown (``Shown``)."""

AUDITS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "paired.ppl_ratio": audit_paired_ratio,
}
"""Stage type name -> its method-identity check (``StageType.audit_checks``, the same function for every version of
the type), for the types whose check lives outside their stage module: ``certa verify`` checks their certificates
without building ``REGISTRY`` (which imports every stage module); the others' checks are read from it."""


def shown_version(name: str, version: str | None = None) -> Shown | None:
    """``name``'s entry when this certa has that type (at ``version``, when given), else None."""
    shown = CATALOGUE.get(name)
    return shown if shown is not None and (version is None or version in shown.versions) else None
