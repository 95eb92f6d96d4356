"""A fault-injecting HTTP proxy in front of a real server, for the served-model fault tests.

``FaultProxy(upstream, fault)`` listens on ``127.0.0.1:0`` (one thread per connection, HTTP/1.1 keep-alive, as a
serving engine answers) and hands every request to ``fault(proxy, request, forward)``, which returns the ``Answer``
to send, or None to close the connection without answering. ``forward()`` sends the request on to the upstream
server unchanged and returns its answer, so a fault can pass it through, edit it, replace it, or never ask.
``request.index`` counts the requests on the same path from 0 (retries included), so a fault is scripted per
request: "the first completion stalls", "the second completion finds the server dead".

The faults (below) are the ones a served run meets: ``pass_through``; ``killed_after(n)`` (the server dies on the
n+1-th completion: every connection closes unanswered and new ones are refused); ``stalled(seconds)`` (the first
completion is answered by silence, then a closed connection); ``failing(status, times)`` (the first ``times``
completions); and, on every completion (so that a retry the load causes meets the fault too): ``truncated`` (a body
shorter than its ``Content-Length``), ``malformed`` (a 200 that is not JSON), ``error_inside`` (a 200 whose JSON
holds ``error``, echoing the request's Authorization header, as a careless server's error message may),
``key_echoed`` (a right answer that carries the Authorization header too) and ``rewritten(path, edit)`` (the
upstream JSON answer, edited). Standard library only.
"""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

COMPLETIONS = "/v1/completions"
TOKENIZE = "/tokenize"


@dataclass(frozen=True)
class Request:
    """A request the proxy received: ``index`` is its rank among the requests on ``path`` (from 0)."""

    method: str
    path: str
    index: int
    body: bytes
    authorization: str


@dataclass(frozen=True)
class Answer:
    """What the proxy sends back; ``declared_length`` is the ``Content-Length`` when it is not ``len(body)``."""

    status: int
    body: bytes
    declared_length: int | None = None


Forward = Callable[[], Answer]
Fault = Callable[["FaultProxy", Request, Forward], "Answer | None"]


class FaultProxy:
    """The proxy (module docstring): ``url`` is its base URL with the upstream's path (``http://127.0.0.1:P/v1``);
    ``requests`` lists what it received; use it as a context manager (``close`` stops it and wakes any stall)."""

    def __init__(self, upstream: str, fault: Fault) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.fault = fault
        self.requests: list[Request] = []
        self.killed = threading.Event()
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{parts.path}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and wake the handlers that wait (``pause``)."""
        self.closed.set()
        self.kill()

    def kill(self) -> None:
        """The server dies: every open connection is closed, unanswered, and new connections are refused."""
        with self._lock:
            if self.killed.is_set():
                return
            self.killed.set()
            connections = list(self._connections)
        self._server.shutdown()
        self._server.server_close()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed
                pass

    def opened(self, connection: socket.socket, is_open: bool) -> None:
        """Track a client's connection (``kill`` closes the open ones)."""
        with self._lock:
            if is_open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds``, or until the proxy is closed."""
        self.closed.wait(seconds)

    def received(self, method: str, path: str, body: bytes, authorization: str) -> Request:
        """Record a request, numbered among those on its path."""
        with self._lock:
            index = sum(request.path == path for request in self.requests)
            request = Request(method, path, index, body, authorization)
            self.requests.append(request)
        return request

    def forward(self, request: Request) -> Answer:
        """The upstream server's answer to ``request`` (a connection of its own)."""
        connection = http.client.HTTPConnection(*self.upstream, timeout=120)
        try:
            headers = {"Content-Type": "application/json", "Authorization": request.authorization}
            connection.request(request.method, request.path, body=request.body or None, headers=headers)
            response = connection.getresponse()
            return Answer(response.status, response.read())
        finally:
            connection.close()


def _handler(proxy: FaultProxy) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            proxy.opened(self.connection, True)

        def finish(self) -> None:
            proxy.opened(self.connection, False)
            super().finish()

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if proxy.killed.is_set():
                self.close_connection = True
                return
            request = proxy.received(self.command, self.path, body, self.headers.get("Authorization", ""))
            answer = proxy.fault(proxy, request, lambda: proxy.forward(request))
            if answer is None or proxy.killed.is_set():
                self.close_connection = True
                return
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                length = len(answer.body) if answer.declared_length is None else answer.declared_length
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(answer.body)
                self.wfile.flush()
            except OSError:  # the client gave up (a stalled answer)
                self.close_connection = True
            if answer.declared_length is not None:
                self.close_connection = True

    return Handler


# ------------------------------------------------------------------------------------------------------ faults


def pass_through(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
    """Every request answered by the upstream server, unchanged."""
    return forward()


def killed_after(completions: int) -> Fault:
    """The server dies when the completion ``completions + 1`` arrives (it is not answered, nor is anything after)."""
    def fault(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
        if request.path == COMPLETIONS and request.index >= completions:
            proxy.kill()
            return None
        return forward()
    return fault


def stalled(seconds: float) -> Fault:
    """The first completion is answered by ``seconds`` of silence and a closed connection; the rest pass."""
    def fault(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
        if request.path == COMPLETIONS and request.index == 0:
            proxy.pause(seconds)
            return None
        return forward()
    return fault


def failing(status: int, times: int) -> Fault:
    """The first ``times`` completions are answered ``status`` with an OpenAI error body; the rest pass."""
    def fault(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
        if request.path == COMPLETIONS and request.index < times:
            return Answer(status, json.dumps({"error": {"message": "the engine is overloaded", "code": status}})
                          .encode())
        return forward()
    return fault


def truncated(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
    """Every completion's body cut in half (its ``Content-Length`` announces it whole), the connection then closed."""
    answer = forward()
    if request.path != COMPLETIONS:
        return answer
    return Answer(answer.status, answer.body[: len(answer.body) // 2], declared_length=len(answer.body))


def malformed(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
    """Every completion answered 200 with a body that is not JSON (a gateway's HTML page)."""
    if request.path == COMPLETIONS:
        return Answer(200, b"<html><body>upstream connect error</body></html>")
    return forward()


def error_inside(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
    """Every completion answered 200 with ``{"error": ...}``, whose two-line message echoes the request's
    Authorization header."""
    if request.path == COMPLETIONS:
        message = f"engine failure while scoring\nrequest authorized by {request.authorization}"
        return Answer(200, json.dumps({"error": {"message": message, "type": "InternalServerError"}}).encode())
    return forward()


def rewritten(path: str, edit: Callable[[Request, dict[str, Any]], None]) -> Fault:
    """Every answer on ``path``, edited in place as JSON by ``edit(request, answer)``; the rest pass unchanged."""
    def fault(proxy: FaultProxy, request: Request, forward: Forward) -> Answer | None:
        answer = forward()
        if request.path != path:
            return answer
        value = json.loads(answer.body)
        edit(request, value)
        return Answer(answer.status, json.dumps(value).encode())
    return fault


def _echo_key(request: Request, answer: dict[str, Any]) -> None:
    answer["debug"] = {"authorization": request.authorization}


key_echoed = rewritten(COMPLETIONS, _echo_key)
"""Every completion's answer, otherwise right, carries the request's Authorization header in a field of its own (a
debugging server's echo)."""
