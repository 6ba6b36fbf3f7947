"""A virtual clock for asyncio code that takes its time source as a parameter (`clock=`, `sleep=`).

Why: a test that asserts how long something waited on the real clock fails when the machine is loaded
(the upper bounds) and proves little when it is not (the bounds must be loose). On this clock time only
moves when every task is waiting on it, and then it jumps straight to the earliest wake time, so a test
can assert exact times (a pause of 0.3 s ends at exactly t0 + 0.3) in no real time at all.

How time moves: `sleep(delay)` parks the caller on a future in a heap of (wake time, sequence, future).
`run(main)` runs `main` as a task and drives the clock: it lets the event loop settle, then sets the time to
the earliest sleeper's wake time and wakes every sleeper due at that time (in the order they slept).

Settling: the driver cannot ask the event loop whether any other task is still ready to run without reading
its private state, so it approximates it. It yields (`asyncio.sleep(0)`, which puts it behind every callback
already scheduled) until the sleepers, and the count of sleeps ever started, stayed the same for
`settle_rounds` yields in a row. A chain of wake-ups that runs longer than that without sleeping on this
clock (a long hand-off of locks and futures) would be cut short: raise `settle_rounds` for such code. The
limiter's longest chain (a timer's notify, the waiter's lock, its return) is a handful of steps.

What it does not cover: real I/O and real timers (asyncio.sleep, wait_for's timeout) in the code under test do
not move this clock, and a task blocked on them looks settled. `run` raises when `main` is still waiting and no
one sleeps on this clock (a deadlock, or a wait on the real clock) instead of hanging.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClock:
    """`time` and `sleep` for the code under test (pass them as its clock and sleep); `run` drives them."""

    def __init__(self, start: float = 0.0, *, settle_rounds: int = 20):
        self.now = start
        self.settle_rounds = settle_rounds
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._started = 0  # sleeps ever started: a change means some task ran since the last look

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the time forward by hand (synchronous tests, with nothing sleeping)."""
        if seconds < 0:
            raise ValueError("time does not go back")
        if self.pending():
            raise RuntimeError("tasks sleep on this clock: let run() wake them in order")
        self.now += seconds

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)  # as asyncio.sleep(0): a yield, no time passes
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._started += 1
        heapq.heappush(self._sleepers, (self.now + delay, next(self._seq), future))
        await future  # a cancelled sleeper's future is cancelled too; the driver skips it

    def pending(self) -> int:
        return sum(1 for _, _, future in self._sleepers if not future.done())

    async def _settle(self) -> None:
        seen = (self._started, self.pending())
        still = 0
        while still < self.settle_rounds:
            await asyncio.sleep(0)
            now_seen = (self._started, self.pending())
            still = still + 1 if now_seen == seen else 0
            seen = now_seen

    def _wake_earliest(self) -> bool:
        """Jump to the earliest live sleeper's wake time and wake all due then; False when none sleeps."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        if not self._sleepers:
            return False
        self.now = max(self.now, self._sleepers[0][0])
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        return True

    async def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run `main` to its end, moving the time whenever every task waits on this clock."""
        task = asyncio.ensure_future(main)
        try:
            while True:
                await self._settle()
                if task.done():
                    return task.result()
                if not self._wake_earliest():
                    raise RuntimeError("the code under test waits, and nothing sleeps on the virtual clock: "
                                       "a deadlock, or a wait on the real clock")
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def run_sync(self, main: Coroutine[Any, Any, T]) -> T:
        """`asyncio.run(self.run(main))`: a fresh event loop driven by this clock."""
        return asyncio.run(self.run(main))
