"""The real host: Claude Code through `claude-agent-sdk`, with Claude Code's own system prompt.

Each attempt gets a fresh workspace (runner.hosts.workspace) and a CLI started under `env -i` with only KEEP's
variables: the runner's secrets never reach a session. What precedes the case prompt is byte-identical across a
run's sessions, for the prompt cache.

Design notes: docs/design/hosts-claude-code.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookMatcher,
    Message,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    query,
)
from claude_agent_sdk import _errors as sdk_errors

from runner.core.host_traits import traits
from runner.core.observation import (
    Activation,
    Bound,
    Decided,
    ErrorKind,
    Observation,
    SessionSpec,
    ToolCall,
    Usage,
    fired_names,
)
from runner.hosts import billing, cli_log, sessionpath, wall, workspace
from runner.hosts.activation import Turns, apply_result, decided, recognise, slash_command
from runner.hosts.base import utf8_safe
from runner.hosts.cli_spend import CliCosts, Spent, StreamSeen, remove_mark, write_mark
from runner.hosts.prices import PriceTable
from runner.hosts.surface import CaptureServer, Surface, surface_from_request

if TYPE_CHECKING:
    import anthropic

    from runner.hosts.registry import HostInputs

# Variables the CLI may see. Everything else of the runner's environment is dropped.
KEEP = (
    "PATH", "HOME", "TMPDIR", "LANG", "PWD", "CLAUDE_CONFIG_DIR", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
    "DISABLE_BUG_COMMAND", "SLASH_COMMAND_TOOL_CHAR_BUDGET", "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "CLAUDE_CODE_MAX_RETRIES",
    "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_AGENT_SDK_VERSION", "CLAUDE_CODE_SDK_READS_SESSION_STATE",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
)
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
_INPUT_CHARS = 300
HOST_NAME = "claude-code"
# The CLI's tools and skills folder, as the registry records them for this host (HostTraits.activation).
ACTIVATION = traits(HOST_NAME).activation


def bundled_cli() -> Path:
    return Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


def cli_version(cli: Path) -> str:
    version_file = cli.parent / "claude.version"
    if version_file.exists():
        return version_file.read_text(encoding="utf-8").split()[0]
    return "unknown"


def write_env_wrapper(directory: Path, cli: Path, session_path: sessionpath.SessionPath | None = None,
                      session_wall: wall.SessionWall | None = None) -> Path:
    """A shell script that execs the CLI with only the KEEP variables (`env -i`), in the session's own
    namespace with its folder at the fixed path when `session_path` has one (runner.hosts.sessionpath),
    confined to that folder when `session_wall` is Landlock (runner.hosts.wall)."""
    keep = " ".join(f'${{{name}:+"{name}=${name}"}}' for name in KEEP)
    mode = session_path.mode if session_path is not None else sessionpath.FALLBACK
    fixed = Path(session_path.path) if session_path is not None and session_path.path else sessionpath.FIXED_PATH
    confined = ""
    if session_wall is not None and session_wall.mode == "landlock":
        # The session's folder as the CLI sees it: the fixed path inside its namespace, else its own real path.
        root = str(fixed) if mode in sessionpath.UNSHARE_ARGS else f"${sessionpath.ROOT_VARIABLE}"
        confined = wall.command(sys.executable, root, wall.cli_reads(cli)) + " -- "
    final = f"exec /usr/bin/env -i {keep} {confined}{shlex.quote(str(cli))} \"$@\""
    script = directory / "claude-minimal-env"
    script.write_text(
        "#!/bin/sh\n"
        "# Written by skill-evals: the CLI sees only these variables, never the runner's environment.\n"
        f"{sessionpath.script_line(mode, fixed, final)}\n", encoding="utf-8")
    script.chmod(0o700)
    return script


def _as_dict(message: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        payload = dataclasses.asdict(message)
        payload["_type"] = type(message).__name__
        return payload
    return {"_type": type(message).__name__, "repr": repr(message)}


def _redact(messages: list[dict[str, Any]], secret: str | None) -> list[dict[str, Any]]:
    if not secret:
        return messages
    text = json.dumps(messages, default=str)
    if secret not in text:
        return messages
    redacted: list[dict[str, Any]] = json.loads(text.replace(secret, "[redacted]"))
    return redacted


class _Recorder:
    """Turns the SDK's message stream into an Observation, whatever order things arrive in.

    `aliases`: other names the host accepts for a skill (a frontmatter `name` that differs from the folder;
    the CLI loads `.claude/skills/pdf-tools` for Skill("pdf") when its frontmatter says `name: pdf`), mapped
    to the folder name every case and report uses."""

    def __init__(self, spec: SessionSpec, aliases: dict[str, str] | None = None):
        self.spec = spec
        self.aliases = aliases or {}
        self.activations: list[Activation] = []
        self.calls: list[ToolCall] = []
        self.activation_by_id: dict[str, Activation] = {}
        self.call_by_id: dict[str, ToolCall] = {}
        self.turns = Turns()
        self.last_text: str | None = None
        self.result: ResultMessage | None = None
        self.api_error: str | None = None
        self.spend_limit: str | None = None  # what the CLI's error message showed of a spend limit
        self.unreadable: str | None = None  # why a reply of the API could not be counted
        self.init: dict[str, Any] | None = None  # the CLI's init event: what it put before the prompt
        self.first_turn_input: int | None = None  # the first API reply's input tokens (all three fields)
        self.replies: set[str] = set()  # ids of the API's replies (not the CLI's own synthetic messages)
        self.init_date = ""
        self.transcript: list[dict[str, Any]] = []
        self.seen = StreamSeen()  # the requests the stream shows, for the session's cost (cli_spend)
        self.on_spend: Callable[[], None] | None = None  # called when `seen` changed

    def on_tool_use(self, block: ToolUseBlock, turn: int) -> None:
        call = ToolCall(name=block.name, input=json.dumps(block.input)[:_INPUT_CHARS], turn=turn)
        self.calls.append(call)
        self.call_by_id[block.id] = call
        activation = recognise(block.name, block.input, block.id, turn, aliases=self.aliases, names=ACTIVATION)
        if activation is not None:
            self.activation_by_id[block.id] = activation
            self.activations.append(activation)

    def on_tool_result(self, block: ToolResultBlock) -> None:
        if block.tool_use_id in self.call_by_id:
            self.call_by_id[block.tool_use_id].is_error = bool(block.is_error)
        # Any call the CLI answered with an error is rejected, a refused Task/Agent call included
        # (runner.hosts.activation: it started no subagent, so it is no activation).
        if block.tool_use_id in self.activation_by_id:
            apply_result(self.activation_by_id[block.tool_use_id], block.is_error)

    def on_message(self, message: Any) -> None:
        self.transcript.append(_as_dict(message))
        if isinstance(message, AssistantMessage):
            turn = self.turns.of(message.message_id)
            if message.error:
                self.on_api_error(message)
            elif self.unreadable is None:
                self.unreadable = _usage_problem(message)
            if message.model != "<synthetic>" and message.message_id:
                self.on_reply(message)
                self.replies.add(message.message_id)
            if self.first_turn_input is None and message.model != "<synthetic>" and isinstance(message.usage, dict):
                self.first_turn_input = sum(message.usage[name] for name in ("input_tokens", "cache_creation_input_tokens",
                                                                             "cache_read_input_tokens")
                                            if _is_count(message.usage.get(name)))
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    self.on_tool_use(block, turn)
                elif isinstance(block, TextBlock) and block.text.strip():
                    self.last_text = block.text
        elif isinstance(message, UserMessage) and isinstance(message.content, str):
            command = slash_command(message.content) if message.parent_tool_use_id is None else None
            if command is not None and not self.turns.count:
                self.activations.append(command)
        elif isinstance(message, UserMessage) and isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    self.on_tool_result(block)
            # What the next request carries besides what it carried before (cli_spend: its bound).
            self.seen.on_results(len(json.dumps(self.transcript[-1], default=str)),  # the message, as recorded
                                 {b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock)})
            self.spend_changed()
        elif isinstance(message, ResultMessage):
            self.result = message
        elif isinstance(message, SystemMessage) and message.subtype == "api_retry":
            # A retried request without an HTTP status lost its reply (a connection dropped, a stream cut): it may
            # have been billed. One with a status was refused: the API bills no error.
            data = message.data if isinstance(message.data, dict) else {}
            if data.get("error_status") is None:
                self.seen.lost += 1
                self.spend_changed()
        elif isinstance(message, SystemMessage) and message.subtype == "init" and self.init is None:
            self.init = message.data if isinstance(message.data, dict) else {}
            self.init_date = datetime.now(timezone.utc).date().isoformat()

    def on_reply(self, message: AssistantMessage) -> None:
        """A reply of the API (one message per content block, one id): its usage, or a lost reply when none."""
        ident = message.message_id or ""
        calls = {block.id for block in message.content if isinstance(block, ToolUseBlock)}
        if ident in self.replies:  # another content block of a reply already counted
            if ident in self.seen.replies and calls:
                self.seen.calls |= calls
                self.spend_changed()
            return
        if _usage_problem(message) is None and isinstance(message.usage, dict):
            self.seen.on_reply(ident, _usage(message.usage), calls)
        else:
            self.seen.lost += 1
        self.spend_changed()

    def spend_changed(self) -> None:
        if self.on_spend is not None:
            self.on_spend()

    def on_api_error(self, message: AssistantMessage) -> None:
        """The CLI's message for the API error that ends the session (see "What the CLI shows" below)."""
        self.api_error = message.error
        text = " ".join(block.text for block in message.content if isinstance(block, TextBlock)).strip()
        if self.spend_limit is None:
            self.spend_limit = cli_spend_limit(message.error, None, text)


