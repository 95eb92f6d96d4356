"""Handing a ledger to an auditor, as docs/ledger.md ("Handing a ledger or a bundle to an auditor") says.

On a real PostgreSQL server (``postgres``): the SQL of the read-only auditor role is read from the page and run
as written (the role and database renamed for the test); connected as that role, every read command an auditor
needs works, every command that writes fails in one line with exit 2, and the database itself refuses each kind
of write, even with the session's ``default_transaction_read_only`` turned off; the ledger is unchanged. A
``pg_dump`` copy restored into another database verifies against a checkpoint signed before the dump.

On SQLite (``slow``: two runs, about 2 s): the page's copy command (SQLite's online backup) gives a file that verifies, read-only,
against a checkpoint signed before it, while the original goes on recording.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from certa.cli import main
from certa.engine import run
from certa.engine.foundation.signing import generate_key_pair
from certa.ledger import Ledger
from certa.ledger.schema import alembic_version, metadata

from tests.conftest import fresh_postgres_databases, small_spec_folder

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ledger.md"
SECTION = "## Handing a ledger or a bundle to an auditor"


def _fenced(language: str, index: int = 0) -> str:
    """The ``index``-th ```language block of the page's hand-over section."""
    section = PAGE.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)[index]


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _one_line_error(result: Result) -> str:
    """The error line of a command that failed with exit 2 (after its progress lines), no traceback."""
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in result.output and errors == result.stderr.strip().splitlines()[-1:], result.stderr
    return errors[0]


def _sign_checkpoint(folder: Path, ledger: str) -> tuple[Path, Path]:
    """A new key pair in ``folder`` and a checkpoint of ``ledger``'s head signed by it: (checkpoint, public key)."""
    private_pem, public_pem = generate_key_pair()
    key, pub, checkpoint = folder / "certa.key", folder / "certa.pub", folder / "handover.checkpoint"
    key.write_bytes(private_pem)
    pub.write_bytes(public_pem)
    signed = _invoke("checkpoint", "--key", str(key), "--out", str(checkpoint), "--ledger", ledger)
    assert signed.exit_code == 0, signed.output
    return checkpoint, pub


@pytest.mark.slow
def test_a_sqlite_backup_verifies_read_only_against_the_checkpoint_signed_before_it(tmp_path: Path) -> None:
    spec, db, copy = small_spec_folder(tmp_path / "spec"), tmp_path / "certa-ledger.db", tmp_path / "handover.db"
    with Ledger.open(db) as ledger:
        run(spec, ledger=ledger)
    checkpoint, pub = _sign_checkpoint(tmp_path, str(db))
    backup = next(line for line in _fenced("bash", 1).splitlines() if line.startswith("python3 -c"))
    code = backup.split('"')[1]  # the page's one-liner, run as written in the folder of the ledger
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=60)
    with Ledger.open(db) as ledger:
        run(spec, ledger=ledger)  # the original goes on recording; the copy is the ledger that was signed
    copy.chmod(0o444)
    checked = _invoke("verify", "--checkpoint", str(checkpoint), "--public-key", str(pub), "--ledger", str(copy))
    assert checked.exit_code == 0 and checked.stdout.startswith("intact: "), checked.output


@dataclass(frozen=True)
class Audited:
    """A PostgreSQL ledger with one run, a checkpoint of it, and the auditor role of the page."""

    folder: Path
    admin: str
    auditor: str
    run_id: str
    checkpoint: Path
    pub: Path
    role: str
    new_database: Callable[..., str]


def _recipe(role: str, database: str) -> list[str]:
    """The page's SQL, with its role and database renamed; psql's own commands (``\\password``) left out."""
    sql = _fenced("sql").replace("certa_auditor", role).replace("DATABASE certa ", f'DATABASE "{database}" ')
    return [statement.strip() for statement in sql.split(";") if statement.strip()
            and not statement.strip().startswith("\\")]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    folder = tmp_path_factory.mktemp("auditor")
    with fresh_postgres_databases("auditor role") as new_database:
        admin = new_database()
        with Ledger.open(admin) as ledger:
            run_id = run(small_spec_folder(folder / "spec"), ledger=ledger).run_id
        checkpoint, pub = _sign_checkpoint(folder, admin)
        url = make_url(admin)
        role = f"certa_auditor_{uuid.uuid4().hex[:8]}"
        engine = create_engine(admin, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                for statement in _recipe(role, str(url.database)):
                    conn.execute(text(statement))
            auditor = url.set(username=role, password=None).render_as_string(hide_password=False)
            yield Audited(folder, admin, auditor, run_id, checkpoint, pub, role, new_database)
        finally:
            with engine.connect() as conn:
                conn.execute(text(f'DROP OWNED BY "{role}"'))
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
            engine.dispose()


@pytest.mark.postgres
def test_the_role_may_select_the_ledgers_tables_and_nothing_else(audited: Audited) -> None:
    ledger_tables = {*metadata.tables, alembic_version.name}
    granted = re.search(r"GRANT SELECT ON (.*) TO", _fenced("sql"))
    assert granted is not None and set(granted.group(1).split(", ")) == ledger_tables
    engine = create_engine(audited.admin)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                                 "WHERE grantee = :role"), {"role": audited.role}).all()
    engine.dispose()
    assert sorted(rows) == sorted((table, "SELECT") for table in ledger_tables)


@pytest.mark.postgres
def test_an_auditor_runs_every_read_command_as_the_role(audited: Audited) -> None:
    ledger, out = ["--ledger", audited.auditor], audited.folder / "read"
    out.mkdir()
    checkpoint = ["--checkpoint", str(audited.checkpoint), "--public-key", str(audited.pub)]
    for args, says in [(["verify"], "intact: "), (["verify", *checkpoint], "intact: "),
                       (["verify", *checkpoint, "--since-checkpoint"], "intact: "),
                       (["head"], ":"), (["list"], audited.run_id[:12]), (["show", audited.run_id], "PASS"),
                       (["decisions", audited.run_id, "--limit", "1"], ""),
                       (["replay", audited.run_id, "--no-record"], "REPRODUCED: "),
                       (["report", audited.run_id, "-o", str(out / "run.html")], "wrote "),
                       (["export", audited.run_id, "-o", str(out / "cert.json")], ""),
                       (["prove", audited.run_id, "--checkpoint", str(audited.checkpoint), "-o",
                         str(out / "run.bundle.json")], "")]:
        result = _invoke(*args, *ledger)
        assert result.exit_code == 0 and says in result.stdout, (args, result.output)
    bundle = _invoke("verify-bundle", str(out / "run.bundle.json"), "--public-key", str(audited.pub))
    assert bundle.exit_code == 0 and bundle.stdout.startswith("VERIFIED: "), bundle.output


@pytest.mark.postgres
def test_every_write_is_refused_by_the_database_and_the_ledger_is_unchanged(audited: Audited) -> None:
    ledger = ["--ledger", audited.auditor]
    head = _invoke("head", "--ledger", audited.admin).stdout
    spec = audited.folder / "spec" / "spec.yaml"
    for args, says in [(["replay", audited.run_id], "nothing was recorded"),
                       (["review", audited.run_id, "--by", "auditor", "--decision", "comment"], "nothing was recorded"),
                       (["run", str(spec)], "nothing was recorded"), (["migrate"], "it is unchanged")]:
        assert says in _one_line_error(_invoke(*args, *ledger)), args
    recorded = _invoke("verify", "--record", *ledger)
    assert recorded.exit_code == 0 and "verification not recorded: " in recorded.stdout, recorded.output
    engine = create_engine(audited.auditor)
    writes = ["INSERT INTO ledger_meta (key, value) VALUES ('x', 'y')", "UPDATE runs SET verdict = 'FAIL'",
              "DELETE FROM entries", "TRUNCATE blobs", "CREATE TABLE audit_notes (note text)"]
    for statement in writes:
        for session, refusal in (("", "25006"), ("SET TRANSACTION READ WRITE", "42501")):
            with engine.connect() as conn, pytest.raises(DBAPIError) as refused:
                if session:  # the second lock (default_transaction_read_only) off: the missing grants refuse it
                    conn.execute(text(session))
                conn.execute(text(statement))
            sqlstate = getattr(refused.value.orig, "sqlstate", None)
            assert sqlstate == refusal, (statement, session, refused.value)  # read-only transaction / privilege
    engine.dispose()
    assert _invoke("head", "--ledger", audited.admin).stdout == head
    assert _invoke("verify", "--ledger", audited.admin).exit_code == 0


def _postgres_tool(name: str) -> str | None:
    """``pg_dump`` or ``pg_restore``: on PATH, or in the newest of Debian's /usr/lib/postgresql/*/bin."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    return shutil.which(name) or (str(found[-1]) if found else None)


@pytest.mark.postgres
def test_a_pg_dump_copy_verifies_against_the_checkpoint_signed_before_it(audited: Audited) -> None:
    dump, restore = _postgres_tool("pg_dump"), _postgres_tool("pg_restore")
    if dump is None or restore is None:
        pytest.skip("needs pg_dump and pg_restore (Debian's postgresql-client)")
    libpq = make_url(audited.admin).set(drivername="postgresql").render_as_string(hide_password=False)
    copy = audited.new_database()
    target = make_url(copy).set(drivername="postgresql").render_as_string(hide_password=False)
    handed = audited.folder / "handover.dump"
    subprocess.run([dump, "--format=custom", "--no-owner", "--no-privileges", "--file", str(handed), "--dbname",
                    libpq], check=True, timeout=120, capture_output=True)
    subprocess.run([restore, "--no-owner", "--no-privileges", "--dbname", target, str(handed)], check=True,
                   timeout=120, capture_output=True)
    with Ledger.open(audited.admin) as ledger:
        run(audited.folder / "spec" / "spec.yaml", ledger=ledger)  # the original goes on recording
    checked = _invoke("verify", "--checkpoint", str(audited.checkpoint), "--public-key", str(audited.pub),
                      "--ledger", copy)
    assert checked.exit_code == 0 and checked.stdout.startswith("intact: "), checked.output
