"""certa's errors are one tree under ``CertaError`` in ``certa.engine.foundation.errors``: every class is documented,
carries an exit code the README's error table states, and is raised somewhere; the signing, attestation and
bundle errors reach the command with their own name and code."""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import certa.engine.foundation.errors as errors
from certa.cli import main
from certa.engine.core.stages import REGISTRY
from certa.engine.foundation.errors import CertaError, SpecError, UnknownStage
from certa.engine.foundation.signing import generate_key_pair, load_private_key, seal_envelope
from certa.engine.services.attestation import PAYLOAD_TYPE

from tests.conftest import ROOT
from tests.source_nodes import source_nodes

SOURCES = (*sorted((ROOT / "engine").rglob("*.py")), *sorted((ROOT / "ledger").rglob("*.py")), ROOT / "cli.py",
           ROOT / "__init__.py", ROOT / "__main__.py")


def _subclasses(base: type[CertaError]) -> list[type[CertaError]]:
    """Every subclass of ``base``, recursively, in definition order of the tree."""
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


ERRORS = _subclasses(CertaError)


def _readme_error_table() -> dict[str, int]:
    """``{class name: exit code}`` from the README's table of errors (header ``| error | exit | meaning |``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| error | exit | meaning |"):].split("\n\n", 1)[0]
    rows = [re.fullmatch(r"\| `(\w+)` \| (\d+) \| .+ \|", line) for line in table.splitlines()[2:]]
    assert all(rows), table
    return {row[1]: int(row[2]) for row in rows if row}


@functools.cache
def _class_and_raise_nodes() -> dict[Path, list[ast.AST]]:
    """Each source's class definitions and raise statements, from one parse and one walk of it (both tests below
    read them)."""
    return {path: [node for node in source_nodes(path) if isinstance(node, (ast.ClassDef, ast.Raise))]
            for path in SOURCES}


def _raised_names(nodes: list[ast.AST]) -> set[str]:
    """Names of the classes ``raise Name(...)`` (or ``raise module.Name(...)``) instantiates among ``nodes``."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            func = node.exc.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return names


def test_every_error_is_in_the_one_tree_and_documented_with_its_exit_code() -> None:
    assert set(errors.__all__) == {"CertaError", *(cls.__name__ for cls in ERRORS)}
    for cls in (CertaError, *ERRORS):
        assert cls.__module__ == errors.__name__, cls
        assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__name__} has no docstring"
        assert type(cls.exit_code) is int and cls.exit_code in (1, 2, 3, 4, 5), cls
        assert f"{cls.__name__} " in errors.__doc__, f"the module docstring's tree lacks {cls.__name__}"
    assert _readme_error_table() == {cls.__name__: cls.exit_code for cls in (CertaError, *ERRORS)}


def test_no_error_class_is_defined_outside_the_errors_module() -> None:
    names = {cls.__name__ for cls in (CertaError, *ERRORS)}
    elsewhere = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}" for path, nodes in _class_and_raise_nodes().items()
                 if path != Path(errors.__file__).resolve() for node in nodes
                 if isinstance(node, ast.ClassDef)
                 and any(isinstance(base, ast.Name) and base.id in names for base in node.bases)]
    assert elsewhere == []


def test_every_error_is_raised_somewhere() -> None:
    raised = set().union(*map(_raised_names, _class_and_raise_nodes().values()))
    assert [cls.__name__ for cls in ERRORS if cls.__name__ not in raised] == []


def test_an_unknown_stage_is_a_spec_error_naming_what_this_certa_has() -> None:
    with pytest.raises(UnknownStage, match="this certa has 1.0.0") as refused:
        REGISTRY.resolve("paired.ppl_ratio@9.0.0")
    assert isinstance(refused.value, SpecError) and refused.value.exit_code == 2


# ------------------------------------------------------------------------------- through the command


@pytest.fixture(scope="module")
def key_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An Ed25519 pair, another Ed25519 public key, and an EC (P-256) public key, as PEM files."""
    folder = tmp_path_factory.mktemp("keys")
    private_pem, public_pem = generate_key_pair()
    ec_pem = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    files = {"private": private_pem, "public": public_pem, "other": generate_key_pair()[1], "ec": ec_pem}
    for name, pem in files.items():
        (folder / f"{name}.pem").write_bytes(pem)
    return {name: folder / f"{name}.pem" for name in files}


def _error(result: Result) -> tuple[int, str, str]:
    """(exit code, error type, message) of a refused ``--json`` command."""
    error = json.loads(result.stdout)["error"]
    assert error["exit_code"] == result.exit_code
    return result.exit_code, error["type"], error["message"]


def _verify_attestation(envelope: bytes, public_key: Path, folder: Path) -> tuple[int, str, str]:
    attestation = folder / "a.intoto.json"
    attestation.write_bytes(envelope)
    return _error(CliRunner().invoke(main, ["verify-attestation", str(attestation), "--public-key", str(public_key),
                                            "--json"]))


def test_verify_attestation_names_a_signing_error_by_its_meaning(key_files: dict[str, Path], tmp_path: Path) -> None:
    private = load_private_key(key_files["private"].read_bytes())
    signed = json.dumps(seal_envelope(PAYLOAD_TYPE, b'{"_type": "x"}', [private])).encode()
    assert _verify_attestation(signed, key_files["ec"], tmp_path) == (
        2, "SigningError", "the public key is not an Ed25519 key (create one with 'certa keygen')")
    code, kind, message = _verify_attestation(b'["not", "an envelope"]', key_files["public"], tmp_path)
    assert (code, kind) == (2, "SigningError") and message.startswith("not a DSSE envelope")
    code, kind, message = _verify_attestation(signed, key_files["other"], tmp_path)
    assert (code, kind) == (1, "SignatureVerificationError") and message.startswith("no signature by key")
    code, kind, message = _verify_attestation(signed, key_files["public"], tmp_path)
    assert (code, kind) == (1, "AttestationError") and "not an in-toto statement" in message


def test_verify_bundle_names_a_file_that_is_not_a_bundle(key_files: dict[str, Path], tmp_path: Path) -> None:
    bundle = tmp_path / "b.json"
    bundle.write_text('{"certificate": {}}', encoding="utf-8")
    code, kind, message = _error(CliRunner().invoke(main, ["verify-bundle", str(bundle), "--public-key",
                                                           str(key_files["public"]), "--json"]))
    assert (code, kind) == (2, "BundleError") and message.startswith("not a certa bundle")
