"""Weight files scored where they lie: a read lease and a copy-on-write map where the kernel can vouch for them,
the private copy elsewhere, the same numbers either way, and a run refused when a leased file is opened for
writing before scoring ends."""

from __future__ import annotations

import errno
import gc
import os
import signal
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.models import lease as lease_module
from certa.engine.core.models.lease import (LEASE_FILE_SYSTEMS, leased_map, leases_possible, mount_type,
                                           unmap_resident)
from certa.engine.core.models.manifest import folder_manifest

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
28 27 0:25 / /srv/models ro,nosuid shared:7 - nfs4 server:/export rw
30 27 0:27 / /srv/models/local rw,relatime - xfs /dev/vdb rw
31 27 0:28 / /srv/models/local rw,relatime master:2 - overlay overlay rw,lowerdir=/a
32 27 0:29 / /mnt/my\\040models rw - tmpfs tmpfs rw
"""


@pytest.mark.parametrize("path, device, expected", [
    ("/home/u/model.safetensors", os.makedev(254, 0), "ext4"),
    ("/", os.makedev(254, 0), "ext4"),
    ("/srv/models/a.safetensors", os.makedev(0, 25), "nfs4"),
    ("/srv/modelsx/a.safetensors", os.makedev(254, 0), "ext4"),  # a prefix of the name, not a folder above it
    ("/srv/models/local/a.safetensors", os.makedev(0, 28), "overlay"),  # the mount on top, listed last
    ("/srv/models/local/a.safetensors", os.makedev(0, 27), None),  # hidden under the overlay
    ("/srv/models/local/a.safetensors", os.makedev(254, 0), None),  # a layer's device: not the mount's
    ("/mnt/my models/m.safetensors", os.makedev(0, 29), "tmpfs"),  # \040 is a space
])
def test_the_mount_holding_a_path_names_its_file_system_when_it_is_the_files_device(path, device, expected):
    assert mount_type(MOUNTINFO, path, device) == expected


def test_a_mountinfo_line_without_its_separator_answers_nothing():
    assert mount_type("27 1 254:0 / / rw,relatime ext4 /dev/vda rw\n", "/a", os.makedev(254, 0)) is None
    assert mount_type("", "/a", os.makedev(254, 0)) is None


def _leasable(tmp_path: Path, raw: bytes = b"weights" * 1000) -> Path:
    """A file in ``tmp_path`` where leases are used (the test is skipped on a file system that is not one)."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(raw)
    with open(path, "rb") as file:
        status = os.fstat(file.fileno())
        with open(lease_module.MOUNTINFO, encoding="utf-8") as info:
            kind = mount_type(info.read(), os.readlink(f"/proc/self/fd/{file.fileno()}"), status.st_dev)
    if kind not in LEASE_FILE_SYSTEMS or not leases_possible():
        pytest.skip(f"the test folder is on {kind}, where certa copies weight files instead of leasing them")
    return path


def test_a_leased_map_is_the_files_bytes_until_a_writer_opens_it(tmp_path):
    path = _leasable(tmp_path)
    with open(path, "rb", buffering=0) as file:
        mapped, held = leased_map(file.fileno(), path.stat().st_size)
    assert mapped[:] == path.read_bytes() and held.held()
    unmap_resident(mapped, 5_000)  # from the page holding byte 5,000: mapped again from the file when read
    assert mapped[:] == path.read_bytes()
    with pytest.raises(BlockingIOError) as raised:  # the writer is told to wait; the lease is breaking
        os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    assert raised.value.errno == errno.EWOULDBLOCK and not held.held()


def test_a_broken_lease_still_held_by_a_live_model_is_named_by_the_run_wide_check(tmp_path):
    """``execute``'s check before a run's results leave it: a lease broken while its holder lives is named, whatever
    stage held it and whether it closed its model; a lease let go (its holder freed) is no longer asked."""
    from certa.engine.core.models.lease import broken_leases

    path = _leasable(tmp_path)
    with open(path, "rb", buffering=0) as file:
        mapped, held = leased_map(file.fileno(), path.stat().st_size)
    assert str(path) not in broken_leases()
    with pytest.raises(BlockingIOError):
        os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    assert str(path) in broken_leases()
    mapped.close()
    del held
    gc.collect()
    assert str(path) not in broken_leases()


