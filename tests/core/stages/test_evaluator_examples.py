"""The three evaluator examples (``specs/lm-eval-perplexity``, ``specs/lm-eval-accuracy``, ``specs/inspect-accuracy``)
PASS, and the figures and the stricter-margin verdicts their READMEs state are what the runs give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from certa.engine import run

SPECS = Path(__file__).resolve().parents[3] / "specs"


def stage(example: str, stage_id: str, **knobs: Any) -> tuple[str, dict[str, Any]]:
    """(verdict, the stage's outputs) of the example's spec, with ``knobs`` changed in its one stage."""
    folder = SPECS / example
    spec = yaml.safe_load((folder / "spec.yaml").read_text(encoding="utf-8"))
    spec["stages"][0]["with"].update(knobs)
    paths = {name: folder / entry["path"] for name, entry in spec["inputs"].items()}
    content = run(spec, input_paths=paths).certificate["content"]
    return content["verdict"], content["stages"][stage_id]


def test_lm_eval_perplexity_example() -> None:
    verdict, out = stage("lm-eval-perplexity", "ppl")
    primary = out["byte_perplexity"]
    assert verdict == "PASS"
    assert (round(primary["baseline_final"], 4), round(primary["final"], 4)) == (7.2615, 7.2933)
    assert round(primary["ratio_vs_baseline"], 4) == 1.0044
    assert [round(bound, 4) for bound in primary["display_ci"]] == [0.9946, 1.0142]  # 1.3.0's, 1.4.0's, 1.5.0's
    assert out["pairing"]["paired"] == 24 and out["pairing"]["identity_mismatched"] == 0  # 1.5.0: by digests too
    assert {out["sources"][arm]["tool_version"] for arm in ("baseline", "subject")} == {"0.4.13"}


def test_lm_eval_accuracy_example_and_the_margins_it_cannot_certify() -> None:
    verdict, out = stage("lm-eval-accuracy", "acc")
    assert verdict == "PASS" and out["n_paired"] == 24
    assert out["table"] == {"both": 2, "subject_only": 2, "baseline_only": 0, "neither": 20}
    assert [round(bound, 3) for bound in out["difference"]["ci"]] == [-0.066, 0.258]
    assert out["test"]["p_value"] == 0.5 and round(out["detectable_difference"]["difference"], 3) == 0.157
    verdict, strict = stage("lm-eval-accuracy", "acc", margin=0.05)
    assert verdict == "FAIL" and round(strict["noninferiority"]["p_value"], 3) == 0.033


def test_inspect_accuracy_example_and_the_margins_it_cannot_certify() -> None:
    """paired.metric_delta 1.2.0: the 20 samples, each with its 2 epochs, are the units (1.1.0 took 40 items)."""
    verdict, out = stage("inspect-accuracy", "match")
    assert verdict == "PASS" and out["n_paired"] == 20
    assert out["units"]["statement"] == "unit of analysis: 20 samples (2 repeats each)"
    assert (out["baseline_mean"], out["subject_mean"]) == (0.825, 0.675)
    assert out["table"] == {"both": 22, "subject_only": 5, "baseline_only": 11, "neither": 2}
    assert out["clustering"]["effective_rows"] == 40 and out["clustering"]["design_effect"] == 1  # epochs independent
    assert [round(bound, 3) for bound in out["difference"]["ci"]] == [-0.352, 0.063]
    assert round(out["test"]["p_value"], 2) == 0.15
    for margin, passes in ((0.05, False), (0.35, False), (0.36, True)):  # the smallest margin certified: 0.36
        verdict, _ = stage("inspect-accuracy", "match", margin=margin)
        assert verdict == ("PASS" if passes else "FAIL")


@pytest.mark.parametrize("example", ["lm-eval-perplexity", "lm-eval-accuracy", "inspect-accuracy"])
def test_the_examples_read_inputs_named_baseline_and_subject(example: str) -> None:
    spec = yaml.safe_load((SPECS / example / "spec.yaml").read_text(encoding="utf-8"))
    assert {"baseline", "subject"} <= set(spec["inputs"])
    assert spec["stages"][0]["with"]["baseline"] == "baseline" and spec["stages"][0]["with"]["subject"] == "subject"
