"""How ``model.windows`` reads: which two models were scored (by manifest, tokenizer and signature), on which
windows of which text, each model's log-loss per unit, and the runtime the tables were computed with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from certa.engine.services.presentation.html import plots
from certa.engine.services.presentation.stages import Estimate
from certa.engine.services.presentation.served_models import claim_rows, claims_text, tokens_text
from certa.engine.services.presentation.html.view import Plot, StageInput, StageSection, fmt, mapping, table

__all__ = ["section", "reading", "estimates", "how_to_read", "markdown"]

ARMS = ("baseline", "subject")


def _special(model: Mapping[str, Any]) -> str | None:
    """The special tokens a model's tokenizer adds (model.windows 1.1.0 on), as text; None when not recorded."""
    special = model.get("special_tokens")
    if not isinstance(special, Mapping):
        return None
    before, after = (" ".join(str(t) for t in special.get(k) or ()) for k in ("before", "after"))
    return ", ".join(part for part in (f"{before} before" if before else "", f"{after} after" if after else "")
                     if part) or "none"


def reading(outputs: Mapping[str, Any]) -> str:
    """The one-line reading (the report section's summary, a CI summary's line): the windows scored and each
    model's NLL per unit."""
    nll, windows, text = (mapping(outputs.get(k)) for k in ("nll_per_unit", "windows", "text"))
    unit = str(outputs.get("unit", "tokens"))
    return (f"Both models scored on {fmt(windows.get('count'))} windows ({fmt(windows.get('scored'))} {unit}) of "
            f"input '{fmt(text.get('input'))}': NLL per {unit[:-1]} {fmt(nll.get('baseline'))} (baseline), "
            f"{fmt(nll.get('subject'))} (subject).")


def _signature(record: Any) -> str | None:
    """A signature check as read: its status, and for a certificate or Sigstore check who signed
    (``verified (certificate CN=model signer)``, ``verified (Sigstore release@example.org, issuer ...)``)."""
    record = mapping(record)
    status, mode = record.get("status"), record.get("mode")
    if status is None or mode is None:
        return status
    issuer = f", issuer {record['issuer']}" if record.get("issuer") else ""
    return f"{status} ({'Sigstore' if mode == 'sigstore' else mode} {record.get('signer')}{issuer})"


def section(stage: StageInput) -> StageSection:
    """The report section of a ``model.windows`` stage."""
    outputs = stage.outputs
    models, nll = mapping(outputs.get("models")), mapping(outputs.get("nll_per_unit"))
    windows, text, runtime = (mapping(outputs.get(k)) for k in ("windows", "text", "runtime"))
    produced = mapping(outputs.get("tables"))
    unit = str(outputs.get("unit", "tokens"))
    described = {arm: mapping(models.get(arm)) for arm in ARMS}
    fields = (("input", "input"), ("manifest SHA-256", "manifest_sha256"), ("type", "model_type"),
              ("parameters", "parameters"), ("tokenizer SHA-256", "tokenizer_sha256"))
    rows = [*([("kind", *(described[arm].get("kind") for arm in ARMS))]
              if any("kind" in described[arm] for arm in ARMS) else []),
            *((label, *(described[arm].get(key) for arm in ARMS)) for label, key in fields),
            ("signature", *(_signature(described[arm].get("signature")) for arm in ARMS)),
            *([("special tokens", *(_special(described[arm]) for arm in ARMS))]
              if any(_special(described[arm]) is not None for arm in ARMS) else []),
            (f"NLL per {unit[:-1]} (nats)", *(nll.get(arm) for arm in ARMS))]
    tables = (
        table("Models", ("", *ARMS), rows),
        table("Windows", ("quantity", "value"), [
            ("unit", unit), ("tokenizers match", outputs.get("tokenizers_match")),
            ("windows", windows.get("count")), (f"{unit} scored per model", windows.get("scored")),
            *[(k.replace("_", " "), windows.get(k)) for k in ("seq_len", "stride", "window_bytes") if k in windows],
            ("text input / column", f"{fmt(text.get('input'))} / {fmt(text.get('column'))}"),
            ("text SHA-256", text.get("sha256")), ("documents", text.get("documents"))]),
        table("Produced tables", ("arm", "name", "SHA-256", "rows"),
              [(arm, mapping(produced.get(arm)).get("name"), mapping(produced.get(arm)).get("sha256"),
                mapping(produced.get(arm)).get("rows")) for arm in ARMS]),
        table("Runtime", ("setting", "value"),
              [(k, runtime.get(k)) for k in ("device", "threads", "batch_size", "dtype", "accumulation")] +
              [(name, version) for name, version in mapping(runtime.get("libraries")).items()]),
        *(_served_table(arm, described[arm]) for arm in ARMS if described[arm].get("kind") == "endpoint"),
    )
    svg = plots.model_nll_plot(f"{stage.stage_id}-nll", nll={arm: nll.get(arm) for arm in ARMS}, unit=unit[:-1])
    return StageSection(stage.stage_id, "", "", decision=f"{fmt(windows.get('count'))} windows", ok=None,
                        summary=reading(outputs), tables=tables,
                        plots=(Plot(svg, f"Each model's mean log-loss per {unit[:-1]} on the same windows (lower is "
                                         "better; the paired comparison is the ratio stage's)."),))


def _served_table(arm: str, model: Mapping[str, Any]) -> Any:
    """A served arm's claims (not verified), transcript and usage, as a report table (model.windows 1.2.0 on)."""
    transcript, usage = mapping(model.get("transcript")), mapping(model.get("usage"))
    return table(f"Served model ({arm}): what its server claims, and the transcript", ("field", "value"), [
        *claim_rows(model),
        ("transcript", transcript.get("name")), ("transcript SHA-256", transcript.get("sha256")),
        ("transcript rows (requests answered)", transcript.get("rows")),
        *((f"usage: {key.replace('_', ' ')}", value) for key, value in usage.items())])


