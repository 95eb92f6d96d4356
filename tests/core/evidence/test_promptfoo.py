"""promptfoo results that cannot fool certa: one file holding two providers' results pairs by test and prompt
(promptfoo's ``promptIdx`` is a provider × prompt column), an ambiguous provider selection is refused, and an
input is never paired with itself. The exports are built in promptfoo's own shape (``promptfoo_export``); every
expected number is computed here from the raw lines, never through certa's reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from certa.engine import InputError, run
from certa.engine.core.evidence import pair_records, read_mapped_table, read_promptfoo_jsonl, TableMapping
from certa.engine.services.audit import replay
from certa.ledger import Ledger
from tests.core.evidence.promptfoo_export import EVAL_ID, PROMPTS, evaluation, provider, write_jsonl

N_TESTS = 120
"""Tests in the evaluation: 2 prompts × 120 tests = 240 paired items, over the release profile's floor of 200."""

PROVIDERS = (provider("openai:gpt-4o-mini"), provider("ollama:chat:llama3.1:8b", "llama-8b"))
"""A provider without a label (promptfoo names it by its id) and one with a label."""


def passes(seed: int) -> list[list[list[bool]]]:
    """``passes[k][j][t]``: provider k passes test t under prompt j (about 80 % and 70 %)."""
    rng = np.random.default_rng(seed)
    return [[(rng.random(N_TESTS) < chance).tolist() for _ in PROMPTS] for chance in (0.8, 0.7)]


PASSES = passes(5)


def two_provider_file(folder: Path, providers: tuple[dict[str, str], ...] = PROVIDERS) -> Path:
    """One ``promptfoo eval --output results.jsonl`` of two providers, two prompts, ``N_TESTS`` tests."""
    return write_jsonl(folder / "results.jsonl", evaluation(providers, PASSES))


def raw_success(path: Path, selected: dict[str, str]) -> dict[tuple[int, str], float]:
    """(testIdx, prompt label) -> success of provider ``selected``, read with the standard library."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {(line["testIdx"], line["prompt"]["label"]): float(line["success"]) for line in lines
            if line["provider"] == selected}


def spec(folder: Path, read: dict[str, dict[str, Any]], *, profile: str = "dev",
         paths: tuple[str, str] = ("results.jsonl", "results.jsonl")) -> Path:
    """A ``paired.metric_delta`` spec on the metric ``success``; both inputs read promptfoo JSON Lines."""
    inputs = {arm: {"path": path, "format": "promptfoo-jsonl", **({"read": read[arm]} if arm in read else {})}
              for arm, path in zip(("baseline", "subject"), paths)}
    document = {"certa": 1, "name": "promptfoo-two-providers", "seed": 3, "profile": profile, "inputs": inputs,
                "stages": [{"id": "delta", "use": "paired.metric_delta",
                            "with": {"baseline": "baseline", "subject": "subject", "metric": "success",
                                     "margin": 0.2}}]}
    path = folder / "spec.yaml"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


# ------------------------------------------------------------------------- one file, two providers


def test_one_file_of_two_providers_pairs_by_test_and_prompt() -> None:
    """promptfoo numbers columns provider by provider (promptIdx 0-1 for the first provider, 2-3 for the second):
    by (testIdx, promptIdx) nothing pairs; by test and the prompt's label every item does."""
    raw = "".join(json.dumps(line) + "\n" for line in evaluation(PROVIDERS, PASSES)).encode()
    baseline = read_promptfoo_jsonl(raw, provider="llama-8b", name="baseline")
    subject = read_promptfoo_jsonl(raw, provider="openai:gpt-4o-mini", name="subject")
    assert set(baseline.keys["promptIdx"].tolist()) == {2, 3} and set(subject.keys["promptIdx"].tolist()) == {0, 1}
    paired = pair_records(baseline, subject)
    report = paired.report
    assert report.key_fields == ("testIdx", "prompt.label")
    assert (report.n_baseline, report.n_subject, report.n_paired) == (2 * N_TESTS, 2 * N_TESTS, 2 * N_TESTS)
    assert report.complete
    # the same test under the same prompt on both sides, in the baseline's order
    assert paired.baseline.keys["testIdx"].tolist() == paired.subject.keys["testIdx"].tolist()
    assert (paired.baseline.keys["promptIdx"] - 2).tolist() == paired.subject.keys["promptIdx"].tolist()
    tests, prompts = paired.baseline.keys["testIdx"].tolist(), (paired.baseline.keys["promptIdx"] - 2).tolist()
    for arm, k in (("baseline", 1), ("subject", 0)):
        expected = [float(PASSES[k][j][t]) for t, j in zip(tests, prompts)]
        assert getattr(paired, arm).metrics["success"].tolist() == expected
    labels = {label or template for template, label in PROMPTS}
    assert set(paired.baseline.keys_across_models["prompt.label"].tolist()) == labels


