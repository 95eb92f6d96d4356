"""Gate metric paths are checked before anything runs: against the output schema of the stage version they name
(``certa validate``), and keys only the data know (buckets, vendors) against the inputs as soon as they are read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from certa.engine import SpecError, load_plan, run
from certa.engine.core.inputs import load_tables
from certa.engine.core.interpreter import check_data_keys, execute
from certa.engine.core.metric_paths import MetricPathError, parse_metric, resolve_in_schema
from certa.ledger import Ledger
from certa.schemas import load_schema

from tests.conftest import ROOT, SMALL_SPEC, write_spec

METRIC = "ratio.token_perplexity.display_ci[1]"


def _error(folder: Path, metric: str, threshold: str = "max: 1.05") -> SpecError:
    text = SMALL_SPEC.replace(f"metric: {METRIC}\n    max: 1.05", f"metric: {metric}\n    {threshold}")
    with pytest.raises(SpecError) as info:
        load_plan(write_spec(folder, text))
    return info.value


def test_a_misspelt_output_key_names_line_column_path_and_the_closest_key(tmp_path: Path) -> None:
    error = _error(tmp_path, "ratio.token_perplexity.ratio_vs_baselin")
    assert (error.line, error.column, error.path) == (14, 13, "gates[0].metric")
    assert str(error).startswith(f"{tmp_path / 'spec.yaml'}:14:13: gates[0].metric: no output 'ratio_vs_baselin' in "
                                 "'ratio.token_perplexity'")
    assert str(error).endswith("did you mean 'ratio_vs_baseline'?")


def test_a_misspelt_key_deeper_down_names_its_parent(tmp_path: Path) -> None:
    error = _error(tmp_path, "ratio.dataset.windows.stats.paired_delta_sumary.mean")
    assert "in 'ratio.dataset.windows.stats'" in str(error) and "did you mean 'paired_delta_summary'?" in str(error)


def test_an_index_outside_a_fixed_length_array_is_refused(tmp_path: Path) -> None:
    error = _error(tmp_path, "ratio.token_perplexity.display_ci[2]")
    assert error.path == "gates[0].metric" and "at most 2 item(s): index [2]" in str(error)
    assert "at most 2" in str(_error(tmp_path, "ratio.token_perplexity.display_ci[-3]"))
    load_plan(write_spec(tmp_path, SMALL_SPEC.replace(METRIC, "ratio.token_perplexity.display_ci[-1]")))


def test_an_unknown_stage_id_suggests_the_closest_stage(tmp_path: Path) -> None:
    error = _error(tmp_path, "ratoi.primary_metric.display_ci[1]")
    assert "not a stage of this spec" in str(error) and str(error).endswith("did you mean 'ratio'?")


def test_a_step_into_a_number_or_an_index_into_an_object_is_refused(tmp_path: Path) -> None:
    assert "is a number or string, so it has no key 'x'" in str(_error(tmp_path, "ratio.token_perplexity.final.x"))
    assert "not an array" in str(_error(tmp_path, "ratio.token_perplexity[0]"))


def test_a_bound_on_a_value_that_is_never_a_number_is_refused(tmp_path: Path) -> None:
    error = _error(tmp_path, "ratio.token_perplexity.kind")
    assert "'ratio.token_perplexity.kind' is a string, not a number" in str(error)
    load_plan(write_spec(tmp_path, SMALL_SPEC.replace(f"{METRIC}\n    max: 1.05",
                                                      "ratio.token_perplexity.kind\n    equals: ppl")))


def test_paths_are_checked_against_the_pinned_version(tmp_path: Path) -> None:
    """1.1.0 states its bootstrap distribution; 1.0.0 did not."""
    quantile = "ratio.dataset.windows.stats.bootstrap.distribution.ratio_quantiles[100]"
    load_plan(write_spec(tmp_path, SMALL_SPEC.replace(METRIC, quantile).replace(
        "use: paired.ppl_ratio", "use: paired.ppl_ratio@1.1.0")))
    with pytest.raises(SpecError, match=r"no output 'distribution' .*\(outputs of paired.ppl_ratio@1.0.0\)"):
        load_plan(write_spec(tmp_path, SMALL_SPEC.replace(METRIC, quantile).replace(
            "use: paired.ppl_ratio", "use: paired.ppl_ratio@1.0.0")))


def test_a_replay_re_evaluates_the_recorded_gates_without_checking_their_paths(tmp_path: Path) -> None:
    """A run recorded before paths were checked, with a path naming nothing, replays to the same failed gate."""
    text = SMALL_SPEC.replace(METRIC, "ratio.token_perplexity.ratio_vs_baselin")
    plan = load_plan(text, stage_versions={"ratio": "1.1.0"})
    assert plan.gates[0].metric == "ratio.token_perplexity.ratio_vs_baselin" and plan.gates[0].data_keys == ()


def test_every_example_and_golden_gate_path_resolves() -> None:
    """The paths users wrote in every example and in every run each release recorded are valid today."""
    import json
    import sqlite3

    from certa.engine.core.stages import REGISTRY

    seen = 0
    for db in sorted((ROOT / "tests" / "golden").glob("*/ledger.db")):
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            for (payload,) in conn.execute("SELECT payload FROM entries WHERE kind = 'certificate'"):
                knobs = json.loads(payload)["content"]["knobs"]
                versions = {s["id"]: REGISTRY.get(s["use"], s["version"]) for s in knobs["stages"]}
                for gate in knobs["gates"]:
                    stage_id, steps = parse_metric(gate["metric"])
                    resolve_in_schema(load_schema(versions[stage_id].output_schema_file), steps, prefix=stage_id,
                                      need=None if "equals" in gate else "number")
                    seen += 1
    assert seen >= 5 * 12  # 12 gates per release (0.1.0 onwards)


def test_schema_walk_follows_refs_any_of_and_reports_data_keys() -> None:
    schema = load_schema("outputs/bakeoff.compare@1.1.0.schema.json")
    _, steps = parse_metric("cmp.buckets.e5.vendors.vendor-a.ci_rsi[0]")
    keys = resolve_in_schema(schema, steps, prefix="cmp", need="number")
    assert [(k.step, k.key, k.source["default_column"]) for k in keys] == [(1, "e5", "bucket"),
                                                                          (3, "vendor-a", "vendor")]
    _, steps = parse_metric("cmp.buckets.e5.pairs[0].p_holm")  # pairs: anyOf a test or an absent vendor
    resolve_in_schema(schema, steps, prefix="cmp", need="number")
    _, steps = parse_metric("cmp.buckets.e5.pairs[0].p_holmm")
    with pytest.raises(MetricPathError, match="did you mean 'p_holm'"):
        resolve_in_schema(schema, steps, prefix="cmp")


# ------------------------------------------------------------------------------------ keys the data know

BAKEOFF = """\
certa: 1
name: bakeoff-keys
seed: 5
inputs:
  decisions: {path: data/decisions.csv}
