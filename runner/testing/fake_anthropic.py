"""A scripted, offline fake of the Anthropic Messages API for tests (stdlib only).

What the real Claude Code CLI sent (claude-agent-sdk 0.2.189, bundled CLI 2.1.332, measured 2026-11-30 with
``claude -p PROMPT --output-format stream-json --verbose --max-turns 3``, env = PATH, fresh HOME, ANTHROPIC_BASE_URL,
ANTHROPIC_API_KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_TELEMETRY=1; a project with
.claude/skills/demo-skill/SKILL.md). Nothing else was needed to run offline: the fake only had to answer
``POST /v1/messages?beta=true``.
- Paths: only ``POST /v1/messages?beta=true``; one request per model turn (a Skill activation + final answer =
  2 requests, ~0.6 s per session). No count_tokens, no /v1/models, no HEAD/GET probe, no title request.
- Headers of note: ``x-api-key: <key>``, ``anthropic-version: 2023-06-01``, ``anthropic-beta:
  claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,...`` (9 betas),
  ``x-app: cli``, ``user-agent: claude-cli/2.1.332 (external, sdk-cli)``, ``x-claude-code-session-id``,
  ``x-stainless-*`` (package 0.128.0, runtime node; ``x-stainless-retry-count`` stays "0" on the CLI's own
  retries), ``x-stainless-timeout: 600``, ``accept: application/json``, ``content-length`` (not chunked).
- Body keys: ``model`` (default ``claude-opus-5-5``), ``max_tokens`` (128000), ``stream`` (true), ``system``,
  ``tools``, ``messages``, ``metadata`` ({"user_id": "<JSON string with device_id, session_id>"}), ``thinking``
  ({"type": "adaptive", "display": "updates"}), ``context_management`` ({"edits": [clear_thinking_20251015]}),
  ``output_config`` ({"effort": "medium"}).
- ``system``: 3 text blocks: "x-anthropic-billing-header: cc_version=...; cc_entrypoint=sdk-cli;", "You are a
  Claude agent, built on Anthropic's Claude Agent SDK." (cache_control ephemeral), then the ~7K-char prompt.
- ``tools`` (names): Agent, Bash, Edit, ListAgents, Read, ReportFindings, ScheduleWakeup, Skill, ToolSearch,
  Workflow, DeferredToolPlaceholder (``defer_loading``), Write. Skill's input_schema: {"skill": string (required),
  "args": string}, additionalProperties false. Other tools (WebFetch, WebSearch, Cron*, ...) are deferred and
  only named in the system-role message.
- ``messages[0]`` user, a block list: a ``<system-reminder>`` text block (commit attribution), then the prompt.
  ``messages[1]`` role ``system`` (block list on the first call, a plain string on later calls): "# Environment
  ...", the deferred tool names, agent types, then "The following skills are available for use with the Skill
  tool:" and ``- name: description`` lines, project skills first (demo-skill), then ~13 bundled ones (dataviz,
  update-config, code-review, simplify, claude-api, init, security-review, ...), ending "Today's date is ...".
- Turn 1 (after ``skill("demo-skill")``): messages = user, system, assistant [tool_use Skill], user
  [tool_result "Launching skill: demo-skill", text "Base directory for this skill: <dir>\n\n<SKILL.md body>"].
- Faults: a cut stream (``break_stream``) -> stream-json ``{"type":"system","subtype":"api_retry",
  "max_retries":10,...}`` and a new STREAMED request after ~0.5 s; a 529 -> api_retry event (error_status 529),
  retried after ~0.6 s (``retry-after: 0`` ignored); a malformed SSE body -> stderr "Could not parse message into
  JSON" and an immediate NON-streaming retry (``stream: false``) for the same turn.

Usage::

    from runner.testing.fake_anthropic import FakeAnthropic, text, tool, skill, blocks, error, break_stream, hang, malformed

    with FakeAnthropic() as fake:
        fake.script("summarise the report", skill("report-summary"), text("final answer"))
        fake.script("flaky", error(529, "overloaded_error", times=1), text("ok"))
        env = {"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key", ...}
        ...
        assert fake.requests_for("summarise the report")[0].body["stream"] is True

Semantics
- A script is chosen by ``match`` being a substring of the text of the FIRST ``user`` message in the
  request's ``messages`` (string content, or every ``text`` block of a block list concatenated, so
  system-reminder blocks Claude Code prepends are searched too). First registered match wins;
  otherwise the default script (``default(...)``; initially one ``text("ok")`` turn) is played.
- Turn index = number of ``assistant`` messages already in ``messages``. Past the end of a script
  the reply is ``text("done")`` (stop_reason ``end_turn``).
- Faults (``error``, ``break_stream``, ``reset``, ``hang``, ``malformed``) take ``times``: ``None`` = every
  request for that turn index gets the fault; ``times=n`` = the first n requests for that turn
  index get it, after which the NEXT item of the script answers that same turn index. So
  ``script("x", error(529, times=1), text("ok"))`` plays 529 once, then "ok" as turn 0, and a
  following item would be turn 1. Counters are per script (and per turn index).
- Replies a client must survive (they take ``times`` too): ``detailed_error`` (an error body with
  ``error.details``), ``spend_limit(kind)`` (the API's spend-limit answers: 400 usage limits, 429
  ``enforced_spend_limit_reached``, 429 without retry-after, 402 billing), ``ok_error`` (status 200 with the
  error JSON), ``sse_error`` (status 200 SSE with an ``error`` event mid-stream, stream or not),
  ``odd_message(usage=None)`` / ``odd_message(content=None)`` / ``odd_message(drop=("stop_reason",))`` (a
  Message with fields replaced or missing).
- Responses honour the request's ``"stream"`` flag: SSE (``message_start``, ``ping``,
  ``content_block_start``/``content_block_delta`` (``text_delta`` / ``input_json_delta``)/
  ``content_block_stop`` per block, ``message_delta`` with stop_reason and usage, ``message_stop``),
  sent with ``Transfer-Encoding: chunked`` so a broken stream is a detectable protocol error; or
  one JSON message. Ids are ``msg_fake_<n>`` / ``toolu_fake_<n>`` with n zero-padded to six digits (a fixed width, so
  token counts never depend on which session got which id); ``model`` is echoed.
  Headers: ``request-id`` (``req_fake_<n>``), ``anthropic-ratelimit-requests-remaining``.
- Rate limit (``set_rate_limit(limit, window_s=60)``): at most ``limit`` message requests in any sliding
  ``window_s``; a request over it gets 429 ``rate_limit_error`` with ``retry-after`` (whole seconds until a slot
  frees, rounded up), plays no script turn and is not charged to the window; every message response then carries
  ``anthropic-ratelimit-requests-limit`` / ``-remaining`` / ``-reset`` (RFC 3339: when the window is empty).
  ``over_limit`` counts the refused requests.
- Usage (deterministic): ``input_tokens = max(1, len(json.dumps(messages) + json.dumps(system)) // 4)``
  (see :func:`input_tokens_for`), ``output_tokens = 10 + len(reply text) // 4`` where the reply
  text is the text blocks plus ``json.dumps(input)`` of each tool_use block (see
  :func:`output_tokens_for`); cache fields 0. ``script(..., usage=Usage(...))`` fixes them.
- Prompt caching (only for a request that carries a breakpoint: ``cache_control`` on a system, message
  or tool block, or the top-level ``cache_control`` = a breakpoint at the last message block): the prefix
  is tools, then system, then messages, block by block, up to each breakpoint (see :func:`cache_units`,
  :func:`cache_marks`). Where a marker sits is no part of a prefix (a turn whose breakpoint moved on still
  matches what the turn before wrote), and a breakpoint also finds an entry written at any of the
  ``LOOKBACK_BLOCKS`` (20) block boundaries counted back from it, as the prompt-caching docs describe. One
  assumption (BENCHMARKS.md): Claude Code's ``x-anthropic-billing-header:`` system block, which changes with
  the first user message, is consumed by the first-party API and is no part of the cached prefix (its
  tokens still count as input). A prefix shorter than the model's minimum (:func:`cache_min_tokens_for`:
  1024 tokens, 4096 for Haiku 4.5 and Opus 4.5/4.6, 2048 for Haiku 3.x, as the prompt-caching docs list
  them) is never cached. The longest prefix already written by a response that began before this request
  arrived (its arrival = now - latency) is ``cache_read_input_tokens``; the rest up to the last breakpoint is
  ``cache_creation_input_tokens`` (and written, readable by later requests); ``input_tokens`` is what
  follows. The three always add up to :func:`input_tokens_for` (tools count in the cache key, not in
  tokens). Entries never expire. The cache is per server: ``cache_entries`` counts them.
- Billing (``billed``, ``billed_for(match)``: one :class:`Billed` per billed request). The rule the fake applies is
  the API's: a request is billed once the API processed it and began a response, whether or not the client ever
  reads that response. So the fake bills every ``POST /v1/messages`` for which it played a model turn: a reply sent
  whole (text, tool_use, blocks; a ``dynamic`` turn), a reply whose fields it then replaced or removed
  (``odd_message``: billed at the usage the reply had, e.g. with ``usage=None`` on the wire), a reply it hung before
  sending (``hang``: billed when it arrived, the ``late`` reply, even if the client timed out and left), a reply cut
  off or reset mid-stream, or not sent at all on a request without ``stream`` (``break_stream``, ``reset``: billed as
  :data:`CUT_REPLY`, the reply the model was producing, whole), a 200 whose body is not JSON (``malformed``) and a
  stream that began and then carried an ``error`` event (``stream_error``, ``sse_error``: billed as an empty reply).
  Each is billed its input tokens (with the cache split the reply had) plus the output tokens of the WHOLE reply,
  not only what reached the client. Not billed: an HTTP error status (``error``, ``detailed_error``,
  ``spend_limit``, a rate-limit 429, ``stream_error`` on a request without ``stream``), an error body with status
  200 (``ok_error``), count_tokens, and a request the fake cut during its latency because it was closing. In a
  Message Batch, each ``succeeded`` result is billed (``Billed.batch``: at the batch discount), never an
  ``errored``, ``expired`` or ``canceled`` one. Prices are the caller's: ``Billed.model`` and ``Billed.usage``.
- ``POST /v1/messages/count_tokens`` -> ``{"input_tokens": input_tokens_for(body)}``; any other
  path -> 404 with the Anthropic error JSON. Query strings (``?beta=true``) are ignored for routing
  (kept in ``Recorded.query``).

Why one long module: the fake is one server the tests start whole (stdlib only, JSON and SSE, faults,
batches, the request log); its scripts and its wire format change together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Union
from urllib.parse import urlsplit

from runner.testing.scripted import FakeHandler, ScriptedFake, TurnScript

__all__ = [
    "FakeAnthropic", "Recorded", "Usage", "Text", "ToolUse", "Blocks", "Error", "BreakStream", "Hang",
    "Malformed", "StreamError", "Turn", "text", "tool", "skill", "blocks", "error", "break_stream", "hang", "malformed",
    "Reset", "reset", "Billed", "CUT_REPLY",
    "stream_error", "input_tokens_for", "output_tokens_for", "first_user_text", "Dynamic", "dynamic",
    "cache_marks", "cache_units", "cache_min_tokens_for", "is_billing_block", "BILLING_HEADER", "LOOKBACK_BLOCKS",
    "DetailedError", "OkError", "SseError", "OddMessage", "detailed_error", "spend_limit", "ok_error", "sse_error",
    "odd_message", "SPEND_LIMIT_MESSAGES",
]


# --------------------------------------------------------------------------------------------
# Turns
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class Blocks:
    parts: tuple[Union[Text, ToolUse], ...]


@dataclass(frozen=True)
class Error:
    status: int
    err_type: str = "api_error"
    message: str = "..."
    retry_after: float | int | str | None = None
    times: int | None = None


@dataclass(frozen=True)
class BreakStream:
    times: int | None = None


@dataclass(frozen=True)
class Hang:
    seconds: float
    times: int | None = None


@dataclass(frozen=True)
class Reset:
    times: int | None = None


@dataclass(frozen=True)
class Malformed:
    times: int | None = None


@dataclass(frozen=True)
class StreamError:
    err_type: str = "overloaded_error"
    message: str = "..."
    times: int | None = None


@dataclass(frozen=True)
class Dynamic:
    """A turn computed from the request body (e.g. a judge reply naming the rubric ids it was sent)."""
    fn: Any


def dynamic(fn: Any) -> Dynamic:
    return Dynamic(fn)


@dataclass(frozen=True)
class DetailedError:
    """An HTTP error whose body also carries ``error.details`` (and no ``retry-after`` unless given)."""
    status: int
    err_type: str
    message: str
    details: dict[str, Any] | None = None
    retry_after: float | int | str | None = None
    times: int | None = None


@dataclass(frozen=True)
class OkError:
    """HTTP 200 whose JSON body is the API's error object (a gateway or proxy that got the status wrong)."""
    err_type: str = "api_error"
    message: str = "..."
    times: int | None = None


