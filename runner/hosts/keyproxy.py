"""A forwarder on 127.0.0.1 that holds a host's API key, so that the CLI (and every command its model runs) never
does: the CLI is given the proxy's URL and a token that is good only there, for as long as the host lives.

Why: an agent CLI whose model runs shell commands (Codex) keeps its key in its own environment, and a command of the
same user behind the same wall can read `/proc/<cli>/environ`; untrusted skill text could ask for it. Through this
proxy the key stays in the runner's process. What a command can still do with the token is call the same API paths
while the run lasts: the proxy forwards only the paths the host names (`paths`), to the one upstream, and counts
every request it forwarded.

Requests stream both ways unchanged but for the credential header; a reply cut upstream is cut to the client too
(no terminating chunk), so the CLI sees what it would have seen.
"""

from __future__ import annotations

import hmac
import http.client
import re
import secrets
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

TOKEN_PREFIX = "skill-evals-key-proxy-"
# The headers a client carries its key in: Anthropic's, OpenAI's (Bearer) and the Gemini API's.
CREDENTIAL_HEADERS = ("x-api-key", "authorization", "x-goog-api-key")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                        "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"})
MAX_BODY_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024
UPSTREAM_TIMEOUT_S = 900.0


class _Handler(BaseHTTPRequestHandler):
    server: KeyProxyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: never log a request
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.forward("POST")

    def do_GET(self) -> None:  # noqa: N802
        self.forward("GET")

    def refuse(self, status: int, message: str) -> None:
        body = ('{"error": {"type": "skill_evals_key_proxy", "message": "' + message + '"}}').encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def forward(self, method: str) -> None:
        proxy = self.server.proxy
        path = self.path.split("?", 1)[0]
        inside = path[len(proxy.base_path):] if path.startswith(proxy.base_path) else None
        if inside is None or not any(pattern.fullmatch(inside) for pattern in proxy.paths):
            proxy.refused += 1
            return self.refuse(403, f"{method} {path[:100]} is not a path this host may call")
        if not proxy.accepts(self.headers.items()):
            proxy.refused += 1
            return self.refuse(401, "not this run's token")
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            return self.refuse(413, "request too large")
        body = self.rfile.read(length) if length else b""
        headers = {name: value for name, value in self.headers.items()
                   if name.lower() not in HOP_BY_HOP and name.lower() not in CREDENTIAL_HEADERS}
        headers.update(proxy.credentials(self.headers.items()))
        with proxy.lock:
            proxy.forwarded += 1
        try:
            upstream = proxy.connect()
            upstream.request(method, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            return self.refuse(502, f"the upstream API could not be reached: {type(exc).__name__}")
        self.relay(reply, upstream)

    def relay(self, reply: http.client.HTTPResponse, upstream: http.client.HTTPConnection) -> None:
        self.send_response(reply.status, reply.reason)
        for name, value in reply.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            while True:
                chunk = reply.read1(CHUNK)
                if not chunk:
                    break
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
        except (OSError, http.client.HTTPException):
            # Cut upstream: cut here too, without the last chunk, so the client sees a broken reply.
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        finally:
            upstream.close()
        self.wfile.write(b"0\r\n\r\n")


class KeyProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: KeyProxy):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.proxy = proxy


class KeyProxy:
    """``proxy = KeyProxy(upstream, key, paths).start()``; the CLI gets ``proxy.url`` and ``proxy.token``."""

    def __init__(self, upstream: str, api_key: str, paths: tuple[re.Pattern[str], ...]):
        """`upstream`: the API's base URL (its path kept); `paths`: what may be called, relative to that path."""
        parts = urlsplit(upstream.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {upstream!r}")
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path  # the client's base URL keeps the upstream's path: only the host changes
        self.api_key = api_key
        self.paths = paths
        self.token = TOKEN_PREFIX + secrets.token_hex(16)
        self.forwarded = 0
        self.refused = 0
        self.lock = threading.Lock()
        self._server: KeyProxyServer | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:  # never the key
        return f"KeyProxy(upstream={self.scheme}://{self.host}:{self.port}{self.base_path})"

    @property
    def url(self) -> str:
        assert self._server is not None, "start the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.base_path}"

    def accepts(self, headers: Any) -> bool:
        """Whether the request carries this proxy's token in a credential header (`Bearer` or bare)."""
        for name, value in headers:
            if name.lower() not in CREDENTIAL_HEADERS:
                continue
            text = value.strip()
            if text.lower().startswith("bearer "):
                text = text[7:].strip()
            if hmac.compare_digest(text.encode(), self.token.encode()):
                return True
        return False

    def credentials(self, headers: Any) -> dict[str, str]:
        """The real key in each credential header the client sent the token in."""
        out = {}
        for name, value in headers:
            lowered = name.lower()
            if lowered in CREDENTIAL_HEADERS:
                bearer = value.strip().lower().startswith("bearer ")
                out[lowered] = f"Bearer {self.api_key}" if bearer else self.api_key
        return out

    def connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=UPSTREAM_TIMEOUT_S,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=UPSTREAM_TIMEOUT_S)

    def start(self) -> KeyProxy:
        if self._server is None:
            self._server = KeyProxyServer(self)
            self._thread = threading.Thread(target=self._server.serve_forever, name="skill-evals-key-proxy",
                                            daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# The APIs' own endpoints, and the paths each agent CLI calls there (what a proxy in front of them forwards).
ANTHROPIC_URL = "https://api.anthropic.com"
MESSAGES_PATHS = (re.compile(r"/v1/messages"), re.compile(r"/v1/messages/count_tokens"))
GEMINI_URL = "https://generativelanguage.googleapis.com"
GEMINI_PATHS = (re.compile(r"/v1beta/models/[^/]+:(streamGenerateContent|generateContent|countTokens)"),)


def in_front_of(base_url: str | None, default_url: str, api_key: str, paths: tuple[re.Pattern[str], ...]
                ) -> KeyProxy | None:
    """A proxy for a host's sessions, or None when the host has no key to hold (nothing will run)."""
    return KeyProxy(base_url or default_url, api_key, paths) if api_key else None
