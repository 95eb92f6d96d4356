"""The names ``paired.ppl_ratio`` (``certa.engine.core.stages.paired_ratio``) gives its outputs: the units a window
can be counted in and the keys its ratio has had. Apart from the stage's computation so that its presentation
(``certa show``, the report) reads a recorded certificate without importing numpy and the bootstrap."""

from __future__ import annotations

__all__ = ["UNITS", "ESTIMATE_KEYS"]

UNITS = {"tokens": "token", "bytes": "byte", "words": "word"}
"""The units a window can be counted in (knob ``unit``), each with the word that names its outputs."""
ESTIMATE_KEYS = ("primary_metric", *(f"{word}_perplexity" for word in UNITS.values()))
"""Every name the ratio has had: ``primary_metric`` (1.0.0–1.3.0) and one per unit (1.4.0)."""
