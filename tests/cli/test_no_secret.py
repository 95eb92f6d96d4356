"""No secret printed, anywhere: every ``certa`` command, given a ledger URL with a password (in ``--ledger`` and
in ``CERTA_LEDGER``) and a key passphrase (``CERTA_KEY_PASSPHRASE``), prints neither on stdout or stderr, in
``--json`` output or in any file it writes; and never a traceback.

Each command gets the arguments it needs to get as far as it can without a database server:

- ``sqlite``: ``--ledger`` names a SQLite ledger holding two runs, while ``CERTA_LEDGER`` holds the URL with
  the password (the command runs to its end and writes its files);
- ``url``: ``--ledger`` is the URL with the password, a PostgreSQL server on a closed loopback port (the
  connect path and its error message);
- ``env``: no ``--ledger``: ``CERTA_LEDGER`` is that URL (the commands without ``--ledger`` run here, to their
  end);
- ``bad-url``: ``--ledger`` is a malformed URL with the password (the URL parser's error);
- ``help``: ``COMMAND --help`` with the environment set.

With ``CERTA_TEST_POSTGRES_URL`` (a server that trusts loopback connections, as ``.ci/run`` starts), every
command that opens a ledger also runs to its end on a PostgreSQL ledger named by a URL with a password, given
in ``--ledger`` or only in ``CERTA_LEDGER``.

``certa batch`` is given a spec certa refuses, so that it reports without starting a Dask cluster.
``test_the_check_finds_a_printed_password`` proves that the check fails when a command prints the password.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization
from sqlalchemy.engine import make_url

from certa import cli
from certa.cli import main
from certa.engine import run
from certa.engine.core.tables import columns_to_csv_bytes
from certa.ledger import Ledger
from certa.engine.foundation.signing import generate_key_pair, load_private_key

from tests.conftest import SMALL_SPEC, fresh_postgres_databases, window_columns

PASSWORD = "Hunter2%40Sekret"  # URL-encoded: the database sees 'Hunter2@Sekret'
PASSPHRASE = "OpenSesame-passphrase"
SECRETS = ("Hunter2", "Sekret", "OpenSesame")
SECRET_URL = f"postgresql+psycopg://certa:{PASSWORD}@127.0.0.1:9/ledger"  # port 9 (discard): nothing listens
MALFORMED_URL = f"postgresql+psycopg://certa:{PASSWORD}@127.0.0.1:notaport/ledger"
ENVIRONMENT = {"CERTA_LEDGER": SECRET_URL, "CERTA_KEY_PASSPHRASE": PASSPHRASE}


@dataclass(frozen=True)
class World:
    """A ledger with two runs (``ledger``: as ``--ledger`` names it; ``files``: its files, for a SQLite one)
    and the files the commands read: spec, keys, a checkpoint of that ledger, a bundle and an attestation of
    its first run, a spec certa refuses."""

    root: Path
    ledger: str
    files: tuple[Path, ...]
    spec: Path
    bad_spec: Path
    first: str
    second: str
    key: Path
    pub: Path
    cosigner: Path
    checkpoint: Path
    bundle: Path
    attestation: Path


def _invoke(args: list[str], environment: dict[str, str] = ENVIRONMENT) -> Result:
    return CliRunner().invoke(main, args, env=environment)


def _encrypted_key_pair(key: Path) -> bytes:
    """Write a new private key, encrypted with ``PASSPHRASE``, to ``key``; return its public key (PEM)."""
    private_pem, public_pem = generate_key_pair()
    key.write_bytes(load_private_key(private_pem).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(PASSPHRASE.encode())))
    return public_pem


def _world(root: Path, ledger: str, files: tuple[Path, ...] = ()) -> World:
    """Two runs recorded in ``ledger`` and the files of ``World`` under ``root``."""
    (root / "spec" / "data").mkdir(parents=True)
    baseline, subject = window_columns(60, seed=3)
    (root / "spec" / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(baseline))
    (root / "spec" / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subject))
    spec = root / "spec" / "spec.yaml"
    spec.write_text(SMALL_SPEC, encoding="utf-8")
    bad_spec = root / "bad" / "spec.yaml"
    bad_spec.parent.mkdir()
    bad_spec.write_text("certa: 1\nname: refused\nseed: 7\nstages: [\n", encoding="utf-8")
    with Ledger.open(ledger) as store:
        first, second = run(spec, ledger=store).run_id, run(spec, ledger=store).run_id
    key, pub, cosigner = root / "signer.key", root / "signer.pub", root / "cosigner.key"
    pub.write_bytes(_encrypted_key_pair(key))
    _encrypted_key_pair(cosigner)
    checkpoint, bundle, attestation = root / "head.checkpoint", root / "run.bundle.json", root / "run.intoto.json"
    for args in (["checkpoint", "--key", str(key), "--out", str(checkpoint)],
                 ["prove", first, "--checkpoint", str(checkpoint), "-o", str(bundle)],
                 ["attest", first, "--key", str(key), "-o", str(attestation)]):
        made = _invoke([*args, "--ledger", ledger])
        assert made.exit_code == 0, made.output
    return World(root, ledger, files, spec, bad_spec, first, second, key, pub, cosigner, checkpoint, bundle,
                 attestation)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """A SQLite ledger."""
    root = tmp_path_factory.mktemp("no-secret")
    return _world(root, str(root / "ledger.db"), (root / "ledger.db", root / "ledger.db-wal"))


@pytest.fixture(scope="module")
def pg_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A PostgreSQL ledger on the test server, named by a URL with a password (the test server trusts
    loopback connections, so any password is accepted and the commands run to their end)."""
    with fresh_postgres_databases("secret checks") as new_database:
        url = make_url(new_database())
        if url.password is not None:
            pytest.skip("CERTA_TEST_POSTGRES_URL has a password of its own: this check needs a server that "
                        "trusts loopback connections")
        ledger = url.set(password=unquote(PASSWORD)).render_as_string(hide_password=False)
        yield _world(tmp_path_factory.mktemp("no-secret-pg"), ledger)


