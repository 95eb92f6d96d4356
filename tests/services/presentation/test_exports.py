"""``certa export --format``: a certificate as Hugging Face evaluation results (the Hub's ``.eval_results/*.yaml``)
and as a CycloneDX 1.6 ML-BOM whose model card carries each estimate with its confidence interval, validated by
CycloneDX's own JSON schema and validator (cyclonedx-python-lib); the default format is unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from certa.cli import main
from certa.engine.services.presentation.cyclonedx_bom import cyclonedx_bom
from certa.engine.services.presentation.hf_eval_results import hf_eval_results
from certa.engine.services.presentation.stages import Estimate, estimates_of


def validate_cyclonedx(document: dict[str, Any]) -> str | None:
    """CycloneDX 1.6's strict JSON schema, through cyclonedx-python-lib's validator: None when valid, else the
    error."""
    try:
        import cyclonedx  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must validate CycloneDX exports: install the test extra (cyclonedx-python-lib)",
                        pytrace=False)
        pytest.skip("cyclonedx-python-lib is not installed")
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(document))
    return None if error is None else str(error)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A ledger holding one small paired-ratio run, and its certificate."""
    from certa.engine import run
    from certa.ledger import Ledger
    from tests.conftest import small_spec_folder
    folder = tmp_path_factory.mktemp("exports")
    with Ledger.open(folder / "ledger.db") as ledger:
        result = run(small_spec_folder(folder), ledger=ledger)
    return folder / "ledger.db", result.certificate


def test_an_estimate_is_read_defensively() -> None:
    assert Estimate.read("m", True) is None and Estimate.read("m", float("nan")) is None
    assert Estimate.read("m", 0.5, [0.4, None], 0.95) == Estimate("m", 0.5)  # half an interval is none
    assert Estimate.read("m", 2, (1, 3), 0.9, slice="x") == Estimate("m", 2.0, 1.0, 3.0, 0.9, "x")


def test_each_stage_type_states_its_estimates_with_their_intervals() -> None:
    metric = {"metric": "accuracy", "subject_mean": 0.8, "baseline_mean": 0.75,
              "difference": {"estimate": 0.05, "ci": [0.01, 0.09], "confidence_level": 0.95}}
    assert estimates_of("paired.metric_delta", metric) == (
        Estimate("accuracy difference (subject - baseline)", 0.05, 0.01, 0.09, 0.95),
        Estimate("accuracy (subject)", 0.8), Estimate("accuracy (baseline)", 0.75))
    pac = {"pac_bounds_marginal": {"singleton": {"estimate": 0.1, "lower": 0.05, "upper": 0.2, "level": 0.9}}}
    (marginal,) = [e for e in estimates_of("conformal.pac_report", pac) if e.slice == "marginal"]
    assert marginal == Estimate("singleton", 0.1, 0.05, 0.2, 0.9, "marginal")
    bakeoff = {"bootstrap": {"confidence_level": 0.95},
               "buckets": {"easy": {"rank_by": "RSI_pool_env",
                                    "vendors": {"acme": {"RSI_pool_env": 0.7, "ci_rsi": [0.6, 0.8]}}}}}
    assert estimates_of("bakeoff.compare", bakeoff) == (Estimate("RSI_pool_env", 0.7, 0.6, 0.8, 0.95, "easy/acme"),)
    suite = {"metric": "acc", "confidence_level": 0.9,
             "pooled": {"pooling": "micro", "estimate": 0.01, "ci": [-0.01, 0.03], "confidence_level": 0.95},
             "rows": [{"task": "arc", "estimate": 0.02, "ci": [0.0, 0.04]}, {"task": "mmlu", "estimate": None}]}
    assert estimates_of("paired.suite_delta", suite) == (
        Estimate("pooled micro acc difference (subject - baseline)", 0.01, -0.01, 0.03, 0.95),
        Estimate("acc difference (subject - baseline)", 0.02, 0.0, 0.04, 0.9, "arc"))
    assert estimates_of("bakeoff.gate", {"summary": {"g_mean": 1.0}}) == ()  # a gate stage estimates nothing