def test_one_file_of_two_providers_certifies_in_release_and_replays(tmp_path: Path) -> None:
    path = two_provider_file(tmp_path)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = run(spec(tmp_path, {"baseline": {"provider": "llama-8b"},
                                     "subject": {"provider": "openai:gpt-4o-mini"}}, profile="release"),
                     ledger=ledger)
        outcome = replay(ledger, result.run_id)
        assert outcome.reproduced, outcome.changes
    out = result.certificate["content"]["stages"]["delta"]
    base, subj = raw_success(path, PROVIDERS[1]), raw_success(path, PROVIDERS[0])
    assert base.keys() == subj.keys() and len(base) == 2 * N_TESTS
    keys = sorted(base)
    b, s = np.array([base[k] for k in keys]), np.array([subj[k] for k in keys])
    assert out["pairing"]["key_fields"] == ["testIdx", "prompt.label"]
    assert out["n_paired"] == out["pairing"]["paired"] == 2 * N_TESTS
    assert out["baseline_mean"] == pytest.approx(b.mean()) and out["subject_mean"] == pytest.approx(s.mean())
    assert out["table"] == {"both": int(((s == 1) & (b == 1)).sum()), "subject_only": int(((s == 1) & (b == 0)).sum()),
                            "baseline_only": int(((s == 0) & (b == 1)).sum()),
                            "neither": int(((s == 0) & (b == 0)).sum())}
    assert {m["field"]: m["value"] for m in out["sources"]["baseline"]["models"]} == {
        "provider.id": "ollama:chat:llama3.1:8b", "provider.label": "llama-8b"}
    assert {m["field"]: m["value"] for m in out["sources"]["subject"]["models"]} == {
        "provider.id": "openai:gpt-4o-mini", "provider.label": "openai:gpt-4o-mini"}


def test_files_of_one_provider_each_still_pair_by_column(tmp_path: Path) -> None:
    """Two single-provider files (promptIdx 0-1 on both sides) pair by (testIdx, promptIdx) as before, so a
    certificate recorded from such files replays unchanged."""
    for name, k in (("base.jsonl", 1), ("subj.jsonl", 0)):
        write_jsonl(tmp_path / name, evaluation([PROVIDERS[k]], [PASSES[k]], eval_id=f"eval-{k}"))
    baseline = read_promptfoo_jsonl(tmp_path / "base.jsonl")
    subject = read_promptfoo_jsonl(tmp_path / "subj.jsonl")
    paired = pair_records(baseline, subject)
    assert paired.report.key_fields == ("testIdx", "promptIdx") and paired.report.n_paired == 2 * N_TESTS


def test_prompts_that_differ_between_providers_are_not_paired() -> None:
    """The providers ran differently labelled prompts (promptfoo's per-provider ``prompts:``): no test pairs, and
    the report names the keys, test and label, of both sides."""
    base = evaluation([PROVIDERS[1]], [PASSES[1]], prompts=[("Q: {{question}}\nA:", "llama-chat")])
    subj = evaluation([PROVIDERS[0]], [PASSES[0]], prompts=[("Q: {{question}}\nA:", "gpt-chat")])
    for line in base:
        line["promptIdx"] = 1  # the second provider's column in one evaluation
    raw = "".join(json.dumps(line) + "\n" for line in base + subj).encode()
    paired = pair_records(read_promptfoo_jsonl(raw, provider="llama-8b"),
                          read_promptfoo_jsonl(raw, provider="openai:gpt-4o-mini"))
    assert paired.report.n_paired == 0 and paired.report.key_fields == ("testIdx", "prompt.label")
    assert paired.report.unmatched_baseline[0] == (0, "llama-chat")
    assert paired.report.unmatched_subject[0] == (0, "gpt-chat")


