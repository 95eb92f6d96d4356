"""Stage ``model.windows``: two models scored on the same text windows, one table per model.

Inputs: two models (``baseline``, ``subject``: model folders declared with ``model:``, or from 1.2.0 one of them a
served model declared with ``endpoint:``) and a text table (JSON
Lines, Parquet or CSV) whose ``column`` holds one document per row. The stage tokenizes the text, cuts windows
and sums each window's negative log-likelihood under each model (``certa.engine.core.models.windows``: what is scored,
exactly, and the numerics), and produces the per-window tables ``baseline`` and ``subject`` (columns
``window_id``, ``tokens``, ``nll_sum``) that ``paired.ppl_ratio`` reads as ``<stage id>.baseline`` and
``<stage id>.subject`` (``StageType.produces``). One spec thus goes from two model folders and a text file to a
perplexity certificate.

``unit``: ``tokens`` when both models' ``tokenizer.json`` have the same SHA-256 (token windows, ``seq_len`` and
``stride``); ``bytes`` otherwise (byte windows of ``window_bytes``: each model scores its own tokenization of the
same text, counted in UTF-8 bytes); ``auto`` (the default) picks by the digests, ``tokens`` refuses differing
tokenizers.

Runtimes: each model input is run by the runtime its format names (``certa.engine.core.runtimes``: ``runtime_for``,
``load_runtime``; a model folder by ``hf``), so the stage never touches torch itself and pairs any two runtimes.

Memory: both models are prepared first (for a folder, ``prepare_causal_lm``: configuration, weights' headers,
tokenizers), the windows cut and their token ids checked; then each model is opened, scored and closed before the
next is opened, first the one whose weights were kept when its folder was hashed (``certa.engine.core.inputs``;
``Runtime.resident``), so memory holds one model's weights. The tables do not depend on that order.

Evidence: the two tables, and a ``models`` table (one row per model: manifest SHA-256, model type, parameter
count, tokenizer SHA-256, signature check, device, library versions; from 1.1.0 the special tokens its tokenizer
adds), are captured: the ledger stores them like inputs, and a replay (``ctx.captured``) recomputes the outputs from
them without loading any model (checking that the recorded manifests are the inputs' manifests). The outputs are
computed from the captured tables in both cases, so a replay reproduces them bit for bit. Tokens per second is
shown in progress, never recorded (it varies from run to run).

Versions (``WindowsVersion``):

* 1.0.0: token windows of each document tokenized without special tokens, float32;
* 1.1.0: each document tokenized as transformers tokenizes it, with the special tokens of ``tokenizer.json``'s
  post-processor (a Llama- or Gemma-style tokenizer's beginning-of-sequence token comes first, unscored, and
  the document's first token is scored after it: the tokens Hugging Face's perplexity recipe scores; a
  tokenizer that adds nothing, GPT-2's, gives 1.0.0's windows); the knob ``dtype`` (``float32``, the default,
  ``bfloat16`` or ``float16``) is the dtype the models compute in, stated in ``runtime.dtype`` (NLL sums stay
  float64); the outputs state each model's ``special_tokens``. Byte windows are 1.0.0's;
* 1.2.0: either model may be a served model (an ``endpoint`` input, ``certa.engine.core.runtimes.endpoint``),
  scored against the other, a local folder whose tokenizer it shares: the server must tokenize every document (or
  byte piece) into the reference tokenizer's ids (``check_tokenization``), and it scores the same windows by
  teacher forcing; or both may be served (a vendor comparison, token windows only): the baseline's server
  tokenizes the documents (``use_server_tokenizer``: ``POST /tokenize``), the subject's server must tokenize them
  into the same ids, and the outputs say whose tokens were scored (``tokens_from``, ``tokenizer_of``; no
  ``tokenizer_sha256``, since no file is hashed). A transcript (every request and response) is captured as
  ``<arm>_transcript``, and a replay
  recomputes its windows' NLL sums from the transcript and refuses a table that does not follow from it. The
  ``models`` table and the outputs state each model's ``kind`` (``local`` or ``endpoint``), a served model's
  ``claims`` (what its server says about itself: not proof of its weights) and what each runtime spent
  (``usage``). A run of local models gives 1.1.0's numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from certa.engine.foundation.canonical import canonical_bytes
from certa.engine.foundation.errors import InputError, StageError
from certa.engine.core.endpoint_input import ENDPOINT_FORMAT
from certa.engine.core.tables import Table, table_from_columns
from certa.engine.core.stages.base import StageContext, StageOutput, StageType

__all__ = ["STAGE", "STAGES", "ARMS", "MODELS_TABLE", "VERSIONS", "WindowsVersion", "run_model_windows", "window_unit",
           "produced_unit"]

ARMS = ("baseline", "subject")
MODELS_TABLE = "models"
"""Name of the captured table describing the two models (one row per arm)."""
_MODEL_COLUMNS = ("arm", "input", "manifest_sha256", "model_type", "parameters", "tokenizer_sha256", "signature",
                  "device", "libraries")
SPECIAL_TOKENS = "special_tokens"
"""The ``models`` table's column (1.1.0 on) of the tokens each model's tokenizer adds around a text (JSON)."""
_SERVED_JSON = ("model_type", "parameters", "signature", SPECIAL_TOKENS)
"""The ``models`` table's cells written as JSON for a served model (from 1.2.0 on), since they may be null."""
TRANSCRIPT_SUFFIX = "_transcript"
"""A served arm's captured transcript is ``<arm>_transcript`` (1.2.0 on)."""


