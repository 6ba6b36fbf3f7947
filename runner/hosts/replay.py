"""The replay host: Observations rebuilt from a previous run folder, for re-judging and tests.

No model is called. `run(spec)` returns what `<run>/attempts.jsonl` recorded for
`spec.attempt_id`, with the transcript from `<run>/transcripts/`. Activations come from the
transcript when it shows them, recognised as every host recognises them (runner.hosts.activation:
Skill tool calls, reads of `.claude/skills/<name>/SKILL.md`, Task/Agent subagent calls, a `/name`
command; a call answered with an error tool_result is `rejected`); otherwise from the recorded
outcome's `fired` list, as Skill tool activations (turn 0, mechanism unknown to the record). A
transcript is read in the forms hosts record: Messages API messages (the api host), stream-json
events, and the claude-code host's SDK messages (`{"_type": "AssistantMessage", "message_id", "content":
[{"id", "name", "input"}]}`, `{"_type": "UserMessage", "content": [{"tool_use_id", "is_error"}]}`).
An attempt id the run does not hold is an `ambiguous` error observation. The surface is the one the run
recorded (`<run>/surface.json`), or one whose error says there is none: a replay measures nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from runner.core.observation import Activation, Observation, SessionSpec, ToolCall, Usage
from runner.hosts.activation import Turns, recognise, slash_command
from runner.hosts.surface import Surface

if TYPE_CHECKING:
    import anthropic

    from runner.hosts.sessionpath import SessionPath
    from runner.hosts.wall import SessionWall

HOST_NAME = "replay"
RECORDED_SURFACE = "surface.json"  # runner.execute.rundir.SURFACE: the audit the recorded run wrote
TOOL_INPUT_CHARS = 300
# The claude-code host's transcript entries (runner.hosts.claude_code._as_dict of the SDK's messages).
_SDK_ROLES = {"AssistantMessage": "assistant", "UserMessage": "user"}


def _block(block: dict[str, Any]) -> dict[str, Any]:
    """A content block with its `type`; the SDK's blocks (claude-code transcripts) carry none."""
    if "type" in block:
        return block
    if "tool_use_id" in block:
        return {"type": "tool_result", **block}
    if {"id", "name", "input"} <= block.keys():
        return {"type": "tool_use", **block}
    if "text" in block:
        return {"type": "text", **block}
    return block


def _content(entry: Any) -> tuple[str | None, str | None, Any, list[dict[str, Any]]]:
    """(role, message id, raw content, content blocks) of a transcript entry: a Messages API message, a stream-json
    event, or one of the claude-code host's SDK messages."""
    if not isinstance(entry, dict):
        return None, None, None, []
    inner = entry.get("message")
    message: dict[Any, Any] = inner if isinstance(inner, dict) else entry
    sdk_type = entry.get("_type")
    role = message.get("role") or (_SDK_ROLES.get(sdk_type) if isinstance(sdk_type, str) else None) or entry.get("type")
    message_id = message.get("message_id") if "_type" in entry else message.get("id")
    content = message.get("content")
    blocks = [_block(b) for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    return role, message_id if isinstance(message_id, str) else None, content, blocks


def _command(entry: Any, content: Any, blocks: list[dict[str, Any]]) -> Activation | None:
    """A `/name` command's activation from a user message before the first reply (runner.hosts.activation)."""
    if not isinstance(entry, dict) or entry.get("parent_tool_use_id") is not None:
        return None
    if isinstance(content, str):
        return slash_command(content)
    if "_type" in entry:  # the claude-code host reads the CLI's echo of the command, a plain string, only
        return None
    # The api host sends the command as text blocks (runner.hosts.api._Session.expand_command).
    return slash_command("".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)))


