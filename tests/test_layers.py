"""The layers and the import rules (docs/contributing.md, "Layers"), enforced: the import-linter contracts in
``.importlinter`` hold; the statistical kernels import only numpy, scipy, numba, the standard library and each
other; no module uses another certa module's private names."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.source_nodes import source_nodes

ROOT = Path(__file__).resolve().parent.parent
CERTA = ("certa",)
SOURCES = sorted([*ROOT.joinpath("engine").rglob("*.py"), *ROOT.joinpath("ledger").rglob("*.py"), ROOT / "cli.py",
                  ROOT / "__init__.py", ROOT / "__main__.py"])
# Names certa installed at the top of site-packages before 0.10.0; nothing may import them now.
OLD_TOP_LEVEL_NAMES = ("engine", "ledger", "schemas", "cli")


# A named tuple's own API: public, its underscore only keeps it apart from the field names
# (https://docs.python.org/3/library/collections.html#collections.namedtuple).
_NAMED_TUPLE_API = frozenset({"_make", "_fields", "_asdict", "_replace", "_field_defaults"})


def _private(name: str) -> bool:
    return (name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
            and name not in _NAMED_TUPLE_API)


def _certa(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in CERTA  # type: ignore[union-attr]


def test_the_import_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    from importlinter.cli import lint_imports

    code = lint_imports(config_filename=str(ROOT / ".importlinter"), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert code == 0, report
    assert "broken" not in report.split("Contracts:")[-1].lower().replace("0 broken", ""), report


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in source_nodes(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_the_statistical_kernels_import_only_numpy_scipy_numba_and_the_standard_library() -> None:
    allowed = {"numpy", "scipy", "numba", "__future__"}
    stats = ROOT / "engine" / "core" / "stats"
    outside = [f"{path.relative_to(ROOT)}:{line} imports {module}"
               for path in sorted(stats.rglob("*.py")) for line, module in _imports(path)
               if not (module.split(".")[0] in allowed | set(sys.stdlib_module_names)
                       or module.startswith("certa.engine.core.stats"))]
    assert outside == []


def _private_uses(path: Path) -> list[str]:
    """Private names of another certa module: imported (``from certa.engine.x import _y``), or read as an attribute
    of something that is not ``self``/``cls``, an instance the same class method built with ``cls(...)``, or an
    object imported from outside certa (a third-party library's internals are its own business)."""
    nodes = source_nodes(path)
    foreign = {alias.asname or alias.name.split(".")[0] for node in nodes
               if isinstance(node, (ast.Import, ast.ImportFrom)) and not _certa(getattr(node, "module", None) or (
                   node.names[0].name if isinstance(node, ast.Import) else None))
               for alias in node.names}
    built = {target.id for node in nodes if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
             and node.value.func.id == "cls" for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _certa(node.module):
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in {"self", "cls", *built, *foreign}:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    found = {str(path.relative_to(ROOT)): uses for path in SOURCES if (uses := _private_uses(path))}
    assert found == {}


def test_the_private_name_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from certa.engine.core.stages.base import _hidden\nfrom numpy import _core\n"
                      "from certa import ledger\n\ndef f(store):\n    return store._read(), ledger._cache\n", encoding="utf-8")
    assert sorted(_private_uses(sample)) == ["line 1: from certa.engine.core.stages.base import _hidden",
                                             "line 6: ledger._cache", "line 6: store._read"]


def test_the_command_line_calls_services_never_the_core() -> None:
    """``cli.py`` parses and prints: what it runs is a service (``certa.engine.services``); it may name the foundation's
    errors and the ledger's default location, never a module of the core."""
    found = [f"cli.py:{line} imports {module}" for line, module in _imports(ROOT / "cli.py")
             if module.startswith("certa.engine.core") or module == "certa.engine"]
    assert found == []


def test_nothing_imports_the_old_top_level_names() -> None:
    """Everything is ``certa.*`` (one namespace): an ``import engine`` anywhere in the repository would pass in the
    checkout (its top is on ``sys.path`` there) and fail for a user, or import a user's own ``engine/``."""
    python_files = sorted(p for p in ROOT.rglob("*.py") if not {".git", "build"} & set(p.relative_to(ROOT).parts))
    found = [f"{path.relative_to(ROOT)}:{line} imports {module}" for path in python_files
             for line, module in _imports(path) if module.split(".")[0] in OLD_TOP_LEVEL_NAMES]
    assert found == []
