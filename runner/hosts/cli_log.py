"""What the Claude Code CLI's own session log shows of a session's requests: untrusted data, read within bounds.

Out: each request the CLI sent and the usage of each reply; a request without a real reply is lost. Being in the
session's folder, it is used only to charge more, or to bound a killed run's worst case.

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.observation import Usage

PROJECTS = "projects"
CHARS_PER_TOKEN = 4
# What the CLI adds to a turn besides its user messages (reminders, attachments): tens of tokens measured on CLI
# 2.1.332; a lost request's estimate adds this much.
TURN_SLACK = 1024
# runner.plan.cost.MAX_TOOL_RESULT_TOKENS: what one tool result adds to a turn at worst (the plan's worst case).
TOOL_RESULT_TOKENS = 25_000
MAX_FILES = 64
MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024  # over every file of one session
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 4
MAX_EVENTS = 100_000  # lines read per file
SYNTHETIC = "<synthetic>"
_COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


@dataclass(frozen=True)
class LoggedRequest:
    """One request the CLI logged, and the usage of its reply when one with real usage was logged (None: lost).
    input_estimate: a lost request's input tokens as the log shows them (`_requests`), None when it shows nothing."""

    id: str
    reply: Usage | None
    input_estimate: int | None = None


@dataclass(frozen=True)
class SessionLog:
    requests: tuple[LoggedRequest, ...]
    next_input: int | None = None  # a request after the log's end (one the log did not show yet): its estimate

    @property
    def replies(self) -> list[Usage]:
        return [r.reply for r in self.requests if r.reply is not None]

    @property
    def lost(self) -> int:
        return sum(1 for r in self.requests if r.reply is None)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def reply_usage(raw: object) -> Usage | None:
    """A logged reply's usage, or None when it shows no real figures (null, not counts, or no input at all: a
    request always has input, and the CLI logs a usage it could not read as zeros)."""
    if not isinstance(raw, dict) or not all(_is_count(raw.get(name, 0)) for name in _COUNTS):
        return None
    if not _is_count(raw.get("input_tokens")) or not _is_count(raw.get("output_tokens")):
        return None
    usage = Usage(**{name: raw.get(name) or 0 for name in _COUNTS})
    if usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens == 0:
        return None
    return usage


