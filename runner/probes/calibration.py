"""`skill-evals calibrate`: the seed-000 live calibration protocol for tier-2 probes, and the
`calibration.json` record kept beside each probe.

The protocol, declared (and hashed) in the record before the first start:

    control arm, R reps (seed 000: R = 2)
      R/R caught                      -> ceiling   (stop; the treatment arm never runs)
      at least one rep missed         -> treatment arm, R reps
        treatment R/R caught          -> window    (control <= (R-1)/R, treatment R/R)
        both arms 0/R caught          -> floor
        anything else                 -> inconclusive (reported, whether null or adverse)

Every start is recorded the moment it starts and counted, errors included; nothing is reseeded,
replaced or retried. An errored start (host error, judge error) is neither a catch nor a miss:
a verdict that would depend on its unknown outcome is `inconclusive`, never guessed. E.g. a
control arm of one miss and one error still proves control <= (R-1)/R, so the treatment runs;
one catch and one error cannot rule out the ceiling, so the protocol stops there.

Versions: a record carries the probe's content hash (probe.json + question.md). Once a version
has a verdict it is frozen: `calibrate` refuses to run it again (a new variant is a new version,
never permission to erase an unfavourable result). Editing the probe makes a new version; the
old record stays in the file, and a run refuses to use it (`probe-new-version`). A calibration
cut short (Ctrl-C, the spend cap) is continued by the next `calibrate` under the same declaration,
its cut starts counted as errors.

Why one long module: the protocol's declaration, its steps and the record that freezes a version are one
contract (a record is only valid under the declaration it hashes), so they are read together.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from runner.corpus import bounded
from runner.core.errors import UsageError
from runner.corpus.findings import display_path
from runner.corpus.library import Library, Probe
from runner.corpus.settings import Settings
from runner.execute.budget import Ledger
from runner.execute.executor import until_signalled
from runner.hosts.base import Host
from runner.core.observation import Usage
from runner.floor.gate import FloorGate, Hold
from runner.judge.prose import Judge
from runner.plan import build as plan_mod
from runner.hosts.prices import PriceTable
from runner.probes.arms import ARMS, Arm, ProbeGrade, grade, judge_worst_usd, session_spec

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
                    errors=sum(s.state in ("ERROR", "JUDGE-ERROR") for s in mine),
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


@dataclass
class SessionBounds:
    model: str
    max_turns: int
    timeout_s: float
    max_output_tokens: int
    session_worst_usd: float


class Refused(UsageError):
    """This probe version cannot be calibrated now (nothing was started)."""


class Calibration:
    """The protocol for one probe version, persisted after every change of state."""

    def __init__(self, probe: Probe, directory: Path, declaration: Declaration, host: Host, judge: Judge,
                 ledger: Ledger, bounds: SessionBounds, sessions: asyncio.Semaphore):
        self.probe = probe
        self.directory = directory
        self.declaration = declaration
        self.host = host
        self.judge = judge
        self.ledger = ledger
        self.bounds = bounds
        self.sessions = sessions
        self.file = read_file(directory, probe.uid)
        self.record = self._open_record()

    def _open_record(self) -> CalibrationRecord:
        current = [r for r in self.file.records if r.content_hash == self.probe.content_hash]
        if current and current[-1].status == "finished":
            done = current[-1]
            raise Refused(f"{self.probe.uid}: this version ({self.probe.content_hash[:12]}) was calibrated "
                          f"{done.finished_at}: {done.verdict}. A calibrated version is frozen; edit the probe to "
                          "make a new version")
        if current:
            record = current[-1]
            if record.declaration_hash != self.declaration.digest():
                raise Refused(f"{self.probe.uid}: an unfinished calibration of this version was declared with other "
                              f"settings ({_differences(record.declaration, self.declaration)}); continue it with "
                              "the same settings")
            for start in record.starts:
                if start.state == "running":  # cut by a crash: counted, never replaced
                    start.state, start.error = "ERROR", "cancelled: the calibration stopped while it ran"
            return record
        record = CalibrationRecord(probe=self.probe.uid, content_hash=self.probe.content_hash,
                                   declaration=self.declaration, declaration_hash=self.declaration.digest(),
                                   declared_at=now(), status="running")
        self.file.records.append(record)
        return record

    def save(self) -> None:
        record = self.record
        record.arms = {arm: tally(record.starts, arm) for arm in ARMS if any(s.arm == arm for s in record.starts)}
        record.cost_usd = round(sum(t.cost_usd for t in record.arms.values()), 6)
        write_file(self.directory, self.file)

    async def run(self) -> CalibrationRecord:
        self.record.status, self.record.stop_reason = "running", None
        self.save()  # the declaration is on disk before the first start
        try:
            while True:
                step = decide(self.declaration.reps, self.record.starts)
                if isinstance(step, Decided):
                    self.record.verdict, self.record.verdict_reason = step.verdict, step.reason
                    self.record.status, self.record.finished_at = "finished", now()
                    return self.record
                done_reps = {s.rep for s in self.record.starts if s.arm == step.arm}
                reps = [r for r in range(1, self.declaration.reps + 1) if r not in done_reps][:step.starts]
                results = await asyncio.gather(*(self.one_start(step.arm, rep) for rep in reps))
                if not all(results):
                    self.record.status, self.record.stop_reason = "stopped", "budget-cap"
                    return self.record
        except asyncio.CancelledError:
            self.record.status, self.record.stop_reason = "stopped", "cancelled"
            raise
        finally:
            self.save()

    async def one_start(self, arm: Arm, rep: int) -> bool:
        """Reserve, start (recorded at once), run, grade. False when the cap refused the start."""
        async with self.sessions:
            worst = self.bounds.session_worst_usd + judge_worst_usd(self.judge, self.probe,
                                                                    self.bounds.max_output_tokens)
            reservation = await self.ledger.reserve(worst)
            if reservation is None:
                return False
            attempt_id = f"{self.probe.uid}#{arm}#{rep}"
            start = Start(number=len(self.record.starts) + 1, arm=arm, rep=rep, attempt_id=attempt_id,
                          started_at=now(), state="running")
            self.record.starts.append(start)
            self.save()
            began = time.monotonic()
            spent = 0.0
            try:
                spec = session_spec(self.probe, arm, attempt_id, self.declaration.explicit_invocation,
                                    self.bounds.model, self.bounds.max_turns, self.bounds.timeout_s,
                                    self.bounds.max_output_tokens, self.bounds.session_worst_usd)
                obs = await self.host.run(spec)
                spent = obs.cost_usd
                graded, call = await grade(self.probe, arm, obs, self.judge)
                spent += call.cost_usd if call else 0.0
                _fill(start, graded, obs.final_answer, obs.usage, obs.cost_usd, call.cost_usd if call else 0.0)
            except asyncio.CancelledError:
                start.state, start.error = "ERROR", "cancelled: the calibration was interrupted"
                raise
            finally:
                start.duration_s = round(time.monotonic() - began, 3)
                await self.ledger.settle(reservation, spent)
                self.save()
            return True


def _fill(start: Start, graded: ProbeGrade, answer: str | None, usage: Usage, session_usd: float,
          judge_usd: float) -> None:
    start.state = graded.state
    start.error = graded.error
    start.skill_fired = graded.skill_fired
    start.fired = graded.fired
    start.patterns = graded.patterns
    start.act_evidence = graded.act.evidence if graded.act else None
    start.act_reason = graded.act.reason if graded.act else None
    start.defects = {d.id: d.state for d in graded.defects}
    start.caught_defects = graded.caught_defects
    start.final_answer = answer
    start.usage = usage
    start.session_usd = round(session_usd, 6)
    start.judge_usd = round(judge_usd, 6)


def _differences(old: Declaration, new: Declaration) -> str:
    changed = [f"{k}: {getattr(old, k)!r} then, {getattr(new, k)!r} now" for k in Declaration.model_fields
               if getattr(old, k) != getattr(new, k)]
    return "; ".join(changed) or "same fields"


def run_all(calibrations: list[Calibration]) -> tuple[list[CalibrationRecord], bool]:
    """Run the calibrations (probes side by side, sessions bounded by their shared semaphore).
    On SIGINT/SIGTERM the running starts are cut and recorded as errors; returns (records, cancelled)."""
    cancelled = False

    def mark_cancelled() -> None:
        nonlocal cancelled
        cancelled = True

    async def main() -> list[CalibrationRecord]:
        # Cancelling the gathered future cancels every calibration and waits for each to save its record.
        everything = asyncio.ensure_future(asyncio.gather(*(c.run() for c in calibrations), return_exceptions=True))
        try:
            await until_signalled(everything, mark_cancelled)
        finally:
            judges = {id(c.judge): c.judge for c in calibrations}
            for judge in judges.values():
                await judge.aclose()
        return [c.record for c in calibrations]

    records = asyncio.run(main())
    return records, cancelled


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


def session_bounds(library: Library, settings: Settings, prices: PriceTable, probes: list[Probe]) -> SessionBounds:
    """The run settings' bounds, and the worst case of one probe session by the plan's own estimate."""
    run = settings.run
    longest = max((len(p.question) + len(p.skill) + 2 for p in probes), default=0)
    first_turn, _ = plan_mod.first_turn_tokens(library, None, longest)
    price = prices.price(run.model)
    worst = plan_mod.worst_session_usd(first_turn, run.max_turns, run.max_output_tokens,
                                       price.input if price else 0.0, price.output if price else 0.0)
    return SessionBounds(model=run.model, max_turns=run.max_turns, timeout_s=run.timeout_s,
                         max_output_tokens=run.max_output_tokens, session_worst_usd=round(worst, 6))


def declare(settings: Settings, host_name: str, judge: Judge) -> Declaration:
    reps = settings.probes.calibration_reps
    return Declaration(reps=reps, stop_rule=stop_rule_text(reps), explicit_invocation=settings.probes.explicit_invocation,
                       host=host_name, model=settings.run.model, max_turns=settings.run.max_turns,
                       timeout_s=settings.run.timeout_s, judge_model=judge.settings.model,
                       judge_prompt_version=judge.version)


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


@dataclass
class Prepared:
    declaration: Declaration
    ledger: Ledger  # one cap for every probe's sessions and judge calls
    calibrations: list[Calibration]
    refused: list[str]  # one line for each probe that cannot be calibrated now, and why (nothing of it started)


def prepare(library: Library, settings: Settings, host: Host, judge: Judge, prices: PriceTable,
            probes: list[Probe]) -> Prepared:
    """The calibrations of the probes under one declaration, one spend cap and one bound on the sessions at once.
    A probe whose version is frozen, or whose record file cannot be read, is refused rather than started."""
    run = settings.run
    declaration = declare(settings, host.name, judge)
    bounds = session_bounds(library, settings, prices, probes)
    ledger = Ledger(cap_usd=run.max_usd)
    sessions = asyncio.Semaphore(run.concurrency)
    calibrations, refused = [], []
    for probe in probes:
        try:
            calibrations.append(Calibration(probe, probe_dir(library, probe), declaration, host, judge, ledger,
                                            bounds, sessions))
        except (Refused, CalibrationFileError) as exc:
            refused.append(str(exc))
    return Prepared(declaration=declaration, ledger=ledger, calibrations=calibrations, refused=refused)
