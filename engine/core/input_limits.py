"""Resource limits on input tables, and reading an input file within them.

A hostile or mistaken input must be refused before it can exhaust the machine: a device (``/dev/zero``), a
FIFO, a multi-gigabyte file, a Parquet file that decompresses a thousandfold, a cell of 100 MB. Every limit is
checked as early as the data allow: a file's size from ``fstat`` before a byte is read, a Parquet table's rows,
columns and decoded size from its footer before any page is decompressed, rows, columns and cells while parsing.

The defaults fit a 24 GB machine running several certa processes (peak memory measured by
``bench/hostile_inputs.py``): a CSV file parsed by Arrow peaks at about 3.5 times its size (``bytes``: 2 GiB,
about 7 GB), a table parsed cell by cell in Python (JSON Lines; CSV with quoted cells, invalid UTF-8, NUL
bytes or long fields) at about 12 times (``text_bytes``: 512 MiB, about 6.5 GB), and a Parquet table takes
its decoded size in memory (``parquet_bytes``: 4 GiB). ``rows`` (10^8) and ``columns`` (10^4) bound the work
of each stage; ``cell_bytes`` (16 MiB) is far beyond any real cell. An evaluator's document (an Inspect log or one
of its ``.eval`` members, an lm-eval results file) is held as its bytes and only the fields read are parsed, at
most ``cell_bytes`` of them a record, which cost up to about 32 times their size (``docs/evidence.md``, "Memory").
An evaluator's export is bounded by ``bytes``, from its size before it is read: its readers keep only the
columns they read (JSON Lines: a peak of 1.5 to 2.1 times the file, ``bench/evidence_import.py --scale``); a
``.eval`` member by ``text_bytes`` and its samples' total by ``bytes``, from the archive's directory before any
member is decompressed; JSON Lines that only the reference reader (``json``, every record as Python objects)
reads by ``text_bytes``.

Raise a limit with the environment variable ``CERTA_INPUT_LIMITS`` (``certa run``, ``certa batch``, the
Python API), e.g. ``CERTA_INPUT_LIMITS="bytes=8GiB,rows=400000000"``, or from Python by passing an
``InputLimits`` to ``certa.engine.core.inputs.load_tables`` / ``certa.engine.core.tables.parse_table`` (``limits=``). Every
refusal is an ``InputError`` naming the input, the limit, the value and this setting.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

from certa.engine.foundation.errors import InputError

__all__ = ["ENV_VAR", "InputLimits", "read_input_file"]

ENV_VAR = "CERTA_INPUT_LIMITS"
"""``key=value,...`` with keys the fields of ``InputLimits``; sizes take a KiB, MiB, GiB or TiB suffix."""

TEXT_FORMATS = ("jsonl",)
"""Formats always parsed cell by cell in Python, so ``text_bytes`` bounds them from the file size."""

_UNITS = {"": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_VALUE = re.compile(r"\s*([0-9][0-9_]*)\s*([kmgt]ib)?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class InputLimits:
    """Limits on one input table (each a maximum, inclusive)."""

    bytes: int = 2 << 30
    """Bytes of an input file (any format), and the declared total of an Inspect ``.eval`` log's samples (which
    are decompressed one at a time)."""
    text_bytes: int = 512 << 20
    """Bytes of a table parsed cell by cell in Python: JSON Lines, and CSV outside Arrow's proven subset; of an
    Inspect ``.eval`` member; of an evaluator's JSON Lines export read by the reference reader (``json``)."""
    rows: int = 10**8
    """Data rows (records) of a table."""
    columns: int = 10**4
    """Columns of a table."""
    cell_bytes: int = 16 << 20
    """UTF-8 bytes of one cell (a JSON Lines number: the bytes of its token), and of the JSON text an evaluator's
    reader parses into Python objects from one record of a document (an Inspect sample's id, epoch, input, target
    and scores; a log's header; an lm-eval results file), checked before it is parsed."""
    parquet_bytes: int = 4 << 30
    """Decompressed and decoded size in memory of a Parquet table, estimated from its footer."""
    model_bytes: int = 256 << 30
    """Bytes of all files of a model folder (``certa.engine.core.models.manifest``), hashed in blocks (not held)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> InputLimits:
        """The defaults, with the values ``CERTA_INPUT_LIMITS`` sets (an invalid setting is an ``InputError``)."""
        setting = (os.environ if environ is None else environ).get(ENV_VAR, "")
        known = {f.name for f in fields(cls)}
        values: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in setting.split(","))):
            key, _, text = item.partition("=")
            key = key.strip()
            match = _VALUE.fullmatch(text)
            if key not in known or match is None:
                raise InputError(f"{ENV_VAR}: cannot read {item!r}; write key=value pairs separated by commas, "
                                 f"keys {', '.join(sorted(known))}, e.g. {ENV_VAR}=bytes=8GiB,rows=400000000")
            values[key] = int(match[1].replace("_", "")) * _UNITS[(match[2] or "").lower()]
        return replace(cls(), **values)

    def check(self, where: str, key: str, value: int, what: str) -> None:
        """Raise an ``InputError`` if ``value`` exceeds the limit ``key``: "WHERE: WHAT is VALUE, over the
        limit KEY=LIMIT; raise it with CERTA_INPUT_LIMITS=KEY=N"."""
        limit = getattr(self, key)
        if value > limit:
            raise InputError(f"{where}: {what} is {value:,}, over the limit {key}={limit:,}; if the input is "
                             f"genuine, raise it with {ENV_VAR}={key}={value}")

    def check_size(self, name: str, fmt: str, size: int) -> None:
        """The byte limits of a file of ``size`` bytes in format ``fmt``."""
        self.check(f"input '{name}'", "bytes", size, "the file size in bytes")
        if fmt in TEXT_FORMATS:
            self.check(f"input '{name}'", "text_bytes", size, f"the size in bytes of a {fmt} file")


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _require_regular(name: str, path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((label for test, label in _KINDS if test(mode)), "not a regular file")
        raise InputError(f"input '{name}': {path} is {kind}; certa reads tables from regular files only "
                         "(copy the data to a file first)")


def read_input_file(name: str, path: Path, fmt: str, limits: InputLimits) -> bytes:
    """The bytes of the regular file ``path``, refused before reading when it is a device, FIFO, socket or
    folder, or larger than ``limits`` allow for ``fmt``. Opened non-blocking, and checked again on the open
    descriptor, so a file swapped for a FIFO in between cannot hang the read."""
    try:
        before = os.stat(path)
        _require_regular(name, path, before.st_mode)
        limits.check_size(name, fmt, before.st_size)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except ValueError as exc:  # an embedded NUL byte, an unencodable character
        raise InputError(f"input '{name}': invalid path {str(path)!r}: {exc}") from None
    except OSError as exc:
        raise InputError(f"input '{name}': cannot read {path}: {exc.strerror}") from None
    with open(fd, "rb") as file:  # buffered: read(n) loops over the kernel's 2 GiB per read() call
        opened = os.fstat(fd)
        _require_regular(name, path, opened.st_mode)
        limits.check_size(name, fmt, opened.st_size)
        try:
            raw = file.read(opened.st_size + 1)
        except OSError as exc:
            raise InputError(f"input '{name}': cannot read {path}: {exc.strerror}") from None
        except MemoryError:
            raise InputError(f"input '{name}': not enough memory to read {path} ({opened.st_size:,} bytes)") from None
    if len(raw) > opened.st_size:
        raise InputError(f"input '{name}': {path} grew while it was read (its size was {opened.st_size:,} bytes); "
                         "copy it to a file that nothing writes to")
    return raw
