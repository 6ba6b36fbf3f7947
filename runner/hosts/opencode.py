"""The opencode host: OpenCode (npm `opencode-ai`, pinned in runner/data/agent_clis.json) run as the real program,
`opencode run --format json`, against the run's Anthropic endpoint through OpenCode's built-in `anthropic` provider.

OpenCode lists the project's skills (here `.agents/skills`) in its system prompt as `<available_skills>`, every
description whole, and the model loads one with its `skill` tool; the JSON stream shows each finished tool call
(completed or error), each model request's steps with its token figures, the text parts and an `error` event, and no
event that ends a session. Isolation: a fresh home and XDG folders per session, the network switches, `--pure`, a
plugin folder whose npm install counts as done (else OpenCode reaches the npm registry), the machine's `rg` (else it
downloads ripgrep). Nothing is left at "ask" (which `opencode run` auto-rejects while exiting 0); a skill call
answered with an error never fires. Measurements and evidence: docs/hosts/opencode.md.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.core.errors import UsageError
from runner.core.host_traits import traits
from runner.core.observation import Activation, Bound, ErrorKind, SessionSpec, ToolCall, Usage
from runner.hosts import agent_cli, agent_install, keyproxy, ratelimit
from runner.hosts.activation import recognise
from runner.hosts.agent_cli import AgentCliHost, Launch, ReadOutcome, cut_input
from runner.hosts.surface import CaptureServer, Surface, cache_shape

if TYPE_CHECKING:
    from runner.hosts.registry import HostInputs
    from runner.hosts.workspace import Workspace

NAME = "opencode"
PACKAGE = "opencode-ai"
PROVIDER = "anthropic"  # OpenCode's built-in provider for the Messages API
TITLE = "skill-evals"  # a session title given: OpenCode then sends no title-generation request first
# What the session may use: OpenCode's read-only tools and `skill`, the way Claude Code's sessions get Skill, Read,
# Glob and Grep. "*" denies every other tool (bash, edit, write, task, webfetch, todowrite...), which OpenCode then
# leaves out of the request; nothing is left at "ask", which `opencode run` would auto-reject.
PERMISSIONS = {"*": "deny", "skill": "allow", "read": "allow", "glob": "allow", "grep": "allow"}
# Switches off what would reach the network or load code that is not the pinned CLI's: the models list
# (models.dev), self-update, default plugins, language servers' downloads, session sharing, a project opencode.json.
SWITCHES = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_PROJECT_CONFIG": "1"}
PLUGIN_PACKAGE = "@opencode-ai/plugin"
# OpenCode's log line (its log file, and stderr with --print-logs) for a model request that failed and that it may
# retry, and the failures among them whose reply the API had begun, and billed: a stream cut or reset, a body that
# is not JSON (measured against the fake). An HTTP error status (not billed) logs the API's own message; a connection
# refused (never reached) logs "Unable to connect".
STREAM_ERROR = 'message="stream error"'
BILLED_FAILURES = re.compile(r'error\.error="AI_APICallError: (Cannot connect to API: (?!Unable to connect)|JSON parsing '
                             r"failed)")
# The stream's `error` names that carry an HTTP answer of the API.
API_ERROR_NAMES = ("APIError",)


def ripgrep() -> Path:
    """The `rg` OpenCode needs; UsageError naming the package when the machine has none."""
    found = shutil.which("rg", path=os.pathsep.join([os.environ.get("PATH", ""), agent_cli.MINIMAL_PATH]))
    if found is None:
        raise UsageError("the opencode host needs ripgrep (`rg`) on PATH: OpenCode lists a skill's files with it and "
                         "would otherwise download it from GitHub (install Debian's `ripgrep`: apt-get install "
                         "ripgrep)")
    return Path(found)


def config(spec: SessionSpec, base_url: str | None, api_key: str) -> dict[str, Any]:
    """The whole configuration OpenCode reads (OPENCODE_CONFIG_CONTENT)."""
    options: dict[str, str] = {"apiKey": api_key}
    if base_url is not None:
        options["baseURL"] = base_url.rstrip("/") + "/v1"  # the AI SDK appends `/messages`
    return {
        "autoupdate": False, "share": "disabled",
        # The model declared, so that an id its bundled snapshot lacks still resolves (a known one keeps its
        # snapshot's limits and prices).
        "provider": {PROVIDER: {"options": options, "models": {spec.model: {}}}},
        "model": f"{PROVIDER}/{spec.model}",
        "permission": dict(PERMISSIONS),
        # OpenCode's only bound on a session's requests: at its `steps`-th request it adds an assistant message
        # ("MAXIMUM STEPS REACHED ... Respond with text only") and still sends the tools. Set one past max_turns, so
        # that the first max_turns requests are the model's own and a session that goes on is told to stop.
        "agent": {"build": {"steps": spec.max_turns + 1}},
    }


def data_home(ws: Workspace) -> Path:
    return ws.root / "data"


def log_dir(ws: Workspace) -> Path:
    """Where OpenCode writes its log: $XDG_DATA_HOME/opencode/log."""
    return data_home(ws) / "opencode" / "log"


def settle_plugin_folder(folder: Path, version: str) -> None:
    """A configuration folder whose plugin package counts as installed: OpenCode skips its npm install (which
    would reach the registry) when the folder has node_modules and a package-lock naming every wanted package.
    No plugin is loaded from it (`--pure`)."""
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    wanted = {PLUGIN_PACKAGE: version}
    (folder / "package.json").write_text(json.dumps({"dependencies": wanted}), encoding="utf-8")
    (folder / "package-lock.json").write_text(json.dumps({"packages": {"": {"dependencies": wanted}}}),
                                              encoding="utf-8")


@dataclass
class OpenCodeCli:
    """runner.hosts.agent_cli.AgentCli for OpenCode."""

    program: Path
    rg: Path
    version: str
    name: str = NAME

    def versions(self) -> dict[str, str]:
        return {PACKAGE: self.version}

    def launch(self, spec: SessionSpec, ws: Workspace, base_url: str | None, api_key: str) -> Launch:
        root = ws.root
        dirs = {"XDG_CONFIG_HOME": ws.config, "XDG_DATA_HOME": data_home(ws), "XDG_CACHE_HOME": root / "cache",
                "XDG_STATE_HOME": root / "state", "TMPDIR": root / "tmp"}
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        settle_plugin_folder(ws.config / "opencode", self.version)
        bin_dir = root / "bin"  # the one `rg`, not the folder it lives in
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "rg").symlink_to(self.rg)
        env = {"PATH": f"{bin_dir}:{agent_cli.node_path()}", "HOME": str(ws.home), "LANG": "C.UTF-8",
               **{key: str(path) for key, path in dirs.items()}, **SWITCHES,
               "OPENCODE_CONFIG_CONTENT": json.dumps(config(spec, base_url, api_key))}
        # The prompt on standard input: as an argument, OpenCode quotes a word with spaces in what it sends.
        # Its warnings and errors on stderr (one line per failed request, an unknown error's cause), whose tail
        # the base puts in a failed session's message; a session that goes well prints none.
        argv = [str(self.program), "run", "--format", "json", "--pure", "--title", TITLE,
                "-m", f"{PROVIDER}/{spec.model}", "--print-logs", "--log-level", "WARN"]
        rg_real = Path(os.path.realpath(self.rg))
        return Launch(argv=argv, env=env, stdin=spec.prompt.encode("utf-8"), reads=[str(rg_real)])

    def reader(self, spec: SessionSpec, ws: Workspace, aliases: dict[str, str]) -> OpenCodeReader:
        return OpenCodeReader(aliases=aliases, max_turns=spec.max_turns, log_dir=log_dir(ws))

    def capture(self) -> CaptureServer:
        return CaptureServer()  # OpenCode's anthropic provider speaks the Messages API, as Claude Code does

    def surface(self, bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
        return surface_of(bodies, library_names, invocable)


# ---- the stream ------------------------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _usage(tokens: Any) -> Usage:
    """One model request's figures as OpenCode reports them (`step_finish.part.tokens`)."""
    if not isinstance(tokens, dict):
        return Usage()
    cache = _dict(tokens.get("cache"))

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    # Reasoning is billed as output; OpenCode counts it apart.
    return Usage(input_tokens=count(tokens.get("input")),
                 output_tokens=count(tokens.get("output")) + count(tokens.get("reasoning")),
                 cache_creation_input_tokens=count(cache.get("write")),
                 cache_read_input_tokens=count(cache.get("read")))


