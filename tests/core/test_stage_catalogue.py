"""The stage catalogue (``certa.engine.core.stages.catalogue``: what ``certa show`` reads instead of importing the
stage modules) lists every registered type with its versions and presentation module, and nothing else."""

from __future__ import annotations

from certa.engine.core.stages import REGISTRY
from certa.engine.core.stages.catalogue import AUDITS, CATALOGUE, Shown, shown_version


def test_the_catalogue_is_the_registry() -> None:
    registered: dict[str, Shown] = {}
    for stage in REGISTRY:  # by name, then version, oldest first
        shown = registered.get(stage.name, Shown(stage.presentation, ()))
        assert shown.presentation == stage.presentation, f"{stage.ref}: every version shares one presentation"
        registered[stage.name] = Shown(shown.presentation, (*shown.versions, stage.version))
    missing = {name: shown for name, shown in registered.items() if CATALOGUE.get(name) != shown}
    assert not missing, f"list these in certa/engine/core/stages/catalogue.py: {missing}"
    assert set(CATALOGUE) == set(registered)


def test_a_type_or_version_this_certa_lacks_is_not_shown() -> None:
    assert shown_version("paired.ppl_ratio", "1.0.0") == CATALOGUE["paired.ppl_ratio"]
    assert shown_version("paired.ppl_ratio") == CATALOGUE["paired.ppl_ratio"]
    assert shown_version("paired.ppl_ratio", "9.0.0") is None
    assert shown_version("no.such_type") is None


def test_the_audit_checks_outside_the_stage_modules_are_the_registered_ones() -> None:
    # certa verify takes these instead of building the registry: each must be every version's own check
    for name, check in AUDITS.items():
        assert [stage.audit_checks for stage in REGISTRY.versions(name)] == [check] * len(CATALOGUE[name].versions)