# ------------------------------------------------------------------------- provider selection


SHARED_ID = (provider("openai:gpt-4o", "gpt-4o-t0"), provider("openai:gpt-4o", "gpt-4o-t1"))
"""Two providers of one id (the same model at two temperatures), told apart by their labels."""


def test_a_provider_id_shared_by_two_providers_is_refused_naming_both(tmp_path: Path) -> None:
    raw = two_provider_file(tmp_path, SHARED_ID).read_bytes()
    with pytest.raises(InputError) as info:
        read_promptfoo_jsonl(raw, provider="openai:gpt-4o", name="input 'baseline'")
    message = str(info.value)
    assert "read.provider 'openai:gpt-4o' names 2 providers" in message
    assert "id 'openai:gpt-4o' label 'gpt-4o-t0'" in message and "id 'openai:gpt-4o' label 'gpt-4o-t1'" in message
    t1 = read_promptfoo_jsonl(raw, provider="gpt-4o-t1")
    assert dict(t1.provenance.models) == {"provider.id": "openai:gpt-4o", "provider.label": "gpt-4o-t1"}
    assert t1.metrics["success"].tolist() == [float(PASSES[1][j][t]) for t in range(N_TESTS) for j in range(2)]


CROSSED = (provider("z-prov", "first"), provider("openai:gpt-4o", "z-prov"))
"""One provider's id is another's label (the adversarial sweep's case)."""


def test_a_provider_is_selected_explicitly_by_id_or_by_label(tmp_path: Path) -> None:
    """'z-prov' is one provider's id and the other's label: the plain value is refused as naming both, and
    read.provider: {id: ...} or {label: ...} selects each unambiguously (certa took the first match before)."""
    raw = two_provider_file(tmp_path, CROSSED).read_bytes()
    with pytest.raises(InputError, match=r"read.provider 'z-prov' names 2 providers .* select one explicitly, "
                                         r"read.provider: \{id: ...\} or \{label: ...\}"):
        read_promptfoo_jsonl(raw, provider="z-prov")
    by_id = read_promptfoo_jsonl(raw, provider={"id": "z-prov"})
    by_label = read_promptfoo_jsonl(raw, provider={"label": "z-prov"})
    assert dict(by_id.provenance.models) == {"provider.id": "z-prov", "provider.label": "first"}
    assert dict(by_label.provenance.models) == {"provider.id": "openai:gpt-4o", "provider.label": "z-prov"}
    with pytest.raises(InputError, match=r"read.provider 'id: openai:gpt-4o' names 2 providers"):
        read_promptfoo_jsonl(two_provider_file(tmp_path, SHARED_ID).read_bytes(), provider={"id": "openai:gpt-4o"})
    path = spec(tmp_path, {"baseline": {"provider": {"id": "z-prov"}}, "subject": {"provider": {"label": "z-prov"}}})
    two_provider_file(tmp_path, CROSSED)
    assert run(path).certificate["content"]["stages"]


def test_a_shared_id_no_longer_certifies_the_baseline_against_itself(tmp_path: Path) -> None:
    """Both inputs selected by the shared id: certa took the first provider for both and certified it against
    itself (PASS); now the selection is refused, and by label the two providers are compared."""
    two_provider_file(tmp_path, SHARED_ID)
    by_id = {arm: {"provider": "openai:gpt-4o"} for arm in ("baseline", "subject")}
    with pytest.raises(InputError, match=r"input 'baseline': read\.provider 'openai:gpt-4o' names 2 providers"):
        run(spec(tmp_path, by_id))
    result = run(spec(tmp_path, {"baseline": {"provider": "gpt-4o-t0"}, "subject": {"provider": "gpt-4o-t1"}}))
    out = result.certificate["content"]["stages"]["delta"]
    assert out["n_paired"] == 2 * N_TESTS
    assert out["baseline_mean"] == pytest.approx(np.mean(PASSES[0])) and out["subject_mean"] == pytest.approx(
        np.mean(PASSES[1]))


