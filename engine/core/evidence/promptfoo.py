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

import contextlib
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, NamedTuple

import msgspec
import numpy as np

from certa.engine.foundation.canonical import is_utf8_text
from certa.engine.foundation.errors import InputError
from certa.engine.core.input_limits import InputLimits

from .records import EvidenceRecords, Provenance, require_unique_keys, rows_repeat
from .sources import (Declined, Labels, Source, field_of, joined_numbers, json_lines, number_column, number_of,
                      read_source, sha256_hex, typed_line_blocks, value_digests)

__all__ = ["read_promptfoo_jsonl"]

_ProviderKey = tuple[str, str | None]
"""A provider as a result states it: (``provider.id``, ``provider.label`` or None when it has none)."""


def read_promptfoo_jsonl(results: Source, *, provider: str | Mapping[str, str] | None = None,
                         name: str | None = None, limits: InputLimits | None = None) -> EvidenceRecords:
    """The per-test results of one provider in a promptfoo JSON Lines file; ``provider`` (a spec's
    ``read.provider``) is the label or the id of the provider to read, or ``{"id": ...}`` / ``{"label": ...}``,
    required when the file holds several (``_selected``). The lines are decoded by msgspec into the fields read
    (``sources.typed_json_lines``, ``_typed_results``), or, where that path declines or its values fail a check,
    by ``json`` with a check of every field (``_checked_results``), whose error is then the one raised."""
    limits = limits or InputLimits.from_env()
    where, raw = read_source(results, name, limits)
    fast = _typed_results(raw, limits, provider)
    read = None
    if fast is not None:
        with contextlib.suppress(InputError):
            read = _columns(where, fast, provider)
    if read is None:
        read = _columns(where, _checked_results(where, raw, limits), provider)
    chosen, test_idx, prompt_idx, metrics, identity, eval_ids, across = read
    provenance = Provenance(tool="promptfoo", models=(("provider.id", chosen[0]), ("provider.label", chosen[1] or chosen[0])),
                            details=tuple(("evalId", eval_id) for eval_id in eval_ids),
                            sources=((where, sha256_hex(raw)),))
    return EvidenceRecords(source=where, key_fields=("testIdx", "promptIdx"),
                           keys={"testIdx": test_idx, "promptIdx": prompt_idx},
                           metrics=metrics, provenance=provenance, identity=identity, keys_across_models=across)


class _Results(NamedTuple):
    """The fields read of the results, a list per field, as stated (``_ABSENT`` where a field the reader requires
    is absent), checked only for the provider selected (``_columns``)."""

    distinct: list[_ProviderKey]
    """Every provider of the file, in ``_sort_key`` order."""
    lines: Sequence[int]
    """Each result's line."""
    providers: list[_ProviderKey]
    test_idx: list[Any]
    prompt_idx: list[Any]
    scores: list[Any]
    success: list[Any]
    named: list[Any]
    """``namedScores`` (``None`` where absent)."""
    variables: list[Any]
    """``testCase.vars``, else ``vars``; their digests (``value_digest``) where ``digested``."""
    prompts: list[Any]
    """``prompt.raw`` where ``prompt`` is an object holding it as text, else ``_Unread(prompt)``; their digests
    where ``digested``."""
    prompt_labels: list[Any]
    """``prompt.label`` (``None`` where absent)."""
    eval_ids: list[Any]
    digested: bool

    def rows(self, kept: list[int]) -> _Results:
        """The results at ``kept``."""
        columns = [[column[i] for i in kept] for column in self[1:-1]]
        return _Results._make([self.distinct, *columns, self.digested])


_ABSENT: Any = object()
"""A field a result does not state."""


class _Unread(NamedTuple):
    """A result's ``prompt`` that holds no ``raw`` text (or is not an object): refused if the result is read."""

    prompt: Any


