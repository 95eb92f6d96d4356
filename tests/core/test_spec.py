"""Spec loading and validation: every bad spec is refused with file, line, column, key path and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from certa.engine import SpecError, load_plan
from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.core.stages import REGISTRY

from tests.conftest import SMALL_SPEC, write_spec


def _error(spec: Path | str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_plan(spec)
    return info.value


def test_valid_spec_resolves_defaults_and_hashes_knobs(small_spec: Path) -> None:
    plan = load_plan(small_spec)
    knobs = plan.stages[0].knobs
    assert knobs["replicates"] == 500
    assert knobs["confidence_level"] == 0.95 and knobs["method"] == "bca" and knobs["scheme"] == "uniform"
    assert knobs["columns"]["window_id"] == "window_id"
    assert plan.knobs_hash == canonical_sha256(plan.knobs)
    assert plan.knobs["stages"][0]["version"] == REGISTRY["paired.ppl_ratio"].version  # the newest, unpinned
    assert plan.profile == "dev"


def test_knobs_hash_changes_with_a_default_made_explicit_only_if_value_changes(small_spec: Path) -> None:
    explicit = small_spec.read_text().replace("replicates: 500}", "replicates: 500, confidence_level: 0.95}")
    changed = small_spec.read_text().replace("replicates: 500}", "replicates: 500, confidence_level: 0.9}")
    base = load_plan(small_spec).knobs_hash
    assert load_plan(explicit).knobs_hash == base
    assert load_plan(changed).knobs_hash != base


def test_unknown_key_names_line_column_path_and_suggestion(tmp_path: Path) -> None:
    text = SMALL_SPEC.replace("replicates: 500}", "replicate: 500}")
    error = _error(write_spec(tmp_path, text))
    assert error.line == 11 and error.column is not None
    assert error.path == "stages[0].with.replicate"
    assert "did you mean 'replicates'" in str(error)
    assert str(tmp_path / "spec.yaml") in str(error)


def test_unknown_top_level_key_suggests_closest(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("profile: dev", "profle: dev")))
    assert error.line == 4 and "did you mean 'profile'" in str(error)


def test_wrong_type_says_what_was_expected(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("replicates: 500", 'replicates: "many"')))
    assert error.path == "stages[0].with.replicates"
    assert "expected integer" in str(error) and "'many'" in str(error)


def test_out_of_range_value_is_refused(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("replicates: 500", "replicates: 5")))
    assert error.path == "stages[0].with.replicates" and "100" in str(error)


def test_bad_yaml_reports_position(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("seed: 7", "seed: [7")))
    assert "not valid YAML" in str(error) and error.line is not None


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("seed: 7", "seed: 7\nseed: 8")))
    assert "duplicate key 'seed'" in str(error) and error.line == 4


def test_missing_required_key(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("seed: 7\n", "")))
    assert "missing required key" in str(error) and "seed" in str(error)


def test_undeclared_input_is_refused(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("subject: subject,", "subject: candidate,")))
    assert error.path == "stages[0].with.subject" and "not a declared input" in str(error)


def test_unknown_stage_type_suggests_registered_one(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("paired.ppl_ratio", "paired.ppl_ration")))
    assert error.path == "stages[0].use" and "did you mean 'paired.ppl_ratio'" in str(error)


def test_path_may_not_leave_the_spec_folder(tmp_path: Path) -> None:
    folder = tmp_path / "inner"
    folder.mkdir()
    error = _error(write_spec(folder, SMALL_SPEC.replace("data/subject.csv", "../../etc/passwd")))
    assert "leaves the spec's folder" in str(error) and error.path == "inputs.subject.path"


def test_absolute_path_in_spec_is_refused(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("data/subject.csv", "/etc/passwd")))
    assert "absolute paths are not allowed" in str(error)


def test_symlink_escaping_the_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "inner"
    (folder / "data").mkdir(parents=True)
    outside = tmp_path / "secret.csv"
    outside.write_text("a\n1\n")
    (folder / "data" / "subject.csv").symlink_to(outside)
    error = _error(write_spec(folder, SMALL_SPEC))
    assert "leaves the spec's folder" in str(error)


def test_yaml_tags_that_would_build_objects_are_refused(tmp_path: Path) -> None:
    text = SMALL_SPEC.replace("seed: 7", "seed: !!python/object/apply:os.system ['echo hi']")
    error = _error(write_spec(tmp_path, text))
    assert "not valid YAML" in str(error)


def test_gate_needs_exactly_one_kind_of_threshold(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("    max: 1.05", "    max: 1.05\n    equals: 1")))
    assert "exactly one kind of threshold" in str(error)


def test_gate_on_unknown_stage_is_refused(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("metric: ratio.", "metric: ration.")))
    assert error.path == "gates[0].metric" and "not a stage of this spec" in str(error)
    assert (error.line, error.column) == (14, 13) and str(error).endswith("did you mean 'ratio'?")


def test_gate_on_a_misspelt_output_is_refused_like_a_misspelt_knob(tmp_path: Path) -> None:
    """Before: validate accepted it and the run failed later with "metric not found" and no suggestion."""
    error = _error(write_spec(tmp_path, SMALL_SPEC.replace("display_ci[1]", "ratio_vs_baselin")))
    assert str(error) == (f"{tmp_path / 'spec.yaml'}:14:13: gates[0].metric: no output 'ratio_vs_baselin' in "
                          "'ratio.token_perplexity' (outputs of paired.ppl_ratio@"
                          f"{REGISTRY['paired.ppl_ratio'].version}); did you mean 'ratio_vs_baseline'?")


def test_gate_fields_for_data_keys_leave_the_knobs_and_their_hash_alone(small_spec: Path) -> None:
    plan = load_plan(small_spec)
    assert plan.gates[0].data_keys == () and (plan.gates[0].line, plan.gates[0].column) == (14, 13)
    assert plan.knobs["gates"] == [{"id": "no-regression", "metric": "ratio.token_perplexity.display_ci[1]", "max": 1.05}]


def test_duplicate_stage_ids_are_refused(tmp_path: Path) -> None:
    doubled = SMALL_SPEC.replace("gates:", "  - id: ratio\n    use: paired.ppl_ratio\n"
                                           "    with: {baseline: baseline, subject: subject}\ngates:")
    error = _error(write_spec(tmp_path, doubled))
    assert "used twice" in str(error) and error.path == "stages[1].id"


def test_spec_as_dict_and_text_resolve_like_the_file(small_spec: Path) -> None:
    import yaml

    from_file = load_plan(small_spec)
    from_text = load_plan(small_spec.read_text())
    from_dict = load_plan(yaml.safe_load(small_spec.read_text()))
    assert from_file.knobs_hash == from_text.knobs_hash == from_dict.knobs_hash
    assert from_file.spec_sha256 == from_text.spec_sha256


def test_list_valued_input_knobs_are_checked_at_load(tmp_path: Path) -> None:
    text = """\
