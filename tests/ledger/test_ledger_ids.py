"""What names a run and a ledger: run-id prefixes are hex digits matched literally (``____`` or ``1a%`` picks
no run), and a bad ledger URL or scheduler address is one line and exit 2, its password masked, never a
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from certa.cli import main
from certa.engine import run
from certa.engine.foundation.errors import LedgerError
from certa.ledger import Ledger, resolve_ledger_url
from certa.ledger.location import masked_ledger

SECRET = "s3cret-pw"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def one_run(small_spec: Path, tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "ledger.db"
    with Ledger.open(db) as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
    return db, run_id


@pytest.mark.parametrize("prefix", ["____", "%", "%%%%", "____%", "a_b_", "\\___", "zzzz", "12-4", "1234 5"])
def test_a_prefix_that_is_not_hex_digits_picks_no_run(one_run: tuple[Path, str], prefix: str, tmp_path: Path) -> None:
    db, _ = one_run
    for command in (["show", prefix], ["export", prefix, "-o", str(tmp_path / "c.json")], ["decisions", prefix]):
        result = _invoke(*command, "--ledger", str(db))
        assert result.exit_code == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.output
        assert "is not a run id: a run id is 32 hex digits (0-9, a-f)" in result.stderr
    assert not (tmp_path / "c.json").exists()


def test_a_wildcard_cannot_stand_for_the_run_in_the_api_either(one_run: tuple[Path, str]) -> None:
    db, run_id = one_run
    with Ledger.open(db, read_only=True) as ledger:
        with pytest.raises(LedgerError, match="is not a run id"):
            ledger.run(run_id[:4] + "%")
        with pytest.raises(LedgerError, match="is not a run id"):
            ledger.resolve_run_id("_" * 32)
        with pytest.raises(LedgerError, match="no run with id"):
            ledger.resolve_run_id(("f" if run_id[0] != "f" else "0") + run_id[1:])


@pytest.mark.parametrize("length", [4, 12, 32])
def test_a_hex_prefix_in_either_case_names_its_run(one_run: tuple[Path, str], length: int) -> None:
    db, run_id = one_run
    with Ledger.open(db, read_only=True) as ledger:
        assert ledger.resolve_run_id(run_id[:length].upper()) == run_id
        assert ledger.resolve_run_id(f"  {run_id[:length]} ") == run_id
        assert ledger.resolve_run_id("latest") == run_id
        with pytest.raises(LedgerError, match="is not a run id"):
            ledger.resolve_run_id(run_id[:3])
        with pytest.raises(LedgerError, match="is not a run id"):
            ledger.resolve_run_id(run_id + "0")


BAD_URLS = {
    "no host, no port": "postgresql+psycopg://:::",
    "a port that is not a number": f"postgresql+psycopg://certa:{SECRET}@db.example.org:abc/ledger",
    "a port out of range": f"postgresql+psycopg://certa:{SECRET}@db.example.org:99999/ledger",
    "an unclosed IPv6 host": f"postgresql+psycopg://certa:{SECRET}@[::1/ledger",
    "an unknown dialect": f"nosuchdb://certa:{SECRET}@db.example.org/ledger",
    "an unknown driver": f"postgresql+nosuchdriver://certa:{SECRET}@db.example.org/ledger",
    "no dialect at all": f"://certa:{SECRET}@db.example.org/ledger",
}


@pytest.mark.parametrize("what", list(BAD_URLS))
@pytest.mark.parametrize("command", [["head"], ["list"], ["verify"], ["migrate"], ["run", "{spec}"]])
def test_a_bad_ledger_url_is_one_line_with_its_password_masked(what: str, command: list[str], small_spec: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    url = BAD_URLS[what]
    result = _invoke(*[part.format(spec=small_spec) for part in command], "--ledger", url)
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert SECRET not in result.stderr and "Traceback" not in result.stderr
    assert "ledger" in result.stderr
    monkeypatch.setenv("CERTA_LEDGER", url)  # the same from the environment
    again = _invoke(*[part.format(spec=small_spec) for part in command])
    assert (again.exit_code, again.stderr) == (result.exit_code, result.stderr)


def test_the_api_says_why_a_url_is_bad() -> None:
    with pytest.raises(LedgerError, match=r"not a valid ledger URL: .*\(its HOST:PORT cannot be read"):
        resolve_ledger_url(BAD_URLS["a port that is not a number"])
    with pytest.raises(LedgerError, match=r"port 99999 is not between 1 and 65535"):
        resolve_ledger_url(BAD_URLS["a port out of range"])
    with pytest.raises(LedgerError, match=r"no database driver named 'postgresql\+nosuchdriver'"):
        Ledger.open(BAD_URLS["an unknown driver"])


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql+psycopg://certa:pw@db:5432/ledger", "postgresql+psycopg://certa:***@db:5432/ledger"),
    ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db"),  # SQLAlchemy's reading: the password is pa/ss
    ("postgresql://u:pw@[::1/db", "postgresql://u:***@[::1/db"),  # unparseable, masked all the same
    ("postgresql://:pw@h/db", "postgresql://:***@h/db"),
    ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db"),
    ("postgresql://h:5432/db", "postgresql://h:5432/db"),
    ("ledgers/certa:1@x.db", "ledgers/certa:1@x.db"),  # a path, not a URL
])
def test_a_password_is_masked_even_in_a_url_that_cannot_be_parsed(url: str, shown: str) -> None:
    assert masked_ledger(url) == shown


@pytest.mark.parametrize("address", ["not-a-url", "tcp://scheduler", "tcp://scheduler:port", "tcp://scheduler:99999",
                                     "http://scheduler:8786", "tcp://:8786"])
def test_a_bad_scheduler_address_is_one_line_and_leaves_no_ledger(address: str, small_spec: Path,
                                                                  tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    result = _invoke("batch", str(small_spec), "--scheduler", address, "--ledger", str(db))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert result.stderr.startswith(f"error: --scheduler {address!r} is not a Dask scheduler address: give "
                                    "tcp://HOST:PORT")
    assert not db.exists() and not Path(f"{db}-wal").exists()
