"""The certificate: deterministic ``content``, its two digests, and the ``issued`` block.

``content`` holds nothing that depends on the clock, the host or the user. It is the run's **results**
(spec, knobs, seeds, inputs, every stage's outputs, gates, verdict) plus one **environment stamp**,
``content.versions`` (the library versions that computed it). Two digests:

* ``content_sha256`` = SHA-256(JCS(content)): the integrity hash of the whole content, stamp included;
* ``results_sha256`` = SHA-256(JCS(content without ``versions``)): the results alone. A replay reproduces
  a certificate when this digest is identical, whatever library versions computed it; a third party
  recomputes it from the certificate alone (format 2, certa 0.3.0 and later; for a format-1 certificate
  ``results_sha256`` computes it the same way).

``issued`` (run id, UTC time, user, host, platform) sits outside both hashes.
"""

from __future__ import annotations

import functools
import getpass
import platform
import re
import socket
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, UTC
from importlib import metadata
from typing import Any

import numpy as np

from certa.schemas import load_schema, read_schema, schema_exists

from certa.engine.foundation.canonical import (TextNotUTF8, canonical_sha256, canonical_sha256_pair, first_text_not_utf8,
                                              to_jsonable)
from certa.engine.foundation.errors import CertaError, InputError
from certa.engine.foundation.schema_validator import Draft202012Validator

__all__ = ["CERTIFICATE_FORMAT", "CONTENT_FORMAT", "ENVIRONMENT_KEYS", "computing_platform", "library_versions",
           "results_of", "results_sha256", "seal", "validate_certificate", "certificate_problems", "output_problems"]

CERTIFICATE_FORMAT = 2
"""The certificate envelope: 1 (certa 0.1.0, 0.2.0) had ``content_sha256`` only; 2 adds ``results_sha256``."""
CONTENT_FORMAT = 3
"""``content.certa_format``: the structure of ``content``. 1 (certa 0.1.0 to 0.9.x); 2 adds ``family``, what the
gates claim together in words (``certa.engine.core.gate_family``); 3 adds each plain input table's
``unread_columns``, the columns no stage read (``certa.engine.core.stages.unused_columns``), and each gate's
``outcome`` (PASS, FAIL or INCONCLUSIVE) with the verdict INCONCLUSIVE (``certa.engine.core.gates``: the gate forms
``interval`` and ``decided``, which no earlier spec could state), and ``registration``, the registration the run
matched or null (``certa.engine.services.registrations``). A replay builds the format its run recorded."""
ENVIRONMENT_KEYS = ("versions",)
"""Members of ``content`` that record the computing environment, not a result."""


