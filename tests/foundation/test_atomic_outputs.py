"""Every file certa writes is written atomically (``certa.engine.foundation.atomic_files``): on a full disk each command ends with
one ``error:`` line and its documented exit code, leaving neither the file nor a temporary one; keys are
private from the first instant and never replaced; ``run -o`` refuses an unwritable file before recording and
says how to write it again after; a killed ``certa site`` is finished by the next one."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.foundation.errors import OutputError, RecordedOutputError
from certa.engine.services.site import MANIFEST_NAME
from certa.ledger import Ledger
from certa.engine.foundation.atomic_files import TEMPORARY_SUFFIX, append_atomically, check_writable, write_atomically

ROOT = Path(__file__).resolve().parents[2]
ENOSPC = os.strerror(errno.ENOSPC)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _disk_full(monkeypatch: pytest.MonkeyPatch, *, after: int = 0) -> None:
    """Every ``os.fsync`` after the first ``after`` ones fails as on a full disk."""
    real, calls = os.fsync, []

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) > after:
            raise OSError(errno.ENOSPC, ENOSPC)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(f"*{TEMPORARY_SUFFIX}"))


def _one_error(result, code: int) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == code, result.output
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


# ------------------------------------------------------------------------------------------ the writer

def test_a_failed_fsync_or_replace_leaves_nothing_and_names_the_path_and_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.json"
    with monkeypatch.context() as patch:
        _disk_full(patch)
        with pytest.raises(OutputError) as raised:
            write_atomically(target, b"{}")
    assert str(raised.value) == f"cannot write {target}: {ENOSPC}"
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, ENOSPC)))
        with pytest.raises(OutputError, match="No space left"):
            write_atomically(target, b"{}", what="the report")
    assert list(tmp_path.iterdir()) == []
    target.write_bytes(b"old")
    with monkeypatch.context() as patch:
        _disk_full(patch)
        with pytest.raises(OutputError):
            write_atomically(target, b"new")
    assert target.read_bytes() == b"old" and _leftovers(tmp_path) == []
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new" and _leftovers(tmp_path) == []


def test_a_private_file_is_never_readable_by_others_and_a_new_file_never_replaces_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, real_fsync, modes = tmp_path / "k.key", os.fsync, []

    def fsync(fd: int) -> None:
        modes.append(os.fstat(fd).st_mode & 0o777)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_atomically(target, b"secret", private=True, overwrite=False)
    assert modes[0] == 0o600 and target.stat().st_mode & 0o777 == 0o600  # the temporary file was private too
    with pytest.raises(OutputError, match="exists and is never overwritten"):
        write_atomically(target, b"other", private=True, overwrite=False)

    def appears_meanwhile(fd: int) -> None:  # another process creates the file while this one writes
        late.touch(exist_ok=True)

    late = tmp_path / "late.key"
    monkeypatch.setattr(os, "fsync", appears_meanwhile)
    with pytest.raises(OutputError, match="exists and is never overwritten"):
        write_atomically(late, b"secret", private=True, overwrite=False)
    assert late.read_bytes() == b"" and target.read_bytes() == b"secret" and _leftovers(tmp_path) == []


def test_without_hard_links_a_new_file_is_still_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "link", lambda *a: (_ for _ in ()).throw(OSError(errno.EPERM, "no hard links")))
    write_atomically(tmp_path / "a", b"1", overwrite=False)
    with pytest.raises(OutputError, match="exists"):
        write_atomically(tmp_path / "a", b"2", overwrite=False)
    assert (tmp_path / "a").read_bytes() == b"1" and _leftovers(tmp_path) == []


def test_check_writable_names_a_missing_folder_and_a_folder_target(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="no folder"):
        check_writable(tmp_path / "missing" / "c.json")
    with pytest.raises(OutputError, match="it is a folder"):
        check_writable(tmp_path)
    check_writable(tmp_path / "c.json")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_check_writable_names_a_read_only_folder(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(OutputError, match="not writable"):
            check_writable(tmp_path / "c.json")
    finally:
        tmp_path.chmod(0o700)


# ------------------------------------------------------------------------------------------ the commands

@pytest.fixture()
def recorded(small_spec: Path, tmp_path: Path) -> dict[str, str]:
    """A ledger with one run, a key pair and a signed checkpoint of the ledger's head."""
    db = str(tmp_path / "l.db")
    assert invoke("run", str(small_spec), "--ledger", db).exit_code == 0
    keys = json.loads(invoke("keygen", "--out-dir", str(tmp_path / "keys"), "--json").stdout)
    checkpoint = str(tmp_path / "head.checkpoint")
    assert invoke("checkpoint", "--key", keys["private_key"], "--out", checkpoint, "--ledger", db).exit_code == 0
    other = json.loads(invoke("keygen", "--out-dir", str(tmp_path / "keys"), "--name", "other", "--json").stdout)
    return {"db": db, "key": keys["private_key"], "pub": keys["public_key"], "other": other["private_key"],
            "checkpoint": checkpoint}


