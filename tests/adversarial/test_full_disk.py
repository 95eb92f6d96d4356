"""Category of the adversarial sweep: a real full disk. A size-limited tmpfs is mounted (root on Linux, as in CI),
filled to its last byte, and every command that writes a file writes there: ``keygen``, ``checkpoint --out``,
``prove -o``, ``attest -o``, ``export -o``, ``report -o``, ``site -o``, ``run -o`` and ``run --junit``; and a
SQLite ledger living on the full tmpfs is given to ``run`` and ``review``.

Each must end in one ``error:`` line with its documented exit code (2; 4 for ``run`` when the run was recorded
on another disk and only its file failed), leave no temporary file and no partial output, and lose no committed
run: once space is freed, the ledger verifies with the same runs and the command succeeds. Where no tmpfs can
be mounted the category is skipped; ``tests/foundation/test_atomic_outputs.py`` injects ENOSPC instead.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import World, assert_ledger_kept, check, invoke, sql_rows

pytestmark = pytest.mark.adversarial

SIZE = "4m"
"""The tmpfs's size: room for the small ledger copied onto it before it is filled."""
FILLER = "filler"


@pytest.fixture(scope="module")
def tmpfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tmpfs of ``SIZE`` mounted for this module, unmounted afterwards whatever happens."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux; tests/foundation/test_atomic_outputs.py injects ENOSPC instead")
    mount_point = tmp_path_factory.mktemp("full-disk")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", "certa-full-disk",
                              str(mount_point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); tests/foundation/test_atomic_outputs.py injects "
                    "ENOSPC instead")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


class FullDisk:
    """The mounted tmpfs, emptied for a case: ``fill()`` takes every free byte, ``free()`` gives them back."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def fill(self) -> None:
        """Write a filler file until the tmpfs refuses one more byte."""
        with open(self.root / FILLER, "ab", buffering=0) as filler:
            for chunk in (1 << 16, 4096, 1):
                try:
                    while True:
                        filler.write(b"\0" * chunk)
                except OSError as error:
                    assert error.errno == errno.ENOSPC, error
        assert os.statvfs(self.root).f_bavail == 0

    def free(self) -> None:
        (self.root / FILLER).unlink(missing_ok=True)

    def files(self) -> list[Path]:
        """Every file on the tmpfs but the filler (what a command left)."""
        return sorted(p for p in self.root.rglob("*") if p.is_file() and p.name != FILLER)


@pytest.fixture
def full_disk(tmpfs: Path) -> Iterator[FullDisk]:
    """The tmpfs, empty, for one case; emptied again afterwards."""
    disk = FullDisk(tmpfs)
    try:
        yield disk
    finally:
        for path in tmpfs.iterdir():
            shutil.rmtree(path) if path.is_dir() else path.unlink()


OUTPUT_COMMANDS: dict[str, Callable[[World, Path], tuple[object, ...]]] = {
    "keygen": lambda w, d: ("keygen", "--out-dir", d / "keys"),
    "checkpoint": lambda w, d: ("checkpoint", "--key", w.key, "--out", d / "head.checkpoint", "--ledger", w.ledger),
    "prove": lambda w, d: ("prove", "latest", "--checkpoint", w.checkpoint, "-o", d / "bundle.json",
                           "--ledger", w.ledger),
    "attest": lambda w, d: ("attest", "latest", "--key", w.key, "-o", d / "attestation.json", "--ledger", w.ledger),
    "export": lambda w, d: ("export", "latest", "-o", d / "cert.json", "--ledger", w.ledger),
    "report": lambda w, d: ("report", "latest", "-o", d / "report.html", "--ledger", w.ledger),
    "site": lambda w, d: ("site", "-o", d / "site", "--ledger", w.ledger),
}


@pytest.mark.parametrize("command", list(OUTPUT_COMMANDS))
def test_full_disk_output(command: str, world: World, full_disk: FullDisk) -> None:
    """A read command whose output file cannot be written: exit 2, one line, nothing on the disk; with space
    again the same command succeeds (``site`` completes its folder)."""
    args = OUTPUT_COMMANDS[command](world, full_disk.root)
    full_disk.fill()
    check(f"{command} on a full disk", invoke(*args), allowed={2}, folders=(full_disk.root,),
          no_files=tuple(full_disk.files()), ledger=world.ledger, runs=world.runs)
    full_disk.free()
    check(f"{command} with space again", invoke(*args), allowed={0}, folders=(full_disk.root,))


@pytest.mark.parametrize("option", ["-o", "--junit"])
def test_full_disk_run_output(option: str, world: World, full_disk: FullDisk, tmp_path: Path) -> None:
    """``certa run`` recording in a ledger on another disk, its file on the full one: the run is recorded, exit 4,
    one line naming the run; no file on the full disk."""
    db = tmp_path / "ledger.db"
    shutil.copyfile(world.ledger, db)
    full_disk.fill()
    result = invoke("run", world.spec, option, full_disk.root / "out", "--ledger", db)
    check(f"run {option} on a full disk", result, allowed={4}, folders=(full_disk.root, tmp_path),
          no_files=tuple(full_disk.files()), ledger=db, runs=world.runs + 1)
    newest = sql_rows(db, "SELECT run_id FROM runs ORDER BY recorded_at DESC, rowid DESC LIMIT 1")[0][0]
    assert f"run {newest} " in result.stderr and "is recorded" in result.stderr


LEDGER_WRITES: dict[str, Callable[[World], tuple[object, ...]]] = {
    "run": lambda w: ("run", w.spec),
    "review": lambda w: ("review", "latest", "--by", "kim", "--decision", "approved"),
    "review-signed": lambda w: ("review", "latest", "--by", "kim", "--decision", "comment", "--key", w.key),
}


@pytest.mark.parametrize("command", list(LEDGER_WRITES))
def test_full_disk_ledger(command: str, world: World, full_disk: FullDisk) -> None:
    """A SQLite ledger on the full disk: the write is refused in one line (exit 2) and, once space is freed, the
    ledger verifies with every committed run and nothing of the refused write."""
    db = full_disk.root / "ledger.db"
    shutil.copyfile(world.ledger, db)
    entries = "SELECT seq, entry_hash FROM entries ORDER BY seq"
    before = sql_rows(db, entries)
    full_disk.fill()
    check(f"{command} with its ledger on a full disk", invoke(*LEDGER_WRITES[command](world), "--ledger", db),
          allowed={2}, folders=(full_disk.root,))
    full_disk.free()
    assert_ledger_kept(f"{command} with its ledger on a full disk", db, world.runs)
    assert sql_rows(db, entries) == before
