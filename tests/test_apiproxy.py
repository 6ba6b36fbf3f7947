"""runner.container.apiproxy and runner.container.apirelay: the real anthropic SDK -> the relay (TCP on 127.0.0.1) -> the proxy (a unix
socket) -> the fake Messages API on 127.0.0.1, all over real sockets, no mocks. What `run --container` relies on:
the real key is injected (the client holds a placeholder), only the Messages API endpoints pass, SSE arrives as it
is sent, errors come back unchanged, clients that go away cancel their request, batches work end to end.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic
import pytest

from runner.container.apiproxy import ROUTES, ApiProxy, allowed
from runner.container.apirelay import Relay
from runner.testing.fake_anthropic import FakeAnthropic, Recorded, break_stream, error, hang, text

KEY = "sk-ant-proxy-marker-4b7e19"
MODEL = "claude-haiku-4-5"


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="se-proxy-"))  # short: a unix socket path has at most 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def proxied(fake: FakeAnthropic, folder: Path) -> Iterator[tuple[ApiProxy, Relay]]:
    with ApiProxy(fake.url, KEY, folder) as proxy, Relay(str(proxy.socket_path)) as relay:
        yield proxy, relay


def client_of(proxy: ApiProxy, relay: Relay, **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=proxy.token, base_url=relay.url, **kw)


def key_of(recorded: Recorded) -> str:
    """The key a request reached the API with (x-api-key, or the SDK's bearer token)."""
    bearer = recorded.headers.get("authorization", "")
    return recorded.headers.get("x-api-key") or bearer.removeprefix("Bearer ")


def wait_until(condition, what: str, bound_s: float = 20.0) -> None:
    """Poll ``condition`` (a bound against a hang, never a measurement)."""
    for _ in range(int(bound_s / 0.02)):
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


def raw_request(relay: Relay, request: bytes) -> bytes:
    host, port = relay.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


# ------------------------------------------------------------------------------------------------------------

def test_routes_are_the_messages_api_only() -> None:
    assert allowed("POST", "/v1/messages") and allowed("POST", "/v1/messages/count_tokens")
    assert allowed("POST", "/v1/messages/batches") and allowed("GET", "/v1/messages/batches/msgbatch_01A-b")
    assert allowed("GET", "/v1/messages/batches/msgbatch_01A/results")
    for method, path in [("GET", "/v1/messages"), ("GET", "/v1/models"), ("POST", "/v1/complete"),
                         ("POST", "/v1/messages/../files"), ("GET", "/v1/messages/batches/a/../../x"),
                         ("DELETE", "/v1/messages/batches/msgbatch_01A"), ("POST", "/v1/files"),
                         ("GET", "/v1/messages/batches"), ("POST", "//v1/messages"), ("POST", "/v1/messages/")]:
        assert not allowed(method, path), (method, path)
    assert len(ROUTES) == 5


def test_a_message_goes_through_with_the_real_key(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    fake.script("hello proxy", text("Hi, through the proxy."))
    messages = [{"role": "user", "content": "hello proxy"}]
    reply = client_of(proxy, relay).messages.create(model=MODEL, max_tokens=64, messages=messages)
    assert reply.content[0].text == "Hi, through the proxy."
    anthropic.Anthropic(api_key=KEY, base_url=fake.url).messages.create(model=MODEL, max_tokens=64, messages=messages)
    through, direct = fake.requests_for("hello proxy")
    # The proxy puts the real key where the client put the placeholder (this SDK: a bearer token).
    assert through.headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in through.headers
    assert proxy.token not in json.dumps(through.headers)
    # Everything else goes along unchanged: the same headers and body as the SDK sends the API directly
    # (but the connection's own: host and connection).
    assert {k: v for k, v in through.headers.items() if k not in ("host", "connection")} == \
        {k: v for k, v in direct.headers.items() if k not in ("host", "connection")}
    assert through.body == direct.body and through.query == direct.query
    assert proxy.stats.forwarded == 1 and proxy.stats.statuses[200] == 1
    assert KEY not in repr(proxy) and KEY not in json.dumps(proxy.stats.as_dict())


def test_streaming_and_count_tokens(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    answer = "A streamed answer, long enough to arrive in several SSE deltas of sixteen characters."
    fake.script("stream me", text(answer))
    client = client_of(proxy, relay)
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "stream me"}]) as s:
        deltas = list(s.text_stream)
        final = s.get_final_message()
    assert len(deltas) > 3 and "".join(deltas) == answer and final.content[0].text == answer
    count = client.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "count me"}])
    assert count.input_tokens > 0
    assert [r.path for r in fake.requests] == ["/v1/messages", "/v1/messages/count_tokens"]
    assert all(key_of(r) == KEY for r in fake.requests)


