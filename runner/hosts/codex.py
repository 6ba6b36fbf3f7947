"""The codex host: OpenAI's Codex CLI (npm `@openai/codex`, pinned in runner/data/agent_clis.json) run as the real
program, one `codex exec --json` session per attempt on the agent-CLI base (runner.hosts.agent_cli).

Codex speaks only the OpenAI Responses API; a provider given with `-c` overrides points it at the run's endpoint.
It has no skill tool and no skill event: the model opens a listed skill's SKILL.md with its shell tool, so an
activation is a shell command that prints `.agents/skills/<name>/SKILL.md` (grade `file-read`), and a read that
failed, that Codex refused or that never finished is rejected; a skill a `$name` mention made Codex inject is
the user's loading (`slash-command`). The reader takes the JSON lines, then Codex's session log (every model call,
every function call, the refused ones too, injected skills) before the session's folder goes. The
surface audit compares the first request's listing with the library: Codex shortens descriptions past a budget of
2% of the model's context window.

What was measured on 0.171.0, the isolation and the sandbox: docs/hosts.md ("codex").
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from runner.core.host_traits import ActivationNames, traits
from runner.core.observation import Activation, Bound, ErrorKind, SessionSpec, ToolCall, Usage
from runner.hosts import agent_install, keyproxy
from runner.hosts.activation import skill_md_name
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
from runner.hosts.workspace import Workspace

if TYPE_CHECKING:
    from runner.hosts.registry import HostInputs

NAME = "codex"
NAMES = traits(NAME).activation
SHELL_TOOL = NAMES.read_tool  # exec_command
PROVIDER = "skill_evals"  # the provider id of the -c overrides (a TOML bare key)
KEY_VARIABLE = "SKILL_EVALS_CODEX_API_KEY"  # the provider's env_key: the only place the key is given to the CLI
OPENAI_URL = "https://api.openai.com/v1"
CATALOG_TIMEOUT_S = 60.0


# ---- the session -----------------------------------------------------------------------------------------------------

def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def config_overrides(base_url: str, retries: int | None) -> list[str]:
    """The `-c` overrides every session runs with (the module docstring's isolation)."""
    provider = f"model_providers.{PROVIDER}"
    # inherit "core": the commands the model runs get HOME, PATH, SHELL, USER, TMPDIR and no more (by default they
    # got Codex's whole environment, the key's variable included: measured with `env` in a session).
    pairs = [("analytics.enabled", "false"), ("check_for_update_on_startup", "false"),
             ("shell_environment_policy.inherit", toml_string("core")),
             ("web_search", toml_string("disabled")), ("model_provider", PROVIDER),
             (f"{provider}.name", toml_string("skill-evals")), (f"{provider}.base_url", toml_string(base_url)),
             (f"{provider}.env_key", toml_string(KEY_VARIABLE)), (f"{provider}.wire_api", toml_string("responses"))]
    if retries is not None:
        pairs += [(f"{provider}.request_max_retries", str(retries)), (f"{provider}.stream_max_retries", str(retries))]
    return [word for key, value in pairs for word in ("-c", f"{key}={value}")]


@dataclass
class CodexCli:
    """runner.hosts.agent_cli.AgentCli for Codex CLI."""

    # Codex's own retries of a failed request and of a cut stream (request_max_retries, stream_max_retries);
    # None: its defaults. A failure after them is the session's error.
    retries: int | None = None
    # The library's descriptions, by skill name: the surface audit tells a shortened description by them.
    descriptions: dict[str, str] = field(default_factory=dict)
    # Codex's own sandbox for the commands the model runs (bubblewrap: read-only, no network, its own process
    # namespace). It cannot start behind the Landlock wall (bubblewrap must write /proc/self/uid_map, which the wall
    # makes read-only; Codex's older Landlock-only sandbox refuses to run without bubblewrap), so behind the wall
    # the commands run in the wall alone (`danger-full-access`: they write only the session's folder, read only the
    # system and it, and may use the network). make() sets it from the host's wall.
    own_sandbox: bool = True
    name: str = NAME

    def versions(self) -> dict[str, str]:
        return {"codex-cli": agent_install.pin(NAME).version}

    def launch(self, spec: SessionSpec, ws: Workspace, base_url: str | None, api_key: str) -> Launch:
        program = agent_install.locate(NAME)
        codex_home = ws.home / ".codex"  # must exist: Codex refuses a CODEX_HOME that does not
        tmp = ws.root / "tmp"
        codex_home.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(exist_ok=True)
        env = {"PATH": node_path(), "HOME": str(ws.home), "CODEX_HOME": str(codex_home), "TMPDIR": str(tmp),
               "LANG": "C.UTF-8", KEY_VARIABLE: api_key}
        argv = [str(program), "exec", "--json", "--skip-git-repo-check", "--ignore-user-config", "--ignore-rules",
                "--sandbox", "read-only" if self.own_sandbox else "danger-full-access", "--disable", "plugins",
                *config_overrides(base_url or OPENAI_URL, self.retries), "-m", spec.model, "-"]
        # The npm prefix holds the launcher and the native binary it starts (another package beside it).
        return Launch(argv=argv, env=env, stdin=spec.prompt.encode(),
                      reads=[str(agent_install.prefix(agent_install.pin(NAME)))])

    def reader(self, spec: SessionSpec, ws: Workspace, aliases: dict[str, str]) -> CodexReader:
        return CodexReader(ws.home / ".codex", aliases, max_turns=spec.max_turns)

    def capture(self) -> CaptureServer:
        return CaptureServer()

    def surface(self, bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
        first = bodies[0]
        window = context_window(str(first.get("model") or ""))
        return surface_of(first, library_names, invocable, self.descriptions, listing_budget(window))


# ---- reading a command -----------------------------------------------------------------------------------------------

# Programs that print a file they are given (a search such as grep or rg shows only matches: it is not a read).
READERS = frozenset({"cat", "bat", "batcat", "nl", "head", "tail", "sed", "awk", "less", "more", "tac", "view"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def inner_script(command: str) -> str:
    """The script a `/bin/bash -lc '<script>'` command line runs (Codex's wrapping of the model's cmd); else the line."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) >= 3 and posixpath.basename(words[0]) in SHELLS and words[1].startswith("-") \
            and words[1].endswith("c"):
        return words[2]
    return command


def _words(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.whitespace = " \t\r"  # a newline separates commands
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: nothing can be said of it
        return []


def _simple_commands(words: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for word in words:
        if word in SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _prints(words: list[str]) -> bool:
    """Whether a simple command's standard output reaches the model: not when it is redirected to a file (`2>` is
    its errors only)."""
    return not any(word == ">" and (i == 0 or words[i - 1] != "2") for i, word in enumerate(words))


def files_read(command: str) -> list[str]:
    """The files a shell command prints for the model, as it names them (joined to a `cd` before them): the arguments
    of a reader program (READERS) that are not options (a file redirected into it, `< file`, too); nothing of a
    command whose output goes to a file."""
    here = ""
    read: list[str] = []
    for words in _simple_commands(_words(inner_script(command))):
        while words and ASSIGNMENT.match(words[0]):
            words = words[1:]
        if not words:
            continue
        if words[0] == "cd" and len(words) == 2:
            here = posixpath.join(here, words[1])
            continue
        if not _prints(words):
            continue
        program = posixpath.basename(words[0])
        for i, word in enumerate(words[1:], start=1):
            before = words[i - 1]
            if program in READERS and not word.startswith("-") and word not in ("<", ">") and before != ">":
                read.append(posixpath.join(here, word) if here else word)
    return read


def skills_read(command: str, names: ActivationNames = NAMES) -> list[str]:
    """The skills whose SKILL.md (in the project's skills folder) a shell command reads, in order, without repeats."""
    found: list[str] = []
    for path in files_read(command):
        name = skill_md_name(path, names)
        if name is not None and name not in found:
            found.append(name)
    return found


# ---- the reader --------------------------------------------------------------------------------------------------

class JsonUsage(BaseModel):
    """`turn.completed.usage` and a session log's per-response usage, as Codex prints them."""

    model_config = ConfigDict(extra="ignore")
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0

    def usage(self) -> Usage:
        """As the runner counts: input without what came from or went to the cache (OpenAI's input_tokens holds the
        cached tokens; reasoning tokens are part of output_tokens)."""
        cached = self.cached_input_tokens + self.cache_write_input_tokens
        return Usage(input_tokens=max(0, self.input_tokens - cached), output_tokens=self.output_tokens,
                     cache_creation_input_tokens=self.cache_write_input_tokens,
                     cache_read_input_tokens=self.cached_input_tokens)


@dataclass
class ShellCall:
    """One shell command the model asked for, and what became of it."""

    command: str  # the model's `cmd` (stdout shows it inside Codex's `/bin/bash -lc '...'`)
    turn: int
    status: str  # completed | failed | declined (Codex never ran it) | in_progress (never finished)
    exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed" and self.exit_code == 0


@dataclass
class SessionLog:
    """What Codex's session log holds: each model call, each function call with its turn and fate."""

    model_calls: int = 0
    usages: list[JsonUsage] = field(default_factory=list)
    shell_calls: list[ShellCall] = field(default_factory=list)
    other_calls: list[ToolCall] = field(default_factory=list)
    last_message: str | None = None
    injected: list[tuple[str, int]] = field(default_factory=list)  # (SKILL.md path, turn) Codex put in the request
    sandbox_failure: str | None = None  # what a command's output said when Codex's sandbox could not start it


EXIT_CODE = re.compile(r"Process exited with code (-?\d+)")
# What a command's output says when Codex's sandbox could not start it (measured behind the Landlock wall: "error
# building bubblewrap command: Permission denied", "bwrap: setting up uid map: Permission denied", a linux-sandbox
# panic): the model's commands cannot run at all, so what the session shows is not the model's doing.
SANDBOX_FAILURE = re.compile(r"error building bubblewrap command|^bwrap: .*|panicked at linux-sandbox.*", re.M)
# A skill the user named (`$name` in the prompt): Codex adds it to the request as a user message of its own.
INJECTED_SKILL = re.compile(r"\A<skill>\n<name>[^<]*</name>\n<path>(?P<path>[^<]+)</path>")
# What Codex says of a reply it began to read and lost (a cut stream, a response.failed, an SSE error event): the
# API may have billed it.
LOST_REPLY = "stream disconnected before completion"


class LogTail:
    """Follows Codex's session log while the session runs, for the model turns it has started: a response whose
    function calls all have their results is followed by the next request."""

    def __init__(self, codex_home: Path | None):
        self.codex_home = codex_home
        self.path: Path | None = None
        self.offset = 0
        self.responses = 0
        self.pending: set[str] = set()  # the calls of the response being read
        self.last_calls: set[str] = set()  # the calls of the last response read whole
        self.answered: set[str] = set()  # calls with a result

    def started(self) -> int:
        self._read()
        follows = bool(self.last_calls) and self.last_calls <= self.answered
        return self.responses + (1 if follows else 0)

    def _read(self) -> None:
        if self.path is None and self.codex_home is not None:
            self.path = next(iter(sorted(self.codex_home.glob("sessions/*/*/*/rollout-*.jsonl"))), None)
        if self.path is None:
            return
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return
        whole = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written is read next time
        self.offset += len(whole)
        for raw in whole.splitlines():
            with contextlib.suppress(ValueError):
                self._take(json.loads(raw))

    def _take(self, entry: Any) -> None:
        payload = entry.get("payload") if isinstance(entry, dict) else None
        if not isinstance(payload, dict):
            return
        kind = entry.get("type")
        if kind == "token_usage_record":
            self.responses += 1
            self.last_calls, self.pending = self.pending, set()
        elif kind == "response_item" and payload.get("type") == "function_call":
            self.pending.add(str(payload.get("call_id")))
        elif kind == "response_item" and payload.get("type") == "function_call_output":
            self.answered.add(str(payload.get("call_id")))


def _session_log_lines(codex_home: Path) -> list[dict[str, Any]]:
    paths = sorted(codex_home.glob("sessions/*/*/*/rollout-*.jsonl"))
    out: list[dict[str, Any]] = []
    for path in paths:
        with contextlib.suppress(OSError):
            for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    entry = json.loads(raw)
                    if isinstance(entry, dict) and isinstance(entry.get("payload"), dict):
                        out.append(entry)
    return out


def read_session_log(codex_home: Path) -> SessionLog | None:
    """The session log Codex wrote under `codex_home`, or None when there is none."""
    entries = _session_log_lines(codex_home)
    if not entries:
        return None
    log = SessionLog()
    calls: list[tuple[str, str, str, int]] = []  # call_id, name, arguments, turn
    executed: dict[str, dict[str, Any]] = {}
    outputs: dict[str, str] = {}
    for entry in entries:
        kind, payload = entry.get("type"), entry["payload"]
        if kind == "token_usage_record":
            log.model_calls += 1
            with contextlib.suppress(ValidationError):
                log.usages.append(JsonUsage.model_validate(payload.get("usage") or {}))
        elif kind == "response_item" and payload.get("type") == "function_call":
            calls.append((str(payload.get("call_id")), str(payload.get("name")), str(payload.get("arguments") or ""),
                          log.model_calls))
        elif kind == "response_item" and payload.get("type") == "function_call_output":
            output = payload.get("output")
            outputs[str(payload.get("call_id"))] = output if isinstance(output, str) else json.dumps(output)
            failure = SANDBOX_FAILURE.search(outputs[str(payload.get("call_id"))])
            log.sandbox_failure = log.sandbox_failure or (failure.group(0) if failure else None)
        elif kind == "response_item" and payload.get("type") == "message" and payload.get("role") == "user":
            for part in payload.get("content") or []:
                found = INJECTED_SKILL.match(part.get("text") or "") if isinstance(part, dict) else None
                if found:
                    log.injected.append((found.group("path"), log.model_calls))
        elif kind == "event_msg" and payload.get("type") == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "CommandExecution":
                executed[str(item.get("id"))] = item
        elif kind == "event_msg" and payload.get("type") == "task_complete":
            message = payload.get("last_agent_message")
            log.last_message = message if isinstance(message, str) else log.last_message
    for call_id, name, arguments, turn in calls:
        try:
            args = json.loads(arguments)
        except ValueError:
            args = None
        if name == SHELL_TOOL and isinstance(args, dict) and isinstance(args.get("cmd"), str):
            log.shell_calls.append(_fate(args["cmd"], turn, executed.get(call_id), outputs.get(call_id)))
        else:
            log.other_calls.append(ToolCall(name=name, input=cut_input(args if args is not None else arguments),
                                            turn=turn, is_error=None))
    return log


def _fate(cmd: str, turn: int, execution: dict[str, Any] | None, output: str | None) -> ShellCall:
    """A shell call's status from its execution, else its output (Codex refused it: no execution), else none yet."""
    if execution is not None:
        code = execution.get("exit_code")
        return ShellCall(cmd, turn, str(execution.get("status") or "failed"), code if isinstance(code, int) else None)
    if output is not None:
        found = EXIT_CODE.search(output)
        return ShellCall(cmd, turn, "declined", int(found.group(1)) if found else None)
    return ShellCall(cmd, turn, "in_progress")


def error_kind_of(message: str) -> ErrorKind:
    """A failed turn's kind, from the message Codex printed for it (measured: 429 -> "exceeded retry limit, last
    status: 429 Too Many Requests", a response.failed rate limit -> "rate limit exceeded: ...", insufficient_quota
    -> "Quota exceeded. Check your plan and billing details."; everything else is the API's or the stream's)."""
    lowered = message.lower()
    if "quota exceeded" in lowered:
        return "spend-limit"
    if "status: 429" in lowered or "rate limit" in lowered or "too many requests" in lowered:
        return "rate-limited"
    return "api-error"


class CodexReader:
    """Reads `codex exec --json` lines; at the end, Codex's session log for what stdout does not show."""

    def __init__(self, codex_home: Path | None, aliases: dict[str, str] | None = None,
                 names: ActivationNames = NAMES, max_turns: int | None = None):
        self.codex_home = codex_home
        self.aliases = aliases or {}
        self.names = names
        self.max_turns = max_turns
        self.tail = LogTail(codex_home)
        self.stopped: Bound | None = None
        self.lost = 0  # replies begun and lost that Codex retried
        self.transcript: list[dict[str, Any]] = []
        self.commands: list[ShellCall] = []  # command_execution items, in order of their start
        self.started: dict[str, int] = {}  # item id -> index in commands
        self.other_calls: list[ToolCall] = []
        self.messages: list[str] = []
        self.usage: JsonUsage | None = None
        self.failure: str | None = None
        self.last_error: str | None = None
        self.ended = False

    # -- stdout ------------------------------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        if not text.strip():
            return
        try:
            event = json.loads(text)
        except ValueError:  # Codex prints only JSON with --json: kept for the transcript, read no further
            self.transcript.append({"type": "non-json", "text": text[:2000]})
            return
        if not isinstance(event, dict):
            return
        self.transcript.append(event)
        kind = event.get("type")
        item = event.get("item")
        if kind in ("item.started", "item.completed") and isinstance(item, dict):
            self._item(item, done=kind == "item.completed")
        elif kind == "turn.completed":
            self.ended = True
            with contextlib.suppress(ValidationError):
                self.usage = JsonUsage.model_validate(event.get("usage") or {})
        elif kind == "turn.failed":
            self.ended = True
            error = event.get("error")
            self.failure = str(error.get("message") if isinstance(error, dict) else error or "the turn failed")
        elif kind == "error":
            message = str(event.get("message") or "")
            if message.startswith("Reconnecting..."):  # a retry Codex makes itself: not the session's end
                self.lost += LOST_REPLY in message
            else:
                self.last_error = message

    def _item(self, item: dict[str, Any], done: bool) -> None:
        kind, item_id = item.get("type"), str(item.get("id"))
        if kind == "command_execution":
            code = item.get("exit_code")
            call = ShellCall(inner_script(str(item.get("command") or "")), self._estimated_turn(),
                             str(item.get("status") or "in_progress"), code if isinstance(code, int) else None)
            if item_id in self.started:
                self.commands[self.started[item_id]] = call
            else:
                self.started[item_id] = len(self.commands)
                self.commands.append(call)
        elif kind == "agent_message" and done and isinstance(item.get("text"), str):
            self.messages.append(item["text"])
        elif done and kind in ("mcp_tool_call", "web_search", "file_change"):
            self.other_calls.append(ToolCall(name=str(kind), input=cut_input({k: v for k, v in item.items()
                                                                                  if k not in ("id", "type")}),
                                             turn=self._estimated_turn(), is_error=item.get("status") == "failed"))

    def _estimated_turn(self) -> int:
        """Without the session log: each finished command counts as a model turn before the next (exact when the
        model asks for one command per reply)."""
        return sum(1 for c in self.commands if c.status != "in_progress")

    def over(self) -> Bound | None:
        """`codex exec` takes no turn limit: the session has passed SessionSpec.max_turns once its session log shows
        it started a model turn more (the results of the last response's calls are in, so the next request goes)."""
        if self.stopped is None and not self.ended and self.max_turns is not None \
                and self.tail.started() > self.max_turns:
            self.stopped = "max-turns"
        return self.stopped

    # -- the end -----------------------------------------------------------------------------------------------------
    def outcome(self) -> ReadOutcome:
        log = read_session_log(self.codex_home) if self.codex_home is not None else None
        shell_calls = self._shell_calls(log)
        activations = self._injected(log) + [activation for call in shell_calls for activation in self._activations(call)]
        tool_calls = [ToolCall(name=SHELL_TOOL, input=cut_input({"cmd": c.command}), turn=c.turn, is_error=not c.ok)
                      for c in shell_calls] + (log.other_calls if log is not None else self.other_calls)
        tool_calls.sort(key=lambda call: call.turn)
        usage = self.usage.usage() if self.usage is not None else _summed(log.usages if log is not None else [])
        model_calls = log.model_calls if log is not None else self._estimated_turn() + (1 if self.messages else 0)
        first = log.usages[0].input_tokens if log is not None and log.usages else None
        error_kind: ErrorKind | None = None
        error_message: str | None = None
        if self.failure is not None:
            error_kind, error_message = error_kind_of(self.failure), self.failure
        elif log is not None and log.sandbox_failure is not None:
            error_kind = "host-crash"
            error_message = f"Codex's sandbox could not run the model's commands: {log.sandbox_failure}"
        elif not self.ended and self.last_error is not None:  # it said why, then ended without turn.failed
            error_kind, error_message = error_kind_of(self.last_error), self.last_error
        elif self.ended and self.usage is None:
            error_kind, error_message = "malformed", "turn.completed carried no usage Codex's figures could be read from"
        final = self.messages[-1] if self.messages else (log.last_message if log is not None else None)
        if self.stopped is not None and self.max_turns is not None:
            # The session was killed once a turn past the bound had started: what that turn did is not the session's.
            activations = [a for a in activations if a.turn < self.max_turns]
            tool_calls = [t for t in tool_calls if t.turn < self.max_turns]
        lost = self.lost + (1 if self.failure is not None and LOST_REPLY in self.failure else 0)
        return ReadOutcome(activations=activations, tool_calls=tool_calls, final_answer=final, usage=usage,
                           model_calls=model_calls, turns=model_calls, ended=self.ended, error_kind=error_kind,
                           error_message=error_message, first_turn_input_tokens=first, lost_replies=lost,
                           transcript=self.transcript)

    def _shell_calls(self, log: SessionLog | None) -> list[ShellCall]:
        """The session log's calls (exact turns; refused ones too), each with its execution as stdout showed it; only
        stdout's when there is no log."""
        if log is None:
            return list(self.commands)
        shown = list(self.commands)
        calls: list[ShellCall] = []
        for call in log.shell_calls:
            # A refused call has no execution, on stdout either; an executed one is stdout's next with its text.
            match = None if call.status == "declined" else \
                next((i for i, seen in enumerate(shown) if seen.command == call.command), None)
            seen = shown.pop(match) if match is not None else None
            if seen is not None and call.status == "in_progress":  # the log stopped short of what stdout saw
                call = ShellCall(call.command, call.turn, seen.status, seen.exit_code)
            calls.append(call)
        return calls

    def _injected(self, log: SessionLog | None) -> list[Activation]:
        """The skills a `$name` mention made Codex put into the request whole (no read, nothing on stdout): loaded
        by the user's naming, as a `/name` prompt is in Claude Code."""
        out: list[Activation] = []
        for path, turn in log.injected if log is not None else []:
            name = skill_md_name(path, self.names)
            if name is not None:
                out.append(Activation(name=self.aliases.get(name, name), mechanism="slash-command", turn=turn))
        return out

    def _activations(self, call: ShellCall) -> list[Activation]:
        # A read that failed, that Codex refused, or that never finished loaded nothing: rejected, never fired.
        return [Activation(name=self.aliases.get(name, name), mechanism="skill-md-read", turn=call.turn,
                           rejected=not call.ok) for name in skills_read(call.command, self.names)]


def _summed(usages: list[JsonUsage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total.add(usage.usage())
    return total


# ---- the surface audit -------------------------------------------------------------------------------------------

class _CaptureHandler(CaptureHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.json_body()
        if isinstance(body, dict) and self.path.split("?")[0].rstrip("/").endswith("/responses"):
            self.server.captured.append(body)
        self.end_session(body if isinstance(body, dict) else {})

    def end_session(self, body: dict[str, Any]) -> None:
        """An empty completed response: the session ends at once, with nothing billed."""
        response: dict[str, Any] = {"id": "resp_capture", "object": "response", "status": "completed", "model": body.get("model"),
                    "output": [], "usage": {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0},
                                            "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                                            "total_tokens": 0}}
        events = [{"type": "response.created", "response": {**response, "status": "in_progress", "usage": None}},
                  {"type": "response.completed", "response": response}]
        data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        self.send_whole(200, data, "text/event-stream")


class CaptureServer(CaptureEndpoint):
    """Records Responses API requests on 127.0.0.1 and answers each with an empty completed response."""

    def __init__(self) -> None:
        super().__init__(_CaptureHandler, base_path="/v1")  # Codex's base_url: it adds /responses


LISTING_OPEN = "<skills_instructions>"
ENTRIES_HEADER = "### Available skills"
ROOTS_HEADER = "### Skill roots"
ROOT_LINE = re.compile(r"^- `(?P<alias>[^`]+)` = `(?P<path>[^`]+)`$")
# The listing's budget (Codex's skills render): 2% of the model's context window, in tokens of 4 bytes; 8,000
# characters when the window is unknown. A model Codex's catalog does not list gets its fallback metadata, whose
# window measured 272,000 tokens (the listing of 0.171.0 was cut at 21,760 bytes of entries, 5,440 tokens).
BUDGET_PERCENT = 2
BYTES_PER_TOKEN = 4
UNKNOWN_WINDOW_CHARS = 8_000
FALLBACK_WINDOW = 272_000


@dataclass(frozen=True)
class ListedSkill:
    name: str  # the folder of its SKILL.md: the library's name for it
    description: str  # as listed ("" when listed without one)
    root: str  # the folder it was listed from (its root alias expanded)


def listing_text(body: dict[str, Any]) -> str | None:
    """The `<skills_instructions>` text of a Responses request, or None."""
    for item in body.get("input") or []:
        for part in item.get("content") or [] if isinstance(item, dict) else []:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and LISTING_OPEN in text:
                return text
    return None


def parse_listing(text: str) -> list[ListedSkill]:
    """Each entry `- <name>: <description> (file: <root alias or folder>/<folder>/SKILL.md)` of the listing."""
    roots: dict[str, str] = {}
    listed: list[ListedSkill] = []
    section = ""
    for line in text.splitlines():
        if line.startswith("#") or line.startswith("<"):
            section = line.strip()
            continue
        root = ROOT_LINE.match(line)
        if section == ROOTS_HEADER and root:
            roots[root.group("alias")] = root.group("path")
        elif section == ENTRIES_HEADER and line.startswith("- ") and line.endswith(")") and " (file: " in line:
            head, _, locator = line[2:-1].rpartition(" (file: ")
            if not head.endswith(":") and ": " not in head:
                continue
            description = head.partition(": ")[2] if ": " in head else ""
            path = PurePosixPath(locator)
            alias = path.parts[0] if path.parts else ""
            folder = PurePosixPath(roots[alias], *path.parts[1:]) if alias in roots else path
            listed.append(ListedSkill(name=folder.parent.name, description=description.strip(),
                                      root=str(folder.parent.parent)))
    return listed


def _same_text(text: str) -> str:
    return " ".join(text.split())


def context_window(model: str) -> int | None:
    """The model's context window in Codex's own catalog (`codex debug models`, offline); the fallback window for a
    model it does not list; None when the catalog cannot be read."""
    try:
        program = agent_install.locate(NAME)
    except agent_install.CliMissing:
        return None
    with tempfile.TemporaryDirectory(prefix="skill-evals-codex-") as home:
        codex_home = Path(home) / ".codex"
        codex_home.mkdir()
        try:
            done = subprocess.run([str(program), "debug", "models"], capture_output=True, text=True, check=False,
                                  timeout=CATALOG_TIMEOUT_S, stdin=subprocess.DEVNULL,
                                  env={"PATH": node_path(), "HOME": home, "CODEX_HOME": str(codex_home),
                                       "TMPDIR": home})
            catalog = json.loads(done.stdout)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return None
    models = catalog.get("models") if isinstance(catalog, dict) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and entry.get("slug") == model and isinstance(entry.get("context_window"), int):
            window: int = entry["context_window"]
            return window
    return FALLBACK_WINDOW


def listing_budget(window: int | None) -> int:
    """Codex's listing budget in characters (bytes) for a model with this context window."""
    if window is None:
        return UNKNOWN_WINDOW_CHARS
    return window * BUDGET_PERCENT // 100 * BYTES_PER_TOKEN


def surface_of(body: dict[str, Any], library_names: set[str], invocable: set[str], descriptions: dict[str, str],
               budget: int | None) -> Surface:
    """What Codex's first request listed of the library: with a description (whole or shortened), shortened (`cut`),
    without one, not at all; the bundled skills beside them."""
    tools = [str(t.get("name") or t.get("type") or "") for t in body.get("tools") or [] if isinstance(t, dict)]
    request_chars = sum(len(json.dumps(body.get(k, ""))) for k in ("instructions", "tools", "input"))
    text = listing_text(body)
    if text is None:
        return Surface(host=NAME, listing_budget_chars=budget, request_chars=request_chars, tools=tools,
                       missing=sorted(invocable), error="the captured request holds no skill listing")
    folder = NAMES.skills_folder_parts
    listed = parse_listing(text)
    ours = [s for s in listed if s.name in library_names and PurePosixPath(s.root).parts[-len(folder):] == folder]
    names = {s.name for s in ours}
    cut = [s.name for s in ours if s.description and s.name in descriptions
           and _same_text(s.description) != _same_text(descriptions[s.name])]
    return Surface(
        host=NAME, listing_budget_chars=budget,
        with_description=[s.name for s in ours if s.description], name_only=[s.name for s in ours if not s.description],
        cut=cut, not_from_library=sorted({s.name for s in listed} - names), missing=sorted(invocable - names),
        listing_chars=len(text), request_chars=request_chars, tools=tools)


# ---- the host ----------------------------------------------------------------------------------------------------

def make(inputs: HostInputs) -> AgentCliHost:
    from runner.hosts.workspace import LibraryFiles

    settings = inputs.settings
    parent = work_parent_for(inputs.run_folder)
    descriptions = {name: skill.description or "" for name, skill in inputs.library.skills.items()}
    cli = CodexCli(retries=settings.run.host_max_retries, descriptions=descriptions)
    # The model's commands may read Codex's own environment: the key stays in the runner (runner.hosts.keyproxy).
    proxy = keyproxy.in_front_of(inputs.base_url, OPENAI_URL, inputs.api_key, (re.compile(r"/responses"),))
    host = AgentCliHost(cli, LibraryFiles.of(inputs.library, settings.limits.max_file_bytes), inputs.prices,
                        inputs.api_key, inputs.base_url, work_parent=parent, aliases=inputs.library.aliases(),
                        session_confinement=settings.run.session_confinement, key_proxy=proxy)
    cli.own_sandbox = host.session_wall is None or host.session_wall.mode != "landlock"
    keep_until_collected(host, parent)
    return host


__all__ = ["CodexCli", "CodexReader", "CaptureServer", "make", "skills_read", "files_read", "surface_of",
           "parse_listing", "read_session_log", "error_kind_of"]
