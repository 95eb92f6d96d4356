"""Model signatures: an OpenSSF model-signing signature made in the test with an elliptic-curve key is verified
against the spec's public key and certa's manifest; anything else is recorded, and refused in ci and release."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.inputs import load_tables
from certa.engine.core.models.manifest import folder_manifest
from certa.engine.core.models.signature import SignatureTrust, check_signature
from certa.engine.core.spec import load_plan
from tests.conftest import write_spec

model_signing = pytest.importorskip("model_signing", reason="the signature tests need model-signing (certa[models])")


def _key_pair(folder: Path, name: str) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def _sign(folder: Path, private: Path) -> None:
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"])
    model_signing.signing.Config().use_elliptic_key_signer(private_key=private).set_hashing_config(hashing).sign(
        folder, folder / "model.sig")


@pytest.fixture
def signed(tiny_models, tmp_path) -> tuple[Path, Path, Path]:
    folder = Path(shutil.copytree(tiny_models["baseline"], tmp_path / "model"))
    private, public = _key_pair(tmp_path, "signer")
    _sign(folder, private)
    return folder, public, _key_pair(tmp_path, "other")[1]


def _check(folder: Path, trust: Path | SignatureTrust | None):
    """The check of ``folder`` with a public key file (key mode) or another ``SignatureTrust``."""
    if isinstance(trust, Path):
        trust = SignatureTrust("key", public_key=trust)
    return check_signature(folder, folder_manifest("m", folder, InputLimits()), trust)


def test_a_signature_made_with_the_key_verifies_and_names_the_key(signed):
    from cryptography.hazmat.primitives import serialization
    import hashlib

    folder, public, _ = signed
    check = _check(folder, public)
    der = serialization.load_pem_public_key(public.read_bytes()).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert check.status == "verified", check
    assert check.public_key_sha256 == hashlib.sha256(der).hexdigest()
    assert check.signature_sha256 == hashlib.sha256((folder / "model.sig").read_bytes()).hexdigest()


def test_another_key_fails(signed):
    folder, _, other = signed
    check = _check(folder, other)
    assert check.status == "failed" and "does not verify" in check.reason


def test_a_file_changed_after_signing_fails(signed):
    folder, public, _ = signed
    (folder / "generation_config.json").write_text("{}")
    check = _check(folder, public)
    assert check.status == "failed" and "does not verify" in check.reason


def test_a_signed_file_certa_does_not_hash_fails_the_comparison(signed, tmp_path):
    """The library ignores .gitattributes, certa ignores every dot path: the signed resources and certa's
    manifest are compared entry by entry, and a file certa hashed that the signature does not list fails."""
    from certa.engine.core.models.signature import _manifest_differences

    folder, public, _ = signed
    manifest = folder_manifest("m", folder, InputLimits())
    signed_files = {f.path: f.sha256 for f in manifest.files}
    assert _manifest_differences(manifest, signed_files) == []
    assert _manifest_differences(manifest, {**signed_files, ".cache/x": "0" * 64}) == []
    assert _manifest_differences(manifest, {**signed_files, "extra.json": "0" * 64}) == [
        "the signature lists extra.json, which the folder does not hold"]
    partial = dict(list(signed_files.items())[1:])
    assert _manifest_differences(manifest, partial) == [f"{manifest.files[0].path} is not signed"]


def test_unsigned_and_unchecked_outcomes(signed, tiny_models):
    folder, public, _ = signed
    assert _check(tiny_models["baseline"], None).status == "unsigned"
    assert _check(tiny_models["baseline"], public).status == "failed"
    assert _check(folder, None).status == "not_checked"


def _spec(tmp_path: Path, profile: str, key: str | None, *, signature: str | None = None, model: str = "model",
          use: str = "model.windows") -> Path:
    """A spec of one model input (``model``) signed with ``key`` (key mode) or ``signature`` (its YAML)."""
    (tmp_path / "text.jsonl").write_text('{"text": "a b c"}\n')
    signature = signature or (f"{{public_key: {key}}}" if key else None)
    named = f", signature: {signature}" if signature else ""
    return write_spec(tmp_path, f"""\
        certa: 1
        name: signed
        seed: 1
        profile: {profile}
        inputs:
          base: {{model: {model}{named}}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: {use}, with: {{baseline: base, subject: base, text: text}}}}
        """)


def test_ci_and_release_refuse_a_signature_that_does_not_verify_dev_records_it(signed, tmp_path):
    folder, public, other = signed
    shutil.copy(public, tmp_path / "good.pem")
    shutil.copy(other, tmp_path / "bad.pem")
    assert load_tables(load_plan(_spec(tmp_path, "ci", "good.pem")))["base"].signature.status == "verified"
    assert load_tables(load_plan(_spec(tmp_path, "dev", "bad.pem")))["base"].signature.status == "failed"
    for profile in ("ci", "release"):
        with pytest.raises(InputError, match=f"model signature failed: .*profile {profile}"):
            load_tables(load_plan(_spec(tmp_path, profile, "bad.pem")))
        with pytest.raises(InputError, match="model signature not checked"):
            load_tables(load_plan(_spec(tmp_path, profile, None)))


def test_the_public_key_is_a_path_inside_the_spec_folder(tmp_path):
    from certa.engine.foundation.errors import SpecError

    with pytest.raises(SpecError, match=r"spec.yaml:6:48: inputs.base.signature.public_key: path .../outside.pem. leaves the spec.s folder"):
        load_plan(_spec(tmp_path, "dev", "../outside.pem"))


def test_a_file_changed_after_signing_is_named_with_both_digests_in_hex(signed):
    """Issue 31: the library's reason printed Python byte literals (digest_value=b'7T\\xe0...'); certa states the
    file and both SHA-256 digests in hex."""
    import hashlib

    folder, public, _ = signed
    before = hashlib.sha256((folder / "generation_config.json").read_bytes()).hexdigest()
    (folder / "generation_config.json").write_text("{}")
    check = _check(folder, public)
    assert check.status == "failed"
    assert (f"generation_config.json has SHA-256 {hashlib.sha256(b'{}').hexdigest()} but the signature states "
            f"{before}") in check.reason
    assert "b'" not in check.reason and "\\x" not in check.reason


@pytest.mark.parametrize("make, reason", [
    (lambda sig: (sig.unlink(), sig.mkdir()), "model.sig is not a regular file"),
    (lambda sig: sig.write_bytes(sig.read_bytes()[:100]), "model.sig is not a Sigstore bundle of a model-signing "
                                                          "statement .JSONDecodeError"),
    (lambda sig: sig.write_text('{"dsseEnvelope": {"payload": "not base64!"}}'), "model.sig is not a Sigstore bundle"),
])
def test_a_signature_file_that_is_no_bundle_fails_with_the_reason(signed, make, reason):
    """A folder named model.sig read as 'unsigned' (which ci accepts); a truncated bundle gave the JSON decoder's
    message alone."""
    folder, public, _ = signed
    make(folder / "model.sig")
    check = _check(folder, public)
    assert check.status == "failed"
    import re

    assert re.search(reason, check.reason), check.reason


def test_a_library_message_loses_its_byte_literals():
    from certa.engine.core.models.signature import _library_detail

    detail = _library_detail(ValueError("""Signature mismatch: ["Expected 'Digest(digest_value=b'7T\\\\xe0\\\\x9d')'"]"""))
    assert detail == """Signature mismatch: ["Expected 'Digest(digest_value=<bytes>)'"]"""
    assert _library_detail(ValueError("")).startswith("the envelope's signature is not valid")


# Certificate and Sigstore modes: a local certificate authority made here with ``cryptography``, nothing fetched.

def _certificate(subject: str, key, issuer: str, issuer_key, *, authority: bool):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    usage = dict(digital_signature=not authority, content_commitment=False, key_encipherment=False,
                 data_encipherment=False, key_agreement=False, key_cert_sign=authority, crl_sign=authority,
                 encipher_only=False, decipher_only=False)
    return (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=authority, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(**usage), critical=True).sign(issuer_key, hashes.SHA256()))


def _authority(folder: Path, name: str) -> tuple[Path, object, object]:
    """A self-signed root certificate authority: (its PEM file, its certificate, its key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    root = _certificate(name, key, name, key, authority=True)
    (folder / f"{name}.pem").write_bytes(root.public_bytes(serialization.Encoding.PEM))
    return folder / f"{name}.pem", root, key


@pytest.fixture
def certificate_signed(tiny_models, tmp_path):
    """A model signed in model-signing's certificate mode by a leaf of a local root CA: (folder, root PEM, leaf)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = Path(shutil.copytree(tiny_models["baseline"], tmp_path / "certified"))
    root_file, _, root_key = _authority(tmp_path, "certa test root")
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _certificate("model signer", key, "certa test root", root_key, authority=False)
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"])
    model_signing.signing.Config().use_certificate_signer(
        private_key=tmp_path / "leaf.key", signing_certificate=tmp_path / "leaf.pem",
        certificate_chain=[root_file]).set_hashing_config(hashing).sign(folder, folder / "model.sig")
    return folder, root_file, leaf


def test_a_certificate_signed_model_verifies_against_its_chain_and_records_the_signer(certificate_signed, tmp_path):
    """Why: certa only called the elliptic-key verifier, so a model signed in certificate mode (as NVIDIA signs
    its catalogue) failed even with the right trust."""
    import hashlib

    from cryptography.hazmat.primitives import serialization

    folder, root_file, leaf = certificate_signed
    check = _check(folder, SignatureTrust("certificate", certificate_chain=(root_file,)))
    assert check.status == "verified", check.reason
    root_der = x509_der(root_file)
    leaf_key = leaf.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)
    assert check.record() == {"status": "verified", "public_key_sha256": hashlib.sha256(leaf_key).hexdigest(),
                              "signature_sha256": hashlib.sha256((folder / "model.sig").read_bytes()).hexdigest(),
                              "mode": "certificate", "signer": "CN=model signer",
                              "chain_sha256": [hashlib.sha256(root_der).hexdigest()]}
    other_root, _, _ = _authority(tmp_path, "another root")
    refused = _check(folder, SignatureTrust("certificate", certificate_chain=(other_root,)))
    assert refused.status == "failed" and refused.reason.startswith("the signature does not verify: ")
    # OpenSSL's words, through the library: the bundle carries its own root, which the spec does not trust
    assert refused.reason == "the signature does not verify: self-signed certificate in certificate chain"
    (folder / "generation_config.json").write_text("{}")
    changed = _check(folder, SignatureTrust("certificate", certificate_chain=(root_file,)))
    assert changed.status == "failed" and "generation_config.json has SHA-256" in changed.reason


def x509_der(pem_file: Path) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    return x509.load_pem_x509_certificate(pem_file.read_bytes()).public_bytes(serialization.Encoding.DER)


def test_a_bundle_checked_in_another_mode_says_which_mode_signed_it(certificate_signed, signed):
    """The issue's case: a certificate-mode signature checked with a key failed with "'NoneType' object has no
    attribute 'hint'"; certa names the mode it was signed in and what to write in the spec."""
    folder, root_file, _ = certificate_signed
    with_key = _check(folder, signed[1])
    assert with_key.status == "failed" and "hint" not in with_key.reason
    assert with_key.reason == ("model.sig was signed in certificate mode but the spec names a key signer; name what "
                               "signed it: signature: {certificate_chain: [CA.pem]}")
    key_signed = _check(signed[0], SignatureTrust("certificate", certificate_chain=(root_file,)))
    assert key_signed.reason.startswith("model.sig was signed in key mode but the spec names a certificate signer")
    unreadable = _check(folder, SignatureTrust("certificate", certificate_chain=(folder / "config.json",)))
    assert unreadable.status == "failed" and unreadable.reason.startswith("a certificate trust file cannot be read")


def _sigstore_trust_config(folder: Path, root) -> Path:
    """A Sigstore ClientTrustConfig whose Fulcio is ``root`` and whose logs have a throw-away key."""
    import base64
    import hashlib
    import json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    log_key = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    log = {"baseUrl": "https://rekor.invalid", "hashAlgorithm": "SHA2_256", "logId": {"keyId": b64(hashlib.sha256(log_key).digest())},
           "publicKey": {"rawBytes": b64(log_key), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                         "validFor": {"start": "2020-01-01T00:00:00Z"}}}
    authority = {"subject": {"organization": "certa", "commonName": "test"}, "uri": "https://fulcio.invalid",
                 "certChain": {"certificates": [{"rawBytes": b64(root.public_bytes(serialization.Encoding.DER))}]},
                 "validFor": {"start": "2020-01-01T00:00:00Z"}}
    config = {"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
              "trustedRoot": {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                              "tlogs": [log], "ctlogs": [log], "certificateAuthorities": [authority],
                              "timestampAuthorities": []},
              "signingConfig": {"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json", "caUrls": [],
                                "oidcUrls": [], "rekorTlogUrls": [], "tsaUrls": [],
                                "rekorTlogConfig": {"selector": "ANY"}, "tsaConfig": {"selector": "ANY"}}}
    (folder / "trust_config.json").write_text(json.dumps(config))
    return folder / "trust_config.json"


def test_a_sigstore_check_uses_the_trust_config_given_and_fetches_nothing(certificate_signed, tmp_path, monkeypatch):
    """A Sigstore bundle (a certificate, no key hint) checked with a trust configuration file: sigstore-python's
    verifier runs with the network cut and refuses a bundle without a transparency-log entry in its own words;
    the record names the identity, issuer and trust file. (A bundle that verifies: the next tests.)"""
    import hashlib
    import json
    import socket

    folder, root_file, _ = certificate_signed
    bundle = json.loads((folder / "model.sig").read_text())
    leaf = bundle["verificationMaterial"]["x509CertificateChain"]["certificates"][0]
    bundle["verificationMaterial"] = {"certificate": leaf, "tlogEntries": []}
    (folder / "model.sig").write_text(json.dumps(bundle))
    from cryptography import x509

    trust_file = _sigstore_trust_config(tmp_path, x509.load_pem_x509_certificate(root_file.read_bytes()))

    def no_network(*args, **kwargs):
        raise AssertionError("a signature check opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    trust = SignatureTrust("sigstore", identity="release@example.org", issuer="https://accounts.example.org",
                           trust_config=trust_file)
    check = _check(folder, trust)
    assert check.status == "failed" and check.reason == ("the signature does not verify: expected exactly one log "
                                                         "entry in bundle")
    record = check.record()
    assert {k: record[k] for k in ("mode", "signer", "issuer", "trust_config_sha256")} == {
        "mode": "sigstore", "signer": "release@example.org", "issuer": "https://accounts.example.org",
        "trust_config_sha256": hashlib.sha256(trust_file.read_bytes()).hexdigest()}
    assert _check(folder, SignatureTrust("certificate", certificate_chain=(root_file,))).reason.startswith(
        "model.sig was signed in sigstore mode but the spec names a certificate signer; name what signed it: "
        "signature: {sigstore: {identity: ..., issuer: ..., trust_config: FILE.json}}")


IDENTITY, ISSUER = "release@example.org", "https://accounts.example.org"


@pytest.fixture
def sigstore_signed(tiny_models, tmp_path):
    """A model signed with a Sigstore bundle made here (tests/sigstore_support.py): (folder, the parties, the trust
    configuration file, the signing certificate's PEM file)."""
    from tests.sigstore_support import SigstoreParties, sign_with_sigstore

    parties = SigstoreParties.make()
    folder = Path(shutil.copytree(tiny_models["baseline"], tmp_path / "sigstored"))
    leaf_file = sign_with_sigstore(folder, tmp_path, parties, IDENTITY, ISSUER)
    return folder, parties, parties.trust_config(tmp_path / "sigstore_trust.json"), leaf_file


def _cut_network(monkeypatch) -> None:
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("a signature check opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)


def test_a_sigstore_bundle_verifies_offline_and_the_record_says_what_was_checked(sigstore_signed, monkeypatch):
    """Why: Sigstore mode was only ever refused offline. A bundle with a Fulcio-style certificate (an embedded
    SCT), a Rekor entry with its signed entry timestamp and inclusion proof, all made here, verifies against the
    trust configuration file with the network cut; the record states the chain's root, the log entry and the
    checks."""
    import datetime
    import hashlib

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from certa.engine.core.models.signature import SIGSTORE_CHECKS

    folder, parties, trust_file, leaf_file = sigstore_signed
    _cut_network(monkeypatch)
    check = _check(folder, SignatureTrust("sigstore", identity=IDENTITY, issuer=ISSUER, trust_config=trust_file))
    assert check.status == "verified", check.reason
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    leaf_key = x509.load_pem_x509_certificate(leaf_file.read_bytes()).public_key().public_bytes(
        serialization.Encoding.DER, spki)
    rekor_key = parties.rekor_key.public_key().public_bytes(serialization.Encoding.DER, spki)
    assert check.record() == {
        "status": "verified", "public_key_sha256": hashlib.sha256(leaf_key).hexdigest(),
        "signature_sha256": hashlib.sha256((folder / "model.sig").read_bytes()).hexdigest(),
        "mode": "sigstore", "signer": IDENTITY, "issuer": ISSUER,
        "trust_config_sha256": hashlib.sha256(trust_file.read_bytes()).hexdigest(),
        "chain_sha256": [hashlib.sha256(parties.root.public_bytes(serialization.Encoding.DER)).hexdigest()],
        "log_entry": {"log_id": hashlib.sha256(rekor_key).hexdigest(), "log_index": 1,
                      "integrated_time": parties.now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "checked": list(SIGSTORE_CHECKS)}


def _tampered_promise(folder: Path) -> None:
    import base64
    import json

    bundle = json.loads((folder / "model.sig").read_text())
    promise = bundle["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]
    promise["signedEntryTimestamp"] = base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode()
    (folder / "model.sig").write_text(json.dumps(bundle))


@pytest.mark.parametrize(("case", "reason"), [
    ("identity", "Certificate's SANs do not match someone@example.org"),
    ("issuer", "Certificate's OIDCIssuer does not match"),
    ("root", "failed to build timestamp certificate chain"),
    ("ct_log", "failed to verify SCT on signing certificate"),
    ("rekor", "invalid log entry: checkpoint: invalid signature"),
    ("promise", "invalid log entry: SET: invalid inclusion promise"),
])
def test_a_sigstore_bundle_fails_on_each_thing_it_does_not_match(sigstore_signed, tmp_path, monkeypatch, case, reason):
    """Each check the record names can fail: another identity or issuer, a trust configuration with another
    Fulcio root, CT log key or Rekor key, a signed entry timestamp that is not the log's."""
    import dataclasses

    from tests.sigstore_support import SigstoreParties

    folder, parties, trust_file, _ = sigstore_signed
    other = SigstoreParties.make()
    swapped = {"root": dict(root=other.root, root_key=other.root_key), "ct_log": dict(ct_key=other.ct_key),
               "rekor": dict(rekor_key=other.rekor_key)}
    if case in swapped:
        trust_file = dataclasses.replace(parties, **swapped[case]).trust_config(tmp_path / f"{case}.json")
    if case == "promise":
        _tampered_promise(folder)
    _cut_network(monkeypatch)
    trust = SignatureTrust("sigstore", identity="someone@example.org" if case == "identity" else IDENTITY,
                           issuer="https://other.example.org" if case == "issuer" else ISSUER, trust_config=trust_file)
    check = _check(folder, trust)
    assert check.status == "failed" and check.reason.startswith("the signature does not verify: ")
    assert reason in check.reason
    assert "log_entry" not in check.record() and "checked" not in check.record()


def test_a_ci_run_naming_the_sigstore_identity_certifies_the_model_and_records_the_check(sigstore_signed, tmp_path):
    """The ci profile accepts the verified model; the certificate (model.windows 1.2.0, its output schema checked)
    carries the record."""
    from certa.engine import run

    _, _, trust_file, _ = sigstore_signed
    signature = f'{{sigstore: {{identity: "{IDENTITY}", issuer: "{ISSUER}", trust_config: {trust_file.name}}}}}'
    certificate = run(_spec(tmp_path, "ci", None, signature=signature, model="sigstored")).certificate
    record = certificate["content"]["stages"]["w"]["models"]["subject"]["signature"]
    assert (record["status"], record["mode"], record["signer"], record["log_entry"]["log_index"]) == (
        "verified", "sigstore", IDENTITY, 1)


def test_a_spec_names_a_certificate_chain_and_ci_accepts_the_verified_model(certificate_signed, tmp_path):
    _, root_file, _ = certificate_signed
    chain = f'{{certificate_chain: ["{root_file.name}"]}}'
    spec = _spec(tmp_path, "ci", None, signature=chain, model="certified")
    record = load_tables(load_plan(spec))["base"].signature.record()
    assert (record["status"], record["mode"], record["signer"]) == ("verified", "certificate", "CN=model signer")
    from certa.engine.foundation.errors import SpecError

    both = spec.read_text().replace("certificate_chain:", "public_key: k.pem, certificate_chain:")
    with pytest.raises(SpecError, match="signature"):
        load_plan(write_spec(tmp_path, both))


def test_a_run_records_the_certificate_check_and_an_older_stage_version_refuses_it(certificate_signed, tmp_path):
    """model.windows 1.2.0's output schema states the mode and signer; 1.0.0 and 1.1.0 (frozen) record a key
    signature only and refuse a certificate-signed model rather than drop what was checked."""
    from certa.engine import run
    from certa.engine.foundation.errors import StageError

    _, root_file, _ = certificate_signed
    for version in ("", "@1.1.0"):
        spec = _spec(tmp_path, "dev", None, signature=f'{{certificate_chain: ["{root_file.name}"]}}',
                     model="certified", use=f"model.windows{version}")
        if version:
            with pytest.raises(StageError, match=r"'base' \(baseline\) is signed in certificate mode; model.windows "
                                                 r"1.1.0 records key signatures only"):
                run(spec)
        else:
            record = run(spec).certificate["content"]["stages"]["w"]["models"]["subject"]["signature"]
            assert (record["status"], record["mode"], record["signer"]) == ("verified", "certificate",
                                                                            "CN=model signer")


@pytest.mark.browser
def test_the_report_names_who_signed_a_certificate_signed_model(certificate_signed, tmp_path):
    """The HTML report's Models table and its reading say who signed (headless Chromium; the screenshot is
    report.png in the test's folder)."""
    from click.testing import CliRunner

    from certa.cli import main
    from tests.browser_support import browser, missing_browser_reason, open_page, save_screenshot

    if missing_browser_reason() is not None:
        pytest.skip(missing_browser_reason() or "")
    _, root_file, _ = certificate_signed
    spec = _spec(tmp_path, "dev", None, signature=f'{{certificate_chain: ["{root_file.name}"]}}', model="certified")
    db, report = str(tmp_path / "ledger.db"), tmp_path / "report.html"
    assert CliRunner().invoke(main, ["run", str(spec), "--ledger", db]).exit_code == 0
    assert CliRunner().invoke(main, ["report", "latest", "-o", str(report), "--ledger", db]).exit_code == 0
    with browser() as context:
        page, log = open_page(context, report)
        row = page.locator("tr", has=page.locator("th, td", has_text="signature")).first
        row.scroll_into_view_if_needed()
        assert log.console_errors == [] and log.network_requests == []
        assert row.inner_text().split("\t")[1:] == ["verified (certificate CN=model signer)"] * 2
        assert "baseline verified (certificate CN=model signer)" in page.inner_text("body")
        page.evaluate("window.scrollTo(0, 0)")
        save_screenshot(page, tmp_path / "report.png", max_height=4000)
