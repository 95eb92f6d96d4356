"""``--policy FILE`` on ``certa verify``, ``show``, ``report`` and ``site``: a review signed by a key the policy does
not list is "unknown key", never its claimed name; APPROVED names the approver from the policy; NOT APPROVED
says what is missing (verify exits 1); without a policy approval is "not checked"; a broken policy file is
exit 2 naming its file and line, with no traceback (tests/policy_support.py builds the case)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main

from tests.policy_support import EXPIRED, PolicyCase, expired_policy, policy_case


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> PolicyCase:
    return policy_case(tmp_path_factory.mktemp("policy"))


def _certa(case: PolicyCase, *args: str):
    return CliRunner().invoke(main, [*args, "--ledger", str(case.db)])


def test_verify_with_a_policy_names_approvers_from_it_and_unknown_keys_by_id(case: PolicyCase) -> None:
    result = _certa(case, "verify", "--policy", str(case.policy))
    assert result.exit_code == 1, result.output  # the second run is NOT APPROVED
    out = result.stdout
    assert f"run {case.approved}: APPROVED by Alice Example <alice@example.org> (model-risk); not counted: review(s) " \
           f"signed by unknown key {case.mallory[:8]}…" in out
    assert f"run {case.unapproved}: NOT APPROVED role model-risk needs 1 approval(s) by distinct people, has 0 " \
           "(specs '*') (Alice Example <alice@example.org>: no review signed by their key)" in out
    assert f"signer: unknown key {case.mallory[:8]}…" in out and "mallory" not in out
    assert "1 of 2 PASS run(s) APPROVED" in out
    only = _certa(case, "verify", case.approved, "--policy", str(case.policy))
    assert only.exit_code == 0, only.output


def test_verify_json_carries_each_runs_approval_and_the_policy_digest(case: PolicyCase) -> None:
    out = json.loads(_certa(case, "verify", "--policy", str(case.policy), "--json").stdout)
    assert out["ok"] is False and out["intact"] is True
    policy = out["policy"]
    assert policy["sha256"] == hashlib.sha256(case.policy.read_bytes()).hexdigest() and policy["runs_checked"] == 2
    by_run = {r["run_id"]: r for r in policy["runs"]}
    assert by_run[case.approved]["status"] == "APPROVED" and by_run[case.unapproved]["status"] == "NOT APPROVED"
    assert by_run[case.approved]["approvers"] == [{"name": "Alice Example", "email": "alice@example.org",
                                                  "roles": ["model-risk"], "key_id": case.alice,
                                                  "entry": by_run[case.approved]["approvers"][0]["entry"]}]
    assert by_run[case.unapproved]["unknown_keys"] == [case.mallory]
    assert sorted(r["signer"]["kind"] for r in out["reviews"]) == ["known", "unknown", "unknown"]
    assert json.loads(_certa(case, "verify", "--json").stdout)["policy"] is None


def test_show_says_approved_not_approved_or_not_checked(case: PolicyCase) -> None:
    shown = _certa(case, "show", case.approved, "--policy", str(case.policy))
    assert shown.exit_code == 0, shown.output
    assert "## Approval" in shown.stdout and "**APPROVED** by Alice Example &lt;alice@example.org> (model-risk)" in \
        shown.stdout
    assert f"signer: unknown key {case.mallory[:8]}…: looks good to me" in shown.stdout
    refused = _certa(case, "show", case.unapproved, "--policy", str(case.policy)).stdout
    assert "**NOT APPROVED** role model-risk needs 1 approval(s)" in refused and "alice@example.org'" not in refused
    unchecked = _certa(case, "show", case.unapproved).stdout
    assert "_approval not checked (no policy)_" in unchecked
    assert f"signed by key {case.mallory[:8]}…, claims to be 'alice@example.org' — not checked against a policy" in \
        unchecked


def test_a_review_recorded_after_the_key_expired_is_shown_as_such_never_as_an_approval(case: PolicyCase) -> None:
    expired = expired_policy(case)
    shown = _certa(case, "show", case.approved, "--policy", str(expired))
    assert shown.exit_code == 0, shown.output
    assert f"**NOT APPROVED** role model-risk needs 1 approval(s) by distinct people, has 0 (specs '*') (Alice Example " \
           f"&lt;alice@example.org>: key expired on {EXPIRED} (review entry" in shown.stdout
    assert f"signer: key expired on {EXPIRED} ({case.alice[:8]}…, listed for Alice Example &lt;alice@example.org>): " \
           "counts for no approval: matches the model card" in shown.stdout
    assert "**APPROVED**" not in shown.stdout
    verified = _certa(case, "verify", case.approved, "--policy", str(expired), "--json")
    assert verified.exit_code == 1
    assert sorted(r["signer"]["kind"] for r in json.loads(verified.stdout)["reviews"]) == ["expired", "unknown"]


@pytest.mark.slow  # renders two report pages with their plots (about 2 s)
def test_report_verdict_box_shows_the_policys_decision(case: PolicyCase, tmp_path: Path) -> None:
    pages = {}
    for name, extra in (("checked", ["--policy", str(case.policy)]), ("unchecked", [])):
        pages[name] = tmp_path / f"{name}.html"
        result = _certa(case, "report", case.unapproved, "-o", str(pages[name]), *extra)
        assert result.exit_code == 0, result.output
    checked, unchecked = pages["checked"].read_text(), pages["unchecked"].read_text()
    assert '<span class="badge badge-fail">NOT APPROVED</span>' in checked
    assert f'<td class="signer signer-unknown">unknown key {case.mallory[:8]}…</td>' in checked
    assert "alice@example.org" in checked and "claims to be" not in checked  # alice named only as what is missing
    assert '<span class="badge badge-neutral">approval not checked (no policy)</span>' in unchecked
    assert "approved by alice" not in unchecked.lower()


def test_a_broken_policy_is_exit_2_with_file_line_and_field(case: PolicyCase, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(case.policy.read_text().replace("roles: [model-risk]", "roles: model-risk"), encoding="utf-8")
    result = _certa(case, "verify", "--policy", str(broken))
    assert result.exit_code == 2
    assert f"error: {broken}:3:60: people[0].roles: expected array (got str 'model-risk')" in result.output
    assert "Traceback" not in result.output
    as_json = json.loads(_certa(case, "show", "latest", "--policy", str(broken), "--json").stdout)
    assert as_json["error"]["type"] == "SpecError" and as_json["error"]["exit_code"] == 2


@pytest.mark.slow  # builds a site three times (about 3 s)
def test_site_pages_follow_the_policy_they_were_built_with(case: PolicyCase, tmp_path: Path) -> None:
    site = tmp_path / "site"
    runs = [_certa(case, "site", "-o", str(site), "--jobs", "1", "--json", *extra)
            for extra in ([], ["--policy", str(case.policy)], ["--policy", str(case.policy)])]
    assert [r.exit_code for r in runs] == [0, 0, 0], runs[0].output
    plain, checked, again = (json.loads(r.stdout) for r in runs)
    assert checked["pages_written"] == 3  # both run pages and the index; chain, diff and stylesheet unchanged
    assert again["pages_written"] == 0 and again["pages_unchanged"] == plain["pages_written"]
    index = (site / "index.html").read_text()
    assert ">APPROVED</span>" in index and ">NOT APPROVED</span>" in index


def test_verify_bundle_decides_approval_from_the_reviews_the_bundle_proves(case: PolicyCase, tmp_path: Path) -> None:
    """Offline: the bundle of the run alice approved is APPROVED by her (from the policy), the other's is NOT
    APPROVED (exit 1) though mallory's signature verifies; the policy with a format-1 bundle is refused (exit 2)."""
    import shutil
    db = tmp_path / "ledger.db"
    shutil.copy(case.db, db)
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(tmp_path / "k")]).exit_code == 0
    signed = CliRunner().invoke(main, ["checkpoint", "--key", str(tmp_path / "k" / "certa.key"), "--out",
                                       str(tmp_path / "head.checkpoint"), "--ledger", str(db)])
    assert signed.exit_code == 0, signed.output
    outcomes = {}
    for run_id in (case.approved, case.unapproved):
        bundle = tmp_path / f"{run_id}.bundle.json"
        proved = CliRunner().invoke(main, ["prove", run_id, "--checkpoint", str(tmp_path / "head.checkpoint"),
                                           "-o", str(bundle), "--ledger", str(db)])
        assert proved.exit_code == 0, proved.output
        checked = CliRunner().invoke(main, ["verify-bundle", str(bundle), "--public-key",
                                            str(tmp_path / "k" / "certa.pub"), "--policy", str(case.policy), "--json"])
        outcomes[run_id] = (checked.exit_code, json.loads(checked.stdout))
    code, answer = outcomes[case.approved]
    assert code == 0 and answer["verified"] and answer["approval"]["approved"] is True
    assert "Alice Example" in json.dumps(answer["approval"]) and "mallory" not in json.dumps(answer["approval"])
    code, answer = outcomes[case.unapproved]
    assert code == 1 and answer["verified"] and answer["approval"]["approved"] is False
    text = CliRunner().invoke(main, ["verify-bundle", str(tmp_path / f"{case.unapproved}.bundle.json"),
                                     "--public-key", str(tmp_path / "k" / "certa.pub"), "--policy", str(case.policy)])
    assert "approval under the policy: NOT APPROVED" in text.stdout and f"unknown key {case.mallory[:8]}" in text.stdout
    old = Path(__file__).resolve().parents[1] / "data" / "bundle-format1"
    refused = CliRunner().invoke(main, ["verify-bundle", str(old / "format1.bundle.json"), "--public-key",
                                        str(old / "fixture.pub"), "--policy", str(case.policy)])
    assert refused.exit_code == 2 and "format 1" in refused.output


