"""The HTTP client certa talks to a served model's endpoint with: bounded retries, a concurrency limit, a request
budget, and a transcript row (``Exchange``) for every request, from which a replay answers without the network.

Protocol, per request (``EndpointClient.get``, ``post``, ``post_many``):

- The body is sent as its RFC 8785 canonical JSON (https://www.rfc-editor.org/rfc/rfc8785), so the transcript's
  ``request`` is exactly the bytes sent, and the request's ``key`` is the SHA-256 of the canonical JSON
  ``[method, path, body]`` (``path`` relative to the base URL; ``/../version`` climbs out of ``/v1``). A key given
  with ``api_key`` is sent as ``Authorization: Bearer KEY`` and appears in no Exchange, message or repr.
- Network faults (connection refused or reset, the server closing the connection, a timeout: ``timeout`` seconds
  for the connection and for each read) and the statuses 429, 500, 502, 503 and 504 are retried, at most
  ``retries`` times, after ``backoff · 2^(i-1)`` seconds for the i-th retry, or the server's ``Retry-After``
  (RFC 9110 §10.2.3, https://www.rfc-editor.org/rfc/rfc9110#name-retry-after) when it sends one, either capped
  at ``max_backoff`` (the exponential backoff of https://aws.amazon.com/builders-library/timeouts-retries-and-backoff-with-jitter/,
  without jitter). Any other status (400, 401, 404, ...) is the request's fault: an ``EndpointError`` at once,
  with the server's ``error.message`` (the OpenAI error body, https://platform.openai.com/docs/guides/error-codes).
- A 2xx answer must be a complete (its ``Content-Length`` met), UTF-8, JSON object of at most
  ``max_response_bytes``, without an ``error`` member: otherwise an ``EndpointError`` naming the path and the
  body's first 200 characters. An answer holding the API key (a server that echoes it) is an ``EndpointError`` too:
  answers are recorded, a key never is.
- ``max_requests`` bounds the requests sent, retries included; one more is an ``EndpointError`` naming the budget
  and the count sent. Requests answered from ``reuse`` are not sent and do not count.

Transcripts: every answered request is an ``Exchange`` (key, method, path, request, status, response text as
received, elapsed milliseconds from the first attempt to the final answer, attempts). ``RecordedTransport`` answers
from a transcript instead of the network (a request it lacks is an ``EndpointError``: a replay never re-queries);
``reuse=`` makes a client answer from earlier exchanges first and send only what they lack (a resumed run). The
network sits behind ``Transport`` (one method, ``send``), which tests replace with fakes. Standard library only.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import json
import posixpath
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

from certa.engine.foundation.canonical import canonical_bytes, sha256_hex
from certa.engine.foundation.errors import EndpointError, InputError
from certa.engine.foundation.json_read import json_value

__all__ = ["RETRIED_STATUSES", "ClientSettings", "Exchange", "Reply", "Transport", "HTTPTransport",
           "RecordedTransport", "EndpointClient", "request_key"]

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
"""The statuses retried (too many requests, and the server's transient failures); any other is answered at once."""

PREVIEW_CHARS = 200
"""The most characters of a response body an error message quotes."""

Progress = Callable[[int, int, float, float], None]
"""``progress(done, total, requests_per_s, tokens_per_s)``, called by ``post_many`` after each answer."""


@dataclass(frozen=True)
class ClientSettings:
    """How the client talks to an endpoint (module docstring): ``timeout`` seconds for the connection and for each
    read; ``retries`` after the first attempt; the first retry's delay ``backoff``, doubling, at most
    ``max_backoff``; ``concurrency`` requests in flight; ``max_requests`` sent at most (None: no budget);
    ``max_response_bytes`` read of one response at most."""

    timeout: float = 60.0
    retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    concurrency: int = 4
    max_requests: int | None = None
    max_response_bytes: int = 256 * 2**20

    def __post_init__(self) -> None:
        checks = {"timeout": self.timeout > 0, "retries": self.retries >= 0, "backoff": self.backoff >= 0,
                  "max_backoff": self.max_backoff >= 0, "concurrency": self.concurrency >= 1,
                  "max_requests": self.max_requests is None or self.max_requests >= 1,
                  "max_response_bytes": self.max_response_bytes >= 1}
        for name, ok in checks.items():
            if not ok:
                raise InputError(f"the endpoint client's '{name}' is out of range (got {getattr(self, name)!r})")

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first): the server's ``Retry-After`` when given,
        else ``backoff · 2^(retry-1)``; never more than ``max_backoff``."""
        wanted = self.backoff * 2.0 ** (retry - 1) if retry_after is None else retry_after
        return min(wanted, self.max_backoff)


@dataclass(frozen=True)
class Exchange:
    """One request and its final answer, as a transcript row (module docstring). ``request`` is the canonical JSON
    text of the body ("" for a GET), ``response`` the body's text exactly as received."""

    key: str
    method: str
    path: str
    request: str
    status: int
    response: str
    elapsed_ms: float
    attempts: int