def _arguments(command: str, w: World, out: Path) -> list[str]:
    """What ``command`` needs to get as far as it can; ``out`` is a new folder for the files it writes."""
    key, pub = str(w.key), str(w.pub)
    return {
        "validate": [str(w.spec)],
        "run": [str(w.spec), "-o", str(out / "cert.json"), "--junit", str(out / "junit.xml")],
        "register": [str(w.spec), "--key", key, "--out", str(out / "registered.checkpoint")],
        "verify": ["--require-approval", pub],
        "replay": [w.first],
        "migrate": [],
        "show": [w.first, "--explain"],
        "decisions": [w.first, "--limit", "1"],
        "list": [],
        "export": [w.first, "-o", str(out / "cert.json")],
        "diff": [w.first, w.second],
        "head": [],
        "checkpoint": ["--key", key, "--out", str(out / "head.checkpoint")],
        "cosign": [str(w.checkpoint), "--public-key", pub, "--key", str(w.cosigner),
                   "--out", str(out / "cosigned.checkpoint")],
        "prove": [w.first, "--checkpoint", str(w.checkpoint), "-o", str(out / "bundle.json")],
        "attest": [w.first, "--key", key, "-o", str(out / "attestation.json")],
        "verify-attestation": [str(w.attestation), "--public-key", pub, "--file", str(w.spec)],
        "verify-bundle": [str(w.bundle), "--public-key", pub],
        "keygen": ["--out-dir", str(out / "keys")],
        "batch": [str(w.bad_spec), "--junit", str(out / "junit.xml")],
        "report": [w.first, "-o", str(out / "run.html")],
        "site": ["-o", str(out / "site"), "--jobs", "1"],
        "review": [w.first, "--by", "alice", "--decision", "comment", "--key", key],
        "stages": [],
    }[command]


def _takes_ledger(command: str) -> bool:
    return any(param.name == "ledger_url" for param in main.commands[command].params)


SCENARIOS = {"sqlite": lambda w: ["--ledger", w.ledger], "url": lambda w: ["--ledger", SECRET_URL],
             "env": lambda w: [], "bad-url": lambda w: ["--ledger", MALFORMED_URL]}
"""The ledger arguments of each scenario (``CERTA_LEDGER`` is ``SECRET_URL``); ``help`` is ``--help``."""


def _cases() -> list[Any]:
    cases = []
    for command in sorted(main.commands):
        scenarios = list(SCENARIOS) if _takes_ledger(command) else ["env"]
        cases += [pytest.param(command, scenario, as_json, id=f"{command}-{scenario}{'-json' if as_json else ''}")
                  for scenario in scenarios for as_json in (False, True)]
        cases.append(pytest.param(command, "help", False, id=f"{command}-help"))
    return cases