def estimates(outputs: Mapping[str, Any]) -> tuple[Estimate | None, ...]:
    """Each model's mean negative log-likelihood per unit (nats; no interval: the ratio stage compares them)."""
    nll, unit = mapping(outputs.get("nll_per_unit")), str(outputs.get("unit", "tokens"))
    return tuple(Estimate.read(f"NLL per {unit[:-1]} ({arm})", nll.get(arm)) for arm in ARMS)


def how_to_read(outputs: Mapping[str, Any]) -> tuple[str, ...]:
    """How to read a ``model.windows`` stage's outputs (``certa.engine.services.presentation.explain.how_to_read``)."""
    unit = outputs.get("unit")
    signatures = {arm: _signature(mapping(mapping(outputs.get("models")).get(arm)).get("signature")) for arm in ARMS}
    models = mapping(outputs.get("models"))
    special = [text for text in (_special(mapping(models.get(arm))) for arm in ARMS) if text not in (None, "none")]
    first = ("after the special tokens its tokenizer puts before it (" + "; ".join(dict.fromkeys(special)) + "), "
             "every token of a document is scored once" if special else
             "every token of a document but its first is scored once")
    scored = (f"each window's scored tokens never overlap another's, and {first}, with up to seq_len tokens of "
              "context" if unit == "tokens" else
              "the tokenizers differ, so the text was cut into windows of at most window_bytes UTF-8 bytes and each "
              "model scored its own tokenization of each window; counts are bytes, so the NLL is per byte")
    served = [arm for arm in ARMS if mapping(models.get(arm)).get("kind") == "endpoint"]
    recorded = ("its weights cannot be hashed from outside, so what its server says about itself is recorded as a "
                "claim, and every request and answer as its transcript, which a replay reads instead of the server")
    identified = ("both local models, identified by the SHA-256 of their file manifests, were run" if not served else
                  f"the two served models (endpoints: {recorded}; the tokens were the baseline's server's, which the "
                  "subject's server was checked to reproduce) were scored" if len(served) == len(ARMS) else
                  f"the local model, identified by the SHA-256 of its file manifest, and the served {served[0]} (an "
                  f"endpoint: {recorded}) were scored")
    return (
        f"What was computed: {identified} on the same windows of the text; {scored}. The models computed in "
        f"{mapping(outputs.get('runtime')).get('dtype', 'float32')}; each window's negative log-likelihood was summed "
        "in float64 from float32 log-probabilities.",
        "What it means: the two per-window tables are the evidence a later paired.ppl_ratio stage compares; the NLL "
        "per unit shown here is each model's average log-loss, not a test. The tables are stored in the ledger, so "
        "a replay recomputes the statistics without the models; 'certa replay --recompute-evidence' re-runs the "
        "models to check the tables themselves.",
        "Signatures: " + ", ".join(f"{arm} {status}" for arm, status in signatures.items()) + " (verified: the "
        "model-signing signature verified, offline, with what the spec names (a public key, a certificate chain or "
        "a Sigstore identity and trust root) and signs exactly the files certa hashed; unsigned: the folder carries "
        "no signature).",
        "Assumptions: determinism holds on one machine at one thread count; another CPU or library version may move "
        "the last bits of the sums.",
    )


def markdown(outputs: Mapping[str, Any], version: str) -> str:
    """``certa show``'s Markdown of a ``model.windows`` stage (every ``version``): the two models and the windows
    scored."""
    lines = ["| model | manifest | type | parameters | tokenizer | signature | NLL per " + outputs["unit"][:-1] + " |",
             "|---|---|---|---|---|---|---|"]
    for arm, model in outputs["models"].items():
        parameters, signature = model["parameters"], _signature(model["signature"])
        lines.append(f"| {arm} ({model['input']}) | {model['manifest_sha256'][:12]} | "
                     f"{model['model_type'] or model.get('kind')} | "
                     f"{'not stated' if parameters is None else f'{parameters:,}'} | "
                     f"{(model['tokenizer_sha256'] or 'its server')[:12]} | "
                     f"{signature or 'none'} | {outputs['nll_per_unit'][arm]:.6g} |")
    w, r = outputs["windows"], outputs["runtime"]
    special = {arm: _special(model) for arm, model in outputs["models"].items()}
    lines += ["", f"{w['count']} windows, {w['scored']} {outputs['unit']} scored; {r['device']}, {r['threads']} "
                  f"thread(s), {r['dtype']} weights, NLL summed in {r['accumulation']}."
              + ("".join(f" Special tokens ({arm}): {text}." for arm, text in special.items() if text is not None))]
    lines += [f"\n{_served_text(arm, model)}" for arm, model in outputs["models"].items() if model.get("kind") == "endpoint"]
    return "\n".join(lines)


def _served_text(arm: str, model: Mapping[str, Any]) -> str:
    """What a served arm (model.windows 1.2.0 on) recorded beyond its scores: its server's claims (not verified),
    its transcript and what it spent."""
    transcript, usage = mapping(model.get("transcript")), mapping(model.get("usage"))
    return (f"The {arm} ({model['input']}) is a served model, scored through its API. {tokens_text(model)} "
            f"{claims_text(model)} Transcript {transcript.get('name')}: "
            f"{transcript.get('rows')} requests and answers, sha256 {transcript.get('sha256')}; "
            f"{usage.get('requests')} requests sent, {usage.get('tokens')} prompt tokens.")
