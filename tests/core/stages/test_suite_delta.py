"""``paired.suite_delta``: each task's numbers are ``paired.metric_delta``'s on that task alone, the micro pooled
difference is its numbers on the whole suite, the macro one the MOVER of the tasks' intervals by hand; the claim
across tasks, which tasks differ, per-task margins, the profile rules (a task on one side only, the per-task
floor), repeated trials as clusters within a task, lm-eval suites through the command line with a three-valued
gate, and a replay reproducing the certificate."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine import ProfileAbort, StageError, run
from certa.engine.services.audit import replay
from certa.ledger import Ledger

TASKS = {"algebra": (120, 0.70, 0.00), "biology": (80, 0.60, -0.12), "chemistry": (150, 0.80, 0.03)}
"""Task: (items, baseline accuracy, the subject's change)."""


def task_tables(seed: int = 5, tasks: dict[str, tuple[int, float, float]] = TASKS, *,
                drop: str | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Both sides' per-item tables (id, task, correct): item ids restart in every task (q0, q1, ...), so pairing by
    id alone would be wrong; ``drop`` leaves that task out of the subject."""
    rng = np.random.default_rng(seed)
    sides: dict[str, dict[str, list[Any]]] = {s: {"id": [], "task": [], "correct": []} for s in ("baseline", "subject")}
    for task, (n, p, change) in tasks.items():
        u = rng.random(n)
        for side, chance in (("baseline", p), ("subject", p + change)):
            if side == "subject" and task == drop:
                continue
            sides[side]["id"] += [f"q{i}" for i in range(n)]
            sides[side]["task"] += [task] * n
            sides[side]["correct"] += (u < chance).astype(float).tolist()
    return {side: {k: np.array(v, dtype=object if k != "correct" else np.float64) for k, v in cols.items()}
            for side, cols in sides.items()}


def suite_spec(knobs: dict[str, Any], *, profile: str = "dev") -> dict[str, Any]:
    return {"certa": 1, "name": "suite", "seed": 3, "profile": profile,
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": "suite", "use": "paired.suite_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "correct", "pooled": "micro",
                                 "columns": {"item": "id", "task": "task"}, **knobs}}]}


def one_task_spec(knobs: dict[str, Any]) -> dict[str, Any]:
    return {"certa": 1, "name": "one", "seed": 3, "profile": "dev",
            "inputs": {"baseline": {"path": "baseline.csv"}, "subject": {"path": "subject.csv"}},
            "stages": [{"id": "delta", "use": "paired.metric_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "correct",
                                 "columns": {"item": "id", **knobs.get("columns", {})},
                                 **{k: v for k, v in knobs.items() if k != "columns"}}}]}


def stage(result: Any, name: str = "suite") -> dict[str, Any]:
    return result.certificate["content"]["stages"][name]


def only(tables: dict[str, dict[str, np.ndarray]], task: str | None) -> dict[str, dict[str, np.ndarray]]:
    """The rows of ``task`` (None: all), without the task column, ids made unique across tasks for the whole suite."""
    out = {}
    for side, cols in tables.items():
        keep = np.ones(cols["id"].size, bool) if task is None else cols["task"] == task
        ids = np.array([f"{t}/{i}" for t, i in zip(cols["task"][keep], cols["id"][keep])], dtype=object)
        out[side] = {"id": ids, "correct": cols["correct"][keep],
                     **({"rep": cols["rep"][keep]} if "rep" in cols else {})}
    return out


@pytest.mark.parametrize("method", ["tango", "newcombe"])
def test_each_task_and_the_micro_pool_are_paired_metric_delta_on_their_items(method: str) -> None:
    tables = task_tables()
    suite = stage(run(suite_spec({"method": method, "margin": 0.1}), inputs=tables))
    assert [row["task"] for row in suite["rows"]] == sorted(TASKS) and suite["tasks"] == 3
    for row in suite["rows"]:
        alone = stage(run(one_task_spec({"method": method}), inputs=only(tables, row["task"])), "delta")
        assert row["units"] == alone["n_paired"] == TASKS[row["task"]][0]
        assert row["estimate"] == alone["difference"]["estimate"] and row["ci"] == alone["difference"]["ci"]
        assert row["p_value"] == alone["test"]["p_value"]
        assert row["detectable_difference"] == alone["detectable_difference"]["difference"]
        assert (row["baseline_mean"], row["subject_mean"]) == (alone["baseline_mean"], alone["subject_mean"])
    whole = stage(run(one_task_spec({"method": method}), inputs=only(tables, None)), "delta")
    assert suite["pooled"]["estimate"] == pytest.approx(whole["difference"]["estimate"], abs=1e-15)
    assert suite["pooled"]["ci"] == whole["difference"]["ci"]
    assert suite["n_paired"] == whole["n_paired"] == 350
    assert suite["pooled"]["baseline_mean"] == pytest.approx(whole["baseline_mean"], abs=1e-15)


def test_macro_pool_is_the_mover_of_the_tasks_intervals() -> None:
    rows = stage(run(suite_spec({"pooled": "macro"}), inputs=task_tables()))
    est = np.array([r["estimate"] for r in rows["rows"]])
    low, high = (np.array([r["ci"][k] for r in rows["rows"]]) for k in (0, 1))
    centre = est.mean()
    assert rows["pooled"]["estimate"] == pytest.approx(centre, abs=1e-15)
    assert rows["pooled"]["ci"][0] == pytest.approx(centre - np.sqrt(np.sum(((est - low) / 3) ** 2)), abs=1e-15)
    assert rows["pooled"]["ci"][1] == pytest.approx(centre + np.sqrt(np.sum(((high - est) / 3) ** 2)), abs=1e-15)
    assert rows["pooled"]["weights"].startswith("macro: every task counts once, each weighing 1/3")


def test_the_claim_across_tasks_and_which_differ() -> None:
    suite = stage(run(suite_spec({"margin": 0.05}), inputs=task_tables()))
    decided = {r["task"]: r["decision"] for r in suite["rows"]}
    every = suite["every_task"]
    assert decided["biology"] in ("INFERIOR", "UNDECIDED") and every["decision"] != "NONINFERIOR"
    assert every["noninferior"] is False and every["margins"] == "one for every task" and every["alpha"] == 0.025
    assert sorted(every["noninferior_tasks"] + every["undecided_tasks"] + every["inferior_tasks"]) == sorted(TASKS)
    for row in suite["rows"]:  # each task's decision is its interval against −margin
        low, high = row["ci"]
        assert row["decision"] == ("NONINFERIOR" if low > -0.05 else "INFERIOR" if high < -0.05 else "UNDECIDED")
    which = suite["which_differ"]
    raw = np.array([r["p_value"] for r in suite["rows"]])
    order = np.argsort(raw)
    holm = np.maximum.accumulate(np.minimum(1, (3 - np.arange(3)) * raw[order]))
    assert [suite["rows"][i]["adjusted_p_value"] for i in order] == pytest.approx(holm.tolist(), abs=1e-15)
    assert which["differing"] == [r["task"] for r in suite["rows"] if r["adjusted_p_value"] <= 0.05]
    assert which["alpha"] == 0.05 and which["any_differs"] == bool(which["differing"])
    no_margin = stage(run(suite_spec({}), inputs=task_tables()))
    assert no_margin["every_task"] is None and "decision" not in no_margin["rows"][0]


def test_a_clearly_better_subject_is_non_inferior_on_every_task() -> None:
    tasks = {t: (400, 0.6, 0.05) for t in ("a", "b", "c", "d")}
    suite = stage(run(suite_spec({"margin": 0.05}), inputs=task_tables(8, tasks)))
    assert suite["every_task"]["decision"] == "NONINFERIOR" and suite["every_task"]["noninferior"] is True


def test_per_task_margins_name_every_task() -> None:
    margins = {"algebra": 0.05, "biology": 0.3, "chemistry": 0.05}
    suite = stage(run(suite_spec({"margin": margins}), inputs=task_tables()))
    assert [r["margin"] for r in suite["rows"]] == [0.05, 0.3, 0.05] and suite["every_task"]["margins"] == "one per task"
    with pytest.raises(StageError, match=r"missing 1 \(chemistry\)"):
        run(suite_spec({"margin": {"algebra": 0.05, "biology": 0.3}}), inputs=task_tables())
    with pytest.raises(StageError, match="not a paired task: physics"):
        run(suite_spec({"margin": {**margins, "physics": 0.1}}), inputs=task_tables())


def test_a_task_on_one_side_only_is_the_pairing_rule_and_small_tasks_the_per_task_floor() -> None:
    tables = task_tables(drop="biology")
    with pytest.raises(ProfileAbort, match="samples_paired") as info:
        run(suite_spec({}, profile="ci"), inputs=tables)
    assert "80 item(s) only in the baseline, 0 only in the subject" in str(info.value)
    assert "task='biology', id='q0'" in str(info.value)
    dev = run(suite_spec({}), inputs=tables)
    assert stage(dev)["tasks"] == 2 and stage(dev)["pairing"]["unmatched_baseline"] == 80
    small = {"a": (120, 0.7, 0.0), "b": (40, 0.7, 0.0)}
    with pytest.raises(ProfileAbort, match=r"min_paired_samples_per_task: 1 of 2 task\(s\) have fewer than 50 paired "
                                           r"items: b \(40\)"):
        run(suite_spec({}, profile="ci"), inputs=task_tables(1, small))
    rules = {d.decision.detail["rule"]: d.decision.detail for d in run(suite_spec({}), inputs=task_tables(1, small))
             .decisions if d.decision.kind == "profile_rule"}
    assert rules["min_paired_samples_per_task"]["outcome"] == "pass"  # dev has no floor


def test_an_input_without_tasks_is_refused() -> None:
    spec = suite_spec({})
    spec["stages"][0]["with"]["columns"] = {"item": "id"}
    tables = only(task_tables(), None)
    with pytest.raises(StageError, match="names no task per item"):
        run(spec, inputs=tables)


def test_repeats_are_clusters_within_each_task() -> None:
    """Three epochs per item: each task's row is paired.metric_delta 1.2.0's clustered analysis of that task."""
    rng = np.random.default_rng(9)
    tables = task_tables()
    for side in tables.values():
        side.update({k: np.repeat(v, 3) for k, v in side.items()})
        side["rep"] = np.tile(np.array(["e1", "e2", "e3"], dtype=object), side["id"].size // 3)
    flip = rng.random(tables["subject"]["correct"].size) < 0.15
    tables["subject"]["correct"] = np.where(flip, 1 - tables["subject"]["correct"], tables["subject"]["correct"])
    spec = suite_spec({})
    spec["stages"][0]["with"]["columns"]["repeat"] = "rep"
    suite = stage(run(spec, inputs=tables))
    assert suite["interval_method"] == "tango_score_rao_scott" and suite["units"]["unit"] == "sample"
    assert "design-effect-adjusted" in suite["units"]["analysis"]
    for row in suite["rows"]:
        alone = stage(run(one_task_spec({"columns": {"repeat": "rep"}}), inputs=only(tables, row["task"])), "delta")
        assert row["units"] == alone["n_paired"] and row["ci"] == alone["difference"]["ci"]
        assert row["p_value"] == alone["test"]["p_value"]
    whole = stage(run(one_task_spec({"columns": {"repeat": "rep"}}), inputs=only(tables, None)), "delta")
    assert suite["pooled"]["ci"] == whole["difference"]["ci"]


# ----------------------------------------------------------------------------------- lm-eval suites, end to end


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_lm_eval_side(folder: Path, side: str, tasks: dict[str, int]) -> None:
    """A folder as lm-eval 0.4 writes one run: a samples file per task (doc_id, digests, acc), no results file; the
    subject answers about a fifth of the documents the other way."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(4)
    for task, n in tasks.items():
        acc = (rng.random(n) < 0.6).astype(float)
        flip = rng.random(n) < 0.2  # the subject answers a fifth of the documents the other way
        acc = np.where(flip, 1 - acc, acc) if side == "subject" else acc
        lines = [json.dumps({"doc_id": d, "filter": "none", "doc_hash": digest(f"{task}{d}"),
                             "prompt_hash": digest(f"p{task}{d}"), "target_hash": digest("t"), "metrics": ["acc"],
                             "acc": float(acc[d])}) for d in range(n)]
        (folder / f"samples_{task}_2026-11-29T10-00-00.000001.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("margin, verdict, code", [(0.5, "PASS", 0), (0.06, "INCONCLUSIVE", 6)])
def test_lm_eval_suites_through_the_command_line_and_replay(tmp_path: Path, margin: float, verdict: str,
                                                            code: int) -> None:
    tasks = {"mmlu_anatomy": 135, "mmlu_virology": 166, "mmlu_astronomy": 152}
    for side in ("baseline", "subject"):
        write_lm_eval_side(tmp_path / side, side, tasks)
    spec = {"certa": 1, "name": "suite", "seed": 3, "profile": "dev",
            "inputs": {s: {"path": s, "format": "lm-eval-suite"} for s in ("baseline", "subject")},
            "stages": [{"id": "suite", "use": "paired.suite_delta",
                        "with": {"baseline": "baseline", "subject": "subject", "metric": "acc", "pooled": "macro",
                                 "margin": margin}}],
            "gates": [{"id": "every-task", "metric": "suite.every_task.decision", "decided": "NONINFERIOR"}]}
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    ledger = tmp_path / "ledger.db"
    out = CliRunner().invoke(main, ["run", str(tmp_path / "spec.yaml"), "--ledger", str(ledger), "--json"])
    assert out.exit_code == code, out.output
    payload = json.loads(out.stdout)
    assert payload["verdict"] == verdict
    with Ledger.open(str(ledger)) as opened:
        content = opened.certificate(payload["run_id"])["content"]
        rows = content["stages"]["suite"]["rows"]
        assert [r["task"] for r in rows] == sorted(tasks) and [r["units"] for r in rows] == [135, 152, 166]
        assert content["stages"]["suite"]["pairing"]["key_fields"] == ["task", "doc_id"]
        assert replay(opened, payload["run_id"]).outcome == "REPRODUCED"
