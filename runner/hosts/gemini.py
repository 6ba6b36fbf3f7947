"""Google's Gemini CLI (npm `@google/gemini-cli`, pinned in runner/data/agent_clis.json) as a host:
`gemini -m MODEL --output-format stream-json --policy FILE --prompt=PROMPT`, run by runner.hosts.agent_cli, its model
reached through `GOOGLE_GEMINI_BASE_URL` with the API key (the Gemini API's shape: runner.testing.fake_gemini).

What it shows (CLI 0.61.0, measured; docs/hosts.md "gemini" has the evidence):
- Activation is an `activate_skill {"name"}` call in its JSON lines (`tool_use`), answered by `tool_result`: status
  error (an unknown or excluded name, the tool denied by policy) rejects it. Headless, the CLI's own policy denies the
  tool: each session's policy allows it and the run's other tools.
- The listing is the system instruction's `<available_skills>` (frontmatter name, whole description, SKILL.md
  path); the CLI cuts nothing and has no budget.
- What failed is only in the `result` event's message (`[API Error: ...]`); the CLI keeps its own turn bound
  (`model.maxSessionTurns`, FatalTurnLimitedError) and retries `general.maxAttempts` times with a backoff from 5 s.
- Token figures: `result.stats` leaves thinking tokens out; the session log (`~/.gemini/tmp/<project>/chats/`) has
  each reply's, also for a session killed at its timeout.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from runner.core.errors import UsageError
from runner.core.host_traits import traits
from runner.core.observation import Activation, Bound, ErrorKind, SessionSpec, ToolCall, Usage
from runner.hosts import agent_install, keyproxy
from runner.hosts.activation import apply_result, recognise
from runner.hosts.agent_cli import (
    AgentCliHost,
    Launch,
    ReadOutcome,
    cut_input,
    keep_until_collected,
    node_path,
    work_parent_for,
)
from runner.hosts.surface import CaptureEndpoint, CaptureHandler, Surface

if TYPE_CHECKING:
    from runner.hosts.registry import HostInputs
    from runner.hosts.workspace import Workspace

NAME = "gemini"
PACKAGE_VERSION_KEY = "gemini-cli"
# The CLI's own skills (bundle/builtin/ of 0.61.0): switched off in every session unless the library has a skill of
# that name, which then outranks the built-in one (workspace skills win over built-in ones).
BUILTIN_SKILLS = ("skill-creator", "antigravity-support")
# The run's tools ([run] allowed_tools, Claude Code's names) as Gemini CLI names them; the others have no equivalent
# there and are left out (the CLI's invoke_agent starts its own agents, not the library's subagents).
TOOL_NAMES = {"Skill": "activate_skill", "Read": "read_file", "Glob": "glob", "Grep": "grep_search",
              "LS": "list_directory", "Bash": "run_shell_command", "Edit": "replace", "Write": "write_file"}
DEFAULT_ALLOWED = ("Skill", "Read", "Glob", "Grep")  # [run] allowed_tools' default
# `general.maxAttempts` may not exceed this (the CLI's DEFAULT_MAX_ATTEMPTS).
MAX_ATTEMPTS_LIMIT = 10
# The CLI's text after a 429 (RATE_LIMIT_ERROR_MESSAGE_USE_GEMINI / _VERTEX); the API's own status name for it.
RATE_LIMIT_WORDS = re.compile(r"Please wait and try again later\.|RESOURCE_EXHAUSTED|\"code\":\s*429")
# A stream the API (or the network) cut mid-reply, as undici reports it through the CLI.
CUT_WORDS = re.compile(r"\[API Error: (terminated|fetch failed|other side closed)")
API_ERROR_PREFIX = "[API Error:"
TURN_LIMIT_ERROR = "FatalTurnLimitedError"
CUT_MESSAGE = "the API's stream was cut before the reply ended"


def _positive(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# ---- launching ---------------------------------------------------------------------------------------------------

def tool_policy(tools: list[str]) -> str:
    """A policy that lets each of the session's tools run headless. The CLI's own policy denies activate_skill (and
    writes and the shell) when no one can be asked (bundle/policies/write.toml, `interactive = false`, priority 10):
    such a tool is then not even offered."""
    return "".join(f'[[rule]]\ntoolName = "{tool}"\ndecision = "allow"\npriority = 100\n\n' for tool in tools)


def session_settings(spec: SessionSpec, max_attempts: int, library_skills: set[str], tools: list[str]
                     ) -> dict[str, Any]:
    """The user settings of one session (`~/.gemini/settings.json`): `tools.core` is the allowlist of the tools the
    model is offered."""
    return {
        "tools": {"core": list(tools)},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                    "maxAttempts": max(1, min(MAX_ATTEMPTS_LIMIT, max_attempts))},
        "model": {"maxSessionTurns": spec.max_turns},
        "skills": {"enabled": True, "disabled": [name for name in BUILTIN_SKILLS if name not in library_skills]},
    }


def installed_version(program: Path) -> str | None:
    """The version in the installed package's package.json (program = <prefix>/node_modules/.bin/gemini)."""
    manifest = program.parent.parent / "@google" / "gemini-cli" / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


