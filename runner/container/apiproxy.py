"""The Messages API proxy of `run --container`: the container's only way out, and the only holder of the key.

It serves a unix socket mounted into the container and forwards the :data:`ROUTES` endpoints upstream, the
placeholder key replaced by the real one. Answers and errors stream back unchanged; no header is ever kept or
logged.

Design notes: docs/design/container-hardening.md.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import re
import secrets
import socket
from collections import Counter
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path

import h11
import httpx2 as httpx

from runner.container.serverthread import ServerThread

SOCKET_NAME = "api.sock"
TOKEN_PREFIX = "skill-evals-proxy-"
MAX_BODY_BYTES = 256 * 1024 * 1024  # the Message Batches API's own request limit
READ_CHUNK = 64 * 1024
MAX_REFUSED_KEPT = 50
# (method, path pattern): what skill-evals (api host, judge, batches) and the Claude Code CLI call.
_ID = r"[A-Za-z0-9_-]{1,128}"
ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("POST", re.compile(r"/v1/messages")),
    ("POST", re.compile(r"/v1/messages/count_tokens")),
    ("POST", re.compile(r"/v1/messages/batches")),
    ("GET", re.compile(rf"/v1/messages/batches/{_ID}")),
    ("GET", re.compile(rf"/v1/messages/batches/{_ID}/results")),
)
_BATCH = re.compile(rf"/v1/messages/batches/{_ID}")
# Connection-level headers (RFC 9110 §7.6.1) and what the proxy sets itself.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                         "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"})
_CREDENTIALS = frozenset({"x-api-key", "authorization"})
_RESPONSE_DROPPED = _HOP_BY_HOP - {"content-length"}  # a length stays true: the body's bytes are sent unchanged


@dataclass
class ProxyStats:
    """What the proxy did, for the run's record (never a header, never a key)."""

    forwarded: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)     # "403 GET /v1/models", at most MAX_REFUSED_KEPT
    refused_total: int = 0
    upstream_failures: int = 0                           # 502/504 made here, or a stream cut upstream
    client_disconnects: int = 0

    def as_dict(self) -> dict[str, object]:
        return {"forwarded": self.forwarded, "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
                "refused_total": self.refused_total, "refused": list(self.refused),
                "upstream_failures": self.upstream_failures, "client_disconnects": self.client_disconnects}


def allowed(method: str, path: str) -> bool:
    """Whether ``METHOD path`` (no query string) is one of :data:`ROUTES`."""
    return any(method == m and pattern.fullmatch(path) for m, pattern in ROUTES)


def error_body(err_type: str, message: str) -> bytes:
    """The Messages API's error JSON: ``{"type": "error", "error": {"type", "message"}}``."""
    return json.dumps({"type": "error", "error": {"type": err_type, "message": message}}).encode()


def relative_results_url(body: bytes, upstream: str) -> bytes:
    """A batch object with its ``results_url`` made relative when it lies under ``upstream`` (the design notes);
    any other body unchanged."""
    try:
        batch = json.loads(body)
    except ValueError:
        return body
    url = batch.get("results_url") if isinstance(batch, dict) else None
    if not isinstance(url, str) or not url.startswith(upstream + "/"):
        return body
    batch["results_url"] = url[len(upstream):]
    return json.dumps(batch).encode()


class _ClientGone(Exception):
    """The client closed its connection before its answer was complete."""


class _EndConnection(Exception):
    """The exchange ended early: the API's answer broke off after its head was forwarded (the client's ends
    unfinished too), or a request body was refused before it was read. What was sent is sent; then close."""