COMMANDS = {
    "export": lambda r, out: ["export", "latest", "-o", out, "--ledger", r["db"]],
    "export --format cyclonedx": lambda r, out: ["export", "latest", "--format", "cyclonedx", "-o", out, "--ledger",
                                                 r["db"]],
    "checkpoint": lambda r, out: ["checkpoint", "--key", r["key"], "--out", out, "--ledger", r["db"]],
    "cosign": lambda r, out: ["cosign", r["checkpoint"], "--public-key", r["pub"], "--key", r["other"], "--out", out,
                              "--ledger", r["db"]],
    "prove": lambda r, out: ["prove", "latest", "--checkpoint", r["checkpoint"], "-o", out, "--ledger", r["db"]],
    "attest": lambda r, out: ["attest", "latest", "--key", r["key"], "-o", out, "--ledger", r["db"]],
    "report": lambda r, out: ["report", "latest", "-o", out, "--ledger", r["db"]],
    "run --no-record": lambda r, out: ["run", str(Path(r["db"]).parent / "spec.yaml"), "--no-record", "-o", out],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_disk_is_one_error_line_exit_2_and_no_file(command: str, recorded: dict[str, str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "file.json"
    _disk_full(monkeypatch)
    line = _one_error(invoke(*COMMANDS[command](recorded, str(out))), 2)
    assert str(out) in line and ENOSPC in line
    assert list(out_dir.iterdir()) == []
    monkeypatch.undo()
    assert invoke(*COMMANDS[command](recorded, str(out))).exit_code == 0 and out.stat().st_size > 0


def test_keygen_on_a_full_disk_leaves_no_key_and_never_replaces_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    keys = tmp_path / "keys"
    for after in (0, 2):  # the private key fails; the public key fails after the private one was written
        with monkeypatch.context() as patch:
            _disk_full(patch, after=after)
            line = _one_error(invoke("keygen", "--out-dir", str(keys)), 2)
        assert ENOSPC in line and list(keys.iterdir()) == []
    made = json.loads(invoke("keygen", "--out-dir", str(keys), "--json").stdout)
    private = Path(made["private_key"])
    assert private.stat().st_mode & 0o777 == 0o600 and private.stat().st_size > 0
    before = private.read_bytes()
    again = invoke("keygen", "--out-dir", str(keys), "--json")
    assert again.exit_code == 2 and "exists" in json.loads(again.stdout)["error"]["message"]
    assert private.read_bytes() == before and sorted(p.name for p in keys.iterdir()) == ["certa.key", "certa.pub"]


def test_run_refuses_an_unwritable_output_before_recording(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    output = tmp_path / "missing-dir" / "c.json"  # (a folder is refused by the option's type already)
    result = invoke("run", str(small_spec), "-o", str(output), "--ledger", str(db))
    assert str(output) in _one_error(result, 2) and not db.exists()
    result = invoke("run", str(small_spec), "--junit", str(tmp_path / "missing-dir" / "j.xml"), "--ledger", str(db))
    assert "the JUnit report" in _one_error(result, 2) and not db.exists()
    result = invoke("run", str(small_spec), "--summary", str(tmp_path / "missing-dir" / "s.md"), "--ledger", str(db))
    assert "the summary" in _one_error(result, 2) and not db.exists()


def test_run_whose_output_fails_after_recording_exits_4_and_names_the_run_and_export(
        small_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db, out = tmp_path / "l.db", tmp_path / "c.json"
    _disk_full(monkeypatch)
    result = invoke("run", str(small_spec), "-o", str(out), "--ledger", str(db), "--json")
    line = _one_error(result, RecordedOutputError.exit_code)
    assert RecordedOutputError.exit_code == 4 and json.loads(result.stdout)["error"]["exit_code"] == 4
    with Ledger.open(db) as ledger:
        (run,) = ledger.runs()
    assert f"run {run.run_id} (PASS) is recorded" in line and ENOSPC in line
    assert f"certa export {run.run_id[:12]} -o {out}" in line
    assert not out.exists() and _leftovers(tmp_path) == []
    monkeypatch.undo()
    export = line.split("write it with: ")[1].split()
    assert invoke(*export[1:], "--ledger", str(db)).exit_code == 0 and json.loads(out.read_text())[
        "issued"]["run_id"] == run.run_id


def test_a_junit_report_that_fails_after_recording_exits_4(small_spec: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _disk_full(monkeypatch)
    result = invoke("run", str(small_spec), "--junit", str(tmp_path / "j.xml"), "--ledger", str(tmp_path / "l.db"))
    assert "is recorded, but cannot write the JUnit report" in _one_error(result, 4)
    assert _leftovers(tmp_path) == [] and not (tmp_path / "j.xml").exists()


def test_a_summary_is_appended_whole_or_not_at_all(small_spec: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``append_atomically``: the bytes before stay, the new ones follow; a failed append (a full disk after the
    run was recorded: exit 4) leaves the file as it was, never half a summary, and no temporary file."""
    summary = tmp_path / "summary.md"
    append_atomically(summary, b"one\n")
    append_atomically(summary, b"two\n")
    assert summary.read_bytes() == b"one\ntwo\n"
    _disk_full(monkeypatch)
    result = invoke("run", str(small_spec), "--summary", str(summary), "--ledger", str(tmp_path / "l.db"))
    assert "is recorded, but cannot write the summary" in _one_error(result, 4)
    assert summary.read_bytes() == b"one\ntwo\n" and _leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------------ certa site

def test_site_on_a_full_disk_is_one_error_line_and_no_temporary_file(recorded: dict[str, str], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "site"
    _disk_full(monkeypatch)
    assert ENOSPC in _one_error(invoke("site", "-o", str(out), "--jobs", "1", "--ledger", recorded["db"]), 2)
    assert _leftovers(out) == [] and not list(out.rglob("*.html"))


_KILLED_SITE = """
import os, signal, sys
from certa import cli
calls, real = [0], os.fsync
def fsync(fd):
    calls[0] += 1
    if calls[0] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    real(fd)
os.fsync = fsync
cli.main(sys.argv[2:])
"""


def test_a_site_build_killed_at_any_write_is_finished_by_the_next(tmp_path: Path) -> None:
    """SIGKILL at the n-th fsync: after a temporary file is complete but not yet moved into place (odd n) or
    just after (even n, the folder's fsync), across the pending manifest, the pages and the final manifest."""
    db = tmp_path / "l.db"
    for spec in ("paired-ratio", "paired-ratio", "sequential-diff"):
        assert invoke("run", str(ROOT / "specs" / spec / "spec.yaml"), "--ledger", str(db)).exit_code == 0
    clean = tmp_path / "clean"
    assert invoke("site", "-o", str(clean), "--jobs", "1", "--ledger", str(db)).exit_code == 0
    pages = {p.relative_to(clean): p.read_bytes() for p in clean.rglob("*") if p.is_file()}
    moments = (1, 2, 5, 12, 17)
    builds = {moment: subprocess.Popen([sys.executable, "-c", _KILLED_SITE, str(moment), "site", "-o",
                                        str(tmp_path / f"killed-{moment}"), "--jobs", "1", "--ledger", str(db)],
                                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
              for moment in moments}  # all at once (each its own folder; they only read the ledger)
    for moment, build in builds.items():
        _, stderr = build.communicate(timeout=120)
        assert build.returncode == -signal.SIGKILL, (moment, stderr)
    for moment in moments:
        out = tmp_path / f"killed-{moment}"
        rerun = invoke("site", "-o", str(out), "--jobs", "1", "--ledger", str(db), "--json")
        assert rerun.exit_code == 0, (moment, rerun.output)
        assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == pages, moment
        assert _leftovers(out) == []
        assert set(json.loads((out / MANIFEST_NAME).read_text())["pages"]) == set(map(str, pages)) - {MANIFEST_NAME}