def test_errors_pass_through_unchanged(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    fake.script("limit me", error(429, "rate_limit_error", "slow down (fake)", retry_after=7))
    fake.script("break me", error(500, "api_error", "it broke (fake)"))
    client = client_of(proxy, relay, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "limit me"}])
    assert limited.value.status_code == 429 and limited.value.response.headers["retry-after"] == "7"
    assert limited.value.body == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down (fake)"},
                                  "request_id": limited.value.response.headers["request-id"]}
    with pytest.raises(anthropic.InternalServerError) as broke:
        client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "break me"}])
    assert broke.value.status_code == 500 and broke.value.body["error"]["message"] == "it broke (fake)"
    assert proxy.stats.statuses[429] == 1 and proxy.stats.statuses[500] == 1


def test_a_stream_cut_upstream_is_cut_for_the_client(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    fake.script("cut me", break_stream())

    def cut_through(client: anthropic.Anthropic) -> tuple[type[BaseException], list[str]]:
        got: list[str] = []
        with pytest.raises(Exception) as cut:
            with client.messages.stream(model=MODEL, max_tokens=8,
                                        messages=[{"role": "user", "content": "cut me"}]) as stream:
                got += stream.text_stream
        return type(cut.value), got

    client = client_of(proxy, relay, max_retries=0)
    # What the SDK sees is what it sees when the API itself cuts the stream: the same error, the same text first.
    assert cut_through(client) == cut_through(anthropic.Anthropic(api_key=KEY, base_url=fake.url, max_retries=0))
    wait_until(lambda: proxy.stats.upstream_failures == 1, "the proxy counted the cut")
    fake.script("after the cut", text("still serving"))
    reply = client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "after the cut"}])
    assert reply.content[0].text == "still serving"


def test_other_endpoints_and_other_keys_are_refused(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        client_of(proxy, relay, max_retries=0).models.list()
    assert refused.value.status_code == 403 and refused.value.body["error"]["type"] == "permission_error"
    assert "GET /v1/models is not forwarded" in refused.value.body["error"]["message"]
    raw = raw_request(relay, b"GET /v1/messages/../../etc/passwd HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 403 ")
    with pytest.raises(anthropic.AuthenticationError) as wrong_key:
        anthropic.Anthropic(api_key="sk-ant-someone-else", base_url=relay.url, max_retries=0).messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert wrong_key.value.status_code == 401
    assert fake.requests == [], "nothing refused reached the API"
    assert proxy.stats.refused == ["403 GET /v1/models", "403 GET /v1/messages/../../etc/passwd",
                                   "401 POST /v1/messages"]


def test_the_clients_retries_work_through_the_proxy(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    fake.script("overloaded once", error(529, "overloaded_error", retry_after=0, times=1), text("second try"))
    reply = client_of(proxy, relay, max_retries=2).messages.create(
        model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "overloaded once"}])
    assert reply.content[0].text == "second try"
    assert [r.outcome for r in fake.requests] == ["error 529", "text"] and proxy.stats.statuses[529] == 1


def test_bad_requests_get_an_answer_in_the_api_shape(fake: FakeAnthropic, folder: Path) -> None:
    with ApiProxy(fake.url, KEY, folder, max_body_bytes=1000) as proxy, Relay(str(proxy.socket_path)) as relay:
        garbage = raw_request(relay, b"NOT AN HTTP REQUEST\r\n\r\n")
        assert garbage.startswith(b"HTTP/1.1 400 ")
        assert json.loads(garbage.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "invalid_request_error"
        with pytest.raises(anthropic.APIStatusError) as too_big:
            client_of(proxy, relay, max_retries=0).messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x" * 2000}])
        assert too_big.value.status_code == 413 and too_big.value.body["error"]["type"] == "request_too_large"
        assert proxy.stats.refused == ["413 POST /v1/messages"]
    assert fake.requests == []


def test_concurrent_streams(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    for i in range(24):
        fake.script(f"parallel {i:02d}", text(f"answer number {i:02d} " * 20))

    async def one(client: anthropic.AsyncAnthropic, i: int) -> str:
        async with client.messages.stream(model=MODEL, max_tokens=64,
                                          messages=[{"role": "user", "content": f"parallel {i:02d}"}]) as s:
            return "".join([d async for d in s.text_stream])

    async def all_of_them() -> list[str]:
        async with anthropic.AsyncAnthropic(api_key=proxy.token, base_url=relay.url) as client:
            return await asyncio.gather(*(one(client, i) for i in range(24)))

    fake.set_latency(0.05)  # requests overlap
    answers = asyncio.run(all_of_them())
    assert answers == [f"answer number {i:02d} " * 20 for i in range(24)]
    assert proxy.stats.forwarded == 24


def test_a_client_that_goes_away_cancels_its_request(proxied, fake: FakeAnthropic) -> None:
    proxy, relay = proxied
    fake.script("hang here", hang(120))
    body = json.dumps({"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hang here"}]})
    host, port = relay.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {proxy.token}\r\ncontent-type: "
                     f"application/json\r\ncontent-length: {len(body)}\r\n\r\n{body}".encode())
        wait_until(lambda: len(fake.requests_for("hang here")) == 1, "the request reached the API")
    assert fake.requests_for("hang here")[0].headers["x-api-key"] == KEY  # the CLI's header, replaced in place
    wait_until(lambda: proxy.stats.client_disconnects == 1, "the proxy saw the client go")
    fake.script("next one", text("fine"))
    reply = client_of(proxy, relay).messages.create(model=MODEL, max_tokens=8,
                                                    messages=[{"role": "user", "content": "next one"}])
    assert reply.content[0].text == "fine"