# ---- reading the stream ------------------------------------------------------------------------------------------

@dataclass
class _Pending:
    call: ToolCall
    activation: Activation | None


@dataclass
class ChatTokens:
    """One model reply's token figures as the session log records them."""

    input: int
    output: int
    cached: int
    thoughts: int

    @property
    def usage(self) -> Usage:
        # `input` counts the cached part too (the API's promptTokenCount); thinking is billed as output.
        return Usage(input_tokens=max(0, self.input - self.cached), output_tokens=self.output + self.thoughts,
                     cache_read_input_tokens=self.cached)


def chat_tokens(home: Path) -> list[ChatTokens]:
    """Each model reply's tokens from the session's log(s) under `home`, in the order the replies were written (a
    reply is rewritten as its tool calls complete: the last record of an id wins)."""
    replies: dict[str, ChatTokens] = {}
    for log in sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")):
        try:
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            tokens = record.get("tokens") if isinstance(record, dict) and record.get("type") == "gemini" else None
            if isinstance(tokens, dict) and isinstance(record.get("id"), str):
                replies[record["id"]] = ChatTokens(_positive(tokens.get("input")), _positive(tokens.get("output")),
                                                   _positive(tokens.get("cached")), _positive(tokens.get("thoughts")))
    return list(replies.values())


def stats_usage(stats: object) -> Usage | None:
    """The `result` event's totals (no thinking tokens: the CLI leaves them out there)."""
    if not isinstance(stats, dict):
        return None
    cached = _positive(stats.get("cached"))
    return Usage(input_tokens=max(0, _positive(stats.get("input_tokens")) - cached),
                 output_tokens=_positive(stats.get("output_tokens")), cache_read_input_tokens=cached)


def usage_of(stats: Usage | None, replies: list[ChatTokens]) -> Usage:
    """The session's usage: the `result` event's totals (every reply the API sent, an unusable one too, which the log
    leaves out) with the log's thinking tokens added; the log's own sums when the CLI printed no result (killed)."""
    thoughts = sum(reply.thoughts for reply in replies)
    if stats is not None:
        return stats.model_copy(update={"output_tokens": stats.output_tokens + thoughts})
    logged = Usage()
    for reply in replies:
        logged = logged.add(reply.usage)
    return logged


def result_error(error: object) -> tuple[ErrorKind | None, str | None, list[Bound]]:
    """What a `result` event's `error` says: (error kind, message, bounds hit)."""
    if not isinstance(error, dict):
        return "ambiguous", f"the CLI ended with an error result it did not describe: {error!r}", []
    kind, message = str(error.get("type") or ""), str(error.get("message") or "")
    if kind == TURN_LIMIT_ERROR:
        return None, None, ["max-turns"]
    if message.startswith(API_ERROR_PREFIX):
        if RATE_LIMIT_WORDS.search(message):
            return "rate-limited", f"HTTP 429 from the API after the CLI's retries: {message}", []
        if CUT_WORDS.match(message):
            return "api-error", f"{CUT_MESSAGE}, as the CLI reports it: {message}", []
        return "api-error", f"the API answered with an error after the CLI's retries: {message}", []
    return "ambiguous", f"the CLI reported an error result ({kind or 'no type'}): {message}", []


