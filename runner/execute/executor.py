"""Running a plan: sessions under a concurrency limit, a spend cap, quorum early stop, a clean stop.

Every case starts UNRUN. Each case asks the quorum rule how many attempts it may start; each
start first reserves its worst-case cost in the ledger; a refused reservation stops all further
starts (the rest stays UNRUN `budget-cap`); a spend limit met by a session or its judge call stops
the run the same way (UNRUN `spend-limit`). An errored attempt is recorded and never replaced.
Finished attempts are appended to attempts.jsonl as they finish, so a crash or a SIGTERM loses
nothing that finished; each reservation is journaled before its session starts, so a SIGKILL
cannot hide what was in flight (runner.execute.budget).

One executor, two ways to dispatch (`Dispatch`). Which attempts a case may start is the case's own
(`CaseStarts`: the quorum, or every repeat); every start is `Executor.one_attempt` (reserve, run,
settle, grade, record). The dispatch decides only when the starts go: `AsTheyFinish` (the direct
path) starts a case's next attempts as soon as one of its attempts finishes; `Rounds` (`--batch`,
runner.execute.batch) starts every case's allowed attempts together and runs the round to its end,
so their requests go out as one batch.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.core.host_traits import grade_of
from runner.core.observation import Observation, SessionSpec
from runner.core.outcomes import AttemptOutcome
from runner.core.quorum import Tally, VerdictRule
from runner.core.states import BROKEN
from runner.corpus.claims import rubric_indexes
from runner.corpus.library import Case, Probe
from runner.execute.budget import Ledger, Reservation
from runner.execute.grading import (
    CONTROL,
    apply_judgement,
    attempt_outcome,
    control_outcome,
    counts_as_win,
    mark_unjudged,
    needs_judge,
    rubric_failed,
    unobserved_outcome,
)
from runner.execute.rundir import AttemptRecord, RunDir
from runner.hosts import billing
from runner.hosts.base import Host
from runner.hosts.ratelimit import AdaptiveLimiter, RateLimitMiddleware
from runner.judge.prose import Grader, JudgeCall
from runner.plan.plan import Plan, PlannedCase
from runner.probes import arms as probes_mod
from runner.probes.arms import ARMS, Arm, ProbeGrade

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


# Why a failed attempt's prose assertions are not judged: its verdict cannot change (a settled outcome).
ALREADY_FAILED = "attempt-already-failed"


def attempt_id(uid: str, arm: str, repeat: int) -> str:
    return f"{uid}#{arm}#{repeat}"


def probe_arm(arm: str) -> Arm:
    """A tier-2 probe's arm, from an attempt's arm (a plain str in the starts and the records)."""
    for known in ARMS:
        if arm == known:
            return known
    raise ValueError(f"not a probe arm: {arm!r}")


Start = tuple[str, int]  # (arm, repeat); the arm is "main" for a case that is not a tier-2 probe


class CaseStarts:
    """One case's starts: which (arm, repeat) may start now, from its rule and the attempts finished so far.

    Early stop (semantics §4): as many as the rule's starts_allowed gives (the quorum's, or the sequential
    verdict's round), never one the verdict cannot need. Every
    repeat (a tier-2 probe's two arms, whose catch rates are the result, semantics §8; or a plan without early
    stop): all of them at once. With `first_alone` (Executor.first_alone), the first session of each arm that has
    none yet runs before any other session of the case starts; with `one_per_arm` (Executor.one_per_arm), no arm
    ever has two sessions in flight. Both dispatches ask `take` and report `finished`, so a batched run starts the
    attempts a direct run may start.
    """

    def __init__(self, planned: PlannedCase, prior: list[AttemptRecord], rule: VerdictRule | None, first_alone: bool,
                 one_per_arm: bool = False):
        self.planned = planned
        self.rule = rule  # None: every repeat
        self.wins = self.losses = self.errors = self.in_flight = 0
        self.one_per_arm = one_per_arm
        self.busy: dict[str, int] = {}  # arm -> its sessions in flight
        for record in prior:
            self._count(record)
        arms = planned.arms or ["main"]
        done = {(r.arm, r.repeat) for r in prior}
        todo = [(arm, n) for n in range(1, planned.repeats + 1) for arm in arms if (arm, n) not in done]
        fresh = [arm for arm in arms if not any(r.arm == arm for r in prior)] if first_alone else []
        self.leaders: list[Start] = [next(start for start in todo if start[0] == arm) for arm in fresh]
        self.todo: list[Start] = [start for start in todo if start not in self.leaders]
        self.held = False  # the leaders are in flight: nothing else of the case starts until they finished

    def take(self) -> list[Start]:
        """The starts allowed now; each counts as in flight until `finished` is told it ended."""
        if self.leaders:
            starts, self.leaders, self.held = self.leaders, [], True
        elif self.held and self.in_flight:
            return []
        else:
            self.held = False
            if self.rule is None:
                allowed = len(self.todo)
            else:
                tally = Tally(wins=self.wins, losses=self.losses, errors=self.errors, in_flight=self.in_flight)
                allowed = self.rule.starts_allowed(tally)
            starts = self._free(self.todo[:allowed])
            self.todo = [start for start in self.todo if start not in starts]
        self.in_flight += len(starts)
        for arm, _ in starts:
            self.busy[arm] = self.busy.get(arm, 0) + 1
        return starts

    def _free(self, candidates: list[Start]) -> list[Start]:
        """The candidates that may start now: all, or with `one_per_arm` the first of each arm with none in
        flight."""
        if not self.one_per_arm:
            return candidates
        taken: set[str] = {arm for arm, count in self.busy.items() if count}
        free = []
        for start in candidates:
            if start[0] not in taken:
                free.append(start)
                taken.add(start[0])
        return free

    def finished(self, start: Start, record: AttemptRecord | None) -> None:
        """`start` is over: its record, or None when it never started (the run had stopped)."""
        self.in_flight -= 1
        self.busy[start[0]] -= 1
        if record is not None:
            self._count(record)

    def _count(self, record: AttemptRecord) -> None:
        if record.outcome is None:
            return
        state = record.outcome.state
        self.wins += counts_as_win(state)
        self.losses += state == "FAIL"
        self.errors += state in BROKEN


def charged(obs: Observation, reservation_usd: float) -> Observation:
    """The observation with its cost capped as billing.charge caps it at the attempt's reservation."""
    cost, bound, basis = billing.charge(obs.cost_usd, obs.bound_usd, reservation_usd)
    if (cost, bound, basis) == (obs.cost_usd, obs.bound_usd, obs.cost_basis):
        return obs
    return obs.model_copy(update={"cost_usd": cost, "bound_usd": bound, "cost_basis": basis})


