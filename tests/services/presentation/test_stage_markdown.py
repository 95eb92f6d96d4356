"""``certa show``'s Markdown of each stage is the presentation layer's (``markdown_of``): every stage type that
rendered its own Markdown in the core still has a renderer, at every registered version, and the core renders
nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from certa.engine.core.stages import REGISTRY
from certa.engine.services.presentation.markdown import certificate_markdown
from certa.engine.services.presentation.stages import markdown_of

from tests.source_nodes import source_nodes

CORE = Path(__file__).resolve().parents[3] / "engine" / "core"

WITH_MARKDOWN = frozenset({"bakeoff.compare", "bakeoff.merge", "conformal.monitor", "conformal.pac_report",
                           "model.windows", "paired.metric_delta", "paired.ppl_ratio", "sequential.diff",
                           "paired.suite_delta"})
"""The stage types whose every version had a Markdown renderer (``StageType.render_markdown``) in the core, and
those born with one in the presentation layer (``paired.suite_delta``)."""


@pytest.mark.parametrize("ref", [stage.ref for stage in REGISTRY])
def test_every_version_that_rendered_markdown_still_has_a_renderer(ref: str) -> None:
    stage = REGISTRY.resolve(ref)
    render = markdown_of(stage.name, stage.version)
    assert (render is not None) == (stage.name in WITH_MARKDOWN), ref
    assert render is None or callable(render)


def test_no_renderer_for_an_unknown_type_or_version() -> None:
    assert markdown_of("no.such_stage", "1.0.0") is None
    assert markdown_of("sequential.diff", "9.9.9") is None
    assert markdown_of("?", "?") is None


def test_a_stage_without_a_renderer_shows_its_outputs_as_a_table() -> None:
    certificate = {
        "issued": {"run_id": "r" * 32, "time_utc": "2026-01-01T00:00:00Z", "user": "u", "host": "h"},
        "content_sha256": "0" * 64,
        "content": {"spec": {"name": "s", "description": "", "sha256": "1" * 64, "profile": "dev"},
                    "verdict": "PASS", "knobs_hash": "2" * 64, "seed": {"root": 0}, "inputs": [], "gates": [],
                    "versions": {}, "results": {},
                    "knobs": {"stages": [{"id": "g", "use": "bakeoff.gate", "version": "1.1.0"},
                                         {"id": "x", "use": "sequential.diff", "version": "9.9.9"}]},
                    "stages": {"g": {"passed": True}, "x": {"n": 3}}},
    }
    text = certificate_markdown(certificate)
    assert "| `passed` | true |" in text and "| `n` | 3 |" in text


def test_the_core_renders_nothing() -> None:
    """No module under ``engine/core`` defines a ``render*`` function or method, or imports the presentation layer;
    ``StageType`` has no Markdown field."""
    found = []
    for path in sorted(CORE.rglob("*.py")):
        for node in source_nodes(path):
            where = f"{path.relative_to(CORE)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.lstrip("_").startswith("render"):
                found.append(f"{where} defines {node.name}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("certa.engine.services"):
                found.append(f"{where} imports {node.module}")
            elif isinstance(node, ast.Import):
                found += [f"{where} imports {a.name}" for a in node.names if a.name.startswith("certa.engine.services")]
    assert found == []
    from certa.engine.core.stages.base import StageType
    assert "render_markdown" not in StageType.__dataclass_fields__


def _windows_outputs() -> dict:
    """``model.windows`` 1.2.0 outputs of a local reference (baseline) and a served model (subject)."""
    local = {"input": "reference", "kind": "local", "manifest_sha256": "a" * 64, "model_type": "llama",
             "parameters": 372352, "signature": {"status": "unsigned"}, "special_tokens": {"before": [], "after": []},
             "tokenizer_sha256": "t" * 64, "usage": {"forward_passes": 3, "model_calls": 1, "tokens": 300}}
    served = {"input": "served", "kind": "endpoint", "manifest_sha256": "c" * 64, "model_type": None,
              "parameters": None, "signature": None, "special_tokens": {"before": [], "after": []},
              "tokenizer_sha256": "t" * 64, "claims": {"served_name": "tiny-llama", "server_version": "0.32.0"},
              "transcript": {"name": "windows.subject_transcript", "rows": 7, "sha256": "d" * 64},
              "usage": {"requests": 7, "retries": 0, "reused": 0, "tokens": 600, "bytes_sent": 1, "bytes_received": 2}}
    return {"models": {"baseline": local, "subject": served}, "nll_per_unit": {"baseline": 4.02, "subject": 4.02},
            "unit": "tokens", "tokenizers_match": True, "windows": {"count": 3, "scored": 300, "seq_len": 128,
                                                                    "stride": 64},
            "runtime": {"device": "cpu", "threads": 1, "batch_size": 16, "dtype": "float32",
                        "accumulation": "float64", "libraries": {}},
            "text": {"input": "text", "column": "text", "documents": 2, "sha256": "e" * 64},
            "tables": {arm: {"name": f"windows.{arm}", "rows": 3, "sha256": "f" * 64} for arm in ("baseline", "subject")}}


def test_model_windows_states_a_served_arms_claims_and_transcript_apart_from_what_was_hashed() -> None:
    from certa.engine.services.presentation.html.view import StageInput
    from certa.engine.services.presentation.stages.model_windows import how_to_read, section

    outputs = _windows_outputs()
    text = markdown_of("model.windows", "1.2.0")(outputs)
    assert "| subject (served) | cccccccccccc | endpoint | not stated | tttttttttttt | none | 4.02 |" in text
    assert "| baseline (reference) | aaaaaaaaaaaa | llama | 372,352 |" in text
    assert ("Its server claims (not verified: a served model's weights cannot be hashed from outside): served name "
            "tiny-llama; server version 0.32.0. Transcript "
            f"windows.subject_transcript: 7 requests and answers, sha256 {'d' * 64}") in text
    tables = {t.caption: t for t in section(StageInput("windows", outputs)).tables}
    served = tables["Served model (subject): what its server claims, and the transcript"]
    assert ("claimed by the server (not verified): served name", "tiny-llama") in served.rows and ("transcript SHA-256", "d" * 64) in served.rows
    assert tables["Models"].rows[0] == ("kind", "local", "endpoint")
    assert "the served subject (an endpoint" in how_to_read(outputs)[0]
    local = {**outputs, "models": {arm: outputs["models"]["baseline"] for arm in ("baseline", "subject")}}
    assert "Served model" not in markdown_of("model.windows", "1.2.0")(local)
    assert "both local models" in how_to_read(local)[0]


def test_suite_delta_markdown_has_a_row_per_task_the_pooled_difference_and_the_claim() -> None:
    from tests.suite_delta_support import suite_outputs

    outputs = suite_outputs(["NONINFERIOR", "INFERIOR", "UNDECIDED"], margins=[0.05, 0.02, 0.1])
    outputs["which_differ"]["differing"] = ["task_01"]
    text = markdown_of("paired.suite_delta", "1.0.0")(outputs)
    header, rule, *rows = text.split("\n\n")[0].split("\n")
    assert header == ("| task | units | baseline | subject | Δ | 95% CI (tango_score) | margin | decision | adjusted p "
                      "| differs |") and rule.count("|") == header.count("|")
    assert rows == [f"| {row['task']} | 200 | 0.7 | 0.69 | -0.01 | [-0.04, 0.02] | {row['margin']:g} | "
                    f"{row['decision']} | 1 | no |" for row in outputs["rows"]]
    assert ("Unit of analysis: 600 items (no repeats) in 3 tasks; pooled (macro) difference -0.01, 95% CI [-0.02, 0] "
            "(baseline 0.7, subject 0.69); non-inferior on every task: INFERIOR; tasks that differ "
            "(benjamini_hochberg, α = 0.05): task_01.") in text
    unclaimed = markdown_of("paired.suite_delta", "1.0.0")(suite_outputs([None, None]))
    assert "| margin |" not in unclaimed and "no margin: no non-inferiority claim" in unclaimed
    assert "(benjamini_hochberg, α = 0.05): none." in unclaimed


def test_model_windows_names_who_signed_a_certificate_or_sigstore_signed_model() -> None:
    """Issue 35: a certificate or Sigstore check records its signer; the Markdown and the reading say who signed, a
    key check reads as before (the HTML report's Models table: tests/core/models/test_signature.py, in Chromium)."""
    from certa.engine.services.presentation.stages.model_windows import how_to_read

    outputs = _windows_outputs()
    local = outputs["models"]["baseline"]
    certificate = {"status": "verified", "mode": "certificate", "signer": "CN=model signer", "chain_sha256": ["0" * 64]}
    sigstore = {"status": "failed", "mode": "sigstore", "signer": "release@example.org",
                "issuer": "https://accounts.example.org", "trust_config_sha256": "1" * 64, "reason": "no log entry"}
    signed = {**outputs, "models": {"baseline": {**local, "signature": certificate},
                                    "subject": {**local, "signature": sigstore}}}
    text = markdown_of("model.windows", "1.2.0")(signed)
    assert "| verified (certificate CN=model signer) |" in text
    assert "| failed (Sigstore release@example.org, issuer https://accounts.example.org) |" in text
    assert "Signatures: baseline verified (certificate CN=model signer), subject failed (Sigstore" in \
        how_to_read(signed)[2]
    assert how_to_read(outputs)[2].startswith("Signatures: baseline unsigned, ")  # a record without mode: as before
