"""Inputs read within bounded resources (``certa.engine.core.input_limits``): only regular files, refused before reading
when a device, FIFO, socket or folder; every limit (bytes, rows, columns, cell, Parquet decoded size) an
``InputError`` naming the input, the row or line and column where there is one, the limit, the value and how
to raise it. Cases that would hang or fill the memory if they regressed run in a subprocess with a timeout
and an address-space limit (``bench/hostile_inputs.py`` measures the time and memory goals)."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import ENV_VAR, InputLimits, read_input_file
from certa.engine.core.inputs import load_tables
from certa.engine.core.spec import load_plan
from certa.engine.core.tables import parse_table

from tests.conftest import ROOT, SMALL_SPEC, columns_to_csv_bytes, window_columns

CLI = [sys.executable, "-c", "import sys; from certa.cli import main; sys.exit(main())"]
ADDRESS_SPACE = 3 << 30
"""A child's address-space limit: a regression that read /dev/zero would fail at 3 GiB, not fill the machine."""


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _spec(tmp_path: Path, fmt: str = "csv") -> Path:
    baseline, subject = window_columns(30, seed=1)
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(baseline))
    (tmp_path / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subject))
    spec = tmp_path / f"spec-{fmt}.yaml"
    spec.write_text(SMALL_SPEC.replace("data/subject.csv", f"data/subject.csv, format: {fmt}"))
    return spec


def _certa_run(spec: Path, subject: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "run", str(spec), "--no-record", "--input", f"subject={subject}"],
                          cwd=spec.parent, capture_output=True, text=True, timeout=60, preexec_fn=_bounded,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# A device and a FIFO in the unit tier; the other kinds (about 0.4 s each: a refused command) under ``slow``.
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", *(pytest.param(k, marks=pytest.mark.slow)
                                                         for k in ("/dev/urandom", "folder", "socket"))])
def test_only_regular_files_are_read(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path)
    if kind == "fifo":
        path, expected = tmp_path / "pipe.csv", "a FIFO (named pipe)"
        os.mkfifo(path)  # no writer: opening it for reading would block for ever
    elif kind == "socket":
        path, expected = tmp_path / "s.csv", "a socket"
        server = socket.socket(socket.AF_UNIX)
        monkeypatch.chdir(tmp_path)  # a relative name: socket paths are limited to 107 bytes
        server.bind("s.csv")
    elif kind == "folder":
        path, expected = tmp_path / "data", "a folder"
    else:
        path, expected = Path(kind), "a character device"
    line = _one_error_line(_certa_run(spec, str(path)))
    assert f"input 'subject': {path} is {expected}; certa reads tables from regular files only" in line


