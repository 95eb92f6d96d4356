"""The runtime ``endpoint``: a served model (input format ``endpoint``) scored through its OpenAI-compatible API.

A thin adapter of the endpoint client (``certa.engine.core.runtimes.http_client``) and of what certa asks a server
and reads back (``certa.engine.core.runtimes.completions``) to the runtime protocol (``certa.engine.core.runtimes``).
It scores by **teacher forcing**: each sequence of token ids is sent as the prompt of a completion request with
``prompt_logprobs: 0`` and ``return_token_ids: true`` (vLLM's fields, https://docs.vllm.ai/en/v0.32.0/serving/
online_serving/openai_compatible_server/ ; one generated token, ignored), and the answer must give, for every
prompt token after the first, its log-probability given the tokens before it, and the prompt's token ids equal to
the ids sent (``read_prompt_logprobs``: a server that returns no prompt log-probs, another model's answer or other
tokens is refused, naming the field). So ``window_nll`` and ``token_logprobs`` are the HF runtime's quantities,
computed by the server: Σ −ln p(x_t | x_<t) over a window's targets, ln p(x_t | x_<t) for t = 1 .. n.

**Tokens.** A served model's tokenizer cannot be read from outside, so the endpoint scores the tokens of a local
reference's ``tokenizer.json`` (``share_tokenizer``: the stage's other model), and checks that the server tokenizes
the texts scored into the same ids (``check_tokenization``: vLLM's ``POST /tokenize`` on each text, with the special
tokens the reference's post-processor adds; one differing id is an ``InputError`` naming the text and position).
Without a reference tokenizer the endpoint cannot cut token windows. Two served models compared with no tokenizer
file score the tokens of the reference's server (``use_server_tokenizer``: a ``ServerTokenizer`` asks its
``/tokenize``), the other server checked against it.

**Identity.** Opening queries ``GET /models`` (the served name must be listed) and ``GET /version`` (vLLM's, outside
``/v1``; a 404 is "not stated"). What they say, and each completion's ``system_fingerprint``, are ``claims`` in
``describe()``: the server's statements about itself, not proof of the weights it runs. What certa verified is the
transcript: every request and response (``evidence()["transcript"]``: one row per request, its body, status,
answer as received, milliseconds and attempts; never a credential), which a replay reads instead of the server
(``read_transcript``, each row's key checked to be its request's; ``window_sums``, ``transcript_logprobs``,
``transcript_generations``).

**Generated-token mode** (``generate``), for scorers of servers that give log-probs only of what they generate:
the server continues each sequence by sampled tokens (``generation_request``: temperature 1, no truncation, a
seed per sequence) and returns their ids and raw log-probs (``read_generated``); the stage's local reference scores
the same tokens (``certa.engine.core.scorers.divergences``: ``generated_kl``).

**Resume.** Every answer a scoring request gets is kept as it arrives in the user's cache, by the input's SHA-256
(``certa.engine.core.runtimes.transcript_cache``); the next run of the same input reuses them and sends only the
requests they lack, and a run whose calls all completed removes them.

``usage()``: ``requests`` sent (retries included), ``retries``, ``reused`` (answered from an earlier transcript),
``tokens`` (prompt tokens scored) and ``bytes_sent``/``bytes_received``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, Self

import numpy as np

from certa.engine.core.endpoint_input import API_TGI, ENDPOINT_FORMAT, EndpointDeclaration, read_declaration
from certa.engine.core.models.windows import ScoreProgress, Windows
from certa.engine.core.runtimes.completions import (PROMPTS_PER_REQUEST, generation_request, prompt_logprobs_request,
                                                  read_generated, read_prompt_logprobs, server_claims)
from certa.engine.core.runtimes.http_client import ClientSettings, EndpointClient, Exchange, request_key
from certa.engine.core.runtimes.transcript_cache import TranscriptCache
from certa.engine.core.tables import Table, table_from_columns
from certa.engine.foundation.errors import EndpointError, InputError
from certa.engine.foundation.json_read import json_value

if TYPE_CHECKING:
    from certa.engine.core.runtimes.tgi import OpenTgiRuntime

__all__ = ["EndpointRuntime", "OpenEndpointRuntime", "OpenServedRuntime", "ServerTokenizer", "TRANSCRIPT",
           "check_replayed_windows", "exchange_logprobs", "named_errors", "read_transcript", "transcript_generations",
           "transcript_logprobs", "transcript_table", "window_labels", "window_sums"]

TRANSCRIPT = "transcript"
"""The name of the table of requests and responses ``evidence()`` returns."""
_COLUMNS = ("unit", "key", "method", "path", "request", "status", "response", "elapsed_ms", "attempts")
_COMPLETIONS = "/completions"


class EndpointRuntime:
    """A served model prepared to be queried (module docstring): ``EndpointRuntime(table, device=, dtype=,
    threads=)``. The keywords are the stage's, for local models: a served model computes where and how its server
    does, which ``describe()`` states as the server's."""

    formats = (ENDPOINT_FORMAT,)

    def __init__(self, table: Table, *, device: str = "cpu", dtype: str = "float32", threads: int = 1) -> None:
        del device, dtype, threads  # the server's own (module docstring)
        self.declaration: EndpointDeclaration = read_declaration(table.name, table.raw)
        self.name = table.name
        self.sha256 = table.sha256
        self.tokenizer: Any = None
        self.tokenizer_sha256: str | None = None
        self.positions = 0
        self.vocabulary = 0
        self.resident = False
        self.partner: Any = None

    def share_tokenizer(self, partner: Any) -> None:
        """Score the tokens of ``partner`` (a prepared runtime with a tokenizer: the stage's local reference, or a
        served model that tokenizes with its own server, ``use_server_tokenizer``); the server's tokenization of each
        text is checked against it (``OpenEndpointRuntime.check_tokenization``)."""
        if partner.tokenizer is None:
            raise InputError(f"input '{self.name}' is a served model and input '{partner.name}' has no tokenizer.json: "
                             "a served model's tokens are checked against a local reference's tokenizer")
        self.partner = partner
        self.tokenizer, self.tokenizer_sha256 = partner.tokenizer, partner.tokenizer_sha256

    def use_server_tokenizer(self, opened: OpenServedRuntime) -> None:
        """Tokenize with this model's own server (``ServerTokenizer`` over ``opened``, this runtime opened): for two
        served models and no tokenizer file, the other server's tokenization is checked against this one's. No file
        is hashed (``tokenizer_sha256`` None); ``describe()`` says where the tokens came from."""
        if not isinstance(opened, OpenEndpointRuntime):
            raise InputError(f"input '{self.name}': two served models are compared on the tokens of the reference's "
                             "server (POST /tokenize, an OpenAI-compatible vLLM server's), which this server does not "
                             "offer: make the other model the reference, or declare a local reference folder")
        self.partner = None
        self.tokenizer, self.tokenizer_sha256 = ServerTokenizer(opened), None

    def tokenizer_of(self) -> str | None:
        """Where this model's tokens come from, in words, when they are borrowed (to check the server against):
        a local reference's tokenizer.json or another server's ``/tokenize``; None when they are its own server's."""
        if self.partner is None:
            return None
        if isinstance(self.partner, EndpointRuntime):
            return f"the server of input '{self.partner.name}' (its /tokenize)"
        return f"input '{self.partner.name}''s tokenizer.json"

    def first_token(self) -> int:
        """The reference's beginning-of-sequence token (``share_tokenizer``)."""
        if self.partner is None:
            raise InputError(f"input '{self.name}' is a served model: byte windows need its tokenizer, which certa "
                             "cannot read from a server; score it against a local reference with the same tokenizer")
        return int(self.partner.first_token())

    def check_token_ids(self, ids: np.ndarray, text: str) -> None:
        """Nothing here: the server refuses an id it does not embed (a 400, an ``EndpointError``)."""

    def open(self) -> OpenEndpointRuntime | OpenTgiRuntime:
        """A client of the endpoint, its identity queried (module docstring); a TGI server's (``api: tgi``) is
        ``certa.engine.core.runtimes.tgi``'s."""
        declared = self.declaration
        cache = TranscriptCache(self.sha256)
        client = EndpointClient(declared.url, api_key=declared.api_key(), settings=ClientSettings(
            timeout=declared.client.timeout, retries=declared.client.retries,
            concurrency=declared.client.concurrency, max_requests=declared.client.max_requests), reuse=cache.load())
        try:
            with named_errors(self.name, declared.url):
                if declared.api == API_TGI:  # TGI's own API (certa.engine.core.runtimes.tgi)
                    from certa.engine.core.runtimes.tgi import OpenTgiRuntime
                    return OpenTgiRuntime(self, client, cache)
                return OpenEndpointRuntime(self, client, cache)
        except BaseException:
            client.close()
            raise


