"""Documents brought back to certa from outside (bundles, checkpoints, attestations, review envelopes) may be
anything: every reader answers one line and a documented exit code, never a traceback. A document that is not
one of certa's (not JSON, nested deeper than ``MAX_DOCUMENT_DEPTH``, longer than ``MAX_DOCUMENT_BYTES``, a
member of the wrong JSON type, ``15.0`` or ``true`` for an integer) exits 2; a well-formed document whose
signature or signed content fails exits 1."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from certa.cli import main
from certa.engine.services.attestation import PAYLOAD_TYPE as ATTESTATION_TYPE
from certa.engine.foundation.json_read import MAX_DOCUMENT_BYTES, MAX_DOCUMENT_DEPTH, parse_document
from certa.engine.services.reviews import check_review
from certa.ledger.checkpoint import PAYLOAD_TYPE as CHECKPOINT_TYPE
from certa.engine.foundation.signing import load_private_key, seal_envelope

WRONG_TYPES: list[Any] = [None, True, 15.0, 1.5, "x", [], {}]
"""A value of every JSON type (and a float that is an integer's value) for any member."""


def _other_types(original: Any, *extra: Any) -> list[Any]:
    """``WRONG_TYPES`` and ``extra`` but those of ``original``'s own type (for ``extra``: all of them)."""
    return [value for value in WRONG_TYPES if type(value) is not type(original)] + list(extra)


def _member(document: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        document = document[key]
    return document


@dataclass(frozen=True)
class Documents:
    """One recorded run and the documents certa writes about it, with the keys that signed them."""

    folder: Path
    ledger: str
    private_key: Path
    public_key: Path
    checkpoint: dict[str, Any]
    bundle: dict[str, Any]
    attestation: dict[str, Any]

    def sign(self, payload_type: str, payload: bytes) -> dict[str, Any]:
        """An envelope of ``payload`` signed by this key: signed content that is not what certa writes."""
        return seal_envelope(payload_type, payload, [load_private_key(self.private_key.read_bytes())])


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Documents:
    from tests.conftest import small_spec_folder

    folder = tmp_path_factory.mktemp("hostile")
    small_spec_folder(folder)
    ledger = str(folder / "l.db")
    runner = CliRunner()
    made = json.loads(runner.invoke(main, ["keygen", "--out-dir", str(folder / "keys"), "--json"]).stdout)
    assert runner.invoke(main, ["run", str(folder / "spec.yaml"), "--ledger", ledger]).exit_code == 0
    for command in (["checkpoint", "--key", made["private_key"], "--out", str(folder / "cp.json")],
                    ["prove", "latest", "--checkpoint", str(folder / "cp.json"), "-o", str(folder / "bundle.json")],
                    ["attest", "latest", "--key", made["private_key"], "-o", str(folder / "att.json")]):
        done = runner.invoke(main, [*command, "--ledger", ledger])
        assert done.exit_code == 0, done.output
    read = lambda name: json.loads((folder / name).read_text(encoding="utf-8"))  # noqa: E731
    return Documents(folder, ledger, Path(made["private_key"]), Path(made["public_key"]), read("cp.json"),
                     read("bundle.json"), read("att.json"))


def _commands(docs: Documents) -> dict[str, Callable[[Path], list[str]]]:
    """Each command that reads a document, given the document's file."""
    pub = str(docs.public_key)
    return {
        "verify-bundle": lambda f: ["verify-bundle", str(f), "--public-key", pub],
        "verify-attestation": lambda f: ["verify-attestation", str(f), "--public-key", pub],
        "verify --checkpoint": lambda f: ["verify", "--checkpoint", str(f), "--public-key", pub,
                                          "--ledger", docs.ledger],
        "cosign": lambda f: ["cosign", str(f), "--public-key", pub, "--key", str(docs.private_key), "--out", str(f) + ".out",
                             "--ledger", docs.ledger],
        "prove --checkpoint": lambda f: ["prove", "latest", "--checkpoint", str(f), "--ledger", docs.ledger],
    }


def _invoke(docs: Documents, command: str, text: str | bytes, name: str = "doc.json") -> Result:
    path = docs.folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    try:
        return CliRunner().invoke(main, _commands(docs)[command](path))
    finally:
        path.unlink()
        Path(str(path) + ".out").unlink(missing_ok=True)


def _assert_refused(result: Result, code: int, *, contains: str = "") -> None:
    """Exit ``code`` through ``sys.exit`` (no other exception), one line naming the problem, no traceback."""
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.output[:300]
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output[:300]
    assert contains in lines[0], lines[0]


# ------------------------------------------------------------------------------------------ not JSON at all

@pytest.mark.parametrize("command", ["verify-bundle", "verify-attestation", "verify --checkpoint", "cosign",
                                     "prove --checkpoint"])
@pytest.mark.parametrize("text", ["[" * 100_000, "{\"a\":" * 100_000, "[" * (MAX_DOCUMENT_DEPTH + 1)
                                  + "]" * (MAX_DOCUMENT_DEPTH + 1), "", "\xff", "not json", "null", "[]", "15"],
                         ids=["deep-arrays", "deep-objects", "just-too-deep", "empty", "not-utf8", "word", "null",
                              "array", "number"])
def test_a_file_that_is_no_document_exits_2_in_one_line(documents: Documents, command: str, text: str) -> None:
    raw = b"\xff" if text == "\xff" else text.encode("utf-8")
    _assert_refused(_invoke(documents, command, raw), 2)


@pytest.mark.parametrize("command", ["verify-attestation", "verify --checkpoint"])
def test_a_document_longer_than_any_certa_writes_exits_2_unparsed(documents: Documents, command: str) -> None:
    _assert_refused(_invoke(documents, command, b"{}" + b" " * MAX_DOCUMENT_BYTES), 2, contains="longer than")


def test_nesting_is_bounded_before_parsing_and_strings_do_not_count() -> None:
    deep = "[" * (MAX_DOCUMENT_DEPTH + 1) + "]" * (MAX_DOCUMENT_DEPTH + 1)
    with pytest.raises(ValueError, match=f"nested {MAX_DOCUMENT_DEPTH + 1} levels deep"):
        parse_document(deep, "the bundle")
    allowed = "[" * MAX_DOCUMENT_DEPTH + "]" * MAX_DOCUMENT_DEPTH
    assert parse_document(allowed, "the bundle") is not None
    brackets_in_strings = json.dumps({"note": "[" * 500 + '\\"{' * 100, "x": [[1]]})
    assert parse_document(brackets_in_strings, "the bundle")["x"] == [[1]]


# ------------------------------------------------------------------------------------------ bundles

def _bundle_with(docs: Documents, path: tuple[str | int, ...], value: Any) -> str:
    bundle = copy.deepcopy(docs.bundle)
    target = bundle
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(bundle)


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_bundle_whose_certificate_nests_900_levels_exits_2(documents: Documents) -> None:
    text = _bundle_with(documents, ("certificate", "extra"), _nested(900))
    _assert_refused(_invoke(documents, "verify-bundle", text), 2, contains="not")


BUNDLE_MEMBERS = [("certa_bundle",), ("certificate",), ("entry",), ("inclusion",), ("checkpoint",),
                  *[("entry", name) for name in ("seq", "run_id", "kind", "recorded_at", "payload_sha256",
                                                 "prev_hash")],
                  *[("inclusion", name) for name in ("leaf_index", "tree_size", "path")], ("inclusion", "path", 0),
                  *[("checkpoint", name) for name in ("payloadType", "payload", "signatures")],
                  ("checkpoint", "signatures", 0), ("checkpoint", "signatures", 0, "keyid"),
                  ("checkpoint", "signatures", 0, "sig")]


@pytest.mark.parametrize("path", BUNDLE_MEMBERS, ids=["/".join(map(str, p)) for p in BUNDLE_MEMBERS])
def test_a_bundle_member_of_another_type_is_refused_in_one_line(documents: Documents,
                                                                path: tuple[str | int, ...]) -> None:
    for value in _other_types(_member(documents.bundle, path)):
        result = _invoke(documents, "verify-bundle", _bundle_with(documents, path, value))
        assert isinstance(result.exception, SystemExit), (path, value, repr(result.exception))
        assert result.exit_code in (1, 2), (path, value, result.output)
        if result.exit_code == 2:
            _assert_refused(result, 2)
        assert "Traceback" not in result.output


@pytest.mark.parametrize("path", [("entry", "seq"), ("inclusion", "leaf_index"), ("inclusion", "tree_size"),
                                  ("certa_bundle",)], ids=lambda p: "/".join(p))
def test_a_bundle_integer_written_as_a_float_or_a_boolean_is_not_a_bundle(documents: Documents,
                                                                          path: tuple[str, ...]) -> None:
    value = _member(documents.bundle, path)
    for written in (float(value), True):
        result = _invoke(documents, "verify-bundle", _bundle_with(documents, path, written))
        _assert_refused(result, 2, contains="not a certa bundle")


@pytest.mark.parametrize("path", [("entry", "run_id"), ("entry", "payload_sha256"), ("entry", "prev_hash"),
                                  ("inclusion", "path", 0)], ids=lambda p: "/".join(map(str, p)))
def test_a_bundle_digest_that_is_not_exactly_lowercase_hex_is_not_a_bundle(documents: Documents,
                                                                          path: tuple[str | int, ...]) -> None:
    digest = _member(documents.bundle, path)
    for written in (digest + "\n", digest.upper(), digest[:-1], " " + digest[1:]):
        result = _invoke(documents, "verify-bundle", _bundle_with(documents, path, written))
        _assert_refused(result, 2, contains="not a certa bundle")


def test_the_untouched_bundle_verifies(documents: Documents) -> None:
    assert _invoke(documents, "verify-bundle", json.dumps(documents.bundle)).exit_code == 0


# ------------------------------------------------------------------------------------------ checkpoints

ENVELOPE_MEMBERS = [("payloadType",), ("payload",), ("signatures",), ("signatures", 0), ("signatures", 0, "keyid"),
                    ("signatures", 0, "sig")]


def _replaced(document: dict[str, Any], path: tuple[str | int, ...], value: Any) -> str:
    changed = copy.deepcopy(document)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(changed)


@pytest.mark.parametrize("command", ["verify --checkpoint", "cosign", "prove --checkpoint"])
@pytest.mark.parametrize("path", ENVELOPE_MEMBERS, ids=["/".join(map(str, p)) for p in ENVELOPE_MEMBERS])
def test_a_checkpoint_envelope_member_of_another_type_exits_2(documents: Documents, command: str,
                                                              path: tuple[str | int, ...]) -> None:
    for value in _other_types(_member(documents.checkpoint, path)):
        result = _invoke(documents, command, _replaced(documents.checkpoint, path, value))
        if path == ("signatures",) and value == []:  # no signature: well formed (prove and cosign read it unverified)
            assert result.exit_code in (0, 1) and "Traceback" not in result.output, result.output[:300]
            continue
        _assert_refused(result, 2, contains="not a DSSE envelope")


def test_a_signature_without_keyid_is_well_formed_as_dsse_allows(documents: Documents) -> None:
    """DSSE makes ``keyid`` optional: such a signature is ignored when verifying (it names no key), not refused."""
    hint_free = {"sig": documents.checkpoint["signatures"][0]["sig"]}
    envelope = {**documents.checkpoint, "signatures": [*documents.checkpoint["signatures"], hint_free]}
    assert _invoke(documents, "verify --checkpoint", json.dumps(envelope)).exit_code == 0


def _checkpoint_body(docs: Documents) -> dict[str, Any]:
    return json.loads(base64.b64decode(docs.checkpoint["payload"]))


@pytest.mark.parametrize("command", ["verify --checkpoint", "cosign", "prove --checkpoint"])
@pytest.mark.parametrize("member", ["certa_checkpoint", "seq", "entry_hash", "root_hash", "signed_at"])
def test_a_signed_checkpoint_payload_member_of_another_type_exits_1(documents: Documents, command: str,
                                                                    member: str) -> None:
    body = _checkpoint_body(documents)
    original = body[member]
    for value in _other_types(original, *((float(original), True) if type(original) is int else ()),
                              *(("AB" * 32, original + "\n", original[:-1]) if member.endswith("_hash") else ())):
        signed = documents.sign(CHECKPOINT_TYPE, json.dumps({**body, member: value}).encode())
        _assert_refused(_invoke(documents, command, json.dumps(signed)), 1,
                        contains="not a certa checkpoint (format 1)")


def test_a_checkpoint_payload_that_is_no_json_object_exits_1(documents: Documents) -> None:
    for payload in (b"[" * 100_000, b"[]", b"\xff", b"1"):
        signed = documents.sign(CHECKPOINT_TYPE, payload)
        _assert_refused(_invoke(documents, "verify --checkpoint", json.dumps(signed)), 1, contains="checkpoint")


# ------------------------------------------------------------------------------------------ attestations

@pytest.mark.parametrize("path", ENVELOPE_MEMBERS, ids=["/".join(map(str, p)) for p in ENVELOPE_MEMBERS])
def test_an_attestation_envelope_member_of_another_type_exits_2(documents: Documents,
                                                                path: tuple[str | int, ...]) -> None:
    for value in _other_types(_member(documents.attestation, path)):
        result = _invoke(documents, "verify-attestation", _replaced(documents.attestation, path, value))
        if path == ("signatures",) and value == []:
            assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
            continue
        _assert_refused(result, 2, contains="not a DSSE envelope")


STATEMENT_MEMBERS = [("_type",), ("predicateType",), ("predicate",), ("subject",), ("subject", 0),
                     ("subject", 0, "name"), ("subject", 0, "digest"), ("subject", 0, "digest", "sha256")]


@pytest.mark.parametrize("path", STATEMENT_MEMBERS, ids=["/".join(map(str, p)) for p in STATEMENT_MEMBERS])
def test_a_signed_statement_member_of_another_type_exits_1(documents: Documents,
                                                           path: tuple[str | int, ...]) -> None:
    statement = json.loads(base64.b64decode(documents.attestation["payload"]))
    original = _member(statement, path)
    for value in _other_types(original, *(("AB" * 32, original + "\n") if path[-1] == "sha256" else ())):
        signed = documents.sign(ATTESTATION_TYPE, _replaced(statement, path, value).encode())
        result = _invoke(documents, "verify-attestation", json.dumps(signed))
        assert isinstance(result.exception, SystemExit), (path, value, repr(result.exception))
        assert result.exit_code == 1 and "Traceback" not in result.output, (path, value, result.output)


def test_an_attested_statement_nested_too_deeply_exits_1(documents: Documents) -> None:
    signed = documents.sign(ATTESTATION_TYPE, b"[" * 100_000)
    _assert_refused(_invoke(documents, "verify-attestation", json.dumps(signed)), 1, contains="in-toto statement")


# ------------------------------------------------------------------------------------------ review envelopes

@pytest.mark.parametrize("signature", [*WRONG_TYPES, _nested(900), {"signatures": _nested(900)},
                                       {"payloadType": 1, "payload": [], "signatures": [{"keyid": 1, "sig": None}]},
                                       {"payloadType": "x", "payload": "!",
                                        "signatures": [{"keyid": "k", "sig": "s"}]}],
                         ids=lambda value: type(value).__name__)
def test_a_stored_review_envelope_of_any_shape_is_a_problem_not_a_crash(signature: Any) -> None:
    payload = {"reviewer": "r", "decision": "approved", "note": "", "signature": signature,
               "public_keys": {"k": base64.b64encode(b"\0" * 32).decode()}}
    check = check_review(payload, None)
    assert check.signed and not check.valid and check.problems


def test_a_head_row_stored_as_a_blob_is_named_not_a_traceback(small_spec: Path, tmp_path: Path) -> None:
    import sqlite3

    from click.testing import CliRunner

    from certa.cli import main
    db = tmp_path / "ledger.db"
    runner = CliRunner()
    assert runner.invoke(main, ["run", str(small_spec), "--ledger", str(db)]).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("update ledger_meta set value = cast(value as blob) where key = 'head'")
    for command in (["head"], ["verify"]):
        result = runner.invoke(main, [*command, "--ledger", str(db)])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (command, result.output)
        assert "Traceback" not in result.output