def _checked_results(where: str, raw: bytes, limits: InputLimits) -> _Results:
    """The reference path: every line through ``json``; the providers checked here, the other fields by
    ``_columns``."""
    records, lines = json_lines(where, raw, limits)
    if not records:
        raise InputError(f"{where}: no results")
    providers = [_provider(record, f"{where}, line {line}") for record, line in zip(records, lines)]
    prompts = [record.get("prompt", _ABSENT) for record in records]
    stated = {field: [record.get(field, _ABSENT) for record in records]
              for field in ("testIdx", "promptIdx", "score", "success")}
    return _Results(sorted(set(providers), key=_sort_key), lines, providers, stated["testIdx"], stated["promptIdx"],
                    stated["score"], stated["success"],
                    [record.get("namedScores") for record in records], list(map(_variables, records)),
                    [prompt["raw"] if type(prompt) is dict and type(prompt.get("raw")) is str else _Unread(prompt)
                     for prompt in prompts],
                    [prompt.get("label") if type(prompt) is dict else None for prompt in prompts],
                    [record.get("evalId") for record in records], digested=False)


def _variables(record: dict[str, Any]) -> Any:
    """The item's variables: ``testCase.vars``, else ``vars`` (``_ABSENT`` where neither is stated)."""
    test_case = record.get("testCase")
    if type(test_case) is dict and "vars" in test_case:
        return test_case["vars"]
    return record.get("vars", _ABSENT)


class _Provider(msgspec.Struct, gc=False):
    id: str
    label: Any = None


class _Prompt(msgspec.Struct, gc=False):
    raw: str
    label: Any = None


class _TestCase(msgspec.Struct, gc=False):
    vars: Any = _ABSENT


class _Result(msgspec.Struct, gc=False):
    """The fields of a result read, each of the type it must have (``namedScores``, the variables and the labels
    as stated, checked after)."""

    provider: _Provider
    testIdx: int
    promptIdx: int
    score: int | float
    success: bool
    prompt: _Prompt
    testCase: _TestCase | None = None
    vars: Any = _ABSENT
    namedScores: Any = None
    evalId: Any = None


_RESULT_DECODER = msgspec.json.Decoder(_Result)


def _typed_results(raw: bytes, limits: InputLimits, provider: str | Mapping[str, str] | None) -> _Results | None:
    """The fast path: the fields read, decoded by msgspec a block of lines at a time (``sources.typed_line_blocks``);
    of each block, only the results of the providers ``provider`` names (``_names``) are kept, their variables
    and prompts as their digests, their repeated texts (provider, labels, evalId) once each. ``None`` where
    ``_checked_results`` must read the file (a value that cannot be hashed among them)."""
    distinct: dict[_ProviderKey, _ProviderKey] = {}
    texts: dict[str, str] = {}

    def once(value: Any) -> Any:
        return texts.setdefault(value, value) if type(value) is str else value

    read = _Results([], [], [], [], [], [], [], [], [], [], [], [], digested=True)
    blocks: list[Sequence[int]] = []
    try:
        for records, lines in typed_line_blocks(raw, limits, lambda first: _RESULT_DECODER):
            keys = [distinct.setdefault(key, key) for key in
                    ((p.id, p.label if type(p.label) is str and p.label else None)
                     for p in map(attrgetter("provider"), records))]
            if provider is not None:
                kept = [index for index, key in enumerate(keys) if _names(key, provider)]
                records, lines, keys = [records[i] for i in kept], [lines[i] for i in kept], [keys[i] for i in kept]
            blocks.append(lines)
            read.providers.extend(keys)
            for field, column in (("testIdx", read.test_idx), ("promptIdx", read.prompt_idx),
                                  ("score", read.scores), ("success", read.success)):
                column.extend(map(attrgetter(field), records))
            read.named.extend(scores or None for scores in map(attrgetter("namedScores"), records))
            read.variables.extend(_digested_variables(records))
            read.prompts.extend(sha256_hex(text.encode("utf-8")) for text in map(attrgetter("prompt.raw"), records))
            read.prompt_labels.extend(map(once, map(attrgetter("prompt.label"), records)))
            read.eval_ids.extend(map(once, map(attrgetter("evalId"), records)))
    except (Declined, InputError):
        return None
    return read._replace(distinct=sorted(distinct, key=_sort_key), lines=joined_numbers(blocks))


