"""Inside the container: the Messages API is a unix socket, and this turns it into a base URL.

Why: `run --container` gives the container no network (``none``) and no API key. Its only way out is the
socket of the runner's proxy on the host (runner.apiproxy), bind-mounted at the path in ``SKILL_EVALS_API_SOCKET``.
The anthropic SDK could speak HTTP over a unix socket, the Claude Code CLI cannot: both need an http:// base URL.
So :func:`main`, the container's entry point, starts :class:`Relay` — a byte pump from 127.0.0.1:<ephemeral> (the
container's own loopback) to the socket, HTTP-agnostic, one asyncio thread — points ``ANTHROPIC_BASE_URL`` at it,
and runs ``skill-evals`` in the same process: the api host, the judge, batches and every CLI session (which get
``ANTHROPIC_BASE_URL`` through their environment allowlist) all go through it. ``ANTHROPIC_API_KEY`` in here is
the proxy's per-run placeholder, never the key.

Without ``SKILL_EVALS_API_SOCKET`` (no key on the host, or the image run by hand) :func:`main` is plain
``skill-evals``.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading

SOCKET_ENV = "SKILL_EVALS_API_SOCKET"
CHUNK = 64 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()


class Relay:
    """TCP on 127.0.0.1 to the unix socket ``socket_path``; ``url`` once started. A daemon thread: it ends
    with the process."""

    def __init__(self, socket_path: str):
        self.socket_path = socket_path
        self.url = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="skill-evals-api-relay", daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> Relay:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise RuntimeError(f"the API relay could not listen on 127.0.0.1: {self._error}")
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await self._relay(client_reader, client_writer)
        except asyncio.CancelledError:
            pass  # the relay is closing; asyncio's server callback must not see a cancelled task
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]

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


def main(argv: list[str] | None = None) -> None:
    """The container's entry point: the relay when there is a proxy socket, then ``skill-evals`` ``argv``."""
    socket_path = os.environ.pop(SOCKET_ENV, "")
    if socket_path:
        problem = socket_problem(socket_path)
        if problem is not None:
            print(f"skill-evals: the API proxy's socket {socket_path} cannot be used ({problem}); the runner on "
                  "the host mounts it, so this image is not meant to be given SKILL_EVALS_API_SOCKET by hand",
                  file=sys.stderr)
            sys.exit(2)
        os.environ["ANTHROPIC_BASE_URL"] = Relay(socket_path).start().url
    from runner.cli import main as cli_main

    cli_main(args=sys.argv[1:] if argv is None else argv, prog_name="skill-evals")


if __name__ == "__main__":
    main()