@dataclass(frozen=True)
class WindowsVersion:
    """What a version of the stage does (module docstring): whether token windows carry the tokenizer's special
    tokens, and whether the compute dtype is a knob (else float32)."""

    version: str
    special_tokens: bool
    changes: str
    served: bool = False
    """Whether a model may be a served one (module docstring, 1.2.0)."""
    signature_modes: bool = False
    """Whether a model may be signed in certificate or Sigstore mode, whose record states the mode and signer
    (``certa.engine.core.models.signature``; 1.2.0's output schema since issue 35; earlier versions record key
    signatures only, and refuse the others rather than drop what was checked)."""


VERSIONS = (
    WindowsVersion("1.0.0", special_tokens=False, changes="first version (certa 0.8.0)"),
    WindowsVersion("1.1.0", special_tokens=True,
                   changes="issue 32: token windows carry the special tokens tokenizer.json's post-processor adds, as "
                           "transformers tokenizes (a Llama-style beginning-of-sequence token is the unscored first "
                           "token, and the document's first token is scored after it; GPT-2's windows are "
                           "unchanged); knob dtype (float32, bfloat16, float16: the models' compute dtype, default "
                           "float32); the outputs state each model's special tokens"),
    WindowsVersion("1.2.0", special_tokens=True, served=True, signature_modes=True,
                   changes="issue 33: either model may be a served model (an endpoint input) scored against the "
                           "other, a local reference whose tokenizer the server must reproduce; the served arm's "
                           "transcript is captured and a replay recomputes its NLL sums from it; the outputs state "
                           "each model's kind, a server's claims and each runtime's usage (local runs: 1.1.0's "
                           "numbers)"),
)


def window_unit(knobs: Mapping[str, Any]) -> str | None:
    """The unit the produced tables' ``tokens`` column counts, as the resolved ``knobs`` fix it: ``tokens`` or
    ``bytes``; None for ``unit: auto``, which the models' tokenizers decide when the stage runs."""
    unit = knobs.get("unit")
    return unit if unit in ("tokens", "bytes") else None


