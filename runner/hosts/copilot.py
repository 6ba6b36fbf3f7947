"""GitHub Copilot CLI (npm `@github/copilot`) as a host: `copilot -p PROMPT --output-format json`, its model reached
through its bring-your-own-key provider of the Anthropic type at the run's endpoint, offline (no GitHub login, no
telemetry, no update, no GitHub MCP server).

What it shows (CLI 1.0.102, measured; docs/hosts.md "copilot"):
- Activation is a `skill` tool request in its JSON output (`assistant.message.toolRequests`), answered by
  `tool.execution_complete` (success false: an unknown or model-disabled skill, a tool that is not available): a
  tool event. Its `skill.invoked` event is not in that output, only in the session log.
- Token figures are not in that output either: each model call's `session.usage_record` is in the session log
  (`$COPILOT_HOME/session-state/<id>/events.jsonl`), read before the session's folder goes.
- The skills it lists are in its system prompt's `<available_skills>`, within a budget of about 16.7K characters;
  the rest are named in one line ("Additional skills available (invoke by name): ...").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.core.host_traits import traits
from runner.core.observation import Activation, Bound, ErrorKind, SessionSpec, ToolCall, Usage
from runner.hosts import activation as recogniser
from runner.hosts import agent_install, keyproxy
from runner.hosts.agent_cli import (
    AgentCliHost,
    Launch,
    ReadOutcome,
    cut_input,
    keep_until_collected,
    node_path,
    work_parent_for,
)
from runner.hosts.surface import CaptureServer, Surface

if TYPE_CHECKING:
    from runner.hosts.registry import HostInputs
    from runner.hosts.workspace import LibraryFiles, Workspace

HOST_NAME = "copilot"
NAMES = traits(HOST_NAME).activation
# The run's tools ([run] allowed_tools, Claude Code's names) as Copilot CLI names them; others have no equivalent
# there and are left out (docs/hosts.md).
TOOL_NAMES = {"Skill": "skill", "Read": "view", "Glob": "glob", "Grep": "grep", "Bash": "bash", "Edit": "edit",
              "Write": "create", "Task": "task"}
VERSION_TIMEOUT_S = 120.0
_LISTING = re.compile(r"<available_skills>(.*?)</available_skills>", re.S)
_ENTRY = re.compile(r"<skill>\s*<name>(.*?)</name>\s*<description>(.*?)</description>", re.S)
_ADDITIONAL = re.compile(r"Additional skills available \(invoke by name\):([^\n<]*)")


class CopilotReader:
    """Reads one session's `--output-format json` lines, then its session log for the token figures."""

    def __init__(self, spec: SessionSpec, copilot_home: Path, aliases: dict[str, str]):
        self.spec = spec
        self.copilot_home = copilot_home
        self.aliases = aliases
        self.activations: list[Activation] = []
        self.by_call: dict[str, Activation] = {}
        self.calls: dict[str, ToolCall] = {}
        self.tool_calls: list[ToolCall] = []
        self.turns: list[str] = []
        self.final: str | None = None
        self.ended = False
        self.exit_code: int | None = None
        self.error_kind: ErrorKind | None = None
        self.error_message: str | None = None
        self.unreadable: str | None = None
        self.lost = 0
        self.started = 0  # model turns the CLI started (`assistant.turn_start`)
        self.transcript: list[dict[str, Any]] = []

    def line(self, text: str) -> None:
        if not text.strip():
            return
        try:
            event = json.loads(text)
        except ValueError:
            self.unreadable = self.unreadable or f"the CLI printed a line that is not JSON: {text[:200]}"
            return
        if not isinstance(event, dict):
            return
        kind, raw = event.get("type"), event.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if kind not in ("assistant.message_delta", "assistant.tool_call_delta", "session.skills_loaded"):
            self.transcript.append(event)
        if kind == "assistant.message":
            self.on_message(data)
        elif kind == "tool.execution_complete":
            self.on_result(data)
        elif kind == "session.error":
            status = data.get("statusCode")
            self.error_kind = "rate-limited" if status == 429 else "api-error"
            self.error_message = str(data.get("message") or "the CLI reported a session error")[:500]
        elif kind == "model.call_failure" and not isinstance(data.get("statusCode"), int):
            self.lost += 1  # no HTTP status: the reply was cut after the API took the request (a billed request)
        elif kind == "assistant.turn_start":
            self.started += 1
        elif kind == "result":
            self.ended = True
            code = data.get("exitCode")
            self.exit_code = code if isinstance(code, int) else None

    def over(self) -> Bound | None:
        """The CLI has no turn limit: its turn past SessionSpec.max_turns ends the session (max-turns)."""
        return "max-turns" if self.started > self.spec.max_turns else None

    def turn(self, data: dict[str, Any]) -> int:
        key = str(data.get("turnId", len(self.turns)))
        if key not in self.turns:
            self.turns.append(key)
        return self.turns.index(key)

    def on_message(self, data: dict[str, Any]) -> None:
        turn = self.turn(data)
        raw = data.get("toolRequests")
        requests: list[Any] = raw if isinstance(raw, list) else []
        content = data.get("content")
        if isinstance(content, str) and content.strip() and not requests:
            self.final = content
        for request in requests:
            if not isinstance(request, dict):
                continue
            name, arguments, ident = str(request.get("name", "")), request.get("arguments"), request.get("toolCallId")
            call = ToolCall(name=name, input=cut_input(arguments), turn=turn)
            self.tool_calls.append(call)
            if isinstance(ident, str):
                self.calls[ident] = call
            found = recogniser.recognise(name, arguments, ident if isinstance(ident, str) else None, turn,
                                         aliases=self.aliases, names=NAMES)
            if found is not None:
                self.activations.append(found)
                if isinstance(ident, str):
                    self.by_call[ident] = found

    def on_result(self, data: dict[str, Any]) -> None:
        ident = data.get("toolCallId")
        failed = data.get("success") is not True
        if isinstance(ident, str):
            if ident in self.calls:
                self.calls[ident].is_error = failed
            if ident in self.by_call:
                recogniser.apply_result(self.by_call[ident], failed)

    def usage_records(self) -> list[dict[str, Any]]:
        """Each model call's usage from the session log (`session.usage_record`), in order."""
        out: list[dict[str, Any]] = []
        for log in sorted((self.copilot_home / "session-state").glob("*/events.jsonl")):
            try:
                lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for raw in lines:
                try:
                    event = json.loads(raw)
                except ValueError:
                    continue
                data = event.get("data") if isinstance(event, dict) else None
                if event.get("type") == "session.usage_record" and isinstance(data, dict) \
                        and isinstance(data.get("usage"), dict):
                    out.append(data["usage"])
        return out

    def outcome(self) -> ReadOutcome:
        records = self.usage_records()
        usage = Usage()
        for record in records:
            usage = usage.add(record_usage(record))
        first = records[0] if records else None
        kind, message = self.error_kind, self.error_message
        if kind is None and self.exit_code not in (0, None):
            kind, message = "ambiguous", f"the CLI's result says exit code {self.exit_code}"
        if kind is None and self.unreadable is not None:
            kind, message = "malformed", self.unreadable
        return ReadOutcome(
            activations=self.activations, tool_calls=self.tool_calls, final_answer=self.final, usage=usage,
            model_calls=len(records), turns=len(self.turns), ended=self.ended, error_kind=kind, error_message=message,
            first_turn_input_tokens=_count(first.get("inputTokens")) if first else None,
            lost_replies=self.lost, transcript=self.transcript)