@contextmanager
def named_errors(name: str, url: str) -> Iterator[None]:
    """An ``EndpointError`` raised inside, prefixed with the input's name and URL (two endpoints of one run are told
    apart), unless it names the input already."""
    try:
        yield
    except EndpointError as error:
        if str(error).startswith(f"input '{name}'"):
            raise
        raise EndpointError(f"input '{name}' ({url}): {error}") from None


class OpenServedRuntime:
    """What every open served runtime shares (this module's and TGI's, ``certa.engine.core.runtimes.tgi``): its
    prepared runtime, client and resume cache, the transcript rows it keeps and the prompt tokens it scored; closing,
    posting with each answer kept for a resume, ``usage()`` and ``evidence()`` (module docstring)."""

    def __init__(self, runtime: EndpointRuntime, client: EndpointClient, cache: TranscriptCache) -> None:
        self.runtime = runtime
        self.client = client
        self.cache = cache
        self.completed = True
        """False once a scoring call failed: closing then keeps the answers so far for the next run (resume)."""
        self.rows: list[tuple[str, Exchange]] = []
        self.tokens = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.completed = self.completed and kind is None
        self.close()

    def close(self) -> None:
        """Close the client's connections; after a run whose every call completed, remove the answers kept for a
        resume (``certa.engine.core.runtimes.transcript_cache``: the run's transcript holds them)."""
        self.client.close()
        if self.completed:
            self.cache.clear()

    def _post_many(self, path: str, bodies: Sequence[Mapping[str, Any]], **options: Any) -> list[Exchange]:
        """``client.post_many``, each answer kept for a resume as it arrives, an error named by the input and URL
        (and marking the run not completed)."""
        try:
            with named_errors(self.runtime.name, self.runtime.declaration.url):
                return self.client.post_many(path, bodies, answered=self.cache.keep, **options)
        except BaseException:
            self.completed = False
            raise

    def _keep(self, unit: str, exchange: Exchange) -> Exchange:
        self.rows.append((unit, exchange))
        return exchange

    def usage(self) -> dict[str, int]:
        """Requests, retries, reused answers, prompt tokens scored and bytes, so far."""
        spent = self.client.usage()
        return {"requests": spent["requests"], "retries": spent["retries"], "reused": spent["reused"],
                "tokens": self.tokens, "bytes_sent": spent["bytes_sent"], "bytes_received": spent["bytes_received"]}

    def evidence(self) -> Mapping[str, Table]:
        """The transcript: one row per request (module docstring)."""
        return {TRANSCRIPT: transcript_table(self.rows)}


