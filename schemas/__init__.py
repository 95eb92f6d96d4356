"""JSON Schemas (Draft 2020-12) shipped with certa: the run spec, each stage type's knobs (``stages/``) and
outputs (``outputs/``), the certificate, the bundle and the ledger entries' payloads.

A stage version whose knobs or outputs differ from the newest version's has its own frozen file,
``<folder>/<name>@<version>.schema.json``; the others share ``<folder>/<name>.schema.json``
(``certa.engine.core.stages.base.StageType.schema_file`` and ``output_schema_file``)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["load_schema", "read_schema", "schema_exists"]


@cache
def _load_text(relative_path: str) -> str:
    return resources.files(__name__).joinpath(relative_path).read_text(encoding="utf-8")


def load_schema(relative_path: str) -> dict[str, Any]:
    """A fresh copy of the schema at ``relative_path`` (e.g. ``"spec.schema.json"``)."""
    return json.loads(_load_text(relative_path))


@cache
def read_schema(relative_path: str) -> dict[str, Any]:
    """The schema at ``relative_path``, parsed once per process and shared: to read, never to change
    (``load_schema`` gives a copy to change)."""
    return load_schema(relative_path)


@cache
def schema_exists(relative_path: str) -> bool:
    """Whether certa ships a schema at ``relative_path``."""
    return resources.files(__name__).joinpath(relative_path).is_file()
