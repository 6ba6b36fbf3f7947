"""The first-turn host: Claude Code's own first request, sent directly to the Messages API.

The real CLI's first request is captured once per run (`first-turn-capture.json`); an eligible attempt sends that
request with its own prompt. A reply that decides the outcome ends the attempt; anything else hands it to a real
Claude Code session from scratch. Faults are error kinds, never verdicts.

Design notes: docs/design/first-turn-and-early-end.md.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import posixpath
import re
import secrets
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anthropic
import httpx2
from pydantic import BaseModel, Field

from runner.core.errors import UsageError
from runner.core.host_traits import traits
from runner.core.observation import Activation, Decided, FirstTurn, Observation, SessionSpec, ToolCall, Usage
from runner.corpus.classify import SUBAGENT_SUFFIX
from runner.corpus.decide import first_turn_ineligible
from runner.corpus.library import Library
from runner.hosts import billing
from runner.hosts.activation import decided, recognise
from runner.hosts.api import Clients, SessionError, classify_error, fill_cost, loop_client, reply_usage
from runner.hosts.base import utf8_safe
from runner.hosts.claude_code import ClaudeCodeHost, cli_version
from runner.hosts.claude_code import make as make_claude_code
from runner.hosts.ratelimit import SpendLimitReached
from runner.hosts.sessionpath import SessionPath
from runner.hosts.surface import CaptureServer, Surface, surface_from_request
from runner.hosts.wall import SessionWall

if TYPE_CHECKING:  # the factory's inputs (runner.hosts.registry.make_host)
    from runner.hosts.registry import HostInputs

HOST_NAME = "first-turn"
# Claude Code's tools and skills folder, as the registry records them for this host (HostTraits.activation).
ACTIVATION = traits(HOST_NAME).activation
CAPTURE_FILE = "first-turn-capture.json"
# The capture's prompt: found again, as one whole text block, where a case's prompt goes.
SENTINEL = "skill-evals first-turn capture: a case's prompt goes in this block."
CAPTURE_TIMEOUT_S = 120.0
TOOL_INPUT_CHARS = 300

MAX_BREAKPOINTS = 4  # the prompt-caching docs: up to 4 cache_control breakpoints per request
WORKING_DIRECTORY = re.compile(r"Primary working directory: ([^\n]+)")

SESSION_HEADER = "x-claude-code-session-id"
BETA_QUERY = {"beta": "true"}
# Headers of the capture not sent as captured: the key (the run's own is sent), the client's identity and the
# transport's (the Python SDK and httpx set their own), and the session id (a fresh one per attempt).
NOT_COPIED = frozenset({"x-api-key", "authorization", "user-agent", "host", "content-length", "connection",
                        "accept-encoding", "transfer-encoding", "content-type", "accept", SESSION_HEADER})
CLIENT_PREFIX = "x-stainless-"



class FirstTurnCaptureError(UsageError):
    """The run folder's first-turn capture cannot serve this process (another CLI version, an unreadable file)."""


class CaptureFailed(Exception):
    """The CLI sent no usable first request to the capture endpoint."""


class Capture(BaseModel):
    """Claude Code's first request for a sentinel prompt, for one model, output bound and session budget."""

    cli_version: str
    hash: str = Field(description="sha256 (16 hex) of the body as canonical JSON, the prompt slot and the session "
                                  "ids blanked: one value for every attempt built from it.")
    model: str
    max_output_tokens: int
    max_usd: float | None = Field(description="The session budget the capture was made with: the CLI shows it to "
                                              "the model in a reminder.")
    body: dict[str, Any]
    headers: dict[str, str] = Field(description="The CLI's headers, x-api-key left out.")

    def key(self) -> tuple[str, int, float | None]:
        return self.model, self.max_output_tokens, self.max_usd


def spec_key(spec: SessionSpec) -> tuple[str, int, float | None]:
    """What of a session shapes the CLI's first request besides the prompt (measured: the model, max_tokens, and
    the budget reminder; max_turns, the timeout and the PostToolUse hooks do not)."""
    return spec.model, spec.max_output_tokens, spec.max_usd


# ---- the request ------------------------------------------------------------------------------


