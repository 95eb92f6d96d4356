"""Stage types keyed by (name, version): the newest version runs, every older one stays for replay.

A certificate is forever: a change that moves any number a stage outputs ships as a new version, and the
previous version keeps running the code that produced the numbers it recorded (see
``docs/contributing.md``, "Versioned stages"). ``certa run`` uses the newest version of a type unless the
spec pins one (``use: bakeoff.compare@1.0.0``); ``certa replay`` uses the version the run recorded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from certa.engine.core.stages.base import StageType
from certa.engine.foundation.errors import UnknownStage

__all__ = ["StageRegistry", "UnknownStage", "parse_stage_ref", "version_key"]

_VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")


def version_key(version: str) -> tuple[int, int, int]:
    """``"1.10.0"`` -> ``(1, 10, 0)``, so versions order numerically; ``ValueError`` if not MAJOR.MINOR.PATCH."""
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"a stage version is MAJOR.MINOR.PATCH, e.g. 1.0.0 (got {version!r})")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def parse_stage_ref(ref: str) -> tuple[str, str | None]:
    """``"bakeoff.compare@1.0.0"`` -> ``("bakeoff.compare", "1.0.0")``; no ``@`` -> ``(ref, None)``."""
    name, at, version = ref.partition("@")
    return name, (version if at else None)


@dataclass(frozen=True)
class StageRegistry:
    """Every registered stage type, every version of it."""

    types: tuple[StageType, ...]

    def __post_init__(self) -> None:
        seen: set[tuple[str, str]] = set()
        for stage in self.types:
            version_key(stage.version)
            if (stage.name, stage.version) in seen:
                raise ValueError(f"stage {stage.ref} is registered twice")
            seen.add((stage.name, stage.version))

    def names(self) -> list[str]:
        """Stage type names, sorted."""
        return sorted({stage.name for stage in self.types})

    def versions(self, name: str) -> list[StageType]:
        """Every version of ``name``, oldest first (empty if unknown)."""
        return sorted((s for s in self.types if s.name == name), key=lambda s: version_key(s.version))

    def newest(self, name: str) -> StageType:
        """The newest version of ``name``: what an unpinned ``use:`` runs."""
        versions = self.versions(name)
        if not versions:
            hint = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.5)
            suffix = f"; did you mean '{hint[0]}'?" if hint else f"; registered: {', '.join(self.names())}"
            raise UnknownStage(f"unknown stage type '{name}'{suffix}")
        return versions[-1]

    def resolve(self, ref: str) -> StageType:
        """The stage type ``ref`` names: ``name`` (newest version) or ``name@version`` (exactly that one)."""
        name, version = parse_stage_ref(ref)
        return self.newest(name) if version is None else self.get(name, version)

    def get(self, name: str, version: str) -> StageType:
        """Exactly ``name`` at ``version``; ``UnknownStage`` naming the versions this certa has otherwise."""
        newest = self.newest(name)
        if not _is_version(version):
            raise UnknownStage(f"'{name}@{version}': a pinned version is MAJOR.MINOR.PATCH, e.g. "
                               f"'{newest.ref}' (certa stages lists the versions)")
        for stage in self.versions(name):
            if stage.version == version:
                return stage
        known = ", ".join(s.version for s in self.versions(name))
        later = " (it may have been recorded by a newer certa: upgrade certa)" \
            if _is_version(version) and version_key(version) > version_key(newest.version) else ""
        raise UnknownStage(f"stage type '{name}' has no version {version!r}{later}; this certa has {known}")

    def find(self, name: str, version: str) -> StageType | None:
        """Exactly ``name`` at ``version``, or None."""
        return next((s for s in self.types if s.name == name and s.version == version), None)

    def is_newest(self, stage: StageType) -> bool:
        return self.newest(stage.name).version == stage.version

    def __iter__(self) -> Iterator[StageType]:
        """Every stage type, by name, then version (oldest first)."""
        return iter(sorted(self.types, key=lambda s: (s.name, version_key(s.version))))

    def __getitem__(self, name: str) -> StageType:
        """The newest version of ``name`` (``KeyError`` if unknown)."""
        try:
            return self.newest(name)
        except UnknownStage as error:
            raise KeyError(name) from error

    @classmethod
    def of(cls, groups: Iterable[Iterable[StageType]]) -> StageRegistry:
        return cls(tuple(stage for group in groups for stage in group))


def _is_version(text: str) -> bool:
    return _VERSION.match(text) is not None
