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
import socket
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, UTC
from typing import TYPE_CHECKING, Any

from certa.schemas import load_schema, read_schema, schema_exists

from certa.engine.foundation.canonical import (TextNotUTF8, canonical_sha256, canonical_sha256_pair, first_text_not_utf8,
                                              to_jsonable)
from certa.engine.foundation.errors import CertaError, InputError
from certa.engine.foundation.schema_check import compile_schema

if TYPE_CHECKING:  # numpy and jsonschema load when a certificate is sealed or checked, not to show one
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
    metadata file on every call: about 2 ms, a tenth of a small run). Imported here: ``importlib.metadata`` (with
    ``email``) costs about 14 ms, which showing a certificate does not need."""
    from importlib import metadata

    return metadata.version(distribution)


def library_versions() -> dict[str, str]:
    """Versions that can change a certificate's numbers: certa, Python, numpy, scipy, numba (it compiles
    the bake-off kernels)."""
    import numpy as np  # a run has loaded it; showing a certificate does not
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
    import numpy as np
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


@functools.cache
def _certificate_check() -> Callable[[Any], bool] | None:
    """The certificate schema's compiled ``is_valid`` (about 20 times faster than ``jsonschema``), built once; None
    when the schema uses a keyword ``compile_schema`` does not know (then ``jsonschema`` decides all)."""
    try:
        return compile_schema(load_schema("certificate.schema.json"))
    except NotImplementedError:
        return None


@functools.cache
def _certificate_validator() -> Draft202012Validator:
    """The certificate schema's ``jsonschema`` validator, built once and only for a certificate the compiled check
    refuses (it writes the messages): importing ``jsonschema`` costs about 50 ms that checking sound certificates,
    as an incremental ``verify`` does, need not pay."""
    from certa.engine.foundation.schema_validator import Draft202012Validator
    return Draft202012Validator(load_schema("certificate.schema.json"))


def certificate_problems(certificate: Mapping[str, Any]) -> list[str]:
    """Schema violations and a ``content_sha256`` mismatch, as messages (empty when sound).

    ``certificate`` is JSON as ``certa.engine.foundation.canonical.parse_json`` reads it (from a ledger, a bundle, an attestation)
    or as ``seal`` builds it, so its digests are computed on plain JSON values (``canonical_sha256_pair``'s
    ``plain``); any other value falls back to the general encoding."""
    fast = _certificate_check()
    problems = [] if fast is not None and fast(certificate) else [
        f"schema: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in _certificate_validator().iter_errors(certificate)]
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
    from certa.engine.foundation.schema_validator import Draft202012Validator
    schema = read_schema(schema_file)
    return frozenset(schema["x-certa-stage"]["versions"]), Draft202012Validator(schema), compile_schema(schema)


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
