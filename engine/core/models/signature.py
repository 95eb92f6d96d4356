"""A model folder's OpenSSF ``model-signing`` signature, checked offline against what the spec trusts and certa's
manifest.

A model signed with ``model-signing`` (https://github.com/sigstore/model-transparency, the OpenSSF Model
Signing specification v1.0) carries ``model.sig``: a Sigstore bundle whose DSSE envelope holds an in-toto
statement; its ``predicate.resources`` list every signed file (``name``, ``digest``, ``algorithm`` sha256).
The bundle's ``verificationMaterial`` says how it was signed, and the spec names what must have signed it, in
one of three modes (``SignatureTrust``)::

    inputs:
      base:   {model: models/base, signature: {public_key: keys/base.pub.pem}}               # key
      vendor: {model: models/vendor, signature: {certificate_chain: [pki/root.pem, pki/ca.pem]}}  # certificate
      hub:    {model: models/hub, signature: {sigstore: {identity: release@example.org,
               issuer: https://accounts.example.org, trust_config: sigstore/trust_config.json}}}  # Sigstore

``check_signature`` then

1. refuses a bundle signed in another mode than the spec names, saying which mode it was signed in (a bundle
   holding a certificate chain, checked against a key, used to fail inside the library with "'NoneType' object
   has no attribute 'hint'");
2. verifies the signature with ``model_signing.verifying.Config()`` (the library checks the envelope's signature
   and re-hashes the folder against the signed resources):

   - key: ``use_elliptic_key_verifier(public_key=...)``;
   - certificate: ``use_certificate_verifier(certificate_chain=[...])``: the signing certificate must chain, with
     the bundle's intermediates, to a certificate of the files named (OpenSSL's X509 store, at the signing
     certificate's own ``notBefore`` time, as the library sets it) and allow digital signatures or code
     signing; certa always names the chain, so the operating system's roots (the library's default) are never
     used;
   - sigstore: ``use_sigstore_verifier(identity, oidc_issuer, trust_config=...)``: sigstore-python's verifier
     against the trusted root in the named Sigstore ClientTrustConfig file (Fulcio certificate chain, signed
     certificate timestamps, the transparency-log entry and its inclusion proof carried in the bundle), and the
     certificate's identity and OIDC issuer. Nothing is fetched: with a trust configuration given, neither the
     library nor sigstore-python asks Sigstore's TUF repository (its ``production()`` default, never used here)
     or Rekor;
3. compares the signed resources with certa's manifest (``certa.engine.core.models.manifest``): every file certa
   hashed must be signed with the same SHA-256 (a file certa lists but the signature does not is refused), and
   a signed file certa does not list may only be one certa leaves out (a path with a component starting with
   ``.``).

A failure states its reason in certa's own words where it can: a ``model.sig`` that is not a regular file or not a
Sigstore bundle of a model-signing statement, one signed in another mode, a trust file that cannot be read, or
signed files that differ from the folder (each named with both SHA-256 digests in hex); otherwise the first line
of the library's message (without Python byte literals).

The outcome (``SignatureCheck.record``) is one of: ``verified``, ``unsigned`` (no ``model.sig`` and nothing
named), ``not_checked`` (a ``model.sig`` but nothing named), ``failed`` (with the reason); with the SHA-256 of
``model.sig`` and of the verifying public key's DER SubjectPublicKeyInfo (the key's, or the signing
certificate's). A certificate or Sigstore check records what it trusted: ``mode``, ``signer`` (the signing
certificate's subject, RFC 4514; for Sigstore the identity required), ``issuer`` (Sigstore), ``chain_sha256``
(SHA-256 of each trusted certificate's DER, in the order of the files; for Sigstore each certificate of the trust
configuration's certificate authorities) and, for Sigstore, ``trust_config_sha256``; a verified Sigstore check also
records the transparency-log entry it accepted (``log_entry``: Rekor's log id, index and integrated time) and what
was checked (``checked``: ``SIGSTORE_CHECKS``: the chain to the trusted root at the log's time, the signed
certificate timestamp, the identity and issuer, the inclusion proof and signed checkpoint, the signed entry
timestamp, the envelope's signature and its match with the log entry). A key check records no ``mode`` (its
record is as before the modes). ``certa.engine.core.inputs.load_tables`` refuses
``failed`` and ``not_checked`` in the ci and release profiles; a dev run records them. The library is imported
only when a folder holds ``model.sig`` and the spec names what signed it.
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

__all__ = ["MODES", "SignatureTrust", "SignatureCheck", "check_signature", "STRICT_STATUSES", "SIGSTORE_CHECKS"]

STRICT_STATUSES = frozenset({"verified", "unsigned"})
"""Outcomes the ci and release profiles accept."""
MAX_BUNDLE_BYTES = 16 << 20
"""The longest ``model.sig`` read: a Sigstore bundle is a few kilobytes."""
MODES = ("key", "certificate", "sigstore")
"""The signing modes (module docstring), as the spec's ``signature`` names them."""
_HOW_TO_NAME = {"key": "signature: {public_key: KEY.pem}", "certificate": "signature: {certificate_chain: [CA.pem]}",
                "sigstore": "signature: {sigstore: {identity: ..., issuer: ..., trust_config: FILE.json}}"}