@dataclass(frozen=True)
class Reply:
    """What a transport received: the status, the headers (names in lower case), the body, and whether the body is
    complete (False when the connection closed before the ``Content-Length`` bytes, or a chunk, came)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    complete: bool = True


class Transport(Protocol):
    """Sends one request; network faults raise ``OSError`` (``ConnectionError``, ``TimeoutError``)."""

    def send(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        """Send ``method path`` (``path`` relative to the base URL) with ``body`` and ``headers``; the reply."""
        ...


def request_key(method: str, path: str, body: bytes) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON ``[method, path, body]``, from ``body``'s canonical bytes (b""
    for none, encoded as ``null``): an array's canonical form is its members' joined by commas."""
    return sha256_hex(_key_prefix(method, path) + (body or b"null") + b"]")


@functools.lru_cache(maxsize=64)
def _key_prefix(method: str, path: str) -> bytes:
    return b"[%s,%s," % (canonical_bytes(method), canonical_bytes(path))


class HTTPTransport:
    """The network: ``http.client`` connections to the base URL's host, kept alive in a pool (one per request in
    flight). A pooled connection the server has closed meanwhile is replaced once, silently, as HTTP clients do."""

    def __init__(self, base_url: str, *, timeout: float, max_response_bytes: int) -> None:
        parts = urlsplit(base_url)
        self._secure = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._base_path = parts.path.rstrip("/")
        self._timeout, self._limit = timeout, max_response_bytes
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def send(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        """One round trip (``Transport.send``); at most ``max_response_bytes + 1`` bytes of the body are read."""
        target = self._base_path + path
        if "/.." in target:
            target = posixpath.normpath(target)
        with self._lock:
            pooled = self._idle.pop() if self._idle else None
        connection = pooled or self._connect()
        while True:
            try:
                reply, reusable = self._round_trip(connection, method, target, body, headers)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                connection.close()
                if pooled is None:
                    raise
                pooled, connection = None, self._connect()  # the server closed the idle connection: once more
                continue
            except BaseException:
                connection.close()
                raise
            break
        if reusable:
            with self._lock:
                self._idle.append(connection)
        else:
            connection.close()
        return reply

    def close(self) -> None:
        """Close the pooled connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self._secure else http.client.HTTPConnection
        return kind(self._host, self._port, timeout=self._timeout)

    def _round_trip(self, connection: http.client.HTTPConnection, method: str, target: str, body: bytes,
                    headers: Mapping[str, str]) -> tuple[Reply, bool]:
        connection.request(method, target, body=body or None, headers=headers)
        response = connection.getresponse()
        complete = True
        try:
            data = response.read(self._limit + 1)
        except http.client.IncompleteRead as cut:
            data, complete = cut.partial, False
        received = {name.lower(): value for name, value in response.getheaders()}
        length = received.get("content-length")
        if length is not None and length.isdigit() and len(data) < int(length):
            complete = False
        reusable = complete and response.isclosed() and not response.will_close
        return Reply(response.status, received, data, complete), reusable


class RecordedTransport:
    """Answers each request from the recorded ``Exchange`` with the same key: a replay without the network. A
    request the transcript lacks is an ``EndpointError`` (a replay never re-queries), and an exchange whose key is not
    its own request's (an edited transcript) is refused when the transport is built."""

    def __init__(self, exchanges: Iterable[Exchange]) -> None:
        self._answers: dict[str, Exchange] = {}
        for exchange in exchanges:
            if request_key(exchange.method, exchange.path, exchange.request.encode("utf-8")) != exchange.key:
                raise EndpointError(f"the transcript's exchange {exchange.key[:16]} ({exchange.method} {exchange.path}) "
                                    "does not match its own request: the transcript was edited")
            self._answers[exchange.key] = exchange

    def send(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        """The recorded answer to this request (``Transport.send``)."""
        key = request_key(method, path, body)
        recorded = self._answers.get(key)
        if recorded is None:
            raise EndpointError(f"{method} {path}: the transcript has no such request (key {key[:16]}); a replay "
                                "answers from the recorded transcript and never queries the endpoint")
        data = recorded.response.encode("utf-8")
        return Reply(recorded.status, {"content-type": "application/json", "content-length": str(len(data))}, data)


class _Request(NamedTuple):
    method: str
    path: str
    body: bytes
    key: str


class EndpointClient:
    """A client of the endpoint at ``base_url`` (``http://`` or ``https://`` with a host), sending ``api_key`` as a
    bearer token; ``transport`` replaces the network (tests, ``RecordedTransport``); ``reuse`` answers the
    requests it holds without sending them (module docstring)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, settings: ClientSettings = ClientSettings(),
                 transport: Transport | None = None, reuse: Iterable[Exchange] = ()) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
            raise EndpointError(f"an endpoint's base URL must be http:// or https:// with a host and no credentials "
                                f"(got scheme '{parts.scheme}')")
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self._secret = api_key or None
        self._network = HTTPTransport(self.base_url, timeout=settings.timeout,
                                      max_response_bytes=settings.max_response_bytes) if transport is None else None
        self._transport: Transport = self._network or transport  # type: ignore[assignment]
        self._headers = {"Content-Type": "application/json",
                         **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self._reuse = {exchange.key: exchange for exchange in reuse}
        self._lock = threading.Lock()
        self._usage = dict.fromkeys(("requests", "retries", "failures", "reused", "bytes_sent", "bytes_received"), 0)

    def __repr__(self) -> str:
        key = "'<set>'" if self._secret else "None"
        return f"EndpointClient({self.base_url!r}, api_key={key}, settings={self.settings!r})"

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the network connections this client opened (none when it was given a transport)."""
        if self._network is not None:
            self._network.close()

    def usage(self) -> dict[str, int]:
        """What this client spent: ``requests`` sent (retries included), ``retries``, ``failures`` (requests that
        ended in an error), ``reused`` (answered from ``reuse``), ``bytes_sent`` and ``bytes_received`` (bodies)."""
        with self._lock:
            return dict(self._usage)

    def get(self, path: str) -> Exchange:
        """``GET path`` (relative to the base URL): its Exchange."""
        return self._answer(self._request("GET", path, None), None)[0]

    def post(self, path: str, body: Mapping[str, Any]) -> Exchange:
        """``POST path`` with the JSON ``body``: its Exchange."""
        return self._answer(self._request("POST", path, body), None)[0]

    def post_many(self, path: str, bodies: Iterable[Mapping[str, Any]], *, progress: Progress | None = None,
                  answered: Callable[[Exchange], None] | None = None) -> list[Exchange]:
        """``POST path`` once per distinct body, at most ``concurrency`` in flight; the Exchanges in the order of
        ``bodies`` (equal bodies share one). The bodies are encoded first; then each sending thread takes the next
        request as it is free (no future per request). ``progress(done, total, requests_per_s, tokens_per_s)``
        follows the distinct requests (called from the sending threads, one call at a time), tokens counted from the
        answers' ``usage.prompt_tokens + usage.completion_tokens``. The first error stops the requests not yet sent
        and is raised: no partial list; ``answered(exchange)`` is called with each answer the network gives, as it
        arrives (one call at a time), so a caller can keep the answers of a call that fails later."""
        requests = [self._request("POST", path, body) for body in bodies]
        distinct = {request.key: request for request in requests}
        answers = {key: self._reuse[key] for key in distinct if key in self._reuse}
        self._count("reused", len(answers))
        pending = iter([request for key, request in distinct.items() if key not in answers])
        lock, stop, failed = threading.Lock(), threading.Event(), []
        start, reused, tokens = time.perf_counter(), len(answers), 0

        def worker() -> None:  # no future, no wake-up of the caller per request; _send checks ``stop``
            nonlocal tokens
            while True:
                with lock:
                    request = next(pending, None)
                if request is None:
                    return
                try:
                    exchange, usage = self._answer(request, stop)
                except _Stopped:
                    return
                except BaseException as error:  # the first failure stops the others; the caller gets it
                    failed.append(error)
                    stop.set()
                    return
                with lock:
                    answers[request.key] = exchange
                    if answered is not None:
                        answered(exchange)
                    if progress is not None:
                        tokens += _tokens(usage)
                        seconds = max(time.perf_counter() - start, 1e-9)
                        progress(len(answers), len(distinct), (len(answers) - reused) / seconds, tokens / seconds)

        workers = [threading.Thread(target=worker, daemon=True)
                   for _ in range(min(self.settings.concurrency, len(distinct) - reused))]
        try:
            for thread in workers:
                thread.start()
            for thread in workers:
                thread.join()
        finally:
            stop.set()  # an interrupted caller leaves no request to be sent
        if failed:
            raise failed[0]
        return [answers[request.key] for request in requests]

    # ------------------------------------------------------------------------------------------- one request

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None) -> _Request:
        if not path.startswith("/"):
            raise EndpointError(f"a request path must start with '/' (relative to the base URL; got {path[:80]!r})")
        data = b"" if body is None else canonical_bytes(body)
        return _Request(method, path, data, request_key(method, path, data))

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._usage[name] += amount

    def _answer(self, request: _Request, stop: threading.Event | None) -> tuple[Exchange, Any]:
        """The request's Exchange (from ``reuse``, or sent with its retries) and its answer's ``usage`` member (None
        for a reused one); no further attempt once ``stop`` is set (another request of the same ``post_many``
        failed)."""
        if request.key in self._reuse:
            self._count("reused")
            return self._reuse[request.key], None
        try:
            return self._send(request, stop)
        except EndpointError as error:
            message = self._redact(str(error))
        self._count("failures")
        raise EndpointError(message)  # outside the handler: no context holding the unredacted message

    def _send(self, request: _Request, stop: threading.Event | None) -> tuple[Exchange, Any]:
        where, start, attempt = f"{request.method} {request.path}", time.perf_counter(), 0
        while True:
            attempt += 1
            if stop is not None and stop.is_set():
                raise _Stopped
            self._spend(where, attempt, len(request.body))
            retry_after = None
            try:
                reply = self._transport.send(request.method, request.path, request.body, self._headers)
            except TimeoutError:
                fault = f"no answer within the timeout of {self.settings.timeout:g} s"
            except ConnectionError as error:
                fault = _network_fault(error)
            except OSError as error:
                raise EndpointError(f"{where}: cannot reach the endpoint: {error.strerror or type(error).__name__}") \
                    from None
            except http.client.HTTPException as error:
                raise EndpointError(f"{where}: the endpoint's answer is not HTTP ({type(error).__name__})") from None
            else:
                self._count("bytes_received", len(reply.body))
                if reply.status not in RETRIED_STATUSES:
                    break
                fault = f"HTTP {reply.status}" + _said(reply.body)
                retry_after = _retry_after(reply.headers)
            if attempt > self.settings.retries:
                raise EndpointError(f"{where} failed after {attempt} attempts: {fault}")
            time.sleep(self.settings.delay(attempt, retry_after))
        text, usage = _checked_body(where, reply, self.settings.max_response_bytes)
        if self._secret and self._secret in text:
            raise EndpointError(f"{where}: the response holds the API key (the server echoes it); certa records every "
                                "response and never a key, so this answer is refused")
        return Exchange(key=request.key, method=request.method, path=request.path,
                        request=request.body.decode("utf-8"), status=reply.status, response=text,
                        elapsed_ms=(time.perf_counter() - start) * 1000.0, attempts=attempt), usage

    def _spend(self, where: str, attempt: int, size: int) -> None:
        """Count one request sent against the budget; an ``EndpointError`` when the budget is spent."""
        budget = self.settings.max_requests
        with self._lock:
            sent = self._usage["requests"]
            if budget is not None and sent >= budget:
                raise EndpointError(f"the request budget max_requests={budget} is spent ({sent} requests sent, "
                                    f"retries included): {where} was not sent")
            self._usage["requests"] = sent + 1
            self._usage["retries"] += attempt > 1
            self._usage["bytes_sent"] += size

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "<api key>") if self._secret else text


