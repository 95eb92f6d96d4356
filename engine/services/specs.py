"""What certa can run, without running it: a spec checked against the schemas (``certa validate``) and the
registered stage types with every version kept (``certa stages``). Neither reads a ledger."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certa.engine.core.spec import Plan, load_plan
from certa.engine.core.stages import REGISTRY

__all__ = ["ValidSpec", "validate_spec", "StageCatalog", "stage_catalog"]


@dataclass(frozen=True)
class ValidSpec:
    """A spec that passed every check: its path as given and its resolved plan."""

    path: Path
    plan: Plan

    def as_json(self) -> dict[str, Any]:
        """The plan's identity: name, knobs hash, spec digest and each stage's type and version."""
        plan = self.plan
        return {"ok": True, "name": plan.name, "knobs_hash": plan.knobs_hash, "spec_sha256": plan.spec_sha256,
                "stages": [{"id": s.id, "use": s.use, "version": s.version} for s in plan.stages]}

    def text(self) -> str:
        """One line: valid, how many stages and gates, the knobs hash."""
        return (f"{self.path}: valid ({len(self.plan.stages)} stage(s), {len(self.plan.gates)} gate(s)); "
                f"knobs_hash {self.plan.knobs_hash}")


def validate_spec(path: Path) -> ValidSpec:
    """Load and check the spec at ``path`` (``SpecError`` or ``InputError`` when it is not valid)."""
    return ValidSpec(path=path, plan=load_plan(path))


@dataclass(frozen=True)
class StageVersion:
    """One registered version of a stage type."""

    name: str
    version: str
    ref: str
    newest: bool
    inputs: tuple[str, ...]
    summary: str
    changes: str

    @property
    def status(self) -> str:
        """``newest``, or ``kept for replay`` for an older, frozen version."""
        return "newest" if self.newest else "kept for replay"

    def as_json(self) -> dict[str, Any]:
        """The version as ``certa stages --json`` lists it."""
        return {"name": self.name, "version": self.version, "ref": self.ref, "newest": self.newest,
                "status": self.status, "inputs": list(self.inputs), "summary": self.summary, "changes": self.changes}


@dataclass(frozen=True)
class StageCatalog:
    """Every registered stage type (``names``, in registry order) and every version of each (``versions``)."""

    names: tuple[str, ...]
    versions: tuple[StageVersion, ...]

    def as_json(self) -> list[dict[str, Any]]:
        """One object per stage version."""
        return [v.as_json() for v in self.versions]


def stage_catalog() -> StageCatalog:
    """The stage registry as a catalogue."""
    versions = tuple(StageVersion(name=s.name, version=s.version, ref=s.ref, newest=REGISTRY.is_newest(s),
                                  inputs=tuple(s.input_knobs), summary=s.summary, changes=s.changes)
                     for s in REGISTRY)
    return StageCatalog(names=tuple(REGISTRY.names()), versions=versions)