class OpenEndpointRuntime(OpenServedRuntime):
    """A served model being queried (module docstring)."""

    def __init__(self, runtime: EndpointRuntime, client: EndpointClient, cache: TranscriptCache) -> None:
        super().__init__(runtime, client, cache)
        self.models = self._keep("", client.get("/models"))
        try:
            self.version: Exchange | None = self._keep("", client.get("/../version"))
        except EndpointError:  # a server without vLLM's /version states none (a 404 is the request's fault)
            self.version = None
        listed = _listed_models(self.models.response)
        if runtime.declaration.model not in listed:
            raise EndpointError(f"input '{runtime.name}': the server at {runtime.declaration.url} does not serve "
                                f"'{runtime.declaration.model}' (its /models lists: {', '.join(listed) or 'none'})")
        entry = listed[runtime.declaration.model]
        longest = entry.get("max_model_len")
        # a prompt and the one token certa asks for must fit the length the server states (vLLM refuses more)
        runtime.positions = max(int(longest) - 1, 0) if isinstance(longest, int) and not isinstance(longest, bool) else 0

    def _check_length(self, tokens: int, what: str) -> None:
        """An ``InputError`` before any request when ``what`` of ``tokens`` tokens does not fit the server's stated
        length (``positions``: its ``max_model_len`` less the one generated token)."""
        positions = self.runtime.positions
        if positions and tokens > positions:
            raise InputError(f"input '{self.runtime.name}': {what} of {tokens} tokens does not fit the served model: its "
                             f"server states max_model_len {positions + 1}, and certa asks for one generated token "
                             f"besides the prompt; lower seq_len (or positions_per_prompt) to at most {positions}")

    def tokenize(self, texts: Sequence[str], *, add_special_tokens: bool) -> list[list[int]]:
        """The server's token ids of each text of ``texts``, with or without the special tokens its tokenizer adds
        (vLLM's ``POST /tokenize``), each exchange kept in the transcript (unit ``text:i``)."""
        model = self.runtime.declaration.model
        bodies = [{"model": model, "prompt": text, "add_special_tokens": add_special_tokens} for text in texts]
        served = []
        for i, exchange in enumerate(self._post_many("/../tokenize", bodies)):
            self._keep(f"text:{i}", exchange)
            try:
                served.append([int(t) for t in json_value(exchange.response)["tokens"]])
            except (ValueError, KeyError, TypeError):
                raise EndpointError(f"input '{self.runtime.name}': the server's /tokenize answer holds no token list "
                                    f"(text {i + 1})") from None
        return served

    def check_tokenization(self, texts: Sequence[str], encodings: Sequence[Sequence[int]], *,
                           add_special_tokens: bool) -> None:
        """An ``InputError`` unless the server tokenizes each text of ``texts`` into the ids of ``encodings`` (the
        tokenizer it borrowed: a local reference's ``tokenizer.json``, or another server's ``/tokenize``); nothing
        to check when the tokenizer is its own server's (``ServerTokenizer``)."""
        tokenizer_of = self.runtime.tokenizer_of()
        if tokenizer_of is None:
            return
        for i, (served, expected) in enumerate(zip(self.tokenize(texts, add_special_tokens=add_special_tokens),
                                                   encodings)):
            if served != list(expected):
                at = next((j for j, (a, b) in enumerate(zip(served, expected)) if a != b), min(len(served),
                                                                                             len(expected)))
                raise InputError(
                    f"input '{self.runtime.name}': the server tokenizes text {i + 1} of {len(texts)} differently from "
                    f"{tokenizer_of} (first difference at token {at}: "
                    f"{served[at] if at < len(served) else 'end'} served vs "
                    f"{expected[at] if at < len(expected) else 'end'}): the two models' tokenizers differ, so their "
                    "log-probabilities cannot be compared token by token")

    def _score(self, units: Sequence[Any], sequences: Sequence[np.ndarray],
               progress: ScoreProgress | None) -> list[np.ndarray]:
        """The prompt log-probs of each sequence, ``PROMPTS_PER_REQUEST`` sequences a request, every exchange kept
        with the units it scored (a JSON list: ``[window id, targets]`` per window, or ``sequence:i``)."""
        model = self.runtime.declaration.model
        groups = [range(i, min(i + PROMPTS_PER_REQUEST, len(sequences)))
                  for i in range(0, len(sequences), PROMPTS_PER_REQUEST)]
        bodies = [prompt_logprobs_request(model, [sequences[i].tolist() for i in group]) for group in groups]

        def report(done: int, total: int, requests_per_s: float, tokens_per_s: float) -> None:
            if progress is not None:  # in sequences (windows), not requests
                progress(min(done * PROMPTS_PER_REQUEST, len(sequences)), len(sequences), tokens_per_s)

        exchanges = self._post_many(_COMPLETIONS, bodies, progress=report)
        for group, exchange in zip(groups, exchanges):
            self._keep(json.dumps([units[i] for i in group], separators=(",", ":")), exchange)
        self.tokens += int(sum(int(s.size) for s in sequences))
        return exchange_logprobs(exchanges, model, self.runtime.name)

    def window_nll(self, windows: Windows, *, batch_size: int, progress: ScoreProgress | None = None) -> np.ndarray:
        """Each window's Σ −ln p over its targets, from the server's prompt log-probs (``window_sums``)."""
        del batch_size  # the server batches; certa bounds the requests in flight (client.concurrency)
        inputs = [windows.flat[s: s + n] for s, n in zip(windows.start.tolist(), windows.length.tolist())]
        self._check_length(int(windows.length.max()) if windows.length.size else 0, "a window")
        units = [[window, int(targets)] for window, targets in zip(windows.ids, windows.targets.tolist())]
        return window_sums(self._score(units, inputs, progress), windows.targets, self.runtime.name)

    def token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """ln p(x_t | x_<t), t = 1 .. n, of each sequence, from the server's prompt log-probs."""
        arrays = [np.asarray(s, dtype=np.int64) for s in sequences]
        self._check_length(max((a.size for a in arrays), default=0), "a prompt")
        return self._score([f"sequence:{i}" for i in range(len(arrays))], arrays, None)

    def generate(self, sequences: Sequence[Sequence[int]], *, max_tokens: int,
                 seeds: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Generated-token mode: each sequence continued by at most ``max_tokens`` tokens sampled from the served
        model's own distribution (temperature 1, no truncation, ``seeds[i]``; ``generation_request``, one prompt a
        request), as (token ids, their log-probs): shorter when the end-of-sequence token came first."""
        model = self.runtime.declaration.model
        sent = [[int(t) for t in ids] for ids in sequences]
        bodies = [generation_request(model, ids, max_tokens=max_tokens, seed=int(seed)) for ids, seed in zip(sent, seeds)]
        exchanges = self._post_many(_COMPLETIONS, bodies)
        generated = []
        for i, (ids, exchange) in enumerate(zip(sent, exchanges)):
            self._keep(json.dumps([f"generate:{i}"]), exchange)
            try:
                generated += read_generated(exchange.response, model=model, sent=[ids])
            except EndpointError as error:
                raise EndpointError(f"input '{self.runtime.name}': {error}") from None
        self.tokens += sum(len(ids) for ids in sent) + sum(int(tokens.size) for tokens, _ in generated)
        return generated

    def describe(self) -> Mapping[str, Any]:
        """The endpoint's identity: the declaration's digest, the tokenizer it was checked against, and the
        server's claims (module docstring)."""
        runtime = self.runtime
        partner = runtime.partner
        completion = next((e for _, e in self.rows if e.path == _COMPLETIONS), None)
        claims = server_claims(self.models.response, self.version.response if self.version is not None else None,
                               completion.response) if completion is not None else {}
        special = (partner.prepared.special_tokens.record(partner.tokenizer)
                   if partner is not None and getattr(partner, "prepared", None) is not None
                   and partner.prepared.special_tokens is not None else None)
        own = isinstance(runtime.tokenizer, ServerTokenizer) and partner is None
        return {"kind": "endpoint", "input": runtime.name, "sha256": runtime.sha256, "model_type": None,
                "parameters": None, "tokenizer_sha256": runtime.tokenizer_sha256,
                "tokenizer_of": runtime.name if own else partner.name if partner is not None else None,
                "tokens_from": "server" if own or isinstance(partner, EndpointRuntime) else "tokenizer.json",
                "special_tokens": special, "signature": None, "claims": claims, "device": "served",
                "dtype": "served", "libraries": {}}


