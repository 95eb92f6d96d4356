"""A trust policy the spec names (``approval: {policy, sha256}``): ``certa run`` checks its pin before the work and
records it once (a ``policy`` entry, with the key ids its key files resolved to); ``show``, ``verify``, ``report``
and ``site`` decide a run's approval under it when no ``--policy`` is given, saying so, and say when a given
``--policy`` differs from it; the certificate names it through the spec's SHA-256 only, so a replay reproduces
without reading it (tests/policy_support.py builds the case)."""

from __future__ import annotations

import hashlib
import html
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from certa.cli import main
from certa.engine.core.inputs import load_tables
from certa.engine.core.spec import load_plan
from certa.engine.services.registrations import execute_registered
from certa.engine.services.run import record_execution
from certa.ledger import Ledger

from tests.policy_support import PolicyCase, expired_policy, spec_policy_case


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[PolicyCase, Path, list[dict]]:
    return spec_policy_case(tmp_path_factory.mktemp("spec-policy"))


def _certa(case: PolicyCase, *args: str):
    return CliRunner().invoke(main, [*args, "--ledger", str(case.db)])


def _basis(case: PolicyCase, seq: int) -> str:
    digest = hashlib.sha256(case.policy.read_bytes()).hexdigest()
    return f"under the policy the run's spec names, approvers.yaml (sha256 {digest[:16]}…, recorded in ledger entry {seq})"


def test_run_records_the_policy_its_spec_names_once_with_its_key_files(built) -> None:
    case, _, outputs = built
    first, second = (out["policy"] for out in outputs)
    digest = hashlib.sha256(case.policy.read_bytes()).hexdigest()
    assert first["sha256"] == second["sha256"] == digest
    assert (first["new"], second["new"]) == (True, False) and first["entry_seq"] == second["entry_seq"]
    with Ledger.open(case.db, create=False) as ledger:
        entries = ledger.policies(digest[:32])
        run_entry = next(ledger.entries(run_id=case.approved, kinds=["run"])).data()
        certificate = ledger.certificate(case.approved)
    assert [e.seq for e in entries] == [first["entry_seq"]]
    payload = entries[0].data()
    assert payload["text"] == case.policy.read_text() and payload["key_files"] == {"keys/alice.pub": case.alice}
    # the run names it: its spec text holds the pin, which the certificate's spec digest covers
    assert f"approval: {{policy: approvers.yaml, sha256: {digest}}}" in run_entry["spec_text"]
    assert certificate["content"]["spec"]["sha256"] == hashlib.sha256(run_entry["spec_text"].encode()).hexdigest()
    assert "approval" not in certificate["content"]["spec"] and "approval" not in json.dumps(certificate["content"]["knobs"])


def test_show_decides_under_the_runs_own_policy_and_says_so(built) -> None:
    case, _, outputs = built
    basis = _basis(case, outputs[0]["policy"]["entry_seq"])
    shown = _certa(case, "show", case.approved)
    assert shown.exit_code == 0, shown.output
    assert "**APPROVED** by Alice Example &lt;alice@example.org> (model-risk); not counted: review(s) signed by " \
           f"unknown key {case.mallory[:8]}…; {basis}" in shown.stdout
    refused = _certa(case, "show", case.unapproved).stdout
    assert "**NOT APPROVED** role model-risk needs 1 approval(s)" in refused and basis in refused
    assert "approval not checked" not in refused


def test_a_given_policy_that_differs_from_the_specs_is_said_to(built) -> None:
    case, _, _ = built
    other = expired_policy(case)
    shown = _certa(case, "show", case.approved, "--policy", str(other)).stdout
    digest = hashlib.sha256(other.read_bytes()).hexdigest()
    assert f"under --policy {other} (sha256 {digest[:16]}…), which differs from the policy the run's spec names, " \
           "approvers.yaml (sha256" in shown
    assert "**NOT APPROVED**" in shown and "key expired on" in shown  # decided by the given policy
    same = _certa(case, "show", case.approved, "--policy", str(case.policy)).stdout
    assert "**APPROVED**" in same and "differs" not in same and "the run's spec names" not in same


def test_verify_without_a_policy_decides_each_run_under_its_specs_policy(built) -> None:
    case, _, outputs = built
    result = _certa(case, "verify")
    assert result.exit_code == 1, result.output  # the second run is NOT APPROVED under its own policy
    assert "the policies the runs' specs name: 1 of 2 PASS run(s) APPROVED" in result.stdout
    out = json.loads(_certa(case, "verify", "--json").stdout)
    runs = {r["run_id"]: r for r in out["policy"]["runs"]}
    assert out["policy"]["file"] is None and runs[case.approved]["status"] == "APPROVED"
    assert runs[case.unapproved]["basis"] == _basis(case, outputs[0]["policy"]["entry_seq"])
    assert sorted(r["signer"]["kind"] for r in out["reviews"]) == ["known", "unknown", "unknown"]


