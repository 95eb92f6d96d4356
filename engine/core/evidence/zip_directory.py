"""The central directory of a plain ZIP archive, read without ``zipfile`` (an Inspect ``.eval`` log of many samples).

``zipfile.ZipFile`` builds a ``ZipInfo`` of some twenty attributes for every member, about 0.6 KB and 7 µs each:
115 MB and over a second for a log of 2·10⁵ samples. ``central_directory`` reads the same six facts certa uses of each
member (name, method, CRC-32, sizes, local header's offset) into columns (a name and five integers, about 0.12 KB
a member; a ``Member`` tuple is made when one is taken: ``Directory.member``), for the one layout Inspect writes:
the end record at the very end (no archive comment), with a ZIP64 end record and locator right before it where
the archive has more than 65,535 members (PKWARE APPNOTE 4.3.14-16), no data before the archive, every member
zstd-compressed (method 93) with its name in UTF-8 (or ASCII), no extra field, no size or offset left for a ZIP64
extra field to hold. For anything else it answers ``None`` and ``zipfile`` reads the archive, so that ``zipfile``
still decides every archive it would refuse or read differently; where both read an archive, the members and
their facts are the same (``tests/core/evidence/test_zip_directory.py``).
"""

from __future__ import annotations

import struct
from array import array
from typing import NamedTuple

__all__ = ["Member", "Directory", "central_directory"]

_END = struct.Struct("<4s4H2LH")  # end of central directory record (APPNOTE 4.3.16)
_LOCATOR = struct.Struct("<4sLQL")  # ZIP64 end of central directory locator (4.3.15)
_END64 = struct.Struct("<4sQ2H2L4Q")  # ZIP64 end of central directory record (4.3.14)
_ENTRY = struct.Struct("<4s6H3L5H2L")  # central directory file header (4.3.12)
_UTF8_NAME = 0x800
_ZSTD = 93
_MAX_VERSION = 63  # the highest "version needed to extract" zipfile reads


class Member(NamedTuple):
    """One member as the central directory states it, under ``zipfile.ZipInfo``'s attribute names."""

    filename: str
    compress_type: int
    CRC: int
    compress_size: int
    file_size: int
    header_offset: int


class Directory:
    """The members of an archive in directory order, held as columns: ``names``, and five integers a member."""

    def __init__(self, names: list[str], facts: array[int]) -> None:
        self.names, self.facts = names, facts

    def member(self, index: int) -> Member:
        """The ``index``-th member (from 0) as a ``Member``."""
        return Member(self.names[index], *self.facts[5 * index:5 * index + 5])


def central_directory(raw: bytes) -> Directory | None:
    """The members of the archive ``raw`` in directory order, or ``None`` where it is not of the layout read here
    (module docstring)."""
    end_at = len(raw) - _END.size
    if end_at < 0:
        return None
    signature, disk, start_disk, _, count, size, offset, comment = _END.unpack_from(raw, end_at)
    if signature != b"PK\x05\x06" or comment or disk or start_disk:
        return None
    directory_end = end_at
    locator_at = end_at - _LOCATOR.size
    if locator_at >= 0 and raw[locator_at:locator_at + 4] == b"PK\x06\x07":
        _, locator_disk, _, disks = _LOCATOR.unpack_from(raw, locator_at)
        record_at = locator_at - _END64.size
        if locator_disk or disks > 1 or record_at < 0:
            return None
        signature, _, _, _, disk, start_disk, _, count, size, offset = _END64.unpack_from(raw, record_at)
        if signature != b"PK\x06\x06" or disk or start_disk:
            return None
        directory_end = record_at
    if offset + size != directory_end:  # data before the archive, or a directory elsewhere
        return None
    names: list[str] = []
    facts = array("q")
    at, unpack = offset, _ENTRY.unpack_from
    while at < directory_end:
        if at + _ENTRY.size > directory_end:
            return None
        (signature, _, version, flags, method, _, _, crc, compressed, size, name_length, extra_length,
         comment_length, _, _, _, header_offset) = unpack(raw, at)
        if (signature != b"PK\x01\x02" or version > _MAX_VERSION or method != _ZSTD or extra_length
                or 0xFFFFFFFF in (compressed, size, header_offset)):
            return None
        name_at = at + _ENTRY.size
        at = name_at + name_length + comment_length
        if at > directory_end:
            return None
        encoded = raw[name_at:name_at + name_length]
        if not (flags & _UTF8_NAME or encoded.isascii()) or b"\0" in encoded:
            return None
        try:
            names.append(encoded.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        facts.extend((method, crc, compressed, size, header_offset))
    return Directory(names, facts) if len(names) == count else None
