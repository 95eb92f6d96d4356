"""certa batch on a LocalCluster: certificates equal certa run's, errors and aborts do not stop the batch,
a killed client resumes without duplicates, and a sharded bake-off merged from the batch's own runs."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from certa.engine import run
from certa.engine.services.audit import REPRODUCED, replay
from certa.engine.services.audit import verify as verify_ledger
from certa.engine.services.batch import ABORTED, EXIT_ORDER, run_batch, worst_exit_code
from certa.engine.services.batch_ledger import LedgerSnapshot, idempotency_key
from certa.engine.foundation.errors import SpecError, StageError
from certa.engine.core.tables import columns_to_csv_bytes
from certa.ledger import Ledger

from tests.conftest import window_columns

distributed = pytest.importorskip("distributed")

TINY_SPEC = """\
certa: 1
name: tiny-{i}
seed: {seed}
profile: dev
inputs:
  baseline: {{path: data/baseline.csv}}
  subject: {{path: data/subject.csv}}
stages:
  - id: ratio
    use: paired.ppl_ratio
    with: {{baseline: baseline, subject: subject, replicates: 200}}
gates:
  - id: no-regression
    metric: ratio.token_perplexity.display_ci[1]
    max: {bound}
"""


def write_tiny_specs(root: Path, count: int, *, windows: int = 40) -> list[Path]:
    """``count`` tiny paired-ratio specs with distinct data and seeds, one folder each (odd ones FAIL)."""
    paths = []
    for i in range(count):
        folder = root / f"s{i:02d}"
        (folder / "data").mkdir(parents=True)
        base, subj = window_columns(windows, seed=100 + i)
        (folder / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(base))
        (folder / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subj))
        spec = folder / "spec.yaml"
        spec.write_text(TINY_SPEC.format(i=i, seed=1000 + i, bound=1.05 if i % 2 == 0 else 1.0001), encoding="utf-8")
        paths.append(spec)
    return paths


def assert_same_as_certa_run(ledger: Ledger, rows) -> None:
    """Every recorded certificate's content equals ``certa run``'s (no ledger) for the same spec."""
    for row in rows:
        stored = ledger.certificate(row.run_id)
        alone = run(Path(row.spec)).certificate
        assert stored["content"] == alone["content"]
        assert (stored["content_sha256"], stored["results_sha256"]) == (alone["content_sha256"], alone["results_sha256"])
        assert stored["issued"]["run_id"] == row.run_id


@pytest.fixture(scope="module")
def cluster_client():
    """One small LocalCluster (2 processes, 1 thread each) shared by the tests that pass ``client=``."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       memory_limit="1GiB")
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def test_exit_order_is_invalid_then_aborted_then_fail_then_inconclusive_then_pass() -> None:
    assert EXIT_ORDER == (2, 5, 3, 1, 6, 0)
    assert worst_exit_code([0, 1, 3]) == 3 and worst_exit_code([0, 1]) == 1 and worst_exit_code([]) == 0
    assert worst_exit_code([3, 2, 0]) == 2
    assert worst_exit_code([0, 6]) == 6 and worst_exit_code([6, 1, 0]) == 1
    assert worst_exit_code([0, 5]) == 5 and worst_exit_code([5, 3, 1]) == 5 and worst_exit_code([5, 2]) == 2
    assert worst_exit_code([0, 9, 2]) == 9  # a code the order does not know is never taken for a pass


def test_idempotency_key_covers_batch_spec_inputs_and_seed() -> None:
    key = idempotency_key("b", "a" * 64, ["1" * 64, "2" * 64], 7)
    assert len(key) == 64
    assert key != idempotency_key("c", "a" * 64, ["1" * 64, "2" * 64], 7)
    assert key != idempotency_key("b", "a" * 64, ["2" * 64, "1" * 64], 7)
    assert key != idempotency_key("b", "a" * 64, ["1" * 64, "2" * 64], 8)
    snapshot = LedgerSnapshot(certificates={"abcdef12" * 4: {"content": {}}}, batches={"b": ["x"]})
    assert snapshot.certificate("abcdef12") == {"content": {}} and snapshot.batch_runs("b") == ["x"]


