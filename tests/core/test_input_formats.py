"""The input-format registry (``certa.engine.core.input_formats``): one list of formats that the schemas, the
spec checks and every command share, and the ``certa.input_formats`` entry-point seam a package extends."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from certa.engine import run
from certa.engine.core.endpoint_input import ENDPOINT_FORMAT
from certa.engine.core.input_formats import (BUILTIN_FORMATS, ENTRY_POINT_GROUP, FORMAT_NAME, InputFormat, input_format,
                                             input_formats, read_input)
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.inputs import InputSource, load_tables
from certa.engine.core.models.manifest import MODEL_FORMAT
from certa.engine.core.spec import load_plan, spec_schema, why_not_a_spec
from certa.engine.foundation.errors import InputError, SpecError
from certa.schemas import load_schema

PLUGIN_MODULE = "certa_test_tsv_format"
PLUGIN_SOURCE = '''
from dataclasses import dataclass, field
from certa.engine.core.tables import parse_table

@dataclass(frozen=True)
class TabSeparated:
    """Tab-separated values, read as CSV after the tabs become commas (a test plugin)."""
    name: str = "tsv"
    read_options: frozenset = frozenset({"decimal_comma"})
    companions: dict = field(default_factory=dict)

    def read(self, name, raw, *, options, companions, limits):
        text = raw.replace(b",", b".") if options.get("decimal_comma") == "yes" else raw
        table = parse_table(name, text.replace(b"\\t", b","), "csv", limits)
        from dataclasses import replace
        from certa.engine.foundation.canonical import sha256_hex
        return replace(table, fmt="tsv", raw=raw, sha256=sha256_hex(raw))

TSV = TabSeparated()
NOT_A_FORMAT = object()
'''


STAGES = """\
certa: 1
name: formats
seed: 1
profile: dev
inputs:
  {inputs}
stages:
  - id: delta
    use: paired.metric_delta
    with: {{{arms}, metric: correct}}
"""


@pytest.fixture
def format_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package registering the ``tsv`` format (and, with ``points``, other entry points) as pip would."""

    def install(points: str = f"tsv = {PLUGIN_MODULE}:TSV\n") -> None:
        site = tmp_path / "site"
        site.mkdir(exist_ok=True)
        (site / f"{PLUGIN_MODULE}.py").write_text(textwrap.dedent(PLUGIN_SOURCE), encoding="utf-8")
        info = site / "certa_test_tsv-0.0.1.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: certa-test-tsv\nVersion: 0.0.1\n")
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{points}")
        monkeypatch.syspath_prepend(str(site))
        input_formats.cache_clear()

    yield install
    sys.modules.pop(PLUGIN_MODULE, None)
    input_formats.cache_clear()


def test_the_spec_schema_lists_exactly_the_built_in_formats() -> None:
    declared = load_schema("spec.schema.json")["properties"]["inputs"]["additionalProperties"]["properties"]
    names = [f.name for f in BUILTIN_FORMATS]
    # a model input is declared with model:, a served one with endpoint:, not format:; every other format is the
    # schema's enum, in order
    assert declared["format"]["enum"] == [name for name in names if name not in (MODEL_FORMAT, ENDPOINT_FORMAT)]
    assert MODEL_FORMAT in names and ENDPOINT_FORMAT in names and len(set(names)) == len(names)
    options = set(declared["read"]["properties"])
    assert options == set().union(*(f.read_options for f in BUILTIN_FORMATS))
    for reader in BUILTIN_FORMATS:
        assert isinstance(reader, InputFormat)
        for option in reader.read_options:
            assert reader.name in declared["read"]["properties"][option]["description"], (reader.name, option)


def test_the_certificate_schema_takes_every_registered_format() -> None:
    schema = load_schema("certificate.schema.json")
    stated = schema["properties"]["content"]["properties"]["inputs"]["items"]["properties"]["format"]
    validator = Draft202012Validator(stated)
    assert all(validator.is_valid(f.name) for f in BUILTIN_FORMATS) and not validator.is_valid("")
    assert all(FORMAT_NAME.fullmatch(f.name) for f in BUILTIN_FORMATS)
    assert stated["pattern"] == f"^{FORMAT_NAME.pattern}$"
    assert all(f.name in stated["description"] for f in BUILTIN_FORMATS)


def test_an_unknown_format_is_refused_with_the_closest_name() -> None:
    with pytest.raises(InputError, match="input 'x': unknown format 'lm-eval-sample'; did you mean 'lm-eval-samples'"):
        input_format("lm-eval-sample", name="x")
    with pytest.raises(InputError, match="use one of csv, jsonl, parquet, lm-eval-samples"):
        input_format("xlsx", name="x")


def test_read_input_refuses_an_option_the_format_does_not_take() -> None:
    with pytest.raises(InputError, match=r"format csv has no read option 'provider' \(its options: none\)"):
        read_input("t", b"a\n1\n", "csv", options={"provider": "p"}, limits=InputLimits())
    with pytest.raises(InputError, match="format inspect-json has no read option 'task' .its options: slice"):
        read_input("t", b"{}", "inspect-json", options={"task": "x"}, limits=InputLimits())


def test_every_format_applies_the_input_limits() -> None:
    tight = InputLimits(bytes=8)
    for reader in BUILTIN_FORMATS:
        if reader.name == MODEL_FORMAT:
            continue  # a manifest's size is bounded by the folder's (InputLimits.model_bytes)
        with pytest.raises(InputError, match="bytes"):
            read_input("t", b"x" * 64, reader.name, limits=tight)


