"""Every example spec through every command that runs or re-runs it: ``certa run``, ``certa batch`` on a Dask
LocalCluster, ``certa replay`` and, for the examples with model inputs, ``certa replay --recompute-evidence``.

An input kind one command reads, every command reads (``certa.engine.core.input_formats``): the examples cover
CSV and JSON Lines tables, lm-eval samples with their results file, a folder of lm-eval exports (a suite), an
Inspect AI log and model folders. The
batch is given the examples' folder, which also holds YAML files that are not run specs (an lm-eval task
file, a CI workflow): they are skipped, each with its reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.ledger import Ledger
from tests.conftest import OFFLINE_EXAMPLES, SERVED_EXAMPLES

pytest.importorskip("distributed")
pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = list(OFFLINE_EXAMPLES)  # a served example needs its server: tests/served/test_served_examples.py
MODEL_EXAMPLES = ("model-perplexity", "model-sequential")
NOT_SPECS = {
    "lm-eval-accuracy/data/arc_easy_subset.yaml": "task: arc_easy_subset\ndataset_path: allenai/ai2_arc\n",
    ".github/workflows/certa.yml": "on: [push]\njobs: {certify: {runs-on: ubuntu-latest}}\n",
}


def certa(*args: str) -> dict:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.stdout, (args, result.exit_code, result.stderr)
    return {"exit_code": result.exit_code, **json.loads(result.stdout)}


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``specs/`` (nothing is written into the checkout) with YAML files that are not specs."""
    if any(name in EXAMPLES for name in MODEL_EXAMPLES):
        pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("examples") / "specs"
    shutil.copytree(ROOT / "specs", folder, ignore=shutil.ignore_patterns("__pycache__", *SERVED_EXAMPLES))
    for relative, text in NOT_SPECS.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def ran(examples: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict]]:
    """Each example run by ``certa run`` into one ledger: (ledger, name -> the command's JSON)."""
    ledger = str(tmp_path_factory.mktemp("run") / "ledger.db")
    return ledger, {name: certa("run", str(examples / name / "spec.yaml"), "--ledger", ledger) for name in EXAMPLES}


@pytest.fixture(scope="module")
def batched(examples: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    """All the examples run by one ``certa batch`` of their folder on a LocalCluster of 2 worker processes."""
    ledger = str(tmp_path_factory.mktemp("batch") / "ledger.db")
    return ledger, certa("batch", str(examples), "--workers", "2", "--ledger", ledger)


def test_the_examples_cover_every_input_kind(examples: Path) -> None:
    kinds = set()
    for name in EXAMPLES:
        text = (examples / name / "spec.yaml").read_text(encoding="utf-8")
        kinds |= {kind for kind in ("model:", "lm-eval-samples", "lm-eval-results", "lm-eval-suite", "inspect-eval",
                                    ".csv", ".jsonl") if kind in text}
    assert kinds == {"model:", "lm-eval-samples", "lm-eval-results", "lm-eval-suite", "inspect-eval", ".csv", ".jsonl"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_certa_run_certifies_each_example(ran: tuple[str, dict[str, dict]], name: str) -> None:
    result = ran[1][name]
    assert result["exit_code"] == 0 and result["verdict"] == "PASS", result


def test_certa_batch_runs_every_example_and_skips_what_is_not_a_spec(examples: Path, ran, batched) -> None:
    ledger, report = batched
    assert report["exit_code"] == 0, report
    by_spec = {Path(row["spec"]).parent.name: row for row in report["runs"]}
    assert sorted(by_spec) == EXAMPLES
    assert {row["status"] for row in report["runs"]} == {"recorded"}
    assert {row["verdict"] for row in report["runs"]} == {"PASS"}
    skipped = {str(Path(s["path"]).relative_to(examples)): s["reason"] for s in report["skipped"]}
    assert skipped == {relative: "no top-level certa: key (a run spec starts with 'certa: 1')"
                       for relative in NOT_SPECS}
    run_ledger, runs = ran
    with Ledger.open(run_ledger) as alone, Ledger.open(ledger) as batch:
        for name, row in by_spec.items():  # the same certificate as certa run's, input digests included
            assert batch.certificate(row["run_id"])["content"] == alone.certificate(runs[name]["run_id"])["content"]


def test_certa_batch_text_lists_each_skipped_file_on_one_line(examples: Path, batched) -> None:
    ledger, _ = batched  # a second batch of the same folder: every run already recorded
    result = CliRunner().invoke(main, ["batch", str(examples), "--ledger", ledger], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("skipped ")]
    assert lines == [f"skipped {examples / relative}: no top-level certa: key (a run spec starts with 'certa: 1')"
                     for relative in sorted(NOT_SPECS)]


@pytest.mark.parametrize("source", ["run", "batch"])
def test_certa_replay_reproduces_every_example(ran, batched, source: str) -> None:
    ledger = ran[0] if source == "run" else batched[0]
    result = certa("replay", "--all", "--ledger", ledger)
    assert result["exit_code"] == 0 and result["ok"], result
    assert result["counts"] == {"REPRODUCED": len(EXAMPLES), "DIVERGED": 0, "CANNOT REPLAY": 0}


@pytest.mark.parametrize("name", MODEL_EXAMPLES)
def test_recompute_evidence_reproduces_the_model_examples(examples: Path, ran, batched, name: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(examples / name)  # the spec's model: paths, relative to where the command runs
    batch_run = next(r["run_id"] for r in batched[1]["runs"] if Path(r["spec"]).parent.name == name)
    for ledger, run_id in ((ran[0], ran[1][name]["run_id"]), (batched[0], batch_run)):
        result = certa("replay", run_id, "--recompute-evidence", "--ledger", ledger)
        assert result["exit_code"] == 0, result
        assert result["ok"] and result["tables"] and all(t["reproduced"] for t in result["tables"]), result