# The tools whose call can be an activation (runner.hosts.activation.recognise): the hook's matcher.
DECIDING_TOOLS = "|".join((ACTIVATION.skill_tool, ACTIVATION.read_tool, *ACTIVATION.subagent_tools))
STOP_REASON = "skill-evals: the attempt's outcome can no longer change"


class _Decider:
    """Ends a session once its outcome is certain (SessionSpec.decide_when, runner.corpus.decide).

    The CLI calls this PostToolUse hook after each call of a tool that can be an activation has run and
    before it sends the next request; answering `continue: false` ends the session there, with a result message
    whose usage counts every reply the session got (measured on CLI 2.1.332: one request for a Skill call that
    decides, where the session would have gone on to a second). After the call ran, not before: the CLI
    accepted it (PostToolUse follows a call that succeeded; a refused one gets PostToolUseFailure), so what the
    hook counts as fired is what the recorder counts, which `observe` checks once more."""

    def __init__(self, spec: SessionSpec, recorder: "_Recorder", aliases: dict[str, str]):
        self.sets = spec.decide_when
        self.recorder = recorder
        self.aliases = aliases
        self.fired: list[str] = []
        self.decided: Decided | None = None
        self.tool_use_id: str | None = None

    def hooks(self) -> dict[Any, list[HookMatcher]]:
        return {"PostToolUse": [HookMatcher(matcher=DECIDING_TOOLS, hooks=[self.post_tool_use])]}

    async def post_tool_use(self, data: Any, tool_use_id: str | None, context: Any) -> Any:
        if self.decided is None:
            self.decide(str(data.get("tool_name", "")), data.get("tool_input"), data.get("tool_response"),
                        tool_use_id)
        if self.decided is None:
            return {}
        return {"continue_": False, "stopReason": STOP_REASON}

    def decide(self, tool: str, tool_input: object, response: object, tool_use_id: str | None) -> None:
        refused = isinstance(response, dict) and response.get("success") is False
        activation = recognise(tool, tool_input, tool_use_id, 0, is_error=refused, aliases=self.aliases,
                               names=ACTIVATION)
        if activation is None or not fired_names([activation]):
            return
        self.fired.append(activation.name)
        # The recorder may not have read every earlier message yet: the hook's own list is complete for the
        # tools it matches, the recorder adds a slash command (no tool call).
        names = set(fired_names(self.recorder.activations)) | set(self.fired)
        hit = decided(self.sets, names)
        if hit is not None:
            self.tool_use_id = tool_use_id
            self.decided = Decided(names=hit, event=f"PostToolUse {tool}({activation.name})", turn=0)

    def settle(self, obs_fired: list[str]) -> tuple[Decided | None, str | None]:
        """The decision with the turn the recorder saw the deciding call in, or the reason it cannot stand (the
        recorder saw the call rejected after all: the session ended on something that did not fire)."""
        if self.decided is None:
            return None, None
        turn = next((a.turn for a in self.recorder.activations if a.tool_use_id == self.tool_use_id), 0)
        found = self.decided.model_copy(update={"turn": turn, "event": f"{self.decided.event}, turn {turn}"})
        if decided(self.sets, obs_fired) is None:
            return found, (f"the session was ended at {found.event}, but the host rejected that call: the outcome "
                           "was not certain")
        return found, None