@dataclass(frozen=True)
class SseError:
    """HTTP 200 ``text/event-stream`` whatever the request asked: message_start, part of a text block, then an
    SSE ``error`` event and the end of the stream (an overload reported mid-stream)."""
    err_type: str = "overloaded_error"
    message: str = "..."
    times: int | None = None


@dataclass(frozen=True)
class OddMessage:
    """A 200 Message whose top-level fields are replaced (``set``: key -> value, None = JSON null) or removed
    (``drop``); ``answer`` gives the rest. Streamed: message_start carries the changed message, each block of
    a replaced ``content`` list is sent as it is, message_delta carries the changed stop_reason and usage."""
    answer: Any
    set: dict[str, Any]
    drop: tuple[str, ...] = ()
    times: int | None = None


Turn = Union[Text, ToolUse, Blocks, Error, BreakStream, Reset, Hang, Malformed, StreamError, Dynamic, DetailedError,
             OkError, SseError, OddMessage]
_FAULTS = (Error, BreakStream, Reset, Hang, Malformed, StreamError, DetailedError, OkError, SseError, OddMessage)
# What the model was producing when a reply was cut off or reset (billed whole: Billing in the module docstring).
CUT_REPLY = Text("Partial answer, cut off before its end.")
_STATUS_OF = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
              "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
              "timeout_error": 504, "overloaded_error": 529}