def charged_call(call: JudgeCall, reservation_usd: float) -> JudgeCall:
    """A judge call's cost capped at its own reservation (billing.charge)."""
    cost, bound, basis = billing.charge(call.cost_usd, call.bound_usd, reservation_usd)
    return call.model_copy(update={"cost_usd": cost, "bound_usd": bound,
                                   "cost_basis": basis if bound > 0 else call.cost_basis})


class Dispatch(Protocol):
    """When the starts the cases allow go to the host (the module docstring). The executor asks `plan` once, then
    hands `run` the cases of this run."""

    # Whether a case's first session may run before its others start (Executor.first_alone).
    first_alone: bool

    def plan(self, plan: Plan) -> Plan:
        """The plan as the executor runs it with this dispatch (its concurrency, a session's worst case)."""

    async def run(self, executor: Executor, cases: list[PlannedCase], prior: dict[str, list[AttemptRecord]]
                  ) -> None:
        """Start every attempt the cases allow, each through executor.one_attempt, until none is allowed or the
        run stops; return once every started attempt has ended."""


class Collector(Protocol):
    """Where the requests of a round's attempts wait to go out together (runner.execute.batch.broker.BatchBroker): a
    wave's attempts join it, each leaves when it ends, and a batch goes out once all that remain wait on it."""

    def join(self, count: int = 1) -> None: ...

    def leave(self) -> None: ...

    async def aclose(self) -> None: ...