def produced_unit(outputs: Any) -> str | None:
    """The unit a run of this stage counted its windows in (its outputs' ``unit``), None when ``outputs`` (another
    stage's, or none) state no such unit."""
    unit = outputs.get("unit") if isinstance(outputs, Mapping) else None
    return unit if unit in ("tokens", "bytes") else None


def _evaluated(ctx: StageContext, version: WindowsVersion) -> dict[str, Table]:
    """Prepare both models, cut the windows, then open and score one model at a time (memory holds one model's
    weights): the captured tables (module docstring)."""
    from certa.engine.core.runtimes import BorrowsTokenizer, load_runtime, runtime_for

    knobs = ctx.knobs
    served = [arm for arm in ARMS if ctx.table(arm).fmt == ENDPOINT_FORMAT]
    if served and not version.served:
        raise StageError(f"'{knobs[served[0]]}' ({served[0]}) is a served model; model.windows {version.version} "
                         "scores model folders only: use model.windows 1.2.0 or later")
    modes = [(arm, dict(check.trusted)["mode"]) for arm in ARMS if (check := ctx.table(arm).signature) and check.trusted]
    if modes and not version.signature_modes:
        raise StageError(f"'{knobs[modes[0][0]]}' ({modes[0][0]}) is signed in {modes[0][1]} mode; model.windows "
                         f"{version.version} records key signatures only: use model.windows 1.2.0 or later")
    if len(served) == len(ARMS) and knobs["unit"] == "bytes":
        raise InputError(f"'{knobs['baseline']}' and '{knobs['subject']}' are both served models, compared on the "
                         "tokens of the baseline's server: unit bytes needs a local tokenizer to cut byte pieces (use "
                         "unit: tokens, or declare one of them with model: FOLDER)")
    chosen = {arm: runtime_for(ctx.table(arm), f"'{knobs[arm]}' ({arm})") for arm in ARMS}
    text_table = ctx.table("text")
    texts = [str(t) for t in text_table.text(knobs["column"])]
    device = knobs["device"]
    dtype = knobs.get("dtype", "float32")
    models = {arm: load_runtime(chosen[arm], ctx.table(arm), device=device, dtype=dtype, threads=knobs["threads"])
              for arm in ARMS}
    opened: dict[str, Any] = {}
    try:
        if len(served) == len(ARMS):  # a vendor comparison: the baseline's server tokenizes, the subject's is checked
            opened["baseline"] = models["baseline"].open()
            cast(BorrowsTokenizer, models["baseline"]).use_server_tokenizer(opened["baseline"])
        for arm in served if len(served) == 1 else ARMS[1:]:  # scores the other's tokens, checked against its server's
            borrower = models[arm]
            if isinstance(borrower, BorrowsTokenizer):
                borrower.share_tokenizer(models[ARMS[1 - ARMS.index(arm)]])
        return _windows_scored(ctx, version, models, opened, texts)
    except BaseException as error:
        for model in opened.values():  # opened early and not yet scored (a scored model was closed by its block)
            model.__exit__(type(error), error, error.__traceback__)
        raise