def test_hf_eval_results_name_the_benchmark_and_point_at_the_certificate(recorded) -> None:
    _, certificate = recorded
    primary = certificate["content"]["stages"]["ratio"]["token_perplexity"]
    (result,) = yaml.safe_load(hf_eval_results(certificate, dataset="org/bench", task_id="main",
                                               source_url="https://audit.example.org/run.bundle.json"))
    assert result["dataset"] == {"id": "org/bench", "task_id": "main"}
    assert result["value"] == primary["ratio_vs_baseline"]
    assert result["date"] == certificate["issued"]["time_utc"]
    assert result["source"] == {"url": "https://audit.example.org/run.bundle.json",
                                "name": f"certa certificate sha256:{certificate['content_sha256'][:12]}"}
    assert certificate["content_sha256"] in result["notes"] and "95% CI [" in result["notes"]
    assert "source" not in yaml.safe_load(hf_eval_results(certificate, dataset="org/bench"))[0]


def test_the_cyclonedx_model_card_carries_each_interval_and_passes_cyclonedx_validation(recorded) -> None:
    _, certificate = recorded
    document = cyclonedx_bom(certificate)
    assert validate_cyclonedx(document) is None
    model, *inputs = document["components"]
    (metric,) = model["modelCard"]["quantitativeAnalysis"]["performanceMetrics"]
    primary = certificate["content"]["stages"]["ratio"]["token_perplexity"]
    assert float(metric["value"]) == primary["ratio_vs_baseline"] and metric["slice"] == "ratio"
    assert [float(metric["confidenceInterval"][k]) for k in ("lowerBound", "upperBound")] == primary["display_ci"]
    assert metric["type"].endswith("(95% confidence interval)")
    assert {"name": "certa:content_sha256", "value": certificate["content_sha256"]} in model["properties"]
    assert [c["hashes"][0]["content"] for c in inputs] == [i["sha256"] for i in certificate["content"]["inputs"]]
    assert cyclonedx_bom(certificate) == document  # a function of the certificate: the same serial number
    metric["value"] = primary["ratio_vs_baseline"]  # a number where the schema wants a string: refused
    assert "is not of type 'string'" in (validate_cyclonedx(document) or "")


def test_certa_export_formats_and_the_default_unchanged(recorded, tmp_path: Path) -> None:
    db, certificate = recorded
    run_id = certificate["issued"]["run_id"]

    def export(*args: str):
        return CliRunner().invoke(main, ["export", run_id, "--ledger", str(db), *args])

    assert export("-o", str(tmp_path / "c.json")).exit_code == 0
    text = (tmp_path / "c.json").read_text()  # as before: the certificate, indented, keys sorted
    assert json.loads(text) == certificate and text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert export("--format", "cyclonedx", "-o", str(tmp_path / "bom.json")).exit_code == 0
    assert validate_cyclonedx(json.loads((tmp_path / "bom.json").read_text())) is None
    written = export("--format", "hf-eval-results", "--hf-dataset", "org/bench", "-o", str(tmp_path / "r.yaml"))
    assert written.exit_code == 0 and yaml.safe_load((tmp_path / "r.yaml").read_text())[0]["dataset"]["id"] == \
        "org/bench"
    no_dataset = export("--format", "hf-eval-results", "-o", str(tmp_path / "x.yaml"))
    assert no_dataset.exit_code == 2 and "--hf-dataset" in no_dataset.output
    in_toto = export("--format", "in-toto", "-o", str(tmp_path / "x.json"))
    assert in_toto.exit_code == 2 and "certa attest" in in_toto.output and "Traceback" not in in_toto.output
    assert not (tmp_path / "x.yaml").exists() and not (tmp_path / "x.json").exists()