class ServedEncoding(NamedTuple):
    """A text's token ids as a server gave them (the ``ids`` a ``tokenizers`` encoding has)."""

    ids: list[int]


class ServerTokenizer:
    """A served model's own tokenizer, queried (``OpenEndpointRuntime.tokenize``: vLLM's ``POST /tokenize``): what
    two served models are compared on when no tokenizer file is declared. ``encode_batch`` answers as a
    ``tokenizers.Tokenizer``'s does, as far as a scorer uses it (each text's ``ids``)."""

    def __init__(self, opened: OpenEndpointRuntime) -> None:
        self.opened = opened

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[ServedEncoding]:
        """Each text's ids, with the special tokens the server's tokenizer adds unless ``add_special_tokens`` is
        False."""
        return [ServedEncoding(ids) for ids in self.opened.tokenize(list(texts), add_special_tokens=add_special_tokens)]


def transcript_table(rows: Sequence[tuple[str, Exchange]]) -> Table:
    """The transcript rows (unit, then the Exchange's fields) as a table."""
    return table_from_columns(TRANSCRIPT, {
        "unit": [unit for unit, _ in rows], "key": [e.key for _, e in rows], "method": [e.method for _, e in rows],
        "path": [e.path for _, e in rows], "request": [e.request for _, e in rows],
        "status": np.array([e.status for _, e in rows], dtype=np.float64),
        "response": [e.response for _, e in rows],
        "elapsed_ms": np.array([e.elapsed_ms for _, e in rows], dtype=np.float64),
        "attempts": np.array([e.attempts for _, e in rows], dtype=np.float64)})


