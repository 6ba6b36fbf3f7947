"""Which lines of attempts.jsonl count: the records the runner wrote for this plan, each attempt once.

Every reader that counts reads the log through `vet`, which refuses a line by rule (`mac-missing`, `mac-wrong`,
`duplicate`, `bad-number`, `not-in-plan`, `id-mismatch`, `unreadable`). A refused record counts for nothing, is
listed in results.json, and makes the case it claims ERROR.

Design notes: docs/design/run-folder-and-records.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from runner.execute.rundir import ATTEMPTS, MAC_FIELD, AttemptRecord, RecordLine, RunDir, mac_matches
from runner.plan.plan import Plan, PlannedCase

REFUSED = "refused-record"  # the reason prefix of a case a refused record claims


class RefusedRecord(BaseModel):
    """A line of attempts.jsonl that does not count (docs/design/run-folder-and-records.md)."""

    file: str = Field(description="The attempt log, relative to the run folder (a shard's folder in a merge).")
    line: int = Field(description="Its line number in that file (1-based).")
    attempt_id: str = Field(description="The attempt id as the line wrote it (empty when it has none).")
    uid: str | None = Field(default=None, description="The planned case the line claims to be an attempt of (None: "
                                                      "it names no case of the plan).")
    rule: str = Field(description="mac-missing, mac-wrong, duplicate, bad-number, not-in-plan, id-mismatch or "
                                  "unreadable.")
    reason: str = Field(description="Why, in words.")

    def describe(self) -> str:
        claimed = self.attempt_id or "(no attempt id)"
        return f"{self.file} line {self.line}: {claimed}: {self.reason}"


@dataclass
class Vetted:
    """The records that count, in file order, and the lines refused."""

    accepted: list[AttemptRecord] = field(default_factory=list)
    refused: list[RefusedRecord] = field(default_factory=list)
    signed: bool = False
    accepted_lines: list[int] = field(default_factory=list)  # the line number of each accepted record

    def cancelled(self) -> list[AttemptRecord]:
        """Attempts cancelled in flight (SIGINT/SIGTERM): they run again on resume, and what they spent before they
        were cancelled is spent (runner.execute.executor)."""
        return [record for record in self.accepted if record.status == "cancelled"]

    def finished_by_uid(self) -> dict[str, list[AttemptRecord]]:
        out: dict[str, list[AttemptRecord]] = {}
        for record in self.accepted:
            if record.status == "finished":
                out.setdefault(record.uid, []).append(record)
        return out


def attempt_id_of(uid: str, arm: str, repeat: int) -> str:
    return f"{uid}#{arm}#{repeat}"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def claimed_uid(fields: dict[str, Any] | None, planned: dict[str, PlannedCase]) -> str | None:
    """The planned case a line claims: its uid, else the uid part of its attempt id; None when neither is one."""
    if fields is None:
        return None
    uid = _text(fields.get("uid"))
    if uid in planned:
        return uid
    from_id = _text(fields.get("attempt_id")).rsplit("#", 2)[0]
    return from_id if from_id in planned else None


def bad_number(record: AttemptRecord) -> str | None:
    """The first cost or token count that is negative or not finite, named."""
    figures: list[tuple[str, float | int | None]] = [
        ("cost_usd", record.cost_usd), ("host_cost_usd", record.host_cost_usd),
        ("reserved_usd", record.reserved_usd), ("first_turn_input_tokens", record.first_turn_input_tokens),
        *((f"usage.{name}", value) for name, value in record.usage.model_dump().items())]
    if record.judge is not None:
        figures += [("judge.cost_usd", record.judge.cost_usd),
                    *((f"judge.usage.{name}", value) for name, value in record.judge.usage.model_dump().items())]
    for name, value in figures:
        if value is not None and (not math.isfinite(value) or value < 0):
            return f"{name} is {value} (costs and token counts are finite and >= 0)"
    return None


def plan_problem(record: AttemptRecord, planned: dict[str, PlannedCase] | None, mine: set[str] | None
                 ) -> tuple[str, str] | None:
    """(rule, reason) when the record's id is not one this plan (and this shard) could have produced. `planned`
    None: no plan to hold it against (a merge input without a readable plan.json), only its own consistency."""
    if record.attempt_id != attempt_id_of(record.uid, record.arm, record.repeat):
        return "id-mismatch", (f"uid {record.uid!r}, arm {record.arm!r} and repeat {record.repeat} disagree with the "
                               f"attempt id")
    if planned is None:
        return None
    case = planned.get(record.uid)
    if case is None:
        return "not-in-plan", f"{record.uid!r} is not a case of this plan"
    if case.unrun_reason is not None:
        return "not-in-plan", f"the plan runs no attempt of this case (UNRUN {case.unrun_reason})"
    if mine is not None and record.uid not in mine:
        return "not-in-plan", "this case belongs to another shard of the plan"
    arms = case.arms or ["main"]
    if record.arm not in arms:
        return "not-in-plan", f"arm {record.arm!r} is not one of the case's arms ({', '.join(arms)})"
    if not 1 <= record.repeat <= case.repeats:
        return "not-in-plan", f"repeat {record.repeat} is outside 1..{case.repeats}"
    return None


def vet(lines: Iterable[RecordLine], plan_hash: str, key: bytes | None, planned: dict[str, PlannedCase] | None,
        *, file: str = ATTEMPTS, mine: set[str] | None = None, slim: bool = False) -> Vetted:
    """The lines of one attempt log, vetted (the design notes). `key`: the run folder's when the plan signs its
    records, else None. `planned`: the plan's cases by uid. `slim`: accepted records without final_answer and
    tool_calls (verdicts only)."""
    first_line: dict[str, int] = {}  # attempt id -> the line of its accepted finished record
    out = Vetted(signed=key is not None)

    def refuse(line: RecordLine, rule: str, reason: str) -> None:
        fields = line.fields
        out.refused.append(RefusedRecord(file=file, line=line.number, attempt_id=_text((fields or {}).get(
            "attempt_id")), uid=claimed_uid(fields, planned or {}), rule=rule, reason=reason))

    for line in lines:
        if line.torn:
            continue  # cut by a kill mid-write: that attempt did not finish, and nothing claims it
        if line.fields is not None and "plan_hash" in line.fields and line.fields["plan_hash"] != plan_hash:
            continue  # another plan's record (another run in the same folder): not this plan's to count
        if key is not None and line.fields is not None:
            if MAC_FIELD not in line.fields or line.fields[MAC_FIELD] is None:
                refuse(line, "mac-missing", "no MAC, but this plan's records are all signed: not written by the runner")
                continue
            if not mac_matches(key, line.fields):
                refuse(line, "mac-wrong", "its MAC does not match the run folder's key: altered, forged, or copied "
                                          "from another run folder")
                continue
        record = line.record
        if record is None:
            refuse(line, "unreadable", "not a record of this runner (invalid JSON or fields)")
            continue
        problem = plan_problem(record, planned, mine)
        if problem is not None:
            refuse(line, *problem)
            continue
        number = bad_number(record)
        if number is not None:
            refuse(line, "bad-number", number)
            continue
        earlier = first_line.get(record.attempt_id)
        if earlier is not None:
            refuse(line, "duplicate", f"attempt {record.attempt_id} already has a finished record (line {earlier}); "
                                      f"the first is kept")
            continue
        if record.status == "finished":
            first_line[record.attempt_id] = line.number
        if slim:
            record.final_answer, record.tool_calls = None, []
        out.accepted.append(record)
        out.accepted_lines.append(line.number)
    return out


def read(rundir: RunDir, plan: Plan, plan_hash: str, *, mine: set[str] | None = None, slim: bool = False,
         file: str = ATTEMPTS) -> Vetted:
    """A run folder's attempt log vetted: with its key when the plan signs records (RunFolderKeyError when the key
    is missing or unsound: then nothing of it can be verified)."""
    key = rundir.load_key() if plan.record_mac is not None else None
    return vet(rundir.iter_lines(), plan_hash, key, {case.uid: case for case in plan.cases}, file=file, mine=mine,
               slim=slim)


def summary(refused: list[RefusedRecord]) -> str:
    """`3 (2 mac-missing, 1 duplicate)`: how many and by which rule."""
    rules = Counter(r.rule for r in refused)
    return f"{len(refused)} ({', '.join(f'{n} {rule}' for rule, n in rules.most_common())})"


def case_reason(refused: list[RefusedRecord]) -> str:
    """The ERROR reason of a case that records were refused for."""
    first = refused[0]
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return (f"{REFUSED}: {len(refused)} record(s) of this case in the attempt log were refused, so its result "
            f"cannot be trusted — {first.file} line {first.line}: {first.reason}{more}")