class _Stopped(Exception):
    """A request of a ``post_many`` that another request's failure stopped (never raised to the caller)."""


def _network_fault(error: ConnectionError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(error, BrokenPipeError):
        return "the server closed the connection while the request was sent"
    return "connection reset"


def _preview(body: bytes) -> str:
    """The body's first ``PREVIEW_CHARS`` characters, as one quoted line."""
    text = body[: PREVIEW_CHARS * 4].decode("utf-8", errors="replace")[:PREVIEW_CHARS]
    return json.dumps(text, ensure_ascii=False) + (" ..." if len(body) > len(text.encode("utf-8")) else "")


def _server_message(body: bytes) -> str | None:
    """The server's own message in an error body: ``error.message`` (OpenAI, vLLM), ``error`` as text, or
    ``detail`` (FastAPI); None when the body holds none."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    message = error.get("message") if isinstance(error, dict) else error if error is not None else value.get("detail")
    return None if message is None else str(message)[:PREVIEW_CHARS]


def _said(body: bytes) -> str:
    """``": the server said: MESSAGE"``, or the body's first characters, or nothing for an empty body."""
    message = _server_message(body)
    if message is not None:
        return f": the server said: {message}"
    return f": the body begins {_preview(body)}" if body else ""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a ``Retry-After`` header (delay-seconds or an HTTP-date), None when absent or unreadable."""
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _checked_body(where: str, reply: Reply, limit: int) -> tuple[str, Any]:
    """The text of a final answer that is not retried, and its ``usage`` member (None if absent); an ``EndpointError``
    for an error status, an incomplete, oversized, non-UTF-8 or non-JSON body, a JSON value that is not an object,
    or an object holding ``error``."""
    if not 200 <= reply.status < 300:
        raise EndpointError(f"{where}: HTTP {reply.status} (not retried: the request's fault){_said(reply.body)}")
    if len(reply.body) > limit:
        raise EndpointError(f"{where}: the response exceeds max_response_bytes={limit}")
    if not reply.complete:
        raise EndpointError(f"{where}: the response was cut short ({len(reply.body)} bytes of "
                            f"{reply.headers.get('content-length', 'an unknown length')}); it begins {_preview(reply.body)}")
    try:
        text = reply.body.decode("utf-8")
        value = json_value(text)
    except (ValueError, UnicodeDecodeError):
        raise EndpointError(f"{where}: the response is not UTF-8 JSON; it begins {_preview(reply.body)}") from None
    if not isinstance(value, dict):
        raise EndpointError(f"{where}: the response is not a JSON object; it begins {_preview(reply.body)}")
    if value.get("error") is not None:
        raise EndpointError(f"{where}: HTTP {reply.status} with an error inside{_said(reply.body)}")
    return text, value.get("usage")


def _tokens(usage: Any) -> int:
    """``usage.prompt_tokens + usage.completion_tokens`` where they are counts, else 0."""
    if not isinstance(usage, dict):
        return 0
    return sum(value for value in (usage.get("prompt_tokens"), usage.get("completion_tokens"))
               if isinstance(value, int) and not isinstance(value, bool) and value >= 0)