def _windows_scored(ctx: StageContext, version: WindowsVersion, models: Mapping[str, Any], opened: dict[str, Any],
                    texts: list[str]) -> dict[str, Table]:
    """Cut the windows and score them on each model (``opened``: a model already open, to be used as it is), one
    model at a time: the captured tables (module docstring)."""
    from certa.engine.core.models.windows import byte_pieces, piece_windows, token_windows

    knobs = ctx.knobs
    for arm, model in models.items():
        if model.tokenizer is None:
            raise InputError(f"input '{model.name}': the model folder has no tokenizer.json")
    same_tokenizer = models["baseline"].tokenizer_sha256 == models["subject"].tokenizer_sha256
    unit = knobs["unit"] if knobs["unit"] != "auto" else ("tokens" if same_tokenizer else "bytes")
    if unit == "tokens" and not same_tokenizer:
        raise InputError("unit: tokens needs one tokenizer, but the models' tokenizer.json differ "
                         f"({models['baseline'].tokenizer_sha256[:12]} vs {models['subject'].tokenizer_sha256[:12]}); "
                         "use unit: bytes (or auto)")
    seq_len = knobs["seq_len"]
    stride = knobs.get("stride", seq_len - 1)
    for model in models.values():
        if unit == "tokens" and model.positions and seq_len > model.positions:
            raise InputError(f"seq_len {seq_len} exceeds input '{model.name}''s {model.positions} positions; lower "
                             "seq_len")
    pieces = byte_pieces(texts, knobs["window_bytes"]) if unit == "bytes" else []
    cut = {}
    tokenized: dict[str, tuple[list[str], list[list[int]], bool]] = {}
    for arm, model in models.items():
        if unit == "tokens":
            encoded = model.tokenizer.encode_batch(texts, add_special_tokens=version.special_tokens)
            windows = token_windows([e.ids for e in encoded], seq_len=seq_len, stride=stride)
            tokenized[arm] = (texts, [e.ids for e in encoded], version.special_tokens)
        else:
            piece_texts = [p.decode("utf-8") for _, _, p in pieces]
            piece_ids = [e.ids for e in model.tokenizer.encode_batch(piece_texts, add_special_tokens=False)]
            windows = piece_windows(pieces, piece_ids, model.first_token())
            tokenized[arm] = (piece_texts, piece_ids, False)
            if model.positions and windows.length.size and int(windows.length.max()) > model.positions:
                raise InputError(f"a {knobs['window_bytes']}-byte window is {int(windows.length.max())} tokens for "
                                 f"input '{model.name}', over its {model.positions} positions; lower window_bytes")
        if not windows.ids:
            raise InputError(f"input '{knobs['text']}' gives no window to score (every document is shorter than "
                             "two tokens)")
        model.check_token_ids(windows.flat, f"the text of input '{knobs['text']}'")
        cut[arm] = windows
    scored: dict[str, Table] = {}
    described, usage, evidence = {}, {}, {}
    for arm in sorted(ARMS, key=lambda arm: not models[arm].resident):  # first the model whose weights are in memory
        windows = cut[arm]

        def progress(done: int, total: int, rate: float, arm: str = arm) -> None:
            ctx.progress(done, total, f"{arm}: {rate:,.0f} scored {unit}/s; windows")

        # closed (its weights' memory returned) before the next model is opened
        with opened.pop(arm) if arm in opened else models[arm].open() as model:
            check = getattr(model, "check_tokenization", None)  # a served model's tokens are the reference's
            if check is not None:
                documents, ids, special = tokenized[arm]
                check(documents, ids, add_special_tokens=special)
            sums = model.window_nll(windows, batch_size=knobs["batch_size"], progress=progress)
            described[arm], usage[arm] = model.describe(), model.usage()
            evidence.update({f"{arm}_{name}": replace(table, name=f"{arm}_{name}")
                             for name, table in model.evidence().items()})
        scored[arm] = table_from_columns(arm, {"window_id": windows.ids, "tokens": windows.counts, "nll_sum": sums})
    tables = {arm: scored[arm] for arm in ARMS}
    described_columns = (*_MODEL_COLUMNS[2:], SPECIAL_TOKENS) if version.special_tokens else _MODEL_COLUMNS[2:]
    if version.served:
        described_columns = (*described_columns, "kind", "claims")
        for arm in ARMS:
            described[arm] = {**described[arm], "usage": usage[arm]}
        described_columns = (*described_columns, "usage")
    tables[MODELS_TABLE] = table_from_columns(MODELS_TABLE, {
        "arm": list(ARMS), "input": [knobs[arm] for arm in ARMS],
        **{column: [_cell(described[arm], column) for arm in ARMS] for column in described_columns}})
    return {**tables, **evidence}


