"""The replay host: Observations rebuilt from a previous run folder, for re-judging and tests.

No model is called. `run(spec)` returns what `<run>/attempts.jsonl` recorded for
`spec.attempt_id`, with the transcript from `<run>/transcripts/`. Activations come from the
transcript when it shows them (Skill tool calls, reads of `.claude/skills/<name>/SKILL.md`,
Task/Agent subagent calls; a call answered with an error tool_result is `rejected`); otherwise
from the recorded outcome's `fired` list, as Skill tool activations (turn 0, mechanism unknown to
the record). An attempt id the run does not hold is an `ambiguous` error observation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.hosts.base import Activation, Observation, SessionSpec, ToolCall, Usage

HOST_NAME = "replay"
TOOL_INPUT_CHARS = 300
_SUBAGENT_TOOLS = ("Task", "Agent")


def _content(entry: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """(role, content blocks) of a transcript entry: a Messages API message or a stream-json event."""
    if not isinstance(entry, dict):
        return None, []
    message = entry.get("message") if isinstance(entry.get("message"), dict) else entry
    role = message.get("role") or entry.get("type")
    content = message.get("content")
    return role, [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _from_transcript(transcript: list[Any]) -> tuple[list[Activation], list[ToolCall]]:
    errors = {block.get("tool_use_id") for entry in transcript for block in _content(entry)[1]
              if block.get("type") == "tool_result" and block.get("is_error")}
    activations: list[Activation] = []
    calls: list[ToolCall] = []
    turn = -1
    for entry in transcript:
        role, blocks = _content(entry)
        if role != "assistant":
            continue
        turn += 1
        for block in blocks:
            if block.get("type") != "tool_use":
                continue
            name, tool_input, use_id = block.get("name"), block.get("input") or {}, block.get("id")
            rejected = use_id in errors
            calls.append(ToolCall(name=str(name), input=json.dumps(tool_input, ensure_ascii=False)[:TOOL_INPUT_CHARS],
                                  turn=turn, is_error=rejected))
            if not isinstance(tool_input, dict):
                continue
            if name == "Skill" and isinstance(tool_input.get("skill"), str):
                activations.append(Activation(name=tool_input["skill"], mechanism="skill-tool", turn=turn,
                                              tool_use_id=use_id, rejected=rejected))
            elif name == "Read" and isinstance(tool_input.get("file_path"), str) and not rejected:
                parts = Path(tool_input["file_path"]).parts
                if len(parts) >= 4 and parts[-4:-2] == (".claude", "skills") and parts[-1] == "SKILL.md":
                    activations.append(Activation(name=parts[-2], mechanism="skill-md-read", turn=turn,
                                                  tool_use_id=use_id))
            elif name in _SUBAGENT_TOOLS and isinstance(tool_input.get("subagent_type"), str):
                activations.append(Activation(name=f"{tool_input['subagent_type']} (subagent)",
                                              mechanism="subagent", turn=turn, tool_use_id=use_id,
                                              rejected=rejected))
    return activations, calls


class ReplayHost:
    name = HOST_NAME

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._records: dict[str, dict[str, Any]] | None = None

    def versions(self) -> dict[str, str]:
        return {"host": HOST_NAME, "source_run": str(self.run_dir)}

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
        activations, calls = _from_transcript(transcript)
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
