"""A Sigstore bundle made entirely in the test, that sigstore-python verifies offline against a trusted root given as
a file: a throw-away Fulcio-style certificate authority, certificate-transparency log and Rekor log, each a P-256
key made here.

What the bundle carries, as Sigstore's production services would make it (the Sigstore bundle and trusted-root
formats: github.com/sigstore/protobuf-specs; the checks: sigstore-python's ``Verifier.verify_dsse``):

- the signing certificate (``verificationMaterial.certificate``), issued by the test root to an e-mail identity
  (subjectAltName) with the OIDC issuer extension (OID 1.3.6.1.4.1.57264.1.1), key usage digitalSignature and
  extended key usage codeSigning, and one embedded signed certificate timestamp (RFC 6962 section 3.3: the CT
  log's signature over the precertificate's TBSCertificate, which is the certificate without that extension, and
  the issuer's key hash);
- one ``dsse`` 0.0.1 transparency-log entry: its canonicalized body names the envelope's payload hash and
  signature with the certificate as verifier; an inclusion promise (the signed entry timestamp: the log key's
  signature over the RFC 8785 form of ``{body, integratedTime, logID, logIndex}``); an RFC 6962 inclusion proof in
  a tree of two leaves, with a checkpoint (a signed note whose signature line is the log key id's first four bytes
  and its signature, base64).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

OIDC_ISSUER_OID = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
SCT_LIST_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _tls_vector(data: bytes, length_bytes: int) -> bytes:
    return len(data).to_bytes(length_bytes, "big") + data


def _der_octet_string(data: bytes) -> bytes:
    length = len(data)
    encoded = bytes([length]) if length < 128 else bytes([0x80 | ((length.bit_length() + 7) // 8)]) + \
        length.to_bytes((length.bit_length() + 7) // 8, "big")
    return b"\x04" + encoded + data


@dataclass(frozen=True)
class SigstoreParties:
    """The test's certificate authority, CT log and Rekor log keys, and when it all happens."""

    root: x509.Certificate
    root_key: ec.EllipticCurvePrivateKey
    ct_key: ec.EllipticCurvePrivateKey
    rekor_key: ec.EllipticCurvePrivateKey
    now: datetime.datetime

    @classmethod
    def make(cls) -> SigstoreParties:
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        root_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "certa test fulcio")])
        root = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(root_key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                             key_encipherment=False, data_encipherment=False, key_agreement=False,
                                             key_cert_sign=True, crl_sign=True, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
                .sign(root_key, hashes.SHA256()))
        return cls(root, root_key, ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1()),
                   now)

    def trust_config(self, path: Path) -> Path:
        """A Sigstore ClientTrustConfig naming these parties (Fulcio root, CT log key, Rekor key), written to
        ``path``."""
        start = {"start": (self.now - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}

        def log(key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, Any]:
            der = _spki(key.public_key())
            return {"baseUrl": url, "hashAlgorithm": "SHA2_256", "logId": {"keyId": _b64(hashlib.sha256(der).digest())},
                    "publicKey": {"rawBytes": _b64(der), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": start}}

        authority = {"subject": {"organization": "certa", "commonName": "certa test fulcio"},
                     "uri": "https://fulcio.invalid", "validFor": start,
                     "certChain": {"certificates": [{"rawBytes": _b64(self.root.public_bytes(serialization.Encoding.DER))}]}}
        config = {"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
                  "trustedRoot": {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                                  "tlogs": [log(self.rekor_key, "https://rekor.invalid")],
                                  "ctlogs": [log(self.ct_key, "https://ctfe.invalid")],
                                  "certificateAuthorities": [authority], "timestampAuthorities": []},
                  "signingConfig": {"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
                                    "caUrls": [], "oidcUrls": [], "rekorTlogUrls": [], "tsaUrls": [],
                                    "rekorTlogConfig": {"selector": "ANY"}, "tsaConfig": {"selector": "ANY"}}}
        path.write_text(json.dumps(config))
        return path

    def signing_certificate(self, key: ec.EllipticCurvePrivateKey, identity: str, issuer: str) -> x509.Certificate:
        """A Fulcio-style certificate for ``identity`` (an e-mail address) from ``issuer``, with an embedded SCT
        signed by the CT log key."""
        serial = x509.random_serial_number()

        def builder() -> x509.CertificateBuilder:
            return (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(self.root.subject)
                    .public_key(key.public_key()).serial_number(serial)
                    .not_valid_before(self.now - datetime.timedelta(minutes=1))
                    .not_valid_after(self.now + datetime.timedelta(minutes=10))
                    .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                 key_encipherment=False, data_encipherment=False, key_agreement=False,
                                                 key_cert_sign=False, crl_sign=False, encipher_only=False,
                                                 decipher_only=False), critical=True)
                    .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
                    .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                    .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()),
                                   critical=False)
                    .add_extension(x509.SubjectAlternativeName([x509.RFC822Name(identity)]), critical=True)
                    .add_extension(x509.UnrecognizedExtension(OIDC_ISSUER_OID, issuer.encode()), critical=False))

        precertificate_tbs = builder().sign(self.root_key, hashes.SHA256()).tbs_certificate_bytes
        timestamp_ms = int(self.now.timestamp() * 1000)
        issuer_key_hash = hashlib.sha256(_spki(self.root_key.public_key())).digest()
        signed = struct.pack("!BBQH", 0, 0, timestamp_ms, 1) + issuer_key_hash + \
            _tls_vector(precertificate_tbs, 3) + _tls_vector(b"", 2)
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (b"\x00" + hashlib.sha256(_spki(self.ct_key.public_key())).digest() + struct.pack("!Q", timestamp_ms)
               + _tls_vector(b"", 2) + b"\x04\x03" + _tls_vector(signature, 2))
        sct_list = _tls_vector(_tls_vector(sct, 2), 2)
        certificate = builder().add_extension(
            x509.UnrecognizedExtension(SCT_LIST_OID, _der_octet_string(sct_list)), critical=False,
        ).sign(self.root_key, hashes.SHA256())
        assert certificate.tbs_precertificate_bytes == precertificate_tbs
        return certificate

    def log_entry(self, envelope: dict[str, Any], certificate: x509.Certificate) -> dict[str, Any]:
        """The Rekor ``dsse`` 0.0.1 entry of ``envelope`` (a bundle's ``dsseEnvelope``) signed with
        ``certificate``'s key, logged at index 1 of a two-leaf log (module docstring), as a bundle's
        ``tlogEntries[0]``."""
        certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)
        payload = base64.b64decode(envelope["payload"])
        body = rfc8785.dumps({"apiVersion": "0.0.1", "kind": "dsse", "spec": {
            "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(rfc8785.dumps(envelope)).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
            "signatures": [{"signature": s["sig"], "verifier": _b64(certificate_pem)} for s in envelope["signatures"]]}})
        log_id = hashlib.sha256(_spki(self.rekor_key.public_key())).digest()
        integrated = int(self.now.timestamp())
        promise = self.rekor_key.sign(rfc8785.dumps({"body": _b64(body), "integratedTime": integrated,
                                                     "logID": log_id.hex(), "logIndex": 1}), ec.ECDSA(hashes.SHA256()))
        sibling = hashlib.sha256(b"\x00" + b"an earlier entry").digest()
        root = hashlib.sha256(b"\x01" + sibling + hashlib.sha256(b"\x00" + body).digest()).digest()
        note = f"rekor.invalid - 1\n2\n{_b64(root)}\n"
        note_signature = self.rekor_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = f"{note}\n\u2014 rekor.invalid {_b64(log_id[:4] + note_signature)}\n"
        return {"logIndex": "1", "logId": {"keyId": _b64(log_id)}, "kindVersion": {"kind": "dsse", "version": "0.0.1"},
                "integratedTime": str(integrated), "inclusionPromise": {"signedEntryTimestamp": _b64(promise)},
                "inclusionProof": {"logIndex": "1", "rootHash": _b64(root), "treeSize": "2", "hashes": [_b64(sibling)],
                                   "checkpoint": {"envelope": checkpoint}},
                "canonicalizedBody": _b64(body)}