class _Connection:
    """One client connection: h11 on the socket, requests answered one after the other (keep-alive)."""

    def __init__(self, proxy: ApiProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.SERVER)

    async def serve(self) -> None:
        graceful = True
        try:
            while (request := await self._request()) is not None:
                await self._answer(*request)
                if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                    break  # `Connection: close`, or HTTP/1.0
                self.h11.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                try:
                    await self._send_error(exc.error_status_hint, "invalid_request_error",
                                           f"skill-evals API proxy: not a valid HTTP/1.1 request ({exc})")
                except OSError:
                    graceful = False
        except _EndConnection:
            pass
        except (_ClientGone, ConnectionError, OSError):
            self.proxy.stats.client_disconnects += 1  # it closed or reset its connection mid-exchange
            graceful = False
        except asyncio.CancelledError:
            graceful = False  # the proxy is closing
            raise
        except h11.LocalProtocolError:
            graceful = False  # an upstream answer h11 will not frame (a bad header): drop the connection
        finally:
            await self._close(graceful)

    async def _close(self, graceful: bool) -> None:
        if not graceful:
            self.writer.transport.abort()
            return
        self.writer.close()  # after what is buffered has been sent
        try:
            await asyncio.wait_for(self.writer.wait_closed(), timeout=10)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            self.writer.transport.abort()

    # -- reading -------------------------------------------------------------------------------------
    async def _event(self) -> object:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self.h11.they_are_waiting_for_100_continue:
                await self._send(h11.InformationalResponse(status_code=100, headers=[]))
            self.h11.receive_data(await self.reader.read(READ_CHUNK))

    async def _request(self) -> tuple[h11.Request, bytes] | None:
        """The next request and its whole body; None once the client closed the connection."""
        head = await self._event()
        if not isinstance(head, h11.Request):
            return None  # ConnectionClosed (or PAUSED after a close): the client is done
        body = bytearray()
        while True:
            part = await self._event()
            if isinstance(part, h11.EndOfMessage):
                return head, bytes(body)
            if not isinstance(part, h11.Data):
                raise _ClientGone()
            body += part.data
            if len(body) > self.proxy.max_body_bytes:
                self.proxy.note_refused(413, head.method.decode("ascii", "replace"),
                                        head.target.decode("ascii", "replace").split("?", 1)[0])
                await self._send_error(413, "request_too_large", "skill-evals API proxy: the request body is over "
                                                                 f"{self.proxy.max_body_bytes} bytes")
                raise _EndConnection()  # answered; the rest of the body is not read

    # -- writing -------------------------------------------------------------------------------------
    async def _send(self, event: h11.Event) -> None:
        data = self.h11.send(event)
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def _send_error(self, status: int, err_type: str, message: str) -> None:
        body = error_body(err_type, message)
        await self._send(h11.Response(status_code=status, headers=[("content-type", "application/json"),
                                                                   ("content-length", str(len(body)))]))
        await self._send(h11.Data(data=body))
        await self._send(h11.EndOfMessage())

    # -- answering -----------------------------------------------------------------------------------
    async def _answer(self, head: h11.Request, body: bytes) -> None:
        proxy = self.proxy
        method = head.method.decode("ascii", "replace")
        target = head.target.decode("ascii", "replace")
        path = target.split("?", 1)[0]
        if not allowed(method, path):
            proxy.note_refused(403, method, path)
            return await self._send_error(403, "permission_error", f"skill-evals API proxy: {method} {path} is not "
                                                                   "forwarded (only the Messages API endpoints "
                                                                   "skill-evals uses are)")
        if not proxy.accepts(head.headers):
            proxy.note_refused(401, method, path)
            return await self._send_error(401, "authentication_error", "skill-evals API proxy: the request does "
                                                                       "not carry this run's placeholder key")
        await self._while_connected(self._forward(head, method, target, path, body))

    async def _while_connected(self, work: Coroutine[object, object, None]) -> None:
        """Run ``work`` (the forwarding), cancelled when the client closes its connection meanwhile."""
        task = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(self.reader.read(READ_CHUNK))
        try:
            await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                if watch.exception() is not None or not watch.result():
                    raise _ClientGone()  # EOF or reset: nobody waits for this answer any more
                self.h11.receive_data(watch.result())  # a pipelined next request: h11 keeps it for its turn
                await task
                return
            await task
            if watch.done() and watch.exception() is None:
                self.h11.receive_data(watch.result())  # read meanwhile: the next request, or b"" (closed)
        finally:
            task.cancel()
            watch.cancel()  # a pending read loses nothing: the bytes stay in the reader's buffer
            await asyncio.gather(task, watch, return_exceptions=True)

    async def _forward(self, head: h11.Request, method: str, target: str, path: str, body: bytes) -> None:
        proxy = self.proxy
        rewrite = method == "GET" and _BATCH.fullmatch(path) is not None
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in head.headers
                   if name.decode("latin-1") not in _HOP_BY_HOP | _CREDENTIALS]  # h11 lower-cases names
        if rewrite:  # the body is read and changed here: ask for it uncompressed
            headers = [(n, v) for n, v in headers if n != "accept-encoding"] + [("accept-encoding", "identity")]
        headers += proxy.credentials(head.headers)
        assert proxy.client is not None  # made before the server listens
        request = proxy.client.build_request(method, proxy.upstream + target, headers=headers,
                                             content=body if method == "POST" else None)
        try:
            response = await proxy.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            proxy.stats.upstream_failures += 1
            return await self._send_error(504, "timeout_error", f"skill-evals API proxy: no answer from the API "
                                                                f"in time ({type(exc).__name__})")
        except httpx.HTTPError as exc:
            proxy.stats.upstream_failures += 1
            return await self._send_error(502, "api_error", f"skill-evals API proxy: the API could not be reached "
                                                            f"({type(exc).__name__})")
        try:
            proxy.stats.forwarded += 1
            proxy.stats.statuses[response.status_code] += 1
            out = [(n, v) for n, v in response.headers.multi_items() if n.lower() not in _RESPONSE_DROPPED]
            reason = response.reason_phrase.encode("latin-1", "replace")
            if rewrite and response.status_code == 200:
                try:
                    payload = relative_results_url(await response.aread(), proxy.upstream)
                except httpx.HTTPError:
                    proxy.stats.upstream_failures += 1
                    return await self._send_error(502, "api_error", "skill-evals API proxy: the API's answer "
                                                                    "broke off")
                out = [(n, v) for n, v in out if n.lower() not in ("content-length", "content-encoding")]
                out.append(("content-length", str(len(payload))))
                await self._send(h11.Response(status_code=200, headers=out, reason=reason))
                await self._send(h11.Data(data=payload))
            else:
                await self._send(h11.Response(status_code=response.status_code, headers=out, reason=reason))
                try:
                    async for chunk in response.aiter_raw():
                        await self._send(h11.Data(data=chunk))
                except httpx.HTTPError:
                    proxy.stats.upstream_failures += 1
                    raise _EndConnection() from None  # no last chunk: the client sees the cut
            await self._send(h11.EndOfMessage())
        finally:
            await response.aclose()


