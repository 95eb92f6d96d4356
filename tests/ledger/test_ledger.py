"""The ledger: atomic runs, hash chain, and tamper detection by ``verify`` (edit, delete, reorder)."""

from __future__ import annotations

import json
import platform
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from certa.engine import run
from certa.engine.services.audit import replay, verify
from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import LedgerIntegrityError
from certa.ledger import Ledger

from tests.conftest import rebuild_merkle_nodes, rechain, run_concurrently


def _two_runs(small_spec: Path, ledger: Ledger) -> tuple[str, str]:
    first = run(small_spec, ledger=ledger).run_id
    second = run(small_spec, ledger=ledger).run_id
    return first, second


def _sql(db: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(statement, params)


def test_fresh_ledger_verifies_and_records_every_part(small_spec: Path, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        run_id, _ = _two_runs(small_spec, ledger)
        report = verify(ledger)
        assert report.intact, report.problems
        assert report.certificates_checked == 2 and report.blobs_checked == 2
        kinds = [e.kind for e in ledger.entries(run_id=run_id)]
        assert kinds[0] == "run" and kinds.count("input") == 2 and kinds[-1] == "certificate"
        assert "decision" in kinds
        decisions = [e.data()["kind"] for e in ledger.entries(run_id=run_id, kinds=["decision"])]
        assert {"pairing", "profile_rule", "gate"} <= set(decisions)
        assert ledger.run(run_id[:8]).run_id == run_id


def test_sqlite_settings_are_wal_and_full_sync(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        with ledger._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


@pytest.mark.parametrize("column", ["payload", "kind", "recorded_at", "run_id"])
def test_editing_any_field_of_an_entry_is_detected(small_spec: Path, tmp_path: Path, column: str) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        _two_runs(small_spec, ledger)
    value = {"payload": '{"edited":true}', "kind": "review", "recorded_at": "2020-01-01T00:00:00.000000Z",
             "run_id": "0" * 32}[column]
    _sql(db, f"UPDATE entries SET {column} = ? WHERE seq = 3", value)
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    assert not report.intact
    assert report.first_broken.seq == 3


def test_editing_one_byte_of_a_certificate_is_detected(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run_id, _ = _two_runs(small_spec, ledger)
        cert_seq = next(e.seq for e in ledger.entries(run_id=run_id, kinds=["certificate"]))
    with sqlite3.connect(db) as conn:
        payload = conn.execute("SELECT payload FROM entries WHERE seq = ?", (cert_seq,)).fetchone()[0]
        tampered = payload.replace('"verdict":"PASS"', '"verdict":"FAIL"', 1)
        assert tampered != payload
        conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (tampered, cert_seq))
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    assert not report.intact and report.first_broken.seq == cert_seq
    assert any("certificate" in p.message for p in report.problems)


def test_rehashed_edit_still_breaks_the_chain_and_the_certificate(small_spec: Path, tmp_path: Path) -> None:
    """An editor who recomputes the edited entry's own hashes still breaks the next link and the cert hash."""
    from certa.engine.foundation.canonical import sha256_hex
    from certa.ledger.chain import entry_hash

    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run_id, _ = _two_runs(small_spec, ledger)
        entry = next(ledger.entries(run_id=run_id, kinds=["certificate"]))
    cert = json.loads(entry.payload)
    cert["content"]["stages"]["ratio"]["token_perplexity"]["ratio_vs_baseline"] = 1.0
    payload = json.dumps(cert, separators=(",", ":"), sort_keys=True)
    payload_sha = sha256_hex(payload.encode())
    digest = entry_hash(seq=entry.seq, run_id=entry.run_id, kind=entry.kind, recorded_at=entry.recorded_at,
                        payload_sha256=payload_sha, prev_hash=entry.prev_hash)
    _sql(db, "UPDATE entries SET payload = ?, payload_sha256 = ?, entry_hash = ? WHERE seq = ?",
         payload, payload_sha, digest, entry.seq)
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    messages = " ".join(p.message for p in report.problems)
    assert "link broken" in messages and "content_sha256" in messages


def test_deleting_an_entry_is_detected(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        _two_runs(small_spec, ledger)
    _sql(db, "DELETE FROM entries WHERE seq = 4")
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    assert not report.intact
    assert report.first_broken.seq == 5 and "deleted" in report.first_broken.message


def test_reordering_entries_is_detected(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        _two_runs(small_spec, ledger)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET seq = -1 WHERE seq = 5")
        conn.execute("UPDATE entries SET seq = 5 WHERE seq = 6")
        conn.execute("UPDATE entries SET seq = 6 WHERE seq = -1")
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    assert not report.intact and report.first_broken.seq == 5


def test_verify_reports_progress(small_spec: Path, ledger: Ledger) -> None:
    _two_runs(small_spec, ledger)
    messages: list[str] = []
    assert verify(ledger, notify=messages.append).intact
    total = ledger.head()[0]
    assert messages[-1] == f"verify: entries {total}/{total}" and len(messages) <= 3  # throttled: about once a second


def test_truncating_the_tail_is_detected_against_an_external_head(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        first, second = _two_runs(small_spec, ledger)
        head = ledger.head()
        last_run = ledger.run(second)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM entries WHERE seq >= ?", (last_run.first_seq,))
        conn.execute("DELETE FROM runs WHERE run_id = ?", (second,))
        seq, digest = conn.execute("SELECT seq, entry_hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head'", (f"{seq}:{digest}",))
        rebuild_merkle_nodes(conn)  # the derived Merkle nodes too
    with Ledger.open(db) as ledger:
        assert verify(ledger).intact  # a consistent truncation is invisible from inside the database ...
        report = verify(ledger, expect_head=head)  # ... but not against a head kept elsewhere
    assert not report.intact and "removed" in report.first_broken.message


def test_editing_a_stored_input_is_detected(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        _two_runs(small_spec, ledger)
    with sqlite3.connect(db) as conn:
        sha, content = conn.execute("SELECT sha256, content FROM blobs LIMIT 1").fetchone()
        edited = bytearray(content)
        edited[-3] = ord("9") if edited[-3] != ord("9") else ord("8")
        conn.execute("UPDATE blobs SET content = ? WHERE sha256 = ?", (bytes(edited), sha))
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    assert not report.intact and "stored input bytes edited" in report.first_broken.message


def test_editing_the_runs_index_is_detected(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run_id, _ = _two_runs(small_spec, ledger)
    _sql(db, "UPDATE runs SET verdict = 'FAIL' WHERE run_id = ?", run_id)
    with Ledger.open(db) as ledger:
        report = verify(ledger)
    assert not report.intact and "runs index edited: verdict" in report.first_broken.message


def test_replay_reproduces_and_is_recorded(small_spec: Path, ledger: Ledger) -> None:
    run_id = run(small_spec, ledger=ledger).run_id
    small_spec.with_name("data").joinpath("subject.csv").unlink()  # replay needs nothing outside the ledger
    result = replay(ledger, run_id)
    assert result.reproduced and result.changes == ()
    notes = [e.data() for e in ledger.entries(run_id=run_id, kinds=["replay"])]
    assert notes[-1]["outcome"] == "REPRODUCED"
    assert notes[-1]["platform"]["machine"] == platform.machine()  # which machine replayed it
    assert verify(ledger).intact


def test_replay_reports_divergence_field_by_field(small_spec: Path, tmp_path: Path) -> None:
    """If a recorded run was produced by different code, replay says DIVERGED and names the fields."""
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
        entry = next(ledger.entries(run_id=run_id, kinds=["run"]))
    record = json.loads(entry.payload)
    record["spec_text"] = record["spec_text"].replace("replicates: 500", "replicates: 600")
    # Simulate a recorded spec that no longer matches its certificate (an edit verify also flags).
    _sql(db, "UPDATE entries SET payload = ? WHERE seq = ?", json.dumps(record), entry.seq)
    with Ledger.open(db) as ledger:
        result = replay(ledger, run_id)
    assert not result.reproduced
    paths = {c.path for c in result.changes}
    assert "knobs.stages[0].with.replicates" in paths


def test_a_run_recorded_with_other_library_versions_reproduces_and_lists_them(
        small_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Library versions are the environment stamp, not a result: they are reported, never a divergence."""
    import certa.engine.core.interpreter

    real_versions = certa.engine.core.interpreter.library_versions
    monkeypatch.setattr(certa.engine.core.interpreter, "library_versions", lambda: {**real_versions(), "numpy": "1.26.0"})
    with Ledger.open(tmp_path / "l.db") as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
        monkeypatch.setattr(certa.engine.core.interpreter, "library_versions", real_versions)
        result = replay(ledger, run_id)
        note = [e.data() for e in ledger.entries(run_id=run_id, kinds=["replay"])][-1]
    assert result.outcome == "REPRODUCED" and result.changes == ()
    assert [(c.path, c.before, c.after) for c in result.environment] == [("versions.numpy", "1.26.0", np.__version__)]
    assert result.note == f"same results (environment differs: numpy 1.26.0 -> {np.__version__})"
    assert note["outcome"] == "REPRODUCED" and note["compared"] == "results_sha256"
    assert note["environment"] == [{"path": "versions.numpy", "recorded": "1.26.0", "replayed": np.__version__}]


def test_a_changed_stage_replays_as_diverged_naming_the_fields_and_the_other_machine(
        small_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage whose numbers moved without a new version is caught by replay, field by field."""
    import dataclasses

    import certa.engine.core.certificate
    import certa.engine.core.interpreter
    from certa.engine.core.stages import REGISTRY, StageOutput, StageRegistry

    monkeypatch.setattr(certa.engine.core.certificate, "computing_platform",
                        lambda: {"system": "Linux", "machine": "x86_64", "numpy_simd": ["X86_V2", "X86_V4"]})
    with Ledger.open(tmp_path / "l.db") as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
    monkeypatch.undo()
    original = REGISTRY["paired.ppl_ratio"]  # the version new runs record

    def moved(ctx):  # the same stage, one output nudged in the last place
        out = original.run(ctx)
        metric = dict(out.outputs["token_perplexity"])
        metric["ratio_vs_baseline"] = float(np.nextafter(metric["ratio_vs_baseline"], 2.0))
        return StageOutput(outputs={**out.outputs, "token_perplexity": metric}, decisions=out.decisions)

    patched = StageRegistry(tuple(dataclasses.replace(s, run=moved) if s is original else s for s in REGISTRY.types))
    monkeypatch.setattr(certa.engine.core.interpreter, "REGISTRY", patched)
    with Ledger.open(tmp_path / "l.db") as ledger:
        result = replay(ledger, run_id)
        note = [e.data() for e in ledger.entries(run_id=run_id, kinds=["replay"])][-1]
    assert result.outcome == "DIVERGED"
    assert [c.path for c in result.changes] == ["stages.ratio.token_perplexity.ratio_vs_baseline"]
    assert result.note.startswith("1 result field(s) differ")
    assert "recorded on x86_64 X86_V2/X86_V4, replayed on" in result.note
    assert note["outcome"] == "DIVERGED"
    assert note["changes"][0]["path"] == "stages.ratio.token_perplexity.ratio_vs_baseline"

def test_aborted_run_is_recorded_without_certificate(example_spec: Path, ledger: Ledger) -> None:
    from certa.engine import ProfileAbort

    text = example_spec.read_text().replace("replicates: 3200", "replicates: 1000")
    example_spec.write_text(text)
    with pytest.raises(ProfileAbort) as info:
        run(example_spec, ledger=ledger)
    assert info.value.exit_code == 3 and "min_replicates" in str(info.value)
    row = ledger.run(info.value.run_id)
    assert row.status == "aborted" and row.certificate_sha256 is None
    kinds = [e.kind for e in ledger.entries(run_id=row.run_id)]
    assert kinds[-1] == "abort" and "certificate" not in kinds
    rules = [e.data()["detail"] for e in ledger.entries(run_id=row.run_id, kinds=["decision"])]
    assert any(r.get("rule") == "min_replicates" and r["outcome"] == "abort" for r in rules)
    assert verify(ledger).intact


def test_a_failed_write_leaves_no_partial_run(small_spec: Path, ledger: Ledger, monkeypatch) -> None:
    from certa.engine import LedgerError
    from certa.ledger import store

    before = ledger.entry_count()
    original = store.Ledger._append

    def append_then_fail(self, conn, run_id, new):
        original(self, conn, run_id, new)
        raise store.SQLAlchemyError("disk full (simulated)")

    monkeypatch.setattr(store.Ledger, "_append", append_then_fail)
    with pytest.raises(LedgerError):
        run(small_spec, ledger=ledger)
    monkeypatch.undo()
    assert ledger.entry_count() == before and ledger.runs() == []
    assert verify(ledger).intact


def test_concurrent_sqlite_writers_serialise_and_never_fork_the_chain(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    with Ledger.open(db):
        pass
    assert run_concurrently(db, small_spec, writers=3, runs_each=3) == []
    with Ledger.open(db) as ledger:
        assert len(ledger.runs()) == 9 and verify(ledger).intact


def test_verify_while_writers_append_reports_no_false_tampering(small_spec: Path, tmp_path: Path) -> None:
    import threading

    db = tmp_path / "busy.db"
    with Ledger.open(db) as ledger:
        run(small_spec, ledger=ledger)
    reports = []
    done = threading.Event()

    def auditor() -> None:
        with Ledger.open(db) as ledger:
            while not done.is_set():
                reports.append(verify(ledger))

    thread = threading.Thread(target=auditor)
    thread.start()
    errors = run_concurrently(db, small_spec, writers=2, runs_each=4)
    done.set()
    thread.join()
    assert errors == [] and reports
    assert all(r.intact for r in reports), [r.problems for r in reports if not r.intact][:1]


def test_a_ledger_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    from certa.engine import LedgerError

    db = tmp_path / "old.db"
    Ledger.open(db).close()
    _sql(db, "UPDATE ledger_meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(LedgerError, match="schema version 0 is not supported"):
        Ledger.open(db)


def _ledger_with_two_runs(small_spec: Path, folder: Path) -> Path:
    db = folder / "l.db"
    if not db.exists():
        with Ledger.open(db) as ledger:
            _two_runs(small_spec, ledger)
    return db


@pytest.mark.slow
def test_flipping_any_byte_of_any_entry_or_stored_input_is_detected(small_spec: Path, tmp_path: Path) -> None:
    """Property: one changed byte anywhere in the stored entries or inputs makes verify fail, naming it."""
    import shutil
    import uuid

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    pristine = _ledger_with_two_runs(small_spec, tmp_path)
    with sqlite3.connect(pristine) as conn:
        sizes = conn.execute("SELECT seq, length(payload) FROM entries ORDER BY seq").fetchall()
        blobs = conn.execute("SELECT sha256, length(content) FROM blobs ORDER BY sha256").fetchall()

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.booleans(), st.integers(0, 10**9), st.integers(0, 10**9), st.integers(1, 255))
    def check(in_blob: bool, which: int, offset: int, xor: int) -> None:
        db = tmp_path / f"copy-{uuid.uuid4().hex}.db"      # fresh name: no stale -wal file can apply
        shutil.copy(pristine, db)
        with sqlite3.connect(db) as conn:
            if in_blob:
                sha, size = blobs[which % len(blobs)]
                content = bytearray(conn.execute("SELECT content FROM blobs WHERE sha256 = ?", (sha,)).fetchone()[0])
                content[offset % size] ^= xor
                conn.execute("UPDATE blobs SET content = ? WHERE sha256 = ?", (bytes(content), sha))
                expected = f"blob {sha[:12]}…"
            else:
                seq, size = sizes[which % len(sizes)]
                payload = bytearray(conn.execute("SELECT payload FROM entries WHERE seq = ?", (seq,))
                                    .fetchone()[0].encode())
                payload[offset % size] ^= xor & 0x7F or 1       # stay in ASCII so the text column accepts it
                conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (payload.decode(), seq))
                expected = f"entry {seq} "
        with Ledger.open(db) as ledger:
            report = verify(ledger)
        db.unlink()
        assert not report.intact
        assert report.first_broken.where.startswith(expected), report.first_broken

    check()


def test_unknown_database_driver_is_a_clear_ledger_error() -> None:
    from certa.engine import LedgerError

    try:
        import pg8000  # noqa: F401
    except ImportError:
        with pytest.raises(LedgerError, match="database driver is not installed"):
            Ledger.open("postgresql+pg8000://user@127.0.0.1/db")
    with pytest.raises(LedgerError, match="cannot open ledger"):
        Ledger.open("postgresql+nosuchdriver://user@127.0.0.1/db")


@pytest.mark.parametrize("payload", ["[]", '"text"', "3", "null", '{"content": 7, "sha256": [1]}', "{}"])
def test_verify_reports_and_never_crashes_on_malformed_payloads_even_when_rechained(small_spec: Path, tmp_path: Path,
                                                                                     payload: str) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run(small_spec, ledger=ledger)
        head = ledger.head()
        kinds = {e.kind: e.seq for e in ledger.entries()}
    for kind, seq in kinds.items():  # one entry of every kind
        with sqlite3.connect(db) as conn:
            original = conn.execute("SELECT payload FROM entries WHERE seq = ?", (seq,)).fetchone()[0]
            conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (payload, seq))
        rechain(db, seq)
        with Ledger.open(db) as ledger:
            report = verify(ledger, expect_head=head)
        assert not report.intact, (kind, payload)  # at least the signed/kept head exposes the rewrite
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (original, seq))
        rechain(db, seq)
    with Ledger.open(db) as ledger:
        assert verify(ledger, expect_head=head).intact  # restored exactly


def test_replay_of_a_run_whose_record_was_mangled_says_so(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
        seq = next(ledger.entries(run_id=run_id, kinds=["run"])).seq
    _sql(db, "UPDATE entries SET payload = ? WHERE seq = ?", "{}", seq)
    with Ledger.open(db) as ledger, pytest.raises(LedgerIntegrityError, match=r"run entry \d+ is malformed"):
        replay(ledger, run_id)


def test_a_certificate_holding_an_integral_double_beyond_2_to_the_53_verifies_and_replays(small_spec: Path,
                                                                                         tmp_path: Path) -> None:
    """RFC 8785 writes the double 9007199254740994.0 as ``9007199254740994``; read back as an int, it would be
    re-encoded as a string (ints beyond 2**53 are), and every recomputed digest would differ."""
    spec = small_spec.read_text(encoding="utf-8").replace("max: 1.05", "max: 1.05\n  - id: huge\n"
                                                          "    metric: ratio.token_perplexity.display_ci[1]\n"
                                                          "    max: 9007199254740994.0")
    small_spec.write_text(spec, encoding="utf-8")
    with Ledger.open(tmp_path / "l.db") as ledger:
        run_id = run(small_spec, ledger=ledger).run_id
        assert b"9007199254740994" in canonical_bytes(ledger.certificate(run_id)["content"]["gates"])
        assert verify(ledger).intact
        assert replay(ledger, run_id).outcome == "REPRODUCED"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path):
    """A new ledger's URL: a SQLite file, or a fresh PostgreSQL database (dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'l.db'}"
        return
    from tests.conftest import fresh_postgres_databases

    with fresh_postgres_databases("ledger tests") as new_database:
        yield new_database()


def test_an_appender_that_read_a_stale_head_cannot_fork_the_chain(ledger_url: str, small_spec: Path) -> None:
    """Schema 5 has no unique index on ``prev_hash`` or ``entry_hash`` (``certa.ledger.schema``): a second entry after the
    same head is refused by the primary key ``seq``, since an appender writes at the head it read + 1. Here the
    head row is set back, as an appender would see it had it read the head before another committed (what the
    write lock prevents): its run is refused whole, and the chain stays one."""
    from sqlalchemy import create_engine, text

    from certa.engine import LedgerError

    def set_head(value: str) -> None:
        engine = create_engine(ledger_url)
        with engine.begin() as conn:
            conn.execute(text("UPDATE ledger_meta SET value = :v WHERE key = 'head'"), {"v": value})
        engine.dispose()

    with Ledger.open(ledger_url) as ledger:
        run(small_spec, ledger=ledger)
        stale = ledger.head()
        run(small_spec, ledger=ledger)
        head, count, runs = ledger.head(), ledger.entry_count(), ledger.runs()
        set_head(f"{stale[0]}:{stale[1]}")
        refused_by_the_primary_key = r"nothing was recorded: .*(entries\.seq|entries_pkey)"
        with pytest.raises(LedgerError, match=refused_by_the_primary_key):
            run(small_spec, ledger=ledger)
        set_head(f"{head[0]}:{head[1]}")
        assert (ledger.entry_count(), ledger.runs()) == (count, runs)
        assert verify(ledger).intact
        run(small_spec, ledger=ledger)
        assert verify(ledger).intact and ledger.head()[0] > head[0]