def sign_with_sigstore(folder: Path, work: Path, parties: SigstoreParties, identity: str, issuer: str) -> Path:
    """Sign ``folder`` with model-signing (its certificate signer, with a key and a Fulcio-style certificate made
    here), then give ``model.sig`` the verification material of a Sigstore bundle: the certificate alone and the
    Rekor entry. Returns the certificate's PEM file."""
    import model_signing

    key = ec.generate_private_key(ec.SECP256R1())
    certificate = parties.signing_certificate(key, identity, issuer)
    (work / "sigstore-leaf.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (work / "sigstore-leaf.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                               serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()))
    (work / "fulcio-root.pem").write_bytes(parties.root.public_bytes(serialization.Encoding.PEM))
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"])
    model_signing.signing.Config().use_certificate_signer(
        private_key=work / "sigstore-leaf.key", signing_certificate=work / "sigstore-leaf.pem",
        certificate_chain=[work / "fulcio-root.pem"]).set_hashing_config(hashing).sign(folder, folder / "model.sig")
    bundle = json.loads((folder / "model.sig").read_text())
    bundle["mediaType"] = "application/vnd.dev.sigstore.bundle.v0.3+json"
    bundle["verificationMaterial"] = {
        "certificate": {"rawBytes": _b64(certificate.public_bytes(serialization.Encoding.DER))},
        "tlogEntries": [parties.log_entry(bundle["dsseEnvelope"], certificate)]}
    (folder / "model.sig").write_text(json.dumps(bundle))
    return work / "sigstore-leaf.pem"