certa: 1
name: merge
seed: 1
inputs:
  s1: {path: s1.jsonl}
stages:
  - id: merged
    use: bakeoff.merge
    with: {shards: [s1, s2]}
"""
    error = _error(write_spec(tmp_path, text))
    assert error.path == "stages[0].with.shards[1]" and "'s2' is not a declared input" in str(error)
    duplicated = _error(write_spec(tmp_path, text.replace("[s1, s2]", "[s1, s1]")))
    assert duplicated.path == "stages[0].with.shards" and "unique" in str(duplicated)


def test_yaml_aliases_are_refused_so_an_alias_bomb_cannot_reach_hashing(tmp_path: Path) -> None:
    bomb = SMALL_SPEC.replace("description", "x") + 'x0: &a ["lol", "lol"]\nx1: &b [*a, *a]\n'
    error = _error(write_spec(tmp_path, bomb))
    assert "anchors and aliases" in str(error) and error.line == 16  # the first anchor


def test_an_oversized_spec_is_refused(tmp_path: Path) -> None:
    error = _error(write_spec(tmp_path, SMALL_SPEC + "#" * 1_000_001 + "\n"))
    assert "larger than" in str(error)


def test_monitor_must_name_the_full_run_id_so_replays_cannot_resolve_another_run(tmp_path: Path) -> None:
    text = """\
certa: 1
name: monitor
seed: 1
inputs:
  production: {path: p.csv}
stages:
  - id: watch
    use: conformal.monitor
    with: {input: production, report_run: 3f9c, report_stage: pac}
"""
    error = _error(write_spec(tmp_path, text))
    assert error.path == "stages[0].with.report_run" and "does not match" in str(error)