def record_usage(record: dict[str, Any]) -> Usage:
    """One `session.usage_record`'s usage as the Messages API counts it: the CLI's `inputTokens` is the whole input,
    its cache reads and writes included (measured against the fake's billing), where the API's `input_tokens` is
    the uncached part only."""
    read, write = _count(record.get("cacheReadTokens")), _count(record.get("cacheWriteTokens"))
    return Usage(input_tokens=max(0, _count(record.get("inputTokens")) - read - write),
                 output_tokens=_count(record.get("outputTokens")), cache_creation_input_tokens=write,
                 cache_read_input_tokens=read)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def listing(bodies: list[dict[str, Any]]) -> tuple[list[str], list[str], int, list[str]] | None:
    """(skills with a description, skills by name only, the listing's characters, tools) of the first Messages
    request that has the skills section, or None."""
    for body in bodies:
        system = body.get("system")
        texts = [block.get("text", "") for block in system if isinstance(block, dict)] \
            if isinstance(system, list) else [system] if isinstance(system, str) else []
        whole = "\n".join(t for t in texts if isinstance(t, str))
        found = _LISTING.search(whole)
        if found is None:
            continue
        described = [name.strip() for name, _ in _ENTRY.findall(found.group(1))]
        extra = _ADDITIONAL.search(whole)
        named = [n.strip() for n in extra.group(1).split(",") if n.strip()] if extra else []
        tools = [t.get("name", "") for t in body.get("tools", []) if isinstance(t, dict)]
        return described, named, len(found.group(0)) + (len(extra.group(0)) if extra else 0), tools
    return None