def _cell(described: Mapping[str, Any], column: str) -> Any:
    """The ``models`` table's cell of ``column`` for a model's ``OpenRuntime.describe()``: JSON for a mapping, and
    for a served model's type, parameter count, signature and special tokens (which may be null)."""
    value = described["sha256" if column == "manifest_sha256" else column]
    served = described.get("kind") == "endpoint" and (column in _SERVED_JSON or value is None)
    return _json(value) if isinstance(value, Mapping) or served else value


def _json(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def _recorded(ctx: StageContext, captured: Mapping[str, Table], version: WindowsVersion) -> dict[str, Table]:
    """The tables of the original run (a replay), checked to belong to this run's model inputs; a served arm's
    windows checked to follow from its transcript (``certa.engine.core.runtimes.endpoint.replayed_sums``)."""
    models = captured.get(MODELS_TABLE)
    served = [arm for arm in ARMS if ctx.table(arm).fmt == ENDPOINT_FORMAT] if version.served else []
    names = (*ARMS, MODELS_TABLE, *(f"{arm}{TRANSCRIPT_SUFFIX}" for arm in served))
    missing = [name for name in names if name not in captured]
    if missing or models is None:
        raise InputError(f"the recorded run lacks the captured table(s) {', '.join(missing)}")
    for arm, manifest in zip(models.text("arm"), models.text("manifest_sha256")):
        if arm in ARMS and ctx.table(str(arm)).sha256 != manifest:
            raise InputError(f"the captured windows of {arm} were scored with the model of manifest {manifest}, not "
                             f"the input '{ctx.knobs[str(arm)]}' ({ctx.table(str(arm)).sha256})")
    if served:
        from certa.engine.core.runtimes.endpoint import check_replayed_windows

        for arm in served:
            check_replayed_windows(ctx.table(arm), captured[f"{arm}{TRANSCRIPT_SUFFIX}"], captured[arm])
    return dict(captured)  # with what each runtime captured besides (its evidence)


def _outputs(ctx: StageContext, tables: Mapping[str, Table], version: WindowsVersion) -> dict[str, Any]:
    knobs = ctx.knobs
    models = tables[MODELS_TABLE]
    rows = {str(arm): i for i, arm in enumerate(models.text("arm"))}
    column = {name: models.text(name) for name in _MODEL_COLUMNS if name != "parameters"}
    parameters = models.text("parameters")  # a served model's is null (1.2.0 on), read by _served_outputs
    described = {arm: {"input": str(column["input"][i]), "manifest_sha256": str(column["manifest_sha256"][i]),
                       "model_type": str(column["model_type"][i]),
                       "parameters": None if parameters[i] == "null" else int(float(parameters[i])),
                       "tokenizer_sha256": _digest_cell(column["tokenizer_sha256"][i]),
                       "signature": json.loads(str(column["signature"][i])),
                       **({SPECIAL_TOKENS: json.loads(str(models.text(SPECIAL_TOKENS)[i]))}
                          if version.special_tokens else {})}
                 for arm, i in rows.items()}
    if version.served:
        described = {arm: _served_outputs(ctx, tables, arm, i, described[arm]) for arm, i in rows.items()}
    local = next((i for arm, i in rows.items() if described[arm].get("kind", "local") == "local"), 0)
    counts = {arm: tables[arm].numeric("tokens") for arm in ARMS}
    sums = {arm: tables[arm].numeric("nll_sum") for arm in ARMS}
    same_tokenizer = described["baseline"]["tokenizer_sha256"] == described["subject"]["tokenizer_sha256"]
    unit = knobs["unit"] if knobs["unit"] != "auto" else ("tokens" if same_tokenizer else "bytes")
    windows = ({"seq_len": knobs["seq_len"], "stride": knobs.get("stride", knobs["seq_len"] - 1)}
               if unit == "tokens" else {"window_bytes": knobs["window_bytes"]})
    text = ctx.table("text")
    return {
        "unit": unit,
        "tokenizers_match": same_tokenizer,
        "windows": {"count": int(counts["baseline"].size), "scored": int(counts["baseline"].sum()), **windows},
        "text": {"input": knobs["text"], "column": knobs["column"], "sha256": text.sha256, "documents": text.n_rows},
        "models": described,
        "nll_per_unit": {arm: float(sums[arm].sum() / counts[arm].sum()) for arm in ARMS},
        "tables": {arm: {"name": f"{ctx.stage_id}.{arm}", "sha256": tables[arm].sha256, "rows": tables[arm].n_rows}
                   for arm in ARMS},
        "runtime": {"device": str(column["device"][local]), "threads": knobs["threads"],
                    "batch_size": knobs["batch_size"], "dtype": knobs.get("dtype", "float32"), "accumulation": "float64",
                    "libraries": json.loads(str(column["libraries"][local]))},
    }


def _digest_cell(cell: Any) -> str | None:
    """A ``models`` table's ``tokenizer_sha256`` cell: the digest, or None (JSON null: a served model tokenized by
    its own server, which hashes no file)."""
    return None if str(cell) == "null" else str(cell)


def _served_outputs(ctx: StageContext, tables: Mapping[str, Table], arm: str, row: int,
                    described: Mapping[str, Any]) -> dict[str, Any]:
    """An arm's outputs from 1.2.0 on: its ``kind`` and ``usage``; a served model's ``claims``, its transcript's
    name, digest and rows, no type, parameter count, special tokens or signature of its own (null), and whose
    tokens it scored: the local arm's ``tokenizer.json``, or, when both arms are served, the baseline's server's
    (``tokens_from``, ``tokenizer_of``)."""
    models = tables[MODELS_TABLE]
    kinds = [str(kind) for kind in models.text("kind")]
    kind = kinds[row]
    out = {**described, "kind": kind, "usage": json.loads(str(models.text("usage")[row]))}
    if kind != "endpoint":
        return out
    local = next((i for i, other in enumerate(kinds) if other != "endpoint"), None)
    inputs = [str(name) for name in models.text("input")]
    out.update({column: json.loads(str(models.text(column)[row])) for column in _SERVED_JSON},
               claims=json.loads(str(models.text("claims")[row])),
               tokens_from="tokenizer.json" if local is not None else "server",
               tokenizer_of=inputs[local] if local is not None else inputs[ARMS.index("baseline")])
    transcript = tables.get(f"{arm}{TRANSCRIPT_SUFFIX}")
    if transcript is not None:
        out["transcript"] = {"name": f"{ctx.stage_id}.{arm}{TRANSCRIPT_SUFFIX}", "sha256": transcript.sha256,
                             "rows": transcript.n_rows}
    return out


def run_model_windows(ctx: StageContext, version: WindowsVersion = VERSIONS[-1]) -> StageOutput:
    """Score both models on the text's windows, or read the recorded tables back in a replay."""
    if ctx.captured is not None:
        tables = _recorded(ctx, ctx.captured, version)
    else:
        from certa.engine.core.models.runtime import return_freed_memory

        tables = _evaluated(ctx, version)
        return_freed_memory()  # the models are closed: the stages after this one do not add their peak to them
    return StageOutput(outputs=_outputs(ctx, tables, version), captured=tables)


def _stage(version: WindowsVersion) -> StageType:
    return StageType(
        name="model.windows",
        version=version.version,
        input_knobs=("baseline", "subject", "text"),
        run=lambda ctx: run_model_windows(ctx, version),
        summary="Two models (local folders, or from 1.2.0 one of them served) scored on the same text windows: "
                "per-window token counts and NLL sums for paired.ppl_ratio.",
        presentation="certa.engine.services.presentation.stages.model_windows",
        changes=version.changes,
        produces=ARMS,
    )


STAGES = tuple(_stage(version) for version in VERSIONS)
STAGE = STAGES[-1]