def _digested_variables(records: list[_Result]) -> list[str]:
    """The digest (``value_digest``) of each result's variables, ``_ABSENT`` where it states none."""
    variables = [test_case.vars if test_case is not None and test_case.vars is not _ABSENT else stated
                 for test_case, stated in zip(map(attrgetter("testCase"), records), map(attrgetter("vars"), records))]
    stated = [index for index, value in enumerate(variables) if value is not _ABSENT]
    if len(stated) == len(variables):
        return value_digests(variables, lambda i: "vars")
    digests = [_ABSENT] * len(variables)
    for index, digest in zip(stated, value_digests([variables[i] for i in stated], lambda i: "vars")):
        digests[index] = digest
    return digests


_Columns = tuple[_ProviderKey, np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray], list[str],
                 dict[str, np.ndarray]]
"""(provider, testIdx, promptIdx, metrics, identity, evalIds, keys across providers) of the provider read."""


def _columns(where: str, results: _Results, provider: str | Mapping[str, str] | None) -> _Columns:
    """The selected provider's results, checked field by field in this order (the first bad value of a field
    named by its line): ``testIdx``, ``promptIdx``, the keys' uniqueness, ``namedScores``, ``score``, ``success``,
    the variables, ``prompt.raw``; as columns."""
    chosen = _selected(where, results.distinct, provider)
    kept = [index for index, value in enumerate(results.providers) if value == chosen]
    if len(kept) < len(results.providers):
        results = results.rows(kept)
    lines = Labels("line {}", results.lines)

    def at(index: int) -> str:
        return f"{where}, {lines[index]}"

    test_idx, prompt_idx = (_indexes(values, field, at) for values, field in ((results.test_idx, "testIdx"),
                                                                              (results.prompt_idx, "promptIdx")))
    if rows_repeat((test_idx, prompt_idx)):
        require_unique_keys(where, ("testIdx", "promptIdx"), list(zip(test_idx.tolist(), prompt_idx.tolist())), lines)
    named = _named_columns(results.named, at)
    score = _scores(results.scores, at)
    _typed(results.success, "success", (bool,), at)
    metrics = {"score": score, "success": np.array(results.success, dtype=np.float64), **named}
    absent = next((index for index, value in enumerate(results.variables) if value is _ABSENT), None)
    if absent is not None:
        if not results.digested:
            value_digests(results.variables[:absent], lambda i: f"{at(i)}: vars")
        raise InputError(f"{at(absent)}: neither 'testCase.vars' nor 'vars' is present (the item's variables)")
    vars_digests, prompt_digests = results.variables, results.prompts
    if not results.digested:
        vars_digests = value_digests(results.variables, lambda i: f"{at(i)}: vars")
        prompt_digests = _prompt_digests(results.prompts, at)
    identity = {"vars_sha256": np.array(vars_digests, dtype=object),
                "prompt_sha256": np.array(prompt_digests, dtype=object)}
    eval_ids = sorted({eval_id for eval_id in results.eval_ids if type(eval_id) is str})
    return (chosen, test_idx, prompt_idx, metrics, identity, eval_ids,
            _keys_across_providers(test_idx, results.prompt_labels))


def _typed(values: list[Any], field: str, kinds: tuple[type, ...], at: Callable[[int], str]) -> None:
    """Refuse the first of ``values`` (field ``field`` of each result) that is absent or of none of ``kinds``."""
    if not set(map(type, values)) <= set(kinds):
        bad = next(index for index, value in enumerate(values) if type(value) not in kinds)
        _typed_value(values[bad], field, kinds, at(bad))


def _typed_value(value: Any, field: str, kinds: tuple[type, ...], where: str) -> None:
    field_of({} if value is _ABSENT else {field: value}, field, kinds, where)


def _indexes(values: list[Any], field: str, at: Callable[[int], str]) -> np.ndarray:
    """``testIdx`` or ``promptIdx`` of each result as int64: each an integer ≥ 0 and < 2^63 (the first bad value
    in the file's order refused)."""
    if set(map(type, values)) != {int} or min(values) < 0 or max(values) >= 2**63:
        for index, value in enumerate(values):
            _typed_value(value, field, (int,), at(index))
            if not 0 <= value < 2**63:
                raise InputError(f"{at(index)}: field '{field}' must be ≥ 0 and < 2^63 (got {value})")
    return np.array(values, dtype=np.int64)


