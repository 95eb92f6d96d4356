"""The certa command: exit codes, --json output, help texts, and the audit commands end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main

COMMANDS = ["attest", "batch", "checkpoint", "cosign", "decisions", "diff", "export", "head", "keygen", "list", "migrate",
            "prove", "register", "replay", "report", "review", "run", "show", "site", "stages", "validate", "verify",
            "verify-attestation", "verify-bundle"]
NO_LEDGER = {"keygen", "stages", "validate", "verify-attestation", "verify-bundle"}


def invoke(*args: str, ledger: Path | None = None):
    extra = ["--ledger", str(ledger)] if ledger is not None else []
    return CliRunner().invoke(main, [*args, *extra], catch_exceptions=False)


def test_command_list_is_pinned() -> None:
    assert sorted(main.commands) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example_and_json(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output and "--json" in result.output
    assert ("--ledger" in result.output) == (command not in NO_LEDGER)


def test_validate_exit_codes(small_spec: Path) -> None:
    assert invoke("validate", str(small_spec)).exit_code == 0
    small_spec.write_text(small_spec.read_text().replace("replicates", "replicatez"))
    result = invoke("validate", str(small_spec), "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and "did you mean 'replicates'" in payload["error"]["message"]


def test_run_records_and_the_audit_commands_work(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    result = invoke("run", str(small_spec), "--json", ledger=db)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "PASS" and set(payload) >= {"run_id", "certificate_sha256", "knobs_hash"}
    run_id = payload["run_id"]

    listed = json.loads(invoke("list", "--json", ledger=db).stdout)
    assert [r["run_id"] for r in listed] == [run_id]
    shown = json.loads(invoke("show", run_id[:8], "--json", ledger=db).stdout)
    assert shown["content_sha256"] == payload["certificate_sha256"]
    report = invoke("show", run_id, ledger=db).output
    assert report.startswith("# small-paired: PASS") and payload["certificate_sha256"] in report
    assert "| ratio per token vs baseline | 95% CI |" in report and "## Gates" in report

    out = tmp_path / "cert.json"
    assert invoke("export", run_id, "-o", str(out), ledger=db).exit_code == 0
    assert json.loads(out.read_text())["content_sha256"] == payload["certificate_sha256"]

    replayed = invoke("replay", run_id, "--json", ledger=db)
    assert replayed.exit_code == 0 and json.loads(replayed.stdout)["outcome"] == "REPRODUCED"

    assert invoke("review", run_id, "--by", "auditor", "--decision", "approved", ledger=db).exit_code == 0
    head = invoke("head", ledger=db).output.strip()
    verified = invoke("verify", "--expect-head", head, "--json", ledger=db)
    assert verified.exit_code == 0 and json.loads(verified.stdout)["intact"] is True


def test_run_exit_code_1_on_fail_and_diff_shows_changed_fields(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    first = json.loads(invoke("run", str(small_spec), "--json", ledger=db).stdout)["run_id"]
    small_spec.write_text(small_spec.read_text().replace("max: 1.05", "max: 1.0"))
    result = invoke("run", str(small_spec), "--json", ledger=db)
    assert result.exit_code == 1 and json.loads(result.stdout)["verdict"] == "FAIL"
    second = json.loads(result.stdout)["run_id"]
    changes = json.loads(invoke("diff", first, second, "--json", ledger=db).stdout)["changes"]
    paths = {c["path"] for c in changes}
    assert "verdict" in paths and "knobs.gates[0].max" in paths and "gates[0].passed" in paths
    assert not any(p.startswith("stages.") for p in paths)  # same seed and data: same stage outputs


def test_invalid_spec_exits_2_and_writes_nothing(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    small_spec.write_text(small_spec.read_text().replace("seed: 7", "seed: -1"))
    result = invoke("run", str(small_spec), ledger=db)
    assert result.exit_code == 2 and "seed" in result.output
    assert not db.exists()


def test_profile_abort_exits_3_and_is_listed(example_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    example_spec.write_text(example_spec.read_text().replace("replicates: 3200", "replicates: 1000"))
    result = invoke("run", str(example_spec), "--json", ledger=db)
    assert result.exit_code == 3
    payload = json.loads(result.stdout)
    assert payload["error"]["type"] == "ProfileAbort" and payload["run_id"]
    assert json.loads(invoke("list", "--json", ledger=db).stdout)[0]["status"] == "aborted"
    assert "ABORTED" in invoke("show", payload["run_id"], ledger=db).output


def test_verify_exits_1_and_names_the_first_broken_entry(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), ledger=db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET payload = replace(payload, '\"outcome\":\"pass\"', '\"outcome\":\"warn\"') "
                     "WHERE seq = 5")
    result = invoke("verify", ledger=db)
    assert result.exit_code == 1 and "TAMPERED: first broken: entry 5" in result.output


def test_input_override_reads_an_absolute_path_outside_the_spec_folder(small_spec: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "subject.csv"
    (small_spec.parent / "data" / "subject.csv").rename(moved)
    result = invoke("run", str(small_spec), "--no-record", "--input", f"subject={moved}", "--json")
    assert result.exit_code == 0, result.output
    assert invoke("run", str(small_spec), "--no-record").exit_code == 2


def test_unknown_run_id_is_a_clear_error(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), ledger=db)
    result = invoke("show", "ffffffff", ledger=db)
    assert result.exit_code == 2 and "no run with id" in result.output
    assert "no ledger at" in invoke("list", ledger=tmp_path / "missing.db").output


def test_latest_names_the_newest_run(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), "--no-record", ledger=db)
    from certa.ledger import Ledger
    Ledger.open(db).close()
    assert "no runs recorded" in invoke("replay", "latest", ledger=db).output
    invoke("run", str(small_spec), ledger=db)
    newest = json.loads(invoke("run", str(small_spec), "--json", ledger=db).stdout)["run_id"]
    assert json.loads(invoke("show", "latest", "--json", ledger=db).stdout)["issued"]["run_id"] == newest


def _two_seeds(spec: Path, db: Path) -> tuple[str, str]:
    first = json.loads(invoke("run", str(spec), "--json", ledger=db).stdout)["run_id"]
    spec.write_text(spec.read_text().replace("seed: 7", "seed: 8"))
    return first, json.loads(invoke("run", str(spec), "--json", ledger=db).stdout)["run_id"]


def test_diff_puts_material_fields_first_and_folds_bootstrap_quantiles(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    first, second = _two_seeds(small_spec, db)
    lines = invoke("diff", first, second, "--only-changed", ledger=db).stdout.splitlines()[1:]
    paths = [line.split(":")[0].strip() for line in lines]
    assert paths[:2] == ["gates[0].reason", "gates[0].value"]
    assert paths.index("stages.ratio.token_perplexity.display_ci[1]") < paths.index("seed.root")
    quantiles = "stages.ratio.dataset.windows.stats.bootstrap.distribution.ratio_quantiles"
    folded = next(line for line in lines if line.strip().startswith(quantiles + ":"))
    assert "101 elements differ, the largest by " in folded and " at [" in folded
    assert not any(f"{quantiles}[" in line for line in lines)

    every = invoke("diff", first, second, "--only-changed", "--all", ledger=db).stdout
    assert every.index(f"{quantiles}[9]:") < every.index(f"{quantiles}[10]:") < every.index(f"{quantiles}[100]:")

    payload = json.loads(invoke("diff", first, second, "--json", ledger=db).stdout)
    assert len(payload["changes"]) == len(lines) - 1 + 101
    summary = {item["path"]: item for item in payload["summary"]}
    assert summary[quantiles]["changed"] == 101 and isinstance(summary[quantiles]["largest_at"], int)
    assert payload["summary"][0]["path"] == "gates[0].reason"


def test_site_diff_pages_use_the_same_order_and_folding(small_spec: Path, tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    db = tmp_path / "ledger.db"
    _two_seeds(small_spec, db)
    out = tmp_path / "site"
    assert invoke("site", "-o", str(out), "--jobs", "1", ledger=db).exit_code == 0
    page = next((out / "diffs").glob("*.html")).read_text()
    assert page.index("gates[0].value") < page.index("token_perplexity.display_ci[1]") < page.index("seed.root")
    assert "101 elements differ, the largest by" in page and "ratio_quantiles[10]" not in page


def test_replay_prints_diverged_fields_most_material_first_with_long_arrays_folded(
        small_spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import copy
    import dataclasses

    import certa.engine.core.interpreter
    from certa.engine.core.stages import REGISTRY, StageOutput, StageRegistry

    db = tmp_path / "ledger.db"
    run_id = json.loads(invoke("run", str(small_spec), "--json", ledger=db).stdout)["run_id"]
    original = REGISTRY["paired.ppl_ratio"]

    def moved(ctx):  # every bootstrap quantile and the headline ratio nudged
        out = original.run(ctx)
        outputs = copy.deepcopy(dict(out.outputs))
        distribution = outputs["dataset"]["windows"]["stats"]["bootstrap"]["distribution"]
        distribution["ratio_quantiles"] = [q + 1e-3 * (i == 42) + 1e-6 for i, q in
                                           enumerate(distribution["ratio_quantiles"])]
        outputs["token_perplexity"]["ratio_vs_baseline"] += 1e-6
        return StageOutput(outputs=outputs, decisions=out.decisions)

    monkeypatch.setattr(certa.engine.core.interpreter, "REGISTRY", StageRegistry(
        tuple(dataclasses.replace(s, run=moved) if s is original else s for s in REGISTRY.types)))
    result = invoke("replay", run_id, ledger=db)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"DIVERGED: run {run_id}: 102 result field(s) differ")
    assert lines[1].startswith("  stages.ratio.token_perplexity.ratio_vs_baseline: recorded ")
    assert lines[2] == ("  stages.ratio.dataset.windows.stats.bootstrap.distribution.ratio_quantiles: "
                        "101 elements differ, the largest by 0.001001 at [42]")
    assert len(lines) == 3
    table = invoke("replay", "--all", ledger=db).stdout.splitlines()
    assert table[1].endswith("DIVERGED      stages.ratio.token_perplexity.ratio_vs_baseline, "
                             "stages.ratio.dataset.windows.stats.bootstrap.distribution.ratio_quantiles")


def test_show_explain_prints_the_plain_language_paragraphs(small_spec: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    invoke("run", str(small_spec), ledger=db)
    plain, explained = invoke("show", "latest", ledger=db).stdout, invoke("show", "latest", "--explain", ledger=db).stdout
    assert "What was tested" in explained and "What was tested" not in plain
    assert explained.index("## Stage `ratio`") < explained.index("What was tested") < explained.index("## Gates")


def test_a_bug_is_one_line_and_exit_2_never_a_traceback_or_a_fail(tmp_path: Path, monkeypatch) -> None:
    import certa.engine.services.specs as specs

    def broken(path):
        raise TypeError("'<' not supported between instances of 'str' and 'bool'")

    monkeypatch.setattr(specs, "validate_spec", broken)
    spec = tmp_path / "spec.yaml"
    spec.write_text("certa: 1\n")
    result = invoke("validate", str(spec))
    assert result.exit_code == 2  # never 1, which means FAIL
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output + result.stderr
    assert result.stderr.startswith("error: internal error, a bug in certa (TypeError: '<' not supported")
    as_json = json.loads(invoke("validate", str(spec), "--json").stdout)
    assert as_json["error"]["type"] == "InternalError" and as_json["error"]["exit_code"] == 2
    monkeypatch.setenv("CERTA_TRACEBACK", "1")
    assert "Traceback" in invoke("validate", str(spec)).stderr


def test_a_yaml_key_read_as_a_boolean_is_a_spec_error(tmp_path: Path) -> None:
    workflow = tmp_path / "certa.yml"
    workflow.write_text("on: [push]\njobs: {certify: {runs-on: ubuntu-latest}}\n")
    result = invoke("validate", str(workflow))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "certa.yml:1:1: (top level): key True is not text: YAML reads it as a boolean" in result.stderr
