"""The endpoint client against a scripted local server (``fake_endpoint``): what is retried and what is not, the
timeout, a server killed mid-run, bodies certa cannot use, the concurrency limit, the budget, the order of results,
the key kept out of every message, and replay and resume without the network. Timeouts are tenths of a second."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest

from certa.engine.foundation.canonical import canonical_sha256
from certa.engine.foundation.errors import EndpointError, InputError
from certa.engine.core.runtimes.http_client import (ClientSettings, EndpointClient, Exchange, RecordedTransport,
                                                    request_key)

from tests.core.runtimes.fake_endpoint import Answer, FakeEndpoint, Received, Script, json_answer

FAST = ClientSettings(timeout=2.0, retries=2, backoff=0.01, max_backoff=0.05)
"""Short backoffs; a timeout no answer meets on a loaded machine unless a test stalls it on purpose."""
SECRET = "sk-test-5eCr3t-0123456789"


def echo(n: int, received: Received) -> Answer:
    """A completion-like answer echoing the request body's ``i``, with a usage of 3 + 1 tokens."""
    body = json.loads(received.body) if received.body else {}
    return json_answer({"i": body.get("i"), "usage": {"prompt_tokens": 3, "completion_tokens": 1}})


@pytest.fixture
def endpoint() -> Iterator[Callable[[Script], FakeEndpoint]]:
    started: list[FakeEndpoint] = []

    def start(script: Script) -> FakeEndpoint:
        started.append(FakeEndpoint(script))
        return started[-1]
    yield start
    for server in started:
        server.stop()


def client(server: FakeEndpoint, settings: ClientSettings = FAST, **options: object) -> EndpointClient:
    return EndpointClient(server.url, settings=settings, **options)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- retried faults