def text(s: str) -> Text:
    """One text block; stop_reason ``end_turn``."""
    return Text(s)


def tool(name: str, input_dict: dict[str, Any] | None = None, id: str | None = None) -> ToolUse:  # noqa: A002
    """One tool_use block; stop_reason ``tool_use``."""
    return ToolUse(name, dict(input_dict or {}), id)


def skill(name: str) -> ToolUse:
    """Claude Code's Skill tool call: ``{"name": "Skill", "input": {"skill": name}}``."""
    return tool("Skill", {"skill": name})


def blocks(*parts: Text | ToolUse | str) -> Blocks:
    """Several blocks in one assistant message (plain strings become text blocks)."""
    return Blocks(tuple(Text(p) if isinstance(p, str) else p for p in parts))


def error(status: int, err_type: str = "api_error", message: str = "...", retry_after: float | int | str | None = None,
          times: int | None = None) -> Error:
    """An HTTP error with body ``{"type":"error","error":{"type":err_type,"message":message}}``."""
    return Error(status, err_type, message, retry_after, times)


def break_stream(times: int | None = None) -> BreakStream:
    """Stream: message_start + half a text block, then the connection is cut. Non-stream: cut, no response."""
    return BreakStream(times)


def reset(times: int | None = None) -> Reset:
    """A connection reset (TCP RST, ECONNRESET at the client): streamed, after message_start and half a text block;
    not streamed, before any response."""
    return Reset(times)


def hang(seconds: float, times: int | None = None) -> Hang:
    """Sleep ``seconds`` before answering (the client should time out first), then answer "late"."""
    return Hang(seconds, times)


def malformed(times: int | None = None) -> Malformed:
    """HTTP 200 with a body that is not JSON (stream: an SSE ``data:`` line that is not JSON)."""
    return Malformed(times)


def stream_error(err_type: str = "overloaded_error", message: str = "...", times: int | None = None) -> StreamError:
    """Stream: HTTP 200, message_start, then an SSE ``error`` event (how the API reports e.g. overload
    mid-stream). Non-stream: the matching HTTP status (overloaded_error -> 529, api_error -> 500, ...)."""
    return StreamError(err_type, message, times)


def detailed_error(status: int, err_type: str, message: str, details: dict[str, Any] | None = None,
                   retry_after: float | int | str | None = None, times: int | None = None) -> DetailedError:
    """``{"type":"error","error":{"type":err_type,"message":message,"details":details}}`` with ``status``."""
    return DetailedError(status, err_type, message, details, retry_after, times)


# The API's answers once spending must stop (platform.claude.com/docs/en/api/errors): an organization or
# workspace spend limit the user set is a 400 whose message begins "You have reached your specified (workspace)
# API usage limits"; the monthly cap of the usage tier is a 429 WITHOUT retry-after whose error.details.error_code
# is enforced_spend_limit_reached; a credit balance too low is a 402 billing_error. The wording after the
# documented beginning is the fake's.
SPEND_LIMIT_MESSAGES = {
    "org": "You have reached your specified API usage limits. You will regain access on 2026-12-01 at 00:00 UTC.",
    "workspace": "You have reached your specified workspace API usage limits. You will regain access on "
                 "2026-12-01 at 00:00 UTC.",
    "tier": "This organization has reached its monthly API usage limit for its usage tier (fake).",
    "billing": "Your credit balance is too low to access the Anthropic API (fake).",
    "bare-429": "Rate limited, and no time to come back given (fake).",
}


def spend_limit(kind: str = "tier", times: int | None = None) -> DetailedError:
    """One of the API's spend-limit answers: ``org`` / ``workspace`` (400 invalid_request_error), ``tier`` (429
    rate_limit_error, error_code enforced_spend_limit_reached), ``billing`` (402 billing_error), ``bare-429``
    (429 rate_limit_error without retry-after and without details). None carries ``retry-after``."""
    message = SPEND_LIMIT_MESSAGES[kind]
    if kind in ("org", "workspace"):
        return DetailedError(400, "invalid_request_error", message, times=times)
    if kind == "tier":
        return DetailedError(429, "rate_limit_error", message, {"error_code": "enforced_spend_limit_reached"},
                             times=times)
    if kind == "billing":
        return DetailedError(402, "billing_error", message, times=times)
    if kind == "bare-429":
        return DetailedError(429, "rate_limit_error", message, times=times)
    raise ValueError(f"unknown spend-limit kind: {kind}")


def ok_error(err_type: str = "api_error", message: str = "...", times: int | None = None) -> OkError:
    """HTTP 200 with the error body ``{"type":"error","error":{...}}`` (JSON, stream or not)."""
    return OkError(err_type, message, times)


def sse_error(err_type: str = "overloaded_error", message: str = "...", times: int | None = None) -> SseError:
    """HTTP 200 SSE with an ``error`` event after part of a text block, even for a request without ``stream``."""
    return SseError(err_type, message, times)


def odd_message(answer: Text | ToolUse | Blocks | None = None, drop: tuple[str, ...] = (), times: int | None = None,
                **fields: Any) -> OddMessage:
    """A Message with fields replaced or removed, e.g. ``odd_message(usage=None)``, ``odd_message(content=None)``,
    ``odd_message(content=[{"type": "hologram"}])``, ``odd_message(drop=("stop_reason",))``."""
    return OddMessage(answer if answer is not None else Text("odd"), dict(fields), tuple(drop), times)


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass
class Recorded:
    method: str
    path: str                       # without the query string
    headers: dict[str, str]         # header names lower-cased
    body: Any                       # parsed JSON, or None
    time: float                     # time.time() when received
    query: str = ""                 # e.g. "beta=true"
    script: str | None = None       # the matched script's `match` (None: default script / not a message call)
    turn: int | None = None         # turn index played
    outcome: str = ""               # "text", "tool_use", "error 529", "break_stream", "hang", "malformed", ...


@dataclass(frozen=True)
class Billed:
    """One request the fake billed, as the API would (Billing in the module docstring)."""
    script: str | None              # the matched script's `match` (None: the default script)
    turn: int | None                # the turn index played (None: a batch request's)
    model: str                      # the request's model
    usage: Usage                    # input (with its cache split) and the whole reply's output
    outcome: str                    # what the client got: "text", "break_stream", "hang", "odd_message", ...
    batch: bool = False             # a succeeded request of a Message Batch (billed at the batch discount)