def test_a_file_open_for_writing_or_of_another_size_is_not_leased(tmp_path):
    path = _leasable(tmp_path)
    size = path.stat().st_size
    with open(path, "rb", buffering=0) as file:
        assert leased_map(file.fileno(), size + 1) is None  # changed since it was listed: the copy reports it
        writer = os.open(path, os.O_WRONLY)
        try:
            assert leased_map(file.fileno(), size) is None
        finally:
            os.close(writer)
        assert leased_map(file.fileno(), size) is not None


def test_leases_are_used_from_the_main_thread_only_with_sigio_ignored(monkeypatch):
    monkeypatch.setattr(signal, "getsignal", lambda number: signal.SIG_DFL)
    installed = []
    monkeypatch.setattr(signal, "signal", lambda number, handler: installed.append((number, handler)))
    assert leases_possible() and installed == [(signal.SIGIO, signal.SIG_IGN)]
    answers = []
    worker = threading.Thread(target=lambda: answers.append(leases_possible()))
    worker.start()
    worker.join()
    assert answers == [False] and len(installed) == 1
    monkeypatch.setattr(signal, "getsignal", lambda number: None)  # set outside Python: unknown, so no lease
    assert not leases_possible()


def _no_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    from certa.engine.core.models import manifest, runtime

    for module in (manifest, runtime):
        monkeypatch.setattr(module, "leases_possible", lambda: False)


def _held_table(folder: Path):
    manifest = folder_manifest("m", folder, InputLimits(), keep_weights=True)
    return replace(read_input("m", manifest.raw, "hf-model", limits=InputLimits()), origin=folder,
                   weights=manifest.held)


@pytest.mark.models
@pytest.mark.parametrize("held", [False, True])
def test_both_ways_load_the_same_tensors(tiny_models, tmp_path, monkeypatch, held):
    """The weights mapped under a lease (kept when the folder was hashed, or read by the loader) and the weights
    copied are the same tensors; the loaded model holds a lease for each file only in the first case."""
    import shutil

    from certa.engine.core.models.runtime import load_causal_lm

    _leasable(tmp_path)
    folder = Path(shutil.copytree(tiny_models["baseline"], tmp_path / "m"))
    table = (_held_table if held else lambda f: replace(_held_table(f), weights=None))(folder)
    leased = load_causal_lm(table)
    assert set(leased.leases) == {"model.safetensors"} and leased.leases["model.safetensors"].held()
    _no_leases(monkeypatch)
    copied = load_causal_lm((_held_table if held else lambda f: replace(_held_table(f), weights=None))(folder))
    assert not copied.leases
    expected = copied.model.state_dict()
    assert all(value.equal(expected[key]) for key, value in leased.model.state_dict().items())
    leased.check_unchanged()


@pytest.mark.models
def test_a_weight_file_opened_for_writing_while_it_is_scored_refuses_the_run(tiny_models, tmp_path):
    import shutil

    from certa.engine.core.runtimes.hf import HfRuntime

    _leasable(tmp_path)
    folder = Path(shutil.copytree(tiny_models["baseline"], tmp_path / "m"))
    runtime = HfRuntime(_held_table(folder))
    model = runtime.open()
    with pytest.raises(BlockingIOError):
        os.open(folder / "model.safetensors", os.O_WRONLY | os.O_NONBLOCK)
    with pytest.raises(InputError, match="model file model.safetensors was opened for writing while certa scored "
                                         "it; copy the model to a folder nothing writes to"):
        model.close()
    assert model.loaded is None


@pytest.mark.models
def test_a_certificate_is_the_same_whether_the_weights_were_leased_or_copied(tiny_models, tmp_path, monkeypatch):
    """model.windows on the same folders: the certificate's content is the same bytes either way, and the lease
    path was the one taken in the first run."""
    from tests.core.stages.test_model_windows import _spec

    from certa.engine.core.models import manifest
    from certa.engine.services.run import run

    _leasable(tmp_path)
    spec = _spec(tmp_path, tiny_models)
    mapped = []

    def spy(fd: int, size: int):  # type: ignore[no-untyped-def]
        mapped.append(lease_module.leased_map(fd, size))
        return mapped[-1]

    monkeypatch.setattr(manifest, "leased_map", spy)
    leased = run(spec).certificate["content"]
    assert mapped and all(m is not None for m in mapped)
    mapped.clear()
    _no_leases(monkeypatch)
    copied = run(spec).certificate["content"]
    assert not mapped and canonical_bytes(leased) == canonical_bytes(copied)
