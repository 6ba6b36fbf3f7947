"""Bounds a test puts around code that must neither hang nor grow without limit (issue 28, finding 6).

They detect a hang or a runaway allocation and turn it into a failure the test reports; they are never a speed
assertion (a bounded case takes milliseconds, the bound is seconds, and an unbounded one never ends).
"""

from __future__ import annotations

import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

# A CLI process's address space: validate, census and plan (api host, no surface subprocess) run in under 500 MB
# (measured with `ulimit -v`); an alias bomb or a read of /dev/zero passes 1 GiB within seconds.
CLI_ADDRESS_SPACE = 1 << 30


class Hung(BaseException):
    """Past the time bound (a BaseException: no `except Exception` of the code under test swallows it)."""


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


@contextmanager
def memory_bound(headroom: int) -> Iterator[None]:
    """RLIMIT_AS at this process's size plus `headroom` while the block runs (MemoryError past it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + headroom
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Hung raised in the block after `seconds` (SIGALRM interrupts even a blocked open() of a FIFO)."""
    def hung(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"no answer after {seconds} s")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def limit_cli_memory() -> None:
    """preexec_fn of a CLI subprocess: its address space bounded (CLI_ADDRESS_SPACE)."""
    resource.setrlimit(resource.RLIMIT_AS, (CLI_ADDRESS_SPACE, CLI_ADDRESS_SPACE))