# --------------------------------------------------------------------------------------------
# Helpers (public so tests can compute expected figures)
# --------------------------------------------------------------------------------------------

def first_user_text(body: Any) -> str:
    """Concatenated text of the first ``user`` message of a Messages request body ('' if none)."""
    if not isinstance(body, dict):
        return ""
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(b.get("text", "") for b in content
                               if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
            return ""
    return ""


def input_tokens_for(body: Any) -> int:
    body = body if isinstance(body, dict) else {}
    return max(1, len(json.dumps(body.get("messages", [])) + json.dumps(body.get("system", ""))) // 4)


# Minimum cacheable prefix per model family (prompt-caching docs); any other model: 1024.
_CACHE_MIN_TOKENS = (("claude-haiku-4-5", 4096), ("claude-opus-4-5", 4096), ("claude-opus-4-6", 4096),
                     ("claude-3-5-haiku", 2048), ("claude-3-haiku", 2048), ("claude-haiku-3", 2048))


def cache_min_tokens_for(model: str) -> int:
    return next((tokens for prefix, tokens in _CACHE_MIN_TOKENS if model.startswith(prefix)), 1024)


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("cache_control"), dict)


# Claude Code's first system block. Its `cc_version=<version>.<3 characters>` changes with the first user message;
# the first-party API consumes the block, so it is no part of the cached prefix (an assumption: BENCHMARKS.md).
BILLING_HEADER = "x-anthropic-billing-header:"
# A breakpoint finds what was written at any of this many block boundaries counted back from it, its own included
# (the prompt-caching docs: "up to approximately 20 blocks before your explicit breakpoint").
LOOKBACK_BLOCKS = 20


def is_billing_block(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"].startswith(BILLING_HEADER)


def _unmarked(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


@dataclass(frozen=True)
class _Unit:
    """One block of the cached prefix: its key (a hash of every block up to it, markers and the billing block
    left out), whether it carries a breakpoint, and where it ends (for its token count)."""

    key: str
    marked: bool
    system: Any  # the system part up to here, as sent
    messages: list[Any]  # the messages part up to here, as sent

    @property
    def tokens(self) -> int:
        return len(json.dumps(self.messages) + json.dumps(self.system)) // 4


def cache_units(body: Any) -> list[_Unit]:
    """The request's prefix block by block, in prefix order: each tool, each system block (the billing block only
    counts, it is no unit), each message's blocks (a string content is one block). Tokens are counted as in
    :func:`input_tokens_for` (system and messages, not tools)."""
    if not isinstance(body, dict):
        return []
    tools, system, messages = body.get("tools") or [], body.get("system", ""), body.get("messages") or []
    running = hashlib.sha256(json.dumps(body.get("model")).encode())
    units: list[_Unit] = []

    def add(piece: Any, marked: bool, sys_part: Any, msg_part: list[Any]) -> None:
        running.update(json.dumps(piece, sort_keys=True).encode())
        units.append(_Unit(running.copy().hexdigest(), marked, sys_part, msg_part))

    for tool in tools:
        add(["tool", _unmarked(tool)], _marked(tool), "", [])
    if isinstance(system, list):
        for i, block in enumerate(system):
            if not is_billing_block(block):
                add(["system", _unmarked(block)], _marked(block), system[:i + 1], [])
    elif system:
        add(["system", system], False, system, [])
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        role = message.get("role") if isinstance(message, dict) else None
        if isinstance(content, list):
            for j, block in enumerate(content):
                add(["message", i, role, _unmarked(block)], _marked(block), system,
                    messages[:i] + [{**message, "content": content[:j + 1]}])
        else:
            add(["message", i, role, content], False, system, messages[:i + 1])
    if isinstance(body.get("cache_control"), dict) and messages and units:  # automatic: the last block
        units[-1] = dataclasses.replace(units[-1], marked=True)
    return units


def cache_marks(body: Any) -> list[tuple[str, int]]:
    """(cache key, prefix tokens) at each breakpoint of the request, in prefix order (tools, system, messages)."""
    return [(unit.key, unit.tokens) for unit in cache_units(body) if unit.marked]


def _parts(turn: Text | ToolUse | Blocks) -> tuple[Text | ToolUse, ...]:
    return turn.parts if isinstance(turn, Blocks) else (turn,)


def output_tokens_for(turn: Text | ToolUse | Blocks) -> int:
    reply = "".join(p.text if isinstance(p, Text) else json.dumps(p.input) for p in _parts(turn))
    return 10 + len(reply) // 4


# --------------------------------------------------------------------------------------------
# Scripts
# --------------------------------------------------------------------------------------------

class _Script(TurnScript[Turn]):
    def __init__(self, match: str | None, turns: tuple[Turn, ...], usage: Usage | None):
        super().__init__(match, turns, usage, (Text, ToolUse, Blocks, Dynamic), _FAULTS, Text("done"))


def _error_body(err_type: str, message: str, request_id: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": err_type, "message": message},
                       "request_id": request_id}).encode()


def _chunks(s: str, size: int) -> list[str]:
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


class _RateWindow:
    """A sliding-window request limit: at most ``limit`` accepted requests in any ``window_s``.
    Refused requests do not count against the window (as the API's limiter does not charge them)."""

    def __init__(self, limit: int, window_s: float):
        if limit < 1 or window_s <= 0:
            raise ValueError("limit must be >= 1 and window_s > 0")
        self.limit = limit
        self.window_s = float(window_s)
        self.accepted: deque[float] = deque()  # monotonic arrival times inside the window
        self.refused = 0

    def admit(self, now: float, headers: dict[str, str]) -> int | None:
        """Call with the fake's lock held. Sets the ``anthropic-ratelimit-requests-*`` headers; returns None
        when the request is accepted, else ``retry-after``: whole seconds until a slot frees, rounded up."""
        while self.accepted and self.accepted[0] <= now - self.window_s:
            self.accepted.popleft()
        refused = len(self.accepted) >= self.limit
        if refused:
            self.refused += 1
        else:
            self.accepted.append(now)
        # `reset`: when the limit is fully replenished (the newest accepted request leaves the window),
        # never earlier than that once cut to milliseconds (hence the extra millisecond).
        reset = time.time() + (self.accepted[-1] + self.window_s - now) + 0.001
        headers["anthropic-ratelimit-requests-limit"] = str(self.limit)
        headers["anthropic-ratelimit-requests-remaining"] = str(self.limit - len(self.accepted))
        headers["anthropic-ratelimit-requests-reset"] = (
            datetime.fromtimestamp(reset, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        if not refused:
            return None
        return max(1, math.ceil(self.accepted[0] + self.window_s - now))


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------

class _Handler(FakeHandler):
    # -- low-level writers (the rest: runner.testing.scripted.FakeHandler) -----------------------
    def send_bytes(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_whole(status, body, headers)

    def start_chunked(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def event(self, name: str, data: dict[str, Any]) -> None:
        self.chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

    def reset(self) -> None:
        """Reset the connection (TCP RST: SO_LINGER 0, then close): the client reads ECONNRESET."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# Message Batches (POST /v1/messages/batches, GET .../{id}, GET .../{id}/results)
# --------------------------------------------------------------------------------------------

BatchKind = str  # "succeeded" | "errored" | "canceled" | "expired"
_BATCH_KINDS = ("errored", "canceled", "expired")


@dataclass
class _BatchRule:
    """``batch_result(match, kind)``: requests whose first user text contains ``match`` (or whose custom_id
    equals it) get ``kind`` instead of their scripted answer; ``times`` = how many of them (None = all)."""
    match: str
    kind: BatchKind
    err_type: str
    message: str
    times: int | None
    used: int = 0


@dataclass
class _Batch:
    id: str
    created: float                       # time.time()
    results: list[dict[str, Any]]        # one JSONL line each, in request order
    polls: int = 0                       # GET /v1/messages/batches/{id} answered so far
    ended_at: float | None = None


@dataclass
class BatchItem:
    """One request inside a batch, as the fake answered it (``fake.batch_items``)."""
    batch_id: str
    custom_id: str
    params: Any
    script: str | None
    turn: int | None
    kind: BatchKind


class _BatchesMixin:
    """The Message Batches endpoints of :class:`FakeAnthropic`.

    - ``POST /v1/messages/batches`` ``{"requests": [{"custom_id", "params"}, ...]}``: every request is answered
      at once with the SAME scripting as ``POST /v1/messages`` (``script(match, ...)``, the turn index from the
      assistant messages in ``params``, usage figures from ``_message``); a scripted ``error(...)`` becomes an
      ``errored`` result with that error type (other faults: ``api_error``; ``hang`` answers "late"). Returns
      the batch with ``processing_status: in_progress``. An invalid custom_id (``^[a-zA-Z0-9_-]{1,64}$``) or a
      repeated one is a 400, as the API's validation is.
    - ``GET /v1/messages/batches/{id}``: ``in_progress`` for the first ``batch_timing(polls=...)`` retrieves
      (and until ``seconds`` have passed since creation), then ``ended`` with ``request_counts`` and
      ``results_url`` = ``<fake.url>/v1/messages/batches/{id}/results``.
    - ``GET .../{id}/results``: JSONL, one ``{"custom_id", "result": {"type": "succeeded", "message": {...}}}``
      (or ``errored`` with ``error``, ``canceled``, ``expired``) per request, in REVERSE request order (the API
      does not promise any order; reversing catches code that assumes one). 404 before the batch ended.
    - ``batch_result(match, "errored"|"expired"|"canceled", ...)`` scripts one request's result.
    """

    _lock: threading.Lock
    url: str
    requests: list[Recorded]

    def _batch_state(self) -> dict[str, Any]:
        state = self.__dict__.get("_batches_state")
        if state is None:
            state = {"batches": {}, "rules": [], "polls": 1, "seconds": 0.0, "items": [], "n": 0}
            self.__dict__["_batches_state"] = state
        return state

    # -- configuration --------------------------------------------------------------------------
    def batch_timing(self, polls: int = 1, seconds: float = 0.0) -> None:
        """A batch answers ``in_progress`` to its first ``polls`` retrieves and until ``seconds`` passed."""
        with self._lock:
            state = self._batch_state()
            state["polls"], state["seconds"] = int(polls), float(seconds)

    def refuse_batch_creates(self, refusal: DetailedError | None) -> None:
        """Every ``POST /v1/messages/batches`` gets this error (e.g. ``spend_limit("tier")``); None: accept again."""
        with self._lock:
            self._batch_state()["refusal"] = refusal

    def batch_result(self, match: str, kind: BatchKind, err_type: str = "api_error", message: str = "...",
                     times: int | None = None) -> None:
        if kind not in _BATCH_KINDS:
            raise ValueError(f"kind must be one of {_BATCH_KINDS}")
        with self._lock:
            self._batch_state()["rules"].append(_BatchRule(match, kind, err_type, message, times))

    @property
    def batch_items(self) -> list[BatchItem]:
        with self._lock:
            return list(self._batch_state()["items"])

    @property
    def batch_creates(self) -> list[Recorded]:
        """Recorded ``POST /v1/messages/batches`` calls."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.rstrip("/") == "/v1/messages/batches"]

    # -- serving ----------------------------------------------------------------------------------
    def _batch_route(self, h: _Handler, route: str, body: Any, record: Recorded, headers: dict[str, str],
                     request_id: str) -> bool:
        """Answer a batches request; False when the route is not one of them."""
        json_headers = {**headers, "Content-Type": "application/json"}
        if h.command == "POST" and route == "/v1/messages/batches":
            with self._lock:
                refusal = self._batch_state().get("refusal")
            if refusal is not None:
                error_ = {"type": refusal.err_type, "message": refusal.message}
                if refusal.details is not None:
                    error_["details"] = refusal.details
                record.outcome = f"error {refusal.status}"
                h.send_bytes(refusal.status, json.dumps({"type": "error", "error": error_, "request_id": request_id}
                                                        ).encode(), json_headers)
                return True
            reply = self._batch_create(body, request_id)
            record.outcome = "batch_create" if reply[0] == 200 else f"error {reply[0]}"
            h.send_bytes(reply[0], reply[1], json_headers)
            return True
        prefix = "/v1/messages/batches/"
        if h.command != "GET" or not route.startswith(prefix):
            return False
        batch_id, _, tail = route[len(prefix):].partition("/")
        with self._lock:
            batch = self._batch_state()["batches"].get(batch_id)
        if batch is None or tail not in ("", "results"):
            return False
        if tail == "":
            record.outcome = "batch_retrieve"
            h.send_bytes(200, json.dumps(self._batch_poll(batch)).encode(), json_headers)
            return True
        if batch.ended_at is None:
            record.outcome = "error 404"
            h.send_bytes(404, _error_body("not_found_error", "fake: the batch has not ended", request_id),
                         json_headers)
            return True
        record.outcome = "batch_results"
        lines = "".join(json.dumps(line) + "\n" for line in reversed(batch.results))
        h.send_bytes(200, lines.encode(), {**headers, "Content-Type": "application/binary"})
        return True

    def _batch_create(self, body: Any, request_id: str) -> tuple[int, bytes]:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return 400, _error_body("invalid_request_error", "requests: a non-empty list is required", request_id)
        seen: set[str] = set()
        for item in requests:
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", custom_id):
                return 400, _error_body("invalid_request_error", f"invalid custom_id: {custom_id!r}", request_id)
            if custom_id in seen:
                return 400, _error_body("invalid_request_error", f"duplicate custom_id: {custom_id}", request_id)
            if not isinstance(item.get("params"), dict):
                return 400, _error_body("invalid_request_error", f"{custom_id}: params must be an object", request_id)
            seen.add(custom_id)
        with self._lock:
            state = self._batch_state()
            state["n"] += 1
            batch_id = f"msgbatch_fake_{state['n']:04d}"
        results = [self._batch_answer(batch_id, item["custom_id"], item["params"]) for item in requests]
        batch = _Batch(batch_id, time.time(), results)
        with self._lock:
            self._batch_state()["batches"][batch_id] = batch
        return 200, json.dumps(self._batch_object(batch)).encode()

    def _batch_answer(self, batch_id: str, custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """One result line, scripted exactly as ``POST /v1/messages`` would answer ``params``."""
        user = first_user_text(params)
        with self._lock:
            state = self._batch_state()
            rule = next((r for r in state["rules"] if (r.match in user or r.match == custom_id)
                         and (r.times is None or r.used < r.times)), None)
            script = next((s for s in self._scripts if s.match in user), self._default)  # type: ignore[attr-defined]
            turn_index = sum(1 for m in params.get("messages") or []
                             if isinstance(m, dict) and m.get("role") == "assistant")
            turn: Turn | None = None
            if rule is not None:
                rule.used += 1
            else:
                turn = script.pick(turn_index)
                if isinstance(turn, Dynamic):
                    turn = turn.fn(params)
        if rule is not None:
            kind, result = rule.kind, self._batch_failure(rule.kind, rule.err_type, rule.message)
        elif isinstance(turn, (Error, StreamError, DetailedError, OkError, SseError)):
            kind, result = "errored", self._batch_failure("errored", turn.err_type, turn.message)
        elif isinstance(turn, OddMessage):
            message = self._message(params, turn.answer, script.usage)  # type: ignore[attr-defined]
            self._bill_batch(params, message, script.match, turn_index)
            message = {**message, **turn.set}
            for key in turn.drop:
                message.pop(key, None)
            kind, result = "succeeded", {"type": "succeeded", "message": message}
        elif isinstance(turn, (BreakStream, Reset, Malformed)):
            kind, result = "errored", self._batch_failure("errored", "api_error", "...")
        else:
            answer = Text("late") if isinstance(turn, Hang) else turn
            assert isinstance(answer, (Text, ToolUse, Blocks))
            message = self._message(params, answer, script.usage)  # type: ignore[attr-defined]
            self._bill_batch(params, message, script.match, turn_index)
            kind, result = "succeeded", {"type": "succeeded", "message": message}
        with self._lock:
            self._batch_state()["items"].append(BatchItem(batch_id, custom_id, params, script.match, turn_index, kind))
        return {"custom_id": custom_id, "result": result}

    def _bill_batch(self, params: dict[str, Any], message: dict[str, Any], script: str | None, turn: int) -> None:
        """A succeeded batch request is billed (errored, expired and canceled ones are not)."""
        self._bill(Recorded("POST", "/v1/messages/batches", {}, params, time.time(), script=script, turn=turn,  # type: ignore[attr-defined]
                            outcome="batch_succeeded"), params, message, batch=True)

    @staticmethod
    def _batch_failure(kind: BatchKind, err_type: str, message: str) -> dict[str, Any]:
        if kind != "errored":
            return {"type": kind}
        text_ = message if message != "..." else _default_message(err_type)
        return {"type": "errored", "error": {"type": "error", "error": {"type": err_type, "message": text_}}}

    def _batch_poll(self, batch: _Batch) -> dict[str, Any]:
        with self._lock:
            state = self._batch_state()
            batch.polls += 1
            if (batch.ended_at is None and batch.polls > state["polls"]
                    and time.time() - batch.created >= state["seconds"]):
                batch.ended_at = time.time()
        return self._batch_object(batch)

    def _batch_object(self, batch: _Batch) -> dict[str, Any]:
        def stamp(t: float | None) -> str | None:
            return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
        ended = batch.ended_at is not None
        counts = {"processing": 0 if ended else len(batch.results), "succeeded": 0, "errored": 0, "canceled": 0,
                  "expired": 0}
        if ended:
            for line in batch.results:
                counts[line["result"]["type"]] += 1
        return {"id": batch.id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "created_at": stamp(batch.created),
                "expires_at": stamp(batch.created + 86400), "ended_at": stamp(batch.ended_at), "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if ended else None}


class FakeAnthropic(_BatchesMixin, ScriptedFake[Turn, Recorded]):
    """``with FakeAnthropic() as fake:`` serves on ``fake.url`` until the block ends."""

    handler = _Handler
    thread_name = "fake-anthropic"

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        super().__init__(host, port)
        self._latency = 0.0
        self._cache: dict[str, float] = {}  # prompt-cache key -> time.time() its writing response began
        self._rate: _RateWindow | None = None
        self._ids = {"msg": 0, "toolu": 0, "req": 0}
        self._billed: list[Billed] = []

    # -- configuration --------------------------------------------------------------------------
    def set_latency(self, seconds: float) -> None:
        self._latency = float(seconds)

    def set_rate_limit(self, limit: int | None, window_s: float = 60.0) -> None:
        """At most ``limit`` message requests in any sliding ``window_s`` (60 s: requests per minute; a
        shorter window with a proportional limit keeps tests fast). ``None`` removes the limit."""
        with self._lock:
            self._rate = _RateWindow(limit, window_s) if limit is not None else None

    @property
    def over_limit(self) -> int:
        """How many message requests the current rate limit refused with 429 (0 without one)."""
        with self._lock:
            return self._rate.refused if self._rate is not None else 0

    @property
    def billed(self) -> list[Billed]:
        """Every request the fake billed so far (Billing in the module docstring), in the order it billed them."""
        with self._lock:
            return list(self._billed)

    def billed_for(self, match: str) -> list[Billed]:
        """The billed requests of the script whose `match` this is."""
        return [b for b in self.billed if b.script == match]

    @property
    def message_requests(self) -> list[Recorded]:
        """Recorded ``POST /v1/messages`` calls (not count_tokens, not 404s)."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.rstrip("/") == "/v1/messages"]

    # -- internals ----------------------------------------------------------------------------
    def _next_id(self, kind: str) -> int:
        with self._lock:
            self._ids[kind] += 1
            return self._ids[kind]

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the fake is closing; False when interrupted."""
        return not self._stop.wait(seconds) if seconds > 0 else True

    def _handle_inner(self, h: _Handler) -> None:
        parts = urlsplit(h.path)
        path = parts.path
        raw = h.read_body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = Recorded(h.command, path, {k.lower(): v for k, v in h.headers.items()}, body, time.time(),
                          query=parts.query)
        request_id = f"req_fake_{self._next_id('req')}"
        headers = {"request-id": request_id, "anthropic-ratelimit-requests-remaining": "999",
                   "anthropic-ratelimit-requests-limit": "1000"}

        route = path.rstrip("/")
        if h.command == "POST" and route == "/v1/messages" and isinstance(body, dict):
            with self._lock:
                retry_after = self._rate.admit(time.monotonic(), headers) if self._rate is not None else None
                if retry_after is not None:
                    record.outcome = "error 429 rate-limit"
                    self.requests.append(record)
            if retry_after is not None:
                return h.send_bytes(429, _error_body("rate_limit_error", "Rate limited (fake requests per window)",
                                                     request_id),
                                    {**headers, "Content-Type": "application/json", "retry-after": str(retry_after)})
            with self._lock:
                user = first_user_text(body)
                # Only the default script has no match, and it is not in _scripts.
                script = next((s for s in self._scripts if s.match is not None and s.match in user), self._default)
                turn_index = sum(1 for m in body.get("messages") or []
                                 if isinstance(m, dict) and m.get("role") == "assistant")
                turn = script.pick(turn_index)
                if isinstance(turn, Dynamic):
                    turn = turn.fn(body)
                record.script, record.turn = script.match, turn_index
                record.outcome = _outcome(turn)
                self.requests.append(record)
            if not self._sleep(self._latency):
                return h.cut()
            return self._answer(h, body, turn, script.usage, headers, request_id, record)

        with self._lock:
            self.requests.append(record)
        if not self._sleep(self._latency):
            return h.cut()
        if route.startswith("/v1/messages/batches") and self._batch_route(h, route, body, record, headers, request_id):
            return None
        if h.command == "POST" and route == "/v1/messages/count_tokens" and isinstance(body, dict):
            record.outcome = "count_tokens"
            return h.send_bytes(200, json.dumps({"input_tokens": input_tokens_for(body)}).encode(),
                                {**headers, "Content-Type": "application/json"})
        if h.command == "POST" and route == "/v1/messages":
            record.outcome = "error 400"
            return h.send_bytes(400, _error_body("invalid_request_error", "body is not a JSON object", request_id),
                                {**headers, "Content-Type": "application/json"})
        record.outcome = "error 404"
        return h.send_bytes(404, _error_body("not_found_error", f"fake: no route for {h.command} {path}", request_id),
                            {**headers, "Content-Type": "application/json"})

    def _bill(self, record: Recorded, body: dict[str, Any], msg: dict[str, Any], batch: bool = False) -> None:
        """Bill `msg` (the reply the fake began, before any field of it was replaced) for this request."""
        used = msg["usage"]
        billed = Billed(record.script, record.turn, str(body.get("model") or "claude-fake"),
                        Usage(used["input_tokens"], used["output_tokens"], used["cache_creation_input_tokens"],
                              used["cache_read_input_tokens"]), record.outcome, batch)
        with self._lock:
            self._billed.append(billed)

    def _answer(self, h: _Handler, body: dict[str, Any], turn: Turn, usage: Usage | None,
                headers: dict[str, str], request_id: str, record: Recorded) -> None:
        stream = bool(body.get("stream"))
        if isinstance(turn, (DetailedError, OkError, SseError, OddMessage)):
            return self._answer_odd(h, body, turn, usage, headers, request_id, record)
        if isinstance(turn, Error):
            extra = {**headers, "Content-Type": "application/json"}
            if turn.retry_after is not None:
                extra["retry-after"] = str(turn.retry_after)
            message = turn.message if turn.message != "..." else _default_message(turn.err_type)
            return h.send_bytes(turn.status, _error_body(turn.err_type, message, request_id), extra)
        if isinstance(turn, (BreakStream, Reset)):
            cut = self._message(body, CUT_REPLY, usage)
            self._bill(record, body, cut)
            if stream:
                h.start_chunked(headers)
                h.event("message_start", {"type": "message_start", "message": _start(cut)})
                h.event("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "text", "text": ""}})
                h.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": "Partial ans"}})
            return h.cut() if isinstance(turn, BreakStream) else h.reset()
        if isinstance(turn, StreamError):
            message = turn.message if turn.message != "..." else _default_message(turn.err_type)
            if not stream:
                return h.send_bytes(_STATUS_OF.get(turn.err_type, 500), _error_body(turn.err_type, message, request_id),
                                    {**headers, "Content-Type": "application/json"})
            begun = self._message(body, Text(""), usage)
            self._bill(record, body, begun)
            h.start_chunked(headers)
            h.event("message_start", {"type": "message_start", "message": _start(begun)})
            h.event("error", {"type": "error", "error": {"type": turn.err_type, "message": message}})
            h.end_chunked()
            return None
        if isinstance(turn, Malformed):
            self._bill(record, body, self._message(body, Text(""), usage))
            if stream:
                h.start_chunked(headers)
                h.chunk(b"event: message_start\ndata: {this is not json\n\n")
                h.end_chunked()
                return None
            return h.send_bytes(200, b"{this is not json", {**headers, "Content-Type": "application/json"})
        if isinstance(turn, Hang):
            # Billed from its arrival: the API processes a request whether or not the client waits for the reply.
            late = self._message(body, Text("late"), usage)
            self._bill(record, body, late)
            if not self._sleep(turn.seconds):
                return h.cut()
            return self._send(h, late, headers, stream)
        assert isinstance(turn, (Text, ToolUse, Blocks))
        msg = self._message(body, turn, usage)
        self._bill(record, body, msg)
        return self._send(h, msg, headers, stream)

    def _send(self, h: _Handler, msg: dict[str, Any], headers: dict[str, str], stream: bool) -> None:
        if not stream:
            return h.send_bytes(200, json.dumps(msg).encode(), {**headers, "Content-Type": "application/json"})
        self._stream(h, msg, headers)
        return None

    def _answer_odd(self, h: _Handler, body: dict[str, Any], turn: DetailedError | OkError | SseError | OddMessage,
                    usage: Usage | None, headers: dict[str, str], request_id: str, record: Recorded) -> None:
        """The replies no well-behaved API sends on success (see the classes)."""
        json_headers = {**headers, "Content-Type": "application/json"}
        if isinstance(turn, DetailedError):
            if turn.retry_after is not None:
                json_headers["retry-after"] = str(turn.retry_after)
            error_: dict[str, Any] = {"type": turn.err_type, "message": turn.message}
            if turn.details is not None:
                error_["details"] = turn.details
            payload = {"type": "error", "error": error_, "request_id": request_id}
            return h.send_bytes(turn.status, json.dumps(payload).encode(), json_headers)
        if isinstance(turn, OkError):
            message = turn.message if turn.message != "..." else _default_message(turn.err_type)
            return h.send_bytes(200, _error_body(turn.err_type, message, request_id), json_headers)
        if isinstance(turn, SseError):
            message = turn.message if turn.message != "..." else _default_message(turn.err_type)
            begun = self._message(body, Text(""), usage)
            self._bill(record, body, begun)
            h.start_chunked(headers)
            h.event("message_start", {"type": "message_start", "message": _start(begun)})
            h.event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}})
            h.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": "Partial ans"}})
            h.event("error", {"type": "error", "error": {"type": turn.err_type, "message": message}})
            h.end_chunked()
            return None
        msg = self._message(body, turn.answer, usage)
        self._bill(record, body, msg)  # what the reply cost, whatever fields of it are then replaced or removed
        msg.update(turn.set)
        for key in turn.drop:
            msg.pop(key, None)
        if not body.get("stream"):
            return h.send_bytes(200, json.dumps(msg).encode(), json_headers)
        if "content" not in turn.set:
            return self._stream_odd(h, msg, headers, streamed_content=True)
        return self._stream_odd(h, msg, headers, streamed_content=False)

    @staticmethod
    def _stream_odd(h: _Handler, msg: dict[str, Any], headers: dict[str, str], streamed_content: bool) -> None:
        """An OddMessage as SSE: the changed fields where the API puts them (message_start, message_delta)."""
        h.start_chunked(headers)
        start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None}
        h.event("message_start", {"type": "message_start", "message": start})
        content = msg.get("content")
        for index, block in enumerate(content if isinstance(content, list) else []):
            if streamed_content and isinstance(block, dict) and block.get("type") == "text":
                h.event("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {"type": "text", "text": ""}})
                h.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": block["text"]}})
            else:  # a replaced block (or a tool_use) is sent whole in its content_block_start
                h.event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            h.event("content_block_stop", {"type": "content_block_stop", "index": index})
        delta: dict[str, Any] = {"stop_sequence": None}
        if "stop_reason" in msg:
            delta["stop_reason"] = msg["stop_reason"]
        h.event("message_delta", {"type": "message_delta", "delta": delta, "usage": msg.get("usage")})
        h.event("message_stop", {"type": "message_stop"})
        h.end_chunked()

    @property
    def cache_entries(self) -> int:
        with self._lock:
            return len(self._cache)

    def _usage_for(self, body: dict[str, Any], turn: Text | ToolUse | Blocks) -> Usage:
        """The deterministic usage, split into cache read / write / rest (module docstring)."""
        total, output = input_tokens_for(body), output_tokens_for(turn)
        minimum = cache_min_tokens_for(str(body.get("model") or ""))
        units = cache_units(body)
        marks = [i for i, unit in enumerate(units) if unit.marked and unit.tokens >= minimum]
        if not marks:
            return Usage(total, output)
        now = time.time()
        arrived = now - self._latency  # this response begins `latency` after the request arrived
        window = {v for i in marks for v in range(max(0, i - LOOKBACK_BLOCKS + 1), i + 1)}
        with self._lock:
            read = max((min(units[v].tokens, total) for v in window
                        if self._cache.get(units[v].key, math.inf) <= arrived), default=0)
            for i in marks:
                self._cache.setdefault(units[i].key, now)
        created = max(0, max(min(units[i].tokens, total) for i in marks) - read)
        return Usage(total - created - read, output, created, read)

    def _message(self, body: dict[str, Any], turn: Text | ToolUse | Blocks, usage: Usage | None) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for p in _parts(turn):
            if isinstance(p, Text):
                content.append({"type": "text", "text": p.text})
            else:
                content.append({"type": "tool_use", "id": p.id or f"toolu_fake_{self._next_id('toolu'):06d}",
                                "name": p.name, "input": p.input})
        if usage is None:
            usage = self._usage_for(body, turn)
        return {
            "id": f"msg_fake_{self._next_id('msg'):06d}", "type": "message", "role": "assistant",
            "model": body.get("model") or "claude-fake", "content": content,
            "stop_reason": "tool_use" if any(c["type"] == "tool_use" for c in content) else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                      "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                      "cache_read_input_tokens": usage.cache_read_input_tokens},
        }

    @staticmethod
    def _stream(h: _Handler, msg: dict[str, Any], headers: dict[str, str]) -> None:
        h.start_chunked(headers)
        h.event("message_start", {"type": "message_start", "message": _start(msg)})
        h.event("ping", {"type": "ping"})
        for index, block in enumerate(msg["content"]):
            if block["type"] == "text":
                h.event("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {"type": "text", "text": ""}})
                for piece in _chunks(block["text"], 16):
                    h.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "text_delta", "text": piece}})
            else:
                h.event("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": {"type": "tool_use", "id": block["id"],
                                                                  "name": block["name"], "input": {}}})
                h.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "input_json_delta", "partial_json": ""}})
                for piece in _chunks(json.dumps(block["input"]), 12):
                    h.event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "input_json_delta", "partial_json": piece}})
            h.event("content_block_stop", {"type": "content_block_stop", "index": index})
        h.event("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                  "usage": dict(msg["usage"])})
        h.event("message_stop", {"type": "message_stop"})
        h.end_chunked()

    # -- what runner.testing.scripted.ScriptedFake asks of a fake ---------------------------------------------------
    def new_script(self, match: str | None, turns: tuple[Turn, ...], usage: Usage | None) -> _Script:
        return _Script(match, turns, usage)

    def new_text(self, text: str) -> Turn:
        return Text(text)

    def first_user_text(self, body: Any) -> str:
        return first_user_text(body)


def _start(msg: dict[str, Any]) -> dict[str, Any]:
    """The message as sent in ``message_start``: no content, no stop_reason, output_tokens 1."""
    return {**msg, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**msg["usage"], "output_tokens": 1}}


