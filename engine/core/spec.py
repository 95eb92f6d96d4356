"""Load a run spec, validate it against ``schemas/`` and resolve it into a frozen ``Plan``.

Validation happens before anything runs. An error names the file, the line and column of the offending
node (from the YAML node marks), the key path (``stages[0].with.replicates``), what was expected, and,
for a misspelt key, the closest valid one. Only ``yaml.SafeLoader`` is used: a spec is data, never code.

Resolution fills every default from the schemas and computes ``knobs_hash``: the SHA-256 of the RFC 8785
canonical JSON of the resolved knobs (profile, each stage's type, version and filled ``with:``, gates).
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from certa.schemas import load_schema, read_schema, schema_exists

from certa.engine.foundation.canonical import canonical_bytes, canonical_sha256, sha256_hex
from certa.engine.foundation.errors import SpecError
from certa.engine.core.gate_family import DEFAULT_FAMILY, FamilySpec
from certa.engine.core.models.manifest import MODEL_FORMAT
from certa.engine.core.models.signature import SignatureTrust
from certa.engine.core.metric_paths import DataKey, MetricPathError, closest, parse_metric, resolve_in_schema
from certa.engine.core.stages.base import DeclaredTable, KnobProblem, StageType
from certa.engine.core.stages.registry import StageRegistry, UnknownStage, parse_stage_ref

if TYPE_CHECKING:  # jsonschema loads to validate a spec, not to read a recorded one's approval pin ('certa show')
    from certa.engine.foundation.schema_validator import ValidationError

__all__ = ["InputSpec", "StagePlan", "GateSpec", "Plan", "load_plan", "spec_schema", "why_not_a_spec", "SPEC_FORMAT",
           "knob_strings", "read_yaml_document", "PolicyPin", "approval_pin"]

SPEC_FORMAT = 1

REFUSED = "x-certa-refused"
"""The schema keyword beside an ``enum`` that says why a value users reach for is not one of it (value -> reason),
appended to the refusal: ``count_unit: tokens`` is not in lm-eval's export."""


@dataclass(frozen=True)
class InputSpec:
    """A declared input: its name, the resolved file path (None for a spec without a folder), pin, format."""

    name: str
    path: str
    sha256: str | None
    fmt: str | None
    read: Mapping[str, Any] = field(default_factory=dict)
    """An evaluator format's reader options (``certa.engine.core.evidence.formats``)."""
    signature: SignatureTrust | None = None
    """A model input's ``signature``, its files resolved like ``path`` (``certa.engine.core.models.signature``)."""
    endpoint: Mapping[str, Any] | None = None
    """An endpoint input's declaration (``certa.engine.core.endpoint_input``; ``path`` is then its URL)."""


@dataclass(frozen=True)
class StagePlan:
    """A stage with its type resolved and its knobs filled with defaults."""

    id: str
    use: str
    version: str
    knobs: Mapping[str, Any]


@dataclass(frozen=True)
class GateSpec:
    """A gate: ``metric`` is ``<stage id>.<path>``; ``threshold`` holds min/max/equals/between.

    ``data_keys`` are the steps of ``metric`` whose keys only the data know (a bucket, a vendor), checked once
    the inputs are read (``certa.engine.core.interpreter.check_data_keys``); ``line`` and ``column`` locate ``metric`` in
    the spec for that message."""

    id: str
    metric: str
    threshold: Mapping[str, Any]
    data_keys: tuple[DataKey, ...] = field(default=(), compare=False)
    line: int | None = field(default=None, compare=False)
    column: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PolicyPin:
    """The spec's ``approval``: the trust policy that decides who may approve its runs, as written (``policy``),
    resolved inside the spec's folder (``path``) and pinned by the SHA-256 of its bytes. The spec holds the pin;
    reading the file is ``certa.engine.services.policy_record.pinned_policy``'s (a replay never reads it)."""

    policy: str
    path: str | None
    """None when read back from a recorded spec's text (``approval_pin``): a recorded run's policy is the ledger's."""
    sha256: str


@dataclass(frozen=True)
class Plan:
    """A validated, resolved run spec."""

    name: str
    description: str
    seed: int
    profile: str
    inputs: Mapping[str, InputSpec]
    stages: tuple[StagePlan, ...]
    gates: tuple[GateSpec, ...]
    family: FamilySpec
    knobs: Mapping[str, Any]
    knobs_hash: str
    spec_text: str
    spec_sha256: str
    source: str
    base_dir: Path | None
    approval: PolicyPin | None = None
    """The trust policy the spec names (``approval:``), None when it names none. Not a knob: no number depends on
    it, and the spec's SHA-256 (``spec_sha256``, in the certificate) covers it."""


# --------------------------------------------------------------------------------------------- YAML


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (YAML allows them silently: an audit tool must not)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise SpecError(f"duplicate key '{key}' (first given on line {seen[key].start_mark.line + 1})",
                            file=mark.name, line=mark.line + 1, column=mark.column + 1)
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


MAX_SPEC_BYTES = 1_000_000
"""A run spec is a short document; anything larger is refused before parsing."""