def _from_transcript(transcript: list[Any], aliases: dict[str, str] | None = None,
                     ) -> tuple[list[Activation], list[ToolCall]]:
    errors = {block.get("tool_use_id") for entry in transcript for block in _content(entry)[3]
              if block.get("type") == "tool_result" and block.get("is_error")}
    activations: list[Activation] = []
    calls: list[ToolCall] = []
    turns = Turns()
    for entry in transcript:
        role, message_id, content, blocks = _content(entry)
        if role == "user" and not turns.count:
            command = _command(entry, content, blocks)
            if command is not None:
                activations.append(command)
        if role != "assistant":
            continue
        turn = turns.of(message_id)
        for block in blocks:
            if block.get("type") != "tool_use":
                continue
            name, tool_input, use_id = block.get("name"), block.get("input") or {}, block.get("id")
            rejected = use_id in errors
            calls.append(ToolCall(name=str(name), input=json.dumps(tool_input, ensure_ascii=False)[:TOOL_INPUT_CHARS],
                                  turn=turn, is_error=rejected))
            activation = recognise(str(name), tool_input, use_id if isinstance(use_id, str) else None, turn,
                                   is_error=rejected, aliases=aliases)
            if activation is not None:
                activations.append(activation)
    return activations, calls


class ReplayHost:
    name = HOST_NAME
    session_path: SessionPath | None = None  # no session runs, so none has a folder
    session_wall: SessionWall | None = None  # nor a process

    def __init__(self, run_dir: Path, aliases: dict[str, str] | None = None):
        self.run_dir = Path(run_dir)
        self.aliases = aliases or {}  # as the recording host had them (runner.hosts.activation.skill_name)
        self._records: dict[str, dict[str, Any]] | None = None
        self.middleware: list[anthropic.MiddlewareInput] = []  # no request is made: nothing reads it

    def versions(self) -> dict[str, str]:
        return {"host": HOST_NAME, "source_run": str(self.run_dir)}

    async def surface(self, model: str, library_names: set[str], invocable: set[str]) -> Surface:
        """The surface the recorded run's audit measured; without one, a surface whose error says so."""
        path = self.run_dir / RECORDED_SURFACE
        try:
            return Surface.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return Surface(host=HOST_NAME, listing_budget_chars=None,
                           error=f"{path}: no surface recorded to replay ({str(exc).splitlines()[0]})")

    async def aclose(self) -> None:
        """Nothing to release: records are read from files that are closed once read."""

    def records(self) -> dict[str, dict[str, Any]]:
        """attempt id -> its last finished record (a torn or unreadable line is skipped)."""
        if self._records is None:
            self._records = {}
            path = self.run_dir / "attempts.jsonl"
            lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("attempt_id"), str) \
                        and record.get("status", "finished") == "finished":
                    self._records[record["attempt_id"]] = record
        return self._records

    def _transcript(self, relative: Any) -> list[Any]:
        if not isinstance(relative, str) or not relative:
            return []
        path = (self.run_dir / relative).resolve()
        if self.run_dir.resolve() not in path.parents or not path.is_file():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return data if isinstance(data, list) else []

    async def run(self, spec: SessionSpec) -> Observation:
        record = self.records().get(spec.attempt_id)
        if record is None:
            return Observation(attempt_id=spec.attempt_id, host=HOST_NAME, error_kind="ambiguous",
                               error_message=f"attempt {spec.attempt_id} was not recorded in {self.run_dir}")
        transcript = self._transcript(record.get("transcript"))
        activations, calls = _from_transcript(transcript, self.aliases)
        if not activations:
            outcome = record.get("outcome") or {}
            activations = [Activation(name=name, mechanism="skill-tool", turn=0)
                           for name in outcome.get("fired") or [] if isinstance(name, str)]
        try:
            return Observation(
                attempt_id=spec.attempt_id, host=HOST_NAME, error_kind=record.get("error_kind"),
                error_message=record.get("error_message"), activations=activations, tool_calls=calls,
                final_answer=record.get("final_answer"), turns=record.get("turns") or 0,
                usage=Usage.model_validate(record.get("usage") or {}), cost_usd=record.get("cost_usd") or 0.0,
                host_cost_usd=record.get("host_cost_usd"), bounds_hit=record.get("bounds_hit") or [],
                duration_s=record.get("duration_s") or 0.0, transcript=transcript)
        except ValidationError as exc:
            return Observation(attempt_id=spec.attempt_id, host=HOST_NAME, error_kind="malformed",
                               error_message=f"the record of {spec.attempt_id} cannot be read: "
                                             f"{exc.error_count()} invalid field(s)")