def read_transcript(table: Table) -> list[tuple[str, Exchange]]:
    """The rows of a captured transcript (``transcript_table``) back as (unit, Exchange)."""
    missing = [column for column in _COLUMNS if not table.has(column)]
    if missing:
        raise InputError(f"the captured transcript '{table.name}' lacks the column(s) {', '.join(missing)}")
    text = {column: table.text(column) for column in ("unit", "key", "method", "path", "request", "response")}
    numbers = {column: table.numeric(column) for column in ("status", "elapsed_ms", "attempts")}
    rows = [(str(text["unit"][i]), Exchange(key=str(text["key"][i]), method=str(text["method"][i]),
                                            path=str(text["path"][i]), request=str(text["request"][i]),
                                            status=int(numbers["status"][i]), response=str(text["response"][i]),
                                            elapsed_ms=float(numbers["elapsed_ms"][i]),
                                            attempts=int(numbers["attempts"][i])))
            for i in range(table.n_rows)]
    for i, (_, exchange) in enumerate(rows):
        if request_key(exchange.method, exchange.path, exchange.request.encode("utf-8")) != exchange.key:
            raise InputError(f"row {i + 1} of the captured transcript '{table.name}' ({exchange.method} "
                             f"{exchange.path}) does not hold the request its key names: the transcript was edited")
    return rows


