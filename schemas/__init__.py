"""JSON Schemas (Draft 2020-12) shipped with certa: the run spec, each stage type's knobs, the certificate."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["load_schema", "schema_exists"]


@lru_cache(maxsize=None)
def _load_text(relative_path: str) -> str:
    return resources.files(__name__).joinpath(relative_path).read_text(encoding="utf-8")


def load_schema(relative_path: str) -> dict[str, Any]:
    """A fresh copy of the schema at ``relative_path`` (e.g. ``"spec.schema.json"``)."""
    return json.loads(_load_text(relative_path))


@lru_cache(maxsize=None)
def schema_exists(relative_path: str) -> bool:
    """Whether certa ships a schema at ``relative_path``."""
    return resources.files(__name__).joinpath(relative_path).is_file()
