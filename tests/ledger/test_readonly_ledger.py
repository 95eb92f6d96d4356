"""A SQLite ledger on read-only media: every read command works and changes nothing, every write command is
refused in one line.

Two kinds of media: a real read-only mount (a tmpfs remounted ``ro``; skipped, with the reason, where this
process may not mount), and a read-only file in a read-only folder (``chmod``), which runs everywhere: root
ignores permission bits, so for root the test also makes ``os.access`` answer as for a read-only folder, and
certa then opens the file ``mode=ro&immutable=1`` exactly as on read-only media. Each read command's output
(and every file it writes elsewhere) is compared with the same command's on a writable copy; the folder's
listing and the ledger file's bytes must not change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from certa.cli import main
from certa.engine.foundation.errors import LedgerError
from certa.ledger import Ledger
from certa.ledger.location import sqlite_read_only_uri

from tests.conftest import read_only_folder, two_run_ledger

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@dataclass(frozen=True)
class Recorded:
    """A ledger with two runs and a review, a checkpoint of it signed by ``key``, a co-signer's key, and the
    spec that made it."""

    ledger: Path
    spec: Path
    run_a: str
    run_b: str
    key: Path
    checkpoint: Path
    officer_key: Path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    folder = tmp_path_factory.mktemp("recorded")
    spec, db = two_run_ledger(folder)
    with Ledger.open(db, create=False) as ledger:
        run_b, run_a = (row.run_id for row in ledger.runs())
    assert _invoke("review", run_a, "--by", "alice", "--decision", "approved", "--ledger", str(db)).exit_code == 0
    assert _invoke("keygen", "--out-dir", str(folder / "keys")).exit_code == 0
    assert _invoke("keygen", "--out-dir", str(folder / "keys"), "--name", "officer").exit_code == 0
    key, checkpoint = folder / "keys" / "certa.key", folder / "head.checkpoint"
    assert _invoke("checkpoint", "--key", str(key), "--out", str(checkpoint), "--ledger", str(db)).exit_code == 0
    return Recorded(db, spec, run_a, run_b, key, checkpoint, folder / "keys" / "officer.key")


# ------------------------------------------------------------------------------------------- the media


def _mount_tmpfs(folder: Path) -> str | None:
    """Mount a small tmpfs on ``folder``: None when done, else why that is not permitted here."""
    if os.geteuid() != 0:
        return "mounting needs root"
    if shutil.which("mount") is None:
        return "no mount command"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "certa-test", str(folder)],
                          capture_output=True, text=True)
    return None if done.returncode == 0 else f"mount -t tmpfs: {done.stderr.strip() or done.returncode}"


@contextmanager
def _read_only_mount(folder: Path, files: Mapping[str, Path]) -> Iterator[None]:
    """``files`` copied (name -> source) onto a tmpfs at ``folder``, then remounted read-only."""
    folder.mkdir()
    reason = _mount_tmpfs(folder)
    if reason is not None:
        pytest.skip(f"read-only mount not tested here ({reason}); the read-only folder case covers the open path")
    try:
        for name, source in files.items():
            shutil.copyfile(source, folder / name)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        yield
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextmanager
def _read_only_copy(folder: Path, files: Mapping[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``files`` copied into ``folder``, which then reads as read-only media (``read_only_folder``)."""
    folder.mkdir()
    for name, source in files.items():
        shutil.copyfile(source, folder / name)
    with read_only_folder(folder, monkeypatch):
        yield


