"""Registrations (certa.engine.services.registrations, ``certa register``, ``certa run --registration``): a spec is
registered without its inputs; a run of it later names the registration in its certificate, show and report; a
run whose knobs or gates differ is refused in ci and release (recorded, exit 3) and marked in dev, each difference
named; a run of an unregistered spec says so; verify and replay hold with registrations in the ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import run
from certa.engine.core.certificate import certificate_problems
from certa.engine.core.spec import load_plan
from certa.engine.foundation.errors import LedgerError, ProfileAbort
from certa.engine.services.audit import replay, verify
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.engine.services.registrations import find_registration, planned_sizes, register, registration_payload
from certa.ledger import Ledger
from certa.ledger.run_record import payload_problems

REPLICATES = "replicates: 500"


def _edit(spec: Path, old: str, new: str) -> Path:
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))
    return spec


def _certa(*args: str, ledger: Path) -> Any:
    return CliRunner().invoke(main, [*args, "--ledger", str(ledger)])


def test_a_spec_is_registered_without_its_inputs(small_spec: Path, ledger: Ledger) -> None:
    """The data folder is gone: the spec still registers, as one registration entry (valid against the entries'
    schema) with its knobs hash and planned sizes, and no run (no runs row)."""
    shutil.rmtree(small_spec.parent / "data")
    plan = load_plan(small_spec)
    registered = register(ledger, plan)
    entries = ledger.registrations()
    assert [(e.seq, e.run_id, e.kind) for e in entries] == [(1, registered.registration_id, "registration")]
    payload = entries[0].data()
    assert payload == registration_payload(plan) and payload_problems("registration", payload) == []
    assert payload["knobs_hash"] == plan.knobs_hash and payload["knobs"]["gates"][0]["max"] == 1.05
    assert payload["planned_sizes"] == [{"stage": "ratio", "knob": "replicates", "value": 500}]
    assert ledger.runs() == [] and verify(ledger).intact


def test_planned_sizes_are_the_size_knobs_wherever_they_sit() -> None:
    plan: Any = SimpleNamespace(stages=[
        SimpleNamespace(id="seq", knobs={"n_min": 20, "n_max": 400, "alpha": 0.05, "batch_size": 4,
                                         "asymptotic": {"n_max": 9}}),
        SimpleNamespace(id="boot", knobs={"bootstrap": {"replicates": 2000}, "level": 0.95}),
        SimpleNamespace(id="pac", knobs={"test_size": None})])
    assert planned_sizes(plan) == [{"stage": "seq", "knob": "n_min", "value": 20},
                                   {"stage": "seq", "knob": "n_max", "value": 400},
                                   {"stage": "seq", "knob": "asymptotic.n_max", "value": 9},
                                   {"stage": "boot", "knob": "bootstrap.replicates", "value": 2000},
                                   {"stage": "pac", "knob": "test_size", "value": None}]


def test_a_run_of_the_registered_spec_names_its_registration(small_spec: Path, ledger: Ledger) -> None:
    """Registration entry before the run's entries; the certificate (valid) records its id, seq, time and no
    difference; show says "registered on DATE ..., before the evidence"; verify and replay hold."""
    registered = register(ledger, load_plan(small_spec))
    result = run(small_spec, ledger=ledger)
    record = result.certificate["content"]["registration"]
    assert record == {"id": registered.registration_id, "seq": registered.seq,
                      "registered_at": registered.recorded_at, "knobs_hash": result.knobs_hash, "differences": []}
    assert registered.seq < ledger.run(result.run_id).first_seq
    assert certificate_problems(result.certificate) == []
    shown = certificate_markdown(result.certificate)
    assert (f"registered on {registered.recorded_at[:10]} (registration {registered.registration_id}, entry 1), "
            "before the evidence") in shown and "the run's knobs and gates are the registered ones" in shown
    assert verify(ledger).intact
    assert replay(ledger, result.run_id).outcome == "REPRODUCED"
    # the report says it where a reviewer looks first: in the verdict box
    from certa.engine.services.presentation.html import render_report
    from certa.engine.services.report_data import gather_report

    page = render_report(gather_report(ledger, result.run_id))
    box = page[page.index('<section id="verdict"'):page.index("</section>", page.index('<section id="verdict"'))]
    assert f"Decision rule: registered on {registered.recorded_at[:10]}" in box


def test_a_run_of_an_unregistered_spec_says_not_registered(small_spec: Path, ledger: Ledger) -> None:
    register(ledger, load_plan(_edit(small_spec, "name: small-paired", "name: another")))
    _edit(small_spec, "name: another", "name: small-paired")
    result = run(small_spec, ledger=ledger)
    assert result.certificate["content"]["registration"] is None
    assert "| registration | not registered" in certificate_markdown(result.certificate)


def test_dev_records_a_run_that_differs_with_a_warning_naming_each_difference(small_spec: Path,
                                                                             ledger: Ledger) -> None:
    register(ledger, load_plan(small_spec))
    _edit(_edit(small_spec, REPLICATES, "replicates: 600"), "max: 1.05", "max: 1.1")
    result = run(small_spec, ledger=ledger)
    differences = result.certificate["content"]["registration"]["differences"]
    assert differences == [{"path": "gates[0].max", "registered": 1.05, "run": 1.1},
                           {"path": "stages[0].with.replicates", "registered": 500, "run": 600}]
    assert len(result.warnings) == 1 and result.warnings[0].startswith("registration: the spec differs")
    assert "stages[0].with.replicates: registered 500, run 600" in result.warnings[0]
    kinds = [e.data()["kind"] for e in ledger.entries(run_id=result.run_id, kinds=["decision"])]
    assert kinds[-1] == "registration"
    assert "the run DIFFERS from it: gates[0].max: registered 1.05, run 1.1" in certificate_markdown(result.certificate)
    assert replay(ledger, result.run_id).outcome == "REPRODUCED"


@pytest.mark.parametrize("profile", ["ci", "release"])
def test_ci_and_release_refuse_a_run_that_differs_and_record_it(small_spec: Path, ledger: Ledger,
                                                                profile: str) -> None:
    _edit(small_spec, "profile: dev", f"profile: {profile}")
    register(ledger, load_plan(small_spec))
    _edit(small_spec, REPLICATES, "replicates: 600")
    with pytest.raises(ProfileAbort) as refused:
        run(small_spec, ledger=ledger)
    abort = refused.value
    assert abort.exit_code == 3 and abort.rule == "registration" and abort.decisions == ()
    assert "stages[0].with.replicates: registered 500, run 600" in str(abort)
    row = ledger.run(abort.run_id or "")
    assert (row.status, row.verdict) == ("aborted", None)
    stored = [e.data() for e in ledger.entries(run_id=row.run_id, kinds=["abort"])]
    assert stored == [{"reason": str(abort), "rule": "registration", "stage": None}]
    _edit(small_spec, "replicates: 600", REPLICATES)  # the registered spec again: past the registration, to the
    with pytest.raises(ProfileAbort) as stopped:   # stage's own rules of the profile (60 windows are too few)
        run(small_spec, ledger=ledger)
    assert stopped.value.rule == "min_paired_windows"
    assert verify(ledger).intact


def test_a_run_matches_the_newest_registration_of_its_name_or_the_one_named(small_spec: Path,
                                                                             ledger: Ledger) -> None:
    first = register(ledger, load_plan(small_spec))
    newest = register(ledger, load_plan(_edit(small_spec, REPLICATES, "replicates: 600")))
    assert find_registration(ledger, "small-paired") == newest
    assert run(small_spec, ledger=ledger).certificate["content"]["registration"]["id"] == newest.registration_id
    named = run(small_spec, ledger=ledger, registration_id=first.registration_id[:8]).certificate["content"]
    assert named["registration"]["id"] == first.registration_id and named["registration"]["differences"]
    with pytest.raises(LedgerError, match="no registration with id 'ffffffff'"):
        find_registration(ledger, "small-paired", "ffffffff")


def test_certa_register_and_run_on_the_command_line(small_spec: Path, tmp_path: Path) -> None:
    """``certa register --json`` (with a signed checkpoint over it, which verifies), then ``certa run`` in ci: the
    same spec is matched and stopped by the stage's own ci rules only, a changed gate exits 3 naming the
    difference."""
    db = tmp_path / "cli.db"
    keys = tmp_path / "keys"
    assert CliRunner().invoke(main, ["keygen", "--out-dir", str(keys)]).exit_code == 0
    _edit(small_spec, "profile: dev", "profile: ci")
    checkpoint = tmp_path / "registered.checkpoint"
    made = _certa("register", str(small_spec), "--key", str(keys / "certa.key"), "--out", str(checkpoint), "--json",
                  ledger=db)
    assert made.exit_code == 0, made.output
    registered = json.loads(made.stdout)
    assert registered["seq"] == 1 and registered["checkpoint"]["seq"] == 1
    assert registered["planned_sizes"] == [{"stage": "ratio", "knob": "replicates", "value": 500}]
    same = _certa("run", str(small_spec), "--json", ledger=db)
    assert same.exit_code == 3 and json.loads(same.stdout)["rule"] == "min_paired_windows"
    changed = _edit(small_spec, "max: 1.05", "max: 1.2")
    said = _certa("run", str(changed), ledger=db)
    assert said.exit_code == 3 and "(its spec differs from its registration)" in said.stdout
    assert "gates[0].max: registered 1.05, run 1.2" in said.stderr
    refused = _certa("run", str(changed), "--json", ledger=db)
    assert refused.exit_code == 3
    answer = json.loads(refused.stdout)
    assert answer["rule"] == "registration" and "gates[0].max: registered 1.05, run 1.2" in answer["error"]["message"]
    assert _certa("verify", "--checkpoint", str(checkpoint), "--public-key", str(keys / "certa.pub"),
                  ledger=db).exit_code == 0


def test_a_checkpoint_signed_over_the_registration_is_proven_and_named(small_spec: Path, tmp_path: Path) -> None:
    """``certa run --registration-checkpoint FILE --public-key PUB``: the checkpoint's signature and the
    registration's inclusion in its root are checked, and the certificate and show name it; another key's
    signature, or a checkpoint signed before the registration, is refused and nothing is recorded."""
    db = tmp_path / "proof.db"
    keys, other = tmp_path / "keys", tmp_path / "other"
    for folder in (keys, other):
        assert CliRunner().invoke(main, ["keygen", "--out-dir", str(folder)]).exit_code == 0
    assert _certa("run", str(small_spec), ledger=db).exit_code == 0  # a run before: entries 1..n
    early = tmp_path / "early.checkpoint"
    assert _certa("checkpoint", "--key", str(keys / "certa.key"), "--out", str(early), ledger=db).exit_code == 0
    checkpoint = tmp_path / "registered.checkpoint"
    made = _certa("register", str(small_spec), "--key", str(keys / "certa.key"), "--out", str(checkpoint), "--json",
                  ledger=db)
    registered = json.loads(made.stdout)
    pub = str(keys / "certa.pub")
    proven = _certa("run", str(small_spec), "--registration-checkpoint", str(checkpoint), "--public-key", pub,
                    "-o", str(tmp_path / "cert.json"), ledger=db)
    assert proven.exit_code == 0, proven.output
    record = json.loads((tmp_path / "cert.json").read_text())["content"]["registration"]
    assert record["id"] == registered["registration_id"] and record["differences"] == []
    assert record["checkpoint"]["seq"] == registered["checkpoint"]["seq"] == registered["seq"]
    assert record["checkpoint"]["root_hash"] == registered["checkpoint"]["root_hash"]
    assert f"checkpoint {registered['seq']}, signed by key(s)" in _certa("show", "latest", ledger=db).stdout
    with Ledger.open(db) as ledger:
        before = len(ledger.runs())
    wrong_key = _certa("run", str(small_spec), "--registration-checkpoint", str(checkpoint), "--public-key",
                       str(other / "certa.pub"), ledger=db)
    too_early = _certa("run", str(small_spec), "--registration-checkpoint", str(early), "--public-key", pub,
                       ledger=db)
    assert wrong_key.exit_code != 0 and too_early.exit_code == 2
    assert f"does not prove registration {registered['registration_id']}" in too_early.output
    with Ledger.open(db) as ledger:
        assert len(ledger.runs()) == before
    assert _certa("register", str(small_spec), "--out", str(tmp_path / "x"), ledger=db).exit_code == 2
    again = _certa("register", str(small_spec), "--key", str(keys / "certa.key"), "--out", str(checkpoint), ledger=db)
    assert again.exit_code != 0 and "checkpoint" in again.output  # an existing file: nothing recorded
    with Ledger.open(db) as ledger:
        assert len(ledger.registrations()) == 1


def test_verify_recomputes_what_a_registration_states(small_spec: Path, ledger: Ledger) -> None:
    """A registration written with a knobs hash or spec digest that is not its own knobs' or text's (chained
    correctly, so the hash chain alone cannot tell) is a verify problem at its entry; an honest one is not."""
    plan = load_plan(small_spec)
    register(ledger, plan)
    assert verify(ledger).intact
    payload = registration_payload(plan)
    forged = {**payload, "knobs": {**payload["knobs"], "gates": []}}  # the gates dropped, the hash kept
    seq = ledger.record_registration("f" * 32, forged)
    wrong_text = {**payload, "spec_text": payload["spec_text"] + "\n# edited"}
    seq2 = ledger.record_registration("e" * 32, wrong_text)
    report = verify(ledger)
    assert not report.intact
    assert [(p.seq, p.message) for p in report.problems] == [
        (seq, f"registration: knobs_hash {payload['knobs_hash']!r} is not the SHA-256 of the recorded knobs"),
        (seq2, f"registration: spec_sha256 {payload['spec_sha256']!r} is not the SHA-256 of the recorded spec text")]
    assert verify(ledger, since=None).problems[0].where == f"entry {seq} (registration {'f' * 32})"


def test_the_suite_example_registered_then_run(tmp_path: Path) -> None:
    """specs/lm-eval-suite/ as its README says: ``certa register``, then ``certa run`` PASSes (ci) and names the
    registration; the same spec with another margin is refused in ci, naming the margin."""
    example = tmp_path / "lm-eval-suite"
    shutil.copytree(Path(__file__).resolve().parents[2] / "specs" / "lm-eval-suite", example)
    spec, db = example / "spec.yaml", tmp_path / "suite.db"
    registered = json.loads(_certa("register", str(spec), "--json", ledger=db).stdout)
    ran = _certa("run", str(spec), "--json", ledger=db)
    assert ran.exit_code == 0, ran.output
    answer = json.loads(ran.stdout)
    with Ledger.open(str(db)) as opened:
        content = opened.certificate(answer["run_id"])["content"]
    assert content["verdict"] == "PASS" and content["registration"]["id"] == registered["registration_id"]
    assert content["registration"]["differences"] == []
    assert content["stages"]["suite"]["every_task"]["decision"] == "NONINFERIOR"
    refused = _certa("run", str(_edit(spec, "margin: 0.10", "margin: 0.05")), "--json", ledger=db)
    assert refused.exit_code == 3 and "margin: registered 0.1, run 0.05" in json.loads(refused.stdout)["error"]["message"]
