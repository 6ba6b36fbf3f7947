"""How sure the sequential verdict is (runner.core.sequential): per case and per run, for results.json and reports.

Per case: the attempts used, the win rate with its interval, the decision and the round it came at, and what a
fixed N = 3 / quorum 2 would have said of the same first three attempts. Per run: sessions used against fixed
N = 3 (every repeat) and against the bound, the cases that fixed N = 3 would have given another state, and the
rule's exact error bounds at the edges of its band.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from runner.core.outcomes import AttemptOutcome
from runner.core.quorum import QuorumRule, Tally, wilson_interval
from runner.core.sequential import SequentialRule, characteristics
from runner.core.states import CaseState
from runner.plan.plan import SequentialVerdict
from runner.results.verdicts import tally_of

# What the report compares with: today's default tier (three repeats, quorum two).
FIXED_REPEATS = 3
FIXED_RULE = QuorumRule(FIXED_REPEATS, 2)


class SequentialCase(BaseModel):
    """One case the sequential verdict decided, or left open."""

    attempts: int = Field(description="Attempts used, errors included.")
    trials: int = Field(description="Attempts the host observed: wins + losses.")
    rate: float | None = Field(description="The win rate: the share of trials that met the case's expectation.")
    interval_95: tuple[float, float] | None = Field(description="Wilson 95 % of the rate, as if n had been fixed "
                                                                "(descriptive; the decision's error bounds are the "
                                                                "rule's, not this interval's).")
    llr: float = Field(description="The log likelihood ratio of rate ≥ θ+δ against ≤ θ−δ after these trials.")
    round: int = Field(description="The round at which the case stopped (or has got to, when it did not).")
    fixed_n3: CaseState | None = Field(description="What fixed N = 3, quorum 2, would have said of the first three "
                                                   "attempts; None when fewer than it needs ran.")


class Flip(BaseModel):
    uid: str
    state: CaseState
    fixed_n3: CaseState


class SequentialSummary(BaseModel):
    """The run's sequential verdict: the rule, what it cost, and where fixed N = 3 would have said otherwise."""

    rule: str
    pass_at_p0: float = Field(description="The rule's exact chance of PASS for a case whose rate is θ−δ.")
    fail_at_p1: float = Field(description="The rule's exact chance of FAIL for a case whose rate is θ+δ.")
    undecided_at_theta: float = Field(description="The rule's exact chance of UNDECIDED for a case whose rate is θ.")
    cases: int = Field(description="Cases it decided or left open (with at least one attempt).")
    passed: int
    failed: int
    undecided: int
    broken: int = Field(description="ERROR or JUDGE-ERROR.")
    sessions: int = Field(description="Attempts those cases used.")
    sessions_fixed_n3: int = Field(description="What fixed N = 3 (every repeat) would have used: 3 per case.")
    sessions_bound: int = Field(description="The worst case: max_repeats per case (what the cap reserved).")
    flips: list[Flip] = Field(default=[], description="Cases whose state fixed N = 3 on their first three attempts "
                                                      "would have been another.")

    @property
    def saved(self) -> int:
        return self.sessions_fixed_n3 - self.sessions


def _state(decision: str) -> CaseState | None:
    states: dict[str, CaseState] = {"win": "PASS", "loss": "FAIL", "error": "ERROR", "undecided": "UNDECIDED"}
    return states.get(decision)


def case_figures(rule: SequentialRule, ordered: list[AttemptOutcome], tally: Tally) -> SequentialCase:
    """The figures of one case from its attempts' outcomes in repeat order and its tally (wins, losses, errors)."""
    trials = tally.wins + tally.losses
    fixed = FIXED_RULE.decide(tally_of(ordered[:FIXED_REPEATS]))
    return SequentialCase(
        attempts=len(ordered), trials=trials, rate=round(tally.wins / trials, 4) if trials else None,
        interval_95=_rounded(wilson_interval(tally.wins, trials)), llr=round(rule.llr(tally.wins, tally.losses), 4),
        round=math.ceil(len(ordered) / rule.round_size), fixed_n3=_state(fixed))


def _rounded(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if interval is None else (round(interval[0], 4), round(interval[1], 4))


def summary(verdict: SequentialVerdict, cases: list[tuple[str, CaseState, SequentialCase]]) -> SequentialSummary:
    """The run's figures from each sequential case that ran: (uid, state, figures)."""
    rule = verdict.rule()
    states = [state for _, state, _ in cases]
    return SequentialSummary(
        rule=rule.describe(), pass_at_p0=round(characteristics(rule, rule.p0).passed, 4),
        fail_at_p1=round(characteristics(rule, rule.p1).failed, 4),
        undecided_at_theta=round(characteristics(rule, rule.pass_rate).undecided, 4),
        cases=len(cases), passed=states.count("PASS"), failed=states.count("FAIL"),
        undecided=states.count("UNDECIDED"), broken=sum(1 for s in states if s in ("ERROR", "JUDGE-ERROR")),
        sessions=sum(f.attempts for _, _, f in cases), sessions_fixed_n3=FIXED_REPEATS * len(cases),
        sessions_bound=rule.max_repeats * len(cases),
        flips=[Flip(uid=uid, state=state, fixed_n3=f.fixed_n3) for uid, state, f in cases
               if f.fixed_n3 is not None and f.fixed_n3 != state and state in ("PASS", "FAIL", "UNDECIDED")])
