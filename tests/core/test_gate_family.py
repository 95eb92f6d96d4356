"""What a run's gates claim together (certa.engine.core.gate_family): the adjustments against hand-computed values,
each member decided on its adjusted p-value, the spec's rules for families, the certificate's family block and
its words, a replay of a family run, and seeded simulations of 10-gate families (uncorrected, Holm, Bonferroni)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from certa.cli import main
from certa.engine.core.certificate import CONTENT_FORMAT
from certa.engine.core.gate_family import DEFAULT_FAMILY, FamilySpec, evaluate_family, family_statement, stated_family
from certa.engine.core.gates import gate_display
from certa.engine.core.spec import GateSpec, load_plan
from certa.engine.core.stats.multiplicity import bonferroni_adjust, holm_adjust
from certa.engine.core.stats.paired_metric import PairedTable, mcnemar_exact_test
from certa.engine.foundation.errors import SpecError
from certa.ledger import Ledger

HOLM = FamilySpec("which-differ", 0.05, "holm")


def test_adjustments_match_hand_computed_values() -> None:
    """p = (0.01, 0.04, 0.03, 0.5), m = 4. Bonferroni: 4p capped at 1. Holm, sorted 0.01, 0.03, 0.04, 0.5:
    4·0.01 = 0.04, 3·0.03 = 0.09, max(0.09, 2·0.04 = 0.08) = 0.09, max(0.09, 0.5) = 0.5."""
    p = np.array([0.01, 0.04, 0.03, 0.5])
    np.testing.assert_allclose(bonferroni_adjust(p), [0.04, 0.16, 0.12, 1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(holm_adjust(p), [0.04, 0.09, 0.09, 0.5], rtol=0, atol=1e-15)
    assert (holm_adjust(p) <= bonferroni_adjust(p)).all()
    with pytest.raises(ValueError):
        bonferroni_adjust(np.array([0.2, 1.5]))


def _gate(gate_id: str, metric: str, **threshold) -> GateSpec:
    return GateSpec(id=gate_id, metric=metric, threshold=threshold)


def test_members_are_decided_on_adjusted_p_values() -> None:
    stages = {"a": {"test": {"p_value": 0.01}}, "b": {"test": {"p_value": 0.03}}, "c": {"test": {"p_value": 0.2}},
              "d": {"score": 0.9}}
    gates = [_gate("a", "a.test.p_value", differs=True), _gate("b", "b.test.p_value", differs=True),
             _gate("c", "c.test.p_value", differs=False), _gate("d", "d.score", min=0.5)]
    outcome = evaluate_family(HOLM, gates, stages)
    # Holm over (0.01, 0.03, 0.2): 0.03, max(0.03, 0.06) = 0.06, 0.2
    rows = {row["gate"]: row for row in outcome.record["members"]}
    assert [rows[g]["adjusted_p_value"] for g in "abc"] == pytest.approx([0.03, 0.06, 0.2], abs=1e-15)
    assert [rows[g]["differs"] for g in "abc"] == [True, False, False]
    assert outcome.member_results["a"].passed and not outcome.member_results["b"].passed
    assert outcome.member_results["c"].passed and "d" not in outcome.member_results
    assert "adjusted p = 0.06" in outcome.member_results["b"].reason and "not shown to differ" in \
        outcome.member_results["b"].reason
    assert outcome.record["any_differs"] is True and outcome.record["gates"] == 4
    assert "3 gate(s) on p-values form one family" in outcome.record["statement"]
    assert "The other 1 gate(s)" in outcome.record["statement"]
    bonferroni = evaluate_family(FamilySpec("any-differs", 0.05, "bonferroni"), gates, stages)
    assert [row["adjusted_p_value"] for row in bonferroni.record["members"]] == pytest.approx([0.03, 0.09, 0.6])
    assert bonferroni.record["statement"].startswith("Does any member differ?")


def test_a_missing_or_invalid_p_value_fails_its_gate_and_counts_as_one() -> None:
    gates = [_gate("a", "a.test.p_value", differs=True), _gate("b", "b.test.p_value", differs=False),
             _gate("c", "c.test.p_value", differs=False)]
    outcome = evaluate_family(HOLM, gates, {"a": {"test": {"p_value": 0.012}}, "c": {"test": {"p_value": 1.5}}})
    assert not outcome.member_results["b"].passed and "metric not found" in outcome.member_results["b"].reason
    assert not outcome.member_results["c"].passed and "not a p-value" in outcome.member_results["c"].reason
    # m stays 3: 3 × 0.012 = 0.036 ≤ 0.05
    assert outcome.record["members"][0]["adjusted_p_value"] == pytest.approx(0.036)
    assert outcome.member_results["a"].passed
    assert outcome.record["members"][1] == {"gate": "b", "metric": "b.test.p_value", "p_value": None,
                                            "adjusted_p_value": None, "differs": False}


def test_the_default_family_states_what_uncorrected_gates_do_not_bound() -> None:
    words = family_statement(DEFAULT_FAMILY, 10, 0)
    assert "each of its 10 gates passes" in words and "up to 10·α" in words and "intersection-union" in words
    outcome = evaluate_family(DEFAULT_FAMILY, [_gate("x", "a.b", min=0)], {})
    assert outcome.member_results == {} and outcome.record == {
        "claim": "all", "gates": 1, "statement": "All gates: the run passes only when its gate passes."}
    old = stated_family({"gates": [{}, {}]})  # a format-1 certificate: what its gates claimed together
    assert old["claim"] == "all" and "each of its 2 gates" in old["statement"]


def test_a_member_gate_is_shown_as_its_adjusted_p_and_expected_decision() -> None:
    shown = gate_display({"value": 0.0123456789, "threshold": {"differs": True}, "reason": "r"})
    assert shown == {"value": "adjusted p 0.0123457", "threshold": "differs (adjusted p ≤ the family's α)",
                     "reason": "r"}
    assert gate_display({"value": None, "threshold": {"differs": False}})["threshold"].startswith("not shown")


# -- the spec ---------------------------------------------------------------------------------------------------

TASKS = {"a": 30, "b": 0, "c": 0}
"""Task -> items the subject gets wrong that the baseline gets right (of 200; otherwise the same answers)."""


def _family_folder(folder: Path, family: dict | None, gates: list[dict]) -> Path:
    rng = np.random.default_rng(5)
    inputs, stages = {}, []
    for task, worse in TASKS.items():
        right = rng.random(200) < 0.7
        subject = right.copy()
        subject[np.flatnonzero(right)[:worse]] = False
        for side, column in (("baseline", right), ("subject", subject)):
            lines = ["item_id,acc", *(f"q{i:03d},{int(v)}" for i, v in enumerate(column))]
            (folder / f"{task}_{side}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
            inputs[f"{task}_{side}"] = {"path": f"{task}_{side}.csv"}
        stages.append({"id": task, "use": "paired.metric_delta",
                       "with": {"baseline": f"{task}_baseline", "subject": f"{task}_subject", "metric": "acc"}})
    spec = {"certa": 1, "name": "three-tasks", "seed": 3, "profile": "dev", "inputs": inputs, "stages": stages,
            "gates": gates, **({"family": family} if family is not None else {})}
    (folder / "spec.yaml").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return folder / "spec.yaml"


MEMBERS = [{"id": "a-differs", "metric": "a.test.p_value", "differs": True},
           {"id": "b-not-shown", "metric": "b.test.p_value", "differs": False},
           {"id": "c-not-shown", "metric": "c.test.p_value", "differs": False}]


@pytest.mark.parametrize(("family", "gates", "message"), [
    (None, MEMBERS, "differs: makes a gate a member of a corrected family"),
    ({"claim": "all"}, MEMBERS, "differs: makes a gate a member of a corrected family"),
    ({"claim": "which-differ", "alpha": 0.05, "correction": "holm"},
     [{"id": "x", "metric": "a.difference.ci[0]", "min": -0.1}], "family claim 'which-differ' needs member gates"),
    ({"claim": "which-differ", "alpha": 0.05, "correction": "holm"},
     [{"id": "x", "metric": "a.difference.ci[0]", "differs": True}], "a family member's metric must be a p-value"),
    ({"claim": "all", "alpha": 0.05}, [], "family claim 'all' takes no alpha or correction"),
    ({"claim": "any-differs", "alpha": 0.05}, MEMBERS, "missing required key: 'correction'"),
    ({"claim": "which-differ", "alpha": 0.05, "correction": "holm"},
     [{"id": "x", "metric": "a.test.p_value", "differs": True, "max": 0.05}], "exactly one kind of threshold"),
])
def test_the_spec_refuses_a_family_its_gates_do_not_fit(tmp_path: Path, family, gates, message: str) -> None:
    with pytest.raises(SpecError, match=message) as error:
        load_plan(_family_folder(tmp_path, family, gates))
    assert error.value.line is not None  # the file's line is named


def test_a_spec_without_a_family_keeps_its_knobs_and_hash(tmp_path: Path) -> None:
    gates = [{"id": "x", "metric": "a.difference.ci[0]", "min": -0.1}]
    plain = load_plan(_family_folder(tmp_path, None, gates))
    assert "family" not in plain.knobs and plain.family == DEFAULT_FAMILY
    declared = load_plan(_family_folder(tmp_path, {"claim": "all"}, gates))
    assert declared.knobs["family"] == {"claim": "all"} and declared.knobs_hash != plain.knobs_hash


def test_a_family_run_records_its_members_and_replays(tmp_path: Path) -> None:
    spec = _family_folder(tmp_path, {"claim": "which-differ", "alpha": 0.05, "correction": "holm"},
                          [*MEMBERS, {"id": "a-ci", "metric": "a.difference.ci[0]", "min": -0.5}])
    db = tmp_path / "ledger.db"
    result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(db), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    with Ledger.open(str(db), create=False) as ledger:
        content = ledger.certificate(run_id)["content"]
    family = content["family"]
    assert content["certa_format"] == CONTENT_FORMAT and content["verdict"] == "PASS"
    assert family["claim"] == "which-differ" and family["correction"] == "holm" and family["gates"] == 4
    p = [content["stages"][task]["test"]["p_value"] for task in "abc"]
    assert [m["p_value"] for m in family["members"]] == p
    assert [m["adjusted_p_value"] for m in family["members"]] == holm_adjust(np.array(p)).tolist()
    assert [m["differs"] for m in family["members"]] == [True, False, False] and family["any_differs"]
    assert {g["id"]: g["value"] for g in content["gates"]}["a-differs"] == family["members"][0]["adjusted_p_value"]
    shown = CliRunner().invoke(main, ["show", run_id, "--ledger", str(db)], catch_exceptions=False)
    assert "What the gates claim together (which-differ)" in shown.output and "| a-differs |" in shown.output
    from certa.engine.services.presentation.html import render_report
    from certa.engine.services.report_data import gather_report
    with Ledger.open(str(db), create=False) as ledger:
        page = render_report(gather_report(ledger, run_id))
    gates_section = page[page.index('id="gates"'):page.index('id="identity"')]
    assert "What the gates claim together (which-differ):</strong> Which members differ?" in gates_section
    assert gates_section.count("<td>not shown to differ</td>") == 2 and "<td>differs</td>" in gates_section
    replayed = CliRunner().invoke(main, ["replay", run_id, "--ledger", str(db)], catch_exceptions=False)
    assert replayed.exit_code == 0 and "REPRODUCED" in replayed.output


# -- simulations ------------------------------------------------------------------------------------------------

def _mcnemar_family(rng: np.random.Generator, runs: int, tasks: int, n: int, shift: np.ndarray) -> np.ndarray:
    """Exact McNemar p-values (runs × tasks) of paired tables of n items: discordant cells with probabilities
    0.06 ± shift/2 (shift 0: the two models do not differ on that task)."""
    probabilities = np.stack([np.full(tasks, 0.7), 0.06 + shift / 2, 0.06 - shift / 2,
                              0.24 - np.zeros(tasks)], axis=-1)
    counts = np.stack([rng.multinomial(n, row, size=runs) for row in probabilities], axis=1)
    table = PairedTable(counts[..., 0], counts[..., 1], counts[..., 2], counts[..., 3])
    return np.asarray(mcnemar_exact_test(table).p_value)


@pytest.mark.slow
def test_ten_gate_families_keep_their_familywise_error_rate() -> None:
    """10 tasks on which the models do not differ, 4,000 seeded runs: ten uncorrected 'does not differ' gates at
    0.05 fail together in about a quarter of the runs (0.247 here: the exact test's size is about 0.028 at 24
    discordant pairs, so 1 − 0.972^10); Holm and Bonferroni at 0.05 stay within
    0.05 + 3 binomial SE. With one task truly different (shift 0.08), Holm finds it at least as often as
    Bonferroni and still calls no other task different more than 0.05 of the time."""
    rng = np.random.default_rng(20261129)
    runs, alpha = 4000, 0.05
    null = _mcnemar_family(rng, runs, 10, 200, np.zeros(10))
    uncorrected = (null <= alpha).any(axis=1).mean()
    holm = (holm_adjust(null) <= alpha).any(axis=1).mean()
    bonferroni = (bonferroni_adjust(null) <= alpha).any(axis=1).mean()
    bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)
    assert 0.2 < uncorrected < 0.42, uncorrected
    assert holm <= bound and bonferroni <= bound, (holm, bonferroni)
    shift = np.zeros(10)
    shift[0] = 0.08
    one = _mcnemar_family(rng, runs, 10, 200, shift)
    holm_rejects, bonferroni_rejects = holm_adjust(one) <= alpha, bonferroni_adjust(one) <= alpha
    assert holm_rejects[:, 0].mean() >= bonferroni_rejects[:, 0].mean() > 0.5
    assert holm_rejects[:, 1:].any(axis=1).mean() <= bound