# What the CLI's init event reports of the text it sends before the case prompt: the system prompt and tools
# (version, model, tools, output style, memory), the first message's head (working directory, the skill and agent
# listings, plugins, slash commands). With the date (the head ends "Today's date is ..."), equal fingerprints
# meant byte-identical heads in every capture (tests/test_session_prefix.py).
PREFIX_FIELDS = ("claude_code_version", "model", "cwd", "tools", "mcp_servers", "permissionMode", "output_style",
                 "skills", "slash_commands", "agents", "plugins", "memory_paths")


def prefix_fingerprint(init: dict[str, Any] | None, date: str) -> str | None:
    """16 hex characters over what the init event reports of the session's head; None without an init event."""
    if init is None:
        return None
    fields = {name: init.get(name) for name in PREFIX_FIELDS}
    payload = json.dumps([fields, date], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _usage(raw: dict[str, Any] | None) -> Usage:
    raw = raw or {}
    return Usage(**{k: int(raw.get(k) or 0) for k in Usage.model_fields})


# What the CLI shows of the API's faults in stream-json (measured on CLI 2.1.332 against runner/testing/fake_anthropic.py):
# - A retried error (a 429, a 5xx, a cut stream): one system message per retry, `{"type":"system","subtype":
#   "api_retry","attempt","max_retries","retry_delay_ms","error_status","error"}`. `error` is the CLI's category
#   ("rate_limit" for every 429); nothing of the response's headers or body is in it, so at that point a 429 of
#   a spend limit (error.details.error_code enforced_spend_limit_reached, or no retry-after) cannot be told from
#   a rate limit (retry_delay_ms neither: it is the CLI's backoff with jitter, with or without retry-after). The
#   CLI retries such a 429 like any other: CLAUDE_CODE_MAX_RETRIES times (host_max_retries, default 2: 3
#   requests, ~2 s of backoff), whatever its error code.
# - The error that ends the session: an assistant message (model "<synthetic>") with `error` (a category) and
#   the error as text, followed within milliseconds by a result with is_error and `api_error_status`. The text
#   quotes the API's message: "API Error: Request rejected (429) · <message>"; "API Error: 400 You have reached
#   your specified API usage limits. You will regain access on ..." (category "unknown"; before it the CLI sent
#   the same turn twice more within ~20 ms, each time without one of its beta headers, and said nothing of
#   it); for a 402 its own "Credit balance is too low" (category billing_error; one request, no retry).
#   A spend limit is recognised from this message (cli_spend_limit), the first one that can show it; the
#   session ends with the result that follows it, so nothing is left to cut short.
# - A 200 that is no Message (an error body, or an event stream carrying an `error` event): the CLI sends the
#   turn once more without streaming, then ends with category "unknown" and "API returned an empty or malformed
#   response (HTTP 200) ..." -> `malformed`.
# - A Message whose usage is null (or whose token counts are null): the assistant message's `usage` (the
#   message_start's) is None or holds None, and the result reports success with 0 tokens and $0 -> `malformed`
#   here (_usage_problem): the session's cost is unknown, so it is no result.

# Words of the API's messages for a spend limit, as the CLI quotes them (the documented 400 says "API usage
# limits"; the wording of the tier cap's 429 is not documented, its error code is not shown by the CLI).
SPEND_WORDS = re.compile(r"usage limit|spend(?:ing)? (?:limit|cap)|credit balance", re.IGNORECASE)
MALFORMED_200 = "malformed response (HTTP 200)"


def cli_spend_limit(category: str | None, status: int | None, text: str) -> str | None:
    """The spend limit an error the CLI reported shows, or None (see "What the CLI shows" above)."""
    if category == "billing_error" or status == 402:
        return f"HTTP 402 billing_error (the credit balance), as the CLI reports it: {text}"
    if SPEND_WORDS.search(text):
        shown = f"HTTP {status}" if status is not None else f"the CLI's error category {category}"
        return f"a spend limit ({shown}), as the CLI reports it: {text}"
    return None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _usage_problem(message: AssistantMessage) -> str | None:
    """Why a reply of the API carries no token counts the session's cost can be made of, or None."""
    if message.model == "<synthetic>":  # the CLI's own message (an error it reports), no reply of the API
        return None
    usage = getattr(message, "usage", None)
    counts = [usage.get(name) for name in ("input_tokens", "output_tokens")] if isinstance(usage, dict) else []
    if len(counts) == 2 and all(_is_count(count) for count in counts):
        return None
    return (f"the API's reply {message.message_id} carried no usage figures ({usage!r}): the session's cost is "
            "unknown")


def _error_from_result(result: ResultMessage, api_error: str | None) -> tuple[ErrorKind | None, str | None]:
    status = result.api_error_status
    detail = "; ".join(result.errors or []) or (result.result or "")
    spend = cli_spend_limit(api_error, status, detail) if (status is not None or api_error) else None
    if spend is not None:
        return "spend-limit", spend
    if status == 429 or api_error == "rate_limit":
        return "rate-limited", f"HTTP 429 from the API after the CLI's retries: {detail}".strip()
    if status is None and api_error == "unknown" and MALFORMED_200 in detail:
        return "malformed", f"the API's reply could not be read, as the CLI reports it: {detail}"
    if status is not None or api_error in ("server_error", "authentication_failed", "billing_error",
                                           "invalid_request", "unknown"):
        shown = f"HTTP {status}" if status is not None else "an API error"
        return "api-error", f"{shown} ({api_error or 'api error'}): {detail}".strip()
    if result.subtype in ("success", "error_max_turns", "error_max_budget_usd"):
        return None, None
    return "ambiguous", f"the session ended with {result.subtype}: {detail}".strip()


def _live(tally: billing.Tally, start: billing.Mark, costs: CliCosts, seen: StreamSeen) -> None:
    spent, in_flight = costs.live(seen)
    tally.settle_to(start, spent.reported_usd, spent.bound_usd, spent.lost)
    tally.set_in_flight(in_flight)


def _final(tally: billing.Tally, start: billing.Mark, costs: CliCosts, recorder: _Recorder,
           log: cli_log.SessionLog | None) -> Spent:
    """The session's cost once the CLI is gone (cli_spend), into the attempt's tally."""
    result = recorder.result
    seen = recorder.seen
    if result is not None and result.api_error_status is None and recorder.api_error is not None:
        seen.lost += 1  # it ended on a reply lost without an HTTP status (a connection dropped)
    spent = costs.final(log, _usage(result.usage) if result is not None else None, seen, ended=result is not None)
    tally.set_in_flight(0.0)
    tally.settle_to(start, spent.reported_usd, spent.bound_usd, spent.lost)
    return spent


class ClaudeCodeHost:
    name = HOST_NAME

    def __init__(self, files: workspace.LibraryFiles, prices: PriceTable,
                 api_key: str, base_url: str | None, listing_budget_chars: int | None, allowed_tools: list[str],
                 cli_path: str | None = None, work_parent: Path | None = None, max_retries: int = 2,
                 aliases: dict[str, str] | None = None, session_namespace: sessionpath.Setting = "auto",
                 auto_memory: bool = False, session_confinement: wall.Setting = "auto"):
        self.files = files
        self.aliases = aliases or {}
        self.prices = prices
        self.api_key = api_key
        self.base_url = base_url
        self.listing_budget_chars = listing_budget_chars
        self.allowed_tools = allowed_tools
        self.cli = Path(cli_path) if cli_path else bundled_cli()
        # Session folders, the snapshot and the CLI wrapper: on a memory filesystem when there is one, under the
        # run folder's own folder when a run gives one (workspace.claim_run_parent), so a killed run's are found.
        self.work_parent = work_parent if work_parent is not None else workspace.default_parent()
        self.max_retries = max_retries
        # The CLI makes its own requests: the run's rate limiter, put here by the executor, paces none of them.
        self.middleware: list[anthropic.MiddlewareInput] = []
        self._wrapper_dir = Path(tempfile.mkdtemp(prefix="skill-evals-cli-", dir=self.work_parent))
        weakref.finalize(self, shutil.rmtree, str(self._wrapper_dir), True)
        # Every process of a session confined to the session's folder where the kernel allows it (Landlock).
        self.session_wall = wall.detect(session_confinement)
        # One fixed session path where a namespace allows it, else one per case (detected once per process and
        # setting). A case's path is used again only when nothing of a session can outlive it into the next.
        reuse_safe = self.session_wall.mode == "landlock" or workspace.tools_are_read_only(allowed_tools)
        self.session_path = sessionpath.detect(session_namespace, reuse_safe=reuse_safe)
        self.case_folders = sessionpath.CaseFolders(self.work_parent or Path(tempfile.gettempdir()))
        # False: CLAUDE_CODE_DISABLE_AUTO_MEMORY=1 (the design notes). True only to measure what it costs.
        self.auto_memory = auto_memory
        self.wrapper = write_env_wrapper(self._wrapper_dir, self.cli, self.session_path, self.session_wall)
        self._staging: workspace.Staging | None = None
        self._staging_lock = threading.Lock()
        # Hard links are shared by all sessions: only when no allowed tool can write a file.
        self.link = workspace.tools_are_read_only(allowed_tools)
        # (attempt_id, phase) at each phase of a session: benchmarks/throughput.py times them.
        self.trace: Callable[[str, str], None] | None = None

    def _mark(self, spec: SessionSpec, phase: str) -> None:
        if self.trace is not None:
            self.trace(spec.attempt_id, phase)

    def staging(self) -> workspace.Staging:
        """The run's snapshot of the library, made by the first session that needs it."""
        with self._staging_lock:
            if self._staging is None:
                self._staging = workspace.Staging(self.files, self.work_parent)
            return self._staging

    def build_workspace(self, spec: SessionSpec) -> workspace.Workspace:
        base = Path(spec.case_files_dir) if spec.case_files_dir else None
        case_files = [(base / f, f) for f in spec.case_files] if base is not None else []
        root = (self.case_folders.claim(sessionpath.case_key(spec.uid, spec.exclude_skills))
                if self.session_path.one_session_per_path else None)
        try:
            return workspace.build(self.files, spec.exclude_skills, case_files, self.work_parent,
                                   staging=self.staging(), link=self.link, root=root)
        except BaseException:
            if root is not None:
                shutil.rmtree(root, ignore_errors=True)
                self.case_folders.release(root)
            raise

    def remove_workspace(self, ws: workspace.Workspace) -> None:
        """Remove the session's folder and its mark; a case folder's path is then free for the case's next session
        (whose mark has the same name)."""
        ws.remove()
        remove_mark(ws.root)
        self.case_folders.release(ws.root)

    def close(self) -> None:
        """Remove the snapshot once no session runs; the host stays usable (a later session makes a new
        one). The wrapper folder goes when the host is collected or the interpreter exits."""
        with self._staging_lock:
            if self._staging is not None:
                self._staging.remove()
                self._staging = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    async def capture(self, url: str, spec: SessionSpec) -> Observation:
        """Run `spec` as one session of this host against a capture endpoint at `url` (CaptureServer): the real
        first request, no model, no key. The same session path, CLI wrapper and library snapshot as the run's
        sessions, so what it sends is what they send but for the prompt (the surface audit; the first-turn host,
        runner.hosts.first_turn, keeps the whole request)."""
        probe = ClaudeCodeHost(self.files, self.prices, api_key="skill-evals-surface-audit-no-key", base_url=url,
                               listing_budget_chars=self.listing_budget_chars, allowed_tools=self.allowed_tools,
                               cli_path=str(self.cli), work_parent=self.work_parent, max_retries=0,
                               auto_memory=self.auto_memory)
        probe.session_path = self.session_path
        probe.case_folders = self.case_folders
        probe.session_wall = self.session_wall
        probe.wrapper = self.wrapper
        probe._staging = await asyncio.to_thread(self.staging)  # the same snapshot the run's sessions use
        with billing.metering(billing.Tally()):  # no model, nothing billed: never an attempt's spend
            return await probe.run(spec)

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        """Run one session against a capture endpoint: the real first request, no model, no key."""
        with CaptureServer() as capture:
            obs = await self.capture(capture.url, SessionSpec(
                attempt_id="surface-audit", uid="surface-audit", model=model,
                prompt="Surface audit: this session only records its first request.", max_turns=1, timeout_s=120))
        if not capture.captured:
            return Surface(host=self.name, listing_budget_chars=self.listing_budget_chars,
                           error=f"the CLI sent no request to the capture endpoint ({obs.error_kind}: "
                                 f"{obs.error_message})")
        return surface_from_request(capture.captured[0], self.name, self.listing_budget_chars, library_names,
                                    invocable)

    def versions(self) -> dict[str, str]:
        return {"claude-agent-sdk": claude_agent_sdk.__version__, "claude-code-cli": cli_version(self.cli)}

    def environment(self, ws: workspace.Workspace, max_output_tokens: int) -> dict[str, str]:
        seen = ws.seen_at(Path(self.session_path.path)) if self.session_path.path else ws
        env = {
            "PATH": MINIMAL_PATH, "HOME": str(seen.home), "TMPDIR": str(seen.root), "LANG": "C.UTF-8",
            "CLAUDE_CONFIG_DIR": str(seen.config), "ANTHROPIC_API_KEY": self.api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1",
            # Bounds each model call, so the plan's worst case per session holds.
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output_tokens),
            "CLAUDE_CODE_MAX_RETRIES": str(self.max_retries),
        }
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        # For the wrapper's bind and its confinement only: not in KEEP, the CLI never sees it.
        env[sessionpath.ROOT_VARIABLE] = str(ws.root)
        if not self.auto_memory:
            env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] = "1"
        if self.listing_budget_chars:
            env["SLASH_COMMAND_TOOL_CHAR_BUDGET"] = str(self.listing_budget_chars)
        return env

    def options(self, spec: SessionSpec, ws: workspace.Workspace, stderr: list[str],
                decider: _Decider | None = None) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(
            hooks=decider.hooks() if decider is not None else None,
            system_prompt={"type": "preset", "preset": "claude_code"}, cwd=str(ws.project),
            # Project settings: skills and subagents load from the project. No settings file is ever in the
            # project (runner.corpus.executables), and the flag settings switch hooks and inline shell off.
            setting_sources=["project"], settings=json.dumps(wall.SESSION_SETTINGS),
            allowed_tools=list(self.allowed_tools), tools=list(self.allowed_tools),
            permission_mode="dontAsk", max_turns=spec.max_turns, model=spec.model, env=self.environment(ws, spec.max_output_tokens),
            max_budget_usd=spec.max_usd, mcp_servers={}, strict_mcp_config=True, cli_path=str(self.wrapper),
            # Echo the user messages: the only sign of a skill the prompt invoked as `/name`.
            extra_args={"replay-user-messages": None},
            stderr=lambda line: stderr.append(line) if len(stderr) < 200 else None,
        )

    async def run(self, spec: SessionSpec) -> Observation:
        started = time.monotonic()
        self._mark(spec, "start")
        building = asyncio.ensure_future(asyncio.to_thread(self.build_workspace, spec))
        try:
            ws = await asyncio.shield(building)
        except asyncio.CancelledError:
            # The thread finishes the folder anyway: remove it when it is done.
            building.add_done_callback(lambda done: None if done.cancelled() or done.exception()
                                       else self.remove_workspace(done.result()))
            raise
        self._mark(spec, "workspace")
        stderr: list[str] = []
        recorder = _Recorder(spec, self.aliases)
        decider = _Decider(spec, recorder, self.aliases) if spec.decide_when else None
        error_kind: ErrorKind | None = None
        error_message: str | None = None
        # The attempt's tally (billing): the session's replies as they come, a request in flight at its bound.
        tally, costs = billing.current() or billing.Tally(), CliCosts(self.prices, spec)
        start = tally.mark()
        write_mark(ws.root, spec.attempt_id, tally.reservation_id)
        recorder.on_spend = lambda: _live(tally, start, costs, recorder.seen)
        tally.set_in_flight(costs.bound(None))
        spent = Spent(0.0, 0.0, 0)
        # query() is an async generator function (its annotation says AsyncIterator): aclose() below ends it.
        stream = cast(AsyncGenerator[Message, None], query(prompt=spec.prompt, options=self.options(spec, ws, stderr, decider)))
        try:
            async with asyncio.timeout(spec.timeout_s):
                async for message in stream:
                    recorder.on_message(message)
        except TimeoutError:
            error_kind, error_message = "timeout", f"the session outlived its {spec.timeout_s:g} s bound"
        except sdk_errors.CLIJSONDecodeError as exc:
            error_kind, error_message = "malformed", f"the CLI printed output that is not JSON: {exc}"
        except sdk_errors.ClaudeSDKError as exc:
            # The CLI exits non-zero after an API error result; that result says what happened.
            if recorder.result is None and recorder.api_error is None:
                error_kind, error_message = "host-crash", f"{type(exc).__name__}: {exc}"
        finally:
            self._mark(spec, "stream-end")
            try:
                await stream.aclose()
            finally:
                # Before the folder goes: the CLI's own log shows every request it sent (cli_spend). Read in a
                # worker thread (bounded, but files of the session's folder); no log read, no log evidence.
                log = await asyncio.to_thread(cli_log.read, ws.config)
                spent = _final(tally, start, costs, recorder, log)
                await asyncio.to_thread(self.remove_workspace, ws)
            self._mark(spec, "removed")
        return self.observe(spec, recorder, error_kind, error_message, stderr, time.monotonic() - started, decider,
                            spent)

    def observe(self, spec: SessionSpec, recorder: _Recorder, error_kind: ErrorKind | None, error_message: str | None,
                stderr: list[str], duration: float, decider: _Decider | None = None,
                spent: Spent | None = None) -> Observation:
        result = recorder.result
        bounds: list[Bound] = []
        usage = Usage()
        turns = recorder.turns.count
        final = None
        host_cost = None
        if recorder.spend_limit is not None:
            # Whatever else the stream did, it showed a spend limit: that is what stops the run.
            error_kind, error_message = "spend-limit", recorder.spend_limit
        if error_kind == "timeout":
            bounds.append("timeout")
        if result is not None:
            usage = _usage(result.usage)
            turns = result.num_turns or turns
            host_cost = result.total_cost_usd
            if result.subtype == "error_max_turns":
                bounds.append("max-turns")
            elif result.subtype == "error_max_budget_usd":
                bounds.append("max-budget")
            elif result.subtype == "success" and not result.is_error:
                final = result.result if result.result is not None else recorder.last_text
            if error_kind is None:
                error_kind, error_message = _error_from_result(result, recorder.api_error)
            if error_kind is None and result.is_error:
                error_kind, error_message = "ambiguous", f"the CLI reported an error result: {result.result}"
        elif error_kind is None:
            error_kind = "ambiguous"
            error_message = "the CLI ended without a result message"
        if error_kind is None and recorder.unreadable is not None:
            error_kind, error_message = "malformed", recorder.unreadable
        if error_kind and stderr and error_kind in ("host-crash", "ambiguous"):
            error_message = f"{error_message} | stderr: {' '.join(stderr[-5:])[:500]}"
        fired = fired_names(recorder.activations)
        early, unfounded = decider.settle(fired) if decider is not None else (None, None)
        if early is not None:
            final = None  # the session was ended before an answer: no verdict of an activation-only case reads one
            if error_kind is None and unfounded is not None:
                error_kind, error_message = "ambiguous", unfounded
        cost = self.prices.cost(spec.model, usage)
        reported = cost if cost is not None else (host_cost or 0.0)
        if result is None and spent is not None:  # no result: the replies the log (or stream) showed
            reported = spent.reported_usd
        bound = spent.bound_usd if spent is not None else 0.0
        charged, bound, basis = billing.charge(reported + bound, bound, spec.max_usd)
        return utf8_safe(Observation(
            attempt_id=spec.attempt_id, host=self.name, error_kind=error_kind, error_message=error_message,
            activations=recorder.activations, tool_calls=recorder.calls, final_answer=final, turns=turns,
            usage=usage, cost_usd=charged, cost_basis=basis, bound_usd=bound,
            lost_replies=spent.lost if spent is not None else 0, host_cost_usd=host_cost,
            bounds_hit=bounds, duration_s=round(duration, 3), prefix_hash=prefix_fingerprint(recorder.init,
                                                                                             recorder.init_date),
            session_path=self.session_path.mode, first_turn_input_tokens=recorder.first_turn_input,
            model_calls=len(recorder.replies), decided=early,
            transcript=_redact(recorder.transcript, self.api_key)))


def make(inputs: HostInputs) -> ClaudeCodeHost:
    """A claude-code host keeps its session folders under the run folder's own session-folder parent, emptied
    first of what a killed process of the same run folder left (workspace.claim_run_parent) and removed when the
    host goes."""
    from runner.hosts.workspace import LibraryFiles, claim_run_parent

    settings = inputs.settings
    files = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    parent = claim_run_parent(inputs.run_folder) if inputs.run_folder is not None else None
    host = ClaudeCodeHost(files, inputs.prices, inputs.api_key, inputs.base_url, settings.listing.budget_chars,
                          settings.run.allowed_tools, settings.run.cli_path, work_parent=parent,
                          max_retries=settings.run.host_max_retries, aliases=inputs.library.aliases(),
                          session_namespace=settings.run.session_namespace,
                          session_confinement=settings.run.session_confinement)
    if parent is not None:  # at exit too: a clean end leaves nothing behind, not even the empty folder
        weakref.finalize(host, shutil.rmtree, str(parent), True)
    return host