class ApiProxy(ServerThread):
    """``with ApiProxy(upstream, key, folder) as proxy:`` serves ``proxy.socket_path`` until the block ends.

    ``upstream``: the API's base URL (e.g. ``https://api.anthropic.com``); ``owner``: (uid, gid) to hand the
    folder and the socket to when the container runs as another user than this process. The folder must be
    private (0700): the socket is 0600 inside it.
    """

    def __init__(self, upstream: str, api_key: str, folder: Path | str, owner: tuple[int, int] | None = None,
                 connect_timeout_s: float = 30.0, read_timeout_s: float = 900.0,
                 max_body_bytes: int = MAX_BODY_BYTES):
        if not api_key:
            raise ValueError("the proxy needs the API key it injects")
        super().__init__()
        self.thread_name = "skill-evals-api-proxy"
        self.upstream = upstream.rstrip("/")
        self.api_key = api_key
        self.folder = Path(folder)
        self.socket_path = self.folder / SOCKET_NAME
        self.owner = owner
        self.max_body_bytes = max_body_bytes
        self.token = TOKEN_PREFIX + secrets.token_hex(16)
        self.stats = ProxyStats()
        self._timeout = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s, write=120.0, pool=None)
        self.client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:  # never the key
        return f"ApiProxy(upstream={self.upstream!r}, socket={str(self.socket_path)!r})"

    def accepts(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether the request carries this run's placeholder key (``x-api-key`` or ``Bearer``)."""
        for name, value in headers:
            text = value.decode("latin-1")
            if name == b"authorization" and text.lower().startswith("bearer "):
                text = text[7:]
            if name in (b"x-api-key", b"authorization") and hmac.compare_digest(text.strip().encode(),
                                                                                self.token.encode()):
                return True
        return False

    def credentials(self, headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
        """The real key in the credential headers the client sent its placeholder in (the anthropic SDK sends
        ``authorization: Bearer``, the CLI ``x-api-key``)."""
        sent = {name for name, _ in headers}
        out = [("x-api-key", self.api_key)] if b"x-api-key" in sent or b"authorization" not in sent else []
        if b"authorization" in sent:
            out.append(("authorization", f"Bearer {self.api_key}"))
        return out

    def note_refused(self, status: int, method: str, path: str) -> None:
        self.stats.refused_total += 1
        self.stats.statuses[status] += 1
        if len(self.stats.refused) < MAX_REFUSED_KEPT:
            self.stats.refused.append(f"{status} {method} {path[:200]}")

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def what(self) -> str:
        return f"the API proxy on {self.socket_path}"

    def start(self) -> ApiProxy:
        super().start()
        return self

    def close(self, timeout_s: float = 30) -> None:
        super().close(timeout_s)
        try:
            self.socket_path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> ApiProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _listen(self) -> asyncio.base_events.Server:
        # No cookie is ever stored: one client's cookies must not ride on another client's requests.
        self.client = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False, trust_env=True,
                                        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
                                        limits=httpx.Limits(max_connections=None, max_keepalive_connections=32))
        for name in list(self.client.headers.keys()):
            del self.client.headers[name]  # httpx's defaults (its user-agent, ...): only the client's go upstream
        self.socket_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.socket_path))
            os.chmod(self.socket_path, 0o600)
            if self.owner is not None:
                os.chown(self.folder, *self.owner)
                os.chown(self.socket_path, *self.owner)
        except BaseException:
            listener.close()
            raise
        return await asyncio.start_unix_server(self._accept, sock=listener, limit=READ_CHUNK)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _Connection(self, reader, writer).serve()

    async def _closed(self) -> None:
        if self.client is not None:
            await self.client.aclose()
