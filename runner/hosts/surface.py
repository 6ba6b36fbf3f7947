"""The surface audit: what the model is really shown, measured before anything is spent.

The host is run once against a capture endpoint on 127.0.0.1 that records the first Messages
API request and ends the session at once (no model is called, no key is needed). From the
recorded request we read the skill listing — which skills kept their description and which were
listed by name only — for the run's own settings (listing budget, model, library) — and how the host
marks the request for prompt caching (`cache_shape`), which the plan's expected cost uses.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from pydantic import BaseModel, Field

from runner.core.host_traits import RequestModel

LISTING_HEADER = "The following skills are available for use with the Skill tool:"
# How a host marks its requests for prompt caching (Surface.cache_layout; the plan's cost estimate reads it).
CacheLayout = Literal["conversation", "prefix", "none"]


class Surface(BaseModel):
    host: str
    listing_budget_chars: int | None = Field(description="SLASH_COMMAND_TOOL_CHAR_BUDGET given; None = host default.")
    with_description: list[str] = []
    name_only: list[str] = []
    cut: list[str] = Field(default=[], description="Of with_description, the skills whose description the host "
                                                   "shortened (its listing budget): the model saw part of it.")
    not_from_library: list[str] = Field(default=[], description="Listed skills that are not the library's (the "
                                                                 "host's own bundled skills).")
    missing: list[str] = Field(default=[], description="Model-invocable library skills absent from the listing.")
    listing_chars: int = 0
    request_chars: int = Field(default=0, description="Size of the captured first request (system, tools, messages).")
    tools: list[str] = []
    cached_prefix_chars: int = Field(default=0, description="The part of the first request before the case prompt "
                                                            "that a cache breakpoint covers (tools, system, "
                                                            "messages up to the last such breakpoint): what every "
                                                            "session of the run can read from a cache another wrote.")
    cache_layout: CacheLayout = Field(
        default="none", description="conversation: the last block of every turn is a breakpoint too, so each turn "
                                    "reads the one before it (Claude Code); prefix: only the shared prefix is "
                                    "marked (the api host); none: nothing is marked.")
    error: str | None = Field(default=None, description="Why the audit could not be made; then nothing above is "
                                                         "measured.")


# A skill whose frontmatter `name` differs from its folder is listed as `folder (name)` (CLI 2.1.332); the
# folder is the name that identifies it.
_DISPLAY_NAME = re.compile(r"^(\S+) \([^()]*\)$")


def _listed_name(entry: str) -> str:
    match = _DISPLAY_NAME.match(entry.strip())
    return match.group(1) if match else entry.strip()


def parse_listing(text: str) -> tuple[list[str], list[str]]:
    """(names with a description, names alone) from the listing text the host sent."""
    with_description: list[str] = []
    name_only: list[str] = []
    started = False
    for line in text.splitlines():
        if LISTING_HEADER in line:
            started = True
            continue
        if not started:
            continue
        if not line.startswith("- "):
            # After the entries, a blank line or the closing tag ends the listing; any other line continues
            # the previous entry's description (a host skill's description may span lines).
            if (with_description or name_only) and (not line.strip() or line.lstrip().startswith("</")):
                break
            continue
        entry = line[2:]
        name, sep, description = entry.partition(": ")
        if sep and description.strip():
            with_description.append(_listed_name(name))
        else:
            name_only.append(_listed_name(entry.strip().rstrip(":")))
    return with_description, name_only


# ---- the capture endpoint ---------------------------------------------------------------------

_END_SESSION_EVENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_capture", "type": "message", "role": "assistant", "model": "capture", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                       "usage": {"output_tokens": 0}}),
    ("message_stop", {"type": "message_stop"}),
)


class CaptureHandler(BaseHTTPRequestHandler):
    """What every capture endpoint's handler shares (CaptureEndpoint): quiet, a JSON body read, a reply sent whole."""

    server: "CaptureEndpoint"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: nothing to log
        return

    def json_body(self) -> Any:
        """The request's JSON body (None when it is not JSON)."""
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    def send_whole(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _CaptureHandler(CaptureHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.json_body()
        if isinstance(body, dict) and self.path.split("?")[0].endswith("/v1/messages"):
            self.server.captured.append(body)
            self.server.captured_headers.append({k.lower(): v for k, v in self.headers.items()})
        self.end_session(bool(isinstance(body, dict) and body.get("stream")))

    def end_session(self, stream: bool) -> None:
        if stream:
            payload = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in _END_SESSION_EVENTS)
            content_type = "text/event-stream"
        else:
            message = dict(_END_SESSION_EVENTS[0][1]["message"])
            message.update(content=[{"type": "text", "text": ""}], stop_reason="end_turn")
            payload, content_type = json.dumps(message), "application/json"
        self.send_whole(200, payload.encode(), content_type)


class CaptureEndpoint(ThreadingHTTPServer):
    """A capture endpoint on 127.0.0.1 in one API's shape: `handler` records each model request's body in
    `captured` and answers so that the session ends (the hosts' surface audits: this module's Messages API one,
    runner.hosts.gemini's and runner.hosts.codex's). `base_path`: what the client's base URL ends with."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], base_path: str = "") -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.captured: list[dict[str, Any]] = []
        self.captured_headers: list[dict[str, str]] = []  # of each captured request, lower-case names
        self.base_path = base_path
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{self.base_path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class CaptureServer(CaptureEndpoint):
    """Records Messages API requests and answers each with an empty end_turn."""

    def __init__(self) -> None:
        super().__init__(_CaptureHandler)


def _texts(value: Any) -> list[str]:
    """Every text inside a request's system or messages, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return [value["text"]]
        return _texts(value.get("content"))
    return []


# Claude Code's first system block, which changes with the prompt; the first-party API consumes it, so it is no
# part of a cached prefix (an assumption; BENCHMARKS.md).
BILLING_HEADER = "x-anthropic-billing-header:"


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("cache_control"), dict)