def _scores(values: list[Any], at: Callable[[int], str]) -> np.ndarray:
    """``score`` of each result as float64: each a finite number, not a boolean (the first bad value in the file's
    order refused)."""
    if not set(map(type, values)) <= {int, float}:
        for index, value in enumerate(values):
            _typed_value(value, "score", (int, float), at(index))
            number_of(value, f"{at(index)}: field 'score'")
    return number_column(values, lambda i: f"{at(i)}: field 'score'")


def _named_columns(stated: list[Any], at: Callable[[int], str]) -> dict[str, np.ndarray]:
    """``named.<name>`` of each named score, the same names on every result (``namedScores``: an object of
    numbers; absent, ``null`` or empty where there are none)."""
    if not any(stated):
        return {}
    named = [_named_scores(scores, at(index)) for index, scores in enumerate(stated)]
    for index, scores in enumerate(named):
        if sorted(scores) != sorted(named[0]):
            raise InputError(f"{at(index)}: named scores {sorted(scores)}, not {sorted(named[0])} as on the first "
                             "result")
    return {f"named.{key}": np.array([scores[key] for scores in named]) for key in sorted(named[0])}


def _prompt_digests(prompts: list[Any], at: Callable[[int], str]) -> list[str]:
    """SHA-256 of each prompt as sent (``prompt.raw``), of its UTF-8 bytes; a prompt that is not UTF-8 text
    (a lone surrogate) or not stated is refused."""
    if set(map(type, prompts)) != {str} or not is_utf8_text("".join(prompts)):
        for index, prompt in enumerate(prompts):
            _prompt_text(prompt, at(index))
    return [sha256_hex(prompt.encode("utf-8")) for prompt in prompts]


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
    named = [p for p in distinct if _names(p, provider)]
    if isinstance(provider, Mapping):
        (field, wanted), = provider.items()
        provider = f"{field}: {wanted}"
    if not named:
        raise InputError(f"{where}: no results of provider {provider!r} (read.provider; providers: {listed})")
    if len(named) > 1:
        raise InputError(f"{where}: read.provider {provider!r} names {len(named)} providers "
                         f"({', '.join(map(_shown, named))}); select one explicitly, read.provider: {{id: ...}} or "
                         "{label: ...}, by a value only it has (in promptfoo's config, give each provider its own "
                         "label)")
    return named[0]


def _names(stated: _ProviderKey, provider: str | Mapping[str, str] | None) -> bool:
    """Whether ``provider`` (``read.provider``: a label or an id, ``{"id": ...}`` or ``{"label": ...}``; None
    names every one) names the provider ``stated``."""
    if provider is None:
        return True
    if isinstance(provider, Mapping):
        (field, wanted), = provider.items()
        return stated[0 if field == "id" else 1] == wanted
    return provider in stated


def _keys_across_providers(test_idx: np.ndarray, labels: list[Any]) -> dict[str, np.ndarray]:
    """(``testIdx``, ``prompt.label``) when every result states its prompt's label and no test repeats under one
    label; else none (the results then pair only by their columns)."""
    if not all(type(label) is str and label for label in labels):
        return {}
    codes: dict[str, int] = {}
    if rows_repeat((test_idx, np.fromiter((codes.setdefault(label, len(codes)) for label in labels), dtype=np.int64,
                                          count=len(labels)))):
        return {}
    return {"testIdx": test_idx, "prompt.label": np.array(labels, dtype=object)}


def _named_scores(scores: Any, where: str) -> dict[str, float]:
    scores = scores or {}
    if type(scores) is not dict:
        raise InputError(f"{where}: field 'namedScores' must be an object")
    return {key: number_of(value, f"{where}: namedScores.{key}") for key, value in scores.items()}


def _prompt_text(prompt: Any, where: str) -> str:
    """The prompt as sent (``prompt.raw``; ``_Unread`` of ``prompt`` where it holds no such text), UTF-8 text (its
    digest is of its UTF-8 bytes)."""
    if type(prompt) is _Unread:
        field_of({} if prompt.prompt is _ABSENT else {"prompt": prompt.prompt}, "prompt", (dict,), where)
        field_of(prompt.prompt, "raw", (str,), f"{where}: prompt")
    if not is_utf8_text(prompt):
        raise InputError(f"{where}: prompt: field 'raw' {ascii(prompt)[:60]} holds a lone surrogate (a \\ud800-\\udfff "
                         "escape with no pair), which no UTF-8 text can hold")
    return prompt