MAX_SPEC_DEPTH = 64
"""Nesting levels a spec may use (the deepest real spec uses about 8): deeper YAML is refused before it is
composed, so a few kilobytes of ``[[[[...]]]]`` cannot exhaust the recursion of the YAML composer, the
schema validator or the canonical-JSON hashing."""


def _check_events(text: str, source: str) -> None:
    """One pass over the YAML events, before anything is built: anchors and aliases are refused (a spec says
    each value where it applies, and an alias bomb, a few lines expanding to billions of nodes, cannot
    reach the canonical-JSON hashing), and so is nesting deeper than ``MAX_SPEC_DEPTH``."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                mark = event.start_mark
                raise SpecError(f"the spec nests mappings and lists more than {MAX_SPEC_DEPTH} levels deep; a run "
                                "spec is a short, flat document", file=source, line=mark.line + 1,
                                column=mark.column + 1)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            raise SpecError("YAML anchors and aliases (&name, *name) are not allowed in a run spec; "
                            "write each value out where it applies", file=source, line=mark.line + 1,
                            column=mark.column + 1)


_CLoader = getattr(yaml, "CSafeLoader", None)
"""libyaml's parser, when PyYAML was built with it: parsing with it is about ten times faster."""


class _Refused(Exception):
    """The fast path met something it leaves to the reference path (which raises the user's error)."""