def cache_shape(body: dict[str, Any]) -> tuple[int, CacheLayout]:
    """(cached_prefix_chars, cache_layout) of a first request whose LAST block is the case prompt: the characters
    (JSON, block by block) up to the last breakpoint before that block, and how the request is marked."""
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        blocks += [b for b in system if not (isinstance(b, dict) and str(b.get("text", "")).startswith(BILLING_HEADER))]
    elif system:
        blocks.append(system)
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        blocks += content if isinstance(content, list) else [content]
    if not blocks:
        return 0, "none"
    chars, prefix = 0, 0
    for block in blocks[:-1]:
        chars += len(json.dumps(block))
        if _marked(block):
            prefix = chars
    conversation = _marked(blocks[-1]) or isinstance(body.get("cache_control"), dict)
    return prefix, "conversation" if conversation else "prefix" if prefix else "none"


class HostRequest(BaseModel):
    """A host's first request apart from the skill listing and the case prompt, measured once with the surface
    audit, so that `plan --no-surface` can estimate the whole first request from the census's listing model
    (runner.hosts.listing) instead of counting the listing alone. Sizes are characters as `request_chars`
    and `cached_prefix_chars` count them (JSON, block by block); only sizes are stored, never the host's text."""

    host: str
    cli_version: str
    measured_on: str
    system_chars: int = Field(description="The request's `system`, as JSON (the billing header included).")
    cached_system_chars: int = Field(description="The system blocks a cache breakpoint covers (no billing header).")
    tool_chars: dict[str, int] = Field(description="Each allowed tool's definition, as JSON.")
    context_chars: int = Field(description="The first message without the listing's text, one character per "
                                           "listing entry (its newline, escaped in JSON) and the prompt: the "
                                           "environment, model, date and git-status reminders and the JSON "
                                           "around them.")
    cache_layout: CacheLayout

    def tools(self, allowed: list[str]) -> tuple[int, list[str]]:
        """(characters of the `tools` list, the allowed tools not measured: each counted at the measured mean)."""
        mean = sum(self.tool_chars.values()) // max(1, len(self.tool_chars))
        unmeasured = [name for name in allowed if name not in self.tool_chars]
        blocks = [self.tool_chars.get(name, mean) for name in allowed]
        return sum(blocks) + 2 * max(0, len(blocks) - 1) + 2, unmeasured

    def request_chars(self, allowed: list[str], listing_chars: int, listing_entries: int) -> int:
        """The first request without its case prompt, as `Surface.request_chars` counts it."""
        return self.system_chars + self.tools(allowed)[0] + self.context_chars + listing_chars + listing_entries

    def cached_prefix_chars(self, allowed: list[str]) -> int:
        """Tools and system: what every session shares (`cache_shape`)."""
        mean = sum(self.tool_chars.values()) // max(1, len(self.tool_chars))
        return self.cached_system_chars + sum(self.tool_chars.get(name, mean) for name in allowed)


# Measured with the surface audit of examples/library (allowed tools Skill, Read, Glob, Grep; one session path):
# request 35,264 characters = system 15,412 + tools 9,561 + messages 10,291, of which the listing's text is 8,053
# characters for 17 entries and the audit's prompt 59; cached prefix 24,858. tests/test_newcomer_plan.py plans the
# example and Project Aegis with and without the audit and fails when the two drift apart (a new CLI version).
# Keyed by the request model of the hosts that send this request (HostTraits.request_model; first-turn sends the CLI's
# own first request, so it reads the same entry).
KNOWN_REQUESTS: dict[RequestModel, HostRequest] = {
    "claude-code-cli": HostRequest(host="claude-code-cli", cli_version="2.1.332", measured_on="2026-12-02",
                                   system_chars=15_412, cached_system_chars=15_305,
                                   tool_chars={"Glob": 1_004, "Grep": 3_735, "Read": 2_968, "Skill": 1_846},
                                   context_chars=2_162, cache_layout="conversation"),
}


def surface_from_request(body: dict[str, Any], host: str, budget: int | None, library_names: set[str],
                         invocable: set[str]) -> Surface:
    listing = next((t for t in _texts(body.get("system")) + _texts(body.get("messages")) if LISTING_HEADER in t), None)
    tools = [t.get("name", "") for t in body.get("tools", []) if isinstance(t, dict)]
    request_chars = sum(len(json.dumps(body.get(k, ""))) for k in ("system", "tools", "messages"))
    prefix_chars, layout = cache_shape(body)
    if listing is None:
        return Surface(host=host, listing_budget_chars=budget, request_chars=request_chars, tools=tools,
                       cached_prefix_chars=prefix_chars, cache_layout=layout, missing=sorted(invocable),
                       error="the captured request holds no skill listing (is Skill among the allowed tools?)")
    with_description, name_only = parse_listing(listing)
    listed = set(with_description) | set(name_only)
    return Surface(
        host=host, listing_budget_chars=budget,
        with_description=[n for n in with_description if n in library_names],
        name_only=[n for n in name_only if n in library_names],
        not_from_library=sorted(listed - library_names), missing=sorted(invocable - listed),
        listing_chars=len(listing), request_chars=request_chars, tools=tools, cached_prefix_chars=prefix_chars,
        cache_layout=layout)
