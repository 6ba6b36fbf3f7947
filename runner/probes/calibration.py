"""`skill-evals calibrate`: the seed-000 live calibration protocol for tier-2 probes, and the
`calibration.json` record kept beside each probe.

The protocol is declared (and hashed) in the record before the first start; every start is counted, errors
included, nothing retried. A version with a verdict is frozen: a new variant is a new version, never permission to
erase a result.

Design notes: docs/design/probes.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from runner.core.errors import UsageError
from runner.core.observation import Usage
from runner.core.states import BROKEN
from runner.corpus import bounded
from runner.corpus.findings import display_path
from runner.corpus.library import Library, Probe
from runner.corpus.settings import Settings
from runner.floor.gate import FloorGate, Hold
from runner.probes.arms import Arm

CALIBRATION_FILE = "calibration.json"
PROTOCOL = "seed-000"
Verdict = Literal["ceiling", "window", "floor", "inconclusive"]
StartState = Literal["running", "CAUGHT", "MISSED", "ERROR", "JUDGE-ERROR"]


def stop_rule_text(reps: int) -> str:
    return (f"control arm {reps} reps; control {reps}/{reps} caught -> ceiling (stop); otherwise, when at least one "
            f"control rep missed, treatment arm {reps} reps; treatment {reps}/{reps} caught with control <= "
            f"{reps - 1}/{reps} -> window; both arms 0/{reps} -> floor; anything else -> inconclusive. Every start "
            "counts, errors included; an errored start is never replaced or retried and is neither a catch nor a "
            "miss, so a verdict that depends on it is inconclusive.")


class Declaration(BaseModel):
    """Fixed before the first start; its hash is in the record."""

    protocol: str = PROTOCOL
    reps: int
    stop_rule: str
    explicit_invocation: bool
    host: str
    model: str
    max_turns: int
    timeout_s: float
    judge_model: str
    judge_prompt_version: str

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class Start(BaseModel):
    number: int = Field(ge=1, description="Order of the start within this calibration.")
    arm: Arm
    rep: int = Field(ge=1)
    attempt_id: str
    started_at: str
    state: StartState
    duration_s: float = 0.0
    error: str | None = None
    skill_fired: bool | None = None
    fired: list[str] = []
    patterns: list[bool] = []
    act_evidence: str | None = None
    act_reason: str | None = None
    defects: dict[str, str] = Field(default={}, description="Band probes: defect id -> PASS | FAIL | JUDGE-ERROR.")
    caught_defects: int | None = None
    final_answer: str | None = Field(default=None, description="What was graded, for a person to review.")
    usage: Usage = Usage()
    session_usd: float = 0.0
    judge_usd: float = 0.0


class ArmTally(BaseModel):
    started: int = 0
    caught: int = 0
    missed: int = 0
    errors: int = 0
    skill_fired: int = 0
    cost_usd: float = 0.0


def tally(starts: list[Start], arm: Arm) -> ArmTally:
    mine = [s for s in starts if s.arm == arm]
    return ArmTally(started=len(mine), caught=sum(s.state == "CAUGHT" for s in mine),
                    missed=sum(s.state == "MISSED" for s in mine),
                    errors=sum(s.state in BROKEN for s in mine),
                    skill_fired=sum(bool(s.skill_fired) for s in mine),
                    cost_usd=round(sum(s.session_usd + s.judge_usd for s in mine), 6))


class CalibrationRecord(BaseModel):
    probe: str
    content_hash: str
    declaration: Declaration
    declaration_hash: str
    declared_at: str
    status: Literal["running", "stopped", "finished"]
    stop_reason: str | None = Field(default=None, description="Why a calibration stopped before its verdict.")
    starts: list[Start] = []
    arms: dict[str, ArmTally] = {}
    verdict: Verdict | None = None
    verdict_reason: str | None = None
    finished_at: str | None = None
    cost_usd: float = 0.0


class CalibrationFile(BaseModel):
    probe: str
    records: list[CalibrationRecord] = Field(default=[], description="One per probe version, oldest first; never "
                                                                      "overwritten.")


# ---- the protocol (pure) ----------------------------------------------------------------------

@dataclass(frozen=True)
class RunArm:
    arm: Arm
    starts: int


@dataclass(frozen=True)
class Decided:
    verdict: Verdict
    reason: str


def decide(reps: int, starts: list[Start]) -> RunArm | Decided:
    """The next step of the declared protocol, from the starts so far (running ones count as started)."""
    control, treatment = tally(starts, "control"), tally(starts, "treatment")
    if control.started < reps:
        return RunArm("control", reps - control.started)
    shown = f"control {control.caught}/{reps} caught" + (f", {control.errors} errored" if control.errors else "")
    if control.caught == reps:
        return Decided("ceiling", f"{shown}: the control arm catches it without the skill")
    if control.missed == 0:
        return Decided("inconclusive", f"{shown}: the errored start(s) could have been catches, so the ceiling "
                                       "can be neither confirmed nor ruled out; nothing is retried")
    if treatment.started < reps:
        return RunArm("treatment", reps - treatment.started)
    shown += f"; treatment {treatment.caught}/{reps} caught" + (
        f", {treatment.errors} errored" if treatment.errors else "")
    if treatment.caught == reps:
        return Decided("window", f"{shown}: the control arm misses, the treatment arm catches it")
    if control.caught == 0 and control.errors == 0 and treatment.caught == 0 and treatment.errors == 0:
        return Decided("floor", f"{shown}: neither arm catches it; check the discriminator before reading this as "
                                "a defect of the skill (two misses do not prove a rate)")
    if treatment.errors and treatment.caught + treatment.errors == reps:
        return Decided("inconclusive", f"{shown}: the errored start(s) leave the window undecided")
    adverse = " (adverse: the control arm did better)" if control.caught > treatment.caught else ""
    return Decided("inconclusive", f"{shown}: no clean separation{adverse}")


# ---- the record file --------------------------------------------------------------------------

class CalibrationFileError(UsageError):
    """calibration.json exists but cannot be read: it is never overwritten."""


def probe_dir(library: Library, probe: Probe) -> Path:
    return Path(library.root) / probe.dir


def read_file(directory: Path, uid: str) -> CalibrationFile:
    path = directory / CALIBRATION_FILE
    if not path.exists():
        return CalibrationFile(probe=uid)
    shown = display_path(path, Path.cwd())
    try:
        data = json.loads(bounded.read_text(path, bounded.OPTION_FILE_MAX_BYTES))
    except json.JSONDecodeError as exc:
        raise CalibrationFileError(f"{shown}:{exc.lineno}: not valid JSON ({exc.msg}); fix or move it — it is "
                                   "never overwritten") from exc
    except RecursionError:
        raise CalibrationFileError(f"{shown}:1: {bounded.nesting_message('the file')}; it is never overwritten") \
            from None
    except (OSError, ValueError) as exc:  # not UTF-8, not a regular file, too large, a number past Python's limit
        raise CalibrationFileError(f"{shown}:1: cannot be read ({exc}); it is never overwritten") from exc
    try:
        return CalibrationFile.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise CalibrationFileError(f"{shown}:1: not a calibration record file ({where}: {problem['msg']}); fix or "
                                   "move it — it is never overwritten") from exc


def write_file(directory: Path, record_file: CalibrationFile) -> None:
    """Atomic: a crash mid-write leaves the previous file, never half of one."""
    fd, tmp = tempfile.mkstemp(prefix=".calibration-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(record_file.model_dump_json(indent=2) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, directory / CALIBRATION_FILE)


class ProbeStatus(BaseModel):
    """What a run may use: only a finished record of the probe's current content."""

    uid: str
    content_hash: str
    state: Literal["calibrated", "new-version", "not-calibrated", "in-progress", "unreadable"]
    verdict: Verdict | None = None
    verdict_reason: str | None = None
    calibrated_at: str | None = None
    older_versions: int = 0
    message: str