class Executor:
    def __init__(self, plan: Plan, plan_hash: str, cases: dict[str, Case], host: Host, rundir: RunDir,
                 state: RunState, known_names: Collection[str], progress: ProgressFn | None = None,
                 judge: Grader | None = None, judge_unavailable: str | None = None, mine: set[str] | None = None,
                 limiter: AdaptiveLimiter | None = None, probes: dict[str, Probe] | None = None,
                 dispatch: Dispatch | None = None):
        self.dispatch = dispatch or AsTheyFinish()
        plan = self.dispatch.plan(plan)  # e.g. batched rounds admit every attempt of a wave at once
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
        # Session starts go through one adaptive limiter (runner.hosts.ratelimit): the plan's concurrency is its
        # ceiling, a 429 shrinks it and pauses starts. It joins the host's client middleware too
        # (runner.hosts.base.Host.middleware): a host's own requests are paced and their retried 429s observed.
        self.limiter = limiter or AdaptiveLimiter(plan.concurrency, default_pause_s=plan.rate_limit_pause_s)
        middleware = host.middleware
        middleware[:] = [m for m in middleware if not isinstance(m, RateLimitMiddleware)]
        if self.limiter.adaptive:
            middleware.append(RateLimitMiddleware(self.limiter))

    def spec(self, planned: PlannedCase, repeat: int, arm: str = "main") -> SessionSpec:
        """A case's session; its `control` arm (run --baseline) is the same session without the skill under
        test, left out as a probe's control arm leaves it out (SessionSpec.exclude_skills)."""
        case = self.cases[planned.uid]
        return SessionSpec(
            attempt_id=attempt_id(planned.uid, arm, repeat), uid=planned.uid, prompt=case.prompt,
            model=self.plan.model, max_turns=self.plan.max_turns, timeout_s=self.plan.timeout_s,
            max_output_tokens=self.plan.max_output_tokens, max_usd=self.plan.estimate.worst_session_usd,
            case_files=case.files, case_files_dir=case.files_dir,
            exclude_skills=[case.skill] if arm == CONTROL else [],
            decide_when=planned.decide_when if arm == "main" else [])

    def probe_spec(self, planned: PlannedCase, arm: Arm, repeat: int) -> SessionSpec:
        return probes_mod.session_spec(
            self.probes[planned.uid], arm, attempt_id(planned.uid, arm, repeat), planned.explicit_invocation,
            self.plan.model, self.plan.max_turns, self.plan.timeout_s, self.plan.max_output_tokens,
            self.plan.estimate.worst_session_usd)

    def reservation_usd(self, planned: PlannedCase) -> float:
        """A session's worst case; a probe attempt also reserves its judge call, so that every session
        that ran can be graded (an ungraded probe start would be a start without a result)."""
        worst = self.plan.estimate.worst_session_usd
        if planned.kind == "probe" and self.judge is not None:
            worst += probes_mod.judge_worst_usd(self.judge, self.probes[planned.uid], self.plan.max_output_tokens)
        return worst

    async def graded(self, planned: PlannedCase, arm: str, obs: Observation
                     ) -> tuple[AttemptOutcome, JudgeCall | None, ProbeGrade | None]:
        if planned.kind != "probe":
            outcome, call = await self.judged(self.cases[planned.uid], obs, arm, planned.baselined)
            return outcome, call, None
        assert self.judge is not None  # the plan leaves a probe UNRUN without a judge
        grade, call = await probes_mod.grade(self.probes[planned.uid], probe_arm(arm), obs, self.judge)
        return probes_mod.attempt_outcome(grade), call, grade

    async def judged(self, case: Case, obs: Observation, arm: str = "main", baselined: bool = False
                     ) -> tuple[AttemptOutcome, JudgeCall | None]:
        """The attempt's outcome with its prose assertions judged, when the judge may be called. A baselined case
        (run --baseline) grades both arms on the rubric: its control arm on the rubric only, and its main arm's
        rubric even when the activation alone lost (the uplift compares the answers of every attempt)."""
        outcome = attempt_outcome(case, obs, self.known)
        if grade_of(self.plan.host) == "none":  # only output cases run there (runner.plan.planner)
            outcome = unobserved_outcome(outcome, rubric_indexes(case))
        rubric = rubric_indexes(case) if baselined else []
        if arm == CONTROL:
            outcome = control_outcome(outcome, case.skill, rubric)
        pending = needs_judge(outcome)
        if not pending or outcome.activation == "ERROR":
            return outcome, None
        if outcome.state == "FAIL" and (not baselined or rubric_failed(outcome, rubric)):
            # Already a loss (wrong activation or a failed check): no money is spent judging the rest.
            return mark_unjudged(outcome, ALREADY_FAILED), None
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
        call = charged_call(call, reservation.amount_usd)
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
            cost_basis=obs.cost_basis, bound_usd=obs.bound_usd, lost_replies=obs.lost_replies,
            host_cost_usd=obs.host_cost_usd, reserved_usd=reserved, reservation_id=reservation_id,
            duration_s=obs.duration_s, prefix_hash=obs.prefix_hash, session_path=obs.session_path,
            first_turn_input_tokens=obs.first_turn_input_tokens, model_calls=obs.model_calls,
            decided=obs.decided, first_turn=obs.first_turn, activation_grade=grade_of(self.plan.host),
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
            probe = planned.kind == "probe"
            spec = self.probe_spec(planned, probe_arm(arm), repeat) if probe else self.spec(planned, repeat, arm)
            # A lost reply whose request's size nothing shows is charged as the plan's first request (billing).
            spec = spec.model_copy(update={"request_input_tokens": self.plan.estimate.first_turn_input_tokens or None})
            self.state.in_flight[spec.attempt_id] = planned
            started = time.monotonic()
            tally = billing.Tally(reservation_id=reservation.id, on_change=self.journal_progress(reservation))
            try:
                with billing.metering(tally):
                    obs = await self.host.run(spec)
            except asyncio.CancelledError:
                # SIGINT/SIGTERM: what the session spent so far and the bound of what it had in flight, never $0.
                tally.give_up()
                cost, bound, basis = billing.charge(tally.total(), tally.bound_part(), reservation.amount_usd)
                await self.state.ledger.settle(reservation, cost)
                self.rundir.append_attempt(AttemptRecord(
                    attempt_id=spec.attempt_id, uid=planned.uid, arm=arm, repeat=repeat,
                    plan_hash=self.plan_hash, status="cancelled", reservation_id=reservation.id,
                    cost_usd=cost, cost_basis=basis, bound_usd=bound, lost_replies=tally.lost,
                    reserved_usd=reservation.amount_usd, duration_s=time.monotonic() - started))
                raise
            finally:
                self.state.in_flight.pop(spec.attempt_id, None)
            obs = charged(obs, reservation.amount_usd)
            if not probe:
                await self.state.ledger.settle(reservation, obs.cost_usd)
            outcome, judge_call, grade = await self.graded(planned, arm, obs)
            if probe:  # the probe's judge call was inside the session's reservation
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

    def journal_progress(self, reservation: Reservation) -> billing.ProgressFn | None:
        """Each change of an attempt's tally, journaled (not fsynced) under its reservation: after a SIGKILL the last
        one is what its session had reached (runner.execute.reconcile)."""
        journal = self.state.ledger.journal
        if journal is None or reservation.id is None:
            return None
        ident = reservation.id
        cap = reservation.amount_usd
        return lambda tally: journal.progress(ident, *billing.charge(tally.total(), tally.bound_part(), cap)[:2])

    @property
    def first_alone(self) -> bool:
        """Whether a case's first session runs before its others start (plan.estimate.repeats_read_first_turn):
        every session of a case then sends the same first turn, and the prompt cache serves it only to a request
        that arrives after the response that wrote it began; started together, each would write it again. The
        verdict and the number of sessions are the same either way; the pool keeps every slot busy with other
        cases meanwhile. Batched rounds never hold one alone (Rounds.first_alone)."""
        return self.plan.estimate.repeats_read_first_turn and self.dispatch.first_alone

    @property
    def one_per_arm(self) -> bool:
        """Whether an arm of a case runs one session at a time: where each case has one path and no namespace
        (runner.hosts.sessionpath, per-case-path), two at once would take two paths and the second would write
        the case's first turn again. The same sessions start as otherwise, later; other cases fill the slots."""
        path = self.plan.session_path
        return self.first_alone and path is not None and path.one_session_per_path

    def case_starts(self, planned: PlannedCase, prior: list[AttemptRecord]) -> CaseStarts:
        # Probes and baselined cases run both arms N times (their rates are the result, semantics §8); so does
        # fixed N.
        return CaseStarts(planned, prior, self.plan.early_rule(planned), self.first_alone, self.one_per_arm)

    async def run(self, prior: dict[str, list[AttemptRecord]]) -> None:
        runnable = [c for c in self.plan.cases if c.unrun_reason is None and (self.mine is None or c.uid in self.mine)]
        await self.dispatch.run(self, runnable, prior)