def test_verify_record_keeps_the_policy_in_the_ledger_once(case: PolicyCase, tmp_path: Path) -> None:
    """``verify --policy --record``: the policy's text and the key ids it resolved to become one ``policy`` entry
    (valid against the entries' schema); a second verification finds it; the chain still verifies."""
    import shutil

    from certa.ledger import Ledger
    from certa.ledger.run_record import payload_problems
    db = tmp_path / "ledger.db"
    shutil.copy(case.db, db)
    first = CliRunner().invoke(main, ["verify", "--policy", str(case.policy), "--record", "--ledger", str(db)])
    assert "; policy " in first.stdout and "recorded as entry" in first.stdout, first.output
    again = CliRunner().invoke(main, ["verify", "--policy", str(case.policy), "--record", "--ledger", str(db)])
    assert "already recorded in entry" in again.stdout, again.output
    digest = hashlib.sha256(case.policy.read_bytes()).hexdigest()
    with Ledger.open(str(db)) as ledger:
        (entry,) = ledger.policies(digest[:32])
        payload = entry.data()
    assert payload_problems("policy", payload) == []
    assert payload["sha256"] == digest and payload["text"] == case.policy.read_text()
    assert payload["keys"] == [{"key_id": case.alice, "person": "Alice Example <alice@example.org>",
                                "roles": ["model-risk"]}]
    assert CliRunner().invoke(main, ["verify", "--ledger", str(db)]).exit_code == 0