def _outcome(turn: Turn) -> str:
    if isinstance(turn, Error):
        return f"error {turn.status}"
    if isinstance(turn, BreakStream):
        return "break_stream"
    if isinstance(turn, Reset):
        return "reset"
    if isinstance(turn, Hang):
        return "hang"
    if isinstance(turn, Malformed):
        return "malformed"
    if isinstance(turn, StreamError):
        return "stream_error"
    if isinstance(turn, DetailedError):
        return f"error {turn.status}"
    if isinstance(turn, OkError):
        return "ok_error"
    if isinstance(turn, SseError):
        return "sse_error"
    if isinstance(turn, OddMessage):
        return "odd_message"
    if isinstance(turn, (Text, Dynamic)):  # a Dynamic turn's reply is only known once it is called
        return "text"
    return "tool_use" if any(isinstance(p, ToolUse) for p in _parts(turn)) else "text"


def _default_message(err_type: str) -> str:
    return {"overloaded_error": "Overloaded", "rate_limit_error": "Rate limited (fake)",
            "api_error": "Internal server error (fake)", "invalid_request_error": "Invalid request (fake)",
            "authentication_error": "invalid x-api-key (fake)", "permission_error": "Permission denied (fake)",
            "not_found_error": "Not found (fake)", "request_too_large": "Request too large (fake)",
            }.get(err_type, f"fake {err_type}")