class AsTheyFinish:
    """The direct path: a case starts what it may as soon as one of its attempts finishes."""

    first_alone = True

    def plan(self, plan: Plan) -> Plan:
        return plan

    async def run(self, executor: Executor, cases: list[PlannedCase], prior: dict[str, list[AttemptRecord]]
                  ) -> None:
        pending = iter(cases)

        async def worker() -> None:
            for planned in pending:  # one shared iterator: each case is taken by exactly one worker
                await self.run_case(executor, executor.case_starts(planned, prior.get(planned.uid, [])))

        # A few workers per session slot keep every slot busy (a case waits on its own attempts) without a
        # task per case: 17,000 pending tasks cost about 100 MB and nothing else (benchmarks/memory.py).
        workers = min(len(cases), 2 * executor.plan.concurrency + 2)
        await _all_or_cancel([asyncio.ensure_future(worker()) for _ in range(workers)])

    @staticmethod
    async def run_case(executor: Executor, case: CaseStarts) -> None:
        """Start what the case allows, wait until one of its attempts finishes, count it, ask again."""
        pending: dict[asyncio.Future[AttemptRecord | None], Start] = {}
        while True:
            if not executor.state.stop_reason:
                for arm, repeat in case.take():
                    pending[asyncio.ensure_future(executor.one_attempt(case.planned, repeat, arm))] = (arm, repeat)
            if not pending:
                return
            try:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                # Stop the sessions of this case too; each records itself as cancelled.
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                raise
            for task in done:
                case.finished(pending.pop(task), task.result())


