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
from certa.engine.core.models.signature import check_signature
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


def _check(folder: Path, key: Path | None):
    return check_signature(folder, folder_manifest("m", folder, InputLimits()), key)


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


def _spec(tmp_path: Path, profile: str, key: str | None) -> Path:
    (tmp_path / "text.jsonl").write_text('{"text": "a b c"}\n')
    signature = f", signature: {{public_key: {key}}}" if key else ""
    return write_spec(tmp_path, f"""\
        certa: 1
        name: signed
        seed: 1
        profile: {profile}
        inputs:
          base: {{model: model{signature}}}
          text: {{path: text.jsonl}}
        stages:
          - {{id: w, use: model.windows, with: {{baseline: base, subject: base, text: text}}}}
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