@pytest.mark.parametrize("retry_after", ["0", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_429_is_retried_after_its_retry_after_not_the_backoff(endpoint, retry_after) -> None:
    server = endpoint(lambda n, r: json_answer({"error": {"message": "slow down"}}, 429, **{"Retry-After": retry_after})
                      if n == 0 else echo(n, r))
    slow_backoff = ClientSettings(timeout=1, retries=2, backoff=5.0, max_backoff=5.0)
    start = time.perf_counter()
    exchange = client(server, slow_backoff).post("/completions", {"i": 7})
    assert time.perf_counter() - start < 1.0  # Retry-After 0 was honoured, not the 5 s backoff
    assert (exchange.attempts, exchange.status, json.loads(exchange.response)["i"]) == (2, 200, 7)
    assert [r.path for r in server.received] == ["/v1/completions"] * 2


def test_a_retry_after_beyond_the_cap_waits_only_the_cap(endpoint) -> None:
    server = endpoint(lambda n, r: json_answer({}, 503, **{"Retry-After": "30"}) if n == 0 else echo(n, r))
    start = time.perf_counter()
    assert client(server).post("/completions", {"i": 1}).attempts == 2
    assert time.perf_counter() - start < 1.0


def test_503_every_time_ends_in_an_error_naming_the_attempts_and_the_servers_message(endpoint) -> None:
    server = endpoint(lambda n, r: json_answer({"error": {"message": "engine overloaded"}}, 503))
    api = client(server)
    with pytest.raises(EndpointError, match=r"^POST /completions failed after 3 attempts: HTTP 503: the server "
                                            r"said: engine overloaded$"):
        api.post("/completions", {"i": 1})
    assert len(server.received) == 3
    assert api.usage() | {"bytes_sent": 0, "bytes_received": 0} == {
        "requests": 3, "retries": 2, "failures": 1, "reused": 0, "bytes_sent": 0, "bytes_received": 0}


def test_a_stalled_connection_times_out_is_retried_then_an_error(endpoint) -> None:
    server = endpoint(lambda n, r: Answer(delay=3.0, body=b"{}"))
    settings = ClientSettings(timeout=0.1, retries=1, backoff=0.01)
    start = time.perf_counter()
    with pytest.raises(EndpointError, match="failed after 2 attempts: no answer within the timeout of 0.1 s"):
        client(server, settings).post("/completions", {"i": 1})
    assert len(server.received) == 2 and time.perf_counter() - start < 2.5  # never waited for an answer


def test_a_server_killed_mid_run_is_an_error_and_no_partial_list(endpoint) -> None:
    server = endpoint(lambda n, r: Answer(stop=True) if n == 3 else echo(n, r))
    api = client(server, ClientSettings(timeout=0.2, retries=3, backoff=0.05, concurrency=1))
    with pytest.raises(EndpointError, match=r"POST /completions failed after 4 attempts: connection refused"):
        api.post_many("/completions", [{"i": i} for i in range(6)])
    assert len(server.received) == 4 and api.usage()["failures"] == 1


def test_a_connection_closed_without_an_answer_is_retried(endpoint) -> None:
    server = endpoint(lambda n, r: Answer(close=True) if n == 0 else echo(n, r))
    assert client(server).post("/completions", {"i": 2}).attempts == 2


# ----------------------------------------------------------------------------------- answers certa cannot use


@pytest.mark.parametrize(("answer", "message"), [
    (Answer(body=b"{not json"), r'POST /completions: the response is not UTF-8 JSON; it begins "\{not json"$'),
    (Answer(body=b'{"choices": []', length=400), r"POST /completions: the response was cut short \(14 bytes of 400\); "
                                                 r'it begins "\{\\"choices\\": \[\]"$'),
    (json_answer({"error": {"message": "out of memory", "code": 500}}),
     r"POST /completions: HTTP 200 with an error inside: the server said: out of memory$"),
    (json_answer([1, 2]), r'POST /completions: the response is not a JSON object; it begins "\[1, 2\]"$'),
    (Answer(body=b"x" * 1000), r'the response is not UTF-8 JSON; it begins "x{200}" \.\.\.$'),
    (Answer(body=b'{"a": "\xff"}'), r"the response is not UTF-8 JSON"),
    (Answer(body=b"{" + b" " * 64 + b"}"), r"POST /completions: the response exceeds max_response_bytes=64$"),
], ids=["malformed", "truncated", "error-inside-200", "not-an-object", "long-preview", "not-utf8", "too-large"])
def test_a_body_certa_cannot_use_is_an_error_naming_the_path_and_its_first_bytes(endpoint, answer, message) -> None:
    server = endpoint(lambda n, r: answer)
    api = client(server, ClientSettings(timeout=0.5, retries=2, backoff=0.01, max_response_bytes=64
                                        if "64" in message else 2**20))
    with pytest.raises(EndpointError, match=message):
        api.post("/completions", {"i": 1})
    assert len(server.received) == 1  # none of these is retried


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_request_error_is_not_retried_and_carries_the_servers_message(endpoint, status) -> None:
    server = endpoint(lambda n, r: json_answer({"error": {"message": "The model `x` does not exist.", "code": status}},
                                              status))
    with pytest.raises(EndpointError, match=rf"^POST /completions: HTTP {status} \(not retried: the request's fault\): "
                                            r"the server said: The model `x` does not exist\.$"):
        client(server).post("/completions", {"model": "x"})
    assert len(server.received) == 1


def test_get_climbs_out_of_the_base_path_with_a_dot_dot(endpoint) -> None:
    server = endpoint(lambda n, r: json_answer({"version": "0.32.0"}) if r.path == "/version"
                      else json_answer({"detail": "Not Found"}, 404))
    exchange = client(server).get("/../version")
    assert (exchange.method, exchange.path, exchange.request, json.loads(exchange.response)) == (
        "GET", "/../version", "", {"version": "0.32.0"})
    with pytest.raises(EndpointError, match="HTTP 404 .*: the server said: Not Found$"):
        client(server).get("/version")


# ------------------------------------------------------------------------------------ concurrency and budget


def test_post_many_keeps_the_concurrency_limit_and_the_order_of_the_bodies(endpoint) -> None:
    server = endpoint(lambda n, r: Answer(delay=0.02 + 0.005 * (n % 4), body=echo(n, r).body))
    seen: list[tuple[int, int]] = []
    api = client(server, ClientSettings(timeout=1, concurrency=3))
    exchanges = api.post_many("/completions", [{"i": i} for i in range(24)],
                              progress=lambda done, total, rps, tps: seen.append((done, total)))
    assert [json.loads(exchange.response)["i"] for exchange in exchanges] == list(range(24))
    assert server.most_in_flight == 3
    assert seen == [(done, 24) for done in range(1, 25)]
    assert api.usage()["requests"] == 24


def test_progress_reports_requests_and_tokens_per_second(endpoint) -> None:
    server = endpoint(echo)
    rates: list[tuple[float, float]] = []
    client(server).post_many("/completions", [{"i": i} for i in range(4)],
                             progress=lambda done, total, rps, tps: rates.append((rps, tps)))
    assert all(rps > 0 and tps == pytest.approx(4 * rps) for rps, tps in rates)


def test_the_budget_counts_retries_and_stops_the_run_naming_it(endpoint) -> None:
    server = endpoint(lambda n, r: json_answer({}, 503) if n == 0 else echo(n, r))
    api = client(server, ClientSettings(timeout=1, backoff=0.01, concurrency=1, max_requests=3))
    with pytest.raises(EndpointError, match=r"^the request budget max_requests=3 is spent \(3 requests sent, retries "
                                            r"included\): POST /completions was not sent$"):
        api.post_many("/completions", [{"i": i} for i in range(5)])
    assert len(server.received) == 3 and api.usage()["retries"] == 1


def test_equal_bodies_are_sent_once_and_share_their_exchange(endpoint) -> None:
    server = endpoint(echo)
    exchanges = client(server).post_many("/completions", [{"i": 1}, {"i": 2}, {"i": 1}])
    assert len(server.received) == 2 and exchanges[0] is exchanges[2]


# ------------------------------------------------------------------------------------------------ credentials


def test_the_key_is_sent_as_a_bearer_token_and_never_appears_in_a_message_an_exchange_or_a_repr(endpoint) -> None:
    server = endpoint(lambda n, r: json_answer({"error": {"message": f"Incorrect API key provided: {SECRET}"}}, 401)
                      if n == 0 else echo(n, r))
    api = client(server, api_key=SECRET)
    with pytest.raises(EndpointError) as refused:
        api.post("/completions", {"i": 1})
    assert SECRET not in str(refused.value) and "Incorrect API key provided: <api key>" in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__context__ is None
    exchange = api.post("/completions", {"i": 2})
    assert server.received[-1].headers["Authorization"] == f"Bearer {SECRET}"
    for text in (repr(exchange), json.dumps(exchange.__dict__), repr(api), repr(api.usage()), repr(api.settings)):
        assert SECRET not in text
    assert "api_key='<set>'" in repr(api)


def test_an_answer_that_echoes_the_key_is_refused_not_recorded(endpoint) -> None:
    server = endpoint(lambda n, r: json_answer({"i": 1, "debug": r.headers["Authorization"]}))
    api = client(server, api_key=SECRET)
    with pytest.raises(EndpointError, match=r"^POST /completions: the response holds the API key \(the server echoes "
                                            r"it\); certa records every response and never a key") as refused:
        api.post("/completions", {"i": 1})
    assert SECRET not in str(refused.value) and api.usage()["failures"] == 1


def test_a_base_url_that_is_not_http_with_a_host_is_refused() -> None:
    for url in ("ftp://example.org/v1", "localhost:8000/v1", "http:///v1", f"http://user:{SECRET}@host/v1"):
        with pytest.raises(EndpointError, match="must be http:// or https:// with a host") as refused:
            EndpointClient(url)
        assert SECRET not in str(refused.value)


def test_settings_out_of_range_are_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match=r"the endpoint client's 'concurrency' is out of range \(got 0\)"):
        ClientSettings(concurrency=0)
    assert [ClientSettings().delay(i, None) for i in range(1, 7)] == [0.5, 1, 2, 4, 8, 8]


# ------------------------------------------------------------------------------------------ replay and resume


def test_the_key_is_the_sha256_of_the_canonical_method_path_and_body() -> None:
    body = {"prompt": [1, 2, 3], "model": "tiny-llama", "temperature": 0.5}
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert request_key("POST", "/completions", data) == canonical_sha256(["POST", "/completions", body])
    assert request_key("GET", "/models", b"") == canonical_sha256(["GET", "/models", None])


def test_a_recorded_transport_replays_without_the_network_and_never_requeries(endpoint) -> None:
    server = endpoint(echo)
    recorded = client(server).post_many("/completions", [{"i": i} for i in range(3)])
    server.stop()
    replay = EndpointClient(server.url, transport=RecordedTransport(recorded))
    again = replay.post_many("/completions", [{"i": 2}, {"i": 0}])
    assert [e.response for e in again] == [recorded[2].response, recorded[0].response]
    assert [(e.key, e.request, e.status) for e in again] == [(r.key, r.request, r.status) for r in recorded[2::-2]]
    with pytest.raises(EndpointError, match=r"^POST /completions: the transcript has no such request \(key [0-9a-f]{16}"
                                            r"\); a replay answers from the recorded transcript"):
        replay.post("/completions", {"i": 3})


def test_an_edited_transcript_is_refused(endpoint) -> None:
    server = endpoint(echo)
    exchange = client(server).post("/completions", {"i": 1})
    edited = Exchange(**(exchange.__dict__ | {"request": '{"i":2}'}))
    with pytest.raises(EndpointError, match="does not match its own request: the transcript was edited"):
        RecordedTransport([edited])


def test_a_resumed_client_sends_only_the_requests_it_lacks(endpoint) -> None:
    server = endpoint(echo)
    first = client(server).post_many("/completions", [{"i": i} for i in range(3)])
    resumed = client(server, reuse=first)
    exchanges = resumed.post_many("/completions", [{"i": i} for i in range(5)])
    assert len(server.received) == 5  # 3, then the 2 missing
    assert exchanges[:3] == first and [json.loads(e.response)["i"] for e in exchanges] == list(range(5))
    assert resumed.usage()["reused"] == 3 and resumed.usage()["requests"] == 2
    assert resumed.post("/completions", {"i": 1}) is first[1] and len(server.received) == 5


def test_each_answer_is_handed_over_as_it_arrives_so_a_failed_call_keeps_what_it_got(endpoint) -> None:
    server = endpoint(lambda n, r: Answer(stop=True) if n == 3 else echo(n, r))
    got: list[Exchange] = []
    api = client(server, ClientSettings(timeout=2.0, retries=0, backoff=0.01, concurrency=1))
    with pytest.raises(EndpointError, match="failed after 1 attempts: connection (refused|reset)"):
        api.post_many("/completions", [{"i": i} for i in range(6)], answered=got.append)
    assert [json.loads(e.request)["i"] for e in got] == [0, 1, 2]
    fixed = endpoint(echo)
    resumed = client(fixed, FAST, reuse=got)  # the next call sends only what the first lacked
    answers = resumed.post_many("/completions", [{"i": i} for i in range(6)])
    assert sorted(json.loads(r.body)["i"] for r in fixed.received) == [3, 4, 5] and resumed.usage()["reused"] == 3
    assert answers[:3] == got
