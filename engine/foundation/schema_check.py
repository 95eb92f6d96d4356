"""JSON Schema checks compiled once into plain Python predicates: the same yes or no as ``jsonschema`` for the
keywords certa's schemas use, tens of times faster (``jsonschema``'s validator walks the schema for every instance,
resolving each ``$ref`` again), for the places that check many documents: a stored certificate
(``certa.engine.core.certificate``), a stage's outputs, every ledger entry's payload (``certa.ledger.run_record``).

Only the yes or no is compiled: a caller asks ``jsonschema`` for its messages when an instance fails, so a report
reads as it always did. The keywords' meaning is JSON Schema draft 2020-12 (https://json-schema.org/draft/2020-12,
Core and Validation), as ``jsonschema`` (https://github.com/python-jsonschema/jsonschema) implements it; tests
compare the two on mutated documents (``tests/core/test_perf_certificate.py``,
``tests/ledger/test_entry_schema_compiled.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["compile_schema"]

_ANNOTATIONS = frozenset({"$id", "$schema", "$comment", "$defs", "title", "description", "default", "examples",
                          "format"})
"""Keywords that never fail an instance here (``format`` only annotates: no format checker is configured)."""


def _json_equal_scalar(instance: Any, value: Any) -> bool:
    """``jsonschema``'s equality against a scalar ``value``: booleans equal only themselves, 1 == 1.0."""
    if isinstance(value, bool) or isinstance(instance, bool):
        return instance is value
    if isinstance(value, str) or isinstance(instance, str):
        return instance == value
    if isinstance(instance, (list, dict)):
        return False
    return bool(instance == value)


def _is_type(instance: Any, name: str) -> bool:
    """Draft 2020-12's types as ``jsonschema`` checks them (an integral float is an integer)."""
    if name == "object":
        return isinstance(instance, dict)
    if name == "array":
        return isinstance(instance, list)
    if name == "string":
        return isinstance(instance, str)
    if name == "boolean":
        return isinstance(instance, bool)
    if name == "null":
        return instance is None
    if isinstance(instance, bool):
        return False
    if name == "integer":
        return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())
    if name == "number":
        return isinstance(instance, (int, float))
    raise NotImplementedError(name)


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
                                              "null": (type(None),), "number": (int, float)}
"""Draft 2020-12's types other than integer as the Python types of parsed JSON (``bool`` is not a number)."""


