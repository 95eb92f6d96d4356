"""A scripted HTTP server on 127.0.0.1 for the endpoint client's tests (and the bench's instant server): each request
is answered by ``script(n, request)`` (``n`` counts the requests received from 0), which returns what to do."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """A request as the fake server received it."""

    method: str
    path: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Answer:
    """What the fake server does: wait ``delay`` seconds, then send ``status``, ``headers`` and ``body`` (``length``
    overrides the Content-Length sent, to cut a body short), or ``close`` the connection without answering, or
    ``stop`` listening after closing it (a server killed mid-run)."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    length: int | None = None
    close: bool = False
    stop: bool = False


def json_answer(value: Any, status: int = 200, **headers: str) -> Answer:
    """An answer whose body is ``value`` as JSON."""
    return Answer(status=status, body=json.dumps(value).encode("utf-8"), headers=headers)


Script = Callable[[int, Received], Answer]


class FakeEndpoint:
    """The server (``url`` ends in ``/v1``); ``received`` lists the requests, ``most_in_flight`` the most answered at
    once. ``stop()`` shuts it down."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[Received] = []
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), type("Handler", (_Handler,), {"endpoint": self}))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()
        self._stopped = False

    def stop(self) -> None:
        with self.lock:
            if self._stopped:
                return
            self._stopped = True
        self.server.shutdown()
        self.server.server_close()

    def answer(self, received: Received) -> Answer:
        with self.lock:
            n = len(self.received)
            self.received.append(received)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            answer = self.script(n, received)
            time.sleep(answer.delay)
            return answer
        finally:
            with self.lock:
                self.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (the tests' timeouts): nothing to report


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers
    disable_nagle_algorithm = True  # headers and body go in two writes: no delayed-ACK wait between them
    endpoint: FakeEndpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = self.endpoint.answer(Received(self.command, self.path, body, dict(self.headers.items())))
        if answer.close or answer.stop:
            self.close_connection = True
            self.connection.close()
            if answer.stop:
                threading.Thread(target=self.endpoint.stop, daemon=True).start()
            return
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer.body) if answer.length is None else answer.length))
        self.end_headers()
        self.wfile.write(answer.body)
        if answer.length is not None:
            self.wfile.flush()
            self.close_connection = True

    do_GET = do_POST = _handle
