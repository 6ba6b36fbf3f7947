"""Running a plan: sessions under a concurrency limit, a spend cap, quorum early stop, a clean stop.

Every case starts UNRUN. Each case asks the quorum rule how many attempts it may start; each
start first reserves its worst-case cost in the ledger; a refused reservation stops all further
starts (the rest stays UNRUN `budget-cap`); a spend limit met by a session or its judge call stops
the run the same way (UNRUN `spend-limit`). An errored attempt is recorded and never replaced.
Finished attempts are appended to attempts.jsonl as they finish, so a crash or a SIGTERM loses
nothing that finished; each reservation is journaled before its session starts, so a SIGKILL
cannot hide what was in flight (runner.execute.budget).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from runner.corpus.library import Case, Probe
from runner.execute.budget import Ledger
from runner.execute.hosts.base import Host, Observation, SessionSpec
from runner.execute.ratelimit import AdaptiveLimiter, RateLimitMiddleware
from runner.execute.rundir import AttemptRecord, RunDir
from runner.judge.prose import Grader, JudgeCall
from runner.plan.build import Plan, PlannedCase
from runner.probes import arms as probes_mod
from runner.probes.arms import Arm, ProbeGrade
from runner.results.quorum import QuorumRule, Tally, starts_allowed
from runner.results.verdicts import AttemptOutcome, apply_judgement, attempt_outcome, mark_unjudged, needs_judge

# Why starting stopped, in the words of semantics §3 (UNRUN reasons).
STOP_BUDGET = "budget-cap"
STOP_CANCELLED = "cancelled"
STOP_SPEND_LIMIT = "spend-limit"


@dataclass
class RunState:
    """Shared between the case tasks of one run (one instance per run, never global)."""

    ledger: Ledger
    stop_reason: str | None = None
    in_flight: dict[str, PlannedCase] = field(default_factory=dict)
    finished: int = 0
    errors: int = 0

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason


ProgressFn = Callable[[AttemptRecord, RunState], None]


def attempt_id(uid: str, arm: str, repeat: int) -> str:
    return f"{uid}#{arm}#{repeat}"


class Executor:
    def __init__(self, plan: Plan, plan_hash: str, cases: dict[str, Case], host: Host, rundir: RunDir,
                 state: RunState, known_names: Collection[str], progress: ProgressFn | None = None,
                 judge: Grader | None = None, judge_unavailable: str | None = None, mine: set[str] | None = None,
                 limiter: AdaptiveLimiter | None = None, probes: dict[str, Probe] | None = None):
        self.mine = mine  # the uids of this shard; None = every case
        self.probes = probes or {}  # tier-2 probes by uid (their cases have arms)
        self.judge = judge
        self.judge_unavailable = judge_unavailable or "not-judged"
        self.plan = plan
        self.plan_hash = plan_hash
        self.cases = cases
        self.host = host
        self.rundir = rundir
        self.state = state
        self.known = known_names
        self.progress = progress
        # Session starts go through one adaptive limiter (runner.execute.ratelimit): the plan's concurrency is its
        # ceiling, a 429 shrinks it and pauses starts. A host whose API client takes middleware (a list
        # `host.middleware`) also has each request paced and its retried 429s observed.
        self.limiter = limiter or AdaptiveLimiter(plan.concurrency, default_pause_s=plan.rate_limit_pause_s)
        middleware = getattr(host, "middleware", None)
        if isinstance(middleware, list):
            middleware[:] = [m for m in middleware if not isinstance(m, RateLimitMiddleware)]
            if self.limiter.adaptive:
                middleware.append(RateLimitMiddleware(self.limiter))

    def spec(self, planned: PlannedCase, repeat: int) -> SessionSpec:
        case = self.cases[planned.uid]
        return SessionSpec(
            attempt_id=attempt_id(planned.uid, "main", repeat), uid=planned.uid, prompt=case.prompt,
            model=self.plan.model, max_turns=self.plan.max_turns, timeout_s=self.plan.timeout_s,
            max_output_tokens=self.plan.max_output_tokens, max_usd=self.plan.estimate.worst_session_usd,
            case_files=case.files, case_files_dir=case.files_dir)

    def probe_spec(self, planned: PlannedCase, arm: Arm, repeat: int) -> SessionSpec:
        return probes_mod.session_spec(
            self.probes[planned.uid], arm, attempt_id(planned.uid, arm, repeat), planned.explicit_invocation,
            self.plan.model, self.plan.max_turns, self.plan.timeout_s, self.plan.max_output_tokens,
            self.plan.estimate.worst_session_usd)

    def reservation_usd(self, planned: PlannedCase) -> float:
        """A session's worst case; a probe attempt also reserves its judge call, so that every session
        that ran can be graded (an ungraded probe start would be a start without a result)."""
        worst = self.plan.estimate.worst_session_usd
        if planned.arms and self.judge is not None:
            worst += probes_mod.judge_worst_usd(self.judge, self.probes[planned.uid], self.plan.max_output_tokens)
        return worst

    async def graded(self, planned: PlannedCase, arm: str, obs: Observation
                     ) -> tuple[AttemptOutcome, JudgeCall | None, ProbeGrade | None]:
        if arm == "main":
            outcome, call = await self.judged(self.cases[planned.uid], obs)
            return outcome, call, None
        assert self.judge is not None  # the plan leaves a probe UNRUN without a judge
        grade, call = await probes_mod.grade(self.probes[planned.uid], arm, obs, self.judge)  # type: ignore[arg-type]
        return probes_mod.attempt_outcome(grade), call, grade

    async def judged(self, case: Case, obs: Observation) -> tuple[AttemptOutcome, JudgeCall | None]:
        """The attempt's outcome with its prose assertions judged, when the judge may be called."""
        outcome = attempt_outcome(case, obs, self.known)
        pending = needs_judge(outcome)
        if not pending or outcome.activation == "ERROR":
            return outcome, None
        if outcome.state == "FAIL":
            # Already a loss (wrong activation or a failed check): no money is spent judging the rest.
            return mark_unjudged(outcome, "attempt-already-failed"), None
        if obs.final_answer is None:
            return mark_unjudged(outcome, "no-final-answer"), None
        if self.judge is None:
            return mark_unjudged(outcome, self.judge_unavailable), None
        if self.state.stop_reason == STOP_SPEND_LIMIT:
            # A session still in flight when the run stopped: its judge call could only be refused.
            return mark_unjudged(outcome, STOP_SPEND_LIMIT), None
        assertions = [a for a in case.assertions if a.index in pending]
        worst = self.judge.worst_case_usd(case.prompt, obs.final_answer, obs.tool_calls, assertions)
        reservation = await self.state.ledger.reserve(worst)
        if reservation is None:
            self.state.stop(STOP_BUDGET)
            return mark_unjudged(outcome, STOP_BUDGET), None
        verdicts, call = await self.judge.judge(case.prompt, obs.final_answer, obs.tool_calls, assertions)
        await self.state.ledger.settle(reservation, call.cost_usd)
        return apply_judgement(outcome, verdicts), call

    def record(self, planned: PlannedCase, spec: SessionSpec, arm: str, repeat: int, obs: Observation,
               reserved: float, outcome: AttemptOutcome, judge_call: JudgeCall | None,
               grade: ProbeGrade | None, reservation_id: str | None = None) -> AttemptRecord:
        transcript = self.rundir.write_transcript(spec.attempt_id, obs.transcript) if obs.transcript else None
        return AttemptRecord(
            attempt_id=spec.attempt_id, uid=planned.uid, arm=arm, repeat=repeat, plan_hash=self.plan_hash, probe=grade,
            status="finished", outcome=outcome, error_kind=obs.error_kind, error_message=obs.error_message,
            bounds_hit=obs.bounds_hit, turns=obs.turns, usage=obs.usage, cost_usd=obs.cost_usd,
            host_cost_usd=obs.host_cost_usd, reserved_usd=reserved, reservation_id=reservation_id,
            duration_s=obs.duration_s, prefix_hash=obs.prefix_hash, session_path=obs.session_path,
            first_turn_input_tokens=obs.first_turn_input_tokens, model_calls=obs.model_calls,
            transcript=transcript, final_answer=obs.final_answer, tool_calls=obs.tool_calls, judge=judge_call)

    async def one_attempt(self, planned: PlannedCase, repeat: int, arm: str = "main") -> AttemptRecord | None:
        """Reserve, run, settle, record. None when the attempt was never started."""
        async with self.limiter.slot():
            if self.state.stop_reason:
                return None
            # Journaled (fsynced) before the session starts: a kill mid-session still leaves its worst case on disk.
            reservation = await self.state.ledger.reserve(self.reservation_usd(planned),
                                                          attempt_id(planned.uid, arm, repeat))
            if reservation is None:
                self.state.stop(STOP_BUDGET)
                return None
            spec = self.spec(planned, repeat) if arm == "main" else self.probe_spec(planned, arm, repeat)  # type: ignore[arg-type]
            self.state.in_flight[spec.attempt_id] = planned
            started = time.monotonic()
            try:
                obs = await self.host.run(spec)
            except asyncio.CancelledError:
                await self.state.ledger.settle(reservation, 0.0)
                self.rundir.append_attempt(AttemptRecord(
                    attempt_id=spec.attempt_id, uid=planned.uid, arm=arm, repeat=repeat,
                    plan_hash=self.plan_hash, status="cancelled", reservation_id=reservation.id,
                    duration_s=time.monotonic() - started))
                raise
            finally:
                self.state.in_flight.pop(spec.attempt_id, None)
            if arm == "main":
                await self.state.ledger.settle(reservation, obs.cost_usd)
            outcome, judge_call, grade = await self.graded(planned, arm, obs)
            if arm != "main":  # the probe's judge call was inside the session's reservation
                await self.state.ledger.settle(reservation, obs.cost_usd + (judge_call.cost_usd if judge_call else 0))
            record = self.record(planned, spec, arm, repeat, obs, reservation.amount_usd, outcome, judge_call, grade,
                                 reservation.id)
            self.rundir.append_attempt(record)
            self.state.finished += 1
            if obs.error_kind == "spend-limit" or (judge_call is not None and judge_call.spend_limit):
                self.state.stop(STOP_SPEND_LIMIT)  # the session's or its judge call's: nothing more can succeed
            # Back off as a whole: a rate-limited attempt (429 past the client's retries) pauses starts for
            # plan.rate_limit_pause_s and halves the window; it stays ERROR and is not replaced. 429s the
            # host's client retried by itself shrink the window too; an attempt without any grows it back.
            await self.limiter.observe_attempt(obs, started)
            if self.progress:
                self.progress(record, self.state)
            return record

    @property
    def first_alone(self) -> bool:
        """Whether a case's first session runs before its others start (plan.estimate.repeats_read_first_turn):
        every session of a case then sends the same first turn, and the prompt cache serves it only to a request
        that arrives after the response that wrote it began; started together, each would write it again. The
        verdict and the number of sessions are the same either way; the pool keeps every slot busy with other
        cases meanwhile."""
        return self.plan.estimate.repeats_read_first_turn

    async def run_every_repeat(self, planned: PlannedCase, prior: list[AttemptRecord],
                               arms: list[str] | None = None) -> None:
        """Fixed N: every repeat of every arm not finished before (a resume) starts; the first of each arm
        alone first when `first_alone`."""
        done = {(r.arm, r.repeat) for r in prior}
        starts = [(arm, n) for n in range(1, planned.repeats + 1) for arm in arms or ["main"] if (arm, n) not in done]
        if self.first_alone:
            fresh = {arm for arm in arms or ["main"] if not any(r.arm == arm for r in prior)}
            leaders = [(arm, n) for arm, n in starts if arm in fresh and n == min(m for a, m in starts if a == arm)]
            await _all_or_cancel([asyncio.ensure_future(self.one_attempt(planned, n, arm)) for arm, n in leaders])
            starts = [start for start in starts if start not in leaders]
        await _all_or_cancel([asyncio.ensure_future(self.one_attempt(planned, n, arm)) for arm, n in starts])

    async def run_case(self, planned: PlannedCase, prior: list[AttemptRecord]) -> None:
        if planned.arms or not self.plan.early_stop:
            # Probes run both arms N times (their catch rates are the result, semantics §8); so does fixed N.
            await self.run_every_repeat(planned, prior, planned.arms)
            return
        rule = QuorumRule(planned.repeats, planned.quorum)
        wins = sum(1 for r in prior if r.outcome and r.outcome.state == "PASS")
        losses = sum(1 for r in prior if r.outcome and r.outcome.state == "FAIL")
        errors = sum(1 for r in prior if r.outcome and r.outcome.state in ("ERROR", "JUDGE-ERROR"))
        used = {r.repeat for r in prior}
        next_repeats = (n for n in range(1, planned.repeats + 1) if n not in used)
        pending: set[asyncio.Task[AttemptRecord | None]] = set()
        while True:
            tally = Tally(wins=wins, losses=losses, errors=errors, in_flight=len(pending))
            if not self.state.stop_reason:
                allowed = starts_allowed(rule, tally)
                if self.first_alone and not prior and wins + losses + errors == 0:
                    allowed = min(allowed, 1 - len(pending))  # the case's first session, alone (first_alone)
                for _ in range(allowed):
                    repeat = next(next_repeats, None)
                    if repeat is None:
                        break
                    pending.add(asyncio.ensure_future(self.one_attempt(planned, repeat)))
            if not pending:
                return
            try:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                # Stop the sessions of this case too; each records itself as cancelled.
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                raise
            for task in done:
                record = task.result()
                if record is None or record.outcome is None:
                    continue
                state = record.outcome.state
                wins += state == "PASS"
                losses += state == "FAIL"
                errors += state in ("ERROR", "JUDGE-ERROR")

    async def run(self, prior: dict[str, list[AttemptRecord]]) -> None:
        runnable = [c for c in self.plan.cases if c.unrun_reason is None and (self.mine is None or c.uid in self.mine)]
        pending = iter(runnable)

        async def worker() -> None:
            for planned in pending:  # one shared iterator: each case is taken by exactly one worker
                await self.run_case(planned, prior.get(planned.uid, []))

        # A few workers per session slot keep every slot busy (a case waits on its own attempts) without a
        # task per case: 17,000 pending tasks cost about 100 MB and nothing else (benchmarks/memory.py).
        workers = min(len(runnable), 2 * self.plan.concurrency + 2)
        await _all_or_cancel([asyncio.ensure_future(worker()) for _ in range(workers)])


async def until_signalled(task: asyncio.Future[Any], on_signal: Callable[[], None]) -> None:
    """Await `task`; SIGINT/SIGTERM call `on_signal` (e.g. stop new starts) and cancel it. In-flight
    sessions record themselves as cancelled, and the caller still writes what finished."""
    loop = asyncio.get_running_loop()

    def cancel() -> None:
        on_signal()
        task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, cancel)
    try:
        await task
    except asyncio.CancelledError:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _all_or_cancel(tasks: list[asyncio.Future[Any]]) -> None:
    """Wait for all; when cancelled, cancel each (sessions record themselves as cancelled) and wait for them."""
    try:
        await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