def test_the_api_unreachable_is_a_502_in_the_api_shape(folder: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening: connection refused
        with ApiProxy(dead, KEY, folder) as proxy, Relay(str(proxy.socket_path)) as relay:
            with pytest.raises(anthropic.APIStatusError) as failed:
                client_of(proxy, relay, max_retries=0).messages.create(
                    model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert failed.value.status_code == 502 and failed.value.body["error"]["type"] == "api_error"
    assert KEY not in str(failed.value.body)


def test_batches_end_to_end(proxied, fake: FakeAnthropic) -> None:
    """The batch's results_url names the API's host: the proxy makes it relative, so results come through it."""
    proxy, relay = proxied
    fake.script("batched one", text("first"))
    fake.script("batched two", text("second"))
    client = client_of(proxy, relay)
    batch = client.messages.batches.create(requests=[
        {"custom_id": "one", "params": {"model": MODEL, "max_tokens": 8,
                                        "messages": [{"role": "user", "content": "batched one"}]}},
        {"custom_id": "two", "params": {"model": MODEL, "max_tokens": 8,
                                        "messages": [{"role": "user", "content": "batched two"}]}}])
    wait_until(lambda: client.messages.batches.retrieve(batch.id).processing_status == "ended", "the batch ended")
    assert client.messages.batches.retrieve(batch.id).results_url == f"/v1/messages/batches/{batch.id}/results"
    results = {r.custom_id: r.result.message.content[0].text for r in client.messages.batches.results(batch.id)}
    assert results == {"one": "first", "two": "second"}
    assert all(key_of(r) == KEY for r in fake.requests)


class _Gated(BaseHTTPRequestHandler):
    """Sends one SSE event, then waits until the test says the client has it: a buffering proxy never lets it."""

    protocol_version = "HTTP/1.1"
    gate = threading.Event()
    released_by_client: list[bool] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in [("message_start", {"type": "message_start", "message": {
                "id": "msg_gate", "type": "message", "role": "assistant", "model": MODEL, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "first "}})]:
            event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()
        self.released_by_client.append(self.gate.wait(timeout=30))
        rest = [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "second"}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                      "stop_sequence": None},
                                   "usage": {"output_tokens": 2}}),
                ("message_stop", {"type": "message_stop"})]
        for name, data in rest:
            event = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def test_sse_is_not_buffered(folder: Path) -> None:
    _Gated.gate.clear()
    _Gated.released_by_client.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gated)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with ApiProxy(url, KEY, folder) as proxy, Relay(str(proxy.socket_path)) as relay:
            with client_of(proxy, relay).messages.stream(model=MODEL, max_tokens=8,
                                                         messages=[{"role": "user", "content": "x"}]) as stream:
                texts = stream.text_stream
                assert next(texts) == "first "  # arrives while the server still holds the rest back
                _Gated.gate.set()
                assert list(texts) == ["second"]
        assert _Gated.released_by_client == [True], "the first event reached the client only after the stream ended"
    finally:
        server.shutdown()
        server.server_close()


def test_close_removes_the_socket_and_refuses_new_clients(fake: FakeAnthropic, folder: Path) -> None:
    proxy = ApiProxy(fake.url, KEY, folder).start()
    path = proxy.socket_path
    assert path.is_socket() and (path.stat().st_mode & 0o777) == 0o600
    fake.script("hang on close", hang(120))
    relay = Relay(str(path)).start()
    client = client_of(proxy, relay, max_retries=0, timeout=60)
    ended: list[BaseException | str] = []

    def in_flight() -> None:
        try:
            client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hang on close"}])
            ended.append("answered")
        except BaseException as exc:  # noqa: BLE001 - what it ended with is the assertion
            ended.append(exc)

    waiting = threading.Thread(target=in_flight)
    waiting.start()
    wait_until(lambda: len(fake.requests_for("hang on close")) == 1, "the request reached the API")
    proxy.close()  # with a request in flight: it is cut, nothing waits for it
    waiting.join(timeout=30)
    assert not waiting.is_alive()
    assert len(ended) == 1 and isinstance(ended[0], anthropic.APIConnectionError), ended
    assert not path.exists()
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
    relay.close()


def test_a_socket_that_cannot_be_made_is_a_clear_error(fake: FakeAnthropic, folder: Path) -> None:
    deep = folder / ("x" * 120)  # a unix socket path has at most 107 bytes
    deep.mkdir()
    with pytest.raises(RuntimeError, match="the API proxy on .*api.sock could not listen"):
        ApiProxy(fake.url, KEY, deep).start()