def _scalar_values(schema: Any, root: Any) -> tuple[frozenset[type], frozenset[str]] | None:
    """(the exact Python types, the strings) a schema made only of a type other than integer, or of an enum of
    strings, accepts (``$ref`` followed); None for any other schema."""
    while isinstance(schema, Mapping) and "$ref" in schema and set(schema) - _ANNOTATIONS == {"$ref"} \
            and str(schema["$ref"]).startswith("#/"):
        target: Any = root
        for part in schema["$ref"][2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    if not isinstance(schema, Mapping):
        return None
    keywords = set(schema) - _ANNOTATIONS
    if keywords == {"type"}:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if all(name in _PYTHON_TYPES for name in names):
            return frozenset(t for name in names for t in _PYTHON_TYPES[name]), frozenset()
    if keywords == {"enum"} and schema["enum"] and all(isinstance(v, str) for v in schema["enum"]):
        return frozenset(), frozenset(schema["enum"])
    return None


def compile_schema(schema: Any, root: Any = None) -> Callable[[Any], bool]:
    """An exact ``is_valid`` (JSON Schema draft 2020-12, as ``jsonschema``'s ``Draft202012Validator`` decides it)
    for the keywords certa's schemas use: type, enum, const of scalars, pattern, minimum, required, properties,
    additionalProperties, items, prefixItems, minItems, maxItems, anyOf, oneOf, not, if/then/else, ``$ref`` to a
    place in ``root`` (the document: the schema itself by default), alone or beside other keywords (both must
    hold, draft 2020-12 section 8.2.3.1), and unevaluatedProperties where ``_unevaluated_properties`` can name
    the evaluated members statically; ``NotImplementedError`` for any other keyword or form, so that a schema
    change never silently weakens a check. Keywords ``x-...`` and ``$defs`` only annotate."""
    root = schema if root is None else root
    if schema is True:
        return lambda instance: True
    if schema is False:
        return lambda instance: False
    if not isinstance(schema, Mapping):
        raise NotImplementedError(repr(schema))
    unknown = {k for k in set(schema) - _ANNOTATIONS - {
        "$ref", "type", "enum", "const", "pattern", "minimum", "required", "properties", "additionalProperties",
        "items", "prefixItems", "minItems", "maxItems", "anyOf", "oneOf", "not", "if", "then", "else",
        "unevaluatedProperties"} if not k.startswith("x-")}
    if unknown:
        raise NotImplementedError(", ".join(sorted(unknown)))
    checks: list[Callable[[Any], bool]] = []
    if "$ref" in schema:
        target = _target(schema["$ref"], root)
        if set(schema) - _ANNOTATIONS == {"$ref"}:
            return compile_schema(target, root)
        checks.append(compile_schema(target, root))
    if "unevaluatedProperties" in schema:
        checks.append(_unevaluated_properties(schema, root))
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        for name in names:
            _is_type(None, name)  # an unknown type name raises now, not while checking
        if "integer" not in names:  # the types as exact Python types (JSON values are never subclasses)
            exact = frozenset(t for name in names for t in _PYTHON_TYPES[name])
            checks.append(lambda instance: type(instance) in exact)
        elif len(names) == 1:
            checks.append(lambda instance: _is_type(instance, "integer"))
        else:
            checks.append(lambda instance: any(_is_type(instance, name) for name in names))
    for keyword in ("enum", "const"):
        if keyword in schema:
            allowed = list(schema["enum"]) if keyword == "enum" else [schema["const"]]
            if any(isinstance(value, (list, dict)) for value in allowed):
                raise NotImplementedError(f"{keyword} of a container")
            if all(isinstance(value, str) for value in allowed):
                words = frozenset(allowed)
                checks.append(lambda instance: type(instance) is str and instance in words)
            else:
                checks.append(lambda instance, allowed=allowed: any(  # type: ignore[misc]  # a default-bound lambda
                    _json_equal_scalar(instance, v) for v in allowed))
    if "pattern" in schema:
        search = re.compile(schema["pattern"]).search
        checks.append(lambda instance: not isinstance(instance, str) or search(instance) is not None)
    if "minimum" in schema:
        low = schema["minimum"]
        checks.append(lambda instance: not _is_type(instance, "number") or instance >= low)
    if "required" in schema or "properties" in schema or "additionalProperties" in schema:
        checks.append(_object_check(schema, root))
    prefix = [compile_schema(sub, root) for sub in schema.get("prefixItems", [])]
    if prefix:
        checks.append(lambda instance: not isinstance(instance, list) or all(
            check(item) for check, item in zip(prefix, instance)))
    if "items" in schema:
        item, skip = compile_schema(schema["items"], root), len(prefix)
        checks.append(lambda instance: not isinstance(instance, list) or all(
            map(item, instance[skip:] if skip else instance)))
    for keyword, fits in (("minItems", lambda size, bound: size >= bound),
                          ("maxItems", lambda size, bound: size <= bound)):
        if keyword in schema:
            checks.append(lambda instance, fits=fits, bound=schema[keyword]: not isinstance(  # type: ignore[misc]
                          instance, list)
                          or fits(len(instance), bound))
    if "anyOf" in schema:
        scalars = [found for found in map(lambda sub: _scalar_values(sub, root), schema["anyOf"]) if found]
        if len(scalars) == len(schema["anyOf"]):  # e.g. a number or NaN, Infinity, -Infinity: one set lookup
            types = frozenset(t for found in scalars for t in found[0])
            words = frozenset(w for found in scalars for w in found[1])
            checks.append(lambda instance: type(instance) in types or (type(instance) is str and instance in words))
        else:
            alternatives = [compile_schema(sub, root) for sub in schema["anyOf"]]
            checks.append(lambda instance: any(check(instance) for check in alternatives))
    if "oneOf" in schema:
        choices = [compile_schema(sub, root) for sub in schema["oneOf"]]
        checks.append(lambda instance: sum(1 for check in choices if check(instance)) == 1)
    if "not" in schema:
        negated = compile_schema(schema["not"], root)
        checks.append(lambda instance: not negated(instance))
    if "if" in schema:
        condition = compile_schema(schema["if"], root)
        then = compile_schema(schema.get("then", True), root)
        otherwise = compile_schema(schema.get("else", True), root)
        checks.append(lambda instance: then(instance) if condition(instance) else otherwise(instance))
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda instance: first(instance) and second(instance)

    def check_all(instance: Any) -> bool:
        for check in checks:
            if not check(instance):
                return False
        return True
    return check_all


def _object_check(schema: Mapping[str, Any], root: Any) -> Callable[[Any], bool]:
    """``required``, ``properties`` and ``additionalProperties`` of one schema as one check: one pass over an
    object's members, each checked by its property's schema or else by ``additionalProperties`` (when given)."""
    required = tuple(schema.get("required", ()))
    properties = {key: compile_schema(sub, root) for key, sub in schema.get("properties", {}).items()}
    extra = compile_schema(schema["additionalProperties"], root) if "additionalProperties" in schema else None

    def check_object(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        for key in required:
            if key not in instance:
                return False
        for key, value in instance.items():
            check = properties.get(key, extra)
            if check is not None and not check(value):
                return False
        return True
    return check_object


def _target(ref: Any, root: Any) -> Any:
    """The place a local ``$ref`` (``#/a/b``) names in ``root``; ``NotImplementedError`` for another document or
    a place that does not exist."""
    if not str(ref).startswith("#/"):
        raise NotImplementedError(f"$ref {ref!r} to another document")
    target: Any = root
    for part in str(ref)[2:].split("/"):
        if not isinstance(target, Mapping) or part not in target:
            raise NotImplementedError(f"$ref {ref!r} names nothing")
        target = target[part]
    return target


_IN_PLACE = frozenset({"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
                       "patternProperties", "unevaluatedProperties"})
"""Keywords through which a schema's members may be evaluated by a subschema or by a pattern: a schema holding one of
them (beyond its own ``$ref`` one level down) leaves its evaluated members to ``jsonschema``."""


def _unevaluated_properties(schema: Mapping[str, Any], root: Any) -> Callable[[Any], bool]:
    """``unevaluatedProperties`` of a schema whose evaluated members are known without an instance: its own
    ``properties``, and those of the schema its ``$ref`` names, which holds no in-place applicator itself; either's
    ``additionalProperties`` evaluates every member. (An instance that fails the ``$ref`` fails the whole schema
    whichever members it evaluated, so the yes or no is exact.) Any other form: ``NotImplementedError``."""
    own = set(schema) - _ANNOTATIONS
    if own & (_IN_PLACE - {"$ref", "unevaluatedProperties"}):
        raise NotImplementedError("unevaluatedProperties beside an in-place applicator")
    parts = [schema]
    if "$ref" in schema:
        target = _target(schema["$ref"], root)
        if not isinstance(target, Mapping) or set(target) & _IN_PLACE:
            raise NotImplementedError("unevaluatedProperties over a $ref that applies subschemas in place")
        parts.append(target)
    if any("additionalProperties" in part for part in parts):
        return lambda instance: True
    evaluated = frozenset(key for part in parts for key in part.get("properties", {}))
    rest = compile_schema(schema["unevaluatedProperties"], root)
    return lambda instance: not isinstance(instance, dict) or all(
        rest(value) for key, value in instance.items() if key not in evaluated)
