"""A ZIP archive whose members are zstd-compressed (method 93), as Inspect writes ``.eval`` logs: for tests and
the bench that need archives the fixtures do not hold (hostile members, 10^5 samples). Python 3.11's
``zipfile`` cannot write method 93, so the records are laid out here (PKWARE APPNOTE 4.3.7, 4.3.12, 4.3.14-16)."""

from __future__ import annotations

import struct
import zlib

import zstandard

ZSTD_METHOD = 93


def zstd_zip(members: dict[str, bytes] | list[tuple[str, bytes]], *, declared_sizes: dict[str, int] | None = None,
             payloads: dict[str, bytes] | None = None) -> bytes:
    """The archive of ``members`` (name -> content, or (name, content) pairs, which may repeat a name as a
    re-logged sample does), each zstd-compressed. ``declared_sizes`` overrides a member's recorded size and
    ``payloads`` its compressed bytes (damaged archives for tests)."""
    pairs = list(members.items()) if isinstance(members, dict) else list(members)
    compressor = zstandard.ZstdCompressor(level=3)
    local, central = bytearray(), bytearray()
    for name, content in pairs:
        encoded = name.encode("utf-8")
        payload = (payloads or {}).get(name, compressor.compress(content))
        size = (declared_sizes or {}).get(name, len(content))
        crc = zlib.crc32(content)
        offset = len(local)
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", 63, 0, ZSTD_METHOD, 0, 0x21, crc, len(payload), size,
                             len(encoded), 0) + encoded + payload
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 63, 63, 0, ZSTD_METHOD, 0, 0x21, crc, len(payload),
                               size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    count = len(pairs)
    end = b""
    if count > 0xFFFF:  # more entries than the classic end record counts: ZIP64 end record and locator (4.3.14-15)
        end = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(central), len(local))
        end += struct.pack("<4sLQL", b"PK\x06\x07", 0, len(local) + len(central), 1)
        count = 0xFFFF
    end += struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(central), len(local), 0)
    return bytes(local + central + end)