def test_a_file_of_several_providers_names_the_option_to_select_one(tmp_path: Path) -> None:
    raw = two_provider_file(tmp_path).read_bytes()
    with pytest.raises(InputError, match=r"r\.jsonl: results of 2 providers \(id 'ollama:chat:llama3\.1:8b' label "
                                         r"'llama-8b', id 'openai:gpt-4o-mini' \(no label\)\); select one with "
                                         r"read\.provider"):
        read_promptfoo_jsonl(raw, name="r.jsonl")
    with pytest.raises(InputError, match=r"no results of provider 'gpt-4o' \(read\.provider; providers: id "):
        read_promptfoo_jsonl(raw, provider="gpt-4o", name="r.jsonl")


# ------------------------------------------------------------------------- an input paired with itself


def test_an_input_is_never_paired_with_itself(tmp_path: Path) -> None:
    """The same provider selected on both sides of one file, or one file given twice: the same records, which
    certify nothing; refused, with no option to allow it."""
    two_provider_file(tmp_path)
    same = {arm: {"provider": "llama-8b"} for arm in ("baseline", "subject")}
    with pytest.raises(InputError, match=r"input 'baseline' and input 'subject' are the same records"):
        run(spec(tmp_path, same))
    (tmp_path / "copy.jsonl").write_bytes((tmp_path / "results.jsonl").read_bytes())
    with pytest.raises(InputError, match=r"are the same records"):
        run(spec(tmp_path, same, paths=("results.jsonl", "copy.jsonl")))
    table = read_mapped_table(b"id,acc\na,1\nb,0\n", TableMapping(item_id="id", metrics=("acc",)), fmt="csv",
                              name="A")
    with pytest.raises(InputError, match=r"A is both the baseline and the subject: a comparison of results with "
                                         r"themselves certifies nothing, and certa has no option to allow it"):
        pair_records(table, table)


def test_two_tables_of_equal_bytes_are_two_models_that_agree() -> None:
    """A table of ids and scores holds only the results: two models that answer every item alike write the same
    bytes, and their comparison (a difference of 0) is what the data support."""
    mapping = TableMapping(item_id="id", metrics=("acc",))
    raw = b"id,acc\na,1\nb,0\nc,1\n"
    paired = pair_records(read_mapped_table(raw, mapping, fmt="csv", name="A"),
                          read_mapped_table(raw, mapping, fmt="csv", name="B"))
    assert paired.report.n_paired == 3


def test_two_providers_of_one_file_are_not_the_same_records(tmp_path: Path) -> None:
    raw = two_provider_file(tmp_path).read_bytes()
    first, second = (read_promptfoo_jsonl(raw, provider=p) for p in ("llama-8b", "openai:gpt-4o-mini"))
    assert pair_records(first, second).report.n_paired == 2 * N_TESTS


def test_the_eval_id_is_recorded() -> None:
    raw = "".join(json.dumps(line) + "\n" for line in evaluation(PROVIDERS, PASSES)).encode()
    records = read_promptfoo_jsonl(raw, provider="llama-8b")
    assert dict(records.provenance.details) == {"evalId": EVAL_ID}


def test_a_self_comparison_recorded_before_the_guard_cannot_replay(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate an older certa recorded from one input paired with itself (simulated by recording with the
    guard off) is not reproduced: its replay is CANNOT REPLAY, naming the reason; the certificate itself stays as
    it was recorded."""
    import certa.engine.core.evidence.pairing as pairing

    two_provider_file(tmp_path)
    same = {arm: {"provider": "llama-8b"} for arm in ("baseline", "subject")}
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        with monkeypatch.context() as patched:
            patched.setattr(pairing, "_refuse_the_same_records", lambda baseline, subject: None)
            result = run(spec(tmp_path, same), ledger=ledger)
        out = result.certificate["content"]["stages"]["delta"]
        assert out["difference"]["estimate"] == 0.0 and out["noninferiority"]["noninferior"]
        outcome = replay(ledger, result.run_id)
    assert outcome.outcome == "CANNOT REPLAY"
    assert "input 'baseline' and input 'subject' are the same records" in outcome.note
