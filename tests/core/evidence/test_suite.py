"""``lm-eval-suite``: a folder of lm-evaluation-harness samples files as one input (docs/suites.md)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.core.evidence.inspect_log import read_inspect_eval
from certa.engine.core.evidence.lm_eval import samples_task_hash
from certa.engine.core.evidence.suite import bundle_files, folder_bundle
from certa.engine.core.input_formats import read_input
from certa.engine.core.input_limits import InputLimits
from certa.engine.core.inputs import load_tables
from certa.engine.core.spec import load_plan
from certa.engine.foundation.errors import InputError
from certa.engine.services.audit import replay
from certa.engine.services.run import run
from certa.ledger import Ledger

TIME = {"baseline": "2026-11-24T12-00-00.000001", "subject": "2026-11-24T13-00-00.000002"}
TASKS = {"tiny_alpha": 6, "tiny_beta": 4, "tiny_gamma": 5}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _acc(side: str, task: str, doc: int) -> float:
    """A deterministic 0/1 score: the subject misses every third document of tiny_beta only."""
    return 0.0 if side == "subject" and task == "tiny_beta" and doc % 3 == 0 else float(doc % 2 == 0 or task != "tiny_gamma")


def write_side(folder: Path, side: str, tasks: dict[str, int] = TASKS, *, results: bool = True) -> None:
    """One run of lm-eval 0.4 as it lays out its files: a samples file per task, one results file."""
    folder.mkdir(parents=True, exist_ok=True)
    hashes, means = {}, {}
    for task, n in tasks.items():
        lines = [json.dumps({"doc_id": doc, "filter": "none", "doc_hash": _digest(f"{task}-doc-{doc}"),
                             "prompt_hash": _digest(f"{task}-prompt-{doc}"), "target_hash": _digest(f"{task}-t-{doc}"),
                             "metrics": ["acc"], "acc": _acc(side, task, doc)}) for doc in range(n)]
        raw = ("\n".join(lines) + "\n").encode()
        (folder / f"samples_{task}_{TIME[side]}.jsonl").write_bytes(raw)
        hashes[task] = samples_task_hash(raw, task, InputLimits())
        means[task] = float(np.mean([_acc(side, task, doc) for doc in range(n)]))
    if results:
        document = {"results": {t: {"alias": t, "acc,none": means[t], "sample_len": n} for t, n in tasks.items()},
                    "group_subtasks": {"tiny": sorted(tasks), "all_tiny": ["tiny"]},
                    "configs": {t: {"task": t, "metric_list": [{"metric": "acc", "aggregation": "mean"}]}
                                for t in tasks},
                    "versions": {t: 1.0 for t in tasks}, "n-samples": {t: {"original": n, "effective": n}
                                                                      for t, n in tasks.items()},
                    "task_hashes": hashes, "lm_eval_version": "0.4.9", "config": {"model": "hf"}}
        (folder / f"results_{TIME[side]}.json").write_text(json.dumps(document), encoding="utf-8")


def write_spec(root: Path, *, pin: str | None = None) -> Path:
    inputs = {side: {"path": f"runs/{side}", "format": "lm-eval-suite", **({"sha256": pin} if pin else {})}
              for side in ("baseline", "subject")}
    spec = {"certa": 1, "name": "suite", "seed": 3, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "acc", "use": "paired.metric_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "acc", "margin": 0.2}}]}
    path = root / "spec.yaml"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    for side in ("baseline", "subject"):
        write_side(tmp_path / "runs" / side, side)
    return write_spec(tmp_path)


def test_a_folder_is_one_table_keyed_by_task_and_doc_id(suite: Path) -> None:
    table = load_tables(load_plan(suite))["baseline"]
    records = table.evidence
    assert records is not None and records.key_fields == ("task", "doc_id")
    assert records.keys["task"].tolist() == [task for task, n in TASKS.items() for _ in range(n)]
    assert records.keys["doc_id"].tolist() == [doc for n in TASKS.values() for doc in range(n)]
    assert records.slices.tolist() == records.keys["task"].tolist()  # type: ignore[union-attr]
    details = dict(records.provenance.details)
    assert details["tasks"] == "3" and details["tiny_beta.group"] == "tiny" and details["tiny_beta.task_version"] == "1.0"
    assert details["tiny.group"] == "all_tiny"  # a group's own group, as group_subtasks states it
    assert records.provenance.tool_version == "0.4.9"
    assert len(records.provenance.sources) == len(TASKS) + 1  # every samples file and the results file
    assert list(table.columns)[:2] == ["task", "doc_id"]


def _pairing(spec: Path) -> dict:
    return run(spec).certificate["content"]["stages"]["acc"]


def test_pairing_is_per_task_and_item(suite: Path) -> None:
    """By doc_id alone tiny_alpha's documents would pair with tiny_beta's and tiny_gamma's (a doc_id twice); by
    (task, doc_id) all 15 pair, and the difference is the subject's misses on tiny_beta's documents 0 and 3."""
    stage = _pairing(suite)
    assert stage["pairing"]["key_fields"] == ["task", "doc_id"] and stage["pairing"]["paired"] == 15
    assert stage["difference"]["estimate"] == pytest.approx(-2 / 15)
    assert {row["slice"]: row["items"] for row in stage["slices"]["rows"]} == TASKS


def test_a_task_on_one_side_only_is_unmatched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its items are unpaired: recorded in dev, refused in ci by the pairing rule (``samples_paired`` for
    paired.metric_delta 1.2.0, ``items_paired`` before)."""
    monkeypatch.chdir(tmp_path)
    write_side(tmp_path / "runs" / "baseline", "baseline")
    write_side(tmp_path / "runs" / "subject", "subject", {k: v for k, v in TASKS.items() if k != "tiny_gamma"})
    pairing = _pairing(write_spec(tmp_path))["pairing"]
    assert (pairing["paired"], pairing["unmatched_baseline"], pairing["unmatched_subject"]) == (10, 5, 0)
    assert {key[0] for key in pairing["examples"]["unmatched_baseline"]} == {"tiny_gamma"}
    plan = json.loads((tmp_path / "spec.yaml").read_text())
    plan["profile"] = "ci"
    (tmp_path / "spec.yaml").write_text(json.dumps(plan))
    outcome = CliRunner().invoke(main, ["run", str(tmp_path / "spec.yaml")])
    assert outcome.exit_code == 3 and "samples_paired" in outcome.output, outcome.output


