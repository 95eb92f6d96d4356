"""``certa replay --all``: the auditor's batch job (filters, one table, each replay recorded, exit codes)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import certa.engine.core.interpreter
from certa.cli import main
from certa.engine import run
from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.core.certificate import results_sha256
from certa.engine.core.stages import REGISTRY, StageOutput, StageRegistry
from certa.ledger import Ledger

from tests.conftest import SMALL_SPEC


def _certa(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def three_runs(small_spec: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """A ledger with runs of two spec names (small-paired twice, other-paired once), oldest first."""
    other = small_spec.with_name("other.yaml")
    other.write_text(SMALL_SPEC.replace("name: small-paired", "name: other-paired"), encoding="utf-8")
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        ids = [run(path, ledger=ledger).run_id for path in (small_spec, other, small_spec)]
    return db, ids


def test_replay_all_prints_one_table_records_each_replay_and_exits_0(three_runs: tuple[Path, list[str]]) -> None:
    db, ids = three_runs
    code, out, err = _certa("replay", "--all", "--ledger", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["run", "name", "outcome", "detail"]
    assert [line.split()[:3] for line in lines[1:4]] == [[i[:12], n, "REPRODUCED"] for i, n in
                                                        zip(ids, ["small-paired", "other-paired", "small-paired"])]
    assert lines[4] == "3 run(s): 3 REPRODUCED, 0 DIVERGED, 0 CANNOT REPLAY"
    assert err.splitlines() == [f"replay {k}/3: {i[:12]} {n}: REPRODUCED" for k, (i, n) in
                                enumerate(zip(ids, ["small-paired", "other-paired", "small-paired"]), start=1)]
    with Ledger.open(db) as ledger:
        notes = {e.run_id: e.data()["outcome"] for e in ledger.entries(kinds=["replay"])}
    assert notes == dict.fromkeys(ids, "REPRODUCED")


def test_replay_all_filters_by_name_pattern_and_time(three_runs: tuple[Path, list[str]]) -> None:
    db, ids = three_runs
    code, out, _ = _certa("replay", "--all", "--name", "small-*", "--json", "--ledger", str(db))
    report = json.loads(out)
    assert code == 0 and [r["run_id"] for r in report["runs"]] == [ids[0], ids[2]]
    assert report["counts"] == {"REPRODUCED": 2, "DIVERGED": 0, "CANNOT REPLAY": 0}
    with Ledger.open(db) as ledger:
        third = ledger.run(ids[2]).recorded_at
    code, out, _ = _certa("replay", "--all", "--since", third, "--json", "--ledger", str(db))
    assert [r["run_id"] for r in json.loads(out)["runs"]] == [ids[2]]
    code, out, _ = _certa("replay", "--all", "--since", "2999-01-01", "--ledger", str(db))
    assert code == 0 and out.strip() == "no completed runs match"


def test_replay_all_refuses_bad_usage(three_runs: tuple[Path, list[str]]) -> None:
    db, ids = three_runs
    assert _certa("replay", "--ledger", str(db))[0] == 2
    assert _certa("replay", ids[0], "--all", "--ledger", str(db))[0] == 2
    assert _certa("replay", ids[0], "--name", "x", "--ledger", str(db))[0] == 2
    code, _, err = _certa("replay", "--all", "--since", "last tuesday", "--ledger", str(db))
    assert code == 2 and "not an ISO 8601 date" in err


def test_replay_all_names_diverged_fields_and_why_a_run_cannot_replay(
        three_runs: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    db, ids = three_runs
    # run 2's certificate names a stage version this certa does not have, as a ledger from a newer certa would
    # (re-sealed: its digests agree; only the chain, which replay does not check, would show the edit)
    with Ledger.open(db) as ledger:
        entry = next(ledger.entries(run_id=ids[1], kinds=["certificate"]))
    certificate = json.loads(entry.payload)
    certificate["content"]["knobs"]["stages"][0]["version"] = "9.0.0"
    certificate["content_sha256"] = canonical_sha256(certificate["content"])
    certificate["results_sha256"] = results_sha256(certificate["content"])
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET payload = ? WHERE seq = ?", (json.dumps(certificate), entry.seq))
    original = REGISTRY["paired.ppl_ratio"]  # the version new runs record

    def moved(ctx):
        out = original.run(ctx)
        metric = {**out.outputs["token_perplexity"], "ratio_vs_baseline": 1.5}
        return StageOutput(outputs={**out.outputs, "token_perplexity": metric}, decisions=out.decisions)

    monkeypatch.setattr(certa.engine.core.interpreter, "REGISTRY", StageRegistry(
        tuple(dataclasses.replace(s, run=moved) if s is original else s for s in REGISTRY.types)))
    code, out, _ = _certa("replay", "--all", "--json", "--ledger", str(db))
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    outcomes = [(r["outcome"], r["changes"][0]["path"] if r["changes"] else None) for r in report["runs"]]
    assert outcomes == [("DIVERGED", "stages.ratio.token_perplexity.ratio_vs_baseline"), ("CANNOT REPLAY", None),
                        ("DIVERGED", "stages.ratio.token_perplexity.ratio_vs_baseline")]
    assert "has no version '9.0.0'" in report["runs"][1]["note"]
    assert report["counts"] == {"REPRODUCED": 0, "DIVERGED": 2, "CANNOT REPLAY": 1}
    code, out, _ = _certa("replay", "--all", "--ledger", str(db))
    assert code == 1
    assert "DIVERGED      stages.ratio.token_perplexity.ratio_vs_baseline" in out
    assert "CANNOT REPLAY" in out and "upgrade certa" in out


def test_replay_on_an_old_schema_ledger_asks_for_migrate_and_writes_nothing(
        three_runs: tuple[Path, list[str]]) -> None:
    db, _ = three_runs
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE ledger_meta SET value = '1' WHERE key = 'schema_version'")
        before = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    code, _, err = _certa("replay", "--all", "--ledger", str(db))
    assert code == 2 and "run 'certa migrate" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == before


def test_results_sha256_is_recomputable_by_a_third_party_and_checked(small_spec: Path) -> None:
    import hashlib

    import rfc8785

    from certa.engine.core.certificate import certificate_problems

    certificate = run(small_spec).certificate
    content = json.loads(json.dumps(certificate["content"]))  # what a third party reads from the JSON file
    expected = hashlib.sha256(rfc8785.dumps({k: v for k, v in content.items() if k != "versions"})).hexdigest()
    assert certificate["certificate_format"] == 2 and certificate["results_sha256"] == expected
    assert hashlib.sha256(rfc8785.dumps(content)).hexdigest() == certificate["content_sha256"] != expected
    other_numpy = {**content, "versions": {**content["versions"], "numpy": "9.9.9"}}
    assert results_sha256(other_numpy) == expected  # the environment stamp is not a result
    assert certificate_problems(certificate) == []
    forged = {**certificate, "results_sha256": "0" * 64}
    assert certificate_problems(forged) == [f"results_sha256 {'0' * 64} does not match content ({expected})"]
    old_format = {k: v for k, v in certificate.items() if k != "results_sha256"}
    assert certificate_problems({**old_format, "certificate_format": 1}) == []  # 0.1.0/0.2.0 certificates stay valid
    assert any("results_sha256" in p for p in certificate_problems(old_format))  # format 2 requires it