def _log_files(config: Path) -> list[Path]:
    """The .jsonl files under config/projects: no symlink followed, bounded in depth and number."""
    root = config / PROJECTS
    found: list[Path] = []
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            return []
    except OSError:
        return []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        depth = len(Path(dirpath).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        for name in sorted(filenames):
            if name.endswith(".jsonl") and len(found) < MAX_FILES:
                found.append(Path(dirpath) / name)
    return found


def _lines(path: Path) -> list[bytes]:
    """The file's lines, read within the bounds; [] for anything that is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return []
            data = handle.read(MAX_FILE_BYTES)
        except OSError:
            return []
    return [line for line in data.split(b"\n") if 0 < len(line) <= MAX_LINE_BYTES]


def _entry(line: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def _status(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599 else None


def _events(path: Path) -> list[tuple[str, Any]]:
    """The file's events in order: ("request", id), ("error", HTTP status or None), ("reply", (ref, usage)),
    ("content", characters of a user message: a tool result, a text the next request carries)."""
    events: list[tuple[str, Any]] = []
    for line in _lines(path)[:MAX_EVENTS]:
        entry = _entry(line)
        if entry is None:
            continue
        kind = entry.get("type")
        message = entry.get("message")
        if kind == "api-request" and isinstance(entry.get("id"), str):
            events.append(("request", entry["id"]))
        elif kind == "system" and entry.get("subtype") == "api_error":
            error = entry.get("error")
            events.append(("error", _status(error.get("status")) if isinstance(error, dict) else None))
        elif kind == "assistant" and isinstance(message, dict) and message.get("model") == SYNTHETIC:
            if entry.get("isApiErrorMessage") is True:
                events.append(("error", _status(entry.get("apiErrorStatus"))))
        elif kind == "assistant" and isinstance(message, dict) and isinstance(entry.get("requestRef"), str):
            events.append(("reply", (entry["requestRef"], reply_usage(message.get("usage")), _ids(message, "tool_use",
                                                                                                    "id"))))
        elif kind == "user" and isinstance(message, dict):
            events.append(("content", (len(json.dumps(message.get("content"), ensure_ascii=False)),
                                       _ids(message, "tool_result", "tool_use_id"))))
    return events


def _ids(message: dict[str, Any], block_type: str, key: str) -> frozenset[str]:
    content = message.get("content")
    return frozenset(block[key] for block in content if isinstance(block, dict) and block.get("type") == block_type
                     and isinstance(block.get(key), str)) if isinstance(content, list) else frozenset()


def _requests(events: list[tuple[str, Any]]) -> tuple[list[LoggedRequest], int | None]:
    """Each request with its reply, or lost, or refused (left out: the API bills no error response).

    What follows a request without a reply tells which: an error with an HTTP status (an `api_error` before a retry,
    or the CLI's final error message) -> refused; an error without one (a connection dropped) or nothing at all (the
    session was ended while it waited) -> lost. A request followed at once by another one was re-sent by the CLI
    without a word (measured: after a 400 without one of its beta headers, after a cut stream without streaming):
    it shares the fate of the one that re-sent it, and a chain that ends in a reply counts its earlier requests as
    lost (the dear way to be wrong)."""
    replies: dict[str, Usage | None] = {}
    for kind, value in events:
        if kind == "reply":
            ref, usage, _ = value
            before = replies.get(ref)
            # One line per content block of a reply, each with the reply's usage: the largest one counts.
            if ref not in replies or (usage is not None and (before is None or _total(usage) > _total(before))):
                replies[ref] = usage
    out: list[LoggedRequest] = []
    chain: list[str] = []  # requests sent since the last event that told their fate
    last: Usage | None = None  # the last reply with real usage
    last_ref: str | None = None
    added = 0  # characters of content logged since it (what the next turn adds)
    calls: set[str] = set()  # its tool calls whose result the log has not shown yet
    unsized: list[int] = []  # lost requests of this turn whose size nothing showed yet: a reply to it may

    def estimate() -> int | None:
        """A lost request's input: the reply before it, its output and what was added since (4 characters a
        token), plus a turn's worst growth for each of its tool results the log does not show (a log written
        behind the session); None before any reply."""
        if last is None:
            return None
        growth = added // CHARS_PER_TOKEN + TURN_SLACK + len(calls) * TOOL_RESULT_TOKENS
        return _input(last) + last.output_tokens + growth

    for kind, value in events:
        if kind == "request":
            chain.append(value)
        elif kind == "content":
            added += value[0]
            calls -= value[1]
            unsized = []
        elif kind == "reply" and value[0] == last_ref and not chain:
            calls |= value[2]  # another content-block line of the last reply: its tool calls too
        elif kind == "reply" and chain and value[0] == chain[-1]:
            usage = replies[chain[-1]]
            # The requests sent for this turn before this reply (retried, re-sent) carried its input.
            same = _input(usage) if usage is not None else estimate()
            for index in unsized:
                out[index] = LoggedRequest(out[index].id, None, same)
            out.extend(LoggedRequest(ident, None, same) for ident in chain[:-1])
            out.append(LoggedRequest(chain[-1], usage, None if usage is not None else same))
            chain, unsized = [], []
            if usage is not None:
                last, last_ref, added, calls = usage, value[0], 0, set(value[2])
        elif kind == "error" and chain:
            if value is None:
                for ident in chain:
                    out.append(LoggedRequest(ident, None, estimate()))
                    if out[-1].input_estimate is None:
                        unsized.append(len(out) - 1)
            chain = []
    out.extend(LoggedRequest(ident, None, estimate()) for ident in chain)  # in flight when the session was ended
    return out, estimate()


def _input(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens


def read(config: Path) -> SessionLog | None:
    """Every billed request the session's CLI logged under `config` (its CLAUDE_CONFIG_DIR), in log order; None when
    it logged nothing readable."""
    found: list[LoggedRequest] = []
    any_event = False
    after: int | None = None
    budget = MAX_TOTAL_BYTES  # each file counts at its size (at most MAX_FILE_BYTES of it is read)
    for path in _log_files(config):
        try:
            budget -= min(os.lstat(path).st_size, MAX_FILE_BYTES)
        except OSError:
            continue
        if budget < 0:
            break
        events = _events(path)
        any_event = any_event or bool(events)
        requests, next_input = _requests(events)
        found.extend(requests)
        after = max(after or 0, next_input) if next_input is not None else after
    return SessionLog(tuple(found), after) if any_event else None


def _total(usage: Usage) -> int:
    return sum(getattr(usage, name) for name in _COUNTS)