@dataclass
class GeminiReader:
    """Reads one session's stream-json lines (module docstring) into activations, tool calls, answer and usage."""

    home: Path
    aliases: dict[str, str]
    turn: int = -1
    in_model_turn: bool = False
    answer_parts: list[str] = field(default_factory=list)
    activations: list[Activation] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    pending: dict[str, _Pending] = field(default_factory=dict)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    reply_errors: list[str] = field(default_factory=list)  # `error` events of severity error: unusable replies
    unreadable: list[str] = field(default_factory=list)
    events: int = 0  # the JSON events read

    def line(self, text: str) -> None:
        if not text.strip():
            return
        try:
            event = json.loads(text)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            self.unreadable.append(text[:500])
            self.transcript.append({"type": "unreadable", "text": text[:2000]})
            return
        self.transcript.append(event)
        self.events += 1
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            self._model_turn()
            self.answer_parts.append(str(event.get("content") or ""))
        elif kind == "tool_use":
            self._tool_use(event)
        elif kind == "tool_result":
            self._tool_result(event)
        elif kind == "error" and event.get("severity") == "error":
            self.reply_errors.append(str(event.get("message") or ""))
        elif kind == "result":
            self.result = event

    def _model_turn(self) -> None:
        """A model reply's first event starts a turn; its text replaces the previous turn's as the answer."""
        if not self.in_model_turn:
            self.turn += 1
            self.in_model_turn = True
            self.answer_parts = []

    def _tool_use(self, event: dict[str, Any]) -> None:
        self._model_turn()
        name, parameters = str(event.get("tool_name") or ""), event.get("parameters")
        tool_id = event.get("tool_id") if isinstance(event.get("tool_id"), str) else None
        call = ToolCall(name=name, input=cut_input(parameters if parameters is not None else {}), turn=self.turn)
        self.tool_calls.append(call)
        activation = recognise(name, parameters, tool_id, self.turn, None, self.aliases, traits(NAME).activation)
        if activation is not None:
            self.activations.append(activation)
        if tool_id is not None:
            self.pending[tool_id] = _Pending(call, activation)

    def _tool_result(self, event: dict[str, Any]) -> None:
        self.in_model_turn = False  # the next reply is the model's answer to these results
        pending = self.pending.pop(str(event.get("tool_id")), None)
        if pending is None:
            return
        is_error = event.get("status") != "success"
        pending.call.is_error = is_error
        if pending.activation is not None:
            apply_result(pending.activation, is_error)

    def over(self) -> Bound | None:
        """Never: the CLI keeps the turn bound itself (`model.maxSessionTurns`, checked before the request past it)."""
        return None

    def outcome(self) -> ReadOutcome:
        replies = chat_tokens(self.home)
        result = self.result or {}
        usage = usage_of(stats_usage(result.get("stats")), replies)
        error_kind: ErrorKind | None = None
        message: str | None = None
        bounds: list[Bound] = []
        lost = 0
        if result.get("status") == "error":
            if "error" in result:
                error_kind, message, bounds = result_error(result.get("error"))
                # A reply cut mid-stream was begun by the API: it may have been billed, and no figure shows it.
                lost = 1 if message is not None and message.startswith(CUT_MESSAGE) else 0
            else:  # an unusable reply (empty, only thoughts, a malformed function call, cut at max tokens)
                error_kind = "malformed"
                message = ("the model's reply could not be used, as the CLI reports it: "
                           + ("; ".join(self.reply_errors) or "no message"))
        elif self.events == 0 and self.unreadable:
            error_kind, message = "malformed", f"the CLI printed no JSON event: {self.unreadable[0]}"
        return ReadOutcome(
            activations=self.activations, tool_calls=self.tool_calls,
            final_answer="".join(self.answer_parts) or None, usage=usage,
            model_calls=max(len(replies), self.turn + 1), turns=self.turn + 1, ended=self.result is not None, error_kind=error_kind,
            error_message=message, first_turn_input_tokens=replies[0].input if replies else None,
            transcript=self.transcript, bounds_hit=bounds, lost_replies=lost)


# ---- the surface audit -------------------------------------------------------------------------------------------

