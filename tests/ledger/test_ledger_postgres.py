"""The shared ledger on a real PostgreSQL server (started on loopback by .ci/run).

Set CERTA_TEST_POSTGRES_URL (a SQLAlchemy URL to a database where the test may create databases) to
run these locally; without it they are skipped, except in CI, where a missing server is a failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from certa.engine import run
from certa.engine.services.audit import replay, verify, verify_bundle
from certa.ledger import Ledger, merkle
from certa.ledger.bundle import build_bundle
from certa.ledger.checkpoint import open_checkpoint, sign_checkpoint
from certa.engine.foundation.signing import generate_key_pair, load_private_key, load_public_key

from tests.conftest import POSTGRES_SERVER, fresh_postgres_databases, interval_spec, run_concurrently

if not POSTGRES_SERVER:
    if os.environ.get("CI"):
        pytest.fail("CI must run the PostgreSQL ledger tests: .ci/run sets CERTA_TEST_POSTGRES_URL", pytrace=False)
    pytest.skip("set CERTA_TEST_POSTGRES_URL to run the PostgreSQL ledger tests", allow_module_level=True)


@pytest.fixture
def pg_url():
    """A fresh, empty database on the test server; dropped afterwards."""
    with fresh_postgres_databases("ledger tests") as new_database:
        yield new_database()


def test_runs_verify_and_replay_on_postgresql(small_spec: Path, pg_url: str) -> None:
    with Ledger.open(pg_url) as ledger:
        assert ledger.dialect == "postgresql"
        first = run(small_spec, ledger=ledger)
        run(small_spec, ledger=ledger)
        assert verify(ledger).intact
        assert replay(ledger, first.run_id).reproduced
        assert ledger.certificate(first.run_id)["content_sha256"] == first.content_sha256


def test_an_inconclusive_run_is_recorded_listed_and_replayed_on_postgresql(small_spec: Path, pg_url: str) -> None:
    """The verdict INCONCLUSIVE (12 characters) fits ``runs.verdict`` (16 since schema 7; PostgreSQL, unlike SQLite,
    refuses a value longer than its column) and reads back as recorded."""
    with Ledger.open(pg_url) as ledger:
        recorded = run(interval_spec(small_spec, "1.02"), ledger=ledger)
        assert recorded.verdict == "INCONCLUSIVE"
        assert [(row.run_id, row.verdict) for row in ledger.runs()] == [(recorded.run_id, "INCONCLUSIVE")]
        assert verify(ledger).intact
        assert replay(ledger, recorded.run_id).reproduced


def test_signed_checkpoint_and_offline_bundle_on_postgresql(small_spec: Path, pg_url: str) -> None:
    private_pem, public_pem = generate_key_pair()
    with Ledger.open(pg_url) as ledger:
        first = run(small_spec, ledger=ledger).run_id
        run(small_spec, ledger=ledger)
        seq, digest = ledger.head()
        root = merkle.root_hash(merkle.entry_leaves(ledger.entry_hashes(seq))).hex()
        envelope = json.dumps(sign_checkpoint([load_private_key(private_pem)], seq, digest, root))
        signed = open_checkpoint(envelope, [load_public_key(public_pem)])
        assert verify(ledger, expect_head=(signed.seq, signed.entry_hash), expect_root=signed.root_hash).intact
        bundle = build_bundle(ledger, first, envelope)
    assert verify_bundle(json.loads(json.dumps(bundle)), [load_public_key(public_pem)]).verified


def test_tampering_is_detected_on_postgresql(small_spec: Path, pg_url: str) -> None:
    with Ledger.open(pg_url) as ledger:
        run(small_spec, ledger=ledger)
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE entries SET payload = replace(payload, '\"PASS\"', '\"FAIL\"') "
                          "WHERE kind = 'certificate'"))
    engine.dispose()
    with Ledger.open(pg_url) as ledger:
        report = verify(ledger)
    assert not report.intact and report.first_broken.message.startswith("payload edited")


def test_concurrent_writers_queue_on_the_head_and_never_fork_the_chain(small_spec: Path, pg_url: str) -> None:
    with Ledger.open(pg_url):
        pass  # create the schema once, from one process (as a team would on first use)
    assert run_concurrently(pg_url, small_spec, writers=4, runs_each=3) == []
    with Ledger.open(pg_url) as ledger:
        assert len(ledger.runs()) == 12
        report = verify(ledger)
        assert report.intact, report.problems


def test_many_processes_opening_a_new_ledger_at_once_all_succeed(pg_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def open_and_read(_: int) -> int:
        with Ledger.open(pg_url) as ledger:
            return ledger.entry_count()

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert list(pool.map(open_and_read, range(6))) == [0] * 6
