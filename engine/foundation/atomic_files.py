"""Every file certa writes, written atomically: a reader, a crash or a full disk never sees or leaves a part.

``write_atomically`` writes the bytes to a new temporary file in the target's folder (``.NAME.RANDOM.certa-tmp``,
created with the final permissions, so a private key is never readable by others even for an instant),
flushes and fsyncs it, moves it into place (``os.replace``, or a hard link that fails when the target exists
for files that are never overwritten) and fsyncs the folder. On any failure the temporary file is removed and
an ``OutputError`` names the path and the operating system's reason, in one line. Only the standard library
is imported here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from certa.engine.foundation.errors import OutputError

__all__ = ["TEMPORARY_SUFFIX", "append_atomically", "check_writable", "is_temporary", "make_folders",
           "write_atomically"]

TEMPORARY_SUFFIX = ".certa-tmp"
"""The name of every temporary file ends so (``.NAME.RANDOM.certa-tmp``): a leftover is recognisably certa's."""

_PUBLIC = 0o666  # reduced by the umask, as for any file a command creates
_NO_HARD_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS}


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _failure(path: Path, what: str, reason: str) -> OutputError:
    return OutputError(f"cannot write {what + ' ' if what else ''}{path}: {reason}")


def is_temporary(name: str) -> bool:
    """True if ``name`` is one of this module's temporary files (a leftover of a killed writer)."""
    return name.startswith(".") and name.endswith(TEMPORARY_SUFFIX)


def check_writable(path: str | os.PathLike[str], *, what: str = "", new: bool = False) -> None:
    """Raise ``OutputError`` unless a file could be written at ``path`` now: its folder exists and is
    writable, and ``path`` is not a folder (with ``new``, nothing is there: a file written with ``overwrite=False``).
    Nothing is created."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise _failure(target, what, "it is a folder")
    if new and target.exists():
        raise _failure(target, what, "it exists and is never overwritten")
    if not folder.is_dir():
        raise _failure(target, what, f"no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _failure(target, what, f"folder {folder} is not writable")


def make_folders(path: str | os.PathLike[str]) -> None:
    """Create the folder ``path`` and its parents if needed; an ``OutputError`` says why it cannot be."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot create the folder {path}: {_reason(error)}") from None


def _create_temporary(target: Path, mode: int) -> tuple[Path, int]:
    """A new temporary file next to ``target``, opened for writing and created with ``mode``."""
    for _ in range(16):
        temporary = target.with_name(f".{target.name}.{os.urandom(4).hex()}{TEMPORARY_SUFFIX}")
        try:
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                                      mode)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(target.parent))


def _write_all(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb", closefd=True) as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _sync_folder(folder: Path) -> None:
    """Make the rename durable. The file is complete and in place already; a folder that cannot be
    fsynced (Windows, some network filesystems) is not an error."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _place_new(temporary: Path, target: Path) -> None:
    """Move ``temporary`` to ``target`` only if ``target`` does not exist (atomic where hard links work)."""
    try:
        os.link(temporary, target)
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:  # EEXIST among them
            raise
        if target.exists():  # a filesystem without hard links: check, then rename (not atomic against a race)
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from None
        os.replace(temporary, target)
    else:
        with contextlib.suppress(OSError):  # the file is in place; a leftover link is only litter
            temporary.unlink()


def write_atomically(path: str | os.PathLike[str], data: bytes, *, private: bool = False, overwrite: bool = True,
                     what: str = "") -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring).

    ``private``: mode 0600 from the moment the file exists (private keys); otherwise 0666 less the umask.
    ``overwrite=False``: an existing ``path`` is never replaced (``OutputError`` "... exists"), also when it
    appears while writing. ``what`` names the file in the error message ("the JUnit report").
    """
    target = Path(path)
    if not overwrite and target.exists():
        raise _failure(target, what, "it exists and is never overwritten")
    try:
        existing = os.lstat(target).st_mode
    except FileNotFoundError:
        existing = None
    except (OSError, ValueError) as error:  # a path the system refuses (a NUL byte, too long, ...)
        raise _failure(target, what, _reason(error) if isinstance(error, OSError) else str(error)) from None
    if existing is not None and not stat.S_ISREG(existing):  # a rename would replace a device, FIFO or link
        raise _failure(target, what, "it exists and is not a regular file; certa replaces only regular files")
    temporary: Path | None = None
    try:
        temporary, fd = _create_temporary(target, 0o600 if private else _PUBLIC)
        _write_all(fd, data)
        if overwrite:
            os.replace(temporary, target)
        else:
            _place_new(temporary, target)
        temporary = None
    except FileExistsError as error:
        if overwrite or temporary is None:
            raise _failure(target, what, _reason(error)) from None
        raise _failure(target, what, "it exists and is never overwritten") from None
    except OSError as error:
        raise _failure(target, what, _reason(error)) from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                temporary.unlink()
    _sync_folder(target.parent)


def append_atomically(path: str | os.PathLike[str], data: bytes, *, what: str = "") -> None:
    """Append ``data`` to the file at ``path`` (created when absent) atomically: its bytes are read, and the old
    bytes followed by ``data`` written as a new file that replaces it (``write_atomically``), so a reader sees
    either the file before or the whole of it after, never a half-appended part. A CI job summary file
    (``$GITHUB_STEP_SUMMARY``) is appended to by each step so. Two writers appending at once may lose one's
    part: each step of a job runs after the one before. ``what`` names the file in an ``OutputError``."""
    target = Path(path)
    try:
        before = target.read_bytes()
    except FileNotFoundError:
        before = b""
    except (OSError, ValueError) as error:
        raise _failure(target, what, _reason(error) if isinstance(error, OSError) else str(error)) from None
    write_atomically(target, before + data, what=what)
