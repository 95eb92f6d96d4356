"""A model folder's OpenSSF ``model-signing`` signature, checked against a public key and certa's manifest.

A model signed with ``model-signing`` (https://github.com/sigstore/model-transparency, the OpenSSF Model
Signing specification v1.0) carries ``model.sig``: a Sigstore bundle whose DSSE envelope holds an in-toto
statement; its ``predicate.resources`` list every signed file (``name``, ``digest``, ``algorithm`` sha256).
A spec names the key that must have signed it::

    inputs:
      baseline: {model: models/base, signature: {public_key: keys/base.pub.pem}}

``check_signature`` then

1. verifies the signature with ``model_signing.verifying.Config().use_elliptic_key_verifier(public_key=...)``
   (the library checks the envelope's signature with the key and re-hashes the folder against the signed
   resources);
2. compares the signed resources with certa's manifest (``certa.engine.core.models.manifest``): every file certa
   hashed must be signed with the same SHA-256 (a file certa lists but the signature does not is refused), and
   a signed file certa does not list may only be one certa leaves out (a path with a component starting with
   ``.``).

A failure states its reason in certa's own words where it can: a ``model.sig`` that is not a regular file or not a
Sigstore bundle of a model-signing statement, or signed files that differ from the folder (each named with both
SHA-256 digests in hex); otherwise the first line of the library's message (without Python byte literals).

The outcome (``SignatureCheck.record``) is one of: ``verified`` (with the SHA-256 of the public key's DER
SubjectPublicKeyInfo and of ``model.sig``), ``unsigned`` (no ``model.sig`` and no key named), ``not_checked``
(a ``model.sig`` but no key named), ``failed`` (with the reason). ``certa.engine.core.inputs.load_tables``
refuses ``failed`` and ``not_checked`` in the ci and release profiles; a dev run records them. The library
is imported only when a folder holds ``model.sig`` and a key is named.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certa.engine.foundation.extras import require_extra
from certa.engine.core.models.manifest import SIGNATURE_FILE, ModelManifest

__all__ = ["SignatureCheck", "check_signature", "STRICT_STATUSES"]

STRICT_STATUSES = frozenset({"verified", "unsigned"})
"""Outcomes the ci and release profiles accept."""
MAX_BUNDLE_BYTES = 16 << 20
"""The longest ``model.sig`` read: a Sigstore bundle is a few kilobytes."""


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of checking one model folder's signature (module docstring)."""

    status: str
    public_key_sha256: str | None = None
    signature_sha256: str | None = None
    reason: str | None = None

    def record(self) -> dict[str, Any]:
        """The outcome as the certificate states it (absent fields left out)."""
        return {k: v for k, v in (("status", self.status), ("public_key_sha256", self.public_key_sha256),
                                  ("signature_sha256", self.signature_sha256), ("reason", self.reason))
                if v is not None}


def _public_key_sha256(pem: bytes) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_public_key(pem)
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def _signed_resources(bundle: bytes) -> dict[str, str]:
    """name -> sha256 of the signed statement's ``predicate.resources`` (the bundle's DSSE payload)."""
    envelope = json.loads(bundle)["dsseEnvelope"]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    return {str(r["name"]): str(r["digest"]) for r in statement["predicate"]["resources"]
            if r.get("algorithm", "sha256") == "sha256"}


def _manifest_differences(manifest: ModelManifest, signed: dict[str, str]) -> list[str]:
    problems = [f"{f.path} is not signed" if f.path not in signed else
                f"{f.path} has SHA-256 {f.sha256} but the signature states {signed[f.path]}"
                for f in manifest.files if signed.get(f.path) != f.sha256]
    listed = {f.path for f in manifest.files}
    problems += [f"the signature lists {name}, which the folder does not hold" for name in sorted(signed)
                 if name not in listed and not any(part.startswith(".") for part in name.split("/"))]
    return problems


def _bundle_problem(bundle: bytes) -> str | None:
    """Why ``bundle`` is not a Sigstore bundle holding a model-signing statement, or None when it is one."""
    try:
        _signed_resources(bundle)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        return f"{SIGNATURE_FILE} is not a Sigstore bundle of a model-signing statement ({type(exc).__name__}: {detail})"
    return None


_BYTES_REPR = re.compile(r"""(?<![\w])b(['"])(?:\\.|(?!\1).)*\1""")


def _library_detail(exc: BaseException) -> str:
    """The first line of the library's message, with any Python bytes literal (a digest as ``b'\\x7f...'``) left
    out: certa states digests in hex itself."""
    if not str(exc).strip():
        return f"the envelope's signature is not valid for its statement and this key ({type(exc).__name__})"
    text = str(exc).strip().splitlines()[0]
    return " ".join(_BYTES_REPR.sub("<bytes>", text).split())[:300]


def check_signature(folder: Path, manifest: ModelManifest, public_key: Path | None) -> SignatureCheck:
    """Check ``folder``'s ``model.sig`` with ``public_key`` against ``manifest`` (module docstring)."""
    signature = folder / SIGNATURE_FILE
    try:
        mode: int | None = os.lstat(signature).st_mode
    except OSError:
        mode = None
    if mode is None:
        if public_key is None:
            return SignatureCheck("unsigned")
        return SignatureCheck("failed", reason=f"the spec names a public key but the folder has no {SIGNATURE_FILE}")
    if not stat.S_ISREG(mode):
        return SignatureCheck("failed", reason=f"{SIGNATURE_FILE} is not a regular file (a link, folder or device); "
                                               "a signature is the bundle file model-signing writes")
    if os.stat(signature).st_size > MAX_BUNDLE_BYTES:
        return SignatureCheck("failed", reason=f"{SIGNATURE_FILE} is longer than {MAX_BUNDLE_BYTES:,} bytes; a "
                                               "Sigstore bundle is a few kilobytes")
    bundle = signature.read_bytes()
    signature_sha256 = hashlib.sha256(bundle).hexdigest()
    if public_key is None:
        return SignatureCheck("not_checked", signature_sha256=signature_sha256,
                              reason=f"the folder holds {SIGNATURE_FILE} but the spec names no public key "
                                     "(signature: {public_key: ...})")
    try:
        key_sha256 = _public_key_sha256(public_key.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        return SignatureCheck("failed", signature_sha256=signature_sha256,
                              reason=f"the public key {public_key.name} cannot be read as a PEM public key ({exc})")
    problem = _bundle_problem(bundle)
    if problem is not None:
        return SignatureCheck("failed", key_sha256, signature_sha256, problem)
    problems = _manifest_differences(manifest, _signed_resources(bundle))
    differ = "the signed files differ from the folder certa hashed: " + "; ".join(problems[:3])
    require_extra("models", "checking a model's signature", ("model_signing",))
    from model_signing import verifying
    try:
        verifying.Config().use_elliptic_key_verifier(public_key=public_key).verify(folder, signature)
    except Exception as exc:  # noqa: BLE001 - the library raises ValueError and its own and cryptography's types
        return SignatureCheck("failed", key_sha256, signature_sha256,
                              f"the signature does not verify: {differ if problems else _library_detail(exc)}")
    if problems:
        return SignatureCheck("failed", key_sha256, signature_sha256, differ)
    return SignatureCheck("verified", key_sha256, signature_sha256)