class Rounds:
    """Batched rounds (`--batch`, runner.execute.batch): every undecided case starts what it may, the round runs
    to its end (session batches, then its judge batch), and what finished decides the next round.

    A batch goes out when every attempt of the wave waits on the collector, so a round's requests go out together.
    The starts are the ones the direct path makes (it never starts an attempt a verdict cannot need either), so the
    same scripted answers give the same states. (One difference: on the direct path an attempt that errors while
    its sibling still runs lets the next repeat start, depending on which finishes first; a round sees both
    results and starts nothing the verdict can no longer use, so a case that ends ERROR may have run fewer errored
    repeats.) A round whose worst-case reservations do not all fit under the spend cap runs in waves of as many as
    fit: every attempt still reserves its worst case before it starts. Tier-2 probes (both arms, every repeat)
    start all of theirs in the first round, first in it. No first session is held alone: that would be one more
    round, one more batch to wait for.
    """

    first_alone = False

    def __init__(self, collector: Collector, width: int, session_price: float = 1.0):
        self.collector = collector
        self.width = width  # the most attempts in flight at once (a batch's request limit)
        self.session_price = session_price  # what a session's tokens cost here per dollar of the direct path

    def plan(self, plan: Plan) -> Plan:
        """Every attempt of a wave admitted at once (it waits on the collector, not on a session slot), and a
        session's worst case (its reservation and its own budget bound) at this dispatch's price."""
        worst = plan.estimate.worst_session_usd * self.session_price
        return plan.model_copy(update={"concurrency": self.width,
                                       "estimate": plan.estimate.model_copy(update={"worst_session_usd": worst})})

    async def run(self, executor: Executor, cases: list[PlannedCase], prior: dict[str, list[AttemptRecord]]
                  ) -> None:
        ordered = [c for c in cases if c.kind == "probe"] + [c for c in cases if c.kind != "probe"]
        starts_of = [executor.case_starts(planned, prior.get(planned.uid, [])) for planned in ordered]
        try:
            while not executor.state.stop_reason:
                starts = [(case, arm, repeat) for case in starts_of for arm, repeat in case.take()]
                if not starts:
                    return
                while starts and not executor.state.stop_reason:
                    size = self.wave_size(executor)
                    wave, starts = starts[:size], starts[size:]
                    await self.wave(executor, wave)
        finally:
            await self.collector.aclose()  # the last round has ended: nothing sends a request any more

    def wave_size(self, executor: Executor) -> int:
        """How many attempts may be in flight at once: as many worst-case reservations as the cap still
        holds (each attempt reserves its worst case before it starts, as on the direct path). At least one:
        when even that one does not fit, its reservation fails and the run stops as the direct path does."""
        ledger = executor.state.ledger
        worst = executor.plan.estimate.worst_session_usd
        if ledger.cap_usd is None or worst <= 0:
            return self.width
        free = ledger.cap_usd - ledger.spent_usd - ledger.reserved_usd
        return max(1, min(self.width, int(free // worst)))

    async def wave(self, executor: Executor, wave: list[tuple[CaseStarts, str, int]]) -> None:
        self.collector.join(len(wave))

        async def one(case: CaseStarts, arm: str, repeat: int) -> None:
            try:
                record = await executor.one_attempt(case.planned, repeat, arm)
            finally:
                self.collector.leave()
            case.finished((arm, repeat), record)

        await asyncio.gather(*(one(case, arm, repeat) for case, arm, repeat in wave))


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
