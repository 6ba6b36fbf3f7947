"""An asyncio server on a daemon thread of its own, for the two small servers of `run --container`.

The API proxy (runner.container.apiproxy, on the host) and the relay (runner.container.apirelay, inside the container) serve while
the synchronous runner goes on, so each runs its own event loop on a thread. This is the part they share: start
returns once the server listens (or raises why it could not), close stops it and cancels the connections it
still serves. Standard library only: the relay is the container's entry point and must start fast.
"""

from __future__ import annotations

import asyncio
import threading


class ServerThread:
    """Subclasses give :meth:`_listen` (make the asyncio Server, on the loop), :meth:`_serve` (one connection)
    and, if they hold resources on the loop, :meth:`_closed`; ``what`` names them in errors."""

    thread_name = "skill-evals-server"

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def what(self) -> str:
        """E.g. "the API proxy on /path/api.sock": start()'s error says "<what> could not listen"."""
        return "the server"

    def start(self) -> ServerThread:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise RuntimeError(f"{self.what} could not listen: {self._error}")
        return self

    def close(self, timeout_s: float = 30) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=timeout_s)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported by start(), or the thread ends with the run
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            server = await self._listen()
        except BaseException as exc:  # noqa: BLE001 - start() raises it in the caller's thread
            await self._closed()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()
            await self._closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The server's connection callback: every connection is a task close() can cancel."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # closing; asyncio's server callback must not see a cancelled task
        finally:
            self._tasks.discard(task)

    async def _listen(self) -> asyncio.base_events.Server:
        raise NotImplementedError

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def _closed(self) -> None:
        """Release what the subclass holds on the loop (after the server closed, or when listening failed)."""