def _compose_fast(text: str) -> tuple[Any, yaml.Node | None]:
    """(data, node) with libyaml: one event pass (no anchors, aliases or deep nesting), one compose, and the
    data constructed from that node with the duplicate-key check; ``_Refused`` or a YAML error otherwise."""
    depth = 0
    for event in yaml.parse(text, Loader=_CLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                raise _Refused
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused
    node = yaml.compose(text, Loader=_CLoader)
    if node is None:
        return None, None
    constructor = _UniqueKeyLoader("")
    try:
        return constructor.construct_document(node), node
    finally:
        constructor.dispose()


def _parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    """(data, node) of a spec's YAML text; ``SpecError`` with file, line and column if it is not a spec's YAML.

    libyaml parses when it is available and the text has only characters PyYAML's reader allows. Anything it
    does not accept (invalid YAML, a duplicate key, an anchor, deep nesting, a value that cannot be
    converted) goes through PyYAML's pure-Python parser, whose messages and marks the user sees, as before.
    """
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise SpecError(f"the spec is larger than {MAX_SPEC_BYTES} bytes; a run spec names its data files "
                        "under inputs: instead of holding data", file=source)
    if _CLoader is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        try:
            return _compose_fast(text)
        except (_Refused, yaml.YAMLError, SpecError, ValueError, OverflowError, RecursionError):
            pass  # the reference path below gives the error with PyYAML's own messages and marks
    return _parse_yaml_reference(text, source)


def _parse_yaml_reference(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    try:
        _check_events(text, source)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except SpecError as error:  # a duplicate key: PyYAML's mark names the text "<unicode string>", not the file
        raise SpecError(error.detail, file=source, line=error.line, column=error.column) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise SpecError(f"not valid YAML: {exc.problem}", file=source,
                        line=mark.line + 1 if mark else None,
                        column=mark.column + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, most control characters)
        line = text[:exc.position].count("\n") + 1
        raise SpecError(f"not valid YAML: character {exc.character!r} is not allowed in a spec", file=source,
                        line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"not valid YAML: {' '.join(str(exc).split())}", file=source) from None
    except (ValueError, OverflowError) as exc:  # a scalar YAML cannot convert, e.g. an integer of 5,000 digits
        raise SpecError(f"a value cannot be read: {exc}", file=source) from None
    return data, node


def _node_at(node: yaml.Node | None, path: list[Any], *, key: bool = False) -> yaml.Node | None:
    """The YAML node at ``path`` (the key node of the last step if ``key``), or the deepest one found."""
    current = node
    for i, step in enumerate(path):
        if isinstance(current, yaml.MappingNode):
            match = next(((k, v) for k, v in current.value if k.value == step), None)
            if match is None:
                return current
            if key and i == len(path) - 1:
                return match[0]
            current = match[1]
        elif isinstance(current, yaml.SequenceNode) and isinstance(step, int) and step < len(current.value):
            current = current.value[step]
        else:
            return current
    return current


def _format_path(path: list[Any]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(top level)"


# --------------------------------------------------------------------------------------- validation


def _describe(error: ValidationError) -> tuple[str, list[Any], bool]:
    """A user-facing message for ``error``, the path to point at, and whether to point at a key."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        name = extra[0]
        hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
        message = f"unknown key '{name}'"
        if hint:
            message += f"; did you mean '{hint[0]}'?"
        elif allowed:
            message += f"; valid keys here: {', '.join(allowed)}"
        return message, path + [name], True
    if error.validator == "required":
        return f"missing required key: {error.message.split(' ')[0]}", path, False
    if error.validator in ("anyOf", "not", "dependentSchemas") and len(path) == 2 and path[0] == "gates":
        return ("a gate needs exactly one kind of threshold: min and/or max, or equals, or between: [lo, hi], or "
                "differs: true/false (a member of a corrected family), or interval: {min and/or max} (on a [lower, "
                "upper] interval), or decided: DECISION (on a stage's decision)", path, False)
    if error.validator == "not" and len(path) == 3 and path[0] == "gates" and path[2] == "decided":
        return ("decided: names the decision the gate asks for (e.g. SAME); UNDECIDED is what makes it "
                "INCONCLUSIVE, not a decision", path, False)
    if error.validator == "anyOf" and len(path) == 3 and path[0] == "gates" and path[2] == "interval":
        return "interval: needs min and/or max, e.g. interval: {max: 1.05}", path, False
    if error.validator == "not" and path == ["family"]:
        return "family claim 'all' takes no alpha or correction (each gate is decided at its own level)", path, False
    if error.validator == "oneOf" and len(path) == 2 and path[0] == "inputs":
        given = sorted({"path", "model", "format", "read"} & set(error.instance))
        return ("an input is either a table file (path:, with optional format: and read:) or a model folder "
                f"(model:, nothing else but sha256:); this one gives {', '.join(given) or 'neither path nor model'}",
                path, False)
    if error.validator == "not" and isinstance(error.schema, Mapping) and error.schema.get("deprecated"):
        return f"'{path[-1]}' is no longer a knob: {error.schema.get('description', 'removed')}", path, True
    if error.validator == "enum":
        refused = error.schema.get(REFUSED, {}) if isinstance(error.schema, Mapping) else {}
        why = refused.get(error.instance) if isinstance(error.instance, str) else None
        return (f"expected one of {', '.join(map(repr, error.validator_value))} (got {error.instance!r})"
                + (f": {why}" if why else ""), path, False)
    if error.validator == "const":
        return f"expected {error.validator_value!r} (got {error.instance!r})", path, False
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return f"expected {expected} (got {type(error.instance).__name__} {error.instance!r})", path, False
    if error.validator == "pattern":
        return f"{error.instance!r} does not match the required pattern {error.validator_value}", path, False
    description = error.schema.get("description") if isinstance(error.schema, Mapping) else None
    message = error.message
    if description:
        message += f" ({description})"
    return message, path, False


def _registry() -> StageRegistry:
    """The stage registry, built (every stage module imported) when a spec's stages are first resolved."""
    from certa.engine.core.stages import REGISTRY
    return REGISTRY


def _validate(instance: Any, schema: Mapping[str, Any], *, node: yaml.Node | None, source: str,
              prefix: list[Any]) -> None:
    from certa.engine.foundation.schema_validator import Draft202012Validator
    validator = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    error = errors[0]
    message, path, at_key = _describe(error)
    full_path = prefix + path
    target = _node_at(node, full_path, key=at_key)
    line = target.start_mark.line + 1 if target is not None else None
    column = target.start_mark.column + 1 if target is not None else None
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    raise SpecError(message + more, file=source, line=line, column=column, path=_format_path(full_path))


_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


def _timestamps_as_text(data: Any, node: yaml.Node | None) -> Any:
    """``data`` with every YAML timestamp (an unquoted ``2026-01-01T00:00:00Z``, which ``yaml.safe_load`` makes a
    ``datetime``) replaced by its text as written: a document's times are validated and read as RFC 3339 text."""
    if isinstance(node, yaml.ScalarNode):
        return node.value if node.tag == _TIMESTAMP_TAG else data
    if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
        values = {key_node.value: value_node for key_node, value_node in node.value
                  if isinstance(key_node, yaml.ScalarNode)}
        return {key: _timestamps_as_text(value, values.get(str(key))) for key, value in data.items()}
    if isinstance(node, yaml.SequenceNode) and isinstance(data, list):
        return [_timestamps_as_text(value, item) for value, item in zip(data, node.value, strict=True)]
    return data


def read_yaml_document(raw: bytes, source: str, schema: Mapping[str, Any]) -> Any:
    """The data of a YAML document other than a spec (a trust policy, say) read exactly as a spec is: UTF-8,
    at most ``MAX_SPEC_BYTES``, no anchors, aliases or duplicate keys (``yaml.safe_load`` semantics), and valid
    against ``schema``; otherwise ``SpecError`` naming ``source``, the line, the column and the key path. A
    timestamp is read as the text it is written as (``_timestamps_as_text``), quoted or not."""
    data, node = _parse_yaml(_decode(raw, source), source)
    data = _timestamps_as_text(data, node)
    _validate(data, schema, node=node, source=source, prefix=[])
    return data


def approval_pin(spec_text: str, source: str) -> PolicyPin | None:
    """The ``approval`` a recorded spec's text names (``path`` None: nothing is resolved or read), None when it
    names none; ``SpecError`` when the text is not YAML or its ``approval`` is not valid. Reads only that key: the
    spec was validated in full when it ran."""
    data, node = _parse_yaml(spec_text, source)
    if not isinstance(data, dict) or "approval" not in data:
        return None
    _validate(data["approval"], read_schema("spec.schema.json")["properties"]["approval"], node=node, source=source,
              prefix=["approval"])
    return PolicyPin(policy=data["approval"]["policy"], path=None, sha256=data["approval"]["sha256"])


def fill_defaults(instance: Any, schema: Mapping[str, Any]) -> Any:
    """A copy of ``instance`` with every ``default`` of ``schema``'s ``properties`` filled in, recursively.

    A nested object is created from its own ``"default": {}`` and then filled. ``additionalProperties``
    schemas are applied to each extra value.
    """
    if not isinstance(instance, dict) or not isinstance(schema, Mapping):
        return copy.deepcopy(instance)
    out: dict[str, Any] = {}
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, value in instance.items():
        sub = properties.get(key, extra if isinstance(extra, Mapping) else {})
        out[key] = fill_defaults(value, sub)
    for key, sub in properties.items():
        if key not in out and isinstance(sub, Mapping) and "default" in sub:
            out[key] = fill_defaults(copy.deepcopy(sub["default"]), sub)
    return out


# ----------------------------------------------------------------------------------------- resolve


def _read_source(spec: str | Path | Mapping[str, Any]) -> tuple[Any, yaml.Node | None, str, bytes, Path | None]:
    """(data, yaml node, source name, spec bytes, base dir) for a path, YAML text or a dict."""
    if isinstance(spec, Mapping):
        raw = canonical_bytes(spec)
        return copy.deepcopy(dict(spec)), None, "<dict>", raw, None
    if isinstance(spec, Path) or ("\n" not in str(spec) and str(spec).endswith((".yaml", ".yml"))):
        path = Path(spec)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SpecError(f"cannot read spec file: {exc.strerror}", file=str(path)) from None
        text = _decode(raw, str(path))
        data, node = _parse_yaml(text, str(path))
        return data, node, str(path), raw, path.resolve().parent
    text = str(spec)
    data, node = _parse_yaml(text, "<text>")
    return data, node, "<text>", text.encode("utf-8"), None


_SPEC_KEY_LINE = re.compile(r"^certa[ \t]*:", re.MULTILINE)


def why_not_a_spec(path: Path) -> str | None:
    """None when the file ``path`` is a run spec, else why not, in words. A run spec is a YAML mapping with a
    top-level ``certa:`` key; a file with a ``certa:`` line at its top level is one even when it does not parse
    (``load_plan`` then says what is wrong with it), so a broken spec is never passed over. Read as specs are
    (``MAX_SPEC_BYTES``, UTF-8, no aliases): a hostile file in a data folder cannot hang the search."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if len(raw) > MAX_SPEC_BYTES:
        return f"larger than {MAX_SPEC_BYTES:,} bytes, so not a run spec"
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return "not UTF-8 text, so not a run spec"
    if _SPEC_KEY_LINE.search(text):
        return None
    try:
        data, _ = _parse_yaml(text, str(path))
    except SpecError as error:
        where = f" (line {error.line})" if error.line is not None else ""
        return f"not a run spec: {error.detail}{where}"
    if isinstance(data, dict) and "certa" in data:
        return None
    return "no top-level certa: key (a run spec starts with 'certa: 1')"


def _decode(raw: bytes, source: str) -> str:
    """The spec's text: a spec file is UTF-8."""
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"the spec is larger than {MAX_SPEC_BYTES} bytes; a run spec names its data files "
                        "under inputs: instead of holding data", file=source)
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text: byte 0x{raw[error.start]:02x} at offset {error.start} cannot be "
                        "decoded; save the spec as UTF-8", file=source, line=line) from None
    return text


def read_option_problems(inputs: Mapping[str, InputSpec]) -> list[tuple[str, list[str]]]:
    """(message, path under ``inputs``) for each ``read:`` option its input's format does not take, and each
    option naming another input (``results``) that is not declared with the format it needs."""
    from certa.engine.core.input_formats import input_formats

    formats = input_formats()
    problems = []
    for name, declared in inputs.items():
        reader = formats.get(declared.fmt or "")
        allowed = reader.read_options if reader is not None else frozenset()
        for option, value in declared.read.items():
            if option not in allowed:
                takes = f"takes {', '.join(sorted(allowed))}" if allowed else "takes no read option"
                problems.append((f"input '{name}': format {declared.fmt or 'from the file suffix'} {takes}, not "
                                 f"'{option}'", [name, "read", option]))
            elif reader is not None and option in reader.companions:
                other = inputs.get(value)
                if other is None or other.fmt != reader.companions[option]:
                    problems.append((f"input '{name}': read.{option} must name another input of format "
                                     f"{reader.companions[option]} (got {value!r})", [name, "read", option]))
    return problems


def read_option_use_problems(inputs: Mapping[str, InputSpec],
                             stages: Sequence[StagePlan]) -> list[tuple[str, list[str]]]:
    """(message, path under ``inputs``) for each ``read:`` option that no stage reading its input would use.

    An option listed by its format's ``option_parts`` makes a part of the records (``slices``, ``weights``, the
    provenance's task: ``certa.engine.core.evidence.formats.RECORD_PARTS``); each stage that reads the input says
    whether it uses that part (``StageType.unused_record_parts``; a stage without it reads tables by column and
    uses a part only where its knobs name the part's column, and records no export's provenance). An option
    every such stage leaves unused would be silently ignored, so it is refused, with each stage's reason. Options
    that select or check the records (``filter``, ``provider``, ``results``) are used by any stage that reads the
    input; an input no stage reads is not checked here."""
    from certa.engine.core.evidence.formats import RECORD_PARTS
    from certa.engine.core.input_formats import input_formats

    formats = input_formats()
    parts_of: dict[str, dict[str, str]] = {}
    for name, declared in inputs.items():
        option_parts = getattr(formats.get(declared.fmt or ""), "option_parts", None)
        parts = dict(option_parts(declared.read)) if option_parts is not None and declared.read else {}
        if parts:
            parts_of[name] = parts
    used: dict[str, set[str]] = {}
    reasons: dict[tuple[str, str], list[str]] = {}
    for stage in stages:
        stage_type = _registry().get(stage.use, stage.version)
        named = {knob: stage.knobs.get(knob) for knob in stage_type.input_knobs}
        read = {knob: name for knob, name in named.items() if isinstance(name, str) and name in parts_of}
        lists = [(knob, name) for knob, names in named.items() if isinstance(names, list)
                 for name in names if name in parts_of]
        if not read and not lists:
            continue
        if stage_type.unused_record_parts is not None:
            unused = {(knob, part): why for knob, part, why in stage_type.unused_record_parts(
                stage.knobs, {knob: frozenset(parts_of[name].values()) for knob, name in read.items()})}
        else:
            named_columns = set(knob_strings(stage.knobs))
            unused = {(knob, part): ("reads no evaluator's provenance" if column is None else
                                     f"reads no column '{column}' (its knobs name the columns it reads)")
                      for knob, name in [*read.items(), *lists] for part in parts_of[name].values()
                      if (column := RECORD_PARTS.get(part)) is None or column not in named_columns}
        for knob, name in [*read.items(), *lists]:
            used.setdefault(name, set())
            for part in parts_of[name].values():
                if (knob, part) in unused:
                    reasons.setdefault((name, part), []).append(
                        f"stage '{stage.id}' ({stage.use}) {unused[knob, part]}")
                else:
                    used[name].add(part)
    return [(f"input '{name}': read.{option} would have no effect: {'; '.join(reasons[name, part])}; remove it",
             [name, "read", option])
            for name in used for option, part in parts_of[name].items() if part not in used[name]]


def knob_strings(value: Any) -> list[str]:
    """Every text value in ``value`` (a stage's knobs: nested mappings and lists), in order; the input names and
    columns a stage reads are among them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in knob_strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in knob_strings(item)]
    return []


def _resolve_spec_path(raw_path: str, base_dir: Path | None, source: str, node: yaml.Node | None,
                       keys: list[str], *, instead: str) -> str:
    """``raw_path`` (the spec's value at ``keys``) resolved in the spec's folder; ``SpecError`` naming its line
    when it is absolute or leaves the folder (``instead``: what the user can do instead, in words)."""
    target = _node_at(node, keys)
    where = dict(file=source, line=target.start_mark.line + 1 if target else None,
                 column=target.start_mark.column + 1 if target else None, path=".".join(keys))
    if Path(raw_path).is_absolute():
        raise SpecError(f"absolute paths are not allowed in a spec (a spec reads only inside its folder); {instead}",
                        **where)
    root = (base_dir or Path.cwd()).resolve()
    try:
        resolved = (root / raw_path).resolve()
    except (ValueError, OSError) as exc:  # an embedded NUL byte, a path the system cannot resolve
        raise SpecError(f"invalid path {raw_path!r}: {exc}", **where) from None
    if not resolved.is_relative_to(root):
        raise SpecError(f"path '{raw_path}' leaves the spec's folder {root}; move the file under it, or {instead}",
                        **where)
    return str(resolved)


def _resolve_input_path(name: str, raw_path: str, base_dir: Path | None, source: str,
                        node: yaml.Node | None, *, key: str) -> str:
    return _resolve_spec_path(raw_path, base_dir, source, node, ["inputs", name, *key.split(".")],
                              instead="give the path on the command line: --input NAME=PATH")


def _signature_trust(name: str, declared: Mapping[str, Any], base_dir: Path | None, source: str,
                     node: yaml.Node | None) -> SignatureTrust:
    """A model input's ``signature`` (one of ``public_key``, ``certificate_chain``, ``sigstore``: the schema
    allows exactly one) with its files resolved inside the spec's folder (``_resolve_input_path``)."""
    def resolved(raw_path: str, key: str) -> Path:
        return Path(_resolve_input_path(name, raw_path, base_dir, source, node, key=f"signature.{key}"))

    if "public_key" in declared:
        return SignatureTrust("key", public_key=resolved(declared["public_key"], "public_key"))
    if "certificate_chain" in declared:
        return SignatureTrust("certificate", certificate_chain=tuple(
            resolved(path, "certificate_chain") for path in declared["certificate_chain"]))
    sigstore = declared["sigstore"]
    return SignatureTrust("sigstore", identity=sigstore["identity"], issuer=sigstore["issuer"],
                          trust_config=resolved(sigstore["trust_config"], "sigstore.trust_config"))


def _needs(threshold: Mapping[str, Any]) -> str | None:
    """What a gate's metric must be able to hold (``certa.engine.core.metric_paths.resolve_in_schema``'s ``need``):
    an interval, a decision that can be UNDECIDED, a number (min, max, between, differs), or anything (equals)."""
    return ("interval" if "interval" in threshold else "decision" if "decided" in threshold else
            None if "equals" in threshold else "number")


def _check_metric(metric: str, stage_types: Mapping[str, StageType], need: str | None,
                  planned: Mapping[str, tuple[Mapping[str, Any], Mapping[str, DeclaredTable]]]) -> tuple[DataKey, ...]:
    """Check a gate's ``metric`` against the output schema of the stage version it names (``MetricPathError``
    naming the step and the closest valid key), and against what the stage's resolved knobs and declared tables
    allow (``StageType.gate_problem``, from ``planned``: stage id -> (knobs, declared tables)); the steps whose
    keys only the data know."""
    stage_id, steps = parse_metric(metric)
    if stage_id not in stage_types:
        raise MetricPathError(f"gate metric names stage '{stage_id}', which is not a stage of this spec "
                              f"(stages: {', '.join(sorted(stage_types))})", closest(stage_id, list(stage_types)))
    stage_type = stage_types[stage_id]
    if stage_type.gate_problem is not None:
        problem = stage_type.gate_problem(metric, *planned[stage_id])
        if problem is not None:
            raise MetricPathError(f"{problem} (outputs of {stage_type.ref})")
    if not schema_exists(stage_type.output_schema_file):  # a certa bug that sealing reports (output_problems)
        return ()
    try:
        return resolve_in_schema(read_schema(stage_type.output_schema_file), steps, prefix=stage_id, need=need)
    except MetricPathError as error:
        raise MetricPathError(f"{error.problem} (outputs of {stage_type.ref})", error.hint) from None


def _family(declared: Mapping[str, Any] | None, gates: list[GateSpec], fail: Callable[..., SpecError]) -> FamilySpec:
    """The spec's ``family:`` (``DEFAULT_FAMILY`` when absent), checked against its gates: the gates written with
    ``differs:`` are the members of a corrected family, and only of one; each names a p-value."""
    family = DEFAULT_FAMILY if declared is None else FamilySpec(
        claim=declared["claim"], alpha=declared.get("alpha"), correction=declared.get("correction"))
    members = [i for i, gate in enumerate(gates) if "differs" in gate.threshold]
    if family.corrected and not members:
        raise fail(f"family claim '{family.claim}' needs member gates: write each gate of the family on a p-value "
                   "with differs: true (it must differ) or differs: false (it must not be shown to differ)",
                   ["family", "claim"])
    for i in members:
        if not family.corrected:
            raise fail("differs: makes a gate a member of a corrected family; declare one, e.g. family: "
                       "{claim: which-differ, alpha: 0.05, correction: holm}", ["gates", i, "differs"])
        _, steps = parse_metric(gates[i].metric)
        last = steps[-1][1] if steps else None
        if not (isinstance(last, str) and last.endswith("p_value")):
            raise fail(f"a family member's metric must be a p-value (a path ending in p_value); "
                       f"'{gates[i].metric}' is not", ["gates", i, "metric"])
    return family


def _declared_tables(stage_type: StageType, knobs: Mapping[str, Any], inputs: Mapping[str, InputSpec],
                     producers: Mapping[str, StagePlan]) -> dict[str, DeclaredTable]:
    """What the spec declares about each table the stage's input knobs name (``DeclaredTable`` by name): an
    input's format and read options, or the stage that produces it (``producers``: table -> that stage)."""
    named = [name for knob in stage_type.input_knobs
             for name in ([knobs[knob]] if isinstance(knobs.get(knob), str) else knobs.get(knob, []))]
    return {name: DeclaredTable(name=name, fmt=inputs[name].fmt, read=inputs[name].read) if name in inputs else
            DeclaredTable(name=name, producer=producers[name].use, producer_knobs=producers[name].knobs)
            for name in named}


def _given_path(given: Any, knob: tuple[str, ...]) -> list[str]:
    """The longest prefix of ``knob`` that ``given`` (a stage's ``with:``) spells out: where to point."""
    path = []
    for key in knob:
        if not isinstance(given, Mapping) or key not in given:
            break
        path.append(key)
        given = given[key]
    return path


def _produced_tables(stages: list[Mapping[str, Any]], inputs: Mapping[str, InputSpec],
                     fail: Callable[..., SpecError]) -> dict[str, int]:
    """``<stage id>.<table>`` -> index of the stage that produces it (``StageType.produces``), for every table
    a stage of the spec produces; a declared input of the same name is a ``SpecError``. A stage whose type is
    unknown produces nothing here (its ``use:`` is refused when it is resolved)."""
    produced: dict[str, int] = {}
    for i, stage in enumerate(stages):
        name, pinned = parse_stage_ref(stage["use"])
        try:
            stage_type = _registry().newest(name) if pinned is None else _registry().get(name, pinned)
        except UnknownStage:
            continue
        for table in stage_type.produces:
            produced[f"{stage['id']}.{table}"] = i
    for name in inputs:
        if name in produced:
            raise fail(f"input '{name}' has the name of a table stage '{stages[produced[name]]['id']}' produces; "
                       "rename the input", ["inputs", name], at_key=True)
    return produced


def _first_non_text_key(value: Any, path: list[Any]) -> tuple[list[Any], Any] | None:
    """(path of the mapping, key) of the first mapping key in ``value`` that is not text, depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, key
            found = _first_non_text_key(item, [*path, key])
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_non_text_key(item, [*path, index])
            if found:
                return found
    return None


def _refuse_non_text_keys(data: Any, node: yaml.Node | None, source: str) -> None:
    """A ``SpecError`` at the first key that YAML read as something other than text: every key of a spec is a
    name, and YAML 1.1 reads ``on``, ``yes``, ``no`` unquoted as booleans and ``1`` as a number."""
    found = _first_non_text_key(data, [])
    if found is None:
        return
    path, key = found
    target = _node_at(node, path)
    line = column = None
    if isinstance(target, yaml.MappingNode):
        for key_node, _ in target.value:
            if key_node.value == str(key) or (isinstance(key, bool) and key_node.value.lower() in
                                               ("on", "off", "yes", "no", "true", "false", "y", "n")):
                line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
                break
    kind = "a boolean" if isinstance(key, bool) else "a number" if isinstance(key, (int, float)) else "a value"
    raise SpecError(f"key {key!r} is not text: YAML reads it as {kind}; a spec's keys are names "
                    "(quote it, e.g. \"on\":, if it is meant as text)", file=source, line=line, column=column,
                    path=_format_path(path) or None)


def spec_schema() -> dict[str, Any]:
    """The run spec's schema (``schemas/spec.schema.json``), its input ``format`` enum and ``read`` options
    extended with the formats packages register (``certa.engine.core.input_formats``): the schema file lists the
    built-in formats, a registered one is taken as it is declared (each option a value the format checks)."""
    from certa.engine.core.input_formats import BUILTIN_FORMATS, input_formats

    schema = load_schema("spec.schema.json")
    builtin = {f.name for f in BUILTIN_FORMATS}
    registered = [f for name, f in input_formats().items() if name not in builtin]
    if registered:
        declared = schema["properties"]["inputs"]["additionalProperties"]["properties"]
        declared["format"]["enum"].extend(f.name for f in registered)
        options = declared["read"]["properties"]
        for reader in registered:
            for option in sorted(reader.read_options - set(options)):
                options[option] = {"description": f"{reader.name}: a read option of this registered format."}
    return schema


def load_plan(spec: str | Path | Mapping[str, Any], *, stage_versions: Mapping[str, str] | None = None) -> Plan:
    """Validate ``spec`` (a file path, YAML text or a dict) and resolve it into a ``Plan``.

    Each stage runs the newest version of its type, or the version its ``use:`` pins
    (``bakeoff.compare@1.0.0``). Each gate's metric path is checked against the output schema of the stage
    version it names. ``stage_versions`` (stage id -> version; a replay passes the versions the run recorded)
    overrides both; a replay re-evaluates the gates the run recorded, so their paths are not checked again (a
    run recorded with a path that names nothing replays to the same failed gate). Raises ``SpecError`` naming
    file, line, column and key path on any problem.
    """
    data, node, source, raw, base_dir = _read_source(spec)
    if not isinstance(data, dict):
        raise SpecError("a run spec must be a YAML mapping (certa:, name:, seed:, stages:, ...)", file=source)
    _refuse_non_text_keys(data, node, source)
    schema = spec_schema()
    _validate(data, schema, node=node, source=source, prefix=[])
    data = fill_defaults(data, schema)

    def position(path: list[Any], *, at_key: bool = False) -> tuple[int | None, int | None]:
        target = _node_at(node, path, key=at_key)
        return (target.start_mark.line + 1, target.start_mark.column + 1) if target else (None, None)

    def fail(message: str, path: list[Any], *, at_key: bool = False) -> SpecError:
        line, column = position(path, at_key=at_key)
        return SpecError(message, file=source, line=line, column=column, path=_format_path(path))

    from certa.engine.core.endpoint_input import ENDPOINT_FORMAT  # numpy: a plan is loaded to run, not to be shown
    inputs = {
        name: InputSpec(name=name, path=_resolve_input_path(name, entry["path"], base_dir, source, node, key="path"),
                        sha256=entry.get("sha256"), fmt=entry.get("format"), read=dict(entry.get("read") or {}))
        if "path" in entry else
        InputSpec(name=name, path=_resolve_input_path(name, entry["model"], base_dir, source, node, key="model"),
                  sha256=entry.get("sha256"), fmt=MODEL_FORMAT,
                  signature=_signature_trust(name, entry["signature"], base_dir, source, node)
                  if "signature" in entry else None)
        if "model" in entry else
        InputSpec(name=name, path=entry["endpoint"]["url"], sha256=None, fmt=ENDPOINT_FORMAT,
                  endpoint=dict(entry["endpoint"]))
        for name, entry in data["inputs"].items()
    }
    for problem, path in read_option_problems(inputs):
        raise fail(problem, ["inputs", *path])

    stages: list[StagePlan] = []
    stage_types: dict[str, StageType] = {}
    planned: dict[str, tuple[Mapping[str, Any], Mapping[str, DeclaredTable]]] = {}
    produced = _produced_tables(data["stages"], inputs, fail)
    for i, stage in enumerate(data["stages"]):
        if stage["id"] in stage_types:
            raise fail(f"stage id '{stage['id']}' is used twice; stage ids must be unique", ["stages", i, "id"])
        name, pinned = parse_stage_ref(stage["use"])
        version = (stage_versions or {}).get(stage["id"], pinned)
        try:
            stage_type = _registry().newest(name) if version is None else _registry().get(name, version)
        except UnknownStage as error:  # the spec's file, line and key path added to the registry's message
            raise fail(error.detail, ["stages", i, "use"]) from None
        knob_schema = load_schema(stage_type.schema_file)
        given = stage.get("with", {})  # "with:" may be omitted: the stage type's defaults apply
        _validate(given, knob_schema, node=node, source=source, prefix=["stages", i, "with"])
        knobs = fill_defaults(given, knob_schema)
        for knob in stage_type.input_knobs:
            named = knobs.get(knob, [])
            for j, name in enumerate([named] if isinstance(named, str) else named):
                where = ["stages", i, "with", knob] + ([] if isinstance(named, str) else [j])
                if name in produced and produced[name] >= i:
                    raise fail(f"'{name}' is a table stage '{data['stages'][produced[name]]['id']}' produces, "
                               "which runs at or after this stage; a stage reads only tables of the stages "
                               "before it", where)
                if name not in inputs and name not in produced:
                    declared = ", ".join(sorted(inputs)) or "none"
                    made = f"; produced by earlier stages: {', '.join(sorted(produced))}" if produced else ""
                    raise fail(f"'{name}' is not a declared input (declared: {declared}{made}); add it under "
                               "inputs:", where)
        tables = (_declared_tables(stage_type, knobs, inputs, {name: stages[at] for name, at in produced.items()
                                                               if at < i})
                  if stage_type.resolve_knobs or stage_type.gate_problem else {})
        if stage_type.resolve_knobs is not None:
            try:
                knobs = dict(stage_type.resolve_knobs(knobs, tables))
            except KnobProblem as problem:
                raise fail(str(problem), ["stages", i, "with", *_given_path(given, problem.knob)]) from None
        stages.append(StagePlan(id=stage["id"], use=stage_type.name, version=stage_type.version, knobs=knobs))
        stage_types[stage["id"]] = stage_type
        planned[stage["id"]] = (knobs, tables)

    if not stage_versions:  # a replay runs the spec as it was recorded (as for the gates' paths, below)
        for message, path in read_option_use_problems(inputs, stages):
            raise fail(message, ["inputs", *path])

    gates: list[GateSpec] = []
    gate_ids: set[str] = set()
    for i, gate in enumerate(data["gates"]):
        if gate["id"] in gate_ids:
            raise fail(f"gate id '{gate['id']}' is used twice; gate ids must be unique", ["gates", i, "id"])
        gate_ids.add(gate["id"])
        threshold = {k: gate[k] for k in ("min", "max", "equals", "between", "differs", "interval", "decided")
                     if k in gate}
        interval = threshold.get("interval", {})
        if "min" in interval and "max" in interval and interval["min"] > interval["max"]:
            raise fail("interval: {min, max} needs min <= max", ["gates", i, "interval"])
        if "between" in threshold and threshold["between"][0] > threshold["between"][1]:
            raise fail("between: [lo, hi] needs lo <= hi", ["gates", i, "between"])
        where = ["gates", i, "metric"]
        try:
            data_keys = () if stage_versions else _check_metric(gate["metric"], stage_types, _needs(threshold),
                                                                planned)
        except MetricPathError as error:
            raise fail(str(error), where) from None
        line, column = position(where)
        gates.append(GateSpec(id=gate["id"], metric=gate["metric"], threshold=threshold, data_keys=data_keys,
                              line=line, column=column))

    family = _family(data.get("family"), gates, fail)
    knobs = {
        "certa": SPEC_FORMAT,
        "profile": data["profile"],
        "stages": [{"id": s.id, "use": s.use, "version": s.version, "with": s.knobs} for s in stages],
        "gates": [{"id": g.id, "metric": g.metric, **g.threshold} for g in gates],
        **({"family": family.record()} if "family" in data else {}),  # a spec without one keeps its knobs hash
    }
    return Plan(
        name=data["name"], description=data.get("description", ""), seed=data["seed"], profile=data["profile"],
        inputs=inputs, stages=tuple(stages), gates=tuple(gates), family=family, knobs=knobs,
        knobs_hash=canonical_sha256(knobs), spec_text=raw.decode("utf-8"), spec_sha256=sha256_hex(raw),
        source=source, base_dir=base_dir,
        approval=None if "approval" not in data else PolicyPin(
            policy=data["approval"]["policy"], sha256=data["approval"]["sha256"],
            path=_resolve_spec_path(data["approval"]["policy"], base_dir, source, node, ["approval", "policy"],
                                    instead="give the policy on the command line: --policy FILE")),
    )
