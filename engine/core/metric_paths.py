"""Gate metric paths: ``<stage id>.<key>[<index>]...`` parsed, and checked against a stage's output schema.

A gate names a value in the stage outputs (``ratio.primary_metric.display_ci[1]``). ``parse_metric`` splits it
into steps; ``resolve_in_schema`` walks them through the JSON Schema of the stage version's outputs
(``schemas/outputs/``) and says, before anything runs, whether the path can exist: an unknown key (with the
closest valid one), an index outside an array's declared length, a step into a number. A key the schema cannot
know (a bucket, a vendor: an object whose keys come from the data, annotated ``x-certa-data-key``) is returned
as a ``DataKey`` so that it is checked against the input once it is read (``key_column``, ``key_values``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from certa.engine.core.tables import Table

__all__ = ["DATA_KEY", "Step", "DataKey", "KeyColumn", "MetricPathError", "parse_metric", "format_steps",
           "resolve_in_schema", "key_column", "key_values", "closest"]

_HEAD = re.compile(r"[a-z][a-z0-9_-]*")
_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(-?\d+)\]")

DATA_KEY = "x-certa-data-key"
"""The output-schema keyword that marks an object whose keys come from the data: ``{"input_knob": KNOB, and
"column_knob": "columns.NAME" with "default_column", or a fixed "column"; optionally "when_column_absent": the one
key used when the table has no such column}``."""

Step = tuple[str, Any]
"""``("key", name)`` or ``("index", i)``."""


@dataclass(frozen=True)
class DataKey:
    """A step of a metric path whose key comes from the data: ``key`` at ``steps[step]``; ``source`` is the
    schema's ``x-certa-data-key`` annotation (which input and column hold the valid keys)."""

    step: int
    key: str
    source: Mapping[str, Any]


class MetricPathError(ValueError):
    """A metric path that cannot exist in the outputs its schema describes: ``problem`` says why, ``hint`` is
    the closest valid key (if any); the message ends with "did you mean '...'?"."""

    def __init__(self, problem: str, hint: str | None = None) -> None:
        super().__init__(problem + (f"; did you mean '{hint}'?" if hint else ""))
        self.problem, self.hint = problem, hint


def parse_metric(metric: str) -> tuple[str, list[Step]]:
    """``"r.ci[1]"`` -> ``("r", [("key", "ci"), ("index", 1)])``: the stage id and the steps after it. The
    spec schema's pattern has already checked the syntax."""
    head = _HEAD.match(metric)
    if head is None:
        raise MetricPathError(f"'{metric}' does not start with a stage id")
    steps: list[Step] = [("key", m.group(1)) if m.group(1) is not None else ("index", int(m.group(2)))
                         for m in _STEP.finditer(metric, head.end())]
    return head.group(0), steps


def format_steps(steps: Sequence[Step], prefix: str = "") -> str:
    """The steps written back as a path (``primary_metric.ci[1]``), after ``prefix``."""
    out = prefix
    for kind, step in steps:
        out += f"[{step}]" if kind == "index" else (f".{step}" if out else str(step))
    return out