def _completions(table: Table, mode: str) -> list[tuple[str, Exchange]]:
    """The completion rows of a captured transcript (``read_transcript``) of one mode, in order: ``teacher`` (the
    requests with ``prompt_logprobs``) or ``generated``."""
    rows = [(unit, exchange) for unit, exchange in read_transcript(table) if exchange.path == _COMPLETIONS]
    return [(unit, exchange) for unit, exchange in rows
            if ("prompt_logprobs" in json.loads(exchange.request)) == (mode == "teacher")]


def transcript_logprobs(endpoint: Table, transcript: Table) -> list[np.ndarray]:
    """Every sequence the served model ``endpoint`` scored by teacher forcing, in the order it was asked: the
    prompt log-probs (tokens 1 .. n) its captured ``transcript``'s answers give, each checked again against the ids
    its request sent (``exchange_logprobs``; a TGI server's against the ids its unit holds,
    ``certa.engine.core.runtimes.tgi.replayed_logprobs``). A replay's numbers, without the server."""
    declaration = read_declaration(endpoint.name, endpoint.raw)
    if declaration.api == API_TGI:
        from certa.engine.core.runtimes.tgi import replayed_logprobs

        return replayed_logprobs(transcript, endpoint.name)[1]
    return exchange_logprobs([exchange for _, exchange in _completions(transcript, "teacher")], declaration.model,
                             endpoint.name)


def transcript_generations(endpoint: Table, transcript: Table) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every continuation the served model ``endpoint`` generated, in the order it was asked: (generated ids, their
    log-probs) from its captured ``transcript`` (``read_generated``, each answer checked again)."""
    model = read_declaration(endpoint.name, endpoint.raw).model
    generated = []
    for _, exchange in _completions(transcript, "generated"):
        sent = json.loads(exchange.request)["prompt"]
        try:
            generated += read_generated(exchange.response, model=model, sent=[sent])
        except EndpointError as error:
            raise EndpointError(f"input '{endpoint.name}': {error}") from None
    return generated


def _listed_models(text: str) -> dict[str, Mapping[str, Any]]:
    """The ``/models`` answer's entries by ``id``."""
    try:
        data = json_value(text)["data"]
        return {str(entry["id"]): entry for entry in data if isinstance(entry, dict) and "id" in entry}
    except (ValueError, KeyError, TypeError):
        raise EndpointError("GET /models: the answer has no 'data' list of models") from None