# The model methods the CLI calls (generativelanguage v1beta): /v1beta/models/<model>:<method>.
_MODEL_CALL = re.compile(r"^/v1(?:beta|alpha)?/models/[^/:]+:(generateContent|streamGenerateContent)$")
_CAPTURE_REPLY = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Recorded."}]},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0},
                  "modelVersion": "capture"}


class _CaptureHandler(CaptureHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.json_body()
        path, _, query = self.path.partition("?")
        if not (_MODEL_CALL.match(path) and isinstance(body, dict)):
            return self.send_whole(404, b'{"error": {"code": 404, "message": "capture: no such route", '
                                        b'"status": "NOT_FOUND"}}', "application/json")
        self.server.captured.append(body)
        if path.endswith(":streamGenerateContent"):  # one event, the whole reply: the session ends after it
            sse = "alt=sse" in query.split("&")
            data = json.dumps(_CAPTURE_REPLY).encode()
            return self.send_whole(200, b"data: " + data + b"\r\n\r\n" if sse else b"[" + data + b"]",
                                   "text/event-stream" if sse else "application/json")
        return self.send_whole(200, json.dumps(_CAPTURE_REPLY).encode(), "application/json")


class GeminiCapture(CaptureEndpoint):
    """Records the CLI's model requests on 127.0.0.1 and answers each with a short text reply, which ends the
    session after its first request (no model, no key)."""

    def __init__(self) -> None:
        super().__init__(_CaptureHandler)


# One `<skill>` entry of the listing (renderAgentSkills of 0.61.0: name, description and location verbatim).
_LISTING = re.compile(r"<available_skills>(.*?)</available_skills>", re.DOTALL)
_ENTRY = re.compile(r"<skill>\s*<name>(.*?)</name>\s*<description>(.*?)</description>\s*<location>(.*?)</location>"
                    r"\s*</skill>", re.DOTALL)


def listed_name(name: str, location: str) -> str:
    """The library's name of a listed skill: its folder when the location is a SKILL.md in the session's skills
    folder (the CLI lists the frontmatter `name`, which may differ from the folder), else the name listed."""
    parts = PurePosixPath(location.strip()).parts
    folder = traits(NAME).activation.skills_folder_parts
    if len(parts) >= len(folder) + 2 and parts[-1] == "SKILL.md" and parts[-len(folder) - 2:-2] == folder:
        return parts[-2]
    return name.strip()


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("systemInstruction")
    if isinstance(system, str):
        return system
    parts = system.get("parts") if isinstance(system, dict) else None
    return "".join(p["text"] for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


def _declarations(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for group in body.get("tools") or [] if isinstance(group, dict)
            for d in group.get("functionDeclarations") or [] if isinstance(d, dict)]


def surface_of(bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
    """What the first chat request (the one with the CLI's tools; a classifier's request has none) listed."""
    body = next((b for b in bodies if _declarations(b)), None)
    if body is None:
        return Surface(host=NAME, listing_budget_chars=None, missing=sorted(invocable),
                       error=f"none of the {len(bodies)} captured requests is the CLI's chat request (no tools)")
    tools = [str(d.get("name", "")) for d in _declarations(body)]
    request_chars = sum(len(json.dumps(body.get(k, ""))) for k in ("systemInstruction", "tools", "contents"))
    listing = _LISTING.search(_system_text(body))
    if listing is None:
        return Surface(host=NAME, listing_budget_chars=None, request_chars=request_chars, tools=tools,
                       missing=sorted(invocable), error="the captured request holds no <available_skills> listing")
    entries = [(listed_name(name, location), description.strip())
               for name, description, location in _ENTRY.findall(listing.group(1))]
    listed = {name for name, _ in entries}
    return Surface(
        host=NAME, listing_budget_chars=None,
        with_description=[n for n, d in entries if d and n in library_names],
        name_only=[n for n, d in entries if not d and n in library_names],
        not_from_library=sorted(listed - library_names), missing=sorted(invocable - listed),
        listing_chars=len(listing.group(0)), request_chars=request_chars, tools=tools)


# ---- the CLI -----------------------------------------------------------------------------------------------------

class GeminiCli:
    """The AgentCli of the gemini host (runner.hosts.agent_cli)."""

    name = NAME

    def __init__(self, program: Path | None = None, max_attempts: int = 3,
                 allowed_tools: list[str] | tuple[str, ...] = DEFAULT_ALLOWED):
        self.program = program if program is not None else agent_install.locate(NAME)
        self.max_attempts = max_attempts
        self.tools = list(dict.fromkeys(TOOL_NAMES[t] for t in allowed_tools if t in TOOL_NAMES))

    def versions(self) -> dict[str, str]:
        return {PACKAGE_VERSION_KEY: installed_version(self.program) or agent_install.pin(NAME).version}

    def launch(self, spec: SessionSpec, ws: Workspace, base_url: str | None, api_key: str) -> Launch:
        skills = ws.project.joinpath(*traits(NAME).activation.skills_folder_parts)
        library_skills = {p.name for p in skills.iterdir()} if skills.is_dir() else set()
        gemini_dir = ws.home / ".gemini"
        gemini_dir.mkdir(parents=True, exist_ok=True)
        (gemini_dir / "settings.json").write_text(
            json.dumps(session_settings(spec, self.max_attempts, library_skills, self.tools), indent=1),
            encoding="utf-8")
        policy = ws.root / "gemini-policy.toml"
        policy.write_text(tool_policy(self.tools), encoding="utf-8")
        tmp = ws.root / "tmp"
        tmp.mkdir(exist_ok=True)
        env = {
            "PATH": node_path(), "HOME": str(ws.home), "TMPDIR": str(tmp), "LANG": "C.UTF-8",
            "XDG_CONFIG_HOME": str(ws.home / ".config"), "XDG_CACHE_HOME": str(ws.home / ".cache"),
            "XDG_DATA_HOME": str(ws.home / ".local" / "share"), "XDG_STATE_HOME": str(ws.home / ".local" / "state"),
            # Paths that do not exist: no machine-wide settings (/etc/gemini-cli) reach the session.
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(ws.root / "no-system-settings.json"),
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(ws.root / "no-system-defaults.json"),
            "GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_API_KEY": api_key,
        }
        if base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = base_url
        argv = [str(self.program), "-m", spec.model, "--output-format", "stream-json", "--policy", str(policy),
                f"--prompt={spec.prompt}"]
        # The package and its dependencies (the program is a link into <prefix>/node_modules).
        return Launch(argv=argv, env=env, reads=[str(self.program.parent.parent)])

    def reader(self, spec: SessionSpec, ws: Workspace, aliases: dict[str, str]) -> GeminiReader:
        return GeminiReader(home=ws.home, aliases=aliases)

    def capture(self) -> GeminiCapture:
        return GeminiCapture()

    def surface(self, bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
        return surface_of(bodies, library_names, invocable)


# Anthropic's API keys begin so (console.anthropic.com); a Gemini API key never does.
ANTHROPIC_KEY_PREFIX = "sk-ant-"


def make(inputs: HostInputs) -> AgentCliHost:
    """The gemini host. Its sessions send `inputs.api_key` to a Gemini API endpoint (`inputs.base_url`, else
    Google's): a Messages API key is refused here, never sent there."""
    from runner.hosts.workspace import LibraryFiles

    if inputs.api_key.startswith(ANTHROPIC_KEY_PREFIX):
        raise UsageError("the gemini host speaks the Gemini API, and the key it was given is an Anthropic API key: "
                         "it is not sent to a Gemini endpoint (give the host a Gemini API key)")
    settings = inputs.settings
    files = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    parent = work_parent_for(inputs.run_folder)
    cli = GeminiCli(max_attempts=settings.run.host_max_retries + 1, allowed_tools=settings.run.allowed_tools)
    host = AgentCliHost(cli, files, inputs.prices,
                        inputs.api_key, inputs.base_url, work_parent=parent, aliases=inputs.library.aliases(),
                        session_confinement=settings.run.session_confinement,
                        key_proxy=keyproxy.in_front_of(inputs.base_url, keyproxy.GEMINI_URL, inputs.api_key,
                                                       keyproxy.GEMINI_PATHS))
    keep_until_collected(host, parent)
    return host