def closest(word: str, candidates: Sequence[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``word`` (difflib, as knob typos get), or None. Keys from the data are often
    short ids (``e5``, ``e6``: similarity 0.5), which ``check_data_keys`` matches with ``cutoff`` 0.5."""
    hint = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return hint[0] if hint else None


def _resolve_ref(root: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        pointer = schema["$ref"]
        if not pointer.startswith("#/"):
            raise NotImplementedError(f"only local $ref are used by output schemas (got {pointer!r})")
        target: Any = root
        for part in pointer[2:].split("/"):
            target = target[part]
        schema = target
    return schema


def _branches(root: Mapping[str, Any], schema: Any) -> list[Mapping[str, Any]]:
    """The alternatives a value may match: ``$ref`` followed, ``anyOf``/``oneOf`` flattened."""
    if schema is True or schema is None:
        return [{}]
    if schema is False:
        return []
    schema = _resolve_ref(root, schema)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        return [branch for alternative in alternatives for branch in _branches(root, alternative)]
    return [schema]


def _types(schema: Mapping[str, Any]) -> set[str]:
    if "type" in schema:
        names = schema["type"]
        return set(names if isinstance(names, list) else [names])
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if values is None:
        return {"any"}
    kinds = {"boolean" if isinstance(v, bool) else "null" if v is None else "string" if isinstance(v, str)
             else "number" for v in values}
    return kinds


def _may_be(schema: Mapping[str, Any], word: str) -> bool:
    """Whether a value valid against ``schema`` (one branch) may be the string ``word``."""
    if "enum" in schema or "const" in schema:
        return word in schema.get("enum", [schema.get("const")])
    return bool({"string", "any"} & _types(schema))


def _describe_types(branches: Sequence[Mapping[str, Any]]) -> str:
    names = sorted({t for b in branches for t in _types(b)} - {"null"})
    return " or ".join(names) or "null"


def _key_step(root: Mapping[str, Any], branches: Sequence[Mapping[str, Any]], key: str,
              where: str) -> tuple[list[Mapping[str, Any]] | None, Mapping[str, Any] | None]:
    """(the branches after key step ``key``, the data-key annotation if the key comes from the data); None
    branches when the schema does not describe what is below (nothing more to check)."""
    objects = [b for b in branches if {"object", "any"} & _types(b)]
    if not objects:
        raise MetricPathError(f"'{where}' is a {_describe_types(branches)}, so it has no key '{key}'")
    found: list[Mapping[str, Any]] = []
    annotation = None
    known: list[str] = []
    for branch in objects:
        properties = branch.get("properties", {})
        known += [k for k in properties if k not in known]
        if key in properties:
            found += _branches(root, properties[key])
            continue
        patterns = [sub for pattern, sub in branch.get("patternProperties", {}).items() if re.search(pattern, key)]
        if patterns:
            found += [b for sub in patterns for b in _branches(root, sub)]
            continue
        extra = branch.get("additionalProperties", True)
        if extra is False:
            continue
        if extra is True or extra == {}:  # keys the schema does not describe: nothing more to check
            return None, None
        annotation = annotation or branch.get(DATA_KEY)
        found += _branches(root, extra)
    if not found:
        hint = closest(key, known)
        listed = f" (keys here: {', '.join(known)})" if known and not hint else ""
        raise MetricPathError(f"no output '{key}' in '{where}'{listed}", hint)
    return found, annotation


def _index_step(root: Mapping[str, Any], branches: Sequence[Mapping[str, Any]], index: int,
                where: str) -> list[Mapping[str, Any]] | None:
    arrays = [b for b in branches if {"array", "any"} & _types(b)]
    if not arrays:
        raise MetricPathError(f"'{where}' is a {_describe_types(branches)}, not an array: it has no [{index}]")
    found: list[Mapping[str, Any]] = []
    lengths = []
    for branch in arrays:
        prefix = branch.get("prefixItems", [])
        longest = branch.get("maxItems", len(prefix) if branch.get("items") is False else None)
        lengths.append(longest)
        if longest is not None and not -longest <= index < longest:
            continue
        position = index % longest if longest is not None else index
        if 0 <= position < len(prefix):
            found += _branches(root, prefix[position])
        elif "items" in branch:
            found += _branches(root, branch["items"])
        else:
            return None
    if not found:
        size = " or ".join(str(n) for n in sorted(set(lengths)))
        valid = f"[0] to [{max(lengths) - 1}]" if max(lengths) else "none"
        raise MetricPathError(f"'{where}' holds at most {size} item(s): index [{index}] is outside it "
                              f"(valid: {valid})")
    return found


def resolve_in_schema(schema: Mapping[str, Any], steps: Sequence[Step], *, prefix: str,
                      need: str | None = None) -> tuple[DataKey, ...]:
    """Check that ``steps`` can exist in outputs valid against ``schema``; ``prefix`` (the stage id) names the
    path in messages. Returns the steps whose keys come from the data. ``need`` says what the value must be able
    to be: ``"number"`` (a min/max/between gate), ``"interval"`` (an array of at most two items: an interval
    gate) or ``"decision"`` (the string ``UNDECIDED`` among its values: a decided gate); None: anything. Raises
    ``MetricPathError``."""
    branches: list[Mapping[str, Any]] | None = _branches(schema, schema)
    data_keys = []
    for i, (kind, step) in enumerate(steps):
        where = format_steps(steps[:i], prefix)
        if kind == "key":
            branches, annotation = _key_step(schema, branches, step, where)
            if annotation is not None:
                data_keys.append(DataKey(step=i, key=step, source=annotation))
        else:
            branches = _index_step(schema, branches, step, where)
        if branches is None:  # the schema does not describe what lies below: nothing more to check
            return tuple(data_keys)
    where = format_steps(steps, prefix)
    if need == "number" and not any({"number", "integer", "any"} & _types(b) for b in branches):
        raise MetricPathError(f"'{where}' is a {_describe_types(branches)}, not a number; "
                              "min, max and between need a number (use equals for other values)")
    if need == "interval" and not any("any" in _types(b) or ("array" in _types(b) and b.get("maxItems", 2) == 2)
                                      for b in branches):
        raise MetricPathError(f"'{where}' is not an interval (a [lower, upper] array); an interval gate needs one, "
                              "e.g. a confidence interval")
    if need == "decision" and not any(_may_be(b, "UNDECIDED") for b in branches):
        raise MetricPathError(f"'{where}' is never UNDECIDED, so a decided gate on it cannot be inconclusive; "
                              "name a stage's decision (e.g. results.decision), or use equals")
    return tuple(data_keys)


@dataclass(frozen=True)
class KeyColumn:
    """Where the keys of a ``DataKey`` come from: a column of the stage's input tables; ``when_absent`` is the
    one key a table without that column gives (e.g. bucket ``all``), if any."""

    inputs: tuple[str, ...]
    column: str
    when_absent: str | None

    def lacks_column(self, tables: Mapping[str, Table]) -> bool:
        """Whether none of the inputs has the column, so that the one key is ``when_absent``."""
        return self.when_absent is not None and not any(tables[name].has(self.column) for name in self.inputs)

    def describe(self, tables: Mapping[str, Table]) -> str:
        """Where the keys were looked for, in words: the column, or the inputs that lack it."""
        inputs = ", ".join(repr(name) for name in self.inputs)
        if self.lacks_column(tables):
            return f"input {inputs}, which has no column '{self.column}' (so its one key is '{self.when_absent}')"
        return f"column '{self.column}' of input {inputs}"


def key_column(source: Mapping[str, Any], knobs: Mapping[str, Any]) -> KeyColumn | None:
    """The ``KeyColumn`` of an ``x-certa-data-key`` annotation ``source`` for a stage with resolved ``knobs``, or
    None when the stage does not read those keys from its input tables (e.g. a merge of recorded runs)."""
    named = knobs.get(source["input_knob"])
    if not named:
        return None
    column = source.get("column")
    if column is None:
        column = knobs
        for part in source["column_knob"].split("."):
            column = column.get(part, {}) if isinstance(column, Mapping) else {}
        column = column if isinstance(column, str) else source["default_column"]
    return KeyColumn(inputs=(named,) if isinstance(named, str) else tuple(named), column=column,
                     when_absent=source.get("when_column_absent"))


def key_values(where: KeyColumn, tables: Mapping[str, Table],
               within: Sequence[tuple[KeyColumn, str]] = ()) -> list[str]:
    """The keys in ``where``'s column, sorted: among all rows, or only the rows whose columns hold the keys
    ``within`` names (a vendor within a bucket), for the conditions on the same inputs."""
    values: set[str] = set()
    for name in where.inputs:
        table = tables[name]
        if not table.has(where.column):
            values.update([where.when_absent] if where.when_absent is not None else [])
            continue
        conditions = [(outer.column, key) for outer, key in within
                      if outer.inputs == where.inputs and table.has(outer.column)]
        if not conditions:
            values.update(table.factorize(where.column)[0])
            continue
        keep = None
        for column, key in conditions:
            match = table.text(column) == key
            keep = match if keep is None else keep & match
        values.update(table.text(where.column)[keep].tolist())
    return sorted(values)