def _leaks(result: Result, files: Iterable[Path]) -> list[str]:
    """Where a secret shows: the lines of stdout and stderr, and ``files``."""
    found = [f"{stream}: {line.strip()}" for stream, text in (("stdout", result.stdout), ("stderr", result.stderr))
             for line in text.splitlines() if any(secret in line for secret in SECRETS)]
    return found + [f"file {path}" for path in files
                    if path.is_file() and any(s.encode() in path.read_bytes() for s in SECRETS)]


def _check(command: str, args: list[str], w: World, out: Path,
           environment: dict[str, str] = ENVIRONMENT) -> Result:
    """Run ``certa COMMAND ARGS``: no traceback, no secret printed or written (``out``, the ledger's files)."""
    result = _invoke([command, *args], environment)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"certa {command} raised {result.exception!r}")
    leaks = _leaks(result, [*out.rglob("*"), *w.files])
    assert not leaks, f"certa {' '.join([command, *args])} shows a secret: {leaks}"
    return result


def test_every_command_is_covered(world: World) -> None:
    out = world.root / "coverage"
    out.mkdir()
    for command in main.commands:
        try:
            _arguments(command, world, out)
        except KeyError:
            pytest.fail(f"certa {command} is not checked: give it its arguments in _arguments")


@pytest.mark.parametrize(("command", "scenario", "as_json"), _cases())
def test_no_command_prints_a_secret(command: str, scenario: str, as_json: bool, world: World,
                                    tmp_path: Path) -> None:
    args = ["--help"] if scenario == "help" else [*_arguments(command, world, tmp_path), *SCENARIOS[scenario](world),
                                                  *(["--json"] if as_json else [])]
    result = _check(command, args, world, tmp_path)
    if scenario in ("url", "bad-url", "env") and _takes_ledger(command):
        assert result.exit_code == 2 and "***" in result.stderr, result.output  # the masked URL is named
    if scenario == "sqlite" and command not in ("verify", "batch"):
        assert result.exit_code == 0, result.output  # it ran to its end


@pytest.mark.postgres
@pytest.mark.parametrize("given", ["--ledger", "CERTA_LEDGER"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_no_command_prints_the_password_of_a_reachable_postgresql_ledger(given: str, as_json: bool, pg_world: World,
                                                                        tmp_path: Path) -> None:
    """Every command that opens a ledger, run to its end on PostgreSQL (the URL's password in ``--ledger``, or
    only in ``CERTA_LEDGER``, when the hints certa prints name no ``--ledger``)."""
    environment = {**ENVIRONMENT, "CERTA_LEDGER": pg_world.ledger}
    for command in sorted(name for name in main.commands if _takes_ledger(name)):
        out = tmp_path / command
        out.mkdir()
        args = [*_arguments(command, pg_world, out), *(["--ledger", pg_world.ledger] if given == "--ledger" else []),
                *(["--json"] if as_json else [])]
        result = _check(command, args, pg_world, out, environment)
        assert result.exit_code == (2 if command == "batch" else 1 if command == "verify" else 0), result.output


@pytest.mark.parametrize("command", ["checkpoint", "attest", "review", "cosign"])
def test_a_wrong_key_passphrase_is_not_printed(command: str, world: World, tmp_path: Path) -> None:
    wrong = {**ENVIRONMENT, "CERTA_KEY_PASSPHRASE": "OpenSesame-wrong"}
    args = [*_arguments(command, world, tmp_path), "--ledger", world.ledger]
    for as_json in ([], ["--json"]):
        result = _check(command, [*args, *as_json], world, tmp_path, wrong)
        assert result.exit_code == 2 and "cannot read the signing key" in result.output, result.output


def test_the_check_finds_a_printed_password(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened = cli._open

    def leaky_open(ledger_url: str, **kwargs: Any) -> Ledger:
        cli.click.echo(f"opening {ledger_url}", err=True)  # a careless debug line
        return opened(ledger_url, **kwargs)

    monkeypatch.setattr(cli, "_open", leaky_open)
    with pytest.raises(AssertionError, match="shows a secret: .*stderr: opening postgresql"):
        _check("head", ["--ledger", SECRET_URL], world, tmp_path)
