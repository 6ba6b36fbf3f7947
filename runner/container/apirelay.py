"""Inside the container: the Messages API is a unix socket, and this turns it into a base URL.

`Relay` pumps bytes from the container's loopback to the proxy's socket (``SKILL_EVALS_API_SOCKET``), and the entry
point points ``ANTHROPIC_BASE_URL`` at it: the Claude Code CLI cannot speak HTTP over a unix socket. The
``ANTHROPIC_API_KEY`` in here is a placeholder, never the key.

Design notes: docs/design/container-hardening.md.
"""

from __future__ import annotations

import asyncio
import os
import stat

from runner.container.serverthread import ServerThread

SOCKET_ENV = "SKILL_EVALS_API_SOCKET"
CHUNK = 64 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()


class Relay(ServerThread):
    """TCP on 127.0.0.1 to the unix socket ``socket_path``; ``url`` once started. A daemon thread: it ends
    with the process."""

    thread_name = "skill-evals-api-relay"

    def __init__(self, socket_path: str):
        super().__init__()
        self.socket_path = socket_path
        self.url = ""

    @property
    def what(self) -> str:
        return "the API relay on 127.0.0.1"

    def start(self) -> Relay:
        super().start()
        return self

    def close(self, timeout_s: float = 10) -> None:
        super().close(timeout_s)

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _listen(self) -> asyncio.base_events.Server:
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return server

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        await self._relay(client_reader, client_writer)

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError:
            client_writer.transport.abort()  # the client sees a refused connection, and retries or reports it
            return
        pumps = [asyncio.ensure_future(_pump(client_reader, upstream_writer)),
                 asyncio.ensure_future(_pump(upstream_reader, client_writer))]
        try:
            # HTTP clients never half-close: either side ending ends the connection.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_writer, upstream_writer):
                writer.close()


def socket_problem(path: str) -> str | None:
    """Why ``path`` is not a usable socket (None when it is)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"{exc.strerror}"
    return None if stat.S_ISSOCK(mode) else "not a socket"
