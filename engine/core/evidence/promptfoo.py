"""promptfoo results as JSON Lines (``promptfoo eval --output results.jsonl``): one evaluation result per line.

Item key (``testIdx``, ``promptIdx``); identity the SHA-256 of the canonical JSON of the test case's variables
(``testCase.vars``, else ``vars``) and of the prompt as sent (``prompt.raw``, rendered with the variables).
Metrics: ``score`` (the graded score), ``success`` (pass = 1, fail = 0) and each named score as
``named.<name>``.

One file usually holds the results of several providers, the way promptfoo compares models: ``provider`` (a
spec's ``read.provider``) selects one by its label or its id; a file with results of more than one provider and
none selected is refused, never mixed, and so is a value that names more than one provider (two providers of one
id told apart by their labels: selecting by the id would take either). promptfoo numbers an evaluation's
columns provider by provider, prompt by prompt, and ``promptIdx`` is a result's column, so the same test under
the same prompt has another ``promptIdx`` for each provider; ``keys_across_models`` is therefore the test and the
prompt's label (``testIdx``, ``prompt.label``), by which two providers' results pair
(``certa.engine.core.evidence.pairing``).

Source: promptfoo's ``EvalResult`` (``src/models/evalResult.ts``), written one ``JSON.stringify`` per line by
``writeOutput`` (``src/util/output.ts``); the columns and ``promptIdx`` by ``src/evaluator.ts``
(``buildPromptsList``, ``promptIndexMap``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from certa.engine.foundation.canonical import is_utf8_text
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits

from .records import EvidenceRecords, Provenance, require_unique_keys
from .sources import Source, field_of, json_lines, number_of, read_source, sha256_hex, value_digest

__all__ = ["read_promptfoo_jsonl"]

_ProviderKey = tuple[str, str | None]
"""A provider as a result states it: (``provider.id``, ``provider.label`` or None when it has none)."""


def read_promptfoo_jsonl(results: Source, *, provider: str | Mapping[str, str] | None = None,
                         name: str | None = None, limits: InputLimits | None = None) -> EvidenceRecords:
    """The per-test results of one provider in a promptfoo JSON Lines file; ``provider`` (a spec's
    ``read.provider``) is the label or the id of the provider to read, or ``{"id": ...}`` / ``{"label": ...}``,
    required when the file holds several (``_selected``)."""
    limits = limits or InputLimits.from_env()
    where, raw = read_source(results, name, limits)
    records, lines = json_lines(where, raw, limits)
    if not records:
        raise InputError(f"{where}: no results")
    providers = [_provider(record, f"{where}, line {line}") for record, line in zip(records, lines)]
    chosen = _selected(where, sorted(set(providers), key=_sort_key), provider)
    kept = [index for index, value in enumerate(providers) if value == chosen]
    records, located = [records[i] for i in kept], [f"line {lines[i]}" for i in kept]
    test_idx = [_index(record, "testIdx", f"{where}, {at}") for record, at in zip(records, located)]
    prompt_idx = [_index(record, "promptIdx", f"{where}, {at}") for record, at in zip(records, located)]
    require_unique_keys(where, ("testIdx", "promptIdx"), list(zip(test_idx, prompt_idx)), located)
    named = [_named_scores(record, f"{where}, {at}") for record, at in zip(records, located)]
    for scores, at in zip(named, located):
        if sorted(scores) != sorted(named[0]):
            raise InputError(f"{where}, {at}: named scores {sorted(scores)}, not {sorted(named[0])} as on the "
                             "first result")
    metrics = {
        "score": np.array([number_of(field_of(record, "score", (int, float), f"{where}, {at}"),
                                     f"{where}, {at}: field 'score'") for record, at in zip(records, located)]),
        "success": np.array([float(field_of(record, "success", (bool,), f"{where}, {at}"))
                             for record, at in zip(records, located)]),
        **{f"named.{key}": np.array([scores[key] for scores in named]) for key in sorted(named[0])},
    }
    identity = {
        "vars_sha256": np.array([value_digest(_variables(record, f"{where}, {at}"), f"{where}, {at}: vars")
                                 for record, at in zip(records, located)], dtype=object),
        "prompt_sha256": np.array([sha256_hex(_prompt_text(record, f"{where}, {at}").encode("utf-8"))
                                   for record, at in zip(records, located)], dtype=object),
    }
    eval_ids = sorted({record["evalId"] for record in records if type(record.get("evalId")) is str})
    provenance = Provenance(tool="promptfoo", models=(("provider.id", chosen[0]), ("provider.label", chosen[1] or chosen[0])),
                            details=tuple(("evalId", eval_id) for eval_id in eval_ids),
                            sources=((where, sha256_hex(raw)),))
    return EvidenceRecords(source=where, key_fields=("testIdx", "promptIdx"),
                           keys={"testIdx": np.array(test_idx, dtype=np.int64),
                                 "promptIdx": np.array(prompt_idx, dtype=np.int64)},
                           metrics=metrics, provenance=provenance, identity=identity,
                           keys_across_models=_keys_across_providers(records, test_idx))


def _provider(record: dict[str, Any], where: str) -> _ProviderKey:
    """(``provider.id``, ``provider.label`` or None)."""
    provider = field_of(record, "provider", (dict,), where)
    provider_id = field_of(provider, "id", (str,), f"{where}: provider")
    label = provider.get("label")
    return provider_id, label if type(label) is str and label else None


def _sort_key(provider: _ProviderKey) -> tuple[str, str]:
    return provider[0], provider[1] or ""


def _shown(provider: _ProviderKey) -> str:
    return f"id {provider[0]!r} " + (f"label {provider[1]!r}" if provider[1] is not None else "(no label)")


def _selected(where: str, distinct: list[_ProviderKey], provider: str | Mapping[str, str] | None) -> _ProviderKey:
    """The one provider ``provider`` names: by its label or its id (a string), by its id alone (``{"id": ...}``) or
    by its label alone (``{"label": ...}``); the only one when None. An ``InputError`` when it names none, or more
    than one: certa never picks one of several."""
    listed = ", ".join(map(_shown, distinct))
    if provider is None:
        if len(distinct) > 1:
            raise InputError(f"{where}: results of {len(distinct)} providers ({listed}); select one with "
                             "read.provider (its label, or its id)")
        return distinct[0]
    if isinstance(provider, Mapping):
        (field, wanted), = provider.items()
        named = [p for p in distinct if p[0 if field == "id" else 1] == wanted]
        provider = f"{field}: {wanted}"
    else:
        named = [p for p in distinct if provider in (p[0], p[1])]
    if not named:
        raise InputError(f"{where}: no results of provider {provider!r} (read.provider; providers: {listed})")
    if len(named) > 1:
        raise InputError(f"{where}: read.provider {provider!r} names {len(named)} providers "
                         f"({', '.join(map(_shown, named))}); select one explicitly, read.provider: {{id: ...}} or "
                         "{label: ...}, by a value only it has (in promptfoo's config, give each provider its own "
                         "label)")
    return named[0]


def _keys_across_providers(records: list[dict[str, Any]], test_idx: list[int]) -> dict[str, np.ndarray]:
    """(``testIdx``, ``prompt.label``) when every result states its prompt's label and no test repeats under one
    label; else none (the results then pair only by their columns)."""
    labels = [prompt.get("label") if type(prompt := record.get("prompt")) is dict else None for record in records]
    if not all(type(label) is str and label for label in labels):
        return {}
    if len(set(zip(test_idx, labels))) != len(labels):
        return {}
    return {"testIdx": np.array(test_idx, dtype=np.int64), "prompt.label": np.array(labels, dtype=object)}


def _index(record: dict[str, Any], field: str, where: str) -> int:
    value = field_of(record, field, (int,), where)
    if not 0 <= value < 2**63:
        raise InputError(f"{where}: field '{field}' must be ≥ 0 and < 2^63 (got {value})")
    return value


def _named_scores(record: dict[str, Any], where: str) -> dict[str, float]:
    scores = record.get("namedScores") or {}
    if type(scores) is not dict:
        raise InputError(f"{where}: field 'namedScores' must be an object")
    return {key: number_of(value, f"{where}: namedScores.{key}") for key, value in scores.items()}


def _variables(record: dict[str, Any], where: str) -> Any:
    test_case = record.get("testCase")
    if type(test_case) is dict and "vars" in test_case:
        return test_case["vars"]
    if "vars" in record:
        return record["vars"]
    raise InputError(f"{where}: neither 'testCase.vars' nor 'vars' is present (the item's variables)")


def _prompt_text(record: dict[str, Any], where: str) -> str:
    """The prompt as sent (``prompt.raw``), UTF-8 text (its digest is of its UTF-8 bytes)."""
    prompt = field_of(record, "prompt", (dict,), where)
    text = field_of(prompt, "raw", (str,), f"{where}: prompt")
    if not is_utf8_text(text):
        raise InputError(f"{where}: prompt: field 'raw' {ascii(text)[:60]} holds a lone surrogate (a \\ud800-\\udfff "
                         "escape with no pair), which no UTF-8 text can hold")
    return text
