"""``central_directory`` reads the members ``zipfile`` reads, with the same facts, or leaves the archive to ``zipfile``."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pytest

from certa.engine.core.evidence import read_inspect_eval
from certa.engine.core.evidence.zip_directory import central_directory
from tests.core.evidence.zstd_zip import zstd_zip

FIXTURES = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "inspect"


def zipfile_facts(raw: bytes) -> list[tuple]:
    return [(info.filename, info.compress_type, info.CRC, info.compress_size, info.file_size, info.header_offset)
            for info in zipfile.ZipFile(io.BytesIO(raw)).infolist()]


def sample(index: int) -> bytes:
    return json.dumps({"id": f"s{index}", "epoch": 1, "input": f"q{index}", "target": "2",
                       "scores": {"match": {"value": "C" if index % 2 else "I"}}}).encode()


def archive(n: int = 3, extra_name: str = "samples/s_epoch_1.json") -> bytes:
    header = json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}).encode()
    return zstd_zip({"header.json": header, **{f"samples/s{i}_epoch_1.json": sample(i) for i in range(n)},
                     extra_name: sample(n)})


@pytest.mark.parametrize("raw", [(FIXTURES / "baseline.eval").read_bytes(), archive()], ids=["inspect", "made"])
def test_the_members_and_their_facts_are_zipfiles(raw: bytes) -> None:
    members = central_directory(raw)
    assert members is not None
    assert [tuple(members.member(i)) for i in range(len(members.names))] == zipfile_facts(raw)


@pytest.mark.slow
def test_an_archive_of_more_members_than_the_end_record_counts_is_read_from_its_zip64_records() -> None:
    raw = archive(66_000)
    members = central_directory(raw)
    assert members is not None
    assert [tuple(members.member(i)) for i in range(len(members.names))] == zipfile_facts(raw)


def with_comment(raw: bytes) -> bytes:
    return raw[:-2] + struct.pack("<H", 3) + b"abc"


def deflated() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as written:
        written.writestr("header.json", json.dumps({"status": "success", "eval": {"task": "t"}}))
        written.writestr("samples/s1_epoch_1.json", sample(1))
    return out.getvalue()


@pytest.mark.parametrize("raw", [with_comment(archive()), b"prefix" + archive(), deflated(), archive()[:-3],
                                 archive(extra_name="samples/é_epoch_1.json"), b"not a zip file at all, not even close"],
                         ids=["comment", "data before", "deflate", "cut", "cp437 name", "garbage"])
def test_another_layout_is_left_to_zipfile_and_read_as_before(raw: bytes) -> None:
    assert central_directory(raw) is None
    try:
        expected = zipfile_facts(raw)
    except zipfile.BadZipFile:
        with pytest.raises(Exception, match="not an Inspect .eval archive"):
            read_inspect_eval(raw, name="x.eval")
        return
    assert expected
    if raw.startswith(b"PK"):  # zipfile reads it: so does the reader, through zipfile
        assert read_inspect_eval(raw, name="x.eval").n_items >= 1
