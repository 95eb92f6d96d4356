"""certa's own sources as syntax trees, for the tests that read the code (``tests/test_layers.py``,
``tests/foundation/test_errors.py``, ``tests/services/presentation/test_stage_markdown.py``): each file is parsed
and walked once per test process, whichever of those modules asks first (an xdist worker that runs two of them
parses the sources once)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def source_nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s syntax tree, in ``ast.walk`` order, from one parse and one walk."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
