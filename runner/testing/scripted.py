"""What the scripted API fakes share (fake_anthropic, fake_gemini, fake_openai): a script's turns by turn index,
with faults that answer a turn `times` times before the next item does, and the HTTP plumbing of a fake (its
server, a quiet handler that hands every request to the fake, the request body, chunks, a cut connection). Each
fake keeps its own API's answers."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

TurnT = TypeVar("TurnT")


class TurnScript(Generic[TurnT]):
    """One script of a fake: the turns it plays by turn index. A fault (an instance of `faults`) with `times` set
    answers its turn index that many times, then the next item answers it; with `times` None it answers every time.
    Past the last turn, and after faults with no answer following them, the reply is `done`."""

    def __init__(self, match: str | None, turns: tuple[TurnT, ...], usage: Any, answers: tuple[type, ...],
                 faults: tuple[type, ...], done: TurnT):
        self.match = match
        self.usage = usage
        self.done = done
        # slots[k] = (finite faults in order, each with its times; terminal turn) for turn index k
        self.slots: list[tuple[list[tuple[TurnT, int]], TurnT]] = []
        pending: list[tuple[TurnT, int]] = []
        for t in turns:
            if not isinstance(t, (*answers, *faults)):
                raise TypeError(f"not a turn: {t!r}")
            times = getattr(t, "times", None) if isinstance(t, faults) else None
            if times is not None:
                if times < 0:
                    raise ValueError("times must be >= 0")
                pending.append((t, times))
            else:
                self.slots.append((pending, t))
                pending = []
        if pending:
            self.slots.append((pending, done))
        self.seen: dict[int, int] = {}

    def pick(self, turn_index: int) -> TurnT:
        """Call with the fake's lock held."""
        count = self.seen.get(turn_index, 0)
        self.seen[turn_index] = count + 1
        if turn_index >= len(self.slots):
            return self.done
        faults, terminal = self.slots[turn_index]
        for fault, times in faults:
            if count < times:
                return fault
            count -= times
        return terminal


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    # A burst of 16 new connections overflows the default listen backlog of 5; each lost SYN costs a 1 s retry.
    request_queue_size = 128
    fake: Any  # the fake whose `_handle(handler)` answers every request


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body are written separately: without TCP_NODELAY each response waits ~40 ms for a delayed ACK.
    disable_nagle_algorithm = True
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.server.fake._handle(self)

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_whole(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        """A reply with its length: `headers`, then the body (none to a HEAD)."""
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def cut(self) -> None:
        """Drop the connection abruptly (no terminating chunk)."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


RecordT = TypeVar("RecordT")


class ScriptedFake(Generic[TurnT, RecordT]):
    """A fake API's life and scripts: ``with Fake() as fake:`` serves on ``fake.url`` until the block ends.
    A subclass names its handler (`handler`), its thread (`thread_name`), how a script is made (`new_script`) and
    what a request's first user text is (`first_user_text`), and answers each request in `_handle_inner`."""

    handler: type[FakeHandler]
    thread_name = "fake-api"

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._scripts: list[TurnScript[TurnT]] = []
        self._default = self.new_script(None, (self.new_text("ok"),), None)
        self.requests: list[RecordT] = []
        self.url = ""
        self._server: FakeServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a subclass says ---------------------------------------------------------------------------
    def new_script(self, match: str | None, turns: tuple[TurnT, ...], usage: Any) -> TurnScript[TurnT]:
        raise NotImplementedError

    def new_text(self, text: str) -> TurnT:
        raise NotImplementedError

    def first_user_text(self, body: Any) -> str:
        raise NotImplementedError

    def _handle_inner(self, h: Any) -> None:
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> Self:
        self._server = FakeServer((self._host, self._port), self.handler)
        self._server.fake = self
        host, port = self._server.socket.getsockname()[:2]  # an AF_INET address: (str, int), never bytes
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()  # wakes hang() and latency sleeps
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- configuration and the record -------------------------------------------------------------------
    def script(self, match: str, *turns: TurnT, usage: Any = None) -> None:
        with self._lock:
            self._scripts.append(self.new_script(match, turns, usage))

    def default(self, *turns: TurnT) -> None:
        with self._lock:
            self._default = self.new_script(None, turns, None)

    def requests_for(self, match: str) -> list[RecordT]:
        """The recorded requests whose first user text contains ``match``."""
        with self._lock:
            return [r for r in self.requests if match in self.first_user_text(getattr(r, "body", None))]

    def _handle(self, h: FakeHandler) -> None:
        try:
            self._handle_inner(h)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, socket.timeout, OSError):
            h.close_connection = True