def prompt_slot(body: dict[str, Any]) -> tuple[int, int]:
    """(message, block) of the one text block that is the sentinel; CaptureFailed when there is not exactly one."""
    slots = [(i, j) for i, message in enumerate(body.get("messages") or []) if isinstance(message, dict)
             for j, block in enumerate(_blocks(message))
             if isinstance(block, dict) and block.get("type") == "text" and block.get("text") == SENTINEL]
    if len(slots) != 1:
        raise CaptureFailed(f"the captured request holds {len(slots)} text blocks equal to the sentinel prompt, not "
                            "one: the CLI changed the prompt, so a case's prompt has no place to go")
    return slots[0]


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _blanked(body: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(body)
    i, j = prompt_slot(out)
    out["messages"][i]["content"][j]["text"] = ""
    if isinstance(out.get("metadata"), dict) and "user_id" in out["metadata"]:
        out["metadata"]["user_id"] = ""
    return out


def capture_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(_blanked(body), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def user_id(raw: str, session_id: str, device_id: str) -> str:
    """The CLI's metadata.user_id (compact JSON: device_id, account_uuid, session_id) with this session's ids."""
    fields = json.loads(raw)
    if not isinstance(fields, dict):
        raise ValueError("not a JSON object")
    for name, value in (("device_id", device_id), ("session_id", session_id)):
        if name in fields:
            fields[name] = value
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def breakpoints(body: dict[str, Any]) -> int:
    """The request's cache_control markers (the API allows at most MAX_BREAKPOINTS)."""
    system = body.get("system")
    blocks: list[Any] = [*(body.get("tools") or []), *(system if isinstance(system, list) else [])]
    blocks += [block for message in body.get("messages") or [] if isinstance(message, dict)
               for block in _blocks(message)]
    return sum(1 for block in blocks if isinstance(block, dict) and isinstance(block.get("cache_control"), dict))


def mark_before_prompt(body: dict[str, Any], i: int, j: int) -> None:
    """A cache breakpoint on the block before the prompt, with the marker the CLI puts on the prompt's own block.
    The CLI's breakpoints cover the tools and system only: the first message's blocks before the prompt (the
    environment, the skill listing, the date) would be written again by every attempt. The marker is no text the
    model reads; it is the one marker this host adds, and tests/test_first_turn.py lists it."""
    content = body["messages"][i]["content"]
    marker = content[j].get("cache_control") if isinstance(content[j], dict) else None
    if j == 0 or not isinstance(content[j - 1], dict) or "cache_control" in content[j - 1]:
        return
    if breakpoints(body) < MAX_BREAKPOINTS:
        content[j - 1]["cache_control"] = dict(marker) if isinstance(marker, dict) else {"type": "ephemeral"}



def stream_broke_off(exc: BaseException) -> SessionError | None:
    """A transport error after the API's answer began: its event stream broke off, which the SDK does not retry.
    Earlier releases of the SDK raised httpx2's error itself; newer ones (2.17.0) raise APIConnectionError from it."""
    if not isinstance(exc, (httpx2.TransportError, anthropic.APIConnectionError)):
        return None
    cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) and exc.__cause__ is not None else exc
    return SessionError("api-error", f"the API's event stream broke off: {type(cause).__name__}: {cause}")

def request_body(capture: Capture, prompt: str, session_id: str, device_id: str) -> dict[str, Any]:
    body = copy.deepcopy(capture.body)
    i, j = prompt_slot(body)
    body["messages"][i]["content"][j]["text"] = prompt
    mark_before_prompt(body, i, j)
    body["model"] = capture.model
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        metadata["user_id"] = user_id(metadata["user_id"], session_id, device_id)
    return body


def request_headers(capture: Capture, session_id: str) -> dict[str, str]:
    sent = {name: value for name, value in capture.headers.items()
            if name not in NOT_COPIED and not name.startswith(CLIENT_PREFIX)}
    if SESSION_HEADER in capture.headers:
        sent[SESSION_HEADER] = session_id
    return sent


def ineligible(spec: SessionSpec) -> str | None:
    """Why the attempt runs on Claude Code from the start, or None (runner.corpus.decide.first_turn_ineligible, which
    the plan also shows)."""
    return first_turn_ineligible(spec.decide_when, spec.exclude_skills, spec.case_files, spec.prompt)


# ---- capturing ---------------------------------------------------------------------------------


async def capture(real: ClaudeCodeHost, model: str, max_output_tokens: int, max_usd: float | None) -> Capture:
    """Run the real CLI once with the sentinel prompt and keep its first request."""
    spec = SessionSpec(attempt_id="first-turn-capture", uid="first-turn-capture", prompt=SENTINEL, model=model,
                       max_turns=1, timeout_s=CAPTURE_TIMEOUT_S, max_output_tokens=max_output_tokens, max_usd=max_usd)
    server = CaptureServer()
    with server:
        obs = await real.capture(server.url, spec)
    if not server.captured:
        raise CaptureFailed(f"the CLI sent no request to the capture endpoint ({obs.error_kind}: {obs.error_message})")
    body = server.captured[0]
    prompt_slot(body)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        try:
            user_id(metadata["user_id"], "", "")
        except ValueError as exc:
            raise CaptureFailed(f"the captured metadata.user_id is not the JSON object it was: {exc}") from None
    headers = {k: v for k, v in server.captured_headers[0].items() if k != "x-api-key"}
    return Capture(cli_version=cli_version(real.cli), hash=capture_hash(body), model=model,
                   max_output_tokens=max_output_tokens, max_usd=max_usd,
                   body=body, headers=headers)


def load_capture(run_folder: Path, installed: str) -> Capture | None:
    """The run folder's capture (a resumed run sends the same first request), or None; FirstTurnCaptureError when
    it was made with another CLI version than the installed one, or cannot be read."""
    path = run_folder / CAPTURE_FILE
    if not path.exists():
        return None
    try:
        saved = Capture.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FirstTurnCaptureError(f"{path}: not a first-turn capture skill-evals can read "
                                    f"({str(exc).splitlines()[0]}); remove it to capture Claude Code's first request "
                                    "again, or start a new run") from None
    if saved.cli_version != installed:
        raise FirstTurnCaptureError(
            f"{path}: this run's first-turn capture was made with Claude Code {saved.cli_version}, but Claude Code "
            f"{installed} is installed, whose first request may differ; resume with Claude Code {saved.cli_version} "
            f"(the claude-agent-sdk that bundles it, or [run] cli_path), or start a new run to capture {installed}'s")
    return saved


def _write(path: Path, capture_: Capture) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(capture_.model_dump_json(indent=1), encoding="utf-8")
    os.replace(partial, path)


# ---- the first reply ---------------------------------------------------------------------------


@dataclass
class _Reply:
    """A streamed reply, put together from its events as the SDK's own accumulator does."""

    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    content: list[dict[str, Any]] = field(default_factory=list)
    partial_json: dict[int, str] = field(default_factory=dict)
    stopped: bool = False
    problem: str | None = None

    def on_event(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.on_start(getattr(event, "message", None))
        elif kind == "content_block_start":
            block = getattr(event, "content_block", None)
            dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True) if block is not None else {}
            if dumped.get("type") == "tool_use":
                dumped["input"] = {}
                self.partial_json[len(self.content)] = ""
            self.content.append(dumped)
        elif kind == "content_block_delta":
            self.on_delta(int(getattr(event, "index", -1)), getattr(event, "delta", None))
        elif kind == "content_block_stop":
            self.on_block_stop(int(getattr(event, "index", -1)))
        elif kind == "message_delta":
            self.stop_reason = getattr(getattr(event, "delta", None), "stop_reason", None)
            self.on_delta_usage(getattr(event, "usage", None))
        elif kind == "message_stop":
            self.stopped = True

    def on_start(self, message: Any) -> None:
        self.id, self.model = getattr(message, "id", None), getattr(message, "model", None)
        used = reply_usage(message)
        if isinstance(used, Usage):
            self.usage = used
        else:
            self.problem = self.problem or used

    def on_delta(self, index: int, delta: Any) -> None:
        if not 0 <= index < len(self.content):
            self.problem = self.problem or f"a delta for content block {index}, which was never started"
            return
        kind = getattr(delta, "type", None)
        block = self.content[index]
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(getattr(delta, "text", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(getattr(delta, "thinking", ""))
        elif kind == "input_json_delta" and index in self.partial_json:
            self.partial_json[index] += str(getattr(delta, "partial_json", ""))

    def on_block_stop(self, index: int) -> None:
        if index not in self.partial_json:
            return
        raw = self.partial_json.pop(index)
        try:
            self.content[index]["input"] = json.loads(raw) if raw.strip() else {}
        except ValueError:
            # Cut short (a reply stopped at max_tokens): no input the CLI would run, so no activation; `judge`
            # hands the attempt off.
            self.content[index]["input"] = {"unreadable_input": raw[:TOOL_INPUT_CHARS]}

    def on_delta_usage(self, used: Any) -> None:
        """message_delta's usage is cumulative: its counts replace message_start's."""
        if used is None or self.usage is None:
            return
        counts = {name: getattr(used, name, None) for name in Usage.model_fields}
        self.usage = self.usage.model_copy(update={k: v for k, v in counts.items()
                                                   if isinstance(v, int) and not isinstance(v, bool) and v >= 0})

    def unreadable(self) -> str | None:
        if self.problem is not None:
            return self.problem
        if self.usage is None:
            return "the stream carried no message_start with usage (the reply's cost is unknown)"
        if not self.stopped or self.stop_reason is None:
            return "the stream ended before the reply did (no message_stop or no stop_reason)"
        return None

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": self.content,
                "stop_reason": self.stop_reason, "usage": self.usage.model_dump() if self.usage else None}


def call_name(block: dict[str, Any]) -> str:
    """`Read(README.md)`: the tool and the input a reader knows it by."""
    raw = block.get("input")
    tool_input: dict[str, Any] = raw if isinstance(raw, dict) else {}
    shown = next((tool_input[key] for key in ("skill", "file_path", "subagent_type", "pattern", "command")
                  if isinstance(tool_input.get(key), str)), None)
    if shown is None:
        shown = json.dumps(tool_input, ensure_ascii=False)[:80]
    return f"{block.get('name')}({shown})"


@dataclass(frozen=True)
class Acceptance:
    """What Claude Code would surely run of an activation in the first reply (everything else it may refuse)."""

    tools: frozenset[str]             # the tools the captured request offers
    invocable: frozenset[str]         # library skills the model may invoke (not manual-only), with a SKILL.md
    skill_md: dict[str, str]          # the session's own absolute path of each library SKILL.md -> the skill
    agents: frozenset[str]            # library subagents
    subagent_tools: frozenset[str]    # Task/Agent, when allowed and offered
    aliases: dict[str, str]

    @classmethod
    def of(cls, capture_: Capture, library: Library, real: ClaudeCodeHost) -> "Acceptance":
        tools = frozenset(str(t.get("name")) for t in capture_.body.get("tools") or [] if isinstance(t, dict))
        with_md = {name for name, folder in real.files.skills.items() if (folder / "SKILL.md").is_file()}
        invocable = frozenset(name for name, skill in library.skills.items()
                              if not skill.manual_only and name in with_md)
        # The session's project folder, as the CLI told the model (a Read of a SKILL.md elsewhere finds no file).
        found = WORKING_DIRECTORY.search(_all_text(capture_.body))
        cwd = found.group(1).strip() if found else None
        skill_md = {posixpath.join(cwd, ACTIVATION.skills_folder, name, "SKILL.md"): name for name in with_md} if cwd else {}
        return cls(tools=tools, invocable=invocable, skill_md=skill_md, agents=frozenset(real.files.agents),
                   subagent_tools=frozenset(t for t in ACTIVATION.subagent_tools if t in tools and t in real.allowed_tools),
                   aliases=dict(real.aliases))

    def accepts(self, block: dict[str, Any]) -> Activation | None:
        name, tool_input = str(block.get("name")), block.get("input")
        activation = recognise(name, tool_input, block.get("id"), 0, aliases=self.aliases, names=ACTIVATION)
        if activation is None or not isinstance(tool_input, dict):
            return None
        if name == ACTIVATION.skill_tool and name in self.tools:
            # As the CLI launches it: trimmed, a leading `/` dropped; `plugin:name` is refused for a project skill.
            raw = str(tool_input.get("skill", "")).strip().removeprefix("/")
            return activation if self.aliases.get(raw, raw) in self.invocable else None
        if name == ACTIVATION.read_tool and name in self.tools:
            path = str(tool_input.get("file_path", ""))
            return activation if path.startswith("/") and posixpath.normpath(path) in self.skill_md else None
        if name in self.subagent_tools:
            agent = activation.name.removesuffix(SUBAGENT_SUFFIX)
            return activation if agent in self.agents else None
        return None


def _all_text(body: dict[str, Any]) -> str:
    out: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            out.append(content)
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                out.append(block["text"])
    return "\n".join(out)


@dataclass
class Judgement:
    """What the first reply settles: decided (with Observation.decided when an activation did it, or the final
    answer when the turn ended), or the reason to hand the attempt off."""

    activations: list[Activation]
    decided: Decided | None = None
    final_answer: str | None = None
    hand_off: str | None = None
    reason: str = ""


def judge(reply: _Reply, sets: list[list[str]], acceptance: Acceptance) -> Judgement:
    uses = [block for block in reply.content if block.get("type") == "tool_use"]
    accepted = [(block, a) for block in uses if (a := acceptance.accepts(block)) is not None]
    activations = [a for _, a in accepted]
    if uses and reply.stop_reason == "tool_use":
        hit = decided(sets, [a.name for a in activations])
        if hit is not None:
            deciding = ", ".join(call_name(block) for block, a in accepted if a.name in hit)
            return Judgement(activations, decided=Decided(names=hit, event=f"first reply: {deciding}", turn=0),
                             reason=f"the first reply's {deciding} decided the outcome")
        if activations:
            others = [call_name(b) for b in uses if all(b is not block for block, _ in accepted)]
            opened = ", ".join(call_name(block) for block, _ in accepted)
            also = f"; it also called {', '.join(others)}" if others else ""
            return Judgement([], hand_off=f"the first reply's {opened} leaves the outcome open{also}")
        return Judgement([], hand_off=f"the first reply called {', '.join(call_name(b) for b in uses)}")
    if not uses and reply.stop_reason == "end_turn":
        answer = "".join(str(block.get("text", "")) for block in reply.content if block.get("type") == "text")
        return Judgement([], final_answer=answer, reason="the first reply ended the session without a tool call")
    what = f"called {', '.join(call_name(b) for b in uses)} and " if uses else ""
    return Judgement([], hand_off=f"the first reply {what}stopped with {reply.stop_reason}")


def first_turn_record(found: Capture, outcome: Literal["decided", "handed-off"], reason: str,
                      usage: Usage) -> FirstTurn:
    return FirstTurn(capture_hash=found.hash, cli_version=found.cli_version, outcome=outcome, reason=reason,
                     usage=usage)


# ---- the host ----------------------------------------------------------------------------------


class FirstTurnHost:
    """Claude Code's first request sent directly; a real Claude Code session for what it cannot decide."""

    name = HOST_NAME

    def __init__(self, real: ClaudeCodeHost, library: Library, api_key: str, base_url: str | None,
                 max_retries: int = 2, max_output_tokens: int = 4096, run_folder: Path | None = None,
                 saved: Capture | None = None):
        self.real = real
        self.library = library
        self._api_key = api_key
        self.base_url = base_url
        self.max_retries = max_retries
        self.max_output_tokens = max_output_tokens
        self.run_folder = run_folder
        self.cli_version = cli_version(real.cli)
        # anthropic SDK client middleware: the executor adds the run's rate limiter (as for the api host).
        self.middleware: list[anthropic.MiddlewareInput] = []
        self._clients: Clients = \
            weakref.WeakKeyDictionary()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._captures: dict[tuple[str, int, float | None], Capture] = {}
        self._acceptance: dict[str, Acceptance] = {}
        self._saved_hashes: set[str] = set()
        if saved is not None:
            self._captures[saved.key()] = saved
            self._saved_hashes.add(saved.hash)

    def __repr__(self) -> str:  # never show the key
        return f"FirstTurnHost(base_url={self.base_url!r}, cli={self.cli_version!r})"

    @property
    def session_path(self) -> SessionPath | None:
        return self.real.session_path

    @property
    def session_wall(self) -> SessionWall | None:
        return self.real.session_wall  # a first turn starts no process; its hand-offs are Claude Code sessions

    def versions(self) -> dict[str, str]:
        return {**self.real.versions(), "anthropic": anthropic.__version__}

    def client(self) -> anthropic.AsyncAnthropic:
        return loop_client(self._clients, self._api_key, self.base_url, self.max_retries, self.middleware)

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def aclose(self) -> None:
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
        await self.real.aclose()

    async def captured(self, model: str, max_output_tokens: int, max_usd: float | None, keep: bool) -> Capture:
        """The capture for these session values, made once (one CLI session); `keep`: write it to the run folder
        (the one the attempts are built from)."""
        key = (model, max_output_tokens, max_usd)
        async with self._lock():
            found = self._captures.get(key)
            if found is None:
                found = self._captures[key] = await capture(self.real, model, max_output_tokens, max_usd)
            if keep and self.run_folder is not None and found.hash not in self._saved_hashes:
                # The first kept capture is the run's; another (a session value that changed) keeps its hash.
                name = CAPTURE_FILE if not self._saved_hashes else f"first-turn-capture-{found.hash}.json"
                await asyncio.to_thread(_write, self.run_folder / name, found)
                self._saved_hashes.add(found.hash)
            return found

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        """The surface audit from a capture (the CLI's first request, as the claude-code host measures it)."""
        try:
            found = await self.captured(model, self.max_output_tokens, None, keep=False)
        except CaptureFailed as exc:
            return Surface(host=self.name, listing_budget_chars=self.real.listing_budget_chars, error=str(exc))
        return surface_from_request(found.body, self.name, self.real.listing_budget_chars, library_names, invocable)

    def acceptance(self, found: Capture) -> Acceptance:
        if found.hash not in self._acceptance:
            self._acceptance[found.hash] = Acceptance.of(found, self.library, self.real)
        return self._acceptance[found.hash]

    async def run(self, spec: SessionSpec) -> Observation:
        why_not = ineligible(spec)
        if why_not is not None:
            obs = await self.real.run(spec)
            known = self._captures.get(spec_key(spec))
            return obs.model_copy(update={"host": self.name, "first_turn": FirstTurn(
                capture_hash=known.hash if known is not None else "", cli_version=self.cli_version,
                outcome="not-eligible", reason=why_not)})
        started = time.monotonic()
        try:
            found = await self.captured(*spec_key(spec), keep=True)
        except CaptureFailed as exc:
            return Observation(attempt_id=spec.attempt_id, host=self.name, error_kind="host-crash",
                               error_message=f"Claude Code's first request could not be captured: {exc}")
        return await self.first_turn(spec, found, started)

    async def first_turn(self, spec: SessionSpec, found: Capture, started: float) -> Observation:
        session_id, device_id = str(uuid.uuid4()), secrets.token_hex(32)
        body = request_body(found, spec.prompt, session_id, device_id)
        reply = _Reply()
        error: SessionError | None = None
        refused = False  # an HTTP error status ended it: the API bills no error
        tally = billing.current() or billing.Tally()  # the attempt's (billing): a lost reply is charged its bound
        start = tally.mark()
        prices = self.real.prices
        chars = billing.json_chars(body.get("system")) + billing.json_chars(body.get("messages"))
        began = False  # the API's answer began (its head arrived): a transport error after it is a cut stream
        with billing.metering(tally):
            tally.open_request(billing.input_bound_usd(prices, spec.model, chars // billing.CHARS_PER_TOKEN + 1,
                                                       spec.max_output_tokens))
            try:
                async with asyncio.timeout(spec.timeout_s):
                    # The CLI's path is /v1/messages?beta=true; this SDK's beta resource posts to /v1/messages alone.
                    stream = await self.client().beta.messages.create(
                        **body, extra_headers=request_headers(found, session_id), extra_query=BETA_QUERY,
                        timeout=spec.timeout_s)
                    began = True
                    async with stream:  # closes the response however the loop ends (a timeout, a cancel)
                        async for event in stream:
                            reply.on_event(event)
            except TimeoutError:
                error = SessionError("timeout", f"the first turn outlived the session's {spec.timeout_s:g} s bound",
                                      "timeout")
            except Exception as exc:  # noqa: BLE001 - classified as ApiHost classifies; anything else is a runner bug
                error = (stream_broke_off(exc) if began else None) or classify_error(exc)
                refused = isinstance(exc, (anthropic.APIStatusError, SpendLimitReached))
                if error is None:
                    tally.close_request(None, billed=False)
                    raise
            # The reply's usage counts once the reply ended (message_stop); a reply cut before is billed at its
            # message_start usage with max_tokens of output (billing).
            final = reply.usage if reply.stopped and reply.usage is not None else None
            lost_bound = (billing.usage_bound_usd(prices, spec.model, reply.usage, spec.max_output_tokens)
                          if reply.usage is not None else None)
            tally.close_request(None if final is None else (prices.cost(spec.model, final) or 0.0),
                                billed=not refused, lost_bound_usd=lost_bound)
        if error is None and reply.unreadable() is not None:
            error = SessionError("malformed", f"the API's reply could not be read: {reply.unreadable()}")
        transcript = [{"role": "user", "content": spec.prompt, "first_turn": {"capture_hash": found.hash}},
                      reply.record()]
        base = self.observation(spec, found, reply.usage, transcript)
        fill_cost(base, tally.since(start), spec.max_usd)
        usage = base.usage
        if error is not None:
            base.error_kind, base.error_message = error.kind, error.message
            base.bounds_hit = [error.bound] if error.bound else []
            # An ERROR attempt, never a verdict and never handed off. No FirstTurn: the first reply decided nothing
            # (FirstTurn.outcome has no value for a failed request); prefix_hash still names the capture.
            base.duration_s = round(time.monotonic() - started, 3)
            return utf8_safe(base)
        verdict = judge(reply, spec.decide_when, self.acceptance(found))
        if verdict.hand_off is None:
            base.activations = verdict.activations
            base.decided = verdict.decided
            base.final_answer = verdict.final_answer
            base.first_turn = first_turn_record(found, "decided", verdict.reason, usage)
            base.duration_s = round(time.monotonic() - started, 3)
            return utf8_safe(base)
        return await self.hand_off(spec, found, base, verdict.hand_off, started)

    def observation(self, spec: SessionSpec, found: Capture, replied: Usage | None,
                    transcript: list[dict[str, Any]]) -> Observation:
        """The first turn's observation; `replied`: the reply's usage, None when no reply began (then nothing was
        spent that the API reported)."""
        reply = transcript[-1]
        calls = [ToolCall(name=str(b.get("name")), input=json.dumps(b.get("input"), ensure_ascii=False)[:TOOL_INPUT_CHARS],
                          turn=0) for b in reply.get("content") or [] if b.get("type") == "tool_use"]
        usage = replied or Usage()
        cost = self.real.prices.cost(spec.model, usage)
        first_input = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        return Observation(
            attempt_id=spec.attempt_id, host=self.name, tool_calls=calls, turns=1 if replied else 0, usage=usage,
            cost_usd=cost or 0.0, prefix_hash=found.hash, model_calls=1 if replied else 0,
            first_turn_input_tokens=first_input if replied else None, session_path=self.real.session_path.mode,
            transcript=transcript)

    async def hand_off(self, spec: SessionSpec, found: Capture, first: Observation, reason: str,
                       started: float) -> Observation:
        """Run the attempt on a real Claude Code session from scratch; the result counts the first turn too."""
        left = None if spec.max_usd is None else spec.max_usd - first.cost_usd
        if left is not None and left <= 0:
            # The first turn spent the session's whole budget: the attempt hit its bound, nothing decided it and no
            # session ran (so no FirstTurn outcome is claimed; the transcript keeps the reply).
            first.bounds_hit = ["max-budget"]
            first.duration_s = round(time.monotonic() - started, 3)
            return utf8_safe(first)
        record = first_turn_record(found, "handed-off", reason, first.usage)
        session = await self.real.run(spec.model_copy(update={"max_usd": left}))
        host_cost = None if session.host_cost_usd is None else session.host_cost_usd + first.cost_usd
        bound = first.bound_usd + session.bound_usd
        basis = max(first.cost_basis, session.cost_basis, key=("reported", "bound", "reservation").index)
        return utf8_safe(session.model_copy(update={
            "host": self.name, "usage": first.usage.add(session.usage), "cost_usd": first.cost_usd + session.cost_usd,
            "bound_usd": bound, "lost_replies": first.lost_replies + session.lost_replies, "cost_basis": basis,
            "host_cost_usd": host_cost, "model_calls": 1 + (session.model_calls or 0),
            "first_turn_input_tokens": first.first_turn_input_tokens, "prefix_hash": first.prefix_hash,
            "first_turn": record, "duration_s": round(time.monotonic() - started, 3),
            "transcript": [*first.transcript, *session.transcript]}))


def make(inputs: HostInputs) -> FirstTurnHost:
    """Claude Code's first request sent directly, around a real claude-code host (its hand-offs and the capture).
    Not the `replay` host (re-judging a run folder). A run folder whose capture was made with another CLI version
    than the installed one is refused (first_turn.FirstTurnCaptureError, a usage error)."""
    real = make_claude_code(inputs)
    saved = load_capture(inputs.run_folder, cli_version(real.cli)) if inputs.run_folder is not None else None
    run = inputs.settings.run
    return FirstTurnHost(real, inputs.library, inputs.api_key, inputs.base_url, max_retries=run.host_max_retries,
                         max_output_tokens=run.max_output_tokens, run_folder=inputs.run_folder, saved=saved)