def results_of(content: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` without its environment stamp (``ENVIRONMENT_KEYS``): what a replay must reproduce."""
    return {key: value for key, value in content.items() if key not in ENVIRONMENT_KEYS}


def results_sha256(content: Mapping[str, Any]) -> str:
    """SHA-256 of the RFC 8785 canonical JSON of ``results_of(content)``."""
    return canonical_sha256(results_of(content))


@functools.cache
def _installed_version(distribution: str) -> str:
    """An installed distribution's version, read once a process (``importlib.metadata`` parses its
    metadata file on every call: about 2 ms, a tenth of a small run)."""
    return metadata.version(distribution)


def library_versions() -> dict[str, str]:
    """Versions that can change a certificate's numbers: certa, Python, numpy, scipy, numba (it compiles
    the bake-off kernels)."""
    return {
        "certa": _installed_version("certa"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": _installed_version("scipy"),  # its metadata: importing scipy only for this costs 20 ms
        "numba": _installed_version("numba"),
    }


def computing_platform() -> dict[str, Any]:
    """OS, CPU architecture and numpy's run-time SIMD targets (baseline and found); torch's CPU kernels and CUDA
    GPUs when the run evaluated models (``_torch_platform``).

    numpy picks some transcendental-function kernels by CPU at run time (e.g. AVX-512 variants), and
    those may differ in the last bit between CPU families; this records which machine computed a
    certificate, outside its hash.
    """
    simd = np.show_config(mode="dicts").get("SIMD Extensions", {})
    found = {"system": platform.system(), "machine": platform.machine(),
             "numpy_simd": [str(x) for x in [*simd.get("baseline", []), *simd.get("found", [])]]}
    return {**found, **_torch_platform()}


def _torch_platform() -> dict[str, Any]:
    """When the run evaluated models (torch is loaded: it is never imported for this): the CPU kernels torch
    dispatches to (``torch.backends.cpu.get_cpu_capability``: AVX2 and AVX-512 kernels may differ in the last bits
    of a logit), and the CUDA GPUs it used, by name, when it used any."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    found: dict[str, Any] = {"torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability())}
    if torch.cuda.is_initialized():
        found["cuda_devices"] = [str(torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())]
    return found


def _who() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return user, socket.gethostname()


# ----------------------------------------------------------------------- schema checks, compiled once

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


def _compile(schema: Any, root: Any = None) -> Callable[[Any], bool]:
    """An exact ``is_valid`` for the JSON Schema keywords the certificate and output schemas use (type, enum,
    const of scalars, pattern, minimum, required, properties, additionalProperties, items, prefixItems, minItems,
    maxItems, anyOf, not, if/then/else, and ``$ref`` to a place in ``root``, the document: the schema itself by
    default); ``NotImplementedError`` for any other keyword, so that a schema change never silently weakens a
    check. Keywords ``x-...`` and ``$defs`` only annotate."""
    root = schema if root is None else root
    if schema is True:
        return lambda instance: True
    if schema is False:
        return lambda instance: False
    if not isinstance(schema, Mapping):
        raise NotImplementedError(repr(schema))
    if "$ref" in schema:
        if len(set(schema) - _ANNOTATIONS - {"$ref"}) or not str(schema["$ref"]).startswith("#/"):
            raise NotImplementedError(f"$ref {schema['$ref']!r} beside other keywords or to another document")
        target: Any = root
        for part in schema["$ref"][2:].split("/"):
            if not isinstance(target, Mapping) or part not in target:
                raise NotImplementedError(f"$ref {schema['$ref']!r} names nothing")
            target = target[part]
        return _compile(target, root)
    checks: list[Callable[[Any], bool]] = []
    unknown = {k for k in set(schema) - _ANNOTATIONS - {
        "type", "enum", "const", "pattern", "minimum", "required", "properties", "additionalProperties", "items",
        "prefixItems", "minItems", "maxItems", "anyOf", "not", "if", "then", "else"} if not k.startswith("x-")}
    if unknown:
        raise NotImplementedError(", ".join(sorted(unknown)))
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
    if "required" in schema:
        required = list(schema["required"])
        checks.append(lambda instance: not isinstance(instance, dict) or all(k in instance for k in required))
    properties = {key: _compile(sub, root) for key, sub in schema.get("properties", {}).items()}
    if properties:
        def check_properties(instance: Any) -> bool:
            return not isinstance(instance, dict) or all(
                check(instance[key]) for key, check in properties.items() if key in instance)
        checks.append(check_properties)
    if "additionalProperties" in schema:
        extra = _compile(schema["additionalProperties"], root)
        declared = frozenset(schema.get("properties", {}))
        checks.append(lambda instance: not isinstance(instance, dict) or all(
            extra(value) for key, value in instance.items() if key not in declared))
    prefix = [_compile(sub, root) for sub in schema.get("prefixItems", [])]
    if prefix:
        checks.append(lambda instance: not isinstance(instance, list) or all(
            check(item) for check, item in zip(prefix, instance)))
    if "items" in schema:
        item, skip = _compile(schema["items"], root), len(prefix)
        checks.append(lambda instance: not isinstance(instance, list) or all(
            map(item, instance[skip:] if skip else instance)))
    for keyword, fits in (("minItems", lambda size, bound: size >= bound),
                          ("maxItems", lambda size, bound: size <= bound)):
        if keyword in schema:
            checks.append(lambda instance, fits=fits, bound=schema[keyword]: not isinstance(  # type: ignore[misc]
                          instance, list)
                          or fits(len(instance), bound))
    if "anyOf" in schema:
        scalars = [_scalar_values(sub, root) for sub in schema["anyOf"]]
        if all(scalars):  # e.g. a number or the strings NaN, Infinity, -Infinity: one set lookup per value
            types = frozenset(t for found in scalars for t in found[0])
            words = frozenset(w for found in scalars for w in found[1])
            checks.append(lambda instance: type(instance) in types or (type(instance) is str and instance in words))
        else:
            alternatives = [_compile(sub, root) for sub in schema["anyOf"]]
            checks.append(lambda instance: any(check(instance) for check in alternatives))
    if "not" in schema:
        negated = _compile(schema["not"], root)
        checks.append(lambda instance: not negated(instance))
    if "if" in schema:
        condition = _compile(schema["if"], root)
        then = _compile(schema.get("then", True), root)
        otherwise = _compile(schema.get("else", True), root)
        checks.append(lambda instance: then(instance) if condition(instance) else otherwise(instance))
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda instance: first(instance) and second(instance)
    return lambda instance: all(check(instance) for check in checks)


_CHECKERS: list[tuple[Draft202012Validator, Callable[[Any], bool] | None]] = []


def _certificate_checker() -> tuple[Draft202012Validator, Callable[[Any], bool] | None]:
    """The certificate schema's ``jsonschema`` validator and its compiled ``is_valid``, built once.

    The compiled check (about 20 times faster) decides sound certificates; ``jsonschema`` writes the messages
    for the others. Without a compiled check (a keyword ``_compile`` does not know) ``jsonschema`` does all.
    """
    if not _CHECKERS:
        schema = load_schema("certificate.schema.json")
        try:
            fast: Callable[[Any], bool] | None = _compile(schema)
        except NotImplementedError:
            fast = None
        _CHECKERS.append((Draft202012Validator(schema), fast))
    return _CHECKERS[0]


def certificate_problems(certificate: Mapping[str, Any]) -> list[str]:
    """Schema violations and a ``content_sha256`` mismatch, as messages (empty when sound).

    ``certificate`` is JSON as ``certa.engine.foundation.canonical.parse_json`` reads it (from a ledger, a bundle, an attestation)
    or as ``seal`` builds it, so its digests are computed on plain JSON values (``canonical_sha256_pair``'s
    ``plain``); any other value falls back to the general encoding."""
    validator, fast = _certificate_checker()
    problems = [] if fast is not None and fast(certificate) else [
        f"schema: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(certificate)]
    if isinstance(certificate.get("content"), Mapping):
        try:
            actual, results = canonical_sha256_pair(certificate["content"], ENVIRONMENT_KEYS, plain=True)
        except (TypeError, ValueError):  # not plain JSON (a caller's own dict): the general preparation
            actual, results = canonical_sha256_pair(certificate["content"], ENVIRONMENT_KEYS)
        if actual != certificate.get("content_sha256"):
            problems.append(f"content_sha256 {certificate.get('content_sha256')} does not match content ({actual})")
        if "results_sha256" in certificate:
            if results != certificate["results_sha256"]:
                problems.append(f"results_sha256 {certificate['results_sha256']} does not match content ({results})")
    return problems


@functools.cache
def _output_checker(schema_file: str) -> tuple[frozenset[str], Draft202012Validator | None, Callable[[Any], bool]]:
    """The versions one output schema describes (none if certa has no such file), its ``jsonschema`` validator
    (messages) and its compiled check (speed), built once."""
    if not schema_exists(schema_file):
        return frozenset(), None, lambda outputs: False
    schema = read_schema(schema_file)
    return frozenset(schema["x-certa-stage"]["versions"]), Draft202012Validator(schema), _compile(schema)


def output_problems(content: Mapping[str, Any]) -> list[str]:
    """Each ``content.stages.<id>`` checked against the output schema of the stage version that
    ``content.knobs.stages`` records for it (``StageType.output_schema_file``), as messages (empty when all
    match). ``seal`` calls it; ``verify`` does not (on 10^4 certificates it would cost more than the 5 s goal
    allows), so a stored certificate is checked against the certificate schema only."""
    from certa.engine.core.stages import REGISTRY  # the stage modules import this module: resolved when first called

    problems = []
    for entry in content["knobs"]["stages"]:
        stage_type = REGISTRY.find(entry["use"], entry["version"])
        if stage_type is None:
            problems.append(f"stage '{entry['id']}': {entry['use']}@{entry['version']} is not a registered stage "
                            "version")
            continue
        versions, validator, fast = _output_checker(stage_type.output_schema_file)
        if validator is None or stage_type.version not in versions:
            problems.append(f"stage '{entry['id']}': {stage_type.ref} has no output schema (schemas/"
                            f"{stage_type.output_schema_file} does not list its version; see docs/contributing.md)")
            continue
        outputs = content["stages"].get(entry["id"])
        if fast(outputs):
            continue
        problems += [f"stage '{entry['id']}' ({stage_type.ref}) outputs do not match {stage_type.output_schema_file}: "
                     f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                     for e in validator.iter_errors(outputs)]
    return problems


def validate_certificate(certificate: Mapping[str, Any]) -> None:
    """Raise ``CertaError`` if the certificate violates its schema or its hash."""
    problems = certificate_problems(certificate)
    if problems:
        raise CertaError("certificate is not valid (a certa bug; please report it): " + "; ".join(problems[:5]))


def seal(content: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """The full certificate for ``content``: adds ``content_sha256`` and ``issued``, then validates it against
    the certificate schema and each stage's outputs against its version's output schema (``output_problems``).

    Text that is not UTF-8 (a lone surrogate, which an input's JSON escape can hold: an item id, a model name an
    export states) cannot be in an RFC 8785 certificate: an ``InputError`` naming where it would be, before
    anything is recorded."""
    plain = to_jsonable(content)
    user, host = _who()
    try:
        content_sha, results_sha = canonical_sha256_pair(plain, ENVIRONMENT_KEYS, plain=True)
    except TextNotUTF8 as error:
        where, text = first_text_not_utf8(plain) or (error.where, error.text)  # the path in the whole content
        raise InputError(f"the certificate would hold text that is not UTF-8 at {where} ({ascii(text)[:80]}): it "
                         "holds a lone surrogate (a \\ud800-\\udfff escape with no pair), which an input's JSON "
                         "put there and no certificate can record; fix that text in the input") from None
    certificate = {
        "certificate_format": CERTIFICATE_FORMAT,
        "content": plain,
        "content_sha256": content_sha,
        "results_sha256": results_sha,
        "issued": {
            "run_id": run_id,
            "time_utc": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "user": user,
            "host": host,
            "platform": computing_platform(),
        },
    }
    validate_certificate(certificate)
    problems = output_problems(plain)
    if problems:
        raise CertaError("stage outputs do not match their output schema (a certa bug: a stage version changed "
                         "its outputs without its schema; please report it): " + "; ".join(problems[:5]))
    return certificate