def test_batch_on_the_default_local_cluster_matches_certa_run_and_survives_bad_specs(tmp_path: Path) -> None:
    specs = write_tiny_specs(tmp_path / "specs", 3)
    (tmp_path / "specs" / "zz-bad").mkdir()
    (tmp_path / "specs" / "zz-bad" / "spec.yaml").write_text("certa: 1\nname: bad\nseed: 1\nstages: []\nbogus: 1\n")
    malformed = write_tiny_specs(tmp_path / "more", 1)[0]  # its input does not parse: found on the worker
    (malformed.parent / "data" / "subject.csv").write_bytes(b'window_id,tokens,mean_nll\n"w0,1\n')
    messages: list[str] = []
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        report = run_batch([tmp_path / "specs", malformed], ledger=ledger, workers=2,
                           notify=messages.append)  # the default: a LocalCluster of 2 processes
        assert [row.spec for row in report.rows] == [str(p) for p in specs] + [
            str(tmp_path / "specs/zz-bad/spec.yaml"), str(malformed)]
        ok, bad, bad_data = report.rows[:3], report.rows[3], report.rows[4]
        assert bad_data.status == "error" and bad_data.run_id is None and bad_data.exit_code == 2, bad_data
        assert [row.verdict for row in ok] == ["PASS", "FAIL", "PASS"] and all(r.status == "recorded" for r in ok)
        assert bad.status == "error" and bad.run_id is None and "bogus" in bad.error and bad.exit_code == 2
        assert report.exit_code == 2
        assert_same_as_certa_run(ledger, ok)
        assert verify_ledger(ledger).intact
        assert sorted(r.run_id for r in ledger.runs()) == sorted(r.run_id for r in ok)
        assert ledger.batch_runs(report.batch_id) == sorted(r.run_id for r in ok)
        assert any(m.startswith("[5/5]") for m in messages) and any("bogus" in m for m in messages)


class ClientKilled(Exception):
    pass


def test_a_killed_client_resumes_without_duplicates(tmp_path: Path, cluster_client) -> None:
    write_tiny_specs(tmp_path / "specs", 6)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        recorded = []

        def die_after_two(row) -> None:
            recorded.append(row)
            if len(recorded) == 2:
                raise ClientKilled

        with pytest.raises(ClientKilled):
            run_batch([tmp_path / "specs"], ledger=ledger, client=cluster_client, on_recorded=die_after_two)
        assert len(ledger.runs()) == 2
        again = run_batch([tmp_path / "specs"], ledger=ledger, client=cluster_client)
        statuses = [row.status for row in again.rows]
        assert statuses.count("already recorded") == 2 and statuses.count("recorded") == 4
        assert {r.run_id for r in recorded} == {r.run_id for r in again.rows if r.status == "already recorded"}
        runs = ledger.runs()
        assert len(runs) == 6 and len({r.run_id for r in runs}) == 6
        assert again.exit_code == 1  # three FAIL, no error
        assert verify_ledger(ledger).intact
        # a named batch is another batch: new run ids, and its own resume
        named = run_batch([tmp_path / "specs" / "s00"], ledger=ledger, client=cluster_client, batch_id="nightly")
        assert named.rows[0].status == "recorded" and named.rows[0].run_id not in {r.run_id for r in runs}


def _decisions(seed: int, n: int) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    return {"vendor": rng.choice(["a", "b", "c"], n).tolist(), "bucket": rng.choice(["h1", "h2"], n).tolist(),
            "rsi": np.round(np.tanh(rng.normal(0.3, 0.6, n)), 6).clip(-0.999999, 0.999999).tolist(),
            "g": np.round(rng.uniform(0.5, 1.0, n), 4).tolist()}


