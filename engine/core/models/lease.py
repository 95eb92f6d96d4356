"""A weight file scored where it lies: a read lease, a copy-on-write map of the file, and a check at the end.

certa scores the bytes it hashed. The plain way (``certa.engine.core.models.manifest.read_hashed``) reads each
weight file into private anonymous memory and hashes it there: nothing outside the process can change those
bytes, but filling fresh memory costs a page fault per 4 KiB page (0.8 s of CPU for 1.9 GB). This module gives the
same guarantee on the file's own pages, where Linux can state it:

1. the file, open read-only, is given a **read lease** (``fcntl(fd, F_SETLEASE, F_RDLCK)``, fcntl(2), "Leases").
   Linux grants it only when no process has the file open for writing (a writable shared map holds such an open
   file too), and **breaks** it when any process later opens the file for writing or truncates it (through any
   name: the lease is on the inode). A broken lease is never restored: ``F_GETLEASE`` answers ``F_UNLCK`` from the
   moment the break starts (the kernel's ``fcntl_getlease`` reports the lease's target type);
2. the file is mapped ``MAP_PRIVATE``: this process's own writes to the map never reach the file, and its pages
   are the page cache's until then, so nothing is copied;
3. the caller hashes the map and builds tensors over it, keeps the lease (``FileLease``) as long as they live,
   and once scoring is done asks ``FileLease.held``: a lease held from before the hash to after the last forward
   pass means no process could have changed the file's bytes in between, so the bytes scored are the bytes hashed.
   A lease found broken refuses the run (``certa.engine.core.models.runtime.LoadedModel.check_unchanged``).

When any of this cannot be had, ``leased_map`` answers None and the caller copies as before; no number depends on
which way the bytes came (the tensors are the same bytes), so a certificate is identical either way:

* not Linux (no ``F_SETLEASE``), or a file system where the kernel's lease is not the whole story
  (``LEASE_FILE_SYSTEMS`` only: a network file system's server, a FUSE daemon or an overlay's lower layer can
  change the bytes without opening this inode for writing). The type is that of the mount whose mount point holds
  the file's path, read from ``/proc/self/mountinfo`` (proc(5)), and used only if that mount's device number is the
  file's ``st_dev`` (an overlay's file may report its lower layer's device);
* the lease refused: ``EAGAIN`` (open for writing somewhere), ``EACCES`` (not the file's owner, without
  ``CAP_LEASE``), ``EINVAL``; or the file's size, under the lease, not the size expected;
* ``leases_possible()`` false: a lease break sends ``SIGIO`` to the holder, whose default action ends the process,
  so the lease is used only from the main thread (the only one that may set a signal's handler), which ignores
  ``SIGIO`` unless a handler of the program's own is already set; elsewhere (a worker thread) the copy.

What the lease does not see, as a copy would: a process writing the block device under the file system (root, or
the ``disk`` group), whose blocks the kernel may read again after evicting the file's clean pages. A writer that
opens a leased file blocks for ``/proc/sys/fs/lease-break-time`` (45 s by default) unless it opens with
``O_NONBLOCK`` (then ``EWOULDBLOCK``), and the run that held the lease is refused; a file truncated while mapped
ends the run with ``SIGBUS``. Neither can give a certificate of bytes other than the ones hashed.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import signal
import stat
import threading
import weakref
from dataclasses import dataclass

__all__ = ["LEASE_FILE_SYSTEMS", "FileLease", "leased_map", "leases_possible", "mount_type", "unmap_resident",
           "broken_leases"]

LEASE_FILE_SYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs"})
"""Local file systems whose every writer opens the inode for writing (so breaks a read lease)."""
MOUNTINFO = "/proc/self/mountinfo"


def _unescaped(field: str) -> str:
    """A mountinfo path field with its octal escapes (``\\040`` for a space, ``\\011``, ``\\012``, ``\\134``) read."""
    parts = field.split("\\")
    return parts[0] + "".join(chr(int(part[:3], 8)) + part[3:] if part[:3].isdigit() else "\\" + part
                              for part in parts[1:])


def mount_type(mountinfo: str, path: str, device: int) -> str | None:
    """The file system type of the mount holding the absolute ``path`` in ``mountinfo`` (the text of
    ``/proc/self/mountinfo``: one line per mount, ``ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS [TAGS...] -
    TYPE SOURCE SUPER_OPTIONS``, proc(5)), or None: no mount holds it, a line cannot be read, or that mount's
    device (``MAJOR:MINOR``) is not ``device`` (the file's ``st_dev``). The mount holding a path is the one with
    the longest mount point that is the path or a folder above it, the last listed when several are mounted
    there (the one on top)."""
    best: tuple[int, str, str] | None = None
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            return None
        point = _unescaped(fields[4])
        below = path == point or path.startswith(point.rstrip("/") + "/")
        if below and (best is None or len(point) >= best[0]):
            best = (len(point), fields[2], fields[fields.index("-", 6) + 1])
    if best is None:
        return None
    major, _, minor = best[1].partition(":")
    if not (major.isdigit() and minor.isdigit()) or os.makedev(int(major), int(minor)) != device:
        return None
    return best[2]


def leases_possible() -> bool:
    """Whether ``leased_map`` may be tried from this thread: Linux, the main thread, and ``SIGIO`` ignored (set
    here when it had its default action, which would end the process when a lease breaks) or handled by the
    program's own handler; not when it was set outside Python (``signal.getsignal`` cannot say to what)."""
    sigio = getattr(signal, "SIGIO", None)
    if (sigio is None or not hasattr(fcntl, "F_SETLEASE")
            or threading.current_thread() is not threading.main_thread()):
        return False
    handler = signal.getsignal(sigio)
    if handler == signal.SIG_DFL:
        signal.signal(sigio, signal.SIG_IGN)
        return True
    return handler is not None


@dataclass(frozen=True, eq=False)
class FileLease:
    """A read lease on a weight file, held by its own descriptor ``fd`` (closed when this object is freed)."""

    fd: int

    path: str = ""
    """The weight file's path when it was leased (for the refusal's message)."""

    def __post_init__(self) -> None:
        weakref.finalize(self, os.close, self.fd)
        _LIVE.add(self)

    def held(self) -> bool:
        """Whether the lease is still the read lease taken: False once any process opened the file for writing or
        truncated it (module docstring)."""
        try:
            return fcntl.fcntl(self.fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK
        except OSError:
            return False


_LIVE: weakref.WeakSet[FileLease] = weakref.WeakSet()
"""Every lease this process holds (one leaves with its model)."""


def broken_leases() -> list[str]:
    """The paths of the weight files whose lease, still held by a live model, was broken: the run-wide check
    ``certa.engine.core.interpreter.execute`` makes before a run's results leave it, whatever stage loaded the
    model and whether or not it closed it (``OpenHfRuntime.close`` checks its own model's as it drops it)."""
    return sorted(lease.path for lease in list(_LIVE) if not lease.held())


def _lease_file_system(fd: int, device: int) -> bool:
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
        with open(MOUNTINFO, encoding="utf-8", errors="surrogateescape") as file:
            mountinfo = file.read()
    except OSError:
        return False
    return mount_type(mountinfo, path, device) in LEASE_FILE_SYSTEMS


def leased_map(fd: int, size: int) -> tuple[mmap.mmap, FileLease] | None:
    """The file open read-only at ``fd`` (a weight file of ``size`` bytes) mapped
    ``MAP_PRIVATE`` under a read lease taken first (module docstring), or None where that cannot be had (the
    caller then copies the file): a file system not in ``LEASE_FILE_SYSTEMS``, the lease refused, or the file, once
    leased, not a regular file of ``size`` bytes. Call only when ``leases_possible()``."""
    if size <= 0 or not _lease_file_system(fd, os.fstat(fd).st_dev):
        return None
    try:  # a description of its own (not a dup of fd's): the lease ends when this one is closed
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.fcntl(own, fcntl.F_SETLEASE, fcntl.F_RDLCK)  # EAGAIN, EACCES, EINVAL: the copy instead
        status, given = os.fstat(own), os.fstat(fd)
        if (stat.S_ISREG(status.st_mode) and status.st_size == size
                and (status.st_dev, status.st_ino) == (given.st_dev, given.st_ino)):
            return mmap.mmap(own, size, flags=mmap.MAP_PRIVATE), FileLease(own, os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
    os.close(own)  # the lease, if taken, ends with it
    return None


def unmap_resident(mapped: mmap.mmap, start: int = 0, length: int | None = None) -> None:
    """Let go of the pages of the leased map ``mapped`` (from ``leased_map``; never private memory, whose bytes
    would be lost) that hold bytes ``start`` to ``start + length`` (None: to its end), once hashed and checked
    (``madvise(MADV_DONTNEED)``, from the page holding ``start``): they stay in the page cache, and touching them
    again maps the file's bytes again, unchanged while the lease is held. So the process holds only the weights a
    forward pass touches (most rows of an input embedding never are), not every byte it hashed."""
    end = len(mapped) if length is None else start + length
    start -= start % mmap.PAGESIZE
    mapped.madvise(mmap.MADV_DONTNEED, start, end - start)