def status(library: Library, probe: Probe) -> ProbeStatus:
    made = partial(ProbeStatus, uid=probe.uid, content_hash=probe.content_hash)
    try:
        records = read_file(probe_dir(library, probe), probe.uid).records
    except CalibrationFileError as exc:
        return made(state="unreadable", message=str(exc))
    current = [r for r in records if r.content_hash == probe.content_hash]
    older = len({r.content_hash for r in records} - {probe.content_hash})
    if current and current[-1].status == "finished":
        record = current[-1]
        return made(state="calibrated", verdict=record.verdict, verdict_reason=record.verdict_reason,
                    calibrated_at=record.finished_at, older_versions=older,
                    message=f"calibrated {record.finished_at}: {record.verdict} ({record.verdict_reason})")
    if current:
        return made(state="in-progress", older_versions=older,
                    message=f"calibration stopped after {len(current[-1].starts)} start(s) "
                            f"({current[-1].stop_reason}); `skill-evals calibrate` continues it")
    if records:
        return made(state="new-version", older_versions=older,
                    message=f"new version, not calibrated: probe.json or question.md changed since the "
                            f"{older} calibrated version(s) in {CALIBRATION_FILE}, which are kept and not reused")
    return made(state="not-calibrated", message="not calibrated: run `skill-evals calibrate`")


# ---- running it -------------------------------------------------------------------------------

def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def find_probes(library: Library, wanted: list[str]) -> tuple[list[Probe], list[str]]:
    """Probes named by uid (`<skill>/probe/<id>`), id, or folder path; and the names that match none."""
    found: list[Probe] = []
    unknown = []
    for name in wanted:
        as_path = Path(name).resolve()
        matches = [p for p in library.probes if name in (p.uid, p.id) or as_path == probe_dir(library, p).resolve()]
        if not matches:
            unknown.append(name)
        for probe in matches:
            if probe not in found:
                found.append(probe)
    return found, unknown


def choose(library: Library, names: list[str], every: bool) -> tuple[list[Probe], list[str]]:
    """The probes named (uid, id or folder), or with `every` all of the library's; and the names that match none."""
    if names:
        return find_probes(library, names)
    return (list(library.probes) if every else []), []


def held_back(probes: list[Probe], gate: FloorGate) -> dict[str, Hold]:
    """The probes the floor holds back, by uid: only the errors about a chosen probe (its skill, or the probe
    itself) refuse it."""
    return {p.uid: hold for p in probes if (hold := gate.hold(p.uid, p.skill)) is not None}


def with_invocation(settings: Settings, explicit: bool | None) -> Settings:
    """--explicit/--routed over [probes] explicit_invocation."""
    if explicit is None:
        return settings
    return settings.model_copy(update={"probes": settings.probes.model_copy(update={"explicit_invocation": explicit})})