COMPARE_SPEC = """\
certa: 1
name: {name}
seed: 11
inputs:
  decisions: {{path: decisions.csv}}
stages:
  - id: cmp
    use: bakeoff.compare
    with: {{input: decisions, bootstrap: {{replicates: 100}}, ledger_rows: per_bucket, allow_single_vendor: true}}
"""

MERGE_SPEC = """\
certa: 1
name: merged
seed: 11
stages:
  - id: merged
    use: bakeoff.merge
    with: {{{knob}}}
"""


def _pool_view(out):
    return {(b, v): (x["U"], x["W"], x["U_env"], x["RSI_pool"], x["RSI_pool_env"], x["band_counts"])
            for b, e in out["buckets"].items() for v, x in e["vendors"].items()}


def test_a_batch_records_the_policy_a_spec_names_once_and_refuses_a_wrong_pin(tmp_path: Path, cluster_client) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from tests.policy_support import spec_naming_policy

    spec, policy = spec_naming_policy(tmp_path / "specs" / "named", Ed25519PrivateKey.generate())
    twin = spec.with_name("twin.yaml")
    twin.write_text(spec.read_text().replace("seed: 7", "seed: 8"))
    wrong = tmp_path / "specs" / "wrong"
    shutil.copytree(spec.parent, wrong, ignore=shutil.ignore_patterns("*.yaml"))
    shutil.copy(policy, wrong)
    digest = hashlib.sha256(policy.read_bytes()).hexdigest()
    (wrong / "spec.yaml").write_text(spec.read_text().replace(digest, "f" * 64))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        report = run_batch([tmp_path / "specs"], ledger=ledger, client=cluster_client)
        rows = {Path(row.spec).parent.name + "/" + Path(row.spec).name: row for row in report.rows}
        assert [rows[name].verdict for name in ("named/spec.yaml", "named/twin.yaml")] == ["PASS", "PASS"]
        assert rows["wrong/spec.yaml"].status == "error"
        assert "approval.sha256: the trust policy approvers.yaml has SHA-256" in rows["wrong/spec.yaml"].error
        assert len(ledger.policies(digest[:32])) == 1


def test_sharded_bakeoff_merged_from_the_batch_equals_one_run(tmp_path: Path, cluster_client) -> None:
    columns = _decisions(5, 900)
    cuts = [0, 250, 251, 600, 900]
    root = tmp_path / "bakeoff"
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        folder = root / f"shard{k}"
        folder.mkdir(parents=True)
        (folder / "decisions.csv").write_bytes(columns_to_csv_bytes({c: v[lo:hi] for c, v in columns.items()}))
        (folder / "spec.yaml").write_text(COMPARE_SPEC.format(name=f"shard-{k}"))
    (root / "zmerge").mkdir()
    (root / "zmerge" / "spec.yaml").write_text(MERGE_SPEC.format(knob="shard_batch: bake-1"))
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "decisions.csv").write_bytes(columns_to_csv_bytes(columns))
    (whole / "spec.yaml").write_text(COMPARE_SPEC.format(name="whole"))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        report = run_batch([root], ledger=ledger, client=cluster_client, batch_id="bake-1")
        assert [r.status for r in report.rows] == ["recorded"] * 5, report.rows
        merge_row = report.rows[-1]
        merged = ledger.certificate(merge_row.run_id)["content"]["stages"]["merged"]
        full = run(whole / "spec.yaml").certificate["content"]["stages"]["cmp"]
        assert _pool_view(merged) == _pool_view(full) and merged["sums"] == full["sums"]
        assert [s["decisions"] for s in merged["shards"]] == [
            cuts[k + 1] - cuts[k] for k in sorted(range(4), key=lambda k: report.rows[k].run_id)]
        # the same merge on one machine, from the recorded runs by id, and a replay, agree bit for bit
        shard_ids = ", ".join(r.run_id for r in report.rows[:4])
        by_id = write_spec(tmp_path / "byid", MERGE_SPEC.format(knob=f"shard_runs: [{shard_ids}]"))
        again = run(by_id, ledger=ledger).certificate["content"]["stages"]["merged"]
        assert _pool_view(again) == _pool_view(full)
        assert replay(ledger, merge_row.run_id).outcome == REPRODUCED
        assert replay(ledger, report.rows[0].run_id).outcome == REPRODUCED
        assert verify_ledger(ledger).intact