@contextmanager
def _media(kind: str, folder: Path, files: Mapping[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``folder`` on read-only media of ``kind`` ("mount" or "folder"), holding ``files``."""
    with (_read_only_mount(folder, files) if kind == "mount" else _read_only_copy(folder, files, monkeypatch)):
        yield folder


def _state(folder: Path, ledger: Path) -> tuple[list[tuple[str, int]], str]:
    """The folder's listing (names and sizes) and the ledger file's SHA-256."""
    listing = sorted((p.name, p.stat().st_size) for p in folder.iterdir())
    return listing, hashlib.sha256(ledger.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------- the commands

READS = {
    "verify": ["verify"],
    "list": ["list"],
    "show": ["show", "{a}", "--explain"],
    "show --json": ["show", "{a}", "--json"],
    "diff": ["diff", "{a}", "{b}"],
    "export": ["export", "{a}", "-o", "{out}/cert.json"],
    "report": ["report", "{a}", "-o", "{out}/run.html"],
    "site": ["site", "-o", "{out}/site"],
    "prove": ["prove", "{a}", "--checkpoint", "{checkpoint}", "-o", "{out}/run.bundle.json"],
    "head": ["head"],
    "decisions": ["decisions", "{a}"],
    "replay --no-record": ["replay", "{a}", "--no-record"],
    "replay --all --no-record": ["replay", "--all", "--no-record", "--json"],
    "checkpoint": ["checkpoint", "--key", "{key}", "--out", "{out}/new.checkpoint"],
    "cosign": ["cosign", "{checkpoint}", "--public-key", "{pub}", "--key", "{officer_key}", "--out",
               "{out}/cosigned.checkpoint"],
}
SIGNED_NOW = {"checkpoint"}  # its file holds the signing time: compared by name only
WRITES = {
    "run": ["run", "{spec}"],
    "review": ["review", "{a}", "--by", "bob", "--decision", "comment"],
    "replay": ["replay", "{a}"],
    "replay --all": ["replay", "--all"],
    "migrate": ["migrate"],
}


def _args(template: list[str], recorded: Recorded, ledger: Path, out: Path) -> list[str]:
    values = {"a": recorded.run_a, "b": recorded.run_b, "out": str(out), "checkpoint": str(recorded.checkpoint),
              "key": str(recorded.key), "pub": str(recorded.key.with_suffix(".pub")),
              "officer_key": str(recorded.officer_key), "spec": str(recorded.spec)}
    return [part.format(**values) for part in template] + ["--ledger", str(ledger)]


def _outcome(template: list[str], recorded: Recorded, ledger: Path, out: Path) -> tuple[int, str, dict[str, bytes]]:
    """Exit code, standard output and the files written under ``out``, with the ledger's and ``out``'s paths
    replaced by placeholders (they differ between the two copies, and nothing else may)."""
    out.mkdir()
    result = _invoke(*_args(template, recorded, ledger, out))

    def normal(text: str) -> str:
        return text.replace(str(ledger), "LEDGER").replace(str(out), "OUT")

    files = {str(p.relative_to(out)): normal(p.read_bytes().decode("utf-8", "replace")).encode()
             for p in sorted(out.rglob("*")) if p.is_file()}
    return result.exit_code, normal(result.stdout), files


@pytest.fixture(params=["mount", "folder"])
def media_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("command", list(READS))
def test_a_read_command_works_on_read_only_media_as_on_a_writable_copy(
        command: str, media_kind: str, recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writable = tmp_path / "writable"
    writable.mkdir()
    shutil.copyfile(recorded.ledger, writable / "ledger.db")
    expected = _outcome(READS[command], recorded, writable / "ledger.db", tmp_path / "out-writable")
    assert expected[0] == 0, expected
    with _media(media_kind, tmp_path / "media", {"ledger.db": recorded.ledger}, monkeypatch) as folder:
        before = _state(folder, folder / "ledger.db")
        got = _outcome(READS[command], recorded, folder / "ledger.db", tmp_path / "out-media")
        assert _state(folder, folder / "ledger.db") == before
    if command in SIGNED_NOW:
        got, expected = (*got[:2], sorted(got[2])), (*expected[:2], sorted(expected[2]))
    assert got == expected


@pytest.mark.parametrize("command", list(WRITES))
def test_a_write_command_on_read_only_media_is_refused_in_one_line(
        command: str, media_kind: str, recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _media(media_kind, tmp_path / "media", {"ledger.db": recorded.ledger}, monkeypatch) as folder:
        before = _state(folder, folder / "ledger.db")
        result = _invoke(*_args(WRITES[command], recorded, folder / "ledger.db", tmp_path))
        assert _state(folder, folder / "ledger.db") == before
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: ledger {folder / 'ledger.db'} is read-only"), result.stderr
    assert "replay --no-record" in result.stderr


@pytest.mark.parametrize("version", sorted(p.parent.name for p in GOLDEN.glob("*/ledger.db"))[:1])
def test_a_ledger_of_an_old_release_is_verified_and_listed_on_read_only_media(
        version: str, media_kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = GOLDEN / version / "ledger.db"
    with _media(media_kind, tmp_path / "media", {"ledger.db": source}, monkeypatch) as folder:
        before = _state(folder, folder / "ledger.db")
        verified = _invoke("verify", "--ledger", str(folder / "ledger.db"))
        listed = _invoke("list", "--ledger", str(folder / "ledger.db"))
        assert _state(folder, folder / "ledger.db") == before
    assert verified.exit_code == 0 and verified.stdout.startswith("intact:"), verified.output
    assert listed.exit_code == 0 and listed.stdout.strip()


# ------------------------------------------------------------------------------------------- the open path


def test_reading_a_writable_ledger_never_switches_its_journal_mode(tmp_path: Path) -> None:
    """Golden 0.1.0 is a rollback-journal database: a read leaves it so, and creates no ``-wal`` beside it."""
    copy = tmp_path / "ledger.db"
    shutil.copyfile(GOLDEN / "0.1.0" / "ledger.db", copy)
    before = _state(tmp_path, copy)
    for command in (["verify"], ["list"], ["show", "latest"], ["replay", "--all", "--no-record"]):
        result = _invoke(*command, "--ledger", str(copy))
        assert result.exit_code == 0, result.output
    assert _state(tmp_path, copy) == before
    with sqlite3.connect(f"{copy.as_uri()}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def test_the_api_opens_read_only_and_refuses_every_write(recorded: Recorded, tmp_path: Path) -> None:
    copy = tmp_path / "ledger.db"
    shutil.copyfile(recorded.ledger, copy)
    digest = hashlib.sha256(copy.read_bytes()).hexdigest()
    with Ledger.open(copy, read_only=True) as ledger:
        assert ledger.read_only and ledger.run(recorded.run_a[:8]).run_id == recorded.run_a
        with pytest.raises(LedgerError, match="is open read-only"):
            ledger.record_note(recorded.run_a, "review", {"reviewer": "x", "decision": "comment", "note": ""})
        with pytest.raises(LedgerError, match="is open read-only"):
            ledger.migrate()
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest
    with sqlite3.connect(copy) as conn:  # the journal mode is the ledger's own, untouched
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_read_only_opens_are_immutable_only_on_read_only_folders_without_a_wal_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "a b?#.db"
    db.touch()
    assert sqlite_read_only_uri(db) == f"{db.as_uri()}?mode=ro" and "%3F%23" in db.as_uri()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: False if mode & os.W_OK else real_access(path, mode))
    assert sqlite_read_only_uri(db) == f"{db.as_uri()}?mode=ro&immutable=1"
    Path(f"{db}-wal").touch()  # commits not yet in the file: never ignored
    assert sqlite_read_only_uri(db) == f"{db.as_uri()}?mode=ro"


def test_a_missing_or_empty_ledger_is_no_ledger_to_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for path, message in ((tmp_path / "missing.db", "no ledger at"), (empty, "no ledger in")):
        result = _invoke("head", "--ledger", str(path))
        assert result.exit_code == 2 and result.stderr.startswith(f"error: {message} {path}")
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def _ledger_with_a_commit_in_its_wal(recorded: Recorded, folder: Path) -> tuple[Path, sqlite3.Connection, str]:
    """A copy of the ledger whose newest commit (a review) is still in its ``-wal`` file (another connection
    keeps the database open, so the writer's close does not checkpoint it); also that connection (close it
    after copying the files) and the head with the review."""
    folder.mkdir()
    db = folder / "ledger.db"
    shutil.copyfile(recorded.ledger, db)
    holder = sqlite3.connect(db)
    holder.execute("SELECT count(*) FROM entries").fetchall()
    reviewed = _invoke("review", recorded.run_b, "--by", "carol", "--decision", "comment", "--ledger", str(db))
    assert reviewed.exit_code == 0
    head = _invoke("head", "--ledger", str(db)).stdout
    assert Path(f"{db}-wal").stat().st_size > 0
    return db, holder, head


def test_a_wal_ledger_on_a_read_only_mount_is_read_with_its_wal_commits(recorded: Recorded, tmp_path: Path) -> None:
    db, holder, head = _ledger_with_a_commit_in_its_wal(recorded, tmp_path / "source")
    files = {name: db.with_name(name) for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm")}
    try:
        with _read_only_mount(tmp_path / "media", files):
            ledger = tmp_path / "media" / "ledger.db"
            got = _invoke("head", "--ledger", str(ledger))
            assert got.exit_code == 0 and got.stdout == head  # the review, in the -wal file, is read
            assert _invoke("verify", "--ledger", str(ledger)).exit_code == 0
    finally:
        holder.close()


def test_a_wal_file_without_its_shm_file_on_a_read_only_mount_says_what_to_do(recorded: Recorded,
                                                                             tmp_path: Path) -> None:
    db, holder, _ = _ledger_with_a_commit_in_its_wal(recorded, tmp_path / "source")
    files = {name: db.with_name(name) for name in ("ledger.db", "ledger.db-wal")}
    try:
        with _read_only_mount(tmp_path / "media", files):
            for command in (["head"], ["list"]):
                result = _invoke(*command, "--ledger", str(tmp_path / "media" / "ledger.db"))
                assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
                assert "ledger.db-shm file it cannot create here" in result.stderr
    finally:
        holder.close()
