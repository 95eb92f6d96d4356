"""No traceback, ever, on bad input: the spec loader and each table format fed arbitrary bytes, deep nesting,
huge numbers, odd encodings and truncations end in one clear line and the documented exit code, and a
refused run creates no ledger file (hypothesis, derandomized: CI sees the same examples every time)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certa.cli import main

from tests.conftest import SMALL_SPEC, columns_to_csv_bytes, window_columns

FUZZ = settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])

VALID_SPEC = SMALL_SPEC.replace("data/subject.csv", "data/subject.FORMAT").encode("utf-8")


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))  # catch_exceptions: an escaped exception shows in .exception


def _assert_clean(result: Result, codes: tuple[int, ...]) -> None:
    """The documented exit code, one error line when refused, no Python exception."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in codes, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    if result.exit_code == 2:  # progress lines may precede it; the error is one line, the last
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines[-1].startswith("error: ") and sum(line.startswith("error") for line in lines) == 1, result.stderr


def _nested(depth: int) -> bytes:
    return b"x: " + b"[" * depth + b"]" * depth + b"\n"


HOSTILE_SPECS = [
    b"\xff\xfe x",  # UTF-16 byte-order mark, not UTF-8
    "certa: 1\nname: caf\u00e9\n".encode("latin-1"),  # Latin-1
    "\ufeffcerta: 1\n".encode("utf-16"),
    _nested(2000),  # a 4 KB spec nested 2,000 levels deep
    _nested(65),
    b"{" * 5000,
    b"a: &x [1]\nb: *x\n",
    b"certa: 1\nname: n\nseed: " + b"9" * 5000 + b"\nstages: [{id: a, use: paired.ppl_ratio}]\n",
    b"certa: 1\nname: n\nseed: 1e400\nstages: []\n",
    b"\x00" * 64,
    b"",
    b"- - - - -",
    b"certa: !!python/object/apply:os.system ['true']\n",
    VALID_SPEC.replace(b"replicates: 500", b"replicates: 1e308"),
    VALID_SPEC.replace(b"replicates: 500", b"replicates: .nan"),
    VALID_SPEC[: len(VALID_SPEC) // 2],
]


@pytest.mark.parametrize("raw", HOSTILE_SPECS, ids=range(len(HOSTILE_SPECS)))
def test_hostile_specs_are_refused_in_one_line(raw: bytes, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(raw)
    _assert_clean(_invoke("validate", str(spec)), (2,))
    os.chdir(tmp_path)
    _assert_clean(_invoke("run", str(spec), "--ledger", str(tmp_path / "l.db")), (2,))
    assert not (tmp_path / "l.db").exists()


@FUZZ
@given(raw=st.binary(max_size=600))
def test_arbitrary_bytes_as_a_spec(raw: bytes, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(raw)
    _assert_clean(_invoke("validate", str(spec)), (0, 2))


@FUZZ
@given(cut=st.integers(0, len(VALID_SPEC)), flip=st.integers(0, len(VALID_SPEC) - 1), byte=st.integers(0, 255))
def test_truncated_and_corrupted_specs(cut: int, flip: int, byte: int, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    for raw in (VALID_SPEC[:cut], VALID_SPEC[:flip] + bytes([byte]) + VALID_SPEC[flip + 1:]):
        spec.write_bytes(raw)
        _assert_clean(_invoke("validate", str(spec)), (0, 2))


def _spec_with_subject(tmp_path: Path, fmt: str, subject: bytes) -> Path:
    baseline, _ = window_columns(30, seed=1)
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(baseline))
    (tmp_path / "data" / f"subject.{fmt}").write_bytes(subject)
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(VALID_SPEC.replace(b"FORMAT", fmt.encode()))
    return spec


def _valid_subject_bytes() -> bytes:
    _, subject = window_columns(30, seed=1)
    return columns_to_csv_bytes(subject)


@FUZZ
@given(data=st.data())
@pytest.mark.parametrize("fmt", ["csv", *(pytest.param(f, marks=pytest.mark.slow) for f in ("jsonl", "parquet"))])
def test_hostile_tables_end_in_one_line_and_create_no_ledger(fmt: str, data: st.DataObject, tmp_path: Path) -> None:
    valid = _valid_subject_bytes()
    raw = data.draw(st.one_of(
        st.binary(max_size=400),
        st.integers(0, len(valid)).map(lambda cut: valid[:cut]),
        st.tuples(st.integers(0, len(valid) - 1), st.binary(min_size=1, max_size=8)).map(
            lambda edit: valid[:edit[0]] + edit[1] + valid[edit[0] + 1:]),
        st.sampled_from([b"\xff\xfe\x00a", "window_id\n\u00e9".encode("latin-1"), b"a,b\n" + b"1e999999,2\n",
                         b"window_id,tokens,mean_nll\n" + b"w,1,nan\n" * 3, b'{"a": ' * 3000, b"\x00" * 100,
                         b'{"window_id": "w", "tokens": ' + b"9" * 5000 + b"}\n",  # over Python's int digits
                         b"window_id,tokens\nw," + b"1" * 200_000 + b"\n"]),  # over csv's default field limit
    ))
    spec = _spec_with_subject(tmp_path, fmt, raw)
    ledger = Path(tempfile.mkdtemp(dir=tmp_path)) / "l.db"  # tmp_path is shared by the examples
    result = _invoke("run", str(spec), "--ledger", str(ledger))
    _assert_clean(result, (0, 1, 2, 3))
    if result.exit_code == 2:
        assert not ledger.exists()


@pytest.mark.parametrize("command", [["list"], ["show", "latest"], ["head"], ["verify"], ["replay", "latest"]])
@pytest.mark.parametrize("content", [b"not a database\n", b"SQLite format 3\x00" + b"\x07" * 300, b"\x00" * 4096])
def test_a_ledger_file_that_is_no_database_is_one_line_and_left_as_it_is(command: list[str], content: bytes,
                                                                          tmp_path: Path) -> None:
    bad = tmp_path / "ledger.db"
    bad.write_bytes(content)
    result = _invoke(*command, "--ledger", str(bad))
    _assert_clean(result, (2,))
    assert result.stderr.count("\n") == 1 and str(bad) in result.stderr, result.stderr
    assert bad.read_bytes() == content


def test_a_ledger_url_error_names_the_ledger_without_its_password() -> None:
    result = _invoke("show", "latest", "--ledger", "postgresql+psycopg://auditor:s3cret-pw@127.0.0.1:1/ledger")
    _assert_clean(result, (2,))
    assert "s3cret-pw" not in result.output and "auditor:***@127.0.0.1:1/ledger" in result.stderr
    assert result.stderr.count("\n") == 1