def write_spec(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return folder / "spec.yaml"


def test_merge_knobs_are_exclusive_and_need_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(SpecError):
        run(write_spec(tmp_path / "both", "certa: 1\nname: m\nseed: 1\ninputs:\n  s: {path: s.jsonl}\nstages:\n"
                       "  - {id: m, use: bakeoff.merge, with: {shards: [s], shard_batch: b}}\n"))
    with pytest.raises(Exception, match="has no ledger"):
        run(write_spec(tmp_path / "noledger", MERGE_SPEC.format(knob="shard_batch: b")))


def test_certa_batch_command_prints_the_table_and_resumes(tmp_path: Path, cluster_client) -> None:
    from click.testing import CliRunner

    from certa.cli import main

    write_tiny_specs(tmp_path / "specs", 2)
    args = ["batch", str(tmp_path / "specs"), "--scheduler", cluster_client.scheduler.address,
            "--ledger", str(tmp_path / "ledger.db")]
    first = CliRunner().invoke(main, [*args, "--json"])
    assert first.exit_code == 1, first.output  # one PASS, one FAIL
    data = json.loads(first.stdout)
    assert [r["status"] for r in data["runs"]] == ["recorded", "recorded"] and data["exit_code"] == 1
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 1 and again.stdout.count("already recorded") == 2
    assert data["batch_id"] in again.stdout


def test_input_overrides_reach_every_spec_that_declares_the_input(tmp_path: Path, cluster_client) -> None:
    specs = write_tiny_specs(tmp_path / "specs", 2)
    _, other_subject = window_columns(40, seed=999, shift=0.2)
    elsewhere = tmp_path / "elsewhere" / "subject-v2.csv"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(columns_to_csv_bytes(other_subject))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        with pytest.raises(SpecError, match=r"--input nowhere: no valid spec of the batch declares this input"):
            run_batch([tmp_path / "specs"], ledger=ledger, client=cluster_client, input_paths={"nowhere": elsewhere})
        assert ledger.runs() == []  # refused before anything ran
        report = run_batch([tmp_path / "specs"], ledger=ledger, client=cluster_client,
                           input_paths={"subject": elsewhere})
        assert [row.status for row in report.rows] == ["recorded", "recorded"]
        for spec, row in zip(specs, report.rows):
            alone = run(spec, input_paths={"subject": elsewhere}).certificate
            stored = ledger.certificate(row.run_id)
            assert stored["results_sha256"] == alone["results_sha256"]
            assert stored["content"]["inputs"] == alone["content"]["inputs"]
            assert stored["results_sha256"] != run(spec).certificate["results_sha256"]  # the other data was used


def test_certa_batch_refuses_an_input_no_spec_declares_before_starting_a_cluster(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from certa.cli import main

    write_tiny_specs(tmp_path / "specs", 1)
    result = CliRunner().invoke(main, ["batch", str(tmp_path / "specs"), "--input", f"typo={tmp_path}/x.csv",
                                       "--ledger", str(tmp_path / "ledger.db")])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "--input typo: no valid spec of the batch declares this input (declared: baseline, subject)" in result.stderr
    assert not (tmp_path / "ledger.db").exists()
    bad = CliRunner().invoke(main, ["batch", str(tmp_path / "specs"), "--input", "no-equals-sign"])
    assert bad.exit_code == 2 and "expected NAME=PATH" in bad.output


def test_batch_runs_finds_exactly_the_runs_of_that_batch(small_spec: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from certa.engine.services.batch import _batch_decision
    from certa.engine.services.run import record_execution
    from certa.engine.core.inputs import load_tables
    from certa.engine.core.interpreter import execute
    from certa.engine.core.spec import load_plan

    plan = load_plan(small_spec)
    execution = execute(plan, load_tables(plan))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ids = {}
        for number, batch in enumerate(["nightly", "nightly-2", "x_nightly", "nightly"]):
            run_id = f"{number:032x}"
            tagged = replace(execution, decisions=execution.decisions + _batch_decision(batch, f"key{number}"))
            record_execution(ledger, run_id, tagged)
            ids.setdefault(batch, []).append(run_id)
        assert ledger.batch_runs("nightly") == ids["nightly"]
        assert ledger.batch_runs("nightly-2") == ids["nightly-2"]
        assert ledger.batch_runs("x_nightly") == ids["x_nightly"]  # LIKE's wildcard, escaped
        assert ledger.batch_runs("nigh%") == [] and ledger.batch_runs("other") == []


def test_certa_run_reads_the_runs_of_a_batch_from_its_ledger(small_spec: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from certa.engine.core.inputs import load_tables
    from certa.engine.core.interpreter import execute
    from certa.engine.core.spec import load_plan
    from certa.engine.services.batch import _batch_decision
    from certa.engine.services.run import record_execution

    plan = load_plan(small_spec)
    execution = execute(plan, load_tables(plan))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        tagged = replace(execution, decisions=execution.decisions + _batch_decision("nightly", "key"))
        record_execution(ledger, "0" * 32, tagged)
        with pytest.raises(StageError, match="no shard run found"):  # its one run holds no bakeoff.compare
            run(write_spec(tmp_path / "merge", MERGE_SPEC.format(knob="shard_batch: nightly")), ledger=ledger)


def test_certa_batch_prints_warnings_and_writes_junit_and_a_summary(tmp_path: Path, cluster_client) -> None:
    from click.testing import CliRunner

    from certa.cli import main

    from tests.services.presentation.test_junit import assert_valid_junit

    passing, failing, warned, aborted = write_tiny_specs(tmp_path / "specs", 4)
    subject = warned.parent / "data" / "subject.csv"
    subject.write_text("".join(subject.read_text().splitlines(keepends=True)[:-3]))  # 3 unpaired windows: warn
    aborted.write_text(aborted.read_text().replace("profile: dev", "profile: ci"))  # 40 windows < 200: abort
    (tmp_path / "specs" / "zz-bad").mkdir()
    (tmp_path / "specs" / "zz-bad" / "spec.yaml").write_text("certa: 1\nname: bad\nseed: 1\nstages: []\nbogus: 1\n")
    report, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    args = ["batch", str(tmp_path / "specs"), "--scheduler", cluster_client.scheduler.address,
            "--ledger", str(tmp_path / "ledger.db"), "--junit", str(report), "--summary", str(summary)]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 2, text.output
    assert "warning: tiny-2: stage 'ratio': window_match_fraction = 0.925, required 1" in text.stderr
    assert "failed: min_paired_windows = 40, required 200" in text.stdout

    root = assert_valid_junit(report)
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert set(suites) == {"tiny-0", "tiny-1", "tiny-2", "tiny-3", str(tmp_path / "specs/zz-bad/spec.yaml")}
    assert suites["tiny-0"].find("testcase/failure") is None
    assert suites["tiny-1"].find("testcase/failure").get("type") == "GateFailed"
    rule = suites["tiny-3"].find("testcase")
    assert rule.get("name") == "profile rule min_paired_windows" and rule.get("classname") == "tiny-3"
    assert rule.find("failure").get("message") == "min_paired_windows = 40, required 200"
    assert "bogus" in suites[str(tmp_path / "specs/zz-bad/spec.yaml")].find("testcase/error").get("message")
    lines = summary.read_text().splitlines()
    assert lines[2] == "⛔ **REFUSED**: 5 spec(s) in " + lines[2].split(" in ")[1]
    assert lines[2].endswith(": 2 PASS, 1 FAIL, 1 ABORTED, 1 REFUSED.")
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) == 1 + 5 + 1 and rows[-1].startswith("| **total** | | 4 run(s) |")
    assert lines[-2].startswith("A run's full report: `certa report RUN -o RUN.html --ledger ")

    again = CliRunner().invoke(main, [*args, "--json"])  # resumed: every run already recorded, same report
    runs = json.loads(again.stdout)["runs"]
    assert runs[3]["failed_rules"][0]["rule"] == "min_paired_windows" and runs[3]["status"] == "already recorded"
    assert summary.read_text().count("### certa batch: ") == 2 and "already recorded" in summary.read_text()
    rerun = {suite.get("name"): suite for suite in assert_valid_junit(report).findall("testsuite")}
    assert rerun["tiny-3"].find("testcase/failure").get("message") == "min_paired_windows = 40, required 200"
    assert rerun["tiny-1"].find("testcase/failure").get("type") == "GateFailed"


def test_a_refused_batch_still_writes_its_junit_report(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from certa.cli import main

    from tests.services.presentation.test_junit import assert_valid_junit

    write_tiny_specs(tmp_path / "specs", 1)
    report, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    result = CliRunner().invoke(main, ["batch", str(tmp_path / "specs"), "--input", f"typo={tmp_path}/x.csv",
                                       "--ledger", str(tmp_path / "ledger.db"), "--junit", str(report),
                                       "--summary", str(summary)])
    assert result.exit_code == 2 and not (tmp_path / "ledger.db").exists()
    assert summary.read_text().startswith("### certa run: certa batch\n\n⛔ **REFUSED**")
    error = assert_valid_junit(report).find("testsuite/testcase/error")
    assert error.get("type") == "SpecError" and "--input typo" in error.get("message")


def test_batch_runs_match_their_registrations_as_certa_run_does(tmp_path: Path, cluster_client) -> None:
    """Registered tiny-0 (unchanged: registered), tiny-1 (a gate changed, dev: recorded with the difference and a
    warning), tiny-2 (a knob changed, ci: refused before any stage, exit 3, rule ``registration``); tiny-3 was
    never registered."""
    from certa.engine.core.spec import load_plan
    from certa.engine.services.registrations import register

    same, gate, knob, unregistered = write_tiny_specs(tmp_path / "specs", 4)
    knob.write_text(knob.read_text().replace("profile: dev", "profile: ci"))
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ids = [register(ledger, load_plan(spec)).registration_id for spec in (same, gate, knob)]
        gate.write_text(gate.read_text().replace("max: 1.0001", "max: 1.2"))
        knob.write_text(knob.read_text().replace("replicates: 200", "replicates: 300"))
        report = run_batch([tmp_path / "specs"], ledger=ledger, client=cluster_client)
        rows = {row.name: row for row in report.rows}
        record = {name: ledger.certificate(rows[name].run_id)["content"]["registration"]
                  for name in ("tiny-0", "tiny-1", "tiny-3")}
    assert record["tiny-0"]["id"] == ids[0] and record["tiny-0"]["differences"] == []
    assert record["tiny-1"]["differences"] == [{"path": "gates[0].max", "registered": 1.0001, "run": 1.2}]
    assert rows["tiny-1"].warnings and rows["tiny-1"].warnings[0].startswith("registration: the spec differs")
    assert record["tiny-3"] is None
    assert (rows["tiny-2"].exit_code, rows["tiny-2"].status) == (3, ABORTED)
    assert "replicates: registered 200, run 300" in (rows["tiny-2"].error or "")