def test_a_file_over_the_byte_limit_is_refused_from_its_size_before_reading(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    big = tmp_path / "big.csv"
    with open(big, "wb") as file:
        file.truncate(3 << 30)  # sparse: 3 GiB of NUL bytes, no disk used
    line = _one_error_line(_certa_run(spec, str(big)))
    assert line == (f"error: input 'subject': the file size in bytes is 3,221,225,472, over the limit "
                    f"bytes=2,147,483,648; if the input is genuine, raise it with {ENV_VAR}=bytes=3221225472")
    lowered = _certa_run(spec, str(tmp_path / "data" / "subject.csv"), **{ENV_VAR: "bytes=100"})
    assert "the file size in bytes is 615, over the limit bytes=100" in _one_error_line(lowered)  # the setting


def test_a_path_with_a_nul_byte_is_an_input_error(tmp_path: Path) -> None:
    plan = load_plan(_spec(tmp_path))
    with pytest.raises(InputError, match=r"^input 'subject': invalid path '.*a\\x00b.csv': embedded null byte$"):
        load_tables(plan, input_paths={"subject": str(tmp_path / "a\0b.csv")})


def test_the_limits_are_read_from_the_environment() -> None:
    limits = InputLimits.from_env({ENV_VAR: " bytes=8GiB, rows=400_000_000 ,cell_bytes=64 MiB,"})
    assert (limits.bytes, limits.rows, limits.cell_bytes) == (8 << 30, 4 * 10**8, 64 << 20)
    assert limits.columns == InputLimits().columns and InputLimits.from_env({}) == InputLimits()
    for bad in ("bites=1", "rows=-1", "rows=1e9", "rows"):
        with pytest.raises(InputError, match=f"^{ENV_VAR}: cannot read"):
            InputLimits.from_env({ENV_VAR: bad})


def test_load_tables_takes_limits_and_reads_a_jsonl_size_from_the_file(tmp_path: Path) -> None:
    plan = load_plan(_spec(tmp_path, "jsonl"))
    subject = tmp_path / "s.jsonl"
    subject.write_bytes(b'{"a": 1}\n' * 100)
    with pytest.raises(InputError, match=r"^input 'subject': the size in bytes of a jsonl file is 900, over the "
                                         r"limit text_bytes=899; .* CERTA_INPUT_LIMITS=text_bytes=900$"):
        load_tables(plan, input_paths={"subject": subject}, limits=InputLimits(text_bytes=899))
    assert read_input_file("s", subject, "jsonl", InputLimits(text_bytes=900)) == subject.read_bytes()


CSV = b"window_id,tokens,mean_nll\n" + b"".join(b"w%d,%d,0.5\n" % (i, i) for i in range(10))
QUOTED = CSV.replace(b"w3,", b'"w3",')  # outside Arrow's subset: the Python reader


@pytest.mark.parametrize("raw", [CSV, QUOTED], ids=["arrow", "python"])
def test_csv_rows_columns_and_cells(raw: bytes) -> None:
    assert parse_table("t", raw, "csv", InputLimits(rows=10, columns=3, cell_bytes=9)).n_rows == 10
    with pytest.raises(InputError, match=r"^input 't': the number of data rows.* is 10, over the limit rows=9"):
        parse_table("t", raw, "csv", InputLimits(rows=9))
    with pytest.raises(InputError, match=r"^input 't': the number of columns in the header is 3, over the limit "
                                         r"columns=2"):
        parse_table("t", raw, "csv", InputLimits(columns=2))
    with pytest.raises(InputError, match=r"^input 't', (header|row \d+), column ('\w+'|\d): the size in bytes of the "
                                         r"cell is \d+, over the limit cell_bytes=2; .*=cell_bytes=\d+$"):
        parse_table("t", raw, "csv", InputLimits(cell_bytes=2))


def test_a_huge_csv_cell_is_named_by_row_and_column() -> None:
    raw = b"window_id,tokens,note\nw0,1,a\nw1,2," + b"x" * (20 << 20) + b"\nw2,3,c\n"  # 20 MiB
    with pytest.raises(InputError, match=r"^input 't', row 2, column 'note': the size in bytes of the cell is "
                                         r"20,971,520, over the limit cell_bytes=16,777,216"):
        parse_table("t", raw, "csv")
    multiline = b'a,b,c\r\n\r\n1,"x\ny",3\n\n\n4,"p\r\nq",' + b"z" * 2000 + b"\n"  # found after quoted line ends
    with pytest.raises(InputError, match=r"^input 't', row 2, column 'c': the size in bytes of the cell is 2,000"):
        parse_table("t", multiline, "csv", InputLimits(cell_bytes=1000))
    quoted = b'a,b\n1,"' + "é".encode() * 3000 + b'"\n'  # 6,000 bytes in 3,000 characters
    with pytest.raises(InputError, match=r"^input 't', row 1, column 'b': the size in bytes of the cell is 6,000"):
        parse_table("t", quoted, "csv", InputLimits(cell_bytes=5000))
    cells = parse_table("t", quoted, "csv", InputLimits(cell_bytes=6000)).text("b")
    assert cells[0] == "é" * 3000


def test_jsonl_rows_columns_cells_and_huge_numbers() -> None:
    raw = b"".join(b'{"id": "w%d", "x": %d}\n\n' % (i, i) for i in range(10))
    with pytest.raises(InputError, match=r"^input 't', line 19: the number of records is 10, over the limit rows=9"):
        parse_table("t", raw, "jsonl", InputLimits(rows=9))
    with pytest.raises(InputError, match=r"^input 't', line 1: the number of columns is 2, over the limit columns=1"):
        parse_table("t", raw, "jsonl", InputLimits(columns=1))
    with pytest.raises(InputError, match=r"^input 't', line 1, column 'id': the size in bytes of the cell is 2, "
                                         r"over the limit cell_bytes=1"):
        parse_table("t", raw, "jsonl", InputLimits(cell_bytes=1))
    digits = b'{"id": "w0", "x": [1, -' + b"9" * 5000 + b"]}\n"
    with pytest.raises(InputError, match=r"^input 't', line 1, column 'x': an integer of 5,000 digits; certa reads "
                                         r"integers of at most 4,300 digits"):
        parse_table("t", digits, "jsonl")
    huge = b'{"id": "w0", "x": 1}\n{"id": "w1", "x": ' + b"7" * 10**8 + b"}\n"  # the reported case
    with pytest.raises(InputError, match=r"^input 't', line 2, column 'x': the size in bytes of the cell is "
                                         r"100,000,000, over the limit cell_bytes=16,777,216"):
        parse_table("t", huge, "jsonl")


def _parquet(table: pa.Table, **options: object) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    return sink.getvalue().to_pybytes()


def test_parquet_rows_and_columns_are_refused_from_the_footer() -> None:
    raw = _parquet(pa.table({"a": np.zeros(1000), "b": np.arange(1000)}))
    with pytest.raises(InputError, match=r"^input 't': the number of rows \(from the footer\) is 1,000, over the "
                                         r"limit rows=999"):
        parse_table("t", raw, "parquet", InputLimits(rows=999))
    with pytest.raises(InputError, match=r"^input 't': the number of columns is 2, over the limit columns=1"):
        parse_table("t", raw, "parquet", InputLimits(columns=1))
    with pytest.raises(InputError, match=r"^input 't': the decoded size in bytes \(at least, from the footer\) is "
                                         r"16,000, over the limit parquet_bytes=15,999"):
        parse_table("t", raw, "parquet", InputLimits(parquet_bytes=15_999))
    with pytest.raises(InputError, match=r"^input 't', row 3, column 's': the size in bytes of the cell is 5, "):
        parse_table("t", _parquet(pa.table({"s": ["a", None, "bbbbb"]})), "parquet", InputLimits(cell_bytes=4))


def test_dictionary_read_parquet_text_is_what_arrow_decodes() -> None:
    """Text columns read as dictionaries (mostly indices) or as strings give the same cells as a plain read,
    across row groups with different dictionaries, nulls and a writer's fallback to plain pages."""
    rng = np.random.default_rng(5)
    n = 50_000
    table = pa.table({
        "phase": pa.array(rng.choice(["preview", "final", None], n).tolist()),
        "id": pa.array([f"w{i}" for i in range(n)]),
        "group": pa.array(rng.choice([f"g{i}" for i in range(3000)], n).tolist()).dictionary_encode(),
        "x": rng.random(n),
    })
    raw = _parquet(table, row_group_size=7_000, dictionary_pagesize_limit=4096)
    parsed = parse_table("t", raw, "parquet")
    expected = pq.read_table(pa.BufferReader(raw))
    for column in ("phase", "id", "group"):
        decoded = expected.column(column).combine_chunks()
        if pa.types.is_dictionary(decoded.type):
            decoded = decoded.dictionary_decode()
        assert parsed.text(column).tolist() == ["" if v is None else v for v in decoded.to_pylist()]
    assert parsed.numeric("x").tobytes() == table.column("x").to_numpy().tobytes()


BOMB = """
import json, sys, time
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from certa.engine.foundation.errors import InputError
from certa.engine.core.tables import parse_table
column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(10**7, dtype=np.int32)), pa.array(["x" * 1024]))
sink = pa.BufferOutputStream()
pq.write_table(pa.table({"window_id": column}), sink, compression="zstd")
raw = sink.getvalue().to_pybytes()
del column, sink
started = time.monotonic()
try:
    parse_table("bomb", raw, "parquet")
except InputError as error:
    message = str(error)
seconds = time.monotonic() - started
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"bytes": len(raw), "seconds": seconds, "peak_mb": peak / 1024, "message": message}))
"""


def test_a_parquet_string_bomb_is_refused_before_it_is_decoded() -> None:
    """10^7 rows of one 1 KiB string: about 1 MB on disk, 10 GiB decoded. Measured in a subprocess, its own
    peak resident memory (``VmHWM``: a ``ru_maxrss`` would start from pytest's) stays far below the decoded size."""
    result = subprocess.run([sys.executable, "-c", BOMB], capture_output=True, text=True, timeout=120,
                            preexec_fn=_bounded, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    measured = json.loads(result.stdout)
    assert measured["bytes"] < 2 << 20 and measured["peak_mb"] < 300, measured
    assert measured["message"].startswith("input 'bomb': the decoded size in bytes (read so far) is "), measured
    assert "over the limit parquet_bytes=4,294,967,296" in measured["message"]


def test_certa_batch_reads_inputs_within_the_same_limits(tmp_path: Path) -> None:
    """The batch client reads each input once and sends the bytes to the workers: a device is refused there,
    before any cluster starts, as ``certa run`` refuses it."""
    from certa.engine.services.batch import read_inputs
    plan = load_plan(_spec(tmp_path))
    with pytest.raises(InputError, match="is a character device; certa reads tables from regular files only"):
        read_inputs(plan, {"subject": Path("/dev/zero")})


def test_a_spec_path_with_a_nul_byte_is_a_spec_error(tmp_path: Path) -> None:
    from certa.engine.foundation.errors import SpecError
    text = SMALL_SPEC.replace("path: data/subject.csv", 'path: "data/a\\0b.csv"')
    assert "a\\0b" in text
    (tmp_path / "spec.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=r"inputs.subject.path: invalid path 'data/a\\x00b.csv': embedded null byte"):
        load_plan(tmp_path / "spec.yaml")
