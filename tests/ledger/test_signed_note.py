"""C2SP signed notes and tlog checkpoints (certa.ledger.signed_note, certa.ledger.tlog_checkpoint): the bytes against
the worked example of Go's golang.org/x/mod/sumdb/note documentation and a checkpoint worked by hand with a fixed
key; signatures checked, foreign lines kept, malformed notes refused. Go's own verifier: test_tlog_go.py."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from certa.engine.foundation.errors import LedgerIntegrityError, SignatureVerificationError, SigningError
from certa.ledger.signed_note import (NoteSignature, add_note_signatures, is_signed_note, note_key_hash, open_note, sign_note,
                                      split_note, valid_key_name, verifier_key)
from certa.ledger.tlog_checkpoint import (checkpoint_text, open_tlog_checkpoint, read_tlog_checkpoint_unverified,
                                          sign_tlog_checkpoint)

# The example of golang.org/x/mod/sumdb/note's package documentation (note.go, "# Example"): a signer key
# "PRIVATE+KEY+<name>+<hash>+base64(0x01 || Ed25519 seed)", its verifier key, and the note it signs.
GO_SIGNER_KEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER_KEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
GO_NOTE = (GO_TEXT + "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6"
           "RyyBwJnAM=\n")


def _go_key() -> Ed25519PrivateKey:
    seed = base64.b64decode(GO_SIGNER_KEY.split("+", 4)[4])
    assert seed[0] == 1  # the algorithm byte: Ed25519
    return Ed25519PrivateKey.from_private_bytes(seed[1:])


def _fixed_key(byte: int) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes([byte]) * 32)


def test_the_go_documentation_example_byte_for_byte():
    key = _go_key()
    assert note_key_hash("PeterNeumann", key.public_key()).hex() == "c74f20a3"
    assert verifier_key("PeterNeumann", key.public_key()) == GO_VERIFIER_KEY
    assert sign_note(GO_TEXT, [("PeterNeumann", key)]) == GO_NOTE  # Ed25519 is deterministic
    assert open_note(GO_NOTE, [key.public_key()]) == (GO_TEXT, (GO_VERIFIER_KEY,))


def test_a_tlog_checkpoint_worked_by_hand():
    # tree of one leaf, certa's leaf input the 32 bytes of entry 1's hash: MTH = SHA-256(0x00 || entry hash)
    root = hashlib.sha256(b"\x00" + bytes.fromhex("ab" * 32)).digest()
    key = _fixed_key(7)
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    text = "example.org/certa/test\n1\n" + base64.b64encode(root).decode() + "\n"
    key_hash = hashlib.sha256(b"example.org/certa/test\n\x01" + public).digest()[:4]
    line = "— example.org/certa/test " + base64.b64encode(key_hash + key.sign(text.encode())).decode() + "\n"
    note = sign_tlog_checkpoint("example.org/certa/test", 1, root.hex(), [("example.org/certa/test", key)])
    assert checkpoint_text("example.org/certa/test", 1, root.hex()) == text
    assert note == text + "\n" + line
    head = open_tlog_checkpoint(note, [key.public_key()])
    assert (head.origin, head.tree_size, head.root_hash) == ("example.org/certa/test", 1, root.hex())
    assert head.verified_by == ("example.org/certa/test+" + key_hash.hex() + "+"
                                + base64.b64encode(b"\x01" + public).decode(),)


def test_a_witness_line_is_added_and_checked_and_a_foreign_line_kept():
    log, witness, stranger = _fixed_key(1), _fixed_key(2), _fixed_key(3)
    note = sign_tlog_checkpoint("log.example", 5, "cd" * 32, [("log.example", log)])
    witnessed = add_note_signatures(note, [("witness.example", witness)])
    assert witnessed.startswith(note)  # the log's line first, untouched
    assert len(split_note(witnessed)[1]) == 2
    assert open_tlog_checkpoint(witnessed, [log.public_key(), witness.public_key()]).tree_size == 5
    with pytest.raises(SignatureVerificationError, match="no signature"):
        open_tlog_checkpoint(note, [witness.public_key()])
    foreign = add_note_signatures(witnessed, [("stranger", stranger)])
    assert open_note(foreign, [log.public_key()])[1] == (verifier_key("log.example", log.public_key()),)
    again = add_note_signatures(witnessed, [("witness.example", witness)])  # the same key's line is replaced
    assert again == witnessed


def test_a_changed_text_or_signature_is_refused():
    key = _fixed_key(1)
    note = sign_tlog_checkpoint("log.example", 5, "cd" * 32, [("log.example", key)])
    with pytest.raises(SignatureVerificationError, match="does not verify"):
        open_note(note.replace("\n5\n", "\n6\n"), [key.public_key()])
    text, (line,) = split_note(note)
    flipped = NoteSignature(line.name, line.key_hash, bytes([line.signature[0] ^ 1]) + line.signature[1:])
    with pytest.raises(SignatureVerificationError, match="does not verify"):
        open_note(text + "\n" + flipped.line(), [key.public_key()])
    with pytest.raises(SignatureVerificationError, match="no public key"):
        open_note(note, [])


@pytest.mark.parametrize("note", [
    "no blank line\n— a AAAAAAAA\n",
    "text\n\n",  # no signature line
    "text\n\n— a AAAAAAAA",  # no final newline
    "text\n\n- a AAAAAAAAAAAA\n",  # a hyphen, not an em dash
    "text\n\n— a AAAA\n",  # fewer than 5 bytes
    "text\n\n— a+b AAAAAAAAAAAA\n",  # a '+' in the name
    "text\n\n— a not-base64!\n",
    "te\txt\n\n— a AAAAAAAAAAAA\n",  # a control character
])
def test_a_malformed_note_is_refused(note):
    with pytest.raises(SigningError):
        split_note(note)


def test_key_names_and_note_texts_are_checked():
    assert valid_key_name("example.org/log") and not valid_key_name("") and not valid_key_name("a b")
    assert not valid_key_name("a+b") and not valid_key_name("a\u00a0b")  # a Unicode space
    with pytest.raises(SigningError):
        note_key_hash("a b", _fixed_key(1).public_key())
    for text in ("no final newline", "a\n\nblank line\n"):
        with pytest.raises(SigningError):
            sign_note(text, [("a", _fixed_key(1))])
    assert is_signed_note(b"x\n\n- a b\n") and not is_signed_note(b'  {"payloadType": 1}')


@pytest.mark.parametrize("text", [
    "log\n05\n" + base64.b64encode(b"r" * 32).decode() + "\n",  # a leading zero
    "log\n5\n" + base64.b64encode(b"r" * 31).decode() + "\n",  # not 32 bytes
    "log\n5\n",  # no root line
    "\n5\n" + base64.b64encode(b"r" * 32).decode() + "\n",  # no origin
    "log\n-5\n" + base64.b64encode(b"r" * 32).decode() + "\n",
])
def test_a_checkpoint_text_that_is_not_one_is_refused(text):
    with pytest.raises(LedgerIntegrityError):
        read_tlog_checkpoint_unverified(text + "\n— log AAAAAAAAAAAA\n")


def test_extension_lines_are_read_and_ignored():
    text = "log\n5\n" + base64.b64encode(b"r" * 32).decode() + "\nan extension line\n"
    head = read_tlog_checkpoint_unverified(text + "\n— log AAAAAAAAAAAA\n")
    assert (head.origin, head.tree_size, head.root_hash, head.verified_by) == ("log", 5, (b"r" * 32).hex(), ())
