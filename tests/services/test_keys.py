"""Keys as people use them (certa.engine.services.keys, ``certa keygen --passphrase-env``): an encrypted private key
written with mode 0600 and opened by every ``--key`` command with ``CERTA_KEY_PASSPHRASE``; a missing or wrong
passphrase is a one-line error naming that variable, with exit code 2, and the passphrase is never printed.

The encrypted file is read back with ``cryptography`` directly (not certa's loader): it is a PKCS#8
EncryptedPrivateKeyInfo that the passphrase, and only it, opens, and its public key is the one written beside it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization

from certa.cli import main
from certa.engine.foundation.errors import SigningError
from certa.engine.foundation.signing import generate_key_pair, key_id, load_private_key, load_public_key
from certa.engine.services.keys import PASSPHRASE_VARIABLE, create_key_pair, private_keys
from certa.ledger import Ledger

PASSPHRASE = "correct horse battery staple"


def _invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def _shows_no_secret(result: Result) -> None:
    assert "Traceback" not in result.output and "correct horse" not in result.output, result.output


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_keygen_encrypts_the_private_key_with_the_passphrase_in_the_named_variable(tmp_path: Path,
                                                                                   as_json: bool) -> None:
    made = _invoke("keygen", "--out-dir", str(tmp_path), "--name", "alice", "--passphrase-env", "ALICE_PASS",
                   *(["--json"] if as_json else []), env={"ALICE_PASS": PASSPHRASE})
    assert made.exit_code == 0, made.output
    _shows_no_secret(made)
    private, public = tmp_path / "alice.key", tmp_path / "alice.pub"
    pem = private.read_bytes()
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") and private.stat().st_mode & 0o777 == 0o600
    with pytest.raises(TypeError):  # cryptography itself: it needs a passphrase
        serialization.load_pem_private_key(pem, password=None)
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(pem, password=b"correct horse battery")
    opened = serialization.load_pem_private_key(pem, password=PASSPHRASE.encode())
    written = load_public_key(public.read_bytes())
    assert key_id(opened.public_key()) == key_id(written)  # type: ignore[arg-type]
    if as_json:
        assert json.loads(made.stdout) == {"ok": True, "private_key": str(private), "public_key": str(public),
                                           "key_id": key_id(written), "encrypted": True}
    else:
        assert f"encrypted: commands open it with the passphrase in {PASSPHRASE_VARIABLE}" in made.stdout


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_openssl_opens_the_encrypted_key_with_the_passphrase_and_only_with_it(tmp_path: Path) -> None:
    made = _invoke("keygen", "--out-dir", str(tmp_path), "--passphrase-env", "PASS", env={"PASS": PASSPHRASE})
    assert made.exit_code == 0, made.output

    def public_key(passphrase: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["openssl", "pkey", "-in", str(tmp_path / "certa.key"), "-passin", "env:PASS",
                               "-pubout"], env={"PASS": passphrase}, capture_output=True, timeout=30, check=False)

    assert public_key(PASSPHRASE).stdout == (tmp_path / "certa.pub").read_bytes()
    assert public_key("correct horse").returncode != 0


def test_keygen_without_passphrase_writes_a_plain_key_as_before(tmp_path: Path) -> None:
    made = create_key_pair(tmp_path, "plain")
    assert not made.encrypted and made.as_json()["encrypted"] is False and "keep it secret" in made.text()
    assert made.private_key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_keygen_refuses_an_unset_or_empty_passphrase_variable_and_writes_nothing(tmp_path: Path,
                                                                                 value: str | None) -> None:
    env = {"ALICE_PASS": value} if value is not None else {}
    for as_json in ([], ["--json"]):
        refused = _invoke("keygen", "--out-dir", str(tmp_path / "keys"), "--passphrase-env", "ALICE_PASS", *as_json,
                          env={**env, "CERTA_KEY_PASSPHRASE": PASSPHRASE})
        assert refused.exit_code == 2 and "ALICE_PASS" in refused.stderr and PASSPHRASE_VARIABLE in refused.stderr
        _shows_no_secret(refused)
    assert not (tmp_path / "keys").exists()


@pytest.fixture
def encrypted_key(tmp_path: Path) -> tuple[Path, str]:
    """An encrypted private key file and its key id."""
    private_pem, public_pem = generate_key_pair(PASSPHRASE.encode())
    path = tmp_path / "officer.key"
    path.write_bytes(private_pem)
    return path, key_id(load_public_key(public_pem))


def test_an_encrypted_key_opens_with_certa_key_passphrase_and_a_plain_one_ignores_it(
        encrypted_key: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = encrypted_key
    plain = create_key_pair(tmp_path, "ci")
    monkeypatch.setenv(PASSPHRASE_VARIABLE, PASSPHRASE)
    opened = private_keys([path, plain.private_key])
    assert [key_id(key.public_key()) for key in opened] == [expected, plain.key_id]


@pytest.mark.parametrize(("value", "says"), [(None, "it is encrypted and CERTA_KEY_PASSPHRASE is not set"),
                                             ("", "it is encrypted and CERTA_KEY_PASSPHRASE is not set"),
                                             ("correct horse", "CERTA_KEY_PASSPHRASE does not open the encrypted key")],
                         ids=["unset", "empty", "wrong"])
def test_a_missing_or_wrong_passphrase_is_named_by_its_variable(encrypted_key: tuple[Path, str], value: str | None,
                                                                says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = encrypted_key
    monkeypatch.delenv(PASSPHRASE_VARIABLE, raising=False)
    if value is not None:
        monkeypatch.setenv(PASSPHRASE_VARIABLE, value)
    with pytest.raises(SigningError) as raised:
        private_keys([path])
    assert str(raised.value) == f"cannot read the signing key {path}: {says}" + (
        " (a wrong passphrase, or a damaged key file)" if value else " (set it to the key's passphrase)")
    assert raised.value.exit_code == 2


def test_an_empty_passphrase_encrypts_nothing() -> None:
    with pytest.raises(SigningError, match="empty passphrase"):
        generate_key_pair(b"")


def test_a_key_that_is_not_a_key_is_still_named() -> None:
    with pytest.raises(SigningError, match="cannot read the signing key"):
        load_private_key(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("value", [None, "correct horse"], ids=["missing", "wrong"])
def test_a_key_command_reports_the_passphrase_in_one_line(encrypted_key: tuple[Path, str], tmp_path: Path,
                                                          value: str | None, as_json: bool) -> None:
    db = tmp_path / "ledger.db"
    with Ledger.open(db):
        pass
    env: dict[str, str | None] = {PASSPHRASE_VARIABLE: value}  # None: unset
    result = _invoke("checkpoint", "--key", str(encrypted_key[0]), "--ledger", str(db),
                     *(["--json"] if as_json else []), env=env)
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
    _shows_no_secret(result)
    assert len(result.stderr.splitlines()) == 1 and PASSPHRASE_VARIABLE in result.stderr, result.stderr
    if as_json:
        assert json.loads(result.stdout)["error"]["type"] == "SigningError"
    opened = _invoke("checkpoint", "--key", str(encrypted_key[0]), "--ledger", str(db),
                     env={PASSPHRASE_VARIABLE: PASSPHRASE})
    assert opened.exit_code == 0, opened.output
