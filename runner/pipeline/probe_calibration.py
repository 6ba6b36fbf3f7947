"""`skill-evals calibrate`, run: each chosen probe version through the seed-000 protocol (runner.probes.calibration
holds the protocol, its declaration and the record), its sessions under one spend cap, persisted after every start.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from runner.core.errors import UsageError
from runner.core.observation import Usage
from runner.corpus.library import Library, Probe
from runner.corpus.settings import Settings
from runner.execute.budget import Ledger
from runner.execute.executor import until_signalled
from runner.hosts.base import Host
from runner.hosts.prices import PriceTable
from runner.judge.prose import Judge
from runner.plan.cost import first_turn_tokens, worst_session_usd
from runner.probes.arms import ARMS, Arm, ProbeGrade, grade, judge_worst_usd, session_spec
from runner.probes.calibration import (
    CalibrationFileError,
    CalibrationRecord,
    Decided,
    Declaration,
    Start,
    decide,
    now,
    probe_dir,
    read_file,
    stop_rule_text,
    tally,
    write_file,
)


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


def session_bounds(library: Library, settings: Settings, prices: PriceTable, probes: list[Probe]) -> SessionBounds:
    """The run settings' bounds, and the worst case of one probe session by the plan's own estimate."""
    run = settings.run
    longest = max((len(p.question) + len(p.skill) + 2 for p in probes), default=0)
    first_turn, _ = first_turn_tokens(library, None, longest)
    price = prices.price(run.model)
    worst = worst_session_usd(first_turn, run.max_turns, run.max_output_tokens,
                                       price.input if price else 0.0, price.output if price else 0.0)
    return SessionBounds(model=run.model, max_turns=run.max_turns, timeout_s=run.timeout_s,
                         max_output_tokens=run.max_output_tokens, session_worst_usd=round(worst, 6))


def declare(settings: Settings, host_name: str, judge: Judge) -> Declaration:
    reps = settings.probes.calibration_reps
    return Declaration(reps=reps, stop_rule=stop_rule_text(reps), explicit_invocation=settings.probes.explicit_invocation,
                       host=host_name, model=settings.run.model, max_turns=settings.run.max_turns,
                       timeout_s=settings.run.timeout_s, judge_model=judge.settings.model,
                       judge_prompt_version=judge.version)


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
