"""The run folder: plan.json first, one line per finished attempt, transcripts, results.json.

    <run>/plan.json            written before the first session starts
    <run>/surface.json         the surface audit (what the model is shown)
    <run>/attempts.jsonl       one AttemptRecord per line, flushed and fsynced as each finishes
    <run>/transcripts/<id>.json the host's messages for one attempt (secrets removed)
    <run>/results.json         written at the end, and on SIGINT/SIGTERM

A crash can lose at most the attempt being written: a torn last line is ignored on resume.

Nothing here holds a run in memory: each attempt is appended (and fsynced) as it finishes, its
transcript goes to its own file, and reading streams attempts.jsonl one line at a time. A reader
that only needs verdicts (results, resume) asks for `slim` records, which leave out the final answer
and the tool calls (they stay on disk), so memory grows with the attempts' outcomes only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from runner.hosts.base import Bound, ToolCall, Usage
from runner.judge import JudgeCall
from runner.probes import ProbeGrade
from runner.verdicts import AttemptOutcome

PLAN = "plan.json"
SURFACE = "surface.json"
ATTEMPTS = "attempts.jsonl"
RESULTS = "results.json"
TRANSCRIPTS = "transcripts"


class AttemptRecord(BaseModel):
    attempt_id: str
    uid: str
    arm: str
    repeat: int
    plan_hash: str
    status: Literal["finished", "cancelled"]
    outcome: AttemptOutcome | None = None
    error_kind: str | None = None
    error_message: str | None = None
    bounds_hit: list[Bound] = []
    turns: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    host_cost_usd: float | None = None
    reserved_usd: float = 0.0
    duration_s: float = 0.0
    transcript: str | None = None
    final_answer: str | None = None
    tool_calls: list[ToolCall] = []
    judge: JudgeCall | None = None
    probe: ProbeGrade | None = None  # tier-2 probe attempts: the graded act, arm, band score, skill fired

    @property
    def total_cost_usd(self) -> float:
        return self.cost_usd + (self.judge.cost_usd if self.judge else 0.0)


def safe_name(attempt_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", attempt_id)


class RunDir:
    def __init__(self, path: Path):
        self.path = path

    def create(self) -> None:
        (self.path / TRANSCRIPTS).mkdir(parents=True, exist_ok=True)

    def write_json(self, name: str, payload: str) -> None:
        """Write atomically: a reader never sees half a plan or half a results file."""
        target = self.path / name
        temporary = target.with_suffix(target.suffix + ".tmp")
        temporary.write_text(payload, encoding="utf-8")
        os.replace(temporary, target)

    def append_attempt(self, record: AttemptRecord) -> None:
        with open(self.path / ATTEMPTS, "a", encoding="utf-8") as handle:
            handle.write(record.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def iter_attempts(self, plan_hash: str | None = None, slim: bool = False) -> Iterator[AttemptRecord]:
        """The recorded attempts in file order, read one line at a time (never the whole file at once).

        plan_hash: only the attempts of that plan. slim: without final_answer and tool_calls, for
        readers that need verdicts only (they are the bulk of a line; the report and re-judging read
        them in full)."""
        path = self.path / ATTEMPTS
        if not path.exists():
            return
        # errors="replace": a crash can cut a multi-byte character in the last line; that line is
        # invalid JSON anyway and is skipped below, and it must not make the whole file unreadable.
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = AttemptRecord.model_validate_json(line)
                except ValidationError:
                    continue  # a line torn by a crash mid-write: that attempt did not finish
                if plan_hash is not None and record.plan_hash != plan_hash:
                    continue
                if slim:
                    record.final_answer, record.tool_calls = None, []
                yield record

    def read_attempts(self, plan_hash: str | None = None, slim: bool = False) -> list[AttemptRecord]:
        return list(self.iter_attempts(plan_hash, slim))

    def write_transcript(self, attempt_id: str, messages: list[dict]) -> str:
        relative = f"{TRANSCRIPTS}/{safe_name(attempt_id)}.json"
        (self.path / relative).write_text(json.dumps(messages, indent=1, ensure_ascii=False, default=str),
                                          encoding="utf-8")
        return relative

    def read_text(self, name: str) -> str:
        return (self.path / name).read_text(encoding="utf-8")