@dataclass(frozen=True)
class SignatureTrust:
    """What a model's signature must verify with (the spec's ``signature``; module docstring): a public key
    (``key``), certificate chain files (``certificate``), or a Sigstore identity, OIDC issuer and trust
    configuration file (``sigstore``); paths resolved inside the spec's folder."""

    mode: str
    public_key: Path | None = None
    certificate_chain: tuple[Path, ...] = ()
    identity: str | None = None
    issuer: str | None = None
    trust_config: Path | None = None


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of checking one model folder's signature (module docstring)."""

    status: str
    public_key_sha256: str | None = None
    signature_sha256: str | None = None
    reason: str | None = None
    trusted: tuple[tuple[str, Any], ...] = ()
    """What a certificate or Sigstore check trusted: (``mode``, ...), (``signer``, ...), ... (module docstring)."""

    def record(self) -> dict[str, Any]:
        """The outcome as the certificate states it (absent fields left out)."""
        return {k: v for k, v in (("status", self.status), ("public_key_sha256", self.public_key_sha256),
                                  ("signature_sha256", self.signature_sha256), ("reason", self.reason),
                                  *self.trusted)
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


def _signed_mode(bundle: bytes) -> tuple[str, bytes | None]:
    """(mode, the signing certificate's DER or None) of a bundle's ``verificationMaterial``: a ``publicKey`` hint
    (key), an ``x509CertificateChain`` (certificate), or a ``certificate`` with transparency-log entries
    (sigstore)."""
    material = json.loads(bundle).get("verificationMaterial") or {}
    chain = (material.get("x509CertificateChain") or {}).get("certificates") or []
    if chain:
        return "certificate", base64.b64decode(chain[0]["rawBytes"])
    if material.get("certificate"):
        return "sigstore", base64.b64decode(material["certificate"]["rawBytes"])
    return "key", None


def _certificate_sha256s(files: tuple[Path, ...]) -> list[str]:
    """SHA-256 of the DER of each PEM certificate in ``files``, in order (``ValueError`` when a file holds none)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    digests = []
    for path in files:
        found = x509.load_pem_x509_certificates(path.read_bytes())
        digests += [hashlib.sha256(c.public_bytes(serialization.Encoding.DER)).hexdigest() for c in found]
    return digests


def _trusted(trust: SignatureTrust, certificate_der: bytes | None) -> tuple[str | None, tuple[tuple[str, Any], ...]]:
    """(SHA-256 of the signing certificate's public key, what the check trusted) for a certificate or Sigstore
    check; raises ``OSError`` or ``ValueError`` when a trust file cannot be read."""
    if trust.mode == "key" or certificate_der is None:
        return None, ()
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    certificate = x509.load_der_x509_certificate(certificate_der)
    key_sha256 = hashlib.sha256(certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest()
    if trust.mode == "certificate":
        return key_sha256, (("mode", "certificate"), ("signer", certificate.subject.rfc4514_string()),
                            ("chain_sha256", _certificate_sha256s(trust.certificate_chain)))
    assert trust.trust_config is not None
    config = trust.trust_config.read_bytes()
    return key_sha256, (("mode", "sigstore"), ("signer", trust.identity), ("issuer", trust.issuer),
                        ("trust_config_sha256", hashlib.sha256(config).hexdigest()),
                        ("chain_sha256", _authority_sha256s(config)))


def _authority_sha256s(config: bytes) -> list[str]:
    """SHA-256 of the DER of each certificate of each certificate authority (Fulcio) in a Sigstore
    ClientTrustConfig's ``trustedRoot``, in file order (``ValueError`` when the file is not one)."""
    try:
        authorities = json.loads(config)["trustedRoot"]["certificateAuthorities"]
        return [hashlib.sha256(base64.b64decode(c["rawBytes"], validate=True)).hexdigest()
                for authority in authorities for c in authority["certChain"]["certificates"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a Sigstore trust configuration with certificate authorities ({exc!r})") from None


SIGSTORE_CHECKS = ("signing certificate chains to a certificate authority of the trust configuration, at the "
                   "transparency log's integrated time",
                   "signed certificate timestamp by a CT log key of the trust configuration",
                   "signing certificate's identity (subjectAltName) and OIDC issuer are the ones required",
                   "log entry's inclusion proof reaches a checkpoint signed by a Rekor key of the trust configuration",
                   "log entry's signed entry timestamp (inclusion promise) by that Rekor key",
                   "DSSE envelope signed by the certificate's key, and the log entry names that payload and signature")
"""What sigstore-python's ``Verifier.verify_dsse`` established when a Sigstore-mode signature verifies (recorded as
``checked``)."""


def _log_entry(bundle: bytes) -> dict[str, Any]:
    """The bundle's transparency-log entry as a verified check records it: Rekor's ``log_id`` (hex), ``log_index``
    and ``integrated_time`` (UTC, ISO 8601)."""
    import datetime

    entry = json.loads(bundle)["verificationMaterial"]["tlogEntries"][0]
    integrated = datetime.datetime.fromtimestamp(int(entry["integratedTime"]), datetime.UTC)
    return {"log_id": base64.b64decode(entry["logId"]["keyId"]).hex(), "log_index": int(entry["logIndex"]),
            "integrated_time": integrated.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _verifier(trust: SignatureTrust) -> Any:
    """The library's verification configuration for ``trust``'s mode (module docstring)."""
    from model_signing import verifying

    config = verifying.Config()
    if trust.mode == "certificate":
        return config.use_certificate_verifier(certificate_chain=trust.certificate_chain)
    if trust.mode == "sigstore":
        return config.use_sigstore_verifier(identity=str(trust.identity), oidc_issuer=str(trust.issuer),
                                            trust_config=trust.trust_config)
    return config.use_elliptic_key_verifier(public_key=trust.public_key)


def _manifest_differences(manifest: ModelManifest, signed: dict[str, str]) -> list[str]:
    problems = [f"{f.path} is not signed" if f.path not in signed else
                f"{f.path} has SHA-256 {f.sha256} but the signature states {signed[f.path]}"
                for f in manifest.files if signed.get(f.path) != f.sha256]
    listed = {f.path for f in manifest.files}
    problems += [f"the signature lists {name}, which the folder does not hold" for name in sorted(signed)
                 if name not in listed and not any(part.startswith(".") for part in name.split("/"))]
    return problems


def _bundle_problem(bundle: bytes) -> str | None:
    """Why ``bundle`` is not a Sigstore bundle holding a model-signing statement (with verification material of
    one of the modes), or None when it is one."""
    try:
        _signed_resources(bundle)
        _signed_mode(bundle)
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


def check_signature(folder: Path, manifest: ModelManifest, trust: SignatureTrust | None) -> SignatureCheck:
    """Check ``folder``'s ``model.sig`` with what ``trust`` names against ``manifest`` (module docstring)."""
    signature = folder / SIGNATURE_FILE
    try:
        mode: int | None = os.lstat(signature).st_mode
    except OSError:
        mode = None
    if mode is None:
        if trust is None:
            return SignatureCheck("unsigned")
        return SignatureCheck("failed", reason=f"the spec names a signer but the folder has no {SIGNATURE_FILE}")
    if not stat.S_ISREG(mode):
        return SignatureCheck("failed", reason=f"{SIGNATURE_FILE} is not a regular file (a link, folder or device); "
                                               "a signature is the bundle file model-signing writes")
    if os.stat(signature).st_size > MAX_BUNDLE_BYTES:
        return SignatureCheck("failed", reason=f"{SIGNATURE_FILE} is longer than {MAX_BUNDLE_BYTES:,} bytes; a "
                                               "Sigstore bundle is a few kilobytes")
    bundle = signature.read_bytes()
    signature_sha256 = hashlib.sha256(bundle).hexdigest()
    if trust is None:
        return SignatureCheck("not_checked", signature_sha256=signature_sha256,
                              reason=f"the folder holds {SIGNATURE_FILE} but the spec names no signer "
                                     "(signature: {public_key: ...}, {certificate_chain: [...]} or {sigstore: ...})")
    key_sha256: str | None = None
    if trust.public_key is not None:
        try:
            key_sha256 = _public_key_sha256(trust.public_key.read_bytes())
        except (OSError, ValueError, TypeError) as exc:
            return SignatureCheck("failed", signature_sha256=signature_sha256,
                                  reason=f"the public key {trust.public_key.name} cannot be read as a PEM public "
                                         f"key ({exc})")
    problem = _bundle_problem(bundle)
    if problem is not None:
        return SignatureCheck("failed", key_sha256, signature_sha256, problem)
    signed_mode, certificate_der = _signed_mode(bundle)
    if signed_mode != trust.mode:
        return SignatureCheck("failed", key_sha256, signature_sha256,
                              f"{SIGNATURE_FILE} was signed in {signed_mode} mode but the spec names a {trust.mode} "
                              f"signer; name what signed it: {_HOW_TO_NAME[signed_mode]}")
    try:
        certificate_key_sha256, trusted = _trusted(trust, certificate_der)
    except (OSError, ValueError, TypeError) as exc:
        return SignatureCheck("failed", key_sha256, signature_sha256,
                              f"a {trust.mode} trust file cannot be read ({' '.join(str(exc).split())[:200]})")
    key_sha256 = key_sha256 or certificate_key_sha256
    problems = _manifest_differences(manifest, _signed_resources(bundle))
    differ = "the signed files differ from the folder certa hashed: " + "; ".join(problems[:3])
    require_extra("models", "checking a model's signature", ("model_signing",))
    try:
        _verifier(trust).verify(folder, signature)
    except Exception as exc:  # noqa: BLE001 - the library raises ValueError and its own, OpenSSL's, cryptography's
        return SignatureCheck("failed", key_sha256, signature_sha256,
                              f"the signature does not verify: {differ if problems else _library_detail(exc)}",
                              trusted)
    if problems:
        return SignatureCheck("failed", key_sha256, signature_sha256, differ, trusted)
    if trust.mode == "sigstore":  # verify_dsse accepted exactly one log entry
        trusted += (("log_entry", _log_entry(bundle)), ("checked", list(SIGSTORE_CHECKS)))
    return SignatureCheck("verified", key_sha256, signature_sha256, trusted=trusted)