class CopilotCli:
    """The AgentCli of Copilot CLI (runner.hosts.agent_cli)."""

    name = HOST_NAME

    def __init__(self, program: Path, package_cache: Path, allowed_tools: list[str]):
        self.program = program
        self.package_cache = package_cache
        self.tools = [TOOL_NAMES[t] for t in allowed_tools if t in TOOL_NAMES]
        self._version: str | None = None

    def versions(self) -> dict[str, str]:
        if self._version is None:
            self._version = cli_version(self.program, self.package_cache)
        return {"copilot-cli": self._version}

    def environment(self, ws: Workspace, base_url: str | None, api_key: str, model: str) -> dict[str, str]:
        state = ws.root / "state"
        env = {
            "PATH": node_path(), "HOME": str(ws.home), "TMPDIR": str(ws.root / "tmp"), "LANG": "C.UTF-8",
            "XDG_CONFIG_HOME": str(state / "config"), "XDG_CACHE_HOME": str(state / "cache"),
            "XDG_DATA_HOME": str(state / "data"), "XDG_STATE_HOME": str(state / "state"),
            "COPILOT_HOME": str(ws.config), "COPILOT_CACHE_HOME": str(self.package_cache),
            # No GitHub login, telemetry, web tools, GitHub MCP server or update: only the provider below.
            "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_TYPE": "anthropic", "COPILOT_PROVIDER_API_KEY": api_key, "COPILOT_MODEL": model,
        }
        # No COPILOT_PROVIDER_MAX_OUTPUT_TOKENS: the CLI asks 32,000 output tokens per call whatever it says and
        # refuses a lower maximum ("Output token limit 32000 exceeds the advertised maximum"), so the plan's worst
        # case counts 32,000 (HostTraits.fixed_max_output_tokens).
        if base_url:
            env["COPILOT_PROVIDER_BASE_URL"] = base_url
        return env

    def launch(self, spec: SessionSpec, ws: Workspace, base_url: str | None, api_key: str) -> Launch:
        (ws.root / "tmp").mkdir(exist_ok=True)
        argv = [str(self.program), "--output-format", "json", "--no-auto-update", "--disable-builtin-mcps",
                "--no-custom-instructions", "--dynamic-retrieval", "skills=off", "--no-ask-user",
                f"--available-tools={','.join(self.tools)}", "-p", spec.prompt]
        return Launch(argv=argv, env=self.environment(ws, base_url, api_key, spec.model),
                      reads=[str(self.package_cache), *agent_reads(self.program)])

    def reader(self, spec: SessionSpec, ws: Workspace, aliases: dict[str, str]) -> CopilotReader:
        return CopilotReader(spec, ws.config, aliases)

    def capture(self) -> CaptureServer:
        return CaptureServer()

    def surface(self, bodies: list[dict[str, Any]], library_names: set[str], invocable: set[str]) -> Surface:
        found = listing(bodies)
        if found is None:
            return Surface(host=HOST_NAME, listing_budget_chars=None,
                           error="the CLI's first request has no <available_skills> section")
        described, named, chars, tools = found
        listed = set(described) | set(named)
        return Surface(host=HOST_NAME, listing_budget_chars=None,
                       with_description=[n for n in described if n in library_names],
                       name_only=[n for n in named if n in library_names],
                       not_from_library=sorted(listed - library_names),
                       missing=sorted(invocable - listed), listing_chars=chars,
                       request_chars=len(json.dumps(bodies[0])), tools=tools)


def agent_reads(program: Path) -> list[str]:
    """The CLI's npm install (the launcher and the native package beside it)."""
    real = Path(os.path.realpath(program))
    return [str(real.parents[2])] if len(real.parents) > 2 else [str(real.parent)]


def cli_version(program: Path, package_cache: Path) -> str:
    """`copilot --version`'s version; the first run also unpacks the package into the shared cache."""
    env = {"PATH": node_path(), "HOME": str(package_cache), "COPILOT_CACHE_HOME": str(package_cache),
           "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false", "LANG": "C.UTF-8"}
    try:
        done = subprocess.run([str(program), "--version"], env=env, capture_output=True, text=True,
                              timeout=VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = re.search(r"\d+\.\d+\.\d+\S*", done.stdout)
    return found.group(0).rstrip(".") if found else "unknown"


def package_cache(target: Path) -> Path:
    """Where the CLI's package is unpacked, shared by every session (read-only behind the wall): beside its install."""
    return target / "package-cache"


def after_install(program: Path, target: Path) -> None:
    """Unpack the package once, at install (runner.hosts.agent_install.prepare)."""
    cache = package_cache(target)
    cache.mkdir(parents=True, exist_ok=True)
    cli_version(program, cache)


def make(inputs: HostInputs) -> AgentCliHost:
    from runner.hosts.workspace import LibraryFiles

    settings = inputs.settings
    program = agent_install.locate(HOST_NAME)
    cache = package_cache(agent_install.prefix(agent_install.pin(HOST_NAME)))
    cache.mkdir(parents=True, exist_ok=True)
    cli = CopilotCli(program, cache, settings.run.allowed_tools)
    cli.versions()  # unpacks the package if the install did not, before any session reads it behind its wall
    files: LibraryFiles = LibraryFiles.of(inputs.library, settings.limits.max_file_bytes)
    parent = work_parent_for(inputs.run_folder)
    host = AgentCliHost(cli, files, inputs.prices, inputs.api_key, inputs.base_url, work_parent=parent,
                        aliases=inputs.library.aliases(), session_confinement=settings.run.session_confinement,
                        key_proxy=keyproxy.in_front_of(inputs.base_url, keyproxy.ANTHROPIC_URL, inputs.api_key,
                                                       keyproxy.MESSAGES_PATHS))
    keep_until_collected(host, parent)
    return host