def test_a_policy_that_differs_from_its_pin_is_refused_before_anything_is_recorded(built, tmp_path: Path) -> None:
    _, spec, _ = built
    copy = tmp_path / "spec"
    shutil.copytree(spec.parent, copy)
    (copy / "approvers.yaml").write_text((copy / "approvers.yaml").read_text() + "# edited\n", encoding="utf-8")
    db = tmp_path / "ledger.db"
    result = CliRunner().invoke(main, ["run", str(copy / "spec.yaml"), "--ledger", str(db)])
    assert result.exit_code == 2
    assert f"{copy / 'spec.yaml'}: approval.sha256: the trust policy approvers.yaml has SHA-256" in result.output
    assert "Traceback" not in result.output and not db.exists()
    text = (copy / "spec.yaml").read_text().replace("policy: approvers.yaml", "policy: ../approvers.yaml")
    (copy / "spec.yaml").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(copy / "spec.yaml"), "--ledger", str(db)])
    assert result.exit_code == 2 and "approval.policy: path '../approvers.yaml' leaves the spec's folder" in \
        result.output


def test_a_run_whose_policy_the_ledger_lacks_is_not_checked_and_says_why(built, tmp_path: Path) -> None:
    case, spec, _ = built
    db = tmp_path / "ledger.db"
    result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(db), "--no-record"])
    assert result.exit_code == 0  # no ledger written: the pin is still checked, nothing is recorded
    with Ledger.open(db) as ledger:  # a run recorded through the Python API without its policy entry
        plan = load_plan(spec)
        run_id = "f" * 32
        record_execution(ledger, run_id, execute_registered(plan, load_tables(plan), None, ledger=ledger))
    shown = CliRunner().invoke(main, ["show", run_id, "--ledger", str(db)]).stdout
    assert "_approval not checked (no policy)_: the run's spec names the policy approvers.yaml (sha256" in shown
    assert "which the ledger does not hold: give it with --policy FILE." in shown


def test_a_replay_reproduces_without_reading_the_policy(built, tmp_path: Path) -> None:
    case, spec, _ = built
    moved = tmp_path / "approvers.yaml"
    shutil.move(case.policy, moved)
    try:
        result = _certa(case, "replay", case.approved, "--no-record")
    finally:
        shutil.move(moved, case.policy)
    assert result.exit_code == 0, result.output
    assert "REPRODUCED" in result.output


@pytest.mark.slow  # renders a report and a site (about 3 s)
def test_report_and_site_decide_under_the_specs_policy_without_one_given(built, tmp_path: Path) -> None:
    case, _, outputs = built
    basis = _basis(case, outputs[0]["policy"]["entry_seq"])
    page = tmp_path / "run.html"
    assert _certa(case, "report", case.unapproved, "-o", str(page)).exit_code == 0
    text = page.read_text()
    assert '<span class="badge badge-fail">NOT APPROVED</span>' in text and basis in html.unescape(text)
    site = tmp_path / "site"
    assert _certa(case, "site", "-o", str(site), "--jobs", "1").exit_code == 0
    index = (site / "index.html").read_text()
    assert ">APPROVED</span>" in index and ">NOT APPROVED</span>" in index and "approval not checked" not in index


def test_a_policy_recorded_again_later_with_other_keys_does_not_change_an_earlier_runs_decision(
        built, tmp_path: Path) -> None:
    case, spec, outputs = built
    folder, db = tmp_path / "spec", tmp_path / "ledger.db"
    shutil.copytree(spec.parent, folder)
    shutil.copy(case.db, db)
    (folder / "keys" / "alice.pub").write_bytes(Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))  # the key file replaced
    recorded = CliRunner().invoke(main, ["verify", "--policy", str(folder / "approvers.yaml"), "--record", "--json",
                                         "--ledger", str(db)])
    assert "policy" in json.loads(recorded.stdout)["recorded"] and "recorded as entry" in recorded.stdout
    shown = CliRunner().invoke(main, ["show", case.approved, "--ledger", str(db)]).stdout
    assert "**APPROVED** by Alice Example" in shown
    assert f"recorded in ledger entry {outputs[0]['policy']['entry_seq']})" in shown
