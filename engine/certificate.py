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

import getpass
import platform
import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

import numpy as np
import scipy
from jsonschema import Draft202012Validator

from schemas import load_schema

from .canonical import canonical_sha256, to_jsonable
from .errors import CertaError

__all__ = ["CERTIFICATE_FORMAT", "CONTENT_FORMAT", "ENVIRONMENT_KEYS", "computing_platform", "library_versions",
           "results_of", "results_sha256", "seal", "validate_certificate", "certificate_problems"]

CERTIFICATE_FORMAT = 2
"""The certificate envelope: 1 (certa 0.1.0, 0.2.0) had ``content_sha256`` only; 2 adds ``results_sha256``."""
CONTENT_FORMAT = 1
"""``content.certa_format``: the structure of ``content`` (unchanged since 0.1.0)."""
ENVIRONMENT_KEYS = ("versions",)
"""Members of ``content`` that record the computing environment, not a result."""


def results_of(content: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` without its environment stamp (``ENVIRONMENT_KEYS``): what a replay must reproduce."""
    return {key: value for key, value in content.items() if key not in ENVIRONMENT_KEYS}


def results_sha256(content: Mapping[str, Any]) -> str:
    """SHA-256 of the RFC 8785 canonical JSON of ``results_of(content)``."""
    return canonical_sha256(results_of(content))


def library_versions() -> dict[str, str]:
    """Versions that can change a certificate's numbers: certa, Python, numpy, scipy, numba (it compiles
    the bake-off kernels)."""
    return {
        "certa": metadata.version("certa"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": metadata.version("numba"),
    }


def computing_platform() -> dict[str, Any]:
    """OS, CPU architecture and numpy's run-time SIMD targets (baseline and found).

    numpy picks some transcendental-function kernels by CPU at run time (e.g. AVX-512 variants), and
    those may differ in the last bit between CPU families; this records which machine computed a
    certificate, outside its hash.
    """
    simd = np.show_config(mode="dicts").get("SIMD Extensions", {})
    return {"system": platform.system(), "machine": platform.machine(),
            "numpy_simd": [str(x) for x in [*simd.get("baseline", []), *simd.get("found", [])]]}


def _who() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return user, socket.gethostname()


def certificate_problems(certificate: Mapping[str, Any]) -> list[str]:
    """Schema violations and a ``content_sha256`` mismatch, as messages (empty when sound)."""
    validator = Draft202012Validator(load_schema("certificate.schema.json"))
    problems = [f"schema: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                for e in validator.iter_errors(certificate)]
    if isinstance(certificate.get("content"), Mapping):
        actual = canonical_sha256(certificate["content"])
        if actual != certificate.get("content_sha256"):
            problems.append(f"content_sha256 {certificate.get('content_sha256')} does not match content ({actual})")
        if "results_sha256" in certificate:
            results = results_sha256(certificate["content"])
            if results != certificate["results_sha256"]:
                problems.append(f"results_sha256 {certificate['results_sha256']} does not match content ({results})")
    return problems


def validate_certificate(certificate: Mapping[str, Any]) -> None:
    """Raise ``CertaError`` if the certificate violates its schema or its hash."""
    problems = certificate_problems(certificate)
    if problems:
        raise CertaError("certificate is not valid (a certa bug; please report it): " + "; ".join(problems[:5]))


def seal(content: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """The full certificate for ``content``: adds ``content_sha256`` and ``issued``, then validates it."""
    plain = to_jsonable(content)
    user, host = _who()
    certificate = {
        "certificate_format": CERTIFICATE_FORMAT,
        "content": plain,
        "content_sha256": canonical_sha256(plain),
        "results_sha256": results_sha256(plain),
        "issued": {
            "run_id": run_id,
            "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "user": user,
            "host": host,
            "platform": computing_platform(),
        },
    }
    validate_certificate(certificate)
    return certificate