def test_a_source_is_read_like_a_file_and_its_digest_is_checked(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_bytes(b"item_id,correct\na,1\nb,0\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(STAGES.format(inputs="t: {path: t.csv}", arms="baseline: t, subject: t"))
    plan = load_plan(spec)
    from_file = load_tables(plan)["t"]
    from_bytes = load_tables(plan, inputs={"t": InputSource("t", "csv", b"item_id,correct\na,1\nb,0\n")})["t"]
    assert (from_bytes.sha256, from_bytes.fmt, list(from_bytes.columns)) == (from_file.sha256, "csv", ["item_id", "correct"])
    assert list(from_bytes.numeric("correct")) == list(from_file.numeric("correct")) == [1.0, 0.0]
    with pytest.raises(InputError, match="not the 0{64} they were hashed with"):
        load_tables(plan, inputs={"t": InputSource("t", "csv", b"item_id,correct\na,1\n", sha256="0" * 64)})


def test_a_registered_format_is_read_by_every_path(format_plugin, tmp_path: Path) -> None:
    format_plugin()
    assert list(input_formats())[-1] == "tsv"
    for arm, scores in (("base", b"1\t1\t0\t1"), ("subj", b"1\t0\t0\t1")):
        rows = b"".join(b"%s\t%s\n" % (item, score) for item, score in zip((b"a", b"b", b"c", b"d"), scores.split(b"\t")))
        (tmp_path / f"{arm}.tsv").write_bytes(b"item_id\tcorrect\n" + rows)
    spec = tmp_path / "spec.yaml"
    spec.write_text(STAGES.format(inputs="base: {path: base.tsv, format: tsv, read: {decimal_comma: 'no'}}\n"
                                         "  subj: {path: subj.tsv, format: tsv}", arms="baseline: base, subject: subj"))
    assert "tsv" in spec_schema()["properties"]["inputs"]["additionalProperties"]["properties"]["format"]["enum"]
    table = load_tables(load_plan(spec))["base"]
    assert table.fmt == "tsv" and list(table.text("item_id")) == ["a", "b", "c", "d"]
    result = run(spec, ledger=None)
    assert [i["format"] for i in result.certificate["content"]["inputs"]] == ["tsv", "tsv"]
    spec.write_text(spec.read_text().replace("decimal_comma", "provider"))
    with pytest.raises(SpecError, match="format tsv takes decimal_comma, not 'provider'"):
        load_plan(spec)


@pytest.mark.parametrize(("points", "message"), [
    (f"csv = {PLUGIN_MODULE}:TSV\n", "takes the name of a built-in format"),
    (f"tab = {PLUGIN_MODULE}:TSV\n", "must be an object with name 'tab'"),
    (f"odd = {PLUGIN_MODULE}:NOT_A_FORMAT\n", "must be an object with name 'odd'"),
    ("gone = certa_no_such_module:X\n", "cannot be loaded: ModuleNotFoundError"),
    (f"Tab_Sep = {PLUGIN_MODULE}:TSV\n", "a format's name is lower-case letters"),
])
def test_a_bad_registration_is_refused_naming_its_entry_point(format_plugin, points: str, message: str) -> None:
    format_plugin(points)
    with pytest.raises(SpecError, match=message):
        input_formats()


@pytest.mark.parametrize(("text", "reason"), [
    ("certa: 1\nname: x\n", None),
    ("# a comment\ncerta: 1\nname: [unclosed\n", None),  # a broken spec is still a spec: load_plan reports it
    ("{certa: 1, name: x}\n", None),
    ("task: arc_easy\ndataset_path: ai2_arc\n", "no top-level certa: key (a run spec starts with 'certa: 1')"),
    ("- a\n- b\n", "no top-level certa: key (a run spec starts with 'certa: 1')"),
    ("nested:\n  certa: 1\n", "no top-level certa: key (a run spec starts with 'certa: 1')"),
    ("a: &x [1]\nb: *x\n", "not a run spec: "),
    ("key: [unclosed\n", "not a run spec: not valid YAML"),
])
def test_why_not_a_spec(tmp_path: Path, text: str, reason: str | None) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    found = why_not_a_spec(path)
    assert found == reason if reason is None or not reason.startswith("not a run spec") else found.startswith(reason)


def test_a_file_that_is_not_text_or_too_large_is_not_a_spec(tmp_path: Path) -> None:
    binary, large = tmp_path / "b.yaml", tmp_path / "l.yaml"
    binary.write_bytes(b"\xff\xfe certa: 1\n")
    large.write_bytes(b"certa: 1\n" + b"#" * 1_000_001)
    assert why_not_a_spec(binary) == "not UTF-8 text, so not a run spec"
    assert why_not_a_spec(large) == "larger than 1,000,000 bytes, so not a run spec"


def test_a_key_yaml_reads_as_a_boolean_or_number_is_a_spec_error_with_its_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("certa: 1\nname: x\nseed: 1\non: [push]\nstages: []\n")
    with pytest.raises(SpecError, match=r"spec.yaml:4:1: .*key True is not text: YAML reads it as a boolean"):
        load_plan(spec)
    spec.write_text("certa: 1\nname: x\nseed: 1\nstages:\n  - id: a\n    use: paired.ppl_ratio\n    with: {7: x}\n")
    with pytest.raises(SpecError, match=r"spec.yaml:7:\d+: stages\[0\].with: key 7 is not text: .* a number"):
        load_plan(spec)