def test_identity_is_the_bundle_and_every_file_is_in_it(suite: Path) -> None:
    folder = suite.parent / "runs" / "baseline"
    raw = folder_bundle("b", folder, "samples_*.jsonl", InputLimits())
    files = bundle_files("b", raw)
    assert [f.path for f in files] == sorted(p.name for p in folder.iterdir())  # the results file came along
    assert all(f.raw == (folder / f.path).read_bytes() for f in files)
    sample = next(folder.glob("samples_tiny_beta_*"))
    sample.write_bytes(sample.read_bytes().replace(b'"acc": 1.0', b'"acc": 0.0', 1))
    assert hashlib.sha256(folder_bundle("b", folder, "samples_*.jsonl", InputLimits())).digest() != \
        hashlib.sha256(raw).digest()
    with pytest.raises(InputError, match="does not match its manifest entry"):
        bundle_files("b", raw[:-1] + b"x")


def test_a_pin_other_than_the_bundle_digest_is_refused(tmp_path: Path) -> None:
    for side in ("baseline", "subject"):
        write_side(tmp_path / "runs" / side, side)
    with pytest.raises(InputError, match="the spec pins"):
        load_tables(load_plan(write_spec(tmp_path, pin="0" * 64)))


def test_input_override_takes_a_folder(suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "elsewhere"
    write_side(other, "subject", {"tiny_alpha": 6})
    tables = load_tables(load_plan(suite), input_paths={"subject": other})
    assert tables["subject"].evidence.n_items == 6 and tables["subject"].overridden  # type: ignore[union-attr]
    outcome = CliRunner().invoke(main, ["run", str(suite), "--input", f"subject={other}", "--json"])
    assert "the estimate covers the 6 item(s) paired" in outcome.output, outcome.output


def test_a_replay_reads_the_ledger_not_the_folder(suite: Path, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        run_id = run(suite, ledger=ledger).run_id
        for side in ("baseline", "subject"):
            for file in (suite.parent / "runs" / side).iterdir():
                file.unlink()
        result = replay(ledger, run_id)
        assert result.outcome == "REPRODUCED", result.note


@pytest.mark.parametrize("pattern", ["../subject/*.jsonl", "/etc/*", "a\\b"])
def test_a_glob_leaving_the_folder_is_refused(suite: Path, pattern: str) -> None:
    with pytest.raises(InputError, match="relative pattern inside the folder"):
        folder_bundle("b", suite.parent / "runs" / "baseline", pattern, InputLimits())


def test_a_symlink_leaving_the_folder_is_refused(suite: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes((suite.parent / "runs" / "subject").glob("samples_tiny_alpha_*").__next__().read_bytes())
    folder = suite.parent / "runs" / "baseline"
    os.symlink(outside, folder / f"samples_tiny_delta_{TIME['baseline']}.jsonl")
    with pytest.raises(InputError, match="resolves outside the folder"):
        load_tables(load_plan(suite))


def test_the_same_task_from_two_runs_is_refused(suite: Path) -> None:
    folder = suite.parent / "runs" / "baseline"
    write_side(folder / "again", "baseline", {"tiny_alpha": 6}, results=False)
    raw = folder_bundle("b", folder, "**/samples_*.jsonl", InputLimits())
    with pytest.raises(InputError, match="tiny_alpha read from several files"):
        read_input("b", raw, "lm-eval-suite", options={"glob": "**/samples_*.jsonl"}, limits=InputLimits())


def test_a_file_not_named_as_samples_is_refused(suite: Path) -> None:
    raw = folder_bundle("b", suite.parent / "runs" / "baseline", "*.json*", InputLimits())
    read_input("b", raw, "lm-eval-suite", options={}, limits=InputLimits())  # the results file is a sibling
    (suite.parent / "runs" / "baseline" / "notes.jsonl").write_text("{}\n")
    raw = folder_bundle("b", suite.parent / "runs" / "baseline", "*.json*", InputLimits())
    with pytest.raises(InputError, match="notes.jsonl not named samples_<task>_<time>.jsonl"):
        read_input("b", raw, "lm-eval-suite", options={}, limits=InputLimits())


def test_a_linked_folder_leaving_the_folder_is_refused(suite: Path, tmp_path: Path) -> None:
    write_side(tmp_path / "outside", "baseline", {"tiny_delta": 2})
    folder = suite.parent / "runs" / "baseline"
    os.symlink(tmp_path / "outside", folder / "linked")
    with pytest.raises(InputError, match="resolves outside the folder"):
        folder_bundle("b", folder, "linked/samples_*.jsonl", InputLimits())
    paths = [file.path for file in bundle_files("b", folder_bundle("b", folder, "**/samples_*.jsonl", InputLimits()))]
    assert not any(path.startswith("linked/") for path in paths)  # ** descends into no linked folder


def test_a_bundle_naming_a_path_outside_is_refused() -> None:
    manifest = {"files": [{"path": "../x", "sha256": hashlib.sha256(b"a").hexdigest(), "size": 1}],
                "format": "certa-suite/1", "glob": "*"}
    with pytest.raises(InputError, match="outside its folder"):
        bundle_files("b", json.dumps(manifest).encode() + b"\na")


INSPECT = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "inspect"


def write_inspect_side(folder: Path, side: str) -> None:
    """One side's Inspect logs: the fixture's ``.eval`` (task certa_arith) and its JSON form as a second task."""
    folder.mkdir(parents=True)
    shutil.copy(INSPECT / f"{side}.eval", folder / f"{side}.eval")
    log = json.loads(gzip.decompress((INSPECT / f"{side}.json.gz").read_bytes()))
    log["eval"]["task"] = "certa_arith_again"
    (folder / "again.json").write_text(json.dumps(log), encoding="utf-8")


def test_a_folder_of_inspect_logs_pairs_per_task_and_sample(tmp_path: Path) -> None:
    for side in ("baseline", "subject"):
        write_inspect_side(tmp_path / "runs" / side, side)
    inputs = {side: {"path": f"runs/{side}", "format": "inspect-suite", "read": {"glob": "*.*"}}
              for side in ("baseline", "subject")}
    spec = {"certa": 1, "name": "inspect-suite", "seed": 3, "profile": "dev", "inputs": inputs,
            "stages": [{"id": "acc", "use": "paired.metric_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "match", "margin": 0.2}}]}
    (tmp_path / "spec.yaml").write_text(json.dumps(spec), encoding="utf-8")
    records = load_tables(load_plan(tmp_path / "spec.yaml"))["baseline"].evidence
    assert records is not None and records.key_fields == ("task", "id", "epoch") and records.repeat_field == "epoch"
    assert sorted(set(records.keys["task"].tolist())) == ["certa_arith", "certa_arith_again"]
    assert records.n_items == 2 * read_inspect_eval(INSPECT / "baseline.eval").n_items
    stage = _pairing(tmp_path / "spec.yaml")
    assert stage["pairing"]["key_fields"] == ["task", "id", "epoch"] and stage["pairing"]["unmatched_baseline"] == 0
    assert stage["pairing"]["paired"] == records.n_items


REAL_SUITE = Path(__file__).resolve().parents[2] / "data" / "evaluators" / "lm_eval_suite"


def test_a_real_lm_eval_suite_pairs_every_task_and_records_its_group_tree(tmp_path: Path) -> None:
    """The real exports of lm-eval 0.4.13 on the group ``certa_suite`` (make_fixtures.py --only lm_eval_suite):
    every line of every samples file is a row, each task's difference is the one the raw lines give, and the
    two-level group tree is recorded as ``group_subtasks`` states it."""
    raw: dict[str, dict[str, list[float]]] = {}
    for side in ("baseline", "subject"):
        shutil.copytree(REAL_SUITE / side, tmp_path / "runs" / side)
        for path in sorted((REAL_SUITE / side).glob("samples_*.jsonl")):
            task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
            lines = path.read_text(encoding="utf-8").splitlines()
            raw.setdefault(task, {})[side] = [json.loads(line)["acc"] for line in lines]
    spec = write_spec(tmp_path)
    records = load_tables(load_plan(spec))["baseline"].evidence
    assert records is not None and records.n_items == sum(len(sides["baseline"]) for sides in raw.values())
    details = dict(records.provenance.details)
    results = json.loads(next((REAL_SUITE / "baseline").glob("results_*.json")).read_text(encoding="utf-8"))
    stated = {child: group for group, children in results["group_subtasks"].items() for child in children}
    assert len(set(stated.values())) == 2  # a tree of two levels, not a flat list
    assert {name: details[f"{name}.group"] for name in stated} == stated
    stage = _pairing(spec)
    assert stage["pairing"]["paired"] == records.n_items
    assert stage["pairing"]["unmatched_baseline"] == stage["pairing"]["unmatched_subject"] == 0
    assert stage["pairing"]["identity_mismatched"] == 0
    by_task = {row["slice"]: row for row in stage["slices"]["rows"]}
    assert sorted(by_task) == sorted(raw) and len(raw) == 4
    for task, sides in raw.items():
        assert by_task[task]["items"] == len(sides["subject"])
        assert by_task[task]["estimate"] == pytest.approx(np.mean(sides["subject"]) - np.mean(sides["baseline"]))