stages:
  - id: cmp
    use: bakeoff.compare@1.1.0
    with: {input: decisions, bootstrap: {replicates: 200}}
gates:
  - id: leader
    metric: METRIC
    equals: vendor-a
"""


@pytest.fixture
def bakeoff_folder(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    shutil.copy(ROOT / "specs" / "vendor-bakeoff" / "data" / "decisions.csv", tmp_path / "data" / "decisions.csv")
    return tmp_path


def test_a_bucket_the_input_does_not_hold_is_refused_before_any_stage_runs(bakeoff_folder: Path) -> None:
    spec = write_spec(bakeoff_folder, BAKEOFF.replace("METRIC", "cmp.buckets.e6.leader"))
    plan = load_plan(spec)  # validate cannot know the buckets: the path is well formed
    with Ledger.open(bakeoff_folder / "ledger.db") as ledger:
        with pytest.raises(SpecError) as info:
            run(spec, ledger=ledger)
        assert ledger.head()[0] == 0  # nothing recorded
    error = info.value
    assert error.exit_code == 2 and (error.line, error.column, error.path) == (12, 13, "gates[0].metric")
    assert "'e6' in 'cmp.buckets.e6' is not in column 'bucket' of input 'decisions'" in str(error)
    assert str(error).endswith("did you mean 'e5'?")
    with pytest.raises(SpecError, match="did you mean 'e5'"):  # certa batch's workers call execute
        execute(plan, load_tables(plan))


def test_a_vendor_typo_suggests_the_real_vendor(bakeoff_folder: Path) -> None:
    spec = write_spec(bakeoff_folder, BAKEOFF.replace("METRIC", "cmp.buckets.e5.vendors.vendr-a.vendor"))
    with pytest.raises(SpecError, match=r"'vendr-a' .* column 'vendor' of input 'decisions' .*did you mean 'vendor-a'"):
        run(spec)


def test_a_renamed_bucket_column_is_where_the_keys_come_from(bakeoff_folder: Path) -> None:
    csv = bakeoff_folder / "data" / "decisions.csv"
    header, rest = csv.read_text().split("\n", 1)
    csv.write_text(header.replace("bucket", "task") + "\n" + rest)
    text = BAKEOFF.replace("METRIC", "cmp.buckets.e5.leader").replace("input: decisions,", "input: decisions, "
                                                                       "columns: {bucket: task},")
    plan = load_plan(write_spec(bakeoff_folder, text))
    assert [k.key for k in plan.gates[0].data_keys] == ["e5"]
    check_data_keys(plan, load_tables(plan))  # e5 is in column 'task'
    wrong = load_plan(write_spec(bakeoff_folder, text.replace("buckets.e5", "buckets.all")))
    with pytest.raises(SpecError, match="column 'task'"):
        check_data_keys(wrong, load_tables(wrong))


def test_a_vendor_is_checked_within_its_bucket(bakeoff_folder: Path) -> None:
    """vendor-c bids in other buckets but not in e5: the gate would only fail later with "metric not found"."""
    spec = write_spec(bakeoff_folder, BAKEOFF.replace("METRIC", "cmp.buckets.e5.vendors.vendor-c.vendor"))
    with pytest.raises(SpecError, match=r"'vendor-c' .* column 'vendor' of input 'decisions' where column 'bucket' is "
                                        r"'e5' \(it holds: vendor-a, vendor-b\)"):
        run(spec)
    metric = "cmp.buckets.rag_docs.vendors.vendor-c.vendor"
    plan = load_plan(write_spec(bakeoff_folder, BAKEOFF.replace("METRIC", metric)))
    check_data_keys(plan, load_tables(plan))


def test_certa_run_refuses_a_bucket_typo_before_opening_the_ledger(bakeoff_folder: Path) -> None:
    from click.testing import CliRunner

    from certa.cli import main
    spec = write_spec(bakeoff_folder, BAKEOFF.replace("METRIC", "cmp.buckets.e6.leader"))
    ledger = bakeoff_folder / "ledger.db"
    result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(ledger)])
    assert result.exit_code == 2 and "did you mean 'e5'?" in result.output
    assert not ledger.exists() and "Traceback" not in result.output


def test_a_gate_that_fails_by_one_ulp_never_reads_as_equal(small_spec: Path) -> None:
    """``0.8499999999999999 < 0.85`` is shown with the digits that decided, in the run's summary and in ``certa
    show``, never as ``0.85 < 0.85``."""
    from certa.engine.core.gates import format_gate_numbers, gate_display
    from certa.engine.services.presentation.markdown import certificate_markdown
    assert format_gate_numbers(0.8499999999999999, 0.85) == ("0.8499999999999999", "0.85")
    assert format_gate_numbers(41.78, 40) == ("41.78", "40")
    assert format_gate_numbers(0.123456789, 0.2) == ("0.123457", "0.2")
    gate = {"id": "g", "metric": "pac.joint_guarantee.level", "value": 0.8499999999999999,
            "threshold": {"min": 0.85}, "passed": False, "reason": "0.8499999999999999 < 0.85"}
    assert gate_display(gate)["value"] == "0.8499999999999999" and gate_display(gate)["threshold"] == "min 0.85"
    certificate = run(small_spec).certificate
    certificate["content"]["gates"] = [gate]
    assert "| 0.8499999999999999 | min 0.85 |" in certificate_markdown(certificate)


def test_without_a_bucket_column_the_one_bucket_is_named(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "decisions.csv").write_text("vendor,rsi\na,0.1\na,0.2\nb,0.3\nb,0.1\n", encoding="utf-8")
    spec = write_spec(tmp_path, BAKEOFF.replace("METRIC", "cmp.buckets.al.leader"))
    with pytest.raises(SpecError) as info:
        run(spec)
    message = str(info.value)
    assert "is not in input 'decisions', which has no column 'bucket' (so its one key is 'all')" in message
    assert message.endswith("did you mean 'all'?") and "it holds" not in message