def exchange_logprobs(exchanges: Sequence[Exchange], model: str, name: str) -> list[np.ndarray]:
    """The prompt log-probs (tokens 1 .. n) of every prompt of the completion ``exchanges``, in order, each checked
    against the ids its request sent (``read_prompt_logprobs``)."""
    scored: list[np.ndarray] = []
    for exchange in exchanges:
        sent = json.loads(exchange.request)["prompt"]
        try:
            scored += read_prompt_logprobs(exchange.response, model=model, sent=sent)
        except EndpointError as error:
            raise EndpointError(f"input '{name}': {error}") from None
    return scored


def window_sums(logprobs: Sequence[np.ndarray], targets: np.ndarray, name: str) -> np.ndarray:
    """Σ −ln p over the last ``targets[w]`` log-probs of window w (float64, summed in order): the windows' NLL sums,
    from a live run's answers or a replay's transcript alike."""
    targets = np.asarray(targets, dtype=np.int64)
    lengths = np.array([lp.size for lp in logprobs], dtype=np.int64)
    if lengths.size != targets.size or np.any(targets > lengths):
        bad = np.flatnonzero(targets > lengths) if lengths.size == targets.size else np.array([0])
        raise EndpointError(f"input '{name}': the server's answers give {lengths.size} windows' log-probs for "
                            f"{targets.size} windows (window {int(bad[0]) + 1}: fewer log-probs than targets)")
    flat = np.concatenate(logprobs) if len(logprobs) else np.empty(0)
    starts = np.cumsum(lengths) - lengths
    position = np.arange(flat.size) - np.repeat(starts, lengths)
    scored = position >= np.repeat(lengths - targets, lengths)
    sums = np.zeros(lengths.size, dtype=np.float64)
    np.add.at(sums, np.repeat(np.arange(lengths.size), lengths)[scored], -flat[scored])
    return sums


def check_replayed_windows(endpoint: Table, transcript: Table, windows: Table) -> None:
    """An ``InputError`` unless the captured per-window table ``windows`` (``window_id``, ``nll_sum``) of the served
    model ``endpoint`` follows from its captured ``transcript``: the same windows in the same order, and the NLL
    sums ``window_sums`` computes from the recorded answers (each checked again against the ids its request sent;
    a TGI server's against the ids its unit holds: ``certa.engine.core.runtimes.tgi.replayed_windows``), bit for
    bit."""
    declaration = read_declaration(endpoint.name, endpoint.raw)
    if declaration.api == API_TGI:
        from certa.engine.core.runtimes.tgi import replayed_windows

        ids, targets, logprobs = replayed_windows(transcript, endpoint.name)
    else:
        ids, targets, logprobs = _replayed_completions(endpoint, transcript)
    if ids != [str(window) for window in windows.text("window_id")]:
        raise InputError(f"the captured windows of input '{endpoint.name}' are not the windows its transcript scored")
    sums = window_sums(logprobs, targets, endpoint.name)
    recorded = windows.numeric("nll_sum")
    if not np.array_equal(sums, recorded):
        first = int(np.flatnonzero(sums != recorded)[0])
        raise InputError(f"the captured NLL sum of window {first + 1} of input '{endpoint.name}' is "
                         f"{recorded[first]!r}, but its transcript gives {sums[first]!r}: the table does not follow "
                         "from the server's recorded answers")


def _replayed_completions(endpoint: Table, transcript: Table) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """The windows a captured completions transcript scored (ids, in order), their targets, and their prompt
    log-probs read again from the recorded answers (``transcript_logprobs``)."""
    units = [pair for unit, _ in _completions(transcript, "teacher") for pair in json.loads(unit)]
    ids, targets = window_labels(units, endpoint.name, "[id, targets] pairs")
    return ids, targets, transcript_logprobs(endpoint, transcript)


def window_labels(labels: Sequence[Any], name: str, form: str) -> tuple[list[str], np.ndarray]:
    """The window ids and scored-target counts of a transcript's window labels (``[id, targets]`` each); an
    ``InputError`` saying the transcript of input ``name`` does not name its windows as ``form`` otherwise."""
    try:
        return ([str(window) for window, _ in labels],
                np.array([int(count) for _, count in labels], dtype=np.int64))
    except (TypeError, ValueError):
        raise InputError(f"the transcript of input '{name}' does not name its windows as {form}") from None
