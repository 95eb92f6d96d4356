"""The libyaml fast path of ``certa.engine.core.spec._parse_yaml`` gives the data and node marks of PyYAML's parser."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from certa.engine.core.spec import _CLoader, _parse_yaml, _parse_yaml_reference

SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").rglob("*.yaml"))


def marks(node, out):
    out.append((type(node).__name__, node.tag, node.start_mark.line, node.start_mark.column,
                node.end_mark.line, node.end_mark.column))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            marks(key, out)
            marks(value, out)
    elif isinstance(node, yaml.SequenceNode):
        for value in node.value:
            marks(value, out)
    return out


@pytest.mark.skipif(_CLoader is None, reason="PyYAML without libyaml")
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_fast_parse_equals_reference_on_every_example_spec(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    data, node = _parse_yaml(text, str(path))
    ref_data, ref_node = _parse_yaml_reference(text, str(path))
    assert data == ref_data and repr(data) == repr(ref_data)
    assert marks(node, []) == marks(ref_node, [])


def test_unicode_and_odd_scalars_parse_alike() -> None:
    text = 'name: "é€😀"\nx: {a: 1, "ü😀": [1, 2.50, "z", 0o17, 1e3, .inf, ~, yes, 2026-11-22]}\n'
    data, node = _parse_yaml(text, "<t>")
    ref_data, ref_node = _parse_yaml_reference(text, "<t>")
    assert repr(data) == repr(ref_data) and marks(node, []) == marks(ref_node, [])
