"""Reading a file within bounds: a regular file only, up to a size, parsed to a nesting depth.

Any file the runner reads may be named by someone it does not trust: a path is checked before and after opening
(no FIFO, no device), read to its bound and parsed to `MAX_NESTING`. The bounds: docs/configuration.md.

Design notes: docs/design/floor-and-trust.md.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

# Arrays and tables inside each other: far past any eval file, setting or frontmatter (they nest 5 or 6 deep), far
# below the interpreter's recursion limit (1,000 frames, which every recursive walker shares).
MAX_NESTING = 64
SETTINGS_MAX_BYTES = 1_048_576
OPTION_FILE_MAX_BYTES = 64 * 1_048_576
RUN_FILE_MAX_BYTES = 1_024 * 1_048_576

_CHUNK = 1_048_576


class Refused(OSError):
    """The file is not read: not a regular file, over its size bound, or swapped while it was opened. The message
    says why in words, without the path (the caller names the file as it shows it)."""

    def __init__(self, reason: str, too_large: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large

    def __str__(self) -> str:
        return self.reason


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def _over(size: int, max_bytes: int, approximate: bool = False) -> Refused:
    said = f"over {size:,}" if approximate else f"{size:,}"
    return Refused(f"the file is {said} bytes, over the {max_bytes:,}-byte limit; it was not read", too_large=True)


def check(path: Path, max_bytes: int) -> os.stat_result:
    """The file's status when it is a regular file within `max_bytes` (links followed); Refused when it is not,
    FileNotFoundError (or another OSError) when it cannot be stat'ed. Nothing is opened."""
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise Refused(f"{kind_of(status.st_mode)}, not a regular file; it was not read")
    if status.st_size > max_bytes:
        raise _over(status.st_size, max_bytes)
    return status


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; Refused (an OSError) when it is anything else, and the
    OSError of the system when it cannot be read. Never blocks, never reads past the bound."""
    before = check(path, max_bytes)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            now_is = "a regular file" if stat.S_ISREG(now.st_mode) else kind_of(now.st_mode)
            raise Refused(f"the file was replaced while it was opened (now {now_is}); it was not read")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew after the stat (or the system reported no size, as /proc does)
                raise _over(max_bytes, max_bytes, approximate=True)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path, max_bytes: int) -> str:
    """read_bytes as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_bytes(path, max_bytes).decode("utf-8")


def too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """True when lists and dicts nest more than `limit` deep in the value. Iterative: the value may be as deep as
    the parser allowed."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return False


def nesting_message(what: str, limit: int = MAX_NESTING) -> str:
    return (f"{what} nests deeper than {limit} levels (lists or maps inside each other); it was not read. "
            "No eval file, setting or frontmatter needs that many: flatten it")