def error_of(error: Any) -> tuple[ErrorKind, str]:
    """The session's error from OpenCode's `error` event."""
    if not isinstance(error, dict):
        return "ambiguous", f"OpenCode reported an error it did not describe: {error!r}"[:500]
    name = str(error.get("name") or "error")
    data = _dict(error.get("data"))
    message = str(data.get("message") or name)
    status = data.get("statusCode")
    if name in API_ERROR_NAMES and isinstance(status, int):
        headers = _dict(data.get("responseHeaders"))
        try:
            body = json.loads(data.get("responseBody") or "null")
        except (TypeError, ValueError):
            body = None
        spend = ratelimit.spend_limit_cause(status, {str(k).lower(): str(v) for k, v in headers.items()}, body)
        if spend is not None:
            return "spend-limit", spend
        if status == 429:
            return "rate-limited", f"HTTP 429 from the API after OpenCode's retries: {message}"
        return "api-error", f"HTTP {status} from the API after OpenCode's retries: {message}"
    return "ambiguous", f"OpenCode ended the session with {name}: {message}"[:500]


@dataclass
class OpenCodeReader:
    """Reads `opencode run --format json`: one event per line (step_start, tool_use, text, step_finish, error)."""

    aliases: dict[str, str]
    max_turns: int | None = None
    log_dir: Path | None = None  # OpenCode's log folder, read once the session has ended
    activations: list[Activation] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0  # model requests begun (step_start)
    finished: int = 0  # model requests whose figures came (step_finish)
    last_reason: str | None = None
    first_input: int | None = None
    cost: float = 0.0
    texts: list[str] = field(default_factory=list)  # the text parts of the latest step that had any
    step_texts: list[str] = field(default_factory=list)
    error: tuple[ErrorKind, str] | None = None
    unreadable: int = 0

    def line(self, text: str) -> None:
        try:
            event = json.loads(text)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            if text.strip():
                self.unreadable += 1
                self.transcript.append({"type": "unreadable", "text": text[:2000]})
            return
        self.transcript.append(event)
        kind = event.get("type")
        part = _dict(event.get("part"))
        if kind == "step_start":
            self.steps += 1
            self.step_texts = []
        elif kind == "tool_use":
            self.tool(part)
        elif kind == "text" and isinstance(part.get("text"), str):
            self.step_texts.append(part["text"])
            self.texts = list(self.step_texts)
        elif kind == "step_finish":
            self.finish(part)
        elif kind == "error":
            self.error = error_of(event.get("error"))

    def over(self) -> Bound | None:
        """`opencode run` has no hard turn limit: the session has passed max_turns once its last allowed model
        request finished asking for tools (the next request goes at once), or a step past it began."""
        if self.max_turns is None:
            return None
        if self.steps > self.max_turns or (self.finished >= self.max_turns and self.last_reason == "tool-calls"):
            return "max-turns"
        return None

    def lost_replies(self) -> int:
        """Requests OpenCode retried after the API had begun (and billed) a reply it lost: its JSON stream does not
        show them, its log does."""
        if self.log_dir is None or not self.log_dir.is_dir():
            return 0
        lines = [line for path in sorted(self.log_dir.glob("*.log"))
                 for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
        return sum(1 for line in lines if STREAM_ERROR in line and BILLED_FAILURES.search(line))

    def tool(self, part: dict[str, Any]) -> None:
        name = str(part.get("tool") or "")
        state = _dict(part.get("state"))
        tool_input = _dict(state.get("input"))
        is_error = state.get("status") != "completed"  # OpenCode prints a call once it is completed or failed
        turn = max(0, self.steps - 1)
        self.tool_calls.append(ToolCall(name=name, input=cut_input(tool_input), turn=turn, is_error=is_error))
        found = recognise(name, tool_input, part.get("callID"), turn, is_error, self.aliases, traits(NAME).activation)
        if found is not None:
            self.activations.append(found)

    def finish(self, part: dict[str, Any]) -> None:
        usage = _usage(part.get("tokens"))
        self.finished += 1
        if self.first_input is None:
            self.first_input = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        self.usage = self.usage.add(usage)
        cost = part.get("cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost += float(cost)
        self.last_reason = str(part.get("reason") or "")

    def outcome(self) -> ReadOutcome:
        # OpenCode prints no end-of-session event: a session ended as it ends one when its last model request
        # finished for a reason other than tool calls (which would have been answered and sent on), with no error.
        ended = self.error is None and self.finished > 0 and self.finished == self.steps \
            and self.last_reason not in (None, "", "tool-calls")
        kind, message = self.error if self.error is not None else (None, None)
        if kind is None and self.unreadable and not self.finished:
            kind, message = "malformed", f"OpenCode printed {self.unreadable} line(s) that are not its JSON events"
        final = "\n".join(self.texts).strip() or None
        return ReadOutcome(
            activations=self.activations, tool_calls=self.tool_calls, final_answer=final, usage=self.usage,
            model_calls=self.steps, turns=self.steps, ended=ended, error_kind=kind, error_message=message,
            host_cost_usd=round(self.cost, 8) if self.finished else None, first_turn_input_tokens=self.first_input,
            transcript=self.transcript, lost_replies=self.lost_replies())


# ---- the surface -----------------------------------------------------------------------------------------------

LISTING = re.compile(r"<available_skills>.*?</available_skills>", re.S)
ENTRY = re.compile(r"<skill>\s*<name>(.*?)</name>(?:\s*<description>(.*?)</description>)?", re.S)


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(block.get("text", "")) for block in system if isinstance(block, dict))
    return ""


def first_session_request(bodies: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session's first model request: the first with tools (a title-generation request has none)."""
    return next((body for body in bodies if body.get("tools")), None)


def surface_of(bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
    body = first_session_request(bodies)
    if body is None:
        return Surface(host=NAME, listing_budget_chars=None, missing=sorted(invocable),
                       error=f"none of the {len(bodies)} captured request(s) is a session's model request (with "
                             "tools)")
    tools = [str(t.get("name", "")) for t in body.get("tools", []) if isinstance(t, dict)]
    request_chars = sum(len(json.dumps(body.get(k, ""))) for k in ("system", "tools", "messages"))
    prefix_chars, layout = cache_shape(body)
    listing = LISTING.search(_system_text(body))
    if listing is None:
        return Surface(host=NAME, listing_budget_chars=None, request_chars=request_chars, tools=tools,
                       cached_prefix_chars=prefix_chars, cache_layout=layout, missing=sorted(invocable),
                       error="the captured request's system prompt holds no <available_skills> listing")
    entries = [(html.unescape(name).strip(), html.unescape(text).strip())
               for name, text in ENTRY.findall(listing.group(0))]
    listed = {name for name, _ in entries}
    return Surface(
        host=NAME, listing_budget_chars=None,
        with_description=[name for name, text in entries if text and name in library_names],
        name_only=[name for name, text in entries if not text and name in library_names],
        not_from_library=sorted(listed - library_names), missing=sorted(invocable - listed),
        listing_chars=len(listing.group(0)), request_chars=request_chars, tools=tools,
        cached_prefix_chars=prefix_chars, cache_layout=layout)


# ---- the host --------------------------------------------------------------------------------------------------


def make(inputs: HostInputs) -> AgentCliHost:
    """An opencode host: its session folders under the run folder's own session-folder parent (removed when the
    host goes), the pinned OpenCode and the machine's ripgrep."""
    from runner.hosts.workspace import LibraryFiles

    settings = inputs.settings
    files = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    cli = OpenCodeCli(program=agent_install.locate(NAME), rg=ripgrep(), version=agent_install.pin(NAME).version)
    parent = agent_cli.work_parent_for(inputs.run_folder)
    host = AgentCliHost(cli, files, inputs.prices, inputs.api_key, inputs.base_url, work_parent=parent,
                        aliases=inputs.library.aliases(), session_confinement=settings.run.session_confinement,
                        key_proxy=keyproxy.in_front_of(inputs.base_url, keyproxy.ANTHROPIC_URL, inputs.api_key,
                                                       keyproxy.MESSAGES_PATHS))
    agent_cli.keep_until_collected(host, parent)
    return host
