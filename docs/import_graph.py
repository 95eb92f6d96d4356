"""Print certa's import graph between its packages, as a reviewer reads it: one line per edge ``a -> b (n)``,
where ``n`` counts the import statements (at any level, lazy ones inside functions included; those under
``if TYPE_CHECKING:``, for annotations only, left out) in modules under ``a`` that name modules under ``b``, and
the cycles among those packages.

    python3 docs/import_graph.py            # edges between engine's layers, ledger and cli
    python3 docs/import_graph.py --depth 4  # one level finer (certa.engine.core.stats, certa.engine.core.stages, ...)

Read from the source with ``ast`` (nothing is imported), so it runs on any checkout; the contracts in
``.importlinter`` are checked by import-linter (``lint-imports``), which reads the same imports.
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_of(module: str, depth: int) -> str:
    """The first ``depth`` dotted parts of ``module`` (``certa.engine.core.stats.bootstrap`` at 3: ``certa.engine.core``)."""
    return ".".join(module.split(".")[:depth])


def package_edges(depth: int) -> Counter[tuple[str, str]]:
    """How many imports go from each package (at ``depth``) to each other package of certa."""
    edges: Counter[tuple[str, str]] = Counter()
    files = [ROOT / "cli.py", *sorted((ROOT / "engine").rglob("*.py")), *sorted((ROOT / "ledger").rglob("*.py"))]
    for path in files:
        parts = ("certa", *path.relative_to(ROOT).with_suffix("").parts)
        importer = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for imported in imported_modules(ast.parse(path.read_text(encoding="utf-8")), package):
            if imported.split(".")[0] == "certa":
                a, b = package_of(importer, depth), package_of(imported, depth)
                if a != b:
                    edges[a, b] += 1
    return edges


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except what sits under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def imported_modules(tree: ast.Module, package: str) -> list[str]:
    """The modules each import statement of ``tree`` names (relative imports resolved against ``package``)."""
    names: list[str] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names.append(base)
    return names


def cycles(edges: Counter[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs of packages that import each other (a cycle of length two, the kind layers forbid)."""
    return sorted((a, b) for (a, b) in edges if a < b and (b, a) in edges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=3, help="dotted parts that name a package (default 3)")
    depth = parser.parse_args().depth
    edges = package_edges(depth)
    for (a, b), n in sorted(edges.items()):
        print(f"{a} -> {b} ({n})")
    loops = cycles(edges)
    print(f"{len(edges)} edges, {len(loops)} two-way: " + (", ".join(f"{a} <-> {b}" for a, b in loops) or "none"))
    longer = [c for c in itertools.permutations({p for e in edges for p in e}, 3)
              if all((c[i], c[(i + 1) % 3]) in edges for i in range(3)) and c[0] == min(c)]
    print(f"three-way cycles: {len(longer)}" + "".join(f"\n  {' -> '.join(c)} -> {c[0]}" for c in longer))


if __name__ == "__main__":
    main()
